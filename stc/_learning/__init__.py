"""How topics are learned (private): coding, the dictionary steps, the training loop.

Above the kernels (`stc._core`) and the losses, below the estimators (`stc._estimators`):
`learners/` holds the ways of learning (batch, online, Dask) behind one contract, and
`supervised/` MedSTC's label-aware learning steps and its SVM. Nothing here imports an
estimator.
"""
