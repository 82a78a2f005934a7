"""What `make run` prints once set up: the CPU capability torch found and the quick pipeline's time measured
on that kind, the same numbers docs/performance.md's table gives."""

import re

from asyncfl.bench.quick_estimate import MEASURED_SECONDS, estimate_line, minutes
from conftest import REPO


def test_the_line_names_the_capability_and_the_time_measured_on_it():
    line = estimate_line("AVX512", 16)
    assert "AVX512 (16 cores here; make run uses 2)" in line and line.endswith(
        f"{minutes(MEASURED_SECONDS['AVX512'])}."
    )
    assert estimate_line("AVX2", 2).endswith(f"{minutes(MEASURED_SECONDS['AVX2'])}.")
    assert estimate_line("DEFAULT", 2).endswith(
        f"{minutes(MEASURED_SECONDS['AVX2'])}."
    )  # no vector kernels: the slowest


def test_the_times_are_the_docs_table():
    """Each kind's row of "The quick pipeline, measured" (CPU, pipeline time, fresh clone) is what it prints."""
    text = (REPO / "docs/performance.md").read_text()
    section = text.split("## The quick pipeline, measured")[1].split("\n## ")[0]
    rows = [line.strip("| ").split(" | ") for line in section.splitlines() if line.startswith("| AVX")]
    for kind, seconds in MEASURED_SECONDS.items():
        spelled = {"AVX2": "AVX2", "AVX512": "AVX-512"}[kind]
        times = [row[1] for row in rows if row[0].startswith(spelled) and re.fullmatch(r"\d+ min \d+ s", row[1])]
        assert times == [minutes(seconds)], (kind, times)
