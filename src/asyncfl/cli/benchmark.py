"""`asyncfl bench`: the trainers' speeds, the engine's cost, the paper round and the sweep's projection."""

import argparse
from pathlib import Path

from asyncfl.cli.arguments import Commands, at_least
from asyncfl.files import write_json
from asyncfl.settings.errors import InputError
from asyncfl.settings.integrity import check_output
from asyncfl.settings.names import DEVICES
from asyncfl.settings.populations import PROFILES

DEFAULT_SWEEP = Path("config/config.yaml")  # --sweep's where present, for the measurements that read it
# Each measurement `asyncfl bench` makes (the flag that chooses it; none: the trainers' speeds) and the
# options it reads: an option given to one that does not read it would be dropped without a word, so it
# is refused
READS = {
    None: ("--quick", "--sweep", "--json"),
    "--engine": ("--quick", "--scales", "--json"),
    "--profile-cost": ("--json",),
    "--together": ("--quick", "--profile", "--sweep", "--json"),
    "--costs": ("--quick",),
}
OPTIONS = ("--quick", "--scales", "--profile", "--sweep", "--json")


def check_options(args: argparse.Namespace) -> None:
    """One measurement a call, and no option it does not read (one line naming both)."""
    chosen = [flag for flag in READS if flag and getattr(args, attribute(flag)) not in (None, False)]
    if len(chosen) > 1:
        raise InputError(f"{chosen[0]} and {chosen[1]} are separate measurements; run asyncfl bench once for each")
    mode = chosen[0] if chosen else None
    for option in OPTIONS:
        if getattr(args, attribute(option)) not in (None, False) and option not in READS[mode]:
            readers = " or ".join(flag or "the trainers' speeds (no flag)" for flag in READS if option in READS[flag])
            what = mode or "the trainers' speeds (no flag)"
            raise InputError(f"{option} does nothing for {what}: only {readers} read it; remove {option}")


def attribute(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def cmd_bench(args: argparse.Namespace) -> None:
    """Training speed: reference-style loop vs plain vs vectorised trainer, and the engine's own cost."""
    from asyncfl.bench.measure import run_bench
    from asyncfl.bench.paper_round import load_sweep

    check_options(args)
    if args.sweep is None and not any((args.engine, args.costs, args.profile_cost)) and DEFAULT_SWEEP.is_file():
        args.sweep = DEFAULT_SWEEP
    if args.sweep:  # every argument checked before minutes of measuring
        load_sweep(args.sweep, args.together)
    if args.json:
        if not args.json.parent.is_dir():
            raise InputError(
                f"--json {args.json}: folder {args.json.parent} does not exist; create it or give another path"
            )
        check_output(args.json, "--json")
    if args.costs:
        costs_result(args)
    elif args.profile_cost:
        from asyncfl.bench.profile_cost import format_profile_cost, profile_cost
        from asyncfl.training.runtime import choose_device

        result = profile_cost(choose_device(args.device), args.profile_cost)
        print(format_profile_cost(result))
    elif args.together:
        result = together_result(args)
    else:
        from asyncfl.bench.scale import check_scales

        check_scales(tuple(args.scales or ()))  # before the trainer rows, which come first
        result = run_bench(
            args.device, args.quick, sweep=args.sweep, engine_only=args.engine, scales=tuple(args.scales or ())
        )
    if args.json:
        write_json(args.json, result)


def costs_result(args: argparse.Namespace) -> None:
    """`--costs FILE`: this device's row of each model in the cost table, the others kept."""
    from asyncfl.bench.costs import format_costs, measure_costs, write_costs
    from asyncfl.planning.run_cost import read_cost_table
    from asyncfl.training.runtime import choose_device

    if not args.costs.parent.is_dir():
        raise InputError(f"--costs {args.costs}: folder {args.costs.parent} does not exist; give config/costs.csv")
    check_output(args.costs, "--costs")
    if args.costs.exists():
        read_cost_table(args.costs)  # a table that cannot be read is refused before minutes of measuring
    rows = measure_costs(choose_device(args.device), args.quick)
    write_costs(args.costs, rows)
    print(format_costs(rows, args.costs))


def together_result(args: argparse.Namespace) -> dict:
    """`--together K`: each paper model's gain from K runs stepped together, and the sweep's hours."""
    from asyncfl.bench.together import format_projection, format_together, sweep_projection, together_bench
    from asyncfl.training.runtime import choose_device

    device = choose_device(args.device)
    rows = together_bench(device, args.together, "auto", args.profile, args.quick)
    print(format_together(rows, device), flush=True)
    result: dict = {"together": rows}
    if args.sweep:
        result |= sweep_projection(rows, args.sweep, args.together)
        print(format_projection(result, args.together))
    return result


def register(commands: Commands) -> None:
    """The bench command."""
    bench = commands.add_parser("bench", help="training speed: reference loop, plain and vectorised trainers")
    bench.add_argument("--device", choices=DEVICES, default="auto")
    bench.add_argument("--quick", action="store_true", help="smaller data, one repeat: under a minute on a CPU")
    bench.add_argument("--json", type=Path, help="also write the results as JSON")
    bench.add_argument(
        "--engine",
        action="store_true",
        help="only the engine at C = 10^4, 10^6, 10^7 and 10^8, past 10^7 with sizes only (--quick: 10^3, 10^4)",
    )
    bench.add_argument(
        "--scales",
        type=at_least(1, 1_000_000_000, " clients"),
        nargs="+",
        metavar="C",
        help="the engine's rows at these numbers of clients instead (each about 110 bytes of memory a client)",
    )
    bench.add_argument(
        "--profile-cost",
        type=at_least(2, 1000, " (each seed trains two runs)"),
        metavar="SEEDS",
        help="only the fast profile's accuracy cost against fp32: that many paired seeds of AFL on digits",
    )
    bench.add_argument(
        "--together",
        type=at_least(2, 256, " (each run stepped together holds its own model, state and logs)"),
        metavar="RUNS",
        help="only the gain of that many runs stepped together in one process (train-many) over one alone, "
        "per paper model, and --sweep's device-hours with its jobs of that many runs or more stepped together",
    )
    bench.add_argument(
        "--costs",
        type=Path,
        metavar="FILE",
        help="only what a run of each model costs on this device, into this cost table (config/costs.csv), "
        "whose rows the workflow's jobs ask their minutes from",
    )
    bench.add_argument(
        "--profile", choices=tuple(PROFILES), help="--together's runs in this speed profile (default: fp32)"
    )
    bench.add_argument(
        "--sweep",
        type=Path,
        help=f"workflow config whose training cost to project (default: {DEFAULT_SWEEP} where present)",
    )
    bench.set_defaults(run=cmd_bench)
