"""Synchronous FL as the paper's public reference code runs it for its AFL-vs-sync figures: a clearly
labelled emulation (docs/design.md "Training")."""

from __future__ import annotations

from asyncfl.fl.algorithms.sync import Sync


class SyncAsCoded(Sync):
    """Synchronous FL as the paper's reference code runs it for its AFL-vs-sync figures (README
    "Training"): J clients drawn per round without replacement, the server waits for all of them and
    takes their size-weighted mean, and, as in its AFL script, clients never load the global model:
    each trains on from its own last model, the first time from its own seeded initial model. Local
    training (optimizer per dispatch, learning-rate schedule) is `sync`'s. Not FedAvg: that is `sync`.
    """

    clients_load_global_model = False
    logs_reference_loss = True
