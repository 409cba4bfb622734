"""MedSTC's steps of the alternating loop (paper Sec. 3, problem (4)).

`stc._learning.training.alternate` runs them, through a learner (`stc._learning.learners.batch` in
memory, given `LabelledBatchSteps`; `stc._learning.learners.dask_batch` on a dask array,
whose partitions run `ShiftedMeanCodingStep` where the documents are:
`stc._learning.supervised.labelled_dask`):

  1. `ShiftedMeanCodingStep`: STC's compiled kernel with theta's shifted mean
     (`shifted_mean_term`), a per-document safeguard and back-off;
  2. the dictionary step (STC's);
  3. `SVMStep`: the 1-slack cutting-plane multi-class SVM on the training codes.

The coding step sees the classifier through a `HingeTerm`: eta, the labels of
the documents it codes and the weight C / D of each document's hinge, D the
number of documents of the whole corpus (a partition holds only some of them).
"""
from typing import NamedTuple

import numpy as np
from sklearn.utils.multiclass import check_classification_targets

from stc._core._segments import move_along_segments, segment_curvatures, segment_losses
from stc._core._dense import row_products
from stc._core._word_codes import SparseWordCodes
from stc._learning.coding import (code_documents, iteration_problem, segment_objectives,
                                  stc_objective, transposed)
from stc._learning.learners import LearningSteps
from stc._learning.progress import step_capped_documents
from stc._learning.supervised.svm import (CuttingPlaneSVM, loss_augmented_predict,
                                          multiclass_hinge, primal_objective, sample_hinges)
from stc._utils.labels import check_labels

# refit_C="auto": the refit's C is REFIT_C_SCALE / mean_d ||theta_d||^2 over the label-free
# training codes. The SVM on codes a theta with C / a^2 is the SVM on theta with C (eta / a,
# the same predictions), so C times the codes' mean squared norm is what carries over
# between corpora and settings. The constant is that product for the C that
# cross-validation chose at the defaults, K = 50 (docs/algorithms.md, "Choosing MedSTC's
# parameters"; the codes' scale there and the C "auto" gives: docs/results.md, "MedSTC").
REFIT_C_SCALE = 5e6

# The safeguard's halvings estimate each trial point's objective from the means and
# penalties at the segment's ends (`SegmentScreen`), exact but for rounding (~1e-14 of the
# sizes involved). A point is judged on the estimate when it clears the bound by more than
# this share of those sizes either way, so the judgement is the exact value's; only the
# points closer to the bound are evaluated exactly (`segment_objectives`).
SCREEN_RTOL = 1e-9
MAX_HALVINGS = 3  # backtracking steps of the safeguard


def refit_C_of_scale(mean_square_norm):
    """The refit's C for ``refit_C="auto"`` given mean_d ||theta_d||^2 of the label-free codes."""
    return REFIT_C_SCALE / mean_square_norm if mean_square_norm > 0.0 else REFIT_C_SCALE


def class_indices(y, n_docs, classes=None, name="y"):
    """(classes, class index of each label): MedSTC's check of labels ``y``, one per document.

    ``classes`` None takes them from ``y`` (at least two); given (sorted, as
    `np.unique` returns them), every label must be one of them. ``n_docs``
    None: the number of documents is not known yet (a dask array of unknown
    chunk sizes); the learner checks it.
    """
    if y is None:
        raise ValueError(f"MedSTC needs the labels {name}, one per document; got None")
    y = np.asarray(y)
    if y.ndim != 1 or (n_docs is not None and y.shape[0] != n_docs):
        raise ValueError(f"{name} must be 1-D with one label per document "
                         f"({'one per row of X' if n_docs is None else n_docs}), "
                         f"got shape {y.shape}")
    check_labels(y, name)
    check_classification_targets(y)
    if classes is None:
        classes = np.unique(y)
        if classes.size < 2:
            raise ValueError(f"MedSTC needs at least 2 classes in {name}, got {classes.size}")
    index = np.searchsorted(classes, y)
    index[index >= classes.size] = 0
    unseen = classes[index] != y
    if unseen.any():
        raise ValueError(f"{name} holds labels not in classes (the classes given to the "
                         f"first call): {np.unique(y[unseen])[:5]!r}")
    return classes, index.astype(np.intp)


def shifted_mean_term(W, theta, y_index, C, cost, n_docs=None):
    """Linear term b_d = (C / D) (eta_{y_d} - eta_{yhat_d}) of each document-code step.

    With it, the theta closed form of the kernel becomes the paper's shifted
    mean (Sec. 3): the loss-augmented label yhat_d is fixed at the current
    theta_d, and the hinge is replaced by its piece for yhat_d. D is
    ``n_docs``, by default the rows of ``theta`` (a partition gives the corpus's).
    """
    y_hat = loss_augmented_predict(W, theta, y_index, cost)
    D = theta.shape[0] if n_docs is None else n_docs
    return (C / D) * (W[y_index] - W[y_hat])


def medstc_objective(problem, X, beta, codes, theta, W, y_index, C, cost, n_jobs=None):
    """Objective (4) of the paper: objective (2) + C R_h(W; theta) + ||W||^2 / 2."""
    return (stc_objective(problem, X, beta, codes, theta, n_jobs)
            + primal_objective(W, theta, y_index, C, cost))


class SegmentEnd(NamedTuple):
    """Objective (2) of each document at one end of its backtracking segment."""

    objective: np.ndarray  # objective (2), per document
    loss: np.ndarray       # its loss part
    means: np.ndarray      # the means of every stored entry (None: not known)


class SegmentScreen:
    """Objective (2) along the safeguard's segments from the values at their ends.

    Along old + t (new - old) a mean is linear in t and the penalties of (2) are a
    quadratic (`segment_curvatures`), so a trial point's objective follows from the
    means and values at the ends in one pass over the document's entries instead of
    its K codes per entry (as `segment_objectives` reads them). The two differ by
    rounding only; `estimate` also returns its size, for the margin.
    """

    def __init__(self, problem, X, old, new, old_end, new_end, rows, n_jobs=None):
        self.loss, self.X, self.n_jobs = problem.loss, X, n_jobs
        self.old_means, self.new_means = old_end.means, new_end.means
        self.curvature = np.zeros(X.shape[0])
        with np.errstate(invalid="ignore", over="ignore"):  # codes that ran off: NaN
            self.start_penalty = old_end.objective - old_end.loss
            self.end_penalty = new_end.objective - new_end.loss
            self.curvature[rows] = segment_curvatures(problem.params, X, old, new, rows, n_jobs)

    def estimate(self, rows, step):
        """(objective (2), its loss part, the size of their rounding) of ``rows`` at ``step``."""
        loss, scale = segment_losses(self.loss, self.X, self.old_means, self.new_means, rows,
                                     np.full(rows.size, step), self.n_jobs)
        p0, p1, q = self.start_penalty[rows], self.end_penalty[rows], self.curvature[rows]
        with np.errstate(invalid="ignore", over="ignore"):
            objective = loss + (p0 + step * (p1 - p0 - q) + step * step * q)
            return objective, loss, scale + np.abs(p0) + np.abs(p1) + np.abs(q)


def halve_rejected_steps(problem, X, beta, old, new, old_end, new_end, old_total, pending,
                         hinge_share, n_jobs=None, beta_t=None):
    """The safeguard's backtracking: per document, the first of steps 1/2, 1/4, 1/8 that helps.

    ``old`` and ``new`` are (word codes, theta) at the segment's ends, ``old_end``
    and ``new_end`` their `SegmentEnd`; ``pending`` (updated in place) marks the
    documents whose full step (t = 1) raised their share of objective (4) above
    ``old_total``; ``hinge_share(theta_rows, rows)`` is that share's hinge part.
    A pending document takes the first step t whose objective (2) plus hinge share
    is at most ``old_total``; with none it keeps its old codes (t = 0).
    Returns (t, objective (2), its loss part) per document at the chosen points.
    With a compiled loss and the means at both ends, trial points are judged on
    `SegmentScreen`'s estimates where those clear the bound by more than their
    rounding margin (SCREEN_RTOL), and evaluated exactly otherwise. ``beta_t``:
    `stc._learning.coding.transposed` (beta), if the caller has it.
    """
    old_codes, old_theta = old
    codes, theta = new
    steps = np.ones(X.shape[0])
    objective, loss = new_end.objective.copy(), new_end.loss.copy()
    screen = None
    step = 1.0
    for _ in range(MAX_HALVINGS):
        if not pending.any():
            break
        step *= 0.5
        rows = np.flatnonzero(pending)
        hinge = hinge_share(old_theta[rows] + step * (theta[rows] - old_theta[rows]), rows)
        if screen is None and problem.loss.runs_in_kernel and old_end.means is not None:
            screen = SegmentScreen(problem, X, old, new, old_end, new_end, rows, n_jobs)
        if screen is not None:
            trial_obj, trial_loss, size = screen.estimate(rows, step)
            bound = old_total[rows]
            with np.errstate(invalid="ignore", over="ignore"):
                margin = SCREEN_RTOL * (size + np.abs(bound) + np.abs(hinge))
                clear = trial_obj + hinge <= bound - margin
                unclear = ~clear & ~(trial_obj + hinge > bound + margin)  # NaN included
            accepted = rows[clear]
            steps[accepted] = step
            objective[accepted] = trial_obj[clear]
            loss[accepted] = trial_loss[clear]
            pending[accepted] = False
            rows, hinge = rows[unclear], hinge[unclear]
            if rows.size == 0:
                continue
        trial_obj, trial_loss = segment_objectives(problem, X, beta, old_codes, codes,
                                                   old_theta, theta, rows,
                                                   np.full(rows.size, step), n_jobs,
                                                   beta_t=beta_t)
        better = trial_obj + hinge <= old_total[rows]
        accepted = rows[better]
        steps[accepted] = step
        objective[accepted] = trial_obj[better]
        loss[accepted] = trial_loss[better]
        pending[accepted] = False
    steps[pending] = 0.0  # no decreasing step: keep the old codes exactly
    objective[pending] = old_end.objective[pending]
    loss[pending] = old_end.loss[pending]
    return steps, objective, loss


class HingeTerm:
    """The classifier as the coding step sees it: eta, the documents' labels and C / D.

    ``y_index`` holds the labels of the documents coded (all of them, or a
    partition's); ``n_docs`` is D, the number of documents of the whole
    corpus, whose hinge (4) averages over (by default, those of ``y_index``).
    ``coef`` is eta, None before the first SVM step.
    """

    def __init__(self, C, cost, y_index, n_docs=None):
        self.C, self.cost, self.y_index = C, cost, y_index
        self.n_docs = y_index.shape[0] if n_docs is None else n_docs
        self.coef = None  # eta, read by the coding step through the shifted mean

    def shifted_mean_term(self, theta):
        """The coding step's linear term, or None before the first classifier exists."""
        if self.coef is None:
            return None
        return shifted_mean_term(self.coef, theta, self.y_index, self.C, self.cost,
                                 self.n_docs)

    def hinge_shares(self, theta, rows=None):
        """Each document's share (C / D) h_d of the hinge term of (4)."""
        y_index = self.y_index if rows is None else self.y_index[rows]
        return (self.C / self.n_docs) * sample_hinges(self.coef, theta, y_index, self.cost)


class SVMStep(HingeTerm):
    """The classifier step of problem (4): the cutting-plane SVM on the current codes.

    The new eta is kept only if it lowers the SVM block of (4) (so (4) never
    increases). Returns the block's value, C R_h + ||eta||^2 / 2.
    """

    def __init__(self, C, cost, tol, max_iter, y_index):
        super().__init__(C, cost, y_index)
        self.svm = CuttingPlaneSVM(C=C, cost=cost, tol=tol, max_iter=max_iter, warm_start=True)
        self.hinge, self.accuracy = [], []

    def __call__(self, state, iteration):
        theta = state.theta
        self.svm.fit(theta, self.y_index)
        candidate = self.svm.coef_
        if self.coef is None or primal_objective(candidate, theta, self.y_index, self.C,
                                                 self.cost) \
                <= primal_objective(self.coef, theta, self.y_index, self.C, self.cost):
            self.coef = candidate.copy()
        self.hinge.append(multiclass_hinge(self.coef, theta, self.y_index, self.cost))
        self.accuracy.append(float(np.mean(np.argmax(row_products(theta, self.coef), axis=1)
                                           == self.y_index)))
        return self.C * self.hinge[-1] + 0.5 * float(np.sum(self.coef * self.coef))


class ShiftedMeanCodingStep:
    """MedSTC's coding step: STC coding with theta's shifted mean, safeguarded.

    The shifted mean fixes the loss-augmented label before the theta step, so
    that step minimises a lower bound of the hinge (one of its pieces) and
    can raise objective (4). `safeguard` therefore compares, per document,
    objective (2) plus the document's hinge share before and after coding,
    and moves back towards the old codes where the new ones are worse: with
    the exact dictionary step and the SVM step (kept only if it lowers the
    SVM block), objective (4) never increases.
    """

    MAX_BACKOFF = 8  # longest sit-out of a repeatedly rejected document, in iterations

    def __init__(self, problem, svm_step, n_docs, n_jobs=None, sweeps=None):
        self.problem = iteration_problem(problem, sweeps)
        self.svm_step, self.n_jobs, self.sweeps = svm_step, n_jobs, sweeps
        self.n_docs = n_docs
        self.reverted, self.shortened, self.skipped = [], [], []
        # Back-off for documents whose supervised coding step was rejected
        # (see `documents_to_code`): consecutive rejections, next iteration to try.
        self.rejections = np.zeros(n_docs, dtype=np.int64)
        self.next_try = np.zeros(n_docs, dtype=np.int64)
        self.saved = None  # buffers for the codes before a supervised step (reused)
        self.active, self.iteration = None, 0

    def __call__(self, state, iteration):
        if isinstance(state.codes, SparseWordCodes):
            # the safeguard's segment kernels read and write dense (nnz, K) codes
            state.codes = state.codes.toarray()
        theta_linear = self.svm_step.shifted_mean_term(state.theta)
        beta_t = transposed(state.beta)  # read by every call below, the topics fixed
        if theta_linear is None:  # first iteration: no classifier yet, plain STC coding
            result = code_documents(self.problem, state.X, state.beta, state.codes,
                                    state.theta, n_jobs=self.n_jobs, beta_t=beta_t)
            state.capped_documents = step_capped_documents(result, self.problem, self.sweeps)
            return float(np.sum(result.objective) - np.sum(result.loss)), result.means
        if self.saved is None:
            self.saved = (np.empty_like(state.codes), np.empty_like(state.theta))
        np.copyto(self.saved[0], state.codes)
        np.copyto(self.saved[1], state.theta)
        result = code_documents(self.problem, state.X, state.beta, state.codes, state.theta,
                                theta_linear=theta_linear,
                                active=self.documents_to_code(iteration), n_jobs=self.n_jobs,
                                keep_start_means=True, beta_t=beta_t)
        state.capped_documents = step_capped_documents(result, self.problem, self.sweeps)
        # The linear term is not part of problem (2): add it back.
        doc_obj = result.objective + np.sum(theta_linear * state.theta, axis=1)
        old_obj = result.start_objective + np.sum(theta_linear * self.saved[1], axis=1)
        doc_obj, doc_loss = self.safeguard(
            state, result.means, SegmentEnd(doc_obj, result.loss, result.means),
            SegmentEnd(old_obj, result.start_loss, result.start_means), beta_t)
        return float(np.sum(doc_obj) - np.sum(doc_loss)), result.means

    def documents_to_code(self, iteration):
        """Which documents the supervised coding step of ``iteration`` codes.

        Late in training the safeguard rejects the shifted-mean codes of most
        documents (the linearised hinge is a poor model at the kinks where
        trained documents sit), and coding them again with a slightly changed
        classifier is mostly rejected again. A document whose step was
        rejected r times in a row therefore sits out the next
        min(2^(r-1), MAX_BACKOFF) iterations with its codes unchanged (a
        block left as it is: objective (4) still cannot increase); any
        accepted step resets r.
        """
        self.iteration = iteration
        self.active = self.next_try <= iteration
        self.skipped.append(int(self.n_docs - np.count_nonzero(self.active)))
        return self.active

    def _record_outcome(self, rejected):
        coded = self.active
        self.rejections[coded & ~rejected] = 0
        now_rejected = coded & rejected
        self.rejections[now_rejected] += 1
        wait = np.minimum(2 ** (self.rejections[now_rejected] - 1), self.MAX_BACKOFF)
        self.next_try[now_rejected] = self.iteration + 1 + wait

    def safeguard(self, state, means, new_end, old_end, beta_t):
        """Keep, per document, a point that does not raise its share of objective (4).

        ``self.saved`` holds the codes before the coding step, ``old_end`` their
        objective (2), its loss part and means (with the current topics);
        ``state.codes``, ``state.theta``, ``means`` (updated in place) and
        ``new_end`` describe the new codes; ``beta_t`` is the topics
        transposed (`stc._learning.coding.transposed`). Where the shifted-mean codes are
        worse than the old ones, step back along the segment from the old codes
        to the new ones (`halve_rejected_steps`): the set of codes is convex and
        so is the document's part of (4), and the new codes lower objective (2)
        plus the hinge piece of the loss-augmented label, which is the active
        piece at the old codes, so short steps often decrease (4). Documents
        with no decreasing step keep their old codes. The trial points are
        evaluated without being formed; only the chosen one is written.
        Returns objective (2) and its loss part per document at the kept codes.
        """
        old_codes, old_theta = self.saved
        X, codes, theta = state.X, state.codes, state.theta
        old_total = old_end.objective + self.svm_step.hinge_shares(old_theta)
        # "not <=" also catches a non-finite new objective: with the l1 penalty on
        # theta the linearised hinge can make the coding problem unbounded, and
        # such codes run off to infinity (see `MedSTC`, theta_penalty).
        pending = ~(new_end.objective + self.svm_step.hinge_shares(theta) <= old_total)
        n_worse = int(np.sum(pending))
        steps, doc_obj, doc_loss = halve_rejected_steps(
            self.problem, X, state.beta, self.saved, (codes, theta), old_end, new_end,
            old_total, pending, self.svm_step.hinge_shares, self.n_jobs, beta_t)
        self._record_outcome(pending)
        moved = np.flatnonzero(steps < 1.0)
        move_along_segments(X, beta_t, (old_codes, old_theta), (codes, theta), means, moved,
                            steps[moved], self.n_jobs)
        self.reverted.append(int(np.sum(pending)))
        self.shortened.append(n_worse - self.reverted[-1])
        return doc_obj, doc_loss

    def describe(self, iteration):
        """Progress text: what the safeguard and the back-off did this iteration."""
        if iteration < 2 or not self.reverted:
            return ""
        return (f"  shortened {self.shortened[-1]} kept {self.reverted[-1]} "
                f"skipped {self.skipped[-1]} docs")


class LabelledBatchSteps(LearningSteps):
    """MedSTC's `LearningSteps` for batch learning in memory: its two steps, the refit.

    `stc._learning.learners.batch.learn` runs `ShiftedMeanCodingStep` (`coding_step`)
    and `SVMStep` (`extra_step`); `finish` stores the classifier and refits it
    (`refit_classifier`). ``model`` is the `MedSTC` being fitted, ``y_index``
    the class index of each document of the validated counts.
    """

    def __init__(self, model, classes, y_index, problem):
        self.classes, self.y_index = classes, y_index
        self.svm_tol, self.svm_max_iter, self.cost = model.svm_tol, model.svm_max_iter, model.cost
        self.svm_step = SVMStep(model.C, model.cost, model.svm_tol, model.svm_max_iter, y_index)
        self.shifted_mean_coding = ShiftedMeanCodingStep(
            problem, self.svm_step, y_index.shape[0], model.n_jobs, model.sweeps_per_iteration)
        self.theta = None

    def coding_step(self, engine):
        return self.shifted_mean_coding

    def extra_step(self, engine):
        return self.svm_step

    def describe(self, iteration):
        return self.shifted_mean_coding.describe(iteration)

    def finish(self, model, fitted, X, problem):
        store_classifier(model, self.classes, self.svm_step, self.shifted_mean_coding.reverted)
        refit_classifier(model, self, X, problem)

    def refit_codes(self, model, X, problem):
        """Code ``X`` without labels, as ``transform`` does; returns mean_d ||theta_d||^2."""
        self.theta = model.transform(X)
        theta = self.theta
        return float(np.mean(np.sum(theta * theta, axis=1))) if theta.size else 0.0

    def refit(self, C):
        """eta fitted with weight ``C`` on the codes of `refit_codes`; returns (eta, accuracy)."""
        theta = self.theta
        svm = CuttingPlaneSVM(C=C, cost=self.cost, tol=self.svm_tol,
                              max_iter=self.svm_max_iter).fit(theta, self.y_index)
        self.theta = None
        accuracy = float(np.mean(np.argmax(row_products(theta, svm.coef_), axis=1)
                                 == self.y_index))
        return svm.coef_, accuracy


def store_classifier(model, classes, svm_step, reverted):
    """The loop's classifier and its records (``svm_step``: eta, hinge, accuracy) on ``model``."""
    model.classes_ = classes
    model.joint_coef_ = svm_step.coef
    model.hinge_ = np.asarray(svm_step.hinge)
    model.train_accuracy_ = np.asarray(svm_step.accuracy)
    # iteration 1 codes without labels (no classifier yet): nothing to reject
    model.rejected_steps_ = np.asarray([0] + reverted[:model.n_iter_ - 1])


def refit_classifier(model, supervision, X, problem):
    """The refit after batch learning (``refit_C``), in memory or on Dask: ``coef_`` and more.

    ``supervision`` codes the training documents without labels
    (``refit_codes(model, X, problem)``, returning mean_d ||theta_d||^2) and fits eta on
    those codes (``refit(C)``); "auto" takes C from the codes' scale
    (`refit_C_of_scale`). Without a refit ``coef_`` is the loop's eta.
    """
    model.coef_, model.refit_train_accuracy_, model.refit_C_ = model.joint_coef_, None, None
    if model.refit_C is None:
        return
    mean_square_norm = supervision.refit_codes(model, X, problem)
    C = refit_C_of_scale(mean_square_norm) if model.refit_C == "auto" else float(model.refit_C)
    model.coef_, model.refit_train_accuracy_ = supervision.refit(C)
    model.refit_C_ = C
