"""The verdict over the budget: the same comparisons read at budgets from T/4 to T, and from which
budget the verdict at T holds on every seed set."""

import math

import numpy as np
import pandas as pd
import pytest

from asyncfl.analysis.verdict_curve import CURVE_POINTS, curve_budgets, holds_from, verdict_curve
from asyncfl.analysis.verdicts import FASTER, SLOWER, TIED


def rows(verdicts: dict[str, list[str]], budgets=(10.0, 20.0, 30.0, 40.0)) -> pd.DataFrame:
    """One comparison's verdicts per seed set at each budget."""
    table = [
        (budget, seed_set, verdict)
        for seed_set, column in verdicts.items()
        for budget, verdict in zip(budgets, column, strict=True)
    ]
    return pd.DataFrame(table, columns=["budget", "seed_set", "verdict"])


@pytest.mark.parametrize(
    ("verdicts", "since"),
    [
        ({"all": [TIED, FASTER, FASTER, FASTER]}, 20.0),
        ({"all": [FASTER, TIED, FASTER, FASTER]}, 30.0),  # lost and found again: from where it stays
        ({"discovery": [TIED, FASTER, FASTER, FASTER], "replication": [TIED, TIED, FASTER, FASTER]}, 30.0),
        ({"all": [FASTER, FASTER, FASTER, TIED]}, math.nan),  # no verdict at T: nothing holds
        ({"discovery": [SLOWER] * 4, "replication": [SLOWER, SLOWER, SLOWER, TIED]}, math.nan),  # sets disagree at T
        ({"all": [SLOWER] * 4}, 10.0),
    ],
)
def test_a_verdict_holds_from_the_budget_after_which_every_seed_set_gives_it(verdicts, since):
    got = holds_from(rows(verdicts))
    assert (math.isnan(got) and math.isnan(since)) or got == since


def test_the_budgets_run_from_a_quarter_of_t_to_t_past_the_first_evaluation():
    assert list(curve_budgets(60.0, 0.0)) == pytest.approx(list(np.linspace(15.0, 60.0, CURVE_POINTS)))
    assert curve_budgets(60.0, 30.0).min() >= 30.0 and curve_budgets(60.0, 30.0).max() == 60.0


def test_the_curve_keeps_the_primary_time_and_reads_each_budget_once():
    calls = []

    def verdicts_at(budget: float) -> pd.DataFrame:
        calls.append(budget)
        difference = -budget / 10  # asynchrony's lead grows with the budget
        decided = FASTER if budget >= 30 else TIED
        base = dict(seed_set="all", severity="s", reference="afl", other="sync", seeds=10, reference_reached=10,
                    other_reached=3, difference=difference, ci_low=difference - 1, ci_high=difference + 1,
                    p_holm=0.01, family_size=4)  # fmt: skip
        return pd.DataFrame([base | {"metric": "time_to_stay", "verdict": decided},
                             base | {"metric": "time_to_target", "verdict": SLOWER}])  # fmt: skip

    curve = verdict_curve(verdicts_at, np.array([10.0, 20.0, 30.0, 40.0]))
    assert calls == [10.0, 20.0, 30.0, 40.0] and len(curve) == 4 and "metric" not in curve
    assert set(curve.holds_from) == {30.0} and list(curve.difference) == [-1.0, -2.0, -3.0, -4.0]
