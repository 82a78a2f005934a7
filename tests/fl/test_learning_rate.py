"""The delay-aware learning rate against hand-computed values."""

import pytest

from asyncfl.fl.learning_rate import Schedule, delay_aware_lr


def test_delay_aware_learning_rate():
    assert delay_aware_lr(1e-3, 3, 0.01, 100.0) == pytest.approx(1e-3 / (2 * 2))
    assert delay_aware_lr(1e-3, 0, 0.01, 0.0) == pytest.approx(1e-3)
    assert delay_aware_lr(0.1, 8, 0.5, 2.0) == pytest.approx(0.1 / (3 * 2))


def test_each_clock_counts_its_own_t():
    """t = the version (round), updates / J (equivalent round) or the local epoch (epoch)."""
    for clock, t in (("round", [6, 6]), ("equivalent_round", [2.5, 2.5]), ("epoch", [0, 1])):
        rates = Schedule(0.1, 0.5, clock, epochs=2, clients_per_round=4).rates(version=6, updates=10, delay=2.0)
        assert rates == tuple(delay_aware_lr(0.1, x, 0.5, 2.0) for x in t)
