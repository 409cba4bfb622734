"""Online learning: mini-batches in passes, each coded and then learned from by a stochastic step.

`learn` (``STC.fit`` with ``learning_method="online"``) makes ``n_passes``
passes over the documents in shuffled mini-batches, `learn_stream`
(``STC.fit_stream``) over an iterable of batches as given (the first pass's
first ones joined into one step: `join_first_batches`), and
`learn_batch` (``STC.partial_fit``, and every batch of the others) learns
from one batch by the `LearningSteps`' batch step, by default STC's
(`stc_batch_step`: `stc._learning.stochastic_dictionary.learn_from_batch`, the batch
coded, then the stochastic dictionary step). The state carried from batch to batch
(`OnlineState`) is the estimator's online attributes, so ``partial_fit``
goes on after a fit, a save and a load. `run_passes` drives the passes, here
and for a dask array's rounds (`stc._learning.learners.dask_online`): the topic
averaging of the last pass, the progress lines, Ctrl-C and the objective
per pass.
"""
import sys
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from stc._learning.dictionary import resolved_init, starting_topics
from stc._learning.learners import LearnedTopics, LearningSteps
from stc._learning.progress import StopRequest
from stc._learning.stochastic_dictionary import (OnlineStatistics, introduce_new_terms,
                                                 learn_from_batch, learning_rate)


@dataclass
class OnlineState:
    """What online learning carries from one mini-batch to the next."""

    components: np.ndarray = None         # topics (K, N); None before the first batch
    statistics: OnlineStatistics = None   # running statistics; None until an online step
    n_batch_iter: int = 0                 # batches learned from
    term_counts: object = 0.0             # tokens of each term in those batches


def writable(array):
    """``array`` as a writable C-contiguous float64 array (a copy only if it is not one)."""
    return np.require(array, dtype=np.float64, requirements=["C", "W"])


def learn_batch(problem, batch, options, steps=None, *, state, rng, pass_number=1):
    """Learn from one mini-batch by ``steps``' batch step (default: `stc_batch_step`).

    ``batch`` is CSR counts, or what ``steps`` reads (MedSTC: the pair
    (counts, class indices)); ``state`` (an `OnlineState`) is updated. The
    first batch draws the starting topics from ``rng``. Returns the batch's
    `BatchOutcome`.
    """
    step = None if steps is None else steps.batch_step()
    if step is None:
        return stc_batch_step(problem, batch, state, options, rng, pass_number)
    return step(problem, batch, state, options, rng, pass_number)


def stc_batch_step(problem, X, state, options, rng, pass_number=1):
    """STC's step of the CSR batch ``X``: coded, then the stochastic dictionary step.

    ``state``'s arrays are updated in place from the second batch on (a
    loaded model's arrays are copied once if they are not writable
    C-contiguous float64). Returns the `BatchOutcome`.
    """
    statistics, rho = start_batch(X, state, options, rng, count_terms=pass_number == 1)
    state.components, state.statistics, outcome = learn_from_batch(
        problem, X, state.components, statistics, rho, max_steps=options.dictionary_max_iter,
        n_jobs=options.n_jobs)
    return outcome


def start_batch(X, state, options, rng, count_terms=True):
    """What every batch's step does first: topics ready for ``X``'s terms, the batch counted.

    ``count_terms``: add the batch's tokens to ``state.term_counts`` (the
    passes after the first see the same documents again: they are not
    counted, so that `STC.score`'s background is the corpus's frequencies
    whatever the number of passes). Returns the running statistics
    (writable, or None before the first step) and the batch's weight rho_t.
    """
    if state.components is None:
        state.components = online_start(X, options, rng)
    state.components = introduce_new_terms(writable(state.components), X)
    if count_terms:
        state.term_counts = state.term_counts + np.bincount(X.indices, weights=X.data,
                                                            minlength=X.shape[1])
    statistics = state.statistics
    if statistics is not None:
        statistics = OnlineStatistics(writable(statistics.responsibilities),
                                      writable(statistics.code_sums), statistics.multipliers)
    state.n_batch_iter += 1
    return statistics, learning_rate(state.n_batch_iter, options.learning_offset,
                                     options.learning_decay)


def online_start(X, options, rng):
    """The starting topics of online learning, from the CSR counts ``X`` it has first.

    By ``options.init`` (`resolved_init`, as batch learning resolves "auto"),
    seeded by ``rng``: the draws from the first mini-batch, NNDSVD of the
    whole corpus for an in-memory ``fit`` (as batch learning starts) and of
    the first mini-batch for ``fit_stream``, ``partial_fit`` and a dask array.
    """
    init = resolved_init(options.init, options.n_topics)
    return starting_topics(X, options.n_topics, init, rng)


def learn(problem, X, options, steps=None, *, state=None):
    """``options.n_passes`` passes over validated CSR ``X`` in shuffled mini-batches.

    With ``init="nndsvd"`` the topics start from the whole of ``X``
    (`online_start`), else from the first batch. Each pass draws a new order
    from ``options.random_state``, which also seeds the start. The first
    pass's first batches make one step, as `learn_stream` joins them
    (`first_batches_joined`; not MedSTC's). With ``steps.labels`` (MedSTC)
    each batch is the pair (rows of X, their labels). Returns the
    `LearnedTopics`.
    """
    steps = LearningSteps() if steps is None else steps
    rng = check_random_state(options.random_state)
    state = OnlineState() if state is None else state
    if state.components is None and resolved_init(options.init, options.n_topics) == "nndsvd":
        state.components = online_start(X, options, rng)  # else drawn from the first batch
    n_batches = -(-X.shape[0] // options.batch_size)
    joined = (first_batches_joined(options.batch_size, n_batches, options.n_topics)
              if steps.joins_first_batches else 1)

    def shuffled_batches(pass_number):
        order = rng.permutation(X.shape[0])
        for first, stop in batch_bounds(X.shape[0], options.batch_size,
                                        joined if pass_number == 1 else 1):
            rows = order[first:stop]
            batch = rows_of(X, rows)
            yield batch if steps.labels is None else (batch, steps.labels[rows])

    return _passes(lambda: problem, shuffled_batches, n_batches, state, options, rng, steps,
                   first_pass_fewer=joined - 1)


def batch_bounds(n_rows, batch_size, joined=1):
    """(first, stop) rows of a pass's batches over ``n_rows``, the first ``joined`` as one."""
    stops = list(range(joined * batch_size, n_rows, batch_size)) + [n_rows]
    return list(zip([0] + stops[:-1], stops))


def first_batches_joined(batch_size, n_batches, n_topics):
    """How many of the first pass's first batches of ``batch_size`` documents (``n_batches``
    in all) make its first step (`first_step_batches`; a short last batch joins only when
    every batch does)."""
    return first_step_batches(batch_size * np.arange(1, n_batches + 1), n_topics)


def first_step_batches(ends, n_topics):
    """How many of the first batches the first step joins, given ``ends``, the documents
    the batches hold from the first up to each one: as `join_first_batches` joins a
    stream's, the fewest that hold `first_step_documents` (at least 1, at most all)."""
    held = np.searchsorted(np.asarray(ends), first_step_documents(n_topics))
    return int(min(held + 1, len(ends)))


def rows_of(X, rows):
    """Rows ``rows`` of CSR ``X`` as a CSR batch with the kernels' int32 indices."""
    batch = X[rows]
    batch.indices = batch.indices.astype(np.int32, copy=False)
    batch.indptr = batch.indptr.astype(np.int32, copy=False)
    return batch


# fit_stream's first step learns from its first batches joined, until they hold
# `first_step_documents` (online learning on a dask array mirrors it with its first
# rounds): the first steps weigh most, and from a few hundred documents they fixed topics
# that the later batches did not undo. Chosen on validation corpora
# (benchmarks/results_online_diagnosis.md, "fit_stream's first step"): 4,000 documents
# served K = 20 and 50 best (8,000 did worse at K = 50), 16,000 K = 100 (4,000 and 8,000
# did worse); between them the size grows with K squared, and it stops at the largest
# size measured. Only the first pass joins: later ones keep every step, so that a small
# corpus still takes several steps a pass.
FIRST_STEP_DOCUMENTS = 4000
FIRST_STEP_FROM_TOPICS = 50
FIRST_STEP_MAX_DOCUMENTS = 16000


def first_step_documents(n_topics):
    """The documents ``fit_stream``'s first step holds at least, for ``n_topics`` topics:
    4,000 up to 50 topics, times (K / 50) ** 2 above, at most 16,000 (from K = 100)."""
    growth = max(1.0, n_topics / FIRST_STEP_FROM_TOPICS) ** 2
    return int(min(FIRST_STEP_DOCUMENTS * growth, FIRST_STEP_MAX_DOCUMENTS))


def learn_stream(problem_of, make_batches, options, steps=None, *, n_batches=None,
                 state=None, first_words=None):
    """``options.n_passes`` passes over the batches ``make_batches()`` yields, in their order.

    ``problem_of()`` gives each batch's coding problem: with rho in relative
    units it is known only once the first step is read (``first_words``, if
    given, is called with the counts of the first step with a word, before it
    is learned from). ``n_batches``, the batches per pass (for the topic
    averaging), may be None: it is then counted in the first pass. The first
    pass's first batches are joined into one step (`join_first_batches`,
    unless ``steps.joins_first_batches`` is False: MedSTC's);
    every step is learned from by ``steps``' batch step (`learn_batch`;
    MedSTC's batches are (X, labels) pairs). Returns the `LearnedTopics`.
    """
    joins = steps is None or steps.joins_first_batches
    first_pass = join_first_batches(make_batches(),
                                    first_step_documents(options.n_topics) if joins else 0)
    joined = first_pass.send(None)  # read ahead now: the first pass's steps are then known

    def with_first_words(batches):
        nonlocal first_words
        for batch in batches:
            if first_words is not None and counts_of(batch).nnz:
                first_words(counts_of(batch))
                first_words = None
            yield batch

    def batches(pass_number):
        return with_first_words(first_pass) if pass_number == 1 else make_batches()

    return _passes(problem_of, batches, n_batches, OnlineState() if state is None else state,
                   options, check_random_state(options.random_state), steps,
                   first_pass_fewer=max(joined - 1, 0))


def counts_of(batch):
    """The counts of a batch (MedSTC's batches are (counts, labels) pairs)."""
    return batch[0] if isinstance(batch, tuple) else batch


def join_first_batches(batches, documents):
    """A generator of ``batches`` with the first ones joined until they hold ``documents``
    documents (or the batches end); the others as they come.

    Primed with ``send(None)``, it reads the first batches ahead and returns
    how many it joined (0 for no batch).
    """
    batches = iter(batches)
    ahead, n_docs = [], 0
    for batch in batches:
        ahead.append(batch)
        n_docs += counts_of(batch).shape[0]
        if n_docs >= documents:
            break
    yield len(ahead)
    if len(ahead) == 1:
        yield ahead[0]
    elif ahead:
        counts = sp.vstack([counts_of(batch) for batch in ahead], format="csr")
        counts.indices = counts.indices.astype(np.int32, copy=False)  # the kernels' indices
        counts.indptr = counts.indptr.astype(np.int32, copy=False)
        if isinstance(ahead[0], tuple):  # MedSTC: the labels follow their rows
            yield counts, np.concatenate([batch[1] for batch in ahead])
        else:
            yield counts
    yield from batches


def _passes(problem_of, make_batches, n_batches, state, options, rng, steps,
            first_pass_fewer=0):
    """The passes of `learn` and `learn_stream` over ``make_batches(pass_number)``."""
    def learn_from(batch, pass_number):
        if counts_of(batch).nnz == 0:
            return None  # no word to learn from: a step would only shrink the statistics
        return learn_batch(problem_of(), batch, options, steps, state=state, rng=rng,
                           pass_number=pass_number)

    return run_passes(make_batches, learn_from, state, n_batches, options, first_pass_fewer)


def run_passes(make_batches, learn_from, state, n_batches, options, first_pass_fewer=0):
    """``options.n_passes`` passes of ``learn_from`` over the batches; returns the `LearnedTopics`.

    ``make_batches(pass_number)`` yields a pass's batches (any objects);
    ``learn_from(batch, pass_number)`` learns from one, updating the
    `OnlineState` ``state``, and returns its `BatchOutcome` (None: the batch
    had no document and is skipped). ``n_batches``, the batches per pass, may
    be None: it is then counted in the first pass; the first pass has
    ``first_pass_fewer`` fewer (its first ones joined into one step). With
    ``options.topic_averaging`` the topics end as the mean of those after
    each of the last batches of the last pass (`TopicAverage`). A Ctrl-C
    ends the passes after the current batch.
    """
    progress = (PassProgress(options.n_passes, n_batches, every_batch=options.verbose >= 2)
                if options.verbose else None)
    pass_objectives, capped = [], 0
    average = TopicAverage()
    with StopRequest() as stop:
        for pass_number in range(1, options.n_passes + 1):
            total = 0.0
            in_pass = (None if n_batches is None
                       else n_batches - (first_pass_fewer if pass_number == 1 else 0))
            first_averaged = (averaging_start(in_pass, options.topic_averaging)
                              if pass_number == options.n_passes else None)
            for batch_number, batch in enumerate(make_batches(pass_number), start=1):
                outcome = learn_from(batch, pass_number)
                if outcome is None:
                    continue
                if first_averaged is not None and batch_number >= first_averaged:
                    average.add(state.components)
                total += outcome.objective
                capped += outcome.capped_documents
                if progress is not None:
                    progress(pass_number, batch_number, outcome)
                if stop.requested:
                    break
            if state.components is None:
                raise ValueError("batches yielded no word to learn from: every document "
                                 "of every batch is empty")
            if n_batches is None:  # a stream: its length is known after one pass
                n_batches = batch_number + first_pass_fewer
            pass_objectives.append(total)
            if progress is not None:
                progress.end_pass(pass_number, batch_number, total)
            if stop.requested:
                break
    if average.count:
        state.components = average.mean()
    # A fixed number of passes: there is no convergence test to fail.
    return LearnedTopics(state.components, state.term_counts, np.asarray(pass_objectives),
                         len(pass_objectives), stop.requested, converged=True,
                         capped_documents=capped, online=state)


class PassProgress:
    """Progress of online learning on stderr: pass, batch, objective, elapsed and time left.

    About ten lines per pass (every batch with ``every_batch``) and one at the
    end of each pass. ``n_batches`` per pass may be None (a stream of unknown
    length: the time left is then estimated from the first pass on).
    """

    def __init__(self, n_passes, n_batches, stream=None, every_batch=False):
        self.n_passes, self.n_batches = n_passes, n_batches
        self.stream = sys.stderr if stream is None else stream
        self.every = 1 if every_batch or not n_batches else max(1, n_batches // 10)
        self.start = time.perf_counter()
        self.window_objective, self.window_docs = 0.0, 0

    def _time_left(self, pass_number, batch_number):
        if self.n_batches is None:
            return "?"
        total = self.n_passes * self.n_batches
        done = (pass_number - 1) * self.n_batches + batch_number
        elapsed = time.perf_counter() - self.start
        return f"{elapsed * (total - done) / max(done, 1):.0f}s"

    def __call__(self, pass_number, batch_number, outcome):
        self.window_objective += outcome.objective
        self.window_docs += outcome.n_docs
        if batch_number % self.every:
            return
        of = "" if self.n_batches is None else f"/{self.n_batches}"
        print(f"pass {pass_number}/{self.n_passes}  batch {batch_number:4d}{of}  objective per "
              f"document {self.window_objective / max(self.window_docs, 1):.6e}  elapsed "
              f"{time.perf_counter() - self.start:.1f}s  left ~"
              f"{self._time_left(pass_number, batch_number)}", file=self.stream, flush=True)
        self.window_objective, self.window_docs = 0.0, 0

    def end_pass(self, pass_number, n_batches, total):
        if self.n_batches is None:
            self.n_batches = n_batches
        print(f"pass {pass_number}/{self.n_passes} done  objective {total:.6e}  elapsed "
              f"{time.perf_counter() - self.start:.1f}s  left ~"
              f"{self._time_left(pass_number, self.n_batches)}", file=self.stream, flush=True)


class TopicAverage:
    """Mean of the topics over the last batches of the last pass (Polyak-Ruppert averaging).

    The stochastic step's topics jitter from batch to batch with the batches'
    noise; their mean over the last batches evens it out
    (``benchmarks/results_online_tuning.md``). Holds one (K, N) array.
    """

    def __init__(self):
        self.total, self.count = None, 0

    def add(self, beta):
        if self.total is None:
            self.total = np.array(beta, dtype=np.float64, copy=True)
        else:
            self.total += beta
        self.count += 1

    def mean(self):
        """The mean topics (the running sum is divided in place and handed over)."""
        mean, self.total = self.total, None
        mean /= self.count
        return mean


def averaging_start(n_batches, share):
    """Position (from 1) of the first batch of the last pass whose topics enter the average.

    The last ceil(share x n_batches) batches are averaged; None when
    ``share`` is 0 or the number of batches per pass is unknown.
    """
    if not n_batches or not share > 0:
        return None
    return n_batches - int(np.ceil(share * n_batches)) + 1
