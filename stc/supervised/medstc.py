"""MedSTC: max-margin supervised sparse topical coding (paper Sec. 3, problem (4)).

Training alternates, per outer iteration:
  1. sparse coding of every training document through the same compiled
     kernel as STC, with theta's shifted mean: the document-code step
     minimises its objective minus b_d . theta_d, where
     b_d = (C / D) (eta_{y_d} - eta_{yhat_d}) and yhat_d is the
     loss-augmented prediction at the current theta_d (`shift_for_labels`);
     a document whose new codes raise its share of objective (4) keeps its
     old codes (`_MaxMarginSupervisor.safeguard`);
  2. the dictionary step (unchanged from STC);
  3. the SVM step: the 1-slack cutting-plane multi-class SVM on the
     training codes, warm-started from the previous iteration.
After the loop, eta is refitted on the training documents coded without
labels (``refit_C``; see `MedSTC`). Test documents are coded without labels
(plain STC coding) and classified by argmax_y eta_y . theta.
"""
import time

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from stc._core._coding import move_along_segments, segment_objectives
from stc._core.numpy_coding import document_objectives
from stc._stc import STC
from stc._validation import check_number
from stc.coding import PENALTIES
from stc.losses import CompiledLoss
from stc.supervised.svm import (CuttingPlaneSVM, loss_augmented_predict, multiclass_hinge,
                                primal_objective)


def shift_for_labels(W, theta, y_index, C, cost):
    """Linear term b_d = (C / D) (eta_{y_d} - eta_{yhat_d}) of each document-code step.

    With it, the theta closed form of the kernel becomes the paper's shifted
    mean (Sec. 3): the loss-augmented label yhat_d is fixed at the current
    theta_d, and the hinge is replaced by its piece for yhat_d.
    """
    y_hat = loss_augmented_predict(W, theta, y_index, cost)
    return (C / theta.shape[0]) * (W[y_index] - W[y_hat])


def document_hinges(W, theta, y_index, cost):
    """max_y [Delta(y_d, y) + eta_y . theta_d - eta_{y_d} . theta_d] for every document."""
    scores = theta @ W.T
    rows = np.arange(theta.shape[0])
    true = scores[rows, y_index]
    augmented = scores + cost
    augmented[rows, y_index] = true
    return augmented.max(axis=1) - true


class _MaxMarginSupervisor:
    """The supervised parts of MedSTC's outer loop, as called by `STC._fit`.

    The shifted mean fixes the loss-augmented label before the theta step, so
    that step minimises a lower bound of the hinge (one of its pieces) and
    can raise objective (4). `safeguard` therefore compares, per document,
    objective (2) plus the document's hinge share before and after coding,
    and keeps the old codes where the new ones are worse: with the exact
    dictionary step and the SVM step (kept only if it lowers the SVM
    objective), objective (4) never increases.
    """

    MAX_BACKOFF = 8  # longest sit-out of a repeatedly rejected document, in iterations

    def __init__(self, model, loss, y_index):
        self.model, self.loss, self.y_index = model, loss, y_index
        self.svm = CuttingPlaneSVM(C=model.C, cost=model.delta, tol=model.svm_tol,
                                   max_iter=model.svm_max_iter, warm_start=True)
        self.W = None
        self.n_docs = y_index.shape[0]
        self.hinge, self.accuracy, self.reverted, self.shortened = [], [], [], []
        self.skipped = []
        # Back-off for documents whose supervised coding step was rejected
        # (see `documents_to_code`): consecutive rejections, next iteration to try.
        self.rejections = np.zeros(self.n_docs, dtype=np.int64)
        self.next_try = np.zeros(self.n_docs, dtype=np.int64)
        self.active, self.iteration = None, 0
        self.start = time.perf_counter()

    def _hinge_share(self, theta):
        return (self.model.C / self.n_docs) * document_hinges(
            self.W, theta, self.y_index, self.model.delta)

    def linear_term(self, theta):
        if self.W is None:
            return None  # first iteration: no classifier yet, plain STC coding
        return shift_for_labels(self.W, theta, self.y_index, self.model.C, self.model.delta)

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

    def safeguard(self, X, beta, previous, codes, theta, means, doc_obj, doc_loss, old_obj,
                  old_loss, max_halvings=3):
        """Keep, per document, a point that does not raise its share of objective (4).

        ``previous`` holds the codes before the coding step, ``old_obj`` and
        ``old_loss`` their objective (2) and its loss part (with the current
        topics); ``codes``, ``theta`` and ``means`` (updated in place) and
        ``doc_obj``, ``doc_loss`` describe the new codes.
        Where the shifted-mean codes are worse than the old ones, step back
        along the segment from the old codes to the new ones (halving the
        step): the set of codes is convex and so is the document's part of
        (4), and the new codes lower objective (2) plus the hinge piece of
        the loss-augmented label, which is the active piece at the old codes,
        so short steps often decrease (4). Documents with no decreasing
        step keep their old codes. The trial points are evaluated without
        being formed (`segment_objectives`); only the chosen one is written.
        """
        old_codes, old_theta = previous
        n_docs = X.shape[0]
        beta_t = np.ascontiguousarray(beta.T)  # one transpose for every evaluation below
        old_total = old_obj + self._hinge_share(old_theta)
        # "not <=" also catches a non-finite new objective: with the l1 penalty on
        # theta the linearised hinge can make the coding problem unbounded, and
        # such codes run off to infinity (see `MedSTC`, theta_penalty).
        pending = ~(doc_obj + self._hinge_share(theta) <= old_total)
        n_worse = int(np.sum(pending))
        steps = np.ones(n_docs)
        step = 1.0
        for _ in range(max_halvings):
            if not pending.any():
                break
            step *= 0.5
            rows = np.flatnonzero(pending)
            trial_obj, trial_loss = self._segment_objectives(
                X, beta_t, old_codes, codes, old_theta, theta, rows, np.full(rows.size, step))
            trial_theta = old_theta[rows] + step * (theta[rows] - old_theta[rows])
            better = trial_obj + self._hinge_share_of(trial_theta, rows) <= old_total[rows]
            accepted = rows[better]
            steps[accepted] = step
            doc_obj[accepted] = trial_obj[better]
            doc_loss[accepted] = trial_loss[better]
            pending[accepted] = False
        steps[pending] = 0.0  # no decreasing step: keep the old codes exactly
        if self.active is not None:
            self._record_outcome(pending)
        doc_obj = np.where(pending, old_obj, doc_obj)
        doc_loss = np.where(pending, old_loss, doc_loss)
        moved = np.flatnonzero(steps < 1.0)
        move_along_segments(X.indptr, X.indices, beta_t, old_codes, codes, old_theta, theta,
                            means, moved, steps[moved], self.model.n_jobs)
        self.reverted.append(int(np.sum(pending)))
        self.shortened.append(n_worse - self.reverted[-1])
        return doc_obj, doc_loss

    def _segment_objectives(self, X, beta_t, old_codes, codes, old_theta, theta, rows, steps):
        """Objective (2) of documents ``rows`` at old + step * (new - old), and its loss part."""
        params = self.model._coding_params()
        penalties = (PENALTIES[params["theta_penalty"]], PENALTIES[params["code_penalty"]])
        rows = np.ascontiguousarray(rows, dtype=np.intp)
        steps = np.ascontiguousarray(steps, dtype=np.float64)
        if isinstance(self.loss, CompiledLoss):
            return segment_objectives(self.loss, X.indptr, X.indices, X.data, beta_t, old_codes,
                                      codes, old_theta, theta, rows, steps, params["lam"],
                                      params["gamma"], params["rho"], *penalties,
                                      self.model.n_jobs)
        # A pure-Python loss: form the trial codes of the listed documents.
        sub = X[rows]  # rows are increasing, so the entries below are in sub's order
        selected = np.zeros(X.shape[0], dtype=bool)
        selected[rows] = True
        entries = np.flatnonzero(np.repeat(selected, np.diff(X.indptr)))
        sub_doc = np.repeat(np.arange(rows.size), np.diff(sub.indptr))
        step_of_entry = steps[sub_doc][:, None]
        trial_codes = old_codes[entries] + step_of_entry * (codes[entries] - old_codes[entries])
        trial_theta = old_theta[rows] + steps[:, None] * (theta[rows] - old_theta[rows])
        means = np.sum(trial_codes * beta_t[sub.indices], axis=1)
        return document_objectives(self.loss, sub, sub_doc, means, trial_codes, trial_theta,
                                   None, params["lam"], params["gamma"], params["rho"],
                                   *penalties)

    def _hinge_share_of(self, theta, rows):
        """The hinge share of documents ``rows`` whose codes are ``theta``."""
        return (self.model.C / self.n_docs) * document_hinges(
            self.W, theta, self.y_index[rows], self.model.delta)

    def classifier_step(self, theta, iteration):
        model = self.model
        self.svm.fit(theta, self.y_index)
        candidate = self.svm.coef_
        if self.W is None or primal_objective(candidate, theta, self.y_index, model.C, model.delta) \
                <= primal_objective(self.W, theta, self.y_index, model.C, model.delta):
            self.W = candidate.copy()
        self.hinge.append(multiclass_hinge(self.W, theta, self.y_index, model.delta))
        self.accuracy.append(float(np.mean(np.argmax(theta @ self.W.T, axis=1) == self.y_index)))
        if model.verbose:
            print(f"iter {iteration:3d}  hinge {self.hinge[-1]:.4g}  train accuracy "
                  f"{self.accuracy[-1]:.3f}  shortened steps for "
                  f"{self.shortened[-1] if self.shortened else 0}, kept old codes for "
                  f"{self.reverted[-1] if self.reverted else 0} and did not code "
                  f"{self.skipped[-1] if self.skipped else 0} documents  "
                  f"time {time.perf_counter() - self.start:.1f}s")
        return model.C * self.hinge[-1] + 0.5 * float(np.sum(self.W * self.W))


class MedSTC(ClassifierMixin, STC):
    """Max-margin supervised STC: topics, codes and a multi-class SVM learned jointly.

    Parameters are those of `STC` (with ``max_iter`` defaulting to 20 and
    ``lambda_`` to 30, the settings measured in `benchmarks/results_medstc.md`;
    ``gamma`` defaults to ``lambda_`` as in STC), plus those below. Its
    attributes are STC's plus those below.

    Parameters
    ----------
    C : float, default=30000.0
        Weight of the averaged multi-class hinge loss. C, ``lambda_``,
        ``rho`` and ``refit_C`` were chosen together by 2-fold
        cross-validation on the 20 Newsgroups training split at K = 50
        (`benchmarks/results_medstc.md`, 9 settings of (C, ``lambda_``) times 7
        of refit_C): C and ``lambda_`` must grow together, and the best mean
        validation accuracy, 0.865, came from C = 30000, ``lambda_`` = 30,
        rho = 0.01, refit_C = 3e6 (C = 10000, ``lambda_`` = 10 gave 0.861;
        the earlier defaults C = 450, ``lambda_`` = 0.1 without refit gave
        0.78). The price is sparsity: with a ``lambda_`` this large the codes
        are nearly dense (at K = 50, 1.5 % of the test document codes are
        zero); smaller C and ``lambda_`` give sparser, less accurate codes.
        The hinge is averaged over documents
        while objective (2) sums over them, so on a much larger or smaller
        corpus a C scaled with the number of documents is a natural first
        try.
        With ``theta_penalty="l1"`` the shifted-mean coding step can be
        unbounded: when (C / D) (eta_{y_d} - eta_{yhat_d})_k exceeds
        ``lambda_`` + rho ``|I_d|`` + sum_n beta_kn, raising theta_k and the word
        codes of topic k together lowers the linearised objective without
        end, and the document's codes run off. The safeguard rejects such
        steps (counted in ``rejected_steps_``): the fit stays finite and (4)
        never increases, but those documents keep their old codes. The l2
        penalty (the default) keeps every step bounded.
    delta : float, default=3600.0
        Cost ell of a wrong label, Delta(y, y') = ell * 1[y != y'] (the
        paper's setting for MedSTC).
    svm_tol : float, default=1e-3
        Cutting-plane tolerance, relative to ``delta``.
    svm_max_iter : int, default=1000
        Cutting-plane iterations per SVM step.
    refit_C : float or None, default=3e6
        Final classifier step. After the alternating loop the training
        documents are coded again without labels, exactly as `transform`
        codes new documents, and eta is refitted on those codes by the
        cutting-plane SVM with this C (and ``delta``, ``svm_tol``,
        ``svm_max_iter``); ``joint_coef_`` keeps the loop's eta. Why: the
        loop's eta is trained on codes pulled towards their labels by the
        shifted mean, while test codes have no label to pull them, so the
        classifier is tuned to features it never sees at test time. The
        label-free codes are less separable, hence the larger C. In the
        cross-validation every setting of (C, ``lambda_``) gained 3 to 8
        points of validation accuracy from it (at its best refit_C). None
        keeps the loop's eta (the paper's classifier, the minimiser of
        (4)'s SVM block).
        The default suits the default C and ``lambda_``, whose document codes
        are small (mean 0.12 at K = 50 on 20 Newsgroups). The cutting-plane
        SVM needs more iterations as C times the squared size of the codes
        grows: with ``theta_penalty="l1"`` and ``lambda_`` = 0.1 the codes reach
        the hundreds, and a refit at 3e6 can take minutes and stop at
        ``svm_max_iter``. With other settings, cross-validate refit_C with
        them (`benchmarks/bench_medstc.py --cv`) or set it to None.

    Attributes
    ----------
    classes_ : ndarray
    coef_ : ndarray (n_classes, n_topics)
        eta used by `predict`: the refitted one (``refit_C``), or the
        loop's one if ``refit_C`` is None.
    joint_coef_ : ndarray (n_classes, n_topics)
        eta at the end of the alternating loop (the minimiser of (4)'s
        SVM block at the final training codes).
    objective_ : ndarray
        Objective (4) after each outer iteration.
    hinge_ : ndarray
        The averaged hinge loss R_h after each outer iteration.
    train_accuracy_ : ndarray
        Training accuracy of the SVM on the training codes per iteration.
    rejected_steps_ : ndarray of int
        Per outer iteration, the number of training documents whose
        supervised coding step the safeguard rejected (they kept their old
        codes).
    refit_train_accuracy_ : float or None
        Training accuracy of ``coef_`` on the label-free training codes
        (None if ``refit_C`` is None).
    """

    def __init__(self, n_topics=20, *, C=30000.0, delta=3600.0, svm_tol=1e-3, svm_max_iter=1000,
                 refit_C=3e6, lambda_=30.0, gamma=None, rho=0.01, loss="poisson",
                 theta_penalty="l2", code_penalty="l1", max_iter=20, tol=1e-4, inner_max_iter=50, inner_tol=1e-4,
                 dictionary_max_iter=3, n_jobs=None, random_state=None, verbose=0):
        super().__init__(n_topics=n_topics, lambda_=lambda_, gamma=gamma, rho=rho, loss=loss,
                         theta_penalty=theta_penalty, code_penalty=code_penalty,
                         max_iter=max_iter, tol=tol, inner_max_iter=inner_max_iter,
                         inner_tol=inner_tol, dictionary_max_iter=dictionary_max_iter,
                         n_jobs=n_jobs, random_state=random_state, verbose=verbose)
        self.C = C
        self.delta = delta
        self.svm_tol = svm_tol
        self.svm_max_iter = svm_max_iter
        self.refit_C = refit_C

    def fit(self, X, y):
        """Learn topics, codes and the classifier from counts ``X`` and labels ``y``."""
        start = time.perf_counter()
        loss = self._check_params()
        check_number(self.C, "C", low=0, low_inclusive=False)
        check_number(self.delta, "delta", low=0, low_inclusive=False)
        if self.refit_C is not None:
            check_number(self.refit_C, "refit_C", low=0, low_inclusive=False)
        X = self._validate_X(X, reset=True, loss=loss)
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"y must be 1-D with one label per document ({X.shape[0]}), "
                             f"got shape {y.shape}")
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        if encoder.classes_.size < 2:
            raise ValueError("MedSTC needs at least 2 classes in y, got 1")
        y_index = encoder.transform(y)
        supervisor = _MaxMarginSupervisor(self, loss, y_index)
        self._fit(X, loss, supervisor=supervisor)
        self.classes_ = encoder.classes_
        self.joint_coef_ = supervisor.W
        self.hinge_ = np.asarray(supervisor.hinge)
        self.train_accuracy_ = np.asarray(supervisor.accuracy)
        # iteration 1 codes without labels (no classifier yet): nothing to reject
        self.rejected_steps_ = np.asarray([0] + supervisor.reverted[:self.n_iter_ - 1])
        self.coef_, self.refit_train_accuracy_ = self.joint_coef_, None
        if self.refit_C is not None:
            self.coef_, self.refit_train_accuracy_ = self._refit_classifier(X, y_index)
        self.fit_time_ = time.perf_counter() - start
        return self

    def _refit_svm(self, C):
        """The (unfitted) SVM of the final step, with weight ``C`` (see ``refit_C``)."""
        return CuttingPlaneSVM(C=C, cost=self.delta, tol=self.svm_tol, max_iter=self.svm_max_iter)

    def _refit_classifier(self, X, y_index):
        """eta refitted on the label-free codes of the training documents (``refit_C``)."""
        start = time.perf_counter()
        theta = self.transform(X)
        svm = self._refit_svm(self.refit_C).fit(theta, y_index)
        accuracy = float(np.mean(np.argmax(theta @ svm.coef_.T, axis=1) == y_index))
        if self.verbose:
            print(f"refit eta on label-free training codes (C={self.refit_C:g}): train "
                  f"accuracy {accuracy:.3f}, {svm.n_iter_} cutting-plane iterations, "
                  f"time {time.perf_counter() - start:.1f}s")
        return svm.coef_, accuracy

    def decision_function(self, X):
        """Scores eta_y . theta for every class, shape (n_docs, n_classes)."""
        check_is_fitted(self, "coef_")
        return self.transform(X) @ self.coef_.T

    def predict(self, X):
        return self.classes_[np.argmax(self.decision_function(X), axis=1)]

    def fit_transform(self, X, y=None):
        raise AttributeError("MedSTC needs labels: use fit(X, y) then transform(X)")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.estimator_type = "classifier"
        return tags
