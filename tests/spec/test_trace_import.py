"""`asyncfl trace import`: each published format, written by hand in the test, converted to the periods
it means, and a file that would run code refused before anything runs."""

import json
import os
import pickle

import pytest

from asyncfl.cli import main
from asyncfl.spec.errors import InputError
from asyncfl.spec.trace_import import fedscale_periods, flash_periods, import_trace
from asyncfl.spec.traces import read_trace

# FedScale's client_behave_trace: id → active starts, inactive ends, the period after which it repeats
FEDSCALE = {
    1234: {"duration": 60, "active": [10, 50], "inactive": [30, 80], "finish_time": 100, "model": "Pixel"},
    99: {"duration": 90, "active": [0], "inactive": [90], "finish_time": 120, "model": "Mi 9"},
    7: {"duration": 5, "active": [5], "inactive": [10], "finish_time": 50, "model": "x"},
}


def test_a_fedscale_trace_repeats_every_finish_time_and_is_cut_at_the_horizon(tmp_path):
    periods = fedscale_periods(pickle.dumps(FEDSCALE), clients=2, horizon=None)
    assert periods == {0: [(5.0, 10.0)], 1: [(0.0, 90.0)]}  # ids 7 and 99, the first two in order
    source = tmp_path / "client_behave_trace"
    source.write_bytes(pickle.dumps(FEDSCALE))
    csv = import_trace(source, "fedscale", clients=3, horizon=200.0)
    assert csv.splitlines() == [
        "client,start,end",
        "0,5.0,10.0", "0,55.0,60.0", "0,105.0,110.0", "0,155.0,160.0",  # every 50 s
        "1,0.0,90.0", "1,120.0,200.0",  # every 120 s, the second cut at the horizon
        "2,10.0,30.0", "2,50.0,80.0", "2,110.0,130.0", "2,150.0,180.0",  # id 1234, every 100 s
    ]  # fmt: skip


class Payload:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def test_a_pickle_that_would_run_code_is_refused_unrun(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="asks for .*system"):
        fedscale_periods(pickle.dumps({1: Payload()}), clients=1, horizon=None)
    assert not (tmp_path / "pwned").exists()
    with pytest.raises(InputError, match="lacks active, inactive"):
        fedscale_periods(pickle.dumps({1: {"active": [1]}}), clients=1, horizon=None)
    with pytest.raises(InputError, match="fewer than --clients 4"):
        fedscale_periods(pickle.dumps(FEDSCALE), clients=4, horizon=None)


def messages(*lines: str) -> dict:
    return {"guid": "g", "model": "m", "messages": "\n".join(lines) + "\n"}


# FLASH's user_behavior: per guid, its state messages; online while charging, on WiFi and idle
FLASH = {
    "b-device": messages(
        "2020-01-02 00:00:00\tbattery_charged_on",
        "2020-01-02 00:00:10\twifi",
        "2020-01-02 00:00:20\tscreen_off",  # ready from 20 s (charging, WiFi, idle)
        "2020-01-02 00:01:00\t87%",  # a battery level: no change
        "2020-01-02 00:02:00\tscreen_on",  # its screen on, unlocked: not idle
        "2020-01-02 00:03:00\tscreen_lock",  # idle again from 180 s
        "2020-01-02 00:04:00\t4G",  # off WiFi at 240 s
        "2020-01-02 00:05:00\twifi",  # ready again from 300 s until its last message
        "2020-01-02 00:06:40\tbattery_okay",
    ),
    "a-device": messages(
        "2020-01-01 23:59:50\tscreen_lock",  # the earliest message of all: time 0
        "2020-01-01 23:59:55\twifi",
        "2020-01-02 00:00:30\tbattery_charged_on",  # ready from 40 s
        "2020-01-02 00:01:10\tbattery_charged_off",  # until 80 s
    ),
}


def test_flash_states_become_the_periods_a_device_is_charging_on_wifi_and_idle():
    periods = flash_periods(json.dumps(FLASH).encode(), clients=2, horizon=None)
    assert periods == {0: [(40.0, 80.0)], 1: [(30.0, 130.0), (190.0, 250.0), (310.0, 410.0)]}
    alone = flash_periods(json.dumps({"b-device": FLASH["b-device"]}).encode(), clients=1, horizon=None)
    assert alone == {0: [(20.0, 120.0), (180.0, 240.0), (300.0, 400.0)]}  # its own first message is time 0


def test_the_command_writes_a_csv_that_availability_trace_reads(tmp_path, capsys):
    source = tmp_path / "user_behavior.json"
    source.write_text(json.dumps(FLASH))
    out = tmp_path / "trace.csv"
    argv = ["trace", "import", str(source), "--format", "flash", "--clients", "2", "--horizon", "300"]
    assert main([*argv, "--out", str(out)]) == 0
    assert read_trace(out, 2) == {0: [(40.0, 80.0)], 1: [(30.0, 130.0), (190.0, 250.0)]}
    source.write_text("{not json")
    assert main([*argv, "--out", str(tmp_path / "bad.csv")]) == 1
    assert not (tmp_path / "bad.csv").exists()
    assert "asyncfl trace: error: not a FLASH trace: not JSON" in capsys.readouterr().err
