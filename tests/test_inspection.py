"""stc.inspection: top words, word and document codes, coherence (against gensim), pyLDAvis inputs."""

import numpy as np
import pytest
import scipy.sparse as sp

from stc import STC
from stc import inspection
from stc.datasets import load_newsgroups_split

from conftest import brief_fit, optional



@pytest.fixture(scope="module")
def corpus():
    train, _ = load_newsgroups_split()
    rows = np.arange(0, train.data.shape[0], 5)  # every 5th document: all three groups
    return train.data[rows], train.target[rows], train.vocabulary


@pytest.fixture(scope="module")
def model(corpus):
    X, _, _ = corpus
    return STC(n_topics=6, max_iter=10, random_state=0).fit(X)


@brief_fit
def test_top_words_are_the_heaviest_terms_with_their_weights(model, corpus):
    _, _, vocabulary = corpus
    pairs = inspection.top_words(model, vocabulary, n=7)
    assert [[w for w, _ in topic] for topic in pairs] == model.top_words(vocabulary, 7)
    beta = model.components_
    index = {w: i for i, w in enumerate(vocabulary)}
    for k, topic in enumerate(pairs):
        weights = np.array([weight for _, weight in topic])
        np.testing.assert_array_equal(weights, beta[k, [index[w] for w, _ in topic]])
        assert np.all(np.diff(weights) <= 0)
        # nothing outside the list is heavier than its lightest member
        assert np.sum(beta[k] > weights[-1]) <= 6


def test_top_words_without_vocabulary_uses_column_indices(model):
    pairs = inspection.top_words(model, n=3)
    order = np.argsort(-model.components_, axis=1, kind="stable")[:, :3]
    assert [[w for w, _ in topic] for topic in pairs] == [[str(j) for j in row] for row in order]


def test_bad_arguments_are_refused(model, corpus):
    X, y, vocabulary = corpus
    with pytest.raises(ValueError, match="vocabulary"):
        inspection.top_words(model, vocabulary[:-1])
    with pytest.raises(ValueError, match="n must be at least 1"):
        inspection.top_words(model, vocabulary, n=0)
    with pytest.raises(ValueError, match="'no-such-term' is not in the vocabulary"):
        inspection.average_word_codes(model, X, ["space", "no-such-term"], vocabulary)
    with pytest.raises(ValueError, match="columns"):
        inspection.coherence(model, X[:, :10])
    with pytest.raises(ValueError, match="measure"):
        inspection.coherence(model, X, measure="c_v")
    with pytest.raises(ValueError, match="top_n"):
        inspection.coherence(model, X, top_n=1)
    with pytest.raises(ValueError, match="one label per document"):
        inspection.average_document_codes(model, X, y[:-1])
    with pytest.raises(ValueError, match=r"^y contains None \(1 of"):  # was a sorting TypeError
        inspection.average_document_codes(model, X, [None] + list(y[1:]))
    with pytest.raises(ValueError, match=r"^y contains None \(1 of"):
        inspection.representative_words(X, [None] + list(y[1:]))
    with pytest.raises(ValueError, match="non-negative"):
        inspection.code_sparsity(model, -X)


def test_average_word_codes_match_a_loop_over_documents(model, corpus):
    X, _, vocabulary = corpus
    words = ["space", "hockey", "graphics", "space"]
    result = inspection.average_word_codes(model, X, words, vocabulary)
    codes = model.word_codes(X).toarray()
    index = {w: i for i, w in enumerate(vocabulary)}
    for row, word in zip(result, words):
        column = index[word]
        rows_of_word = []
        for d in range(X.shape[0]):
            start, end = X.indptr[d], X.indptr[d + 1]
            hits = np.flatnonzero(X.indices[start:end] == column)
            rows_of_word.extend(start + hits)
        assert rows_of_word, word
        np.testing.assert_allclose(row, codes[rows_of_word].mean(axis=0), rtol=1e-12)
    # by column index, and a word absent from X gives zeros
    absent = int(np.flatnonzero(np.asarray(X.sum(axis=0)).ravel() == 0)[0])
    by_index = inspection.average_word_codes(model, X, [index["space"], absent])
    np.testing.assert_array_equal(by_index[0], result[0])
    np.testing.assert_array_equal(by_index[1], 0.0)


def test_average_document_codes_are_class_means_of_transform(model, corpus):
    X, y, _ = corpus
    classes, means = inspection.average_document_codes(model, X, y)
    theta = model.transform(X)
    np.testing.assert_array_equal(classes, np.unique(y))
    for c, label in enumerate(classes):
        np.testing.assert_allclose(means[c], theta[y == label].mean(axis=0), rtol=1e-12)


def test_representative_words_follow_class_document_frequency():
    # docs 0-2 class "a", docs 3-4 class "b"; terms t0..t3
    X = sp.csr_matrix(np.array([[1, 5, 0, 0],
                                [1, 0, 1, 0],
                                [2, 0, 1, 0],
                                [1, 0, 0, 3],
                                [4, 0, 0, 1]], dtype=float))
    y = np.array(["a", "a", "a", "b", "b"])
    vocabulary = ["t0", "t1", "t2", "t3"]
    # class a: t0 in 3 docs, t2 in 2; class b: t0 is taken, then t3 (2 docs)
    assert inspection.representative_words(X, y, vocabulary, n_per_class=2) == \
        ["t0", "t2", "t3"]
    assert inspection.representative_words(X, y, n_per_class=1) == [0, 3]


def test_code_sparsity_counts_zero_entries(model, corpus):
    X, _, _ = corpus
    result = inspection.code_sparsity(model, X)
    codes = model.word_codes(X).toarray()
    theta = model.transform(X)
    assert result["word_zero_share"] == pytest.approx(np.mean(codes == 0), rel=1e-12)
    assert result["document_zero_share"] == pytest.approx(np.mean(theta == 0), rel=1e-12)
    np.testing.assert_array_equal(result["word_active_topics"], np.count_nonzero(codes, axis=1))
    np.testing.assert_array_equal(result["document_active_topics"],
                                  np.count_nonzero(theta, axis=1))


# ---------------------------------------------------------------------------
# Coherence
# ---------------------------------------------------------------------------

class FixedTopics:
    """A stand-in model whose topics put decreasing weight on chosen columns."""

    def __init__(self, topics, n_terms):
        self.components_ = np.zeros((len(topics), n_terms))
        for k, columns in enumerate(topics):
            self.components_[k, columns] = np.linspace(1.0, 0.5, len(columns))
        self.components_ /= self.components_.sum(axis=1, keepdims=True)


def test_coherence_by_hand_on_a_tiny_corpus():
    # 4 documents over 3 terms: t0 in docs {0, 1, 2}, t1 in {0, 1}, t2 in {3}
    X = sp.csr_matrix(np.array([[1, 1, 0], [2, 1, 0], [1, 0, 0], [0, 0, 1]], dtype=float))
    model = FixedTopics([[0, 1], [0, 2]], 3)
    eps = 1e-12
    # UMass: log((D(w2, w1) / N + eps) / (D(w1) / N)) with w1 the heavier word
    expected = [np.log((2 / 4 + eps) / (3 / 4)), np.log((0 / 4 + eps) / (3 / 4))]
    np.testing.assert_allclose(inspection.coherence(model, X, "u_mass", top_n=2), expected,
                               rtol=1e-12)
    # NPMI of t0, t1: P = 3/4, 2/4, joint 2/4
    npmi_01 = np.log((0.5 + eps) / (0.75 * 0.5)) / -np.log(0.5 + eps)
    npmi_02 = np.log(eps / (0.75 * 0.25)) / -np.log(eps)
    np.testing.assert_allclose(inspection.coherence(model, X, "npmi", top_n=2),
                               [npmi_01, npmi_02], rtol=1e-12)


def test_npmi_is_one_for_words_that_always_occur_together():
    X = sp.csr_matrix(np.array([[1, 1, 0], [2, 3, 0], [0, 0, 1], [0, 0, 2]], dtype=float))
    model = FixedTopics([[0, 1]], 3)
    np.testing.assert_allclose(inspection.coherence(model, X, "npmi", top_n=2), [1.0],
                               rtol=1e-10)


def test_coherence_refuses_a_top_word_absent_from_the_corpus():
    X = sp.csr_matrix(np.array([[1, 1, 0], [1, 0, 0]], dtype=float))
    with pytest.raises(ValueError, match="occurs in no document of X"):
        inspection.coherence(FixedTopics([[0, 2]], 3), X, top_n=2)


@pytest.mark.parametrize("measure", ["u_mass", "npmi"])
def test_coherence_matches_gensim(model, corpus, measure):
    """Same topics and corpus through gensim's CoherenceModel.

    UMass on the bag-of-words corpus; NPMI with a sliding window longer than
    every document, which makes gensim count whole-document co-occurrence.
    """
    optional("gensim")
    from gensim.corpora import Dictionary
    from gensim.models.coherencemodel import CoherenceModel

    X, _, vocabulary = corpus
    top_n = 8
    ours = inspection.coherence(model, X, measure=measure, top_n=top_n)
    topics = [[w for w, _ in topic] for topic in inspection.top_words(model, vocabulary, top_n)]
    # each document as the list of its terms (repeated by count, as text would be)
    texts = [list(np.repeat(vocabulary[X.indices[X.indptr[d]:X.indptr[d + 1]]],
                            X.data[X.indptr[d]:X.indptr[d + 1]].astype(int)))
             for d in range(X.shape[0])]
    dictionary = Dictionary(texts)
    if measure == "u_mass":
        reference = CoherenceModel(topics=topics, corpus=[dictionary.doc2bow(t) for t in texts],
                                   dictionary=dictionary, coherence="u_mass", topn=top_n,
                                   processes=1)
    else:
        reference = CoherenceModel(topics=topics, texts=texts, dictionary=dictionary,
                                   coherence="c_npmi", topn=top_n, processes=1,
                                   window_size=max(len(t) for t in texts) + 1)
    expected = np.asarray(reference.get_coherence_per_topic(), dtype=float)
    assert np.all(np.isfinite(expected))
    np.testing.assert_allclose(ours, expected, rtol=1e-9, atol=1e-12)
    # The topics differ in coherence: the comparison is not between constants.
    assert np.ptp(ours) > 1e-3


# ---------------------------------------------------------------------------
# pyLDAvis
# ---------------------------------------------------------------------------

def test_pyldavis_data_are_distributions(model, corpus):
    X, _, vocabulary = corpus
    data = inspection.pyldavis_data(model, X, vocabulary)
    n_topics = model.components_.shape[0]
    kept_terms = np.asarray(X.sum(axis=0)).ravel() > 0
    assert data["topic_term_dists"].shape == (n_topics, kept_terms.sum())
    np.testing.assert_allclose(data["topic_term_dists"].sum(axis=1), 1.0, rtol=1e-12)
    theta = model.transform(X)
    kept_docs = theta.sum(axis=1) > 0
    assert data["doc_topic_dists"].shape == (kept_docs.sum(), n_topics)
    np.testing.assert_allclose(data["doc_topic_dists"].sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(data["doc_topic_dists"],
                               theta[kept_docs] / theta[kept_docs].sum(axis=1, keepdims=True))
    np.testing.assert_array_equal(data["doc_lengths"], np.asarray(X.sum(axis=1)).ravel()[kept_docs])
    assert data["vocab"] == list(vocabulary[kept_terms])
    np.testing.assert_array_equal(data["term_frequency"],
                                  np.asarray(X.sum(axis=0)).ravel()[kept_terms])


def test_pyldavis_data_leave_out_documents_without_a_distribution():
    """An all-zero code (possible with large penalties) or an empty document has no distribution."""
    X = sp.csr_matrix(np.array([[1, 2, 0], [0, 0, 0], [3, 0, 1], [0, 1, 1]], dtype=float))
    model = FixedTopics([[0, 1], [1, 2]], 3)
    codes = np.array([[0.5, 1.5], [0.0, 0.0], [0.0, 0.0], [2.0, 0.0]])
    model.transform = lambda X: codes
    data = inspection.pyldavis_data(model, X, ["a", "b", "c"])
    np.testing.assert_allclose(data["doc_topic_dists"], [[0.25, 0.75], [1.0, 0.0]])
    np.testing.assert_array_equal(data["doc_lengths"], [3.0, 2.0])
    np.testing.assert_array_equal(data["term_frequency"], [4.0, 3.0, 2.0])
    codes[:] = 0.0
    with pytest.raises(ValueError, match="all-zero code"):
        inspection.pyldavis_data(model, X)


# pyLDAvis takes the log of the topic-term distributions, and STC's topics are
# sparse (exact zeros): numpy warns of log(0) inside pyLDAvis/pandas. Third-party.
@pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")
def test_pyldavis_prepare_accepts_the_data(model, corpus):
    optional("pyLDAvis")
    X, _, vocabulary = corpus
    prepared = inspection.pyldavis_prepare(model, X, vocabulary, sort_topics=False, n_jobs=1,
                                            lambda_step=0.25, R=10)
    assert prepared.topic_coordinates.shape[0] == model.components_.shape[0]
    # with sort_topics=False pyLDAvis keeps our order; its topic sizes are our
    # length-weighted mean document distributions
    data = inspection.pyldavis_data(model, X, vocabulary)
    share = data["doc_lengths"] @ data["doc_topic_dists"]
    np.testing.assert_allclose(prepared.topic_coordinates.sort_values("topics")["Freq"].to_numpy(),
                               100 * share / share.sum(), rtol=1e-6)
