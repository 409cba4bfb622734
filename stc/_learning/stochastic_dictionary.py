"""The stochastic dictionary step of online learning: a mini-batch's MM sums, then the topics.

A batch fit keeps every word code, (nnz, K) doubles, and re-codes the whole
corpus every iteration. Online learning codes one mini-batch of documents at
a time with the compiled kernel (cold start, `code_batch`), then takes the
stochastic dictionary step (`stochastic_dictionary_step`; both:
`learn_from_batch`), so memory is bounded by the batch size. The learners
`stc._learning.learners.online` (in memory) and `stc._learning.learners.dask_online` (a dask
array's partitions) run them.

The dictionary step follows online EM / stochastic majorisation-minimisation
(Mairal et al. 2010, Hoffman et al. 2010, Cappe and Moulines 2009) for the
Poisson MM update of `stc._learning.dictionary`: that update is

    beta_kn = a_kn / (c_kn + nu_k),   a_kn = beta_kn sum_j s_jk y_j / mean_j,
                                      c_kn = sum_j s_jk   (j over term n's entries)

with nu_k the multiplier that puts topic k on the simplex. Online, per-document
averages of a and c are kept as running statistics; batch t enters with the
weight rho_t = (learning_offset + t) ** -learning_decay:

    A <- (1 - rho_t) A + rho_t a_batch / n_docs_batch,
    C <- (1 - rho_t) C + rho_t c_batch / n_docs_batch,

and the topics minimise sum_n (C_kn beta_kn - A_kn log beta_kn) on the
simplex. Only the batch's terms get new statistics, so the step solves for
them alone and moves the other terms of a topic together: beta_kn = r_k x
(their old beta) off the batch (`stc._core._simplex.OnlineBlock`).
Within that family the minimiser is exact (beta_kn = A_kn / (C_kn + nu_k) on
the batch's terms, r_k from the others' sums sum A_kn and sum C_kn beta_kn),
and it costs K x (terms of the batch) divisions instead of K x N per Newton
step of nu: the other terms are read once (decay and their sums) and scaled
once. With every term in the batch it is the exact minimiser over the whole
simplex. Within a batch, ``max_steps`` MM steps re-majorise the batch's part
at the new topics (the past batches' part stays fixed). A, C and beta are (K, N):
nothing grows with the corpus. They are updated in place, and the batch's
sums are formed over the terms the batch contains only (`BatchLayout`), so a
step allocates no (K, N) array: its temporaries are (K, terms of the batch)
and the batch's word codes (nnz of the batch, K).

The running statistics start from the initial topics as if they were a
fixed point (A = beta c0, C = c0, with c0 the first batch's average code
mass spread evenly over the terms); their weight decays as later batches
come in.

Terms: as in batch learning, a term no document has shown yet has zero weight
in every topic (and `STC.transform` ignores it). When a batch brings a new
term, it first gets a small weight in every topic (`introduce_new_terms`),
so that its Poisson loss is finite; the MM step then learns it from that
batch on (the step depends on the responsibilities s_jk beta_kn / mean_j,
not on how small beta_kn is).
"""
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from stc._core._sparse_ops import mm_first_statistics, mm_step_statistics
from stc._core._word_codes import SparseWordCodes
from stc._learning.coding import as_code_rows, code_new_documents
from stc._core._simplex import (OnlineBlock, mm_minimiser_rows, online_block_finish,
                                online_block_solve, online_block_start)
from stc._learning.dictionary import CorpusLayout
from stc._learning.progress import count_capped

# A new term enters every topic with this share times its frequency in the
# batch, as the corpus part of `stc._learning.dictionary.initial_dictionary` does.
NEW_TERM_SHARE = 0.2


# batch_size="auto": documents per mini-batch per topic, and the bounds. A stochastic step
# learns each topic from the documents of its batch that use it, about batch_size x
# (topics per document) / K of them: too few, and the topics follow the batches' noise
# instead of the corpus (benchmarks/results_online_diagnosis.md).
DOCUMENTS_PER_TOPIC = 20
AUTO_BATCH_SIZE_BOUNDS = (256, 4096)


def auto_batch_size(n_topics):
    """The mini-batch size of ``batch_size="auto"``: 20 documents per topic, in [256, 4096]."""
    low, high = AUTO_BATCH_SIZE_BOUNDS
    return int(min(max(DOCUMENTS_PER_TOPIC * n_topics, low), high))


def learning_rate(batch_number, offset, decay):
    """rho_t = (offset + t) ** -decay for the t-th batch (t from 1)."""
    return float((offset + batch_number) ** (-decay))


def check_online_loss(loss):
    """Online learning needs the MM dictionary step (the Poisson loss) in the compiled kernel."""
    if not (loss.runs_in_kernel and loss.dictionary_method == "mm"):
        name = getattr(loss, "name", type(loss).__name__)
        raise ValueError(f"learning_method='online' needs a loss with the MM dictionary step "
                         f"run by the compiled kernel (the Poisson loss); the {name} loss has "
                         f"dictionary_method={loss.dictionary_method!r}: use "
                         "learning_method='batch'")


def introduce_new_terms(beta, X):
    """Give the terms of batch ``X`` that no topic has weight for yet some, in place.

    Such a term n gets NEW_TERM_SHARE times its share of the batch's tokens in
    every topic, and the rows are rescaled onto the simplex. Returns ``beta``.
    """
    return introduce_terms_by_count(
        beta, np.bincount(X.indices, weights=X.data, minlength=beta.shape[1]))


def introduce_terms_by_count(beta, counts):
    """`introduce_new_terms` given the batch's token count of every term, (N,)."""
    present = np.flatnonzero(counts > 0)
    # only the batch's own columns are read: in later passes no term is new
    new = present[~np.any(np.take(beta, present, axis=1) > 0, axis=0)]
    if new.size:
        beta[:, new] = NEW_TERM_SHARE * counts[new] / counts.sum()
        beta /= beta.sum(axis=1, keepdims=True)
    return beta


class BatchLayout(CorpusLayout):
    """`CorpusLayout` of a batch over the terms it contains (``terms``, sorted columns).

    Its term-by-term sums are (terms of the batch, K) instead of (N, K): a
    batch holds a small part of a corpus's terms.
    """

    def __init__(self, X):
        present = np.bincount(X.indices, minlength=X.shape[1]) > 0
        self.terms = np.flatnonzero(present)
        position = np.cumsum(present, dtype=np.intc) - 1
        compact = sp.csr_matrix((X.data, position[X.indices], X.indptr),
                                shape=(X.shape[0], self.terms.size), copy=False)
        super().__init__(compact)
        self.compact = compact  # X with its columns numbered as ``terms``


def batch_columns(X, beta):
    """The `BatchLayout` of CSR batch ``X`` and its terms' topic weights, (terms, K).

    Coding reads the topic weights of a document's own words only, so a batch
    is coded as ``layout.compact`` with these rows (`stc._learning.coding.transposed`
    of ``beta``'s columns for the batch's terms): the same numbers as with all
    the topics, for a copy of (terms, K) instead of the (N, K) transpose (a
    batch holds a small share of the vocabulary).
    """
    layout = BatchLayout(X)
    return layout, np.ascontiguousarray(np.asarray(beta).T[layout.terms])


@dataclass
class OnlineStatistics:
    """Running per-document averages of the MM step's sums, (K, N) each."""

    responsibilities: np.ndarray  # A: beta_kn sum_j s_jk y_j / mean_j
    code_sums: np.ndarray         # C: sum_j s_jk
    multipliers: np.ndarray = None  # nu of the last step (K,): Newton's start for the next

    @classmethod
    def at_fixed_point(cls, beta, topic_mass):
        """Statistics for which ``beta`` is the MM minimiser, at a code mass per topic.

        ``topic_mass`` (K,) is the first batch's average code mass per
        document, sum_n sum_j s_jk / n_docs; it is spread evenly over the terms.
        """
        level = np.asarray(topic_mass, dtype=np.float64)[:, None] / beta.shape[1]
        level = np.where(level > 0, level, 1.0)  # a topic unused in the batch
        code_sums = np.repeat(level, beta.shape[1], axis=1)
        return cls(beta * code_sums, code_sums, np.full(beta.shape[0], np.nan))


@dataclass
class BatchOutcome:
    """What coding and learning from one batch gave."""

    objective: float  # objective (2) of the batch at the topics it was coded with
    n_docs: int
    capped_documents: int


def simplex_minimiser(beta, responsibilities, code_sums, multipliers=None, n_jobs=None,
                      out=None):
    """The topics minimising sum_n (C_kn beta_kn - A_kn log beta_kn) on the simplex.

    beta_kn = A_kn / (C_kn + nu_k) (or the exact minimiser's other case, see
    `stc._core._simplex.mm_update_rows`); a topic with A = 0 keeps its row of
    ``beta``. ``multipliers`` (K,), if given, holds start values for nu (NaN:
    none) and receives the new ones: from batch to batch nu changes little,
    so Newton then needs a few iterations instead of dozens. ``out`` (may be
    ``beta``) receives the result.
    """
    if multipliers is None:
        multipliers = np.full(responsibilities.shape[0], np.nan)
    return mm_minimiser_rows(np.ascontiguousarray(beta), np.ascontiguousarray(responsibilities),
                             np.ascontiguousarray(code_sums), multipliers, 100, n_jobs, out)


@dataclass
class CodedBatch:
    """A coded batch and its MM sums over the terms it contains (`BatchLayout`).

    The sums are (K, terms): topic by topic, as the dictionary step reads them.
    """

    layout: BatchLayout
    codes: SparseWordCodes  # word codes (nnz of the batch, K)
    plain: np.ndarray     # (K, terms): sum_j s_jk over the term's entries j
    responsibilities: np.ndarray  # (K, terms): beta_kn sum_j s_jk y_j / mean_j
    outcome: BatchOutcome

    def responsibilities_at(self, loss, beta, columns=None, n_jobs=None):
        """The responsibilities at other topics, (K, terms).

        ``beta`` holds the topics' columns for the batch's terms, (K, terms);
        or with ``columns`` (the terms' positions among beta's columns, intp),
        the topics over a vocabulary that holds them, (K, N).
        """
        layout = self.layout
        out = np.empty((self.codes.shape[1], layout.terms.size))
        mm_step_statistics(loss, layout.col_ptr, layout.col_entries, layout.col_data, self.codes,
                           beta, out, n_jobs, columns, with_loss=False)
        return out


def code_batch(problem, X, beta, n_jobs=None):
    """Code CSR batch ``X`` with ``beta`` (cold start); return a `CodedBatch`.

    ``beta`` may be the topics (K, N), or their columns for the batch's terms
    only (K, terms) with ``X``'s columns numbered accordingly: coding reads
    the topic weights of a document's own words only.
    """
    layout, beta_t = batch_columns(X, beta)
    _, codes, result = code_new_documents(problem, layout.compact, beta_t.T,
                                          keep_word_codes="sparse", n_jobs=n_jobs, beta_t=beta_t)
    outcome = BatchOutcome(float(np.sum(result.objective)), X.shape[0],
                           count_capped(result, problem))
    return batch_sums(X, beta, codes, result.means, outcome, n_jobs, layout)


def batch_sums(X, beta, codes, means, outcome, n_jobs=None, layout=None):
    """The `CodedBatch` of CSR batch ``X`` at given word codes and their means s_j . beta_j.

    ``beta``: the topics the codes were made with, over ``X``'s columns.
    `code_batch` codes the batch first; online MedSTC gives its own codes
    (those of the shifted mean, `stc._learning.supervised.labelled_online`). ``layout``: X's
    `BatchLayout`, if the caller has made it.
    """
    if layout is None:
        layout = BatchLayout(X)
    codes = as_code_rows(codes, X.indptr)
    ratio = np.divide(layout.data, means, out=np.zeros_like(means), where=means > 0)
    shape = (codes.shape[1], layout.terms.size)
    plain, responsibilities = np.empty(shape), np.empty(shape)
    mm_first_statistics(layout.col_ptr, layout.col_entries, codes, ratio, beta,
                        responsibilities, plain, n_jobs, layout.terms)
    return CodedBatch(layout, codes, plain, responsibilities, outcome)


def stochastic_dictionary_step(beta, statistics, rho, n_docs, terms, sums, responsibilities_at,
                               *, max_steps=3, n_jobs=None):
    """The online dictionary step from a batch's sums over its ``terms``; in place.

    ``sums`` holds the batch's MM sums at ``beta`` as attributes ``plain`` and
    ``responsibilities``, (K, len(terms)) each (a `CodedBatch`); the step
    takes them and sets both attributes to None, so that they are freed once
    used. ``n_docs`` is the batch's number of documents; ``statistics`` an
    `OnlineStatistics` or None (first batch: started at ``beta``).
    ``responsibilities_at(beta, terms)`` returns the batch's responsibilities
    at the topics ``beta`` (K, N) (for the MM steps after the first).
    ``beta`` (C-contiguous float64) and the statistics are updated in place.
    Returns the statistics.
    """
    n_docs = max(n_docs, 1)
    plain, responsibilities = sums.plain, sums.responsibilities
    sums.plain = sums.responsibilities = None
    if statistics is None:
        # from (terms, K) numpy sums each topic's column term after term, in order
        statistics = OnlineStatistics.at_fixed_point(
            beta, np.ascontiguousarray(plain.T).sum(axis=0) / n_docs)
    if statistics.multipliers is None:
        statistics.multipliers = np.full(beta.shape[0], np.nan)
    # A and C scaled by 1 - rho scale the multiplier nu alike: Newton's start
    statistics.multipliers *= 1.0 - rho
    # The compiled step works row by row: the past's weight falls to 1 - rho in
    # place, the batch's part enters on its terms only, and the row is
    # minimised over the batch's terms plus one common scale of the others.
    block = OnlineBlock(terms, beta.shape[0], beta.shape[1], float(rho), float(n_docs))
    online_block_start(beta, statistics.responsibilities, statistics.code_sums, block, plain,
                       n_jobs)
    plain = None
    for step in range(max_steps):
        online_block_solve(beta, statistics.responsibilities, statistics.code_sums,
                           statistics.multipliers, block, responsibilities, 100, n_jobs)
        responsibilities = None
        if step + 1 < max_steps:
            # The batch's responsibilities at the new topics, for the next MM step.
            responsibilities = responsibilities_at(beta, block.terms)
    online_block_finish(beta, block, n_jobs)
    return statistics


def learn_from_batch(problem, X, beta, statistics, rho, *, max_steps=3, n_jobs=None):
    """Code CSR batch ``X`` with ``beta``, then take the stochastic dictionary step.

    ``statistics`` is an `OnlineStatistics` or None (first batch: started at
    ``beta``). ``beta`` (C-contiguous float64) and ``statistics`` are updated
    in place. Returns (beta, statistics, `BatchOutcome`).
    """
    batch = code_batch(problem, X, beta, n_jobs)
    if max_steps == 1:
        batch.codes = None  # no MM step re-reads them: free them before the step
    statistics = stochastic_dictionary_step(
        beta, statistics, rho, X.shape[0], batch.layout.terms, batch,
        lambda topics, terms: batch.responsibilities_at(problem.loss, topics, terms, n_jobs),
        max_steps=max_steps, n_jobs=n_jobs)
    return beta, statistics, batch.outcome
