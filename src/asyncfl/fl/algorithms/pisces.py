"""Pisces (Jiang, Wang, Li and Li, SoCC 2022, "Pisces: Efficient Federated Learning via Guided Asynchronous
Training"): a server that acts on a clock of steps, choosing which clients to start by the utility of their
data and pacing its aggregations by how long its running clients take.

As its authors' code runs it (SamuelGong/Pisces, commit 4ba4db87: `plato/servers/base.py`'s step loop,
`plato/servers/fedavg.py`'s aggregation, `plato/client_managers/sirius.py` with every example config's
`statistical_only: true`), every `pisces_step` virtual seconds, if an update is buffered (or before the
first start): the server chooses clients for its free slots among the idle ones not buffered, then its
pacer says whether to aggregate, then the chosen start (from the model after the aggregation).
- Choice: a binomial(free, ε) draw plans how many to explore among the clients never heard from; ε ← max(ε·d,
  ε_min); the rest exploit the heard-from clients of highest score u_c·(l̄_c + 1)^−e (u_c its utility,
  l̄_c the mean of its last five lags, 0 for none; ties broken by a shuffle); the explored are drawn at random.
  The draws are those of the authors' code: Python's `random` and numpy's legacy generator, each seeded
  from the run's seed, their states in the server's memory.
- Pacer: it aggregates when the time since the last aggregation (since the start while fewer than two were
  made, as theirs counts) reaches the largest last response time of the running clients (a client never
  heard from counts `pisces_unknown_latency`) over M; with no client running, at once.
- Aggregation of the buffer: θ ← θ + Σ_i (n_i/Σ_buffer n)·(lag_i + 1)^−e·(θ_i − θ), from the global model
  now, the factors not renormalised; lag_i the versions made since client i started.
- A client's utility at its report: √ℓ·n_c; its response time: its dispatch's duration.

Where this differs from the authors' code: ℓ is the client's mean training loss over its last local epoch
(theirs: an exponential moving average, α 0.01 seeded with the first batch, of its first epoch's batch
losses); a client's utility, response time and lags are the server's at the aggregation that takes its
update (theirs at its report; no choice in between can pick a buffered client, so nothing read differs);
response times are virtual durations (theirs wall time padded to a drawn latency, a client under 1 s counted
as never heard from); a report while an earlier one of the same client is buffered cannot happen (a
buffered client is not chosen); a step with nothing buffered and nothing running chooses (theirs never loses
a client; here a client going offline or failing would otherwise stall the run for ever). Not built: its
optional outlier detection (`robustness`), speed penalty (off in every config), bounded staleness and
threshold aggregation (ablations). s(τ) plays no part (docs/algorithms.md "Pisces").
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from asyncfl.fl.strategy import AsyncParameters, RemembersAcrossRounds, ServerClients, ServerMemory, Update
from asyncfl.settings.rules import NON_NEGATIVE, POSITIVE, UNIT_INTERVAL, Group, setting

if TYPE_CHECKING:
    import numpy as np

    from asyncfl.models import ModelState
    from asyncfl.settings.config import TrainConfig

LAGS_KEPT = 5  # a client's score discounts the mean of its last five lags (the authors' `multiple=5`)


@dataclass(frozen=True)
class PiscesParameters(AsyncParameters):
    """Attributes:
    concurrency: M, clients running at most, and the pacer's bound [J] (`AsyncParameters`).
    """

    pisces_step: float = setting(Group.SERVER, 5.0, lowest=POSITIVE, at_most=1e6)
    """virtual seconds between the server's steps, at each of which it chooses clients and asks its pacer
    (the authors' `seconds_per_step`)"""
    pisces_staleness_exponent: float = setting(Group.SERVER, 0.5, lowest=NON_NEGATIVE, at_most=100.0)
    """e: an update weighs n_i/Σn·(lag + 1)^−e, a client's score u·(l̄ + 1)^−e (the authors'
    `staleness_penalty_factor`)"""
    pisces_explore: float = setting(Group.SERVER, 0.9, lowest=UNIT_INTERVAL)
    """ε at the start: the chance of each free slot going to a client never heard from (the authors'
    `explore_factor`)"""
    pisces_explore_decay: float = setting(Group.SERVER, 0.98, lowest=UNIT_INTERVAL)
    """d: ε ← max(ε·d, ε_min) at each choice (the authors' `exploration_decaying_factor`)"""
    pisces_explore_floor: float = setting(Group.SERVER, 0.3, lowest=NON_NEGATIVE, at_most=1.0)
    """ε_min (the authors' `min_explore_factor`)"""
    pisces_unknown_latency: float = setting(Group.SERVER, 180.0, lowest=POSITIVE, at_most=1e9)
    """the response time, in virtual seconds, the pacer gives a running client never heard from (the
    authors' `MAX`, their slowest latency, 180 s)"""


class Pisces(RemembersAcrossRounds):
    """Steps that choose clients by utility and pace aggregations of the buffered updates (`PiscesParameters`)."""

    convex = False  # the factors are not renormalised: a step shorter than the updates' mean
    steps_the_server = True

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: PiscesParameters = PiscesParameters.of(config)
        self.seed = config.seed

    @property
    def initial_clients(self) -> int:
        return 0  # the first step chooses them

    @property
    def most_in_flight(self) -> int:
        return self.parameters.concurrency

    def clients_after_arrival(self, aggregated: bool) -> int:
        return 0  # a freed slot waits for the next step

    def clients_after_loss(self, in_round: int) -> int:
        return 0

    @property
    def step_seconds(self) -> float:
        return self.parameters.pisces_step

    def initial_memory(self, sizes: np.ndarray) -> ServerMemory:
        """The two generators of the authors' draws, seeded from the run's seed; ε; nothing heard yet."""
        import numpy as np  # loaded here, not with the config

        python = random.Random(self.seed)
        legacy = np.random.RandomState(self.seed)
        return {
            "random": encoded_python(python.getstate()),
            "numpy": encoded_numpy(legacy.get_state()),
            "explore": self.parameters.pisces_explore,
            "chosen_once": False,
            "aggregations": 0,
            "last_aggregation": 0.0,
            "utility": {},
            "explored": [],
            "lags": {},
            "latency": {},
        }

    def step(self, now: float, clients: ServerClients, memory: ServerMemory) -> tuple[list[int], bool, ServerMemory]:
        """One step: the clients to start (after the aggregation, if any), whether to aggregate the buffer,
        and the memory after."""
        buffered, running = clients.buffered, clients.running
        if not buffered and running and memory["chosen_once"]:
            return [], False, memory
        chosen, memory = self.choose(clients, memory)
        if not buffered:
            return chosen, False, memory
        aggregate = self.paces(now, running, memory)
        if aggregate:
            memory = {**memory, "aggregations": memory["aggregations"] + 1, "last_aggregation": now}
        return chosen, aggregate, memory

    def choose(self, clients: ServerClients, memory: ServerMemory) -> tuple[list[int], ServerMemory]:
        """`sirius.py`'s `choose_clients` for the free slots among the idle clients, its draws in its order
        (the binomial, the shuffle, the sample) and its sets built as it builds them, on its numbering from 1,
        so that their order, hence what the draws pick, is its."""
        import numpy as np  # loaded here, not with the config

        python, legacy = random.Random(), np.random.RandomState()
        python.setstate(decoded_python(memory["random"]))
        legacy.set_state(decoded_numpy(memory["numpy"]))
        available = [client + 1 for client in clients.idle]
        heard = [client + 1 for client in [*memory["explored"], *clients.buffered]]  # theirs: heard at the report
        unexplored = list((set(range(1, clients.total + 1)) - set(heard)).intersection(set(available)))
        explored = list(set(available) - set(available).intersection(set(unexplored)))
        count = self.parameters.concurrency - len(clients.running)  # the free slots
        planned = min(len(unexplored), int(legacy.binomial(count, memory["explore"], 1)[0]))
        explore = max(memory["explore"] * self.parameters.pisces_explore_decay, self.parameters.pisces_explore_floor)
        exploit_count = min(len(explored), count - planned)
        explore_count = min(len(unexplored), count - exploit_count)
        exponent = self.parameters.pisces_staleness_exponent
        scores = {number: score(number - 1, memory, exponent) for number in range(1, clients.total + 1)}
        keys = [number for number in scores if number in explored]
        python.shuffle(keys)
        exploit = sorted(keys, key=lambda number: scores[number], reverse=True)[:exploit_count]
        chosen = [number - 1 for number in exploit + python.sample(unexplored, explore_count)]
        states = {"random": encoded_python(python.getstate()), "numpy": encoded_numpy(legacy.get_state())}
        return chosen, {**memory, **states, "explore": explore, "chosen_once": memory["chosen_once"] or bool(chosen)}

    def paces(self, now: float, running: list[int], memory: ServerMemory) -> bool:
        """The pacer (`pacer_approves`) with this run's M and response time for the never heard from."""
        unknown, bound = self.parameters.pisces_unknown_latency, self.parameters.concurrency
        return pacer_approves(now, running, memory, unknown, bound)

    def aggregate_with_memory(
        self, global_model: ModelState, updates: list[Update], memory: ServerMemory, clients: int
    ) -> tuple[ModelState, list[float], ServerMemory]:
        """θ + Σ_i (n_i/Σn)·(lag_i + 1)^−e·(θ_i − θ); each reporting client's utility, response time and lags."""
        from asyncfl.fl.aggregation import linear_combination  # torch: loaded here, not with the config

        total = sum(update.size for update in updates)
        exponent = self.parameters.pisces_staleness_exponent
        weights = [update.size / total * (1.0 / math.pow(update.staleness + 1, exponent)) for update in updates]
        terms = [(1.0 - sum(weights), global_model), *zip(weights, (update.state for update in updates), strict=True)]
        utility, latency, lags = dict(memory["utility"]), dict(memory["latency"]), dict(memory["lags"])
        explored = list(memory["explored"])
        for update in updates:
            utility[update.client] = math.sqrt(max(update.train_loss, 0.0)) * update.size
            latency[update.client] = update.duration
            lags[update.client] = [*lags.get(update.client, []), update.staleness][-LAGS_KEPT:]
            if update.client not in explored:
                explored.append(update.client)
        remembered = {"utility": utility, "latency": latency, "lags": lags, "explored": explored}
        return linear_combination(terms), weights, {**memory, **remembered}


def score(client: int, memory: ServerMemory, exponent: float) -> float:
    """u_c·(l̄_c + 1)^−e: the client's utility discounted by the mean of its last lags."""
    lags = memory["lags"].get(client, [])
    mean = sum(lags) / len(lags) if lags else 0
    return memory["utility"].get(client, 0.0) * (1.0 / math.pow(mean + 1, exponent))


def pacer_approves(now: float, running: list[int], memory: ServerMemory, unknown: float, bound: int) -> bool:
    """The time since the last aggregation reaches the running clients' largest last response time over M
    (`unknown` for one never heard from; the start counts while fewer than two aggregations were made, as the
    authors' `len(agg_time) > 1`); none running: at once."""
    if not running:
        return True
    slowest = max(memory["latency"].get(client, unknown) for client in running)
    since = memory["last_aggregation"] if memory["aggregations"] > 1 else 0.0
    return now - since >= slowest / bound


def encoded_python(state: tuple) -> list[Any]:
    """Python's generator state as plain lists (a checkpoint holds plain data)."""
    version, internal, gauss = state
    return [version, list(internal), gauss]


def decoded_python(state: list[Any]) -> tuple:
    return (state[0], tuple(state[1]), state[2])


def encoded_numpy(state: Any) -> list[Any]:
    """numpy's legacy generator state as plain lists."""
    name, keys, position, has_gauss, cached = state
    return [name, [int(key) for key in keys], int(position), int(has_gauss), float(cached)]


def decoded_numpy(state: list[Any]) -> tuple:
    import numpy as np  # loaded here, not with the config

    return (state[0], np.array(state[1], dtype=np.uint32), state[2], state[3], state[4])
