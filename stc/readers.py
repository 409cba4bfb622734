"""Readers for a user's own corpus: SVMlight/LibSVM, Matrix Market, a folder of text files.

Every reader returns a :class:`sklearn.utils.Bunch` shaped like the ones of
`stc.datasets`:

data : scipy.sparse.csr_matrix (n_documents, n_terms), float64
    Word counts, canonical (sorted indices, no duplicates, no explicit zeros).
target : ndarray or None
    One label per document: integer indices into ``target_names`` for a text
    folder, the file's labels for SVMlight, a labels file's for Matrix Market.
target_names : list of str or None
    Label names of a text folder (its sub-folders).
vocabulary : ndarray of str (dtype object) or None
    ``vocabulary[i]`` is the term counted in column i.
filenames : ndarray of str or None
    The document files of a text folder.
format : {"text", "svmlight", "matrix-market"}
text_options : dict or None
    For a text folder, the tokenisation settings (keyword arguments of
    `read_text_folder`), so that new text can be read into the same terms.

`load_corpus` recognises which of the three a path is, and, given a fitted
model that remembers its vocabulary, reads new data into the model's terms.
"""
import bz2
import gzip
import io
import numbers
import os
import re

import numpy as np
import scipy.io
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.base import clone
from sklearn.utils import Bunch

from stc._utils.text import TOKEN_PATTERN, counted
from stc.datasets import stopwords as builtin_stopwords
from stc.datasets._newsgroups import _as_counts, _read_vocabulary

__all__ = [
    "FORMATS", "TOKEN_PATTERN", "UndecodableTextError", "align_to_vocabulary", "detect_format", "iter_batches",
    "iter_matrix_market_batches", "iter_svmlight_batches", "labels_of", "load_corpus", "read_labels", "read_matrix_market", "read_svmlight", "read_text_folder",
    "read_vocabulary", "resolve_stop_words",
]

FORMATS = ("text", "svmlight", "matrix-market")


# The file, next to a data file, that `load_corpus` reads as its vocabulary when
# none is given (the layout of `stc.datasets.load_20newsgroups`).
DEFAULT_VOCABULARY_FILE = "vocab.txt"

# First line of a data line in SVMlight/LibSVM: "label [qid:q] index:value ... [# comment]".
_SVMLIGHT_LINE = re.compile(
    r"^\s*[-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?(?:,[-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?)*"
    r"(?:\s+qid:\S+)?(?:\s+[0-9]+:\S+)*\s*(?:#.*)?$")


def _corpus(data, *, format, target=None, target_names=None, vocabulary=None, filenames=None,
            text_options=None):
    return Bunch(data=data, target=target, target_names=target_names, vocabulary=vocabulary,
                 filenames=filenames, format=format, text_options=text_options)


def labels_of(corpus):
    """The labels to train a classifier on: the names for a text folder, else ``target``."""
    if corpus.target is None:
        return None
    if corpus.target_names is not None:
        return np.asarray(corpus.target_names)[corpus.target]
    return corpus.target


# ---------------------------------------------------------------------------
# Small files: vocabulary, labels, stop words
# ---------------------------------------------------------------------------

def read_vocabulary(path):
    """Terms from a file with one term a line (line i, from 0, names column i)."""
    terms = _read_vocabulary(os.fspath(path))
    _check_unique_terms(terms, f"vocabulary file {os.fspath(path)}")
    return terms


def _check_unique_terms(terms, where):
    unique, counts = np.unique(np.asarray(terms, dtype=str), return_counts=True)
    if unique.size != len(terms):
        raise ValueError(f"{where} lists the term {str(unique[counts > 1][0])!r} more than once")


def _as_vocabulary(vocabulary, where="vocabulary"):
    """A vocabulary given as a path or a sequence of terms, as an object array of str."""
    if vocabulary is None:
        return None
    if isinstance(vocabulary, (str, os.PathLike)):
        return read_vocabulary(vocabulary)
    try:
        terms = np.asarray(list(vocabulary), dtype=object)
    except TypeError:  # not iterable
        terms = None
    if terms is None or terms.ndim != 1 or not all(isinstance(t, str) for t in terms):
        raise TypeError(f"{where} must be a file path or a sequence of str")
    _check_unique_terms(terms, where)
    return terms


def read_labels(path):
    """One label a line; integer labels come back as int64, any others as str."""
    path = os.fspath(path)
    with open(path, encoding="utf-8") as handle:
        labels = [line.strip() for line in handle]
    while labels and not labels[-1]:
        labels.pop()
    if "" in labels:
        raise ValueError(f"labels file {path}, line {labels.index('') + 1}: empty label")
    if not labels:
        raise ValueError(f"labels file {path} is empty")
    try:
        return np.array([int(label) for label in labels], dtype=np.int64)
    except ValueError:
        return np.array(labels)


def resolve_stop_words(stop_words):
    """The stop-word list meant by ``stop_words``, sorted, or None.

    ``"builtin"``: the package's English list (`stc.datasets.stopwords`);
    ``None`` or ``"none"``: no stop words; any other string or path: a file
    with one word a line; a sequence of str: those words.
    """
    if stop_words is None or (isinstance(stop_words, str) and stop_words == "none"):
        return None
    if isinstance(stop_words, str) and stop_words == "builtin":
        return sorted(builtin_stopwords())
    if isinstance(stop_words, (str, os.PathLike)):
        path = os.fspath(stop_words)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"stop-word file {path} not found (use 'builtin' for the "
                                    "package's list or 'none')")
        with open(path, encoding="utf-8") as handle:
            return sorted({line.strip() for line in handle if line.strip()})
    words = list(stop_words)
    if not all(isinstance(w, str) for w in words):
        raise TypeError("stop_words must be 'builtin', 'none', a file path or a sequence of str")
    return sorted(set(words))


# ---------------------------------------------------------------------------
# Recognising a path
# ---------------------------------------------------------------------------

def _open_binary(path):
    """Open ``path`` for reading bytes, decompressing gzip or bzip2 by their magic bytes."""
    with open(path, "rb") as handle:
        magic = handle.read(3)
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(path, "rb")
    if magic == b"BZh":
        return bz2.open(path, "rb")
    return open(path, "rb")


def _first_lines(path, n=5):
    """Up to ``n`` non-blank lines, not counting SVMlight comment lines, as text."""
    lines = []
    try:
        with _open_binary(path) as handle:
            for raw in handle:
                line = raw.decode("utf-8", errors="replace").strip()
                if line.startswith("%%MatrixMarket"):
                    return [line]
                if line and not line.startswith("#"):
                    lines.append(line)
                    if len(lines) == n:
                        break
    except (OSError, EOFError) as exc:  # e.g. a damaged gzip stream
        raise ValueError(f"could not read {path}: {exc}") from None
    return lines


def detect_format(path):
    """``"text"`` for a directory, else ``"matrix-market"`` or ``"svmlight"`` by the content.

    A Matrix Market file starts with ``%%MatrixMarket``; an SVMlight/LibSVM
    file has lines ``label [qid:q] index:value ...``. Either may be gzip- or
    bzip2-compressed. Anything else is refused with a ValueError.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        return "text"
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found")
    lines = _first_lines(path)
    if lines and lines[0].startswith("%%MatrixMarket"):
        return "matrix-market"
    if lines and all(_SVMLIGHT_LINE.match(line) for line in lines):
        return "svmlight"
    if not lines:
        raise ValueError(f"{path} is empty")
    raise ValueError(f"{path} is neither a Matrix Market file (first line %%MatrixMarket) nor "
                     "SVMlight/LibSVM (lines 'label index:value ...'); a folder of text files "
                     "must be given as the folder")


# ---------------------------------------------------------------------------
# Readers
# ---------------------------------------------------------------------------

def _check_width(X, vocabulary, path):
    if vocabulary is not None and X.shape[1] != vocabulary.size:
        hint = ""
        if X.shape[0] == vocabulary.size:
            hint = " (the matrix looks transposed: rows must be documents, columns terms)"
        raise ValueError(f"{path} has {counted(X.shape[1], 'term column')} but its vocabulary "
                         f"lists {counted(vocabulary.size, 'term')}{hint}")


def _check_zero_based(zero_based):
    """Refuse anything but True or False (scikit-learn's "auto" guesses per batch read)."""
    if not isinstance(zero_based, (bool, np.bool_)):
        raise TypeError(f"zero_based must be True or False (whether the first term has index "
                        f"0), got {zero_based!r}")


def read_svmlight(path, vocabulary=None, *, zero_based=True):
    """Read an SVMlight/LibSVM file of word counts (``label index:count ...`` a document).

    Parameters
    ----------
    path : str or os.PathLike
        The file, optionally gzip- or bzip2-compressed.
    vocabulary : path or sequence of str, optional
        Term of each column (a file: one term a line). Without it the matrix
        has as many columns as the largest index used.
    zero_based : bool, default=True
        Whether the first term has index 0 (True, as `stc.datasets` and
        scikit-learn write them) or 1 (LibSVM's convention).
    """
    path = os.fspath(path)
    _check_zero_based(zero_based)
    vocabulary = _as_vocabulary(vocabulary)
    n_features = None if vocabulary is None else vocabulary.size
    try:
        with _open_binary(path) as handle:
            X, y = load_svmlight_file(handle, n_features=n_features, zero_based=zero_based)
    except ValueError as exc:
        hint = ""
        if vocabulary is not None and "n_features" in str(exc):
            hint = (f" (a term index is beyond the {vocabulary.size} terms of the vocabulary"
                    f"{'' if zero_based else '; indices are read as one-based'})")
        raise ValueError(f"could not read SVMlight file {path}{hint}: {exc}") from None
    X = _as_counts(X)
    target = y.astype(np.int64) if np.all(y == np.round(y)) else y
    return _corpus(X, format="svmlight", target=target, vocabulary=vocabulary)


def read_matrix_market(path, vocabulary=None, *, labels=None):
    """Read a Matrix Market file of word counts (rows documents, columns terms).

    ``vocabulary`` names the columns (a file path or a sequence of str);
    ``labels`` gives one label per document (a file path or a sequence).
    """
    path = os.fspath(path)
    vocabulary = _as_vocabulary(vocabulary)
    try:
        # checked first: scipy aborts the process on some files without the banner
        with _open_binary(path) as handle:
            _, field, _ = _matrix_market_banner(handle, path)
    except (OSError, EOFError) as exc:
        raise ValueError(f"could not read Matrix Market file {path}: {exc}") from None
    _check_field(field, path)
    try:
        with _open_binary(path) as handle:
            X = scipy.io.mmread(handle)
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"could not read Matrix Market file {path}: {exc}") from None
    X = _as_counts(sp.csr_matrix(X))
    _check_width(X, vocabulary, path)
    target = None
    if labels is not None:
        target = (read_labels(labels) if isinstance(labels, (str, os.PathLike))
                  else np.asarray(labels))
        if target.shape != (X.shape[0],):
            raise ValueError(f"{path} holds {counted(X.shape[0], 'document')} but "
                             f"{counted(target.size, 'label')} were given")
    return _corpus(X, format="matrix-market", target=target, vocabulary=vocabulary)


# ---------------------------------------------------------------------------
# Reading in chunks (online learning from a file larger than memory)
# ---------------------------------------------------------------------------

class _BatchReader:
    """Re-iterable: every ``iter()`` opens the file again and yields its CSR batches."""

    def __init__(self, read_batches, description):
        self._read_batches, self._description = read_batches, description

    def __iter__(self):
        return self._read_batches()

    def __repr__(self):
        return f"<batches of {self._description}>"


def _check_batch_size(batch_size):
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)):
        raise TypeError(f"batch_size must be an int, got {type(batch_size).__name__}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")


def _svmlight_data_lines(path):
    """The non-blank, non-comment lines of an SVMlight file, as bytes."""
    with _open_binary(path) as handle:
        for line in handle:
            stripped = line.strip()
            if stripped and not stripped.startswith(b"#"):
                yield line if line.endswith(b"\n") else line + b"\n"


def _svmlight_width(path, zero_based):
    """Columns an SVMlight file needs: one more than its largest term index (zero-based)."""
    largest = -1
    for line in _svmlight_data_lines(path):
        for token in line.split(b"#", 1)[0].split()[1:]:
            if b":" in token and not token.startswith(b"qid:"):
                largest = max(largest, int(token.split(b":", 1)[0]))
    return largest + 1 if zero_based else max(largest, 0)


def iter_svmlight_batches(path, batch_size=1000, vocabulary=None, *, n_features=None,
                          zero_based=True, labels=False):
    """Read an SVMlight/LibSVM file of word counts ``batch_size`` documents at a time.

    Returns a re-iterable object: each iteration reads the file from the
    start and yields CSR count matrices of at most ``batch_size`` rows, the
    same rows `read_svmlight` reads, with the same columns. Only one batch is
    in memory at a time, so ``STC(learning_method="online").fit_stream``
    can learn from a file larger than memory. The width comes from
    ``vocabulary`` (a path or a sequence of terms) or ``n_features``; with
    neither, one extra pass over the file finds the largest term index.

    With ``labels=True`` each batch is a pair ``(X_batch, y_batch)``, the
    batch's labels as `read_svmlight` reads them (int64 when a batch's labels
    are all whole numbers, else float64), as
    ``MedSTC(learning_method="online").fit_stream`` takes them.
    """
    path = os.fspath(path)
    _check_batch_size(batch_size)
    _check_zero_based(zero_based)
    if not isinstance(labels, (bool, np.bool_)):
        raise TypeError(f"labels must be True or False for an SVMlight file (its labels are in "
                        f"the file), got {type(labels).__name__}")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} not found")
    vocabulary = _as_vocabulary(vocabulary)
    if vocabulary is not None:
        if n_features is not None and n_features != vocabulary.size:
            raise ValueError(f"n_features={n_features} but the vocabulary lists "
                             f"{counted(vocabulary.size, 'term')}")
        n_features = vocabulary.size
    if n_features is None:
        n_features = _svmlight_width(path, zero_based)

    def parse(lines):
        try:
            X, y = load_svmlight_file(io.BytesIO(b"".join(lines)), n_features=n_features,
                                      zero_based=zero_based)
        except ValueError as exc:
            raise ValueError(f"could not read SVMlight file {path}: {exc}") from None
        if not labels:
            return _as_counts(X)
        return _as_counts(X), (y.astype(np.int64) if np.all(y == np.round(y)) else y)

    def read_batches():
        lines = []
        for line in _svmlight_data_lines(path):
            lines.append(line)
            if len(lines) == batch_size:
                yield parse(lines)
                lines = []
        if lines:
            yield parse(lines)

    return _BatchReader(read_batches, f"{batch_size} {'labelled ' if labels else ''}documents "
                                      f"of {path}")


def _matrix_market_banner(handle, path):
    """(layout, field, symmetry) of a Matrix Market matrix file's first line, in lower case."""
    banner = handle.readline(1024).decode("ascii", errors="replace").split()
    if len(banner) < 5 or banner[0] != "%%MatrixMarket" or banner[1].lower() != "matrix":
        raise ValueError(f"{path} is not a Matrix Market matrix file (its first line is not "
                         "'%%MatrixMarket matrix <layout> <field> <symmetry>')")
    return tuple(word.lower() for word in banner[2:5])


def _check_field(field, path):
    if field not in ("real", "integer", "pattern"):
        raise ValueError(f"{path} holds {field} values; word counts must be real or integer")


def _matrix_market_header(handle, path):
    """(rows, columns, entries, field) of a coordinate Matrix Market file; reads to the data."""
    layout, field, symmetry = _matrix_market_banner(handle, path)
    if layout != "coordinate" or symmetry != "general":
        raise ValueError(f"{path} is a {layout} {symmetry} Matrix Market file; reading in "
                         "batches needs the coordinate general layout (sparse, rows stored "
                         "in order): use read_matrix_market")
    _check_field(field, path)
    for line in handle:
        if line.strip() and not line.startswith(b"%"):
            n_rows, n_columns, n_entries = (int(word) for word in line.split())
            return n_rows, n_columns, n_entries, field
    raise ValueError(f"{path} has no size line")


def iter_matrix_market_batches(path, batch_size=1000, vocabulary=None, *, labels=None):
    """Read a Matrix Market file of word counts ``batch_size`` documents (rows) at a time.

    Returns a re-iterable object like `iter_svmlight_batches`: the batches
    are the rows `read_matrix_market` reads, in order, with all the file's
    columns (empty documents included). The file must be in the coordinate
    layout with its entries in row order, as ``scipy.io.mmwrite`` writes a
    CSR matrix; entries out of row order are refused.

    ``labels`` (a labels file, one label a line as `read_labels` reads it,
    or a sequence), one per row: each batch is then a pair
    ``(X_batch, y_batch)``. The labels are held in memory (one value per
    document), the counts one batch at a time.
    """
    path = os.fspath(path)
    _check_batch_size(batch_size)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} not found")
    vocabulary = _as_vocabulary(vocabulary)
    with _open_binary(path) as handle:
        n_rows, n_columns, _, _ = _matrix_market_header(handle, path)
    if vocabulary is not None and vocabulary.size != n_columns:
        raise ValueError(f"{path} has {counted(n_columns, 'term column')} but its vocabulary "
                         f"lists {counted(vocabulary.size, 'term')}")
    target = _matrix_market_labels(labels, path, n_rows)

    def batch(first_row, rows, columns, values):
        n = min(batch_size, n_rows - first_row)
        X = sp.csr_matrix((values, (np.asarray(rows, dtype=np.int64) - first_row, columns)),
                          shape=(n, n_columns))
        if target is None:
            return _as_counts(X)
        return _as_counts(X), target[first_row:first_row + n]

    def read_batches():
        with _open_binary(path) as handle:
            _, _, n_entries, field = _matrix_market_header(handle, path)
            first_row, previous_row = 0, 0
            rows, columns, values = [], [], []
            seen = 0
            for line in handle:
                words = line.split()
                if not words or line.startswith(b"%"):
                    continue
                row, column = int(words[0]) - 1, int(words[1]) - 1
                if row < previous_row:
                    raise ValueError(f"{path}: entry {seen + 1} is in row {row + 1} after row "
                                     f"{previous_row + 1}; reading in batches needs the "
                                     "entries in row order")
                if not (0 <= row < n_rows and 0 <= column < n_columns):
                    raise ValueError(f"{path}: entry {seen + 1} ({row + 1}, {column + 1}) lies "
                                     f"outside the {n_rows} x {n_columns} matrix")
                previous_row = row
                while row >= first_row + batch_size:
                    yield batch(first_row, rows, columns, values)
                    first_row += batch_size
                    rows, columns, values = [], [], []
                rows.append(row)
                columns.append(column)
                values.append(1.0 if field == "pattern" else float(words[2]))
                seen += 1
            if seen != n_entries:
                raise ValueError(f"{path} announces {n_entries} entries but holds {seen}")
            while first_row < n_rows:
                yield batch(first_row, rows, columns, values)
                first_row += batch_size
                rows, columns, values = [], [], []

    return _BatchReader(read_batches, f"{batch_size} documents of {path}")


def _matrix_market_labels(labels, path, n_rows):
    """The labels of a Matrix Market file's rows as an array, or None."""
    if labels is None or (isinstance(labels, (bool, np.bool_)) and not labels):
        return None
    if isinstance(labels, (bool, np.bool_)):
        raise ValueError(f"labels=True, but the Matrix Market file {path} holds no labels: "
                         "give labels as a labels file (one label a line) or a sequence")
    if isinstance(labels, (str, os.PathLike)):
        target = read_labels(labels)
    elif isinstance(labels, (np.ndarray, list, tuple)):
        target = np.asarray(labels)
    else:
        raise TypeError(f"labels must be a labels file path or a sequence of labels, got "
                        f"{type(labels).__name__}")
    if target.shape != (n_rows,):
        raise ValueError(f"{path} holds {counted(n_rows, 'document')} but labels has shape "
                         f"{target.shape} (one label per document needed)")
    return target


def iter_batches(path, batch_size=1000, *, format="auto", vocabulary=None, zero_based=True,
                 n_features=None, labels=False):
    """`iter_svmlight_batches` or `iter_matrix_market_batches`, by the file's content.

    ``labels``: False (default) yields CSR batches; otherwise each batch is a
    pair ``(X_batch, y_batch)`` for ``MedSTC(learning_method="online")
    .fit_stream``. For an SVMlight file give ``labels=True`` (its labels are
    in the file); a Matrix Market file holds none, so give a labels file
    (one label a line) or a sequence of one label per document.
    ``n_features``: the width of an SVMlight file's batches (saves the pass
    that finds the largest term index); a Matrix Market file's is in its
    header.
    """
    path = os.fspath(path)
    if format == "auto":
        format = detect_format(path)
    if format == "svmlight":
        if labels is None:
            labels = False
        if not isinstance(labels, (bool, np.bool_)):
            raise ValueError(f"an SVMlight file carries its own labels: give labels=True, not "
                             f"a {type(labels).__name__}")
        return iter_svmlight_batches(path, batch_size, vocabulary, n_features=n_features,
                                     zero_based=zero_based, labels=labels)
    if format == "matrix-market":
        reader = iter_matrix_market_batches(path, batch_size, vocabulary, labels=labels)
        with _open_binary(path) as handle:
            n_columns = _matrix_market_header(handle, path)[1]
        if n_features is not None and n_features != n_columns:
            raise ValueError(f"n_features={n_features} but {path} has {n_columns} columns")
        return reader
    raise ValueError(f"format must be 'auto', 'svmlight' or 'matrix-market' for reading in "
                     f"batches, got {format!r}")


def _is_hidden(name):
    return name.startswith(".")


def _list_text_folder(path):
    """(files, label index per file or None, label names or None) in the load_files layout."""
    entries = sorted(e for e in os.listdir(path) if not _is_hidden(e))
    folders = [e for e in entries if os.path.isdir(os.path.join(path, e))]
    files = [e for e in entries if not os.path.isdir(os.path.join(path, e))]
    if folders and files:
        raise ValueError(f"text folder {path} mixes files ({files[0]}) with label folders "
                         f"({folders[0]}): put every document in a label folder, or all of "
                         "them directly in the folder")
    if not folders:
        if not files:
            raise ValueError(f"text folder {path} holds no files")
        return [os.path.join(path, f) for f in files], None, None
    filenames, target = [], []
    for index, label in enumerate(folders):
        folder = os.path.join(path, label)
        for name in sorted(e for e in os.listdir(folder) if not _is_hidden(e)):
            full = os.path.join(folder, name)
            if os.path.isdir(full):
                raise ValueError(f"text folder {path}: {full} is a folder; documents must be "
                                 "files directly inside a label folder")
            filenames.append(full)
            target.append(index)
    if not filenames:
        raise ValueError(f"text folder {path}: its label folders hold no files")
    return filenames, np.asarray(target, dtype=np.int64), folders


class UndecodableTextError(ValueError):
    """A text file that is not valid in the ``encoding`` (first bad byte at ``byte``).

    Its message says how to read the file anyway, in the Python spelling
    (``encoding=``, ``decode_error=``); `advice` words it for another interface.
    """

    def __init__(self, filename, encoding, byte):
        super().__init__(filename, encoding, byte)
        self.filename, self.encoding, self.byte = filename, encoding, byte

    def advice(self, encoding_option="encoding=...", replace_option="decode_error='replace'"):
        return (f"{self.filename} is not valid {self.encoding} text (byte {self.byte}): give "
                f"its encoding ({encoding_option}), or {replace_option} to replace bad bytes")

    def __str__(self):
        return self.advice()


def _read_text(filename, encoding, decode_error):
    with open(filename, "rb") as handle:
        raw = handle.read()
    try:
        return raw.decode(encoding, errors=decode_error)
    except UnicodeDecodeError as exc:
        raise UndecodableTextError(filename, encoding, exc.start) from None
    except LookupError:
        raise ValueError(f"unknown encoding {encoding!r}") from None


def _check_document_frequencies(path, min_df, max_df, n_documents):
    """Say in the folder's terms when min_df and max_df leave no term possible.

    (scikit-learn's CountVectorizer words this as "max_df corresponds to < documents
    than min_df", also when min_df alone exceeds the number of documents.)
    """
    def documents(value):
        return value if isinstance(value, numbers.Integral) else value * n_documents

    at_least, at_most = documents(min_df), documents(max_df)
    if at_least > n_documents:
        raise ValueError(f"text folder {path}: min_df={min_df!r} keeps only terms found in at "
                         f"least {at_least:g} documents, but the folder has {n_documents}")
    if at_most < at_least:
        raise ValueError(f"text folder {path}: max_df={max_df!r} keeps terms found in at most "
                         f"{at_most:g} of its {counted(n_documents, 'document')}, fewer than the "
                         f"{at_least:g} that min_df={min_df!r} asks for: no term can be kept")


def _why_no_term(path, texts, vectorizer, error):
    """Our message for scikit-learn's ``error`` when ``vectorizer`` kept no term of ``texts``.

    Counted again without min_df and max_df (only on this failure): either the text holds
    no term at all, or the limits left none, and then the terms' document counts say how.
    """
    if vectorizer.vocabulary is not None:
        return f"text folder {path}: {error}"
    min_df, max_df = vectorizer.min_df, vectorizer.max_df
    try:
        counts = clone(vectorizer).set_params(min_df=1, max_df=1.0).fit_transform(texts)
    except ValueError:
        return (f"text folder {path}: no term occurs in its {counted(len(texts), 'document')}: "
                "every word is a stop word or does not match token_pattern (check the stop "
                "words and token_pattern)")
    in_documents = np.bincount(counts.indices, minlength=counts.shape[1])
    fewest, most = in_documents.min(), in_documents.max()
    return (f"text folder {path}: min_df={min_df!r} and max_df={max_df!r} keep no term: its "
            f"terms are found in {fewest if fewest == most else f'{fewest} to {most}'} of its "
            f"{counted(len(texts), 'document')}; lower min_df or raise max_df")


def read_text_folder(path, vocabulary=None, *, stop_words="builtin", min_df=1, max_df=1.0,
                     lowercase=True, token_pattern=TOKEN_PATTERN, strip_accents=None,
                     encoding="utf-8", decode_error="strict"):
    """Read a folder of plain-text files, one document a file, and count its words.

    The layout is that of `sklearn.datasets.load_files`: each sub-folder is a
    label and holds its documents (labels and documents in sorted order). A
    folder holding only files gives unlabelled documents. Hidden entries
    (names starting with ".") are skipped. The text is tokenised by
    scikit-learn's `CountVectorizer`.

    Parameters
    ----------
    path : str or os.PathLike
    vocabulary : path or sequence of str, optional
        Count exactly these terms (column i counts ``vocabulary[i]``), as
        when coding new text with a fitted model; ``stop_words``, ``min_df``
        and ``max_df`` then have no effect. Otherwise the vocabulary is
        learned from the text.
    stop_words : "builtin", "none", None, path or sequence of str, default="builtin"
        Words left out: the package's English list, none, a file with one
        word a line, or the given words.
    min_df, max_df : int or float, default=1 and 1.0
        Keep terms found in at least ``min_df`` and at most ``max_df``
        documents (a float in [0, 1] is a share of the documents).
    lowercase, token_pattern, strip_accents
        As in `CountVectorizer`; the default token pattern keeps words of
        two or more characters with inner apostrophes (``"don't"``).
    encoding : str, default="utf-8"
    decode_error : {"strict", "replace", "ignore"}, default="strict"
        What to do with bytes that are not valid in ``encoding``: refuse the
        file (naming it), replace or drop them.
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise NotADirectoryError(f"text folder {path} is not a directory")
    if decode_error not in ("strict", "replace", "ignore"):
        raise ValueError(f"decode_error must be 'strict', 'replace' or 'ignore', got "
                         f"{decode_error!r}")
    vocabulary = _as_vocabulary(vocabulary)
    stop_list = resolve_stop_words(stop_words)
    try:  # before the files are read: a typo here should not wait for them
        re.compile(token_pattern)
    except (re.error, TypeError) as exc:
        raise ValueError(f"token_pattern {token_pattern!r} is not a regular expression: "
                         f"{exc}") from None
    filenames, target, target_names = _list_text_folder(path)
    texts = [_read_text(f, encoding, decode_error) for f in filenames]
    if vocabulary is None:
        _check_document_frequencies(path, min_df, max_df, len(texts))
    vectorizer = CountVectorizer(
        input="content", lowercase=lowercase, token_pattern=token_pattern,
        strip_accents=strip_accents, stop_words=stop_list, min_df=min_df, max_df=max_df,
        vocabulary=None if vocabulary is None else list(vocabulary), dtype=np.float64)
    try:
        X = vectorizer.fit_transform(texts)
    except ValueError as exc:  # no term at all, or none left by min_df and max_df
        raise ValueError(_why_no_term(path, texts, vectorizer, exc)) from None
    if vocabulary is None:
        vocabulary = np.asarray(vectorizer.get_feature_names_out(), dtype=object)
    options = dict(stop_words=stop_list, min_df=min_df, max_df=max_df, lowercase=lowercase,
                   token_pattern=token_pattern, strip_accents=strip_accents, encoding=encoding,
                   decode_error=decode_error)
    return _corpus(_as_counts(X), format="text", target=target, target_names=target_names,
                   vocabulary=vocabulary, filenames=np.asarray(filenames), text_options=options)


# ---------------------------------------------------------------------------
# Any of them, and new data in a fitted model's terms
# ---------------------------------------------------------------------------

def align_to_vocabulary(corpus, vocabulary):
    """``corpus`` with its columns re-ordered to count the terms of ``vocabulary``.

    Terms of the corpus that ``vocabulary`` lacks are dropped; terms of
    ``vocabulary`` the corpus lacks get empty columns. Returns a new Bunch
    and the number of dropped word occurrences.
    """
    target_terms = _as_vocabulary(vocabulary)
    if corpus.vocabulary is None:
        raise ValueError("the corpus has no vocabulary to align by")
    position = {term: i for i, term in enumerate(target_terms)}
    new_column = np.array([position.get(term, -1) for term in corpus.vocabulary], dtype=np.int64)
    X = corpus.data.tocoo()
    kept = new_column[X.col] >= 0
    dropped = float(X.data[~kept].sum())
    aligned = sp.csr_matrix((X.data[kept], (X.row[kept], new_column[X.col[kept]])),
                            shape=(X.shape[0], target_terms.size))
    result = Bunch(**corpus)
    result.data = _as_counts(aligned)
    result.vocabulary = target_terms
    return result, dropped


def load_corpus(path, *, format="auto", vocabulary=None, labels=None, zero_based=True,
                model=None, **text_options):
    """Read ``path`` as whichever corpus it is (see `detect_format`).

    Parameters
    ----------
    path : str or os.PathLike
        A folder of text files (`read_text_folder`), an SVMlight/LibSVM file
        (`read_svmlight`) or a Matrix Market file (`read_matrix_market`).
    format : {"auto", "text", "svmlight", "matrix-market"}, default="auto"
    vocabulary : path or sequence of str, optional
        Terms of the columns of an SVMlight or Matrix Market file. When not
        given, a file ``vocab.txt`` next to the data file is used if there
        is one.
    labels : path or sequence, optional
        Labels of a Matrix Market file's documents.
    zero_based : bool, default=True
        Index of the first term in an SVMlight file.
    model : fitted STC or MedSTC, optional
        Read the data into this model's terms: text with the model's
        vocabulary and tokenisation (``vocabulary_``, ``text_options_``);
        a matrix whose vocabulary is known is re-ordered to the model's
        terms (terms the model never saw are dropped); one without a
        vocabulary must have the model's columns.
    **text_options
        Keyword arguments of `read_text_folder` (ignored for matrices).
    """
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"path must be a file or folder path (str or os.PathLike), got "
                        f"{type(path).__name__}")
    path = os.fspath(path)
    if format == "auto":
        format = detect_format(path)
    elif format not in FORMATS:
        raise ValueError(f"format must be 'auto' or one of {FORMATS}, got {format!r}")
    model_terms = getattr(model, "vocabulary_", None) if model is not None else None
    if format == "text":
        if model is not None:
            if model_terms is None:
                raise ValueError("the model has no vocabulary (it was fitted on a matrix "
                                 "without one), so it cannot read text")
            options = dict(getattr(model, "text_options_", None) or {})
            for key in ("encoding", "decode_error"):  # new files may be encoded differently
                if text_options.get(key) is not None:
                    options[key] = text_options[key]
            return read_text_folder(path, vocabulary=model_terms, **options)
        return read_text_folder(path, **text_options)
    if vocabulary is None:
        beside = os.path.join(os.path.dirname(os.path.abspath(path)), DEFAULT_VOCABULARY_FILE)
        if os.path.isfile(beside):
            vocabulary = beside
    if format == "svmlight":
        if labels is not None:
            raise ValueError("an SVMlight file carries its own labels: do not give labels")
        corpus = read_svmlight(path, vocabulary, zero_based=zero_based)
    else:
        corpus = read_matrix_market(path, vocabulary, labels=labels)
    if model is None:
        return corpus
    n_features = model.n_features_in_
    if model_terms is not None and corpus.vocabulary is not None:
        corpus, _ = align_to_vocabulary(corpus, model_terms)
        return corpus
    if corpus.data.shape[1] > n_features:
        raise ValueError(f"{path} has {counted(corpus.data.shape[1], 'term column')} but the "
                         f"model knows {counted(n_features, 'term')}; give the data's "
                         "vocabulary file to match terms by name")
    if corpus.data.shape[1] < n_features:  # SVMlight: trailing terms never used
        corpus.data = sp.csr_matrix((corpus.data.data, corpus.data.indices, corpus.data.indptr),
                                    shape=(corpus.data.shape[0], n_features))
    corpus.vocabulary = model_terms
    return corpus
