"""A run's settings: each refused in one line naming the key where it cannot work or would be ignored."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from asyncfl.settings.config import NEEDS, TrainConfig, load_config, make_config
from asyncfl.settings.errors import InputError
from asyncfl.settings.traces import read_trace
from asyncfl.sim.network import Links
from conftest import REPO


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"upload_fraction": 0.5}, "upload_fraction applies only with bandwidth_median or link_classes set"),
        ({"bandwidth_sigma": 1.0}, "bandwidth_sigma applies only with bandwidth_median set and"),
        (
            {"bandwidth_median": 5.0, "bandwidth_follows_speed": True, "bandwidth_sigma": 1.0},
            "bandwidth_sigma applies only with bandwidth_median set and bandwidth_follows_speed false",
        ),
        ({"bandwidth_follows_speed": True}, "bandwidth_follows_speed applies only with bandwidth_median set"),
        ({"online_mean": 30.0}, "online_mean applies only with availability: exponential, lognormal or diurnal"),
        ({"offline_mean": 30.0}, "offline_mean applies only with availability: exponential, lognormal or diurnal"),
        ({"availability": "exponential", "availability_sigma": 2.0}, "availability_sigma applies only with availab"),
        ({"slow_factor": 5.0}, "slow_factor applies only with slow_fraction > 0"),
        # the generated layer's finds: settings accepted where they change nothing
        ({"staleness": "constant", "staleness_a": 2.0}, "staleness_a applies only with staleness other than constant"),
        ({"staleness_b": 2.0}, "staleness_b applies only with staleness: hinge"),
        ({"local_epochs": 3, "patience": 5}, r"patience applies only with local_epochs > patience"),
        ({"algorithm": "sync", "partial_work": True}, "partial_work applies only with round_deadline set"),
        ({"speed_distribution": "constant", "speed_sigma": 1.0}, "speed_sigma applies only with speed_distribution"),
        ({"population": "edge", "speed_sigma": 1.0}, "speed_sigma applies only with speed_distribution: lognormal"),
        ({"latency_distribution": "constant", "latency_sigma": 0.1}, "latency_sigma applies only with latency_dis"),
        ({"jitter_distribution": "exponential", "jitter_sigma": 0.1}, "jitter_sigma applies only with jitter_distr"),
        # a shape without its scale: byte-identical to no jitter, yet recorded as half_normal
        ({"jitter_distribution": "half_normal"}, "jitter_distribution applies only with jitter_sigma > 0"),
        ({"population": "mobile", "availability": "always"}, "population mobile sets online_mean, which applies"),
        ({"seconds_per_dispatch": 1.0, "seconds_per_sample": 0.01}, "seconds_per_sample applies only with second"),
        ({"class_draw": "probability"}, "class_draw applies only with speed_classes, link_classes, download_sec"),
        ({"bandwidth_median": 5.0, "transfer_draws": "per_dispatch"}, "transfer_draws applies only with link_classes"),
        (
            {"link_classes": "1:20-100", "server_bandwidth": 100.0, "transfer_draws": "per_dispatch"},
            "transfer_draws applies only with .* and server_bandwidth null",
        ),
        ({"transfer_jitter_distribution": "exponential"}, "transfer_jitter_distribution applies only with .* link"),
        (
            {"bandwidth_median": 5.0, "server_bandwidth": 50.0, "transfer_jitter_sigma": 0.2},
            "transfer_jitter_sigma applies only with .* server_bandwidth null",
        ),
        (
            {"algorithm": "fedbuff", "arrivals": "poisson", "checkin_rate": 1.0, "redistribution_threshold": 2},
            "redistribution_threshold applies only with arrivals: closed",
        ),
    ],
)  # fmt: skip
def test_a_setting_that_applies_only_with_another_is_refused_without_it(settings, message):
    """Accepted, it would be ignored yet recorded in run.json: another identity for the same run."""
    with pytest.raises(InputError, match=message) as raised:
        make_config(settings)
    assert len(str(raised.value).splitlines()) == 1


def test_every_dependent_setting_is_accepted_where_it_applies():
    defaults = TrainConfig()
    where = {
        "min_report_fraction": {"algorithm": "sync", "round_deadline": 5.0},
        "partial_work": {"algorithm": "sync", "round_deadline": 5.0},
        "stale_updates": {"max_staleness": 3},
        "slow_factor": {"slow_fraction": 0.2},
        "bandwidth_sigma": {"bandwidth_median": 5.0},
        "upload_fraction": {"bandwidth_median": 5.0},
        "bandwidth_follows_speed": {"bandwidth_median": 5.0},
        "server_bandwidth": {"link_classes": "1:20-100"},
        "online_mean": {"availability": "exponential"},
        "offline_mean": {"availability": "lognormal"},
        "availability_sigma": {"availability": "lognormal"},
        "diurnal_swing": {"availability": "diurnal", "offline_mean": 200.0},
        "diurnal_spread": {"availability": "diurnal"},
        "speed_sigma": {"speed_distribution": "lognormal"},
        "latency_sigma": {"latency_distribution": "lognormal"},
        "jitter_sigma": {"jitter_distribution": "half_normal"},
        "jitter_distribution": {"jitter_sigma": 0.3},
        "server_optimizer_lr": {"server_optimizer": "adam"},
        "server_momentum": {"algorithm": "fedavgm"},  # FedAvg with the server's sgd, by its name
        "server_beta1": {"server_optimizer": "adagrad"},
        "server_beta2": {"algorithm": "fedyogi"},
        "server_tau": {"server_optimizer": "adam"},
        "seconds_per_sample": {},
        "class_draw": {"speed_classes": "0.25:1,0.75:2"},
        "transfer_draws": {"upload_seconds": "1:0.13-0.17"},
        "redistribution_threshold": {"algorithm": "fedbuff", "concurrency": 4},
        "transfer_jitter_sigma": {"bandwidth_median": 5.0},
        "transfer_jitter_distribution": {"upload_seconds": "1:0.2", "transfer_jitter_sigma": 0.3},
        "time_scale": {"clock": "real"},
        "client_workers": {"clock": "real"},
        "durations": {"clock": "real"},
        "patience": {"local_epochs": 10},
        "staleness_a": {"staleness": "inverse"},
        "staleness_b": {"staleness": "hinge"},
    }
    assert set(where) == set(NEEDS)
    other = {
        "stale_updates": "keep",
        "bandwidth_follows_speed": True,
        "partial_work": True,
        "min_report_fraction": 0.5,
        "server_bandwidth": 100.0,
        "server_momentum": 0.5,
        "server_beta1": 0.5,
        "server_beta2": 0.9,
        "server_optimizer_lr": 0.05,
        "jitter_sigma": 0.3,
        "jitter_distribution": "half_normal",
        "class_draw": "probability",
        "transfer_draws": "per_dispatch",
        "transfer_jitter_distribution": "half_normal",
        "durations": "measured",
        "patience": 5,
    }
    for key, context in where.items():
        value = other[key] if key in other else 2 * getattr(defaults, key) if key != "upload_fraction" else 0.5
        assert getattr(make_config({**context, key: value}), key) == value


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"bandwidth_median": 1e-300}, "bandwidth_median must be ≥ 1e-06, got 1e-300"),
        ({"bandwidth_median": 5e-324}, "bandwidth_median must be ≥ 1e-06"),
        ({"bandwidth_median": 1e-12, "upload_fraction": 1e-300}, "bandwidth_median must be ≥ 1e-06"),
        ({"availability": "exponential", "online_mean": 1e-300}, "online_mean must be ≥ 0.001"),
        ({"availability": "exponential", "online_mean": 1e-6, "offline_mean": 1e-6}, "online_mean must be ≥ 0.001"),
        ({"algorithm": "fedasync", "arrivals": "poisson", "checkin_rate": 1e6}, "checkin_rate must be ≤ 10000"),
        # an optimizer that cannot move (β1 = 1: its first moment stays 0) or never forgets (μ = 1)
        ({"server_optimizer": "adam", "server_beta1": 1.0}, "server_beta1 must be < 1, got 1.0"),
        ({"server_optimizer": "adagrad", "server_beta1": 1.0}, "server_beta1 must be < 1"),
        ({"algorithm": "fedyogi", "server_beta2": 1.0}, "server_beta2 must be < 1"),
        ({"algorithm": "fedavgm", "server_momentum": 1.0}, "server_momentum must be < 1"),
    ],
)
def test_values_that_would_stall_a_run_are_refused_with_the_key(settings, message):
    with pytest.raises(InputError, match=message):
        make_config(settings)


def test_links_slower_than_any_world_are_refused_as_the_run_starts():
    """Each value within its bounds, together a transfer of 7.6e11 virtual s: the clock would lose the
    precision to tell phases apart (1e-12 with upload_fraction 1e-300 overflowed, warned and spun)."""
    config = make_config({"bandwidth_median": 1e-6, "upload_fraction": 1e-6})
    with pytest.raises(InputError, match="upload of the 76000-byte model would take 7.6e\\+11 virtual s"):
        Links.draw(config, np.ones(3), 76000)
    assert Links.draw(make_config({"bandwidth_median": 1e-3}), np.ones(3), 76000) is not None


def test_a_relative_trace_path_is_resolved_where_it_was_written(tmp_path, monkeypatch):
    """In a YAML file, against the file's folder; on the command line, against the current folder; the
    run records the resolved path, which reads the same trace from anywhere."""
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "trace.csv").write_text("client,start,end\n0,0,9\n")
    (tmp_path / "cfg" / "run.yaml").write_text("availability: trace\navailability_trace: trace.csv\n")
    monkeypatch.chdir(tmp_path)
    from_file = load_config(Path("cfg/run.yaml"), {}, {})
    assert from_file.availability_trace == str(tmp_path / "cfg" / "trace.csv")
    settings = json.loads('{"availability": "trace", "availability_trace": "cfg/trace.csv"}')
    assert load_config(None, settings, {}).availability_trace == str(tmp_path / "cfg" / "trace.csv")
    assert os.path.isabs(str(from_file.availability_trace))


def test_a_trace_saved_with_a_byte_order_mark_is_read(tmp_path):
    """Excel's "CSV UTF-8" starts the file with a BOM, before the header."""
    trace = tmp_path / "trace.csv"
    trace.write_bytes("client,start,end\n0,0,1.5\n2,1,4\n".encode("utf-8-sig"))
    assert read_trace(trace, 3) == {0: [(0.0, 1.5)], 1: [], 2: [(1.0, 4.0)]}


def test_a_time_grid_too_fine_for_the_budget_is_refused_up_front():
    """1 ms over a long budget: millions of evaluations (once 17 min and 360 MB for 3 rounds)."""
    assert make_config({"eval_every_seconds": 0.01, "max_virtual_time": 1000.0}).eval_every_seconds == 0.01
    with pytest.raises(InputError, match=r"would score the model 1e\+06 times .* set eval_every_seconds ≥ 0.01"):
        make_config({"eval_every_seconds": 0.001, "max_virtual_time": 1000.0})


def test_ca2fl_and_fadas_weight_updates_as_their_papers_unless_a_run_names_a_staleness_function():
    """CA2FL's and FADAS's papers weight every update alike: their runs default to s(τ) = 1 (`constant`,
    recorded in run.json); the other asynchronous algorithms keep FedBuff's (1 + τ)^−0.5. A run that names
    its staleness function gets it, and config/claim.yaml names polynomial for all of its rows, so its
    CA2FL and FADAS runs are the runs they were."""
    from asyncfl.fl.staleness import staleness_function

    for algorithm, weight_at_3 in (("ca2fl", 1.0), ("fadas", 1.0), ("fedbuff", 0.5), ("afl", 0.5)):
        config = make_config({"algorithm": algorithm})
        assert staleness_function(config)(3) == weight_at_3, algorithm
    assert make_config({"algorithm": "ca2fl", "staleness": "polynomial"}).staleness == "polynomial"
    implied = r"staleness_a applies only with staleness other than constant \(algorithm ca2fl sets staleness: const"
    with pytest.raises(InputError, match=implied):  # the key written, and where the setting it needs came from
        make_config({"algorithm": "ca2fl", "staleness_a": 1.0})
    with pytest.raises(InputError, match=r"\(algorithm fedadam sets server_optimizer: adam\)"):
        make_config({"algorithm": "fedadam", "server_momentum": 0.5})
    assert make_config({"algorithm": "fadas", "trainer": "none"}).staleness == "constant"  # its own, not refused
    claim = yaml.safe_load((REPO / "config/claim.yaml").read_text())
    for experiment in claim["experiments"].values():
        for algorithm in {"ca2fl", "fadas"} & set(experiment["algorithms"]):
            assert make_config({**experiment["train"], "algorithm": algorithm}).staleness == "polynomial"
