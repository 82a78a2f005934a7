"""docs/settings.md's and docs/algorithm-settings.md's tables of settings are made from `TrainConfig`'s
fields: each setting's meaning (its docstring), default, group, readers and preconditions said once, in
the code; this test fails while a page differs, and says how to make it again."""

import dataclasses
import re

from asyncfl.settings.config import TrainConfig
from asyncfl.settings.rules import Group
from asyncfl.settings.settings_docs import OWN, PAGES, field_docs, row, table, with_tables
from conftest import REPO

README = REPO / "docs/settings.md"


def test_the_pages_tables_are_made_from_the_fields():
    remedy = "run python -m asyncfl.settings.settings_docs"
    for page in PAGES:
        text = (REPO / page).read_text(encoding="utf-8")
        assert with_tables(text) == text, f"{page}'s settings differ from the code: {remedy}"


def test_every_group_has_one_table_the_algorithms_own_theirs_and_every_setting_a_meaning():
    marked = re.findall(r"<!-- settings: ([A-Z_, ]+) -->", README.read_text(encoding="utf-8"))
    groups = [Group[name.strip()] for line in marked for name in line.split(",")]
    assert sorted(groups) == sorted(Group)
    own = (REPO / PAGES[1]).read_text(encoding="utf-8")
    assert f"<!-- settings: {OWN} -->" in own and "| `fedqueue_period` [10.0] |" in own
    assert "fedqueue_period" not in README.read_text(encoding="utf-8")  # said once, on its own page
    names = [field.name for field in dataclasses.fields(TrainConfig)]
    assert list(field_docs()) == names and all(field_docs().values())


def fields() -> dict[str, dataclasses.Field]:
    return {field.name: field for field in dataclasses.fields(TrainConfig)}


def test_a_row_gives_the_default_the_readers_and_what_the_setting_needs():
    assert row(fields()["batch_size"]) == "| `batch_size` [64] | local minibatch size (**paper**) |"
    assert "; read by every algorithm but `afl_as_coded` |" in row(fields()["lr_time"])
    deadline = row(fields()["min_report_fraction"])
    assert deadline.startswith("| `min_report_fraction` [0.8] |")
    assert deadline.endswith("; read by `sync`; only with round_deadline set |")
    assert row(fields()["round_deadline"]).startswith("| `round_deadline` [null] |")
    assert row(fields()["max_staleness"]).endswith("; read by the asynchronous algorithms but `fedcompass` |")
    assert row(fields()["staleness_a"]).endswith(
        "; read by `afl`, `fedasync`, `fedbuff`, `fadas`, `ca2fl`, `fedcompass`; only with staleness other than "
        "constant |"
    )
    assert row(fields()["arrivals"]).endswith("; read by the asynchronous algorithms |")


def test_an_edited_table_is_made_again_and_other_text_kept():
    text = README.read_text(encoding="utf-8")
    edited = text.replace("| `batch_size` [64] |", "| `batch_size` [32] |").replace("## Top level", "## Top")
    assert edited != text and with_tables(edited) == text.replace("## Top level", "## Top")
    assert table([Group.MACHINE]).splitlines()[2].startswith("| `device` [auto] |")
