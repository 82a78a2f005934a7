"""AFL as the paper's public reference code runs it: a clearly labelled emulation (docs/design.md
"Training"), never the algorithm the paper describes."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from asyncfl.fl.algorithms.sync import Sync

if TYPE_CHECKING:
    from asyncfl.settings.config import TrainConfig


class AFLAsCoded(Sync):
    """AFL as the paper's public reference code runs it, for regenerating the paper's published curves;
    not the algorithm the paper describes (that is `afl`). Emulated, as the code behaves:

    - clients never load the global model: each trains on from its own last local model, the first
      time from its own seeded initial model (the reference initialises every client's model and the
      server's separately), so the global model is only ever an average, never a starting point;
    - the server waits for all J dispatched clients (an `asyncio.gather` barrier) and takes their
      size-weighted mean, as `sync` does;
    - the delay-aware learning rate uses t = the local epoch and a constant delay d_c = 2 s, whatever
      the client's real duration (the virtual clock still runs on the real durations);
    - Adam is created afresh at every local epoch, so its moments never outlive an epoch.

    `lr_time` and `lr_delay` do not apply; every other setting (γ0, α, I, batch size, μ) does.
    """

    clients_load_global_model = False
    logs_reference_loss = True
    optimizer_per_epoch = True
    CODED_DELAY = 2.0  # seconds: the constant the reference code passes as every client's delay

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.schedule = replace(self.schedule, clock="epoch")

    def learning_rates(self, version: int, updates: int, delay: float) -> tuple[float, ...]:
        return self.schedule.rates(version, updates, self.CODED_DELAY)
