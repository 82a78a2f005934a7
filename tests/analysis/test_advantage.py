"""The async_advantage map: each synchronous run compared with each asynchronous algorithm at its clients in flight."""

import math

import pandas as pd

from asyncfl.analysis.advantage import cell_text, draw_advantage, matched_cells
from asyncfl.analysis.verdicts import EQUIVALENT, FASTER, TIED, UNDECIDED

DIFFERENCES = (("sync", -3.0), ("sync-overselect", -0.5), ("sync-deadline", -2.0), ("sync-over60", 4.0))
IN_FLIGHT = {"afl": 5, "afl-m7": 7, "sync": 5, "sync-overselect": 7, "sync-deadline": 5, "sync-over60": 8}


def verdict(severity: str, reference: str, other: str, difference: float, metric: str = "time_to_stay") -> dict:
    low, high = difference - 1.0, difference + 1.0
    return dict(target=0.9, severity=severity, metric=metric, reference=reference, other=other, seeds=10,
                difference=difference, ci_low=low, ci_high=high, p_holm=0.01, family_size=16,
                reference_reached=10, other_reached=10 if difference < 0 else 3,
                verdict=FASTER if high < 0 else TIED)  # fmt: skip


def test_each_synchronous_run_meets_the_afl_run_of_its_clients_in_flight():
    rows = [
        verdict(severity, reference, other, difference)
        for severity in ("even", "tail")
        for reference in ("afl", "afl-m7")
        for other, difference in DIFFERENCES
    ]
    rows.append(verdict("even", "afl-m7", "sync-overselect", 9.0, metric="time_to_target"))  # not the primary
    cells = matched_cells(pd.DataFrame(rows), IN_FLIGHT)
    assert list(cells.other.unique()) == ["sync", "sync-overselect", "sync-deadline", "sync-over60"]
    even = cells[cells.severity == "even"].set_index("other")
    assert even.reference.to_dict() == {
        "sync": "afl", "sync-overselect": "afl-m7", "sync-deadline": "afl", "sync-over60": ""
    }  # fmt: skip
    assert even.loc["sync", "verdict"] == FASTER and even.loc["sync-overselect", "verdict"] == TIED
    assert even.loc["sync-overselect", "difference"] == -0.5  # time to stay's comparison, not the first crossing's
    assert math.isnan(even.loc["sync-over60", "difference"])  # no AFL at M = 8 in the sweep: no number
    assert len(cells) == 8


def test_a_cell_says_whether_the_replication_seeds_gave_its_verdict():
    rows = [{**verdict("even", "afl", other, difference), "seed_set": "discovery"} for other, difference in DIFFERENCES]
    again = {"sync": FASTER, "sync-deadline": TIED}  # the first agrees, the second does not
    rows += [
        {**verdict("even", "afl", other, -3.0), "seed_set": "replication", "verdict": v} for other, v in again.items()
    ]
    cells = matched_cells(pd.DataFrame(rows), IN_FLIGHT).set_index("other")
    assert cells.loc["sync", "replication"] == FASTER and cells.loc["sync-deadline", "replication"] == TIED
    assert cells.loc["sync-overselect", "replication"] == ""  # no AFL at M = 7 here, no replication either
    assert cell_text(cells.loc["sync"], IN_FLIGHT).endswith("AFL faster\np 0.01\nreplicated")
    assert cell_text(cells.loc["sync-deadline"], IN_FLIGHT).endswith("AFL faster\np 0.01\nrepl.: n.s.")
    assert len(cells) == 4  # the replication rows are read, not drawn as cells of their own


def test_each_asynchronous_algorithm_gets_its_own_row_of_cells():
    in_flight = {**IN_FLIGHT, "fedbuff-m7": 7}
    rows = [verdict("even", reference, other, difference) for reference in ("afl", "afl-m7", "fedbuff-m7")
            for other, difference in DIFFERENCES]  # fmt: skip
    cells = matched_cells(pd.DataFrame(rows), in_flight)
    assert list(cells.family.unique()) == ["afl", "fedbuff"] and len(cells) == 2 * 4
    fedbuff = cells[cells.family == "fedbuff"].set_index("other")
    assert fedbuff.reference.to_dict() == {"sync": "", "sync-overselect": "fedbuff-m7", "sync-deadline": "",
                                           "sync-over60": ""}  # fmt: skip
    no_run = cells[(cells.family == "fedbuff") & (cells.other == "sync")].iloc[0]
    assert cell_text(no_run, in_flight) == "no FedBuff at\nM = 5"
    assert cell_text(fedbuff.loc["sync-overselect"], in_flight).endswith("n.s.\np 0.01")
    afl = cells[cells.family == "afl"].set_index("other")
    assert cell_text(afl.loc["sync"], in_flight).endswith("AFL faster\np 0.01")


def test_the_map_draws_a_row_of_panels_per_asynchronous_algorithm_and_a_column_per_target():
    import matplotlib.pyplot as plt

    in_flight = {**IN_FLIGHT, "fedbuff-m7": 7}
    rows = [{**verdict("even", reference, other, difference), "target": target}
            for target in (0.9, 0.7) for reference in ("afl", "afl-m7", "fedbuff-m7")
            for other, difference in DIFFERENCES]  # fmt: skip
    cells = matched_cells(pd.DataFrame(rows), in_flight)
    figure, axes = plt.subplots(2, 2)
    try:
        draw_advantage(axes, cells, ["even"], in_flight)
        titles = [[ax.get_title().split(":")[0] + "@" + ax.get_title().split("% test")[0][-2:] for ax in row]
                  for row in axes]  # fmt: skip
        assert titles == [["AFL@70", "AFL@90"], ["FedBuff@70", "FedBuff@90"]]  # targets in increasing order
        words = [text.get_text() for text in axes[1, 0].texts]
        assert "no FedBuff at\nM = 5" in words and any(word.endswith("n.s.\np 0.01") for word in words)
    finally:
        plt.close(figure)


def test_a_cell_whose_runs_did_not_all_reach_the_target_is_decided_and_says_how_many_did():
    row = pd.Series(verdict("tail", "afl", "sync", 4.0) | {"family": "afl", "replication": "", "seeds": 10})
    assert cell_text(row, IN_FLIGHT) == "+4.0 s\n[+3.0, +5.0]\nn.s.\np 0.01\nreached 10 vs 3"


def test_a_name_longer_than_fedasync_takes_a_line_of_its_own_in_its_cells():
    in_flight = {"fedcompass": 5, "sync": 5, "sync-overselect": 7}
    others = ("sync", "sync-overselect")
    rows = [{**verdict("even", "fedcompass", other, -3.0), "seed_set": "discovery"} for other in others]
    rows.append({**verdict("even", "fedcompass", "sync", -3.0), "seed_set": "replication", "verdict": "slower"})
    cells = matched_cells(pd.DataFrame(rows), in_flight)
    faster, no_run = (cells[cells.other == other].iloc[0] for other in others)
    words = "-3.0 s\n[-4.0, -2.0]\nFedCompass\nfaster\np 0.01\nrepl.:\nFedCompass\nslower"
    assert cell_text(faster, in_flight) == words
    assert cell_text(no_run, in_flight) == "no\nFedCompass\nat\nM = 7"


def test_with_a_margin_a_cell_reads_equivalent_with_its_tost_p_or_undecided_and_the_title_gives_the_band():
    import matplotlib.pyplot as plt

    margin = {"equivalence_margin": 5.0, "p_equivalence_holm": 0.003}
    rows = [
        {**verdict("even", "afl", "sync", -0.5), **margin, "verdict": EQUIVALENT},
        {**verdict("even", "afl", "sync-deadline", -2.0), **margin, "verdict": UNDECIDED, "p_equivalence_holm": 0.4},
    ]
    cells = matched_cells(pd.DataFrame(rows), IN_FLIGHT).set_index("other")
    assert cell_text(cells.loc["sync"], IN_FLIGHT) == "-0.5 s\n[-1.5, +0.5]\nequivalent\np 0.003"
    assert cell_text(cells.loc["sync-deadline"], IN_FLIGHT) == "-2.0 s\n[-3.0, -1.0]\nundecided\np 0.01"
    figure, axes, in_flight = *plt.subplots(1, 1, squeeze=False), {"afl": 5, "sync": 5, "sync-deadline": 5}
    try:
        draw_advantage(axes, matched_cells(pd.DataFrame(rows), in_flight), ["even"], in_flight)
        assert axes[0, 0].get_title().endswith("p Holm-adjusted over 16\nequivalent: within ±5 s (TOST, green)")
        marks = {
            (tuple(round(c, 3) for c in patch.get_edgecolor()[:3]), patch.get_hatch()) for patch in axes[0, 0].patches
        }
        assert marks == {((0.0, 0.0, 0.0), "///"), ((0.0, 0.392, 0.0), "\\\\\\")}  # undecided, equivalent
    finally:
        plt.close(figure)
