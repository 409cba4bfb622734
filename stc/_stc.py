"""The unsupervised estimator `STC` (paper Sec. 2)."""
import time

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from stc._validation import as_count_matrix, check_choice, check_number
from stc.coding import initial_codes, sparse_code, start_value_in_domain
from stc.dictionary import CorpusLayout, update_dictionary
from stc.losses import get_loss


def initial_dictionary(X, n_topics, random_state, docs_per_topic=5, corpus_share=0.2):
    """Distinct starting topics, seeded by ``random_state``.

    Topic k is a few random documents' word distribution mixed with a
    randomly perturbed corpus distribution (weight ``corpus_share``), so
    every observed term has positive weight in every topic (no infinite
    Poisson loss at the start) while topics differ. Starting from identical
    uniform topics, as in the paper, the topics stay nearly identical on
    20 Newsgroups.
    """
    rng = check_random_state(random_state)
    n_docs, n_features = X.shape
    corpus = np.asarray(X.sum(axis=0)).ravel()
    total = corpus.sum()
    beta = np.zeros((n_topics, n_features))
    if total <= 0:
        beta[:] = 1.0 / n_features
        return beta
    corpus = corpus / total
    nonempty = np.flatnonzero(np.diff(X.indptr) > 0)
    for k in range(n_topics):
        docs = rng.choice(nonempty, size=min(docs_per_topic, nonempty.size), replace=False)
        sample = np.asarray(X[docs].sum(axis=0)).ravel()
        noise = rng.uniform(0.5, 1.5, size=n_features)
        beta[k] = (1.0 - corpus_share) * sample / sample.sum() + corpus_share * corpus * noise
        beta[k] /= beta[k].sum()
    return beta


def word_code_sparsity(codes):
    """Share of zero entries in the word codes, averaged over observed words."""
    return float(np.mean(codes == 0)) if codes.size else 0.0


class STC(TransformerMixin, BaseEstimator):
    """Sparse Topical Coding (Zhu & Xing, UAI 2011), problem (2).

    Parameters
    ----------
    n_topics : int, default=20
        Number of topics K.
    lambda_ : float, default=0.1
        Weight of the penalty on document codes theta.
    gamma : float or None, default=None
        Weight of the coupling gamma * ||s_n - theta||^2; None means ``lambda_``.
    rho : float, default=0.01
        Weight of the penalty on word codes s.
    loss : str or loss instance, default="poisson"
        Registered loss name (``stc.losses.registered_losses()``) or instance.
    theta_penalty : {"l2", "l1"}, default="l2"
        ``"l1"``: truncated averaging (eq. 3); ``"l2"``: footnote 3 (the
        paper's reported setting).
    code_penalty : {"l1", "l2"}, default="l1"
        ``"l1"``: STC; ``"l2"``: the paper's gaussSTC.
    max_iter : int, default=100
        Maximum number of outer iterations (coding + dictionary step).
    tol : float, default=1e-4
        Stop when the relative decrease of the objective falls under ``tol``.
    inner_max_iter : int, default=50
        Maximum coding sweeps per document per call.
    inner_tol : float, default=1e-4
        Stop coding a document when the relative decrease of its objective
        falls under ``inner_tol``.
    dictionary_max_iter : int, default=3
        Maximum dictionary steps per outer iteration (on 20 Newsgroups, K = 50,
        3 fits faster than 10 and reaches a slightly lower objective).
    n_jobs : int or None, default=None
        Threads for the kernels (None: 1, -1: all). Results do not depend on it.
    random_state : int, RandomState or None, default=None
        Seeds the initial dictionary.
    verbose : int, default=0
        Print objective, sparsity and time per outer iteration when > 0.

    Attributes
    ----------
    components_ : ndarray (n_topics, n_features)
        Topics beta, each on the probability simplex.
    objective_ : ndarray of shape (n_iter,)
        Objective (2) after each outer iteration (never increases).
    n_iter_ : int
        Number of outer iterations run.
    n_features_in_ : int
        Number of terms (columns of ``X``) seen in ``fit``.
    fit_time_ : float
        Seconds spent in the last call to ``fit``.
    """

    def __init__(self, n_topics=20, *, lambda_=0.1, gamma=None, rho=0.01, loss="poisson",
                 theta_penalty="l2", code_penalty="l1", max_iter=100, tol=1e-4,
                 inner_max_iter=50, inner_tol=1e-4, dictionary_max_iter=3, n_jobs=None,
                 random_state=None, verbose=0):
        self.n_topics = n_topics
        self.lambda_ = lambda_
        self.gamma = gamma
        self.rho = rho
        self.loss = loss
        self.theta_penalty = theta_penalty
        self.code_penalty = code_penalty
        self.max_iter = max_iter
        self.tol = tol
        self.inner_max_iter = inner_max_iter
        self.inner_tol = inner_tol
        self.dictionary_max_iter = dictionary_max_iter
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # ---- parameter and input checks

    def _check_params(self):
        check_number(self.n_topics, "n_topics", low=1, integer=True)
        check_number(self.lambda_, "lambda_", low=0)
        if self.gamma is not None:
            check_number(self.gamma, "gamma", low=0, low_inclusive=False)
        elif not self.lambda_ > 0:
            raise ValueError("gamma defaults to lambda_, which is 0: set gamma > 0")
        check_number(self.rho, "rho", low=0)
        check_choice(self.theta_penalty, "theta_penalty", {"l1", "l2"})
        check_choice(self.code_penalty, "code_penalty", {"l1", "l2"})
        check_number(self.max_iter, "max_iter", low=1, integer=True)
        check_number(self.tol, "tol", low=0)
        check_number(self.inner_max_iter, "inner_max_iter", low=1, integer=True)
        check_number(self.inner_tol, "inner_tol", low=0)
        check_number(self.dictionary_max_iter, "dictionary_max_iter", low=1, integer=True)
        if self.n_jobs is not None:
            check_number(self.n_jobs, "n_jobs", integer=True)
            if self.n_jobs == 0:
                raise ValueError("n_jobs must be a positive integer, -1 or None, got 0")
        return get_loss(self.loss)

    def _coding_params(self):
        return dict(lam=self.lambda_, gamma=self.lambda_ if self.gamma is None else self.gamma,
                    rho=self.rho, theta_penalty=self.theta_penalty,
                    code_penalty=self.code_penalty)

    @property
    def _loss(self):
        return get_loss(self.loss)

    def _validate_X(self, X, reset, loss=None):
        loss = get_loss(self.loss) if loss is None else loss
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=reset)
        return as_count_matrix(sp.csr_matrix(X), loss)

    def __sklearn_is_fitted__(self):
        # `lambda_` ends in an underscore like a fitted attribute; say explicitly.
        return hasattr(self, "components_")

    # ---- fitting

    def fit(self, X, y=None):
        """Learn the topics from the document-term count matrix ``X``."""
        start = time.perf_counter()
        loss = self._check_params()
        X = self._validate_X(X, reset=True, loss=loss)
        self._fit(X, loss)
        self.fit_time_ = time.perf_counter() - start
        return self

    def _fit(self, X, loss, supervisor=None):
        """Outer loop: code all documents (warm start), then update the dictionary.

        ``supervisor`` (MedSTC) plugs in the supervised parts: the linear term
        of the document-code step (`linear_term`), the documents that step
        codes (`documents_to_code`), a check of the new codes
        against the supervised objective (`safeguard`), and the classifier
        step after the dictionary step (`classifier_step`, which returns the
        objective terms it adds).
        """
        params = self._coding_params()
        beta = initial_dictionary(X, self.n_topics, self.random_state)
        codes, theta = initial_codes(X, self.n_topics, start_value_in_domain(loss, X, beta))
        layout = CorpusLayout(X)
        saved = None  # buffers for the codes before a supervised coding step (reused)
        objective = []
        start = time.perf_counter()
        for iteration in range(1, self.max_iter + 1):
            theta_linear = None
            if supervisor is not None:
                theta_linear = supervisor.linear_term(theta)
                if theta_linear is not None:
                    if saved is None:
                        saved = (np.empty_like(codes), np.empty_like(theta))
                    np.copyto(saved[0], codes)
                    np.copyto(saved[1], theta)
            start_values, active = None, None
            if theta_linear is not None:
                start_values = np.empty((X.shape[0], 2))
                active = supervisor.documents_to_code(iteration)
            doc_obj, doc_loss, _, means = sparse_code(
                loss, X, beta, codes, theta, max_iter=self.inner_max_iter,
                tol=self.inner_tol, theta_linear=theta_linear, n_jobs=self.n_jobs,
                start_values=start_values, active=active, **params)
            if theta_linear is not None:  # the linear term is not part of problem (2)
                doc_obj = doc_obj + np.sum(theta_linear * theta, axis=1)
                old_obj = start_values[:, 0] + np.sum(theta_linear * saved[1], axis=1)
                doc_obj, doc_loss = supervisor.safeguard(
                    X, beta, saved, codes, theta, means, doc_obj, doc_loss,
                    old_obj, start_values[:, 1])
            penalties = float(np.sum(doc_obj) - np.sum(doc_loss))
            beta, recon, _ = update_dictionary(loss, layout, codes, beta,
                                               max_iter=self.dictionary_max_iter,
                                               n_jobs=self.n_jobs, means=means)
            value = recon + penalties
            if supervisor is not None:
                value += supervisor.classifier_step(theta, iteration)
            objective.append(value)
            if self.verbose:
                print(f"iter {iteration:3d}  objective {objective[-1]:.6e}  "
                      f"word-code sparsity {word_code_sparsity(codes):.3f}  "
                      f"doc-code sparsity {float(np.mean(theta == 0)):.3f}  "
                      f"time {time.perf_counter() - start:.1f}s")
            if len(objective) > 1 and objective[-2] - objective[-1] <= self.tol * abs(objective[-1]):
                break
        self.components_ = beta
        self.objective_ = np.asarray(objective)
        self.n_iter_ = len(objective)
        return self

    # ---- coding new documents

    def _code(self, X, all_entries=True):
        """Code documents with the fitted topics; returns (theta, codes, objective, X).

        With ``all_entries`` the word codes have one row per stored entry of
        X (zero rows for terms the topics never saw); otherwise only the
        coded entries' rows are returned, which saves a copy when only theta
        or the objective is needed.
        """
        check_is_fitted(self, "components_")
        loss = self._check_params()
        X = self._validate_X(X, reset=False, loss=loss)
        beta = self.components_
        # Terms the topics give no weight (never seen in training) carry no
        # information: code the documents without them; their word codes are 0.
        known = beta.sum(axis=0) > 0
        keep = known[X.indices]
        Xk = X
        if not np.all(keep):
            kept_before = np.concatenate([[0], np.cumsum(keep)]).astype(np.int32)
            Xk = sp.csr_matrix((X.data[keep], X.indices[keep], kept_before[X.indptr]),
                               shape=X.shape, copy=False)
            Xk.indices = Xk.indices.astype(np.int32, copy=False)
            Xk.indptr = Xk.indptr.astype(np.int32, copy=False)
        # Coding new documents needs only theta: keep the word codes (an
        # (nnz, K) array) only when they are asked for.
        # Every document starts at the best single value for all its codes
        # (far closer to its optimum than training's all-ones start when the
        # penalties are large, e.g. MedSTC's lambda_ = 10).
        codes = np.empty((Xk.nnz, beta.shape[0])) if all_entries else None
        theta = np.empty((Xk.shape[0], beta.shape[0]))
        doc_obj, _, _, _ = sparse_code(loss, Xk, beta, codes, theta,
                                       max_iter=self.inner_max_iter, tol=self.inner_tol,
                                       n_jobs=self.n_jobs, start_value="auto",
                                       **self._coding_params())
        if all_entries and Xk is not X:
            full = np.zeros((X.nnz, beta.shape[0]))
            full[np.flatnonzero(keep)] = codes
            codes = full
        return theta, codes, doc_obj, X

    def transform(self, X):
        """Document codes theta, shape (n_docs, n_topics)."""
        return self._code(X, all_entries=False)[0]

    def fit_transform(self, X, y=None):
        """Fit, then code ``X`` with the final topics (same as fit(X).transform(X))."""
        return self.fit(X).transform(X)

    def word_codes(self, X):
        """Word codes s as CSR of shape (X.nnz, n_topics).

        Row i is the code of the i-th stored non-zero of X in CSR order with
        sorted indices (after summing duplicates and dropping explicit zeros).
        """
        codes = self._code(X)[1]
        return sp.csr_matrix(codes)

    def score(self, X, y=None):
        """Minus objective (2) of coding ``X`` with the fitted topics (higher is better)."""
        return -float(np.sum(self._code(X, all_entries=False)[2]))

    def top_words(self, vocabulary, n=10):
        """The ``n`` highest-weight terms of every topic, as lists of strings."""
        check_is_fitted(self, "components_")
        vocabulary = np.asarray(vocabulary)
        if vocabulary.shape != (self.components_.shape[1],):
            raise ValueError(f"vocabulary must have {self.components_.shape[1]} terms, "
                             f"got shape {vocabulary.shape}")
        check_number(n, "n", low=1, integer=True)
        order = np.argsort(-self.components_, axis=1, kind="stable")[:, :n]
        return [list(vocabulary[row]) for row in order]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        return tags

    def save(self, path, *, vocabulary=None, text_options=None):
        """Write the fitted model to one portable file; `stc.load` reads it back.

        The file (a zip archive numpy opens as an .npz) holds the parameters,
        the fitted arrays and JSON metadata with a checksum; loading runs no
        code from it. ``vocabulary`` (the term of each column) and
        ``text_options`` (the tokenisation of an `stc.io` text corpus)
        default to the model's ``vocabulary_`` and ``text_options_``.
        """
        from stc._persistence import save_model

        save_model(self, path, vocabulary=vocabulary, text_options=text_options)
