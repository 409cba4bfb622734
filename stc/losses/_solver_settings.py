"""Settings of the generic coordinate solver, read by both of its versions.

The compiled solver (`CompiledLoss._newton_coordinate`, `_base.pyx`) copies
them into C variables when its module is imported; the numpy solver
(`newton_coordinate`, `_python.py`) uses them as they are. Change them here
only, and rebuild nothing: both read this file.
"""

# Newton stops when its step, or the bracket around the minimiser, is below
# this fraction of |x| (the relative accuracy promised in the docs).
NEWTON_RTOL = 1e-10

# Safeguarded Newton converges well within this many steps for any convex
# loss: at most ~12 bisections in log x bring the bracket within a factor 4,
# then each bisection halves it (~35 more for NEWTON_RTOL). Reaching the cap
# means the loss's derivatives are inconsistent: the solver reports failure.
NEWTON_MAX_ITER = 200

# Where the mean domain is unbounded above, the right end of the bracket
# doubles until the slope of the coordinate problem turns positive; enough
# doublings to span the whole double range.
BRACKET_MAX_DOUBLINGS = 1100

# Relative distance kept from a finite upper end of the mean domain, so that
# sums of the same terms in another order cannot round onto the open end.
DOMAIN_MARGIN = 1e-10
