"""Valid input at extreme scales: a fit works, or it fails saying what is wrong.

Counts of 1e-20, Gaussian data of 1e200, and lambda_ or rho of 1e300 used to
be refused with "the poisson loss is not finite ... mean lies outside the
loss's domain", which names a symptom. Now the data's scale or the parameter
is named (and tests/test_fuzz_fits.py runs the same cases, and random ones, in
subprocesses).
"""
import numpy as np
import pytest
import scipy.sparse as sp

from stc import STC, MedSTC

# The paper's parameterisation: rho is the weight of objective (2) as given, and theta
# has the l2 penalty (these cases were written for it).
PAPER = dict(rho_units="absolute", theta_penalty="l2")

# Before the fit stops with the ValueError these tests expect, the coding step sums an
# infinite objective and an infinite loss (inf - inf in stc/training.py's CodingStep), and
# numpy warns; the error then says what is wrong. The warning is noise, not the point.
infinite_loss_noise = pytest.mark.filterwarnings(
    "ignore:invalid value encountered in scalar subtract:RuntimeWarning")


def counts(seed=0, shape=(30, 50)):
    return sp.csr_matrix(np.random.default_rng(seed).poisson(1.0, shape).astype(float))


@infinite_loss_noise
def test_tiny_counts_name_the_scale_of_the_data():
    with pytest.raises(ValueError, match=r"X's values are tiny \(median 1e-20\).*Rescale X"):
        STC(n_topics=2, max_iter=5, random_state=0).fit(sp.csr_matrix(np.full((2, 2), 1e-20)))
    # the same counts rescaled fit
    model = STC(n_topics=2, max_iter=5, random_state=0).fit(sp.csr_matrix(np.full((2, 2), 1.0)))
    assert np.all(np.isfinite(model.objective_))


@infinite_loss_noise
@pytest.mark.parametrize("parameter", ["rho"])
def test_a_huge_penalty_is_named(parameter):
    with pytest.raises(ValueError, match=rf"{parameter}=1e\+300 is 1e\+300 times the median "
                                         rf"value of X.*Lower {parameter}"):
        STC(n_topics=2, max_iter=5, random_state=0, **PAPER, **{parameter: 1e300}).fit(counts())


@infinite_loss_noise
def test_a_huge_rho_in_relative_units_is_named():
    # the default units: the message gives the weight objective (2) got, rho sqrt(2 gamma w_bar)
    with pytest.raises(ValueError, match=r"rho=\S+ is \S+ times the median value of X.*Lower rho"):
        STC(n_topics=2, max_iter=5, random_state=0, rho=1e300).fit(counts())


def test_huge_lambda_fits():
    """lambda_ = gamma = 1e300: the fit keeps every mean positive, its results are sound."""
    model = STC(n_topics=2, max_iter=3, random_state=0, lambda_=1e300, **PAPER).fit(counts())
    assert np.all(np.isfinite(model.objective_))
    assert np.all(np.diff(model.objective_) <= 1e-9 * np.abs(model.objective_[:-1]))
    np.testing.assert_allclose(model.components_.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    theta = model.transform(counts())
    assert np.all(np.isfinite(theta)) and np.all(theta >= 0)


def test_data_too_large_for_the_loss_is_refused_up_front():
    with pytest.raises(ValueError, match=r"X's values reach 5e\+200: the gaussian loss is not "
                                         r"finite for data that large.*rescale X"):
        STC(n_topics=2, max_iter=3, random_state=0, loss="gaussian").fit(counts() * 1e200)
    with pytest.raises(ValueError, match="rescale X"):
        MedSTC(n_topics=2, max_iter=3, random_state=0, loss="gaussian").fit(
            counts() * 1e200, np.arange(30) % 2)
