"""Input checks shared by the estimators."""
import numbers

import numpy as np
import scipy.sparse as sp


def as_count_matrix(X, loss, name="X"):
    """CSR float64 with sorted int32 indices, no stored zeros, values checked.

    Refuses negative, NaN and infinite entries (ValueError); the loss may
    refuse further values (e.g. the Bernoulli loss anything above 1).
    """
    X = sp.csr_matrix(X, dtype=np.float64, copy=True) if sp.issparse(X) else X
    if not sp.issparse(X):
        raise TypeError(f"{name} must be converted by check_array first")
    X.sum_duplicates()
    X.sort_indices()
    if X.nnz and not np.all(np.isfinite(X.data)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if X.nnz and X.data.min() < 0:
        raise ValueError(f"Negative values in data passed to {name}: STC needs non-negative counts "
                         f"(min value {X.data.min():g})")
    X.eliminate_zeros()
    if X.nnz >= np.iinfo(np.int32).max:
        raise ValueError(f"{name} has {X.nnz} non-zeros; at most 2**31 - 2 are supported")
    X.indices = X.indices.astype(np.int32, copy=False)
    X.indptr = X.indptr.astype(np.int32, copy=False)
    if hasattr(loss, "check_data") and X.nnz:
        loss.check_data(X.data)
    return X


def check_number(value, name, *, low=None, low_inclusive=True, integer=False):
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"{name} must be {'an integer' if integer else 'a real number'}, "
                        f"got {value!r}")
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if low is not None and (value < low or (value == low and not low_inclusive)):
        relation = ">=" if low_inclusive else ">"
        raise ValueError(f"{name} must be {relation} {low}, got {value!r}")
    return value


def check_choice(value, name, choices):
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value
