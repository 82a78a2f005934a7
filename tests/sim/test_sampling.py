"""Drawing the clients to dispatch from the complement of the few that may not go: the same clients
as a draw from the array of idle ones where every client is online, a uniform draw from the online
idle ones otherwise, and never a client that is excluded or offline."""

import numpy as np
import pytest
from scipy import stats

from asyncfl.sim.sampling import complement_at, draw_idle


@pytest.mark.parametrize("clients, excluded", [(10, 0), (10, 9), (1000, 37), (50_000, 150)])
def test_the_idle_client_of_each_rank_is_the_arrays(clients, excluded):
    rng = np.random.default_rng(clients)
    busy = np.sort(rng.choice(clients, excluded, replace=False))
    idle = np.setdiff1d(np.arange(clients), busy)
    assert complement_at(busy, np.arange(len(idle))).tolist() == idle.tolist()


@pytest.mark.parametrize("clients, count", [(12, 5), (12, 20), (9_000, 100), (20_000, 100), (20_000, 1_000)])
def test_every_client_online_draws_what_a_draw_from_the_idle_array_draws(clients, count):
    """numpy's draw without replacement from an array depends on its length only (Floyd's algorithm or
    a partial shuffle, chosen by the sizes): the runs from before this sampler keep their bytes."""
    busy = np.sort(np.random.default_rng(1).choice(clients, 7, replace=False))
    idle = np.setdiff1d(np.arange(clients), busy)
    mine, reference = np.random.default_rng(2), np.random.default_rng(2)
    drawn = draw_idle(mine, clients, busy, count)
    expected = reference.choice(idle, size=min(count, len(idle)), replace=False)
    assert drawn.tolist() == expected.tolist()
    assert mine.bit_generator.state == reference.bit_generator.state  # and the stream is where it was


def test_nothing_wanted_or_nobody_idle_draws_nothing():
    rng = np.random.default_rng(3)
    before = rng.bit_generator.state
    assert draw_idle(rng, 5, np.arange(5), 3).size == 0
    assert draw_idle(rng, 5, np.zeros(0, dtype=np.int64), 0).size == 0
    assert rng.bit_generator.state == before


def test_with_clients_offline_the_draw_is_uniform_over_the_online_idle_ones():
    """30 clients, 5 in flight, 10 of the others offline: 4 drawn at a time, 20,000 times. Each is
    distinct, idle and online; every online idle client is drawn equally often (χ² test), and when
    fewer are online than wanted, all of them are."""
    clients, busy = 30, np.array([1, 4, 9, 16, 25])
    offline = {0, 2, 3, 5, 7, 11, 13, 17, 19, 23}
    online_idle = sorted(set(range(clients)) - set(busy.tolist()) - offline)

    def online(drawn):
        return drawn[[int(c) not in offline for c in drawn]]

    rng, counts = np.random.default_rng(4), np.zeros(clients)
    for _ in range(20_000):
        drawn = draw_idle(rng, clients, busy, 4, online)
        assert len(drawn) == 4 == len(set(drawn.tolist())) and set(drawn.tolist()) <= set(online_idle)
        counts[drawn] += 1
    assert stats.chisquare(counts[online_idle]).pvalue > 1e-3
    everyone = draw_idle(rng, clients, busy, 100, online)
    assert sorted(everyone.tolist()) == online_idle


def test_a_draw_asks_about_few_clients_when_most_are_online():
    """The point of the sampler: with 10^6 clients, three quarters online, drawing 100 asks about
    roughly 100 / 0.75 of them, not all."""
    asked: list[int] = []

    def online(drawn):
        asked.extend(drawn.tolist())
        return drawn[drawn % 4 != 0]

    drawn = draw_idle(np.random.default_rng(5), 1_000_000, np.arange(0, 300, 3), 100, online)
    assert len(drawn) == 100 and not np.any(drawn % 4 == 0)
    assert len(asked) == len(set(asked)) < 400


def test_a_run_of_a_hundred_thousand_clients_asks_about_few_of_them(tmp_path):
    """The whole engine with every part of the clients' world on (the bench's `WORLD`), 100,000 clients,
    10 rounds of J = M = 100: the clients whose availability was drawn are about those dispatched
    (1,000 and the replacements of lost ones) over their online share, not all 100,000."""
    from asyncfl.bench.synthetic import WORLD, engine_data
    from asyncfl.settings.config import make_config
    from asyncfl.sim.engine import Simulation

    dataset, partition = engine_data(100_000)
    settings = {**WORLD, "clients_per_round": 100, "rounds": 10, "local_epochs": 1, "trainer": "none"}
    simulation = Simulation(make_config(settings), dataset, partition, tmp_path)
    simulation.run()
    availability = simulation.context.world.availability
    assert availability is not None and simulation.state.version == 10
    assert simulation.state.dispatched < len(availability.windows) < 3 * simulation.state.dispatched
