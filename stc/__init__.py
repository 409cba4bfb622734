"""Sparse Topical Coding (Zhu & Xing, UAI 2011): sparse non-negative codes for
documents and words, learned by coordinate descent; MedSTC adds a max-margin
classifier on the document codes."""
import importlib as _importlib
import os as _os

__all__ = ["DataWarning", "FitInterruptedWarning", "MedSTC", "ModelFileError", "STC",
           "openmp_enabled", "get_include", "load", "report", "show_config"]
# The one place of the version: the package metadata (pyproject.toml), `stc --version`,
# model files and the documentation read it.
__version__ = "0.1.0"

# The public names are imported on first use (PEP 562), so that `import stc` (and the
# `stc` command's quick answers) need not load scikit-learn and scipy.
_PUBLIC = {"DataWarning": "stc._utils.validation",
           "FitInterruptedWarning": "stc._learning.progress",
           "MedSTC": "stc._estimators.medstc", "ModelFileError": "stc._estimators.persistence",
           "STC": "stc._estimators.stc", "openmp_enabled": "stc._core._openmp",
           "load": "stc._estimators.persistence", "report": "stc._report",
           "show_config": "stc._config"}
# `load` finds the estimator classes in the table they register in when imported.
_IMPORTED_FIRST = {"load": ("stc._estimators.stc", "stc._estimators.medstc")}
# The public submodules, imported on first use like the names above. The rest of the package
# (the folders whose names start with "_") is private: see docs/algorithms.md.
_SUBMODULES = ("datasets", "inspection", "losses", "plotting", "readers")


def _check_simd_level_variable():
    """Refuse a bad STC_SIMD_LEVEL at `import stc`, in one line: the level's module reads it
    on its first import, deep inside whatever first needs the kernels."""
    try:
        from stc._simd import _dispatch  # noqa: F401  (small: the level list and choice)
    except ValueError as error:
        raise ValueError(str(error)) from None


_check_simd_level_variable()


def __getattr__(name):
    if name in _PUBLIC:
        for module in _IMPORTED_FIRST.get(name, ()):
            _importlib.import_module(module)
        value = getattr(_importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    if name in _SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__) | set(_SUBMODULES))


def get_include():
    """Directory holding the ``stc`` package, for building a compiled loss.

    Pass it to ``cythonize(..., include_path=[stc.get_include()])`` so that
    ``from stc.losses._base cimport CompiledLoss`` finds ``_base.pxd`` (Cython
    searches ``include_path``, not the extension's ``include_dirs``).
    """
    return _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
