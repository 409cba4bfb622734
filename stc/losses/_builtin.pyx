"""Built-in losses: Poisson and Gaussian in closed form, Bernoulli via Newton."""
cimport cython
from libc.math cimport NAN, fabs, isfinite, log, sqrt

from stc._simd._dispatch cimport level_in_use
from stc.losses._base cimport CompiledLoss

# The vector code of the closed forms (at every level of stc/_simd/_levels.h): the losses
# own it, and choose it by the level in use, read once per block.
cdef extern from "_builtin_vectors.h":
    int poisson_vector_block "stc_poisson_block"(
        int level, Py_ssize_t n, const double* y, const double* b, const double* rest,
        double quad, double lin, double* x, double* curvature) noexcept nogil
    int gaussian_vector_block "stc_gaussian_block"(
        int level, Py_ssize_t n, const double* y, const double* b, const double* rest,
        double quad, double lin, double* x, double* curvature) noexcept nogil

cdef const int* simd_level = level_in_use()


# The closed forms below are exact to rounding while their intermediate
# squares and products stay between ~1e-290 and ~1e300. Outside (inputs no
# fit produces at ordinary scales), they return NaN and the caller hands the
# problem to the generic solver (`CompiledLoss._newton_coordinate`).

cdef inline double poisson_closed_form(double y, double b, double mean_rest, double quad,
                                       double lin) noexcept nogil:
    """Minimiser of the Poisson coordinate problem, or NaN for extreme inputs.

    The zero of h'(x) = b (1 - y / (mean_rest + b x)) + 2 quad x + lin is the
    larger root of a2 x^2 + a1 x + a0 (paper Sec. 2.3, with quad = gamma and
    lin = rho - 2 gamma theta_k), clamped at 0 (Proposition 1).
    """
    cdef double root, tau
    if b <= 0.0:
        root = -lin / (2.0 * quad)
        return root if root > 0.0 else 0.0
    tau = b + lin
    return poisson_root(y, b, mean_rest, quad, lin, tau, 2.0 * quad * mean_rest + b * tau,
                        mean_rest * tau - y * b)


cdef inline double poisson_root(double y, double b, double mean_rest, double quad, double lin,
                                double tau, double a1, double a0) noexcept nogil:
    """`poisson_closed_form` for b > 0 from its coefficients tau = b + lin, a1 and a0.

    Split off so that the block loop (`solve_poisson_coordinates`) can test the
    common zero case on a1 and a0 itself and reuse them.
    """
    cdef double a2, disc, root
    if a1 >= 0.0 and a0 >= 0.0:
        # Both roots <= 0 (sum -a1/a2 <= 0, product a0/a2 >= 0): the
        # clamp gives 0, so skip the square root. Most word codes of a
        # fitted model are 0, which makes this the common case.
        if a0 > 0.0 or mean_rest > 0.0 or y == 0.0:
            return 0.0
        # a0 = -y b underflowed to 0: x = 0 would put the mean at 0, where
        # the loss is infinite.
        return NAN if finite_inputs(y, b, mean_rest, quad, lin) else 0.0
    # The paper's form of the discriminant, a sum of squares: never negative.
    disc = (2.0 * quad * mean_rest - b * tau) ** 2 + 8.0 * quad * y * b * b
    if a1 >= 0.0:
        # Avoid cancellation in -a1 + sqrt(disc): use root = 2 a0 / (-a1 - sqrt).
        root = -2.0 * a0 / (a1 + sqrt(disc))
    else:
        a2 = 2.0 * quad * b
        if not a2 > 1e-290:
            return NAN  # b quad underflows
        root = (-a1 + sqrt(disc)) / (2.0 * a2)
    # Here a0 < 0 or a1 < 0, so the larger root is positive: a root that is
    # not in (0, 1e300) means an intermediate overflowed (|lin| above ~1e150,
    # ...); a tiny discriminant, that its terms underflowed.
    if root > 0.0 and root < 1e300 and disc > 1e-290:
        return root
    return NAN if finite_inputs(y, b, mean_rest, quad, lin) else legacy_clamp(root)


cdef inline double gaussian_closed_form(double y, double b, double mean_rest, double quad,
                                        double lin) noexcept nogil:
    """Minimiser of the Gaussian coordinate problem, or NaN for extreme inputs.

    h'(x) = b (mean_rest + b x - y) + 2 quad x + lin = 0 is linear in x.
    """
    cdef double scale = b * b + 2.0 * quad
    cdef double root = (b * (y - mean_rest) - lin) / scale
    if scale < 1e300 and fabs(root) < 1e300:
        return root if root > 0.0 else 0.0
    # b or quad above ~1e150, or |y - mean_rest|, |lin| near overflow
    return NAN if finite_inputs(y, b, mean_rest, quad, lin) else legacy_clamp(root)


cdef inline bint finite_inputs(double y, double b, double mean_rest, double quad,
                               double lin) noexcept nogil:
    return (isfinite(y) and isfinite(b) and isfinite(mean_rest) and isfinite(quad)
            and isfinite(lin))


cdef inline double legacy_clamp(double root) noexcept nogil:
    """What the closed forms return for non-finite inputs: the formula, clamped at 0.

    Such inputs only come from codes that ran off to infinity (an unbounded
    coding problem, see `MedSTC`'s theta_penalty): the kernel's safeguards
    expect 0 for a NaN formula and +inf for an infinite one, as before.
    """
    return root if root > 0.0 else 0.0


@cython.final
cdef class PoissonLoss(CompiledLoss):
    """Log-Poisson loss for counts, as a deviance: mean - y + y log(y / mean).

    Data: non-negative counts. Non-integer values are accepted: the loss is
    then the generalised Kullback-Leibler divergence, still convex and
    minimised at mean = y (useful for tf-idf weights). Mean domain: (0, inf).
    At its end mean = 0 the loss is finite only for y = 0 (value 0, gradient
    1, hessian 0), where a code that puts the mean there is an exact 0.
    """

    name = "poisson"
    dictionary_method = "mm"  # the MM step of stc._learning.dictionary (Jensen on -log(mean))
    # STC.score: held-out log-likelihood of the multinomial p(n | d) ~ theta_d . beta_n,
    # the Poisson model of the counts given the document's length
    score_kind = "multinomial"

    def __cinit__(self):
        self.mean_lower = 0.0

    cdef double _loss(self, double y, double mean) noexcept nogil:
        if y > 0.0:
            return mean - y + y * log(y / mean)
        return mean

    # At y = 0 the loss is the mean itself, also at mean = 0 (where y / mean is 0/0).
    cdef double _gradient(self, double y, double mean) noexcept nogil:
        return 1.0 - y / mean if y > 0.0 else 1.0

    cdef double _hessian(self, double y, double mean) noexcept nogil:
        return y / (mean * mean) if y > 0.0 else 0.0

    cdef double _solve_coordinate(self, double y, double b, double mean_rest,
                                  double quad, double lin, double x_start) noexcept nogil:
        cdef double x = poisson_closed_form(y, b, mean_rest, quad, lin)
        if x != x:  # extreme inputs: see poisson_closed_form
            x = self._newton_coordinate(y, b, mean_rest, quad, lin, x_start)
        return x

    cdef void _solve_block(self, Py_ssize_t n, const double* y, const double* b,
                           const double* mean_rest, double quad, double lin,
                           double* x, double* curvature) noexcept nogil:
        # The vector loop, where it takes the block, gives the scalar loop's bits.
        if poisson_vector_block(simd_level[0], n, y, b, mean_rest, quad, lin, x, curvature):
            solve_poisson_coordinates(self, n, y, b, mean_rest, quad, lin, x, curvature)


@cython.final
cdef class GaussianLoss(CompiledLoss):
    """Squared error (y - mean)^2 / 2: Gaussian with unit variance.

    Data: any non-negative real. Mean domain: all reals.
    """

    name = "gaussian"

    cdef double _loss(self, double y, double mean) noexcept nogil:
        return 0.5 * (y - mean) * (y - mean)

    cdef double _gradient(self, double y, double mean) noexcept nogil:
        return mean - y

    cdef double _hessian(self, double y, double mean) noexcept nogil:
        return 1.0

    cdef double _solve_coordinate(self, double y, double b, double mean_rest,
                                  double quad, double lin, double x_start) noexcept nogil:
        cdef double x = gaussian_closed_form(y, b, mean_rest, quad, lin)
        if x != x:  # extreme inputs: see gaussian_closed_form
            x = self._newton_coordinate(y, b, mean_rest, quad, lin, x_start)
        return x

    cdef void _solve_block(self, Py_ssize_t n, const double* y, const double* b,
                           const double* mean_rest, double quad, double lin,
                           double* x, double* curvature) noexcept nogil:
        if gaussian_vector_block(simd_level[0], n, y, b, mean_rest, quad, lin, x, curvature):
            solve_closed_form_coordinates(self, n, y, b, mean_rest, quad, lin, x, curvature)


@cython.final
cdef class BernoulliLoss(CompiledLoss):
    """Bernoulli (binary cross-entropy) loss, as a deviance (KL divergence).

    Data: values in [0, 1] (presence/absence or proportions). Mean domain:
    (0, 1). The loss y log(y / mean) + (1 - y) log((1 - y) / (1 - mean)),
    with 0 log 0 = 0, is finite at the ends only for y = mean = 0 and y = mean
    = 1 (value 0, gradient 1 resp. -1, hessian 1; `loss` is +inf at the other
    ends). No closed form: the coding kernel uses the generic Newton solver.
    """

    name = "bernoulli"
    # STC.score holds out stored entries only: with binary data all of them are 1,
    # so minus their loss would favour codes that predict 1 everywhere (and be
    # -inf where a mean is 0). No held-out score, rather than a misleading one.
    score_kind = "none"

    def check_data(self, values):
        if values.size and values.max() > 1.0:
            raise ValueError(f"the bernoulli loss needs data in [0, 1]; X has a value "
                             f"{values.max():g} > 1 (binarise X, e.g. X.sign())")

    def __cinit__(self):
        self.mean_lower = 0.0
        self.mean_upper = 1.0

    cdef double _loss(self, double y, double mean) noexcept nogil:
        cdef double value = 0.0
        if y > 0.0:
            value += y * log(y / mean)
        if y < 1.0:
            value += (1.0 - y) * log((1.0 - y) / (1.0 - mean))
        return value

    # Each term is skipped where its weight y or 1 - y is 0 (0 log 0 = 0), so
    # the loss and its derivatives are finite at mean = y = 0 and mean = y = 1.
    cdef double _gradient(self, double y, double mean) noexcept nogil:
        cdef double value = 0.0
        if y > 0.0:
            value -= y / mean
        if y < 1.0:
            value += (1.0 - y) / (1.0 - mean)
        return value

    cdef double _hessian(self, double y, double mean) noexcept nogil:
        cdef double value = 0.0
        if y > 0.0:
            value += y / (mean * mean)
        if y < 1.0:
            value += (1.0 - y) / ((1.0 - mean) * (1.0 - mean))
        return value


ctypedef fused ClosedFormLoss:
    PoissonLoss
    GaussianLoss


cdef inline double closed_form(ClosedFormLoss loss, double y, double b, double mean_rest,
                               double quad, double lin) noexcept nogil:
    if ClosedFormLoss is PoissonLoss:
        return poisson_closed_form(y, b, mean_rest, quad, lin)
    else:
        return gaussian_closed_form(y, b, mean_rest, quad, lin)


cdef inline void solve_closed_form_coordinates(
        ClosedFormLoss loss, Py_ssize_t n, const double* y, const double* b,
        const double* mean_rest, double quad, double lin, double* x,
        double* curvature) noexcept nogil:
    """`CompiledLoss._solve_block`'s loop for a final class with a closed form.

    The type is known here, so the calls below are direct and the C compiler
    inlines the closed form into the loop. The loop makes no other call: the
    rare problems the closed form leaves (NaN: extreme inputs) keep their
    start value and are solved afterwards by `solve_extreme_coordinates`.
    """
    cdef Py_ssize_t i
    cdef double root
    cdef bint extreme = False
    for i in range(n):
        root = closed_form(loss, y[i], b[i], mean_rest[i], quad, lin)
        if root == root:
            x[i] = root
            if root > 0.0:
                curvature[i] = b[i] * b[i] * loss._hessian(y[i], mean_rest[i] + b[i] * root)
        else:
            extreme = True
    if extreme:
        solve_extreme_coordinates(loss, n, y, b, mean_rest, quad, lin, x, curvature)


cdef void solve_extreme_coordinates(
        ClosedFormLoss loss, Py_ssize_t n, const double* y, const double* b,
        const double* mean_rest, double quad, double lin, double* x,
        double* curvature) noexcept nogil:
    """The problems of a block whose closed form returned NaN, by the generic solver."""
    cdef Py_ssize_t i
    cdef double root
    for i in range(n):
        root = closed_form(loss, y[i], b[i], mean_rest[i], quad, lin)
        if root != root:
            x[i] = loss._newton_coordinate(y[i], b[i], mean_rest[i], quad, lin, x[i])
            if x[i] > 0.0:
                curvature[i] = b[i] * b[i] * loss._hessian(y[i], mean_rest[i] + b[i] * x[i])


cdef void solve_poisson_coordinates(
        PoissonLoss loss, Py_ssize_t n, const double* y, const double* b,
        const double* mean_rest, double quad, double lin, double* x,
        double* curvature) noexcept nogil:
    """`solve_closed_form_coordinates` for the Poisson loss, with the same results bit for bit.

    The coding kernel's hot loop (the default loss). Against the generic loop
    it reads each input once into locals (the stores to ``x`` may alias them),
    solves the b <= 0 problems (independent of the word) once per block, and
    settles the common zero code (a1 >= 0, a0 > 0) before any guard; every
    other word goes through `poisson_root` and its extreme-scale guards, and
    the NaN it returns for extreme inputs is still handed to the generic
    solver by `solve_extreme_coordinates`.
    """
    cdef Py_ssize_t i
    cdef double yi, bi, ri, tau, a1, a0, root
    cdef double two_quad = 2.0 * quad
    cdef double flat_root = -lin / (2.0 * quad)  # poisson_closed_form's b <= 0 branch
    cdef bint extreme = False
    if not flat_root > 0.0:
        flat_root = 0.0
    for i in range(n):
        bi = b[i]
        if bi <= 0.0:
            x[i] = flat_root
            if flat_root > 0.0:
                curvature[i] = bi * bi * loss._hessian(y[i], mean_rest[i] + bi * flat_root)
            continue
        yi = y[i]
        ri = mean_rest[i]
        tau = bi + lin
        a1 = two_quad * ri + bi * tau
        a0 = ri * tau - yi * bi
        if a1 >= 0.0 and a0 > 0.0:
            x[i] = 0.0  # both roots <= 0 (see poisson_root): most codes of a fitted model
            continue
        root = poisson_root(yi, bi, ri, quad, lin, tau, a1, a0)
        if root > 0.0:
            x[i] = root
            curvature[i] = bi * bi * loss._hessian(yi, ri + bi * root)
        elif root == root:
            x[i] = root
        else:
            extreme = True  # keeps its start value for the generic solver
    if extreme:
        solve_extreme_coordinates(loss, n, y, b, mean_rest, quad, lin, x, curvature)
