"""What this installation of stc runs on: versions, OpenMP threads and the coding kernels' vector level."""
import os
import platform
import sys

import numpy as np
import scipy
import sklearn

import stc
from stc._core import _openmp
from stc._simd import _dispatch as _simd


def configuration():
    """The facts `show_config` prints, as a dict (for bug reports and benchmark headers)."""
    return {
        "stc": stc.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "openmp": _openmp.openmp_enabled(),
        "openmp max threads": _openmp.resolve_n_jobs(-1),
        "simd level": _simd.level(),
        "simd levels supported": list(_simd.levels()),
        "simd levels compiled": list(_simd.compiled_levels()),
        _simd.ENVIRONMENT_VARIABLE: os.environ.get(_simd.ENVIRONMENT_VARIABLE),
    }


def show_config():
    """Print the versions, OpenMP's threads and the coding kernels' vector level in use.

    The level is the best one this CPU supports among those compiled
    (``scalar``, ``baseline``, ``avx2``, ``avx512``), capped by the environment
    variable ``STC_SIMD_LEVEL`` if it is set before stc is imported; every
    level gives the same results bit for bit. See docs/install.md.
    """
    width = max(map(len, configuration()))
    for key, value in configuration().items():
        if isinstance(value, list):
            value = ", ".join(value)
        print(f"{key:<{width}}  {'(not set)' if value is None else value}")
