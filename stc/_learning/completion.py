"""Document completion: the held-out score behind `STC.score`.

Minus objective (2) is no score to compare models by: it contains the
penalties, so it always prefers the smallest ``lambda_`` and ``rho``. Instead,
each document's stored entries are split into an observed half and a
held-out half (`split_entries`: in CSR order, the 1st, 3rd, 5th, ... entries
are observed, the 2nd, 4th, ... held out; deterministic, no random state),
the observed half is coded with the fitted topics exactly as `transform`
codes new documents, and the held-out half is scored under those codes:

* for a loss that models counts (``loss.score_kind == "multinomial"``: the
  Poisson loss), the mean log-likelihood per held-out token of the
  multinomial::

      p(n | d) = (1 - BACKGROUND_WEIGHT) pi_d . beta_n + BACKGROUND_WEIGHT u_n,
      pi_dk = (theta_dk / sum_k theta_dk + TOPIC_PSEUDO_COUNT)
              / (1 + K TOPIC_PSEUDO_COUNT),

  pi_d . beta_n being a distribution over the terms because pi_d and every
  topic are. pi_d is the document's topic proportions with a pseudo-count
  added to every topic, as a symmetric Dirichlet posterior would add it: an
  exact zero in a sparse code says that the observed half did not use the
  topic, not that the document's other words cannot come from it, and read
  literally (no pseudo-count) it gives those words only the background's
  share. The pseudo-count was chosen on the training split (fit on 80 %,
  scored on the rest, nothing on the test split) over every model of the
  peers benchmark, dense and sparse coders alike, at K = 20, 50 and 100:
  0.007 loses the least on average against the pseudo-count that suits each
  model best (dense coders prefer smaller ones, sparse coders larger), and
  has the highest mean log-likelihood (the docs' topic quality page).
  ``u`` is the training corpus's term frequencies with one added to every
  count (``term_counts_``), so that a term the topics give no weight gets a
  small positive probability instead of log 0; a document whose codes are
  all zero (nothing to take proportions of) gets ``u`` itself. The score is
  sum_j w_j log p(n_j | d_j) / sum_j w_j over the held-out entries j with
  counts w_j: a log-likelihood per token, up to the multinomial
  coefficient, which does not depend on the model. exp(-score) is the
  held-out perplexity;
* for any other loss (``score_kind == "loss"``), minus the mean loss per
  held-out entry at the mean theta_d . beta_n (-inf if such a mean leaves the
  loss's domain);
* a loss with ``score_kind == "none"`` (the Bernoulli loss) has no held-out
  score (`check_scorable`): the held-out entries are stored ones, all 1 for
  binary data, so minus their loss would favour codes that predict 1
  everywhere.

Higher is better in both cases, and the score compares models fitted with
different hyper-parameters (it contains no penalty), which is what
``GridSearchCV`` needs.
"""
import numpy as np
import scipy.sparse as sp

# Weight of the smoothed training term frequencies in the completion distribution.
BACKGROUND_WEIGHT = 0.01
# Pseudo-count added to every topic's proportion of a document (see the docstring).
TOPIC_PSEUDO_COUNT = 0.007


def split_entries(X):
    """(observed, held_out): X's stored entries, alternately, within each document.

    The first stored entry of every document (in CSR order, sorted by term)
    is observed, the second held out, and so on; both halves keep X's shape.
    A document with one entry has nothing held out.
    """
    X = sp.csr_matrix(X)
    lengths = np.diff(X.indptr)
    position = np.arange(X.nnz) - np.repeat(X.indptr[:-1], lengths)
    held = position % 2 == 1
    halves = []
    for keep in (~held, held):
        indptr = np.concatenate([[0], np.cumsum(np.bincount(
            np.repeat(np.arange(X.shape[0]), lengths)[keep], minlength=X.shape[0]))])
        half = sp.csr_matrix((X.data[keep], X.indices[keep], indptr), shape=X.shape)
        half.indices = half.indices.astype(np.int32, copy=False)
        half.indptr = half.indptr.astype(np.int32, copy=False)
        halves.append(half)
    return tuple(halves)


def background_frequencies(term_counts):
    """u_n = (c_n + 1) / (sum(c) + N): training term frequencies, add-one smoothed."""
    term_counts = np.asarray(term_counts, dtype=np.float64)
    return (term_counts + 1.0) / (term_counts.sum() + term_counts.size)


def topic_proportions(theta):
    """pi_d of the module docstring for every row of ``theta`` (rows of zeros stay zero)."""
    theta = np.asarray(theta, dtype=np.float64)
    mass = theta.sum(axis=1, keepdims=True)
    proportions = np.divide(theta, mass, out=np.zeros_like(theta), where=mass > 0)
    smoothed = (proportions + TOPIC_PSEUDO_COUNT) / (1.0 + theta.shape[1] * TOPIC_PSEUDO_COUNT)
    return np.where(mass > 0, smoothed, 0.0)


def completion_probabilities(theta, beta, background, rows, terms):
    """p(n | d) of the module docstring at the pairs (rows[j], terms[j])."""
    has_code = theta.sum(axis=1) > 0
    mixture = np.einsum("jk,kj->j", topic_proportions(theta)[rows], beta[:, terms])
    topical = np.where(has_code[rows], mixture, background[terms])
    return (1.0 - BACKGROUND_WEIGHT) * topical + BACKGROUND_WEIGHT * background[terms]


def check_scorable(loss):
    """Refuse a loss that declares no held-out score (``score_kind == "none"``)."""
    if loss.score_kind == "none":
        raise ValueError(
            f"score has no held-out score for the {loss.name} loss: document completion "
            "holds out stored entries only, which are all 1 for binary data, so minus their "
            "loss would favour codes that predict 1 everywhere. Compare such models with a "
            "scorer of your own (e.g. GridSearchCV(scoring=...)) on data that holds out "
            "zeros as well")


def held_out_score(loss, beta, term_counts, theta, held_out):
    """The score of the module docstring, from the codes ``theta`` of the observed halves."""
    check_scorable(loss)
    rows = np.repeat(np.arange(held_out.shape[0]), np.diff(held_out.indptr))
    terms = held_out.indices
    if loss.score_kind == "multinomial":
        p = completion_probabilities(theta, beta, background_frequencies(term_counts), rows,
                                     terms)
        return float(np.sum(held_out.data * np.log(p)) / np.sum(held_out.data))
    means = np.einsum("jk,kj->j", theta[rows], beta[:, terms])
    return -float(np.mean(loss.loss(held_out.data, means)))
