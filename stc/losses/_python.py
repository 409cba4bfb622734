"""Losses written in pure Python (vectorised numpy), and the generic solver they use.

A pure-Python loss cannot be called from the nogil coding kernel; the
estimators code its documents with a numpy implementation of the same sweep
(`stc._core.numpy_coding`), which calls these vectorised methods once per
topic per sweep for all words of all documents at once.
"""
import numpy as np

NEWTON_RTOL = 1e-10
NEWTON_MAX_ITER = 100
BRACKET_MAX_DOUBLINGS = 1100
DOMAIN_MARGIN = 1e-10  # relative distance kept from a finite upper end of the mean domain


class PythonLoss:
    """Base class of a convex loss l(y, mean) written with numpy.

    Subclasses implement ``loss``, ``gradient`` and ``hessian`` (elementwise,
    with respect to the mean, on numpy arrays) and may set ``mean_domain``
    (the open interval the mean must lie in) and ``check_data`` (raise ValueError for values outside the data domain).
    """

    name = "python"
    mean_domain = (-np.inf, np.inf)

    def loss(self, y, mean):
        raise NotImplementedError(f"{type(self).__name__} must implement loss(y, mean)")

    def gradient(self, y, mean):
        raise NotImplementedError(f"{type(self).__name__} must implement gradient(y, mean)")

    def hessian(self, y, mean):
        raise NotImplementedError(f"{type(self).__name__} must implement hessian(y, mean)")

    def check_data(self, values):
        """Raise ValueError when ``values`` (the non-zero data) leave the data domain."""

    def solve_coordinate(self, y, b, mean_rest, quad, lin, x_start=0.0):
        """Vectorised minimiser of l(y, mean_rest + b x) + quad x^2 + lin x over x >= 0."""
        return newton_coordinate(self, y, b, mean_rest, quad, lin, x_start)

    newton_coordinate = solve_coordinate

    def __repr__(self):
        return f"{type(self).__name__}()"


def newton_coordinate(loss, y, b, mean_rest, quad, lin, x_start=0.0):
    """Safeguarded Newton on many independent 1-D coordinate problems at once.

    Same algorithm as the compiled `CompiledLoss._newton_coordinate`: a
    bracket [left, right] around the minimiser, Newton steps, bisection when
    a step leaves the bracket; the result is clamped at zero (Proposition 1).
    """
    shape = np.broadcast(y, b, mean_rest, quad, lin, x_start).shape
    y, b, mean_rest, quad, lin, x_start = (
        np.array(a, dtype=np.float64).ravel()
        for a in np.broadcast_arrays(y, b, mean_rest, quad, lin, x_start))
    lower, upper = loss.mean_domain
    x = np.zeros_like(y)
    flat = b <= 0.0
    x[flat] = np.maximum(-lin[flat] / (2.0 * quad[flat]), 0.0)
    active = ~flat
    with np.errstate(divide="ignore", invalid="ignore"):
        left = np.where(active, (lower - mean_rest) / np.where(active, b, 1.0), 0.0)
        right = np.where(active, (upper - mean_rest) / np.where(active, b, 1.0), 0.0)
    zero_feasible = active & (left < 0.0)
    if np.any(zero_feasible):
        idx = np.flatnonzero(zero_feasible)
        slope0 = b[idx] * loss.gradient(y[idx], mean_rest[idx]) + lin[idx]
        stays_zero = idx[slope0 >= 0.0]
        active[stays_zero] = False
        left[zero_feasible] = 0.0
    empty = active & (right <= left)
    x[empty] = np.maximum(left[empty], 0.0)
    active &= ~empty

    def slope(i, xi):
        return b[i] * loss.gradient(y[i], mean_rest[i] + b[i] * xi) + 2.0 * quad[i] * xi + lin[i]

    # Walk the right end out until h' > 0 where the domain is unbounded above.
    walk = np.flatnonzero(active & ~np.isfinite(right))
    step = np.maximum(np.abs(x_start[walk]), 1.0)
    right[walk] = left[walk] + step
    for _ in range(BRACKET_MAX_DOUBLINGS):
        if walk.size == 0:
            break
        positive = slope(walk, right[walk]) > 0.0
        grow = walk[~positive]
        step = step[~positive] * 2.0
        left[grow] = right[grow]
        right[grow] = left[grow] + step
        walk = grow

    idx = np.flatnonzero(active)
    xi = x_start[idx].copy()
    lo, hi = left[idx], right[idx]
    # Start in the middle when the start is outside or far below the bracket
    # scale (Newton would creep for h' ~ -1/x), as the compiled solver does.
    outside = ~((xi > lo) & (xi < hi)) | (xi < 1e-3 * (hi - lo))
    xi[outside] = 0.5 * (lo[outside] + hi[outside])
    previous_step = hi - lo
    for _ in range(NEWTON_MAX_ITER):
        if idx.size == 0:
            break
        g = slope(idx, xi)
        hi = np.where(g > 0.0, xi, hi)
        lo = np.where(g < 0.0, xi, lo)
        hess = b[idx] ** 2 * loss.hessian(y[idx], mean_rest[idx] + b[idx] * xi) + 2.0 * quad[idx]
        with np.errstate(divide="ignore", invalid="ignore"):
            x_new = xi - g / hess
        bad = ~((x_new > lo) & (x_new < hi)) | (np.abs(2.0 * g) > np.abs(previous_step * hess))
        x_new[bad] = 0.5 * (lo[bad] + hi[bad])
        x_new[g == 0.0] = xi[g == 0.0]
        previous_step = np.abs(x_new - xi)
        done = (previous_step <= NEWTON_RTOL * np.abs(x_new)) | (
            hi - lo <= NEWTON_RTOL * np.abs(x_new)) | (g == 0.0)
        x[idx[done]] = x_new[done]
        keep = ~done
        idx, xi, lo, hi, previous_step = idx[keep], x_new[keep], lo[keep], hi[keep], previous_step[keep]
    x[idx] = xi
    if np.isfinite(upper):
        cap = upper - DOMAIN_MARGIN * max(abs(upper), 1.0)
        over = mean_rest + b * x > cap
        x[over] = (cap - mean_rest[over]) / b[over]
    return np.maximum(x, 0.0).reshape(shape)
