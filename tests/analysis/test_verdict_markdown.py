"""`asyncfl verdict-table`: a severity's verdicts as Markdown, the cells hand-checked from a small table,
and every bad input refused in one line naming the option."""

import pandas as pd
import pytest

from asyncfl.analysis.verdict_markdown import verdict_markdown
from asyncfl.cli import main
from asyncfl.settings.errors import InputError

BASE = {"target": 0.78, "budget": 120.0, "severity": "slow40", "metric": "time_to_stay", "seeds": 10,
        "reference_time": 60.0, "other_time": 100.0, "reference_reached": 10, "other_reached": 4,
        "ci_low": -50.0, "ci_high": -30.0, "p_holm": 0.001, "p_equivalence_holm": 1.0, "equivalence_margin": 15.0,
        "family_size": 8, "detectable_difference": 12.0}  # fmt: skip


def row(**values: object) -> dict:
    return {**BASE, "reference": "afl", "other": "sync", "difference": -40.0, "verdict": "faster", **values}


def write(tmp_path, rows: list[dict]):
    path = tmp_path / "straggler_verdicts.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_a_pooled_row_reads_as_its_cells_say(tmp_path):
    equal = {"other": "sync-partial", "other_time": 61.0, "other_reached": 10, "ci_low": -4.0, "ci_high": 2.0,
             "p_holm": 0.6, "p_equivalence_holm": 0.004, "verdict": "equivalent"}  # fmt: skip
    rows = [
        row(seed_set="all", budget=60.0, difference=-99.0),  # another budget, first: not this table's
        row(seed_set="all", seeds=20),
        row(seed_set="discovery", difference=-45.0),
        row(seed_set="replication", difference=5.0),  # the other sign: the pooled verdict's check fails
        row(seed_set="all", seeds=20, difference=-1.0, **equal),
        row(seed_set="discovery", difference=-2.0, **equal),
        row(seed_set="replication", difference=0.0, **equal),
    ]
    text = verdict_markdown(write(tmp_path, rows), "slow40", 0.78)
    assert text.startswith("slow40, time to stay above 78 %, T = 120 s: 20 paired seeds, pooled, Holm over 8; "
                           "equivalent within ±15 s\n")  # fmt: skip
    assert "| AFL | 10 of 20 | 60.0 s |" in text and "| Sync FL (FedAvg) | 4 of 20 | 100.0 s |" in text
    assert ("| AFL | **-40.0 [-50.0, -30.0] faster** (p 0.001); ✗ sets -45.0 / +5.0; detects 12; stay 10 vs 4 of 20 "
            "| **-1.0 [-4.0, +2.0] equivalent within ±15 s** (p 0.004); sets -2.0 / +0.0; detects 12; "
            "stay 10 vs 10 of 20 |") in text  # fmt: skip
    assert "-99.0" not in text


def test_sets_apart_show_the_replications_own_verdict(tmp_path):
    tied = "no significant difference"
    rows = [row(seed_set="discovery"), row(seed_set="replication", difference=-20.0, verdict=tied)]
    text = verdict_markdown(write(tmp_path, rows), "slow40", 0.78)
    assert "10 paired seeds (discovery set)" in text
    assert "✗ replication -20.0 no significant difference" in text
    rows[1] = row(seed_set="replication", difference=-38.0)
    assert "✓ replication -38.0 faster" in verdict_markdown(write(tmp_path, rows), "slow40", 0.78)


@pytest.mark.parametrize(
    ("arguments", "content", "message"),
    [
        (["--severity", "slow10", "--target", "0.78"], None, "--severity slow10: {path} has slow40"),
        (["--severity", "slow40", "--target", "0.8"], None, "--target 0.8: {path} has 0.78"),
        (["--severity", "slow40", "--target", "0.78", "--budget", "30"], None, "--budget 30: {path} has 120"),
        (["--severity", "slow40", "--target", "0.78"], "a,b\n1,2\n", "lacks the columns target, severity"),
        (["--severity", "slow40", "--target", "0.78"], "", "not a verdicts CSV"),
        (["--severity", "slow40", "--target", "0.78"], ",".join(BASE) + "\n", "lacks the columns reference"),
    ],
)
def test_a_bad_input_is_refused_in_one_line_naming_the_option(tmp_path, capsys, arguments, content, message):
    path = write(tmp_path, [row(seed_set="all")])
    if content is not None:
        path.write_text(content)
    assert main(["verdict-table", "--verdicts", str(path), *arguments]) == 1
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and message.format(path=path) in error, error
    assert main(["verdict-table", "--verdicts", str(tmp_path / "none.csv"), *arguments]) == 1
    assert "no such file" in capsys.readouterr().err


def test_an_empty_table_is_refused(tmp_path):
    path = tmp_path / "v.csv"
    path.write_text(",".join([*BASE, "reference", "other", "difference", "verdict"]) + "\n")
    with pytest.raises(InputError, match="holds no comparison"):
        verdict_markdown(path, "slow40", 0.78)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"seeds": "lots"}, "column seeds, row 2: 'lots' is not a number"),
        ({"target": float("nan")}, "column target, row 2: nan is not a finite number"),
        ({"reference_reached": 2.5}, "column reference_reached, row 2: 2.5 is not a count"),
        ({"difference": float("inf")}, "column difference, row 2: inf is no number a verdict can rest on"),
        ({"verdict": "equivalent", "equivalence_margin": float("nan")}, "column equivalence_margin, row 2: nan"),
        ({"seeds": 3}, "column seeds, row 2: 3 paired seeds decide nothing (at least 5)"),
        ({"verdict": "bogus"}, "column verdict, row 2: 'bogus' is none of faster, slower"),
        ({"seed_set": "weird"}, "column seed_set, row 2: 'weird' is none of all, discovery, replication"),
        ({"other": "sync-par|tial"}, "column other, row 2: 'sync-par|tial' is no run or severity name"),
        ({"reference": "nosuch"}, "column reference, row 2: 'nosuch' names no algorithm"),
        ({"reference": "afl", "other": "sync", "difference": 5.0}, "row 2 and another are one comparison twice"),
    ],
)
def test_a_damaged_cell_is_refused_naming_its_column_and_row(tmp_path, change, message):
    """A cell `asyncfl stragglers` never writes (found by an outside-in check: tracebacks, and tables with
    +nan decided or a pipe that split a column) is refused in one line, never printed."""
    path = write(tmp_path, [row(**{"seed_set": "all", **change}), row(seed_set="all", other="sync-partial")])
    if "twice" in message:
        path = write(tmp_path, [row(seed_set="all"), row(seed_set="all", difference=5.0)])
    with pytest.raises(InputError) as error:
        verdict_markdown(path, "slow40", 0.78)
    assert message in str(error.value) and "\n" not in str(error.value), str(error.value)


def test_a_table_read_at_one_budget_and_a_synchronous_name_of_its_own_read_as_such(tmp_path):
    rows = [{key: value for key, value in row(seed_set="all", other=other).items() if key != "budget"}
            for other in ("sync", "fedqueue")]  # fmt: skip
    text = verdict_markdown(write(tmp_path, rows), "slow40", 0.78)
    assert "at the table's one budget T:" in text.splitlines()[0] and "| run name | stays above by T |" in text
    assert "| run name | Sync FL (FedAvg) | FedQueue |" in text
