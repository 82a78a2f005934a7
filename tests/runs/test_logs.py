"""A run's CSV logs: exact cells, the text a checkpoint restores, a file someone else touched written
again whole, the rows an aggregation makes, and the columns a run's settings call for."""

import io
import math

from asyncfl.planning.layout import EVENTS, METRICS, TIMINGS
from asyncfl.runs.logs import (
    AS_CODED_COLUMNS,
    EVENTS_COLUMNS,
    LOSS_EVENT_COLUMNS,
    METRICS_COLUMNS,
    PARTIAL_COLUMNS,
    PHASE_COLUMNS,
    Aggregation,
    CsvLog,
    Progress,
    RunLogs,
    cell,
)


def aggregation(**overrides) -> Aggregation:
    values = dict(
        version=3,
        now=2.5,
        clients=[4, 1],
        dispatch_versions=[2, 1],
        dispatch_times=[0.5, 0.25],
        arrival_times=[2.5, 2.5],
        stalenesses=[0, 1],
        lrs=[0.01, 0.03],
        sizes=[10, 30],
        train_losses=[1.0, 2.0],
        epochs_run=[2, 3],
        mean_epoch_losses=[1.5, 2.5],
        coefficients=[0.25, 0.75],
        update_norm=0.5,
    )
    return Aggregation(**(values | overrides))


def test_a_cell_is_exact_and_a_missing_value_is_empty():
    assert cell(None) == "" and cell(3) == "3"
    assert cell(0.1 + 0.2) == "0.30000000000000004"  # shortest round-trip repr, never rounded
    assert (cell(math.nan), cell(math.inf)) == ("nan", "inf")  # a diverged value never reads as missing


def test_a_log_resumes_from_its_checkpointed_text_and_appends(tmp_path):
    path = tmp_path / "log.csv"
    log = CsvLog(path, ("a", "b"))
    log.append([{"a": 1, "b": None}])
    text = log.text()
    log.close()
    assert text == "a,b\n1,\n"
    path.unlink()  # Snakemake deletes a failed job's outputs
    resumed = CsvLog(path, ("a", "b"), text)
    resumed.append([{"a": 2, "b": 0.5}])
    resumed.settle()
    resumed.close()
    assert path.read_text() == resumed.text() == "a,b\n1,\n2,0.5\n"


def test_settle_writes_a_file_someone_else_cut_short_or_replaced_again_whole(tmp_path):
    path = tmp_path / "log.csv"
    log = CsvLog(path, ("a",))
    log.append([{"a": value} for value in range(3)])
    path.write_text("a\n0\n")  # cut short by someone else
    log.settle()
    assert path.read_text() == "a\n0\n1\n2\n"
    path.unlink()
    path.write_text("a\n9\n")  # replaced: another file at the path
    log.settle()
    log.append([{"a": 3}])  # and the log goes on into the file now at the path
    log.close()
    assert path.read_text() == "a\n0\n1\n2\n3\n"


def test_the_server_loss_is_size_weighted_and_the_reference_codes_is_a_plain_mean():
    record = aggregation()
    assert record.train_loss == (10 * 1.0 + 30 * 2.0) / 40
    assert record.train_loss_as_coded == (1.5 + 2.5) / 2
    row = record.metrics_row()
    assert (row["mean_staleness"], row["max_staleness"], row["lr"]) == (0.5, 1, 0.02)


def test_event_rows_put_the_dispatches_set_aside_first_and_add_phases_where_there_are_links():
    lost = {"round": 3, "client": 0, "lost": "offline"}
    rows = aggregation(phases=[(0.1, 1.0, 0.2), (0.3, 1.5, 0.4)], losses=[lost]).event_rows()
    assert rows[0] == lost
    assert [row["client"] for row in rows[1:]] == [4, 1] and all(row["lost"] == "" for row in rows[1:])
    assert [rows[2][key] for key in PHASE_COLUMNS] == [0.3, 1.5, 0.4]
    assert set(EVENTS_COLUMNS) <= set(rows[1])


def test_a_runs_logs_hold_the_columns_its_settings_call_for(tmp_path):
    (tmp_path / "plain").mkdir()
    RunLogs(tmp_path / "plain", None, 2, 0).close()
    assert (tmp_path / "plain" / METRICS).read_text() == ",".join(METRICS_COLUMNS) + "\n"
    assert (tmp_path / "plain" / EVENTS).read_text() == ",".join(EVENTS_COLUMNS) + "\n"
    (tmp_path / "all").mkdir()
    logs = RunLogs(
        tmp_path / "all", None, 2, 0, as_coded=True, phases=True, accounting=("dropped",), losses=True, partial=True
    )
    record = aggregation(version=1, phases=[(0.1, 1.0, 0.2)] * 2, accounting={"dropped": 2}, samples_trained=[8, 3])
    logs.record(record, 0.75)
    texts = logs.settled_texts()
    logs.close()
    metrics_header, events_header = texts[METRICS].splitlines()[0], texts[EVENTS].splitlines()[0]
    assert metrics_header == ",".join(METRICS_COLUMNS + AS_CODED_COLUMNS + ("dropped",))
    assert events_header == ",".join(EVENTS_COLUMNS + PHASE_COLUMNS + LOSS_EVENT_COLUMNS + PARTIAL_COLUMNS)
    assert [row.rsplit(",", 1)[1] for row in texts[EVENTS].splitlines()[1:]] == ["8", "3"]
    assert texts[METRICS].splitlines()[1].endswith(",2")
    assert texts[TIMINGS] == "round,wall_seconds\n1,0.75\n"
    assert all((tmp_path / "all" / name).read_text() == text for name, text in texts.items())


def test_progress_off_a_terminal_is_a_plain_line_every_twentieth(capsys):
    """A SLURM log gets a line every 1/20 of the rounds on stdout, not a progress bar's redraws."""
    stream = io.StringIO()  # not a terminal
    progress = Progress(40, 0, stream)
    for round_ in range(1, 41):
        progress.update(round_, float(round_), 0.5, None if round_ % 2 else 0.875)
    progress.close()
    assert stream.getvalue() == ""
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 20 and lines[0].startswith("round 2/40") and lines[-1].endswith("test accuracy 0.8750")
