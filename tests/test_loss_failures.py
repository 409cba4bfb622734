"""A loss that breaks where `check_loss` does not look: the coding step stops at once and says where.

`check_loss` samples the mean domain; a loss can still be NaN between its
samples. `stc.losses._testing.NaNWindowLoss` is the squared error with its
loss, gradient or hessian NaN on a narrow window of means (5, 5.5), which
the check does not see. The coding kernel must stop the document at the
first NaN it gets from the loss plugin (with finite arguments) and the fit
must fail with a ValueError naming the loss, the point (y, mean) and the
document, before the dictionary step; the numpy coding of a pure-Python loss
must do the same. Valid losses are untouched (tests/test_pinned_results.py).
"""
import re

import numpy as np
import pytest

import stc.losses
from stc import STC, MedSTC
from stc._learning.coding import CodingProblem, code_documents, initial_codes
from stc._learning.dictionary import initial_dictionary
from stc.losses import CompiledLoss, PythonLoss, check_loss
from stc.losses._testing import NaNWindowLoss

WINDOW = (5.0, 5.5)
NUMBER = r"(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)"
POINT = re.compile(rf"at y={NUMBER}, mean={NUMBER}")


class PythonNaNWindow(PythonLoss):
    """NaNWindowLoss written with numpy: runs the numpy reference of the kernel."""

    name = "python_nan_window"

    def __init__(self, broken="gradient"):
        self.broken = broken

    def _window(self, mean, values):
        mean = np.asarray(mean, dtype=np.float64)
        return np.where((mean > WINDOW[0]) & (mean < WINDOW[1]), np.nan, values)

    def loss(self, y, mean):
        value = 0.5 * (np.asarray(mean, float) - y) ** 2
        return self._window(mean, value) if self.broken == "loss" else value

    def gradient(self, y, mean):
        value = np.asarray(mean, float) - y
        return self._window(mean, value) if self.broken == "gradient" else value

    def hessian(self, y, mean):
        value = np.ones(np.broadcast(y, mean).shape)
        return self._window(mean, value) if self.broken == "hessian" else value


@pytest.fixture(scope="module")
def corpus(newsgroups):
    train, _ = newsgroups
    return train.data[::12]


def fit_error(loss, X, n_jobs=1):
    """The message of the ValueError that fitting STC with ``loss`` on ``X`` raises."""
    model = STC(n_topics=3, loss=loss, lambda_=1e-3, rho=1e-4, max_iter=3, random_state=0,
                n_jobs=n_jobs, verbose=1)
    with pytest.raises(ValueError) as info:
        model.fit(X)
    return str(info.value)


def point_of(message):
    y, mean = POINT.search(message).groups()
    return float(y), float(mean)


@pytest.mark.parametrize("broken", ["gradient", "hessian", "loss"])
def test_the_window_escapes_check_loss(broken):
    for loss in (NaNWindowLoss(*WINDOW, broken), PythonNaNWindow(broken)):
        check_loss(loss, data=np.arange(1.0, 40.0))  # passes: the window is between its samples
        assert np.isnan(getattr(loss, broken)(3.0, 5.25))


@pytest.mark.parametrize("broken", ["gradient", "hessian", "loss"])
def test_compiled_loss_stops_coding_at_the_first_nan(broken, corpus, capsys):
    message = fit_error(NaNWindowLoss(*WINDOW, broken), corpus)
    # raised by the coding step of the first iteration: no progress line was printed
    assert "iter" not in capsys.readouterr().err
    assert re.match(r"coding stopped at document \d+, term \d+ \(\d+ document\(s\) failed\): "
                    r"the nan_window loss failed", message), message
    y, mean = point_of(message)
    assert y in corpus.data
    # the point named is one where the loss really is NaN
    assert WINDOW[0] < mean < WINDOW[1], message
    assert np.isnan(getattr(NaNWindowLoss(*WINDOW, broken), broken)(y, mean))
    expected = {"gradient": "coordinate solver returned NaN", "hessian": "its hessian is NaN",
                "loss": "the loss is NaN"}[broken]
    assert expected in message
    if broken == "gradient":
        assert "the loss's gradient is NaN" in message


def test_the_report_does_not_depend_on_the_thread_count(corpus):
    loss = NaNWindowLoss(*WINDOW, "gradient")
    assert fit_error(loss, corpus, n_jobs=1) == fit_error(loss, corpus, n_jobs=2)


@pytest.mark.parametrize("broken", ["gradient", "hessian", "loss"])
def test_python_loss_stops_coding_at_the_first_nan(broken, corpus):
    message = fit_error(PythonNaNWindow(broken), corpus)
    y, mean = point_of(message)
    assert WINDOW[0] < mean < WINDOW[1], message
    assert np.isnan(getattr(PythonNaNWindow(broken), broken)(y, mean))
    assert "python_nan_window" in message


def test_medstc_stops_too(corpus, newsgroups):
    train, _ = newsgroups
    model = MedSTC(n_topics=3, loss=NaNWindowLoss(*WINDOW, "gradient"), lambda_=1e-3, rho=1e-4,
                   max_iter=2, random_state=0)
    with pytest.raises(ValueError, match="coding stopped at document .* gradient is NaN"):
        model.fit(corpus, train.target[::12])


def test_kernel_reports_the_first_failing_document(corpus):
    """The kernel reports the failing document with the lowest index, whatever the threads."""
    loss = NaNWindowLoss(*WINDOW, "gradient")
    problem = CodingProblem(loss, 1e-3, 1e-3, 1e-4)
    beta = initial_dictionary(corpus, 3, 0)
    codes, theta = initial_codes(corpus, 3)
    with pytest.raises(ValueError, match=r"coding stopped at document (\d+)") as info:
        code_documents(problem, corpus, beta, codes, theta)
    first = int(re.search(r"document (\d+)", str(info.value)).group(1))
    # documents before it code without a failure
    codes, theta = initial_codes(corpus[:first], 3)
    result = code_documents(problem, corpus[:first], beta, codes, theta)
    assert np.all(np.isfinite(result.objective))


def test_a_python_class_cannot_override_a_compiled_loss_from_python():
    class SquaredInPython(CompiledLoss):
        def loss(self, y, mean):
            return 0.5 * (np.asarray(mean) - y) ** 2

        def gradient(self, y, mean):
            return np.asarray(mean) - y

        def hessian(self, y, mean):
            return np.ones(np.broadcast(y, mean).shape)

    with pytest.raises(TypeError, match="subclasses stc.losses.CompiledLoss in Python.*"
                                        "Subclass stc.losses.PythonLoss"):
        check_loss(SquaredInPython())
    # a Python class that only inherits a compiled loss's methods is a compiled loss
    class Renamed(NaNWindowLoss):  # (the built-in losses are final)
        name = "renamed"

    check_loss(Renamed())


def test_a_loss_that_is_nan_everywhere_is_told_what_to_override():
    class NothingInCython(CompiledLoss):
        pass

    with pytest.raises(TypeError, match=r"must override the Cython method _loss, in a cdef "
                                        r"class; a loss written in Python subclasses "
                                        r"stc.losses.PythonLoss"):
        check_loss(NothingInCython())

    class NothingInPython(PythonLoss):
        def loss(self, y, mean):
            return np.full(np.broadcast(y, mean).shape, np.nan)

        gradient = hessian = loss

    with pytest.raises(TypeError, match=r"returns NaN at every sample point") as info:
        check_loss(NothingInPython())
    assert "Cython" not in str(info.value) and "_loss" not in str(info.value)


class WrongSolver(PythonLoss):
    """The squared error with an overridden solve_coordinate that breaks its contract."""

    name = "wrong_solver"

    def __init__(self, answer):
        self.answer = answer

    def loss(self, y, mean):
        return 0.5 * (np.asarray(mean, float) - y) ** 2

    def gradient(self, y, mean):
        return np.asarray(mean, float) - y

    def hessian(self, y, mean):
        return np.ones(np.broadcast(y, mean).shape)

    def solve_coordinate(self, y, b, mean_rest, quad, lin, x_start=0.0):
        x = super().solve_coordinate(y, b, mean_rest, quad, lin, x_start)
        return x - 1.0 if self.answer == "negative" else x[:1]


@pytest.mark.parametrize("answer, message", [
    ("negative", r"the wrong_solver loss's solve_coordinate returned a negative code "
                 r"\(-[\d.e-]+\); it must minimise over x >= 0"),
    ("one", r"the wrong_solver loss's solve_coordinate returned an array of shape \(1,\) for "
            r"\d+ problems; it must return one code each")])
def test_a_solver_that_breaks_its_contract_is_named(corpus, answer, message):
    # a negative answer used to be stored as a word code of -1
    with pytest.raises(ValueError, match=message):
        STC(n_topics=3, loss=WrongSolver(answer), max_iter=2, rho=1e-3, lambda_=1e-3,
            random_state=0).fit(corpus)


@pytest.mark.parametrize("attribute, value, error, message", [
    ("mean_domain", "abc", TypeError, r"mean_domain must be a pair of numbers \(lower, upper\), "
                                      r"got 'abc'"),
    ("mean_domain", (0.0,), TypeError, "mean_domain must be a pair of numbers"),
    ("dictionary_method", "xyz", ValueError, r"dictionary_method must be one of \('mm', 'pg'\)"),
    ("score_kind", "xyz", ValueError, r"score_kind must be one of \('loss', 'multinomial', "
                                      r"'none'\), got 'xyz'"),
    ("runs_in_kernel", True, TypeError, "sets runs_in_kernel, but only a CompiledLoss")])
def test_a_losss_declarations_are_checked_at_registration(attribute, value, error, message):
    # these failed later with unpacking errors, a Cython type error, or (score_kind) silently
    broken = type("Declared", (WrongSolver,), {attribute: value, "__init__": PythonLoss.__init__})
    with pytest.raises(error, match=rf"^loss Declared:? {message}"):
        stc.losses.register("declared", broken)
    assert "declared" not in stc.losses.registered_losses()


def test_check_loss_refuses_data_with_nan():
    # it said the loss "returns NaN at every sample point"
    with pytest.raises(ValueError, match="^data holds NaN or infinite values"):
        check_loss(WrongSolver("negative"), data=[np.nan, 1.0])
