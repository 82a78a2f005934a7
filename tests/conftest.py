"""Shared test helpers."""

import os

import pytest

# CI sets this so that a test which cannot run here fails instead of skipping quietly.
REQUIRE_ALL = os.environ.get("ASYNCFL_REQUIRE_ALL") == "1"


def skip_unless(condition: bool, reason: str) -> None:
    """Skip when `condition` is false, or fail under ASYNCFL_REQUIRE_ALL=1 (CI)."""
    if condition:
        return
    if REQUIRE_ALL:
        pytest.fail(f"ASYNCFL_REQUIRE_ALL=1 but {reason}")
    pytest.skip(reason)
