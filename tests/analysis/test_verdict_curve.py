"""The verdict over the budget: the same comparisons read at budgets from T/4 to T, and from which
budget the verdict at T holds on every seed set."""

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from asyncfl.analysis.verdict_curve import (  # noqa: E402
    CURVE_POINTS,
    curve_budgets,
    draw_verdict_curve,
    holds_from,
    verdict_curve,
)
from asyncfl.analysis.verdicts import FASTER, SLOWER, TIED  # noqa: E402


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


def test_pooled_sets_hold_from_the_pooled_verdict_and_a_panel_without_plain_sync_says_so():
    """Pooled: the sets beside the pooled seeds are checks, so `holds_from` reads the pooled verdicts
    alone (a replication set n.s. at T does not undo it) and both sets are drawn dotted; a sweep
    without plain sync draws a panel that says why it is empty (it was blank)."""

    def verdicts_at(budget: float) -> pd.DataFrame:
        base = dict(severity="s", reference="afl", other="sync", seeds=10, reference_reached=10, other_reached=3,
                    difference=-3.0, ci_low=-4.0, ci_high=-2.0, p_holm=0.01, family_size=4,
                    metric="time_to_stay")  # fmt: skip
        verdicts = {"all": FASTER if budget >= 20 else TIED, "discovery": FASTER, "replication": TIED}
        return pd.DataFrame([base | {"seed_set": seed_set, "verdict": v} for seed_set, v in verdicts.items()])

    curve = verdict_curve(verdicts_at, np.array([10.0, 20.0, 30.0]))
    assert set(curve.holds_from) == {20.0}
    figure, axes = plt.subplots(1, 2)
    draw_verdict_curve(axes, curve, ["s", "s"], {"afl": 5, "sync": 5})
    styles = [line.get_linestyle() for line in axes[0].get_lines() if len(line.get_xdata()) == 3]
    assert styles.count(":") == 2 and styles.count("-") == 1  # discovery and replication dotted, pooled solid
    plt.close(figure)
    figure, axes = plt.subplots(1, 2)
    draw_verdict_curve(axes, curve.assign(other="sync-deadline"), ["s", "s"], {"afl": 5, "sync-deadline": 5})
    assert "no plain sync run" in axes[1].texts[0].get_text() and axes[1].get_legend() is None
    plt.close(figure)
