"""The estimators `STC` and `MedSTC` and their model files (private; the public names
are `stc.STC`, `stc.MedSTC`, `stc.load` and `stc.ModelFileError`).

Nothing is imported here, so that reading a model file's metadata (`persistence`) needs
neither scikit-learn nor the kernels.
"""
