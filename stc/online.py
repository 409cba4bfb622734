"""Online (mini-batch) dictionary learning for STC.

A batch fit keeps every word code, (nnz, K) doubles, and re-codes the whole
corpus every iteration. Online learning codes one mini-batch of documents at
a time with the compiled kernel (cold start, `code_new_documents`), then
takes a stochastic dictionary step, so memory is bounded by the batch size.

The dictionary step follows online EM / stochastic majorisation-minimisation
(Mairal et al. 2010, Hoffman et al. 2010, Cappe and Moulines 2009) for the
Poisson MM update of `stc.dictionary`: that update is

    beta_kn = a_kn / (c_kn + nu_k),   a_kn = beta_kn sum_j s_jk y_j / mean_j,
                                      c_kn = sum_j s_jk   (j over term n's entries)

with nu_k the multiplier that puts topic k on the simplex. Online, per-document
averages of a and c are kept as running statistics; batch t enters with the
weight rho_t = (learning_offset + t) ** -learning_decay:

    A <- (1 - rho_t) A + rho_t a_batch / n_docs_batch,
    C <- (1 - rho_t) C + rho_t c_batch / n_docs_batch,

and the topics are the exact simplex-constrained minimiser A / (C + nu).
Within a batch, ``max_steps`` MM steps re-majorise the batch's part at the
new topics (the past batches' part stays fixed). A, C and beta are (K, N):
nothing grows with the corpus.

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

from stc._core._sparse_ops import mm_statistics, word_code_sums
from stc.coding import code_new_documents
from stc._core._simplex import mm_minimiser_rows
from stc.dictionary import CorpusLayout

# A new term enters every topic with this share times its frequency in the
# batch, as the corpus part of `stc._stc.initial_dictionary` does.
NEW_TERM_SHARE = 0.2


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
    """``beta`` with the terms of batch ``X`` that no topic has weight for yet given some.

    Such a term n gets NEW_TERM_SHARE times its share of the batch's tokens in
    every topic, and the rows are rescaled onto the simplex. Returns ``beta``
    itself when the batch brings no new term.
    """
    counts = np.bincount(X.indices, weights=X.data, minlength=beta.shape[1])
    new = (counts > 0) & ~(beta.sum(axis=0) > 0)
    if not np.any(new):
        return beta
    beta = beta.copy()
    beta[:, new] = NEW_TERM_SHARE * counts[new] / counts.sum()
    return beta / beta.sum(axis=1, keepdims=True)


@dataclass
class OnlineStatistics:
    """Running per-document averages of the MM step's sums, (K, N) each."""

    responsibilities: np.ndarray  # A: beta_kn sum_j s_jk y_j / mean_j
    code_sums: np.ndarray         # C: sum_j s_jk
    multipliers: np.ndarray = None  # nu of the last step (K,): Newton's start for the next

    @classmethod
    def at_fixed_point(cls, beta, batch_code_sums):
        """Statistics for which ``beta`` is the MM minimiser, at the batch's code mass."""
        level = batch_code_sums.sum(axis=1, keepdims=True) / beta.shape[1]
        level = np.where(level > 0, level, 1.0)  # a topic unused in the batch
        code_sums = np.repeat(level, beta.shape[1], axis=1)
        return cls(beta * code_sums, code_sums, np.full(beta.shape[0], np.nan))


@dataclass
class BatchOutcome:
    """What coding and learning from one batch gave."""

    objective: float  # objective (2) of the batch at the topics it was coded with
    n_docs: int
    capped_documents: int


def simplex_minimiser(beta, responsibilities, code_sums, multipliers=None, n_jobs=None):
    """The topics minimising sum_n (C_kn beta_kn - A_kn log beta_kn) on the simplex.

    beta_kn = A_kn / (C_kn + nu_k) (or the exact minimiser's other case, see
    `stc._core._simplex.mm_update_rows`); a topic with A = 0 keeps its row of
    ``beta``. ``multipliers`` (K,), if given, holds start values for nu (NaN:
    none) and receives the new ones: from batch to batch nu changes little,
    so Newton then needs a few iterations instead of dozens.
    """
    if multipliers is None:
        multipliers = np.full(responsibilities.shape[0], np.nan)
    return mm_minimiser_rows(np.ascontiguousarray(beta), np.ascontiguousarray(responsibilities),
                             np.ascontiguousarray(code_sums), multipliers, 100, n_jobs)


def learn_from_batch(problem, X, beta, statistics, rho, *, max_steps=3, n_jobs=None):
    """Code CSR batch ``X`` with ``beta``, then take the stochastic dictionary step.

    ``statistics`` is an `OnlineStatistics` or None (first batch: started at
    ``beta``). Returns (new beta, new statistics, `BatchOutcome`).
    """
    loss = problem.loss
    _, codes, result = code_new_documents(problem, X, beta, keep_word_codes=True,
                                          n_jobs=n_jobs)
    capped = (int(np.count_nonzero(result.n_iter >= problem.max_iter))
              if problem.max_iter else 0)
    outcome = BatchOutcome(float(np.sum(result.objective)), X.shape[0], capped)
    n_docs = max(X.shape[0], 1)
    layout = CorpusLayout(X)
    ratio = np.divide(layout.data, result.means, out=np.zeros_like(result.means),
                      where=result.means > 0)
    plain, weighted = word_code_sums(layout.col_ptr, layout.col_entries, codes, ratio, n_jobs,
                                     with_plain=True)
    batch_code_sums = plain.T / n_docs
    if statistics is None:
        statistics = OnlineStatistics.at_fixed_point(beta, batch_code_sums)
    kept_responsibilities = (1.0 - rho) * statistics.responsibilities
    code_sums = (1.0 - rho) * statistics.code_sums + rho * batch_code_sums
    responsibilities = statistics.responsibilities
    multipliers = statistics.multipliers
    if multipliers is None:
        multipliers = np.full(beta.shape[0], np.nan)
    multipliers = multipliers.copy()
    for step in range(max_steps):
        responsibilities = beta * np.ascontiguousarray(weighted.T)
        responsibilities *= rho / n_docs
        responsibilities += kept_responsibilities
        beta = simplex_minimiser(beta, responsibilities, code_sums, multipliers, n_jobs)
        if step + 1 < max_steps:
            # The batch's sums at the new topics, for the next MM step.
            _, weighted = mm_statistics(loss, layout.col_ptr, layout.col_entries, layout.data,
                                        codes, np.ascontiguousarray(beta.T), n_jobs)
    return beta, OnlineStatistics(responsibilities, code_sums, multipliers), outcome
