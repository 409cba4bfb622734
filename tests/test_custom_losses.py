"""The user-defined loss examples of docs/custom_losses.md, run as a user would.

* docs/examples/python_loss.py runs as a script and fits STC with its
  registered pure-Python pseudo-Huber loss;
* docs/examples/compiled_loss is copied to a temporary directory and built
  with ``python setup.py build_ext --inplace``; its compiled pseudo-Huber
  codes documents like the pure-Python one, and registers and fits;
* `register` refuses broken losses the way the guide says.
"""
import importlib
import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import stc
import stc.datasets
import stc.losses

from conftest import MissingHessian, brief_fit

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"
GUIDE = ROOT / "docs" / "custom_losses.md"
HUBER_PARAMS = dict(lambda_=1e-4, rho=1e-5)


def _has_c_compiler():
    return any(shutil.which(cc) for cc in ("cc", "gcc", "clang"))


needs_compiler = pytest.mark.skipif(
    not _has_c_compiler(), reason="building the compiled loss example needs a C compiler "
                                  "(no cc, gcc or clang on PATH)")


@pytest.fixture(scope="module", autouse=True)
def restore_loss_registry():
    """The examples register losses globally: undo that after this module."""
    saved = dict(stc.losses._REGISTRY)
    yield
    stc.losses._REGISTRY.clear()
    stc.losses._REGISTRY.update(saved)


@pytest.fixture(scope="module")
def python_loss():
    """The docs example imported as a module (registers "pseudo_huber")."""
    sys.path.insert(0, str(EXAMPLES))
    dont_write, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # keep docs/ clean
    try:
        module = importlib.import_module("python_loss")
    finally:
        sys.path.remove(str(EXAMPLES))
        sys.dont_write_bytecode = dont_write
    return module


@pytest.fixture(scope="module")
def compiled_module(tmp_path_factory):
    """docs/examples/compiled_loss built in a temporary directory and imported."""
    pytest.importorskip("Cython")
    if not _has_c_compiler():
        pytest.skip("building the compiled loss example needs a C compiler")
    target = tmp_path_factory.mktemp("build") / "compiled_loss"
    shutil.copytree(EXAMPLES / "compiled_loss", target,
                    ignore=shutil.ignore_patterns("build", "*.so", "*.pyd", "*.c"))
    result = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=target,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"build failed:\n{result.stdout}\n{result.stderr}"
    sys.path.insert(0, str(target))
    try:
        module = importlib.import_module("pseudo_huber")
    finally:
        sys.path.remove(str(target))
    module.build_dir = target
    return module


@pytest.fixture(scope="module")
def small_corpus():
    """60 documents from the three groups and a dictionary fitted on them with Poisson."""
    train = stc.datasets.load_newsgroups("train")
    X = train.data[::30]
    model = stc.STC(n_topics=8, max_iter=3, random_state=0).fit(X)
    return X, model


# ---------------------------------------------------------------------------
# The guide includes the example files verbatim
# ---------------------------------------------------------------------------

def test_guide_includes_example_files_verbatim():
    guide = GUIDE.read_text()
    for path in ("python_loss.py", "compiled_loss/pseudo_huber.pyx", "compiled_loss/setup.py",
                 "compiled_loss/use_compiled_loss.py"):
        source = (EXAMPLES / path).read_text().strip()
        assert source in guide, f"docs/custom_losses.md does not contain docs/examples/{path}"


# ---------------------------------------------------------------------------
# Pure-Python loss
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def python_script_output():
    """stdout of ``python docs/examples/python_loss.py 60``."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    result = subprocess.run([sys.executable, str(EXAMPLES / "python_loss.py"), "60"],
                            cwd=EXAMPLES, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _topic_lines(output):
    return [line for line in output.splitlines() if re.match(r"topic \d+: ", line)]


def test_python_example_runs_as_script(python_script_output):
    lines = python_script_output.strip().splitlines()
    assert lines[0].startswith("pseudo_huber: 60 documents")
    topics = _topic_lines(python_script_output)
    assert len(topics) == 10
    assert all(len(line.split(": ", 1)[1].split()) == 8 for line in topics)


def test_python_loss_registered_and_checked(python_loss):
    assert "pseudo_huber" in stc.losses.registered_losses()
    loss = stc.losses.get_loss("pseudo_huber")
    assert isinstance(loss, python_loss.PseudoHuberLoss)
    stc.losses.check_loss(loss, data=np.arange(1.0, 30.0))
    y = np.array([0.0, 1.0, 3.0, 10.0])
    mean = np.array([0.5, 1.0, -2.0, 100.0])
    r = mean - y
    np.testing.assert_allclose(loss.loss(y, mean), np.sqrt(1 + r * r) - 1)
    # Quadratic near the data, linear (slope delta = 1) far from it.
    np.testing.assert_allclose(loss.loss(1.0, 1.0 + 1e-4), 0.5e-8, rtol=1e-6)
    np.testing.assert_allclose(loss.gradient(0.0, 1e6), 1.0, rtol=1e-9)


# ---------------------------------------------------------------------------
# check_loss / register refusals described in the guide
# ---------------------------------------------------------------------------

class Cauchy(stc.losses.PythonLoss):
    """log(1 + (mean - y)^2): robust, but not convex for |mean - y| > 1."""

    def loss(self, y, mean):
        return np.log1p((mean - y) ** 2)

    def gradient(self, y, mean):
        r = mean - y
        return 2 * r / (1 + r * r)

    def hessian(self, y, mean):
        r = mean - y
        return 2 * (1 - r * r) / (1 + r * r) ** 2


class CrossEntropy(stc.losses.PythonLoss):
    """Binary cross-entropy: mean in (0, 1), data in [0, 1]."""

    mean_domain = (0.0, 1.0)

    def loss(self, y, mean):
        from scipy.special import xlogy

        return xlogy(y, y / mean) + xlogy(1 - y, (1 - y) / (1 - mean))

    def gradient(self, y, mean):
        return (1 - y) / (1 - mean) - y / mean

    def hessian(self, y, mean):
        return y / mean ** 2 + (1 - y) / (1 - mean) ** 2


def test_register_refuses_missing_hessian():
    with pytest.raises(TypeError, match="hessian"):
        stc.losses.register("broken_missing_hessian", MissingHessian)
    assert "broken_missing_hessian" not in stc.losses.registered_losses()


def test_register_refuses_non_convex_loss():
    with pytest.raises(ValueError, match="not convex"):
        stc.losses.register("broken_cauchy", Cauchy)
    assert "broken_cauchy" not in stc.losses.registered_losses()


def test_check_loss_refuses_domain_that_excludes_the_data():
    counts = stc.datasets.load_newsgroups("train").data.data
    stc.losses.check_loss(CrossEntropy(), data=np.array([0.0, 0.5, 1.0]))
    with pytest.raises(ValueError, match="does not fit the data"):
        stc.losses.check_loss(CrossEntropy(), data=counts)


def test_register_refuses_non_loss_class():
    with pytest.raises(TypeError, match="subclass"):
        stc.losses.register("broken_not_a_loss", object)


# ---------------------------------------------------------------------------
# Compiled loss
# ---------------------------------------------------------------------------

@needs_compiler
def test_compiled_loss_matches_python_loss_pointwise(compiled_module, python_loss):
    compiled = compiled_module.PseudoHuberLoss()
    pure = python_loss.PseudoHuberLoss()
    assert compiled.mean_domain == pure.mean_domain == (-np.inf, np.inf)
    rng = np.random.default_rng(0)
    y = rng.integers(0, 20, 500).astype(float)
    mean = rng.normal(5.0, 10.0, 500)
    for method in ("loss", "gradient", "hessian"):
        np.testing.assert_allclose(getattr(compiled, method)(y, mean),
                                   getattr(pure, method)(y, mean), rtol=1e-13, atol=1e-15)
    # Same coordinate minimiser from the nogil Newton and the numpy Newton.
    b = rng.uniform(0.0, 1e-2, 500)
    rest = rng.uniform(0.0, 20.0, 500)
    lin = 1e-5 - 2e-4 * rng.uniform(0.0, 1e3, 500)
    np.testing.assert_allclose(compiled.solve_coordinate(y, b, rest, 1e-4, lin),
                               pure.solve_coordinate(y, b, rest, 1e-4, lin), rtol=1e-9, atol=1e-9)


@needs_compiler
@brief_fit
def test_compiled_and_python_transform_agree(compiled_module, python_loss, small_corpus):
    X, model = small_corpus
    X = X[::2]  # 30 documents from the three groups
    stc.losses.register("pseudo_huber_compiled", compiled_module.PseudoHuberLoss)
    model.set_params(loss="pseudo_huber_compiled", **HUBER_PARAMS)
    theta_compiled = model.transform(X)
    codes_compiled = model.word_codes(X).toarray()
    model.set_params(loss="pseudo_huber")
    theta_python = model.transform(X)
    codes_python = model.word_codes(X).toarray()
    assert np.mean(theta_compiled > 0) > 0.5  # the codes are not trivially zero
    scale = np.abs(theta_compiled).max()
    np.testing.assert_allclose(theta_python, theta_compiled, rtol=0, atol=1e-8 * scale)
    np.testing.assert_allclose(codes_python, codes_compiled, rtol=0,
                               atol=1e-8 * np.abs(codes_compiled).max())
    model.set_params(loss="poisson", lambda_=0.1, rho=0.01)


@needs_compiler
def test_compiled_poisson_newton_matches_builtin_closed_form(compiled_module, small_corpus):
    X, model = small_corpus
    stc.losses.register("poisson_newton", compiled_module.PoissonNewtonLoss)
    model.set_params(loss="poisson")
    theta_closed = model.transform(X)
    model.set_params(loss="poisson_newton")
    theta_newton = model.transform(X)
    model.set_params(loss="poisson")
    np.testing.assert_allclose(theta_newton, theta_closed, rtol=0,
                               atol=1e-8 * np.abs(theta_closed).max())


@needs_compiler
@brief_fit
def test_compiled_loss_registers_and_fits(compiled_module, small_corpus):
    X, _ = small_corpus
    stc.losses.register("pseudo_huber_compiled", compiled_module.PseudoHuberLoss)
    assert "pseudo_huber_compiled" in stc.losses.registered_losses()
    X = X[::2]
    model = stc.STC(n_topics=4, loss="pseudo_huber_compiled", max_iter=3, random_state=0,
                    n_jobs=2, **HUBER_PARAMS).fit(X)
    assert model.n_iter_ >= 1
    assert np.all(np.diff(model.objective_) <= 1e-9 * np.abs(model.objective_[:-1]))
    np.testing.assert_allclose(model.components_.sum(axis=1), 1.0)
    theta = model.transform(X)
    assert theta.shape == (X.shape[0], 4) and np.all(theta >= 0) and theta.sum() > 0
    # Threads do not change the result.
    model.set_params(n_jobs=1)
    np.testing.assert_array_equal(model.transform(X), theta)


@needs_compiler
def test_compiled_loss_parameter_survives_copies(compiled_module):
    import copy

    loss = compiled_module.PseudoHuberLoss(delta=2.5)
    assert loss.delta == 2.5
    assert pickle.loads(pickle.dumps(loss)).delta == 2.5
    assert copy.deepcopy(loss).delta == 2.5
    with pytest.raises(ValueError, match="delta"):
        compiled_module.PseudoHuberLoss(delta=0.0)
    np.testing.assert_allclose(loss.loss(0.0, 100.0), 2.5 ** 2 * (np.sqrt(1 + 40.0 ** 2) - 1))


@needs_compiler
@brief_fit
def test_a_loss_instance_with_other_settings_is_not_saved_as_its_defaults(
        compiled_module, python_loss, small_corpus, tmp_path):
    # a model file names the loss: saved with delta=0.05, it loaded with delta=1.0 and
    # coded differently, silently
    X = small_corpus[0][::2]
    stc.losses.register("pseudo_huber_compiled", compiled_module.PseudoHuberLoss)
    for kind, loss in (("python", python_loss.PseudoHuberLoss(delta=3.0)),
                       ("compiled", compiled_module.PseudoHuberLoss(delta=3.0))):
        path = tmp_path / f"{kind}.stc"
        model = stc.STC(n_topics=3, loss=loss, max_iter=2, random_state=0, **HUBER_PARAMS).fit(X)
        with pytest.raises(ValueError, match=r"^cannot save: the loss instance .* has settings "
                                             r"other than a new PseudoHuberLoss\(\)'s"):
            model.save(path)
        assert not path.exists()
        model.set_params(loss=type(loss)())  # the defaults: what a file naming it loads
        model.save(path)
        np.testing.assert_array_equal(stc.load(path).transform(X), model.transform(X))


@pytest.fixture(scope="module")
def compiled_example_run(compiled_module):
    """use_compiled_loss.main(60) run from the build directory: (model, stdout)."""
    import contextlib
    import io

    sys.path.insert(0, str(compiled_module.build_dir))
    try:
        module = importlib.import_module("use_compiled_loss")
    finally:
        sys.path.remove(str(compiled_module.build_dir))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        model = module.main(60)
    return model, out.getvalue()


@needs_compiler
@brief_fit
def test_compiled_example_runs(compiled_example_run):
    model, output = compiled_example_run
    lines = output.strip().splitlines()
    assert lines[0].startswith("pseudo_huber_compiled: 60 documents")
    assert len(_topic_lines(output)) == 10
    assert model.components_.shape == (10, 18335)
    np.testing.assert_allclose(model.components_.sum(axis=1), 1.0)
    # The objective never increases.
    assert np.all(np.diff(model.objective_) <= 1e-9 * np.abs(model.objective_[:-1]))


@needs_compiler
def test_compiled_and_python_examples_learn_the_same_topics(compiled_example_run,
                                                            python_script_output):
    """Same documents and settings: the two examples print the same fit."""
    _, compiled_output = compiled_example_run

    def objective(output):
        return float(re.search(r"objective ([0-9.]+)", output).group(1))

    assert objective(compiled_output) == pytest.approx(objective(python_script_output), rel=1e-6)
    assert _topic_lines(compiled_output) == _topic_lines(python_script_output)


# ---------------------------------------------------------------------------
# The example losses at extreme residuals, against 200-bit references
# ---------------------------------------------------------------------------

def _pseudo_huber_reference(y, mean, delta):
    """(loss, gradient, hessian) of the pseudo-Huber loss in 200-bit arithmetic (mpmath)."""
    import mpmath
    with mpmath.workprec(200):
        r = (mpmath.mpf(mean) - mpmath.mpf(y)) / delta
        root = mpmath.sqrt(1 + r * r)
        # (root - 1 as r^2 / (root + 1): at r = 1e-160 even 200 bits would cancel to 0)
        return [float(v) for v in (delta ** 2 * r * r / (root + 1), delta * r / root, root ** -3)]


@pytest.mark.parametrize("kind", ["python", "compiled"])
def test_example_losses_are_accurate_at_every_magnitude(kind, request):
    """No overflow or cancellation from residuals of 1e-300 up to 1e300 (issue 20, finding 2).

    The first versions computed sqrt(1 + r * r): r * r overflows beyond 1e154, so the
    gradient at mean = 1e200 was 0 (not 1) and the loss at 1e155 inf, and the loss
    lost all its digits to cancellation below r = 1e-8.
    """
    module = request.getfixturevalue("python_loss" if kind == "python" else "compiled_module")
    exponents = np.linspace(-300, 300, 241)
    residuals = np.concatenate([-10.0 ** exponents, [0.0], 10.0 ** exponents])
    for delta in (1.0, 3.0):
        loss = module.PseudoHuberLoss(delta=delta)
        for y in (0.0, 7.0):
            means = y + residuals
            got = np.array([loss.loss(y, means), loss.gradient(y, means), loss.hessian(y, means)])
            want = np.array([_pseudo_huber_reference(y, m, delta) for m in means]).T
            # (atol: a few roundings of a subnormal result)
            np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-322)
    # the fuzz finding itself; Newton is then not misled into blaming the loss
    loss = module.PseudoHuberLoss()
    assert loss.gradient(np.zeros(1), np.array([1e200]))[0] == 1.0
    assert loss.loss(0.0, 1e155) == pytest.approx(1e155, rel=1e-15)
    assert float(loss.solve_coordinate(0.0, 1.0, 1e200, 1.0, 0.0)) == 0.0
    # h'(x) = l'(x - 1e200) + 2e-210 x: l' ~ -1 below y = 1e200, so the zero is where
    # l' = -2e-10, a residual of -2e-10 (delta = 1): x = 1e200 to the solver's 1e-10
    x = float(loss.solve_coordinate(1e200, 1.0, 0.0, 1e-210, 0.0))
    assert x == pytest.approx(1e200, rel=1e-9)


@needs_compiler
def test_a_user_block_method_gives_its_scalar_path_bit_for_bit(compiled_module, small_corpus):
    """The docs' PseudoHuberBlockLoss overrides _solve_block: the same bits as word by word."""
    block = compiled_module.PseudoHuberBlockLoss()
    word_by_word = compiled_module.PseudoHuberWordByWordLoss()
    generic = compiled_module.PseudoHuberLoss()
    rng = np.random.default_rng(1)
    y = rng.integers(0, 20, 700).astype(float)
    b = rng.uniform(0.0, 1e-2, 700)
    b[::9] = 0.0
    rest = rng.uniform(0.0, 20.0, 700)
    start = rng.uniform(0.0, 3e3, 700)
    for lin in (-0.2, -1e-3, 0.0, 1e-3):
        solved = block.solve_block(y, b, rest, 1e-4, lin, start)
        assert solved.tobytes() == block.solve_coordinate(y, b, rest, 1e-4, lin, start).tobytes()
        assert solved.tobytes() == word_by_word.solve_block(y, b, rest, 1e-4, lin,
                                                            start).tobytes()
        # its own solver agrees with the generic Newton solver to their tolerance
        np.testing.assert_allclose(solved, generic.solve_coordinate(y, b, rest, 1e-4, lin, start),
                                   rtol=1e-8, atol=1e-9)
    X, model = small_corpus
    thetas = []
    for name, cls in [("pseudo_huber_block", type(block)),
                      ("pseudo_huber_word_by_word", type(word_by_word))]:
        stc.losses.register(name, cls)
        model.set_params(loss=name, **HUBER_PARAMS)
        thetas.append(model.transform(X))
    model.set_params(loss="poisson", lambda_=0.1, rho=0.01)
    assert np.mean(thetas[0] > 0) > 0.5
    assert thetas[0].tobytes() == thetas[1].tobytes()
