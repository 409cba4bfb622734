"""Sparse Topical Coding (Zhu & Xing, UAI 2011): sparse non-negative codes for
documents and words, learned by coordinate descent; MedSTC adds a max-margin
classifier on the document codes."""
from stc._core._openmp import openmp_enabled
from stc._stc import STC

__all__ = ["STC", "openmp_enabled", "get_include"]
__version__ = "0.1.0"


def get_include():
    """Directory to add to a Cython build's include path to ``cimport stc.losses._base``."""
    import os

    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
