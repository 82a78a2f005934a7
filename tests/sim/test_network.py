"""The clients' links: a dispatch downloads the global model, computes, and uploads the client's model,
each transfer the model's exact bits over the client's bandwidth; off by default."""

import csv
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from asyncfl.models import build_model
from asyncfl.sim.client_system import ClientSystem
from asyncfl.sim.engine import Simulation
from asyncfl.sim.network import Links, state_bytes
from asyncfl.spec.config import make_config
from asyncfl.spec.errors import InputError
from engine_cases import Recording, contiguous_partition, tiny_dataset

SIZES = [4, 8, 12, 8]
FIXED = dict(speed_distribution="constant", latency_distribution="constant", latency_median=0.5)
LINKS = dict(bandwidth_median=2.0, bandwidth_sigma=0.0, upload_fraction=0.5)


def rows(path: Path) -> list[dict]:
    return list(csv.DictReader(path.read_text().splitlines()))


def run(out: Path, fail_on_call: int | None = None, **settings) -> Simulation:
    config = make_config({"clients_per_round": 2, "rounds": 4, "local_epochs": 1, "batch_size": 4, **settings})
    return Simulation(config, tiny_dataset(sum(SIZES)), contiguous_partition(SIZES), out)


def test_three_phases_by_hand(tmp_path):
    """cnn on 1×8×8 with 4 classes: its state dict's bytes × 8 over 2 Mbit/s down and 1 Mbit/s up, plus
    I·n·seconds_per_sample at speed 1, plus the latency: every arrival is exactly that after its dispatch."""
    model = build_model("cnn", tiny_dataset(1).info, 0)
    bits = 8 * sum(p.numel() * 4 for p in model.state_dict().values())  # fp32 parameters, no buffers
    assert bits == 8 * state_bytes(model)
    run(tmp_path, **FIXED, **LINKS).run()
    events = rows(tmp_path / "events.csv")
    assert events and {"download_seconds", "compute_seconds", "upload_seconds"} <= set(events[0])
    for event in events:
        n = SIZES[int(event["client"])]
        down, up, compute = bits / 2e6, bits / 1e6, 1 * n * 0.001
        assert float(event["download_seconds"]) == down and float(event["upload_seconds"]) == up
        assert float(event["compute_seconds"]) == compute
        assert float(event["arrival_time"]) - float(event["dispatch_time"]) == pytest.approx(
            compute + 0.5 + down + up, rel=1e-12
        )


def test_links_off_leave_the_logs_as_they_were(tmp_path):
    """Off (the default), no phase columns; the links' other settings, which would change nothing but
    the run's recorded identity, are refused without them (tests/spec/test_config.py)."""
    run(tmp_path / "a").run()
    assert "download_seconds" not in (tmp_path / "a" / "events.csv").read_text()
    with pytest.raises(InputError, match="applies only with bandwidth_median set"):
        run(tmp_path / "b", upload_fraction=0.5, bandwidth_sigma=2.0)


def test_links_depend_on_the_seed_alone_and_can_follow_the_speed():
    """Algorithms of one seed see the same links (paired); slow devices get slow links on request."""
    speed = np.array([0.5, 1.0, 2.0])
    afl = Links.draw(make_config({"algorithm": "afl", "bandwidth_median": 10.0}), speed, 1000)
    sync = Links.draw(make_config({"algorithm": "sync", "bandwidth_median": 10.0}), speed, 1000)
    assert afl is not None and sync is not None and np.array_equal(afl.down, sync.down)
    assert np.allclose(afl.up, afl.down * 0.25)
    other = Links.draw(make_config({"bandwidth_median": 10.0, "seed": 1}), speed, 1000)
    assert other is not None and not np.array_equal(other.down, afl.down)
    follows = Links.draw(make_config({"bandwidth_median": 10.0, "bandwidth_follows_speed": True}), speed, 1000)
    assert follows is not None and np.array_equal(follows.down, 10e6 * speed)
    assert Links.draw(make_config({}), speed, 1000) is None


def test_the_learning_rate_delay_counts_the_transfers():
    """d_c (`lr_delay: duration`) is the whole dispatch, transfers included; `latency` the latency only."""
    config = make_config({**FIXED, **LINKS})
    system = ClientSystem.draw(config, 2, 1000)
    duration = system.duration(0, 8, 0)
    phases = system.phases(0, 8, 0)
    assert system.delay(0, duration) == duration == phases.total and phases.download > 0
    latency_only = dataclasses.replace(system, delay_is_latency=True)
    assert latency_only.delay(0, duration) == 0.5


def test_a_run_with_links_resumes_to_the_same_bytes(tmp_path):
    whole = run(tmp_path / "whole", **FIXED, **LINKS, checkpoint_every=1)
    whole.run()
    crashed = run(tmp_path / "resumed", **FIXED, **LINKS, checkpoint_every=1)
    crashed.context = dataclasses.replace(crashed.context, trainer=Recording(crashed.context.trainer, 3))
    with pytest.raises(RuntimeError, match="injected crash"):
        crashed.run()
    assert (tmp_path / "resumed" / "checkpoint.pt").exists()
    run(tmp_path / "resumed", **FIXED, **LINKS, checkpoint_every=1).run()
    for name in ("metrics.csv", "events.csv", "model.pt"):
        assert (tmp_path / "resumed" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
