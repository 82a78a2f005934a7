"""The staleness functions s(τ) against hand-computed values, and their building from a config."""

import pytest

from asyncfl.fl.staleness import Constant, Hinge, Inverse, Polynomial, staleness_function
from asyncfl.settings.config import make_config


@pytest.mark.parametrize("tau,expected", [(0, 1.0), (1, 1 / 1.5), (2, 0.5), (6, 0.25)])
def test_inverse(tau, expected):
    assert Inverse(0.5)(tau) == pytest.approx(expected)


@pytest.mark.parametrize("tau,expected", [(0, 1.0), (3, 0.5), (8, 1 / 3), (15, 0.25)])
def test_polynomial(tau, expected):
    assert Polynomial(0.5)(tau) == pytest.approx(expected)


@pytest.mark.parametrize("tau,expected", [(0, 1.0), (2, 1.0), (3, 0.5), (6, 0.2)])
def test_hinge(tau, expected):  # a = 1, b = 2: 1/(a(τ−b)+1) beyond b
    assert Hinge(1.0, 2.0)(tau) == pytest.approx(expected)


@pytest.mark.parametrize("tau", [0, 1, 7, 100])
def test_constant(tau):
    assert Constant()(tau) == 1.0


def test_the_config_names_the_function_and_its_parameters():
    assert staleness_function(make_config({"staleness": "hinge", "staleness_a": 2.0, "staleness_b": 3.0})) == Hinge(
        2.0, 3.0
    )
    assert staleness_function(make_config({"staleness": "inverse", "staleness_a": 0.25})) == Inverse(0.25)
    assert staleness_function(make_config({})) == Polynomial(0.5)
    assert staleness_function(make_config({"staleness": "constant"})) == Constant()
