"""MedSTC: labels, prediction, the shifted mean through the shared kernel, objective (4)."""
import numpy as np
import pytest

import scipy.sparse as sp

from stc import MedSTC
from stc._core.reference import theta_update
from stc._estimators import medstc as medstc_module
from stc._learning.coding import CodingProblem, code_documents, initial_codes
from stc._learning.coding import iteration_problem
from stc._learning.dictionary import initial_dictionary
from stc._learning.dictionary import CorpusLayout
from stc._learning.supervised.labelled_batch import (ShiftedMeanCodingStep, SVMStep,
                                                     medstc_objective, shifted_mean_term)
from stc._learning.supervised.svm import primal_objective
from stc._learning.training import TrainingState
from stc.datasets import load_newsgroups_split
from stc.losses import PoissonLoss

from conftest import brief_fit


def as_csr(X):
    """CSR with sorted int32 indices, as the estimators pass it to the kernels."""
    X = sp.csr_matrix(X, dtype=np.float64, copy=True)
    X.sort_indices()
    X.indices = X.indices.astype(np.intc)
    X.indptr = X.indptr.astype(np.intc)
    return X


@pytest.fixture(scope="module")
def corpus():
    train, test = load_newsgroups_split()
    rng = np.random.default_rng(0)  # the splits are ordered by group: sample across groups
    tr = np.sort(rng.choice(train.data.shape[0], 400, replace=False))
    te = np.sort(rng.choice(test.data.shape[0], 200, replace=False))
    return train.data[tr], train.target[tr], test.data[te], test.target[te]


@brief_fit
def test_fit_predict_with_string_labels(corpus):
    X, y, Xt, yt = corpus
    names = np.array(["graphics", "hockey", "space"])[y]
    model = MedSTC(n_topics=6, C=10.0, max_iter=5, random_state=0, n_jobs=2).fit(X, names)
    assert list(model.classes_) == ["graphics", "hockey", "space"]
    pred = model.predict(Xt)
    assert set(pred) <= set(model.classes_)
    assert model.decision_function(Xt).shape == (Xt.shape[0], 3)
    # well above chance (1/3) on held-out documents
    assert model.score(Xt, np.array(["graphics", "hockey", "space"])[yt]) > 0.6


@brief_fit
def test_non_contiguous_integer_labels_and_two_classes(corpus):
    X, y, Xt, yt = corpus
    keep = y < 2
    labels = np.where(y[keep] == 0, 7, 42)
    model = MedSTC(n_topics=4, max_iter=3, random_state=0).fit(X[keep], labels)
    assert set(model.predict(Xt)) <= {7, 42}


@brief_fit
def test_objective_4_never_increases_and_is_recorded(corpus):
    X, y, _, _ = corpus
    model = MedSTC(n_topics=6, C=10.0, max_iter=8, tol=0, random_state=0).fit(X, y)
    assert model.objective_.shape == (model.n_iter_,) == model.hinge_.shape
    rises = np.diff(model.objective_) / np.abs(model.objective_[:-1])
    assert np.all(rises <= 1e-9), rises


@brief_fit
def test_shift_enters_theta_closed_form_through_the_kernel(corpus):
    """With a linear term b_d, theta is the footnote-3 (l2) / eq.-3 (l1) form of the shifted mean."""
    X, y, _, _ = corpus
    model = MedSTC(n_topics=5, max_iter=2, random_state=0).fit(X, y)
    beta = model.components_
    Xv = as_csr(X)
    codes, theta = initial_codes(Xv, 5)
    shift = shifted_mean_term(model.coef_, theta, y, model.C, model.cost)
    for penalty in ("l1", "l2"):
        c, t = codes.copy(), theta.copy()
        problem = CodingProblem(PoissonLoss(), 0.1, 0.1, 0.01, penalty, "l1", max_iter=3, tol=0)
        code_documents(problem, Xv, beta, c, t, theta_linear=shift)
        lengths = np.diff(Xv.indptr)
        mean_code = np.add.reduceat(c, Xv.indptr[:-1])[lengths > 0] / lengths[lengths > 0, None]
        expected = theta_update(mean_code, shift[lengths > 0], lengths[lengths > 0, None],
                                     0.1, 0.1, 0 if penalty == "l1" else 1)
        np.testing.assert_allclose(t[lengths > 0], expected, rtol=1e-12, atol=1e-12)


def test_bad_labels_are_refused(corpus):
    X, y, _, _ = corpus
    with pytest.raises(ValueError, match="2 classes"):
        MedSTC(n_topics=2, max_iter=2).fit(X, np.zeros(X.shape[0]))
    with pytest.raises(ValueError, match="one label per document"):
        MedSTC(n_topics=2, max_iter=2).fit(X, y[:-1])
    with pytest.raises(ValueError, match="C must be"):
        MedSTC(n_topics=2, C=0.0).fit(X, y)


def _segment_problem(X, K, seed):
    """Random topics, old and new codes (some word codes zero) and their ends' values."""
    from stc._learning.coding import document_objectives
    from stc._learning.supervised.labelled_batch import SegmentEnd

    rng = np.random.default_rng(seed)
    beta = rng.dirichlet(np.ones(X.shape[1]), K)
    old = (rng.uniform(0, 2, (X.nnz, K)), rng.uniform(0, 2, (X.shape[0], K)))
    new = (rng.uniform(0, 2, (X.nnz, K)), rng.uniform(0, 2, (X.shape[0], K)))
    new[0][rng.random(new[0].shape) < 0.3] = 0.0
    new[0][:, 0] += 0.1  # every mean positive: finite ends

    def end(problem, codes, theta):
        objective, loss = document_objectives(problem, X, beta, codes, theta)
        return SegmentEnd(objective, loss, np.sum(codes * beta.T[X.indices], axis=1))

    return beta, old, new, end


@pytest.mark.parametrize("theta_pen, code_pen", [("l1", "l1"), ("l2", "l2"), ("l2", "l1")])
def test_segment_screen_estimates_objective_2_along_the_segment(corpus, theta_pen, code_pen):
    """Means linear in t and a quadratic penalty: the screen's estimate is objective (2) along
    the segment and its loss part, to rounding far inside the size it reports."""
    from stc._learning.coding import segment_objectives
    from stc._learning.supervised.labelled_batch import SCREEN_RTOL, SegmentScreen

    X = as_csr(corpus[0][:80])
    beta, old, new, end = _segment_problem(X, 5, 11)
    problem = CodingProblem(PoissonLoss(), 0.2, 0.3, 0.05, theta_pen, code_pen)
    old_end, new_end = end(problem, *old), end(problem, *new)
    rows = np.arange(X.shape[0], dtype=np.intp)
    screen = SegmentScreen(problem, X, old, new, old_end, new_end, rows)
    for step in (0.0, 0.125, 0.3, 0.5, 1.0):
        exact, exact_loss = segment_objectives(problem, X, beta, old[0], new[0], old[1],
                                               new[1], rows, np.full(rows.size, step))
        objective, loss, size = screen.estimate(rows, step)
        np.testing.assert_allclose(objective, exact, rtol=1e-12)
        np.testing.assert_allclose(loss, exact_loss, rtol=1e-12)
        assert np.all(np.abs(objective - exact) < 1e-3 * SCREEN_RTOL * size)
        assert np.all(size >= np.abs(exact))


def test_halvings_take_the_same_steps_with_and_without_the_screen(corpus, monkeypatch):
    """Judged on the estimates where they clear the bound, exactly where they do not: the
    same steps as exact evaluation everywhere, objective values equal to rounding, and
    exact evaluations only for the points near their bound (here: the ties)."""
    from stc._learning.supervised import labelled_batch as steps_module

    X = as_csr(corpus[0][:120])
    beta, old, new, end = _segment_problem(X, 4, 5)
    problem = CodingProblem(PoissonLoss(), 0.2, 0.3, 0.05)
    old_end, new_end = end(problem, *old), end(problem, *new)
    rng = np.random.default_rng(0)
    hinge = rng.uniform(0, 1, X.shape[0])

    def hinge_share(theta_rows, rows):
        return hinge[rows] * theta_rows.sum(axis=1)

    # Each document's bound is its exact value at a drawn trial step (a tie, which the rule
    # accepts), or below all of them, or above all of them: every outcome occurs.
    rows = np.arange(X.shape[0], dtype=np.intp)
    values = []
    for step in (0.5, 0.25, 0.125):
        trial, _ = steps_module.segment_objectives(problem, X, beta, old[0], new[0], old[1],
                                                   new[1], rows, np.full(rows.size, step))
        values.append(trial + hinge_share(old[1] + step * (new[1] - old[1]), rows))
    values = np.array(values)
    target = rng.integers(0, 5, X.shape[0])
    old_total = np.select([target < 3, target == 3],
                          [values[np.minimum(target, 2), rows], values.min(axis=0) - 1],
                          values.max(axis=0) + 1)

    def halve(screened):
        pending = np.ones(X.shape[0], dtype=bool)
        ends = (old_end, new_end) if screened else (old_end._replace(means=None), new_end)
        return steps_module.halve_rejected_steps(problem, X, beta, old, new, *ends, old_total,
                                                 pending, hinge_share) + (pending,)

    evaluated = []
    real = steps_module.segment_objectives
    monkeypatch.setattr(steps_module, "segment_objectives",
                        lambda *a, **k: evaluated.append(a[7].size) or real(*a, **k))
    taken, objective, loss, pending = halve(True)
    n_screened = len(evaluated)
    without = halve(False)
    assert taken.tobytes() == without[0].tobytes()
    assert pending.tobytes() == without[3].tobytes()
    np.testing.assert_allclose(objective, without[1], rtol=1e-12)
    np.testing.assert_allclose(loss, without[2], rtol=1e-12)
    assert {0.0, 0.5, 0.25, 0.125} <= set(taken)  # every outcome occurs
    ties = np.count_nonzero((target < 3) & (taken > 0))
    assert 0 < sum(evaluated[:n_screened]) <= ties < sum(evaluated[n_screened:])


def test_segment_objectives_match_the_objective_at_formed_codes(corpus):
    """The safeguard's compiled evaluation at old + t (new - old) equals objective (2) there."""
    from stc._core._segments import move_along_segments
    from stc._core.reference import document_objective
    from stc._learning.coding import segment_objectives

    X, _, _, _ = corpus
    Xv = as_csr(X[:60])
    K = 4
    rng = np.random.default_rng(3)
    beta = rng.dirichlet(np.ones(Xv.shape[1]), K)
    beta_t = np.ascontiguousarray(beta.T)
    old_codes, old_theta = rng.uniform(0, 2, (Xv.nnz, K)), rng.uniform(0, 2, (Xv.shape[0], K))
    new_codes, new_theta = rng.uniform(0, 2, (Xv.nnz, K)), rng.uniform(0, 2, (Xv.shape[0], K))
    new_codes[rng.random(new_codes.shape) < 0.3] = 0.0
    rows = np.array([0, 5, 17, 59], dtype=np.intp)
    steps = np.array([0.0, 0.25, 0.5, 1.0])
    doc_of_entry = np.repeat(np.arange(Xv.shape[0]), np.diff(Xv.indptr))
    for theta_pen, code_pen in (("l1", "l1"), ("l2", "l2"), ("l2", "l1")):
        problem = CodingProblem(PoissonLoss(), 0.2, 0.3, 0.05, theta_pen, code_pen)
        obj, recon = segment_objectives(problem, Xv, beta, old_codes, new_codes, old_theta,
                                        new_theta, rows, steps)
        t_entry = steps[np.searchsorted(rows, doc_of_entry)][:, None]
        codes = old_codes + t_entry * (new_codes - old_codes)
        theta = old_theta + steps[np.searchsorted(rows, np.arange(Xv.shape[0]))][:, None] * (
            new_theta - old_theta)
        means = np.sum(codes * beta.T[Xv.indices], axis=1)
        expected, expected_recon = document_objective(PoissonLoss(), Xv, doc_of_entry, means,
                                                      codes, theta, None, problem.params)
        np.testing.assert_allclose(obj, expected[rows], rtol=1e-12)
        np.testing.assert_allclose(recon, expected_recon[rows], rtol=1e-12)
    codes, theta = new_codes.copy(), new_theta.copy()
    means = np.full(Xv.nnz, -1.0)
    move_along_segments(Xv, beta_t, (old_codes, old_theta), (codes, theta), means, rows, steps)
    for d, t in zip(rows, steps):
        span = slice(Xv.indptr[d], Xv.indptr[d + 1])
        np.testing.assert_allclose(codes[span], old_codes[span] + t * (new_codes[span]
                                                                        - old_codes[span]))
        np.testing.assert_allclose(theta[d], old_theta[d] + t * (new_theta[d] - old_theta[d]))
    assert np.array_equal(codes[Xv.indptr[0]:Xv.indptr[1]], old_codes[Xv.indptr[0]:Xv.indptr[1]])
    others = np.setdiff1d(np.arange(Xv.shape[0]), rows)
    assert np.array_equal(theta[others], new_theta[others])
    # the moved documents' means are recomputed, the others are left alone
    moved_entries = np.isin(doc_of_entry, rows)
    np.testing.assert_allclose(means[moved_entries],
                               np.sum(codes * beta.T[Xv.indices], axis=1)[moved_entries],
                               rtol=1e-13)
    assert np.all(means[~moved_entries] == -1.0)


@brief_fit
def test_objective_4_never_increases_with_a_pure_python_loss(corpus):
    """The safeguard's numpy path (pure-Python loss) keeps objective (4) monotone too."""
    from conftest import NumpyPoisson

    X, y, _, _ = corpus
    model = MedSTC(n_topics=4, C=10.0, max_iter=5, tol=0, random_state=0,
                   loss=NumpyPoisson()).fit(X[:150], y[:150])
    rises = np.diff(model.objective_) / np.abs(model.objective_[:-1])
    assert np.all(rises <= 1e-9), rises
    assert model.objective_[-1] < model.objective_[0]


@brief_fit
def test_refit_C_is_the_svm_on_label_free_training_codes(corpus):
    """The final step refits eta on transform(X) (codes without labels), nothing else."""
    from stc._learning.supervised.svm import CuttingPlaneSVM
    from stc._learning.supervised.svm import primal_objective

    X, y, _, _ = corpus
    params = dict(n_topics=5, C=1000.0, lambda_=1.0, max_iter=3, random_state=0, n_jobs=2)
    joint = MedSTC(refit_C=None, **params).fit(X, y)
    assert joint.coef_ is joint.joint_coef_ and joint.refit_train_accuracy_ is None
    refit = MedSTC(refit_C=1e5, **params).fit(X, y)
    # the loop is untouched by the final step
    np.testing.assert_array_equal(refit.joint_coef_, joint.coef_)
    np.testing.assert_array_equal(refit.components_, joint.components_)
    np.testing.assert_array_equal(refit.objective_, joint.objective_)
    theta = joint.transform(X)
    svm = CuttingPlaneSVM(C=1e5, cost=joint.cost, tol=joint.svm_tol,
                          max_iter=joint.svm_max_iter).fit(theta, y)
    np.testing.assert_array_equal(refit.coef_, svm.coef_)
    assert refit.refit_train_accuracy_ == np.mean(refit.predict(X) == y)
    # coef_ solves the SVM on the label-free codes to the cutting-plane guarantee,
    # so the loop's eta cannot do better there
    gap = 1.01 * 1e5 * joint.svm_tol * joint.cost
    assert primal_objective(refit.coef_, theta, y, 1e5, joint.cost) <= \
        primal_objective(refit.joint_coef_, theta, y, 1e5, joint.cost) + gap


@brief_fit
def test_auto_refit_C_follows_the_scale_of_the_codes(corpus):
    """refit_C="auto": C = REFIT_C_SCALE / mean_d ||theta_d||^2 of the label-free training codes.

    The SVM on (a theta, C / a^2) is the SVM on (theta, C) with eta / a (the same
    predictions, tests/test_svm.py), so the rule makes the refit independent of the codes'
    scale: codes a times larger get C / a^2 (exactly, for a a power of two).
    """
    X, y, _, _ = corpus
    params = dict(n_topics=4, C=1000.0, lambda_=1.0, max_iter=2, random_state=0)
    auto = MedSTC(**params).fit(X, y)
    assert auto.refit_C == "auto"
    theta = auto.transform(X)
    expected = medstc_module.REFIT_C_SCALE / np.mean(np.sum(theta ** 2, axis=1))
    assert auto.refit_C_ == pytest.approx(expected, rel=1e-12)
    fixed = MedSTC(refit_C=auto.refit_C_, **params).fit(X, y)
    np.testing.assert_array_equal(fixed.coef_, auto.coef_)
    assert fixed.refit_C_ == auto.refit_C_
    for a in (2.0 ** -10, 2.0 ** 6):
        assert medstc_module.auto_refit_C(a * theta) == auto.refit_C_ / a ** 2
    assert medstc_module.auto_refit_C(np.zeros((3, 2))) == medstc_module.REFIT_C_SCALE
    none = MedSTC(refit_C=None, **params).fit(X, y)
    assert none.refit_C_ is None


@pytest.mark.parametrize("bad", [0.0, -1.0, np.inf, "big", "Auto"])
def test_bad_refit_C_is_refused(corpus, bad):
    X, y, _, _ = corpus
    with pytest.raises((ValueError, TypeError), match="refit_C"):
        MedSTC(n_topics=2, max_iter=1, refit_C=bad).fit(X, y)


def test_rejected_documents_back_off_exponentially():
    """A document rejected r times in a row sits out min(2^(r-1), 8) iterations."""
    step = ShiftedMeanCodingStep(problem=None, svm_step=None, n_docs=2)
    coded_at = []
    for iteration in range(2, 40):
        active = step.documents_to_code(iteration)
        if active[0]:
            coded_at.append(iteration)
        step._record_outcome(np.array([True, False]))  # doc 0 always rejected, doc 1 never
        assert active[1]
    gaps = np.diff(coded_at) - 1  # iterations sat out between two tries
    np.testing.assert_array_equal(gaps, [1, 2, 4, 8, 8, 8][:gaps.size])
    assert gaps.size >= 5
    # an accepted step resets the back-off
    step.documents_to_code(coded_at[-1] + 9)
    step._record_outcome(np.array([False, False]))
    assert step.documents_to_code(coded_at[-1] + 10)[0]


@brief_fit
def test_skipped_documents_are_left_untouched_by_the_coding_step(corpus):
    """A document sitting out (back-off) keeps its codes; the others are coded with the
    shifted mean, and the step's objective terms match objective (4) at the new codes."""
    X, y, _, _ = corpus
    model = MedSTC(n_topics=4, max_iter=2, refit_C=None, random_state=0).fit(X, y)
    Xv = as_csr(X)
    problem = model._coding_problem()
    svm_step = SVMStep(model.C, model.cost, model.svm_tol, model.svm_max_iter, y)
    svm_step.coef = model.coef_.copy()
    step = ShiftedMeanCodingStep(problem, svm_step, Xv.shape[0])
    codes, theta = initial_codes(Xv, 4)
    code_documents(problem, Xv, model.components_, codes, theta)  # label-free codes
    state = TrainingState(Xv, CorpusLayout(Xv), model.components_.copy(), codes, theta)
    before = (codes.copy(), theta.copy())
    skipped = np.zeros(Xv.shape[0], dtype=bool)
    skipped[::3] = True
    step.next_try[skipped] = 10  # sit out until iteration 10
    terms, means = step(state, 2)
    assert step.skipped[-1] == skipped.sum()
    entries = np.repeat(skipped, np.diff(Xv.indptr))
    np.testing.assert_array_equal(codes[entries], before[0][entries])
    np.testing.assert_array_equal(theta[skipped], before[1][skipped])
    moved = np.any(theta != before[1], axis=1)
    # coded documents move unless the safeguard rejected their step (old codes kept)
    assert 0 < moved[~skipped].sum() == (~skipped).sum() - step.reverted[-1]
    np.testing.assert_allclose(means, np.sum(codes * model.components_.T[Xv.indices], axis=1),
                               rtol=1e-12)
    # the terms besides the loss, plus the loss at the new codes and the SVM block,
    # are objective (4) at the new codes
    recon = float(np.sum(PoissonLoss().loss(Xv.data, means)))
    objective_4 = medstc_objective(problem, Xv, model.components_, codes, theta, svm_step.coef,
                                   y, model.C, model.cost)
    svm_block = primal_objective(svm_step.coef, theta, y, model.C, model.cost)
    assert terms + recon + svm_block == pytest.approx(objective_4, rel=1e-12)


@brief_fit
def test_recorded_objective_is_objective_4(corpus):
    """objective_ holds (4) at the fitted topics, codes and classifier of each iteration:
    checked at the last one by recomputing it from scratch on a loop run to completion."""
    X, y, _, _ = corpus
    model = MedSTC(n_topics=4, max_iter=1, refit_C=None, random_state=0).fit(X, y)
    # one iteration: codes from the all-ones start, no classifier in the coding step
    Xv = as_csr(X)
    problem = model._coding_problem()
    codes, theta = initial_codes(Xv, 4)
    # the iteration's coding step: sweeps_per_iteration sweeps (the default, 2)
    code_documents(iteration_problem(problem, model.sweeps_per_iteration), Xv,
                   initial_dictionary(Xv, 4, 0), codes, theta)
    value = medstc_objective(problem, Xv, model.components_, codes, theta, model.joint_coef_,
                             y, model.C, model.cost)
    assert model.objective_[0] == pytest.approx(value, rel=1e-10)


@brief_fit
def test_l1_theta_penalty_with_a_large_C_stays_finite_and_monotone(corpus):
    """With the l1 penalty on theta, the linearised hinge can make a document's coding
    problem unbounded (its codes run off); the safeguard must reject such codes, so
    that the fit neither fails nor lets objective (4) rise."""
    X, y, Xt, yt = corpus
    # (before the fix: "the poisson loss is not finite" from the dictionary step)
    model = MedSTC(n_topics=6, theta_penalty="l1", C=1e4, lambda_=0.1, max_iter=6, tol=0,
                   refit_C=None, random_state=0).fit(X, y)
    assert np.all(np.isfinite(model.objective_))
    rises = np.diff(model.objective_) / np.abs(model.objective_[:-1])
    assert np.all(rises <= 1e-9), rises
    assert model.rejected_steps_.shape == model.objective_.shape
    assert model.rejected_steps_.sum() > 0  # the unbounded steps were met and rejected
    assert np.all(np.isfinite(model.transform(Xt)))
    assert model.score(Xt, yt) > 0.6
