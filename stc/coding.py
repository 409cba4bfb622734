"""Python layer of hierarchical sparse coding: start values and kernel dispatch."""
import numpy as np

from stc._core._coding import code_documents
from stc._core.numpy_coding import (PENALTY_L1, PENALTY_L2, code_documents_numpy,
                                     common_start_values)
from stc.losses import CompiledLoss

PENALTIES = {"l1": PENALTY_L1, "l2": PENALTY_L2}

# Cap on the Newton steps that move each theta_k with its word codes
# (`update_topic_block`); 0 gives the paper's plain alternation. On 20
# Newsgroups (K = 50) the block update reaches the coding optimum in ~3
# sweeps; the plain alternation needs over a hundred. Newton usually stops
# well before the cap.
BLOCK_NEWTON_STEPS = 20


def initial_codes(X, n_topics, value=1.0):
    """Start every word code and document code at ``value`` (1 by default).

    All topics start equal (no topic is favoured by the sweep order) and at
    the scale the penalties settle at. A start far above it (e.g. codes that
    reconstruct every count exactly, which with ~1e-4 topic weights means
    codes ~1e4) costs many sweeps: the paper's plain alternation sheds only
    about rho / (2 gamma) of the common level of s and theta per sweep.
    Empty documents start (and stay) at zero.
    """
    codes = np.full((X.nnz, n_topics), float(value))
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


def sparse_code(loss, X, beta, codes, theta, *, lam, gamma, rho, theta_penalty, code_penalty,
                max_iter, tol, theta_linear=None, newton_steps=BLOCK_NEWTON_STEPS,
                n_jobs=None, start_value=None, updates=None, start_values=None, active=None):
    """Code every document of CSR ``X`` in place, warm-started from ``codes``/``theta``.

    Returns (per-document objective, per-document loss part, per-document
    iterations, means of the non-zeros). ``codes`` may be None: the word
    codes are then not kept, which saves their (nnz, K) array when only theta
    is wanted. ``start_value`` None starts from ``codes``/``theta`` (a warm
    start) when ``codes`` is given; a number starts every code (word and
    document) there; ``"auto"`` (and None without ``codes``) starts each
    document at the best single value for all its codes.
    ``newton_steps`` caps the Newton steps on each theta_k inside a sweep (0:
    the paper's alternation). A compiled loss runs the nogil kernel in
    parallel; a pure-Python loss runs the numpy sweep. ``updates`` (compiled
    losses only), an int64 array of n_docs, receives each document's number
    of word-code updates. ``start_values``, a (n_docs, 2) array, receives
    each document's objective (minus ``theta_linear`` . theta) and loss part
    at the start codes. ``active`` (warm start only), a boolean array of
    n_docs, leaves the documents where it is False as they are: no sweep,
    their means and objective computed at their current codes.
    """
    means = np.zeros(X.nnz, dtype=np.float64)
    args = dict(lam=float(lam), gamma=float(gamma), rho=float(rho),
                theta_penalty=PENALTIES[theta_penalty], code_penalty=PENALTIES[code_penalty],
                max_iter=int(max_iter), tol=float(tol))
    if theta_linear is not None:
        theta_linear = np.ascontiguousarray(theta_linear, dtype=np.float64)
    warm = codes is not None and start_value is None
    if start_value is None or (isinstance(start_value, str) and start_value == "auto"):
        start_value = np.nan
    else:
        start_value = float(start_value)
    if active is not None:
        if not warm:
            raise ValueError("active needs a warm start (codes given and start_value None)")
        active = np.asarray(active)
        if active.shape != (X.shape[0],) or active.dtype != bool:
            raise ValueError(f"active must be a boolean array of shape ({X.shape[0]},)")
    if isinstance(loss, CompiledLoss):
        objective, recon, n_iter = code_documents(
            loss, X.indptr, X.indices, X.data, beta, codes, theta, means, theta_linear,
            args["lam"], args["gamma"], args["rho"], args["theta_penalty"],
            args["code_penalty"], args["max_iter"], args["tol"], int(newton_steps), n_jobs,
            start_value, warm, updates, start_values,
            None if active is None else np.ascontiguousarray(active, dtype=np.uint8))
    else:
        if updates is not None:
            raise ValueError("counting updates needs a compiled loss")
        if not warm:
            fresh, start_theta = initial_codes(X, theta.shape[1], 1.0)
            if np.isnan(start_value):
                values = common_start_values(loss, X, beta, theta_linear, args["lam"],
                                             args["rho"], args["theta_penalty"],
                                             args["code_penalty"])
                fresh *= np.repeat(values, np.diff(X.indptr))[:, None]
                start_theta *= values[:, None]
            else:
                fresh *= start_value
                start_theta *= start_value
            if codes is None:
                codes = fresh
            else:
                codes[:] = fresh
            theta[:] = start_theta
        objective, recon, n_iter = code_documents_numpy(
            loss, X, beta, codes, theta, means, theta_linear, args["lam"], args["gamma"],
            args["rho"], args["theta_penalty"], args["code_penalty"], args["max_iter"],
            args["tol"], int(newton_steps), start_values, active)
    return objective, recon, n_iter, means
