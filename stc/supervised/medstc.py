"""MedSTC: max-margin supervised sparse topical coding (paper Sec. 3, problem (4)).

Problem (4): minimise over topics, codes and the classifier eta

    objective (2)  +  C R_h(eta; theta)  +  1/2 ||eta||^2,
    R_h = (1/D) sum_d max_y [Delta(y_d, y) + eta_y . theta_d - eta_{y_d} . theta_d],

`medstc_objective` computes it. Training runs the batch learner
(`stc.learners.batch`, the outer loop `stc.training.alternate`) with two steps
of its own:
  1. `ShiftedMeanCodingStep`: the same compiled kernel as STC, with theta's
     shifted mean: each document-code step minimises its objective minus
     b_d . theta_d, b_d = (C / D) (eta_{y_d} - eta_{yhat_d}), where yhat_d is the
     loss-augmented prediction at the current theta_d (`shifted_mean_term`);
     a document whose new codes raise its share of (4) is moved back towards
     its old codes (`safeguard`), and a document rejected again and again sits
     out a few iterations (`documents_to_code`);
  2. the dictionary step (unchanged from STC);
  3. `SVMStep`: the 1-slack cutting-plane multi-class SVM on the training
     codes, warm-started from the previous iteration. Its classifier is the
     only thing that flows back into coding, through the shifted mean.
After the loop, eta is refitted on the training documents coded without
labels (``refit_C``; see `MedSTC`). Test documents are coded without labels
(plain STC coding) and classified by argmax_y eta_y . theta.
"""
import numbers
import time

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from stc._core._coding import move_along_segments
from stc._core._dense import row_products
from stc._persistence import register_estimator
from stc._stc import ONLINE_PARAMETERS, STC
from stc.distributed import is_dask_array
from stc._validation import (Interval, NoneValue, Options, check_fitted_finite, check_labels,
                             check_training_corpus)
from stc.coding import code_documents, segment_objectives, stc_objective
from stc.learners import batch
from stc.supervised.svm import (CuttingPlaneSVM, loss_augmented_predict, multiclass_hinge,
                                primal_objective, sample_hinges)
from stc.training import iteration_problem, step_capped_documents


# The SVM's dual variables lie on a simplex of radius C, which the projection
# (stc._core._simplex) takes below 1e300.
MAX_C = 1e300

# refit_C="auto": the refit's C is REFIT_C_SCALE / mean_d ||theta_d||^2 over the label-free
# training codes. The SVM on codes a theta with C / a^2 is the SVM on theta with C (eta / a,
# the same predictions), so C times the codes' mean squared norm is what carries over
# between corpora and settings. The constant is that product for the C = 3e6 chosen by
# cross-validation at the defaults on 20 Newsgroups, K = 50: mean ||theta_d||^2 = 1.669
# there, so "auto" gives 2.996e6 (docs/algorithms.md, "Choosing MedSTC's parameters").
REFIT_C_SCALE = 5e6


def auto_refit_C(theta):
    """The refit's C for ``refit_C="auto"``: REFIT_C_SCALE / mean_d ||theta_d||^2.

    All-zero codes give any classifier the same (zero) scores; C is then
    REFIT_C_SCALE itself.
    """
    mean_square_norm = float(np.mean(np.sum(theta * theta, axis=1))) if theta.size else 0.0
    return REFIT_C_SCALE / mean_square_norm if mean_square_norm > 0.0 else REFIT_C_SCALE


def shifted_mean_term(W, theta, y_index, C, cost):
    """Linear term b_d = (C / D) (eta_{y_d} - eta_{yhat_d}) of each document-code step.

    With it, the theta closed form of the kernel becomes the paper's shifted
    mean (Sec. 3): the loss-augmented label yhat_d is fixed at the current
    theta_d, and the hinge is replaced by its piece for yhat_d.
    """
    y_hat = loss_augmented_predict(W, theta, y_index, cost)
    return (C / theta.shape[0]) * (W[y_index] - W[y_hat])


def medstc_objective(problem, X, beta, codes, theta, W, y_index, C, cost, n_jobs=None):
    """Objective (4) of the paper: objective (2) + C R_h(W; theta) + ||W||^2 / 2."""
    return (stc_objective(problem, X, beta, codes, theta, n_jobs)
            + primal_objective(W, theta, y_index, C, cost))


class SVMStep:
    """The classifier step of problem (4): the cutting-plane SVM on the current codes.

    The new eta is kept only if it lowers the SVM block of (4) (so (4) never
    increases). Returns the block's value, C R_h + ||eta||^2 / 2.
    """

    def __init__(self, C, cost, tol, max_iter, y_index):
        self.C, self.cost, self.y_index = C, cost, y_index
        self.svm = CuttingPlaneSVM(C=C, cost=cost, tol=tol, max_iter=max_iter, warm_start=True)
        self.coef = None  # eta, read by the coding step through the shifted mean
        self.hinge, self.accuracy = [], []

    def shifted_mean_term(self, theta):
        """The coding step's linear term, or None before the first classifier exists."""
        if self.coef is None:
            return None
        return shifted_mean_term(self.coef, theta, self.y_index, self.C, self.cost)

    def hinge_shares(self, theta, rows=None):
        """Each document's share (C / D) h_d of the hinge term of (4)."""
        y_index = self.y_index if rows is None else self.y_index[rows]
        return (self.C / self.y_index.shape[0]) * sample_hinges(self.coef, theta, y_index,
                                                                self.cost)

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
    MAX_HALVINGS = 3  # backtracking steps of the safeguard

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
        theta_linear = self.svm_step.shifted_mean_term(state.theta)
        if theta_linear is None:  # first iteration: no classifier yet, plain STC coding
            result = code_documents(self.problem, state.X, state.beta, state.codes,
                                    state.theta, n_jobs=self.n_jobs)
            state.capped_documents = step_capped_documents(result, self.problem, self.sweeps)
            return float(np.sum(result.objective) - np.sum(result.loss)), result.means
        if self.saved is None:
            self.saved = (np.empty_like(state.codes), np.empty_like(state.theta))
        np.copyto(self.saved[0], state.codes)
        np.copyto(self.saved[1], state.theta)
        result = code_documents(self.problem, state.X, state.beta, state.codes, state.theta,
                                theta_linear=theta_linear,
                                active=self.documents_to_code(iteration), n_jobs=self.n_jobs)
        state.capped_documents = step_capped_documents(result, self.problem, self.sweeps)
        # The linear term is not part of problem (2): add it back.
        doc_obj = result.objective + np.sum(theta_linear * state.theta, axis=1)
        old_obj = result.start_objective + np.sum(theta_linear * self.saved[1], axis=1)
        doc_obj, doc_loss = self.safeguard(state, result.means, doc_obj, result.loss, old_obj,
                                           result.start_loss)
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

    def safeguard(self, state, means, doc_obj, doc_loss, old_obj, old_loss):
        """Keep, per document, a point that does not raise its share of objective (4).

        ``self.saved`` holds the codes before the coding step, ``old_obj`` and
        ``old_loss`` their objective (2) and its loss part (with the current
        topics); ``state.codes``, ``state.theta`` and ``means`` (updated in
        place) and ``doc_obj``, ``doc_loss`` describe the new codes.
        Where the shifted-mean codes are worse than the old ones, step back
        along the segment from the old codes to the new ones (halving the
        step): the set of codes is convex and so is the document's part of
        (4), and the new codes lower objective (2) plus the hinge piece of
        the loss-augmented label, which is the active piece at the old codes,
        so short steps often decrease (4). Documents with no decreasing
        step keep their old codes. The trial points are evaluated without
        being formed (`segment_objectives`); only the chosen one is written.
        """
        old_codes, old_theta = self.saved
        X, codes, theta = state.X, state.codes, state.theta
        n_docs = X.shape[0]
        old_total = old_obj + self.svm_step.hinge_shares(old_theta)
        # "not <=" also catches a non-finite new objective: with the l1 penalty on
        # theta the linearised hinge can make the coding problem unbounded, and
        # such codes run off to infinity (see `MedSTC`, theta_penalty).
        pending = ~(doc_obj + self.svm_step.hinge_shares(theta) <= old_total)
        n_worse = int(np.sum(pending))
        steps = np.ones(n_docs)
        step = 1.0
        for _ in range(self.MAX_HALVINGS):
            if not pending.any():
                break
            step *= 0.5
            rows = np.flatnonzero(pending)
            trial_obj, trial_loss = segment_objectives(
                self.problem, X, state.beta, old_codes, codes, old_theta, theta, rows,
                np.full(rows.size, step), self.n_jobs)
            trial_theta = old_theta[rows] + step * (theta[rows] - old_theta[rows])
            better = trial_obj + self.svm_step.hinge_shares(trial_theta, rows) <= old_total[rows]
            accepted = rows[better]
            steps[accepted] = step
            doc_obj[accepted] = trial_obj[better]
            doc_loss[accepted] = trial_loss[better]
            pending[accepted] = False
        steps[pending] = 0.0  # no decreasing step: keep the old codes exactly
        self._record_outcome(pending)
        doc_obj = np.where(pending, old_obj, doc_obj)
        doc_loss = np.where(pending, old_loss, doc_loss)
        moved = np.flatnonzero(steps < 1.0)
        move_along_segments(X.indptr, X.indices, np.ascontiguousarray(state.beta.T), old_codes,
                            codes, old_theta, theta, means, moved, steps[moved], self.n_jobs)
        self.reverted.append(int(np.sum(pending)))
        self.shortened.append(n_worse - self.reverted[-1])
        return doc_obj, doc_loss

    def describe(self, iteration):
        """Progress text: what the safeguard and the back-off did this iteration."""
        if iteration < 2 or not self.reverted:
            return ""
        return (f"  shortened {self.shortened[-1]} kept {self.reverted[-1]} "
                f"skipped {self.skipped[-1]} docs")


@register_estimator
class MedSTC(ClassifierMixin, STC):
    """Max-margin supervised STC: topics, codes and a multi-class SVM learned jointly.

    Minimises problem (4) of the paper: STC's objective (2) plus
    ``C`` times the averaged multi-class hinge loss of a linear classifier eta
    on the document codes, plus ``||eta||^2 / 2``. Parameters are those of
    `STC` (with ``max_iter`` defaulting to 20, ``lambda_`` to 30 and
    ``theta_penalty`` to ``"l2"``; ``gamma`` defaults to ``lambda_`` as in
    STC, and ``rho`` to 0.02 in relative units, as in STC), plus those below;
    its attributes are STC's plus those below.

    ``rho=0.02, rho_units="relative"`` is the knee of MedSTC's
    sparsity-accuracy frontier measured on 20 Newsgroups at K = 50: the
    sparsest setting within 2 points of the best accuracy (49 % zero test word
    codes at 0.798 accuracy, against 2.5 % at 0.816 with the paper's rho;
    ``benchmarks/results_sparsity.md``; the classifier refitted with
    ``refit_C=3e6`` there). The paper's parameterisation, the defaults
    before, is ``MedSTC(rho=0.01, rho_units="absolute",
    sweeps_per_iteration=None)``.

    Parameters
    ----------
    C : float, default=30000.0
        Weight of the averaged multi-class hinge loss. C and ``lambda_``
        have to grow together; the defaults of C, ``lambda_`` and refit_C were
        chosen together by cross-validation on the 20 Newsgroups training
        split at the paper's rho = 0.01 (see ``docs/algorithms.md``, "Choosing
        MedSTC's parameters"); the frontier's cross-validation (at rho =
        0.001 in relative units) chose the same C and ``lambda_``.
        The hinge is averaged over documents while objective (2) sums over
        them, so on a much larger or smaller corpus a C scaled with the
        number of documents is a natural first try. With
        ``theta_penalty="l1"`` a shifted-mean coding step can be unbounded
        (see ``docs/algorithms.md``); the safeguard rejects such steps,
        counted in ``rejected_steps_``.
    cost : float, default=3600.0
        Cost ell of a wrong label, Delta(y, y') = ell * 1[y != y'] (the
        paper's setting for MedSTC); the same parameter as
        `CuttingPlaneSVM`'s ``cost``.
    svm_tol : float, default=1e-3
        Cutting-plane tolerance, relative to ``cost``.
    svm_max_iter : int, default=1000
        Cutting-plane iterations per SVM step.
    sweeps_per_iteration : int or None, default=2
        As in `STC`: coding sweeps per document in each outer iteration
        (after the first, with the shifted mean; the safeguard judges the
        step the sweeps made). None codes every document until ``inner_tol``,
        the paper's step and the only one before this parameter. Chosen on a
        validation part of the 20 Newsgroups training split (K = 50, three
        seeds): 2 sweeps gave 0.868 accuracy against 0.859 for the exact step
        and 0.852 for one sweep, in about 80 % of the exact step's time.
    refit_C : "auto", float or None, default="auto"
        After the loop, the training documents are coded again without labels,
        exactly as `transform` codes new documents, and eta is refitted on
        those codes with this C; ``joint_coef_`` keeps the loop's eta. The
        loop's eta is trained on codes pulled towards their labels by the
        shifted mean, which test codes never get. ``"auto"`` follows the
        scale of the codes: C = REFIT_C_SCALE / mean_d ||theta_d||^2 over those
        codes (``REFIT_C_SCALE`` = 5e6, in ``stc.supervised.medstc``): at
        the paper's rho = 0.01 on 20 Newsgroups (K = 50) that is 2.996e6, the
        3e6 that cross-validation chose there. The value used is ``refit_C_``.
        Codes scaled by a then get C / a^2: the same classifier up to the
        factor 1 / a, and the same predictions, so the default needs no
        cross-validation per setting. A number is used as it is. None keeps
        the loop's eta (the paper's classifier).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (n_classes, n_topics)
        eta used by `predict`: the refitted one (``refit_C``), or the
        loop's one if ``refit_C`` is None.
    joint_coef_ : ndarray of shape (n_classes, n_topics)
        eta at the end of the alternating loop.
    objective_ : ndarray of shape (n_iter,)
        Objective (4) after each outer iteration (never increases).
    hinge_ : ndarray of shape (n_iter,)
        The averaged hinge loss R_h after each outer iteration.
    train_accuracy_ : ndarray of shape (n_iter,)
        Training accuracy of the loop's eta on the training codes per iteration.
    rejected_steps_ : ndarray of int, shape (n_iter,)
        Per outer iteration, the training documents whose supervised coding
        step the safeguard rejected (they kept their old codes).
    refit_train_accuracy_ : float or None
        Training accuracy of ``coef_`` on the label-free training codes
        (None if ``refit_C`` is None).
    refit_C_ : float or None
        The C the classifier was refitted with: ``refit_C``, or its value
        for ``"auto"`` (None if ``refit_C`` is None).

    Examples
    --------
    >>> from stc import MedSTC
    >>> from stc.datasets import load_newsgroups_split
    >>> train, test = load_newsgroups_split()
    >>> clf = MedSTC(n_topics=5, max_iter=3, random_state=0).fit(train.data, train.target)
    >>> clf.predict(test.data[:3]).shape
    (3,)
    """

    _parameter_constraints = {
        **{name: allowed for name, allowed in STC._parameter_constraints.items()
           if name not in ONLINE_PARAMETERS},
        "C": [Interval(numbers.Real, 0, MAX_C, closed="neither")],
        "cost": [Interval(numbers.Real, 0, None, closed="neither")],
        "svm_tol": [Interval(numbers.Real, 0, None, closed="neither")],
        "svm_max_iter": [Interval(numbers.Integral, 1, None)],
        "refit_C": [NoneValue(), Options("auto"),
                    Interval(numbers.Real, 0, MAX_C, closed="neither")],
    }

    def __init__(self, n_topics=20, *, C=30000.0, cost=3600.0, svm_tol=1e-3, svm_max_iter=1000,
                 refit_C="auto", lambda_=30.0, gamma=None, rho=0.02, rho_units="relative",
                 loss="poisson",
                 theta_penalty="l2", code_penalty="l1", max_iter=20, tol=1e-4,
                 inner_max_iter=50, inner_tol=1e-4, dictionary_max_iter=3,
                 sweeps_per_iteration=2, n_jobs=None, random_state=None, init="random",
                 verbose=0):
        super().__init__(n_topics=n_topics, lambda_=lambda_, gamma=gamma, rho=rho,
                         rho_units=rho_units, loss=loss,
                         theta_penalty=theta_penalty, code_penalty=code_penalty,
                         max_iter=max_iter, tol=tol, inner_max_iter=inner_max_iter,
                         inner_tol=inner_tol, dictionary_max_iter=dictionary_max_iter,
                         sweeps_per_iteration=sweeps_per_iteration,
                         n_jobs=n_jobs, random_state=random_state, init=init,
                         verbose=verbose)
        for name in ONLINE_PARAMETERS:  # STC's online learning is not MedSTC's
            delattr(self, name)
        self.C = C
        self.cost = cost
        self.svm_tol = svm_tol
        self.svm_max_iter = svm_max_iter
        self.refit_C = refit_C

    def fit(self, X, y):
        """Learn topics, codes and the classifier from counts ``X`` and labels ``y``."""
        start = time.perf_counter()
        loss = self._checked_loss()
        if is_dask_array(X):
            raise TypeError("MedSTC does not fit dask arrays (see 'MedSTC online and "
                            "distributed' in the algorithms page); compute X first")
        X = self._validate_X(X, reset=True, loss=loss)
        check_training_corpus(X)
        problem = self._set_count_scale(X)
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"y must be 1-D with one label per document ({X.shape[0]}), "
                             f"got shape {y.shape}")
        check_labels(y)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        if encoder.classes_.size < 2:
            raise ValueError("MedSTC needs at least 2 classes in y, got 1")
        y_index = encoder.transform(y)
        svm_step = SVMStep(self.C, self.cost, self.svm_tol, self.svm_max_iter, y_index)
        coding_step = ShiftedMeanCodingStep(problem, svm_step, X.shape[0], self.n_jobs,
                                            self.sweeps_per_iteration)
        self._forget_vocabulary()
        self._store_fitted(batch.learn(problem, X, self._learning_options(),
                                       coding_step=coding_step, extra_step=svm_step,
                                       describe=coding_step.describe))
        self.classes_ = encoder.classes_
        self.joint_coef_ = svm_step.coef
        self.hinge_ = np.asarray(svm_step.hinge)
        self.train_accuracy_ = np.asarray(svm_step.accuracy)
        # iteration 1 codes without labels (no classifier yet): nothing to reject
        self.rejected_steps_ = np.asarray([0] + coding_step.reverted[:self.n_iter_ - 1])
        self.coef_, self.refit_train_accuracy_, self.refit_C_ = self.joint_coef_, None, None
        if self.refit_C is not None:
            self.coef_, self.refit_train_accuracy_, self.refit_C_ = self._refit_classifier(
                X, y_index)
        self.fit_time_ = time.perf_counter() - start
        return self

    def _refit_svm(self, C):
        """The (unfitted) SVM of the final step, with weight ``C`` (see ``refit_C``)."""
        return CuttingPlaneSVM(C=C, cost=self.cost, tol=self.svm_tol, max_iter=self.svm_max_iter)

    def _refit_classifier(self, X, y_index):
        """eta refitted on the label-free codes of the training documents (``refit_C``).

        Returns (eta, its training accuracy, the C used).
        """
        theta = self.transform(X)
        C = auto_refit_C(theta) if self.refit_C == "auto" else float(self.refit_C)
        svm = self._refit_svm(C).fit(theta, y_index)
        accuracy = float(np.mean(np.argmax(row_products(theta, svm.coef_), axis=1) == y_index))
        return svm.coef_, accuracy, C

    def decision_function(self, X):
        """Scores eta_y . theta for every class, shape (n_docs, n_classes)."""
        check_is_fitted(self, "coef_")
        check_fitted_finite(self, "coef_")
        return row_products(self.transform(X), self.coef_)

    def predict(self, X):
        """Predicted labels: argmax_y eta_y . theta_d, with theta coded without labels."""
        check_is_fitted(self, "coef_")
        return self.classes_[np.argmax(self.decision_function(X), axis=1)]

    def fit_transform(self, X, y=None):
        raise AttributeError("MedSTC needs labels: use fit(X, y) then transform(X)")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.estimator_type = "classifier"
        return tags

    def partial_fit(self, X, y=None):
        """Not available: online learning is implemented for `STC` only.

        MedSTC's SVM step is trained on every training document's codes; see
        'MedSTC online and distributed' in the algorithms page for what an
        online version would need.
        """
        raise NotImplementedError("MedSTC has no online learning (partial_fit); use fit, or "
                                  "STC for online learning")

    def fit_stream(self, batches, y=None):
        """Not available: online learning is implemented for `STC` only (see `partial_fit`)."""
        raise NotImplementedError("MedSTC has no online learning (fit_stream); use fit, or "
                                  "STC for online learning")

