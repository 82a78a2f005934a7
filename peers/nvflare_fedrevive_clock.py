"""NVIDIA NVFlare's FedRevive scheduler without training: its logical clock, re-expressed (docs/world.md
"A published simulator's setup").

NVFlare's `research/fedrevive` (arXiv 2511.00655) runs its (K, B, O) scheduler inside a Collab server
that trains CIFAR-10 clients; the numbers it publishes (model versions by the time budget) depend only
on its event loop: `server.py`'s `FedReviveServer._dispatch_open_slots`, `_wait_for_next_event` and
`_process_outcome`, and `data.py`'s `_make_runtime_profiles` (NVIDIA/NVFlare, research/fedrevive at
commit 0c1d417a). That loop needs a Collab runtime to run, so it is re-expressed here on its own, no
training and no model: the same draws, from the same NumPy streams, in the same order, so a seed gives
the counts NVFlare's loop gives it:

- the profiles, from the global NumPy stream seeded with `setup_seed`: per logical client, in client
  order, one uniform draw each for its training mean, its download time and its upload mean, each
  picking a class by cumulative probability;
- the run, from `RandomState(run_seed)`: a dispatch of k assignments draws k of the idle logical clients
  (a list kept in client order) without replacement; each assignment's training time is drawn
  (exponential of its client's mean) when its download ends, its upload time (uniform within the
  half-width of its client's mean, floored at 0) when its training ends;
- events in a binary heap ordered by finish time alone (ties in the heap's own order); a client is idle
  again when its training ends, a slot of K opens when its upload is taken; the server refills the open
  slots (all of them, at most the idle clients) when at least O are open, after each upload; B uploads
  make a version;
- the budget: the loop stops at the first download or training end at or past `max_time` (an upload
  event past it is still taken, and can still make a version) — `versions_before` counts those made
  before the budget, what asyncfl's metrics.csv gives for `virtual_time < max_time`.

    python peers/nvflare_fedrevive_clock.py --buffer 2 --open 1 --seeds 10
"""

import argparse
import heapq
import json
from dataclasses import dataclass, field

import numpy as np

# data.py's DELAY_SCHEDULES: (probability, value) classes per phase, and the upload's half-width
SCHEDULES = {
    "default": {
        "train": ((0.25, 1.0), (0.5, 1.3), (0.25, 1.6)),
        "download": ((1.0, 0.1),),
        "upload": ((0.5, 0.15), (0.5, 0.25)),
        "upload_half_width": 0.02,
    },
    "shifted": {
        "train": ((1.0, 0.1),),
        "download": ((1.0, 0.02),),
        "upload": ((0.5, 0.05), (0.5, 0.10)),
        "upload_half_width": 0.01,
    },
}


def chosen_class(classes: tuple[tuple[float, float], ...]) -> float:
    """One class's value by cumulative probability, from the global NumPy stream (one draw)."""
    draw, cumulative = np.random.random(), 0.0
    total = sum(probability for probability, _ in classes)
    for probability, value in classes:
        cumulative += probability / total
        if draw <= cumulative:
            return float(value)
    return float(classes[-1][1])


def profiles(clients: int, schedule: str, setup_seed: int) -> list[tuple[float, float, float]]:
    """Per logical client, its (training mean, download time, upload mean), drawn as data.py draws them."""
    np.random.seed(setup_seed)
    phases = SCHEDULES[schedule]
    return [tuple(chosen_class(phases[phase]) for phase in ("train", "download", "upload")) for _ in range(clients)]


@dataclass(order=True)
class Event:
    """A phase's end, ordered by its time alone (as NVFlare's `_SimEvent.__lt__`)."""

    time: float
    phase: str = field(compare=False)
    assignment: int = field(compare=False)


@dataclass
class Clock:
    """One run of the scheduler. `versions` and `staleness` are what it made."""

    clients: int
    slots: int  # K
    buffer: int  # B
    open_needed: int  # O
    max_time: float
    schedule: str
    setup_seed: int
    run_seed: int
    versions: int = 0
    versions_before: int = 0  # made at a time < max_time
    staleness: list[int] = field(default_factory=list)

    def run(self) -> "Clock":
        profile = profiles(self.clients, self.schedule, self.setup_seed)
        half_width = SCHEDULES[self.schedule]["upload_half_width"]
        rng = np.random.RandomState(self.run_seed)
        idle, open_slots, heap, now = list(range(self.clients)), self.slots, [], 0.0
        jobs: dict[int, tuple[int, int]] = {}  # assignment → (client, version it started from)
        released: set[int] = set()
        buffered, next_id = 0, 0

        def dispatch() -> None:
            nonlocal open_slots, next_id
            count = min(open_slots, len(idle))
            if not idle or open_slots == 0:
                return
            open_slots -= count
            picked = np.atleast_1d(rng.choice(len(idle), size=count, replace=False)).tolist()
            names = [idle[int(index)] for index in picked]
            for index in sorted((int(index) for index in picked), reverse=True):
                del idle[index]
            for client in names:
                jobs[next_id] = (client, self.versions)
                heapq.heappush(heap, Event(now + profile[client][1], "download", next_id))
                next_id += 1

        dispatch()
        while now < self.max_time:
            event = heapq.heappop(heap)
            now = event.time
            client, started = jobs[event.assignment]
            if event.phase == "download":
                heapq.heappush(heap, Event(now + float(rng.exponential(profile[client][0])), "train", event.assignment))
                if now >= self.max_time:
                    break
                continue
            if event.phase == "train":
                idle.append(client)
                idle.sort()
                released.add(event.assignment)
                mean = profile[client][2]
                upload = float(rng.uniform(max(0.0, mean - half_width), mean + half_width))
                heapq.heappush(heap, Event(now + upload, "upload", event.assignment))
                if now >= self.max_time:
                    break
                continue
            del jobs[event.assignment]  # the upload: taken
            open_slots += 1
            self.staleness.append(self.versions - started)
            buffered += 1
            if buffered == self.buffer:
                buffered, self.versions = 0, self.versions + 1
                self.versions_before += now < self.max_time
            if now < self.max_time and open_slots >= self.open_needed:
                dispatch()
        return self


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--slots", type=int, default=100, help="K")
    parser.add_argument("--buffer", type=int, default=2, help="B")
    parser.add_argument("--open", type=int, default=1, help="O")
    parser.add_argument("--max-time", type=float, default=200.0)
    parser.add_argument("--schedule", choices=SCHEDULES, default="default")
    parser.add_argument("--seeds", type=int, default=10, help="runs with setup and run seed 10, 11, …")
    args = parser.parse_args()
    for seed in range(10, 10 + args.seeds):
        clock = Clock(args.clients, args.slots, args.buffer, args.open, args.max_time, args.schedule, seed, seed).run()
        staleness = sum(clock.staleness) / len(clock.staleness)
        print(json.dumps({"seed": seed, "versions": clock.versions, "versions_before": clock.versions_before,
                          "mean_staleness": round(staleness, 3)}))  # fmt: skip


if __name__ == "__main__":
    main()
