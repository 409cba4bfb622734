"""What the coding sweep found broken in a loss, reported per document (the first failure only).

The coordinate solver returned NaN, the hessian was NaN at a code's mean, or the loss
was NaN at a mean inside its domain, each from finite arguments. A NaN that comes from
non-finite arguments (codes that ran off to infinity in an unbounded problem) is not
the loss's failure and is not reported. The coding kernel and its numpy reference
record these codes (`stc._core._constants` passes them on); `loss_failure_message`
words them.
"""
FAILURE_NONE = 0
FAILURE_SOLVER = 1
FAILURE_HESSIAN = 2
FAILURE_LOSS = 3
