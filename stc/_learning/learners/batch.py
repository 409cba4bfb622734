"""Batch learning: the whole corpus in memory, coding and dictionary steps alternated.

`learn` runs `stc._learning.training.alternate` from `initial_state` with STC's steps
(`stc._learning.training.CodingStep`, `stc._learning.training.DictionaryStep`) until the
relative decrease of the objective falls under ``tol`` or ``max_iter``
iterations. MedSTC runs the same learner with its own coding step and its
SVM step (its `stc._learning.learners.LearningSteps`,
`stc._learning.supervised.labelled_batch.LabelledBatchSteps`).
"""
import numpy as np

from stc._learning.coding import entry_codes, initial_codes, start_value_in_domain
from stc._learning.dictionary import (CorpusLayout, NonFiniteLossError, resolved_init,
                                      starting_topics)
from stc._learning.learners import LearnedTopics, LearningSteps
from stc._learning.progress import ProgressPrinter
from stc._learning.training import (CodingStep, DictionaryStep, TrainingState, alternate,
                                    relative_decrease_below)


def initial_state(X, loss, n_topics, random_state, init="random"):
    """The starting topics and codes of validated CSR ``X`` (the word codes stored sparse).

    ``init="random"``: `stc._learning.dictionary.initial_dictionary` (a few drawn
    documents per topic); ``"nndsvd"``: `stc._learning.dictionary.nndsvd_dictionary`;
    ``"auto"``: one of them by the number of topics (`resolved_init`).
    """
    beta = starting_topics(X, n_topics, resolved_init(init, n_topics), random_state)
    codes, theta = initial_codes(X, n_topics, start_value_in_domain(loss, X, beta), sparse=True)
    return TrainingState(X, CorpusLayout(X), beta, codes, theta)


def learn(problem, X, options, steps=None, *, state=None):
    """Alternate the steps on the validated CSR counts ``X``; returns the `LearnedTopics`.

    ``steps`` (a `LearningSteps`, by default STC's) gives the coding, the
    dictionary and the extra step (MedSTC's SVM step), and adds text to the
    progress lines (``options.verbose``). ``state`` is the starting
    `TrainingState` (default: `initial_state`); it holds the codes at the
    end. A loss that becomes infinite or NaN raises a ValueError saying why
    (`explain_non_finite_loss`).
    """
    if steps is None:
        steps = LearningSteps()
    if state is None:
        state = initial_state(X, problem.loss, options.n_topics, options.random_state,
                              options.init)
    coding_step = steps.coding_step(state)
    if coding_step is None:
        coding_step = CodingStep(problem, options.n_jobs, options.sweeps_per_iteration)
    dictionary_step = steps.dictionary_step(state)
    if dictionary_step is None:
        dictionary_step = DictionaryStep(problem.loss, options.dictionary_max_iter,
                                         options.n_jobs)
    progress = (ProgressPrinter(options.tol, options.max_iter, describe=steps.describe)
                if options.verbose else None)
    try:
        objective, converged, interrupted = alternate(
            state, coding_step=coding_step, dictionary_step=dictionary_step,
            extra_step=steps.extra_step(state), converged=relative_decrease_below(options.tol),
            max_iter=options.max_iter, progress=progress)
    except NonFiniteLossError as exc:
        raise ValueError(explain_non_finite_loss(exc, state, problem, options.rho_units,
                                                 options.rho)) from None
    return LearnedTopics(
        components=state.beta,
        term_counts=np.asarray(state.X.sum(axis=0), dtype=np.float64).ravel(),
        objective=np.asarray(objective), n_iter=len(objective), interrupted=interrupted,
        converged=converged, capped_documents=state.capped_documents)


def explain_non_finite_loss(exc, state, problem, rho_units="absolute", rho=None):
    """Why the loss became infinite or NaN during a fit: the loss, the data's scale or a parameter.

    ``exc`` is the dictionary step's `NonFiniteLossError` (its first bad
    entry); ``state`` holds the codes the coding step returned. In relative
    units ``rho`` is the user's rho (``problem.rho`` the weight it gave).
    """
    X = state.X
    document = int(np.searchsorted(X.indptr, exc.entry, side="right") - 1)
    where = (f"document {document}, term {int(X.indices[exc.entry])} (value {exc.y:g}, "
             f"mean {exc.mean:g})")
    name = exc.loss_name
    if np.isnan(exc.mean) or not np.all(np.isfinite(entry_codes(state.codes, exc.entry))):
        return (f"the {name} loss's coordinate solver returned a code that is not a number at "
                f"{where}: the loss's gradient or curvature is not a number at some mean inside "
                "its mean domain, or its derivatives are inconsistent; check it with "
                "stc.losses.check_loss(loss, data=X.data)")
    typical = float(np.median(X.data))
    penalties = {"lambda_": problem.lambda_, "gamma": problem.gamma, "rho": problem.rho}
    parameter, largest = max(penalties.items(), key=lambda item: item[1])
    if typical <= 1e-10:
        return (f"the {name} loss is infinite at {where}: X's values are tiny (median "
                f"{typical:g}), below the rounding of the codes' running sums (the codes start "
                "near 1 and are resolved to about 1e-16 of that), so a positive value was left "
                "with a mean at the end of the loss's domain. Rescale X so that its values are "
                "near 1, e.g. X / X.data.mean()")
    if largest >= 1e10 * max(typical, 1.0) and parameter == "rho" and rho_units == "relative":
        return (f"the {name} loss is infinite at {where}: rho={rho:g} (relative units) gave "
                f"objective (2) the weight rho sqrt(2 gamma w_bar) = {largest:g}, w_bar = "
                f"{X.data.mean():g} the mean value of X's non-zeros; that is "
                f"{largest / typical:.3g} times the median value of X ({typical:g}), so the "
                "penalty drives every code of this word to 0, where the loss of a positive "
                "value is infinite. Lower rho, give it in absolute units "
                "(rho_units='absolute'), or clean X of its outlying values")
    if largest >= 1e10 * max(typical, 1.0):
        return (f"the {name} loss is infinite at {where}: {parameter}={largest:g} is "
                f"{largest / typical:.3g} times the median value of X ({typical:g}), so the "
                "penalty drives every code of this word to 0, where the loss of a positive "
                f"value is infinite. Lower {parameter}")
    return (f"the {name} loss is not finite at {where}: the mean left the loss's domain "
            f"{tuple(problem.loss.mean_domain)} (X's median value {typical:g}, "
            f"lambda_={problem.lambda_:g}, gamma={problem.gamma:g}, rho={problem.rho:g})")
