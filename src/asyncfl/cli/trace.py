"""`asyncfl trace import`: a published availability trace (FedScale, FLASH) as asyncfl's CSV."""

import argparse
from pathlib import Path

from asyncfl.cli.arguments import POSITIVE, Commands, at_least
from asyncfl.files import atomic_path
from asyncfl.settings.trace_import import FORMATS as TRACE_FORMATS


def cmd_trace_import(args: argparse.Namespace) -> None:
    """Convert a published trace; the CSV is checked as `availability: trace` reads it before it is kept."""
    from asyncfl.settings.trace_import import import_trace, trace_csv
    from asyncfl.settings.traces import read_trace

    imported = import_trace(args.source, args.format, args.clients, args.horizon)
    with atomic_path(args.out) as tmp:
        tmp.write_text(trace_csv(imported.periods))
        periods = read_trace(tmp, args.clients)  # import_trace's checks make this pass; a failure is a bug
    skipped = f"; {imported.skipped} empty periods of the source left out" if imported.skipped else ""
    print(f"{sum(map(len, periods.values()))} online periods of {args.clients} clients → {args.out}{skipped}")


def register(commands: Commands) -> None:
    """The trace command and its import subcommand."""
    trace = commands.add_parser("trace", help="availability traces for availability: trace")
    trace_commands = trace.add_subparsers(dest="trace_command", required=True)
    imported = trace_commands.add_parser(
        "import",
        help="convert a published availability trace (FedScale, FLASH) to asyncfl's client,start,end CSV",
        description="The formats, and how each is read: docs/design.md, its section on the clients' world.",
    )
    imported.add_argument("source", type=Path, help="the trace file as its project publishes it")
    imported.add_argument("--format", choices=TRACE_FORMATS, required=True)
    imported.add_argument(
        "--clients", type=at_least(1), required=True, help="C: the first C clients, in sorted id order"
    )
    imported.add_argument("--horizon", type=POSITIVE, help="virtual seconds to keep (a FedScale trace repeats to it)")
    imported.add_argument("--out", type=Path, required=True, help="the CSV to write")
    imported.set_defaults(run=cmd_trace_import)
