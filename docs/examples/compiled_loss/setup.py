"""Build the compiled loss example:  python setup.py build_ext --inplace

The extension needs stc's .pxd files (for `cimport stc.losses._base`) and
numpy's headers. It needs no OpenMP flags: the parallel loop lives in stc's
own coding kernel, which calls this module's nogil methods from its threads.
"""
import sys

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

import stc

extension = Extension(
    "pseudo_huber",
    ["pseudo_huber.pyx"],
    include_dirs=[stc.get_include(), numpy.get_include()],
    # -ffp-contract=off: no fused multiply-adds, which the compiler may use in one copy of
    # a formula and not in another (PseudoHuberBlockLoss's block promises its scalar bits)
    extra_compile_args=[] if sys.platform == "win32" else ["-O3", "-ffp-contract=off"],
)

setup(
    name="pseudo-huber-loss",
    ext_modules=cythonize([extension], include_path=[stc.get_include()],
                          compiler_directives={"language_level": 3}),
)
