"""Build the Cython kernels, with OpenMP when the compiler supports it.

Without OpenMP the extensions still build; `prange` then runs serially and
`stc.openmp_enabled()` reports False (a warning is printed once at build time).
"""
import os
import sys
import tempfile
import textwrap

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def _openmp_flags(compiler):
    """Return (compile_args, link_args) that enable OpenMP, or None."""
    if sys.platform == "win32":
        candidates = [(["/openmp"], [])]
    elif sys.platform == "darwin":
        candidates = [(["-Xpreprocessor", "-fopenmp"], ["-lomp"]), (["-fopenmp"], ["-fopenmp"])]
    else:
        candidates = [(["-fopenmp"], ["-fopenmp"])]
    source = textwrap.dedent(
        """
        #include <omp.h>
        int main(void) { return omp_get_max_threads() > 0 ? 0 : 1; }
        """
    )
    for compile_args, link_args in candidates:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "check_openmp.c")
            with open(path, "w") as handle:
                handle.write(source)
            try:
                objects = compiler.compile([path], output_dir=tmp, extra_postargs=compile_args)
                compiler.link_executable(objects, "check_openmp", output_dir=tmp,
                                         extra_postargs=link_args)
            except Exception:  # any compiler or linker failure means "no OpenMP"
                continue
            return compile_args, link_args
    return None


class BuildExtWithOpenMP(build_ext):
    def build_extensions(self):
        flags = _openmp_flags(self.compiler)
        if flags is None:
            print("stc: the C compiler has no OpenMP support; the kernels will run serially.",
                  file=sys.stderr)
        # No kernel reads errno: without it sqrt compiles to the bare instruction (the
        # same correctly rounded value) instead of a test and a library call that keep
        # the coding kernel's registers spilled (see `solve_poisson_coordinates`).
        # -ffp-contract=off: no fused multiply-adds where the target has them (aarch64, or
        # an -march with FMA), so the kernels round as on baseline x86-64 and the pinned
        # bits (tests/test_pinned_results.py) hold on every architecture.
        optimise = ([] if sys.platform == "win32"
                    else ["-O3", "-fno-math-errno", "-ffp-contract=off"])
        for ext in self.extensions:
            ext.extra_compile_args = optimise + (flags[0] if flags else [])
            ext.extra_link_args = flags[1] if flags else []
        super().build_extensions()


def _extension(module):
    return Extension(
        module,
        [module.replace(".", "/") + ".pyx"],
        include_dirs=[np.get_include()],
        # Built against numpy 2 (pyproject's build requirements), the modules run on every
        # numpy from the target on: the oldest numpy of pyproject's `dependencies`.
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"),
                       ("NPY_TARGET_VERSION", "NPY_1_24_API_VERSION")],
    )


EXTENSIONS = [
    "stc.losses._base",
    "stc.losses._builtin",
    "stc.losses._testing",
    "stc._core._simd",
    "stc._core._word_codes",
    "stc._core._coding",
    "stc._core._simplex",
    "stc._core._sparse_ops",
    "stc._core._openmp",
    "stc._core._dense",
    "stc.supervised._qp",
]

setup(
    ext_modules=cythonize(
        [_extension(m) for m in EXTENSIONS],
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    ),
    cmdclass={"build_ext": BuildExtWithOpenMP},
)
