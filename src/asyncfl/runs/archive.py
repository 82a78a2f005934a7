"""A reproducible archive of a workflow's results, its checksums, provenance and Zenodo metadata.

The tarball is normalised (sorted members, zero mtimes, uid/gid 0, fixed modes, a
gzip header without timestamp or file name), so the same inputs give the same bytes
and the same SHA256SUMS.
"""

import gzip
import hashlib
import io
import os
import platform
import shutil
import subprocess
import tarfile
from datetime import datetime
from pathlib import Path

from asyncfl.files import atomic_path, publish_folder, sha256, write_json
from asyncfl.planning.layout import ARCHIVE_FILES, CHECKSUMS, PROVENANCE, RUN_LOGS, RUN_RECORD, TARBALL, ZENODO
from asyncfl.runs.provenance import git, machine, package_versions
from asyncfl.runs.record import read_run_record, verify_run_files
from asyncfl.settings.errors import InputError
from asyncfl.settings.integrity import finite_number
from asyncfl.settings.yaml_files import read_yaml

ARCHIVE_KEYS = ("title", "creators", "license", "paper")


def build_archive(members: dict[str, Path], tarball: Path) -> dict[str, str]:
    """Write `tarball` with each file under its member name; return SHA-256 by member name."""
    checksums = {}
    with atomic_path(tarball) as tmp, open(tmp, "wb") as raw:
        zipped = gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0)
        with zipped, tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name, path in sorted(members.items()):
                content = path.read_bytes()
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(content), 0o644, 0
                tar.addfile(info, io.BytesIO(content))
                checksums[name] = hashlib.sha256(content).hexdigest()
    return checksums


def write_checksums(path: Path, tarball: Path, members: dict[str, str]) -> None:
    """SHA256SUMS in `sha256sum -c` format: the tarball, then every member, all relative to the folder
    that holds the tarball, so one `sha256sum -c SHA256SUMS` there, after extracting it, checks them all
    (docs/outputs.md "Outputs")."""
    lines = [f"{sha256(tarball)}  {Path(tarball).name}"]
    lines += [f"{digest}  {name}" for name, digest in members.items()]
    with atomic_path(path) as tmp:
        tmp.write_text("\n".join(lines) + "\n")


def provenance(runs: list[Path], command: str) -> dict:
    """Where and with what the results were made: git commit, packages, hardware, times, command line."""
    summaries = [read_run_record(Path(r).parent) for r in runs]
    return {
        "git_commit": git("rev-parse", "HEAD"),
        "git_dirty": bool(git("status", "--porcelain")),
        "packages": package_versions(),
        "python": platform.python_version(),
        "hardware": {
            **machine(),
            "run_devices": sorted({s.get("device", "?") for s in summaries}),
            "run_hosts": sorted({s.get("hostname", "?") for s in summaries}),
            # the kernels torch ran on (AVX2, AVX512: each rounds its own way, docs/outputs.md)
            "run_cpu_kernels": sorted({str(s.get("cpu_kernels", "?")) for s in summaries}),
        },
        "runs": len(summaries),
        "started_at": min((str(s.get("started_at")) for s in summaries), default=None),
        "finished_at": max((str(s.get("finished_at")) for s in summaries), default=None),
        # the clock from the first run's start to the last run's end, and the runs' own walls summed (runs
        # trained side by side overlap, so the sum can be many times the span)
        "training_span_seconds": span_seconds(summaries),
        "runs_wall_seconds_summed": round(
            sum(float(s["wall_seconds"]) for s in summaries if finite_number(s.get("wall_seconds"))), 3
        ),
        "command": command,
    }


def span_seconds(summaries: list[dict]) -> float | None:
    """Seconds from the earliest run's start to the latest run's end, from run.json's UTC times (None
    where a run lacks them or they do not parse)."""
    try:
        starts = [datetime.fromisoformat(str(s["started_at"])) for s in summaries]
        ends = [datetime.fromisoformat(str(s["finished_at"])) for s in summaries]
    except (KeyError, ValueError):
        return None
    if any(t.tzinfo is None for t in starts + ends):  # naive and aware times do not compare
        return None
    return (max(ends) - min(starts)).total_seconds() if summaries else None


def zenodo_metadata(settings: dict) -> dict:
    """.zenodo.json for a deposit of the archive; `settings` is the config's `archive` section."""
    paper = settings["paper"]
    metadata = {
        "title": settings["title"],
        "upload_type": "dataset",
        "description": settings.get("description", ""),
        "creators": settings["creators"],
        "license": settings["license"],
        "keywords": settings.get("keywords", []),
        "references": [f"{paper['authors']}. {paper['title']}."],
    }
    if paper.get("identifier"):
        metadata["related_identifiers"] = [
            {"identifier": paper["identifier"], "relation": "isSupplementTo", "resource_type": "publication-article"}
        ]
    return metadata


def member_names(files: list[Path], configs: list[Path], base: Path) -> dict[str, Path]:
    """Each file's name in the archive: its path under `base` as given (a symlink keeps its own name);
    configs under config/. Two files with one name are refused, never overwritten."""
    base_path = os.path.abspath(base)
    named = []
    for path in files:
        relative = os.path.relpath(os.path.abspath(path), base_path)
        if relative == os.curdir or relative.startswith(os.pardir):
            raise InputError(
                f"{path} is outside --base {base}; archive members are named by their path under --base, "
                "so pass a --base that holds every file"
            )
        if any(character in relative for character in "\n\r\\"):
            raise InputError(
                f"{path!r} has a newline or backslash in its name, which SHA256SUMS cannot list; rename it"
            )
        named.append((Path(relative).as_posix(), Path(path)))
    named += [(f"config/{Path(path).name}", Path(path)) for path in configs]
    members: dict[str, Path] = {}
    for name, path in named:
        if name in members:
            raise InputError(f"{members[name]} and {path} would both be archived as {name}; rename one of them")
        members[name] = path
    return members


def archive_results(
    files: list[Path], configs: list[Path], base: Path, out: Path, settings: dict, command: str
) -> tuple[Path, int]:
    """Everything `asyncfl archive` writes into `out`, checked before the first write and published as
    one set (`files.publish_folder`); returns the tarball and its number of members. A file given
    twice (overlapping globs) is archived once."""
    files, configs = unique_paths(files), unique_paths(configs)
    missing = [str(f) for f in [*files, *configs] if not Path(f).is_file()]
    if missing:
        raise InputError(f"cannot archive missing files: {', '.join(missing[:3])}{' …' if len(missing) > 3 else ''}")
    members = member_names(files, configs, base)
    records = [Path(f) for f in files if Path(f).name == RUN_RECORD]
    archived = {Path(f).resolve() for f in files}
    for record in records:  # every run's CSVs checked against its run.json before anything is written
        verify_run_files(record.parent, tuple(n for n in RUN_LOGS if (record.parent / n).resolve() in archived))
    metadata, made_with = zenodo_metadata(settings), provenance(records, command)

    def write(folder: Path) -> None:
        checksums = build_archive(members, folder / TARBALL)
        write_checksums(folder / CHECKSUMS, folder / TARBALL, checksums)
        write_json(folder / PROVENANCE, made_with)
        write_json(folder / ZENODO, metadata)

    publish_folder(Path(out), ARCHIVE_FILES, write)
    return Path(out) / TARBALL, len(members)


def unique_paths(paths: list[Path]) -> list[Path]:
    """`paths` in order, each path once (`a/../b` and `b` are one path)."""
    seen: set[str] = set()
    unique = []
    for path in paths:
        key = os.path.abspath(path)  # a symlink is its own member (docs/outputs.md "Outputs"), so not resolved
        if key not in seen:
            seen.add(key)
            unique.append(Path(path))
    return unique


def archive_settings(configs: list[Path]) -> dict:
    """The metadata of the archive: the configs' `archive` sections merged, checked before anything is written."""
    settings: dict = {}
    for path in configs:
        loaded = read_yaml(path) or {}
        section = loaded.get("archive") if isinstance(loaded, dict) else None
        if section is not None and not isinstance(section, dict):
            raise InputError(f"{path}: archive must be a mapping (title, creators, license, paper), not {section!r}")
        settings.update(section or {})
    missing = [key for key in ARCHIVE_KEYS if key not in settings]
    paper = settings.get("paper")
    if not missing and (not isinstance(paper, dict) or not {"title", "authors"} <= set(paper)):
        missing = ["paper.title", "paper.authors"]
    if missing:
        names = ", ".join(str(c) for c in configs)
        raise InputError(
            f"{names}: the archive metadata lacks {', '.join(missing)}; add an archive: section "
            "(title, creators, license, paper: {title, authors}) as in config/config.yaml"
        )
    return settings


def archive_from_configs(
    files: list[Path], configs: list[Path], base: Path, out: Path, command: str
) -> tuple[Path, int]:
    """`asyncfl archive`: the metadata comes from the workflow configs' `archive` sections."""
    return archive_results(files, configs, base, out, archive_settings(configs), command)


def fetch_record(record: str, out: Path) -> None:
    """Download a published Zenodo record with zenodo_get, which checks every file's MD5, into a
    staging folder that becomes `out` only when the whole record arrived: a failed or empty fetch
    leaves no `out`, so Snakemake never takes it for a fetched record."""
    if not (record.isascii() and record.isdigit()):
        raise InputError(f"--record {record!r}: a Zenodo record id is digits only (zenodo.org/records/ID)")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"{out} already holds files; give an empty or new folder for record {record}")
    zenodo_get = shutil.which("zenodo_get")
    if zenodo_get is None:
        raise InputError("zenodo_get not found; pip install zenodo-get")
    staging = out.with_name(f".{out.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        result = subprocess.run(
            [zenodo_get, "--record", record, "--output-dir", str(staging), "--md5", "--verbosity", "1"],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            reason = (result.stderr.strip() or result.stdout.strip() or "no output").splitlines()[-1]
            raise InputError(f"zenodo record {record} could not be fetched ({reason}); offline? run it on a login node")
        if not staging.is_dir() or not any(staging.iterdir()):
            raise InputError(f"zenodo record {record} gave no files; check the record id")
        out.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging, out)  # onto nothing or an empty folder
    finally:
        shutil.rmtree(staging, ignore_errors=True)
