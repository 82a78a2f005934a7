"""`asyncfl bench --profile-cost`'s arithmetic: time to a target with a run that never reaches it
counted as its budget, and the paired t-interval against scipy's own."""

import numpy as np
import pytest
from scipy import stats

from asyncfl.bench.profile_cost import paired_t, time_to


def test_time_to_a_target_is_the_first_evaluation_at_or_above_it_else_the_budget():
    curve = [(2.0, 0.5), (4.0, 0.8), (6.0, 0.7), (8.0, 0.9)]
    assert time_to(curve, 0.8, 10.0) == 4.0
    assert time_to(curve, 0.85, 10.0) == 8.0
    assert time_to(curve, 0.95, 10.0) == 10.0


def test_the_paired_interval_is_students_t_and_a_constant_difference_its_own_point():
    differences = np.array([0.01, -0.02, 0.03, 0.0, 0.015])
    low, high = stats.t.interval(0.95, len(differences) - 1, differences.mean(), stats.sem(differences))
    interval = paired_t(differences)
    assert interval["low"] == pytest.approx(low, abs=1e-4) and interval["high"] == pytest.approx(high, abs=1e-4)
    assert paired_t(np.array([0.5, 0.5, 0.5])) == {"mean": 0.5, "low": 0.5, "high": 0.5}
