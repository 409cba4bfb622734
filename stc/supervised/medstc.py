"""MedSTC: max-margin supervised sparse topical coding (paper Sec. 3, problem (4)).

Training alternates, per outer iteration:
  1. sparse coding of every training document through the same compiled
     kernel as STC, with theta's shifted mean: the document-code step
     minimises its objective minus b_d . theta_d, where
     b_d = (C / D) (eta_{y_d} - eta_{yhat_d}) and yhat_d is the
     loss-augmented prediction at the current theta_d (`shift_for_labels`);
  2. the dictionary step (unchanged from STC);
  3. the SVM step: the 1-slack cutting-plane multi-class SVM on the
     training codes, warm-started from the previous iteration.
Test documents are coded without labels (plain STC coding) and classified
by argmax_y eta_y . theta.
"""
import time

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from stc._stc import STC
from stc._validation import check_number
from stc.supervised.svm import CuttingPlaneSVM, loss_augmented_predict, multiclass_hinge


def shift_for_labels(W, theta, y_index, C, cost):
    """Linear term b_d = (C / D) (eta_{y_d} - eta_{yhat_d}) of each document-code step.

    With it, the theta closed form of the kernel becomes the paper's shifted
    mean (Sec. 3): the loss-augmented label yhat_d is fixed at the current
    theta_d, and the hinge is replaced by its piece for yhat_d.
    """
    y_hat = loss_augmented_predict(W, theta, y_index, cost)
    return (C / theta.shape[0]) * (W[y_index] - W[y_hat])


class MedSTC(ClassifierMixin, STC):
    """Max-margin supervised STC: topics, codes and a multi-class SVM learned jointly.

    Parameters are those of `STC`, plus

    C : float, default=1.0
        Weight of the averaged multi-class hinge loss.
    delta : float, default=3600.0
        Cost ell of a wrong label, Delta(y, y') = ell * 1[y != y'] (the
        paper's setting for MedSTC).
    svm_tol : float, default=1e-3
        Cutting-plane tolerance, relative to ``delta``.
    svm_max_iter : int, default=1000
        Cutting-plane iterations per SVM step.

    Attributes (besides STC's)
    ----------
    classes_ : ndarray
    coef_ : ndarray (n_classes, n_topics)
        eta.
    objective_ : ndarray
        Objective (4) after each outer iteration.
    hinge_ : ndarray
        The averaged hinge loss R_h after each outer iteration.
    train_accuracy_ : ndarray
        Training accuracy of the SVM on the training codes per iteration.
    """

    def __init__(self, n_topics=20, *, C=1.0, delta=3600.0, svm_tol=1e-3, svm_max_iter=1000,
                 lambda_=0.1, gamma=None, rho=0.01, loss="poisson", theta_penalty="l2",
                 code_penalty="l1", max_iter=30, tol=1e-4, inner_max_iter=50, inner_tol=1e-4,
                 dictionary_max_iter=10, n_jobs=None, random_state=None, verbose=0):
        super().__init__(n_topics=n_topics, lambda_=lambda_, gamma=gamma, rho=rho, loss=loss,
                         theta_penalty=theta_penalty, code_penalty=code_penalty,
                         max_iter=max_iter, tol=tol, inner_max_iter=inner_max_iter,
                         inner_tol=inner_tol, dictionary_max_iter=dictionary_max_iter,
                         n_jobs=n_jobs, random_state=random_state, verbose=verbose)
        self.C = C
        self.delta = delta
        self.svm_tol = svm_tol
        self.svm_max_iter = svm_max_iter

    def fit(self, X, y):
        """Learn topics, codes and the classifier from counts ``X`` and labels ``y``."""
        loss = self._check_params()
        check_number(self.C, "C", low=0, low_inclusive=False)
        check_number(self.delta, "delta", low=0, low_inclusive=False)
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
        svm = CuttingPlaneSVM(C=self.C, cost=self.delta, tol=self.svm_tol,
                              max_iter=self.svm_max_iter, warm_start=True)
        hinge, accuracy = [], []
        start = time.perf_counter()

        def theta_linear(theta):
            if not hasattr(svm, "coef_"):
                return None  # first iteration: no classifier yet
            return shift_for_labels(svm.coef_, theta, y_index, self.C, self.delta)

        def svm_step(theta, iteration):
            svm.fit(theta, y_index)
            W = svm.coef_
            hinge.append(multiclass_hinge(W, theta, y_index, self.delta))
            accuracy.append(float(np.mean(np.argmax(theta @ W.T, axis=1) == y_index)))
            if self.verbose:
                print(f"iter {iteration:3d}  hinge {hinge[-1]:.4g}  train accuracy "
                      f"{accuracy[-1]:.3f}  time {time.perf_counter() - start:.1f}s")
            return self.C * hinge[-1] + 0.5 * float(np.sum(W * W))

        self._fit(X, loss, theta_linear_fn=theta_linear, on_iteration=svm_step)
        self.classes_ = encoder.classes_
        self.coef_ = svm.coef_
        self.hinge_ = np.asarray(hinge)
        self.train_accuracy_ = np.asarray(accuracy)
        return self

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
