"""Checks and small helpers shared by every layer above the kernels (private).

Nothing here imports the rest of the package: parameter and data validation, the text
settings, the class-label check.
"""
