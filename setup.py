"""Build the Cython kernels, with OpenMP when the compiler supports it.

Without OpenMP the extensions still build; `prange` then runs serially and
`stc.openmp_enabled()` reports False (a warning is printed once at build time).

Cython and the C compiler run on every core. An editable install (`pip install -e .`)
compiles only the modules whose sources changed since the last one: pip builds in a fresh
temporary directory each time, so the compiled modules beside the sources are the only
build that persists. Deleting them (`git clean -fX stc`) rebuilds them all.
"""
import glob
import os
import shutil
import sys
import tempfile
import textwrap

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
CYTHON_DIRECTIVES = {
    "language_level": 3,
    "boundscheck": False,
    "wraparound": False,
    "cdivision": True,
    "initializedcheck": False,
}


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
    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:  # one compiler per core (a thread pool over the modules)
            self.parallel = os.cpu_count() or 1

    def build_extensions(self):
        # Decided once, before Cython replaces the .pyx sources by the .c files it writes.
        self._kept = {ext.name for ext in self.extensions if self._reusable(ext)}
        stale = [ext for ext in self.extensions if ext.name not in self._kept]
        if stale:
            self._configure(stale)
            # Cythonized here rather than at import, so that an unchanged module skips
            # Cython too: pip's fresh Cython has newer include files than any generated
            # .c, and cythonize would write them all again.
            generated = cythonize(stale, compiler_directives=CYTHON_DIRECTIVES,
                                  nthreads=self.parallel, force=self.force)
            for ext, new in zip(stale, generated):
                ext.sources = new.sources
                ext.depends = new.depends
            # Longest first (C size is a fair proxy), so that no core waits at the end
            # for a long module started last.
            self.extensions.sort(key=lambda ext: -os.path.getsize(ext.sources[0]))
        super().build_extensions()

    def _configure(self, extensions):
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
        for ext in extensions:
            ext.extra_compile_args = optimise + (flags[0] if flags else [])
            ext.extra_link_args = flags[1] if flags else []

    def build_extension(self, ext):
        if ext.name in self._kept:
            destination = self.get_ext_fullpath(ext.name)
            os.makedirs(os.path.dirname(destination), exist_ok=True)
            shutil.copy2(_inplace_module(self, ext), destination)
        else:
            super().build_extension(ext)

    def _reusable(self, ext):
        """Whether an editable build can keep the compiled module beside the sources."""
        if not self.editable_mode or self.force:
            return False
        module = _inplace_module(self, ext)
        if not os.path.exists(module):
            return False
        built = os.path.getmtime(module)
        # Any .pxd or header may be cimported or included by any module: a change to one
        # rebuilds them all. setup.py holds the compiler flags.
        sources = ([os.path.join(HERE, path) for path in ext.sources if path.endswith(".pyx")]
                   + glob.glob(os.path.join(HERE, "stc", "**", "*.pxd"), recursive=True)
                   + glob.glob(os.path.join(HERE, "stc", "**", "*.h"), recursive=True)
                   + [os.path.abspath(__file__)])
        return all(os.path.getmtime(path) < built for path in sources)


def _inplace_module(command, ext):
    """The compiled module beside its .pyx, where an editable install puts it."""
    return os.path.join(HERE, command.get_ext_filename(ext.name))


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
    "stc._simd._dispatch",
    "stc._simd._throughput",
    "stc._core._word_codes",
    "stc._core._coding",
    "stc._core._segments",
    "stc._core._simplex",
    "stc._core._sparse_ops",
    "stc._core._openmp",
    "stc._core._dense",
    "stc._learning.supervised._qp",
]

setup(
    ext_modules=[_extension(m) for m in EXTENSIONS],
    cmdclass={"build_ext": BuildExtWithOpenMP},
)
