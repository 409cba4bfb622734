"""Losses written in pure Python (vectorised numpy), and the generic solver they use.

A pure-Python loss cannot be called from the nogil coding kernel; the
estimators code its documents with a numpy implementation of the same sweep
(`stc._core.reference`), which calls these vectorised methods once per
topic per sweep for all words of all documents at once.
"""
import numpy as np

from stc.losses._failures import FAILURE_HESSIAN, FAILURE_SOLVER
from stc.losses._solver_settings import (BRACKET_MAX_DOUBLINGS, DOMAIN_MARGIN,
                                         NEWTON_MAX_ITER, NEWTON_RTOL)

SMALLEST_POSITIVE = 5e-324  # the smallest positive (subnormal) double


class PythonLoss:
    """Base class of a convex loss l(y, mean) written with numpy.

    Subclasses implement ``loss``, ``gradient`` and ``hessian`` (elementwise,
    with respect to the mean, on numpy arrays) and may set ``mean_domain``
    (the open interval the mean must lie in) and ``check_data`` (raise ValueError for values outside the data domain).
    """

    name = "python"
    mean_domain = (-np.inf, np.inf)
    # Coded by the numpy reference of the kernel; dictionary step by projected
    # gradient ("mm" is valid only for the Poisson deviance).
    runs_in_kernel = False
    dictionary_method = "pg"
    # STC.score on held-out entries: "loss" (minus the mean loss per entry), or
    # "multinomial" for a loss that models counts as the Poisson deviance does
    score_kind = "loss"

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


def check_solutions(loss, x, problems):
    """Raise ValueError if a coordinate solver returned NaN (it could not solve a problem).

    ``problems`` holds the flat arrays (y, b, mean_rest, quad, lin, ...) the
    solver was given; the message names the first failed problem and, when it
    finds one, the mean where the loss broke (`nan_on_the_way`).
    """
    failed = np.flatnonzero(np.isnan(x))
    if failed.size == 0:
        return
    y, b, mean_rest, quad, lin = (float(np.ravel(a)[failed[0]]) for a in problems[:5])
    name = getattr(loss, "name", type(loss).__name__)
    raise ValueError(
        f"the {name} loss's coordinate solver failed on {failed.size} of {np.size(x)} problems, "
        f"first at y={y:.17g}, b={b:.17g}, mean_rest={mean_rest:.17g}, quad={quad:.17g}, "
        f"lin={lin:.17g}: {solver_failure_cause(loss, y, b, mean_rest)}")


def nan_on_the_way(loss, y, b, mean_rest):
    """Where a coordinate solver can meet a NaN: (part, mean) or None.

    The solver evaluates the loss's gradient and hessian at means mean_rest +
    b x, x >= 0, inside the mean domain; this scans those means (mean_rest,
    then offsets of 100 points per decade from 1e-12 to 1e12 times
    max(1, |y|, |mean_rest|), or up to a finite upper end of the domain) for
    the first at which the loss, its gradient or its hessian is NaN.
    """
    lower, upper = loss.mean_domain
    with np.errstate(all="ignore"):
        if not b > 0:
            offsets = np.zeros(1)
        elif np.isfinite(upper):
            offsets = (upper - mean_rest) * (1.0 - np.geomspace(1.0, 1e-12, 1201))
        else:
            scale = max(1.0, abs(y), abs(mean_rest))
            offsets = np.concatenate([[0.0], scale * np.geomspace(1e-12, 1e12, 2401)])
        means = mean_rest + offsets
        means = means[(means > lower) & (means < upper)]
        ys = np.full(means.shape, float(y))
        for part in ("loss", "gradient", "hessian"):
            values = np.asarray(getattr(loss, part)(ys, means), dtype=np.float64)
            bad = np.flatnonzero(np.isnan(values))
            if bad.size:
                return part, float(means[bad[0]])
    return None


def solver_failure_cause(loss, y, b, mean_rest):
    """Why the coordinate solver returned NaN on (y, b, mean_rest): text for an error message."""
    found = nan_on_the_way(loss, y, b, mean_rest)
    if found is not None:
        part, mean = found
        return (f"the loss's {part} is NaN at y={y:.17g}, mean={mean:.17g}, inside its "
                f"mean_domain {tuple(loss.mean_domain)}")
    return (f"the loss's gradient or hessian is NaN at some mean inside its mean_domain "
            f"{tuple(loss.mean_domain)}, or its derivatives are inconsistent (Newton did not "
            "converge)")


def loss_failure_message(loss, kind, y, mean, b, mean_rest, quad, lin, where=""):
    """The error message for a NaN the coding step got from ``loss`` (finite arguments).

    ``kind`` is a FAILURE_* code of `stc.losses._failures`: the coordinate
    solver returned NaN on the problem (y, b, mean_rest, quad, lin), or the
    hessian (the loss) was NaN at (y, mean). ``where`` names the document and
    term, if known.
    """
    name = getattr(loss, "name", type(loss).__name__)
    if kind == FAILURE_SOLVER:
        cause = (f"its coordinate solver returned NaN on y={y:.17g}, b={b:.17g}, "
                 f"mean_rest={mean_rest:.17g}, quad={quad:.17g}, lin={lin:.17g}: "
                 f"{solver_failure_cause(loss, y, b, mean_rest)}")
    elif kind == FAILURE_HESSIAN:
        cause = f"its hessian is NaN at y={y:.17g}, mean={mean:.17g}"
    else:
        cause = f"the loss is NaN at y={y:.17g}, mean={mean:.17g}"
    return (f"coding stopped{where}: the {name} loss failed, {cause}. A loss must be a number, "
            f"with a finite gradient and hessian, at every mean inside its mean_domain "
            f"{tuple(loss.mean_domain)}; stc.losses.check_loss(loss, data=X.data) samples only "
            "some of those means")


def newton_target(b, curv, grad, x, quad, lin):
    """Vectorised `newton_target` of the compiled solver (`_base.pyx`)."""
    big = b > 1.0
    scaled = ((b * curv * x - grad) - lin / b) / (b * curv + 2.0 * quad / b)
    plain = (b * (b * curv * x - grad) - lin) / (b * b * curv + 2.0 * quad)
    return np.where(big, scaled, plain)


def split_bracket(left, right):
    """Vectorised `split_bracket` of the compiled solver (`_base.pyx`)."""
    low = np.maximum(left, SMALLEST_POSITIVE)
    return np.where(right <= 4.0 * left, left + 0.5 * (right - left),
                    np.sqrt(low) * np.sqrt(right))


def newton_coordinate(loss, y, b, mean_rest, quad, lin, x_start=0.0):
    """Safeguarded Newton on many independent 1-D coordinate problems at once.

    Same algorithm as the compiled `CompiledLoss._newton_coordinate`: a
    bracket [left, right] around the minimiser, Newton steps, a split of the
    bracket when a step leaves it or does not halve the previous one; the
    result is clamped at zero (Proposition 1). Raises ValueError when a
    problem cannot be solved (the loss's gradient is NaN inside its mean
    domain, or the iteration does not converge).
    """
    # Like the compiled solver's C arithmetic, an overflow gives inf without a word:
    # at extreme scales the bracket and the steps rely on it.
    with np.errstate(over="ignore"):
        return _newton_coordinate(loss, y, b, mean_rest, quad, lin, x_start)


def _newton_coordinate(loss, y, b, mean_rest, quad, lin, x_start):
    shape = np.broadcast(y, b, mean_rest, quad, lin, x_start).shape
    problems = [np.array(a, dtype=np.float64).ravel()
                for a in np.broadcast_arrays(y, b, mean_rest, quad, lin, x_start)]
    y, b, mean_rest, quad, lin, x_start = problems
    x, failed, active, left, right = _coordinate_brackets(loss, y, b, mean_rest, quad, lin)
    unbounded = _walk_right_ends(loss, problems, active, left, right, failed)
    x[unbounded] = np.inf
    active &= ~failed & ~unbounded
    _newton_in_brackets(loss, problems, np.flatnonzero(active), left, right, x, failed)
    upper = loss.mean_domain[1]
    if np.isfinite(upper):
        cap = upper - DOMAIN_MARGIN * max(abs(upper), 1.0)
        over = mean_rest + b * x > cap
        x[over] = (cap - mean_rest[over]) / b[over]
    x = np.maximum(x, 0.0)
    x[failed] = np.nan
    check_solutions(loss, x, problems)
    return x.reshape(shape)


def _coordinate_brackets(loss, y, b, mean_rest, quad, lin):
    """The problems' answers where they are settled at once, and brackets for the others.

    Returns (x, failed, active, left, right): x holds the answer of the flat
    problems (b <= 0), of those where x = 0 is the minimiser and of those
    whose bracket is empty; ``active`` marks the problems still to solve in
    [left, right] (right infinite where the domain is unbounded above).
    """
    lower, upper = loss.mean_domain
    x = np.zeros_like(y)
    failed = np.zeros(y.shape, dtype=bool)
    flat = b <= 0.0
    x[flat] = np.maximum(-lin[flat] / (2.0 * quad[flat]), 0.0)
    active = ~flat
    with np.errstate(divide="ignore", invalid="ignore"):
        left = np.where(active, (lower - mean_rest) / np.where(active, b, 1.0), 0.0)
        right = np.where(active, (upper - mean_rest) / np.where(active, b, 1.0), 0.0)
    # x = 0 is feasible, or puts the mean on the lower end where the loss may
    # extend (see _base.pyx): x = 0 exactly when h'(0) >= 0 (Proposition 1)
    zero_feasible = np.flatnonzero(active & (left <= 0.0))
    if zero_feasible.size:
        with np.errstate(divide="ignore", invalid="ignore"):
            slope0 = b[zero_feasible] * loss.gradient(y[zero_feasible],
                                                      mean_rest[zero_feasible]) \
                + lin[zero_feasible]
        # a NaN gradient fails inside the domain; at its end the loss only stops there
        failed[zero_feasible[np.isnan(slope0) & (left[zero_feasible] < 0.0)]] = True
        active[zero_feasible[(slope0 >= 0.0) | failed[zero_feasible]]] = False
        left[zero_feasible] = 0.0
    empty = active & (right <= left)
    x[empty] = np.maximum(left[empty], 0.0)
    active &= ~empty
    return x, failed, active, left, right


def _walk_right_ends(loss, problems, active, left, right, failed):
    """Give the active problems with an infinite right end a finite one, in place.

    Marks in ``failed`` the problems whose slope is NaN or never turns
    positive; returns the mask of those unbounded below (h' <= 0 up to the
    largest double).
    """
    y, b, mean_rest, quad, lin, x_start = problems

    def slope(i, xi):
        return b[i] * loss.gradient(y[i], mean_rest[i] + b[i] * xi) + 2.0 * quad[i] * xi + lin[i]

    # Walk the right end out until h' > 0 where the domain is unbounded above,
    # from a step at the scale of the answer (as the compiled solver does).
    walk = np.flatnonzero(active & ~np.isfinite(right))
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.maximum(1.0, -lin[walk] / quad[walk])
    start = np.abs(x_start[walk])
    step = np.where(np.isfinite(start) & (start > step), start, step)
    largest = np.finfo(np.float64).max
    with np.errstate(over="ignore"):
        right[walk] = np.minimum(left[walk] + step, largest)
    unbounded = np.zeros_like(failed)
    for _ in range(BRACKET_MAX_DOUBLINGS):
        if walk.size == 0:
            break
        with np.errstate(over="ignore", invalid="ignore"):
            g = slope(walk, right[walk])
        failed[walk[np.isnan(g)]] = True
        grow = g <= 0.0
        # h' <= 0 up to the largest double (lin = -inf, say): the infimum is at +inf
        unbounded[walk[grow & (right[walk] == largest)]] = True
        grow &= right[walk] < largest
        walk, step = walk[grow], 2.0 * step[grow]
        left[walk] = right[walk]
        with np.errstate(over="ignore"):
            right[walk] = np.minimum(left[walk] + step, largest)
    failed[walk] = True  # h' never turned positive
    return unbounded


def _newton_in_brackets(loss, problems, idx, left, right, x, failed):
    """Safeguarded Newton on problems ``idx`` in their brackets; answers into ``x``.

    Marks in ``failed`` the problems whose slope is NaN, or that do not
    converge within NEWTON_MAX_ITER.
    """
    y, b, mean_rest, quad, lin, x_start = problems
    lower, upper = loss.mean_domain
    xi = x_start[idx].copy()
    lo, hi = left[idx], right[idx]
    # Start in the middle when the start is outside or far below the bracket
    # scale (Newton would creep for h' ~ -1/x), as the compiled solver does.
    outside = ~((xi > lo) & (xi < hi)) | (xi < 1e-3 * (hi - lo))
    xi[outside] = lo[outside] + 0.5 * (hi[outside] - lo[outside])
    previous_step = 2.0 * (hi - lo)
    for _ in range(NEWTON_MAX_ITER):
        if idx.size == 0:
            break
        mean = mean_rest[idx] + b[idx] * xi
        below = ~(mean > lower)
        above = ~(mean < upper) & ~below
        inside = ~below & ~above
        lo = np.where(below, xi, lo)
        hi = np.where(above, xi, hi)
        grad = np.zeros_like(xi)  # (only where the mean is inside its domain)
        curv = np.ones_like(xi)
        if inside.all():
            grad[:] = loss.gradient(y[idx], mean)
            curv[:] = loss.hessian(y[idx], mean)
        else:
            grad[inside] = loss.gradient(y[idx[inside]], mean[inside])
            curv[inside] = loss.hessian(y[idx[inside]], mean[inside])
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            g = b[idx] * grad + 2.0 * quad[idx] * xi + lin[idx]
            # x - g / h''(x) with the 2 quad x terms cancelled by hand; where
            # b x is below the rounding of mean_rest, the minimiser of the
            # loss's first-order model about mean_rest (see _base.pyx)
            unseen = mean == mean_rest[idx]
            x_new = newton_target(b[idx], curv, grad, np.where(unseen, 0.0, xi), quad[idx],
                                  lin[idx])
            settled = inside & unseen & (mean_rest[idx] + b[idx] * x_new == mean_rest[idx])
        hi = np.where(inside & (g > 0.0), xi, hi)
        lo = np.where(inside & (g < 0.0), xi, lo)
        # a Newton step below the tolerance ends the iteration, even when it
        # lands on the bracket's end (which is then the current point)
        tiny_step = inside & ((np.abs(x_new - xi) <= NEWTON_RTOL * xi) | settled)
        at_root = inside & ((g == 0.0) | tiny_step)
        x_tiny = np.maximum(lo, np.minimum(x_new, hi))
        broken = inside & np.isnan(g)
        newton_ok = inside & (x_new > lo) & (x_new < hi) & (np.abs(x_new - xi) <= 0.5 * previous_step)
        with np.errstate(invalid="ignore"):
            split = split_bracket(lo, hi)
        x_new = np.where(newton_ok, x_new, split)
        no_room = ~newton_ok & ~((split > lo) & (split < hi))
        step = np.abs(x_new - xi)
        x_new = np.select([inside & (g == 0.0), tiny_step, no_room], [xi, x_tiny, xi], x_new)
        done = at_root | no_room | (step <= NEWTON_RTOL * x_new) | (hi - lo <= NEWTON_RTOL * x_new)
        failed[idx[broken]] = True
        done &= ~broken
        x[idx[done]] = x_new[done]
        keep = ~done & ~broken
        idx, xi, lo, hi, previous_step = idx[keep], x_new[keep], lo[keep], hi[keep], step[keep]
    failed[idx] = True  # no convergence within NEWTON_MAX_ITER
