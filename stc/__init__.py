"""Sparse Topical Coding (Zhu & Xing, UAI 2011): sparse non-negative codes for
documents and words, learned by coordinate descent; MedSTC adds a max-margin
classifier on the document codes."""
from stc._core._openmp import openmp_enabled
from stc._persistence import load
from stc._report import report
from stc._stc import STC
from stc.supervised import MedSTC
from stc.training import FitInterruptedWarning

__all__ = ["FitInterruptedWarning", "MedSTC", "STC", "openmp_enabled", "get_include", "load",
           "report"]
# The one place of the version: the package metadata (pyproject.toml), `stc --version`,
# model files and the documentation read it.
__version__ = "0.1.0"


def get_include():
    """Directory holding the ``stc`` package, for building a compiled loss.

    Pass it to ``cythonize(..., include_path=[stc.get_include()])`` so that
    ``from stc.losses._base cimport CompiledLoss`` finds ``_base.pxd`` (Cython
    searches ``include_path``, not the extension's ``include_dirs``).
    """
    import os

    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
