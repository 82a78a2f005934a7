"""config/README.md's `train:` table documents every setting of `TrainConfig` with its real default:
the two are written in two places, so this test keeps them in step."""

import dataclasses
import re

from asyncfl.spec.config import TrainConfig
from asyncfl.spec.experiments import WORKFLOW_OWNED
from conftest import REPO

DOCUMENTED = re.compile(r"`(\w+)` \[([^\]]*)\]")


def documented_defaults() -> dict[str, str]:
    return dict(DOCUMENTED.findall((REPO / "config/README.md").read_text()))


def matches(default, text: str) -> bool:
    if default is None:
        return text in ("null", "J")  # J: the setting defaults to clients_per_round
    if isinstance(default, bool):
        return text == str(default).lower()
    if isinstance(default, int | float):
        return float(text) == default
    return text == default


def test_every_setting_is_documented_with_its_default():
    documented = documented_defaults()
    for field in dataclasses.fields(TrainConfig):
        if field.name in WORKFLOW_OWNED:  # set through the experiment's own keys (documented above the table)
            continue
        assert field.name in documented, f"config/README.md does not document {field.name}"
        assert matches(field.default, documented[field.name]), (field.name, field.default, documented[field.name])


def test_nothing_is_documented_that_is_not_a_setting():
    names = {field.name for field in dataclasses.fields(TrainConfig)}
    assert set(documented_defaults()) <= names
