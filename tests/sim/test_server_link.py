"""The server's link shared by every dispatch's transfers (`server_bandwidth`): transfers booked when their
dispatch is made add up to the link's capacity, never more; each arrival stays known at its dispatch."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from test_network import FIXED, rows

from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.sim.engine import Simulation
from asyncfl.sim.network import Links
from asyncfl.sim.server_link import LinkBookings, ServerLink
from engine_cases import Recording, contiguous_partition, tiny_dataset

S, B = 8e6, 1e6  # bits of one transfer, bits/s of the server


def test_n_transfers_ready_at_once_end_at_n_s_over_b():
    """Clients faster than the server: the k-th booked ends at k·S/B, the last at n·S/B (the same as
    processor sharing's n·S/B for all of them); the link is full until then and free after."""
    bookings = LinkBookings()
    ends = [bookings.book(B, 0.0, S, 100 * B) for _ in range(5)]
    assert ends == [k * S / B for k in range(1, 6)]
    assert bookings.peak() == B and bookings.used[-1] == 0.0


def test_a_client_far_slower_than_the_server_takes_its_own_rate():
    """A client link 1e12 × below the server's (both allowed values): it transfers at its own rate
    (once ran past the last booking: IndexError), twice on a link another such client shares."""
    bookings = LinkBookings()
    slow = B * 1e-12
    assert bookings.book(B, 0.0, S, slow) == pytest.approx(S / slow)
    assert bookings.book(B, 0.0, S, slow) == pytest.approx(S / slow)
    assert bookings.peak() == pytest.approx(2 * slow)


def test_slow_clients_share_the_link_without_slowing_each_other():
    """Two clients each at B/2: both whole at once; a third finds no room until they end."""
    bookings = LinkBookings()
    assert bookings.book(B, 0.0, S, B / 2) == bookings.book(B, 0.0, S, B / 2) == 2 * S / B
    assert bookings.book(B, 1.0, S, B / 2) == 2 * S / B + 2 * S / B


def test_a_later_booking_takes_what_is_left_and_never_slows_an_earlier_one():
    bookings = LinkBookings()
    first = bookings.book(B, 0.0, S, 0.75 * B)  # 0.75 B from 0
    later = bookings.book(B, 0.0, S, B)  # 0.25 B while the first runs, then all of B
    sent_meanwhile = 0.25 * B * first
    assert first == S / (0.75 * B)
    assert later == pytest.approx(first + (S - sent_meanwhile) / B, rel=1e-15)


def test_random_bookings_never_exceed_the_capacity_and_carry_exactly_their_bits():
    rng = np.random.default_rng(0)
    bookings, total = LinkBookings(), 0.0
    for _ in range(300):
        bits, rate, ready = rng.uniform(1e5, 1e7), rng.uniform(1e5, 3e6), rng.uniform(0.0, 1000.0)
        end = bookings.book(B, ready, bits, rate)
        assert end >= ready + bits / min(rate, B) * (1 - 1e-12)
        assert bookings.peak() <= B * (1 + 1e-9) and bookings.used[-1] == 0.0
        total += bits
    carried = sum(u * (b - a) for a, b, u in zip(bookings.times, bookings.times[1:], bookings.used, strict=False))
    assert carried == pytest.approx(total, rel=1e-9)


def test_forgetting_the_past_changes_no_future_booking():
    one, two = LinkBookings(), LinkBookings()
    for bookings in (one, two):
        for ready in (0.0, 3.0, 5.0):
            bookings.book(B, ready, S, 0.6 * B)
    two.forget_before(9.0)
    assert one.book(B, 9.0, S, B) == two.book(B, 9.0, S, B)


def run(out: Path, crash_on_call: int | None = None, **settings) -> Simulation:
    """Four equal clients (8 samples, speed 1, 100 s of compute), links 1,000× the server's: the server's
    link is the bottleneck."""
    config = make_config(
        {
            "algorithm": "sync",
            "clients_per_round": 4,
            "rounds": 3,
            "local_epochs": 1,
            "batch_size": 4,
            "seconds_per_sample": 12.5,
            **FIXED,
            "bandwidth_median": 1000.0,
            "bandwidth_sigma": 0.0,
            "upload_fraction": 1.0,
            **settings,
        }
    )
    simulation = Simulation(config, tiny_dataset(32), contiguous_partition([8, 8, 8, 8]), out)
    if crash_on_call is not None:
        simulation.context = dataclasses.replace(
            simulation.context, trainer=Recording(simulation.context.trainer, crash_on_call)
        )
    return simulation


def test_a_round_of_four_downloads_on_one_link_takes_four_times_as_long(tmp_path):
    """The round's four downloads of the model over a server link of 1 Mbit/s end one model's time apart;
    each upload, ready 100 s later, has the link to itself; every arrival is its dispatch + its phases."""
    simulation = run(tmp_path, server_bandwidth=1.0)
    simulation.run()
    bits = simulation.context.system.links.model_bits
    events = rows(tmp_path / "events.csv")
    first_round = [e for e in events if e["round"] == "1"]
    downloads = sorted(float(e["download_seconds"]) for e in first_round)
    assert downloads == pytest.approx([k * bits / 1e6 for k in (1, 2, 3, 4)], rel=1e-12)
    assert all(float(e["upload_seconds"]) == pytest.approx(bits / 1e6, rel=1e-12) for e in events)
    unshared = run(tmp_path / "unshared")
    unshared.run()
    assert all(float(e["download_seconds"]) == bits / 1e9 for e in rows(tmp_path / "unshared" / "events.csv"))


def test_a_run_on_a_shared_link_resumes_to_the_same_bytes(tmp_path):
    run(tmp_path / "whole", server_bandwidth=1.0, checkpoint_every=1).run()
    with pytest.raises(RuntimeError, match="injected crash"):
        run(tmp_path / "resumed", crash_on_call=2, server_bandwidth=1.0, checkpoint_every=1).run()
    assert (tmp_path / "resumed" / "checkpoint.pt").exists()
    run(tmp_path / "resumed", server_bandwidth=1.0, checkpoint_every=1).run()
    for name in ("metrics.csv", "events.csv", "model.pt"):
        assert (tmp_path / "resumed" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name


def test_the_self_check_stops_a_transfer_faster_than_its_link(tmp_path, monkeypatch):
    """Break the booking (every transfer takes half its time): the run stops at the first arrival."""
    book = LinkBookings.book

    def twice_as_fast(self, capacity, ready, bits, rate):
        return ready + (book(self, capacity, ready, bits, rate) - ready) / 2

    monkeypatch.setattr(LinkBookings, "book", twice_as_fast)
    with pytest.raises(InputError, match="no transfer faster than its link alone allows"):
        run(tmp_path, server_bandwidth=1.0).run()


def test_settings_the_shared_link_refuses():
    with pytest.raises(InputError, match="server_bandwidth applies only with bandwidth_median or link_classes"):
        make_config({"server_bandwidth": 10.0})
    with pytest.raises(InputError, match="partial_work with server_bandwidth is not modelled"):
        make_config({"bandwidth_median": 5.0, "server_bandwidth": 10.0, "round_deadline": 5.0, "partial_work": True})
    links = Links(np.array([8.0]), np.array([8.0]), 8 * 10**9)
    with pytest.raises(InputError, match="raise server_bandwidth"):
        ServerLink.of(1e-6, links)


def test_the_self_check_stops_bookings_over_the_capacity(tmp_path, monkeypatch):
    """Break the booking (each transfer blind to the others, so four downloads run at once at the
    server's whole rate): the run stops at the second dispatch."""
    monkeypatch.setattr(LinkBookings, "rate_at", lambda self, index: 0.0)
    with pytest.raises(InputError, match="the server link's booked rate ≤ its capacity"):
        run(tmp_path, server_bandwidth=1.0).run()
