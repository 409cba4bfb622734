"""Fuzz: the coordinate solvers of every built-in loss and of the documented example loss.

For one entry x of the word-code step the problem is

    min_{x >= 0} h(x) = l(y, mean_rest + b x) + quad x^2 + lin x.

Hypothesis draws (y, b, mean_rest, quad, lin, x_start) on log scales, from
ordinary values to the extremes of doubles (one input at a time out to
1e+-300), and every solver path must return the exact minimiser: the closed
forms (`solve_coordinate`), the kernel's block (`solve_block`), the
compiled generic Newton solver and its numpy twin. The reference is h'
itself evaluated with mpmath at 200 bits: h' must change sign within a
relative 1e-9 of the returned x (plus the rounding that evaluating h' in
doubles allows at x), or h'(0) >= 0 where x = 0 (Proposition 1). Problems
whose answer a double cannot hold (a minimiser beyond 1e280, or a mean that
underflows, or a minimiser below 1e-300, which only a subnormal double could hold)
are skipped, not solved.

Sizes: tests/fuzz_profile.py (short by default; STC_FUZZ=long via tools/fuzz.py).
"""
import math
import sys
from pathlib import Path

import mpmath
import numpy as np
import pytest
from hypothesis import assume, given, note
from hypothesis import strategies as st

from fuzz_profile import count, fuzz_settings
from stc.losses import BernoulliLoss, GaussianLoss, PoissonLoss, newton_coordinate

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs" / "examples"))
from python_loss import PseudoHuberLoss  # noqa: E402  (the documented example loss)

MP = mpmath.mp.clone()
MP.prec = 200
EPS = np.finfo(np.float64).eps
DOMAIN_MARGIN = 1e-10  # the solvers keep the mean this far inside a finite upper end


# (a term with weight y = 0 or 1 - y = 0 is dropped: 0 log 0 = 0, also at the domain's end)
def poisson_derivatives(y, m):
    return (1 - y / m, y / m ** 2) if y else (MP.mpf(1), MP.mpf(0))


def gaussian_derivatives(y, m):
    return m - y, MP.mpf(1)


def bernoulli_derivatives(y, m):
    g, h = MP.mpf(0), MP.mpf(0)
    if y:
        g, h = g - y / m, h + y / m ** 2
    if y != 1:
        g, h = g + (1 - y) / (1 - m), h + (1 - y) / (1 - m) ** 2
    return g, h


def pseudo_huber_derivatives(y, m, delta=1.0):
    r = (m - y) / delta
    return delta * r / MP.sqrt(1 + r * r), 1 / (1 + r * r) ** MP.mpf(1.5)


# ---------------------------------------------------------------------------
# Strategies: log-uniform magnitudes, ordinary or extreme
# ---------------------------------------------------------------------------
def magnitude(low, high):
    return st.floats(low, high).map(lambda e: float(10.0 ** e))


def signed(low, high):
    return st.tuples(st.sampled_from([-1.0, 1.0]), magnitude(low, high)).map(lambda t: t[0] * t[1])


@st.composite
def problems(draw, name):
    """(y, b, mean_rest, quad, lin, x_start) for loss ``name``."""
    wide = draw(st.sampled_from(["ordinary", "ordinary", "extreme"]))
    lo, hi = (-30, 30) if wide == "ordinary" else (-300, 300)
    # in the extreme mode one input (chosen below) takes the wide range, the others ordinary
    wild = draw(st.sampled_from(["y", "b", "mean_rest", "quad", "lin"])) if wide == "extreme" else ""

    def scale(which):
        return (lo, hi) if which == wild else (-30, 30)

    quad = draw(magnitude(*scale("quad")))
    lin = draw(st.one_of(st.just(0.0), signed(*scale("lin"))))
    b = draw(st.one_of(st.just(0.0), magnitude(*scale("b")))) if draw(st.booleans()) else \
        draw(magnitude(*scale("b")))
    if name == "bernoulli":
        y = draw(st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0)))
        mean_rest = draw(st.one_of(st.just(0.0), st.floats(0.0, 0.999),
                                   magnitude(-15, -1).map(lambda e: 1.0 - e)))
        if b == 0.0:
            mean_rest = draw(st.floats(1e-3, 0.999))
    elif name == "pseudo_huber":
        # residuals out to 1e300: the example is written not to overflow (b stays
        # ordinary: at b = 1e299 the numpy Newton solver does not converge, see issue 20)
        # y and mean_rest ordinary up to 1e10 unless wild (both huge: y - mean_rest cancels)
        y = draw(st.one_of(st.just(0.0), magnitude(*(scale("y") if wild == "y" else (-10, 10)))))
        mean_rest = draw(st.one_of(st.just(0.0), signed(*(scale("mean_rest")
                                                          if wild == "mean_rest" else (-10, 10)))))
        b = draw(st.one_of(st.just(0.0), magnitude(-30, 30)))
    else:
        y = draw(st.one_of(st.just(0.0), st.integers(1, 1000).map(float), magnitude(*scale("y"))))
        mean_rest = draw(st.one_of(st.just(0.0), magnitude(*scale("mean_rest"))))
        if name == "poisson" and b == 0.0 and y > 0.0 and mean_rest == 0.0:
            mean_rest = draw(magnitude(-30, 30))  # otherwise h is +inf for every x
    x_start = draw(st.one_of(st.just(0.0), magnitude(-30, 30)))
    return y, b, mean_rest, quad, lin, x_start


# ---------------------------------------------------------------------------
# The reference: h' in 200-bit arithmetic
# ---------------------------------------------------------------------------
class Problem:
    def __init__(self, name, derivatives, domain, y, b, mean_rest, quad, lin):
        self.name, self.derivatives, self.domain = name, derivatives, domain
        self.args = (y, b, mean_rest, quad, lin)
        self.Y, self.B, self.M, self.Q, self.L = (MP.mpf(v) for v in self.args)

    def inside(self, mean):
        lower, upper = self.domain
        return (lower is None or mean > lower) and (upper is None or mean < upper)

    def slope(self, x):
        x = MP.mpf(x)
        g, _ = self.derivatives(self.Y, self.M + self.B * x)
        return self.B * g + 2 * self.Q * x + self.L

    def rounding(self, x):
        """Size of the terms of h' at x, and of h'': what a double evaluation can resolve."""
        x = MP.mpf(x)
        mean = self.M + self.B * x
        g, h = self.derivatives(self.Y, mean)
        terms = (abs(self.B * g) + self.B * abs(h) * (abs(self.M) + self.B * x)
                 + 2 * self.Q * x + abs(self.L))
        return terms, self.B ** 2 * h + 2 * self.Q

    def representable(self):
        """False if the minimiser or its mean is beyond what a double holds."""
        if self.B == 0:
            # h = const + quad x^2 + lin x: its minimiser -lin / (2 quad) can pass the
            # largest double (lin = -1e291, quad = 1e-18: 5e308), where the solvers' inf is
            # the rounded answer; such problems are skipped like those below
            return -self.L / (2 * self.Q) < MP.mpf(1e280)
        lower, _ = self.domain
        zero_inside = lower is None or self.M > lower
        if zero_inside and self.slope(0) >= 0:
            return True  # the answer is 0
        tiny = MP.mpf(1e-300)
        if self.inside(self.M + self.B * tiny) and self.slope(tiny) > 0:
            # the minimiser is below 1e-300: a subnormal (or zero) double, which cannot
            # hold it to the relative accuracy checked (y = 0, b = 1e158, mean_rest = 0,
            # quad = 1, lin = -1 gives 1/(b^2 + 2) = 1e-316)
            return False
        big = MP.mpf(1e280)
        if not self.inside(self.M + self.B * big) or self.slope(big) > 0:
            # the minimiser is below 1e280 (or the domain ends first); its mean must not underflow
            if self.M == 0:
                return self.slope(MP.mpf(1e-280) / self.B) < 0
            return True
        return False


def check_minimiser(problem, x, solver):
    name = problem.name
    y, b, mean_rest, quad, lin = problem.args
    note(f"{solver}: x = {x!r}")
    assert math.isfinite(x) and x >= 0.0, (solver, x)
    if b == 0.0:
        assert x == max(0.0, -lin / (2.0 * quad))
        return
    X = MP.mpf(x)
    mean = problem.M + problem.B * X
    lower, upper = problem.domain
    if x == 0.0 or not problem.inside(mean):
        if lower is not None and mean <= lower:
            # only a loss that stays finite at the open lower end may put the mean there
            assert y == 0.0, (solver, "the mean is at the end of the domain where the loss is "
                              "infinite")
            assert problem.slope(MP.mpf(lower - problem.M) / problem.B + MP.mpf(1e-300)) >= \
                -256 * EPS * problem.rounding(0)[0]
            return
    if upper is not None and mean >= upper - 2 * DOMAIN_MARGIN * max(abs(upper), 1):
        # at the cap next to the open upper end: the slope may still be negative there
        assert mean < upper
        return
    terms, curvature = problem.rounding(X)
    tolerance = 256 * EPS * terms
    if x == 0.0:
        assert problem.slope(0) >= -tolerance, (solver, "h'(0) < 0 at x = 0")
        return
    width = 1e-9 * X + 256 * EPS * terms / curvature
    low, high = X - width, X + width
    if low > 0 and problem.inside(problem.M + problem.B * low):
        assert problem.slope(low) <= tolerance, (solver, "h' > 0 below x: x is too large")
    if problem.inside(problem.M + problem.B * high):
        assert problem.slope(high) >= -tolerance, (solver, "h' < 0 above x: x is too small")


LOSSES = {
    "poisson": (PoissonLoss(), poisson_derivatives, (0.0, None)),
    "gaussian": (GaussianLoss(), gaussian_derivatives, (None, None)),
    "bernoulli": (BernoulliLoss(), bernoulli_derivatives, (0.0, 1.0)),
    "pseudo_huber": (PseudoHuberLoss(), pseudo_huber_derivatives, (None, None)),
}


def solver_paths(loss, args, x_start):
    y, b, mean_rest, quad, lin = args
    if isinstance(loss, PseudoHuberLoss):
        yield "numpy", float(loss.solve_coordinate(y, b, mean_rest, quad, lin, x_start))
        return
    yield "solve", float(loss.solve_coordinate(y, b, mean_rest, quad, lin, x_start))
    yield "batch", float(loss.solve_block([y], [b], [mean_rest], quad, lin, [x_start])[0])
    yield "newton", float(loss.newton_coordinate(y, b, mean_rest, quad, lin, x_start))
    yield "numpy", float(newton_coordinate(loss, y, b, mean_rest, quad, lin, x_start))


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_every_solver_returns_the_exact_minimiser(name):
    loss, derivatives, domain = LOSSES[name]

    @fuzz_settings(short=150, long=12500)
    @given(problems(name))
    def run(drawn):
        *args, x_start = drawn
        problem = Problem(name, derivatives, domain, *args)
        assume(problem.representable())
        for solver, x in solver_paths(loss, args, x_start):
            check_minimiser(problem, x, solver)
            count(f"coordinate problem, {name}, {solver}")

    run()


# A batch of one problem makes CompiledLoss._solve (stc/losses/_base.pyx) take writable
# memoryviews of np.broadcast_arrays views of the scalar quad and lin, which numpy warns
# about (DeprecationWarning) although nothing is written to them. Not the point here.
@pytest.mark.filterwarnings(
    "ignore:Numpy has detected that you .may be. writing to an array with:DeprecationWarning")
@pytest.mark.parametrize("name", ["poisson", "gaussian"])
def test_closed_form_batch_equals_one_at_a_time(name):
    """The kernel's batch loop (extreme inputs handed on afterwards) agrees with the scalar path."""
    loss = LOSSES[name][0]

    @fuzz_settings(short=60, long=2500)
    @given(st.lists(problems(name), min_size=1, max_size=12), magnitude(-30, 30),
           st.one_of(st.just(0.0), signed(-300, 300)))
    def run(drawn, quad, lin):
        y, b, mean_rest, _, _, x_start = (np.array(v) for v in zip(*drawn))
        batch = loss.solve_block(y, b, mean_rest, quad, lin, x_start)
        one = loss.solve_coordinate(y, b, mean_rest, quad, lin, x_start)
        np.testing.assert_array_equal(batch, one)
        count(f"closed-form batch vs one at a time (problems), {name}", len(drawn))

    run()


@pytest.mark.parametrize("name", ["poisson", "bernoulli"])
def test_zero_at_the_domain_end_is_exact(name):
    """Proposition 1 at (or next to) the lower end mean = 0: h'(0) >= 0 gives x == 0.0 exactly.

    With y = 0 both losses extend to mean = 0 (0 log 0 = 0), so x = 0 is feasible
    there even for mean_rest = 0; the solvers used to return the end of their
    bracket instead (5e-324, or 8e-296 for the Poisson Newton path at b = 3e-29).
    h'(0) is evaluated with mpmath; lin is drawn just above -b l'(y, mean_rest), the
    edge of the region (with a margin for the rounding of h'(0) in doubles).
    """
    loss, derivatives, domain = LOSSES[name]

    @fuzz_settings(short=150, long=5000)
    @given(st.data())
    def run(data):
        y = data.draw(st.one_of(st.just(0.0), st.floats(0.0, 1.0) if name == "bernoulli"
                                else magnitude(-30, 30)))
        mean_rest = data.draw(st.one_of(st.just(0.0), magnitude(-300, -1)))
        assume(y == 0.0 or mean_rest > 0.0)  # else the loss is infinite at x = 0
        b, quad = data.draw(magnitude(-30, 30)), data.draw(magnitude(-30, 30))
        push = data.draw(st.one_of(st.just(0.0), magnitude(-20, 5)))
        g0, _ = derivatives(MP.mpf(y), MP.mpf(mean_rest))
        lin = float(-MP.mpf(b) * g0 * (1 + MP.mpf(push)) if g0 < 0 else
                    -MP.mpf(b) * g0 + push)
        # (a gradient beyond the doubles, y / mean_rest > 1e308, hides h'(0) from the solvers)
        assume(math.isfinite(lin) and math.isfinite(float(g0)))
        problem = Problem(name, derivatives, domain, y, b, mean_rest, quad, lin)
        terms = abs(problem.B * g0) + abs(problem.L)
        assume(problem.slope(0) >= 256 * EPS * terms)
        for solver, x in solver_paths(loss, (y, b, mean_rest, quad, lin), 0.0):
            assert x == 0.0, (solver, x)
            count(f"exact zero at the domain end, {name}, {solver}")

    run()


@pytest.mark.parametrize("name, problem", [
    ("bernoulli", (0.0, 0.5, 0.0, 1.0, -0.1)),   # fuzz finding: 5e-324
    ("poisson", (0.0, 0.5, 0.0, 1.0, -0.1)),
    ("poisson", (0.0, 3e-29, 0.0, 1.0, 0.0)),    # the Newton paths gave 8e-296
    ("bernoulli", (0.0, 3e-29, 0.0, 1.0, -2.9e-29)),
])
def test_zero_at_the_domain_end_found_by_the_fuzzer(name, problem):
    loss = LOSSES[name][0]
    for x_start in (0.0, 1.0):
        for solver, x in solver_paths(loss, problem, x_start):
            assert x == 0.0, (solver, x)
