"""Input and parameter checks shared by the estimators.

Parameters are checked against a declarative table (``_parameter_constraints``
on each estimator class, in the manner of scikit-learn), with one error type
per kind of mistake: a value of the wrong type raises TypeError, a value of
the right type outside the allowed range or set raises ValueError; both name
the parameter.
"""
import math
import numbers
import os
import sys
import warnings

import numpy as np
import scipy.sparse as sp
import sklearn
from sklearn.utils.validation import validate_data

from stc._utils.text import counted

# A warning of a fit points at the first caller outside these folders: the package's, and
# scikit-learn's, whose wrappers (``fit_transform``'s output container, pipelines) call it.
PACKAGE_FOLDER = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # stc/
SKLEARN_FOLDER = os.path.dirname(os.path.abspath(sklearn.__file__)) + os.sep


class DataWarning(UserWarning):
    """The data are valid but likely to give a poor fit (e.g. one count dominates the rest)."""


class Interval:
    """Numbers of ``kind`` (numbers.Integral or numbers.Real) in a range; finite."""

    def __init__(self, kind, low=None, high=None, *, closed="both"):
        self.kind, self.low, self.high, self.closed = kind, low, high, closed

    def type_matches(self, value):
        return isinstance(value, self.kind) and not isinstance(value, (bool, np.bool_))

    def value_matches(self, value):
        try:  # an int beyond float64 is infinite here; a Fraction is a real number
            if not math.isfinite(float(value)):
                return False
        except (TypeError, ValueError, OverflowError):
            return False
        low_ok = self.low is None or (value >= self.low if self.closed in ("both", "left")
                                      else value > self.low)
        high_ok = self.high is None or (value <= self.high if self.closed in ("both", "right")
                                        else value < self.high)
        return low_ok and high_ok

    def __str__(self):
        kind = "an integer" if self.kind is numbers.Integral else "a real number"
        left = "[" if self.closed in ("both", "left") else "("
        right = "]" if self.closed in ("both", "right") else ")"
        def shown(bound):  # integers in full (2147483647, not 2.14748e+09)
            return str(bound) if isinstance(bound, numbers.Integral) else f"{bound:g}"

        low = "-inf" if self.low is None else shown(self.low)
        high = "inf" if self.high is None else shown(self.high)
        return f"{kind} in {left}{low}, {high}{right}"


class Options:
    """One of a set of strings."""

    def __init__(self, *values):
        self.values = values

    def type_matches(self, value):
        return isinstance(value, str)

    def value_matches(self, value):
        return value in self.values

    def __str__(self):
        return "one of " + ", ".join(repr(v) for v in self.values)


class InstanceOf:
    """Any instance of the given types (checked further by whoever uses it)."""

    def __init__(self, *types, description=None):
        self.types, self.description = types, description

    def type_matches(self, value):
        return isinstance(value, self.types)

    def value_matches(self, value):
        return True

    def __str__(self):
        return self.description or "an instance of " + " or ".join(t.__name__ for t in self.types)


class NoneValue:
    def type_matches(self, value):
        return value is None

    def value_matches(self, value):
        return True

    def __str__(self):
        return "None"


class Excluding:
    """A constraint with some values taken out (e.g. n_jobs=0)."""

    def __init__(self, constraint, *excluded):
        self.constraint, self.excluded = constraint, excluded

    def type_matches(self, value):
        return self.constraint.type_matches(value)

    def value_matches(self, value):
        return self.constraint.value_matches(value) and value not in self.excluded

    def __str__(self):
        return f"{self.constraint} other than {', '.join(map(str, self.excluded))}"


# Threads: None (1), -1 (all), any other non-zero int a C int can hold.
N_JOBS = [NoneValue(), Excluding(Interval(numbers.Integral, -(2 ** 31) + 1, 2 ** 31 - 1), 0)]
RANDOM_STATE = [NoneValue(), Interval(numbers.Integral, 0, 2 ** 32 - 1),
                InstanceOf(np.random.RandomState, description="a numpy RandomState")]


def validate_params(params, constraints, owner):
    """Check every entry of ``params`` named in ``constraints`` (a list of allowed forms)."""
    for name, allowed in constraints.items():
        value = params[name]
        typed = [c for c in allowed if c.type_matches(value)]
        accepted = " or ".join(str(c) for c in allowed)
        if not typed:
            raise TypeError(f"{owner}: {name} must be {accepted}, got {value!r} "
                            f"of type {type(value).__name__}")
        if not any(c.value_matches(value) for c in typed):
            raise ValueError(f"{owner}: {name} must be {accepted}, got {value!r}")


def all_in_chunks(values, test, chunk=1 << 20):
    """``np.all(test(values))`` without a temporary as large as ``values`` (1-D)."""
    return all(bool(np.all(test(values[i:i + chunk]))) for i in range(0, values.size, chunk))


def is_count_matrix_layout(X):
    """True if X is already CSR float64 with sorted unique int32 indices and no stored zero."""
    return (sp.issparse(X) and X.format == "csr" and X.dtype == np.float64
            and X.indices.dtype == np.int32 and X.indptr.dtype == np.int32
            and X.has_canonical_format and all_in_chunks(X.data, lambda v: v != 0))


def as_count_matrix(X, loss, name="X", copy=True):
    """CSR float64 with sorted int32 indices, no stored zeros, values checked.

    Refuses negative, NaN and infinite entries (ValueError); the loss may
    refuse further values (e.g. the Bernoulli loss anything above 1). With
    ``copy=False``, an X already in that layout is checked and returned
    as it is (online learning: no corpus-sized copy); any other X is copied.
    """
    if not copy and is_count_matrix_layout(X):
        X = sp.csr_matrix(X, copy=False)
    else:
        X = sp.csr_matrix(X, dtype=np.float64, copy=True) if sp.issparse(X) else X
    if not sp.issparse(X):
        raise TypeError(f"{name} must be converted by check_array first")
    X.sum_duplicates()
    X.sort_indices()
    # checked in chunks: online learning reads a large X without copying it
    if X.nnz and not all_in_chunks(X.data, np.isfinite):
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
    if X.nnz:
        check_data_scale(X.data, loss, name)
    return X


def check_data_scale(values, loss, name="X"):
    """Refuse data too large for the loss's formulas: the loss near the largest value must be finite.

    The loss is evaluated at the largest value y with means y / 2 and 2 y
    (those inside its mean domain): Gaussian data of 1e200, say, whose
    squares overflow, would otherwise fail deep inside the fit.
    """
    largest = float(values.max())
    lower, upper = loss.mean_domain
    means = np.array([0.5 * largest, 2.0 * largest])
    means = means[(means > lower) & (means < upper)]
    if largest <= 0 or means.size == 0:
        return
    with np.errstate(all="ignore"):
        value = np.asarray(loss.loss(np.full(means.shape, largest), means), dtype=np.float64)
        slope = np.asarray(loss.gradient(np.full(means.shape, largest), means), dtype=np.float64)
    if not (np.all(np.isfinite(value)) and np.all(np.isfinite(slope))):
        raise ValueError(
            f"{name}'s values reach {largest:g}: the {getattr(loss, 'name', type(loss).__name__)} "
            f"loss is not finite for data that large (its formulas overflow near a mean of "
            f"{means[0]:g}); rescale {name}, e.g. divide it by its largest value")


def validated_counts(estimator, X, loss, *, reset, copy=True, batch=False):
    """``X`` as ``estimator``'s counts: scikit-learn's checks (``reset``: set
    ``n_features_in_``), then `as_count_matrix`. ``batch``: an online
    learning batch, which may hold no document (it is skipped)."""
    check_input_values(X)
    X = validate_data(estimator, X, accept_sparse="csr", dtype=np.float64, reset=reset,
                      ensure_min_samples=0 if batch else 1)
    return as_count_matrix(sp.csr_matrix(X, copy=False), loss, copy=copy)


def training_counts(estimator, X, loss, *, copy=True):
    """``X`` checked as the corpus ``estimator`` learns from, and w_bar, its mean stored count.

    ``X`` as `validated_counts` gives it, with a document to learn from
    (`check_training_corpus`); with rho in relative units, a warning if one
    entry sets w_bar (`warn_dominant_count`).
    """
    X = validated_counts(estimator, X, loss, reset=True, copy=copy)
    check_training_corpus(X)
    if estimator.rho_units == "relative":
        warn_dominant_count(X.data)
    return X, float(X.data.mean())


def check_iterable(batches, what):
    """Refuse ``batches`` that cannot be iterated (``what``: what it must yield)."""
    try:
        iter(batches)
    except TypeError:
        raise TypeError(f"batches must be an iterable of {what}, got "
                        f"{type(batches).__name__}") from None


def check_training_corpus(X, name="X"):
    """Refuse a corpus with nothing to learn from (every document empty)."""
    if X.nnz == 0:
        raise ValueError(f"{name} has no non-zero entry: every document is empty, so there is "
                         "nothing to learn topics from")


def check_sparse_structure(X, name="X"):
    """Refuse a sparse matrix whose index arrays do not describe a matrix of its shape.

    scipy's conversions and the kernels index with them unchecked: indices out
    of range would crash the process or read the wrong entries. CSR, CSC and
    COO are checked (other formats keep their entries in Python structures).
    """
    fault = None
    if X.format in ("csr", "csc"):
        major, minor = X.shape if X.format == "csr" else X.shape[::-1]
        indptr, indices = np.asarray(X.indptr), np.asarray(X.indices)
        what = "column" if X.format == "csr" else "row"
        if indptr.ndim != 1 or indptr.size != major + 1:
            fault = f"indptr has {indptr.size} entries, not {major + 1}"
        elif indptr[0] != 0 or np.any(np.diff(indptr) < 0):
            fault = "indptr must start at 0 and never decrease"
        elif indptr[-1] > min(indices.size, np.size(X.data)):
            fault = (f"indptr ends at {indptr[-1]}, past the {min(indices.size, np.size(X.data))} "
                     "stored entries")
        elif indptr[-1] and not (0 <= indices[:indptr[-1]].min()
                                 and indices[:indptr[-1]].max() < minor):
            fault = f"a {what} index is outside [0, {minor})"
    elif X.format == "coo":
        for what, index, size in (("row", X.row, X.shape[0]), ("column", X.col, X.shape[1])):
            if np.size(index) and not (0 <= np.min(index) and np.max(index) < size):
                fault = f"a {what} index is outside [0, {size})"
                break
    if fault:
        raise ValueError(f"{name} is not a valid {X.format.upper()} matrix of shape {X.shape}: "
                         f"{fault}; build it from valid indices")


def check_input_values(X, name="X"):
    """Refuse complex, NaN or infinite input with a message of our own, before scikit-learn's.

    A sparse X must also be a valid matrix of its shape (`check_sparse_structure`).
    """
    if sp.issparse(X):
        check_sparse_structure(X, name)
    values = getattr(X, "data", None) if sp.issparse(X) else X
    text = _first_text_item(values)
    if text is not None:
        what = type(values).__name__ + ("" if text is values else f" of {type(text).__name__}")
        raise TypeError(_text_instead_of_counts(name, f"a {what}"))
    if not isinstance(values, np.ndarray):
        return  # lists, DOK matrices etc.: left to check_array
    if values.dtype.kind in "USV":
        raise TypeError(_text_instead_of_counts(
            name, f"an array of {'bytes' if values.dtype.kind == 'S' else 'strings'} "
                  f"({values.dtype})"))
    if np.iscomplexobj(values):
        raise ValueError(f"Complex data not supported: {name} has complex dtype {values.dtype}; "
                         "counts must be real")  # the first words: scikit-learn's API
    if values.dtype.kind == "f":
        for bad, what in ((np.isnan, "NaN"), (np.isinf, "infinite values")):
            count = sum(int(np.count_nonzero(bad(values.ravel()[i:i + (1 << 20)])))
                        for i in range(0, values.size, 1 << 20))
            if count:
                raise ValueError(f"{name} contains {what} ({count} entries); counts must be "
                                 "finite and non-negative")


def _first_text_item(values):
    """``values`` itself if it is text, or the first item of a (nested) list of text; else None."""
    item = values
    while isinstance(item, (list, tuple)) and item:
        item = item[0]
    return item if isinstance(item, (str, bytes)) else None


def _text_instead_of_counts(name, what):
    return (f"{name} must hold counts (numbers), got {what}: STC learns from a document-term "
            "count matrix; read text with stc.readers.load_corpus (a folder of text files) or count "
            "words with scikit-learn's CountVectorizer")


def warn_more_topics_than_data(n_topics, X, name="X"):
    """Warn when there are more topics than terms or documents: the extra topics come out as
    copies of others (STC(n_topics=5) on 2 terms gave three identical topics)."""
    short = [(count, what) for count, what in ((X.shape[1], "term"), (X.shape[0], "document"))
             if n_topics > count]
    if short:
        sizes = " and ".join(counted(count, what) for count, what in short)
        limit = counted(min(count for count, _ in short), "topic")
        warnings.warn(f"n_topics={n_topics} is more than the {sizes} of {name}, too few to "
                      f"learn that many distinct topics (some would repeat others); use at "
                      f"most {limit}", DataWarning, stacklevel=user_stacklevel())


def warn_dominant_count(values, name="X"):
    """Warn when one entry holds more than half of the counts: it sets w_bar (relative rho)."""
    total = float(values.sum())
    largest = float(values.max()) if values.size else 0.0
    if values.size > 1 and largest > 0.5 * total:
        warnings.warn(
            f"one entry of {name} ({largest:g}) holds {largest / total:.0%} of its total count, "
            f"so it sets w_bar, the mean count that rho in relative units scales with "
            f"(w_bar = {total / values.size:g}): rho's weight is far larger than the other "
            "counts suggest, and most codes may be zero. Clean the outlier from the data, or give "
            "rho in absolute units (rho_units='absolute')", DataWarning,
            stacklevel=user_stacklevel())


def user_stacklevel():
    """The ``stacklevel`` that points the caller's warning at the user's line.

    That is the first frame outside stc and scikit-learn: a fit goes through
    several of the package's functions (MedSTC's through STC's), and
    ``fit_transform`` through scikit-learn's output wrapper, so a fixed
    stacklevel would point inside one of them.
    """
    level, frame = 1, sys._getframe(1)  # 1: the caller, which calls warnings.warn
    while frame is not None and frame.f_code.co_filename.startswith((PACKAGE_FOLDER,
                                                                     SKLEARN_FOLDER)):
        frame, level = frame.f_back, level + 1
    return level


def check_fitted_topics(estimator):
    """Refuse topics changed after fit into what topics cannot be (a ValueError naming them).

    ``components_`` must be a 2-D numeric array with a column per term of
    the training data (``n_features_in_``), finite and non-negative.
    """
    beta = estimator.components_
    owner = f"{type(estimator).__name__}.components_"
    advice = "it was changed after fit or is corrupt; refit the model or restore it"
    if not (isinstance(beta, np.ndarray) and beta.ndim == 2 and beta.dtype.kind in "fiu"):
        shape = getattr(beta, "shape", None)
        raise ValueError(f"{owner} must be a 2-D numeric numpy array, got "
                         f"{type(beta).__name__}" + (f" of shape {shape}" if shape else "")
                         + f": {advice}")
    n_features = getattr(estimator, "n_features_in_", beta.shape[1])
    if beta.shape[1] != n_features:
        raise ValueError(f"{owner} has {beta.shape[1]} columns, but the model was fitted on "
                         f"{n_features} terms (n_features_in_): {advice}")
    check_fitted_finite(estimator, "components_")
    if beta.size and beta.min() < 0:
        raise ValueError(f"{owner} holds negative weights (min {beta.min():g}); topics are "
                         f"distributions over the terms: {advice}")


def check_fitted_finite(estimator, *names):
    """Refuse fitted arrays holding NaN or infinite values (changed after fit, or corrupt)."""
    for name in names:
        values = getattr(estimator, name)
        bad = int(np.size(values) - np.count_nonzero(np.isfinite(values)))
        if bad:
            raise ValueError(f"{type(estimator).__name__}.{name} contains NaN or infinite values "
                             f"({bad} entries): it was changed after fit or is corrupt; refit the "
                             "model or restore it")
