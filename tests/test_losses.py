"""Tests for stc.losses: the 1-D coordinate solvers, the loss plugins and their checks.

The coordinate problem of the word-code step (paper Sec. 2.3) for one entry
x = s_nk is

    h(x) = l(y, mean_rest + b x) + quad x^2 + lin x,   x >= 0,

and by Proposition 1 its solution is the unconstrained minimiser clamped at
zero. Every solver result is checked against h itself (evaluated with the
loss's vectorised ``loss``), against scipy's bounded scalar minimiser, and
against the first-order (KKT) conditions of the 1-D problem.
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq, minimize_scalar

import stc.losses as losses_module
from stc.losses import (
    BernoulliLoss,
    GaussianLoss,
    PoissonLoss,
    PythonLoss,
    check_loss,
    get_loss,
    register,
    registered_losses,
)
from stc.losses._python import newton_coordinate as numpy_newton

from conftest import MissingHessian, NumpyPoisson

LOSSES = {"poisson": PoissonLoss(), "gaussian": GaussianLoss(), "bernoulli": BernoulliLoss()}


# ---------------------------------------------------------------------------
# The 1-D problem, evaluated independently of the solvers
# ---------------------------------------------------------------------------
def extended_loss(loss, y, mean):
    """loss.loss, extended by continuity to the ends of the mean domain where it is finite.

    The open mean domain excludes e.g. mean = 0 for the Poisson loss, yet for
    y = 0 the deviance l(0, mean) = mean tends to 0 there, and the infimum of
    h may sit at such a point (the solver then returns it).
    """
    value = loss.loss(y, mean)
    if np.isfinite(value):
        return value
    lower, upper = loss.mean_domain
    if mean == lower and y == lower:
        return 0.0 if loss.name == "poisson" or loss.name == "bernoulli" else value
    if mean == upper and y == upper and loss.name == "bernoulli":
        return 0.0
    return value


def h_value(loss, y, b, mean_rest, quad, lin, x):
    """h(x); +inf where the mean leaves the loss's domain (closed at finite limits)."""
    x = float(x)
    return float(extended_loss(loss, y, mean_rest + b * x)) + quad * x * x + lin * x


def h_slope(loss, y, b, mean_rest, quad, lin, x):
    if b == 0.0:
        return 2.0 * quad * x + lin
    grad = loss.gradient(y, mean_rest + b * x)
    if loss.name == "poisson" and y == 0.0:
        grad = 1.0  # l(0, mean) = mean, also at mean = 0 where the formula gives 0/0
    return b * grad + 2.0 * quad * x + lin


def slope_rounding(loss, y, b, mean_rest, quad, lin, x):
    """Magnitude of the terms that make up h'(x): the scale of its rounding error."""
    mean = mean_rest + b * x
    grad_terms = abs(float(loss.gradient(y, mean))) + abs(float(loss.hessian(y, mean)) * mean)
    return b * grad_terms + 2.0 * quad * x + abs(lin)


def h_curvature(loss, y, b, mean_rest, quad, x):
    return b * b * loss.hessian(y, mean_rest + b * x) + 2.0 * quad


def h_scale(loss, y, b, mean_rest, quad, lin, x):
    """Magnitude of the terms of h at x: the scale of its rounding error."""
    value = loss.loss(y, mean_rest + b * x)
    return abs(value) + quad * x * x + abs(lin * x) + abs(y) + 1.0


def upper_bound(loss_name, y, b, mean_rest, quad, lin):
    """A point beyond the minimiser of h (h' > 0 to its right), for the reference search."""
    if loss_name == "bernoulli":
        return (1.0 - mean_rest) / b  # the end of the mean domain
    if loss_name == "poisson":
        # h'(x) >= 2 quad x + lin - y / x, positive beyond the root of 2 quad x^2 + lin x - y
        return (abs(lin) + math.sqrt(lin * lin + 8.0 * quad * y)) / (2.0 * quad) + 1.0
    # gaussian: h'(x) >= 2 quad x + lin - b y (mean_rest >= 0)
    return (abs(lin) + b * y) / (2.0 * quad) + 1.0


def reference_minimum(loss, loss_name, y, b, mean_rest, quad, lin):
    """Minimum of h over its feasible x >= 0, by scipy's bounded Brent search."""
    lower = 0.0
    upper = upper_bound(loss_name, y, b, mean_rest, quad, lin)

    def fun(x):
        value = float(h_value(loss, y, b, mean_rest, quad, lin, x))
        return value if np.isfinite(value) else 1e300

    res = minimize_scalar(fun, bounds=(lower, upper), method="bounded",
                          options={"xatol": 1e-13 * max(1.0, upper), "maxiter": 2000})
    return min(res.fun, fun(lower)) if np.isfinite(fun(lower)) else res.fun


# ---------------------------------------------------------------------------
# Hypothesis strategies for the coordinate problem of each loss
# ---------------------------------------------------------------------------
def floats(lo, hi):
    return st.floats(lo, hi, allow_nan=False, allow_subnormal=False)


positive = floats(1e-4, 20.0)
quads = floats(1e-3, 10.0)
lins = st.one_of(floats(-20.0, 20.0), st.sampled_from([-1.0, 0.0, 1.0]))


@st.composite
def coordinate_problems(draw, loss_name):
    quad = draw(quads)
    lin = draw(lins)
    if loss_name == "bernoulli":
        y = draw(st.one_of(st.just(1.0), floats(1e-3, 1.0)))
        b = draw(st.one_of(st.just(0.0), floats(1e-3, 5.0)))
        mean_rest = draw(st.one_of(st.just(0.0), floats(0.0, 0.99)))
        if b == 0.0:
            # the loss term is then constant: it must be finite
            mean_rest = draw(floats(0.01, 0.99))
    else:
        y = draw(st.one_of(st.just(0.0), st.integers(1, 40).map(float), positive))
        b = draw(st.one_of(st.just(0.0), floats(1e-6, 10.0)))
        mean_rest = draw(st.one_of(st.just(0.0), positive))
        if loss_name == "poisson" and b == 0.0 and y > 0.0:
            mean_rest = draw(positive)  # otherwise h is +inf for every x
    return y, b, mean_rest, quad, lin


def solve(loss, problem, generic):
    y, b, mean_rest, quad, lin = problem
    method = loss.newton_coordinate if generic else loss.solve_coordinate
    x = method(np.array([y]), np.array([b]), np.array([mean_rest]), np.array([quad]),
               np.array([lin]), np.array([0.0]))
    assert x.shape == (1,)
    return float(x[0])


def at_bernoulli_boundary(loss_name, y, b, mean_rest, x):
    """y = 1 and the mean pushed (up to the solver's tolerance) to the open end 1.

    For y = 1 the Bernoulli loss -log(mean) is decreasing up to mean = 1, so the
    infimum of h may lie at the end of the open domain, where h' < 0.
    """
    return loss_name == "bernoulli" and y == 1.0 and b > 0 and 1.0 - (mean_rest + b * x) < 1e-8


# ---------------------------------------------------------------------------
# Exactness of solve_coordinate / newton_coordinate
# ---------------------------------------------------------------------------
def check_is_minimiser(loss_name, problem, x):
    loss = LOSSES[loss_name]
    y, b, mean_rest, quad, lin = problem
    assert np.isfinite(x) and x >= 0.0
    if b == 0.0:
        # l is constant in x: h is a parabola, minimised at max(0, -lin / (2 quad))
        assert x == max(0.0, -lin / (2.0 * quad))
        return
    hx = float(h_value(loss, y, b, mean_rest, quad, lin, x))
    assert np.isfinite(hx), f"h is not finite at the solution x={x}"
    tol = 1e-10 * h_scale(loss, y, b, mean_rest, quad, lin, x)
    ref = reference_minimum(loss, loss_name, y, b, mean_rest, quad, lin)
    assert hx <= ref + tol, (hx, ref)
    neighbours = [0.0, x * (1 - 1e-6), x * (1 + 1e-6), x + 1e-6]
    for z in neighbours:
        hz = float(h_value(loss, y, b, mean_rest, quad, lin, z))
        assert hx <= hz + tol, (x, z, hx, hz)


# Each loss's own solver, and the generic Newton path that a loss without one uses: the
# latter is slow (test_newton_path_matches_closed_form checks it against the closed forms
# in the default run).
GENERIC = [pytest.param(False, id="solve"),
           pytest.param(True, id="newton", marks=pytest.mark.slow)]


@pytest.mark.parametrize("loss_name", sorted(LOSSES))
@pytest.mark.parametrize("generic", GENERIC)
def test_solve_coordinate_is_exact_minimiser(loss_name, generic):
    @settings(max_examples=150, deadline=None)
    @given(coordinate_problems(loss_name))
    def run(problem):
        check_is_minimiser(loss_name, problem, solve(LOSSES[loss_name], problem, generic))

    run()


@pytest.mark.parametrize("loss_name", ["poisson", "gaussian"])
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_newton_path_matches_closed_form(loss_name, data):
    loss = LOSSES[loss_name]
    problem = data.draw(coordinate_problems(loss_name))
    closed = solve(loss, problem, generic=False)
    newton = solve(loss, problem, generic=True)
    y, b, mean_rest, quad, lin = problem
    # absolute floor for solutions near 0, relative to the natural scale of x
    floor = 1e-12 * max(1.0, abs(lin) / (2 * quad), math.sqrt((y + 1.0) / quad))
    assert abs(newton - closed) <= 1e-8 * abs(closed) + floor, (closed, newton)


def test_newton_path_matches_closed_form_vectorised():
    """Many problems in one call, with warm starts far from the solution."""
    rng = np.random.default_rng(0)
    n = 20000
    y = np.where(rng.random(n) < 0.2, 0.0, rng.integers(1, 30, n).astype(float))
    b = np.where(rng.random(n) < 0.1, 0.0, 10 ** rng.uniform(-6, 1, n))
    mean_rest = np.where(rng.random(n) < 0.2, 0.0, 10 ** rng.uniform(-4, 2, n))
    quad = 10 ** rng.uniform(-3, 1, n)
    lin = rng.normal(scale=5.0, size=n)
    x_start = np.abs(rng.normal(scale=100.0, size=n))
    for loss in (PoissonLoss(), GaussianLoss()):
        closed = loss.solve_coordinate(y, b, mean_rest, quad, lin, x_start)
        newton = loss.newton_coordinate(y, b, mean_rest, quad, lin, x_start)
        numpy_path = numpy_newton(loss, y, b, mean_rest, quad, lin, x_start)
        np.testing.assert_allclose(newton, closed, rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(numpy_path, closed, rtol=1e-8, atol=1e-12)
        # vectorisation: same as one problem at a time
        for i in range(0, n, 997):
            one = loss.solve_coordinate(y[i], b[i], mean_rest[i], quad[i], lin[i], x_start[i])
            assert float(one) == closed[i]


def unconstrained_minimiser(loss_name, y, b, mean_rest, quad, lin):
    """Minimiser of h over the whole domain of x (may be negative), found independently.

    Gaussian: the zero of the linear h'. Poisson, Bernoulli: h' is increasing on
    the x-interval that keeps the mean in its domain; its zero is found by
    bisection-type root finding (brentq) on that interval, or the minimiser is
    the interval's left end when h' is positive all over it.
    """
    if loss_name == "gaussian":
        return (b * (y - mean_rest) - lin) / (b * b + 2.0 * quad)
    loss = LOSSES[loss_name]
    lo = -mean_rest / b
    if loss_name == "poisson":
        hi = max(upper_bound(loss_name, y, b, mean_rest, quad, lin), 1.0)
    else:
        hi = (1.0 - mean_rest) / b
    width = hi - lo
    lo_in, hi_in = lo + 1e-15 * width, hi - 1e-15 * width
    slope = lambda x: float(h_slope(loss, y, b, mean_rest, quad, lin, x))  # noqa: E731
    if slope(lo_in) >= 0.0:
        return lo
    if slope(hi_in) <= 0.0:
        return hi
    return brentq(slope, lo_in, hi_in, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500)


@pytest.mark.parametrize("loss_name", sorted(LOSSES))
@pytest.mark.parametrize("generic", GENERIC)
def test_proposition_1_negative_minimiser_gives_exact_zero(loss_name, generic):
    loss = LOSSES[loss_name]

    @settings(max_examples=200, deadline=None)
    @given(coordinate_problems(loss_name), floats(1e-8, 10.0))
    def run(problem, push):
        y, b, mean_rest, quad, _ = problem
        # x = 0 strictly inside the domain, and lin chosen so that h'(0) > 0:
        # the unconstrained minimiser of the convex h is then negative
        b = max(b, 1e-3)
        if loss_name != "gaussian":
            mean_rest = max(mean_rest, 1e-3)
        slope_loss = b * float(loss.gradient(y, mean_rest))
        lin = -slope_loss + push * (abs(slope_loss) + 1.0)
        assert h_slope(loss, y, b, mean_rest, quad, lin, 0.0) > 0.0
        if not (loss_name == "bernoulli" and y == 1.0):
            # independent confirmation
            x0 = unconstrained_minimiser(loss_name, y, b, mean_rest, quad, lin)
            assert x0 <= 0.0
        assert solve(loss, (y, b, mean_rest, quad, lin), generic) == 0.0

    run()


@pytest.mark.parametrize("loss_name", sorted(LOSSES))
def test_proposition_1_positive_minimiser_is_kept(loss_name):
    """The converse: a positive unconstrained minimiser is returned unchanged."""
    loss = LOSSES[loss_name]

    @settings(max_examples=200, deadline=None)
    @given(coordinate_problems(loss_name), floats(1e-3, 10.0))
    def run(problem, push):
        y, b, mean_rest, quad, _ = problem
        b = max(b, 1e-3)
        if loss_name != "gaussian":
            mean_rest = max(mean_rest, 1e-3)
        if loss_name == "bernoulli":
            y = min(y, 0.999)
        slope_loss = b * float(loss.gradient(y, mean_rest))
        lin = -slope_loss - push * (abs(slope_loss) + 1.0)  # h'(0) < 0
        x0 = unconstrained_minimiser(loss_name, y, b, mean_rest, quad, lin)
        assert x0 > 0.0
        x = solve(loss, (y, b, mean_rest, quad, lin), generic=False)
        assert abs(x - x0) <= 1e-10 * x0

    run()


@pytest.mark.parametrize("loss_name", sorted(LOSSES))
@pytest.mark.parametrize("generic", GENERIC)
def test_kkt_conditions_of_the_coordinate_problem(loss_name, generic):
    @settings(max_examples=200, deadline=None)
    @given(coordinate_problems(loss_name))
    def run(problem):
        check_kkt(loss_name, problem, solve(LOSSES[loss_name], problem, generic), generic)

    run()


def check_kkt(loss_name, problem, x, generic):
    """First-order conditions of min_{x >= 0} h(x) at the solver's result x."""
    loss = LOSSES[loss_name]
    y, b, mean_rest, quad, lin = problem
    if b == 0.0:  # h is the parabola quad x^2 + lin x (+ a constant)
        assert x == max(0.0, -lin / (2.0 * quad))
        return
    slope = float(h_slope(loss, y, b, mean_rest, quad, lin, x))
    if at_bernoulli_boundary(loss_name, y, b, mean_rest, x):
        # infimum at the open end of the domain: h still decreasing there
        assert slope < 0.0
        return
    if loss_name == "poisson" and y == 0.0 and mean_rest == 0.0 and b + lin >= 0.0:
        # h(x) = (b + lin) x + quad x^2, and the loss extends to mean = 0:
        # every solver returns the exact 0 (Proposition 1)
        assert x == 0.0
        return
    if x > 0.0:
        # h'(x) = 0 up to the solver's accuracy on x (1e-10 relative, and the
        # rounding of mean_rest + b x): h' changes sign within a relative 1e-9 of x
        # (the absolute floor: Newton's bracket shrinks to ~2^-100 of its first width)
        natural = max(1.0, abs(lin) / (2 * quad), np.sqrt((y + 1.0) / quad))
        width = 1e-9 * x + 1e-13 * mean_rest / b + 1e-28 * natural
        below = float(h_slope(loss, y, b, mean_rest, quad, lin, x - width))
        above_x = x + width
        if mean_rest + b * above_x < loss.mean_domain[1]:
            above = float(h_slope(loss, y, b, mean_rest, quad, lin, above_x))
        else:
            above = np.inf  # beyond the domain h is +inf
        tol = 1e-12 * slope_rounding(loss, y, b, mean_rest, quad, lin, x)
        assert below <= tol and above >= -tol, (x, below, slope, above)
        # and where h is well conditioned, h'(x) itself is ~0
        curvature = float(h_curvature(loss, y, b, mean_rest, quad, x))
        if np.isfinite(above) and np.isfinite(below):
            spread = curvature * width + abs(above - below)
            assert abs(slope) <= spread + tol
    else:
        assert x == 0.0
        if loss_name == "poisson" and mean_rest == 0.0 and y > 0.0 and b > 0.0:
            pytest.fail("x = 0 puts the Poisson mean at 0 where the loss is infinite")
        assert slope >= -1e-12 * slope_rounding(loss, y, b, mean_rest, quad, lin, 0.0)


def test_closed_forms_on_hand_computed_cases():
    """A few coordinate problems solved by hand."""
    poisson, gaussian = PoissonLoss(), GaussianLoss()
    # Poisson, mean_rest = 0, lin = -b: h'(x) = b - y/x + 2 q x - b = 0 -> x = sqrt(y / (2 q))
    assert poisson.solve_coordinate(8.0, 0.3, 0.0, 1.0, -0.3) == pytest.approx(2.0, rel=1e-15)
    # y = 0 and mean_rest = 0: h(x) = (b + lin) x + q x^2
    assert poisson.solve_coordinate(0.0, 1.0, 0.0, 0.5, -3.0) == pytest.approx(2.0, rel=1e-15)
    assert poisson.solve_coordinate(0.0, 1.0, 0.0, 0.5, 1.0) == 0.0
    # the degenerate case a1 = 0 = disc (y = 0, mean_rest = 0, lin = -b): minimiser 0, no NaN
    assert poisson.solve_coordinate(0.0, 2.0, 0.0, 1.0, -2.0) == 0.0
    # Gaussian: (b (y - m) - lin) / (b^2 + 2 q)
    assert gaussian.solve_coordinate(5.0, 2.0, 1.0, 0.5, 1.0) == pytest.approx(7.0 / 5.0)
    assert gaussian.solve_coordinate(1.0, 2.0, 3.0, 0.5, 1.0) == 0.0
    # paper Sec. 2.3: beta_kn = 0 gives nu = theta_k - rho / (2 gamma)
    gamma, rho, theta_k = 0.5, 0.2, 1.3
    for loss in (poisson, gaussian, BernoulliLoss()):
        x = loss.solve_coordinate(1.0, 0.0, 0.5, gamma, rho - 2 * gamma * theta_k)
        assert x == pytest.approx(theta_k - rho / (2 * gamma), rel=1e-15)


def test_solve_coordinate_rejects_non_positive_quad():
    for loss in LOSSES.values():
        with pytest.raises(ValueError, match="quad"):
            loss.solve_coordinate(1.0, 0.5, 0.5, 0.0, 0.0)


# ---------------------------------------------------------------------------
# Vectorised loss, gradient and hessian
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("loss_name", sorted(LOSSES))
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_derivatives_agree_with_finite_differences(loss_name, data):
    loss = LOSSES[loss_name]
    if loss_name == "bernoulli":
        y = data.draw(st.one_of(st.sampled_from([0.0, 1.0]), floats(0.0, 1.0)))
        mean = data.draw(floats(0.02, 0.98))
    else:
        y = data.draw(st.one_of(st.just(0.0), floats(0.0, 50.0)))
        mean = data.draw(floats(0.05, 60.0))
    step = 1e-5 * mean if loss_name != "bernoulli" else 1e-5 * min(mean, 1 - mean)
    y_arr = np.full(3, y)
    m_arr = np.array([mean - step, mean, mean + step])
    value = loss.loss(y_arr, m_arr)
    grad = loss.gradient(y_arr, m_arr)
    hess = loss.hessian(y_arr, m_arr)
    fd_grad = (value[2] - value[0]) / (2 * step)
    fd_hess = (grad[2] - grad[0]) / (2 * step)
    scale_g = 1e-10 * np.abs(value).max() / step
    assert abs(grad[1] - fd_grad) <= 1e-6 * (1 + abs(grad[1])) + scale_g
    assert abs(hess[1] - fd_hess) <= 1e-6 * (1 + abs(hess[1])) + 1e-10 * np.abs(grad).max() / step
    assert hess[1] >= 0.0
    # elementwise and shape-preserving, with broadcasting
    grid = loss.loss(np.array([[y], [y]]), np.array([mean, mean]))
    assert grid.shape == (2, 2) and np.all(grid == value[1])


@pytest.mark.parametrize("loss_name", sorted(LOSSES))
def test_loss_is_a_deviance(loss_name):
    """Zero at mean == y (inside the domain), positive elsewhere."""
    loss = LOSSES[loss_name]
    y = np.array([0.1, 0.5, 0.9]) if loss_name == "bernoulli" else np.array([0.5, 1.0, 7.0, 30.0])
    np.testing.assert_allclose(loss.loss(y, y), 0.0, atol=1e-14)
    np.testing.assert_allclose(loss.gradient(y, y), 0.0, atol=1e-14)
    assert np.all(loss.loss(y, y * 0.9) > 0) and np.all(loss.loss(y, y * 1.05) > 0)


def test_known_loss_values():
    y = np.array([0.0, 3.0])
    m = np.array([2.0, 1.5])
    np.testing.assert_allclose(PoissonLoss().loss(y, m), [2.0, 1.5 - 3.0 + 3.0 * math.log(2.0)])
    np.testing.assert_allclose(GaussianLoss().loss(y, m), [2.0, 1.125])
    np.testing.assert_allclose(
        BernoulliLoss().loss(np.array([1.0, 0.0, 0.25]), np.array([0.5, 0.5, 0.5])),
        [math.log(2.0), math.log(2.0),
         0.25 * math.log(0.5) + 0.75 * math.log(1.5)])


def test_loss_is_infinite_outside_the_mean_domain():
    poisson, bernoulli, gaussian = PoissonLoss(), BernoulliLoss(), GaussianLoss()
    assert poisson.mean_domain == (0.0, math.inf)
    assert bernoulli.mean_domain == (0.0, 1.0)
    assert gaussian.mean_domain == (-math.inf, math.inf)
    for y in (0.0, 1.0, 4.0):
        assert np.all(np.isposinf(poisson.loss(y, np.array([-1e-300, -1.0, -1e10]))))
    for y in (0.0, 0.3, 1.0):
        assert np.all(np.isposinf(bernoulli.loss(y, np.array([-0.5, 1.0 + 1e-15, 7.0]))))
    # at an end of the domain: infinite unless the loss extends there (y at that end)
    assert np.all(np.isposinf(poisson.loss([1.0, 4.0], 0.0)))
    assert np.all(np.isposinf(bernoulli.loss([0.3, 1.0], 0.0)))
    assert np.all(np.isposinf(bernoulli.loss([0.0, 0.3], 1.0)))
    assert np.all(np.isfinite(gaussian.loss(2.0, np.array([-1e100, -3.0, 0.0, 1e100]))))
    # just inside the domain the loss is finite
    assert np.isfinite(poisson.loss(3.0, 1e-300))
    assert np.isfinite(bernoulli.loss(0.5, 1.0 - 1e-15))


# ---------------------------------------------------------------------------
# check_loss, register, get_loss
# ---------------------------------------------------------------------------
class NegativeSquare(PythonLoss):
    """-(mean - y)^2: concave."""

    def loss(self, y, mean):
        return -(np.asarray(mean) - y) ** 2

    def gradient(self, y, mean):
        return -2.0 * (np.asarray(mean) - y)

    def hessian(self, y, mean):
        return np.full(np.broadcast(y, mean).shape, -2.0)


class ExponentialLoss(PythonLoss):
    """y / mean + log(mean): the exponential-family log-loss, convex only for mean < 2y."""

    mean_domain = (0.0, np.inf)

    def loss(self, y, mean):
        return np.asarray(y) / mean + np.log(mean)

    def gradient(self, y, mean):
        return -np.asarray(y) / np.asarray(mean) ** 2 + 1.0 / np.asarray(mean)

    def hessian(self, y, mean):
        mean = np.asarray(mean)
        return 2.0 * np.asarray(y) / mean ** 3 - 1.0 / mean ** 2


class WrongGradient(NumpyPoisson):
    def gradient(self, y, mean):
        return 2.0 * (1.0 - np.asarray(y, float) / np.asarray(mean, float))


class WrongHessian(NumpyPoisson):
    def hessian(self, y, mean):
        return 3.0 * np.asarray(y, float) / np.asarray(mean, float) ** 2


class TooWideDomain(NumpyPoisson):
    """Poisson formulas but the default domain (all reals): the loss is not finite on it."""

    mean_domain = (-np.inf, np.inf)

    def loss(self, y, mean):
        y, mean = np.broadcast_arrays(np.asarray(y, float), np.asarray(mean, float))
        return mean - y + y * np.log(y / mean)


class KLBernoulli(PythonLoss):
    """Bernoulli deviance for y in [0, 1], without a check_data method."""

    mean_domain = (0.0, 1.0)

    def loss(self, y, mean):
        y, mean = np.broadcast_arrays(np.asarray(y, float), np.asarray(mean, float))
        return (np.where(y > 0, y * np.log(np.where(y > 0, y, 1) / mean), 0.0)
                + np.where(y != 1,
                           (1 - y) * np.log(np.where(y != 1, 1 - y, 1) / (1 - mean)), 0.0))

    def gradient(self, y, mean):
        return (1 - np.asarray(y)) / (1 - np.asarray(mean)) - np.asarray(y) / mean

    def hessian(self, y, mean):
        y, mean = np.asarray(y), np.asarray(mean)
        return y / mean ** 2 + (1 - y) / (1 - mean) ** 2


@pytest.fixture
def scratch_registry(monkeypatch):
    """Let a test register losses without leaking them into the global registry."""
    monkeypatch.setattr(losses_module, "_REGISTRY", dict(losses_module._REGISTRY))
    return losses_module._REGISTRY


def test_builtin_losses_are_registered_and_pass_the_check():
    assert {"poisson", "gaussian", "bernoulli"} <= set(registered_losses())
    for name, cls in (("poisson", PoissonLoss), ("gaussian", GaussianLoss),
                      ("bernoulli", BernoulliLoss)):
        loss = get_loss(name)
        assert type(loss) is cls and loss.name == name
        assert check_loss(loss) is loss
    instance = PoissonLoss()
    assert get_loss(instance) is instance


def test_check_refuses_missing_hessian(scratch_registry):
    with pytest.raises(TypeError, match="hessian"):
        check_loss(MissingHessian())
    with pytest.raises(TypeError):
        register("missing-hessian", MissingHessian)
    assert "missing-hessian" not in registered_losses()


def test_check_refuses_object_without_methods():
    class NotALoss:
        mean_domain = (0.0, 1.0)

    with pytest.raises(TypeError, match="loss"):
        check_loss(NotALoss())


@pytest.mark.parametrize("cls", [NegativeSquare, ExponentialLoss])
def test_check_refuses_non_convex_loss(cls, scratch_registry):
    with pytest.raises(ValueError, match="convex"):
        check_loss(cls())
    with pytest.raises(ValueError, match="convex"):
        register("non-convex", cls)
    assert "non-convex" not in registered_losses()


def test_exponential_loss_is_refused_on_data_where_it_is_non_convex():
    # the hessian (2y - mean) / mean^3 is negative for mean > 2y
    with pytest.raises(ValueError, match="convex"):
        check_loss(ExponentialLoss(), data=np.array([0.5, 1.0]))


@pytest.mark.parametrize("cls,what", [(WrongGradient, "gradient"), (WrongHessian, "hessian")])
def test_check_refuses_wrong_derivatives(cls, what, scratch_registry):
    with pytest.raises(ValueError, match=what):
        check_loss(cls())
    with pytest.raises(ValueError, match=what):
        register("wrong-derivative", cls)
    assert "wrong-derivative" not in registered_losses()


def test_check_refuses_domain_that_does_not_fit_the_data():
    with np.errstate(all="ignore"):
        # the declared mean domain contains means where the loss is undefined
        with pytest.raises(ValueError, match="mean_domain"):
            check_loss(TooWideDomain())
        # data outside what the loss can model (y > 1 for a Bernoulli deviance)
        with pytest.raises(ValueError, match="mean_domain"):
            check_loss(KLBernoulli(), data=np.array([0.0, 0.5, 3.0]))
        check_loss(KLBernoulli(), data=np.array([0.0, 0.5, 1.0]))
    # the built-in Bernoulli refuses such data through its check_data
    with pytest.raises(ValueError, match="bernoulli"):
        check_loss(BernoulliLoss(), data=np.array([1.0, 2.0]))
    check_loss(BernoulliLoss(), data=np.array([0.0, 1.0]))
    check_loss(PoissonLoss(), data=np.array([1.0, 2.0, 17.0]))


def test_check_refuses_non_elementwise_loss():
    class Summing(NumpyPoisson):
        def loss(self, y, mean):
            return np.sum(super().loss(y, mean))

    with pytest.raises(ValueError, match="elementwise"):
        check_loss(Summing())


def test_check_refuses_empty_domain():
    class Empty(NumpyPoisson):
        mean_domain = (1.0, 1.0)

    with pytest.raises(ValueError, match="mean_domain"):
        check_loss(Empty())


@pytest.mark.parametrize("name,cls", [
    (123, NumpyPoisson), (None, NumpyPoisson), ("", NumpyPoisson),
    ("x", "poisson"), ("x", NumpyPoisson()), ("x", int), ("x", None),
])
def test_register_type_errors(name, cls, scratch_registry):
    before = registered_losses()
    with pytest.raises(TypeError):
        register(name, cls)
    assert registered_losses() == before


def test_get_loss_errors():
    with pytest.raises(ValueError, match="nope") as info:
        get_loss("nope")
    for known in ("poisson", "gaussian", "bernoulli"):
        assert known in str(info.value)
    with pytest.raises(TypeError):
        get_loss(3.0)
    with pytest.raises(TypeError):
        get_loss(PoissonLoss)  # the class, not an instance


def test_register_valid_python_loss(scratch_registry):
    assert register("numpy-poisson", NumpyPoisson) is NumpyPoisson
    assert "numpy-poisson" in registered_losses()
    loss = get_loss("numpy-poisson")
    assert isinstance(loss, NumpyPoisson)
    # its solver (the numpy generic Newton) gives the compiled Poisson closed form
    rng = np.random.default_rng(7)
    args = (rng.integers(1, 20, 300).astype(float), rng.uniform(1e-4, 2.0, 300),
            rng.uniform(0.0, 5.0, 300), rng.uniform(0.01, 2.0, 300), rng.normal(size=300))
    np.testing.assert_allclose(loss.solve_coordinate(*args),
                               PoissonLoss().solve_coordinate(*args), rtol=1e-8, atol=1e-12)
    # re-registering a name replaces the entry
    register("numpy-poisson", KLBernoulli)
    assert isinstance(get_loss("numpy-poisson"), KLBernoulli)


def test_python_loss_base_methods_raise_not_implemented():
    base = PythonLoss()
    for method in (base.loss, base.gradient, base.hessian):
        with pytest.raises(NotImplementedError):
            method(1.0, 1.0)


@settings(max_examples=200, deadline=None)
@given(coordinate_problems("poisson"), st.one_of(st.just(0.0), floats(1e-6, 50.0)))
def test_python_loss_newton_matches_compiled_poisson(problem, x_start):
    # (warm starts below ~1e-20 hit the bug of test_newton_from_a_tiny_warm_start)
    args = [np.array([v]) for v in (*problem, x_start)]
    y, b, mean_rest, quad, lin = problem
    python_x = float(NumpyPoisson().solve_coordinate(*args)[0])
    compiled_x = float(PoissonLoss().solve_coordinate(*args)[0])
    floor = 1e-10 * max(1.0, abs(lin) / (2 * quad), math.sqrt((y + 1.0) / quad))
    assert abs(python_x - compiled_x) <= 1e-8 * abs(compiled_x) + floor


def test_python_loss_newton_matches_compiled_poisson_vectorised():
    rng = np.random.default_rng(1)
    n = 5000
    y = np.where(rng.random(n) < 0.2, 0.0, rng.integers(1, 30, n).astype(float))
    b = np.where(rng.random(n) < 0.1, 0.0, 10 ** rng.uniform(-6, 1, n))
    mean_rest = np.where(rng.random(n) < 0.2, 0.0, 10 ** rng.uniform(-4, 2, n))
    mean_rest[(b == 0) & (y > 0)] += 1.0
    quad = 10 ** rng.uniform(-3, 1, n)
    lin = rng.normal(scale=5.0, size=n)
    x_start = np.abs(rng.normal(scale=3.0, size=n))
    python_x = NumpyPoisson().solve_coordinate(y, b, mean_rest, quad, lin, x_start)
    compiled_x = PoissonLoss().solve_coordinate(y, b, mean_rest, quad, lin, x_start)
    assert python_x.shape == (n,)
    np.testing.assert_allclose(python_x, compiled_x, rtol=1e-8, atol=1e-12)
    # Proposition 1: exact zeros in the same places (except where mean = 0 is the
    # open end of the domain: y = 0 with mean_rest = 0, where Newton stops next to 0)
    regular = ~((y == 0.0) & (mean_rest == 0.0))
    assert np.array_equal(python_x[regular] == 0.0, compiled_x[regular] == 0.0)


def test_python_newton_accepts_scalars_like_the_compiled_solver():
    compiled = PoissonLoss().solve_coordinate(2.0, 1.0, 1.0, 1.0, -1.0)
    assert compiled.shape == ()
    python = NumpyPoisson().solve_coordinate(2.0, 1.0, 1.0, 1.0, -1.0)
    assert np.shape(python) == ()
    assert float(python) == pytest.approx(float(compiled), rel=1e-10)


@pytest.mark.parametrize("solver", ["compiled-newton", "numpy-newton", "bernoulli"])
def test_newton_from_a_tiny_warm_start(solver):
    if solver == "bernoulli":
        # h(x) = -log(0.5 x) + x^2 (y = 1): minimiser 1 / sqrt(2); generic path only
        args, expected = (1.0, 0.5, 0.0, 1.0, 0.0), 1.0 / math.sqrt(2.0)
        solve_fn = BernoulliLoss().solve_coordinate
    else:
        # h(x) = x - 1 - log x + x^2 (Poisson, y = 1): 2x^2 + x - 1 = 0, minimiser 1/2
        args, expected = (1.0, 1.0, 0.0, 1.0, 0.0), 0.5
        solve_fn = (PoissonLoss().newton_coordinate if solver == "compiled-newton"
                    else lambda *a: numpy_newton(PoissonLoss(), *a))
    for x_start in (0.0, 1e-20, 1e-40, 1e-80, 1e-200):
        x = float(np.asarray(solve_fn(*[np.array([v]) for v in (*args, x_start)]))[0])
        assert x == pytest.approx(expected, rel=1e-9), (x_start, x)


# ---------------------------------------------------------------------------
# Extreme scales: the generic solver's bracket and the closed forms' overflow
# ---------------------------------------------------------------------------
def slope_root(loss, y, b, mean_rest, quad, lin, hi):
    """The zero of h' on (0, hi) by brentq on h' itself (h'(0+) < 0 < h'(hi))."""
    slope = lambda x: float(h_slope(loss, y, b, mean_rest, quad, lin, x))  # noqa: E731
    return brentq(slope, 0.0, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=2000)


@pytest.mark.parametrize("solver", ["compiled", "numpy"])
def test_newton_converges_when_the_bracket_is_far_wider_than_the_answer(solver):
    def run(loss, *args):
        if solver == "compiled":
            return float(loss.newton_coordinate(*args))
        return float(numpy_newton(loss, *args))

    # b = 1e-32 makes the Bernoulli bracket [0, 7e31] for an answer near 0.14
    bernoulli = BernoulliLoss()
    args = (0.5, 1e-32, 0.3, 0.1, -0.028)
    expected = slope_root(bernoulli, *args, hi=1.0)
    assert run(bernoulli, *args, 1.0) == pytest.approx(expected, rel=1e-12)
    # a start at 1e30 makes the Poisson bracket [0, 1e30]; the closed form is exact
    poisson = PoissonLoss()
    args = (5.0, 0.01, 1.0, 0.1, 0.01)
    closed = float(poisson.solve_coordinate(*args))
    assert closed == pytest.approx(0.1496264926, rel=1e-9)
    assert run(poisson, *args, 1e30) == pytest.approx(closed, rel=1e-12)
    # quadratic weights far above the loss term: the minimiser is ~ -lin / (2 quad)
    for quad in (1e20, 1e28, 1e29, 1e40, 1e100):
        for loss in (poisson, GaussianLoss(), bernoulli):
            y, b, mean_rest, lin = (0.5, 0.3, 0.2, -quad) if loss is bernoulli else (3.0, 2.0, 1.0, -quad)
            closed = 0.5 if loss is bernoulli else float(loss.solve_coordinate(y, b, mean_rest, quad, lin))
            assert run(loss, y, b, mean_rest, quad, lin, 0.0) == pytest.approx(closed, rel=1e-12)
            assert closed == pytest.approx(0.5, rel=1e-10)


class NanGradientAboveFive(PythonLoss):
    """A squared error whose gradient is NaN for mean > 5 (a broken user loss)."""

    def loss(self, y, mean):
        return 0.5 * (np.asarray(mean, float) - y) ** 2

    def gradient(self, y, mean):
        mean = np.asarray(mean, float)
        return np.where(mean > 5.0, np.nan, mean - y)

    def hessian(self, y, mean):
        return np.ones(np.broadcast(y, mean).shape)


def test_newton_reports_a_nan_gradient_instead_of_returning_a_point():
    loss = NanGradientAboveFive()
    # the minimiser 2.5, bracketed in [1, 3] where the gradient is defined: solved
    assert float(loss.solve_coordinate(2.5, 1.0, 0.0, 1e-9, 0.0)) == pytest.approx(2.5, rel=1e-8)
    # the minimiser 9 lies where it is NaN: a clear error, not a point
    with pytest.raises(ValueError, match=r"coordinate solver failed on 1 of 2 problems.*y=9"):
        loss.solve_coordinate(np.array([2.5, 9.0]), 1.0, 0.0, 1e-9, 0.0)


def test_poisson_closed_form_at_extreme_scales():
    poisson = PoissonLoss()
    # |lin| ~ 1e177: the discriminant's squares overflow; the answer is
    # -(lin + b) / (2 quad) to all digits (y / mean ~ 1e-177 is negligible)
    y, b, mean_rest, quad, lin = 3.0, 0.0219, 1.4e-8, 1.73, -4.3e177
    x = float(poisson.solve_coordinate(y, b, mean_rest, quad, lin))
    assert x == pytest.approx(-(lin + b) / (2 * quad), rel=1e-12)
    assert np.isfinite(poisson.loss(y, mean_rest + b * x))
    # lin = 1e160 with mean_rest = 0 and y > 0: the root ~ y / lin must stay
    # positive (0 would make the loss infinite)
    x = float(poisson.solve_coordinate(3.0, 0.5, 0.0, 1.0, 1e160))
    assert x == pytest.approx(3e-160, rel=1e-9) and np.isfinite(poisson.loss(3.0, 0.5 * x))
    # b quad ~ 1e-400 underflows: the answer is ~ (1 - b) / (2 quad) = 5e199
    x = float(poisson.solve_coordinate(2.0, 1e-200, 1.0, 1e-200, -1.0))
    assert x == pytest.approx(5e199, rel=1e-12)
    # the Gaussian closed form with b^2 overflowing: x ~ (y - mean_rest) / b
    x = float(GaussianLoss().solve_coordinate(2.0, 1e200, 1.0, 1.0, 0.0))
    assert x == pytest.approx(1e-200, rel=1e-9)
    # the batch loop of the kernel takes the same route (see also the fuzz suite)
    for loss in (poisson, GaussianLoss()):
        batch = loss.solve_coordinate(np.array([3.0, 3.0, 2.0]), np.array([0.0219, 0.5, 1e-200]),
                                      np.array([1.4e-8, 0.0, 1.0]), 1.73, np.array([-4.3e177, 1.0, -1.0]))
        assert np.all(np.isfinite(batch)) and np.all(batch >= 0)


def test_check_refuses_a_gradient_that_is_nan_far_from_the_data(scratch_registry):
    """NaN for mean > 5 passed the sample grid; the whole domain is probed now."""
    with pytest.raises(ValueError, match=r"gradient is nan at y=1, mean=(\d+).*inside its mean_domain"):
        check_loss(NanGradientAboveFive())
    with pytest.raises(ValueError, match="gradient is nan"):
        register("nan-above-five", NanGradientAboveFive)
    assert "nan-above-five" not in registered_losses()


def test_check_names_a_python_loss_that_is_nan_everywhere():
    class NanLoss(NumpyPoisson):
        def loss(self, y, mean):
            return np.full(np.broadcast(y, mean).shape, np.nan)

    with pytest.raises(TypeError, match="loss.y, mean. returns NaN at every sample point") as info:
        check_loss(NanLoss())
    assert "_loss" not in str(info.value)  # the wording for compiled losses
