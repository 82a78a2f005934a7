"""Synchronous FL (FedAvg), and as production systems run it: over-selection and a round deadline
(docs/design.md "Stragglers")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from asyncfl.fl.strategy import Parameters, Strategy, Update
from asyncfl.settings.errors import InputError

if TYPE_CHECKING:
    from asyncfl.models import ModelState
    from asyncfl.settings.config import TrainConfig


@dataclass(frozen=True)
class SyncParameters(Parameters):
    """Straggler handling of synchronous FL as production systems run it (Bonawitz et al. 2019,
    "Towards Federated Learning at Scale"); both off by default, which waits for all J clients.

    Attributes:
    over_selection: ε: each round dispatches ⌈J·(1+ε)⌉ clients and aggregates the first J arrivals
        (their 130 %: ε = 0.3); the rest are discarded [0.0: off].
    round_deadline: D, virtual seconds: a round still open at its start + D aggregates what arrived, or
        is abandoned (costing D, the model unchanged) with fewer than ⌈min_report_fraction·J⌉ reports
        [null: off].
    min_report_fraction: of J, the reports a round needs by its deadline [0.8: the project's choice].
    partial_work: with a deadline, a client that would arrive after it trains only the local steps that
        fit before it (known at dispatch: its phases are) and sends them, weighted by its data size as
        FedProx weighs its inexact updates; one that fits no step is discarded at the deadline as
        before [false: the project's choice].
    """

    over_selection: float
    round_deadline: float | None
    min_report_fraction: float
    partial_work: bool


class Sync(Strategy):
    """FedAvg: J clients per round, wait for all (τ = 0, so s = 1), the size-weighted mean replaces the
    model; or, with straggler handling (`SyncParameters`), over-select and/or end rounds at a deadline.
    M does not apply: a round keeps its own dispatches in flight."""

    synchronous = True

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: SyncParameters = SyncParameters.of(config)
        self.round_deadline = self.parameters.round_deadline
        self.partial_work = self.parameters.partial_work
        self.closes_rounds = self.parameters.over_selection > 0 or self.round_deadline is not None

    @property
    def initial_clients(self) -> int:
        """⌈J·(1+ε)⌉, rounded first so that a product like 10 × 1.3 = 13.000000000000002 asks for 13."""
        return math.ceil(round(self.clients_per_round * (1 + self.parameters.over_selection), 9))

    @property
    def min_reports(self) -> int:
        """Reports a round needs by its deadline: ⌈min_report_fraction·J⌉."""
        return math.ceil(round(self.parameters.min_report_fraction * self.clients_per_round, 9))

    def clients_after_arrival(self, aggregated: bool) -> int:
        return self.initial_clients if aggregated else 0

    def clients_after_loss(self, in_round: int) -> int:
        """A lost dispatch is replaced only where the round could no longer gather J results."""
        return max(0, self.clients_per_round - in_round)

    def check(self, clients: int) -> None:
        if not self.replacement and self.initial_clients > clients:
            raise InputError(
                f"config: over_selection = {self.parameters.over_selection} asks for {self.initial_clients} clients "
                f"a round (⌈J·(1 + over_selection)⌉, J = {self.clients_per_round}), more than the {clients} there are; "
                "lower it"
            )

    def aggregate(self, global_model: ModelState, updates: list[Update]) -> tuple[ModelState, list[float]]:
        from asyncfl.fl.aggregation import staleness_aware_average  # torch: loaded here, not with the config

        sizes, weights = [u.size for u in updates], [u.staleness_weight for u in updates]
        return staleness_aware_average(global_model, [u.state for u in updates], sizes, weights, 1.0)
