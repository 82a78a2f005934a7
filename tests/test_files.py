"""File writes: on a real full disk a log keeps whole lines only and an atomic write names its target; special
files are never replaced; a set of files is published whole or not at all."""

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from asyncfl.files import append_whole, open_log, publish_folder, write_json, written_together
from asyncfl.settings.errors import InputError
from asyncfl.settings.integrity import strict_json_loads


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


@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
def test_a_special_file_or_folder_at_an_output_path_is_refused_and_kept(tmp_path, kind):
    """`os.replace` onto /dev/null would replace the machine's device with a regular file: refused."""
    if kind == "device":
        target = Path("/dev/null")
    else:
        target = tmp_path / "out.json"
        os.mkfifo(target) if kind == "fifo" else target.mkdir()
    before = os.lstat(target)
    with pytest.raises(InputError, match="device, pipe or socket|is a folder"):
        write_json(target, {"x": 1})
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)


def test_the_longest_legal_name_is_written_and_errors_name_the_path_given(tmp_path):
    """The temporary sibling fits wherever the final name fits (a 255-byte name once could not be
    written at all), and an error names the path the user gave, never the temporary one."""
    longest = tmp_path / ("n" * 250 + ".json")
    write_json(longest, {"x": 1})
    assert json.loads(longest.read_text()) == {"x": 1} and [p.name for p in tmp_path.iterdir()] == [longest.name]
    too_long = tmp_path / ("n" * 260 + ".json")
    with pytest.raises(OSError) as raised:
        write_json(too_long, {"x": 1})
    assert raised.value.errno == errno.ENAMETOOLONG and raised.value.filename == str(too_long)


def test_json_is_strict_both_ways(tmp_path):
    """NaN or Infinity would make files that strict parsers reject: never written, never read."""
    with pytest.raises(ValueError):
        write_json(tmp_path / "x.json", {"wall_seconds": float("inf")})
    assert not (tmp_path / "x.json").exists()
    for text in ('{"a": NaN}', '{"a": Infinity}', '{"a": 1e309}'):
        with pytest.raises(ValueError):
            strict_json_loads(text)


SET = ("a.tar.gz", "SUMS", "meta.json")


def write_set(tag: str, kill_after: int | None = None):
    """A `write` for publish_folder: the set's files, each saying `tag`; SIGKILL after `kill_after` of them."""

    def write(folder: Path) -> None:
        for count, name in enumerate(SET):
            if count == kill_after:
                os.kill(os.getpid(), signal.SIGKILL)
            (folder / name).write_text(tag)

    return write


def contents(folder: Path) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(folder.iterdir()) if path.is_file()}


@pytest.mark.subprocess
def test_a_set_killed_half_written_leaves_the_old_set_whole(tmp_path):
    """A process SIGKILLed after writing the new tarball, before its checksums, leaves the old set."""
    out = tmp_path / "archive"
    publish_folder(out, SET, write_set("old"))
    (out / "extracted.csv").write_text("a user's file")  # README: the archive is checked where it lies
    child = subprocess.run(
        [sys.executable, "-c", f"import test_files as t; t.publish_folder({str(out)!r}, t.SET, t.write_set('new', 1))"],
        cwd=Path(__file__).parent,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)},
        capture_output=True,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert contents(out) == {**dict.fromkeys(SET, "old"), "extracted.csv": "a user's file"}
    publish_folder(out, SET, write_set("new"))  # the next run publishes the whole new set
    assert contents(out) == {**dict.fromkeys(SET, "new"), "extracted.csv": "a user's file"}


def test_a_set_that_fails_half_written_leaves_the_old_set_and_no_staging(tmp_path):
    out = tmp_path / "archive"
    publish_folder(out, SET, write_set("old"))

    def fails(folder: Path) -> None:
        (folder / SET[0]).write_text("new")
        raise OSError(errno.ENOSPC, "No space left on device", str(folder / SET[1]))

    with pytest.raises(OSError) as raised:
        publish_folder(out, SET, fails)
    assert raised.value.filename == str(out)
    assert contents(out) == dict.fromkeys(SET, "old") and [p.name for p in tmp_path.iterdir()] == ["archive"]


def test_a_folder_where_a_set_member_goes_is_refused_before_any_write(tmp_path):
    out = tmp_path / "archive"
    publish_folder(out, SET, write_set("old"))
    (out / SET[1]).unlink()
    (out / SET[1]).mkdir()
    with pytest.raises(InputError, match="SUMS is a folder"):
        publish_folder(out, SET, write_set("new"))
    assert contents(out) == {SET[0]: "old", SET[2]: "old"} and [p.name for p in tmp_path.iterdir()] == ["archive"]


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        (["x", "x/a.png", "x/b.csv"], "x is an output and also the folder of the output /.*/x/a.png"),
        (["x/a.png", "y/../x/a.png"], "is given for two outputs"),
        (["a.png", "./a.png"], "is given for two outputs"),
    ],
)
def test_outputs_that_are_not_apart_are_refused_before_any_folder_or_file_is_made(tmp_path, outputs, message):
    """`select --chosen X --out X` once wrote its 3 figures into the new folder X, then failed on X."""
    paths = [tmp_path / name for name in outputs]
    with pytest.raises(InputError, match=message), written_together(paths):
        pytest.fail("refused before the block runs")
    assert list(tmp_path.iterdir()) == []


def test_outputs_written_together_all_change_or_none(tmp_path):
    paths = [tmp_path / "figures/a.png", tmp_path / "tables/b.csv", tmp_path / "c.json"]
    for path in paths:
        path.parent.mkdir(exist_ok=True)
        path.write_text("old")
    with pytest.raises(OSError) as raised, written_together(paths) as temporaries:
        temporaries[paths[0]].write_text("new")
        raise OSError(errno.ENOSPC, "No space left on device", str(temporaries[paths[1]]))
    assert raised.value.filename == str(paths[1])  # the name asked for, not its temporary
    assert [path.read_text() for path in paths] == ["old"] * 3
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a.png", "b.csv", "c.json", "figures", "tables"]
    paths[1].unlink()
    paths[1].mkdir()
    with pytest.raises(InputError, match="b.csv is a folder"), written_together(paths):
        pytest.fail("refused before the block runs")
    paths[1].rmdir()
    with written_together(paths) as temporaries:
        for path in paths:
            temporaries[path].write_text("new")
    assert [path.read_text() for path in paths] == ["new"] * 3
