"""Loss plugins: the reconstruction loss l(y, mean) of one word count.

Built in: ``"poisson"`` (closed-form coordinate update), ``"gaussian"``
(closed form) and ``"bernoulli"`` (generic Newton path only). A user's loss is
either a `PythonLoss` subclass (vectorised numpy; slower) or a Cython subclass
of `CompiledLoss` in the user's own extension module (nogil, built-in speed),
made available to the estimators by `register`.
"""
import numpy as np

from stc.losses._base import CompiledLoss
from stc.losses._builtin import BernoulliLoss, GaussianLoss, PoissonLoss
from stc.losses._python import PythonLoss, newton_coordinate

__all__ = [
    "BernoulliLoss", "CompiledLoss", "GaussianLoss", "PoissonLoss", "PythonLoss",
    "check_loss", "get_loss", "newton_coordinate", "register", "registered_losses",
]

_REGISTRY = {}


def register(name, cls):
    """Make ``cls`` (a loss class, instantiated without arguments) usable as ``loss=name``.

    The class is checked first (see `check_loss`); re-registering a name
    replaces the previous entry.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty string, got {name!r}")
    if not isinstance(cls, type) or not issubclass(cls, (CompiledLoss, PythonLoss)):
        raise TypeError(
            f"cls must be a subclass of stc.losses.CompiledLoss or stc.losses.PythonLoss, got {cls!r}")
    check_loss(cls())
    _REGISTRY[name] = cls
    return cls


def registered_losses():
    """Names accepted by ``loss=``."""
    return sorted(_REGISTRY)


def get_loss(loss):
    """Return a loss instance from a registered name or an instance."""
    if isinstance(loss, (CompiledLoss, PythonLoss)):
        return check_loss(loss)
    if isinstance(loss, str):
        try:
            return _REGISTRY[loss]()
        except KeyError:
            raise ValueError(
                f"loss={loss!r} is not registered; known losses: {registered_losses()}") from None
    raise TypeError(f"loss must be a registered name or a loss instance, got {type(loss).__name__}")


def _sample_means(loss, n=64):
    """Means spread over the loss's mean domain, dense near a finite end."""
    lower, upper = loss.mean_domain
    if np.isfinite(lower) and np.isfinite(upper):
        return lower + (upper - lower) * np.linspace(0.01, 0.99, n)
    if np.isfinite(lower):
        return lower + np.geomspace(1e-3, 1e3, n)
    if np.isfinite(upper):
        return upper - np.geomspace(1e-3, 1e3, n)
    return np.linspace(-1e3, 1e3, n)


def _probe_means(loss, n=49):
    """Means over the whole mean domain on a log scale, from 1e-12 to 1e12 off its ends.

    The sample grid of `check_loss` sits near the data; a loss can still break
    far from it (a gradient that is NaN above some mean, say), where the
    coding step may go before it converges.
    """
    lower, upper = loss.mean_domain
    offsets = np.geomspace(1e-12, 1e12, n)
    if np.isfinite(lower) and np.isfinite(upper):
        width = upper - lower
        inner = width * np.geomspace(1e-12, 0.5, n)
        return np.concatenate([lower + inner, upper - inner])
    if np.isfinite(lower):
        return lower + offsets
    if np.isfinite(upper):
        return upper - offsets
    return np.concatenate([-offsets[::-1], [0.0], offsets])


def check_loss(loss, data=None):
    """Refuse a loss that cannot be used: missing methods, non-convexity, a domain that excludes the data.

    Convexity is checked on sample points: the second derivative must be
    non-negative, and must agree with finite differences of the gradient
    (which must agree with finite differences of the loss), at means spread
    over the mean domain and data values ``data`` (or a default set). Far
    from those points, over the whole mean domain on a log scale (1e-12 to
    1e12 off its ends), the loss must not be NaN, its gradient and hessian
    must be finite wherever the loss is, and the hessian non-negative.
    """
    name = type(loss).__name__
    for method in ("loss", "gradient", "hessian"):
        if not callable(getattr(loss, method, None)):
            raise TypeError(f"loss {name} has no {method}(y, mean) method")
    if isinstance(loss, CompiledLoss):
        _check_compiled_in_cython(loss, name)
    lower, upper = _check_declarations(loss, name)
    if data is None:
        if np.isfinite(lower) and np.isfinite(upper):
            ys = lower + (upper - lower) * np.array([0.25, 0.75, 1.0])
        else:
            ys = np.array([1.0, 2.0, 5.0])
    else:
        ys = np.unique(np.asarray(data, dtype=np.float64))[:16]
        if not np.all(np.isfinite(ys)):
            raise ValueError("data holds NaN or infinite values; give the data's finite values")
        if hasattr(loss, "check_data"):
            loss.check_data(ys)
    means = _sample_means(loss)
    y_grid, m_grid = np.meshgrid(ys, means, indexing="ij")
    try:
        value = np.asarray(loss.loss(y_grid, m_grid), dtype=np.float64)
        grad = np.asarray(loss.gradient(y_grid, m_grid), dtype=np.float64)
        hess = np.asarray(loss.hessian(y_grid, m_grid), dtype=np.float64)
    except NotImplementedError as exc:
        raise TypeError(f"loss {name} is incomplete: {exc}") from None
    for label, arr in (("loss", value), ("gradient", grad), ("hessian", hess)):
        if np.shape(arr) == y_grid.shape and np.all(np.isnan(arr)):
            if isinstance(loss, CompiledLoss):
                raise TypeError(f"loss {name} does not define {label}: it is NaN at every "
                                f"sample point (a CompiledLoss subclass must override the "
                                f"Cython method _{label}, in a cdef class; a loss written in "
                                "Python subclasses stc.losses.PythonLoss)")
            raise TypeError(f"loss {name} does not define {label}: {label}(y, mean) returns "
                            "NaN at every sample point")
    for label, arr in (("loss", value), ("gradient", grad), ("hessian", hess)):
        if arr.shape != y_grid.shape:
            raise ValueError(f"loss {name}: {label}(y, mean) must be elementwise (got shape "
                             f"{arr.shape} for inputs of shape {y_grid.shape})")
    if not np.all(np.isfinite(value)):
        bad = np.argwhere(~np.isfinite(value))[0]
        raise ValueError(f"loss {name} is not finite at y={y_grid[tuple(bad)]}, mean="
                         f"{m_grid[tuple(bad)]}: its mean_domain {loss.mean_domain} "
                         "does not fit the data")
    if np.any(hess < -1e-12 * (1.0 + np.abs(hess).max())):
        bad = np.argwhere(hess < 0)[0]
        raise ValueError(f"loss {name} is not convex: hessian is {hess[tuple(bad)]:.3g} < 0 at "
                         f"y={y_grid[tuple(bad)]}, mean={m_grid[tuple(bad)]}")
    _check_far_from_the_data(loss, name, ys)
    # Derivatives must be those of the loss (central differences, relative).
    h = 1e-6 * np.maximum(np.abs(m_grid), 1e-3)
    inside = (m_grid - h > lower) & (m_grid + h < upper)
    fd_grad = (np.asarray(loss.loss(y_grid, m_grid + h)) - np.asarray(loss.loss(y_grid, m_grid - h))) / (2 * h)
    fd_hess = (np.asarray(loss.gradient(y_grid, m_grid + h)) - np.asarray(loss.gradient(y_grid, m_grid - h))) / (2 * h)
    for label, analytic, numeric in (("gradient", grad, fd_grad), ("hessian", hess, fd_hess)):
        scale = 1e-4 * (1.0 + np.abs(analytic)) + 1e-9 * np.abs(value if label == "gradient" else grad) / h
        wrong = inside & (np.abs(analytic - numeric) > scale)
        if np.any(wrong):
            bad = tuple(np.argwhere(wrong)[0])
            raise ValueError(f"loss {name}: {label} disagrees with finite differences at y={y_grid[bad]}, "
                             f"mean={m_grid[bad]} ({analytic[bad]:.6g} vs {numeric[bad]:.6g})")
    return loss


# What a loss may declare besides its methods (see PythonLoss and CompiledLoss).
DICTIONARY_METHODS = ("mm", "pg")
SCORE_KINDS = ("loss", "multinomial", "none")


def _check_declarations(loss, name):
    """The loss's ``mean_domain`` as (lower, upper), its other declarations checked."""
    domain = loss.mean_domain
    try:
        lower, upper = (float(end) for end in domain)
    except (TypeError, ValueError):
        raise TypeError(f"loss {name}: mean_domain must be a pair of numbers (lower, upper), "
                        f"got {domain!r}") from None
    if not lower < upper:
        raise ValueError(f"loss {name} has an empty mean_domain {domain}")
    if loss.dictionary_method not in DICTIONARY_METHODS:
        raise ValueError(f"loss {name}: dictionary_method must be one of {DICTIONARY_METHODS}, "
                         f"got {loss.dictionary_method!r}")
    if loss.score_kind not in SCORE_KINDS:
        raise ValueError(f"loss {name}: score_kind must be one of {SCORE_KINDS}, got "
                         f"{loss.score_kind!r}")
    if loss.runs_in_kernel and not isinstance(loss, CompiledLoss):
        raise TypeError(f"loss {name} sets runs_in_kernel, but only a CompiledLoss (a Cython "
                        "cdef class) runs in the compiled kernel; a PythonLoss is coded in numpy")
    return lower, upper


def _check_compiled_in_cython(loss, name):
    """Refuse a Python class that overrides a CompiledLoss's Python-level methods.

    The coding kernel calls the Cython methods ``_loss``, ``_gradient`` and
    ``_hessian``, which a class written in Python cannot override: its
    ``loss``/``gradient``/``hessian`` would pass `check_loss` while the kernel
    computed with the base class's NaN.
    """
    for method in ("loss", "gradient", "hessian"):
        owner = next(cls for cls in type(loss).__mro__ if method in vars(cls))
        if owner.__flags__ & _HEAP_TYPE:  # defined by a class statement in Python
            raise TypeError(
                f"loss {name} subclasses stc.losses.CompiledLoss in Python and overrides "
                f"{method}(): the coding kernel never calls it (it calls the Cython methods "
                "_loss, _gradient and _hessian of a cdef class). Subclass "
                "stc.losses.PythonLoss for a loss written in Python")


# Py_TPFLAGS_HEAPTYPE: set for classes created by a class statement in Python, not for
# the static types of compiled (Cython) classes.
_HEAP_TYPE = 1 << 9


def _check_far_from_the_data(loss, name, ys):
    """Where the loss is finite over its whole mean domain, its derivatives must be too.

    Probed at `_probe_means` for the data values ``ys``; a loss that overflows
    to +inf far out is accepted there, a NaN anywhere inside the domain is not.
    """
    y_grid, m_grid = np.meshgrid(ys, _probe_means(loss), indexing="ij")
    with np.errstate(all="ignore"):
        value = np.asarray(loss.loss(y_grid, m_grid), dtype=np.float64)
        grad = np.asarray(loss.gradient(y_grid, m_grid), dtype=np.float64)
        hess = np.asarray(loss.hessian(y_grid, m_grid), dtype=np.float64)
    where = f"inside its mean_domain {tuple(loss.mean_domain)}"
    if np.any(np.isnan(value)):
        bad = tuple(np.argwhere(np.isnan(value))[0])
        raise ValueError(f"loss {name}: loss is NaN at y={y_grid[bad]:g}, mean={m_grid[bad]:g} "
                         f"({where})")
    finite = np.isfinite(value)
    for label, arr in (("gradient", grad), ("hessian", hess)):
        broken = finite & ~np.isfinite(arr)
        if np.any(broken):
            bad = tuple(np.argwhere(broken)[0])
            raise ValueError(f"loss {name}: {label} is {arr[bad]} at y={y_grid[bad]:g}, "
                             f"mean={m_grid[bad]:g} ({where}, where the loss is "
                             f"{value[bad]:g}); the coding step can reach such means")
    if np.any(finite & (hess < -1e-12 * (1.0 + np.abs(np.where(finite, hess, 0.0)).max()))):
        bad = tuple(np.argwhere(finite & (hess < 0))[0])
        raise ValueError(f"loss {name} is not convex: hessian is {hess[bad]:.3g} < 0 at "
                         f"y={y_grid[bad]:g}, mean={m_grid[bad]:g}")


register("poisson", PoissonLoss)
register("gaussian", GaussianLoss)
register("bernoulli", BernoulliLoss)
