"""run.json: what makes two runs one run, and what every reader refuses before it trusts a run folder."""

import json

import pytest

from asyncfl.runs.record import (
    RUN_FOLDER_FORMAT,
    check_run_identity,
    read_run_record,
    run_identity,
    verify_run_files,
    write_run_record,
)
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError


def test_a_trace_is_part_of_a_runs_identity_by_its_content(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("client,start,end\n0,0,9\n")
    config = make_config({"availability": "trace", "availability_trace": str(trace)})
    before = run_identity(config, "digits", "abc")
    trace.write_text("client,start,end\n0,0,8\n")
    after = run_identity(config, "digits", "abc")
    assert before["config"] == after["config"] and before != after
    trace.unlink()
    with pytest.raises(InputError, match="is not a file; give the path of a client,start,end CSV"):
        run_identity(config, "digits", "abc")


def test_a_record_vouches_for_itself_and_its_files(tmp_path):
    (tmp_path / "metrics.csv").write_text("round\n1\n")
    hashes = {"metrics.csv": "0" * 64}
    written = write_run_record(tmp_path, {"config": {"algorithm": "afl", "seed": 3}}, hashes)
    assert written["run_folder_format"] == RUN_FOLDER_FORMAT and read_run_record(tmp_path) == written
    with pytest.raises(InputError, match="metrics.csv is not the file its run wrote"):
        verify_run_files(tmp_path, ("metrics.csv",))
    with pytest.raises(InputError, match="records seed = 3, not the 4 this folder stands for"):
        check_run_identity(tmp_path, written, algorithm="afl", seed=4)
    edited = json.loads((tmp_path / "run.json").read_text())
    edited["config"]["seed"] = 4
    (tmp_path / "run.json").write_text(json.dumps(edited))
    with pytest.raises(InputError, match="does not match its own"):
        read_run_record(tmp_path)
