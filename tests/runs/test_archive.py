"""The archive: normalised tarball, checksums, Zenodo metadata."""

import hashlib
import json
import subprocess
import tarfile

import pytest
import yaml

from asyncfl.cli import main
from asyncfl.runs.archive import archive_results, span_seconds, zenodo_metadata
from asyncfl.runs.provenance import processor_name
from asyncfl.runs.record import FORMAT_KEY, RUN_FOLDER_FORMAT
from asyncfl.settings.integrity import sealed

SETTINGS = {
    "title": "results",
    "license": "cc-by-4.0",
    "creators": [{"name": "A. Researcher"}],
    "paper": {"title": "A paper", "authors": "A. Author", "identifier": "10.1234/example"},
}


def make_results(root):
    (root / "results/run").mkdir(parents=True)
    (root / "results/run/metrics.csv").write_text("round,train_loss\n1,0.5\n")
    (root / "results/run/run.json").write_text(
        json.dumps(
            sealed(
                {
                    "started_at": "2026-01-01T00:00:00+00:00",
                    "finished_at": "2026-01-01T00:01:00+00:00",
                    "wall_seconds": 60.0,
                    "config": {},
                    FORMAT_KEY: RUN_FOLDER_FORMAT,
                    "sha256": {"metrics.csv": hashlib.sha256(b"round,train_loss\n1,0.5\n").hexdigest()},
                }
            )
        )
    )
    (root / "quick.yaml").write_text("reference_J: 5\n")
    return [root / "results/run/metrics.csv", root / "results/run/run.json"], [root / "quick.yaml"]


def test_same_inputs_give_the_same_bytes(tmp_path):
    for name in ("a", "b"):  # different folders, times and process paths
        files, configs = make_results(tmp_path / name)
        archive_results(files, configs, tmp_path / name, tmp_path / name / "out", SETTINGS, "snakemake")
    first, second = (tmp_path / n / "out/asyncfl-results.tar.gz" for n in ("a", "b"))
    assert first.read_bytes() == second.read_bytes()
    assert (tmp_path / "a/out/SHA256SUMS").read_text() == (tmp_path / "b/out/SHA256SUMS").read_text()
    with tarfile.open(first) as tar:
        assert tar.getnames() == ["config/quick.yaml", "results/run/metrics.csv", "results/run/run.json"]
        content = tar.extractfile("results/run/metrics.csv").read()
    assert (
        f"{hashlib.sha256(content).hexdigest()}  results/run/metrics.csv" in (tmp_path / "a/out/SHA256SUMS").read_text()
    )
    provenance = json.loads((tmp_path / "a/out/provenance.json").read_text())
    assert provenance["runs"] == 1 and provenance["command"] == "snakemake"
    assert provenance["training_span_seconds"] == 60.0 and provenance["runs_wall_seconds_summed"] == 60.0
    assert provenance["hardware"]["run_cpu_kernels"] == ["?"]  # the record names none
    assert provenance["hardware"]["processor"]  # never the empty string Linux's platform.processor() gives


def test_the_span_is_the_clock_and_the_sum_is_named_as_a_sum():
    """Two runs side by side for a minute: a one-minute span, two minutes of runs' walls summed."""
    records = [
        {"started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:01:00+00:00"},
        {"started_at": "2026-01-01T00:00:10+00:00", "finished_at": "2026-01-01T00:00:50+00:00"},
    ]
    assert span_seconds(records) == 60.0
    assert span_seconds([{"started_at": "garbage", "finished_at": "2026-01-01T00:00:50+00:00"}]) is None
    assert span_seconds([{"started_at": "2026-01-01T00:00:10", "finished_at": "2026-01-01T00:00:50+00:00"}]) is None
    assert span_seconds([{"finished_at": "2026-01-01T00:00:50+00:00"}]) is None


def test_the_processor_is_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9B14\nflags\t: avx2\n")
    assert processor_name(str(cpuinfo)) == "AMD EPYC 9B14"
    assert processor_name(str(tmp_path / "missing"))  # falls back to what platform says


def test_zenodo_metadata_relates_the_paper():
    metadata = zenodo_metadata(SETTINGS)
    assert metadata["related_identifiers"] == [
        {"identifier": "10.1234/example", "relation": "isSupplementTo", "resource_type": "publication-article"}
    ]
    assert metadata["upload_type"] == "dataset" and metadata["creators"] == [{"name": "A. Researcher"}]


def archive_cli(capsys, root, *extra):
    files, configs = make_results(root)
    (root / "quick.yaml").write_text(yaml.safe_dump({"archive": SETTINGS}))
    argv = ["archive", "--files", *map(str, files), *extra, "--base", str(root), "--out", str(root / "out")]
    code = main([*argv, "--config", str(configs[0])] if "--config" not in extra else argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_symlink_inside_base_is_its_own_member(tmp_path, capsys):
    (tmp_path / "results/link.csv").parent.mkdir(parents=True)
    (tmp_path / "results/link.csv").symlink_to(tmp_path / "results/run/metrics.csv")
    code, out, err = archive_cli(capsys, tmp_path, str(tmp_path / "results/link.csv"))
    assert code == 0, err
    assert "4 files" in out
    with tarfile.open(tmp_path / "out/asyncfl-results.tar.gz") as tar:
        assert {"results/link.csv", "results/run/metrics.csv"} <= set(tar.getnames())


def test_two_configs_with_one_name_are_refused(tmp_path, capsys):
    for folder in ("a", "b"):
        (tmp_path / "elsewhere" / folder).mkdir(parents=True)
        (tmp_path / "elsewhere" / folder / "c.yaml").write_text(yaml.safe_dump({"archive": SETTINGS}))
    root = tmp_path / "work"
    root.mkdir()
    configs = [str(tmp_path / "elsewhere" / f / "c.yaml") for f in ("a", "b")]
    code, _, err = archive_cli(capsys, root, "--config", *configs)
    assert code == 1 and "would both be archived as config/c.yaml" in err
    assert not (root / "out").exists()


def test_config_without_archive_section_writes_nothing(tmp_path, capsys):
    files, _ = make_results(tmp_path)
    (tmp_path / "bare.yaml").write_text("reference_J: 5\n")
    argv = ["archive", "--files", *map(str, files), "--config", str(tmp_path / "bare.yaml")]
    assert main([*argv, "--base", str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("asyncfl archive: error: ") and "lacks title, creators, license, paper" in err
    assert not (tmp_path / "out").exists()


def test_file_outside_base_is_one_line(tmp_path, capsys):
    outside = tmp_path / "outside.csv"
    outside.write_text("x\n")
    root = tmp_path / "work"
    root.mkdir()
    code, _, err = archive_cli(capsys, root, str(outside))
    assert code == 1 and f"{outside} is outside --base" in err and len(err.strip().splitlines()) == 1


def test_command_option_keeps_the_error_prefix(tmp_path, capsys):
    code, _, err = archive_cli(capsys, tmp_path, str(tmp_path / "missing.csv"), "--command", "snakemake --cores 2")
    assert code == 1 and err.startswith("asyncfl archive: error: cannot archive missing files")


@pytest.mark.subprocess
def test_one_sha256sum_check_verifies_everything(tmp_path, capsys):
    code, _, err = archive_cli(capsys, tmp_path)
    assert code == 0, err
    out = tmp_path / "out"
    with tarfile.open(out / "asyncfl-results.tar.gz") as tar:
        tar.extractall(out, filter="data")
    check = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=out, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count(": OK") == len((out / "SHA256SUMS").read_text().splitlines()) == 4


def test_a_run_csv_edited_after_its_run_is_never_archived(tmp_path, capsys):
    assert archive_cli(capsys, tmp_path)[0] == 0
    shipped = {name: (tmp_path / "out" / name).read_bytes() for name in ("asyncfl-results.tar.gz", "SHA256SUMS")}
    (tmp_path / "results/run/metrics.csv").write_text("round,train_loss\n1,0.1\n")
    files = [tmp_path / "results/run/metrics.csv", tmp_path / "results/run/run.json"]
    argv = ["archive", "--files", *map(str, files), "--base", str(tmp_path), "--out", str(tmp_path / "out")]
    code = main([*argv, "--config", str(tmp_path / "quick.yaml")])
    err = capsys.readouterr().err
    assert code == 1 and "metrics.csv is not the file its run wrote" in err and len(err.strip().splitlines()) == 1
    assert {name: (tmp_path / "out" / name).read_bytes() for name in shipped} == shipped  # nothing replaced


@pytest.mark.parametrize("record", ["{", "[]", '{"sha256": {}}'])
def test_a_corrupt_run_json_fails_before_anything_is_written(tmp_path, capsys, record):
    files, _ = make_results(tmp_path)
    (tmp_path / "results/run/run.json").write_text(record)
    (tmp_path / "quick.yaml").write_text(yaml.safe_dump({"archive": SETTINGS}))
    argv = ["archive", "--files", *map(str, files), "--base", str(tmp_path), "--out", str(tmp_path / "out")]
    code = main([*argv, "--config", str(tmp_path / "quick.yaml")])
    err = capsys.readouterr().err
    assert code == 1 and "run.json" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("section", ["archive: [1, 2]\n", "archive: null\n", "archive: 'text'\n"])
def test_an_archive_section_that_is_not_a_mapping_is_one_line(tmp_path, capsys, section):
    files, _ = make_results(tmp_path)
    (tmp_path / "odd.yaml").write_text(section)
    argv = ["archive", "--files", *map(str, files), "--config", str(tmp_path / "odd.yaml")]
    assert main([*argv, "--base", str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("asyncfl archive: error: ") and "odd.yaml" in err and len(err.strip().splitlines()) == 1


def test_a_newline_in_a_member_name_is_refused(tmp_path, capsys):
    odd = tmp_path / "results" / "two\nlines.csv"
    odd.parent.mkdir(parents=True)
    odd.write_text("x\n")
    code, _, err = archive_cli(capsys, tmp_path, str(odd))
    assert code == 1 and "newline or backslash" in err and not (tmp_path / "out").exists()
