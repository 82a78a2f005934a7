"""The `asyncfl` command: every pipeline step runs by hand with the same result as under Snakemake.

One module per group of commands, each parser beside its handler (`register`); this one builds the
parser from them and turns a user's error into one line (`main`)."""

import argparse
import errno
import sys
from collections.abc import Sequence
from pathlib import Path

from asyncfl.cli import analysis, benchmark, data, results, trace, train, tune
from asyncfl.cli.processes import die_with_parent
from asyncfl.settings.errors import InputError

GROUPS = (data, train, tune, analysis, trace, results, benchmark)  # in the order `asyncfl --help` lists them


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="asyncfl", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        die_with_parent()  # a training child of `--processes`: it stops when its parent does
        outputs = {option: getattr(args, option.strip("-"), None) for option in ("--out", "--chosen")}
        check_outputs_apart(outputs, getattr(args, "runs", None) or [])
        args.run(args)
    except InputError as error:
        print(f"asyncfl {args.command}: error: {error}", file=sys.stderr)
        return 1
    except OSError as error:  # the disk, not the code: full, read-only, a file where a folder goes
        print(f"asyncfl {args.command}: error: {os_error_line(error)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(
            f"asyncfl {args.command}: interrupted; run the same command again (training resumes from its last "
            "checkpoint, every other step starts afresh; no output is left half-written)",
            file=sys.stderr,
        )
        return 130
    return 0


def check_outputs_apart(outputs: dict[str, Path | None], runs: list[Path]) -> None:
    """A command that reads run folders writes nowhere inside one (its `--out`, `select`'s `--chosen`):
    its figures and tables would join the run's own files, which the run's checks and the archive take
    for the run's."""
    for option, output in outputs.items():
        for run in runs:
            if output is not None and output.resolve().is_relative_to(run.resolve()):
                raise InputError(
                    f"{option} {output} is inside the run folder {run}, which this command reads; give a path "
                    "outside the runs"
                )


def os_error_line(error: OSError) -> str:
    """An operating-system error as one line: the file, what went wrong, what to do."""
    where = f"{error.filename}: " if error.filename else ""
    fixes = {
        errno.ENOSPC: "free some space and run the same command again (a training run resumes from its checkpoint)",
        errno.EDQUOT: "free some quota and run the same command again",
        errno.EACCES: "choose a path you can write to",
        errno.EROFS: "choose a path on a writable filesystem",
        errno.ENOTDIR: "a file stands where a folder must go; choose another path",
        errno.EEXIST: "a file stands where a folder must go; choose another path",
    }
    fix = fixes.get(error.errno or 0, "check the path and run the same command again")
    return f"{where}{error.strerror or error}; {fix}"
