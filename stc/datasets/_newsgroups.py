"""Loaders for the 20 Newsgroups bag-of-words corpus.

Two sources are supported:

* :func:`load_20newsgroups` / :func:`load_20newsgroups_split` read the full
  corpus from a directory laid out like the "bydate" SVMlight release
  (``train.svm.gz``, ``test.svm.gz``, ``vocab.txt``, ``labels.txt`` and,
  optionally, ``stopwords.txt``).
* :func:`load_newsgroups` / :func:`load_newsgroups_split` read a small
  three-group subset of the same corpus that ships inside the package
  (built by ``tools/make_embedded_dataset.py``), so examples and tests
  work without any download.

Both return :class:`sklearn.utils.Bunch` objects with the same fields.
"""
from __future__ import annotations

import os
from importlib import resources

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file
from sklearn.utils import Bunch

__all__ = [
    "load_20newsgroups",
    "load_20newsgroups_split",
    "load_newsgroups",
    "load_newsgroups_split",
    "stopwords",
]

_SUBSETS = ("train", "test", "all")
_SPLITS = ("train", "test")

# Names of the files inside the shipped data directory.
_EMBEDDED_FILE = "newsgroups3.npz"
_STOPWORDS_FILE = "stopwords.txt"


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------

def _check_subset(subset):
    if not isinstance(subset, str) or subset not in _SUBSETS:
        raise ValueError(
            f"subset must be one of {', '.join(map(repr, _SUBSETS))}; got {subset!r}."
        )


def _read_lines(path):
    """Return the non-empty, whitespace-stripped lines of a UTF-8 text file."""
    with open(path, encoding="utf-8") as handle:
        return [line.strip() for line in handle if line.strip()]


def _read_vocabulary(path):
    """Read ``vocab.txt``; line i (from 0) is term id i.

    Blank lines are not skipped (that would shift every later id), except
    at the end of the file; a blank line elsewhere is an error.
    """
    with open(path, encoding="utf-8") as handle:
        terms = [line.strip() for line in handle]
    while terms and not terms[-1]:
        terms.pop()
    if not terms:
        raise ValueError(f"{path} is empty.")
    if "" in terms:
        raise ValueError(f"{path}, line {terms.index('') + 1}: empty term.")
    return np.array(terms, dtype=object)


def _data_file(name):
    """Return a Traversable for a file shipped in ``stc/datasets/data``."""
    return resources.files(__package__).joinpath("data", name)


def _as_counts(matrix):
    """Return `matrix` as a canonical CSR float64 matrix.

    Canonical means sorted column indices, no duplicate entries and no
    explicit zeros, which downstream Cython kernels may rely on.
    """
    matrix = sp.csr_matrix(matrix, dtype=np.float64)
    matrix.sum_duplicates()  # also sorts the indices
    matrix.eliminate_zeros()
    return matrix


def _normalise_stopwords(words):
    """Validate a user-given stop-word collection and return a frozenset."""
    if isinstance(words, (str, bytes)):
        # A bare string would silently be split into single characters.
        raise TypeError(
            "stopwords must be an iterable of words (e.g. a list or set), not a single string."
        )
    try:
        words = frozenset(words)
    except TypeError as exc:
        raise TypeError(
            f"stopwords must be an iterable of str; got {type(words).__name__}."
        ) from exc
    bad = [w for w in words if not isinstance(w, str)]
    if bad:
        raise TypeError(f"stopwords must contain only str; found {bad[0]!r}.")
    return frozenset(w.strip() for w in words)


def stopwords():
    """Return the stop-word list shipped with the package.

    This is the 488-word English list that accompanies the 20 Newsgroups
    bag-of-words release; the paper removes such a list before training.

    Returns
    -------
    frozenset of str
        Lower-case stop words (some contain an apostrophe, e.g. ``"aren't"``).
    """
    text = _data_file(_STOPWORDS_FILE).read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip())


# ---------------------------------------------------------------------------
# Full corpus from a directory
# ---------------------------------------------------------------------------

def _find_svm_file(data_home, split):
    """Return the path of ``<split>.svm.gz`` (or an uncompressed ``<split>.svm``)."""
    for name in (f"{split}.svm.gz", f"{split}.svm"):
        path = os.path.join(data_home, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(
        f"20 Newsgroups file {split}.svm.gz (or {split}.svm) not found in {data_home!r}."
    )


def _require_file(data_home, name):
    path = os.path.join(data_home, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"20 Newsgroups file {name} not found in {data_home!r}.")
    return path


def _read_labels(path):
    """Parse ``labels.txt`` into (sorted label values, group names)."""
    pairs = []
    for line_number, line in enumerate(_read_lines(path), start=1):
        fields = line.split(None, 1)
        try:
            label = int(fields[0])
        except ValueError:
            label = None
        if label is None or len(fields) != 2:
            raise ValueError(
                f"{path}, line {line_number}: expected 'label name', got {line!r}."
            )
        pairs.append((label, fields[1].strip()))
    if not pairs:
        raise ValueError(f"{path} lists no labels.")
    pairs.sort()
    values = np.array([label for label, _ in pairs], dtype=np.int64)
    if np.any(np.diff(values) == 0):
        raise ValueError(f"{path} lists the same label more than once.")
    return values, [name for _, name in pairs]


def _read_split(path, n_features, label_values):
    """Read one SVMlight file; return (CSR counts, 0-based targets)."""
    try:
        X, y = load_svmlight_file(path, n_features=n_features, zero_based=True)
    except ValueError as exc:
        # sklearn's message does not say which file was at fault.
        hint = ""
        if "n_features" in str(exc):
            hint = f" (term ids must be below the {n_features} terms of vocab.txt)"
        raise ValueError(f"could not read {path}{hint}: {exc}") from exc
    if not np.all(y == np.round(y)):
        raise ValueError(f"{path} contains non-integer labels.")
    y = y.astype(np.int64)
    # Map raw label values (e.g. 1..20) to their position in labels.txt.
    target = np.searchsorted(label_values, y)
    target = np.minimum(target, len(label_values) - 1)
    unknown = label_values[target] != y
    if np.any(unknown):
        raise ValueError(
            f"{path} uses label {y[unknown][0]} which is not listed in labels.txt."
        )
    return X, target


def _describe(source, subset, n_docs, n_terms, n_stop, group_names, extra=""):
    return (
        f"20 Newsgroups bag-of-words ({source}), subset={subset!r}.\n\n"
        f"{n_docs} documents x {n_terms} terms; {len(group_names)} groups: "
        f"{', '.join(group_names)}.\n"
        "Standard 'bydate' train/test split. `data` holds word counts "
        "(CSR float64, documents x terms); column i counts `vocabulary[i]`; "
        "`target` indexes `target_names`.\n"
        + (f"{n_stop} stop-word columns were removed.\n" if n_stop else
           "No stop words were removed.\n")
        + extra
    )


def _load_20newsgroups(data_home, splits, remove_stopwords, stop_words):
    """Shared implementation: return {split: (X, target)}, vocab, names, n_stop."""
    data_home = os.fspath(data_home)
    if not os.path.isdir(data_home):
        raise FileNotFoundError(f"20 Newsgroups directory not found: {data_home!r}.")
    if not isinstance(remove_stopwords, (bool, np.bool_)):
        raise TypeError(f"remove_stopwords must be True or False; got {remove_stopwords!r}.")

    # Check every file first so a missing one is reported before slow parsing.
    vocab_path = _require_file(data_home, "vocab.txt")
    labels_path = _require_file(data_home, "labels.txt")
    svm_paths = {split: _find_svm_file(data_home, split) for split in splits}

    vocabulary = _read_vocabulary(vocab_path)
    label_values, group_names = _read_labels(labels_path)

    if remove_stopwords:
        if stop_words is not None:
            stop_words = _normalise_stopwords(stop_words)
        elif os.path.isfile(os.path.join(data_home, _STOPWORDS_FILE)):
            stop_words = frozenset(_read_lines(os.path.join(data_home, _STOPWORDS_FILE)))
        else:
            stop_words = stopwords()
        keep = np.array([term not in stop_words for term in vocabulary], dtype=bool)
    else:
        keep = np.ones(vocabulary.size, dtype=bool)
    # Column selection is by vocabulary only, so any split loaded from the
    # same directory with the same stop words has the same columns.
    columns = np.flatnonzero(keep)

    parts = {}
    for split in splits:
        X, target = _read_split(svm_paths[split], vocabulary.size, label_values)
        if columns.size != vocabulary.size:
            X = X[:, columns]
        parts[split] = (_as_counts(X), target)
    n_stop = int(vocabulary.size - columns.size)
    return parts, vocabulary[columns], group_names, n_stop


def load_20newsgroups(data_home, subset="train", remove_stopwords=True, stopwords=None):
    """Load the full 20 Newsgroups corpus from a directory of SVMlight files.

    Parameters
    ----------
    data_home : str or os.PathLike
        Directory holding ``train.svm.gz`` and ``test.svm.gz`` (SVMlight
        lines ``label id:count ...`` with 0-based term ids; uncompressed
        ``train.svm`` / ``test.svm`` are accepted too), ``vocab.txt`` (one
        term a line, line i is term id i), ``labels.txt`` (``label name``
        lines) and optionally ``stopwords.txt`` (one word a line).
    subset : {"train", "test", "all"}, default="train"
        Which split to return; ``"all"`` is the training documents followed
        by the test documents. To get the two splits separately in one call
        use :func:`load_20newsgroups_split`.
    remove_stopwords : bool, default=True
        Drop the columns of stop words. The vocabulary returned is then the
        reduced one, still aligned with the columns of ``data``.
    stopwords : iterable of str, optional
        Stop words to remove (matched exactly against vocabulary terms).
        When None, ``stopwords.txt`` in `data_home` is used if present,
        otherwise the list shipped with the package
        (:func:`stc.datasets.stopwords`). Ignored when `remove_stopwords`
        is False.

    Returns
    -------
    sklearn.utils.Bunch
        data : scipy.sparse.csr_matrix of shape (n_documents, n_terms)
            Word counts as float64, with sorted indices.
        target : ndarray of shape (n_documents,), dtype int64
            Group index in ``0 .. len(target_names) - 1``.
        target_names : list of str
            Group names from ``labels.txt`` in increasing label order.
        vocabulary : ndarray of shape (n_terms,), dtype object
            ``vocabulary[i]`` is the term counted in column i.
        DESCR : str
            Description of the data.

    Raises
    ------
    FileNotFoundError
        If `data_home` or one of the required files does not exist.
    ValueError
        If `subset` is invalid or a file is malformed (e.g. a term id beyond
        ``vocab.txt`` or a label not listed in ``labels.txt``).

    Examples
    --------
    >>> news = load_20newsgroups("/path/to/20news", subset="train")  # doctest: +SKIP
    >>> news.data.shape  # doctest: +SKIP
    (11269, 60778)
    """
    _check_subset(subset)
    splits = _SPLITS if subset == "all" else (subset,)
    parts, vocabulary, names, n_stop = _load_20newsgroups(
        data_home, splits, remove_stopwords, stopwords
    )
    if subset == "all":
        X = sp.vstack([parts["train"][0], parts["test"][0]], format="csr")
        target = np.concatenate([parts["train"][1], parts["test"][1]])
    else:
        X, target = parts[subset]
    return Bunch(
        data=_as_counts(X),
        target=target,
        target_names=list(names),
        vocabulary=vocabulary.copy(),
        DESCR=_describe(os.fspath(data_home), subset, X.shape[0], X.shape[1], n_stop, names),
    )


def load_20newsgroups_split(data_home, remove_stopwords=True, stopwords=None):
    """Load the training and test splits of the full corpus in one call.

    The vocabulary and labels are read once, so both splits are guaranteed
    to share the same columns and the same ``target_names``.

    Parameters
    ----------
    data_home, remove_stopwords, stopwords
        As in :func:`load_20newsgroups`.

    Returns
    -------
    train, test : sklearn.utils.Bunch
        Same fields as :func:`load_20newsgroups` returns; the ``vocabulary``
        arrays are equal (but distinct objects).
    """
    parts, vocabulary, names, n_stop = _load_20newsgroups(
        data_home, _SPLITS, remove_stopwords, stopwords
    )
    bunches = []
    for split in _SPLITS:
        X, target = parts[split]
        bunches.append(Bunch(
            data=X,
            target=target,
            target_names=list(names),
            vocabulary=vocabulary.copy(),
            DESCR=_describe(os.fspath(data_home), split, X.shape[0], X.shape[1],
                            n_stop, names),
        ))
    return tuple(bunches)


# ---------------------------------------------------------------------------
# Embedded three-group subset
# ---------------------------------------------------------------------------

def _read_embedded():
    """Read the shipped .npz archive into a plain dict of arrays."""
    with _data_file(_EMBEDDED_FILE).open("rb") as handle:
        # allow_pickle=False: the archive holds plain numeric/str arrays only.
        with np.load(handle, allow_pickle=False) as archive:
            return {key: archive[key] for key in archive.files}


def _embedded_split(arrays, split):
    n_docs = arrays[f"{split}_indptr"].size - 1
    X = sp.csr_matrix(
        (
            arrays[f"{split}_data"].astype(np.float64),
            arrays[f"{split}_indices"].astype(np.int32),
            arrays[f"{split}_indptr"].astype(np.int64),
        ),
        shape=(n_docs, arrays["vocabulary"].size),
    )
    return _as_counts(X), arrays[f"{split}_target"].astype(np.int64)


def _embedded_descr(arrays, subset, n_docs):
    names = [str(n) for n in arrays["target_names"]]
    extra = (
        "Embedded subset of the 20 Newsgroups corpus, built by "
        "tools/make_embedded_dataset.py. Vocabulary: terms that are not "
        f"stop words and occur in at least {int(arrays['min_df'])} documents "
        "of the selected groups (training and test documents counted "
        "together). Documents left empty by stop-word removal or this "
        "restriction are kept so that the original split is preserved.\n"
    )
    return _describe("embedded", subset, n_docs, arrays["vocabulary"].size,
                     int(arrays["n_stopwords_removed"]), names, extra)


def _embedded_bunch(arrays, subset, X, target):
    return Bunch(
        data=X,
        target=target,
        target_names=[str(n) for n in arrays["target_names"]],
        vocabulary=arrays["vocabulary"].astype(object),
        DESCR=_embedded_descr(arrays, subset, X.shape[0]),
    )


def load_newsgroups(subset="train"):
    """Load the small three-group 20 Newsgroups corpus shipped with the package.

    The groups are ``comp.graphics``, ``rec.sport.hockey`` and ``sci.space``
    with their original "bydate" train/test split, stop words removed, and
    the vocabulary restricted to terms occurring in at least two documents
    of these groups (train and test counted together).

    Parameters
    ----------
    subset : {"train", "test", "all"}, default="train"
        Which split to return; ``"all"`` is the training documents followed
        by the test documents. All subsets share the same vocabulary.

    Returns
    -------
    sklearn.utils.Bunch
        Same fields as :func:`load_20newsgroups`: ``data`` (CSR float64
        counts, sorted indices), ``target`` (int64 in 0..2), ``target_names``,
        ``vocabulary`` (object array of str aligned with the columns) and
        ``DESCR``.

    Examples
    --------
    >>> from stc.datasets import load_newsgroups
    >>> train = load_newsgroups("train")
    >>> train.target_names
    ['comp.graphics', 'rec.sport.hockey', 'sci.space']
    """
    _check_subset(subset)
    arrays = _read_embedded()
    if subset == "all":
        X_train, y_train = _embedded_split(arrays, "train")
        X_test, y_test = _embedded_split(arrays, "test")
        X = _as_counts(sp.vstack([X_train, X_test], format="csr"))
        target = np.concatenate([y_train, y_test])
    else:
        X, target = _embedded_split(arrays, subset)
    return _embedded_bunch(arrays, subset, X, target)


def load_newsgroups_split():
    """Load both splits of the embedded three-group corpus.

    Returns
    -------
    train, test : sklearn.utils.Bunch
        As returned by :func:`load_newsgroups` for ``"train"`` and
        ``"test"``, read from the archive once.
    """
    arrays = _read_embedded()
    return tuple(
        _embedded_bunch(arrays, split, *_embedded_split(arrays, split))
        for split in _SPLITS
    )
