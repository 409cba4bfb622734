"""A corpus sampled from STC's own generative process, with its true topics and codes.

The paper (Sec. 2.1) describes STC as MAP estimation in this model:

1. topics beta_k ~ Dirichlet(eta 1_N) on the simplex (the paper: uniform, eta = 1);
2. per document, a document code theta >= 0 from the prior p(theta) ~ exp(-lambda ||theta||_1);
3. per term n, a word code s_n >= 0 from p(s_n | theta) ~ exp(-gamma ||s_n - theta||^2
   - rho ||s_n||_1), i.e. independent normals with mean theta_k - rho / (2 gamma) and
   variance 1 / (2 gamma), truncated to s >= 0;
4. a count w_n ~ Poisson(s_n . beta_n); the stored entries of the document are the
   terms with w_n > 0 (the observed words I_d).

With ``n_classes``, each document also gets a label by MedSTC's decision rule (the
paper's Sec. 4): a linear classifier eta (n_classes, K), its entries standard normal,
and y_d = argmax_c eta_c . theta_d on the true code, so that the classes are linearly
separable in code space (with a positive margin almost surely) and a supervised fit
can be scored by its accuracy; ``label_noise`` replaces a share of the labels by
uniform draws. eta and the label noise come from their own streams: the counts, topics
and codes are the bits drawn without labels.

`make_stc_corpus` samples exactly this, with one change to step 2 so that documents
are about a few topics: theta is zero outside `topics_per_document` topics drawn at
random, and exponential (the Laplace prior restricted to theta >= 0) on them, with
mean `document_length / topics_per_document`. Since each topic sums to one, a
document's expected number of tokens is sum_k E[s_k], about `document_length`
plus a little for the topics it is not about.

Sampling every word code of every term would cost N K draws per document.
Instead, for each document and topic the counts c_nk ~ Poisson(s_nk beta_kn) are
read off one Poisson process: points (n, h) with n ~ beta_k and height h uniform
on [0, H], as many as Poisson(H), where H = max(mean, 0) + 6 sd; c_nk is the number
of term n's points with h <= s_nk. Word codes are drawn only for the terms that got
points; the rare terms whose code exceeds H (a binomial count, with probability
P(s > H) each) get their code from the tail and the points above H. This is exact,
and costs about sum_k H_k draws per document.
"""
import numbers

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment
from scipy.special import log_ndtr, ndtr, ndtri
from sklearn.utils import Bunch, check_random_state

# Documents drawn from one random stream: the corpus does not depend on the
# number of documents asked for beyond the last block.
BLOCK_DOCUMENTS = 1024
# The Poisson process is drawn up to this many standard deviations above the mean.
TAIL_SCALES = 6.0


def truncated_normal(rng, mean, sd, low, high=np.inf):
    """Draws of N(mean, sd^2) truncated to [low, high] (arrays broadcast), by inverse CDF.

    In the upper tail (low above the mean) the mirrored problem is sampled, so
    that the CDF values stay far from 1 and keep their precision.
    """
    mean, low, high = np.broadcast_arrays(np.asarray(mean, dtype=np.float64),
                                          np.asarray(low, dtype=np.float64),
                                          np.asarray(high, dtype=np.float64))
    a, b = (low - mean) / sd, (high - mean) / sd
    u = rng.random(a.shape)
    upper = a > 0
    z = np.empty(a.shape)
    # lower side: z = Phi^-1(Phi(a) + u (Phi(b) - Phi(a)))
    lo, hi = ndtr(a[~upper]), ndtr(b[~upper])
    z[~upper] = ndtri(lo + u[~upper] * (hi - lo))
    # upper tail: -z is N(0, 1) truncated to [-b, -a]
    lo, hi = ndtr(-b[upper]), ndtr(-a[upper])
    z[upper] = -ndtri(hi - u[upper] * (hi - lo))
    return np.clip(mean + sd * z, low, high)


def truncated_normal_mean(mean, sd):
    """E[s] for s ~ N(mean, sd^2) truncated to s >= 0."""
    alpha = np.asarray(mean, dtype=np.float64) / sd
    return mean + sd * np.exp(-0.5 * alpha ** 2 - log_ndtr(alpha)) / np.sqrt(2 * np.pi)


def _entropy(random_state):
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return int(random_state)
    return int(check_random_state(random_state).randint(2 ** 31 - 1))


def _check(name, value, kind, low, low_open=False, allow_none=False):
    if value is None and allow_none:
        return
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TypeError(f"{name} must be {'an int' if kind is numbers.Integral else 'a number'}"
                        f", got {value!r}")
    if not (value > low if low_open else value >= low) or not np.isfinite(value):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}")


def _sample_block(rng, beta, cdf, n_docs, per_document, scale, location_shift, sd,
                  with_codes):
    """One block of documents: (CSR counts, theta, word codes or None)."""
    n_topics, n_features = beta.shape
    support = np.argsort(rng.random((n_docs, n_topics)), axis=1)[:, :per_document]
    theta = np.zeros((n_docs, n_topics))
    np.put_along_axis(theta, support, rng.exponential(scale, size=(n_docs, per_document)),
                      axis=1)
    mean = theta - location_shift                  # location of the word codes' normals
    level = np.maximum(mean, 0.0) + TAIL_SCALES * sd  # H, per document and topic
    # P(s > H) = Phi((mean - H) / sd) / Phi(mean / sd)
    tail_share = np.exp(log_ndtr((mean - level) / sd) - log_ndtr(mean / sd))
    keys, counts, sampled = [], [], []
    for k in range(n_topics):
        m, h = mean[:, k], level[:, k]
        n_points = rng.poisson(h)
        point_doc = np.repeat(np.arange(n_docs), n_points)
        point_term = np.minimum(np.searchsorted(cdf[k], rng.random(point_doc.size) * cdf[k, -1],
                                                side="right"), n_features - 1)
        height = rng.random(point_doc.size) * h[point_doc]
        pair, inverse = np.unique(point_doc * n_features + point_term, return_inverse=True)
        pair_doc, pair_term = pair // n_features, pair % n_features
        code = truncated_normal(rng, m[pair_doc], sd, 0.0)
        count = np.bincount(inverse, weights=height <= code[inverse], minlength=pair.size)
        over = code > h[pair_doc]
        count[over] += rng.poisson(beta[k, pair_term[over]] * (code[over] - h[pair_doc[over]]))
        # Terms without points whose code lies above H: uniform among the others.
        with_points = np.bincount(pair_doc, minlength=n_docs)
        n_tail = rng.binomial(n_features - with_points, tail_share[:, k])
        tail_doc = np.repeat(np.arange(n_docs), n_tail)
        tail_term = rng.integers(n_features, size=tail_doc.size)
        while tail_doc.size:
            tail_key = tail_doc * n_features + tail_term
            _, first = np.unique(tail_key, return_index=True)
            redraw = np.isin(tail_key, pair)
            redraw[np.setdiff1d(np.arange(tail_key.size), first)] = True
            if not np.any(redraw):
                break
            tail_term[redraw] = rng.integers(n_features, size=int(redraw.sum()))
        tail_code = truncated_normal(rng, m[tail_doc], sd, h[tail_doc])
        tail_count = rng.poisson(beta[k, tail_term] * (tail_code - h[tail_doc]))
        tail_key = tail_doc * n_features + tail_term
        keys += [pair, tail_key]
        counts += [count, tail_count.astype(np.float64)]
        if with_codes:
            sampled.append((k, np.concatenate([pair, tail_key]), np.concatenate([code,
                                                                                 tail_code])))
    key, where = np.unique(np.concatenate(keys), return_inverse=True)
    total = np.bincount(where, weights=np.concatenate(counts), minlength=key.size)
    key, total = key[total > 0], total[total > 0]
    rows = key // n_features
    X = sp.csr_matrix((total, (key % n_features).astype(np.int32),
                       np.searchsorted(rows, np.arange(n_docs + 1)).astype(np.int32)),
                      shape=(n_docs, n_features))
    codes = None
    if with_codes:
        # A stored entry's code for a topic whose process gave its term no point
        # (and no tail draw) is the normal truncated to [0, H].
        entry_doc = rows
        codes = truncated_normal(rng, mean[entry_doc], sd, 0.0, level[entry_doc])
        for k, pair_key, pair_code in sampled:
            position = np.searchsorted(key, pair_key)
            found = position < key.size
            found[found] = key[position[found]] == pair_key[found]
            codes[position[found], k] = pair_code[found]
    return X, theta, codes


def make_stc_corpus(n_documents=1000, n_features=1000, n_topics=10, *, document_length=100.0,
                    topics_per_document=3, topic_concentration=0.1, gamma=10.0, rho=0.01,
                    return_word_codes=False, n_classes=None, label_noise=0.0,
                    random_state=None):
    """Sample a corpus from STC's generative model, with the true topics and codes.

    See the module docstring for the model (the paper's Sec. 2.1, with
    documents about a few topics) and how it is sampled exactly.

    Parameters
    ----------
    n_documents, n_features, n_topics : int
        D, N and K.
    document_length : float, default=100.0
        Mean total of a document's non-zero codes, about its expected number
        of tokens (theta_k is exponential with mean
        ``document_length / topics_per_document``).
    topics_per_document : int or None, default=3
        Topics a document's code is non-zero on (None: all K).
    topic_concentration : float, default=0.1
        eta of the Dirichlet the topics are drawn from (1: uniform on the simplex,
        as in the paper; smaller: fewer heavy terms per topic).
    gamma, rho : float, default=10.0 and 0.01
        The word codes' distribution exp(-gamma ||s - theta||^2 - rho ||s||_1):
        standard deviation 1 / sqrt(2 gamma) around theta - rho / (2 gamma).
    return_word_codes : bool, default=False
        Also return the true word code of every stored entry, (nnz, K) doubles.
    n_classes : int or None, default=None
        Also label the documents (at least 2 classes): a classifier ``eta``
        (n_classes, K) with standard normal entries, and label
        y_d = argmax_c eta_c . theta_d of the true code (MedSTC's prediction
        rule). None: no labels, and the Bunch as without this option.
    label_noise : float in [0, 1], default=0.0
        With ``n_classes``, the share of documents whose label is then
        replaced by a uniform draw among the classes (which may be the same
        class).
    random_state : int, RandomState or None
        Seed. The corpus is drawn block by block (1024 documents per block,
        each from its own stream), so it is the same whatever the machine.
        The labels do not change the counts, topics or codes.

    Returns
    -------
    Bunch with ``data`` (CSR float64 counts, (D, N), sorted int32 indices),
    ``components`` (true topics, (K, N), rows on the simplex),
    ``document_codes`` (true theta, CSR (D, K)), ``word_codes`` ((nnz, K),
    aligned with ``data``'s stored entries, or None) and ``DESCR``; with
    ``n_classes`` also ``target`` (int64 labels in 0 .. n_classes - 1, (D,))
    and ``classifier`` (the true eta, (n_classes, K)).
    """
    _check_corpus_arguments(n_documents, n_features, n_topics, document_length,
                            topics_per_document, topic_concentration, gamma, rho, n_classes,
                            label_noise)
    per_document = n_topics if topics_per_document is None else int(topics_per_document)
    seed = _entropy(random_state)
    beta = np.random.default_rng([seed, 0]).dirichlet(
        np.full(n_features, float(topic_concentration)), size=n_topics)
    beta /= beta.sum(axis=1, keepdims=True)
    X, theta, codes = _sample_corpus(seed, beta, n_documents, per_document,
                                     document_length / per_document, gamma, rho,
                                     return_word_codes)
    descr = (f"Synthetic STC corpus: {n_documents} documents, {n_features} terms, "
             f"{n_topics} topics, {per_document} per document, mean code total "
             f"{document_length:g}, topic concentration {topic_concentration:g}, "
             f"gamma {gamma:g}, rho {rho:g}, seed {seed}.")
    corpus = Bunch(data=X, components=beta, document_codes=theta, word_codes=codes,
                   DESCR=descr)
    if n_classes is not None:
        corpus.classifier, corpus.target = _labels(seed, theta, int(n_classes),
                                                   float(label_noise))
        corpus.DESCR += (f" Labels: argmax of a random linear classifier of the true codes, "
                         f"{n_classes} classes, label noise {label_noise:g}.")
    return corpus


def _check_corpus_arguments(n_documents, n_features, n_topics, document_length,
                            topics_per_document, topic_concentration, gamma, rho, n_classes,
                            label_noise):
    """ValueError or TypeError for an argument of `make_stc_corpus` out of its range."""
    for name, value in (("n_documents", n_documents), ("n_features", n_features),
                        ("n_topics", n_topics)):
        _check(name, value, numbers.Integral, 1)
    _check("topics_per_document", topics_per_document, numbers.Integral, 1, allow_none=True)
    if topics_per_document is not None and topics_per_document > n_topics:
        raise ValueError(f"topics_per_document must be at most n_topics={n_topics}, got "
                         f"{topics_per_document}")
    _check("document_length", document_length, numbers.Real, 0, low_open=True)
    _check("topic_concentration", topic_concentration, numbers.Real, 0, low_open=True)
    _check("gamma", gamma, numbers.Real, 0, low_open=True)
    _check("rho", rho, numbers.Real, 0)
    _check("n_classes", n_classes, numbers.Integral, 2, allow_none=True)
    _check("label_noise", label_noise, numbers.Real, 0)
    if label_noise > 1:
        raise ValueError(f"label_noise must be <= 1, got {label_noise!r}")
    if label_noise and n_classes is None:
        raise ValueError("label_noise needs n_classes (the documents are not labelled)")


def _sample_corpus(seed, beta, n_documents, per_document, theta_mean, gamma, rho, with_codes):
    """(X, theta, word codes or None) of `make_stc_corpus`, block by block.

    Each block of BLOCK_DOCUMENTS documents is drawn from its own stream of
    ``seed`` (`_sample_block`); ``theta_mean`` is the mean of a non-zero
    theta_k.
    """
    cdf = np.cumsum(beta, axis=1)
    sd = 1.0 / np.sqrt(2.0 * gamma)
    blocks = []
    for index, first in enumerate(range(0, n_documents, BLOCK_DOCUMENTS)):
        rng = np.random.default_rng([seed, 1, index])
        blocks.append(_sample_block(rng, beta, cdf, min(BLOCK_DOCUMENTS, n_documents - first),
                                    per_document, theta_mean, rho / (2.0 * gamma), sd,
                                    with_codes))
    X = sp.vstack([b[0] for b in blocks], format="csr")
    X.indices = X.indices.astype(np.int32, copy=False)
    X.indptr = X.indptr.astype(np.int32, copy=False)
    theta = sp.csr_matrix(np.vstack([b[1] for b in blocks]))
    codes = np.vstack([b[2] for b in blocks]) if with_codes else None
    return X, theta, codes


def _labels(seed, theta, n_classes, label_noise):
    """(eta, labels): eta standard normal, y_d = argmax_c eta_c . theta_d, then the noise."""
    eta = np.random.default_rng([seed, 2]).standard_normal((n_classes, theta.shape[1]))
    target = np.empty(theta.shape[0], dtype=np.int64)
    # block by block, each with its own noise stream, as the documents are drawn
    for index, first in enumerate(range(0, theta.shape[0], BLOCK_DOCUMENTS)):
        block = slice(first, first + BLOCK_DOCUMENTS)
        scores = np.asarray(theta[block] @ eta.T)
        y = np.argmax(scores, axis=1)
        rng = np.random.default_rng([seed, 3, index])
        noisy = rng.random(y.size) < label_noise
        y[noisy] = rng.integers(n_classes, size=int(noisy.sum()))
        target[block] = y
    return eta, target


def topic_recovery(components, true_components):
    """How well learned topics match true ones: the best one-to-one matching.

    Topics are compared by the cosine similarity of their term distributions;
    the matching maximising the total similarity is found by the Hungarian
    algorithm (`scipy.optimize.linear_sum_assignment`). Returns a Bunch with
    ``similarity`` (per true topic, its matched learned topic's cosine
    similarity; 0 for a true topic left unmatched when fewer topics were
    learned), ``match`` (index of the learned topic per true topic, -1 if
    none) and ``mean_similarity``.
    """
    learned = np.asarray(components, dtype=np.float64)
    true = np.asarray(true_components, dtype=np.float64)
    if learned.ndim != 2 or true.ndim != 2 or learned.shape[1] != true.shape[1]:
        raise ValueError("components and true_components must be 2-D with the same number "
                         f"of terms, got shapes {learned.shape} and {true.shape}")
    unit = lambda a: a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-300)  # noqa: E731
    cosine = unit(true) @ unit(learned).T
    rows, cols = linear_sum_assignment(-cosine)
    similarity = np.zeros(true.shape[0])
    match = np.full(true.shape[0], -1)
    similarity[rows], match[rows] = cosine[rows, cols], cols
    return Bunch(similarity=similarity, match=match, mean_similarity=float(similarity.mean()))
