"""The unsupervised estimator `STC` (paper Sec. 2): validation, then the learner that fits.

`STC` checks its parameters and data, builds the coding problem
(`stc._learning.coding.CodingProblem`) and hands both to one learner of
`stc._learning.learners` (batch or online, in memory or on a dask array), whose
result it keeps as its fitted attributes.
"""
import numbers
import time
from dataclasses import fields

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from stc._estimators.persistence import register_estimator, save_model
from stc._learning.coding import CodingProblem, code_known_terms
from stc._learning.completion import check_scorable, held_out_score, split_entries
from stc._learning.dictionary import check_topics_fit_in_memory
from stc._learning.learners import (LearningOptions, LearningSteps, batch, dask_batch, dask_online,
                                    online)
from stc._learning.learners.partitions import (DeferredProblem, check_dask_loss, current_client,
                                               is_dask_array, refuse_dask_array)
from stc._learning.progress import count_capped, warn_if_unfinished
from stc._learning.stochastic_dictionary import (OnlineStatistics, auto_batch_size,
                                                 check_online_loss)
from stc._utils.validation import (N_JOBS, RANDOM_STATE, InstanceOf, Interval, NoneValue, Options,
                                   check_fitted_topics, check_iterable, check_training_corpus,
                                   training_counts, validate_params, validated_counts,
                                   warn_dominant_count, warn_more_topics_than_data)
from stc.losses import CompiledLoss, PythonLoss, get_loss


# The learner of each way of learning: (a dask array?, learning_method) -> its module.
# A new way of learning is a module of stc._learning.learners and one line here.
LEARNERS = {(False, "batch"): batch, (False, "online"): online,
            (True, "batch"): dask_batch, (True, "online"): dask_online}

# Parameters of online learning (MedSTC, a subclass, has none of them).
ONLINE_PARAMETERS = ("learning_method", "batch_size", "learning_decay", "learning_offset",
                     "n_passes", "topic_averaging")


@register_estimator
class STC(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Sparse Topical Coding (Zhu & Xing, UAI 2011): topics, document codes and word codes.

    The model, objective (2) and how to choose the parameters: docs/user_guide.md.

    Parameters
    ----------
    n_topics : int, default=20
        Number of topics K.
    lambda_ : float, default=0.1
        Weight of the penalty on document codes theta.
    gamma : float or None, default=None
        Weight of the coupling gamma ||s_dn - theta_d||^2; None means ``lambda_``.
    rho : float, default=0.02
        Weight of the penalty on word codes, in ``rho_units``.
    rho_units : {"relative", "absolute"}, default="relative"
        Absolute: rho as in (2). Relative: (2) gets ``effective_rho_``.
    loss : str or loss instance, default="poisson"
        A name of ``stc.losses.registered_losses()`` or a loss instance.
    theta_penalty : {"l1", "l2"}, default="l1"
        Penalty on theta: l1 (truncated averaging, eq. 3) or squared l2 (footnote 3).
    code_penalty : {"l1", "l2"}, default="l1"
        Penalty on word codes: l1 is STC, l2 the paper's gaussSTC.
    max_iter : int, default=100
        Maximum outer iterations (coding step + dictionary step) of batch learning.
    tol : float, default=1e-4
        Batch learning stops when the objective's relative decrease is under ``tol``.
    inner_max_iter : int, default=50
        Maximum coding sweeps per document (fixed topics; batch learning if no sweep cap).
    inner_tol : float, default=1e-4
        Coding a document stops when its objective's relative decrease is under it.
    dictionary_max_iter : int, default=3
        Maximum dictionary steps per outer iteration or mini-batch.
    sweeps_per_iteration : int or None, default=1
        Batch learning's coding sweeps per document per outer iteration (None: the paper's).
    n_jobs : int or None, default=None
        Threads for the kernels (None: 1, -1: all). Results do not depend on it.
    random_state : int, RandomState or None, default=None
        Seeds the initial topics (and online learning's batch order).
    init : {"auto", "random", "nndsvd"}, default="auto"
        Document draws or NNDSVD; "auto": NNDSVD from 50 topics in batch learning.
    verbose : int, default=0
        When > 0, progress lines on stderr (docs/cli.md).
    learning_method : {"batch", "online"}, default="batch"
        The whole corpus per iteration, or mini-batches in passes (Poisson loss only).
    batch_size : int or "auto", default="auto"
        Documents per mini-batch of online ``fit``; "auto": 20 per topic, in [256, 4096].
        The first pass's first batches make one step, as in ``fit_stream``.
    learning_decay, learning_offset : float, default=0.51 and 1.0
        kappa and tau0 of the t-th batch's weight rho_t = (tau0 + t) ** -kappa.
    n_passes : int, default=3
        Passes over the documents of online ``fit`` and ``fit_stream``.
    topic_averaging : float in [0, 1], default=0.5
        Share of the last pass's batches whose topics are averaged (0: none).

    Attributes
    ----------
    components_ : ndarray of shape (n_topics, n_features)
        Topics beta, each on the probability simplex.
    objective_ : ndarray of shape (n_iter,)
        Objective (2) per outer iteration (batch), pass (online) or batch (``partial_fit``).
    n_iter_, n_batch_iter_ : int
        Outer iterations, passes or ``partial_fit`` batches; mini-batches learned from.
    online_responsibilities_, online_code_sums_, online_multipliers_ : ndarray
        Online learning's running statistics, saved so that ``partial_fit`` goes on.
    interrupted_, fit_time_ : bool, float
        Whether Ctrl-C stopped the fit (the model keeps what it learned); its seconds.
    term_counts_ : ndarray of shape (n_features,)
        Tokens of each term in the training documents, each document counted
        once however many passes online learning makes (``partial_fit`` adds
        every batch it is given); `score` smooths with these frequencies.
    n_features_in_ : int
        Number of terms (columns of ``X``) seen in ``fit``.
    count_scale_, effective_rho_ : float
        w_bar, the training data's mean stored count; the rho of (2) it gives.

    Examples
    --------
    >>> from stc import STC
    >>> from stc.datasets import load_newsgroups_split
    >>> train, test = load_newsgroups_split()
    >>> STC(n_topics=5, max_iter=10, random_state=0).fit(train.data).transform(test.data).shape
    (1081, 5)
    """

    _parameter_constraints = {
        "n_topics": [Interval(numbers.Integral, 1, None)],
        "lambda_": [Interval(numbers.Real, 0, None)],
        "gamma": [NoneValue(), Interval(numbers.Real, 0, None, closed="neither")],
        "rho": [Interval(numbers.Real, 0, None)],
        "rho_units": [Options("absolute", "relative")],
        "loss": [InstanceOf(str, CompiledLoss, PythonLoss,
                            description="a registered loss name or a loss instance")],
        "theta_penalty": [Options("l1", "l2")],
        "code_penalty": [Options("l1", "l2")],
        "max_iter": [Interval(numbers.Integral, 1, None)],
        "tol": [Interval(numbers.Real, 0, None)],
        "inner_max_iter": [Interval(numbers.Integral, 1, None)],
        "inner_tol": [Interval(numbers.Real, 0, None)],
        "dictionary_max_iter": [Interval(numbers.Integral, 1, None)],
        "sweeps_per_iteration": [NoneValue(), Interval(numbers.Integral, 1, None)],
        "n_jobs": N_JOBS,
        "random_state": RANDOM_STATE,
        "init": [Options("auto", "random", "nndsvd")],
        "verbose": [Interval(numbers.Integral, 0, None)],
        "learning_method": [Options("batch", "online")],
        "batch_size": [Options("auto"), Interval(numbers.Integral, 1, None)],
        "learning_decay": [Interval(numbers.Real, 0.5, 1.0, closed="right")],
        "learning_offset": [Interval(numbers.Real, 0, None)],
        "n_passes": [Interval(numbers.Integral, 1, None)],
        "topic_averaging": [Interval(numbers.Real, 0, 1, closed="both")],
    }

    # The defaults of rho, rho_units and theta_penalty are the knee of the sparsity-accuracy
    # frontier measured on 20 Newsgroups (benchmarks/results_sparsity.md); the paper's
    # setting is rho=0.01, rho_units="absolute", theta_penalty="l2".
    def __init__(self, n_topics=20, *, lambda_=0.1, gamma=None, rho=0.02, rho_units="relative",
                 loss="poisson", theta_penalty="l1", code_penalty="l1", max_iter=100, tol=1e-4,
                 inner_max_iter=50, inner_tol=1e-4, dictionary_max_iter=3,
                 sweeps_per_iteration=1, n_jobs=None, random_state=None, init="auto", verbose=0,
                 learning_method="batch", batch_size="auto", learning_decay=0.51,
                 learning_offset=1.0, n_passes=3, topic_averaging=0.5):
        self.n_topics = n_topics
        self.lambda_ = lambda_
        self.gamma = gamma
        self.rho = rho
        self.rho_units = rho_units
        self.loss = loss
        self.theta_penalty = theta_penalty
        self.code_penalty = code_penalty
        self.max_iter = max_iter
        self.tol = tol
        self.inner_max_iter = inner_max_iter
        self.inner_tol = inner_tol
        self.dictionary_max_iter = dictionary_max_iter
        self.sweeps_per_iteration = sweeps_per_iteration
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.init = init
        self.verbose = verbose
        self.learning_method = learning_method
        self.batch_size = batch_size
        self.learning_decay = learning_decay
        self.learning_offset = learning_offset
        self.n_passes = n_passes
        self.topic_averaging = topic_averaging

    # ---- parameter and input checks

    def _checked_loss(self):
        """Validate the parameters; return the loss object."""
        validate_params(self.get_params(deep=False), self._parameter_constraints,
                        type(self).__name__)
        if self.gamma is None and not self.lambda_ > 0:
            raise ValueError("gamma defaults to lambda_, which is 0: set gamma > 0")
        return get_loss(self.loss)

    def _objective_rho(self, gamma, count_scale=None):
        """rho of objective (2): ``rho`` itself, or in relative units times sqrt(2 gamma w_bar).

        w_bar is ``count_scale``, by default the fitted ``count_scale_``.
        """
        if self.rho_units == "absolute":
            return self.rho
        if count_scale is None:
            if not hasattr(self, "count_scale_"):
                raise ValueError("rho_units='relative' needs count_scale_, the mean count of "
                                 "the training data, which fit sets: fit the model first")
            count_scale = self.count_scale_
        return self.rho * np.sqrt(2.0 * gamma * count_scale)

    def _coding_problem(self, count_scale=None):
        """Validate the parameters; return the documents' `CodingProblem`.

        In relative units rho needs w_bar: ``count_scale``, by default
        ``count_scale_``, which `_set_count_scale` sets from the training data.
        """
        loss = self._checked_loss()
        gamma = self.lambda_ if self.gamma is None else self.gamma
        return CodingProblem(loss, self.lambda_, gamma, self._objective_rho(gamma, count_scale),
                             self.theta_penalty, self.code_penalty, self.inner_max_iter,
                             self.inner_tol)

    def _set_count_scale(self, X):
        """Record w_bar of the training data (validated CSR counts); return the coding problem."""
        if self.rho_units == "relative":
            warn_dominant_count(X.data)
        return self._use_count_scale(float(X.data.mean()))

    def _use_count_scale(self, count_scale):
        """Record w_bar and the rho of objective (2) it gives; return the coding problem."""
        self.count_scale_ = count_scale
        problem = self._coding_problem()
        self.effective_rho_ = float(problem.rho)
        return problem

    def _validate_X(self, X, reset, loss, copy=True, batch=False):
        return validated_counts(self, X, loss, reset=reset, copy=copy, batch=batch)

    @property
    def _n_features_out(self):
        """Number of output features (topics), for ``get_feature_names_out``."""
        return self.components_.shape[0]

    def __sklearn_is_fitted__(self):
        # `lambda_` ends in an underscore like a fitted attribute; say explicitly.
        return hasattr(self, "components_")

    def _check_start_of_partial_fit(self, first):
        """``n_topics`` where partial_fit goes on with the model's topics."""
        if not first and self.n_topics != self.components_.shape[0]:
            raise ValueError(f"n_topics={self.n_topics}, but the model has "
                             f"{self.components_.shape[0]} topics: partial_fit goes on with "
                             "them; fit a new model for another number of topics")

    def _check_init_of_dask_batch_learning(self):
        """Refuse init='nndsvd' for batch learning on a dask array (it starts from draws)."""
        if self.init == "nndsvd":
            raise ValueError("init='nndsvd' needs the counts in memory or online learning; "
                             "batch learning on a dask array starts from document draws: use "
                             "init='auto' or 'random', or learning_method='online'")

    def _learning_options(self):
        """The parameters the learners read, as `stc._learning.learners.LearningOptions`."""
        params = self.get_params(deep=False)
        if params["batch_size"] == "auto":
            params["batch_size"] = auto_batch_size(self.n_topics)
        return LearningOptions(**{field.name: params[field.name]
                                  for field in fields(LearningOptions) if field.name in params})

    # ---- fitting

    def fit(self, X, y=None):
        """Learn the topics from the document-term count matrix ``X``."""
        start = time.perf_counter()
        distributed = is_dask_array(X)
        X, problem = self._training_data(X, distributed)
        steps = self._learning_steps((distributed, self.learning_method), X, y, problem)
        self._forget_earlier_fit()
        fitted = LEARNERS[distributed, self.learning_method].learn(
            problem, X, self._learning_options(), steps)
        if distributed:  # w_bar was measured by the partitions
            self.n_features_in_ = X.shape[1]
            problem = self._use_count_scale(fitted.count_scale)
        self._store_fitted(fitted)
        steps.finish(self, fitted, X, problem)
        self.fit_time_ = time.perf_counter() - start
        return self

    def _training_data(self, X, distributed):
        """``X`` checked for its learner, and its coding problem.

        A matrix in memory is validated (online learning reads one in the
        counts' layout without copying it) and gives w_bar; a dask array is
        read by its partitions, so its problem is a `DeferredProblem`.
        """
        loss = self._checked_loss()
        online_learning = self.learning_method == "online"
        if distributed and not online_learning:
            self._check_init_of_dask_batch_learning()
        if distributed:
            check_dask_loss(loss)
            if len(X.shape) != 2 or not np.isfinite(X.shape[1]):
                raise ValueError(f"X must be a 2-D dask array with a known number of columns, "
                                 f"got shape {X.shape}; give its blocks known column chunks "
                                 "(e.g. X.compute_chunk_sizes())")
            current_client()  # no client: refused before anything of an earlier fit is dropped
            return X, DeferredProblem(loss, self._coding_problem)
        if online_learning:
            check_online_loss(loss)
        X, count_scale = training_counts(self, X, loss, copy=not online_learning)
        check_topics_fit_in_memory(self.n_topics, X.shape[1])  # refused before warned about
        warn_more_topics_than_data(self.n_topics, X)
        return X, self._use_count_scale(count_scale)

    def _learning_steps(self, way, X, y, problem, classes=None):
        """The `stc._learning.learners.LearningSteps` the learner runs: STC's (``y``, ``classes`` ignored).

        ``way`` is a key of `LEARNERS` (``fit``; called once ``X`` is checked:
        in memory validated, with the coding ``problem``; a dask array before
        its partitions exist, ``problem`` a `DeferredProblem`), ``"partial_fit"``
        (``X`` the validated batch) or ``"fit_stream"`` (``X`` the batches). A
        subclass that adds to the way of learning (MedSTC: its labels and
        classifier) returns its own steps.
        """
        return LearningSteps()

    def _store_fitted(self, fitted):
        """Keep a learner's `LearnedTopics` as the fitted attributes; warn if unfinished."""
        self.components_ = fitted.components
        self.term_counts_ = fitted.term_counts
        if fitted.online is not None:
            self._store_online_state(fitted.online)
        self.objective_ = fitted.objective
        self.n_iter_ = fitted.n_iter
        self.interrupted_ = fitted.interrupted
        warn_if_unfinished(self, fitted.converged, fitted.interrupted, fitted.capped_documents)

    def _forget_earlier_fit(self):
        # Every fresh start (fit, fit_stream; batch, online or Dask) drops the online
        # state and the vocabulary of an earlier fit or model file (set by stc.load or
        # the command line), which does not describe the new data. partial_fit continues
        # a model and keeps both.
        self._forget_online_state()
        for stale in ("vocabulary_", "text_options_"):
            self.__dict__.pop(stale, None)

    # ---- online learning

    def partial_fit(self, X, y=None, classes=None):
        """Learn from one mini-batch of documents ``X`` (online learning).

        The batch is coded with the current topics (the first call draws
        them from the batch, seeded by ``random_state``), then one
        stochastic dictionary step moves the topics, with the batch weighted
        by rho_t = (``learning_offset`` + t) ** -``learning_decay`` in the
        running statistics. Only the batch's word codes are held. Works
        after ``fit`` too (either learning method): the topics learned so far
        are the starting point. A batch without a word (every document empty)
        is skipped. Needs the Poisson loss. ``y`` and ``classes`` are
        `MedSTC`'s (ignored).
        """
        start = time.perf_counter()
        loss = self._checked_loss()
        check_online_loss(loss)
        first = not hasattr(self, "components_")
        self._check_start_of_partial_fit(first)
        refuse_dask_array(X, "partial_fit")
        X = self._validate_X(X, reset=first, loss=loss, batch=True)
        steps = self._learning_steps("partial_fit", X, y, None, classes)
        if first:
            check_training_corpus(X)
            self._forget_online_state()
            problem = self._set_count_scale(X)  # w_bar of the first batch
        elif X.nnz == 0:
            return self  # no word to learn from: a step would only shrink the statistics
        else:  # rho may have changed since the last batch: effective_rho_ follows
            problem = self._use_count_scale(self.count_scale_)
        state = self._online_state()
        outcome = online.learn_batch(problem, X if steps.labels is None else (X, steps.labels),
                                     self._learning_options(), steps, state=state,
                                     rng=check_random_state(self.random_state))
        self._store_online_state(state)
        steps.finish(self, outcome, X, problem)
        return self._record_batch(outcome, start)

    def _record_batch(self, outcome, start):
        """The fitted attributes after one `partial_fit` batch (its `BatchOutcome`); returns self."""
        # objective_ goes on where the last step was partial_fit's (n_iter_ counted batches;
        # a model file keeps both) or an online fit's of one batch a pass (pass = batch)
        previous = getattr(self, "objective_", None)
        per_batch = previous is not None and getattr(self, "n_iter_", -1) == self.n_batch_iter_ - 1
        self.objective_ = np.append(previous if per_batch else [], outcome.objective)
        self.n_iter_ = self.n_batch_iter_
        self.interrupted_ = False
        if outcome.capped_documents:
            warn_if_unfinished(self, True, False, outcome.capped_documents)
        self.fit_time_ = time.perf_counter() - start
        return self

    def fit_stream(self, batches, y=None, classes=None):
        """Learn the topics online from an iterable of document-term count batches.

        ``batches`` yields CSR matrices (or anything ``fit`` accepts) with the
        same number of columns, e.g. `stc.readers.iter_svmlight_batches` reading
        a file in chunks; the corpus need never be in memory at once. It must
        be iterable again (not a one-shot generator) when ``n_passes > 1``.
        Each batch goes to ``partial_fit``'s step, in the order given (no
        shuffling: shuffle the stream beforehand if it is sorted, e.g. by
        class), except that STC joins the first pass's first batches into one
        step until they hold 4,000 documents (up to 50 topics; (K / 50) ** 2 times
        as many above, at most 16,000; the topics start from them, and w_bar is
        theirs); a batch without a word is skipped. Starts afresh, like ``fit``.
        ``y`` is ignored; ``classes`` is `MedSTC`'s.
        """
        start = time.perf_counter()
        loss = self._checked_loss()
        check_online_loss(loss)
        steps = self._learning_steps("fit_stream", batches, y, None, classes)
        check_iterable(batches, steps.stream_items)
        if iter(batches) is batches and self.n_passes > 1:
            raise TypeError(f"batches is a one-shot iterator but n_passes={self.n_passes}: "
                            "pass an iterable that can be iterated again (e.g. a list or a "
                            "stc.readers batch reader) or set n_passes=1")
        for name in ("components_", "n_features_in_"):
            self.__dict__.pop(name, None)
        self._forget_earlier_fit()
        first = True

        def checked_counts(given):
            nonlocal first
            refuse_dask_array(given, "fit_stream")
            counts = self._validate_X(given, reset=first, loss=loss, batch=True)
            if counts.nnz:  # batches without a word are skipped
                first = False
            return counts

        def validated_batches():
            for number, given in enumerate(batches, start=1):
                yield steps.stream_batch(given, number, checked_counts)

        try:
            n_batches = len(batches)
        except TypeError:  # counted in the first pass
            n_batches = None
        # the problem is built per batch: rho in relative units needs w_bar of the first
        # step with words (its first batches joined)
        fitted = online.learn_stream(self._coding_problem, validated_batches,
                                     self._learning_options(), steps, n_batches=n_batches,
                                     first_words=self._set_count_scale)
        self._store_fitted(fitted)
        steps.finish(self, fitted, validated_batches, self._coding_problem())
        self.fit_time_ = time.perf_counter() - start
        return self

    def _forget_online_state(self):
        for name in ("components_", "online_responsibilities_", "online_code_sums_",
                     "n_batch_iter_", "online_multipliers_", "term_counts_"):
            if hasattr(self, name):
                delattr(self, name)

    def _online_state(self):
        """The `stc._learning.learners.online.OnlineState` the fitted attributes hold (none: a fresh one)."""
        statistics = None
        if hasattr(self, "online_responsibilities_"):
            statistics = OnlineStatistics(self.online_responsibilities_, self.online_code_sums_,
                                          getattr(self, "online_multipliers_", None))
        return online.OnlineState(getattr(self, "components_", None), statistics,
                                  getattr(self, "n_batch_iter_", 0),
                                  getattr(self, "term_counts_", 0.0))

    def _store_online_state(self, state):
        self.components_ = state.components
        self.term_counts_ = state.term_counts
        self.n_batch_iter_ = state.n_batch_iter
        self.online_responsibilities_ = state.statistics.responsibilities
        self.online_code_sums_ = state.statistics.code_sums
        self.online_multipliers_ = state.statistics.multipliers

    # ---- coding new documents

    def _code(self, X, keep_word_codes=False):
        """Code documents with the fitted topics; returns (theta, codes, `CodingResult`, X).

        With ``keep_word_codes`` the word codes have one row per stored entry
        of X (zero rows for terms the topics never saw); otherwise they are
        not kept, which saves an (nnz, K) array when only theta or the
        objective is needed.
        """
        check_is_fitted(self, "components_")
        check_fitted_topics(self)
        problem = self._coding_problem()
        X = self._validate_X(X, reset=False, loss=problem.loss)
        theta, codes, result = code_known_terms(problem, X, self.components_,
                                                keep_word_codes=keep_word_codes,
                                                n_jobs=self.n_jobs)
        capped = count_capped(result, problem)
        if capped:
            warn_if_unfinished(self, True, False, capped)
        return theta, codes, result, X

    def transform(self, X):
        """Document codes theta, shape (n_docs, n_topics)."""
        return self._code(X)[0]

    def fit_transform(self, X, y=None):
        """Fit, then code ``X`` with the final topics (same as fit(X).transform(X))."""
        return self.fit(X).transform(X)

    def word_codes(self, X):
        """Word codes s as CSR of shape (X.nnz, n_topics).

        Row i is the code of the i-th stored non-zero of X in CSR order with
        sorted indices (after summing duplicates and dropping explicit zeros).
        """
        return sp.csr_matrix(self._code(X, keep_word_codes=True)[1])

    def objective(self, X):
        """Objective (2) of coding ``X`` with the fitted topics (documents coded as by `transform`).

        The sum over the documents of their coding objectives: loss plus
        penalties. It depends on the penalties, so it does not compare
        models fitted with different ``lambda_``, ``gamma`` or ``rho``; `score`
        does.
        """
        return float(np.sum(self._code(X)[2].objective))

    def score(self, X, y=None):
        """Held-out score by document completion (higher is better); see `stc._learning.completion`.

        Each document's stored entries are split deterministically: in CSR
        order (sorted by term) the 1st, 3rd, 5th, ... are observed and the
        2nd, 4th, ... held out. The observed half is coded with the fitted
        topics (as `transform` codes it) and the held-out half is scored:

        * Poisson loss (``loss.score_kind == "multinomial"``): the mean
          log-likelihood per held-out token, sum_j w_j log p(n_j | d_j) /
          sum_j w_j, under the multinomial p(n | d) = 0.99 pi_d . beta_n +
          0.01 u_n. pi_d is the document's topic proportions
          theta_d / sum_k theta_dk with a pseudo-count of 0.007 added to every
          topic and renormalised (an exact zero says the observed half did not
          use a topic, not that the other half cannot); u is the training
          corpus's term frequencies with one added to every count
          (``term_counts_``): a term the topics give no weight keeps a small
          probability instead of log 0, and a document whose codes are all
          zero gets u itself. exp(-score) is the held-out perplexity;
        * any other loss: minus the mean loss per held-out entry at the mean
          theta_d . beta_n; the Bernoulli loss has no held-out score
          (``score_kind == "none"``; ValueError): its held-out entries, all 1
          for binary data, would favour codes that predict 1 everywhere.

        Unlike `objective` (which contains the penalties and so always
        favours the smallest ``lambda_`` and ``rho``), the score compares
        models fitted with different hyper-parameters, e.g. in
        ``GridSearchCV``. It does not depend on the thread count. ``y`` is
        ignored.
        """
        check_is_fitted(self, "components_")
        problem = self._coding_problem()
        check_scorable(problem.loss)
        X = self._validate_X(X, reset=False, loss=problem.loss)
        if not hasattr(self, "term_counts_"):
            raise ValueError("this model has no term_counts_ (a model file written before "
                             "score used them): fit it again to score held-out documents")
        observed, held_out = split_entries(X)
        if held_out.nnz == 0:
            raise ValueError("X has no document with two or more stored entries: score holds "
                             "out every second entry of each document, so there is nothing to "
                             "score")
        theta = self._code(observed)[0]
        return held_out_score(problem.loss, self.components_, self.term_counts_, theta,
                              held_out)

    def top_words(self, vocabulary, n=10):
        """The ``n`` highest-weight terms of every topic, as lists of strings."""
        check_is_fitted(self, "components_")
        vocabulary = np.asarray(vocabulary)
        if vocabulary.shape != (self.components_.shape[1],):
            raise ValueError(f"vocabulary must have {self.components_.shape[1]} terms, "
                             f"got shape {vocabulary.shape}")
        validate_params({"n": n}, {"n": [Interval(numbers.Integral, 1, None)]}, "top_words")
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
        ``text_options`` (the tokenisation of an `stc.readers` text corpus)
        default to the model's ``vocabulary_`` and ``text_options_``.
        """
        save_model(self, path, vocabulary=vocabulary, text_options=text_options)
