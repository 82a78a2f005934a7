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

from asyncfl.fl.strategy import Parameters, Strategy
from asyncfl.settings.algorithms import CATALOGUE

if TYPE_CHECKING:
    from asyncfl.settings.config import TrainConfig

STRATEGY_OF = {algorithm.key: algorithm.strategy for algorithm in CATALOGUE}


def strategy_file(algorithm: str) -> ModuleType:
    """The module of `fl/algorithms/` that holds `algorithm`'s strategy."""
    return importlib.import_module(f"{__name__}.{STRATEGY_OF[algorithm].partition(':')[0]}")


def strategy_class(algorithm: str) -> type[Strategy]:
    """`algorithm`'s `Strategy`, as its catalogue line names it ("file:Class"), or an ImportError that
    names the line."""
    file, colon, name = STRATEGY_OF[algorithm].partition(":")
    strategy = getattr(strategy_file(algorithm), name, None) if colon else None
    if not (isinstance(strategy, type) and issubclass(strategy, Strategy)):
        raise ImportError(
            f"settings/algorithms.py: {algorithm}'s strategy={STRATEGY_OF[algorithm]!r} names no Strategy class; "
            f"give it as 'file:Class', the class a Strategy defined in fl/algorithms/{file}.py"
        )
    return strategy


def make_strategy(config: TrainConfig) -> Strategy:
    return strategy_class(config.algorithm)(config)


def parameters_in(module: ModuleType) -> list[type[Parameters]]:
    """The `Parameters` classes an algorithm's file defines."""
    return [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, Parameters) and value.__module__ == module.__name__
    ]


def parameter_names(algorithm: str) -> set[str]:
    """The settings `algorithm`'s file reads: the fields of its `Parameters`, inherited ones included."""
    return {item.name for cls in parameters_in(strategy_file(algorithm)) for item in fields(cls)}


def declared_settings(files: list[ModuleType] | None = None) -> dict[str, tuple[type, Field]]:
    """The settings the algorithms' files (the catalogue's, each line checked, by default) declare, each
    once: name → (the `Parameters` class that declares it, its `dataclasses.Field`), in the catalogue's
    order; a field declared with `setting(...)`, on a `Parameters` of the file or one it inherits from
    (the plain fields, such as M and K, are the config's own keys). Two classes declaring one key are an
    ImportError."""
    if files is None:
        for algorithm in CATALOGUE:  # every line names a Strategy before its file's settings are read
            strategy_class(algorithm.key)
        files = [strategy_file(algorithm.key) for algorithm in CATALOGUE]
    declared: dict[str, tuple[type, Field]] = {}
    for module in files:
        for cls in parameters_in(module):
            for item in fields(cls):
                if "rule" not in item.metadata:
                    continue
                owner = next(base for base in cls.__mro__ if item.name in base.__dict__.get("__annotations__", {}))
                first = declared.setdefault(item.name, (owner, item))[0]
                if first is not owner:  # one key, two meanings: one of them would go unread
                    raise ImportError(
                        f"{owner.__module__}.{owner.__name__} and {first.__module__}.{first.__name__} both declare "
                        f"{item.name}; rename one"
                    )
    return declared
