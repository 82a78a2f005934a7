"""`asyncfl trace import`: each published format, written by hand in the test, converted to the periods
it means, and a file that would run code refused before anything runs."""

import contextlib
import json
import os
import pickle
import random

import pytest

from asyncfl.cli import main
from asyncfl.settings.errors import InputError
from asyncfl.settings.trace_import import MAX_PERIODS, fedscale_periods, flash_periods, import_trace, trace_csv
from asyncfl.settings.traces import read_trace

# FedScale's client_behave_trace: id → active starts, inactive ends, the period after which it repeats
FEDSCALE = {
    1234: {"duration": 60, "active": [10, 50], "inactive": [30, 80], "finish_time": 100, "model": "Pixel"},
    99: {"duration": 90, "active": [0], "inactive": [90], "finish_time": 120, "model": "Mi 9"},
    7: {"duration": 5, "active": [5], "inactive": [10], "finish_time": 50, "model": "x"},
}


def test_a_fedscale_trace_repeats_every_finish_time_and_is_cut_at_the_horizon(tmp_path):
    periods = fedscale_periods(pickle.dumps(FEDSCALE), clients=2, horizon=None).periods
    assert periods == {0: [(5.0, 10.0)], 1: [(0.0, 90.0)]}  # ids 7 and 99, the first two in order
    source = tmp_path / "client_behave_trace"
    source.write_bytes(pickle.dumps(FEDSCALE))
    csv = trace_csv(import_trace(source, "fedscale", clients=3, horizon=200.0).periods)
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


# FLASH's user_behavior: per guid, its state messages; online while charging, on WiFi and locked
FLASH = {
    "b-device": messages(
        "2020-01-02 00:00:00\tbattery_charged_on",
        "2020-01-02 00:00:10\twifi",
        "2020-01-02 00:00:20\tscreen_off",  # the screen off is not idle in FLASH's code: locked is
        "2020-01-02 00:01:00\t87%",  # a battery level: no change
        "2020-01-02 00:02:00\tscreen_on",
        "2020-01-02 00:03:00\tscreen_lock",  # ready from 180 s (charging, WiFi, locked)
        "2020-01-02 00:04:00\t4G",  # off WiFi at 240 s
        "2020-01-02 00:05:00\twifi",  # ready again from 300 s, still at its last message: dropped
        "2020-01-02 00:06:40\tbattery_okay",
    ),
    "a-device": messages(
        "2020-01-01 23:59:50\tscreen_lock",  # the earliest message of all: time 0
        "2020-01-01 23:59:55\twifi",
        "2020-01-02 00:00:30\tbattery_charged_on",  # ready from 40 s
        "2020-01-02 00:01:10\tbattery_charged_off",  # until 80 s
    ),
}


def test_flash_states_become_the_periods_a_device_is_charging_on_wifi_and_locked():
    periods = flash_periods(json.dumps(FLASH).encode(), clients=2, horizon=None).periods
    assert periods == {0: [(40.0, 80.0)], 1: [(190.0, 250.0)]}
    alone = flash_periods(json.dumps({"b-device": FLASH["b-device"]}).encode(), clients=1, horizon=None)
    assert alone.periods == {0: [(180.0, 240.0)]}  # its own first message is time 0


def test_periods_that_touch_are_merged_as_the_sources_own_tools_merge_them(tmp_path):
    whole_cycle = {5: {"active": [0, 60], "inactive": [60, 100], "finish_time": 100}}  # online throughout
    assert fedscale_periods(pickle.dumps(whole_cycle), 1, horizon=350.0).periods == {0: [(0.0, 400.0)]}
    same_second = messages(  # charging ends and starts again within one second: FLASH merges the two
        "2020-01-02 00:00:00\twifi",
        "2020-01-02 00:00:01\tscreen_lock",
        "2020-01-02 00:00:02\tbattery_charged_on",
        "2020-01-02 00:00:09\tbattery_charged_off",
        "2020-01-02 00:00:09\tbattery_charged_on",
        "2020-01-02 00:00:20\tscreen_unlock",
    )
    assert flash_periods(json.dumps({"g": same_second}).encode(), 1, None).periods == {0: [(2.0, 20.0)]}
    for name, trace, fmt in (("fedscale.pkl", pickle.dumps(whole_cycle), "fedscale"),
                             ("flash.json", json.dumps({"g": same_second}).encode(), "flash")):  # fmt: skip
        (tmp_path / name).write_bytes(trace)
        argv = ["trace", "import", str(tmp_path / name), "--format", fmt, "--clients", "1"]
        assert main([*argv, "--horizon", "350", "--out", str(tmp_path / f"{name}.csv")]) == 0  # read back whole


def fedscale_error(trace, clients=1, horizon=None) -> str:
    with pytest.raises(InputError) as caught:
        fedscale_periods(trace if isinstance(trace, bytes) else pickle.dumps(trace), clients, horizon)
    return str(caught.value)


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        ({"active": [float("nan")], "inactive": [5], "finish_time": 10}, "FedScale client 1: active[0] is nan"),
        ({"active": [0], "inactive": [10**400], "finish_time": 10}, "inactive[0] is 1000"),
        ({"active": [0], "inactive": ["5"], "finish_time": 10}, "inactive[0] is '5', not a number"),
        ({"active": [True], "inactive": [5], "finish_time": 10}, "active[0] is 'True', not a number"),
        ({"active": [0], "inactive": [5], "finish_time": float("inf")}, "finish_time is inf"),
        ({"active": [0], "inactive": [5], "finish_time": 0}, "finish_time is 0; a cycle lasts > 0"),
        ({"active": [-1], "inactive": [5], "finish_time": 10}, "active[0] -1 or inactive[0] 5 lies outside its cycle"),
        ({"active": [0], "inactive": [50], "finish_time": 10}, "lies outside its cycle [0, finish_time 10]"),
        ({"active": [0, 1], "inactive": [5], "finish_time": 10}, "lists of equal length"),
        ({"active": 0, "inactive": 5, "finish_time": 10}, "lists of equal length"),
        ([0, 5, 10], "FedScale client 1 lacks active, inactive or finish_time"),
    ],
)
def test_every_bad_fedscale_field_is_named_in_fedscales_terms(entry, named):
    assert named in fedscale_error({1: entry})


def test_crafted_or_corrupt_pickles_are_one_line_errors_never_tracebacks():
    good = pickle.dumps(FEDSCALE)
    assert "not a FedScale trace pickle" in fedscale_error(good[:40])
    assert "not a FedScale trace pickle" in fedscale_error(b"\x80\x04\x95garbage")
    assert "dict of client id" in fedscale_error(pickle.dumps([1, 2]))
    rng = random.Random(0)
    for _ in range(300):  # bytes flipped at random: a trace or an InputError, nothing else
        mutated = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        with contextlib.suppress(InputError):
            fedscale_periods(bytes(mutated), 1, 500.0)


def test_ids_that_are_not_plain_numbers_sort_as_text():
    entry = {"active": [0], "inactive": [1], "finish_time": 2}
    trace = {"²": entry, 10: {**entry, "inactive": [2]}, "3": {**entry, "active": [1], "inactive": [2]}}
    assert fedscale_periods(pickle.dumps(trace), 3, None).periods == {0: [(1.0, 2.0)], 1: [(0.0, 2.0)], 2: [(0.0, 1.0)]}


def test_a_horizon_that_would_build_too_many_periods_is_refused_before_building_any():
    trace = {1: {"active": [0], "inactive": [1], "finish_time": 2}}
    assert f"more than {MAX_PERIODS:,}; lower --horizon" in fedscale_error(trace, horizon=1e12)
    tiny_cycle = {1: {"active": [0], "inactive": [5e-324], "finish_time": 5e-324}}  # horizon / cycle = inf
    assert "repeat to --horizon 1 as inf online periods" in fedscale_error(tiny_cycle, horizon=1.0)


def flash_error(trace, clients=1) -> str:
    with pytest.raises(InputError) as caught:
        flash_periods(trace if isinstance(trace, bytes) else json.dumps(trace).encode(), clients, None)
    return str(caught.value)


def test_a_mis_dated_flash_message_is_named_not_shifting_every_device():
    dated_1970 = messages("1970-01-01 00:00:00\twifi", "2020-01-02 00:00:00\tscreen_lock")
    error = flash_error({"a": FLASH["a-device"], "x": dated_1970}, clients=2)
    assert "FLASH device 'x', messages line 1 (1970-01-01 00:00:00), and device 'a', line 4" in error
    assert "more than 366 days apart; fix or remove the mis-dated message" in error


def test_bad_flash_input_names_its_device_and_line():
    assert "not JSON" in flash_error(b"[" * 100_000 + b"]" * 100_000)  # deeper than the parser recurses
    assert "not JSON" in flash_error(b'{"g": ' + b"1" * 5000 + b"}")  # more digits than Python converts
    assert "not JSON" in flash_error(b"\xff\xfe")
    assert "JSON object of guid" in flash_error([1])
    assert "device 'g' has no messages text" in flash_error({"g": {"messages": 5}})
    unknown = messages("2020-01-02 00:00:00\twifi", "2020-01-02 00:00:01\tairplane")
    assert "device 'g', messages line 2: 'airplane' is none of FLASH's states" in flash_error({"g": unknown})
    level = messages("2020-01-02 00:00:00\tnan%")
    assert "line 1: 'nan%' is none of FLASH's states" in flash_error({"g": level})
    stamp = messages("2020-13-02 00:00:00\twifi")
    assert "line 1: '2020-13-02 00:00:00\\twifi' is not 'YYYY-mm-dd" in flash_error({"g": stamp})
    assert "no message that changes their state" in flash_error({"g": messages("")})
    assert "no message that changes their state" in flash_error({"g": messages("2020-01-02 00:00:00\t50%")})


def test_the_command_writes_a_csv_that_availability_trace_reads_and_names_the_source_in_errors(tmp_path, capsys):
    source = tmp_path / "user_behavior.json"
    source.write_text(json.dumps(FLASH))
    out = tmp_path / "trace.csv"
    argv = ["trace", "import", str(source), "--format", "flash", "--clients", "2", "--horizon", "220"]
    assert main([*argv, "--out", str(out)]) == 0
    assert read_trace(out, 2) == {0: [(40.0, 80.0)], 1: [(190.0, 220.0)]}
    assert main([*argv[:-1], "30", "--out", str(tmp_path / "empty.csv")]) == 1
    assert f"{source}: its first 2 clients have no online period before --horizon 30" in capsys.readouterr().err
    source.write_text("{not json")
    assert main([*argv, "--out", str(tmp_path / "bad.csv")]) == 1
    assert not (tmp_path / "bad.csv").exists()
    assert f"asyncfl trace: error: {source}: not a FLASH trace: not JSON" in capsys.readouterr().err
    assert not [path.name for path in tmp_path.iterdir() if path.name.startswith(".")]  # no temporary left


def test_empty_fedscale_periods_are_left_out_and_counted(tmp_path, capsys):
    source = tmp_path / "client_behave_trace"
    source.write_bytes(pickle.dumps({1: {"active": [0, 5, 7], "inactive": [2, 5, 6], "finish_time": 10}}))
    argv = ["trace", "import", str(source), "--format", "fedscale", "--clients", "1", "--out", str(tmp_path / "t.csv")]
    assert main(argv) == 0
    assert "1 online periods of 1 clients" in (said := capsys.readouterr().out)
    assert "2 empty periods of the source left out" in said


def test_a_message_that_changes_nothing_neither_sets_nor_stretches_the_origin():
    """TN25: one battery-level message dated 214 days before the rest once moved every device's periods
    by 18,489,602 s; it says nothing of when a device was ready."""
    stray = {**FLASH, "a-device": messages("2019-06-02 00:00:00\t50%", *FLASH["a-device"]["messages"].splitlines())}
    assert flash_periods(json.dumps(stray).encode(), clients=2, horizon=None).periods == {
        0: [(40.0, 80.0)],
        1: [(190.0, 250.0)],
    }


@pytest.mark.parametrize(
    ("trace", "fmt", "fix"),
    [  # TI28: every FedScale period empty; TI54: no FLASH device ever ready; then one past --clients has one
        (
            pickle.dumps(
                {1: {"active": [5], "inactive": [5], "finish_time": 10}}
                | {2: {"active": [], "inactive": [], "finish_time": 10}}
            ),
            "fedscale",
            "none of its 2 clients has one: choose another trace",
        ),  # fmt: skip
        (
            json.dumps(
                {
                    "g": messages("2020-01-02 00:00:00\twifi", "2020-01-02 00:01:00\tscreen_lock"),
                    "h": messages("2020-01-02 00:00:00\tbattery_charged_on"),
                }
            ).encode(),
            "flash",
            "none of its 2 clients has one: choose another trace",
        ),  # fmt: skip
        (
            pickle.dumps({1: {"active": [5], "inactive": [5], "finish_time": 10}, 2: FEDSCALE[99]}),
            "fedscale",
            "raise --clients (the source lists 2)",
        ),  # fmt: skip
    ],
    ids=["fedscale-empty", "flash-never-ready", "a-later-client-has-one"],
)
def test_no_online_period_says_raise_clients_only_where_that_helps(tmp_path, trace, fmt, fix):
    source = tmp_path / "trace"
    source.write_bytes(trace)
    with pytest.raises(InputError, match=r"its first 1 clients have no online period; (?P<fix>.*)$") as caught:
        import_trace(source, fmt, 1, None)
    assert str(caught.value).endswith(fix)
