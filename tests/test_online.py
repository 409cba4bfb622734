"""Online (mini-batch) STC: partial_fit, learning_method="online", fit_stream, the chunked
readers, and the stochastic dictionary step's math."""

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file
from sklearn.exceptions import ConvergenceWarning

import stc.readers
from stc import STC
from stc._core._simplex import (OnlineBlock, online_block_finish, online_block_solve,
                                online_block_start)
from stc._learning.coding import CodingProblem, code_new_documents
from stc._learning.dictionary import CorpusLayout, update_dictionary
from stc._learning.learners import online
from stc._learning.stochastic_dictionary import (NEW_TERM_SHARE, OnlineStatistics,
                                                 introduce_new_terms, learn_from_batch,
                                                 learning_rate, simplex_minimiser)
from stc.losses import get_loss

from conftest import brief_fit

SMALL = dict(n_topics=5, lambda_=0.1, rho=0.01, random_state=0)


@pytest.fixture(autouse=True)
def first_step_is_the_first_batch(monkeypatch):
    """fit_stream joins the first pass's first batches until they hold FIRST_STEP_DOCUMENTS
    documents (4,000, more than these batches hold): here its first step is its first
    batch, so that it learns as a partial_fit loop; test_fit_stream_joins_its_first_batches
    tests the joining."""
    monkeypatch.setattr(online, "FIRST_STEP_DOCUMENTS", 1)


def assert_on_simplex(beta):
    assert np.all(beta >= 0)
    np.testing.assert_allclose(beta.sum(axis=1), 1.0, rtol=0, atol=1e-12)


# ---- the stochastic dictionary step

def test_simplex_minimiser_meets_the_kkt_conditions():
    rng = np.random.default_rng(0)
    A = rng.gamma(1.0, size=(4, 30))
    A[:, :3] = 0.0  # terms no code reaches
    C = rng.uniform(0.5, 2.0, size=(4, 30))
    beta = simplex_minimiser(np.full((4, 30), 1 / 30), A, C)
    assert_on_simplex(beta)
    # Minimiser of sum_n C_kn beta_kn - A_kn log beta_kn on the simplex: the gradient
    # C - A / beta equals -nu_k on the support (same value for every term of a topic).
    support = A > 0
    gradient = np.where(support, C - np.divide(A, beta, where=support, out=np.ones_like(A)), 0)
    for k in range(4):
        g = gradient[k, support[k]]
        np.testing.assert_allclose(g, g.mean(), rtol=1e-9, atol=1e-9)
    assert np.all(beta[~support] == 0)


def test_new_terms_of_a_batch_enter_every_topic_and_the_rows_stay_on_the_simplex():
    """Terms of the batch no topic weighs get NEW_TERM_SHARE x their share of the batch's
    tokens in every topic, then each row is rescaled; unseen terms outside the batch stay
    at zero, and the known terms keep their ratios."""
    beta = np.array([[0.5, 0.0, 0.3, 0.0, 0.2, 0.0],
                     [0.1, 0.0, 0.6, 0.0, 0.3, 0.0]])
    X = sp.csr_matrix(np.array([[2.0, 3.0, 0.0, 0.0, 0.0, 0.0],
                                [0.0, 1.0, 0.0, 4.0, 0.0, 0.0]]))  # terms 1 and 3 are new
    old = beta.copy()
    introduce_new_terms(beta, X)
    assert_on_simplex(beta)
    raw = old.copy()
    raw[:, [1, 3]] = NEW_TERM_SHARE * np.array([4.0, 4.0]) / 10.0
    np.testing.assert_allclose(beta, raw / raw.sum(axis=1, keepdims=True), rtol=1e-15)
    assert np.all(beta[:, 5] == 0.0)  # never seen
    again = beta.copy()
    introduce_new_terms(beta, X)  # nothing new any more: untouched
    assert np.array_equal(beta, again)


def _block_step_problem(seed, n_terms=40, batch_terms=(2, 3, 5, 11, 12, 30)):
    """Running statistics at a fixed point, a batch's sums on some terms, and its weight."""
    rng = np.random.default_rng(seed)
    K = 3
    beta = rng.gamma(1.0, size=(K, n_terms))
    beta /= beta.sum(axis=1, keepdims=True)
    C = rng.uniform(0.5, 2.0, size=(K, n_terms))
    stats = OnlineStatistics(beta * C, C, np.full(K, np.nan))  # beta: their minimiser
    terms = np.array(batch_terms, dtype=np.intp)
    plain = rng.uniform(0.0, 3.0, size=(terms.size, K))
    weighted = rng.uniform(0.0, 3.0, size=(terms.size, K))
    return beta, stats, terms, plain, weighted, 0.3, 7.0


def _run_block_step(beta, stats, terms, plain, weighted, rho, n_docs):
    block = OnlineBlock(terms, beta.shape[0], beta.shape[1], rho, n_docs)
    # the batch's responsibilities at the topics it was coded with: beta * weighted sums
    batch_responsibilities = np.ascontiguousarray(beta[:, terms] * weighted.T)
    online_block_start(beta, stats.responsibilities, stats.code_sums, block,
                       np.ascontiguousarray(plain.T))
    online_block_solve(beta, stats.responsibilities, stats.code_sums, stats.multipliers, block,
                       batch_responsibilities)
    online_block_finish(beta, block)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_block_step_is_the_exact_minimiser_over_its_family(seed):
    """The step minimises sum_n C beta - A log beta on the simplex over the batch's terms
    and one common scale r of the other terms (their old rows times r): KKT conditions."""
    beta, stats, terms, plain, weighted, rho, n_docs = _block_step_problem(seed)
    old = beta.copy()
    A_old, C_old = stats.responsibilities.copy(), stats.code_sums.copy()
    _run_block_step(beta, stats, terms, plain, weighted, rho, n_docs)
    assert_on_simplex(beta)
    # The statistics the step minimised: the past decayed, the batch entered on its terms.
    A, C = (1 - rho) * A_old, (1 - rho) * C_old
    C[:, terms] += rho * plain.T / n_docs
    A[:, terms] += (rho / n_docs) * old[:, terms] * weighted.T
    np.testing.assert_allclose(stats.responsibilities, A, rtol=1e-13)
    np.testing.assert_allclose(stats.code_sums, C, rtol=1e-13)
    off = np.setdiff1d(np.arange(beta.shape[1]), terms)
    r = beta[:, off] / old[:, off]
    np.testing.assert_allclose(r, np.broadcast_to(r[:, :1], r.shape), rtol=1e-12)  # one scale
    r = r[:, 0]
    for k in range(beta.shape[0]):
        nu = A[k, terms] / beta[k, terms] - C[k, terms]  # = nu on the batch's terms
        np.testing.assert_allclose(nu, nu.mean(), rtol=1e-9)
        # d/dr of r P - Q log r, with P = sum C beta_old and Q = sum A off the batch,
        # equals -nu times the others' old mass
        P, Q, u = C[k, off] @ old[k, off], A[k, off].sum(), old[k, off].sum()
        np.testing.assert_allclose(Q / r[k] - P, nu.mean() * u, rtol=1e-9)
        np.testing.assert_allclose(stats.multipliers[k], nu.mean(), rtol=1e-9)


def test_block_step_over_every_term_is_the_full_minimiser():
    beta, stats, terms, plain, weighted, rho, n_docs = _block_step_problem(
        3, n_terms=12, batch_terms=range(12))
    old = beta.copy()
    _run_block_step(beta, stats, terms, plain, weighted, rho, n_docs)
    full = simplex_minimiser(old, stats.responsibilities, stats.code_sums)
    np.testing.assert_allclose(beta, full, rtol=1e-12)


def test_block_step_lowers_the_surrogate_no_less_than_a_step_on_the_batch_alone():
    """Against the old topics and against the minimiser over the batch's terms with the
    others fixed, the step's family holds both: its surrogate is the lowest of the three."""
    beta, stats, terms, plain, weighted, rho, n_docs = _block_step_problem(4)
    old = beta.copy()
    _run_block_step(beta, stats, terms, plain, weighted, rho, n_docs)
    A, C = stats.responsibilities, stats.code_sums

    def surrogate(b):
        return np.sum(C * b - np.where(A > 0, A * np.log(b), 0.0), axis=1)

    mass = old[:, terms].sum(axis=1, keepdims=True)  # the batch's terms keep their mass
    on_batch = old.copy()
    on_batch[:, terms] = mass * simplex_minimiser(old[:, terms] / mass, A[:, terms],
                                                  C[:, terms] * mass)
    assert np.all(surrogate(beta) < surrogate(old))
    assert np.all(surrogate(beta) <= surrogate(on_batch) + 1e-12 * np.abs(surrogate(old)))


def test_one_batch_with_full_weight_is_the_batch_mm_step(newsgroups):
    """rho = 1 forgets the past: the online step is then the batch MM step on that batch."""
    train, _ = newsgroups
    X = train.data[:150]
    problem = CodingProblem(get_loss("poisson"), 0.1, 0.1, 0.01)
    with pytest.warns(ConvergenceWarning):
        beta0 = STC(n_topics=4, max_iter=2, random_state=0).fit(X).components_
    stats = OnlineStatistics.at_fixed_point(beta0, np.full(4, float(X.shape[1])))
    online, _, _ = learn_from_batch(problem, X, beta0.copy(), stats, 1.0, max_steps=2)
    _, codes, result = code_new_documents(problem, X, beta0, keep_word_codes=True)
    batch, _, n_steps = update_dictionary(problem.loss, CorpusLayout(X), codes, beta0,
                                          max_iter=2, tol=0.0, means=result.means)
    assert n_steps == 2
    np.testing.assert_allclose(online, batch, rtol=1e-9, atol=1e-15)


def test_auto_batch_size_is_twenty_documents_a_topic_within_bounds():
    assert [STC(n_topics=K, batch_size="auto")._learning_options().batch_size
            for K in (1, 12, 13, 50, 204, 205, 1000)] == [256, 256, 260, 1000, 4080, 4096, 4096]
    assert STC(n_topics=50)._learning_options().batch_size == 1000  # the default is "auto"


def test_learning_rate_decays_as_documented():
    assert learning_rate(1, 10.0, 0.7) == pytest.approx(11 ** -0.7)
    rates = [learning_rate(t, 10.0, 0.7) for t in range(1, 50)]
    assert all(a > b for a, b in zip(rates, rates[1:]))


# ---- the estimator

@pytest.fixture(scope="module")
def batch_and_online(newsgroups):
    train, test = newsgroups
    batch = STC(**SMALL, max_iter=30).fit(train.data)
    online = STC(**SMALL, learning_method="online", batch_size=128, n_passes=3).fit(train.data)
    return batch, online


def test_online_reaches_the_batch_held_out_objective(batch_and_online, newsgroups):
    _, test = newsgroups
    batch, online = batch_and_online
    held_out_batch, held_out_online = -batch.score(test.data), -online.score(test.data)
    assert held_out_online <= 1.03 * held_out_batch
    # and it learned something: below a batch fit stopped after one iteration
    with pytest.warns(ConvergenceWarning):
        first = STC(**SMALL, max_iter=1).fit(newsgroups[0].data)
    assert held_out_online < -first.score(test.data)


# The sampling model's own weights (benchmarks/bench_scaling.py): the fit is the MAP
# estimate of the model the corpus came from, whose topics are known.
SAMPLING_WEIGHTS = dict(lambda_=0.03, gamma=10.0, rho=0.01, rho_units="absolute",
                        theta_penalty="l1")


@pytest.fixture(scope="module")
def sampled_corpus():
    from stc.datasets import make_stc_corpus

    return make_stc_corpus(5000, 1000, 80, document_length=100, topics_per_document=3,
                           random_state=5)


@pytest.mark.slow  # two fits at K = 80: about 40 s
def test_online_recovers_the_topics_batch_recovers(sampled_corpus):
    """On a corpus sampled from STC's model, online learning at the defaults (3 passes)
    finds the true topics as well as batch learning: the held-out objective alone did not
    see that online learning from document draws missed them
    (benchmarks/results_online_diagnosis.md): 0.776 here against batch's 0.836 at e1df41f
    (draws of the first batch, 256 a batch, tau0 = 10)."""
    from stc.datasets import topic_recovery

    X, truth = sampled_corpus.data, sampled_corpus.components
    batch = STC(n_topics=80, random_state=0, **SAMPLING_WEIGHTS).fit(X)
    online = STC(n_topics=80, random_state=0, learning_method="online",
                 **SAMPLING_WEIGHTS).fit(X)
    batch_recovery = topic_recovery(batch.components_, truth).mean_similarity
    online_recovery = topic_recovery(online.components_, truth).mean_similarity
    assert batch_recovery > 0.8  # the corpus is one whose topics batch learning finds
    assert online_recovery >= batch_recovery - 0.03


def test_online_topics_on_the_simplex_and_attributes(batch_and_online, newsgroups):
    _, online = batch_and_online
    assert_on_simplex(online.components_)
    n_docs = newsgroups[0].data.shape[0]
    assert online.n_iter_ == 3 and online.objective_.shape == (3,)
    # the module's fixture is fitted before this module's first_step_is_the_first_batch:
    # the first pass's first batches hold the default 4,000 documents (here all of them)
    n_batches = -(-n_docs // 128)
    joined = min(-(-4000 // 128), n_batches)
    assert online.n_batch_iter_ == 3 * n_batches - (joined - 1)
    assert online.online_responsibilities_.shape == online.components_.shape


def test_partial_fit_in_a_loop_reaches_the_batch_held_out_objective(batch_and_online,
                                                                   newsgroups):
    train, test = newsgroups
    batch, _ = batch_and_online
    model = STC(**SMALL)
    # the embedded corpus is sorted by class: shuffle it, as fit does
    X = train.data[np.random.default_rng(0).permutation(train.data.shape[0])]
    n_batches = 0
    for _ in range(3):
        for first in range(0, X.shape[0], 200):
            model.partial_fit(X[first:first + 200])
            n_batches += 1
            assert_on_simplex(model.components_)
    assert model.n_batch_iter_ == n_batches == model.n_iter_
    assert model.objective_.shape == (n_batches,)
    assert -model.score(test.data) <= 1.03 * -batch.score(test.data)


def test_fit_stream_equals_partial_fit_loop(newsgroups):
    train, _ = newsgroups
    batches = [train.data[i:i + 300] for i in range(0, 900, 300)]
    streamed = STC(**SMALL, learning_method="online", n_passes=2,
                   topic_averaging=0.0).fit_stream(batches)
    looped = STC(**SMALL)
    for _ in range(2):
        for batch in batches:
            looped.partial_fit(batch)
    np.testing.assert_array_equal(streamed.components_, looped.components_)
    assert streamed.n_iter_ == 2


@pytest.mark.parametrize("share, averaged", [(0.5, 2), (0.25, 1), (1.0, 4)])
def test_topic_averaging_is_the_mean_over_the_last_batches(newsgroups, share, averaged):
    """fit_stream's topics: the mean of the topics after the last batches of the last pass."""
    train, _ = newsgroups
    batches = [train.data[i:i + 150] for i in range(0, 600, 150)]
    streamed = STC(**SMALL, n_passes=2, topic_averaging=share).fit_stream(batches)
    looped, after = STC(**SMALL), []
    for _ in range(2):
        for batch in batches:
            after.append(looped.partial_fit(batch).components_.copy())
    np.testing.assert_allclose(streamed.components_, np.mean(after[-averaged:], axis=0),
                               rtol=1e-13, atol=1e-17)
    assert_on_simplex(streamed.components_)
    # the statistics are the last batch's, as without averaging
    np.testing.assert_array_equal(streamed.online_code_sums_, looped.online_code_sums_)
    # a stream of unknown length is averaged from its second pass on (counted in the first)
    generated = STC(**SMALL, n_passes=2, topic_averaging=share).fit_stream(
        _Reiterable(batches))
    np.testing.assert_array_equal(generated.components_, streamed.components_)


def test_first_step_grows_with_the_square_of_the_topics(newsgroups, monkeypatch):
    """The first step holds 4,000 documents up to 50 topics, (K / 50) ** 2 times that above,
    at most 16,000; fit_stream joins its first batches until they hold that many for its K."""
    monkeypatch.undo()  # this module's fixture: the defaults
    assert [online.first_step_documents(k) for k in (1, 20, 50, 75, 100, 101, 1000)] == [
        4000, 4000, 4000, 9000, 16000, 16000, 16000]
    monkeypatch.setattr(online, "FIRST_STEP_DOCUMENTS", 100)
    monkeypatch.setattr(online, "FIRST_STEP_FROM_TOPICS", 2)
    train, _ = newsgroups
    batches = [train.data[i:i + 150] for i in range(0, 1200, 150)]
    params = dict(SMALL, n_topics=5, n_passes=1, topic_averaging=0.0)  # 100 x (5 / 2) ** 2 = 625
    streamed = STC(**params).fit_stream(batches)
    looped = STC(**params)
    for batch in [sp.vstack(batches[:5], format="csr")] + batches[5:]:  # 750 >= 625
        looped.partial_fit(batch)
    assert streamed.n_batch_iter_ == looped.n_batch_iter_ == 4
    np.testing.assert_array_equal(streamed.components_, looped.components_)


def test_fit_in_memory_joins_its_first_batches(newsgroups, monkeypatch):
    """An in-memory fit's first pass starts with one step of its first shuffled batches
    joined, as fit_stream's does; the later passes keep every batch."""
    monkeypatch.setattr(online, "FIRST_STEP_DOCUMENTS", 400)
    sizes, step = [], online.stc_batch_step

    def recorded(problem, X, *args):
        sizes.append(X.shape[0])
        return step(problem, X, *args)

    monkeypatch.setattr(online, "stc_batch_step", recorded)
    model = STC(**SMALL, learning_method="online", batch_size=150, n_passes=2).fit(
        newsgroups[0].data[:1000])
    # 7 batches a pass, the last of 100 documents; the first three (450 >= 400) joined
    assert sizes == [450, 150, 150, 150, 100] + [150] * 6 + [100]
    assert model.n_batch_iter_ == 5 + 7
    assert online.batch_bounds(1000, 150, 3)[:2] == [(0, 450), (450, 600)]
    assert online.batch_bounds(1000, 150, 7) == [(0, 1000)]
    # uneven batches (a dask array's rounds): the fewest that hold the 400 documents
    assert online.first_step_batches([100, 399, 400, 900], 5) == 3
    assert online.first_step_batches([100, 250], 5) == 2
    assert online.first_step_batches([500, 900], 5) == 1


@pytest.mark.parametrize("reiterable", [False, True])
def test_fit_stream_joins_its_first_batches(newsgroups, monkeypatch, reiterable):
    """The first pass's first batches are joined until they hold FIRST_STEP_DOCUMENTS
    documents: fit_stream is then a partial_fit loop over those steps, and the topic
    averaging counts the last pass's steps (known in advance for batches with a len,
    counted in the first pass for others)."""
    assert online.FIRST_STEP_DOCUMENTS == 1  # this module's fixture; the default is larger
    monkeypatch.setattr(online, "FIRST_STEP_DOCUMENTS", 400)
    train, _ = newsgroups
    batches = [train.data[i:i + 150] for i in range(0, 900, 150)]
    given = _Reiterable(batches) if reiterable else batches
    streamed = STC(**SMALL, n_passes=2, topic_averaging=0.5).fit_stream(given)
    first_pass = [sp.vstack(batches[:3], format="csr")] + batches[3:]  # 450 >= 400 documents
    looped, after = STC(**SMALL), []
    for batch in first_pass + batches:
        after.append(looped.partial_fit(batch).components_.copy())
    assert streamed.n_batch_iter_ == looped.n_batch_iter_ == 4 + 6
    np.testing.assert_allclose(streamed.components_, np.mean(after[-3:], axis=0),
                               rtol=1e-13, atol=1e-17)
    np.testing.assert_array_equal(streamed.online_code_sums_, looped.online_code_sums_)
    # one pass: the averaging counts its steps (without a len, one pass is not averaged)
    once = STC(**SMALL, n_passes=1, topic_averaging=0.5).fit_stream(given)
    np.testing.assert_allclose(once.components_,
                               after[3] if reiterable else np.mean(after[2:4], axis=0),
                               rtol=1e-13, atol=1e-17)
    # a stream shorter than that is one step in the first pass
    short = STC(**SMALL, n_passes=2, topic_averaging=0.0).fit_stream(batches[:2])
    assert short.n_batch_iter_ == 1 + 2


class _Reiterable:
    """An iterable without len(): each iteration yields the batches again."""

    def __init__(self, batches):
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)


def test_one_shot_generator_needs_one_pass(newsgroups):
    train, _ = newsgroups
    gen = (train.data[i:i + 300] for i in range(0, 600, 300))
    with pytest.raises(TypeError, match="n_passes"):
        STC(**SMALL, n_passes=2).fit_stream(gen)
    gen = (train.data[i:i + 300] for i in range(0, 600, 300))
    assert STC(**SMALL, n_passes=1).fit_stream(gen).n_batch_iter_ == 2


@pytest.mark.parametrize("n_jobs", [2, -1])
def test_online_is_deterministic_across_thread_counts(newsgroups, n_jobs):
    train, _ = newsgroups
    params = dict(SMALL, learning_method="online", batch_size=200, n_passes=1)
    one = STC(**params, n_jobs=1).fit(train.data)
    many = STC(**params, n_jobs=n_jobs).fit(train.data)
    np.testing.assert_array_equal(one.components_, many.components_)
    np.testing.assert_array_equal(one.objective_, many.objective_)


def test_partial_fit_continues_a_batch_fit(newsgroups):
    train, _ = newsgroups
    with pytest.warns(ConvergenceWarning):
        model = STC(**SMALL, max_iter=3).fit(train.data)
    assert not hasattr(model, "online_responsibilities_")
    model.partial_fit(train.data[:100])
    assert model.n_batch_iter_ == 1
    assert_on_simplex(model.components_)


def test_online_progress_lines(newsgroups, capsys):
    train, _ = newsgroups
    STC(**SMALL, learning_method="online", batch_size=300, n_passes=2, verbose=2).fit(
        train.data[:900])
    err = capsys.readouterr().err
    assert "pass 1/2  batch    1/3" in err and "pass 2/2 done" in err
    assert "objective per document" in err and "left ~" in err


@pytest.mark.parametrize("params, error, name", [
    (dict(learning_method="stochastic"), ValueError, "learning_method"),
    (dict(batch_size=0), ValueError, "batch_size"),
    (dict(batch_size=2.5), TypeError, "batch_size"),
    (dict(learning_decay=0.4), ValueError, "learning_decay"),
    (dict(learning_decay=1.5), ValueError, "learning_decay"),
    (dict(learning_offset=-1.0), ValueError, "learning_offset"),
    (dict(n_passes=0), ValueError, "n_passes"),
    (dict(topic_averaging=1.5), ValueError, "topic_averaging"),
    (dict(topic_averaging=-0.1), ValueError, "topic_averaging"),
])
def test_bad_online_parameters(newsgroups, params, error, name):
    with pytest.raises(error, match=name):
        STC(**{**SMALL, "learning_method": "online", **params}).fit(newsgroups[0].data)


def test_online_refuses_a_loss_without_the_mm_step(newsgroups):
    X = newsgroups[0].data[:50]
    with pytest.raises(ValueError, match="learning_method='batch'"):
        STC(**SMALL, loss="gaussian", learning_method="online").fit(X)
    with pytest.raises(ValueError, match="MM dictionary step"):
        STC(**SMALL, loss="gaussian").partial_fit(X)


def test_partial_fit_refuses_another_width(newsgroups):
    X = newsgroups[0].data
    model = STC(**SMALL).partial_fit(X[:50])
    with pytest.raises(ValueError, match="features"):
        model.partial_fit(X[:50, :-1])


# ---- chunked readers

def stacked(batches):
    return sp.vstack(list(batches), format="csr")


@pytest.mark.parametrize("batch_size", [1, 7, 250, 10 ** 6])
def test_svmlight_batches_are_the_whole_file(tmp_path, newsgroups, batch_size):
    train, _ = newsgroups
    X = train.data[:600]
    path = tmp_path / "train.svm"
    dump_svmlight_file(X, np.zeros(X.shape[0]), str(path), zero_based=True)
    whole = stc.readers.read_svmlight(path, train.vocabulary).data
    reader = stc.readers.iter_svmlight_batches(path, batch_size, train.vocabulary)
    batches = list(reader)
    assert all(b.shape[0] <= batch_size for b in batches)
    assert (stacked(batches) != whole).nnz == 0 and stacked(batches).shape == whole.shape
    assert (stacked(reader) != whole).nnz == 0  # iterable again
    # without a vocabulary the width is the largest index + 1, as the whole-file reader
    plain = stc.readers.iter_svmlight_batches(path, batch_size)
    assert stacked(plain).shape == stc.readers.read_svmlight(path).data.shape


@pytest.mark.parametrize("batch_size", [1, 9, 250, 10 ** 6])
def test_matrix_market_batches_are_the_whole_file(tmp_path, newsgroups, batch_size):
    train, _ = newsgroups
    X = train.data[:600].tolil()
    X[5] = 0  # an empty document inside
    X[599] = 0  # and at the end
    X = X.tocsr()
    X.eliminate_zeros()
    path = tmp_path / "train.mtx"
    scipy.io.mmwrite(str(path), X)
    whole = stc.readers.read_matrix_market(path).data
    batches = list(stc.readers.iter_batches(path, batch_size))
    assert [b.shape[0] for b in batches] == [min(batch_size, 600 - i)
                                             for i in range(0, 600, batch_size)]
    assert stacked(batches).shape == whole.shape and (stacked(batches) != whole).nnz == 0


def test_matrix_market_out_of_row_order_is_refused(tmp_path):
    path = tmp_path / "bad.mtx"
    path.write_text("%%MatrixMarket matrix coordinate integer general\n3 4 3\n"
                    "2 1 1\n1 2 1\n3 3 2\n")
    with pytest.raises(ValueError, match="row order"):
        list(stc.readers.iter_matrix_market_batches(path, 2))
    dense = tmp_path / "dense.mtx"
    scipy.io.mmwrite(str(dense), np.ones((2, 2)))
    with pytest.raises(ValueError, match="coordinate general"):
        stc.readers.iter_matrix_market_batches(dense, 2)
    with pytest.raises(ValueError, match="batch_size"):
        stc.readers.iter_svmlight_batches(path, 0)


def test_fit_stream_from_a_file_in_chunks(tmp_path, newsgroups):
    train, _ = newsgroups
    X = train.data[:600]
    path = tmp_path / "train.svm"
    dump_svmlight_file(X, np.zeros(X.shape[0]), str(path), zero_based=True)
    reader = stc.readers.iter_svmlight_batches(path, 200, n_features=X.shape[1])
    from_file = STC(**SMALL, n_passes=2).fit_stream(reader)
    in_memory = STC(**SMALL, n_passes=2).fit_stream([X[i:i + 200] for i in range(0, 600, 200)])
    np.testing.assert_array_equal(from_file.components_, in_memory.components_)


@brief_fit
def test_partial_fit_goes_on_after_any_fit_and_keeps_its_topics(newsgroups):
    X = newsgroups[0].data[::8]
    # init plays no part in going on: an NNDSVD start was refused
    batch = STC(n_topics=3, init="nndsvd", max_iter=3, random_state=0).fit(X)
    batch.partial_fit(X[:50])
    assert batch.n_batch_iter_ == 1 and batch.objective_.shape == (1,)
    # another n_topics cannot take effect on a fitted model: it was ignored silently
    batch.set_params(n_topics=4)
    with pytest.raises(ValueError, match=r"^n_topics=4, but the model has 3 topics"):
        batch.partial_fit(X[:50])
    # rho changed between batches: effective_rho_ (the objective's weight) follows
    before = batch.effective_rho_
    batch.set_params(n_topics=3, rho=0.5).partial_fit(X[:50])
    assert batch.effective_rho_ == pytest.approx(before * 0.5 / 0.02, rel=1e-12)
    # after an online fit of several batches a pass, objective_ counts partial_fit's batches
    online = STC(n_topics=3, learning_method="online", batch_size=100, n_passes=2,
                 random_state=0).fit(X)
    online.partial_fit(X[:50]).partial_fit(X[50:100])
    assert online.objective_.shape == (2,) and online.n_iter_ == online.n_batch_iter_


@brief_fit
def test_batches_without_a_word_are_skipped(newsgroups):
    # a step on an empty batch only shrank the running statistics (20 such batches left
    # 0.77 % of them); a batch of 0 rows got scikit-learn's "Found array with 0 sample(s)",
    # and a stream starting with empty documents was refused
    X = newsgroups[0].data[::8]
    empty, no_rows = sp.csr_matrix((5, X.shape[1])), sp.csr_matrix((0, X.shape[1]))
    plain = STC(**SMALL).partial_fit(X[:60]).partial_fit(X[60:120])
    skipping = STC(**SMALL).partial_fit(X[:60])
    for _ in range(3):
        skipping.partial_fit(empty).partial_fit(no_rows)
    skipping.partial_fit(X[60:120])
    np.testing.assert_array_equal(skipping.components_, plain.components_)
    assert skipping.n_batch_iter_ == plain.n_batch_iter_ == 2
    stream = STC(**SMALL, n_passes=2, topic_averaging=0).fit_stream([X[:60], X[60:120]])
    padded = STC(**SMALL, n_passes=2, topic_averaging=0).fit_stream(
        [no_rows, empty, X[:60], empty, X[60:120]])
    np.testing.assert_array_equal(padded.components_, stream.components_)
    with pytest.raises(ValueError, match="^batches yielded no word to learn from"):
        STC(**SMALL).fit_stream([empty, no_rows])
    with pytest.raises(ValueError, match="^X has no non-zero entry"):
        STC(**SMALL).partial_fit(empty)
