"""MedSTC's learning steps (batch, online, Dask) and its 1-slack multi-class SVM (private).

The estimator itself is `stc._estimators.medstc`.
"""
