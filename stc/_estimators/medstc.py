"""MedSTC: max-margin supervised sparse topical coding (paper Sec. 3, problem (4)).

Problem (4): minimise over topics, codes and the classifier eta

    objective (2)  +  C R_h(eta; theta)  +  1/2 ||eta||^2,
    R_h = (1/D) sum_d max_y [Delta(y_d, y) + eta_y . theta_d - eta_{y_d} . theta_d],

`stc._learning.supervised.labelled_batch.medstc_objective` computes it. Training runs the batch
learner (`stc._learning.learners.batch`, the outer loop `stc._learning.training.alternate`; for a
dask array `stc._learning.learners.dask_batch`, with `stc._learning.supervised.labelled_dask`) with
two steps of its own (`stc._learning.supervised.labelled_batch`):
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

Online learning (``learning_method="online"``, `MedSTC.fit_stream`,
`MedSTC.partial_fit`) runs STC's online learner with the batch step of
`stc._learning.supervised.labelled_online`: shifted-mean coding of each mini-batch, STC's
stochastic dictionary step and Pegasos steps for eta; for a dask array
(`fit`), STC's online learner on Dask with that step split between the
workers (coding) and the client (eta's steps; `stc._learning.supervised.labelled_dask`).

`MedSTC.fit` is `STC.fit`: the learner of the way of learning (in memory or
on a dask array, batch or online; `stc._estimators.stc.LEARNERS`), given MedSTC's
`stc._learning.learners.LearningSteps` of that way (`LABELLED_STEPS`), which also end
the fit: the refit and the classifier's fitted attributes.
"""
import numbers

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from stc._core._dense import row_products
from stc._estimators.persistence import register_estimator
from stc._estimators.stc import STC
from stc._learning.learners.partitions import is_dask_array
# REFIT_C_SCALE is read here by the docs and benchmarks as stc._estimators.medstc.REFIT_C_SCALE
from stc._learning.supervised.labelled_batch import (  # noqa: F401
    REFIT_C_SCALE, LabelledBatchSteps, class_indices, refit_C_of_scale)
from stc._learning.supervised.labelled_dask import LabelledDaskBatchSteps, LabelledDaskOnlineSteps
from stc._learning.supervised.labelled_online import (ONLINE_COUNTERS, LabelledOnlineSteps,
                                                      LabelledPartialFitSteps, LabelledStreamSteps,
                                                      new_supervision)
from stc._utils.labels import check_labels
from stc._utils.validation import Interval, NoneValue, Options, check_fitted_finite


# The SVM's dual variables lie on a simplex of radius C, which the projection
# (stc._core._simplex) takes below 1e300.
MAX_C = 1e300

def auto_refit_C(theta):
    """The refit's C for ``refit_C="auto"``: REFIT_C_SCALE / mean_d ||theta_d||^2.

    All-zero codes give any classifier the same (zero) scores; C is then
    REFIT_C_SCALE itself.
    """
    mean_square_norm = float(np.mean(np.sum(theta * theta, axis=1))) if theta.size else 0.0
    return refit_C_of_scale(mean_square_norm)


# MedSTC's `stc._learning.learners.LearningSteps` of each way of learning (the keys of
# `stc._estimators.stc.LEARNERS`): its labelled steps, and the end of the fit (the refit, the
# classifier's records).
LABELLED_STEPS = {(False, "batch"): LabelledBatchSteps, (False, "online"): LabelledOnlineSteps,
               (True, "batch"): LabelledDaskBatchSteps, (True, "online"): LabelledDaskOnlineSteps}


@register_estimator
class MedSTC(ClassifierMixin, STC):
    """Max-margin supervised STC: topics, codes and a multi-class SVM learned jointly.

    Minimises the paper's problem (4): STC's objective (2) plus ``C`` times the
    averaged multi-class hinge loss of a linear classifier eta on the document
    codes, plus ``||eta||^2 / 2``. It learns as `STC` does (batch or online, in
    memory or on a dask array; `partial_fit`, `fit_stream` with ``classes``),
    with STC's parameters and attributes (defaults: ``max_iter=20``,
    ``tol=5e-3``, ``lambda_=30``, ``theta_penalty="l2"``) plus those below.
    Details, the paper's setting and how the defaults were chosen:
    docs/user_guide.md ("MedSTC") and docs/algorithms.md.

    Parameters
    ----------
    C : float, default=30000.0
        Weight of the averaged hinge loss; grows with ``lambda_`` (cross-validated).
    cost : float, default=3600.0
        Cost ell of a wrong label, Delta(y, y') = ell * 1[y != y'] (as `CuttingPlaneSVM`'s).
    svm_tol : float, default=1e-3
        Cutting-plane tolerance, relative to ``cost``.
    svm_max_iter : int, default=1000
        Cutting-plane iterations per SVM step.
    sweeps_per_iteration : int or None, default=2
        As in `STC`, the sweeps after the first iteration with theta's shifted mean.
    refit_C : "auto", float or None, default="auto"
        C of eta refitted on label-free training codes after the loop ("auto":
        REFIT_C_SCALE / mean_d ||theta_d||^2); None keeps the loop's eta.
    batch_size : int or "auto", default=512
        As in `STC` (online learning), with MedSTC's own default.
    n_passes : int, default=2
        As in `STC` (online learning), with MedSTC's own default.
    total_samples : int or None, default=None
        Online: D, the documents the hinge averages over (None: counted as they come).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The labels.
    coef_ : ndarray of shape (n_classes, n_topics)
        eta used by `predict`: the refitted one, or the loop's if ``refit_C`` is None.
    joint_coef_ : ndarray of shape (n_classes, n_topics)
        eta at the end of the alternating loop.
    objective_ : ndarray of shape (n_iter,)
        Objective (4) after each outer iteration (never increases).
    hinge_, train_accuracy_ : ndarray of shape (n_iter,)
        Batch learning: R_h and the loop's eta's training accuracy per iteration.
    rejected_steps_ : ndarray of int, shape (n_iter,)
        Documents whose shifted-mean step the safeguard rejected, per iteration (online: total).
    refit_train_accuracy_ : float or None
        Batch learning: training accuracy of ``coef_`` on the label-free codes.
    refit_C_ : float or None
        The C of the refit (``refit_C``, or its value for "auto"); None without refit.
    n_docs_seen_ : int
        Online learning: documents learned from (every pass counts).
    online_total_samples_, online_svm_steps_, online_refit_steps_ : int or None
        Online learning's D and step counters, saved so that ``partial_fit`` goes on.
    online_refit_square_norms_, online_refit_docs_, online_refit_coef_
        The refit's running sums for "auto" and its last iterate (online learning).

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
        **STC._parameter_constraints,
        "total_samples": [NoneValue(), Interval(numbers.Integral, 1, None)],
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
                 theta_penalty="l2", code_penalty="l1", max_iter=20, tol=5e-3,
                 inner_max_iter=50, inner_tol=1e-4, dictionary_max_iter=3,
                 sweeps_per_iteration=2, n_jobs=None, random_state=None, init="auto",
                 verbose=0, learning_method="batch", batch_size=512, learning_decay=0.51,
                 learning_offset=10.0, n_passes=2, topic_averaging=0.5, total_samples=None):
        super().__init__(n_topics=n_topics, lambda_=lambda_, gamma=gamma, rho=rho,
                         rho_units=rho_units, loss=loss,
                         theta_penalty=theta_penalty, code_penalty=code_penalty,
                         max_iter=max_iter, tol=tol, inner_max_iter=inner_max_iter,
                         inner_tol=inner_tol, dictionary_max_iter=dictionary_max_iter,
                         sweeps_per_iteration=sweeps_per_iteration,
                         n_jobs=n_jobs, random_state=random_state, init=init,
                         verbose=verbose, learning_method=learning_method,
                         batch_size=batch_size, learning_decay=learning_decay,
                         learning_offset=learning_offset, n_passes=n_passes,
                         topic_averaging=topic_averaging)
        self.total_samples = total_samples
        self.C = C
        self.cost = cost
        self.svm_tol = svm_tol
        self.svm_max_iter = svm_max_iter
        self.refit_C = refit_C

    def fit(self, X, y):
        """Learn topics, codes and the classifier from counts ``X`` and labels ``y``.

        ``X`` may be a dask array of CSR row blocks (the ``[dask]`` extra), as
        for `STC.fit`: the fit then runs on the current dask.distributed client
        (`stc._learning.supervised.labelled_dask`), with ``y`` a dask or numpy array of
        one label per row; the labels, small next to ``X``, are gathered on
        the client and each partition gets its rows' labels. With
        ``learning_method="online"`` the mini-batches are the rounds of STC's
        online learning on Dask (slices of every partition), and the fit is
        `fit_stream` over them.
        """
        return super().fit(X, y)

    def _learning_steps(self, way, X, y, problem, classes=None):
        """MedSTC's `stc._learning.learners.LearningSteps` of ``way``, with the labels checked.

        ``way`` is a key of `LABELLED_STEPS` (``fit``: ``y`` one label per row
        of ``X``), ``"partial_fit"`` (``X`` the batch) or ``"fit_stream"``
        (``X`` the batches, whose labels are checked as they come). ``classes``:
        every label a stream can hold (`partial_fit`, `fit_stream`).
        """
        if way == "partial_fit":
            return self._partial_fit_steps(X, y, classes)
        if way == "fit_stream":
            classes = self._check_classes(classes, True)
            return LabelledStreamSteps(classes, new_supervision(self, classes.size), X)
        distributed = way[0]
        if distributed and is_dask_array(y):
            y = y.compute()  # labels of unknown chunk sizes too; aligned by row later
        # a dask X of unknown chunk sizes: its learner checks the number of labels
        rows = X.shape[0] if np.isfinite(X.shape[0]) else None
        classes, y_index = class_indices(y, rows)
        return LABELLED_STEPS[way](self, classes, y_index, problem)

    def _partial_fit_steps(self, X, y, classes):
        """The steps of one `partial_fit` batch: those of a fresh start or of the fit so far."""
        first = not hasattr(self, "components_")
        if not first and not hasattr(self, "n_docs_seen_"):
            raise ValueError("partial_fit continues an online fit; this model was fitted "
                             "with learning_method='batch': fit it with "
                             "learning_method='online', or start a new model")
        classes, y_index = class_indices(y, X.shape[0], self._check_classes(classes, first))
        supervision = (new_supervision(self, classes.size) if first
                       else self._online_supervision())
        return LabelledPartialFitSteps(classes, y_index, supervision)

    def decision_function(self, X):
        """Scores eta_y . theta for every class, shape (n_docs, n_classes)."""
        check_is_fitted(self, "coef_")
        check_fitted_finite(self, "coef_")
        theta = self.transform(X)
        expected = (np.size(self.classes_), theta.shape[1])
        if np.shape(self.coef_) != expected:
            raise ValueError(f"MedSTC.coef_ has shape {np.shape(self.coef_)}, but the model has "
                             f"{expected[0]} classes and {expected[1]} topics: it was changed "
                             "after fit or is corrupt; refit the model or restore it")
        return row_products(theta, self.coef_)

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

    # ---- online learning (stc._learning.supervised.labelled_online)

    def _online_supervision(self):
        """The `OnlineSupervision` the fitted attributes hold."""
        supervision = new_supervision(self, self.classes_.size)
        supervision.coef = self.joint_coef_
        if self.refit_C_ is not None:
            supervision.refit_coef = self.online_refit_coef_
            # updated in place by the next steps: a copy (a loaded array may be read-only)
            supervision.refit_average = np.array(self.coef_, dtype=np.float64)
        for attribute, field in ONLINE_COUNTERS.items():
            setattr(supervision, field, getattr(self, attribute))
        return supervision

    def _forget_online_state(self):
        super()._forget_online_state()
        # also a batch fit's records, which online learning does not keep
        for name in ("hinge_", "train_accuracy_", "refit_train_accuracy_",
                     "online_total_samples_", "n_docs_seen_", "online_svm_steps_",
                     "online_refit_steps_", "online_refit_square_norms_", "online_refit_docs_",
                     "online_refit_coef_", "classes_", "coef_", "joint_coef_", "refit_C_"):
            self.__dict__.pop(name, None)

    def _check_classes(self, classes, first):
        """``classes`` on the first call (scikit-learn's convention); the same ones after."""
        if first:
            if classes is None:
                raise ValueError("classes must be given on the first call to partial_fit (and "
                                 "to fit_stream): every label the stream can hold, e.g. "
                                 "classes=np.unique(y_all)")
            classes = np.asarray(classes)
            if classes.ndim != 1:
                raise ValueError(f"classes must be 1-D, got shape {classes.shape}")
            check_labels(classes, "classes")
            unique = np.unique(classes)
            if unique.size != classes.size:
                raise ValueError("classes must not repeat a label")
            if unique.size < 2:
                raise ValueError(f"MedSTC needs at least 2 classes, got classes={classes!r}")
            return unique
        if classes is not None and not np.array_equal(np.unique(classes), self.classes_):
            raise ValueError(f"classes={classes!r} differs from the classes of the first call, "
                             f"{self.classes_!r}")
        return self.classes_
