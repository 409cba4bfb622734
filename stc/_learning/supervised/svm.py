"""Multi-class linear SVM trained by the 1-slack cutting-plane algorithm.

Problem (Crammer-Singer multi-class hinge with label cost ``ell``, no
intercept), for weights ``W`` of shape ``(n_classes, n_features)``::

    min_W  1/2 ||W||_F^2 + C * R_h(W),
    R_h(W) = sum_d s_d max_y [Delta(y_d, y) + W_y . x_d - W_{y_d} . x_d],
    Delta(y_d, y) = ell * 1[y != y_d],

where ``s_d = 1/D`` without sample weights (the hinge is *averaged* over the
documents, as in MedLDA/MedSTC) and ``s_d = w_d / sum(w)`` with sample
weights ``w`` (so that integer weights are equivalent to repeating rows).

Algorithm (Joachims, Finley & Yu, "Cutting-plane training of structural
SVMs", Machine Learning 2009, Alg. 4 -- the 1-slack formulation).  Every joint
labelling ``ybar = (ybar_1, ..., ybar_D)`` gives one linear constraint
``c(ybar) - <G(ybar), W> <= xi`` with::

    c(ybar) = sum_d s_d Delta(y_d, ybar_d)
    G(ybar) = sum_d s_d (phi(x_d, y_d) - phi(x_d, ybar_d))

(``phi(x, y)`` puts ``x`` in row ``y`` of a ``(n_classes, n_features)``
matrix), and ``R_h(W) = max_ybar c(ybar) - <G(ybar), W>``.  The labelling
``ybar = y`` gives the "zero cut" ``c = 0, G = 0``, i.e. ``xi >= 0``; it is
kept permanently at index 0 of the working set.  Each iteration solves the
dual of the problem restricted to the working set,

    max_alpha  sum_j alpha_j c_j - 1/2 || sum_j alpha_j G_j ||^2
    s.t.       alpha >= 0,  sum_j alpha_j = C           (zero cut included),

which, because the zero cut carries the slack of ``sum alpha <= C``, is the
dual over ``{alpha >= 0, sum alpha <= C}`` of the restricted 1-slack problem;
``W = sum_j alpha_j G_j``.  The QP lives on the (small) Gram matrix of the
cuts and is solved by pairwise (SMO-type) ascent steps with second-order
pair selection, each followed by a safeguarded Newton step on the face of
the current support, until its duality gap is tiny
compared with ``C * eps``.  Then the most violated labelling at ``W`` is found in one vectorised
loss-augmented argmax pass and added as a cut; cuts that stayed inactive
for 50 iterations are dropped.

Stopping rule and guarantee
---------------------------
Let ``eps = tol * cost`` (``tol`` is relative to the label cost, which makes
the fit invariant under the rescaling ``(C, cost) -> (C / cost, 1)``,
``W -> W / cost``).  With ``xi = max(0, max_j c_j - <G_j, W>)`` the slack of
the working set at the current ``W`` and ``qp_gap`` the duality gap of the
restricted QP at the current ``alpha``, the algorithm stops when::

    R_h(W) <= xi + eps        and        qp_gap <= 1e-2 * C * eps,

or as soon as ``P(W) - D(alpha) <= 1.01 * C * eps`` directly (the guarantee
below).  For any dual-feasible ``alpha`` with ``W = sum alpha_j G_j`` one has the
identity::

    P(W) - D(alpha) = C * (R_h(W) - xi) + qp_gap,

where ``P`` is the primal objective and ``D(alpha) = sum alpha_j c_j -
1/2||W||^2`` the dual objective.  Every cut is a valid constraint of the full
1-slack problem, so ``D(alpha) <= P* <= P(W)`` (weak duality), and at
termination::

    0 <= P(W) - P*  <=  P(W) - D(alpha)  <=  1.01 * C * eps = 1.01 * C * tol * cost.

The restricted QP is re-solved from the previous ``alpha`` after each new
cut (`_solve_qp`: pairwise steps, and exact steps to the optimum of the
current face computed from the eigenvalues of the face's Gram matrix, which
is singular as soon as there are more cuts than ``n_classes * n_features``;
compiled, in ``_qp.pyx``, with Jacobi's eigenvalue method).
Every product of the SVM is summed in a fixed order (``stc._core._dense``),
not by BLAS, whose kernels differ between CPUs: a fit gives the same bits on
every machine.
Its numbers grow like ``C^2 ||x||^2`` while the gap asked for grows like
``C``: for a huge ``C`` or huge features the gap cannot be resolved in
double precision. The QP then stops when its steps no longer raise the dual,
and the loop stops with a ConvergenceWarning that gives the gap reached,
when the most violated cut is one it already holds. The work is bounded by
``max_iter`` cutting-plane iterations of at most ``qp_max_iter`` QP steps.

The fitted attributes ``objective_`` and ``dual_objective_`` are ``P(W)``
and ``D(alpha)``; their difference is the certified gap.

Warm start
----------
A cut is determined by its labelling ``ybar``, and *every* labelling is a
valid constraint whatever the features are.  The working set is therefore
stored as labellings (only the cuts active at the end of the previous fit)
together with their dual weights.  With ``warm_start=True`` and the same
number of samples, features and the same classes, ``fit`` recomputes the cut
constants and gradients of those labellings on the new ``(X, y,
sample_weight)``, rescales ``alpha`` to the new ``C`` (it stays feasible),
re-solves the QP from that ``alpha`` and continues the cutting-plane loop:
when the features changed a little, ``W`` starts next to the previous
solution and only a few new cuts are needed.  If only the number of samples
changed, the previous labellings are meaningless; the working set is then
seeded with the most violated labelling at the previous ``coef_``.
"""

import numbers
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from stc._core._dense import dot, loss_augmented_argmax, matvec, row_products, vecmat
from stc._core._simplex import project_onto_simplex
from stc._learning.supervised._qp import solve_simplex_qp
from stc._utils.validation import InstanceOf, Interval, validate_params

__all__ = [
    "CuttingPlaneSVM",
    "loss_augmented_hinges",
    "loss_augmented_predict",
    "multiclass_hinge",
    "primal_objective",
    "sample_hinges",
]

# The restricted QP is solved to a duality gap of _QP_REL_TOL * C * eps (or
# until rounding stops its progress, see `_solve_qp`).
_QP_REL_TOL = 1e-2
# Cuts whose dual weight stayed zero for this many consecutive iterations are
# removed from the working set (the zero cut at index 0 is never removed).
_MAX_IDLE = 50


def _project_capped(v, radius):
    """Projection onto {x >= 0, sum(x) <= radius} (warm-start repair of alpha)."""
    w = np.maximum(np.asarray(v, dtype=np.float64), 0.0)
    if w.sum() <= radius:
        return w
    return np.asarray(project_onto_simplex(v, radius), dtype=np.float64)


# ---------------------------------------------------------------------------
# Public helpers (also used by MedSTC)
# ---------------------------------------------------------------------------
def _check_problem(W, X, y_index):
    W = np.asarray(W, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    y_index = np.asarray(y_index)
    if W.ndim != 2 or X.ndim != 2:
        raise ValueError("W and X must be 2-D arrays")
    if X.shape[1] != W.shape[1]:
        raise ValueError(
            f"X has {X.shape[1]} features but W has {W.shape[1]} columns"
        )
    if y_index.shape != (X.shape[0],):
        raise ValueError("y_index must be 1-D with one entry per row of X")
    if y_index.size and not np.issubdtype(y_index.dtype, np.integer):
        raise ValueError("y_index must hold integer class indices")
    y_index = y_index.astype(np.intp, copy=False)
    if y_index.size and (y_index.min() < 0 or y_index.max() >= W.shape[0]):
        raise ValueError("y_index must lie in [0, n_classes)")
    return W, X, y_index


def _normalised_weights(sample_weight, n_samples):
    if sample_weight is None:
        return None
    s = np.asarray(sample_weight, dtype=np.float64)
    if s.shape != (n_samples,):
        raise ValueError(
            f"sample_weight.shape == {s.shape}, expected ({n_samples},)"
        )
    total = s.sum()
    if not total > 0:
        raise ValueError("sample_weight must have a positive sum")
    return s / total


def loss_augmented_predict(W, X, y_index, cost):
    """Most violated label per row: ``argmax_y Delta(y_d, y) + W_y . x_d``.

    Parameters
    ----------
    W : ndarray of shape (n_classes, n_features)
    X : ndarray of shape (n_samples, n_features)
    y_index : int ndarray of shape (n_samples,), true class indices.
    cost : float, the label cost ``ell`` of ``Delta``.

    Returns
    -------
    ybar : intp ndarray of shape (n_samples,).  Ties are resolved in favour
        of the true label, otherwise towards the smallest class index.
    """
    W, X, y_index = _check_problem(W, X, y_index)
    return loss_augmented_argmax(X, W, y_index, float(cost))[0]


def loss_augmented_hinges(W, X, y_index, cost):
    """`loss_augmented_predict` and `sample_hinges` of one pass: (ybar, hinge per row)."""
    W, X, y_index = _check_problem(W, X, y_index)
    return loss_augmented_argmax(X, W, y_index, float(cost))


def sample_hinges(W, X, y_index, cost):
    """Per-row hinge ``max_y [Delta(y_d, y) + W_y.x_d - W_{y_d}.x_d]`` (>= 0), shape (n_samples,)."""
    W, X, y_index = _check_problem(W, X, y_index)
    return loss_augmented_argmax(X, W, y_index, float(cost))[1]


def multiclass_hinge(W, X, y_index, cost, sample_weight=None):
    """Averaged Crammer-Singer hinge ``R_h(W)``.

    ``(1/D) sum_d max_y [Delta(y_d, y) + W_y.x_d - W_{y_d}.x_d]`` with
    ``Delta(y_d, y) = cost * 1[y != y_d]``; with ``sample_weight`` the mean is
    weighted (``sum_d w_d h_d / sum_d w_d``).
    """
    W, X, y_index = _check_problem(W, X, y_index)
    s = _normalised_weights(sample_weight, X.shape[0])
    hinge = loss_augmented_argmax(X, W, y_index, float(cost))[1]
    if s is None:
        return float(hinge.mean()) if hinge.size else 0.0
    return dot(s, hinge)


def primal_objective(W, X, y_index, C, cost, sample_weight=None):
    """``1/2 ||W||_F^2 + C * multiclass_hinge(W, X, y_index, cost)``."""
    W = np.asarray(W, dtype=np.float64)
    return 0.5 * dot(W, W) + C * multiclass_hinge(
        W, X, y_index, cost, sample_weight
    )


# ---------------------------------------------------------------------------
# Cuts and the restricted dual QP
# ---------------------------------------------------------------------------
def _build_cuts(labellings, X, y_index, s, cost, n_classes):
    """Cut constants and flattened gradients for a stack of labellings.

    labellings : int array (m, D).  Returns c (m,), G (m, n_classes*n_features)
    with ``c_j = cost * sum_d s_d 1[ybar_jd != y_d]`` and ``G_j = sum_d s_d
    (phi(x_d, y_d) - phi(x_d, ybar_jd))``.  ``G`` is one sparse-times-dense
    product with a CSC matrix holding, for every document, ``+s_d`` at row
    ``(j, y_d)`` and ``-s_d`` at row ``(j, ybar_jd)``; correctly labelled
    documents get explicit zeros, so they contribute exactly nothing (the
    labelling ``y`` gives exactly ``G = 0``).
    """
    m, n_samples = labellings.shape
    if m > 16:  # bound the temporary index/data arrays (2 m D entries)
        parts = [
            _build_cuts(labellings[k : k + 16], X, y_index, s, cost, n_classes)
            for k in range(0, m, 16)
        ]
        return np.concatenate([p[0] for p in parts]), np.vstack([p[1] for p in parts])
    n_features = X.shape[1]
    w = np.where(labellings != y_index[None, :], s[None, :], 0.0)  # (m, D)
    c = cost * w.sum(axis=1)
    offsets = (np.arange(m) * n_classes)[:, None]
    indices = np.empty((n_samples, 2 * m), dtype=np.int64)
    indices[:, 0::2] = (offsets + y_index[None, :]).T
    indices[:, 1::2] = (offsets + labellings).T
    data = np.empty((n_samples, 2 * m))
    data[:, 0::2] = w.T
    data[:, 1::2] = -w.T
    M = sparse.csc_matrix(
        (data.ravel(), indices.ravel(), np.arange(0, 2 * m * n_samples + 1, 2 * m)),
        shape=(m * n_classes, n_samples),
    )
    G = np.asarray(M @ X).reshape(m, n_classes * n_features)
    return c, G


class _WorkingSet:
    """Cuts (c_j, G_j, labelling_j), their Gram matrix and dual weights.

    Index 0 is the zero cut (ybar = y): c = 0, G = 0; it carries the slack
    ``C - sum(alpha)`` so the QP lives on the simplex ``sum(alpha) = C``.
    """

    def __init__(self, n_dims, n_samples, C, capacity=16):
        self.m = 1
        self.c = np.zeros(capacity)
        self.G = np.zeros((capacity, n_dims))
        self.H = np.zeros((capacity, capacity))
        self.alpha = np.zeros(capacity)
        self.alpha[0] = C
        self.idle = np.zeros(capacity, dtype=np.intp)
        self.labels = np.zeros((capacity, n_samples), dtype=np.int32)

    def _grow(self, needed):
        cap = self.c.shape[0]
        if needed <= cap:
            return
        new = max(needed, 2 * cap)
        m = self.m
        for name in ("c", "alpha", "idle"):
            old = getattr(self, name)
            arr = np.zeros(new, dtype=old.dtype)
            arr[:m] = old[:m]
            setattr(self, name, arr)
        G = np.zeros((new, self.G.shape[1]))
        G[:m] = self.G[:m]
        self.G = G
        H = np.zeros((new, new))
        H[:m, :m] = self.H[:m, :m]
        self.H = H
        L = np.zeros((new, self.labels.shape[1]), dtype=np.int32)
        L[:m] = self.labels[:m]
        self.labels = L

    def add(self, c, G, labels, alpha=None):
        """Append cuts (c: (k,), G: (k, n_dims), labels: (k, D))."""
        k = c.shape[0]
        m = self.m
        self._grow(m + k)
        self.c[m : m + k] = c
        self.G[m : m + k] = G
        self.labels[m : m + k] = labels
        self.alpha[m : m + k] = 0.0 if alpha is None else alpha
        self.idle[m : m + k] = 0
        cross = row_products(self.G[: m + k], G)  # (m + k, k)
        self.H[: m + k, m : m + k] = cross
        self.H[m : m + k, : m + k] = cross.T
        self.m = m + k

    def holds(self, labelling):
        """Whether the working set already has the cut of ``labelling``."""
        return bool(np.any(np.all(self.labels[1:self.m] == labelling, axis=1)))

    def drop_idle(self):
        m = self.m
        active = self.alpha[:m] > 0
        self.idle[:m] = np.where(active, 0, self.idle[:m] + 1)
        keep = self.idle[:m] <= _MAX_IDLE
        keep[0] = True
        if keep.all():
            return
        idx = np.nonzero(keep)[0]
        k = idx.size
        self.c[:k] = self.c[idx]
        self.alpha[:k] = self.alpha[idx]
        self.idle[:k] = self.idle[idx]
        self.G[:k] = self.G[idx]
        self.labels[:k] = self.labels[idx]
        self.H[:k, :k] = self.H[np.ix_(idx, idx)]
        self.m = k


def _solve_qp(H, c, alpha, C, tol, max_iter):
    """Maximise ``c.a - 1/2 a'Ha`` over ``{a >= 0, sum(a) = C}``, ``alpha`` in place.

    Pairwise steps and Newton steps on the face of the support,
    compiled (`stc._learning.supervised._qp.solve_simplex_qp`, which says when it stops).
    Returns (iterations, whether it stopped for lack of progress).
    """
    return solve_simplex_qp(np.ascontiguousarray(H), np.ascontiguousarray(c), alpha, float(C),
                            float(tol), int(max_iter))


# ---------------------------------------------------------------------------
# The cutting-plane loop, step by step
# ---------------------------------------------------------------------------
@dataclass
class _Problem:
    """The data of one fit: features, class indices, sample weights, C and the label cost."""

    X: np.ndarray
    y_index: np.ndarray
    s: np.ndarray  # weights of the averaged hinge, summing to 1
    n_classes: int
    C: float
    cost: float

    @property
    def n_dims(self):
        return self.n_classes * self.X.shape[1]

    @property
    def n_features(self):
        return self.X.shape[1]

    @property
    def labelling_length(self):
        """Entries of a labelling as the working set stores it: one per sample."""
        return self.X.shape[0]

    def largest_norm(self):
        """The largest Euclidean norm of a sample (for the precision warning)."""
        return float(np.sqrt(np.max(np.einsum("ij,ij->i", self.X, self.X), initial=0.0)))

    def cuts(self, labellings):
        return _build_cuts(labellings, self.X, self.y_index, self.s, self.cost, self.n_classes)

    def most_violated(self, W):
        """The loss-augmented labelling at ``W``, and the averaged hinge R_h(W)."""
        ybar, hinge_d = loss_augmented_argmax(self.X, W.reshape(self.n_classes, -1),
                                              self.y_index, self.cost)
        return ybar, dot(self.s, hinge_d)


@dataclass
class _Restricted:
    """The solution of the QP restricted to the working set, and its certificates."""

    W: np.ndarray
    xi: float  # the working set's slack at W
    dual: float  # D(alpha)
    qp_gap: float  # duality gap of the restricted QP
    qp_stuck: bool  # the QP stopped making progress above its tolerance (rounding)


def _solve_restricted(ws, C, qp_tol, qp_max_iter):
    """Re-solve the restricted QP from the working set's alpha (a warm start)."""
    m = ws.m
    H, c, G, alpha = ws.H[:m, :m], ws.c[:m], ws.G[:m], ws.alpha[:m]
    _, stuck = _solve_qp(H, c, alpha, C, qp_tol, qp_max_iter)
    W = vecmat(alpha, G)
    slack = c - matvec(G, W)
    slack[0] = 0.0
    xi = float(slack.max())
    dual = dot(alpha, c) - 0.5 * dot(W, W)
    gap = C * xi - dot(alpha, slack)
    return _Restricted(W, xi, dual, gap, stuck and gap > qp_tol)


def _cutting_plane(problem, ws, eps, qp_tol, max_iter, qp_max_iter, verbose):
    """Algorithm 4 of Joachims, Finley & Yu (1-slack); returns (W, primal, dual, n_iter, why).

    ``why`` is None at convergence, else the reason for stopping, for the
    ConvergenceWarning.
    """
    C = problem.C
    if ws.m > 1:
        sol = _solve_restricted(ws, C, qp_tol, qp_max_iter)
    else:
        sol = _Restricted(np.zeros(problem.n_dims), 0.0, 0.0, 0.0, False)
    n_iter = 0
    while True:
        n_iter += 1
        ybar, hinge = problem.most_violated(sol.W)
        primal = 0.5 * dot(sol.W, sol.W) + C * hinge
        if verbose:
            print(f"[CuttingPlaneSVM] iter {n_iter:4d} cuts {ws.m - 1:4d} "
                  f"primal {primal:.8g} dual {sol.dual:.8g} "
                  f"violation {hinge - sol.xi:.3g} qp_gap {sol.qp_gap:.3g}")
        violated = hinge > sol.xi + eps
        if (not violated and sol.qp_gap <= qp_tol) or primal - sol.dual <= 1.01 * C * eps:
            return sol.W, primal, sol.dual, n_iter, None
        if sol.qp_stuck and (not violated or ws.holds(ybar)):
            # The restricted QP is solved as far as rounding allows and the
            # most violated cut is not violated, or is one we already hold:
            # no further cut can move W.
            return sol.W, primal, sol.dual, n_iter, _precision_message(primal, sol.dual, C,
                                                                       eps, problem)
        if n_iter >= max_iter:
            return sol.W, primal, sol.dual, n_iter, (
                f"max_iter={max_iter} iterations reached (certified gap {primal - sol.dual:.3g}, "
                f"asked for {1.01 * C * eps:.3g}); increase max_iter or tol")
        if violated and not ws.holds(ybar):
            c_new, G_new = problem.cuts(ybar[None, :])
            ws.add(c_new, G_new, ybar[None, :])
        sol = _solve_restricted(ws, C, qp_tol, qp_max_iter)
        ws.drop_idle()


def _precision_message(primal, dual, C, eps, problem):
    largest = problem.largest_norm()
    return (f"the duality gap cannot be certified below {primal - dual:.3g} in double "
            f"precision (asked for {1.01 * C * eps:.3g}): the dual works with numbers of "
            f"size C^2 ||x||^2 = {C * C * largest * largest:.3g}. Lower C or scale the "
            "features down, or raise tol")


def _hinge_weights(sample_weight, y_index):
    """s_d of the averaged hinge: 1/D, or the sample weights normalised to sum 1."""
    n_samples = y_index.shape[0]
    if sample_weight is None:
        return np.full(n_samples, 1.0 / n_samples)
    sw = np.asarray(sample_weight, dtype=np.float64)
    if sw.ndim != 1 or sw.shape[0] != n_samples:
        raise ValueError(f"sample_weight.shape == {sw.shape}, expected ({n_samples},)")
    if not np.all(np.isfinite(sw)) or np.any(sw < 0):
        raise ValueError("sample_weight must be finite and non-negative")
    if np.unique(y_index[sw > 0]).size < 2:
        raise ValueError(
            "sample_weight is zero for all samples except those of a "
            "single class; at least 2 classes need positive weight"
        )
    return sw / sw.sum()


# ---------------------------------------------------------------------------
# Estimator
# ---------------------------------------------------------------------------
class CuttingPlaneSVM(ClassifierMixin, BaseEstimator):
    """Crammer-Singer multi-class linear SVM, 1-slack cutting-plane solver.

    Minimises ``1/2 ||W||^2 + C * (1/D) sum_d max_y [cost * 1[y != y_d] +
    W_y.x_d - W_{y_d}.x_d]`` (no intercept; the hinge is averaged over the
    samples, weighted by ``sample_weight / sum(sample_weight)`` if given).

    Parameters
    ----------
    C : float, default=1.0
        Weight of the averaged hinge (note: *averaged*, so ``C`` does not
        grow with the number of samples, unlike ``LinearSVC``'s ``C``).
    cost : float, default=1.0
        Label cost ``ell`` of the 0/ell loss ``Delta``.
    tol : float, default=1e-3
        Relative precision: the cutting-plane loop stops once the most
        violated constraint exceeds the working-set slack by at most
        ``eps = tol * cost``; then ``objective_ - dual_objective_ <= 1.01 *
        C * tol * cost`` (see the module docstring for the proof).
    max_iter : int, default=1000
        Maximum number of cutting-plane iterations (loss-augmented passes
        over the data).
    qp_max_iter : int, default=1000
        Maximum number of iterations (one pairwise plus one face
        step each) per solve of the restricted QP.
    warm_start : bool, default=False
        Reuse the previous working set (as labellings, re-evaluated on the
        new data) and dual weights; see the module docstring.
    verbose : int, default=0
        Print one line per iteration if positive.

    Attributes
    ----------
    coef_ : ndarray of shape (n_classes, n_features)
        ``W``; class scores are ``X @ coef_.T`` for any number of classes.
        Its rows sum to zero (every cut gradient does).
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    n_iter_ : int
        Number of cutting-plane iterations (loss-augmented passes).
    n_cuts_ : int
        Size of the final working set (excluding the trivial zero cut).
    objective_ : float
        Primal objective at ``coef_``.
    dual_objective_ : float
        Dual objective of the final dual weights (a lower bound on the
        optimum).

    Notes
    -----
    ``decision_function`` follows scikit-learn's convention: shape
    ``(n_samples, n_classes)`` for three or more classes and, for two
    classes, the 1-D margin ``score(classes_[1]) - score(classes_[0])``
    (positive means ``classes_[1]``).
    """

    def __init__(
        self,
        C=1.0,
        cost=1.0,
        tol=1e-3,
        max_iter=1000,
        qp_max_iter=1000,
        warm_start=False,
        verbose=0,
    ):
        self.C = C
        self.cost = cost
        self.tol = tol
        self.max_iter = max_iter
        self.qp_max_iter = qp_max_iter
        self.warm_start = warm_start
        self.verbose = verbose

    _parameter_constraints = {
        "C": [Interval(numbers.Real, 0, None, closed="neither")],
        "cost": [Interval(numbers.Real, 0, None, closed="neither")],
        "tol": [Interval(numbers.Real, 0, None, closed="neither")],
        "max_iter": [Interval(numbers.Integral, 1, None)],
        "qp_max_iter": [Interval(numbers.Integral, 1, None)],
        "warm_start": [InstanceOf(bool, np.bool_, description="a bool")],
        "verbose": [Interval(numbers.Integral, 0, None)],
    }

    # -- fitting ----------------------------------------------------------
    def fit(self, X, y, sample_weight=None):
        """Fit the model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), dense.
        y : array-like of shape (n_samples,), class labels.
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights; the hinge is averaged with weights
            ``sample_weight / sum(sample_weight)``.

        Returns
        -------
        self
        """
        validate_params(self.get_params(deep=False), self._parameter_constraints,
                        type(self).__name__)
        X, y = validate_data(self, X, y, dtype=np.float64, order="C")
        check_classification_targets(y)
        classes, y_index = np.unique(y, return_inverse=True)
        y_index = y_index.astype(np.intp).ravel()
        if classes.shape[0] < 2:
            raise ValueError(
                "CuttingPlaneSVM needs samples of at least 2 classes in the "
                f"data, but the data contains only one class: {classes[0]!r}"
            )
        problem = _Problem(X, y_index, _hinge_weights(sample_weight, y_index),
                           classes.shape[0], float(self.C), float(self.cost))
        return self.fit_problem(problem, classes)

    def fit_problem(self, problem, classes):
        """Fit on a validated problem: `fit`'s work after its checks.

        ``problem`` is `fit`'s ``_Problem`` or an object with the same
        attributes and methods (C, cost, n_classes, n_dims, n_features,
        labelling_length, cuts, most_violated, largest_norm), such as the cuts
        summed over a dask array's partitions (`stc._learning.supervised.labelled_dask`):
        the cutting-plane loop only sees cut constants and gradients. There a
        labelling is stored as one key (``labelling_length`` 1).
        """
        eps = float(self.tol) * problem.cost
        ws = self._initial_working_set(problem, classes)
        W, primal, dual, n_iter, why = _cutting_plane(
            problem, ws, eps, _QP_REL_TOL * problem.C * eps, self.max_iter,
            self.qp_max_iter, self.verbose)
        if why is not None:
            warnings.warn(f"CuttingPlaneSVM did not converge: {why}.", ConvergenceWarning)

        m = ws.m
        active = np.nonzero(ws.alpha[1:m] > 0)[0] + 1
        self._labellings = ws.labels[active].copy()
        self._alpha_cuts = ws.alpha[active].copy()
        self._C_fit = problem.C
        self.classes_ = classes
        self.coef_ = W.reshape(problem.n_classes, -1).copy()
        self.n_iter_ = n_iter
        self.n_cuts_ = m - 1
        self.objective_ = primal
        self.dual_objective_ = dual
        return self

    def _initial_working_set(self, problem, classes):
        """The zero cut, plus with ``warm_start`` the previous fit's cuts (see the module doc)."""
        C = problem.C
        ws = _WorkingSet(problem.n_dims, problem.labelling_length, C)
        warm = (
            self.warm_start
            and hasattr(self, "coef_")
            and self.coef_.shape == (problem.n_classes, problem.n_features)
            and np.array_equal(self.classes_, classes)
        )
        if not warm:
            return ws
        if (self._labellings.shape[1] == problem.labelling_length
                and self._labellings.shape[0] > 0):
            # Re-evaluate the previous cuts (labellings) on the new data.
            c_new, G_new = problem.cuts(self._labellings.astype(np.intp))
            alpha = _project_capped(self._alpha_cuts * (C / self._C_fit), C)
            ws.add(c_new, G_new, self._labellings, alpha)
            ws.alpha[0] = max(C - alpha.sum(), 0.0)
        else:
            # Labellings are meaningless for a different sample set: seed the
            # working set with the most violated labelling at the old W.
            ybar, _ = problem.most_violated(self.coef_.ravel())
            c_new, G_new = problem.cuts(ybar[None, :])
            if c_new[0] > 0:
                ws.add(c_new, G_new, ybar[None, :])
        return ws

    # -- prediction -------------------------------------------------------
    def decision_function(self, X):
        """Class scores.

        Returns ``X @ coef_.T`` of shape (n_samples, n_classes) when there
        are three or more classes, and the 1-D margin ``score(classes_[1]) -
        score(classes_[0])`` for two classes (scikit-learn's convention).
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        scores = row_products(X, self.coef_)
        if scores.shape[1] == 2:
            return scores[:, 1] - scores[:, 0]
        return scores

    def predict(self, X):
        """Class with the highest score ``W_y @ x``."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(np.intp)]
        return self.classes_[np.argmax(scores, axis=1)]
