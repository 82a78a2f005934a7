"""Verdicts by confidence intervals: restricted mean times with censoring, a paired t interval that
covers a known difference, time to stay first and time to reach beside it, the log-rank p beside the
verdict, Holm's adjustment over a family declared by the sweep, no verdict from too few seeds, and a
verdict however few runs reached the target."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from asyncfl.analysis.stragglers import time_to_stay
from asyncfl.analysis.verdicts import (
    EQUIVALENT,
    FASTER,
    MIN_SEEDS,
    SIGN_DIFFERS,
    TIED,
    TOO_FEW,
    UNDECIDED,
    censored,
    detectable_difference,
    equivalence_p,
    holm,
    logrank_p,
    median_time,
    paired_test,
    primary_set,
    readjusted,
    replication_of,
    restricted_mean_time,
    seed_set_verdicts,
    verdict_lines,
    verdict_table,
    with_detectable,
)
from asyncfl.planning.families import Family


def test_staying_above_the_target_starts_after_the_last_dip_below_it():
    run = pd.DataFrame({"virtual_time": [1.0, 2.0, 3.0, 4.0, 5.0], "test_accuracy": [0.5, 0.92, 0.88, 0.91, 0.95]})
    assert time_to_stay(run, 0.9) == 4.0  # crossed at 2 s, fell back at 3 s, above from 4 s on
    assert time_to_stay(run, 0.5) == 1.0
    assert math.isnan(time_to_stay(run, 0.96))
    assert math.isnan(time_to_stay(run.assign(test_accuracy=[0.95, 0.95, 0.95, 0.95, 0.8]), 0.9))


def test_both_times_are_compared_and_the_legend_states_the_time_to_stay():
    times = {"afl": (10.0, 20.0), "sync": (15.0, 30.0)}  # (first reached, stayed above)
    table = pd.DataFrame(
        [("s", name, seed, *times[name]) for seed in range(MIN_SEEDS) for name in ("afl", "sync")],
        columns=["severity", "algorithm", "seed", "time_to_target", "time_to_stay"],
    )
    verdicts = verdict_table(table, 40.0)
    assert verdicts.metric.tolist() == ["time_to_stay", "time_to_target"]
    assert verdicts.difference.tolist() == [-10.0, -5.0]
    (line,) = verdict_lines(verdicts)
    assert "sync -10.0 s" in line and "-5.0" not in line


def test_the_log_rank_p_is_scipys_with_the_censored_runs_censored_and_does_not_decide():
    reference = [10.0, 12.0, 11.0, 13.0, 9.0, 12.5]
    other = [30.0, math.nan, 28.0, math.nan, 35.0, 31.0]  # two never reached it by T = 40
    table = pd.DataFrame(
        [("s", name, seed, time, time) for name, times in (("afl", reference), ("sync", other))
         for seed, time in enumerate(times)],
        columns=["severity", "algorithm", "seed", "time_to_target", "time_to_stay"],
    )  # fmt: skip
    row = verdict_table(table, 40.0).iloc[0]
    expected = stats.logrank(
        stats.CensoredData(np.array(reference)),
        stats.CensoredData(np.array([30.0, 28.0, 35.0, 31.0]), right=[40.0, 40.0]),
    )
    assert row.p_logrank == pytest.approx(expected.pvalue) and row.p_logrank < 0.01
    assert math.isnan(logrank_p(pd.Series([math.nan] * 3), pd.Series([math.nan] * 3), 40.0))  # nothing to compare
    assert logrank_p(pd.Series(reference), pd.Series(reference), 40.0) == pytest.approx(1.0)
    assert row.verdict == FASTER and row.p_holm == row.p_value  # the paired t decides (a family of one)


def test_a_run_that_never_reached_the_target_counts_as_the_budget():
    assert censored(np.array([10.0, math.nan, 20.0]), 30.0).tolist() == [10.0, 30.0, 20.0]
    assert restricted_mean_time(pd.Series([10.0, math.nan, 20.0]), 30.0) == 20.0


def test_the_interval_of_a_known_paired_difference_covers_it():
    """Ten seeds whose times differ by 2 s plus noise: the interval covers 2 and excludes 0."""
    differences = 2.0 + np.random.default_rng(3).normal(0, 0.5, size=10)
    low, high, p = paired_test(differences)
    assert low < 2.0 < high and low > 0 and p < 1e-3
    mean, half = differences.mean(), 2.2621571627409915 * differences.std(ddof=1) / np.sqrt(10)  # t(9) at 97.5 %
    assert (low, high) == pytest.approx((mean - half, mean + half))
    assert paired_test(np.full(6, -3.0)) == (-3.0, -3.0, 0.0) and paired_test(np.zeros(6))[2] == 1.0


def test_holm_multiplies_the_smallest_p_by_the_family_and_steps_down_monotonically():
    adjusted = holm(np.array([0.01, 0.04, math.nan, 0.03, 0.5]))
    assert adjusted[[0, 3, 1, 4]] == pytest.approx([0.04, 0.09, 0.09, 0.5])  # 4×0.01, 3×0.03, max(2×0.04, 0.09), 0.5
    assert math.isnan(adjusted[2])  # not tested: left out of the family
    assert holm(np.array([0.9, 0.8]))[0] == 1.0


def test_a_zero_difference_is_no_significant_difference_and_a_sign_decides():
    table = pd.DataFrame(
        [("s", name, seed, time) for seed in range(MIN_SEEDS + 1)
         for name, time in (("afl", 10.0 + (-1) ** seed), ("sync", 10.0), ("sync-over", 14.0 + seed % 2),
                            ("fedasync", 6.0 + seed % 2))],
        columns=["severity", "algorithm", "seed", "time_to_stay"],
    )  # fmt: skip
    every = verdict_table(table, 30.0)
    verdicts = every[every.reference == "afl"].set_index("other")
    assert verdicts.loc["sync", "verdict"] == TIED and verdicts.loc["sync", "difference"] == 0.0
    assert verdicts.loc["sync-over", "verdict"] == FASTER  # AFL's times minus theirs: below zero
    # Every asynchronous algorithm is a reference against the synchronous runs, none against another
    assert set(every.reference) == {"afl", "fedasync"} and set(every.other) == {"sync", "sync-over"}
    assert (every[every.reference == "fedasync"].verdict == FASTER).all()
    afl, fedasync = verdict_lines(every)
    assert afl.startswith("s, afl − …, 6 seeds: sync +0.0 s [") and "sync-over -4.5 s" in afl
    assert fedasync.startswith("s, fedasync − …, 6 seeds: sync -3.5 s [")


def test_too_few_seeds_give_no_verdict_and_say_so():
    table = pd.DataFrame(
        [("s", "afl", 0, 5.0), ("s", "afl", 1, 6.0), ("s", "sync", 0, 20.0), ("s", "sync", 1, None)],
        columns=["severity", "algorithm", "seed", "time_to_stay"],
    )
    (row,) = verdict_table(table, 30.0).itertuples()
    assert (row.seeds, row.verdict, row.difference) == (2, TOO_FEW, (5.0 - 20.0 + 6.0 - 30.0) / 2)
    assert verdict_lines(verdict_table(table, 30.0)) == ["s, afl: 2 paired seeds, too few for a verdict (≥ 5)"]


@pytest.mark.parametrize("matched", ["afl-m7"])
def test_afl_at_matched_concurrency_is_a_reference_too(matched):
    table = pd.DataFrame(
        [("s", name, seed, 10.0 + seed) for seed in range(MIN_SEEDS) for name in ("afl", matched, "sync")],
        columns=["severity", "algorithm", "seed", "time_to_target"],
    )
    verdicts = verdict_table(table, 30.0)
    assert sorted(zip(verdicts.reference, verdicts.other, strict=True)) == [("afl", "sync"), (matched, "sync")]


def test_the_kaplan_meier_median_reads_censored_runs_as_not_yet_there():
    """Five runs, two never at the target by T = 30: half had reached it at 14 s (the third of five
    sorted times, the censored two counted as still running); with three of five censored, none."""
    assert median_time(np.array([10.0, math.nan, 14.0, 12.0, math.nan]), 30.0) == 14.0
    assert math.isnan(median_time(np.array([10.0, math.nan, 12.0, math.nan, math.nan]), 30.0))
    assert median_time(np.array([4.0, 2.0]), 30.0) == 2.0  # half of two: the first
    assert math.isnan(median_time(np.array([math.nan, math.nan]), 30.0))


def test_the_table_counts_the_runs_that_reached_the_target():
    times = {"afl": [5.0, 6.0, 7.0, 8.0, 9.0], "sync": [10.0, math.nan, 12.0, math.nan, math.nan]}
    table = pd.DataFrame(
        [("s", name, seed, time) for name, column in times.items() for seed, time in enumerate(column)],
        columns=["severity", "algorithm", "seed", "time_to_target"],
    )
    (row,) = verdict_table(table, 30.0).itertuples()
    assert (row.reference_reached, row.other_reached) == (5, 2)
    assert row.reference_median == 7.0 and math.isnan(row.other_median)
    assert row.other_time == (10 + 12 + 3 * 30) / 5
    # 2 of 5 sync runs reached it: the restricted means (RMST at T) still decide, the counts beside
    assert row.verdict == FASTER and row.p_holm == row.p_value < 0.05


def test_given_the_clients_in_flight_the_lines_compare_equal_resources_only():
    names = ("afl", "afl-m7", "sync", "sync-overselect", "sync-deadline")
    table = pd.DataFrame(
        [("s", name, seed, 10.0 + seed + index) for seed in range(MIN_SEEDS) for index, name in enumerate(names)],
        columns=["severity", "algorithm", "seed", "time_to_stay"],
    )
    in_flight = {"afl": 5, "afl-m7": 7, "sync": 5, "sync-overselect": 7, "sync-deadline": 5}
    first, matched = verdict_lines(verdict_table(table, 30.0), in_flight)
    assert first.startswith("s, afl − …") and "sync-deadline" in first and "sync-overselect" not in first
    assert matched.startswith("s, afl-m7 − …") and "sync-overselect" in matched and "sync " not in matched


def test_the_table_gives_each_sides_accuracy_at_t_and_client_work_to_the_target():
    rows = [("s", "afl", seed, 10.0 + seed, 0.8, 100.0 + seed) for seed in range(MIN_SEEDS)]
    rows += [
        ("s", "sync", seed, math.nan if seed else 20.0, 0.6, math.nan if seed else 50.0) for seed in range(MIN_SEEDS)
    ]
    columns = ["severity", "algorithm", "seed", "time_to_stay", "accuracy_at_budget", "work_to_target"]
    (row,) = verdict_table(pd.DataFrame(rows, columns=columns), 30.0).itertuples()
    assert (row.reference_accuracy, row.other_accuracy) == pytest.approx((0.8, 0.6))
    assert (row.reference_work, row.other_work) == (102.0, 50.0)  # over the seeds that reached the target
    assert row.verdict == FASTER and row.family_size == 1  # 1 of 5 sync runs reached it: decided all the same
    (line,) = verdict_lines(verdict_table(pd.DataFrame(rows, columns=columns), 30.0))
    assert line.endswith(": faster (reached 5/5 vs 1/5)")


def test_the_family_is_every_configured_comparison_whatever_reached_or_had_seeds():
    """Three comparisons of one metric: one clear, one whose other side never reached the target, one
    with too few seeds. All three are the family (its size 3, the clear one's p × 3 at the first step),
    the one with too few seeds counted at p = 1 and undecided."""
    rows = [("s", "afl", seed, 10.0 + seed) for seed in range(6)]
    rows += [("s", "sync", seed, 12.0 + seed + 0.3 * (seed % 2)) for seed in range(6)]
    rows += [("s", "sync-deadline", seed, math.nan) for seed in range(6)]
    rows += [("t", "afl", seed, 10.0) for seed in range(2)] + [("t", "sync", seed, 20.0) for seed in range(2)]
    table = pd.DataFrame(rows, columns=["severity", "algorithm", "seed", "time_to_stay"])
    verdicts = verdict_table(table, 30.0).set_index(["severity", "other"])
    assert set(verdicts.family_size) == {3}
    keys = [("s", "sync"), ("s", "sync-deadline"), ("t", "sync")]
    declared = holm(np.array([verdicts.loc[keys[0], "p_value"], verdicts.loc[keys[1], "p_value"], 1.0]))
    assert list(verdicts.loc[keys, "p_holm"]) == pytest.approx(list(declared))
    assert verdicts.loc[("s", "sync-deadline"), "verdict"] == FASTER  # never reached: T, decided
    assert verdicts.loc[("t", "sync"), "verdict"] == TOO_FEW


def test_replication_seeds_are_judged_apart_and_the_lines_say_whether_they_agree():
    """Seeds 0-5 (discovery): AFL 4 s faster than plain sync and level with the deadline; seeds 6-11
    (replication): faster than both. Each set is its own family with its own verdicts."""
    rows = []
    for seed in range(12):
        noise = 0.5 * (-1) ** seed
        deadline = 10.0 + noise if seed < 6 else 14.0 + noise
        rows += [("s", "afl", seed, 10.0), ("s", "sync", seed, 14.0 + noise), ("s", "sync-deadline", seed, deadline)]
    table = pd.DataFrame(rows, columns=["severity", "algorithm", "seed", "time_to_stay"])
    verdicts = seed_set_verdicts(table, 30.0, range(6, 12)).set_index(["seed_set", "other"])
    assert verdicts.loc[("discovery", "sync"), "verdict"] == verdicts.loc[("replication", "sync"), "verdict"] == FASTER
    assert verdicts.loc[("discovery", "sync-deadline"), "verdict"] == TIED
    assert verdicts.loc[("replication", "sync-deadline"), "verdict"] == FASTER
    assert set(verdicts.seeds) == {6}
    (line,) = verdict_lines(verdicts.reset_index())
    assert line.startswith("s, afl − …, 6 seeds: sync -4.0 s")
    words = " ".join(line.split())  # the line wraps
    assert "faster, replicated" in words and "no significant difference, not replicated (faster)" in words
    alone = seed_set_verdicts(table, 30.0)
    assert set(alone.seed_set) == {"all"} and set(alone.seeds) == {12}
    assert "replicated" not in verdict_lines(alone)[0]


def test_pooled_seed_sets_decide_on_every_seed_and_check_each_sets_sign():
    """Pooled, the twelve seeds decide (one family of all the seeds), the sets beside them: against plain
    sync AFL is faster on all and on both sets' signs (replicated); against the deadline faster on all,
    but the discovery set's mean difference is positive (SIGN_DIFFERS); the lines and the primary set
    are the pooled ones."""
    rows = []
    for seed in range(12):
        noise = 0.5 * (-1) ** seed
        deadline = 9.5 + noise if seed < 6 else 16.0 + noise  # discovery: AFL 0.5 s slower; replication: 6 faster
        rows += [("s", "afl", seed, 10.0), ("s", "sync", seed, 14.0 + noise), ("s", "sync-deadline", seed, deadline)]
    table = pd.DataFrame(rows, columns=["severity", "algorithm", "seed", "time_to_stay"])
    verdicts = seed_set_verdicts(table, 30.0, range(6, 12), pooled=True)
    assert list(dict.fromkeys(verdicts.seed_set)) == ["all", "discovery", "replication"]
    pooled = primary_set(verdicts).set_index("other")
    assert set(pooled.seeds) == {12} and pooled.loc["sync-deadline", "verdict"] == FASTER
    checks = replication_of(verdicts)
    assert checks[("s", "time_to_stay", "afl", "sync")] == FASTER
    assert checks[("s", "time_to_stay", "afl", "sync-deadline")] == SIGN_DIFFERS
    (line,) = verdict_lines(verdicts)
    words = " ".join(line.split())
    assert "12 seeds" in words and "faster, replicated" in words
    assert f"faster, not replicated ({SIGN_DIFFERS})" in words


def test_the_equivalence_p_is_the_larger_of_two_one_sided_t_tests_by_hand():
    """d = 1 … 5: mean 3, s = √2.5, se = √2.5/√5 = √0.5, 4 degrees of freedom. At m = 5: t against +5 is
    −2/√0.5 = −2.828, p = F₄(−2.828) = 0.0237; against −5 it is +11.3, p ≈ 2e-4; TOST p the larger. At
    m = 3 the mean is on the band's edge: t = 0, p = 0.5. Without spread: 0 inside the band, 1 on it."""
    differences = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert equivalence_p(differences, 5.0) == pytest.approx(stats.t.cdf(-2 / math.sqrt(0.5), 4), rel=1e-12)
    assert equivalence_p(differences, 5.0) == pytest.approx(0.02371, abs=1e-5)
    assert equivalence_p(differences, 3.0) == pytest.approx(0.5, abs=1e-12)
    assert equivalence_p(np.full(5, 2.0), 2.5) == 0.0 and equivalence_p(np.full(5, 2.0), 2.0) == 1.0


def test_with_a_margin_a_cell_neither_faster_nor_slower_is_equivalent_or_undecided():
    """AFL against three synchronous names over 8 seeds: a difference of 0 ± 1 s (equivalent within
    ±5 s), one of 0 ± 8 s (undecided: its interval reaches past the band) and one of −20 ± 1 s (faster
    whatever the margin). Without a margin the first two read "no significant difference", as before."""
    rows = []
    for seed in range(8):
        sign = (-1) ** seed
        rows += [("s", "afl", seed, 50.0), ("s", "sync", seed, 50.0 + sign), ("s", "sync-over", seed, 50.0 + 8 * sign)]
        rows += [("s", "sync-deadline", seed, 70.0 + sign)]
    table = pd.DataFrame(rows, columns=["severity", "algorithm", "seed", "time_to_stay"])
    with_margin = verdict_table(table, 120.0, margin=5.0).set_index("other")
    assert with_margin.verdict.to_dict() == {"sync": EQUIVALENT, "sync-over": UNDECIDED, "sync-deadline": FASTER}
    assert (with_margin.equivalence_margin == 5.0).all() and (with_margin.p_equivalence_holm >= 0).all()
    assert with_margin.loc["sync", "p_equivalence_holm"] < 0.05 <= with_margin.loc["sync-over", "p_equivalence_holm"]
    assert "sync +0.0 s [" in verdict_lines(with_margin.reset_index())[0]
    assert "equivalent within ±5 s" in verdict_lines(with_margin.reset_index())[0]
    without = verdict_table(table, 120.0)
    assert set(without.verdict) == {TIED, FASTER} and "p_equivalence" not in without


def test_holm_over_a_declared_family_counts_its_unrun_comparisons_at_p_one_by_hand():
    """Two p-values at hand of a family of four declared: 0.01 × 4 = 0.04, then max(0.04, 0.04 × 3) = 0.12,
    as Holm over all four with the two unrun at p = 1 gives."""
    assert list(holm(np.array([0.04, 0.01]), family_size=4)) == pytest.approx([0.12, 0.04])
    assert list(holm(np.array([0.04, 0.01, 1.0, 1.0]))[:2]) == pytest.approx([0.12, 0.04])


def two_severities(gap: float) -> pd.DataFrame:
    """AFL `gap` s before sync at severity s, level at t, six seeds with spread."""
    rows = [(severity, "afl", seed, 10.0 + seed) for severity in ("s", "t") for seed in range(6)]
    rows += [("s", "sync", seed, 10.0 + gap + seed + 0.4 * (seed % 2)) for seed in range(6)]
    rows += [("t", "sync", seed, 10.0 + seed + 0.4 * (seed % 2) - 0.2) for seed in range(6)]
    return pd.DataFrame(rows, columns=["severity", "algorithm", "seed", "time_to_stay"])


def test_a_declared_family_adjusts_the_runs_at_hand_over_its_size_and_says_what_was_not_run():
    """One severity of a family declared over three (a referee's one-row cut): its comparison is adjusted
    as one of three, whatever runs are at hand, and family_unrun says two were not run; the same
    comparison without a declaration is a family of one."""
    table = two_severities(3.0)
    one_row = table[table.severity == "s"]
    family = Family(("s", "t", "u"), ("afl", "sync"))
    declared = verdict_table(one_row, 40.0, family=family)
    alone = verdict_table(one_row, 40.0)
    assert list(alone.family_size) == [1] and "family_unrun" not in alone
    assert list(declared.family_size) == [3] and list(declared.family_unrun) == [2]
    assert list(declared.p_holm) == pytest.approx([min(1.0, 3 * p) for p in alone.p_value])
    everything = verdict_table(table, 40.0, family=family)
    assert list(everything.family_unrun) == [1, 1]


def test_a_family_spanning_the_targets_adjusts_over_every_targets_comparisons():
    """Two targets read, a family spanning them: the four comparisons (2 severities × 2 targets) are one
    family of 4, as Holm over their four p-values gives; unspanned, each target's two are one."""
    family = Family(("s", "t"), ("afl", "sync"), spans=("targets",))
    tables = [verdict_table(two_severities(gap), 40.0, family=family).assign(target=target, budget=40.0,
              seed_set="all") for target, gap in ((0.7, 3.0), (0.8, 1.0))]  # fmt: skip
    per_target = pd.concat(tables, ignore_index=True)
    assert set(per_target.family_size) == {2}
    spanning = readjusted(per_target, family, None, targets=2, budgets=1)
    assert set(spanning.family_size) == {4} and set(spanning.family_unrun) == {0}
    for metric, rows in spanning.groupby("metric"):
        assert list(rows.p_holm) == pytest.approx(list(holm(rows.p_value.to_numpy()))), metric
    assert (spanning.p_holm >= per_target.p_holm).all() and (spanning.p_holm > per_target.p_holm).any()


def test_the_detectable_difference_by_hand_and_read_back_from_an_interval():
    """At 200 seeds the noncentral t is the normal: (z_0.975 + z_0.8)·sd/√n = 1.98 s for sd 10 (the
    exact t a little more); a family of 4 tests at 0.0125; with too few seeds, without spread or past the
    budget, none. The spread read back from a comparison's interval is its differences' sd."""
    assert detectable_difference(10.0, 200, 1, 0.8) == pytest.approx(1.981, abs=0.02)
    assert detectable_difference(10.0, 10, 4, 0.8) > detectable_difference(10.0, 10, 1, 0.8)
    assert math.isnan(detectable_difference(0.0, 10, 1, 0.8)) and math.isnan(detectable_difference(10.0, 4, 1, 0.8))
    assert math.isnan(detectable_difference(10.0, 10, 112, 0.8, ceiling=12.0))  # past the budget: none within it
    differences = np.array([3.0, -1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
    low, high, p = paired_test(differences)
    row = pd.DataFrame({"ci_low": [low], "ci_high": [high], "seeds": [8], "family_size": [3], "budget": [60.0]})
    expected = detectable_difference(float(differences.std(ddof=1)), 8, 3, 0.9)
    assert with_detectable(row, 0.9).detectable_difference.iloc[0] == pytest.approx(expected, rel=1e-9)
