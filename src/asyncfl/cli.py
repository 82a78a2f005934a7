"""The `asyncfl` command: every pipeline step runs by hand with the same result as under Snakemake."""

import argparse
import errno
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from asyncfl.data.holdout import Holdout
from asyncfl.files import atomic_path, write_json
from asyncfl.runs.archive import archive_from_configs, fetch_record
from asyncfl.spec.catalogue import CATALOGUE, Scope
from asyncfl.spec.config import load_config, make_config, system_model_help, with_paths_from
from asyncfl.spec.errors import InputError
from asyncfl.spec.experiments import first_repeated
from asyncfl.spec.integrity import MAX_RECORD_BYTES, check_output, read_input
from asyncfl.spec.layout import RUN_DIR
from asyncfl.spec.names import ALGORITHMS, DATASETS, DEVICES, MODELS
from asyncfl.spec.trace_import import FORMATS as TRACE_FORMATS
from asyncfl.spec.tuning import check_choice, read_chosen

if TYPE_CHECKING:
    from asyncfl.launch import TrainedFolder

DATA_HELP = """\
Files asyncfl looks for under --root (torchvision's layout, or the archives directly in --root):
  mnist, fashion-mnist  MNIST/raw/ or FashionMNIST/raw/: train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz
                        t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz
  cifar10               cifar-10-batches-py/ (data_batch_1..5, test_batch, batches.meta) or cifar-10-python.tar.gz
  digits                nothing: scikit-learn ships it
Every file is checked against torchvision's published MD5 before use."""


def json_mapping(text: str) -> dict:
    """argparse type: a JSON object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


def tuning_grid(text: str) -> dict[str, list[dict]]:
    """argparse type of `select --grid`: each tuned run name's points, a non-empty list of distinct
    objects of the same settings, at least two points a name."""
    grid = json_mapping(text)
    for name, points in grid.items():
        if not (isinstance(points, list) and len(points) >= 2 and all(isinstance(p, dict) and p for p in points)):
            raise argparse.ArgumentTypeError(
                f"{name}: expected a list of two or more grid points, each a JSON object of settings"
            )
        if any(set(point) != set(points[0]) for point in points) or first_repeated(points):
            raise argparse.ArgumentTypeError(f"{name}: its points must set the same settings, each point once")
    if not grid:
        raise argparse.ArgumentTypeError("expected at least one tuned run name")
    return grid


def severity_settings(text: str) -> dict[str, dict]:
    """argparse type of `stragglers --severities`: a JSON object of settings objects, each name once."""

    def once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        names = [name for name, _ in pairs]
        if len(set(names)) < len(names):
            raise argparse.ArgumentTypeError("names one severity twice; name each once")
        return dict(pairs)

    try:
        value = json.loads(text, object_pairs_hook=once)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error}") from None
    if not isinstance(value, dict) or not value or not all(isinstance(v, dict) for v in value.values()):
        raise argparse.ArgumentTypeError('expected a JSON object of settings objects ({"NAME": {"key": value}})')
    return value


def at_least(minimum: int, maximum: int | None = None, why: str = "") -> Callable[[str], int]:
    """argparse type: an integer ≥ `minimum` (and ≤ `maximum`, which `why` explains)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer ≥ {minimum}, got {text!r}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be ≤ {maximum}{why}, got {text!r}")
        return value

    return parse


def machine_cpus() -> int:
    """The CPUs this process may run on: more torch threads than these only contend for them."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


THREADS = at_least(1, machine_cpus(), ", the CPUs this process may use")


def record_id(text: str) -> str:
    """argparse type: a Zenodo record id, digits only (as zenodo.org/records/ID names it)."""
    if not (text.isascii() and text.isdigit() and len(text) <= 20):
        raise argparse.ArgumentTypeError(f"a Zenodo record id is 1–20 digits, got {text!r}")
    return text


def add_dataset_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, choices=DATASETS)
    parser.add_argument("--root", type=Path, help="dataset folder (default: resources/data/DATASET)")


def cmd_data(args: argparse.Namespace) -> None:
    """Download if needed, verify and summarise a dataset."""
    from asyncfl.data.loading import prepare_dataset  # torch: ~1.4 s a process; the commands that draw need none

    if args.summary:
        check_output(args.summary, "--summary")
    print("\n".join(prepare_dataset(args.dataset, args.root, args.summary)))


def cmd_partition(args: argparse.Namespace) -> None:
    """Dirichlet-partition a training set; write FILE.npz and FILE.json; print per-client stats."""
    from asyncfl.data.partition import DirichletSplit, Subset, make_partition

    subset = None
    if args.subset_fraction is not None or args.subset_size is not None:
        subset = Subset(args.subset_fraction, args.subset_size)
    split = DirichletSplit(args.clients, args.alpha, args.seed, args.min_size)
    holdout = Holdout(args.validation_fraction) if args.validation_fraction is not None else None
    print("\n".join(make_partition(args.dataset, args.root, split, args.out, subset, holdout)))


def cmd_train(args: argparse.Namespace) -> None:
    """Run one federated training (or resume it from its checkpoint) and write its outputs."""
    from asyncfl.launch import train_run

    overrides = {
        "algorithm": args.algorithm,
        "model": args.model,
        "clients_per_round": args.clients_per_round,
        "rounds": args.rounds,
        "local_epochs": args.local_epochs,
        "seed": args.seed,
    }
    config = load_config(args.config, args.settings, overrides)
    outcome = train_run(config, args.dataset, args.root, args.partition, args.out, args.threads, args.force)
    print(trained_line(config.algorithm, outcome, args.out))


def trained_line(algorithm: str, outcome: "TrainedFolder", out: Path) -> str:
    """What `asyncfl train` did to one run folder, in one or two lines."""
    summary = outcome.summary
    moved = f"--force: the old outputs of {out} are in {outcome.moved_to}\n" if outcome.moved_to else ""
    if outcome.already_finished:
        return moved + (
            f"{out}: this run already finished ({summary['rounds_completed']} rounds) and its outputs match "
            "its run.json; nothing to do (--force trains it again)"
        )
    return moved + (
        f"{algorithm}: {summary['rounds_completed']} rounds ({summary['stop_reason']}), "
        f"virtual time {summary['virtual_time']:.1f} s, wall {summary['wall_seconds']:.1f} s → {out}"
    )


PLANNED_RUN_KEYS = ("partition", "out", "settings")
CHOICES = "choices"  # optional: a tuned run's grid points, the only settings --chosen may give it


def planned_runs(text: str) -> list[dict]:
    """argparse type of `train-many --plan`: a JSON file of a list of {"partition", "out", "settings"}
    objects, a tuned run's with its "choices" (a file: a sweep of hundreds of runs outgrows a
    command-line argument)."""
    try:
        plan = json.loads(read_input(Path(text), MAX_RECORD_BYTES))
    except InputError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise argparse.ArgumentTypeError(f"{text} is not JSON: {error}") from None
    keys = set(PLANNED_RUN_KEYS)
    if (
        not isinstance(plan, list)
        or not plan
        or not all(isinstance(run, dict) and set(run) - {CHOICES} == keys for run in plan)
    ):
        raise argparse.ArgumentTypeError(
            f"expected a non-empty JSON list of objects with exactly the keys {', '.join(PLANNED_RUN_KEYS)} "
            f"(and {CHOICES}, for a tuned run)"
        )
    choices = [run.get(CHOICES, []) for run in plan]
    if not all(isinstance(points, list) and all(isinstance(p, dict) for p in points) for points in choices):
        raise argparse.ArgumentTypeError(f"each run's {CHOICES} must be a list of JSON objects (grid points)")
    if not all(isinstance(run["partition"], str) and isinstance(run["out"], str) for run in plan):
        raise argparse.ArgumentTypeError("each run's partition and out must be paths (JSON strings)")
    if not all(isinstance(run["settings"], dict) for run in plan):
        raise argparse.ArgumentTypeError("each run's settings must be a JSON object of asyncfl train settings")
    return plan


def cmd_train_many(args: argparse.Namespace) -> None:
    """Train several runs one after another in this process: one start-up (imports, the dataset) for
    all of them. Every run's settings are checked before the first one trains. Each run is exactly
    what `asyncfl train` makes of it alone: the same folder, resumed the same way, the same bytes."""
    from asyncfl.launch import check_planned_run, train_run

    outs = [Path(run["out"]).resolve() for run in args.plan]  # r/tm6 and r/./tm6 are one folder
    for index, out in enumerate(outs):
        if out in outs[:index]:
            raise InputError(
                f"--plan runs {outs.index(out)} and {index} both write to {out}; give every run its own folder"
            )
    names = [match["algorithm"] if (match := RUN_DIR.search(Path(run["out"]).as_posix())) else "" for run in args.plan]
    chosen = read_chosen(args.chosen, set(names)) if args.chosen else {}
    for run, name in zip(args.plan, names, strict=True):
        if name in chosen:
            check_choice(args.chosen, name, chosen[name], run.get("choices", []))
    runs = [
        (
            make_config(
                with_paths_from({**run["settings"], **chosen.get(name, {})}, Path.cwd()),
                f"--plan run {index} ({run['out']})",
            ),
            Path(run["partition"]),
            Path(run["out"]),
            chosen.get(name),
        )
        for index, (run, name) in enumerate(zip(args.plan, names, strict=True))
    ]
    for index, (config, partition, out, _) in enumerate(runs):  # before the first trains: nothing is half done
        check_planned_run(config, args.dataset, args.root, partition, f"--plan run {index} ({out})")
    for config, partition, out, tuned in runs:
        outcome = train_run(config, args.dataset, args.root, partition, out, args.threads, tuned=tuned)
        print(trained_line(config.algorithm, outcome, out), flush=True)


def sweep_command(
    commands: "argparse._SubParsersAction[argparse.ArgumentParser]",
    name: str,
    summary: str,
    description: str,
    helps: tuple[str, str],
) -> argparse.ArgumentParser:
    """A command that reads a sweep's runs at one budget, with what such commands share: the runs, their
    partitions, the target accuracy (`helps`: what the runs are, which split the target is read on),
    the budget, the title and the output folder."""
    parser = commands.add_parser(name, help=summary, description=description)
    parser.add_argument("--runs", type=Path, nargs="+", required=True, help=helps[0])
    parser.add_argument("--partition-stats", type=Path, nargs="+", required=True, help="FILE.json of each partition")
    parser.add_argument("--target-accuracy", type=FRACTION, required=True, help=helps[1])
    parser.add_argument("--virtual-time", type=POSITIVE, required=True, help="the runs' virtual-time budget T (s)")
    parser.add_argument("--title", default="", help="experiment name shown in the title")
    parser.add_argument("--out", type=Path, required=True, help="folder of the figures and their table")
    return parser


def cmd_select(args: argparse.Namespace) -> None:
    """Choose each tuned run name's grid point on the validation split; draw the tuning figure."""
    from asyncfl.analysis.tuning import select

    target, budget = args.target_accuracy, args.virtual_time
    written = select(args.runs, args.partition_stats, args.grid, target, budget, args.out, args.chosen, args.title)
    print(f"{len(written)} files → {args.out}, the choice in {args.chosen}")


def cmd_figures(args: argparse.Namespace) -> None:
    """Draw an experiment's figures from its runs' CSVs."""
    from asyncfl.analysis.figures import draw_figures

    written = draw_figures(args.runs, args.partition_stats, args.reference_j, args.out, args.title, args.emulation)
    print(f"{len(written)} files → {args.out}")


def cmd_stragglers(args: argparse.Namespace) -> None:
    """Draw the figures and tables of a severity sweep from its runs' CSVs."""
    from asyncfl.analysis.stragglers import draw_straggler_claim

    targets = [args.target_accuracy, *args.other_targets]
    written = draw_straggler_claim(
        args.runs, args.partition_stats, args.severities, targets, args.virtual_time, args.out, args.title
    )
    print(f"{len(written)} files → {args.out}")


def bounded(rule: str, holds: Callable[[float], bool]) -> Callable[[str], float]:
    """argparse type: a number for which `holds` is true, `rule` saying which in the error."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not holds(value):
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text!r}")
        return value

    return parse


FRACTION = bounded("a number in (0, 1]", lambda value: 0 < value <= 1)
POSITIVE = bounded("a finite number > 0", lambda value: math.isfinite(value) and value > 0)


def cmd_trace_import(args: argparse.Namespace) -> None:
    """Convert a published trace; the CSV is checked as `availability: trace` reads it before it is kept."""
    from asyncfl.spec.trace_import import import_trace, trace_csv
    from asyncfl.spec.traces import read_trace

    imported = import_trace(args.source, args.format, args.clients, args.horizon)
    with atomic_path(args.out) as tmp:
        tmp.write_text(trace_csv(imported.periods))
        periods = read_trace(tmp, args.clients)  # import_trace's checks make this pass; a failure is a bug
    skipped = f"; {imported.skipped} empty periods of the source left out" if imported.skipped else ""
    print(f"{sum(map(len, periods.values()))} online periods of {args.clients} clients → {args.out}{skipped}")


def cmd_theory(args: argparse.Namespace) -> None:
    """The paper's sampling-variance claim on one finished run's client updates: table and figure."""
    from asyncfl.analysis.theory import sampling_variance

    written = sampling_variance(args.run_dir, args.dataset, args.root, args.partition, args.out, args.title)
    print(f"{len(written)} files → {args.out}")


def cmd_archive(args: argparse.Namespace) -> None:
    """Pack results into a reproducible tarball with checksums, provenance and Zenodo metadata."""
    tarball, members = archive_from_configs(args.files, args.config, args.base, args.out, args.command_line)
    print(f"{members} files → {tarball}")


def cmd_fetch_record(args: argparse.Namespace) -> None:
    """Download a published Zenodo record with zenodo_get, which checks every file's MD5."""
    fetch_record(args.record, args.out)
    print(f"zenodo record {args.record} → {args.out} (MD5s verified)")


def cmd_bench(args: argparse.Namespace) -> None:
    """Training speed: reference-style loop vs plain vs vectorised trainer, and the engine's own cost."""
    from asyncfl.bench.measure import run_bench
    from asyncfl.bench.paper_round import load_sweep

    if args.sweep and not args.engine:  # every argument checked before minutes of measuring
        load_sweep(args.sweep)
    if args.json:
        if not args.json.parent.is_dir():
            raise InputError(
                f"--json {args.json}: folder {args.json.parent} does not exist; create it or give another path"
            )
        check_output(args.json, "--json")
    result = run_bench(args.device, args.quick, sweep=None if args.engine else args.sweep, engine_only=args.engine)
    if args.json:
        write_json(args.json, result)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="asyncfl", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    data = commands.add_parser(
        "data",
        help="prepare a dataset: download when needed, verify",
        epilog=DATA_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_dataset_arguments(data)
    data.add_argument("--summary", type=Path, help="also write the summary as JSON (the pipeline's marker)")
    data.set_defaults(run=cmd_data)

    part = commands.add_parser("partition", help="Dirichlet label-skew partition into clients")
    add_dataset_arguments(part)
    part.add_argument("--clients", type=at_least(1), required=True, help="number of clients C")
    part.add_argument("--alpha", type=float, required=True, help="Dirichlet concentration (smaller: more skew)")
    part.add_argument("--seed", type=at_least(0), required=True)
    part.add_argument("--min-size", type=at_least(0), default=1, help="fewest samples a client may get (default 1)")
    part.add_argument("--out", type=Path, required=True, help="FILE.npz (stats go to FILE.json)")
    part_subset = part.add_mutually_exclusive_group()
    part_subset.add_argument(
        "--subset-fraction", type=float, help="partition only this fraction of the training set, drawn by --seed"
    )
    part_subset.add_argument(
        "--subset-size", type=at_least(1), help="partition only this many training samples, drawn by --seed"
    )
    part.add_argument(
        "--validation-fraction",
        type=float,
        help="hold this fraction of every class out of the clients as the validation split, drawn by --seed",
    )
    part.set_defaults(run=cmd_partition)

    train = commands.add_parser(
        "train",
        help="federated training on a virtual clock (resumes from a checkpoint)",
        description="Options not given here come from --config, else the paper's defaults.",
        epilog=system_model_help(),
    )
    add_dataset_arguments(train)
    train.add_argument("--partition", type=Path, required=True, help="FILE.npz from asyncfl partition")
    train.add_argument("--algorithm", choices=ALGORITHMS)
    train.add_argument("--model", choices=MODELS)
    train.add_argument("--clients-per-round", type=at_least(1), metavar="J")
    train.add_argument("--rounds", type=at_least(1), metavar="R")
    train.add_argument("--local-epochs", type=at_least(1), metavar="I")
    train.add_argument("--seed", type=at_least(0))
    train.add_argument("--config", type=Path, help="YAML file with any other settings (see src/asyncfl/spec/config.py)")
    train.add_argument(
        "--settings",
        type=json_mapping,
        default={},
        help="JSON object of settings, over --config and under the options above",
    )
    train.add_argument(
        "--out", type=Path, required=True, help="run folder: metrics.csv, events.csv, model.pt, run.json"
    )
    train.add_argument("--threads", type=THREADS, help="CPU threads for torch (default: torch's choice)")
    train.add_argument(
        "--force", action="store_true", help="train again where --out holds a finished run (moved to replaced/)"
    )
    train.set_defaults(run=cmd_train)

    many = commands.add_parser(
        "train-many",
        help="several training runs in one process, one after another (the workflow's severity sweeps)",
        description="Each run as asyncfl train would make it alone; settings as in asyncfl train --settings.",
    )
    add_dataset_arguments(many)
    many.add_argument(
        "--plan",
        type=planned_runs,
        required=True,
        help='JSON file: a list of {"partition": FILE.npz, "out": run folder, "settings": {algorithm, seed, …}}',
    )
    many.add_argument("--threads", type=THREADS, help="CPU threads for torch (default: torch's choice)")
    many.add_argument(
        "--chosen", type=Path, help="the settings asyncfl select chose per run name, added to those runs' settings"
    )
    many.set_defaults(run=cmd_train_many)

    selecting = sweep_command(
        commands,
        "select",
        "choose each run name's point of a tuning grid on the validation split (the tuning figure, its table)",
        "Runs are …/tuning/POINT/ALGORITHM/JN/seedS, as the workflow lays out an experiment's tune:.",
        ("the tuning run folders", "validation accuracy to reach, in (0, 1]"),
    )
    selecting.add_argument(
        "--grid",
        type=tuning_grid,
        required=True,
        help='JSON object: each tuned run name\'s points ({"afl": [{"gamma0": 0.01}, …]})',
    )
    selecting.add_argument("--chosen", type=Path, required=True, help="where the choice goes (JSON)")
    selecting.set_defaults(run=cmd_select)

    figures = commands.add_parser("figures", help="draw an experiment's figures (PNG and PDF) from its CSVs")
    figures.add_argument(
        "--runs", type=Path, nargs="+", required=True, help="run folders …/ALGORITHM/JN/seedS (each with its run.json)"
    )
    figures.add_argument(
        "--partition-stats",
        type=Path,
        nargs="+",
        required=True,
        help="FILE.json of every partition the runs used (the first is drawn; each run is checked against its own)",
    )
    figures.add_argument("--reference-j", type=at_least(1), default=5, help="J of the single-J figures (default 5)")
    figures.add_argument("--title", default="", help="experiment name shown in every title")
    figures.add_argument("--out", type=Path, required=True)
    figures.add_argument(
        "--emulation",
        choices=[figure.name for figure in CATALOGUE if figure.scope == Scope.EMULATION],
        help="draw only this figure of the paper's code as it ran beside the algorithms as described "
        "(needs the runs it compares)",
    )
    figures.set_defaults(run=cmd_figures)

    stragglers = sweep_command(
        commands,
        "stragglers",
        "the straggler_claim figure of a severity sweep (PNG, PDF and its table as CSV)",
        "Runs are …/SEVERITY/ALGORITHM/JN/seedS, as the workflow lays out an experiment with severities:.",
        ("run folders (…/SEVERITY/…)", "test accuracy to reach, in (0, 1]"),
    )
    stragglers.add_argument(
        "--severities",
        type=severity_settings,
        required=True,
        help='JSON object: each severity\'s settings by name, in the figure\'s order ({"sigma0": {"speed_sigma": 0}})',
    )
    stragglers.add_argument(
        "--other-targets",
        type=FRACTION,
        nargs="*",
        default=[],
        help="further test accuracies the verdicts and the async_advantage map are read at",
    )
    stragglers.set_defaults(run=cmd_stragglers)

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

    theory = commands.add_parser(
        "theory", help="variance of the sampled mean of client updates, with and without replacement"
    )
    add_dataset_arguments(theory)
    theory.add_argument(
        "--run", dest="run_dir", type=Path, required=True, help="a finished run folder (run.json, model.pt)"
    )
    theory.add_argument("--partition", type=Path, required=True, help="the run's FILE.npz")
    theory.add_argument("--title", default="", help="experiment name shown in the title")
    theory.add_argument("--out", type=Path, required=True)
    theory.set_defaults(run=cmd_theory)

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

    bench = commands.add_parser("bench", help="training speed: reference loop, plain and vectorised trainers")
    bench.add_argument("--device", choices=DEVICES, default="auto")
    bench.add_argument("--quick", action="store_true", help="smaller data, one repeat: under a minute on a CPU")
    bench.add_argument("--json", type=Path, help="also write the results as JSON")
    bench.add_argument(
        "--engine", action="store_true", help="only the engine at C = 10^4, 10^5 and 10^6 (--quick: 10^3, 10^4)"
    )
    bench.add_argument(
        "--sweep",
        type=Path,
        default=Path("config/config.yaml") if Path("config/config.yaml").is_file() else None,
        help="workflow config whose training cost to project (default: config/config.yaml where present)",
    )
    bench.set_defaults(run=cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
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
