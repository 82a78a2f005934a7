"""Every bad input to the `asyncfl` command: one line `asyncfl COMMAND: error: …` naming the file or key
and the fix, exit ≠ 0, no traceback, nothing half-written."""

import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from asyncfl.cli import main
from asyncfl.settings.integrity import sealed
from conftest import skip_unless

TRAIN = ["train", "--dataset", "digits", "--rounds", "2", "--local-epochs", "1", "--clients-per-round", "2"]


def error_line(capsys, argv: list[str]) -> str:
    """Run the command; return its error line, after checking it failed with exactly one such line."""
    try:
        code = main(argv)
    except SystemExit as exit:  # argparse: usage, then its one error line
        code = exit.code
    err = capsys.readouterr().err
    assert code not in (0, None), err
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"asyncfl {argv[0]}: error: "), err
    if code != 2:  # argparse's own errors come after its usage lines
        assert len(err.strip().splitlines()) == 1, err
    return line


@pytest.fixture(scope="module")
def partition(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("partition") / "part.npz"
    assert (
        main(["partition", "--dataset", "digits", "--clients", "4", "--alpha", "1", "--seed", "0", "--out", str(path)])
        == 0
    )
    return path


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (
            ["partition", "--dataset", "digits", "--clients", "4", "--alpha", "1", "--seed", "-1", "--out", "p.npz"],
            "argument --seed: must be an integer ≥ 0, got '-1'",
        ),
        (TRAIN + ["--partition", "p.npz", "--out", "o", "--seed", "-3"], "argument --seed: must be an integer ≥ 0"),
        (
            TRAIN + ["--partition", "p.npz", "--out", "o", "--threads", "0"],
            "argument --threads: must be an integer ≥ 1",
        ),
        (TRAIN + ["--partition", "p.npz", "--out", "o", "--local-epochs", str(10**12)], "local_epochs must be ≤"),
        (
            TRAIN + ["--partition", "p.npz", "--out", "o", "--settings", '{"seconds_per_sample": 1e308}'],
            "seconds_per_sample must be ≤",
        ),
    ],
)
def test_bad_numbers_are_refused_before_anything_runs(capsys, tmp_path, monkeypatch, argv, fragment):
    monkeypatch.chdir(tmp_path)
    assert fragment in error_line(capsys, argv)
    assert not (tmp_path / "o").exists()


def test_partition_out_with_another_suffix_is_refused(capsys, tmp_path):
    argv = ["partition", "--dataset", "digits", "--clients", "4", "--alpha", "1", "--seed", "0"]
    line = error_line(capsys, [*argv, "--out", str(tmp_path / "part.json")])
    assert "--out must end in .npz" in line
    assert list(tmp_path.iterdir()) == []


def damaged(source: Path, target: Path, how: str) -> Path:
    content = bytearray(source.read_bytes())
    if how == "truncated":
        content = content[: len(content) // 2]
    elif how == "flipped":
        for i in range(200, len(content), 97):
            content[i] ^= 0xFF
    elif how == "text":
        content = bytearray(b"indices,offsets\n1,2\n")
    elif how == "keyless":
        with zipfile.ZipFile(target, "w") as archive:
            archive.writestr("other.npy", b"")
        return target
    elif how == "out-of-range":
        with np.load(source) as npz:
            indices, offsets, dataset = npz["indices"].copy(), npz["offsets"], npz["dataset"]
        indices[-1] = 10**6
        np.savez(target, indices=indices, offsets=offsets, dataset=dataset)
        return target
    target.write_bytes(bytes(content))
    return target


@pytest.mark.parametrize("how", ["truncated", "flipped", "text", "keyless", "out-of-range"])
def test_bad_partition_file_is_one_line_and_writes_nothing(capsys, tmp_path, partition, how):
    bad = damaged(partition, tmp_path / "bad.npz", how)
    out = tmp_path / "run"
    line = error_line(capsys, [*TRAIN, "--partition", str(bad), "--out", str(out)])
    assert str(bad) in line and "asyncfl partition" in line
    assert not (out / "metrics.csv").exists()


def test_out_that_is_a_file_or_unwritable_is_one_line(capsys, tmp_path, partition):
    existing = tmp_path / "a-file"
    existing.write_text("keep me")
    line = error_line(capsys, [*TRAIN, "--partition", str(partition), "--out", str(existing)])
    assert f"--out {existing} is a file" in line and existing.read_text() == "keep me"
    line = error_line(capsys, [*TRAIN, "--partition", str(partition), "--out", str(existing / "run")])
    assert str(existing / "run") in line and "a file stands where a folder must go" in line


@pytest.mark.parametrize("how", ["garbage", "truncated", "keyless", "pickled"])
def test_bad_checkpoint_is_one_line(capsys, tmp_path, partition, how):
    out = tmp_path / "run"
    out.mkdir()
    checkpoint = out / "checkpoint.pt"
    if how == "garbage":
        checkpoint.write_bytes(os.urandom(3000))
    elif how == "keyless":
        torch.save({"format": 2}, checkpoint)
    else:
        torch.save({"format": 2, "identity": {}, "thing": Path("x")}, checkpoint)
        if how == "truncated":
            checkpoint.write_bytes(checkpoint.read_bytes()[:100])
    line = error_line(capsys, [*TRAIN, "--partition", str(partition), "--out", str(out)])
    assert f"{checkpoint} is not a readable asyncfl checkpoint" in line or "belongs to a run" in line
    assert "weights_only=False" not in line and "delete it" in line


def test_disk_full_is_one_line(capsys, full_disk, partition):
    out = full_disk / "run"
    line = error_line(capsys, [*TRAIN, "--partition", str(partition), "--out", str(out), "--rounds", "40"])
    assert "No space left on device" in line and str(out) in line and "free some space" in line


@pytest.fixture(scope="module")
def finished(partition, tmp_path_factory) -> Path:
    """A finished two-round run: the folder the theory probe, figures and archive read."""
    out = tmp_path_factory.mktemp("finished") / "afl" / "J2" / "seed0"
    assert main([*TRAIN, "--partition", str(partition), "--out", str(out)]) == 0
    return out


def gz_bomb(folder: Path) -> Path:
    """A 60 KB archive that inflates to 60 MB, far past the labels file it claims to be."""
    import gzip

    raw = folder / "MNIST" / "raw"
    raw.mkdir(parents=True)
    (raw / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(b"\0" * 60_000_000))
    return folder


def copy_run(finished: Path, tmp: Path, damage) -> Path:
    import shutil

    run = tmp / "copy" / "afl" / "J2" / "seed0"
    shutil.copytree(finished, run)
    damage(run)
    return run


# Each case: (argv given tmp_path, the finished run and the partition; what the line must name)
HOSTILE = {
    "config not UTF-8": (
        lambda t, r, p: [
            *TRAIN,
            "--partition",
            str(p),
            "--out",
            str(t / "o"),
            "--config",
            str(write(t, b"a: \xff\xfe")),
        ],
        "is not UTF-8",
    ),
    "config nested too deeply": (
        lambda t, r, p: [*TRAIN, "--partition", str(p), "--out", str(t / "o"), "--config", str(write(t, b"[" * 20000))],
        "x.yaml",
    ),
    "empty --out": (lambda t, r, p: [*TRAIN, "--partition", str(p), "--out", ""], "--out is empty"),
    "staleness weights underflow": (
        lambda t, r, p: [
            *TRAIN,
            "--partition",
            str(p),
            "--out",
            str(t / "o"),
            "--rounds",
            "6",
            "--settings",
            '{"concurrency": 4, "staleness": "polynomial", "staleness_a": 5000}',
        ],  # fmt: skip
        "lower staleness_a",
    ),
    "gzip bomb": (lambda t, r, p: ["data", "--dataset", "mnist", "--root", str(gz_bomb(t))], "is corrupt or truncated"),
    "theory: another partition": (lambda t, r, p: theory_argv(t, other(t), r), "is not the partition"),
    "theory: random model.pt": (
        lambda t, r, p: theory_argv(t, p, copy_run(r, t, lambda d: (d / "model.pt").write_bytes(os.urandom(500)))),
        "model.pt is not the file its run wrote",
    ),
    "theory: corrupt run.json": (
        lambda t, r, p: theory_argv(t, p, copy_run(r, t, lambda d: (d / "run.json").write_text("{"))),
        "run.json is not a readable run record",
    ),
    "theory: empty run.json": (
        lambda t, r, p: theory_argv(t, p, copy_run(r, t, lambda d: (d / "run.json").write_text(""))),
        "run.json is not a readable run record",
    ),
    "figures: header-only CSV": (
        lambda t, r, p: figures_argv(t, p, copy_run(r, t, lambda d: (d / "metrics.csv").write_text("round\n"))),
        "metrics.csv is not the file its run wrote",
    ),
    "figures: no AFL run at the reference J": (lambda t, r, p: figures_argv(t, p, r), "no AFL run with J = 5"),
    "bench: --sweep not a workflow config": (
        lambda t, r, p: ["bench", "--quick", "--sweep", str(write(t, b"reference_J: 5\n"))],
        "is not a workflow config",
    ),
    # Identity from the record, not the folder's name (issue: silent wrong results)
    "figures: a run in another algorithm's folder": (
        lambda t, r, p: figures_argv(t, p, moved(r, t, "fedasync/J2/seed0")),
        "fedasync/J2/seed0/run.json records algorithm = 'afl'",
    ),
    "theory: run.json's config edited": (
        lambda t, r, p: theory_argv(t, p, copy_run(r, t, lambda d: edit_record(d, local_epochs=3))),
        "does not match its own record_sha256",
    ),
    "figures: another partition's statistics": (
        lambda t, r, p: figures_argv(t, other(t), r),
        "was trained on a partition none of --partition-stats describes",
    ),
    "figures: statistics beside another .npz": (
        lambda t, r, p: figures_argv(t, stale_statistics(t, p), r),
        "does not describe the",
    ),
    "fetch-record: an id that is not digits": (
        lambda t, r, p: ["fetch-record", "--record", "abc", "--out", str(t / "rec")],
        "a Zenodo record id is 1–20 digits",
    ),
    "fetch-record: an empty id": (
        lambda t, r, p: ["fetch-record", "--record", "", "--out", str(t / "rec")],
        "a Zenodo record id is 1–20 digits",
    ),
    # Mistakes a command can see before it works
    "train: seed 2^64": (lambda t, r, p: train_argv(t, p, "--seed", str(2**64)), "seed must be ≤ 9223372036854775807"),
    "partition: alpha inf": (
        lambda t, r, p: [*partition_argv(t / "q.npz", "--min-size", "0"), "--alpha", "inf"],
        "alpha must be a finite number > 0",
    ),
    "partition: a folder as --partition": (lambda t, r, p: train_argv(t, t), "is a folder; give the FILE.npz"),
    "train: --threads beyond the machine": (
        lambda t, r, p: train_argv(t, p, "--threads", "5000"),
        "the CPUs this process may use",
    ),
    "train: --threads 2^31": (
        lambda t, r, p: train_argv(t, p, "--threads", str(2**31)),
        "the CPUs this process may use",
    ),
    "train: inverse staleness that underflows": (
        lambda t, r, p: train_argv(
            t, p, "--rounds", "6", "--settings", '{"concurrency": 4, "staleness": "inverse", "staleness_a": 1e308}'
        ),
        "the staleness function underflows",
    ),
    # Special files and unbounded input
    "data: --summary /dev/null": (
        lambda t, r, p: ["data", "--dataset", "digits", "--summary", "/dev/null"],
        "--summary /dev/null is a device, pipe or socket",
    ),
    "data: --summary a FIFO": (
        lambda t, r, p: ["data", "--dataset", "digits", "--summary", str(fifo(t))],
        "is a device, pipe or socket",
    ),
    "bench: --json /dev/null": (lambda t, r, p: ["bench", "--quick", "--json", "/dev/null"], "is a device, pipe"),
    "bench: --json a folder": (lambda t, r, p: ["bench", "--quick", "--json", str(t)], "is a folder"),
    "partition: --out onto a FIFO": (lambda t, r, p: partition_argv(fifo(t, "f.npz")), "is a device, pipe or socket"),
    "train: --config /dev/zero": (
        lambda t, r, p: train_argv(t, p, "--config", "/dev/zero"),
        "/dev/zero is not a regular",
    ),
    "train: --config a FIFO without writer": (
        lambda t, r, p: train_argv(t, p, "--config", str(fifo(t))),
        "is not a regular file",
    ),
    "bench: --sweep /dev/zero": (
        lambda t, r, p: ["bench", "--quick", "--sweep", "/dev/zero"],
        "/dev/zero is not a regular file",
    ),
    "train: --config too large": (
        lambda t, r, p: train_argv(t, p, "--config", str(write(t, b"# padding\n" * 500_000))),
        "more than the 4 MiB",
    ),
    "train: a YAML alias bomb": (
        lambda t, r, p: train_argv(t, p, "--config", str(write(t, alias_bomb()))),
        "once its YAML aliases are expanded",
    ),
    "train: a key given twice in a YAML mapping": (
        lambda t, r, p: train_argv(t, p, "--config", str(write(t, b"gamma0: 0.01\nrounds: 2\ngamma0: 0.1\n"))),
        "'gamma0' is given twice in one mapping (line 3)",
    ),
    # Sets of files
    "archive: SHA256SUMS is a folder": (lambda t, r, p: archive_argv(t, r, blocked=True), "SHA256SUMS is a folder"),
    # Records that strict JSON refuses
    "theory: run.json with 1e309": (
        lambda t, r, p: theory_argv(t, p, copy_run(r, t, lambda d: edit_record(d, seal=True, wall_seconds="1e309"))),
        "run.json is not a readable run record",
    ),
}


def train_argv(tmp: Path, partition: Path, *extra: str) -> list[str]:
    return [*TRAIN, "--partition", str(partition), "--out", str(tmp / "o"), *extra]


def partition_argv(out: Path, *extra: str) -> list[str]:
    return [
        "partition",
        "--dataset",
        "digits",
        "--clients",
        "4",
        "--alpha",
        "1",
        "--seed",
        "0",
        "--out",
        str(out),
        *extra,
    ]


def moved(finished: Path, tmp: Path, where: str) -> Path:
    """The finished run's files copied into another run's folder."""
    import shutil

    run = tmp / "elsewhere" / where
    shutil.copytree(finished, run)
    return run


def edit_record(run: Path, seal: bool = False, **config_changes) -> None:
    """Edit run.json by hand: its config (or, with a raw text value, its text), re-sealed when `seal`."""
    record = json.loads((run / "run.json").read_text())
    raw = {key: value for key, value in config_changes.items() if isinstance(value, str)}
    record["config"].update({key: value for key, value in config_changes.items() if key not in raw})
    text = json.dumps(sealed(record) if seal else record)
    for key, value in raw.items():  # a number JSON can spell but a double cannot hold
        text = text.replace(f'"{key}": {json.dumps(record[key])}', f'"{key}": {value}')
    (run / "run.json").write_text(text)


def stale_statistics(tmp: Path, partition: Path) -> Path:
    """The partition's .json beside another .npz: as a kill between the two writes leaves it."""
    folder = tmp / "stale"
    folder.mkdir()
    shutil_copy(partition.with_suffix(".json"), folder / "part.json")
    shutil_copy(other(tmp), folder / "part.npz")
    return folder / "part.npz"


def shutil_copy(source: Path, target: Path) -> None:
    target.write_bytes(source.read_bytes())


def fifo(folder: Path, name: str = "pipe") -> Path:
    os.mkfifo(folder / name)
    return folder / name


def alias_bomb() -> bytes:
    """508 bytes that expand to 9^9 values: each level lists the previous one nine times."""
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    return ("\n".join(levels) + "\n").encode()


def archive_argv(tmp: Path, run: Path, blocked: bool) -> list[str]:
    config = tmp / "archive.yaml"
    settings = {"title": "t", "creators": [{"name": "n"}], "license": "l", "paper": {"title": "p", "authors": "a"}}
    config.write_text(json.dumps({"archive": settings}))
    out = tmp / "archive"
    if blocked:
        (out / "SHA256SUMS").mkdir(parents=True)
    files = [str(run / name) for name in ("metrics.csv", "run.json")]
    return ["archive", "--files", *files, "--config", str(config), "--base", "/", "--out", str(out)]


def theory_argv(folder: Path, partition: Path, run: Path) -> list[str]:
    return ["theory", "--dataset", "digits", "--partition", str(partition), "--out", str(folder), "--run", str(run)]


def figures_argv(folder: Path, partition: Path, run: Path) -> list[str]:
    stats = str(partition.with_suffix(".json"))
    return ["figures", "--partition-stats", stats, "--out", str(folder / "figures"), "--runs", str(run)]


def write(folder: Path, content: bytes) -> Path:
    (folder / "x.yaml").write_bytes(content)
    return folder / "x.yaml"


def other(folder: Path) -> Path:
    path = folder / "other.npz"
    argv = ["partition", "--dataset", "digits", "--clients", "5", "--alpha", "1", "--seed", "1", "--out", str(path)]
    assert main(argv) == 0
    return path


@pytest.mark.parametrize("case", HOSTILE)
def test_hostile_input_is_one_line_naming_it(capsys, tmp_path, partition, finished, case):
    make_argv, expected = HOSTILE[case]
    argv = make_argv(tmp_path, finished, partition)
    capsys.readouterr()
    line = error_line(capsys, argv)
    assert expected in line, line


def test_a_run_records_the_cpu_kernels_it_trained_with(finished):
    """Another kernel set (AVX2, AVX-512) sums in another order: run.json says which one made the bytes."""
    assert json.loads((finished / "run.json").read_text())["cpu_kernels"] == torch.backends.cpu.get_cpu_capability()


def test_theory_trains_its_probe_with_the_runs_own_thread_count(capsys, tmp_path, partition, finished):
    """A sum split over other threads rounds differently: the probe takes the count run.json records."""
    recorded = json.loads((finished / "run.json").read_text())["torch_threads"]
    before = torch.get_num_threads()
    torch.set_num_threads(recorded + 1)
    try:
        assert main(theory_argv(tmp_path, partition, finished)) == 0
        assert torch.get_num_threads() == recorded
    finally:
        torch.set_num_threads(before)


def test_an_archive_counts_a_file_given_twice_once(capsys, tmp_path, finished):
    argv = archive_argv(tmp_path, finished, blocked=False)
    files = argv.index("--files")
    argv[files + 1 : files + 1] = [argv[files + 1]]  # metrics.csv given twice, as overlapping globs give it
    assert main(argv) == 0, capsys.readouterr().err
    assert "3 files" in capsys.readouterr().out  # metrics.csv, run.json and the config


@pytest.mark.subprocess
def test_a_fetch_that_fails_leaves_no_record_folder(capsys, tmp_path):
    """Offline, zenodo_get fails: no (empty) folder is left that Snakemake would take as the fetched record."""
    import shutil

    skip_unless(shutil.which("zenodo_get") is not None, "zenodo_get is not on PATH (make test puts .venv/bin there)")
    out = tmp_path / "zenodo" / "99999999999999999"
    line = error_line(capsys, ["fetch-record", "--record", "99999999999999999", "--out", str(out)])
    assert "zenodo record 99999999999999999" in line
    assert not out.exists() and list((tmp_path / "zenodo").iterdir() if (tmp_path / "zenodo").exists() else []) == []


def test_train_help_lists_the_clients_world_with_its_defaults(capsys):
    """The system model's one group of settings, each with its default, where a user looks first."""
    from asyncfl.settings.config import SYSTEM_MODEL, TrainConfig

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for key in SYSTEM_MODEL:
        default = TrainConfig.__dataclass_fields__[key].default
        shown = "null" if default is None else str(default).lower() if isinstance(default, bool) else str(default)
        assert f"{key}={shown}" in text, key


@pytest.mark.parametrize("out", ["", "."])
def test_the_current_folder_as_out_is_refused_and_nothing_there_is_written_or_removed(
    capsys, tmp_path, monkeypatch, partition, out
):
    """The refusal once wrote its cause into ./failed.json (the repository's root, from the tests), and a
    first attempt removed a ./failed.json of the user's before it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "failed.json").write_text("mine\n")
    before = sorted(path.name for path in tmp_path.iterdir())
    line = error_line(capsys, [*TRAIN, "--partition", str(partition), "--out", out])
    assert "--out is empty or the current folder" in line
    assert sorted(path.name for path in tmp_path.iterdir()) == before
    assert (tmp_path / "failed.json").read_text() == "mine\n"


@pytest.mark.parametrize("inside", [".", "figures", "../seed0/figures"])
def test_an_out_inside_a_run_folder_the_command_reads_is_refused_and_the_run_left_as_it_was(capsys, tmp_path, inside):
    """`asyncfl figures` or `stragglers` writing into a run it reads would add files the run's checks and
    the archive take for the run's own: refused in one line before anything is read or written."""
    run = tmp_path / "afl" / "J5" / "seed0"
    run.mkdir(parents=True)
    (run / "run.json").write_text("{}")
    out = run / inside
    common = ["--runs", str(run), "--partition-stats", str(tmp_path / "p.json"), "--out", str(out)]
    straggler_options = ["--target-accuracy", "0.8", "--virtual-time", "60", "--severities", '{"slow0": {}}']
    for command in (["figures", *common], ["stragglers", *common, *straggler_options]):
        assert main(command) == 1
        error = capsys.readouterr().err
        assert f"--out {out} is inside the run folder {run}, which this command reads" in error
        assert sorted(path.name for path in tmp_path.rglob("*")) == ["J5", "afl", "run.json", "seed0"]
    grid = [
        "--grid",
        '{"afl": [{"gamma0": 0.01}, {"gamma0": 0.1}]}',
        "--target-accuracy",
        "0.8",
        "--virtual-time",
        "60",
    ]
    select = ["select", *common[:4], *grid, "--out", str(tmp_path / "tuning"), "--chosen", str(out / "chosen.json")]
    assert main(select) == 1
    assert f"--chosen {out / 'chosen.json'} is inside the run folder {run}" in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["J5", "afl", "run.json", "seed0"]
