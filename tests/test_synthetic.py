"""stc.datasets.make_stc_corpus (a corpus sampled from STC's model) and topic_recovery."""
import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from stc import STC
from stc.datasets import make_stc_corpus, topic_recovery
from stc.datasets._synthetic import truncated_normal, truncated_normal_mean


def truncated_normal_variance(mean, sd):
    """Var[s] for s ~ N(mean, sd^2) truncated to s >= 0."""
    from scipy.stats import norm

    alpha = mean / sd
    ratio = norm.pdf(alpha) / norm.cdf(alpha)
    return sd ** 2 * (1.0 - alpha * ratio - ratio ** 2)


def code_moments(corpus, gamma, rho):
    """E[s] and Var[s] of every (document, topic) word code given the true theta."""
    sd = 1.0 / np.sqrt(2 * gamma)
    location = corpus.document_codes.toarray() - rho / (2 * gamma)
    return truncated_normal_mean(location, sd), truncated_normal_variance(location, sd)


def test_corpus_layout_and_determinism():
    params = dict(n_documents=1500, n_features=300, n_topics=6, random_state=0,
                  return_word_codes=True)
    corpus = make_stc_corpus(**params)
    again = make_stc_corpus(**params)
    X = corpus.data
    assert X.shape == (1500, 300) and X.format == "csr" and X.dtype == np.float64
    assert X.indices.dtype == np.int32 and X.has_canonical_format
    assert np.all(X.data >= 1) and np.array_equal(X.data, np.round(X.data))
    assert (X != again.data).nnz == 0
    np.testing.assert_array_equal(corpus.word_codes, again.word_codes)
    np.testing.assert_allclose(corpus.components.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    theta = corpus.document_codes
    assert sp.issparse(theta) and theta.shape == (1500, 6)
    assert np.all(np.diff(theta.indptr) == 3) and np.all(theta.data > 0)
    assert corpus.word_codes.shape == (X.nnz, 6) and np.all(corpus.word_codes >= 0)
    other = make_stc_corpus(**dict(params, random_state=1))
    assert not np.array_equal(other.components, corpus.components)


def test_expected_counts_per_term_follow_the_model():
    """E[w_dn | theta_d] = sum_k beta_kn E[s_k | theta_dk]: observed term totals agree."""
    gamma, rho = 2.0, 0.5
    corpus = make_stc_corpus(n_documents=3000, n_features=200, n_topics=5, gamma=gamma,
                             rho=rho, random_state=3)
    mean, variance = code_moments(corpus, gamma, rho)
    beta = corpus.components
    expected = mean.sum(axis=0) @ beta
    # Var of a term's total: Poisson part plus the word codes' spread
    spread = variance.sum(axis=0) @ beta ** 2
    observed = np.asarray(corpus.data.sum(axis=0)).ravel()
    frequent = expected > 50
    assert frequent.sum() > 50
    z = (observed[frequent] - expected[frequent]) / np.sqrt(expected[frequent]
                                                           + spread[frequent])
    assert np.max(np.abs(z)) < 5.0
    assert abs(observed.sum() - expected.sum()) < 5 * np.sqrt(expected.sum() + spread.sum())


def test_counts_carry_the_word_codes_spread():
    """With one term, w_d = sum_k Poisson(s_k) mixed over s: variance sum_k (E s_k + Var s_k)."""
    gamma, rho = 0.02, 0.1  # word codes spread widely (sd 5) around theta
    corpus = make_stc_corpus(n_documents=20000, n_features=1, n_topics=2, document_length=20.0,
                             topics_per_document=1, gamma=gamma, rho=rho, random_state=0)
    mean, variance = code_moments(corpus, gamma, rho)
    counts = corpus.data.toarray().ravel()
    z = (counts - mean.sum(axis=1)) / np.sqrt(mean.sum(axis=1) + variance.sum(axis=1))
    assert abs(z.mean()) < 5 / np.sqrt(z.size)
    # the sample variance of z is 1 (a sampler that used E[s] would give about 0.5 here)
    assert abs(z.var() - 1.0) < 0.05


def test_word_codes_sit_around_the_document_codes():
    gamma, rho = 10.0, 0.01
    corpus = make_stc_corpus(n_documents=400, n_features=500, n_topics=4, gamma=gamma, rho=rho,
                             return_word_codes=True, random_state=2)
    X, theta = corpus.data, corpus.document_codes.toarray()
    sd = 1 / np.sqrt(2 * gamma)
    doc = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    gap = corpus.word_codes - theta[doc]
    active = theta[doc] > 0
    assert np.all(np.abs(gap[active]) < 8 * sd)
    # conditioning on a stored entry shifts a code by about sd^2 beta_kn: negligible
    assert abs(gap[active].mean() + rho / (2 * gamma)) < 0.1 * sd
    assert np.all(corpus.word_codes[~active] < 8 * sd)


def test_truncated_normal_draws_stay_in_range_far_in_the_tail():
    rng = np.random.default_rng(0)
    draws = truncated_normal(rng, np.zeros(10000), 1.0, 9.0)
    assert np.all(draws >= 9.0) and np.all(np.isfinite(draws))
    # E[z | z > 9] = phi(9) / (1 - Phi(9)), about 9.11
    assert abs(draws.mean() - 9.1084) < 0.01
    two_sided = truncated_normal(rng, np.full(10000, 1.0), 2.0, 0.0, 1.5)
    assert np.all((two_sided >= 0) & (two_sided <= 1.5))


def test_topic_recovery_is_the_best_matching():
    rng = np.random.default_rng(0)
    true = rng.dirichlet(np.ones(30), size=4)
    learned = rng.dirichlet(np.ones(30), size=4)
    result = topic_recovery(learned, true)
    unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)  # noqa: E731
    cosine = unit(true) @ unit(learned).T
    best = max(itertools.permutations(range(4)),
               key=lambda p: sum(cosine[i, p[i]] for i in range(4)))
    np.testing.assert_array_equal(result.match, best)
    permuted = topic_recovery(true[[2, 0, 3, 1]], true)
    np.testing.assert_array_equal(permuted.match, [1, 3, 0, 2])
    np.testing.assert_allclose(permuted.similarity, 1.0)
    fewer = topic_recovery(true[:2], true)
    assert np.sum(fewer.match == -1) == 2 and fewer.mean_similarity < 0.75


def test_stc_recovers_the_topics_of_a_sampled_corpus():
    """STC is MAP estimation in the sampled model: its best fit finds the true topics.

    The alternation finds local minima (seed 0 here merges two topics), so the
    fit of lowest objective (2) among three seeds is the one scored.
    """
    corpus = make_stc_corpus(n_documents=1000, n_features=200, n_topics=4,
                             document_length=200.0, topics_per_document=1, random_state=0)
    fits = [STC(n_topics=4, max_iter=100, random_state=seed).fit(corpus.data)
            for seed in range(3)]
    best = min(fits, key=lambda model: model.objective_[-1])
    assert topic_recovery(best.components_, corpus.components).mean_similarity > 0.95


@pytest.mark.parametrize("params, error, name", [
    (dict(n_documents=0), ValueError, "n_documents"),
    (dict(n_features=2.5), TypeError, "n_features"),
    (dict(topics_per_document=11), ValueError, "topics_per_document"),
    (dict(document_length=0.0), ValueError, "document_length"),
    (dict(topic_concentration=-1.0), ValueError, "topic_concentration"),
    (dict(gamma=0.0), ValueError, "gamma"),
    (dict(rho=-0.1), ValueError, "rho"),
])
def test_bad_parameters(params, error, name):
    with pytest.raises(error, match=name):
        make_stc_corpus(**{"n_topics": 10, **params})


# ---- labels by a max-margin rule on the true codes (n_classes)

# sha256 of (indptr, indices, data) of make_stc_corpus(1500, 300, 6, random_state=0)
# before the labels were added (counts are whole numbers, stored exactly)
UNLABELLED_DIGEST = "a2bfd3aba0ac950698cfaf0e7e05bc028bda9f468e9838c0f29c808f6a7720c4"


def counts_digest(X):
    import hashlib

    digest = hashlib.sha256()
    for array in (X.indptr, X.indices, X.data):
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def test_labels_follow_the_max_margin_rule_on_the_true_codes():
    params = dict(n_documents=2500, n_features=300, n_topics=6, random_state=0,
                  return_word_codes=True)
    labelled = make_stc_corpus(**params, n_classes=4)
    plain = make_stc_corpus(**params)
    eta, y = labelled.classifier, labelled.target
    assert eta.shape == (4, 6) and y.shape == (2500,) and y.dtype == np.int64
    scores = labelled.document_codes.toarray() @ eta.T
    np.testing.assert_array_equal(y, np.argmax(scores, axis=1))
    top_two = np.sort(scores, axis=1)[:, -2:]
    assert np.all(top_two[:, 1] - top_two[:, 0] > 0)  # a margin: no ties
    assert np.unique(y).size == 4
    # the labels are drawn apart: the counts, topics and codes are those without them
    assert (labelled.data != plain.data).nnz == 0
    np.testing.assert_array_equal(labelled.components, plain.components)
    np.testing.assert_array_equal(labelled.document_codes.toarray(),
                                  plain.document_codes.toarray())
    np.testing.assert_array_equal(labelled.word_codes, plain.word_codes)
    again = make_stc_corpus(**params, n_classes=4)
    np.testing.assert_array_equal(again.target, y)
    np.testing.assert_array_equal(again.classifier, eta)
    other = make_stc_corpus(**dict(params, random_state=1), n_classes=4)
    assert not np.array_equal(other.classifier, eta)


def test_label_noise_replaces_its_share_of_the_labels():
    clean = make_stc_corpus(n_documents=5000, n_features=100, n_topics=5, n_classes=3,
                            random_state=2)
    noisy = make_stc_corpus(n_documents=5000, n_features=100, n_topics=5, n_classes=3,
                            label_noise=0.3, random_state=2)
    np.testing.assert_array_equal(noisy.classifier, clean.classifier)
    # a replaced label is uniform over the 3 classes: it differs 2/3 of the time
    changed = np.mean(noisy.target != clean.target)
    assert abs(changed - 0.3 * 2 / 3) < 0.03  # 5 binomial standard deviations
    everything = make_stc_corpus(n_documents=3000, n_features=100, n_topics=5, n_classes=3,
                                 label_noise=1.0, random_state=2)
    assert abs(np.mean(everything.target == clean.target[:3000]) - 1 / 3) < 0.05


def test_without_labels_the_corpus_is_unchanged():
    corpus = make_stc_corpus(n_documents=1500, n_features=300, n_topics=6, random_state=0,
                             return_word_codes=True)
    assert counts_digest(corpus.data) == UNLABELLED_DIGEST
    assert sorted(corpus.keys()) == ["DESCR", "components", "data", "document_codes",
                                     "word_codes"]


@pytest.mark.parametrize("params, error, name", [
    (dict(n_classes=1), ValueError, "n_classes"),
    (dict(n_classes=2.0), TypeError, "n_classes"),
    (dict(n_classes=3, label_noise=1.5), ValueError, "label_noise"),
    (dict(n_classes=3, label_noise=-0.1), ValueError, "label_noise"),
    (dict(n_classes=3, label_noise="a"), TypeError, "label_noise"),
    (dict(label_noise=0.1), ValueError, "label_noise needs n_classes"),
])
def test_bad_label_parameters(params, error, name):
    with pytest.raises(error, match=name):
        make_stc_corpus(n_documents=10, n_features=20, n_topics=3, **params)
