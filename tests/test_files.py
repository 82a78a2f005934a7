"""File writes on a real full disk: a log keeps whole lines only, an atomic write names its target."""

import errno
import os

import pytest

from asyncfl.files import append_whole, open_log, write_json


def test_a_log_line_that_does_not_fit_is_cut_back_whole(full_disk):
    log = full_disk / "metrics.csv"
    descriptor = open_log(log, "round,loss\n")
    try:
        append_whole(descriptor, log, "1,0.5\n")
        before = log.read_bytes()
        with pytest.raises(OSError) as raised:
            append_whole(descriptor, log, "2," + "9" * 200_000 + "\n")
    finally:
        os.close(descriptor)
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(log)
    assert log.read_bytes() == before  # no torn last line


def test_an_atomic_write_that_does_not_fit_leaves_nothing(full_disk):
    target = full_disk / "run.json"
    with pytest.raises(OSError) as raised:
        write_json(target, {"x": "y" * 200_000})
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(target)
    assert list(full_disk.iterdir()) == []
