"""Constants of the coding sweep, read by the compiled kernel and its numpy reference alike."""

# The kinds of a loss plugin's failure that the sweep reports (the losses own them).
from stc.losses._failures import (FAILURE_HESSIAN, FAILURE_LOSS,  # noqa: F401
                                  FAILURE_NONE, FAILURE_SOLVER)

# Penalty codes passed to the kernels (`CodingProblem.theta_penalty` / `code_penalty`).
PENALTY_L1 = 0
PENALTY_L2 = 1
PENALTIES = {"l1": PENALTY_L1, "l2": PENALTY_L2}

# Cap on the Newton steps that move each theta_k with its word codes
# (`update_topic_block`); 0 gives the paper's plain alternation. On 20
# Newsgroups (K = 50) the block update reaches the coding optimum in ~3
# sweeps; the plain alternation needs over a hundred. Newton usually stops
# well before the cap.
BLOCK_NEWTON_STEPS = 20

# Block Newton on theta_k stops once its next step would move theta_k by less
# than this fraction, provided theta_k has not passed the block minimiser
# (then the block objective cannot exceed its start value). Past the
# minimiser only a rounding-level step counts as converged. 1e-3 of theta_k
# changes the objective by ~1e-6 of a document's coupling term, far below the
# sweep tolerance, and saves a pass over the words in most blocks.
BLOCK_NEWTON_RTOL = 1e-3

# After passing the minimiser, the Newton step back is lengthened by this
# fraction so that it usually lands on the start's side.
OVERSHOOT_NUDGE = 0.003

# A document's running means are rounded once per code update (about 1e-13
# relative in normal runs); beyond this they are taken as drifted and the
# document's objective is recomputed from exact means.
MEANS_DRIFT_RTOL = 1e-9

# A new document's common start value (`common_start_value`) is found by
# safeguarded Newton to this relative accuracy, in at most this many steps:
# it is only a start.
START_VALUE_RTOL = 1e-3
START_VALUE_MAX_ITER = 50
