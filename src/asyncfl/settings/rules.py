"""What a setting of `TrainConfig` is besides its type: its default, the values it accepts, the
algorithms that read it and the group it belongs to, kept on the field itself so that a new setting
is one line (docs/development.md "Adding a world feature")."""

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from asyncfl.settings.errors import InputError
from asyncfl.settings.numbers import finite


class Group(StrEnum):
    """Which part of a run a setting shapes: config/README.md has one table per group, and the
    clients' world (`WORLD`) is what runs drawn in one figure must share."""

    RUN = "what runs"
    LOCAL = "local training"
    SERVER = "the server's aggregation"
    EVALUATION = "evaluation"
    WORLD = "the clients' system and world"
    STRAGGLERS = "stragglers"
    ENDING = "when the run ends"
    MACHINE = "the machine"


@dataclass(frozen=True)
class Rule:
    """What values a key accepts beyond its type: one of `choices`, or a number in a range."""

    choices: tuple[str, ...] = ()
    lowest: str = ""  # "> 0", "≥ 0" or "(0, 1]"
    at_most: float | None = None  # far beyond any real experiment: past it a run would exhaust memory,
    # overflow its virtual clock to inf or never end, instead of failing here with the key named
    at_least: float | None = None  # likewise below: a bandwidth of 1e-300 would make a transfer last 1e305 s
    under: float | None = None  # an open upper end: a moment's decay of 1 keeps its first value for ever

    def check(self, key: str, value: Any, source: str) -> None:
        if value is None:
            return
        if self.choices and value not in self.choices:
            raise InputError(f"{source}: {key} must be one of {', '.join(self.choices)}, got {value!r}")
        if self.lowest and (not finite(value) or value < 0 or (value == 0 and self.lowest != "≥ 0")):
            rule = "≥ 0" if self.lowest == "≥ 0" else "> 0"
            raise InputError(f"{source}: {key} must be a finite number {rule}, got {value!r}")
        if self.lowest == "(0, 1]" and value > 1:
            raise InputError(f"{source}: {key} must be in (0, 1], got {value!r}")
        if self.at_most is not None and value > self.at_most:
            limit = self.at_most if isinstance(self.at_most, int) else f"{self.at_most:g}"
            raise InputError(f"{source}: {key} must be ≤ {limit}, got {value!r}")
        if self.at_least is not None and value < self.at_least:
            raise InputError(f"{source}: {key} must be ≥ {self.at_least:g}, got {value!r}")
        if self.under is not None and value >= self.under:
            raise InputError(f"{source}: {key} must be < {self.under:g}, got {value!r}")


def setting(
    group: Group,
    default: Any,
    choices: tuple[str, ...] = (),
    lowest: str = "",
    at_most: float | None = None,
    read_by: tuple[str, ...] = (),
    at_least: float | None = None,
    under: float | None = None,
) -> Any:
    """A config key: its group, its default, its `Rule` and, for a key only some algorithms read, those
    algorithms (`read_by`; empty: every algorithm), on the field itself, so a new key is one line."""
    rule = Rule(choices, lowest, at_most, at_least, under)
    return field(default=default, metadata={"group": group, "rule": rule, "read_by": read_by})


POSITIVE, NON_NEGATIVE, UNIT_INTERVAL = "> 0", "≥ 0", "(0, 1]"  # the ranges `setting` names as `lowest`
MANY = 1 << 24  # an upper bound for counts of clients and samples
