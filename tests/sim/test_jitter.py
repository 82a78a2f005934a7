"""Each dispatch's compute time around its client's (`jitter_distribution`): each shape is the
distribution it says, drawn through the real `ClientSystem`; lognormal stays the bits it always was;
settings that do not fit the shape are refused."""

import numpy as np
import pytest
from scipy import stats

from asyncfl.settings import random_streams
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.sim.client_system import ClientSystem

DISPATCHES = 3000
SIZE = 200  # samples of the client


def factors(settings: dict, client: int = 3) -> np.ndarray:
    """Each of a client's dispatches' compute time over its own (unjittered) compute time."""
    system = ClientSystem.draw(make_config({"seed": 7, **settings}), 10)
    own = system.median_phases(client, SIZE).compute
    return np.array([system.phases(client, SIZE, index).compute / own for index in range(DISPATCHES)])


@pytest.mark.parametrize(
    ("settings", "reference"),
    [
        ({"jitter_distribution": "exponential"}, stats.expon()),
        ({"jitter_distribution": "half_normal", "jitter_sigma": 0.4}, stats.halfnorm(loc=1.0, scale=0.4)),
        ({"jitter_distribution": "lognormal", "jitter_sigma": 0.4}, stats.lognorm(s=0.4)),
    ],
)
def test_each_shape_draws_the_distribution_it_names(settings, reference):
    drawn = factors(settings)
    assert stats.kstest(drawn, reference.cdf).pvalue > 0.01  # a fixed seed: the same draws every time
    assert drawn.mean() == pytest.approx(reference.mean(), rel=0.05)
    wrong = stats.expon() if settings["jitter_distribution"] != "exponential" else stats.halfnorm(loc=1.0, scale=0.4)
    assert stats.kstest(drawn, wrong.cdf).pvalue < 1e-6  # the test can tell the shapes apart


def test_lognormal_jitter_keeps_the_bits_it_always_had():
    system = ClientSystem.draw(make_config({"seed": 7, "jitter_sigma": 0.3}), 10)
    own = system.median_phases(2, SIZE).compute
    for index in range(20):
        rng = np.random.default_rng([7, random_streams.JITTER, 2, index])
        assert system.phases(2, SIZE, index).compute == own * rng.lognormal(0.0, 0.3)
    assert np.all(factors({}) == 1.0)  # σ = 0: every dispatch computes for exactly its client's time


def test_the_factors_depend_on_the_dispatch_only():
    """A client's k-th dispatch computes as long in every run of the seed, whatever else the run did."""
    exponential = factors({"jitter_distribution": "exponential"})
    assert np.array_equal(exponential, factors({"jitter_distribution": "exponential", "algorithm": "sync"}))
    assert not np.array_equal(exponential, factors({"jitter_distribution": "exponential"}, client=4))


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"jitter_distribution": "exponential", "jitter_sigma": 0.5},
         "jitter_sigma applies only with jitter_distribution: lognormal or half_normal"),
        ({"jitter_distribution": "pareto"}, "jitter_distribution must be one of lognormal, exponential, half_normal"),
        ({"jitter_distribution": ""}, "jitter_distribution must be one of"),
        ({"jitter_distribution": "half_normal", "jitter_sigma": float("nan")}, "jitter_sigma must be a finite number"),
        ({"jitter_distribution": None}, "jitter_distribution must be str, got None"),
        ({"jitter_distribution": "half_normal", "jitter_sigma": 1e9}, "jitter_sigma must be ≤ 10"),
        ({"population": "queueing", "jitter_sigma": 0.5}, "jitter_sigma applies only with jitter_"),
    ],
)  # fmt: skip
def test_settings_that_do_not_fit_the_shape_are_refused(settings, message):
    with pytest.raises(InputError, match=message):
        make_config(settings)
