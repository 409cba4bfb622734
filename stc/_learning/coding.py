"""Python layer of hierarchical sparse coding (paper Sec. 2.3): the coding problem and the
calls into the kernel.

`CodingProblem` holds everything that defines a document's coding problem (the
loss, objective (2)'s weights and penalty kinds, the sweep's stopping rule);
`code_documents` (warm start, used while training) and `code_new_documents` (cold
start, used by ``transform``) code a corpus with it. A loss that runs in the
compiled kernel (``loss.runs_in_kernel``) is coded by the nogil kernel
`stc._core._coding`, in parallel; a pure-Python loss by the kernel's numpy reference
`stc._core.reference`, which mirrors it function for function.
"""
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from stc._core import _coding, _segments, reference
from stc._core._word_codes import SparseWordCodes
from stc._core._constants import BLOCK_NEWTON_STEPS, PENALTIES
from stc.losses._python import loss_failure_message


@dataclass(frozen=True)
class CodingProblem:
    """A document's coding problem: objective (2) with the topics fixed, and the sweep's rule.

    For one document d with observed words I_d and counts w_dn, minimise over
    theta_d >= 0 and s_dn >= 0::

        sum_n l(w_dn, s_dn . beta_n) + lambda_ pen(theta_d)
            + sum_n (gamma ||s_dn - theta_d||^2 + rho pen(s_dn)),

    with pen the l1 or l2 penalty (``theta_penalty``, ``code_penalty``).
    Coding sweeps stop after ``max_iter`` sweeps or when the relative decrease
    of the document's objective falls under ``tol``; ``newton_steps`` caps the
    block Newton steps that move each theta_k with its word codes (0: the
    paper's plain alternation).
    """

    loss: object
    lambda_: float
    gamma: float
    rho: float
    theta_penalty: str = "l2"
    code_penalty: str = "l1"
    max_iter: int = 50
    tol: float = 1e-4
    newton_steps: int = BLOCK_NEWTON_STEPS

    @property
    def params(self):
        """The numbers of the problem, as the kernel's `CodingParams` struct takes them."""
        return dict(lam=float(self.lambda_), gamma=float(self.gamma), rho=float(self.rho),
                    theta_penalty=PENALTIES[self.theta_penalty],
                    code_penalty=PENALTIES[self.code_penalty], max_iter=int(self.max_iter),
                    tol=float(self.tol), newton_steps=int(self.newton_steps))

    def with_max_iter(self, max_iter):
        """The same problem with another sweep cap."""
        return CodingProblem(self.loss, self.lambda_, self.gamma, self.rho, self.theta_penalty,
                             self.code_penalty, max_iter, self.tol, self.newton_steps)


def iteration_problem(problem, sweeps):
    """The coding problem of one outer iteration: at most ``sweeps`` sweeps (None: as given).

    The paper codes every document to convergence in each outer iteration.
    Stopping after one sweep (warm-started from the last iteration's codes)
    still decreases objective (2) in every iteration, and the codes converge
    with the topics over the outer iterations, in less time than the paper's
    step (docs/algorithms.md). A sweep that stops at the cap has not
    "failed", so such steps report no capped documents.
    """
    return problem if sweeps is None else problem.with_max_iter(min(sweeps, problem.max_iter))


class CodingResult(NamedTuple):
    """Per-document outcome of a coding call."""

    objective: np.ndarray        # objective (2) of each document at its new codes (minus b_d . theta_d)
    loss: np.ndarray             # its reconstruction-loss part
    n_iter: np.ndarray           # sweeps made
    passes: np.ndarray           # passes over the document's words (all topics, all Newton steps)
    start_objective: np.ndarray  # objective at the codes the call started from
    start_loss: np.ndarray       # its loss part
    means: np.ndarray            # s_j . beta[:, n_j] for every stored entry j of X
    start_means: np.ndarray = None  # the same at the start codes (``keep_start_means``)

    def word_code_updates(self, X):
        """Word-code updates made per document (each pass updates every word once)."""
        return self.passes * np.diff(X.indptr)


def _result(arrays, means, loss, X):
    """The `CodingResult` of a coding call, or a ValueError if the loss plugin returned NaN."""
    objective, loss_part, n_iter, passes, start, failure = arrays
    if failure is not None:
        where = (f" at document {failure['document']}, term {int(X.indices[failure['entry']])}"
                 f" ({failure['n_documents']} document(s) failed)")
        raise ValueError(loss_failure_message(
            loss, failure["kind"], failure["y"], failure["mean"], failure["b"],
            failure["mean_rest"], failure["quad"], failure["lin"], where))
    return CodingResult(objective, loss_part, n_iter, passes, start[:, 0], start[:, 1], means)


def initial_codes(X, n_topics, value=1.0, sparse=False):
    """Start every word code and document code at ``value`` (1 by default).

    All topics start equal (no topic is favoured by the sweep order) and at
    the scale the penalties settle at. A start far above it (e.g. codes that
    reconstruct every count exactly, which with ~1e-4 topic weights means
    codes ~1e4) costs many sweeps: the paper's plain alternation sheds only
    about rho / (2 gamma) of the common level of s and theta per sweep.
    Empty documents start (and stay) at zero. The word codes are a dense
    (nnz, K) array, or with ``sparse`` `SparseWordCodes` (which holds the
    start value without storing it).
    """
    codes = (SparseWordCodes(X.indptr, n_topics, float(value)) if sparse
             else np.full((X.nnz, n_topics), float(value)))
    theta = np.full((X.shape[0], n_topics), float(value))
    theta[np.diff(X.indptr) == 0] = 0.0
    return codes, theta


def start_value_in_domain(loss, X, beta, value=1.0):
    """The start value for all codes, lowered if needed to keep every mean in the loss's domain.

    With every code at ``value`` an entry's mean is value * sum_k beta_kn; the
    all-ones start can put it above the upper end of a bounded mean domain
    (e.g. the Bernoulli loss's (0, 1)), where the loss is infinite. The value
    is then scaled so that the largest mean is half the upper end.
    """
    upper = loss.mean_domain[1]
    if not np.isfinite(upper) or X.nnz == 0:
        return float(value)
    largest = value * beta.sum(axis=0)[X.indices].max()
    if largest >= 0.5 * upper:
        value = value * 0.5 * upper / largest
    return float(value)


def transposed(beta):
    """The dictionary as the compiled kernels read it: (n_features, n_topics), C-contiguous.

    The coding functions below make it from ``beta`` when not given it
    (``beta_t``); a caller that codes several times with the same topics
    makes it once (at K = 50 and 60,000 terms a transposed copy costs 6 ms,
    as much as coding a few dozen documents).
    """
    return np.ascontiguousarray(np.asarray(beta, dtype=np.float64).T)


class ShiftedMean(NamedTuple):
    """What MedSTC's shifted mean adds to a coding call (`code_documents`'s ``shift``).

    ``theta_linear`` (n_docs, K) b subtracts b_d . theta_d from each
    document's objective; ``active``, None or a uint8 array of n_docs, leaves
    the documents with 0 as they are; ``start_means``, None or a float64 array
    of nnz, receives the means of the start codes; ``with_start`` as in
    `code_documents`.
    """

    theta_linear: np.ndarray
    active: np.ndarray = None
    start_means: np.ndarray = None
    with_start: bool = True


def code_documents(problem, X, beta, codes, theta, *, theta_linear=None, active=None,
                   n_jobs=None, with_start=True, keep_start_means=False, beta_t=None):
    """Code every document of CSR ``X`` in place, warm-started from ``codes`` and ``theta``.

    ``codes``, the word codes (a dense (nnz, K) array or `SparseWordCodes`),
    and ``theta`` (n_docs, K) are updated in place.
    ``theta_linear``, a (n_docs, K) array b or None, subtracts b_d . theta_d
    from each document's objective (MedSTC's shifted mean). ``active``, a
    boolean array of n_docs, leaves the documents where it is False as they
    are: no sweep, their means and objective computed at their current codes.
    Returns a `CodingResult`. ``with_start=False`` says the caller does not
    need the objective at the start codes: a call of one sweep then skips it
    and its start values are NaN. ``keep_start_means`` also returns the means
    of the start codes (``start_means``; the kernel computes them anyway).
    ``beta_t``: `transposed` (beta), if the caller has it.
    """
    means = np.zeros(X.nnz, dtype=np.float64)
    start_means = np.empty(X.nnz, dtype=np.float64) if keep_start_means else None
    if theta_linear is not None:
        theta_linear = np.ascontiguousarray(theta_linear, dtype=np.float64)
    if active is not None:
        active = np.asarray(active)
        if active.shape != (X.shape[0],) or active.dtype != bool:
            raise ValueError(f"active must be a boolean array of shape ({X.shape[0]},)")
    loss = problem.loss
    if loss.runs_in_kernel:
        beta_t = transposed(beta) if beta_t is None else beta_t
        shifted = theta_linear is not None or active is not None or keep_start_means
        if shifted:
            shift = ShiftedMean(theta_linear, None if active is None else active.view(np.uint8),
                                start_means, with_start)
            arrays = _coding.code_shifted_documents(loss, problem.params, X, beta_t, codes,
                                                    theta, means, shift, n_jobs)
        else:
            arrays = _coding.code_documents(loss, problem.params, X, beta_t, codes, theta,
                                            means, n_jobs, with_start)
    else:
        sparse = isinstance(codes, SparseWordCodes)
        dense = codes.toarray() if sparse else codes
        if keep_start_means:
            start_means[:] = np.sum(dense * beta.T[X.indices], axis=1)
        arrays = reference.code_documents(loss, problem.params, X, beta, dense, theta, means,
                                          theta_linear, active)
        if sparse:
            codes.assign(dense)
    result = _result(arrays, means, loss, X)._replace(start_means=start_means)
    if not with_start and problem.max_iter == 1:  # the same for both paths
        result = result._replace(start_objective=np.full(X.shape[0], np.nan),
                                 start_loss=np.full(X.shape[0], np.nan))
    return result


def entry_codes(codes, entry):
    """The K word codes of stored entry ``entry`` (dense or `SparseWordCodes` codes)."""
    return codes.row(entry) if isinstance(codes, SparseWordCodes) else codes[entry]


def zero_code_fraction(codes):
    """The share of word codes that are exactly 0 (dense or `SparseWordCodes` codes)."""
    if isinstance(codes, SparseWordCodes):
        return codes.zero_fraction()
    return 1.0 - np.count_nonzero(codes) / codes.size if codes.size else 0.0


# Word codes with more non-zero codes than this share are stored dense once two coding
# steps in a row left them so: a sparse row takes 12 bytes per code and is found through
# an index, and the dictionary step gathers sparse rows only below this share
# (`stc._learning.dictionary.GATHER_DENSITY`). The first steps of a fit are denser than the rest,
# so one dense step alone does not switch.
SPARSE_STORAGE_DENSITY = 0.25


class CodeStorage:
    """Keeps batch learning's word codes sparse or dense, by the share of non-zero codes."""

    def __init__(self, n_jobs=None):
        self.n_jobs, self.dense_steps = n_jobs, 0

    def __call__(self, codes, indptr):
        """``codes`` after a coding step, in the storage their density calls for."""
        sparse = isinstance(codes, SparseWordCodes)
        density = 1.0 - zero_code_fraction(codes)
        if density <= SPARSE_STORAGE_DENSITY:
            self.dense_steps = 0
            return codes if sparse else SparseWordCodes.from_dense(indptr, codes, self.n_jobs)
        self.dense_steps += 1
        return codes.toarray(self.n_jobs) if sparse and self.dense_steps >= 2 else codes


def as_code_rows(codes, indptr):
    """``codes`` as the statistics kernels read them: `SparseWordCodes` as they are, dense
    (nnz, K) codes as a view of their rows (no copy; documents: ``indptr``)."""
    if isinstance(codes, SparseWordCodes):
        return codes
    return SparseWordCodes.view_of_dense(indptr, np.ascontiguousarray(codes, dtype=np.float64))


def code_new_documents(problem, X, beta, *, keep_word_codes=False, n_jobs=None, beta_t=None):
    """Code new documents with topics ``beta``; return (theta, word codes or None, `CodingResult`).

    Each document starts with all its codes at the best single value for them
    (`common_start_value`), far closer to its optimum than a fixed start when
    the penalties are large. The word codes are kept only when
    ``keep_word_codes``: True keeps the dense (nnz, K) array, ``"sparse"``
    `SparseWordCodes`. ``beta_t``: `transposed` (beta), if the caller has it.
    """
    n_topics = beta.shape[0]
    if keep_word_codes not in (False, True, "sparse"):
        raise ValueError(f"keep_word_codes must be False, True or 'sparse', got "
                         f"{keep_word_codes!r}")
    codes = None
    if keep_word_codes == "sparse":
        codes = SparseWordCodes(X.indptr, n_topics)
    elif keep_word_codes:
        codes = np.empty((X.nnz, n_topics))
    theta = np.empty((X.shape[0], n_topics))
    means = np.zeros(X.nnz, dtype=np.float64)
    loss = problem.loss
    if loss.runs_in_kernel:
        arrays = _coding.code_new_documents(loss, problem.params, X,
                                            transposed(beta) if beta_t is None else beta_t,
                                            codes, theta, means, n_jobs)
    else:
        dense = np.empty((X.nnz, n_topics)) if keep_word_codes == "sparse" else codes
        arrays = reference.code_new_documents(loss, problem.params, X, beta, dense, theta,
                                              means)
        if keep_word_codes == "sparse":
            codes.assign(dense)
    return theta, codes, _result(arrays, means, loss, X)


def code_known_terms(problem, X, beta, *, keep_word_codes=False, n_jobs=None, beta_t=None):
    """`code_new_documents` of CSR ``X`` without the terms no topic gives weight to.

    Such terms (never seen in training) carry no information; the documents
    are coded without them and their word codes are 0 (rows of zeros when
    ``keep_word_codes``). Returns (theta, word codes or None, `CodingResult`).
    ``beta_t``: `transposed` (beta), if the caller has it.
    """
    known = beta.sum(axis=0) > 0
    keep = known[X.indices]
    Xk = X
    if not np.all(keep):
        kept_before = np.concatenate([[0], np.cumsum(keep)]).astype(np.int32)
        Xk = sp.csr_matrix((X.data[keep], X.indices[keep], kept_before[X.indptr]),
                           shape=X.shape, copy=False)
        Xk.indices = Xk.indices.astype(np.int32, copy=False)
        Xk.indptr = Xk.indptr.astype(np.int32, copy=False)
    theta, codes, result = code_new_documents(problem, Xk, beta, keep_word_codes=keep_word_codes,
                                              n_jobs=n_jobs, beta_t=beta_t)
    if keep_word_codes and Xk is not X:
        full = np.zeros((X.nnz, beta.shape[0]))
        full[np.flatnonzero(keep)] = codes
        codes = full
    return theta, codes, result


def segment_objectives(problem, X, beta, old_codes, new_codes, old_theta, new_theta, rows,
                       steps, n_jobs=None, beta_t=None):
    """Objective (2) of documents ``rows`` at the codes old + step * (new - old), and its loss part.

    One step per listed document (``steps``); the intermediate codes are not
    formed for a compiled loss. ``beta_t``: `transposed` (beta), if the caller has it.
    """
    rows = np.ascontiguousarray(rows, dtype=np.intp)
    steps = np.ascontiguousarray(steps, dtype=np.float64)
    loss = problem.loss
    if loss.runs_in_kernel:
        return _segments.segment_objectives(loss, problem.params, X,
                                            transposed(beta) if beta_t is None else beta_t,
                                            (old_codes, old_theta), (new_codes, new_theta),
                                            rows, steps, n_jobs)
    # A pure-Python loss: the reference forms the trial codes of the listed documents.
    return reference.segment_objectives(loss, problem.params, X, beta, (old_codes, old_theta),
                                        (new_codes, new_theta), rows, steps)


def document_objectives(problem, X, beta, codes, theta, n_jobs=None):
    """Objective (2) of every document at the given codes, and its loss part (two arrays).

    ``codes``: the word codes, dense (nnz, K) or `SparseWordCodes`.
    """
    if isinstance(codes, SparseWordCodes):
        codes = codes.toarray(n_jobs)
    rows = np.arange(X.shape[0])
    return segment_objectives(problem, X, beta, codes, codes, theta, theta, rows,
                              np.zeros(X.shape[0]), n_jobs)


def stc_objective(problem, X, beta, codes, theta, n_jobs=None):
    """Objective (2) of the paper for the whole corpus: the sum of the documents' objectives."""
    return float(np.sum(document_objectives(problem, X, beta, codes, theta, n_jobs)[0]))
