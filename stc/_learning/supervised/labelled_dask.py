"""MedSTC on a Dask cluster: `MedSTC.fit` of a dask array of CSR row blocks.

The unsupervised half is STC's (`stc._learning.learners.dask_batch.DaskTraining`: the
partitions, the dictionary step); this module adds the labels and MedSTC's
two steps of its own, run by the learner `stc._learning.learners.dask_batch` as
`stc._learning.learners.batch` runs them in memory (`LabelledDaskBatchSteps` is its
`stc._learning.learners.LearningSteps`). Per outer iteration:

* coding: the client scatters beta and eta once; each worker runs
  `stc._learning.supervised.labelled_batch.ShiftedMeanCodingStep` on its partition (the shifted
  mean, the per-document safeguard and back-off, whose state stays with the
  documents) and returns its share of the objective and of the safeguard's
  counts; the (nnz, K) word codes and the document codes never travel;
* the dictionary step, STC's;
* the SVM step: `stc._learning.supervised.svm.CuttingPlaneSVM` on `DaskCuts`. A cutting
  plane (the most violated labelling at eta) has the constant
  c = sum_d s_d Delta(y_d, ybar_d) and the gradient G = sum_d s_d (phi(theta_d,
  y_d) - phi(theta_d, ybar_d)), sums over documents: each worker finds its
  documents' labels ybar_d and returns its partial c, G and hinge; the client
  adds them up (in partition order) and solves the small QP. A labelling
  stays on the workers (each keeps its documents' part under a key); the
  working set holds keys.

After the loop the refit on label-free codes (``refit_C``) codes every
partition as `transform` codes documents, keeps those codes on the worker and
runs the same distributed SVM on them.

Each document's arithmetic is that of the fit in memory; only the sums over
documents are taken partition by partition, so the fit agrees with ``fit`` on
the whole matrix up to floating-point reduction order (a test checks the
objective path and the classifiers to 1e-9).

Online learning (``learning_method="online"``, `LabelledDaskOnlineSteps`) runs the
rounds of STC's `stc._learning.learners.dask_online.DaskOnlineTraining` with online MedSTC's
batch step (`stc._learning.supervised.labelled_online`) split between the workers and the
client. Per round:

* each worker codes its slice with `code_labelled_batch` (label-free coding,
  then the shifted-mean sweeps from the round's eta with the per-document
  safeguard and halvings) and returns its MM sums, as STC's workers do, and
  its slice's codes theta, labels and rejected count (documents x K: small);
  the word codes stay on the worker for the round's further MM steps;
* the client takes STC's stochastic dictionary step, then eta's Pegasos step
  (`joint_step`) on the round's codes, the slices' in partition order; eta
  travels to the workers with the next round's topic columns.

After the passes, the refit (``refit_C``) is one more pass of rounds: the
workers code their slices without labels with the final topics, as
`transform` codes documents, and the client takes `refit_step` on them in
order (`refit_pass`, the refit of online learning in memory too). So the fit is ``fit_stream`` over the rounds' mini-batches (then
those of the refit pass), up to the order of floating-point sums (a test
checks it to 1e-9).
"""
from typing import NamedTuple

import numpy as np

from stc._core._dense import dot, loss_augmented_argmax, row_products
from stc._learning.coding import code_known_terms
from stc._learning.learners import LearningSteps
from stc._learning.learners.dask_online import slice_rows
from stc._learning.learners.online import rows_of
from stc._learning.progress import count_capped, warn_if_unfinished
from stc._learning.supervised.labelled_online import (code_labelled_batch, joint_step,
                                                      new_supervision, refit_pass,
                                                      store_online_classifier)
from stc._learning.supervised.labelled_batch import (HingeTerm, ShiftedMeanCodingStep,
                                                     refit_classifier, store_classifier)
from stc._learning.supervised.svm import CuttingPlaneSVM, _build_cuts
from stc._learning.training import TrainingState

# The document codes the SVM is trained on: those of the loop, or the refit's label-free ones.
JOINT, REFIT = "joint", "refit"


class PartitionLabels:
    """A partition's labels and MedSTC's state for its documents; lives on its worker."""

    def __init__(self, y_index, n_classes, n_docs, C, cost, problem, n_jobs, sweeps):
        self.n_classes, self.cost = n_classes, cost
        self.hinge = HingeTerm(C, cost, y_index, n_docs)
        self.coding = ShiftedMeanCodingStep(problem, self.hinge, y_index.shape[0], n_jobs,
                                            sweeps)
        # s_d of the averaged hinge (1 / D, D the whole corpus's), as the in-memory SVM
        # builds them for all documents
        self.weights = np.full(y_index.shape[0], 1.0 / n_docs)
        self.refit_theta = None
        # the partition's part of each labelling of the SVM's working sets, by key
        self.labellings = {JOINT: {}, REFIT: {}}

    @property
    def y_index(self):
        return self.hinge.y_index


def _attach_labels(partition, y_index, n_classes, n_docs, C, cost, problem, n_jobs, sweeps):
    if y_index.shape[0] != partition.X.shape[0]:  # the client split y by the partitions' rows
        raise ValueError(f"a partition of {partition.X.shape[0]} documents got "
                         f"{y_index.shape[0]} labels")
    partition.supervised = PartitionLabels(y_index, n_classes, n_docs, C, cost, problem,
                                           n_jobs, sweeps)


def _supervised_code(partition, beta, coef, iteration):
    """MedSTC's coding step on the partition; returns (objective minus loss, capped, counts).

    ``counts`` are the safeguard's (rejected, shortened, skipped) documents,
    None in an iteration without a classifier (plain STC coding).
    """
    labels = partition.supervised
    labels.hinge.coef = coef
    state = TrainingState(partition.X, None, beta, partition.codes, partition.theta)
    others, partition.means = labels.coding(state, iteration)
    partition.codes = state.codes  # the coding step may have stored them densely
    coding = labels.coding
    counts = (None if coef is None else
              (coding.reverted[-1], coding.shortened[-1], coding.skipped[-1]))
    return others, state.capped_documents, counts


def _svm_codes(partition, which):
    return partition.theta if which == JOINT else partition.supervised.refit_theta


def _most_violated(partition, which, W, key):
    """The partition's part of the most violated labelling at ``W``, kept under ``key``.

    Returns (sum_d s_d h_d, keys of the kept labellings equal to it on this
    partition, the partition's c and G of its cut): the client adds them up.
    """
    labels = partition.supervised
    theta = _svm_codes(partition, which)
    ybar, hinge = loss_augmented_argmax(theta, W.reshape(labels.n_classes, -1),
                                        labels.y_index, labels.cost)
    kept = labels.labellings[which]
    same = {k for k, labelling in kept.items() if np.array_equal(labelling, ybar)}
    kept[key] = ybar.astype(np.int32)
    c, G = _build_cuts(ybar[None, :], theta, labels.y_index, labels.weights, labels.cost,
                       labels.n_classes)
    return dot(labels.weights, hinge), same, c, G


def _cuts(partition, which, keys):
    """The partition's c and G of the kept labellings ``keys`` at its current codes."""
    labels = partition.supervised
    kept = labels.labellings[which]
    labellings = np.array([kept[k] for k in keys], dtype=np.intp).reshape(len(keys), -1)
    return _build_cuts(labellings, _svm_codes(partition, which), labels.y_index,
                       labels.weights, labels.cost, labels.n_classes)


def _keep_labellings(partition, which, keys):
    kept = partition.supervised.labellings[which]
    for key in set(kept) - set(keys):
        del kept[key]


def _largest_square_norm(partition, which):
    theta = _svm_codes(partition, which)
    return float(np.max(np.einsum("ij,ij->i", theta, theta), initial=0.0))


def _hinge_sums(partition, which, coefs):
    """(sum_d h_d, correct predictions) of the partition's codes for each eta of ``coefs``."""
    labels = partition.supervised
    theta = _svm_codes(partition, which)
    out = []
    for W in coefs:
        hinge = loss_augmented_argmax(theta, W, labels.y_index, labels.cost)[1]
        correct = np.argmax(row_products(theta, W), axis=1) == labels.y_index
        out.append((float(np.sum(hinge)), int(np.count_nonzero(correct))))
    return out


def _refit_codes(partition, problem, beta, n_jobs):
    """Code the partition without labels, as ``transform`` does, and keep the codes.

    Returns (sum_d ||theta_d||^2, documents capped at the sweep limit).
    """
    theta, _, result = code_known_terms(problem, partition.X, beta, n_jobs=n_jobs)
    partition.supervised.refit_theta = theta
    return float(np.sum(np.sum(theta * theta, axis=1))), count_capped(result, problem)


def _forget_refit(partition):
    partition.supervised.refit_theta = None
    partition.supervised.labellings[REFIT] = {}


class DaskCuts:
    """The SVM's problem on the partitions' codes, as `CuttingPlaneSVM.fit_problem` reads it.

    A labelling is a key (``labelling_length`` 1); each partition keeps its
    documents' part of it. `most_violated` gives a labelling equal to one
    kept before that one's key, so that the working set sees a repeated cut
    as the fit in memory sees it. Its cut (c, G) comes back in the same
    round and serves `cuts` until `new_codes` says the codes changed.
    """

    labelling_length = 1

    def __init__(self, parts, which, n_classes, n_features, C, cost):
        self.parts, self.which = parts, which
        self.n_classes, self.n_features = n_classes, n_features
        self.n_dims = n_classes * n_features
        self.C, self.cost = float(C), float(cost)
        self._next_key = 1
        self._last = None  # (key, c, G) of the last most violated labelling

    def _gather(self, function, *args):
        return self.parts.run(function, self.which, *args)

    def new_codes(self):
        """The partitions' codes changed: a cut must be computed anew."""
        self._last = None

    def most_violated(self, W):
        """The most violated labelling at ``W`` (as a key) and the averaged hinge R_h(W)."""
        key = self._next_key
        self._next_key += 1
        results = self._gather(_most_violated, W, key)
        hinge, c, G = results[0][0], results[0][2], results[0][3]
        for part_hinge, _, part_c, part_G in results[1:]:
            hinge, c, G = hinge + part_hinge, c + part_c, G + part_G
        same = set.intersection(*(r[1] for r in results))
        if same:
            key = min(same)  # the first key of this labelling
        self._last = (key, c, G)
        return np.array([key], dtype=np.int32), hinge

    def cuts(self, labellings):
        """Cut constants (m,) and gradients (m, n_dims) of the labellings (keys, shape (m, 1))."""
        keys = [int(k) for k in labellings[:, 0]]
        if self._last is not None and keys == [self._last[0]]:
            return self._last[1], self._last[2]
        results = self._gather(_cuts, keys)
        c, G = results[0]
        for part_c, part_G in results[1:]:
            c, G = c + part_c, G + part_G
        return c, G

    def largest_norm(self):
        return float(np.sqrt(max(self._gather(_largest_square_norm))))

    def keep(self, keys):
        """Let the partitions forget every labelling but ``keys`` (the working set's)."""
        self._gather(_keep_labellings, [int(k) for k in keys])

    def scores(self, coefs, n_docs):
        """(R_h, training accuracy) of each eta of ``coefs`` on the partitions' codes."""
        results = self._gather(_hinge_sums, list(coefs))
        out = []
        for i in range(len(coefs)):
            hinge, correct = results[0][i]
            for part in results[1:]:
                hinge, correct = hinge + part[i][0], correct + part[i][1]
            out.append((hinge / n_docs, correct / n_docs))
        return out


class LabelledDaskBatchSteps(LearningSteps):
    """MedSTC's `LearningSteps` on the partitions of a `DaskTraining`: the client's side.

    Started with the training once its partitions exist, it sends every
    partition its labels; its coding step (`shifted_mean_coding`) and SVM
    step (`svm_step`) run on the partitions. It keeps what `MedSTC` reads
    after the fit: ``coef`` (eta), ``hinge``, ``accuracy`` and the
    safeguard's per-iteration counts ``reverted``, ``shortened``,
    ``skipped``; `finish` stores them on the model and refits eta on
    label-free codes (`stc._learning.supervised.labelled_batch.refit_classifier`: `refit_codes`,
    then `refit`), as `stc._learning.supervised.labelled_batch.LabelledBatchSteps` does in memory.
    ``classes``: the labels; ``y_index``: each row's class index.
    """

    def __init__(self, model, classes, y_index, problem=None):
        self.classes, self.n_classes = classes, classes.size
        self.y_index = np.asarray(y_index, dtype=np.intp)
        self.C, self.cost = model.C, model.cost
        self.svm_tol, self.svm_max_iter = model.svm_tol, model.svm_max_iter
        self.n_jobs, self.sweeps = model.n_jobs, model.sweeps_per_iteration
        self.class_indices = np.arange(self.n_classes)
        self.svm = CuttingPlaneSVM(C=self.C, cost=self.cost, tol=self.svm_tol,
                                   max_iter=self.svm_max_iter, warm_start=True)
        self.coef = None
        self.hinge, self.accuracy = [], []
        self.reverted, self.shortened, self.skipped = [], [], []
        self.training = self.joint_cuts = None

    def coding_step(self, engine):
        return self.shifted_mean_coding

    def extra_step(self, engine):
        return self.svm_step

    def finish(self, model, fitted, X, problem):
        store_classifier(model, self.classes, self, self.reverted)
        refit_classifier(model, self, X, problem)

    def start(self, training):
        if self.y_index.shape[0] != training.n_docs:
            raise ValueError(f"y must be 1-D with one label per document ({training.n_docs}), "
                             f"got shape {self.y_index.shape}")
        self.training = training
        offsets = np.cumsum([0] + training.rows)
        training.parts.run_each(_attach_labels, [
            (self.y_index[offsets[i]:offsets[i + 1]], self.n_classes, training.n_docs, self.C,
             self.cost, training.problem, self.n_jobs, self.sweeps)
            for i in range(len(training.parts))])
        self.joint_cuts = self._cuts(JOINT, self.C)

    def _cuts(self, which, C):
        training = self.training
        return DaskCuts(training.parts, which, self.n_classes, training.beta.shape[0], C,
                        self.cost)

    def shifted_mean_coding(self, state, iteration):
        """`ShiftedMeanCodingStep` on every partition; returns (objective minus loss, None)."""
        training = self.training
        client = training.client
        if self.coef is None:  # no classifier yet: plain STC coding
            beta, eta = client.scatter(training.beta, broadcast=True), None
        else:
            beta, eta = client.scatter([training.beta, self.coef], broadcast=True)
        results = training.parts.run(_supervised_code, beta, eta, iteration)
        training.capped_documents = sum(capped for _, capped, _ in results)
        if self.coef is not None:
            for name, i in (("reverted", 0), ("shortened", 1), ("skipped", 2)):
                getattr(self, name).append(sum(counts[i] for _, _, counts in results))
        return sum(others for others, _, _ in results), None

    def svm_step(self, state, iteration):
        """`SVMStep` (`stc._learning.supervised.labelled_batch`), cuts and hinge summed by partition."""
        cuts, n_docs = self.joint_cuts, self.training.n_docs
        cuts.new_codes()
        self.svm.fit_problem(cuts, self.class_indices)
        cuts.keep(self.svm._labellings[:, 0])  # the warm start's labellings only
        candidate = self.svm.coef_
        coefs = [candidate] if self.coef is None else [candidate, self.coef]
        scores = cuts.scores(coefs, n_docs)
        primal = [0.5 * dot(W, W) + self.C * hinge for W, (hinge, _) in zip(coefs, scores)]
        chosen = 0 if self.coef is None or primal[0] <= primal[1] else 1
        if chosen == 0:
            self.coef = candidate.copy()
        self.hinge.append(scores[chosen][0])
        self.accuracy.append(float(scores[chosen][1]))
        return self.C * self.hinge[-1] + 0.5 * float(np.sum(self.coef * self.coef))

    def describe(self, iteration):
        """Progress text, as `ShiftedMeanCodingStep.describe` (summed over the partitions)."""
        if iteration < 2 or not self.reverted:
            return ""
        return (f"  shortened {self.shortened[-1]} kept {self.reverted[-1]} "
                f"skipped {self.skipped[-1]} docs")

    def refit_codes(self, model, X, problem):
        """Code every partition without labels with ``model``'s topics, as ``transform`` does.

        The codes stay on the workers; returns mean_d ||theta_d||^2.
        """
        training = self.training
        client = training.client
        beta = client.scatter(model.components_, broadcast=True)
        results = training.parts.run(_refit_codes, problem, beta, self.n_jobs)
        square_norms = results[0][0]
        for part_norms, _ in results[1:]:
            square_norms += part_norms
        capped = sum(capped for _, capped in results)
        if capped:  # as transform warns in the fit in memory
            warn_if_unfinished(model, True, False, capped)
        return square_norms / training.n_docs

    def refit(self, C):
        """eta fitted with weight ``C`` on the codes of `refit_codes`; returns (eta, accuracy)."""
        training = self.training
        cuts = self._cuts(REFIT, C)
        svm = CuttingPlaneSVM(C=C, cost=self.cost, tol=self.svm_tol, max_iter=self.svm_max_iter)
        svm.fit_problem(cuts, self.class_indices)
        (_, accuracy), = cuts.scores([svm.coef_], training.n_docs)
        training.parts.run(_forget_refit)
        return svm.coef_, float(accuracy)


# ---- online learning: the rounds of stc._learning.learners.dask_online.DaskOnlineTraining with labels

def _attach_online_labels(partition, y_index):
    """Give the partition its rows' class indices (online learning keeps nothing else)."""
    if y_index.shape[0] != partition.X.shape[0]:  # the client split y by the partitions' rows
        raise ValueError(f"a partition of {partition.X.shape[0]} documents got "
                         f"{y_index.shape[0]} labels")
    partition.supervised = y_index


class SliceReport(NamedTuple):
    """What a worker returns of its coded slice besides the MM sums: the SVM step's input."""

    y_index: np.ndarray  # the slice's class indices, in the slice's row order
    theta: np.ndarray    # its codes after the shifted-mean sweeps and the safeguard
    rejected: int        # its documents whose shifted-mean step the safeguard rejected


class SliceCoder:
    """How a worker codes its slice of a round (``coder`` of `stc._learning.learners.dask_online`).

    Holds what coding reads of the client's `OnlineSupervision` at the
    round's start (`OnlineSupervision.coding_part`: eta, C, cost, D, sweeps);
    it travels with each round's topic columns.
    """

    def __init__(self, supervision):
        self.supervision = supervision

    def __call__(self, partition, problem, X, beta_columns, n_jobs):
        y_index = partition.supervised[partition.pending_rows]
        coded = code_labelled_batch(problem, X, y_index, beta_columns, self.supervision, n_jobs)
        return coded.sums, SliceReport(y_index, coded.theta, coded.rejected)


def _refit_slice(partition, problem, beta, n_jobs, selection):
    """The partition's slice of a refit round coded without labels, as `transform` codes.

    ``selection`` is `slice_rows`'s; ``beta`` the final topics (`refit_pass`).
    Returns (theta, the slice's class indices, documents capped at the sweep limit).
    """
    rows = slice_rows(partition, *selection)
    if rows.size == 0:
        return np.zeros((0, beta.shape[0])), partition.supervised[rows], 0
    theta, _, result = code_known_terms(problem, rows_of(partition.X, rows), beta,
                                        n_jobs=n_jobs)
    return theta, partition.supervised[rows], count_capped(result, problem)


class LabelledDaskOnlineSteps(LearningSteps):
    """MedSTC's `LearningSteps` on the rounds of a `stc._learning.learners.dask_online.DaskOnlineTraining`.

    The client's side: started with the training once the partitions exist,
    it sends them their labels; each round's slices are coded by its
    `SliceCoder` (`coding_step`) and the client takes eta's step on their
    codes (`classifier_step`, the extra step). ``supervision`` (an
    `OnlineSupervision`) is the client's state; it is updated as
    `learn_labelled_batch` updates it, round by round.
    """

    joins_first_batches = False  # the classifier steps learn each batch as given

    def __init__(self, model, classes, y_index, problem=None):
        self.classes = classes
        self.y_index = np.asarray(y_index, dtype=np.intp)
        self.supervision, self.n_jobs = new_supervision(model, classes.size), model.n_jobs
        self.training = None

    def coding_step(self, engine):
        """The round's `SliceCoder`, with the current eta."""
        return SliceCoder(self.supervision.coding_part())

    def extra_step(self, engine):
        return self.classifier_step

    def finish(self, model, fitted, X, problem):
        """The refit's pass (one more, in a new order of each partition's rows); the records."""
        if model.refit_C is not None and not fitted.interrupted:
            refit_pass(model, self.coded_refit_rounds(problem, model.components_,
                                                      model.n_passes + 1), self.supervision)
        store_online_classifier(model, self.classes, self.supervision)

    def start(self, training):
        """Send every partition its rows' class indices.

        D of (4) is the array's number of rows (``fit`` in memory takes X's),
        unless ``total_samples`` gives it.
        """
        if self.y_index.shape[0] != training.n_docs:
            raise ValueError(f"y must be 1-D with one label per document ({training.n_docs}), "
                             f"got shape {self.y_index.shape}")
        offsets = np.cumsum([0] + training.sizes)
        training.parts.run_each(_attach_online_labels, [
            (self.y_index[offsets[i]:offsets[i + 1]],) for i in range(len(training.parts))])
        if self.supervision.total_samples is None:
            self.supervision.total_samples = training.n_docs
        self.training = training

    def classifier_step(self, reports):
        """After a round's dictionary step: eta's step on the round's codes (`joint_step`).

        ``reports`` are the partitions' `SliceReport` (None for an empty
        slice), in partition order: their concatenation is the round's
        mini-batch in the order ``fit_stream`` would see it.
        """
        reports = [report for report in reports if report is not None]
        supervision = self.supervision
        theta = np.concatenate([report.theta for report in reports])
        supervision.n_docs_seen += theta.shape[0]
        supervision.rejected += sum(report.rejected for report in reports)
        joint_step(theta, np.concatenate([report.y_index for report in reports]), supervision)

    def coded_refit_rounds(self, problem, beta, pass_number):
        """The rounds of pass ``pass_number`` coded without labels, for `refit_pass`.

        Each round, every worker codes its slice with the final topics
        ``beta`` as `transform` does and returns the codes; yields the
        round's (theta, class indices, capped documents) in partition order.
        """
        training = self.training
        beta = training.client.scatter(beta, broadcast=True)
        for round_index in range(training.n_rounds):
            answers = training.parts.run_each(_refit_slice, [
                (problem, beta, self.n_jobs, selection)
                for selection in training.selection(pass_number, round_index)])
            yield (np.concatenate([theta for theta, _, _ in answers]),
                   np.concatenate([y for _, y, _ in answers]),
                   sum(part_capped for _, _, part_capped in answers))
