"""The clients' links: a dispatch downloads the global model, computes, and uploads the client's model,
each transfer the model's exact bits over the client's bandwidth; off by default."""

import csv
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from asyncfl.models import build_model
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.sim.client_system import ClientSystem
from asyncfl.sim.engine import Simulation
from asyncfl.sim.network import Links, state_bytes
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
    the run's recorded identity, are refused without them (tests/settings/test_config.py)."""
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


TIMED = dict(FIXED, download_seconds="1:0.1", upload_seconds="1:0.13-0.17,1:0.23-0.27")


def test_transfer_times_of_their_own_ignore_the_model_and_stay_the_clients_per_client():
    system = ClientSystem.draw(make_config(TIMED), 1000, model_bytes=10**9)
    downloads = {system.phases(c, 5, i).download for c in range(1000) for i in range(3)}
    assert downloads == {0.1}
    uploads = np.array([system.phases(c, 5, 0).upload for c in range(1000)])
    assert np.all(((uploads >= 0.13) & (uploads <= 0.17)) | ((uploads >= 0.23) & (uploads <= 0.27)))
    assert abs(np.mean(uploads < 0.2) - 0.5) < 1e-9  # shares: exactly half of the clients in each class
    assert all(system.phases(c, 5, 7).upload == uploads[c] for c in range(1000))  # drawn once per client


def test_per_dispatch_draws_stay_in_the_clients_class_and_depend_on_the_dispatch_alone():
    config = make_config({**TIMED, "transfer_draws": "per_dispatch"})
    system, again = ClientSystem.draw(config, 50), ClientSystem.draw(config, 50)
    for client in range(50):
        uploads = [system.phases(client, 5, index).upload for index in range(40)]
        slow = system.phases(client, 5, 0).upload > 0.2
        low, high = (0.23, 0.27) if slow else (0.13, 0.17)
        assert all(low <= upload <= high for upload in uploads) and len(set(uploads)) == 40
        assert uploads == [again.phases(client, 5, index).upload for index in range(40)]
    spread = [system.phases(0, 5, index).upload for index in range(2000)]  # uniform in its class: its mean
    assert np.mean(spread) == pytest.approx(0.25 if spread[0] > 0.2 else 0.15, abs=2e-3)


def test_per_dispatch_link_classes_draw_each_dispatchs_bandwidth_in_its_class():
    config = make_config({**FIXED, "link_classes": "1:20-100", "transfer_draws": "per_dispatch"})
    system = ClientSystem.draw(config, 4, model_bytes=10**6)
    downloads = [system.phases(0, 5, index).download for index in range(200)]
    assert min(downloads) >= 8e6 / 100e6 and max(downloads) <= 8e6 / 20e6 and len(set(downloads)) == 200
    assert all(system.phases(0, 5, i).upload == pytest.approx(downloads[i] / 0.25) for i in range(200))


def test_events_log_each_dispatchs_own_transfer_times(tmp_path):
    simulation = run(tmp_path / "run", **TIMED, transfer_draws="per_dispatch", jitter_distribution="exponential")
    simulation.run()
    logged = rows(tmp_path / "run" / "events.csv")
    assert {row["download_seconds"] for row in logged} == {"0.1"}
    uploads = [float(row["upload_seconds"]) for row in logged]
    assert len(set(uploads)) == len(uploads) and all(0.13 <= u <= 0.27 for u in uploads)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"upload_seconds": "1:-0.02-0.1"}, "is not SHARE:VALUE or SHARE:LOW-HIGH"),
        ({"upload_seconds": "1:0.17-0.13"}, "low ≤ high"),
        ({"download_seconds": "1:0.1", "bandwidth_median": 5.0}, "download_seconds gives the transfers' times and ban"),
        ({"upload_seconds": "1:0.1", "server_bandwidth": 5.0}, "server_bandwidth applies only with bandwidth_median"),
        ({"upload_seconds": "1:0.1", "upload_fraction": 0.5}, "upload_fraction applies only with bandwidth_median"),
    ],
)  # fmt: skip
def test_bad_transfer_times_are_one_line(settings, message):
    with pytest.raises(InputError, match=message) as raised:
        make_config(settings)
    assert len(str(raised.value).splitlines()) == 1


@pytest.mark.parametrize(
    ("shape", "sigma", "centre"),
    [("exponential", 0.0, np.mean), ("lognormal", 0.3, np.median), ("half_normal", 0.2, np.min)],
)
def test_transfer_jitter_draws_each_dispatchs_transfers_around_the_clients_own(shape, sigma, centre):
    """Each direction its own factor per dispatch, in the compute jitter's shapes: the mean of the
    exponential, the median of the lognormal, the least of the half-normal is the client's own time."""
    jitter = {"transfer_jitter_distribution": shape, "transfer_jitter_sigma": sigma}
    system = ClientSystem.draw(
        make_config({**FIXED, "download_seconds": "1:0.1", "upload_seconds": "1:0.2", **jitter}), 2
    )
    phases = [system.phases(1, 5, index) for index in range(4000)]
    downloads, uploads = np.array([p.download for p in phases]), np.array([p.upload for p in phases])
    assert centre(downloads) == pytest.approx(0.1, rel=0.06) and centre(uploads) == pytest.approx(0.2, rel=0.06)
    assert not np.allclose(downloads / 0.1, uploads / 0.2)  # each direction draws its own factor
    assert [p.upload for p in phases[:50]] == [system.phases(1, 5, index).upload for index in range(50)]
