"""What a run's job asks for when submitted again (asyncfl.planning.progress): the rest at the pace its
checkpoint recorded, a doubling where none was recorded, a minute for a retry of a run that failed on its
own; and the share of its work a run has done, by the budget that ends it first (asyncfl.sim.ending)."""

import json

import pytest

from asyncfl.planning.progress import Progress, read_progress, record_failure, recorded_failure, run_job_minutes
from asyncfl.settings.config import make_config
from asyncfl.sim.ending import work_done


def test_a_job_without_a_recorded_pace_doubles_its_time_within_the_cap(tmp_path):
    assert [run_job_minutes(tmp_path, 7, attempt, 20, 2.0) for attempt in (1, 2, 3)] == [
        (7, None),
        (14, None),
        (20, None),
    ]


def test_a_resumed_job_asks_for_the_rest_at_its_recorded_pace_on_any_attempt(tmp_path):
    # an estimate 7x short: 1 min asked, killed with 1/8 done in 60 s; the rest, 420 s x 2, and a minute to start
    (tmp_path / "progress.json").write_text(json.dumps({"done": 0.125, "wall_seconds": 60.0}))
    expected = (1 + 14, Progress(0.125, 60.0))
    assert run_job_minutes(tmp_path, 1, 2, 2880, 2.0) == expected
    assert run_job_minutes(tmp_path, 1, 1, 2880, 2.0) == expected  # a new invocation's first attempt too
    assert run_job_minutes(tmp_path, 1, 2, 10, 2.0)[0] == 10  # within the cap


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "[]",
        '{"done": 0, "wall_seconds": 5}',
        '{"done": 1.5, "wall_seconds": 5}',
        '{"done": NaN, "wall_seconds": 5}',
        '{"done": 0.5, "wall_seconds": Infinity}',
        '{"done": 0.5, "wall_seconds": -1}',
        '{"done": "half", "wall_seconds": 5}',
        '{"done": 0.5}',
        '{"done": null, "wall_seconds": 5}',
    ],
)
def test_a_progress_file_that_cannot_be_trusted_is_no_pace(tmp_path, text):
    (tmp_path / "progress.json").write_text(text)
    assert read_progress(tmp_path) is None and run_job_minutes(tmp_path, 5, 2, 100, 2.0) == (10, None)


def test_a_retry_of_a_run_that_failed_on_its_own_asks_for_a_minute(tmp_path):
    (tmp_path / "progress.json").write_text(json.dumps({"done": 0.5, "wall_seconds": 600.0}))
    record_failure(tmp_path / "run", "training loss is nan")  # no run folder: nothing recorded, nothing made
    assert not (tmp_path / "run").exists()
    (tmp_path / "run").mkdir()
    record_failure(tmp_path / "run", "training loss is nan")
    assert recorded_failure(tmp_path / "run") == "training loss is nan"
    assert run_job_minutes(tmp_path / "run", 30, 2, 2880, 2.0) == (1, None)
    assert run_job_minutes(tmp_path / "run", 30, 1, 2880, 2.0) == (30, None)  # a new invocation trains again
    for text in ("{", '{"cause": 3}', "[]"):
        (tmp_path / "run/failed.json").write_text(text)
        assert recorded_failure(tmp_path / "run") is None
    (tmp_path / "file").write_text("")
    record_failure(tmp_path / "file", "a cause")  # where it cannot be recorded, nothing is (the cause is still said)


def test_the_share_of_work_done_is_the_budget_that_ends_the_run_first():
    assert work_done(make_config({"rounds": 40}), 10, 0.0, 0, 0) == 0.25
    budget = make_config({"rounds": 1000, "max_virtual_time": 200.0, "max_updates": 100})
    assert work_done(budget, 10, 50.0, 60, 70) == 0.6
    assert work_done(budget, 10, 150.0, 60, 70) == 0.75
    assert work_done(budget, 2000, 150.0, 60, 70) == 1.0
