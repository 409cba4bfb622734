"""Built-in losses: Poisson and Gaussian in closed form, Bernoulli via Newton."""
cimport cython
from libc.math cimport log, sqrt

from stc.losses._base cimport CompiledLoss


@cython.final
cdef class PoissonLoss(CompiledLoss):
    """Log-Poisson loss for counts, as a deviance: mean - y + y log(y / mean).

    Data: non-negative counts. Non-integer values are accepted: the loss is
    then the generalised Kullback-Leibler divergence, still convex and
    minimised at mean = y (useful for tf-idf weights). Mean domain: (0, inf).
    """

    name = "poisson"

    def __cinit__(self):
        self.mean_lower = 0.0

    cdef double _loss(self, double y, double mean) noexcept nogil:
        if y > 0.0:
            return mean - y + y * log(y / mean)
        return mean

    cdef double _gradient(self, double y, double mean) noexcept nogil:
        return 1.0 - y / mean

    cdef double _hessian(self, double y, double mean) noexcept nogil:
        return y / (mean * mean)

    cdef double _solve_coordinate(self, double y, double b, double mean_rest,
                                  double quad, double lin, double x_start) noexcept nogil:
        # Zero of h'(x) = b (1 - y / (mean_rest + b x)) + 2 quad x + lin:
        # the larger root of a2 x^2 + a1 x + a0 (paper Sec. 2.3, with
        # quad = gamma and lin = rho - 2 gamma theta_k).
        cdef double a2, a1, a0, disc, root, tau
        if b <= 0.0:
            root = -lin / (2.0 * quad)
            return root if root > 0.0 else 0.0
        tau = b + lin
        a2 = 2.0 * quad * b
        a1 = 2.0 * quad * mean_rest + b * tau
        a0 = mean_rest * tau - y * b
        # The paper's form of the discriminant, a sum of squares: never negative.
        disc = (2.0 * quad * mean_rest - b * tau) ** 2 + 8.0 * quad * y * b * b
        if a1 >= 0.0:
            if a0 >= 0.0:
                # Both roots <= 0 (sum -a1/a2 <= 0, product a0/a2 >= 0): the
                # clamp gives 0, so skip the square root. Most word codes of a
                # fitted model are 0, which makes this the common case.
                return 0.0
            # Avoid cancellation in -a1 + sqrt(disc): use root = 2 a0 / (-a1 - sqrt).
            root = -2.0 * a0 / (a1 + sqrt(disc))
        else:
            root = (-a1 + sqrt(disc)) / (2.0 * a2)
        return root if root > 0.0 else 0.0

    cdef void _solve_coordinates(self, Py_ssize_t n, const double* y, const double* b,
                                 const double* mean_rest, double quad, double lin,
                                 double* x, double* curvature) noexcept nogil:
        solve_closed_form_coordinates(self, n, y, b, mean_rest, quad, lin, x, curvature)


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
        # h'(x) = b (mean_rest + b x - y) + 2 quad x + lin = 0 is linear in x.
        cdef double root = (b * (y - mean_rest) - lin) / (b * b + 2.0 * quad)
        return root if root > 0.0 else 0.0

    cdef void _solve_coordinates(self, Py_ssize_t n, const double* y, const double* b,
                                 const double* mean_rest, double quad, double lin,
                                 double* x, double* curvature) noexcept nogil:
        solve_closed_form_coordinates(self, n, y, b, mean_rest, quad, lin, x, curvature)


@cython.final
cdef class BernoulliLoss(CompiledLoss):
    """Bernoulli (binary cross-entropy) loss, as a deviance (KL divergence).

    Data: values in [0, 1] (presence/absence or proportions). Mean domain:
    (0, 1). No closed form: the coding kernel uses the generic Newton solver.
    """

    name = "bernoulli"

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

    cdef double _gradient(self, double y, double mean) noexcept nogil:
        cdef double value = -y / mean
        if y < 1.0:  # the (1 - y) term vanishes at y = 1, even at mean = 1
            value += (1.0 - y) / (1.0 - mean)
        return value

    cdef double _hessian(self, double y, double mean) noexcept nogil:
        cdef double value = y / (mean * mean)
        if y < 1.0:
            value += (1.0 - y) / ((1.0 - mean) * (1.0 - mean))
        return value


ctypedef fused ClosedFormLoss:
    PoissonLoss
    GaussianLoss


cdef inline void solve_closed_form_coordinates(
        ClosedFormLoss loss, Py_ssize_t n, const double* y, const double* b,
        const double* mean_rest, double quad, double lin, double* x,
        double* curvature) noexcept nogil:
    """`CompiledLoss._solve_coordinates`'s loop for a final class with a closed form.

    The type is known here, so the calls below are direct and the C compiler
    inlines the closed form into the loop.
    """
    cdef Py_ssize_t i
    for i in range(n):
        x[i] = loss._solve_coordinate(y[i], b[i], mean_rest[i], quad, lin, x[i])
        if x[i] > 0.0:
            curvature[i] = b[i] * b[i] * loss._hessian(y[i], mean_rest[i] + b[i] * x[i])
