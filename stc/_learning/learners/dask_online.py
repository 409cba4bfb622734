"""Online learning over a dask array's partitions, on the current dask.distributed client.

The passes are those of `stc._learning.learners.online` (`run_passes`); a pass's
batches are rounds of `DaskOnlineTraining`, described at its class: every
round takes a slice of each partition, the workers code their slices and add
up their sums, and the client takes the stochastic dictionary step of
`stc._learning.stochastic_dictionary`.
w_bar is the whole array's, as for `stc._learning.learners.dask_batch`, so the coding
problem comes as a `stc._learning.learners.partitions.DeferredProblem`. Online MedSTC
runs the same rounds with its labels (its `stc._learning.learners.LearningSteps`:
`stc._learning.supervised.labelled_dask.LabelledDaskOnlineSteps`), as it runs
`stc._learning.learners.online` with its own batch step.
"""
import numbers
import time
from types import SimpleNamespace
from typing import NamedTuple, Optional

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from stc._learning.dictionary import (dictionary_from_draws, initial_dictionary_draws,
                                      resolved_init, starting_topics)
from stc._learning.learners import LearningSteps, online
from stc._learning.learners.online import OnlineState, run_passes
from stc._learning.learners.partitions import Partitions, current_client
from stc._learning.stochastic_dictionary import (BatchOutcome, code_batch,
                                                 introduce_terms_by_count, learning_rate,
                                                 stochastic_dictionary_step)


def learn(problem, X, options, steps=None):
    """Learn online from dask array ``X`` of CSR row blocks on the current client; returns the
    `LearnedTopics`.

    ``problem`` is a `DeferredProblem` (w_bar is known once the partitions
    are read). ``steps`` (a `LearningSteps`, by default STC's) is started
    with the `DaskOnlineTraining` once its partitions exist (online MedSTC
    sends each partition its labels); each round's slices are then coded by
    its ``coding_step`` and its ``extra_step`` follows the dictionary step
    (online MedSTC's classifier step).
    """
    training = DaskOnlineTraining(
        current_client(), X, problem.loss, problem.at, options.n_topics, options.random_state, options.n_jobs,
        batch_size=options.batch_size, learning_offset=options.learning_offset,
        learning_decay=options.learning_decay, max_steps=options.dictionary_max_iter,
        init=options.init, steps=LearningSteps() if steps is None else steps)
    return training.run(options)


# ---- the workers' side: each runs on the worker that holds its partition

def online_entropy(random_state):
    """The seed of the partitions' row orders, from ``random_state`` (an int is used as is)."""
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return int(random_state)
    return int(check_random_state(random_state).randint(2 ** 31 - 1))


def partition_order(n_rows, entropy, pass_number, partition_index):
    """The order in which a partition's rows are visited in one pass of online learning."""
    return np.random.default_rng([entropy, pass_number, partition_index]).permutation(n_rows)


def round_rows(n_rows, n_rounds, round_index):
    """(start, stop) of a partition's share of round ``round_index`` in its row order.

    Every round takes about n_rows / n_rounds rows from every partition, so a
    round's batch is spread over the partitions in proportion to their size.
    """
    return (round_index * n_rows) // n_rounds, ((round_index + 1) * n_rows) // n_rounds


def _size(partition):
    """(documents, stored entries, sum of the stored counts) of the partition."""
    return partition.X.shape[0], partition.X.nnz, float(np.sum(partition.X.data))


def slice_rows(partition, entropy, pass_number, partition_index, n_rounds, first_round,
               stop_round=None):
    """The partition's rows of rounds ``first_round`` to ``stop_round`` (excluded; by default
    the one round) in its `partition_order` (`round_rows`), in order.

    The pass's order is kept on the partition until the next pass.
    """
    key = (entropy, pass_number)
    if partition._order[0] != key:
        partition._order = (key, partition_order(partition.X.shape[0], entropy, pass_number,
                                                 partition_index))
    stop_round = first_round + 1 if stop_round is None else stop_round
    start = round_rows(partition.X.shape[0], n_rounds, first_round)[0]
    stop = round_rows(partition.X.shape[0], n_rounds, stop_round - 1)[1]
    return partition._order[1][start:stop]


def _online_select(partition, *selection):
    """Make the partition's rows of one round (``selection``: `slice_rows`'s) its pending slice.

    Returns what the client needs before coding it: (rows, terms, their
    token counts, rows of the non-empty documents). The slice is kept with
    its columns renumbered over its own terms (`BatchLayout`'s numbering).
    """
    partition.pending_rows = slice_rows(partition, *selection)
    X = partition.X[partition.pending_rows]
    present = np.bincount(X.indices, minlength=X.shape[1]) > 0
    terms = np.flatnonzero(present)
    counts = np.bincount(X.indices, weights=X.data, minlength=X.shape[1])[terms]
    position = np.cumsum(present, dtype=np.intc) - 1
    compact = sp.csr_matrix((X.data, position[X.indices], X.indptr.astype(np.intc)),
                            shape=(X.shape[0], terms.size))
    partition.pending = (compact, terms)
    return X.shape[0], terms, counts, np.flatnonzero(np.diff(X.indptr) > 0)


def _pending_slice(partition):
    """The pending slice: (its counts over its own terms, the terms)."""
    return partition.pending


def _online_row_sums(partition, rows_per_draw):
    """Term sums of the given rows of the pending slice, one (N,) array per draw."""
    X, terms = partition.pending
    sums = []
    for rows in rows_per_draw:
        total = np.zeros(partition.X.shape[1])
        total[terms] = np.asarray(X[rows].sum(axis=0)).ravel()
        sums.append(total)
    return sums


class RoundSums(NamedTuple):
    """MM sums of adjacent slices over their terms, as they travel up a round's tree.

    A worker's slice makes one (`_online_code`, `_online_responsibilities_at`);
    `merge_round_sums` adds two neighbours'. ``answers`` holds, per slice in
    partition order, what the client needs besides the sums (a `SliceAnswer`
    after coding, the seconds spent after a later MM step).
    """

    terms: np.ndarray               # sorted, the slices' terms
    plain: Optional[np.ndarray]     # (K, terms): sum_j s_jk; None after the first MM step
    responsibilities: np.ndarray    # (K, terms): beta_kn sum_j s_jk y_j / mean_j
    answers: list


class SliceAnswer(NamedTuple):
    """What coding a slice tells the client besides its sums."""

    outcome: BatchOutcome
    busy: float          # seconds spent coding
    following: object    # the next slice's `_online_select` result, or None
    report: object       # the coder's report (online MedSTC's), or None


def _own_columns(shared, terms):
    """The slice's topic columns, from the round's (``shared``: (round's terms, (K, terms)))."""
    union, columns = shared
    return _slice_columns(columns, np.searchsorted(union, terms))


def _online_code(partition, shared, problem, n_jobs, next_selection, keep_codes, coder=None):
    """Code the pending slice; select the next slice; return its `RoundSums`.

    ``shared`` holds the round's terms and their topic columns (the same for
    every worker: sent once and copied between the workers); the slice takes
    its own. With ``keep_codes`` the slice's word codes stay on the worker
    for the further MM steps of the round. ``coder`` (online MedSTC's) codes
    the slice instead of `stc._learning.stochastic_dictionary.code_batch`:
    ``coder(partition, problem, X, beta_columns, n_jobs)`` returns the slice's
    `stc._learning.stochastic_dictionary.CodedBatch` and the report, what the
    client learns from besides the sums (None without a coder or for an empty
    slice).
    """
    X, terms = partition.pending
    start = time.perf_counter()
    report = None
    if X.shape[0]:
        beta_columns = _own_columns(shared, terms)
        if coder is None:
            partition.coded = code_batch(problem, X, beta_columns, n_jobs)
        else:
            partition.coded, report = coder(partition, problem, X, beta_columns, n_jobs)
        plain, responsibilities, outcome = (partition.coded.plain,
                                            partition.coded.responsibilities,
                                            partition.coded.outcome)
        partition.coded.plain = partition.coded.responsibilities = None
        # the slice's terms, for the round's further MM steps (pending is the next slice's)
        partition.coded_terms = terms
        if not keep_codes:
            partition.coded = None
    else:
        partition.coded = None
        plain = responsibilities = np.zeros((shared[1].shape[0], 0))
        outcome = BatchOutcome(0.0, 0, 0)
    busy = time.perf_counter() - start
    following = (None if next_selection is None
                 else _online_select(partition, *next_selection))
    return RoundSums(terms, plain, responsibilities,
                     [SliceAnswer(outcome, busy, following, report)])


def _online_responsibilities_at(partition, shared, loss, n_jobs):
    """The coded slice's `RoundSums` at the round's new topic columns (``shared``)."""
    start = time.perf_counter()
    if partition.coded is None:
        terms, sums = np.zeros(0, np.intp), np.zeros((shared[1].shape[0], 0))
    else:
        terms = partition.coded_terms
        sums = partition.coded.responsibilities_at(loss, _own_columns(shared, terms), None,
                                                   n_jobs)
    return RoundSums(terms, None, sums, [time.perf_counter() - start])


def merge_round_sums(left, right):
    """The `RoundSums` of two neighbouring groups of slices (``left`` first), over both's terms.

    Runs on a worker. The sums are added into zeros, ``left`` first: up to
    three partitions, the tree of `DaskOnlineTraining.trip` adds them in
    partition order.
    """
    terms = np.union1d(left.terms, right.terms)

    def added(a, b):
        if a is None:
            return None
        total = np.zeros((a.shape[0], terms.size))
        _add_columns(total, np.searchsorted(terms, left.terms), a)
        _add_columns(total, np.searchsorted(terms, right.terms), b)
        return total

    return RoundSums(terms, added(left.plain, right.plain),
                     added(left.responsibilities, right.responsibilities),
                     left.answers + right.answers)


def _add_columns(total, where, columns):
    """total[:, where] += columns, ``where`` a slice's positions among the round's terms.

    A slice holding every term of the round (always so with one partition)
    has ``where`` = 0, 1, ...: it is added without fancy indexing, which
    would copy (K, terms) arrays twice.
    """
    if where.size == total.shape[1]:
        total += columns
    else:
        total[:, where] += columns


def _slice_columns(columns, where):
    """The (K, terms of the round) ``columns`` at a slice's positions ``where``."""
    return columns if where.size == columns.shape[1] else np.take(columns, where, axis=1)


class DaskOnlineTraining:
    """Online learning (`stc._learning.stochastic_dictionary`) over the partitions of a dask array.

    The partitions stay on their workers. Each pass visits every partition's
    rows in an order drawn from ``random_state`` (`partition_order`); round
    r of ceil(D / batch_size) rounds takes rows `round_rows` of every
    partition. A pass's steps are its rounds, but the first pass's first,
    which joins the first rounds until they hold
    `stc._learning.learners.online.first_step_documents` documents, as
    ``fit_stream`` joins its first batches (`step_rounds`); a step's
    mini-batch is the concatenation of the partitions' slices of its rounds,
    in partition order. Per step (the code calls it a round):

    * the client holds the topics beta and the running statistics (K x N);
      it sends the topic columns of the round's terms once, and the workers
      copy them to each other (`trip`); each slice takes its own terms' columns;
    * each worker codes its slice cold with the compiled kernel and selects
      its next slice; the slices' MM sums are added up on the workers, by
      neighbours in a tree (`merge_round_sums`), and the client receives
      the round's; the slice's word codes stay on the worker for the round's
      further MM steps (`dictionary_max_iter`), each of which is such a trip
      with the new columns;
    * the client takes the stochastic dictionary step over the round's terms
      (`stc._learning.stochastic_dictionary.stochastic_dictionary_step`).

    So the client moves arrays the size of the round's terms, twice a trip,
    whatever the number of workers (benchmarks/results_dask_round.md).

    The arithmetic is `STC.fit_stream` over those mini-batches: the learned
    topics agree with it up to floating-point reduction order (a test checks
    it; with up to three partitions the tree adds the sums in partition
    order). One difference: with rho in relative units, w_bar
    (``count_scale_``) is the whole array's, as ``fit`` takes it in memory,
    where ``fit_stream`` takes its first step's; ``problem_for(count_scale)``
    gives the coding problem, as in `DaskTraining`. The first step's
    documents give the initial topics, drawn as
    `stc._learning.dictionary.initial_dictionary` draws them (only the chosen
    documents' term sums travel). Memory on a worker: its partition, the row
    order of the current pass, one slice's word codes and the round's topic
    columns; on the client: three K x N arrays and one round's sums.

    Online MedSTC runs the same rounds with its `stc._learning.learners.LearningSteps`
    (`stc._learning.supervised.labelled_dask.LabelledDaskOnlineSteps`): each round's
    coder, which travels with the topic columns, codes the slices with the
    shifted mean of the current eta, and the client takes eta's step on the
    round's codes after the dictionary step.
    """

    def __init__(self, client, X, loss, problem_for, n_topics, random_state, n_jobs, *,
                 batch_size, learning_offset, learning_decay, max_steps, init="auto", steps):
        self.client, self.n_jobs = client, n_jobs
        self.n_topics, self.max_steps, self.init = n_topics, max_steps, init
        self.learning_offset, self.learning_decay = learning_offset, learning_decay
        self.n_features = X.shape[1]
        self.parts = Partitions(client, X, loss)
        sizes = self.parts.run(_size)
        self.sizes = [rows for rows, _, _ in sizes]
        self.n_docs = int(sum(self.sizes))
        if self.n_docs == 0:
            raise ValueError("X has no document to learn from")
        n_entries = sum(nnz for _, nnz, _ in sizes)
        if n_entries == 0:
            raise ValueError("X has no non-zero entry: every document is empty, so there is "
                             "nothing to learn topics from")
        # w_bar of the whole array, as fit in memory takes it (not of the first round)
        self.count_scale = sum(total for _, _, total in sizes) / n_entries
        self.problem = problem_for(self.count_scale)
        self.n_rounds = max(1, -(-self.n_docs // batch_size))
        self.first_rounds = self._first_rounds() if steps.joins_first_batches else 1
        self.entropy = online_entropy(random_state)
        self.rng = check_random_state(random_state)
        # the topics, statistics and batches so far, as in memory; term_counts: the
        # tokens of every round, per term, as partial_fit sums them
        self.state = OnlineState(term_counts=np.zeros(self.n_features))
        self.selected = None  # what each partition's slice of the next round holds
        self.busy_seconds = np.zeros(len(self.parts))  # time inside the kernels, per partition
        self.steps = steps
        steps.start(self)
        self.extra_step = steps.extra_step(self)

    def selection(self, pass_number, first_round, stop_round=None):
        """What each partition's `slice_rows` needs for rounds ``first_round`` to
        ``stop_round`` (excluded; by default the one round), in partition order."""
        return [(self.entropy, pass_number, i, self.n_rounds, first_round, stop_round)
                for i in range(len(self.parts))]

    def step_rounds(self, step, pass_number):
        """(first, stop) of the rounds the ``step``-th step of a pass learns from.

        The first pass's first step joins the first rounds until they hold
        `stc._learning.learners.online.first_step_documents` documents, as
        ``fit_stream`` joins its first batches; every other step is one round.
        """
        if pass_number > 1:
            return step, step + 1
        if step == 0:
            return 0, self.first_rounds
        return self.first_rounds + step - 1, self.first_rounds + step

    def n_steps(self, pass_number):
        """The steps of a pass (the first pass's first ones joined: `step_rounds`)."""
        return self.n_rounds - (self.first_rounds - 1 if pass_number == 1 else 0)

    def _first_rounds(self):
        """The rounds joined in the first pass's first step (see `step_rounds`)."""
        ends = [sum(round_rows(size, self.n_rounds, r)[1] for size in self.sizes)
                for r in range(self.n_rounds)]
        return online.first_step_batches(ends, self.n_topics)

    def _initial_topics(self, selected, counts):
        """The first step's start, as `stc._learning.learners.online.online_start` makes it
        in memory."""
        if not counts.sum() > 0:
            raise ValueError("the first mini-batch has no non-zero entry: every document is "
                             "empty, so there is nothing to learn topics from")
        if resolved_init(self.init, self.n_topics) == "nndsvd":
            # the SVD needs the whole batch: its slices travel to the client once
            return starting_topics(self._first_batch(), self.n_topics, "nndsvd", self.rng)
        offsets = np.cumsum([0] + [rows for rows, _, _, _ in selected])
        nonempty = np.concatenate([s[3] + offsets[i] for i, s in enumerate(selected)])
        draws = initial_dictionary_draws(nonempty, self.n_features, self.n_topics, self.rng)
        requests = [[np.sort(docs[(docs >= offsets[i]) & (docs < offsets[i + 1])]) - offsets[i]
                     for docs, _ in draws] for i in range(len(self.parts))]
        partial = self.parts.run_each(_online_row_sums, [(r,) for r in requests])
        sums = [np.sum([partial[i][k] for i in range(len(self.parts))], axis=0)
                for k in range(len(draws))]
        return dictionary_from_draws(counts, draws, sums, self.n_topics)

    def _first_batch(self):
        """The pending round's batch, its slices stacked in partition order (CSR, N columns)."""
        blocks = []
        for compact, terms in self.parts.run(_pending_slice):
            blocks.append(sp.csr_matrix((compact.data, terms[compact.indices].astype(np.int32),
                                         compact.indptr), shape=(compact.shape[0],
                                                                 self.n_features)))
        return sp.vstack(blocks, format="csr")

    def _round(self, selected, following, pass_number):
        """Code one round's slices and take the dictionary step; returns (outcome, next).

        The round's tokens are counted in the first pass only (`start_batch`).
        """
        counts = np.zeros(self.n_features)
        for _, terms, term_counts, _ in selected:
            counts[terms] += term_counts
        state = self.state
        if pass_number == 1:
            state.term_counts += counts
        if state.components is None:
            state.components = self._initial_topics(selected, counts)
        introduce_terms_by_count(state.components, counts)
        union = np.flatnonzero(counts > 0)
        coder = self.steps.coding_step(self)  # None: STC's, code_batch
        first = self.trip(_online_code, union, np.take(state.components, union, axis=1), [
            (self.problem, self.n_jobs, nxt, self.max_steps > 1, coder) for nxt in following])
        answers = first.answers
        self.busy_seconds += [answer.busy for answer in answers]

        def responsibilities_at(topics, terms):
            later = self.trip(_online_responsibilities_at, terms, np.take(topics, terms, axis=1),
                              [(self.problem.loss, self.n_jobs)] * len(self.parts))
            self.busy_seconds += later.answers
            return later.responsibilities

        n_docs = sum(rows for rows, _, _, _ in selected)
        state.n_batch_iter += 1
        rho = learning_rate(state.n_batch_iter, self.learning_offset, self.learning_decay)
        state.statistics = stochastic_dictionary_step(
            state.components, state.statistics, rho, n_docs, union,
            SimpleNamespace(plain=first.plain, responsibilities=first.responsibilities),
            responsibilities_at,
            max_steps=self.max_steps, n_jobs=self.n_jobs)
        if self.extra_step is not None:  # online MedSTC: eta's step on the round's codes
            self.extra_step([answer.report for answer in answers])
        outcome = BatchOutcome(sum(answer.outcome.objective for answer in answers), n_docs,
                               sum(answer.outcome.capped_documents for answer in answers))
        return outcome, [answer.following for answer in answers]

    def trip(self, function, terms, columns, args):
        """One round trip: ``function(partition, shared, *args[i])`` on each partition i, the
        `RoundSums` added up on the workers; returns the round's, over ``terms``.

        ``shared`` = (``terms``, ``columns``), the round's sorted terms and their
        topic columns (K, terms), is sent once and copied between the workers,
        and each slice takes its own columns. The slices' sums are added by
        neighbours, in a tree (`merge_round_sums`): the client sends and
        receives arrays the size of the round's terms once, whatever the
        number of workers.
        """
        shared = self.client.scatter((terms, columns), broadcast=True, hash=False)
        level = [self.parts.submit(i, function, shared, *args_i) for i, args_i in enumerate(args)]
        while len(level) > 1:
            pairs = [self.client.submit(merge_round_sums, left, right, pure=False)
                     for left, right in zip(level[0::2], level[1::2])]
            level = pairs + level[len(pairs) * 2:]
        total = self.parts.gather(level)[0]
        if not np.array_equal(total.terms, terms):
            raise RuntimeError("the workers' slices hold other terms than the round's")
        return total

    def run(self, options):
        """The passes over the steps (`stc._learning.learners.online.run_passes`); the
        `LearnedTopics`."""
        self.selected = self.parts.run_each(_online_select,
                                            self.selection(1, *self.step_rounds(0, 1)))
        fitted = run_passes(lambda pass_number: range(self.n_steps(pass_number)),
                            lambda step, pass_number: self._learn_step(
                                step, pass_number, options.n_passes),
                            self.state, self.n_rounds, options,
                            first_pass_fewer=self.first_rounds - 1)
        fitted.count_scale = self.count_scale
        return fitted

    def _learn_step(self, step, pass_number, n_passes):
        """Step ``step`` of a pass; its `BatchOutcome` (None: no word in it, skipped)."""
        if step + 1 < self.n_steps(pass_number):
            following = self.selection(pass_number, *self.step_rounds(step + 1, pass_number))
        elif pass_number < n_passes:
            following = self.selection(pass_number + 1, *self.step_rounds(0, pass_number + 1))
        else:
            following = [None] * len(self.parts)
        if sum(np.size(s[1]) for s in self.selected) == 0:  # a step without a word
            self.selected = self.parts.gather([
                self.parts.submit(i, _online_select, *sel)
                for i, sel in enumerate(following) if sel is not None])
            return None
        outcome, self.selected = self._round(self.selected, following, pass_number)
        return outcome
