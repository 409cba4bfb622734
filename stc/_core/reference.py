"""The reference implementation of the compiled kernels, in numpy.

Every compiled entry point that the package calls (`stc._core._coding`,
`_dense`, `_sparse_ops`, `_simplex`, `stc._learning.supervised._qp`) has its reference
here, under the same name where one function answers for one kernel; tests
check that the two agree (tests/test_reference.py lists them), so a change
to a kernel is checked against code written for clarity, not speed.

The coding sweep (`code_documents`, `code_new_documents` and their helpers)
is also the path for pure-Python losses: it mirrors the compiled kernel's
coding, vectorised over documents: same updates in the same order per word
(words are independent given theta, so sweeping topic by topic over all
words of all documents at once gives the same result as the compiled
kernel's per-document loop), same per-document stopping rule, same
constants (`stc._core._constants`). It calls the loss's vectorised methods
once per topic per sweep. ``params`` is the dict of
`stc._learning.coding.CodingProblem.params` (the kernel's `CodingParams`).

The dictionary kernels' references take the word codes as a dense (nnz, K)
array and write nothing in place: they return what the kernel writes.
"""
import numpy as np

from stc._core._constants import (BLOCK_NEWTON_RTOL, FAILURE_HESSIAN, FAILURE_LOSS,
                                   FAILURE_SOLVER, MEANS_DRIFT_RTOL,
                                   OVERSHOOT_NUDGE, PENALTY_L1, PENALTY_L2,
                                   START_VALUE_MAX_ITER, START_VALUE_RTOL)


class PluginFailure(Exception):
    """The loss plugin returned NaN from finite arguments (the kernel's `note_failure`).

    ``index`` is the position of the entry in the arrays of the function that
    raised; each caller maps it to its own arrays on the way up, and
    `code_documents` turns it into the failure report the kernel returns.
    """

    def __init__(self, kind, index, y, mean, b, mean_rest, lin):
        super().__init__(kind)
        self.kind, self.index = kind, int(index)
        self.values = dict(y=float(y), mean=float(mean), b=float(b), mean_rest=float(mean_rest),
                           lin=float(lin))

    def within(self, mask):
        """Re-index from the entries selected by boolean ``mask`` to all entries."""
        self.index = int(np.flatnonzero(mask)[self.index])
        return self


def check_plugin(kind, bad, y, mean, b, mean_rest, lin):
    """Raise `PluginFailure` at the first ``bad`` entry whose arguments are all finite."""
    if not np.any(bad):
        return
    finite = (np.isfinite(y) & np.isfinite(mean) & np.isfinite(b) & np.isfinite(mean_rest)
              & np.isfinite(lin))
    hits = np.flatnonzero(bad & finite)
    if hits.size:
        i = hits[0]
        pick = [np.broadcast_to(a, np.shape(bad))[i] for a in (y, mean, b, mean_rest, lin)]
        raise PluginFailure(kind, i, *pick)


def theta_update(mean_code, linear, n_words, lam, gamma, penalty):
    """Vectorised `theta_update`: eq. (3) (l1) or footnote 3 (l2), plus a linear term."""
    n_words = np.asarray(n_words, dtype=np.float64)
    if penalty == PENALTY_L1:
        t = mean_code + (linear - lam) / (2.0 * gamma * n_words)
    else:
        t = (2.0 * gamma * n_words * mean_code + linear) / (2.0 * lam + 2.0 * gamma * n_words)
    return np.where(t > 0.0, t, 0.0)  # NaN (codes that ran off) gives 0, as in the kernel


def document_objective(loss, X, doc_of_entry, means, codes, theta, linear, params):
    """Objective (2) of every document (minus linear . theta), and its loss part."""
    lam, gamma, rho = params["lam"], params["gamma"], params["rho"]
    theta_penalty, code_penalty = params["theta_penalty"], params["code_penalty"]
    n_docs = X.shape[0]
    recon = np.bincount(doc_of_entry, weights=loss.loss(X.data, means), minlength=n_docs)
    coupling = ((codes - theta[doc_of_entry]) ** 2).sum(axis=1)
    code_pen = codes.sum(axis=1) if code_penalty == PENALTY_L1 else (codes ** 2).sum(axis=1)
    per_entry = gamma * coupling + rho * code_pen
    doc_pen = theta.sum(axis=1) if theta_penalty == PENALTY_L1 else (theta ** 2).sum(axis=1)
    total = recon + np.bincount(doc_of_entry, weights=per_entry, minlength=n_docs) + lam * doc_pen
    if linear is not None:
        total -= (linear * theta).sum(axis=1)
    return total, recon


def solved_codes(loss, x, shape):
    """A loss's ``solve_coordinate`` answer, checked: one code >= 0 (or NaN, a failure) each.

    A Python loss may override the solver; a wrong shape or a negative code
    would otherwise break the coding silently (codes are minimisers over x >= 0).
    """
    name = getattr(loss, "name", type(loss).__name__)
    x = np.asarray(x, dtype=np.float64)
    if x.shape != shape:
        raise ValueError(f"the {name} loss's solve_coordinate returned an array of shape "
                         f"{x.shape} for {shape[0]} problems; it must return one code each")
    if np.any(x < 0):
        raise ValueError(f"the {name} loss's solve_coordinate returned a negative code "
                         f"({x.min():.17g}); it must minimise over x >= 0")
    return x


def solve_topic_words(loss, y, b, rests, codes_k, t_entry, quad, rho_lin, gamma, docs, n_docs):
    """Vectorised `solve_topic_words`: word codes of one topic at theta_k = t.

    Raises `PluginFailure` for a NaN code or curvature from finite arguments.
    """
    lin = rho_lin - 2.0 * gamma * t_entry
    finite = np.isfinite(y) & np.isfinite(b) & np.isfinite(rests) & np.isfinite(lin)
    if finite.all():
        x = solved_codes(loss, loss.solve_coordinate(y, b, rests, quad, lin, codes_k), y.shape)
    else:
        # Codes that ran off to infinity (an unbounded problem, e.g. MedSTC's shifted
        # mean with the l1 penalty on theta) give non-finite arguments: not the
        # loss's failure (`note_failure`). The built-in closed forms' answer there
        # (`legacy_clamp`): +inf for lin = -inf, else 0.
        x = np.where((lin == -np.inf) & np.isfinite(rests), np.inf, 0.0)
        x[finite] = solved_codes(loss, loss.solve_coordinate(
            y[finite], b[finite], rests[finite], quad, lin[finite], codes_k[finite]),
            (int(np.count_nonzero(finite)),))
    check_plugin(FAILURE_SOLVER, np.isnan(x), y, rests, b, rests, lin)
    with np.errstate(invalid="ignore"):  # inf - inf where codes ran off (NaN, as the kernel)
        slope = np.bincount(docs, weights=2.0 * gamma * (t_entry - x), minlength=n_docs)
    curv_entry = np.full_like(x, 2.0 * gamma)
    pos = x > 0
    if np.any(pos):
        hess = loss.hessian(y[pos], rests[pos] + b[pos] * x[pos])
        at = rests[pos] + b[pos] * x[pos]
        lower, upper = loss.mean_domain
        try:
            check_plugin(FAILURE_HESSIAN, np.isnan(hess) & (at > lower) & (at < upper), y[pos],
                         at, b[pos], rests[pos], np.broadcast_to(lin, x.shape)[pos])
        except PluginFailure as failure:
            raise failure.within(pos)
        curv_entry[pos] = 2.0 * gamma * (1.0 - 2.0 * gamma / (b[pos] ** 2 * hess + 2.0 * quad))
    return x, slope, np.bincount(docs, weights=curv_entry, minlength=n_docs)


def update_topic_block(loss, y, b, docs, codes_k, means, theta_k, linear_k, quad, rho_lin,
                       params):
    """Vectorised `update_topic_block` over the documents whose entries are given.

    ``docs`` are compact document ids (0..n-1) of the entries; ``theta_k`` and
    ``linear_k`` are per compact document. Returns (codes_k, means, theta_k,
    passes over each document's words).
    """
    lam, gamma = params["lam"], params["gamma"]
    theta_penalty, newton_steps = params["theta_penalty"], params["newton_steps"]
    n = theta_k.shape[0]
    passes = np.zeros(n, dtype=np.int64)
    rests = np.maximum(means - b * codes_k, 0.0)
    t = theta_k.copy()
    x = codes_k.copy()
    iterating = np.ones(n, dtype=bool)
    converged = np.zeros(n, dtype=bool)
    low, high = np.zeros(n), np.full(n, np.inf)
    safe_t, start_slope = t.copy(), np.zeros(n)
    slope = np.zeros(n)
    for step in range(newton_steps + 1):
        entries = iterating[docs]
        passes += iterating
        try:
            x_new, s_new, c_new = solve_topic_words(
                loss, y[entries], b[entries], rests[entries], x[entries], t[docs[entries]],
                quad, rho_lin, gamma, docs[entries], n)
        except PluginFailure as failure:
            raise failure.within(entries)
        x[entries] = x_new
        if theta_penalty == PENALTY_L1:
            pen_slope, pen_curv = lam, 0.0
        else:
            pen_slope, pen_curv = 2.0 * lam * t, 2.0 * lam
        s_full = s_new + (pen_slope - linear_k)  # the kernel's rounding
        curv = c_new + pen_curv
        slope = np.where(iterating, s_full, slope)
        with np.errstate(invalid="ignore"):  # inf * 0 where codes ran off
            tiny = iterating & (np.abs(slope) <= 1e-10 * t * curv)
            # Close enough and not past the block minimiser (see BLOCK_NEWTON_RTOL).
            close = iterating & (np.abs(slope) <= BLOCK_NEWTON_RTOL * t * curv)
        if step > 0:
            close &= (slope > 0.0) == (start_slope > 0.0)
        tiny |= close
        converged |= tiny
        iterating &= ~tiny
        if step == newton_steps or not iterating.any():
            break
        if step == 0:
            start_slope = slope.copy()
        stop = iterating & ((slope == 0.0) | ((t == 0.0) & (slope > 0.0)))
        converged |= stop
        iterating &= ~stop
        same_side = iterating & ((slope > 0.0) == (start_slope > 0.0))
        safe_t = np.where(same_side, t, safe_t)
        high = np.where(iterating & (slope > 0.0), t, high)
        low = np.where(iterating & ~(slope > 0.0), t, low)
        t_new = theta_newton_step(t, slope, curv, start_slope if step > 0 else None, low, high)
        small = iterating & (np.abs(t_new - t) <= 1e-10 * t)
        converged |= small
        iterating &= ~small
        t = np.where(iterating, t_new, t)
        if not iterating.any():
            break
    if newton_steps > 0:
        back = ~converged & (t != safe_t) & ((slope > 0.0) != (start_slope > 0.0))
        if np.any(back):
            t = np.where(back, safe_t, t)
            entries = back[docs]
            passes += back
            try:
                x[entries] = solve_topic_words(
                    loss, y[entries], b[entries], rests[entries], x[entries], t[docs[entries]],
                    quad, rho_lin, gamma, docs[entries], n)[0]
            except PluginFailure as failure:
                raise failure.within(entries)
    return x, rests + b * x, t, passes


def theta_newton_step(t, slope, curv, start_slope, low, high):
    """The safeguarded Newton step of `update_topic_block` from theta_k = ``t``.

    ``start_slope`` is None on the first step; later, where the slope's sign
    differs from it (past the minimiser), the step aims a little short
    (OVERSHOOT_NUDGE). A step that leaves the bracket [low, high] bisects it
    (doubles low when high is infinite), one to 0 from above stops at 0.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        t_new = t - slope / curv
        if start_slope is not None:  # past the minimiser: aim a little short
            past = (slope > 0.0) != (start_slope > 0.0)
            t_new = np.where(past, t - (1.0 + OVERSHOOT_NUDGE) * slope / curv, t_new)
    to_zero = (t_new <= 0.0) & (low == 0.0) & (t > 0.0)
    outside = ~to_zero & ((t_new < low) | (t_new > high))
    bisect = np.where(np.isfinite(high), 0.5 * (low + high), 2.0 * low + 1.0)
    return np.where(to_zero, 0.0, np.where(outside, bisect, t_new))


def code_documents(loss, params, X, beta, codes, theta, means, theta_linear=None, active=None):
    """In-place coding of the CSR matrix X, warm-started; same contract as the kernel's.

    ``active`` (boolean per document, or None for all) leaves the documents
    where it is False uncoded, as the kernel's ``active`` does. Returns
    (objective, loss part, sweeps, passes, start objective and loss, failure):
    failure is None, or the kernel's report of a NaN from the loss plugin at
    finite arguments (coding stops at the first one).
    """
    try:
        return _code_documents(loss, params, X, beta, codes, theta, means, theta_linear, active)
    except PluginFailure as failure:
        return failure.report


def _failure_report(failure, X, entries, params):
    """`PluginFailure` raised for the entries ``entries`` of X, as the kernel's failure dict."""
    entry = int(entries[failure.index])
    document = int(np.searchsorted(X.indptr, entry, side="right") - 1)
    quad = params["gamma"] + (params["rho"] if params["code_penalty"] == PENALTY_L2 else 0.0)
    failure.report = (None,) * 5 + (dict(kind=failure.kind, document=document, entry=entry,
                                         quad=quad, n_documents=1, **failure.values),)
    return failure


def check_losses(loss, X, means, entries):
    """`PluginFailure` for the first of ``entries`` whose loss is NaN at a mean inside the domain."""
    lower, upper = loss.mean_domain
    y, m = X.data[entries], means[entries]
    with np.errstate(all="ignore"):
        values = np.asarray(loss.loss(y, m), dtype=np.float64)
    inside = (m > lower) & (m < upper)
    check_plugin(FAILURE_LOSS, np.isnan(values) & inside, y, m, 0.0, m, 0.0)


def _code_documents(loss, params, X, beta, codes, theta, means, theta_linear, active):
    lam, gamma, rho = params["lam"], params["gamma"], params["rho"]
    theta_penalty, code_penalty = params["theta_penalty"], params["code_penalty"]
    max_iter, tol = params["max_iter"], params["tol"]
    n_docs, n_topics = theta.shape
    lengths = np.diff(X.indptr)
    doc_of_entry = np.repeat(np.arange(n_docs), lengths)
    quad = gamma + (rho if code_penalty == PENALTY_L2 else 0.0)
    rho_lin = rho if code_penalty == PENALTY_L1 else 0.0
    means[:] = (codes * beta.T[X.indices]).sum(axis=1) if X.nnz else 0.0
    theta[lengths == 0] = 0.0
    objective, recon = document_objective(loss, X, doc_of_entry, means, codes, theta,
                                          theta_linear, params)
    if np.any(np.isnan(objective)):
        all_entries = np.arange(X.nnz)
        try:
            check_losses(loss, X, means, all_entries)
        except PluginFailure as failure:
            raise _failure_report(failure, X, all_entries, params)
    start = np.column_stack([objective, recon])
    n_iter = np.zeros(n_docs, dtype=np.intc)
    passes = np.zeros(n_docs, dtype=np.int64)
    active_docs = lengths > 0
    if active is not None:
        active_docs &= active
    linear = np.zeros_like(theta) if theta_linear is None else theta_linear
    for _ in range(max_iter):
        if not active_docs.any():
            break
        active = np.flatnonzero(active_docs)
        entries = np.flatnonzero(active_docs[doc_of_entry])
        compact = np.searchsorted(active, doc_of_entry[entries])
        words = X.indices[entries]
        y = X.data[entries]
        entry_means = means[entries]
        for k in range(n_topics):
            b = beta[k, words]
            try:
                codes_k, entry_means, theta_k, block_passes = update_topic_block(
                    loss, y, b, compact, codes[entries, k], entry_means, theta[active, k],
                    linear[active, k], quad, rho_lin, params)
            except PluginFailure as failure:
                raise _failure_report(failure, X, entries, params)
            passes[active] += block_passes
            codes[entries, k] = codes_k
            theta[active, k] = theta_k
        means[entries] = entry_means
        sums = np.zeros((active.size, n_topics))
        np.add.at(sums, compact, codes[entries])
        theta[active] = theta_update(sums / lengths[active, None], linear[active],
                                          lengths[active, None], lam, gamma, theta_penalty)
        n_iter[active] += 1
        new_objective, new_recon = document_objective(loss, X, doc_of_entry, means, codes,
                                                      theta, theta_linear, params)
        if np.any(np.isnan(new_objective[active])):
            try:
                check_losses(loss, X, means, entries)
            except PluginFailure as failure:
                raise _failure_report(failure, X, entries, params)
        converged = objective - new_objective <= tol * np.abs(objective)
        objective[active] = new_objective[active]
        recon[active] = new_recon[active]
        active_docs[active[converged[active]]] = False
    # The kernel's `refresh_means`, where the running means drifted (codes that grew
    # huge and came back): exact means, and the objective recomputed from them.
    exact = (codes * beta.T[X.indices]).sum(axis=1) if X.nnz else means
    drifted = ~(np.abs(exact - means) <= MEANS_DRIFT_RTOL * exact)
    if np.any(drifted):
        means[drifted] = exact[drifted]
        docs = np.unique(doc_of_entry[drifted])
        objective[docs], recon[docs] = (a[docs] for a in document_objective(
            loss, X, doc_of_entry, means, codes, theta, theta_linear, params))
    return objective, recon, n_iter, passes, start, None


def code_new_documents(loss, params, X, beta, codes, theta, means):
    """Code every document from its common start value; same contract as the kernel's.

    ``codes`` is None (word codes not kept) or an (nnz, n_topics) array that
    receives them.
    """
    values = common_start_value(loss, X, beta, None, params)
    start_codes = np.repeat(values, np.diff(X.indptr))[:, None] * np.ones((1, theta.shape[1]))
    if codes is None:
        codes = start_codes
    else:
        codes[:] = start_codes
    theta[:] = values[:, None]
    return code_documents(loss, params, X, beta, codes, theta, means)


def common_start_value(loss, X, beta, theta_linear, params):
    """Vectorised `common_start_value`: per document, the best single value for all its codes.

    Same safeguarded Newton iteration as the compiled kernel, for every
    document at once (a document stops when its own step falls under
    START_VALUE_RTOL relative). Documents without words get 1.
    """
    lam, rho = params["lam"], params["rho"]
    theta_penalty, code_penalty = params["theta_penalty"], params["code_penalty"]
    n_docs, n_topics = X.shape[0], beta.shape[0]
    lengths = np.diff(X.indptr)
    doc = np.repeat(np.arange(n_docs), lengths)
    column_sums = beta.sum(axis=0)[X.indices] if X.nnz else np.zeros(0)
    shift = np.zeros(n_docs) if theta_linear is None else theta_linear.sum(axis=1)
    largest = np.zeros(n_docs)
    np.maximum.at(largest, doc, column_sums)
    value = np.ones(n_docs)
    low, high = np.zeros(n_docs), np.full(n_docs, np.inf)
    upper = loss.mean_domain[1]
    active = largest > 0
    if np.isfinite(upper):
        with np.errstate(divide="ignore"):
            high = np.where(active, 0.5 * upper / largest, np.inf)
        value = np.where(active, 0.5 * high, 1.0)
    n_codes = lengths * float(n_topics)
    for _ in range(START_VALUE_MAX_ITER):
        if not active.any():
            break
        c_entry = value[doc]
        means = c_entry * column_sums
        g = np.bincount(doc, column_sums * loss.gradient(X.data, means), minlength=n_docs) - shift
        h = np.bincount(doc, column_sums ** 2 * loss.hessian(X.data, means), minlength=n_docs)
        if theta_penalty == PENALTY_L1:
            g = g + lam * n_topics
        else:
            g = g + 2.0 * lam * n_topics * value
            h = h + 2.0 * lam * n_topics
        if code_penalty == PENALTY_L1:
            g = g + rho * n_codes
        else:
            g = g + 2.0 * rho * n_codes * value
            h = h + 2.0 * rho * n_codes
        # NaN: a derivative the loss does not provide; the kernel falls back as here
        nan_slope = active & np.isnan(g)
        if np.any(nan_slope):
            value = np.where(nan_slope, np.where(np.isfinite(high), 0.5 * high, 1.0), value)
            active &= ~nan_slope
        high = np.where(active & (g > 0), value, high)
        low = np.where(active & ~(g > 0), value, low)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(h > 0, value - g / h, -1.0)
        outside = ~((step > low) & (step < high))
        step = np.where(outside, np.where(np.isfinite(high), 0.5 * (low + high), 2.0 * value),
                        step)
        done = active & (np.abs(step - value) <= START_VALUE_RTOL * value)
        value = np.where(active, step, value)
        active &= ~done
    return value


# ---------------------------------------------------------------------------
# MedSTC's segments (`_coding.segment_*`, `move_along_segments`): the codes
# old + t (new - old) of listed documents; ``old`` and ``new`` are
# (dense word codes (nnz, K), theta (n_docs, K)).
# ---------------------------------------------------------------------------
def _segment_entries(X, rows):
    """Entries of documents ``rows`` (increasing) of CSR X, and each one's position in rows."""
    selected = np.zeros(X.shape[0], dtype=bool)
    selected[rows] = True
    entries = np.flatnonzero(np.repeat(selected, np.diff(X.indptr)))
    position = np.searchsorted(rows, np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))[entries])
    return entries, position


def segment_objectives(loss, params, X, beta, old, new, rows, steps):
    """Objective (2) and its loss part of documents ``rows`` at old + steps * (new - old)."""
    rows, steps = np.asarray(rows), np.asarray(steps, dtype=np.float64)
    (old_codes, old_theta), (new_codes, new_theta) = old, new
    entries, position = _segment_entries(X, rows)
    sub = X[rows]
    step_of_entry = steps[position][:, None]
    trial_codes = old_codes[entries] + step_of_entry * (new_codes[entries] - old_codes[entries])
    trial_theta = old_theta[rows] + steps[:, None] * (new_theta[rows] - old_theta[rows])
    means = np.sum(trial_codes * beta.T[sub.indices], axis=1)
    objective, loss_part = document_objective(loss, sub, position, means, trial_codes,
                                              trial_theta, None, params)
    # a document without words: its theta is not part of (2) (coding leaves it at 0)
    empty = np.diff(sub.indptr) == 0
    objective[empty], loss_part[empty] = 0.0, 0.0
    return objective, loss_part


def segment_curvatures(params, X, old, new, rows):
    """Second-order coefficient in t of objective (2)'s penalties along each segment."""
    (old_codes, old_theta), (new_codes, new_theta) = old, new
    entries, position = _segment_entries(X, rows)
    d_theta = new_theta[rows] - old_theta[rows]
    d_codes = new_codes[entries] - old_codes[entries]
    n = len(rows)
    coupling = np.bincount(position, ((d_codes - d_theta[position]) ** 2).sum(axis=1), n)
    curvature = params["gamma"] * coupling
    if params["code_penalty"] == PENALTY_L2:
        curvature += params["rho"] * np.bincount(position, (d_codes ** 2).sum(axis=1), n)
    if params["theta_penalty"] == PENALTY_L2:
        curvature += params["lam"] * (d_theta ** 2).sum(axis=1)
    return curvature


def segment_losses(loss, X, old_means, new_means, rows, steps):
    """Loss part along each segment from the means at its ends, and its rounding scale."""
    entries, position = _segment_entries(X, rows)
    t = np.asarray(steps)[position]
    mean = old_means[entries] + t * (new_means[entries] - old_means[entries])
    y = X.data[entries]
    with np.errstate(divide="ignore", invalid="ignore"):  # as C: 0 * inf is NaN, quietly
        value = loss.loss(y, mean)
        size = np.abs(value) + np.abs(mean * loss.gradient(y, mean))
    return (np.bincount(position, value, len(rows)), np.bincount(position, size, len(rows)))


def move_along_segments(X, beta, old, current, rows, steps):
    """(codes, theta, means) with documents ``rows`` moved to old + step * (current - old)."""
    (old_codes, old_theta), (codes, theta) = old, current
    codes, theta = codes.copy(), theta.copy()
    entries, position = _segment_entries(X, rows)
    t = np.asarray(steps)
    at_old = (t == 0.0)  # step 0 restores the old codes exactly
    moved = old_codes[entries] + t[position, None] * (codes[entries] - old_codes[entries])
    codes[entries] = np.where(at_old[position, None], old_codes[entries], moved)
    moved = old_theta[rows] + t[:, None] * (theta[rows] - old_theta[rows])
    theta[rows] = np.where(at_old[:, None], old_theta[rows], moved)
    means = np.sum(codes[entries] * beta.T[X.indices[entries]], axis=1)
    return codes, theta, means


# ---------------------------------------------------------------------------
# Dense products (`_dense`), summed by numpy (BLAS) in its own order.
# ---------------------------------------------------------------------------
def row_products(A, B):
    """``A @ B.T``."""
    return np.asarray(A, dtype=np.float64) @ np.asarray(B, dtype=np.float64).T


def matvec(A, x):
    """``A @ x``."""
    return np.asarray(A, dtype=np.float64) @ np.asarray(x, dtype=np.float64)


def vecmat(x, A):
    """``x @ A``."""
    return np.asarray(x, dtype=np.float64) @ np.asarray(A, dtype=np.float64)


def dot(a, b):
    """``a . b`` of the flattened arrays."""
    return float(np.ravel(a).astype(np.float64) @ np.ravel(b).astype(np.float64))


def loss_augmented_argmax(X, W, y_index, cost, products=row_products):
    """The cutting-plane oracle as numpy writes it: scores + loss matrix, argmax, ties to the
    truth. ``products(X, W)`` forms the scores (the compiled `row_products` gives the same
    bits as the fused kernel)."""
    rows = np.arange(X.shape[0])
    scores = products(X, W)
    delta = np.full(scores.shape, float(cost))
    delta[rows, y_index] = 0.0
    scores += delta
    ybar = np.argmax(scores, axis=1)
    hinge = scores[rows, ybar] - scores[rows, y_index]
    tied = hinge <= 0.0
    ybar[tied] = y_index[tied]
    hinge[tied] = 0.0
    return ybar, hinge


# ---------------------------------------------------------------------------
# Dictionary statistics (`_sparse_ops`); ``col_ptr`` and ``col_entries`` list
# the entries of X term by term (a CSC view), ``codes`` is dense (nnz, K).
# ---------------------------------------------------------------------------
def word_means(indices, codes, beta_t):
    """mean_j = codes[j] . beta[:, indices[j]]."""
    return np.sum(codes * beta_t[indices], axis=1)


def _term_sums(col_ptr, col_entries, values):
    """(N, K): per term, the sum of ``values`` (one row per entry) over its entries."""
    terms = np.repeat(np.arange(len(col_ptr) - 1), np.diff(col_ptr))
    out = np.zeros((len(col_ptr) - 1, values.shape[1]))
    np.add.at(out, terms, values[col_entries])
    return out


def word_code_sums(col_ptr, col_entries, codes, weights=None, with_plain=False):
    """out[n, k] = sum over term n's entries j of weights[j] codes[j, k] (weights None: 1)."""
    weighted = codes if weights is None or len(weights) == 0 else codes * weights[:, None]
    out = _term_sums(col_ptr, col_entries, weighted)
    return (_term_sums(col_ptr, col_entries, codes), out) if with_plain else out


def _mm_ratio_sums(loss, col_ptr, col_entries, y, codes, weights_of_entry):
    """(F, (N, K) sums of (y_j / mean_j) codes[j]) with mean_j = codes[j] . weights_of_entry[j]."""
    means = np.sum(codes * weights_of_entry, axis=1)
    ratio = np.divide(y, means, out=np.zeros_like(means), where=means > 0.0)
    value = float(np.sum(loss.loss(y, means))) if len(y) else 0.0
    return value, _term_sums(col_ptr, col_entries, codes * ratio[:, None])


def _term_of_entry(col_ptr, col_entries):
    term = np.empty(len(col_entries), dtype=np.intp)
    term[col_entries] = np.repeat(np.arange(len(col_ptr) - 1), np.diff(col_ptr))
    return term


def mm_statistics(loss, col_ptr, col_entries, data, codes, beta_t):
    """(F, sums): F = sum_j loss(y_j, mean_j), sums[n, k] = sum (y_j / mean_j) codes[j, k]."""
    term = _term_of_entry(col_ptr, col_entries)
    return _mm_ratio_sums(loss, col_ptr, col_entries, data, codes, beta_t[term])


def mm_step_statistics(loss, col_ptr, col_entries, col_data, codes, beta, columns=None):
    """(F, a): a[k, n] = beta[k, columns[n]] * sums[n, k] (`mm_statistics`' sums)."""
    columns = np.arange(len(col_ptr) - 1) if columns is None else np.asarray(columns)
    term = _term_of_entry(col_ptr, col_entries)
    y = np.empty(len(col_entries))
    y[col_entries] = col_data
    value, sums = _mm_ratio_sums(loss, col_ptr, col_entries, y, codes, beta[:, columns].T[term])
    return value, beta[:, columns] * sums.T


def mm_first_statistics(col_ptr, col_entries, codes, ratios, beta, columns=None):
    """(a, c): c[k, n] = sum of term n's codes, a[k, n] = beta[k, columns[n]] sum ratios codes."""
    columns = np.arange(len(col_ptr) - 1) if columns is None else np.asarray(columns)
    plain, weighted = word_code_sums(col_ptr, col_entries, codes, ratios, with_plain=True)
    return beta[:, columns] * weighted.T, plain.T


# ---------------------------------------------------------------------------
# The simplex (`_simplex`): projection, multipliers and the MM minimiser.
# ---------------------------------------------------------------------------
def project_onto_simplex(v, radius=1.0):
    """Sort-based projection onto {x >= 0, sum x = radius} (Duchi et al. 2008).

    With u sorted in decreasing order, the support size is the largest r with
    u_r - (sum_{i<=r} u_i - radius) / r > 0 and the threshold is
    (sum_{i<=r} u_i - radius) / r.
    """
    v = np.asarray(v, dtype=np.float64)
    u = np.sort(v)[::-1]
    partial = np.cumsum(u) - radius
    r = np.arange(1, v.size + 1)
    support = np.flatnonzero(u - partial / r > 0)[-1]
    threshold = partial[support] / (support + 1)
    return np.maximum(v - threshold, 0.0)


def project_rows_onto_simplex(V, radius=1.0):
    """`project_onto_simplex` of every row."""
    return np.array([project_onto_simplex(row, radius) for row in np.atleast_2d(V)])


def _multiplier_root(a, d, total):
    """u in (0, total] with sum a / (d + u) = 1 (a > 0, d >= 0 with min 0), by bisection."""
    low, high = 0.0, total
    for _ in range(2000):
        middle = 0.5 * (low + high)
        if not low < middle < high:
            break
        if np.sum(a / (d + middle)) > 1.0:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)


def simplex_multipliers(a_rows, c_rows):
    """Per row, nu with sum a / (c + nu) = 1 over the entries with a > 0 (NaN if a = 0)."""
    out = np.full(len(a_rows), np.nan)
    for r, (a, c) in enumerate(zip(np.atleast_2d(a_rows), np.atleast_2d(c_rows))):
        positive = a > 0.0
        if positive.any():
            lowest = c[positive].min()
            out[r] = _multiplier_root(a[positive], c[positive] - lowest, a[positive].sum()) \
                - lowest
    return out


def minimiser_row(a, c, beta_row):
    """(row, nu): the minimiser of sum_n (c_n x_n - a_n log x_n) on the simplex.

    x_n = a_n / (c_n + nu) with nu the multiplier's root; when that root is
    below -c_spare (c_spare the smallest c where a = 0), nu = -c_spare and the
    mass left goes in equal shares to the entries with a = 0 and c = c_spare.
    A row whose a is all zero is ``beta_row`` (nu NaN).
    """
    positive = a > 0.0
    if not positive.any():
        return beta_row.copy(), np.nan
    lowest = c[positive].min()
    spare = c[~positive].min() if (~positive).any() else np.inf
    u = _multiplier_root(a[positive], c[positive] - lowest, a[positive].sum())
    out = np.zeros_like(a)
    if u < lowest - spare:
        out[positive] = a[positive] / (c[positive] - spare)
        at_spare = ~positive & (c == spare)
        out[at_spare] = max(1.0 - out.sum(), 0.0) / at_spare.sum()
        return out / out.sum(), -spare
    out[positive] = a[positive] / ((c[positive] - lowest) + u)
    return out / out.sum(), u - lowest


def mm_exact_rows(beta, responsibilities, code_sums):
    """(rows, multipliers): `minimiser_row` of every topic."""
    rows = [minimiser_row(a, c, b) for a, c, b in zip(responsibilities, code_sums, beta)]
    return np.array([r[0] for r in rows]), np.array([r[1] for r in rows])


def mm_update_rows(beta, weighted_sums, code_sums):
    """`mm_exact_rows` with a = beta * weighted_sums.T."""
    return mm_exact_rows(beta, beta * weighted_sums.T, code_sums)


def online_block_step(beta, responsibilities, code_sums, terms, plain, batch_responsibilities,
                      rho, n_docs):
    """(beta, A, C, nu) after one MM step of online learning on a batch's ``terms``.

    The compiled step's three parts at once (`_simplex.online_block_start`,
    `online_block_solve`, `online_block_finish`): A and C decay by 1 - rho,
    the batch enters on its terms (C += rho plain / n_docs, A = decayed A +
    rho / n_docs batch_responsibilities), and each topic minimises the
    surrogate over its batch terms and one common scale r of the others.
    """
    A, C = (1.0 - rho) * responsibilities, (1.0 - rho) * code_sums
    C[:, terms] += rho * (plain / n_docs)
    A[:, terms] = batch_responsibilities * (rho / n_docs) + A[:, terms]
    off = np.ones(beta.shape[1], dtype=bool)
    off[terms] = False
    beta = beta.copy()
    nu = np.empty(beta.shape[0])
    for k in range(beta.shape[0]):
        mass = beta[k, off].sum()
        other_c = (C[k, off] @ beta[k, off]) / mass if mass > 0 else np.inf
        a = np.append(A[k, terms], A[k, off].sum() if mass > 0 else 0.0)
        row, nu[k] = minimiser_row(a, np.append(C[k, terms], other_c),
                                   np.append(beta[k, terms], mass))
        beta[k, terms] = row[:-1]
        if mass > 0:
            beta[k, off] *= row[-1] / mass
    return beta, A, C, nu


# ---------------------------------------------------------------------------
# The SVM's restricted dual QP (`stc._learning.supervised._qp`).
# ---------------------------------------------------------------------------
def face_direction(H, g, support):
    """`_qp.face_direction` with numpy's eigh: the flat part of the face's gradient, or else
    its Newton step, scaled to max |d| = 1 (None: no ascent direction)."""
    n = len(support)
    P = np.eye(n) - 1.0 / n
    reduced = P @ g[support]
    values, vectors = np.linalg.eigh(P @ H[np.ix_(support, support)] @ P)
    coef = vectors.T @ reduced
    flat = values <= 100.0 * n * np.finfo(np.float64).eps * max(values.max(), 0.0)
    d = vectors[:, flat] @ coef[flat]
    d -= d.mean()
    if not np.linalg.norm(d) > 1e-8 * np.linalg.norm(reduced):
        d = vectors[:, ~flat] @ (coef[~flat] / values[~flat])
        d -= d.mean()
    size = np.abs(d).max()
    if not (np.isfinite(size) and size > 0.0):
        return None
    d = d / size
    d -= d.mean()
    return d if g[support] @ d > 0.0 else None


def face_step(H, g, alpha):
    """New alpha after the exact line search along `face_direction`, or None (no step)."""
    support = np.flatnonzero(alpha > 0.0)
    if support.size < 2:
        return None
    d = face_direction(H, g, support)
    if d is None:
        return None
    slope, curv = g[support] @ d, d @ H[np.ix_(support, support)] @ d
    t = slope / curv if curv > 0.0 else np.inf
    falling = d < 0.0
    hit = None
    if falling.any():
        ratios = alpha[support][falling] / -d[falling]
        if ratios.min() <= t:
            t, hit = ratios.min(), support[falling][np.argmin(ratios)]
    if not (np.isfinite(t) and t > 0.0):
        return None
    alpha = alpha.copy()
    alpha[support] = np.maximum(alpha[support] + t * d, 0.0)
    if hit is not None:
        alpha[hit] = 0.0
    return alpha


def solve_simplex_qp(H, c, C):
    """The maximiser of c.a - 1/2 a'Ha over {a >= 0, sum(a) = C}, by trying every support.

    For small problems: on a support S the KKT conditions are linear
    (H_SS a + mu 1 = c_S, sum a = C); the answer is the best support whose
    solution is feasible (a >= 0, c - H a <= mu off S).
    """
    m = len(c)
    best, best_value = None, -np.inf
    for mask in range(1, 2 ** m):
        S = np.flatnonzero([(mask >> i) & 1 for i in range(m)])
        K = np.block([[H[np.ix_(S, S)], np.ones((S.size, 1))], [np.ones((1, S.size)), 0.0]])
        solution = np.linalg.lstsq(K, np.append(c[S], C), rcond=None)[0]
        alpha = np.zeros(m)
        alpha[S] = solution[:-1]
        g = c - H @ alpha
        scale = 1e-9 * (1.0 + np.abs(c).max() + np.abs(H).max() * C)
        if alpha.min() < -scale * C or np.any(g > solution[-1] + scale) \
                or abs(alpha.sum() - C) > scale * C:
            continue
        value = c @ alpha - 0.5 * alpha @ H @ alpha
        if value > best_value:
            best, best_value = alpha, value
    return best, best_value
