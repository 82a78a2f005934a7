"""A Holm family declared before any time is read (docs/theory.md "Stragglers"): which
comparisons of a severity sweep one family holds, checked as the config and the command line give it.
Kept free of heavy imports: the workflow's planner checks it."""

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from asyncfl.settings.errors import InputError
from asyncfl.settings.names import (
    ALGORITHM_NAME,
    ALGORITHMS,
    ASYNCHRONOUS,
    MAX_NAME,
    NAME,
    VARIANT_SUFFIX,
    base_algorithm,
)

# A run name: an algorithm, or a variant of one (ALGORITHM-VARIANT, as an experiment's variants are named)
RUN_NAME = re.compile(rf"{ALGORITHM_NAME}(-{VARIANT_SUFFIX})?")
# What one declared family may span besides its severities × run names: every target read, every budget read
SPANS = ("targets", "budgets")


@dataclass(frozen=True)
class Family:
    """The comparisons one Holm family holds, declared before any time is read (docs/theory.md
    "Stragglers"): each asynchronous run name of `names` against each of its other names, at each
    of `severities`, per metric, seed set, target and budget, or across the targets and budgets `spans`
    names. A comparison it declares that the runs at hand lack counts at p = 1: the family's size never
    depends on which runs were given."""

    severities: tuple[str, ...]
    names: tuple[str, ...]
    spans: tuple[str, ...] = ()

    def comparisons(self) -> int:
        """The declared comparisons of one metric, seed set, target and budget."""
        references = sum(base_algorithm(name) in ASYNCHRONOUS for name in self.names)
        return len(self.severities) * references * (len(self.names) - references)

    def check_holds(self, severities: Sequence[str], names: Sequence[str], option: str) -> None:
        """Refuse runs at hand outside the family (`option`: the setting that declared it)."""
        for kind, at_hand, declared in (("severity", severities, self.severities), ("run name", names, self.names)):
            outside = [each for each in at_hand if each not in declared]
            if outside:
                raise InputError(
                    f"{option} does not hold the sweep's {kind} {outside[0]!r}: a family declares every comparison "
                    f"the sweep makes; add {outside[0]!r} to it, or drop that {kind}'s runs"
                )


def declared_family(value: Any, option: str, severities: Sequence[str], names: Sequence[str] | None,
                    targets: int, budgets: int) -> Family:  # fmt: skip
    """A family as a config or the command line declares it (`option`: its key, named in every error): a
    mapping of `severities` and `names` (lists that hold the sweep's own `severities` and `names`; each the
    sweep's own where left out, `names` required where None) and `spans` (a list of "targets" and
    "budgets", each only where the sweep reads more than one: `targets`, `budgets`)."""

    def where(key: str) -> str:
        return f"{option} {key}" if option.startswith("--") else f"{option}.{key}"

    if not isinstance(value, dict) or not value or set(value) - {"severities", "names", "spans"}:
        raise InputError(
            f"{option} must be a mapping of severities, names and spans (e.g. {{severities: [slow0, slow10], "
            f"spans: [targets]}}), got {str(value)[:80]!r}"
        )
    if names is None and "names" not in value:
        raise InputError(f"{where('names')} is missing: list the run names whose comparisons the family holds")
    declared = {}
    for key, default in (("severities", severities), ("names", names or ()), ("spans", ())):
        listed = value.get(key, list(default))
        if not isinstance(listed, list) or not all(isinstance(each, str) and each for each in listed):
            raise InputError(f"{where(key)} must be a list of names, got {str(listed)[:80]!r}")
        if key != "spans" and not listed:
            raise InputError(f"{where(key)} is empty: list the {key} whose comparisons the family holds")
        if len(set(listed)) != len(listed):
            twice = next(each for each in listed if listed.count(each) > 1)
            raise InputError(f"{where(key)} names {twice[:80]!r} twice; name each once")
        declared[key] = tuple(listed)
    for span in declared["spans"]:
        if span not in SPANS:
            raise InputError(f"{where('spans')}: {span[:80]!r} is not one of {', '.join(SPANS)}")
        if {"targets": targets, "budgets": budgets}[span] < 2:
            raise InputError(
                f"{where('spans')}: {span} changes nothing where the sweep reads one {span[:-1]}; drop it, or read "
                f"other {span}"
            )
    check_names(declared["severities"], declared["names"], where)
    family = Family(declared["severities"], declared["names"], declared["spans"])
    if not family.comparisons():
        raise InputError(f"{where('names')} hold no asynchronous and synchronous name to compare; name both kinds")
    family.check_holds(severities, names or (), option)
    return family


def family_option(experiment: dict[str, Any]) -> list[str]:
    """`asyncfl stragglers`' --family for a checked experiment that declares `verdict_family`, its
    severities and names filled in from the experiment's own where it leaves them out; nothing otherwise."""
    declared = experiment.get("verdict_family")
    if declared is None:
        return []
    filled = {"severities": list(experiment["severities"]), "names": experiment["algorithms"], **declared}
    return ["--family=" + json.dumps(filled)]


def check_names(severities: Sequence[str], names: Sequence[str], where: Callable[[str], str]) -> None:
    """A family's severities and run names as the sweep's own are checked: a typo is refused, never counted
    as a comparison not run (`where`: a list's key as the user wrote it)."""
    for severity in severities:
        if not NAME.fullmatch(severity) or len(severity) > MAX_NAME:
            raise InputError(
                f"{where('severities')}: {severity[:80]!r} is not a severity's name (a folder: letters, digits, _ "
                f"or -, at most {MAX_NAME})"
            )
    for name in names:
        if not RUN_NAME.fullmatch(name) or base_algorithm(name) not in ALGORITHMS or len(name) > MAX_NAME:
            raise InputError(
                f"{where('names')}: {name[:80]!r} is not a run name (an algorithm, or ALGORITHM-VARIANT); "
                "name the sweep's run names"
            )
