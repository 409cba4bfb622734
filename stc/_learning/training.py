"""The alternating minimisation shared by every estimator (paper Sec. 2.3 and 3).

`alternate` runs the outer loop: per iteration a coding step (all documents,
topics fixed), a dictionary step (topics, codes fixed), optionally an extra
step (MedSTC's SVM), then a stopping rule. It knows nothing of the steps'
insides: STC passes `CodingStep` and `DictionaryStep`; MedSTC passes its own
coding step (the shifted mean, the safeguard and the back-off) and its SVM
step. Each step returns its part of the objective, so the loop records the
objective ((2) for STC, (4) for MedSTC) without recomputing it.
"""
from dataclasses import dataclass

import numpy as np

from stc._learning.coding import CodeStorage, code_documents, iteration_problem
from stc._learning.dictionary import CorpusLayout, update_dictionary
from stc._learning.progress import StopRequest, step_capped_documents


@dataclass
class TrainingState:
    """What the steps of the outer loop read and update."""

    X: object              # CSR counts, validated
    layout: CorpusLayout   # X's entries grouped by term (dictionary step)
    beta: np.ndarray       # topics (K, N), rows on the simplex
    codes: object          # word codes: SparseWordCodes, or dense (nnz, K) (MedSTC)
    theta: np.ndarray      # document codes (D, K)
    capped_documents: int = 0  # documents whose last coding call hit its sweep cap


class CodingStep:
    """STC's coding step: every document coded by the kernel, warm-started.

    The word codes are stored sparse or dense by their density (`CodeStorage`).

    Returns the penalty part of objective (2) (its value minus the loss) and
    the means the dictionary step starts from. ``sweeps``: at most that many
    coding sweeps per document (see `iteration_problem`); None codes every
    document until the problem's own rule stops it (the paper's step).
    """

    def __init__(self, problem, n_jobs=None, sweeps=None):
        self.problem, self.n_jobs = iteration_problem(problem, sweeps), n_jobs
        self.sweeps = sweeps
        self.storage = CodeStorage(n_jobs)

    def __call__(self, state, iteration):
        result = code_documents(self.problem, state.X, state.beta, state.codes, state.theta,
                                n_jobs=self.n_jobs, with_start=False)
        state.codes = self.storage(state.codes, state.X.indptr)
        state.capped_documents = step_capped_documents(result, self.problem, self.sweeps)
        with np.errstate(invalid="ignore"):  # inf - inf: the dictionary step explains it
            return float(np.sum(result.objective) - np.sum(result.loss)), result.means


class DictionaryStep:
    """The dictionary step: topics on the simplex, codes fixed; returns the loss part."""

    def __init__(self, loss, max_iter, n_jobs=None):
        self.loss, self.max_iter, self.n_jobs = loss, max_iter, n_jobs

    def __call__(self, state, means):
        state.beta, reconstruction, _ = update_dictionary(
            self.loss, state.layout, state.codes, state.beta, max_iter=self.max_iter,
            n_jobs=self.n_jobs, means=means)
        return reconstruction


def relative_decrease_below(tol):
    """Stopping rule: the last relative decrease of the objective is at most ``tol``."""
    def converged(objective):
        return len(objective) > 1 and objective[-2] - objective[-1] <= tol * abs(objective[-1])
    return converged


def alternate(state, *, coding_step, dictionary_step, extra_step=None, converged, max_iter,
              progress=None):
    """Alternate the steps until ``converged(objective)`` or ``max_iter`` iterations.

    ``coding_step(state, iteration)`` returns (objective terms besides the
    loss, means); ``dictionary_step(state, means)`` the loss after it;
    ``extra_step(state, iteration)``, if given, the terms it adds. A Ctrl-C
    (SIGINT, when fitting in the main thread) ends the loop after the current
    iteration. ``progress(iteration, objective, state)`` is called after
    every iteration. Returns (objective per iteration, converged, interrupted).
    """
    objective = []
    done = False
    with StopRequest() as stop:
        for iteration in range(1, max_iter + 1):
            others, means = coding_step(state, iteration)
            value = dictionary_step(state, means) + others
            if extra_step is not None:
                value += extra_step(state, iteration)
            objective.append(value)
            done = converged(objective)
            if progress is not None:
                progress(iteration, objective, state)
            if done or stop.requested:
                break
    return objective, done, stop.requested
