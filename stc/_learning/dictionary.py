"""Dictionary learning (paper Sec. 2.3): minimise the loss over beta, topics on the simplex.

The starting topics of every learner come from here too (`initial_dictionary`;
its random draws and its sums apart, for a corpus spread over machines).

With the word codes s fixed, the objective in beta is

    F(beta) = sum_j l(y_j, s_j . beta[:, n_j])      (j over X's non-zeros)

with every topic beta_k in the probability simplex. Two solvers, both with a
step rule under which F never increases:

* ``"mm"`` (for losses that declare ``dictionary_method = "mm"``: the Poisson
  deviance): majorisation-minimisation (`mm_dictionary_steps`). Jensen's
  inequality on -log(sum_k s_jk beta_kn) gives a separable surrogate whose
  minimiser on the simplex is beta_kn = a_kn / (c_kn + nu_k), with
  a_kn = beta_kn sum_{j: n_j = n} s_jk y_j / mean_j, c_kn = sum_{j: n_j = n} s_jk
  and nu_k the multiplier that makes row k sum to one (`simplex_multiplier`).
  The update is invariant to the scale of each term, so frequent and rare
  words converge alike (a plain projected gradient spends many iterations
  dominated by the most frequent words), and it never sets
  an observed word's mean to zero: the Poisson loss stays finite.
* ``"pg"`` (any other loss): projected gradient (`pg_dictionary_steps`) with the exact simplex
  projection (`project_rows_onto_simplex`, Condat's algorithm, rows in
  parallel) and a backtracking step that enforces the sufficient-decrease
  condition F(new) <= F(old) - ||new - old||^2 / (2 t); a step that takes a
  mean out of the loss's domain has F = inf and is shrunk.

Terms that never occur in the data get zero weight while the multiplier nu
is positive (it usually is). When the codes overshoot the data, the
exact minimiser of F puts weight on them, since that lowers every mean at no
cost; both solvers then do so (the MM step clamps nu at 0 and gives them the
spare mass, `mm_update_row`). Other zero weights stay zero under MM (a
multiplicative step) unless that clamp reaches them. At `transform`, terms
with zero weight in every topic are ignored. A topic whose word
codes are all zero ("collapsed") carries no information about beta_k; it is
left unchanged, so coding may use it again later.
"""
import functools
import os

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.extmath import randomized_svd

from stc._core._simplex import mm_exact_rows, project_rows_onto_simplex, simplex_multipliers
from stc._core._sparse_ops import (mm_first_statistics, mm_step_statistics, word_code_sums,
                                   word_means)
from stc._learning.coding import as_code_rows


# ---- initial topics

def check_topics_fit_in_memory(n_topics, n_features):
    """Refuse, at once, topics larger than this machine's memory (a ValueError naming n_topics).

    Without it a typo such as ``n_topics=10**9`` would draw topic after topic
    for minutes before running out of memory.
    """
    needed = 8.0 * n_topics * n_features  # one (n_topics, n_features) float64 array
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows): ask for the memory
        try:
            np.empty((n_topics, n_features))
            return
        except (MemoryError, ValueError):
            memory = 0
    if needed > memory:
        raise ValueError(f"n_topics={n_topics} is too large: the topics alone ({n_topics} x "
                         f"{n_features} terms in float64, {needed / 2 ** 30:.3g} GiB) exceed "
                         f"this machine's memory (check the data's number of terms too)")


def initial_dictionary(X, n_topics, random_state, docs_per_topic=5, corpus_share=0.2):
    """Distinct starting topics, seeded by ``random_state``.

    Topic k is a few random documents' word distribution mixed with a
    randomly perturbed corpus distribution (weight ``corpus_share``), so
    every observed term has positive weight in every topic (no infinite
    Poisson loss at the start) while topics differ. Starting from identical
    uniform topics, as in the paper, the topics stay nearly identical.
    """
    nonempty = np.flatnonzero(np.diff(X.indptr) > 0)
    # the draws check first that the topics fit in memory, before the (n_features,) sums
    draws = initial_dictionary_draws(nonempty, X.shape[1], n_topics, random_state,
                                     docs_per_topic)
    corpus = np.asarray(X.sum(axis=0)).ravel()
    sums = [np.asarray(X[docs].sum(axis=0)).ravel() for docs, _ in draws]
    return dictionary_from_draws(corpus, draws, sums, n_topics, corpus_share)


# init="auto" starts in-memory batch learning from NNDSVD from this many topics on, and
# from the document draws below it. Measured on a validation part of the 20 Newsgroups
# training split (docs/quality.md, "Initialisation"): NNDSVD fitted more accurate codes
# at K = 50 (with a higher held-out likelihood and more coherent topics) and K = 100; at
# K = 20 and 30 the draws were as accurate or more, with a higher likelihood.
NNDSVD_MIN_TOPICS = 50


def resolved_init(init, n_topics):
    """The start of learning: ``init``, with "auto" resolved by ``n_topics``.

    "auto" is NNDSVD from `NNDSVD_MIN_TOPICS` topics on, document draws
    below, for batch and online learning alike: online learning from draws
    left its topics blurred mixtures at K = 100 (documents coded with most
    topics), and from NNDSVD it fitted 20 Newsgroups' validation split better
    too (benchmarks/results_online_diagnosis.md).
    """
    if init == "auto":
        return "nndsvd" if n_topics >= NNDSVD_MIN_TOPICS else "random"
    return init


def starting_topics(X, n_topics, init, random_state):
    """The starting topics of CSR ``X`` by a resolved ``init`` ("random" or "nndsvd")."""
    start = nndsvd_dictionary if init == "nndsvd" else initial_dictionary
    return start(X, n_topics, random_state)


def nndsvd_dictionary(X, n_topics, random_state, corpus_share=0.01):
    """Starting topics from a truncated SVD of the counts (NNDSVD; Boutsidis & Gallopoulos, 2008).

    The k-th singular pair (u, v) of X ~ U S V^T is split into its positive
    parts (u+, v+) and negative parts (u-, v-), and topic k takes the part
    whose pair has the larger norm product (a singular vector's sign is
    arbitrary; the first pair's vectors are of one sign). Entries left at zero
    get X's mean entry (the "a" variant), terms that never occur stay at zero,
    and a ``corpus_share`` of the corpus distribution keeps every observed term
    positive in every topic (a finite Poisson loss at the start). Each topic
    starts on a direction of the data instead of a few documents; where that
    helps: docs/quality.md, "Initialisation".

    The SVD is scikit-learn's `randomized_svd` seeded by ``random_state``; its
    dense steps run in BLAS, so its last bits may depend on the BLAS build.
    """
    check_topics_fit_in_memory(n_topics, X.shape[1])
    corpus = np.asarray(X.sum(axis=0), dtype=np.float64).ravel()
    if corpus.sum() <= 0 or n_topics >= min(X.shape):
        # nothing to decompose (or fewer directions than topics): the draws' start
        return initial_dictionary(X, n_topics, random_state)
    U, _, Vt = randomized_svd(X, n_topics, random_state=check_random_state(random_state))
    topics = np.abs(Vt)  # the first pair is of one sign
    for k in range(1, n_topics):
        u, v = U[:, k], Vt[k]
        positive = np.linalg.norm(np.maximum(u, 0.0)) * np.linalg.norm(np.maximum(v, 0.0))
        negative = np.linalg.norm(np.minimum(u, 0.0)) * np.linalg.norm(np.minimum(v, 0.0))
        topics[k] = np.maximum(v, 0.0) if positive >= negative else np.maximum(-v, 0.0)
    observed = corpus > 0
    topics[(topics == 0.0) & observed] = corpus.sum() / (X.shape[0] * X.shape[1])
    topics[:, ~observed] = 0.0
    topics /= topics.sum(axis=1, keepdims=True)
    beta = (1.0 - corpus_share) * topics + corpus_share * corpus / corpus.sum()
    return np.ascontiguousarray(beta / beta.sum(axis=1, keepdims=True))


def initial_dictionary_draws(nonempty, n_features, n_topics, random_state, docs_per_topic=5):
    """The random part of `initial_dictionary`: (documents, noise) per topic, in draw order.

    Kept apart so that a corpus spread over several machines draws the same
    numbers and only gathers the chosen documents' rows.
    """
    check_topics_fit_in_memory(n_topics, n_features)
    rng = check_random_state(random_state)
    if nonempty.size == 0:
        return []
    draws = []
    for _ in range(n_topics):
        docs = rng.choice(nonempty, size=min(docs_per_topic, nonempty.size), replace=False)
        noise = rng.uniform(0.5, 1.5, size=n_features)
        draws.append((docs, noise))
    return draws


def dictionary_from_draws(corpus, draws, sample_sums, n_topics, corpus_share=0.2):
    """`initial_dictionary` from the term totals, the draws and each draw's term sums."""
    n_features = corpus.size
    total = corpus.sum()
    beta = np.zeros((n_topics, n_features))
    if total <= 0:
        beta[:] = 1.0 / n_features
        return beta
    corpus = corpus / total
    for k, ((_, noise), sample) in enumerate(zip(draws, sample_sums)):
        beta[k] = (1.0 - corpus_share) * sample / sample.sum() + corpus_share * corpus * noise
        beta[k] /= beta[k].sum()
    return beta


# ---- the dictionary step

class CorpusLayout:
    """Index structures of X's non-zeros reused by every dictionary update."""

    def __init__(self, X):
        self.indptr = X.indptr  # the documents' entries (to store dense codes sparse)
        self.indices = np.ascontiguousarray(X.indices, dtype=np.intc)
        self.data = np.ascontiguousarray(X.data, dtype=np.float64)
        self.n_features = X.shape[1]
        # Entries grouped term by term (a CSC view), in a fixed order, so that
        # sums over a term's entries do not depend on the thread count.
        order = np.argsort(self.indices, kind="stable")
        self.col_entries = order.astype(np.intc)
        counts = np.bincount(self.indices, minlength=self.n_features)
        self.col_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.intc)

    @functools.cached_property
    def col_data(self):
        """X's values in ``col_entries``' order: the MM passes read them in sequence."""
        return self.data[self.col_entries]

    @functools.cached_property
    def col_positions(self):
        """0, 1, ..., nnz - 1: the entries of codes gathered in term order (`statistics_rows`)."""
        return np.arange(self.col_entries.shape[0], dtype=np.intc)


# Sparse codes with at most this share of non-zero codes are gathered term by term for the
# dictionary step; denser ones (early in a fit) are read in place: a gathered copy of them
# would cost more memory than their dense array.
GATHER_DENSITY = 0.25


def statistics_rows(codes, layout, n_jobs=None):
    """(codes, entries, order): the word codes as the dictionary statistics read them.

    Every statistic sums over a term's entries, which lie all over the corpus.
    Sparse codes with few non-zero codes (`GATHER_DENSITY`) are gathered in
    ``layout``'s term-by-term order once per dictionary step, so that every
    pass reads them in sequence: ``entries`` is then ``col_positions`` and
    ``order`` ``col_entries`` (values indexed by entry are passed as
    ``values[order]``). Other codes are read in place (dense ones through a
    view, no copy): ``entries`` is ``col_entries`` and ``order`` None. The
    same rows in the same order either way: the same sums, bit for bit. The
    gathered copy's memory is reused from step to step (``layout``).
    """
    codes = as_code_rows(codes, layout.indptr)
    size = codes.n_entries * codes.n_topics
    if codes.is_view or codes.count_nonzero() > GATHER_DENSITY * size:
        layout.term_major = None  # its memory back, while the codes are dense
        return codes, layout.col_entries, None
    layout.term_major = codes.gathered(layout.col_entries, n_jobs,
                                       out=getattr(layout, "term_major", None))
    return layout.term_major, layout.col_positions, layout.col_entries


def dictionary_loss(loss, layout, codes, beta, n_jobs=None):
    """F(beta): the total reconstruction loss over X's non-zeros, and the means."""
    means = word_means(layout.indices, as_code_rows(codes, layout.indptr),
                       np.ascontiguousarray(beta.T), n_jobs)
    return float(np.sum(loss.loss(layout.data, means))), means


def simplex_multiplier(a, c, max_iter=100, n_jobs=None):
    """nu_k such that sum_n a[n, k] / (c[n, k] + nu_k) = 1, for every column k.

    Each function is convex and decreasing on nu > -min{c : a > 0}; the
    compiled `simplex_multipliers` solves it per topic, in parallel.
    """
    return simplex_multipliers(np.ascontiguousarray(a.T), np.ascontiguousarray(c.T),
                               max_iter, n_jobs)


def _poisson_ratio(layout, means):
    """y_j / mean_j (0 where the mean is 0, which only happens with y_j unobserved by codes)."""
    return np.divide(layout.data, means, out=np.zeros_like(means), where=means > 0)


def update_dictionary(loss, layout, codes, beta, method="auto", max_iter=10, tol=1e-4,
                      n_jobs=None, means=None):
    """The dictionary step: decrease F(beta) from ``beta`` with codes fixed; return (beta, F, n_steps).

    Stops after ``max_iter`` steps or when the relative decrease of F falls
    under ``tol``. The returned F is never above F at the input. ``means``
    may pass the means s_j . beta[:, n_j] at the input (the coding kernel
    returns them), which saves recomputing them. ``method="auto"`` takes the
    loss's ``dictionary_method``. ``codes``: dense (nnz, K) or `SparseWordCodes`
    (dense codes are stored sparse for the step: every pass then reads only
    the non-zero codes).
    """
    if method == "auto":
        method = loss.dictionary_method
    if method not in ("mm", "pg"):
        raise ValueError(f"method must be 'auto', 'mm' or 'pg', got {method!r}")
    if means is None:
        value, means = dictionary_loss(loss, layout, codes, beta, n_jobs)
    else:
        value = float(np.sum(loss.loss(layout.data, means)))
    if not np.isfinite(value):
        raise NonFiniteLossError(loss, layout, means)
    steps = mm_dictionary_steps if method == "mm" else pg_dictionary_steps
    return steps(loss, layout, codes, beta, means, value, max_iter, tol, n_jobs)


class NonFiniteLossError(ValueError):
    """The loss is not finite at the codes the coding step returned (F = inf or NaN).

    ``entry`` is the first stored entry of X where it is not, ``y`` its value
    and ``mean`` its mean; the estimators turn this into a message about the
    cause (`stc._learning.learners.batch.explain_non_finite_loss`).
    """

    def __init__(self, loss, layout, means):
        with np.errstate(all="ignore"):
            values = np.asarray(loss.loss(layout.data, means), dtype=np.float64)
        self.entry = int(np.flatnonzero(~np.isfinite(values))[0])
        self.y, self.mean = float(layout.data[self.entry]), float(means[self.entry])
        self.loss_name = getattr(loss, "name", type(loss).__name__)
        super().__init__(
            f"the {self.loss_name} loss is not finite at the current codes and topics: at stored "
            f"entry {self.entry} (value {self.y:g}) the mean is {self.mean:g}, outside the "
            f"loss's domain {tuple(loss.mean_domain)}")


def mm_dictionary_steps(loss, layout, codes, beta, means, value, max_iter, tol, n_jobs):
    """Majorisation-minimisation steps on F (Poisson deviance); see the module docstring.

    The codes are read as `statistics_rows` gives them. c and the first step's a = beta * (weighted sums) come from one pass over them
    (`mm_first_statistics`); after that, every step's F and the
    next step's a come from one pass (`mm_step_statistics`), and the compiled
    `mm_exact_rows` finds nu (warm-started from step to step) and normalises
    every row, topics in parallel. Everything stays in beta's (K, N) layout
    (no transposed copies), and a, c and the candidates live in buffers
    allocated once per call: a is overwritten once the step that read it is
    done, and a candidate goes into whichever of two buffers does not hold
    the current beta, never into the caller's ``beta``. The same arithmetic,
    in the same order, as `mm_update_rows` on `mm_statistics`' sums.
    """
    beta = np.ascontiguousarray(beta, dtype=np.float64)
    shape = beta.shape
    responsibilities, code_sums = np.empty(shape), np.empty(shape)
    codes, entries, order = statistics_rows(codes, layout, n_jobs)
    ratio = _poisson_ratio(layout, means)
    mm_first_statistics(layout.col_ptr, entries, codes, ratio if order is None else ratio[order],
                        beta, responsibilities, code_sums, n_jobs)
    multipliers = np.full(shape[0], np.nan)
    rows = []  # our candidate buffers: at most two, one of them may hold beta

    def step(beta, responsibilities, last):
        # _descend holds only beta: any other buffer of ours is free
        free = [buffer for buffer in rows if buffer is not beta]
        if free:
            out = free[0]
        else:
            out = np.empty(shape)
            rows.append(out)
        candidate = mm_exact_rows(beta, responsibilities, code_sums, multipliers, 100, n_jobs,
                                  out)
        # a is read: the next step's a goes into the same buffer
        new_value = mm_step_statistics(
            loss, layout.col_ptr, entries, layout.col_data, codes, candidate,
            None if last else responsibilities, n_jobs)
        return candidate, new_value, responsibilities

    return _descend(step, beta, value, responsibilities, max_iter, tol)


def pg_dictionary_steps(loss, layout, codes, beta, means, value, max_iter, tol, n_jobs):
    """Projected-gradient steps on F with backtracking (any loss); see the module docstring."""
    def step(beta, carried, last):
        means, value, step_size = carried  # at beta
        candidate, new_value, new_means, step_size = _pg_step(
            loss, layout, codes, beta, means, value, step_size, n_jobs)
        return candidate, new_value, (new_means, new_value, step_size)

    return _descend(step, beta, value, (means, value, None), max_iter, tol)


def _descend(step, beta, value, carried, max_iter, tol):
    """Repeat ``step(beta, carried, last) -> (candidate, F(candidate), carried)`` on F.

    A candidate is kept only if F does not increase (rounding at a fixed point
    can make it); stops after ``max_iter`` steps or when the relative decrease
    falls under ``tol``. Returns (beta, F, steps kept).
    """
    n_steps = 0
    for n_steps in range(1, max_iter + 1):
        candidate, new_value, new_carried = step(beta, carried, n_steps == max_iter)
        if not new_value <= value:
            n_steps -= 1
            break
        decrease = value - new_value
        beta, value, carried = candidate, new_value, new_carried
        if decrease <= tol * abs(value):
            break
    return beta, value, n_steps


def _pg_step(loss, layout, codes, beta, means, value, step_size, n_jobs, max_backtracks=60):
    """Projected gradient step with backtracking on the sufficient-decrease condition."""
    grad = word_code_sums(layout.col_ptr, layout.col_entries, as_code_rows(codes, layout.indptr),
                          np.ascontiguousarray(loss.gradient(layout.data, means)), n_jobs).T
    if step_size is None:
        scale = np.abs(grad).max()
        step_size = 1.0 / scale if scale > 0 else 1.0
    else:
        step_size *= 2.0  # let the step grow again after a success
    for _ in range(max_backtracks):
        candidate = project_rows_onto_simplex(beta - step_size * grad, 1.0, n_jobs)
        delta = candidate - beta
        new_value, new_means = dictionary_loss(loss, layout, codes, candidate, n_jobs)
        if new_value <= value - 0.5 * np.sum(delta * delta) / step_size:
            return candidate, new_value, new_means, step_size
        step_size *= 0.5
    return beta, value, means, step_size
