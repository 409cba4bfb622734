"""Shared test helpers: the embedded corpus, a pure-Python Poisson loss, a broken loss, optional extras."""
import importlib
import importlib.util
import os

import numpy as np
import pytest
from hypothesis import settings

from stc._simd import _dispatch as simd
from stc.datasets import load_newsgroups_split
from stc.losses import PythonLoss

# Property tests draw the same examples on every run (seeded by the test's name), so that
# a run of the suite can only fail for a change of the code, and they keep no example
# database in the working directory. STC_HYPOTHESIS=random draws new examples each run
# (and keeps the database), to explore; the long fuzz profile (tests/fuzz_profile.py)
# sets its own.
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("random", derandomize=False)
settings.load_profile(os.environ.get("STC_HYPOTHESIS", "repeatable"))


def draw_without_project_literals():
    """Recent Hypothesis mixes literals found in the project's loaded modules into the
    examples it draws, so derandomised examples would change with what a run happens to
    have imported by then; the repeatable profile draws without them."""
    try:
        from hypothesis.internal.conjecture import providers
        no_literals = providers.Constants()
        providers._get_local_constants  # the hook this Hypothesis calls for them
    except (ImportError, AttributeError):
        return  # a Hypothesis without that pool
    providers._get_local_constants = lambda: no_literals


if os.environ.get("STC_HYPOTHESIS", "repeatable") == "repeatable":
    draw_without_project_literals()

# The ConvergenceWarning of a fit stopped at max_iter on purpose: a few outer
# iterations are all such a test needs. pyproject.toml turns warnings into
# errors, so a test that fits briefly carries this mark, which silences that
# warning only (not the one about documents at inner_max_iter, nor the SVM's).
brief_fit = pytest.mark.filterwarnings(
    r"ignore:(STC|MedSTC) stopped at max_iter=\d+ before:sklearn.exceptions.ConvergenceWarning")


class NumpyPoisson(PythonLoss):
    """The Poisson deviance written with numpy: runs the numpy coding sweep."""

    name = "numpy-poisson"
    mean_domain = (0.0, np.inf)

    def loss(self, y, mean):
        y, mean = np.broadcast_arrays(np.asarray(y, float), np.asarray(mean, float))
        with np.errstate(divide="ignore", invalid="ignore"):
            value = mean - y + np.where(y > 0, y * np.log(np.where(y > 0, y, 1.0) / mean), 0.0)
        return np.where(mean > 0, value, np.inf)

    def gradient(self, y, mean):
        with np.errstate(divide="ignore", invalid="ignore"):
            return 1.0 - np.asarray(y, float) / np.asarray(mean, float)

    def hessian(self, y, mean):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.asarray(y, float) / np.asarray(mean, float) ** 2


class MissingHessian(PythonLoss):
    """A squared error without hessian: `register` and `check_loss` must refuse it."""

    def loss(self, y, mean):
        return 0.5 * (np.asarray(mean) - y) ** 2

    def gradient(self, y, mean):
        return np.asarray(mean) - y


@pytest.fixture(scope="session")
def newsgroups():
    """The embedded corpus as (train, test) bunches."""
    return load_newsgroups_split()


def pytest_configure(config):
    # Registered here, not in pyproject.toml, so that a copy of tests/ run without the
    # checkout's configuration (tools/check_wheel.sh) knows the mark too.
    config.addinivalue_line(
        "markers", "slow: a long test, left out of the default run (pytest -m slow runs them)")


# The level in use runs by default; the others repeat the same checks at other levels
# and are slow (.ci/run runs them).
@pytest.fixture(params=[pytest.param(level, marks=() if level == simd.level() else pytest.mark.slow)
                        for level in simd.levels()])
def simd_level(request):
    """Each vector level of the coding kernels this machine runs, restored afterwards."""
    previous = simd.set_level(request.param)
    yield request.param
    simd.set_level(previous)


@pytest.fixture
def numpy_poisson():
    return NumpyPoisson()


def optional(module):
    """Import a test extra; skip without it, except in CI, where it must be installed."""
    if os.environ.get("CI") == "true":
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"{module} is not installed "
                                              f"(pip install -e '.[test]' brings it)")


def load_benchmark(filename):
    """Import a script of the repository's benchmarks/ folder (not a package) as a module."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "benchmarks", filename)
    spec = importlib.util.spec_from_file_location(os.path.splitext(filename)[0], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pytest_report_header(config):
    """Name the stc under test: the source tree's, or an installed wheel's (tools/check_wheel.sh)."""
    import stc

    return (f"stc {stc.__version__} from {os.path.dirname(stc.__file__)} "
            f"(OpenMP {'on' if stc.openmp_enabled() else 'off'}; vector level "
            f"{simd.level()} of {', '.join(simd.levels())})")
