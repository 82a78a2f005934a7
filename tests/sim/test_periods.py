"""Each client's periods from its own stream, drawn lazily: the numbers of one generator drawing them in
order, whichever clients are asked about when; only the clients asked about cost anything, and only
their chunk around the clock."""

import numpy as np
import pytest

from asyncfl.settings import random_streams
from asyncfl.settings.config import make_config
from asyncfl.sim.availability import Availability
from asyncfl.sim.periods import CHUNK, ClientStreams

PERIODS = {"availability": "exponential", "online_mean": 2.0, "offline_mean": 1.0, "seed": 6}


def reference_timeline(seed: int, client: int, chunks: int) -> tuple[bool, list[float]]:
    """The client's first state and flips as one generator draws them, chunk by chunk, with nothing kept
    between clients or questions."""
    rng = np.random.default_rng([seed, random_streams.AVAILABILITY, client])
    starts_online = bool(rng.random() < 2.0 / 3.0)
    flips, last = [], 0.0
    for _ in range(chunks):
        periods = rng.exponential(1.0, (CHUNK, 2)) * np.array([2.0, 1.0])
        periods = (periods if starts_online else periods[:, ::-1]).ravel()
        chunk = last + np.cumsum(periods)
        flips += chunk.tolist()
        last = float(chunk[-1])
    return starts_online, flips


def test_a_saved_stream_goes_on_as_the_open_generator_would():
    streams, rng = ClientStreams(3), np.random.default_rng([3, random_streams.AVAILABILITY, 4])
    opened = streams.opened(4)
    assert opened.random() == rng.random()
    streams.save(4, opened)
    streams.opened(1).normal(size=3)  # another client's draws move nothing of client 4's
    assert streams.resumed(4).exponential(size=5).tolist() == rng.exponential(size=5).tolist()


def test_clients_asked_about_in_any_order_see_the_reference_periods():
    """Six clients asked about at shuffled clients and increasing times, interleaved: every answer is
    the reference timeline's, and each client keeps one chunk (2·CHUNK flips and its start)."""
    availability = Availability.of(make_config(PERIODS), 6)
    assert availability is not None
    timelines = {c: reference_timeline(6, c, 40) for c in range(6)}
    rng = np.random.default_rng(0)
    for t in np.sort(rng.uniform(0.0, 1000.0, 300)):
        clients = rng.permutation(6)[: rng.integers(1, 7)]
        expected = []
        for client in clients:
            starts_online, flips = timelines[int(client)]
            expected.append(starts_online != bool(np.searchsorted(flips, t, side="right") % 2))
        assert availability.online_mask(clients, t).tolist() == expected, t
    assert all(len(window) == 2 * CHUNK + 1 for window in availability.windows.values())


def test_a_question_about_the_past_draws_the_client_again_from_its_start():
    availability = Availability.of(make_config(PERIODS), 3)
    assert availability is not None
    starts_online, flips = reference_timeline(6, 2, 40)
    late = availability.online_until(2, 900.0)
    assert late == flips[int(np.searchsorted(flips, 900.0, side="right"))]
    assert availability.is_online(2, 0.5) == (starts_online != bool(np.searchsorted(flips, 0.5, side="right") % 2))
    assert availability.flips_until(2, 200.0) == (starts_online, flips[: len(availability.flips_until(2, 200.0)[1])])
    assert availability.flips_until(2, 200.0)[1][-1] > 200.0


@pytest.mark.parametrize("model", ["exponential", "lognormal", "diurnal"])
def test_only_the_clients_asked_about_are_drawn(model):
    settings = {**PERIODS, "availability": model, "online_mean": 1800.0, "offline_mean": 5400.0}
    availability = Availability.of(make_config(settings), 100_000)
    assert availability is not None
    asked = np.array([5, 70_000, 99_999])
    availability.online_mask(asked, 10.0)
    availability.online_mask(asked[:1], 1e6)
    assert sorted(availability.windows) == asked.tolist()
    assert (availability.starts_online >= 0).sum() == 3
