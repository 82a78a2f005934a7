"""`asyncfl archive` and `asyncfl fetch-record`: results packed for Zenodo, and a published record fetched."""

import argparse
from pathlib import Path

from asyncfl.cli.arguments import Commands
from asyncfl.runs.archive import archive_from_configs, fetch_record


def record_id(text: str) -> str:
    """argparse type: a Zenodo record id, digits only (as zenodo.org/records/ID names it)."""
    if not (text.isascii() and text.isdigit() and len(text) <= 20):
        raise argparse.ArgumentTypeError(f"a Zenodo record id is 1–20 digits, got {text!r}")
    return text


def cmd_archive(args: argparse.Namespace) -> None:
    """Pack results into a reproducible tarball with checksums, provenance and Zenodo metadata."""
    tarball, members = archive_from_configs(args.files, args.config, args.base, args.out, args.command_line)
    print(f"{members} files → {tarball}")


def cmd_fetch_record(args: argparse.Namespace) -> None:
    """Download a published Zenodo record with zenodo_get, which checks every file's MD5."""
    fetch_record(args.record, args.out)
    print(f"zenodo record {args.record} → {args.out} (MD5s verified)")


def register(commands: Commands) -> None:
    """The archive and fetch-record commands."""
    archive = commands.add_parser("archive", help="tarball, SHA256SUMS, provenance.json and .zenodo.json")
    archive.add_argument("--files", type=Path, nargs="+", required=True, help="files to pack")
    archive.add_argument(
        "--config",
        type=Path,
        nargs="+",
        required=True,
        help="workflow config files: packed too, their `archive` section gives the metadata",
    )
    archive.add_argument("--base", type=Path, default=Path("."), help="member names are relative to this")
    archive.add_argument(
        "--command", dest="command_line", default="", help="the command line that produced the results"
    )
    archive.add_argument("--out", type=Path, required=True)
    archive.set_defaults(run=cmd_archive)

    fetch = commands.add_parser("fetch-record", help="download a published Zenodo record (MD5-checked)")
    fetch.add_argument("--record", required=True, type=record_id, help="the record's id: digits")
    fetch.add_argument("--out", type=Path, required=True)
    fetch.set_defaults(run=cmd_fetch_record)
