"""A reproducible archive of a workflow's results, its checksums, provenance and Zenodo metadata.

The tarball is normalised (sorted members, zero mtimes, uid/gid 0, fixed modes, a
gzip header without timestamp or file name), so the same inputs give the same bytes
and the same SHA256SUMS.
"""

import gzip
import hashlib
import io
import json
import platform
import shutil
import subprocess
import tarfile
from pathlib import Path

import yaml

from asyncfl.errors import InputError
from asyncfl.files import atomic_path, sha256, write_json
from asyncfl.provenance import git, machine, package_versions


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
    """SHA256SUMS in `sha256sum -c` format: the tarball, then every member."""
    lines = [f"{sha256(tarball)}  {Path(tarball).name}"]
    lines += [f"{digest}  {name}" for name, digest in members.items()]
    with atomic_path(path) as tmp:
        tmp.write_text("\n".join(lines) + "\n")


def provenance(runs: list[Path], command: str) -> dict:
    """Where and with what the results were made: git commit, packages, hardware, times, command line."""
    summaries = [json.loads(Path(r).read_text()) for r in runs]
    return {
        "git_commit": git("rev-parse", "HEAD"),
        "git_dirty": bool(git("status", "--porcelain")),
        "packages": package_versions(),
        "python": platform.python_version(),
        "hardware": {
            **machine(),
            "run_devices": sorted({s.get("device", "?") for s in summaries}),
            "run_hosts": sorted({s.get("hostname", "?") for s in summaries}),
        },
        "runs": len(summaries),
        "started_at": min((s["started_at"] for s in summaries), default=None),
        "finished_at": max((s["finished_at"] for s in summaries), default=None),
        "training_wall_seconds": round(sum(s["wall_seconds"] for s in summaries), 3),
        "command": command,
    }


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


def archive_results(
    files: list[Path], configs: list[Path], base: Path, out: Path, settings: dict, command: str
) -> Path:
    """Everything `asyncfl archive` writes into `out`: results under their paths relative to `base`,
    config files under config/."""
    missing = [str(f) for f in [*files, *configs] if not Path(f).is_file()]
    if missing:
        raise InputError(f"cannot archive missing files: {', '.join(missing[:3])}{' …' if len(missing) > 3 else ''}")
    members = {Path(f).resolve().relative_to(Path(base).resolve()).as_posix(): Path(f) for f in files}
    members.update({f"config/{Path(c).name}": Path(c) for c in configs})
    tarball = Path(out) / "asyncfl-results.tar.gz"
    checksums = build_archive(members, tarball)
    write_checksums(Path(out) / "SHA256SUMS", tarball, checksums)
    write_json(Path(out) / "provenance.json", provenance([f for f in files if Path(f).name == "run.json"], command))
    write_json(Path(out) / ".zenodo.json", zenodo_metadata(settings))
    return tarball


def archive_from_configs(files: list[Path], configs: list[Path], base: Path, out: Path, command: str) -> Path:
    """`asyncfl archive`: the metadata comes from the workflow configs' `archive` sections."""
    settings: dict = {}
    for path in configs:
        settings.update(yaml.safe_load(Path(path).read_text()).get("archive", {}))
    return archive_results(files, configs, base, out, settings, command)


def fetch_record(record: str, out: Path) -> None:
    """Download a published Zenodo record with zenodo_get, which checks every file's MD5."""
    zenodo_get = shutil.which("zenodo_get")
    if zenodo_get is None:
        raise InputError("zenodo_get not found; pip install zenodo-get")
    result = subprocess.run(
        [zenodo_get, "--record", record, "--output-dir", str(out), "--md5", "--verbosity", "1"],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        reason = (result.stderr.strip() or result.stdout.strip() or "no output").splitlines()[-1]
        raise InputError(f"zenodo record {record} could not be fetched ({reason}); offline? run it on a login node")
