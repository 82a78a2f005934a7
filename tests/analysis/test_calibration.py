"""A/A calibration of the verdicts (docs/theory.md "Stragglers"): one algorithm against itself on two
seed sets must come out "no significant difference" at the nominal rate. On a small case shaped like
the straggler map's (ten paired seeds, skewed times, a third of the runs censored at the budget): the
paired t keeps its 5 %, the percentile bootstrap it replaced does not, and Holm's adjustment keeps the
whole map's rate of any false verdict at 5 %. Under heavy censoring (2–3 of 10 seeds reaching the
target), where a rule once withheld the verdict, the paired t on the restricted means stays within its
level: conservative, not anti-conservative."""

import numpy as np
import pandas as pd
from scipy import stats

from asyncfl.analysis.verdicts import TIED, censored, paired_test, verdict_table

SEEDS, BUDGET, REPLICATES = 10, 60.0, 1000


def same_algorithm_twice(rng: np.random.Generator, log_median: float = 3.9) -> tuple[np.ndarray, np.ndarray]:
    """Times to the target of one algorithm on two seed sets: lognormal around 49 s, about a third past
    the budget (never reached: NaN); around e^`log_median` s otherwise."""
    times = np.exp(rng.normal(log_median, 0.5, size=(2, SEEDS)))
    times[times > BUDGET] = np.nan
    return times[0], times[1]


def percentile_bootstrap_rejects(differences: np.ndarray) -> bool:
    """The interval the verdicts used before: 95 % percentile bootstrap of the mean, seeded."""
    if np.all(differences == differences[0]):
        return bool(differences[0] != 0)
    interval = stats.bootstrap(
        (differences,), np.mean, n_resamples=2000, method="percentile", rng=np.random.default_rng(0)
    ).confidence_interval
    return bool(interval.low > 0 or interval.high < 0)


def test_the_paired_t_keeps_its_level_where_the_percentile_bootstrap_did_not():
    rng = np.random.default_rng(0)
    t_false = bootstrap_false = 0
    for _ in range(REPLICATES):
        first, second = same_algorithm_twice(rng)
        differences = censored(first, BUDGET) - censored(second, BUDGET)
        t_false += paired_test(differences)[2] < 0.05
        bootstrap_false += percentile_bootstrap_rejects(differences)
    # binomial sd at 1,000 replicates and 5 %: 0.7 points
    assert t_false / REPLICATES <= 0.065, t_false / REPLICATES
    assert bootstrap_false / REPLICATES >= 0.075, bootstrap_false / REPLICATES


def test_over_a_whole_map_holm_keeps_the_chance_of_any_false_verdict_at_five_percent():
    """Maps of 3 severities × 3 synchronous runs, every one of them the reference algorithm again."""
    rng = np.random.default_rng(1)
    maps_with_a_false_verdict = 0
    for _ in range(200):
        rows = []
        for severity in ("mild", "moderate", "heavy"):
            for name in ("afl", "sync", "sync-deadline", "sync-partial"):
                times = same_algorithm_twice(rng)[0]
                rows += [(severity, name, seed, time, 0.8) for seed, time in enumerate(times)]
        table = pd.DataFrame(rows, columns=["severity", "algorithm", "seed", "time_to_target", "accuracy_at_budget"])
        verdicts = verdict_table(table, BUDGET)
        maps_with_a_false_verdict += bool((verdicts.verdict != TIED).any())
    assert maps_with_a_false_verdict / 200 <= 0.06, maps_with_a_false_verdict / 200


def test_under_heavy_censoring_the_paired_t_stays_within_its_level():
    """Times around 85 s against a 60 s budget: on average 2.4 of 10 seeds reach the target per side
    (the 40 % slow row's plain sync). Measured at 4,000 replicates: 2.1 % false at a nominal 5 %."""
    rng = np.random.default_rng(2)
    false, reached = 0, []
    for _ in range(REPLICATES):
        first, second = same_algorithm_twice(rng, log_median=4.45)
        reached.append((np.sum(~np.isnan(first)) + np.sum(~np.isnan(second))) / 2)
        false += paired_test(censored(first, BUDGET) - censored(second, BUDGET))[2] < 0.05
    assert 1.5 <= np.mean(reached) <= 3.5
    assert false / REPLICATES <= 0.05, false / REPLICATES
