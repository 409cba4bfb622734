"""What a fit tells its user, and how the user stops it: the layers that learn import this.

* the progress lines of batch learning (`ProgressPrinter`, `DaskProgress`: one
  line per outer iteration, with `remaining_iterations`' estimate of the time
  left; online learning's are its pass driver's,
  `stc._learning.learners.online.PassProgress`);
* `StopRequest`: Ctrl-C ends a fit after the current iteration or batch;
* the warnings at the end of a fit (`warn_if_unfinished`) and the counts of
  documents whose coding stopped at its sweep cap (`count_capped`).
"""
import math
import signal
import sys
import threading
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from stc._learning.coding import zero_code_fraction
from stc._utils.validation import user_stacklevel


class FitInterruptedWarning(UserWarning):
    """A fit was interrupted (Ctrl-C); the model holds what it learned so far."""


class StopRequest:
    """Turns SIGINT into a request to stop after the current iteration (main thread only).

    A second Ctrl-C raises KeyboardInterrupt at once, as usual.
    """

    def __init__(self):
        self.requested = False
        self._previous = None

    def _handle(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("stc: interrupt received; stopping after this iteration (Ctrl-C again to abort)",
              file=sys.stderr, flush=True)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            try:
                self._previous = signal.signal(signal.SIGINT, self._handle)
            except ValueError:  # e.g. an embedded interpreter that owns the signals
                self._previous = None
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False


def remaining_iterations(objective, tol, max_iter, min_decreases=4):
    """Estimated outer iterations left before ``relative_decrease_below(tol)`` stops the fit.

    The relative decrease of the objective, taken to fall geometrically, c r^t at
    iteration t, is fitted by least squares (log scale) to all the decreases so far
    and extrapolated to ``tol``. Fitted to the last two or few decreases instead, the
    rate jumps about with their noise. None ("?") until ``min_decreases`` decreases
    are known, or while the last iteration did not decrease the objective; never more
    than ``max_iter`` allows.
    """
    left = max(max_iter - len(objective), 0)
    if left == 0 or tol <= 0:  # tol 0: the fit runs to max_iter
        return left
    values = np.asarray(objective, dtype=np.float64)
    drops = (values[:-1] - values[1:]) / np.maximum(np.abs(values[1:]), 1e-300)
    kept = drops > 0  # an increase (MedSTC's hinge can cause one) says nothing of the rate
    if np.count_nonzero(kept) < min_decreases or not kept[-1]:
        return None
    if drops[-1] <= tol:
        return 0
    iteration = np.arange(2, len(objective) + 1)  # the one that made each decrease
    slope, intercept = np.polyfit(iteration[kept], np.log(drops[kept]), 1)
    if slope >= 0:
        return None
    # the first iteration t with c r^t <= tol, if it comes before max_iter
    last = (math.log(tol) - intercept) / slope
    return int(min(left, max(math.ceil(last) - len(objective), 1)))


class ProgressPrinter:
    """One line per outer iteration on stderr: objective, sparsity, elapsed and time left."""

    def __init__(self, tol, max_iter, stream=None, describe=None):
        self.tol, self.max_iter = tol, max_iter
        self.stream = stream
        self.describe = describe  # optional callable(iteration) -> extra text (MedSTC)
        self.start = time.perf_counter()

    def __call__(self, iteration, objective, state):
        elapsed = time.perf_counter() - self.start
        left = remaining_iterations(objective, self.tol, self.max_iter)
        eta = "?" if left is None else f"{left * elapsed / iteration:.0f}s"
        extra = self.describe(iteration) if self.describe is not None else ""
        print(f"iter {iteration:3d}/{self.max_iter}  objective {objective[-1]:.6e}  "
              f"{self.state_fields(state)}{extra}  elapsed {elapsed:.1f}s  left ~{eta}",
              file=sys.stderr if self.stream is None else self.stream, flush=True)

    def state_fields(self, state):
        return (f"word-code zeros {zero_code_fraction(state.codes):.3f}  "
                f"doc-code zeros {float(np.mean(state.theta == 0)):.3f}")


class DaskProgress(ProgressPrinter):
    """The progress line of a dask array's fit: the partitions in place of the sparsity
    (the codes stay on the workers)."""

    def __init__(self, tol, max_iter, n_partitions, describe=None):
        super().__init__(tol, max_iter, describe=describe)
        self.n_partitions = n_partitions

    def state_fields(self, state):
        return f"partitions {self.n_partitions}"


def warn_if_unfinished(estimator, converged, interrupted, capped_documents):
    """ConvergenceWarning / FitInterruptedWarning at the end of a fit, as the case may be."""
    name = type(estimator).__name__
    level = user_stacklevel()  # the user's call, whichever of the package's functions fits
    if interrupted:
        done = estimator.n_iter_
        warnings.warn(f"{name} fit interrupted after {done} iteration{'' if done == 1 else 's'}; "
                      "the model holds the topics learned so far", FitInterruptedWarning,
                      stacklevel=level)
    elif not converged:
        warnings.warn(f"{name} stopped at max_iter={estimator.max_iter} before the relative "
                      f"objective decrease fell under tol={estimator.tol}; raise max_iter or tol",
                      ConvergenceWarning, stacklevel=level)
    if capped_documents:
        warnings.warn(f"{capped_documents} documents stopped at inner_max_iter="
                      f"{estimator.inner_max_iter} coding sweeps before meeting inner_tol="
                      f"{estimator.inner_tol}; raise inner_max_iter or inner_tol",
                      ConvergenceWarning, stacklevel=level)


def count_capped(result, problem):
    """Documents whose coding stopped at the sweep cap before meeting the tolerance."""
    return int(np.count_nonzero(result.n_iter >= problem.max_iter)) if problem.max_iter else 0


def step_capped_documents(result, problem, sweeps):
    """`count_capped` for a coding step of ``sweeps`` sweeps (see `iteration_problem`).

    A step of a fixed number of sweeps stops at that cap by design: it has no
    capped documents. None (the problem's own rule) counts them.
    """
    return count_capped(result, problem) if sweeps is None else 0
