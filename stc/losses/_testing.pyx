"""A deliberately broken compiled loss, for the tests of the coding kernel's error handling.

`NaNWindowLoss` is the squared error 1/2 (mean - y)^2, except that one of its
loss, gradient or hessian is NaN for means in an open window (low, high).
`check_loss` samples the mean domain at finitely many points and cannot see a
narrow window; the coding kernel has to catch what such a loss returns
(`stc._core._coding`, `note_failure`). Not a loss to fit with.
"""
from libc.math cimport NAN

from stc.losses._base cimport CompiledLoss

BROKEN_PARTS = ("loss", "gradient", "hessian")


cdef class NaNWindowLoss(CompiledLoss):
    """Squared error whose ``broken`` part ("loss", "gradient" or "hessian") is NaN on (low, high)."""

    name = "nan_window"
    cdef readonly double low, high
    cdef int part

    def __cinit__(self, double low=5.0, double high=5.5, broken="gradient"):
        if broken not in BROKEN_PARTS:
            raise ValueError(f"broken must be one of {BROKEN_PARTS}, got {broken!r}")
        self.low, self.high = low, high
        self.part = BROKEN_PARTS.index(broken)

    @property
    def broken(self):
        return BROKEN_PARTS[self.part]

    def __reduce__(self):
        return (type(self), (self.low, self.high, self.broken))

    cdef inline bint _in_window(self, double mean) noexcept nogil:
        return mean > self.low and mean < self.high

    cdef double _loss(self, double y, double mean) noexcept nogil:
        if self.part == 0 and self._in_window(mean):
            return NAN
        return 0.5 * (mean - y) * (mean - y)

    cdef double _gradient(self, double y, double mean) noexcept nogil:
        if self.part == 1 and self._in_window(mean):
            return NAN
        return mean - y

    cdef double _hessian(self, double y, double mean) noexcept nogil:
        if self.part == 2 and self._in_window(mean):
            return NAN
        return 1.0
