"""Numbers as users write them, read one way by the classes, YAML's scientific notation and the command line."""

import argparse

import pytest

from asyncfl.cli.arguments import POSITIVE
from asyncfl.settings.numbers import parse_number
from asyncfl.settings.yaml_files import with_numbers


@pytest.mark.parametrize(("text", "value"), [("2", 2.0), ("+2", 2.0), (" .5 ", 0.5), ("3.", 3.0), ("1e-6", 1e-6),
                                             ("-1E+3", -1000.0)])  # fmt: skip
def test_every_syntax_a_user_writes_is_a_number(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize("text", ["inf", "-Infinity", "nan", "1_000", "", "1e", "e5", "0x10", "1,5", "--1"])
def test_what_is_no_finite_number_is_none_everywhere(text):
    assert parse_number(text) is None
    with pytest.raises(argparse.ArgumentTypeError, match="must be a finite number > 0"):
        POSITIVE(text)


def test_yaml_reads_scientific_notation_as_a_number_and_leaves_the_rest():
    assert with_numbers({"a": "1e-3", "b": ["5E4", "inf", "1_000", "x"]}) == {
        "a": 1e-3,
        "b": [5e4, "inf", "1_000", "x"],
    }
