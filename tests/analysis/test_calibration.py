"""A/A calibration of the verdicts (docs/theory.md "Stragglers"): one algorithm against itself on two
seed sets must come out "no significant difference" at the nominal rate. On a small case shaped like
the straggler map's (ten paired seeds, skewed times, a third of the runs censored at the budget): the
paired t keeps its 5 %, the percentile bootstrap it replaced does not, and Holm's adjustment keeps the
whole map's rate of any false verdict at 5 %. Under heavy censoring (2–3 of 10 seeds reaching the
target), where a rule once withheld the verdict, the paired t on the restricted means stays within its
level: conservative, not anti-conservative. The equivalence test (TOST) calls equal arms equivalent
as often as its power says and arms a margin apart at most at its level."""

import math

import numpy as np
import pandas as pd
from scipy import integrate, stats

from asyncfl.analysis.verdicts import (
    TIED,
    censored,
    detectable_difference,
    equivalence_p,
    paired_test,
    verdict_table,
    with_detectable,
)

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


def test_equivalence_is_called_as_often_as_its_power_and_at_most_at_five_percent_a_margin_away():
    """TOST at m = 15 s on the A/A differences above (their spread σ ≈ 19 s): with equal arms, a difference
    at most at the nominal rate and "equivalent" as often as the test's power at ten seeds says (for
    normal differences of that σ: |mean| + t·s/√n < m, averaged over s's χ² law; 0.47 here, measured
    0.47); with one arm moved by exactly the margin, "equivalent" at most at 5 % (the level at the band's
    edge; measured 5.7 % at 1,000 replicates, within the binomial sd of 0.7 points)."""
    rng = np.random.default_rng(3)
    margin, equal_different, equal_equivalent, shifted_equivalent, variances = 15.0, 0, 0, 0, []
    for _ in range(REPLICATES):
        first, second = same_algorithm_twice(rng)
        differences = censored(first, BUDGET) - censored(second, BUDGET)
        variances.append(differences.var(ddof=1))
        equal_different += paired_test(differences)[2] < 0.05
        equal_equivalent += equivalence_p(differences, margin) < 0.05
        shifted_equivalent += equivalence_p(differences + margin, margin) < 0.05
    power = tost_power(margin, math.sqrt(np.mean(variances)), SEEDS)
    assert equal_different / REPLICATES <= 0.065
    assert 0.3 <= power <= 0.7 and abs(equal_equivalent / REPLICATES - power) <= 0.05, (equal_equivalent, power)
    assert shifted_equivalent / REPLICATES <= 0.065, shifted_equivalent / REPLICATES  # 5 %, binomial sd 0.7 points


def tost_power(margin: float, sigma: float, seeds: int) -> float:
    """The chance that TOST at 5 % calls normal paired differences of mean 0 and spread `sigma`
    equivalent within ±`margin`: P(|mean| < m − t·s/√n), over the sample sd s ((n − 1)s²/σ² ~ χ²)."""
    critical, dof = stats.t.ppf(0.95, seeds - 1), seeds - 1

    def given(q: float) -> float:  # q = (n − 1)s²/σ²
        room = margin - critical * sigma * math.sqrt(q / dof) / math.sqrt(seeds)
        return max(0.0, 2 * stats.norm.cdf(room * math.sqrt(seeds) / sigma) - 1) * stats.chi2.pdf(q, dof)

    return float(integrate.quad(given, 0, np.inf, limit=200)[0])


def test_a_shift_of_the_detectable_difference_is_detected_as_often_as_the_power_says():
    """Ten paired seeds, differences of sd 20 s, a family of 28: the shift `detectable_difference` gives
    at power 0.8 is detected (paired t at 0.05 / 28, Holm's first step) in 80 % of 4,000 replicates (sd
    0.6 points), and a shift half as large far less often; the figure read back from each replicate's own
    interval (`with_detectable`) scatters around it."""
    rng = np.random.default_rng(3)
    spread, seeds, family = 20.0, 10, 28
    shift = detectable_difference(spread, seeds, family, 0.8)
    samples = rng.normal(shift, spread, size=(4000, seeds))
    p = stats.ttest_1samp(samples, 0.0, axis=1).pvalue
    assert abs((p < 0.05 / family).mean() - 0.8) < 0.025, (p < 0.05 / family).mean()
    halved = stats.ttest_1samp(rng.normal(shift / 2, spread, size=(4000, seeds)), 0.0, axis=1).pvalue
    assert (halved < 0.05 / family).mean() < 0.3
    intervals = [paired_test(sample) for sample in samples[:200]]
    rows = pd.DataFrame(intervals, columns=["ci_low", "ci_high", "p_value"])
    rows = rows.assign(seeds=seeds, family_size=family, budget=math.inf)
    read_back = with_detectable(rows, 0.8).detectable_difference
    assert abs(read_back.median() / shift - 1) < 0.1
