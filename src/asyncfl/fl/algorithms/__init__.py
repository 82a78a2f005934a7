"""The federated algorithms, one file each, found by their catalogue lines (`settings/algorithms.py`):
an algorithm's `strategy` names its file here and the `Strategy` in it.

Adding an algorithm: its file here, with its `Strategy` and its frozen `Parameters`, the settings only it
reads declared on them, and its catalogue line (docs/development.md "Adding an algorithm"). FedAvgM,
FedAdam and FedYogi need no file: they are FedAvg (`Sync`) whose config their name gives a server
optimizer; FADAS likewise is FedBuff with AMSGrad (and its delay-adaptive step, `delay_threshold`).

The files import torch where they compute, not at their top: the config, which the workflow reads while
it plans, reads their settings from them (tests/test_lint.py checks that planning stays torch-free).
"""

from __future__ import annotations

import importlib
from dataclasses import Field, fields
from types import ModuleType
from typing import TYPE_CHECKING

from asyncfl.settings.algorithms import CATALOGUE

if TYPE_CHECKING:
    from asyncfl.fl.strategy import Strategy
    from asyncfl.settings.config import TrainConfig

STRATEGY_OF = {algorithm.key: algorithm.strategy for algorithm in CATALOGUE}


def strategy_file(algorithm: str) -> ModuleType:
    """The module of `fl/algorithms/` that holds `algorithm`'s strategy."""
    return importlib.import_module(f"{__name__}.{STRATEGY_OF[algorithm].split(':')[0]}")


def strategy_class(algorithm: str) -> type[Strategy]:
    """`algorithm`'s `Strategy`, as its catalogue line names it."""
    strategy: type[Strategy] = getattr(strategy_file(algorithm), STRATEGY_OF[algorithm].split(":")[1])
    return strategy


def make_strategy(config: TrainConfig) -> Strategy:
    return strategy_class(config.algorithm)(config)


def declared_settings(files: list[ModuleType] | None = None) -> dict[str, tuple[type, Field]]:
    """The settings the algorithms' files (the catalogue's, by default) declare, each once: name → (its
    `Parameters` class, the declaring `dataclasses.Field`), in the catalogue's order; a field declared
    with `setting(...)` on a `Parameters` defined in the file (its inherited fields, such as M and K,
    are the config's own keys). Two classes declaring one key are an ImportError."""
    from asyncfl.fl.strategy import Parameters

    declared: dict[str, tuple[type, Field]] = {}
    for module in files if files is not None else [strategy_file(algorithm.key) for algorithm in CATALOGUE]:
        for value in vars(module).values():
            if not (isinstance(value, type) and issubclass(value, Parameters) and value.__module__ == module.__name__):
                continue
            own = value.__dict__.get("__annotations__", {})
            for item in fields(value):
                if item.name in own and "rule" in item.metadata:
                    owner = declared.setdefault(item.name, (value, item))[0]
                    if owner is not value:  # one key, two meanings: one of them would go unread
                        raise ImportError(f"{value.__name__} and {owner.__name__} both declare {item.name}; rename one")
    return declared
