"""`trainer: none`, the timing-only run (docs/world.md "The clients' world"): every dispatch, staleness,
version and part of the clients' world exactly as a trained run's, and no training. A client's result is
the model it was sent, so the global model stays the initial one; the logs leave the training columns
empty, and the run scores no model (a simulator's timing setup is checked against its counts of
versions, which need no training: the FedRevive comparison of docs/design.md)."""

import math

from asyncfl.training.interface import LocalResult, LocalTask


class TimingOnlyTrainer:
    """Returns every client's start model untrained: no epoch run (0), no loss (nan, never logged)."""

    def train(self, tasks: list[LocalTask]) -> list[LocalResult]:
        return [LocalResult(task.start_model, math.nan, 0) for task in tasks]
