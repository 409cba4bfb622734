"""Online MedSTC: mini-batches of labelled documents, each coded and learned from once per pass.

``MedSTC(learning_method="online")`` (`fit`, `fit_stream`, `partial_fit`)
runs STC's online learner (`stc._learning.learners.online`) with the batch step
`learn_labelled_batch`:

  1. the batch is coded without labels with the current topics (cold start,
     as `transform` codes new documents): its label-free codes. They are the
     start and the safeguard's reference of step 2, for which one sweep
     (`LABEL_FREE_SWEEPS`) does; a batch whose label-free codes also train the
     refit (step 5 within a pass) is coded to convergence, as `transform`
     codes the documents the refitted classifier will see;
  2. once a classifier exists, the codes are moved by ``sweeps`` coding
     sweeps with theta's shifted mean from the current eta (MedSTC's coding
     step, `stc._learning.supervised.labelled_batch.shifted_mean_term`, with D the number of
     training documents); where the sweeps raise a document's share of
     objective (4), the step from its label-free codes is halved (up to
     three times, as batch MedSTC's safeguard does), else it keeps its
     label-free codes;
  3. STC's stochastic dictionary step on those codes (`stc._learning.stochastic_dictionary`);
  4. `stochastic_svm_step` on the batch's codes and labels moves the
     loop's eta, ``joint_coef_``;
  5. the refit (``refit_C``): the same step on label-free codes moves a
     second classifier; ``coef_``, the one `predict` uses, is the mean of
     its iterates. `fit` and
     `fit_stream` take it after the passes, in one more pass that codes
     every batch without labels with the final topics (`refit_pass`), as
     batch MedSTC refits on the training documents coded after its loop
     (a one-shot stream, which cannot be read again, takes it in its last
     pass on each batch's label-free codes of step 1); `partial_fit` in
     every batch, on the codes of step 1, since it cannot know which batch
     is the last.

Memory is that of STC's online learning: the batch's word codes and the
(K, N) statistics; the classifiers are (n_classes, K).

On Dask (`fit` of a dask array, `stc._learning.supervised.labelled_dask`) each worker
runs steps 1-2 on its slice of a round (`code_labelled_batch`) and the
client takes steps 3-4 (`joint_step`), and `refit_step` in the refit's pass.
"""
from dataclasses import dataclass

import numpy as np
from sklearn.utils import check_random_state

from stc._core._segments import move_along_segments
from stc._core._dense import dot
from stc._learning.coding import (code_documents, code_known_terms, code_new_documents,
                                  iteration_problem, transposed)
from stc._learning.learners import LearningSteps
from stc._learning.learners.online import rows_of, start_batch
from stc._learning.progress import count_capped, step_capped_documents, warn_if_unfinished
from stc._learning.stochastic_dictionary import (BatchOutcome, CodedBatch, batch_columns,
                                                 batch_sums, stochastic_dictionary_step)
from stc._learning.supervised.labelled_batch import (SegmentEnd, class_indices,
                                                     halve_rejected_steps, refit_C_of_scale,
                                                     shifted_mean_term)
from stc._learning.supervised.svm import loss_augmented_hinges, sample_hinges

# Documents per step of `stochastic_svm_step` (the batch is cut into such chunks, in order).
# Smaller chunks mean more, noisier steps. Not tuned; how the averaged refit compares with
# the cutting-plane SVM on the same codes: docs/results.md, "Online MedSTC".
SVM_CHUNK = 16

# Sweeps of step 1's label-free coding when its codes only start step 2 (see the module
# doc). One sweep is faster than coding to convergence at the same validation accuracy
# (docs/results.md, "Online MedSTC").
LABEL_FREE_SWEEPS = 1


def stochastic_svm_step(W, theta, y_index, C, cost, n_steps, average=None):
    """Pegasos steps on the SVM block of (4) over ``theta``'s rows in chunks; returns (W, n_steps).

    The SVM block of problem (4) divided by C is::

        F(W) = 1/(2C) ||W||^2 + (1/D) sum_d h_d(W),
        h_d(W) = max_y [Delta(y_d, y) + W_y . theta_d] - W_{y_d} . theta_d,

    lambda-strongly convex with lambda = 1/C. Pegasos (Shalev-Shwartz et al.
    2011) takes, for the t-th chunk B of documents (t counts every step
    so far, ``n_steps`` before the call), the subgradient of F on B::

        g_t = W / C + (1/|B|) sum_{d in B, h_d > 0} (e_{yhat_d} - e_{y_d}) theta_d^T,

    yhat_d the loss-augmented label, with the step size eta_t = 1 / (lambda t)
    = C / t::

        W <- W - eta_t g_t = (1 - 1/t) W + (C / (t |B|)) sum_{d in B, h_d > 0}
                                                (e_{y_d} - e_{yhat_d}) theta_d^T,

    then projects W onto the ball ||W|| <= sqrt(2 C cost), which holds the
    minimiser (F(W*) <= F(0) = cost). Unrolled, W_{t+1} is C times the mean
    of the hinge subgradients of all steps so far (as long as the projection
    is inactive): no step size to tune, and every document weighs the same
    whatever batch it came in. F's expected suboptimality after T steps is
    O(C G^2 log(T) / T), G the largest ||theta_d||.

    ``average`` (n_classes, K), if given, is the mean of the iterates
    W_1, ..., W_{n_steps} and is updated in place to the mean up to the last
    step (Polyak-Ruppert averaging): the refitted classifier is this mean,
    which is far less noisy than the last iterate after one pass (on the
    embedded corpus, 0.94 test accuracy against 0.77, the cutting-plane
    SVM's 0.94).

    ``W`` (n_classes, K) is not changed (a new array is returned); zeros
    start Pegasos (whose first step ignores the start anyway). The sums run
    in a fixed order: the result does not depend on threads.
    """
    W = np.array(W, dtype=np.float64)
    radius = np.sqrt(2.0 * C * cost)
    for first in range(0, theta.shape[0], SVM_CHUNK):
        chunk, labels = theta[first:first + SVM_CHUNK], y_index[first:first + SVM_CHUNK]
        y_hat, hinge = loss_augmented_hinges(W, chunk, labels, cost)
        n_steps += 1
        violated = hinge > 0.0
        gradient = np.zeros_like(W)
        np.add.at(gradient, labels[violated], chunk[violated])
        np.add.at(gradient, y_hat[violated], -chunk[violated])
        W *= 1.0 - 1.0 / n_steps
        W += (C / (n_steps * chunk.shape[0])) * gradient
        norm = np.sqrt(dot(W, W))
        if norm > radius:
            W *= radius / norm
        if average is not None:
            average += (W - average) / n_steps
    return W, n_steps


@dataclass
class OnlineSupervision:
    """What online MedSTC carries from batch to batch besides the topics."""

    n_classes: int
    C: float
    cost: float
    refit_C: object                # "auto", a float or None (see MedSTC)
    total_samples: int = None      # D of (4); None: the documents seen so far
    sweeps: int = None             # shifted-mean sweeps per batch (None: to inner_tol)
    coef: np.ndarray = None        # the loop's eta (None before the first step)
    svm_steps: int = 0             # Pegasos steps taken for ``coef``
    refit_coef: np.ndarray = None  # last Pegasos iterate on label-free codes (None before)
    refit_average: np.ndarray = None  # the mean of those iterates: the refitted eta
    refit_steps: int = 0
    refit_square_norms: float = 0.0  # sum of ||theta_d||^2 of the refit's label-free codes
    refit_docs: int = 0
    n_docs_seen: int = 0
    rejected: int = 0              # documents whose shifted-mean step the safeguard rejected

    def n_docs(self):
        """D, the number of documents (4)'s hinge averages over."""
        return self.total_samples if self.total_samples is not None else self.n_docs_seen

    def coding_part(self):
        """What coding a batch reads (eta, C, cost, D, sweeps), as a new `OnlineSupervision`.

        Online MedSTC on Dask sends it to the workers each round.
        """
        return OnlineSupervision(self.n_classes, self.C, self.cost, None, self.n_docs(),
                                 self.sweeps, self.coef)

    def refit_weight(self):
        """The refit's C: ``refit_C``, or for "auto" REFIT_C_SCALE / mean ||theta_d||^2 so far."""
        if self.refit_C != "auto":
            return float(self.refit_C)
        mean = self.refit_square_norms / self.refit_docs if self.refit_docs else 0.0
        return refit_C_of_scale(mean)


def supervised_codes(problem, X, y_index, beta_t, supervision, n_jobs=None,
                     label_free_sweeps=LABEL_FREE_SWEEPS):
    """Steps 1-2 of `learn_labelled_batch` on a batch; returns its codes and counts.

    ``beta_t`` holds the topic weights of X's columns, (columns, K): a
    batch's own terms (`stc._learning.stochastic_dictionary.batch_columns`) or all of them
    (`stc._learning.coding.transposed`). ``label_free_sweeps``: the sweeps of step 1,
    or None to code to convergence (``problem``'s sweep cap and tolerance).

    Returns (label-free theta, word codes, theta, means, objective, capped
    documents, rejected documents). The word codes, theta and means are those
    of the shifted-mean sweeps where the safeguard kept them, else the
    label-free ones; the objective is the batch's objective (2) at them.
    ``supervision`` is only read (eta, C, cost, D and the sweeps).
    """
    beta = beta_t.T
    theta, codes, result = code_new_documents(iteration_problem(problem, label_free_sweeps), X,
                                              beta, keep_word_codes=True, n_jobs=n_jobs,
                                              beta_t=beta_t)
    capped = step_capped_documents(result, problem, label_free_sweeps)
    free_theta = theta.copy()
    W = supervision.coef
    if W is None:  # no classifier yet: the label-free codes
        return free_theta, codes, theta, result.means, result.objective, capped, 0
    C, cost, D = supervision.C, supervision.cost, supervision.n_docs()
    linear = shifted_mean_term(W, theta, y_index, C, cost, D)
    old_codes = codes.copy()
    swept = code_documents(iteration_problem(problem, supervision.sweeps), X, beta, codes,
                           theta, theta_linear=linear, n_jobs=n_jobs, with_start=False,
                           beta_t=beta_t)
    # objective (2) of each document (the linear term is not part of it) plus its hinge share
    new_end = SegmentEnd(swept.objective + np.sum(linear * theta, axis=1), swept.loss,
                         swept.means)
    old_end = SegmentEnd(result.objective, result.loss, result.means)

    def hinge_share(theta_rows, rows):
        return (C / D) * sample_hinges(W, theta_rows, y_index[rows], cost)

    old_total = old_end.objective + hinge_share(free_theta, slice(None))
    # "not <=" also catches NaN and inf (an unbounded step with the l1 penalty on theta)
    pending = ~(new_end.objective + hinge_share(theta, slice(None)) <= old_total)
    # as batch MedSTC's safeguard: halve the step from the label-free codes where it is worse
    steps, objective, _ = halve_rejected_steps(problem, X, beta, (old_codes, free_theta),
                                               (codes, theta), old_end, new_end, old_total,
                                               pending, hinge_share, n_jobs, beta_t)
    means = swept.means
    moved = np.flatnonzero(steps < 1.0)
    move_along_segments(X, beta_t, (old_codes, free_theta), (codes, theta), means, moved,
                        steps[moved], n_jobs)
    return free_theta, codes, theta, means, objective, capped, int(np.count_nonzero(pending))


@dataclass
class LabelledCodes:
    """A batch (or a Dask worker's slice of a round) coded by steps 1-2: `code_labelled_batch`."""

    sums: CodedBatch         # word codes and MM sums; its outcome: the batch's share of (4)
    free_theta: np.ndarray   # label-free codes (step 1): the refit's
    theta: np.ndarray        # after the shifted-mean sweeps and the safeguard: eta's step's
    rejected: int            # documents whose shifted-mean step the safeguard rejected


def code_labelled_batch(problem, X, y_index, beta, supervision, n_jobs=None,
                        label_free_sweeps=LABEL_FREE_SWEEPS):
    """Steps 1-2 and what the dictionary step needs of them; returns the `LabelledCodes`.

    ``label_free_sweeps`` as `supervised_codes`'s.

    The outcome (``sums.outcome``) is the batch's share of (4) without
    ||eta||^2 / 2: objective (2) at its codes plus (C / D) sum_d h_d at the eta
    it was coded with (``cost`` per document before there is one). A separate
    function because a Dask worker runs it on its slice of a round (MedSTC
    online on Dask, `stc._learning.supervised.labelled_dask`) and the client adds the
    slices' sums and shares up.
    """
    layout, beta_t = batch_columns(X, beta)
    free_theta, codes, theta, means, objective, capped, rejected = supervised_codes(
        problem, layout.compact, y_index, beta_t, supervision, n_jobs, label_free_sweeps)
    C, cost, W = supervision.C, supervision.cost, supervision.coef
    hinge = (np.full(X.shape[0], cost) if W is None else sample_hinges(W, theta, y_index, cost))
    outcome = BatchOutcome(float(np.sum(objective) + C / supervision.n_docs() * np.sum(hinge)),
                           X.shape[0], capped)
    return LabelledCodes(batch_sums(X, beta, codes, means, outcome, n_jobs, layout), free_theta,
                         theta, rejected)


def learn_labelled_batch(problem, batch, state, supervision, options, rng, *, refit,
                         later_pass=False):
    """Learn from one labelled batch ``(X, class indices)``: the module's steps 1-5.

    ``state`` (`stc._learning.learners.online.OnlineState`) and ``supervision``
    (`OnlineSupervision`) are updated. ``refit``: take the refit step (5).
    ``later_pass``: the batch is not of the first pass; D is then fixed at the
    documents seen in the first pass if ``supervision.total_samples`` is None.
    Returns the `stc._learning.stochastic_dictionary.BatchOutcome`, whose objective is the batch's
    share of (4) without ||eta||^2 / 2: objective (2) at its codes plus
    (C / D) sum_d h_d at the eta it was coded with.
    """
    X, y_index = batch
    if later_pass and supervision.total_samples is None:
        supervision.total_samples = supervision.n_docs_seen  # the documents of one pass
    statistics, rho = start_batch(X, state, options, rng, count_terms=not later_pass)
    supervision.n_docs_seen += X.shape[0]
    # the refit's codes of this batch are step 1's: coded as transform codes
    coded = code_labelled_batch(problem, X, y_index, state.components, supervision,
                                options.n_jobs, None if refit else LABEL_FREE_SWEEPS)
    supervision.rejected += coded.rejected
    sums = coded.sums
    if options.dictionary_max_iter == 1:
        sums.codes = None  # no MM step re-reads them
    state.statistics = stochastic_dictionary_step(
        state.components, statistics, rho, X.shape[0], sums.layout.terms, sums,
        lambda topics, terms: sums.responsibilities_at(problem.loss, topics, terms,
                                                       options.n_jobs),
        max_steps=options.dictionary_max_iter, n_jobs=options.n_jobs)
    outcome = sums.outcome
    coded.sums = sums = None  # the word codes: freed before eta's steps
    joint_step(coded.theta, y_index, supervision)
    if refit:
        refit_step(coded.free_theta, y_index, supervision)
    return outcome


def joint_step(theta, y_index, supervision):
    """Step 4: `stochastic_svm_step` of the loop's eta on a batch's codes ``theta``.

    A function of its own because online MedSTC on Dask takes it on the
    client, on the round's codes gathered from the workers.
    """
    supervision.coef, supervision.svm_steps = stochastic_svm_step(
        _or_zeros(supervision.coef, supervision, theta), theta, y_index, supervision.C,
        supervision.cost, supervision.svm_steps)


def refit_step(theta, y_index, supervision):
    """Step 5: `stochastic_svm_step` of the refitted eta on label-free codes ``theta``.

    Its C is ``refit_C``, or for "auto" `refit_C_of_scale` of the mean
    ||theta_d||^2 of the label-free codes it has seen so far (this batch's
    included). Nothing is done when ``refit_C`` is None.
    """
    if supervision.refit_C is None:
        return
    supervision.refit_square_norms += float(np.sum(theta * theta))
    supervision.refit_docs += theta.shape[0]
    if supervision.refit_average is None:
        supervision.refit_average = _or_zeros(None, supervision, theta)
    supervision.refit_coef, supervision.refit_steps = stochastic_svm_step(
        _or_zeros(supervision.refit_coef, supervision, theta), theta, y_index,
        supervision.refit_weight(), supervision.cost, supervision.refit_steps,
        supervision.refit_average)


def refit_pass(model, coded_batches, supervision):
    """The refit after the passes: `refit_step` on every batch's label-free codes, in order.

    ``coded_batches`` yields (theta, class indices, documents whose coding
    stopped at the sweep cap) per batch, coded as `MedSTC.transform` codes
    documents with the final topics: in this process (`coded_without_labels`)
    or on Dask workers (`stc._learning.supervised.labelled_dask.LabelledDaskOnlineSteps`). This
    is batch MedSTC's refit on the training documents coded after its loop,
    with the stochastic step and one batch in memory. Warns, as `transform`
    does, when some coding stopped at the cap.
    """
    capped = 0
    for theta, y_index, batch_capped in coded_batches:
        if theta.shape[0]:
            refit_step(theta, y_index, supervision)
        capped += batch_capped
    if capped:
        warn_if_unfinished(model, True, False, capped)


def coded_without_labels(problem, batches, beta, n_jobs):
    """(theta, class indices, capped documents) of each (X, class indices) batch, for `refit_pass`.

    Each non-empty batch is coded with topics ``beta`` as
    `stc._learning.coding.code_known_terms` codes documents.
    """
    beta_t = transposed(beta)  # the final topics, for every batch
    for X, y_index in batches:
        if X.shape[0] == 0:
            continue
        theta, _, result = code_known_terms(problem, X, beta, n_jobs=n_jobs, beta_t=beta_t)
        yield theta, y_index, count_capped(result, problem)


def _or_zeros(W, supervision, theta):
    return np.zeros((supervision.n_classes, theta.shape[1])) if W is None else W


class LabelledOnlineSteps(LearningSteps):
    """MedSTC's `LearningSteps` for online learning in memory: the labelled batch step, the refit.

    `stc._learning.learners.online.learn` cuts the mini-batches of (rows of X, their
    class indices, ``labels``) and runs `learn_labelled_batch` on them
    (`batch_step`); `finish` takes the refit's pass over X in a new shuffled
    order and stores the classifiers.
    """

    joins_first_batches = False  # the classifier steps learn each batch as given

    def __init__(self, model, classes, y_index, problem):
        self.classes, self.labels = classes, y_index
        self.supervision = new_supervision(model, classes.size)
        if self.supervision.total_samples is None:  # D of (4): the training documents
            self.supervision.total_samples = y_index.shape[0]

    def batch_step(self):
        return labelled_step(self.supervision, refit=False)

    def finish(self, model, fitted, X, problem):
        if model.refit_C is not None and not fitted.interrupted:
            # in a new shuffled order: rows sorted by class would make the steps cycle
            order = check_random_state(model.random_state).permutation(X.shape[0])
            size = model._learning_options().batch_size  # "auto" resolved
            refit_online(model, problem, ((rows_of(X, order[first:first + size]),
                                           self.labels[order[first:first + size]])
                                          for first in range(0, X.shape[0], size)),
                         self.supervision)
        store_online_classifier(model, self.classes, self.supervision)


class LabelledStreamSteps(LearningSteps):
    """MedSTC's `LearningSteps` for `fit_stream`: batches of (X, labels) pairs, then the refit.

    The refit's steps run in one more pass over ``batches`` with the final
    topics (`finish`), or, for a one-shot iterator, in the last pass.
    """

    joins_first_batches = False  # the classifier steps learn each batch as given

    stream_items = "(X_batch, y_batch) pairs"

    def __init__(self, classes, supervision, batches):
        self.classes, self.supervision, self.batches = classes, supervision, batches

    @property
    def one_shot(self):
        """A one-shot iterator (it cannot be read again for the refit's pass)."""
        return iter(self.batches) is self.batches

    def stream_batch(self, given, number, checked_counts):
        if not (isinstance(given, (tuple, list)) and len(given) == 2):
            raise TypeError(f"batches must yield pairs (X_batch, y_batch); batch "
                            f"{number} is a {type(given).__name__}")
        counts = checked_counts(given[0])
        _, y_index = class_indices(given[1], counts.shape[0], self.classes,
                                   name=f"the labels of batch {number}")
        return counts, y_index

    def batch_step(self):
        return labelled_step(self.supervision, self.one_shot)

    def finish(self, model, fitted, data, problem):
        """``data()`` yields the validated batches again, for the refit's pass."""
        if model.refit_C is not None and not self.one_shot and not fitted.interrupted:
            refit_online(model, problem, data(), self.supervision)
        store_online_classifier(model, self.classes, self.supervision)


class LabelledPartialFitSteps(LearningSteps):
    """MedSTC's `LearningSteps` for one `partial_fit` batch: its labels, every step, the records.

    ``supervision`` is that of the fit so far (`MedSTC._online_supervision`)
    or a fresh one; the refit's step runs on every batch, since `partial_fit`
    cannot know which batch is the last.
    """

    def __init__(self, classes, y_index, supervision):
        self.classes, self.labels, self.supervision = classes, y_index, supervision

    def batch_step(self):
        def learn_one(problem, batch, state, options, rng, pass_number):
            return learn_labelled_batch(problem, batch, state, self.supervision, options, rng,
                                        refit=True)
        return learn_one

    def finish(self, model, fitted, data, problem):
        store_online_classifier(model, self.classes, self.supervision)


# Online learning's counters: fitted attribute -> `OnlineSupervision` field (saved with
# the model, so that partial_fit goes on where the fit stopped).
ONLINE_COUNTERS = {
    "online_total_samples_": "total_samples",
    "n_docs_seen_": "n_docs_seen",
    "online_svm_steps_": "svm_steps",
    "online_refit_steps_": "refit_steps",
    "online_refit_square_norms_": "refit_square_norms",
    "online_refit_docs_": "refit_docs",
    "rejected_steps_": "rejected",
}


def new_supervision(model, n_classes):
    """A fresh `OnlineSupervision` with ``model``'s parameters."""
    return OnlineSupervision(n_classes, float(model.C), float(model.cost), model.refit_C,
                             model.total_samples, model.sweeps_per_iteration)


def labelled_step(supervision, refit):
    """The online learner's step of one (X, class indices) batch: `learn_labelled_batch`.

    ``refit``: the refit steps run in the last pass (else in `refit_online`).
    """
    def learn_one(problem, batch, state, options, rng, pass_number):
        return learn_labelled_batch(problem, batch, state, supervision, options, rng,
                                    refit=refit and pass_number == options.n_passes,
                                    later_pass=pass_number > 1)
    return learn_one


def refit_online(model, problem, batches, supervision):
    """The refit's pass after online learning in this process (``model``'s topics)."""
    refit_pass(model, coded_without_labels(problem, batches, model.components_, model.n_jobs),
               supervision)


def store_online_classifier(model, classes, supervision):
    """The classifiers and the counters online learning carries, on ``model`` (saved with it)."""
    model.classes_ = classes
    model.joint_coef_ = supervision.coef
    # refit_C may have been set to None between partial_fit calls: then coef_ is the loop's
    refitted = supervision.refit_coef is not None and supervision.refit_C is not None
    model.coef_ = supervision.refit_average if refitted else supervision.coef
    model.online_refit_coef_ = supervision.refit_coef
    model.refit_C_ = supervision.refit_weight() if refitted else None
    for attribute, field in ONLINE_COUNTERS.items():
        setattr(model, attribute, getattr(supervision, field))
