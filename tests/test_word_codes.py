"""Sparse word codes: storage, conversions, and the same bits as dense codes in coding,
the dictionary step and whole fits."""
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import stc
from stc._core._word_codes import SparseWordCodes
from stc._learning.coding import (SPARSE_STORAGE_DENSITY, CodeStorage, CodingProblem,
                                  code_documents, code_new_documents, initial_codes,
                                  zero_code_fraction)
from stc._learning.dictionary import CorpusLayout, update_dictionary
from stc.losses import GaussianLoss, PoissonLoss


def random_codes(rng, lengths, n_topics, zero_share):
    """Dense codes for documents of the given lengths, with exact zeros (and a NaN)."""
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    codes = rng.gamma(1.0, size=(indptr[-1], n_topics))
    codes[rng.random(codes.shape) < zero_share] = 0.0
    return indptr, codes


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_topics=st.integers(1, 9),
       zero_share=st.sampled_from([0.0, 0.5, 0.9, 1.0]),
       lengths=st.lists(st.integers(0, 6), min_size=1, max_size=8))
def test_dense_codes_come_back_exactly(seed, n_topics, zero_share, lengths):
    rng = np.random.default_rng(seed)
    indptr, codes = random_codes(rng, lengths, n_topics, zero_share)
    if codes.size:
        codes.flat[rng.integers(codes.size)] = np.nan  # a NaN is a value, kept
    sparse = SparseWordCodes.from_dense(indptr, codes)
    assert sparse.shape == codes.shape
    np.testing.assert_array_equal(sparse.toarray(), codes)
    np.testing.assert_array_equal(np.asarray(sparse), codes)
    assert sparse.count_nonzero() == np.count_nonzero(codes)
    np.testing.assert_array_equal(sparse.counts, np.count_nonzero(codes, axis=1))
    for j in range(codes.shape[0]):
        np.testing.assert_array_equal(sparse.row(j), codes[j])
    for other in (sparse.copy(), pickle.loads(pickle.dumps(sparse))):
        np.testing.assert_array_equal(other.toarray(), codes)
    copy = sparse.copy()
    copy.assign(np.zeros_like(codes))  # the copy owns its rows
    np.testing.assert_array_equal(sparse.toarray(), codes)
    assert copy.count_nonzero() == 0


def test_start_value_rows_are_not_stored_and_read_as_the_value():
    codes = SparseWordCodes([0, 2, 2, 5], 4, 0.75)
    assert codes.count_nonzero() == 20 and codes.zero_fraction() == 0.0
    assert np.all(codes.counts == -1)
    assert codes.nbytes < 5 * 4 * 8  # an index only
    np.testing.assert_array_equal(codes.toarray(), np.full((5, 4), 0.75))
    zero = SparseWordCodes([0, 2, 5], 3)
    assert zero.count_nonzero() == 0 and zero.zero_fraction() == 1.0
    np.testing.assert_array_equal(zero.toarray(), np.zeros((5, 3)))


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="indptr"):
        SparseWordCodes([1, 2], 3)
    with pytest.raises(ValueError, match="indptr"):
        SparseWordCodes([0, 3, 2], 3)
    with pytest.raises(ValueError, match="n_topics"):
        SparseWordCodes([0, 2], 0)
    codes = SparseWordCodes([0, 2], 3)
    with pytest.raises(ValueError, match=r"shape \(2, 3\)"):
        codes.assign(np.zeros((2, 4)))
    with pytest.raises(IndexError):
        codes.row(2)


def small_corpus(seed=0, n_docs=40, n_features=30, n_topics=6):
    rng = np.random.default_rng(seed)
    X = sp.random(n_docs, n_features, density=0.3, random_state=seed, format="csr",
                  data_rvs=lambda n: rng.integers(1, 5, n).astype(float))
    X.indices = X.indices.astype(np.int32)
    X.indptr = X.indptr.astype(np.int32)
    beta = rng.gamma(1.0, size=(n_topics, n_features))
    beta /= beta.sum(axis=1, keepdims=True)
    return X, beta


@pytest.mark.parametrize("loss", [PoissonLoss(), GaussianLoss()], ids=["poisson", "gaussian"])
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_coding_with_sparse_codes_gives_the_bits_of_dense_codes(loss, n_jobs):
    """Warm coding calls, one after the other, from the same start: codes, theta, means and
    objectives equal bit for bit whether the word codes are stored dense or sparse."""
    X, beta = small_corpus(1)
    problem = CodingProblem(loss, lambda_=0.1, gamma=0.05, rho=0.3, max_iter=2)
    dense, theta_d = initial_codes(X, beta.shape[0])
    sparse, theta_s = initial_codes(X, beta.shape[0], sparse=True)
    for _ in range(3):
        a = code_documents(problem, X, beta, dense, theta_d, n_jobs=n_jobs)
        b = code_documents(problem, X, beta, sparse, theta_s, n_jobs=n_jobs)
        np.testing.assert_array_equal(sparse.toarray(), dense)
        np.testing.assert_array_equal(theta_s, theta_d)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    assert 0 < sparse.count_nonzero() < dense.size  # the penalty made zeros
    # new documents: the sparse codes they keep are the dense ones
    theta_a, codes_a, _ = code_new_documents(problem, X, beta, keep_word_codes=True)
    theta_b, codes_b, _ = code_new_documents(problem, X, beta, keep_word_codes="sparse")
    np.testing.assert_array_equal(theta_a, theta_b)
    np.testing.assert_array_equal(codes_b.toarray(), codes_a)


@pytest.mark.parametrize("n_topics", [1, 5, 64, 67, 130])
def test_coded_documents_are_stored_sparse_exactly_for_any_number_of_topics(n_topics):
    """The coding kernel's store marks non-zero codes 64 topics per mask, four topics a pass:
    one group, a partial last pass and several groups all store the dense codes exactly."""
    X, beta = small_corpus(2, n_docs=25, n_features=40, n_topics=n_topics)
    problem = CodingProblem(PoissonLoss(), lambda_=0.1, gamma=0.05, rho=0.3, max_iter=2)
    dense, theta_d = initial_codes(X, n_topics)
    sparse, theta_s = initial_codes(X, n_topics, sparse=True)
    code_documents(problem, X, beta, dense, theta_d, n_jobs=2)
    code_documents(problem, X, beta, sparse, theta_s, n_jobs=2)
    np.testing.assert_array_equal(sparse.toarray(), dense)
    np.testing.assert_array_equal(sparse.counts, np.count_nonzero(dense, axis=1))
    assert 0 < sparse.count_nonzero() < dense.size or n_topics == 1  # zeros were dropped


def test_codes_of_another_corpus_are_refused():
    X, beta = small_corpus(2)
    problem = CodingProblem(PoissonLoss(), lambda_=0.1, gamma=0.05, rho=0.3)
    _, theta = initial_codes(X, beta.shape[0])
    wrong = SparseWordCodes(np.array([0, X.nnz]), beta.shape[0], 1.0)
    with pytest.raises(ValueError, match="word codes of X's documents"):
        code_documents(problem, X, beta, wrong, theta)
    with pytest.raises(ValueError, match="keep_word_codes"):
        code_new_documents(problem, X, beta, keep_word_codes="dense")


def test_dictionary_step_on_sparse_codes_gives_the_bits_of_dense_codes():
    X, beta = small_corpus(3)
    problem = CodingProblem(PoissonLoss(), lambda_=0.1, gamma=0.05, rho=0.3, max_iter=3)
    dense, theta = initial_codes(X, beta.shape[0])
    code_documents(problem, X, beta, dense, theta)
    sparse = SparseWordCodes.from_dense(X.indptr, dense)
    layout = CorpusLayout(X)
    for method in ("mm", "pg"):
        from_dense = update_dictionary(PoissonLoss(), layout, dense, beta, method=method)
        from_sparse = update_dictionary(PoissonLoss(), layout, sparse, beta, method=method)
        np.testing.assert_array_equal(from_sparse[0], from_dense[0])
        assert from_sparse[1:] == from_dense[1:]


def test_batch_learning_keeps_its_word_codes_sparse_and_reports_their_zeros(capsys):
    """The batch learner's state starts with `SparseWordCodes` (the start value, unstored),
    ends in the storage the codes' density calls for, and the progress lines report their
    share of zeros."""
    from stc._learning.learners import LearningOptions, batch

    X = stc.STC()._validate_X(stc.datasets.load_newsgroups("train").data[:80], reset=True,
                              loss=PoissonLoss())
    problem = CodingProblem(PoissonLoss(), lambda_=0.5, gamma=0.05, rho=0.3, max_iter=2)
    state = batch.initial_state(X, problem.loss, 8, 0, "random")
    assert isinstance(state.codes, SparseWordCodes)
    assert state.codes.nbytes < X.nnz * 8 * 8  # the start value is not stored
    options = LearningOptions(n_topics=8, random_state=0, max_iter=3, tol=0.0, verbose=1)
    batch.learn(problem, X, options, state=state)
    captured = capsys.readouterr()
    lines = [line for line in (captured.out + captured.err).splitlines()
             if "word-code zeros" in line]
    assert len(lines) == 3
    share = zero_code_fraction(state.codes)
    assert 0.0 < share < 1.0
    assert isinstance(state.codes, SparseWordCodes) == (1.0 - share <= SPARSE_STORAGE_DENSITY)
    assert lines[-1].split("word-code zeros")[1].split()[0] == f"{share:.3f}"


def test_code_storage_follows_the_density_of_the_codes():
    """Sparse while at most SPARSE_STORAGE_DENSITY of the codes are non-zero; dense after two
    denser steps in a row (one dense step, as a fit's first, does not switch); the same
    values either way."""
    rng = np.random.default_rng(7)
    indptr, sparse_codes = random_codes(rng, [4, 3, 5], 10, 0.9)
    _, dense_codes = random_codes(rng, [4, 3, 5], 10, 0.2)
    storage = CodeStorage()
    first = storage(SparseWordCodes.from_dense(indptr, dense_codes), indptr)
    assert isinstance(first, SparseWordCodes)  # one dense step
    second = storage(first, indptr)
    assert isinstance(second, np.ndarray)
    np.testing.assert_array_equal(second, dense_codes)
    assert isinstance(storage(second, indptr), np.ndarray)
    back = storage(sparse_codes, indptr)
    assert isinstance(back, SparseWordCodes)
    np.testing.assert_array_equal(back.toarray(), sparse_codes)
    assert storage.dense_steps == 0


def test_a_dask_partition_stores_its_codes_as_the_in_memory_coding_step():
    """The workers' coding step keeps a partition's word codes in the storage their
    density calls for (`CodeStorage`), with the in-memory step's values bit for bit: dense
    codes switch to dense storage, sparse ones stay sparse."""
    from stc._learning.learners import batch
    from stc._learning.learners.dask_batch import _code, _start_codes
    from stc._learning.learners.partitions import Partition
    from stc._learning.training import CodingStep

    X = stc.STC()._validate_X(stc.datasets.load_newsgroups("train").data[:60], reset=True,
                              loss=PoissonLoss())
    for lambda_, dense_at_end in ((1e-3, True), (0.5, False)):
        problem = CodingProblem(PoissonLoss(), lambda_=lambda_, gamma=0.05,
                                rho=1e-3 if dense_at_end else 1.0, max_iter=2)
        state = batch.initial_state(X, problem.loss, 6, 0, "random")
        partition = Partition(X, problem.loss, X.shape[1])
        _start_codes(partition, 6, 1.0, None)
        partition.codes, partition.theta = state.codes.copy(), state.theta.copy()
        step = CodingStep(problem)
        for iteration in range(1, 4):
            step(state, iteration)
            _code(partition, problem, state.beta, None)
            assert type(partition.codes) is type(state.codes)
            np.testing.assert_array_equal(as_array(partition.codes), as_array(state.codes))
            np.testing.assert_array_equal(partition.theta, state.theta)
        assert isinstance(state.codes, np.ndarray) == dense_at_end


def as_array(codes):
    return codes.toarray() if isinstance(codes, SparseWordCodes) else codes


def test_a_view_of_dense_codes_reads_them_in_place():
    rng = np.random.default_rng(4)
    indptr, codes = random_codes(rng, [3, 0, 5], 4, 0.5)
    view = SparseWordCodes.view_of_dense(indptr, codes)
    assert view.is_view and not SparseWordCodes.from_dense(indptr, codes).is_view
    np.testing.assert_array_equal(view.toarray(), codes)
    np.testing.assert_array_equal(view.row(4), codes[4])
    assert view.count_nonzero() == np.count_nonzero(codes)
    codes[0, 0] = 7.0  # no copy: the view reads the array as it is now
    assert view.row(0)[0] == 7.0
    np.testing.assert_array_equal(view.copy().toarray(), codes)
    with pytest.raises(ValueError, match="view"):
        view.assign(codes)
    with pytest.raises(ValueError, match="view"):
        view.gathered(np.arange(8))
    with pytest.raises(ValueError, match="C-contiguous float64"):
        SparseWordCodes.view_of_dense(indptr, codes.astype(np.float32))
    X, beta = small_corpus(5)
    problem = CodingProblem(PoissonLoss(), lambda_=0.1, gamma=0.05, rho=0.3)
    dense, theta = initial_codes(X, beta.shape[0])
    with pytest.raises(ValueError, match="view"):
        code_documents(problem, X, beta, SparseWordCodes.view_of_dense(X.indptr, dense), theta)


@pytest.mark.parametrize("gather", [0.0, 1.0], ids=["in place", "gathered"])
def test_the_dictionary_step_reads_rows_in_place_or_gathered_with_the_same_bits(gather,
                                                                                 monkeypatch):
    """Sparse codes denser than `GATHER_DENSITY` are read in place, sparser ones gathered
    term by term: both give the dense codes' dictionary step bit for bit."""
    import stc._learning.dictionary as dictionary

    monkeypatch.setattr(dictionary, "GATHER_DENSITY", gather)
    X, beta = small_corpus(6)
    problem = CodingProblem(PoissonLoss(), lambda_=0.1, gamma=0.05, rho=0.3, max_iter=3)
    dense, theta = initial_codes(X, beta.shape[0])
    code_documents(problem, X, beta, dense, theta)
    layout = CorpusLayout(X)
    expected = update_dictionary(PoissonLoss(), CorpusLayout(X), dense, beta)
    got = update_dictionary(PoissonLoss(), layout,
                            SparseWordCodes.from_dense(X.indptr, dense), beta)
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1:] == expected[1:]
    assert (getattr(layout, "term_major", None) is not None) == (gather == 1.0)
