"""Look inside a fitted model: top words, word codes, class profiles, coherence.

Every function takes a fitted `STC` or `MedSTC` (anything with a
``components_`` array of topics on the simplex and, where codes are needed,
``transform`` / ``word_codes``) and plain arrays, so the results can be
printed, plotted (`stc.plotting`) or written to a report (`stc.report`).

Topic coherence
---------------
`coherence` scores each topic by how often its top words occur together in
the documents of a reference corpus ``X``. Two words co-occur when both
appear in the same document (whole-document co-occurrence, no sliding
window). With ``N`` documents, ``D(w)`` the number of documents containing
word ``w`` and ``D(w, v)`` the number containing both, for the topic's top
words ``w_1, ..., w_T`` in order of decreasing weight:

* ``"u_mass"`` (Mimno et al., 2011): the mean over the pairs ``i > j`` of
  ``log((D(w_i, w_j) / N + eps) / (D(w_j) / N))``, conditioning each word on
  every higher-ranked one. It is at most ``log(1 + eps N / D(w_j))`` (about
  0), and very negative for words that rarely share a document.
* ``"npmi"`` (normalised pointwise mutual information, Bouma 2009): the mean
  over the pairs ``i != j`` of
  ``log((P(w_i, w_j) + eps) / (P(w_i) P(w_j))) / -log(P(w_i, w_j) + eps)``
  with ``P(w) = D(w) / N``; it lies in about [-1, 1], 0 for words that occur
  independently and 1 for words that always occur together.

``eps = 1e-12`` keeps the logarithm of a pair that never co-occurs finite.
These are the formulas of gensim's ``CoherenceModel`` (``"u_mass"`` on a
bag-of-words corpus; ``"c_npmi"`` with a window at least as long as the
longest document), so the values can be compared with it directly. Every
top word must occur in ``X`` at least once.
"""
from numbers import Integral

import numpy as np

from stc._utils.labels import check_labels

__all__ = [
    "average_document_codes",
    "average_word_codes",
    "coherence",
    "code_sparsity",
    "pyldavis_data",
    "pyldavis_prepare",
    "representative_words",
    "top_term_indices",
    "top_words",
]

COHERENCE_EPSILON = 1e-12
COHERENCE_MEASURES = ("u_mass", "npmi")


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def _topics(model):
    topics = getattr(model, "components_", None)
    if topics is None:
        from sklearn.exceptions import NotFittedError  # here: `stc topics` needs no sklearn

        raise NotFittedError(f"{type(model).__name__} is not fitted: call fit before "
                             f"inspecting it")
    return topics


def _positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return int(value)


def _vocabulary(model, vocabulary):
    """The term names: ``vocabulary``, else the model's ``vocabulary_``, else the column indices."""
    n_features = _topics(model).shape[1]
    if vocabulary is None:
        vocabulary = getattr(model, "vocabulary_", None)
    if vocabulary is None:
        return np.array([str(i) for i in range(n_features)], dtype=object)
    vocabulary = np.asarray(vocabulary, dtype=object)
    if vocabulary.shape != (n_features,):
        raise ValueError(f"vocabulary must have one term per column of the topics "
                         f"({n_features}), got shape {vocabulary.shape}")
    return vocabulary


def _count_matrix(model, X):
    """``X`` as a CSR matrix with as many columns as the model has terms."""
    import scipy.sparse as sp  # here: `stc topics` reads topics without scipy

    n_features = _topics(model).shape[1]
    X = sp.csr_matrix(X, dtype=np.float64, copy=True)  # canonicalised below, in place
    if X.ndim != 2 or X.shape[1] != n_features:
        raise ValueError(f"X must have {n_features} columns (the model's terms), "
                         f"got shape {X.shape}")
    if X.data.size and (not np.all(np.isfinite(X.data)) or X.data.min() < 0):
        raise ValueError("X must hold finite non-negative counts")
    X.sum_duplicates()  # also sorts the indices, the entry order of word_codes
    X.eliminate_zeros()
    return X


def _term_indices(words, vocabulary, name="words"):
    """Column indices of ``words``, given as term strings or as integer indices."""
    words = list(words)
    if not words:
        raise ValueError(f"{name} must name at least one term")
    index = {term: i for i, term in enumerate(vocabulary)}
    columns = []
    for word in words:
        if isinstance(word, (Integral, np.integer)) and not isinstance(word, bool):
            if not 0 <= word < len(vocabulary):
                raise ValueError(f"{name}: term index {word} is out of range "
                                 f"[0, {len(vocabulary)})")
            columns.append(int(word))
        elif word in index:
            columns.append(index[word])
        else:
            raise ValueError(f"{name}: {word!r} is not in the vocabulary")
    return np.asarray(columns, dtype=np.intp)


# ---------------------------------------------------------------------------
# Topics
# ---------------------------------------------------------------------------

def top_term_indices(model, n=10):
    """Column indices of each topic's ``n`` heaviest terms, shape (n_topics, n).

    Ties keep column order (a stable sort), as in ``STC.top_words``.
    """
    beta = _topics(model)
    n = min(_positive_int(n, "n"), beta.shape[1])
    return np.argsort(-beta, axis=1, kind="stable")[:, :n]


def top_words(model, vocabulary=None, n=10):
    """Each topic's ``n`` heaviest terms with their weights.

    Parameters
    ----------
    model : fitted STC or MedSTC
    vocabulary : sequence of str, optional
        Term of every column of ``X``. Defaults to the model's
        ``vocabulary_`` if it has one, else the column indices as strings.
    n : int, default=10

    Returns
    -------
    list of list of (str, float)
        For every topic, ``(term, beta_kn)`` pairs in order of decreasing
        weight; a topic's weights over all terms sum to 1.
    """
    beta = _topics(model)
    vocabulary = _vocabulary(model, vocabulary)
    order = top_term_indices(model, n)
    return [[(vocabulary[j], float(beta[k, j])) for j in row] for k, row in enumerate(order)]


# ---------------------------------------------------------------------------
# Codes
# ---------------------------------------------------------------------------

def average_word_codes(model, X, words, vocabulary=None):
    """Average word code of each chosen word over the documents it occurs in.

    For word n this is ``mean over d in D_n of s_dn``, where ``D_n`` are the
    documents of ``X`` that contain n: which topics the word activates and
    how strongly (the paper's Fig. 3). Codes are computed with the fitted
    topics (``model.word_codes(X)``).

    Parameters
    ----------
    model : fitted STC or MedSTC
    X : array-like or sparse matrix of shape (n_docs, n_terms)
        Word counts.
    words : sequence of str or int
        Terms (looked up in ``vocabulary``) or column indices.
    vocabulary : sequence of str, optional
        As in `top_words`.

    Returns
    -------
    ndarray of shape (len(words), n_topics)
        A row of zeros for a word that occurs in no document of ``X``.
    """
    X = _count_matrix(model, X)
    columns = _term_indices(words, _vocabulary(model, vocabulary))
    codes = model.word_codes(X)  # one row per stored entry of X, CSR order
    wanted = np.full(X.shape[1], -1, dtype=np.intp)
    wanted[columns] = np.arange(columns.size)
    entry_word = wanted[X.indices]
    selected = np.flatnonzero(entry_word >= 0)
    n_topics = _topics(model).shape[0]
    sums = np.zeros((columns.size, n_topics))
    np.add.at(sums, entry_word[selected], codes[selected].toarray())
    counts = np.bincount(entry_word[selected], minlength=columns.size)
    # A word listed twice gets the same row twice.
    sums, counts = sums[wanted[columns]], counts[wanted[columns]]
    return sums / np.maximum(counts, 1)[:, None]


def representative_words(X, y, vocabulary=None, n_per_class=3):
    """The terms occurring in most documents of each class, no term chosen twice.

    The paper's choice of words for Fig. 3: for each class in turn (in
    sorted order), the ``n_per_class`` terms with the largest number of
    documents of that class containing them, skipping terms already chosen
    for an earlier class.

    Returns
    -------
    list of str (or of int column indices if ``vocabulary`` is None)
    """
    import scipy.sparse as sp  # here: `stc topics` reads topics without scipy

    X = sp.csr_matrix(X, dtype=np.float64)
    y = np.asarray(y)
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have one label per document ({X.shape[0]}), got shape {y.shape}")
    check_labels(y)
    n_per_class = _positive_int(n_per_class, "n_per_class")
    present = (X > 0).astype(np.float64).tocsr()
    chosen = []
    for label in np.unique(y):
        doc_freq = np.asarray(present[y == label].sum(axis=0)).ravel()
        doc_freq[chosen] = -1
        order = np.argsort(-doc_freq, kind="stable")
        chosen.extend(int(j) for j in order[:n_per_class] if doc_freq[j] > 0)
    if vocabulary is None:
        return chosen
    vocabulary = np.asarray(vocabulary, dtype=object)
    if vocabulary.shape != (X.shape[1],):
        raise ValueError(f"vocabulary must have {X.shape[1]} terms, got shape {vocabulary.shape}")
    return [vocabulary[j] for j in chosen]


def average_document_codes(model, X, y):
    """Mean document code theta of each class.

    Returns
    -------
    classes : ndarray of shape (n_classes,)
        The sorted distinct labels of ``y``.
    means : ndarray of shape (n_classes, n_topics)
        Row c is the average of ``model.transform(X)`` over the documents
        labelled ``classes[c]``.
    """
    X = _count_matrix(model, X)
    y = np.asarray(y)
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have one label per document ({X.shape[0]}), got shape {y.shape}")
    check_labels(y)
    theta = model.transform(X)
    classes, label_index = np.unique(y, return_inverse=True)
    sums = np.zeros((classes.size, theta.shape[1]))
    np.add.at(sums, label_index, theta)
    return classes, sums / np.bincount(label_index)[:, None]


def code_sparsity(model, X):
    """How sparse the codes of ``X`` are.

    Returns
    -------
    dict with
        ``word_zero_share``: share of zero entries in the word codes of the
        observed words; ``document_zero_share``: the same for the document
        codes; ``word_active_topics`` and ``document_active_topics``: the
        number of non-zero topics of every word code (one per stored entry
        of ``X``) and of every document code, as integer arrays.
    """
    X = _count_matrix(model, X)
    n_topics = _topics(model).shape[0]
    word_codes = model.word_codes(X)
    theta = model.transform(X)
    word_active = np.diff(word_codes.indptr)
    document_active = np.count_nonzero(theta, axis=1)
    return {
        "word_zero_share": 1.0 - word_active.sum() / max(word_active.size * n_topics, 1),
        "document_zero_share": 1.0 - document_active.sum() / max(theta.size, 1),
        "word_active_topics": word_active,
        "document_active_topics": document_active,
    }


# ---------------------------------------------------------------------------
# Coherence
# ---------------------------------------------------------------------------

def coherence(model, X, measure="u_mass", top_n=10):
    """Coherence of every topic's top words over the reference corpus ``X``.

    See the module docstring for the formulas (whole-document
    co-occurrence; the same values as gensim's ``CoherenceModel``).

    Parameters
    ----------
    model : fitted STC or MedSTC
    X : array-like or sparse matrix of shape (n_docs, n_terms)
        Reference corpus: word counts over the model's terms (only which
        terms a document contains matters).
    measure : {"u_mass", "npmi"}, default="u_mass"
    top_n : int, default=10
        Number of top words per topic (at least 2).

    Returns
    -------
    ndarray of shape (n_topics,)
        Higher is more coherent.

    Raises
    ------
    ValueError
        For an unknown measure, ``top_n < 2``, or a top word that occurs in
        no document of ``X`` (its probability is zero and the measure is
        undefined).
    """
    if measure not in COHERENCE_MEASURES:
        raise ValueError(f"measure must be one of {COHERENCE_MEASURES}, got {measure!r}")
    top_n = _positive_int(top_n, "top_n")
    if top_n < 2:
        raise ValueError(f"top_n must be at least 2 (coherence scores pairs of words), got {top_n}")
    X = _count_matrix(model, X)
    order = top_term_indices(model, top_n)
    # Document counts of every top word and of every pair, over the union of top words.
    terms, position = np.unique(order, return_inverse=True)
    position = position.reshape(order.shape)
    present = (X[:, terms] > 0).astype(np.float64)
    together = (present.T @ present).toarray()  # together[a, b] = D(terms[a], terms[b])
    n_docs = float(X.shape[0])
    doc_freq = np.diag(together)
    for k, row in enumerate(position):
        missing = row[doc_freq[row] == 0]
        if missing.size:
            raise ValueError(f"coherence: top word (column {terms[missing[0]]}) of topic {k} "
                             f"occurs in no document of X; use a reference corpus that "
                             f"contains every top word")
    eps = COHERENCE_EPSILON
    values = np.empty(order.shape[0])
    for k, row in enumerate(position):
        joint = together[np.ix_(row, row)] / n_docs  # P(w_i, w_j)
        single = doc_freq[row] / n_docs  # P(w_i)
        if measure == "u_mass":
            later, earlier = np.tril_indices(row.size, k=-1)
            values[k] = np.mean(np.log((joint[later, earlier] + eps) / single[earlier]))
        else:
            first, second = np.nonzero(~np.eye(row.size, dtype=bool))
            p_pair = joint[first, second] + eps
            pmi = np.log(p_pair / (single[first] * single[second]))
            values[k] = np.mean(pmi / -np.log(p_pair))
    return values


# ---------------------------------------------------------------------------
# pyLDAvis
# ---------------------------------------------------------------------------

def pyldavis_data(model, X, vocabulary=None):
    """The inputs of ``pyLDAvis.prepare`` for a fitted model and corpus ``X``.

    pyLDAvis expects probability distributions: topics over terms (STC's
    topics already are) and documents over topics. A document's distribution
    here is its code theta_d divided by its sum. Documents whose code is all
    zero (possible with a large ``lambda_``) or that are empty have no
    distribution and are left out of ``doc_topic_dists`` and
    ``doc_lengths``; terms that occur nowhere in ``X`` are left out of the
    vocabulary (pyLDAvis divides by term frequencies), and each topic is
    renormalised over the remaining terms.

    Returns
    -------
    dict with keys ``topic_term_dists`` (n_topics, n_terms_kept),
    ``doc_topic_dists`` (n_docs_kept, n_topics), ``doc_lengths``
    (n_docs_kept,), ``vocab`` (n_terms_kept,) and ``term_frequency``
    (n_terms_kept,): pass them as ``pyLDAvis.prepare(**data)``.
    """
    X = _count_matrix(model, X)
    vocabulary = _vocabulary(model, vocabulary)
    beta = _topics(model)
    term_frequency = np.asarray(X.sum(axis=0)).ravel()
    kept_terms = term_frequency > 0
    topic_term = beta[:, kept_terms]
    topic_mass = topic_term.sum(axis=1, keepdims=True)
    if np.any(topic_mass <= 0):
        raise ValueError("a topic gives no weight to any term of X: "
                         "pyLDAvis needs X to contain the model's terms")
    theta = model.transform(X)
    code_sums = theta.sum(axis=1)
    doc_lengths = np.asarray(X.sum(axis=1)).ravel()
    kept_docs = (code_sums > 0) & (doc_lengths > 0)
    if not kept_docs.any():
        raise ValueError("every document of X has an all-zero code: nothing for pyLDAvis to show")
    return {
        "topic_term_dists": topic_term / topic_mass,
        "doc_topic_dists": theta[kept_docs] / code_sums[kept_docs, None],
        "doc_lengths": doc_lengths[kept_docs],
        "vocab": [str(term) for term in vocabulary[kept_terms]],
        "term_frequency": term_frequency[kept_terms],
    }


def pyldavis_prepare(model, X, vocabulary=None, **kwargs):
    """Call ``pyLDAvis.prepare`` on `pyldavis_data` of the model and corpus.

    That is ``pyLDAvis.prepare(**pyldavis_data(model, X, vocabulary), **kwargs)``.
    Needs pyLDAvis (``pip install 'sparse-topical-coding[pyldavis]'``). Keyword arguments go to
    ``pyLDAvis.prepare`` (for example ``sort_topics=False`` to keep the
    model's topic numbers, ``mds="mmds"``).
    """
    try:
        import pyLDAvis
    except ImportError as error:
        raise ImportError("stc.inspection.pyldavis_prepare needs pyLDAvis: "
                          "pip install 'sparse-topical-coding[pyldavis]'") from error
    return pyLDAvis.prepare(**pyldavis_data(model, X, vocabulary), **kwargs)
