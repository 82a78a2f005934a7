"""File writes on a real full disk: a log keeps whole lines only, an atomic write names its target."""

import errno
import os
import subprocess
from pathlib import Path

import pytest

from asyncfl.files import append_text, write_json
from conftest import skip_unless


@pytest.fixture
def full_disk(tmp_path) -> Path:
    """A 64 KiB tmpfs: a real filesystem that runs out of space (mounting needs root)."""
    skip_unless(os.geteuid() == 0, "mounting a small tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    skip_unless(result.returncode == 0, f"cannot mount a tmpfs here: {result.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_a_log_line_that_does_not_fit_is_cut_back_whole(full_disk):
    log = full_disk / "metrics.csv"
    append_text(log, "round,loss\n", start=True)
    append_text(log, "1,0.5\n")
    before = log.read_bytes()
    with pytest.raises(OSError) as raised:
        append_text(log, "2," + "9" * 200_000 + "\n")
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(log)
    assert log.read_bytes() == before  # no torn last line


def test_an_atomic_write_that_does_not_fit_leaves_nothing(full_disk):
    target = full_disk / "run.json"
    with pytest.raises(OSError) as raised:
        write_json(target, {"x": "y" * 200_000})
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(target)
    assert list(full_disk.iterdir()) == []
