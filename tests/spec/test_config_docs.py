"""config/README.md's tables document every setting of `TrainConfig`: its real default, in the table of
its group, naming the algorithms that read it. The code holds these facts; this test holds the
document to them."""

import dataclasses
import re

import pytest

from asyncfl.spec.config import SCHEDULED, SETTING_READERS, TrainConfig, settings_of
from asyncfl.spec.experiments import WORKFLOW_OWNED
from asyncfl.spec.names import ASYNCHRONOUS
from asyncfl.spec.rules import Group
from conftest import REPO

DOCUMENTED = re.compile(r"`(\w+)` \[([^\]]*)\]")
# Each group's table, by the heading above it
TABLES = {
    "## `train:` settings": (Group.RUN, Group.LOCAL, Group.SERVER, Group.EVALUATION),
    "### The clients' system and world": (Group.WORLD,),
    "### Stragglers": (Group.STRAGGLERS,),
    "### When a run ends, and how it runs": (Group.ENDING, Group.MACHINE),
}
# How a row may name a set of readers in words rather than one by one
READERS_IN_WORDS = {tuple(ASYNCHRONOUS): "asynchronous algorithms", SCHEDULED: "every algorithm but `afl_as_coded`"}


def documented_rows() -> dict[str, tuple[str, str, str]]:
    """Each documented setting's (default as written, table heading, whole row)."""
    rows, heading = {}, ""
    for line in (REPO / "config/README.md").read_text().splitlines():
        if line.startswith("#"):
            heading = line
        elif line.startswith("| `"):
            first_cell = line.split(" | ")[0]
            for name, default in DOCUMENTED.findall(first_cell):
                rows[name] = (default, heading, line)
    return rows


def matches(default, text: str) -> bool:
    if default is None:
        return text in ("null", "J")  # J: the setting defaults to clients_per_round
    if isinstance(default, bool):
        return text == str(default).lower()
    if isinstance(default, int | float):
        return float(text) == default
    return text == default


SETTINGS = [field for field in dataclasses.fields(TrainConfig) if field.name not in WORKFLOW_OWNED]


@pytest.mark.parametrize("field", SETTINGS, ids=lambda field: field.name)
def test_every_setting_is_documented_with_its_default_in_its_groups_table(field):
    rows = documented_rows()
    assert field.name in rows, f"config/README.md does not document {field.name}"
    default, heading, _ = rows[field.name]
    assert matches(field.default, default), (field.name, field.default, default)
    assert field.metadata["group"] in TABLES[heading], f"{field.name} is under {heading}"


@pytest.mark.parametrize("name", sorted(SETTING_READERS), ids=str)
def test_a_setting_some_algorithms_read_names_them(name):
    readers = SETTING_READERS[name]
    _, _, row = documented_rows()[name]
    named = all(f"`{reader}`" in row for reader in readers)
    in_words = READERS_IN_WORDS.get(tuple(readers))
    assert named or (in_words is not None and in_words in row.lower()), (
        f"config/README.md's row of {name} does not say which algorithms read it ({', '.join(readers)})"
    )


def test_nothing_is_documented_that_is_not_a_setting():
    names = {field.name for field in dataclasses.fields(TrainConfig)}
    assert set(documented_rows()) <= names


def test_every_group_has_its_table():
    assert {group for groups in TABLES.values() for group in groups} == set(Group)
    assert all(settings_of(group) for group in Group)
