"""`asyncfl train` and `asyncfl train-many`: one run, or several in one process, each as it would be alone."""

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from asyncfl.cli.arguments import (
    PROCESSES,
    THREADS,
    Commands,
    add_at_once,
    add_dataset_arguments,
    at_least,
    json_mapping,
)
from asyncfl.cli.processes import process_shares, train_in_processes
from asyncfl.planning.layout import run_name
from asyncfl.planning.progress import clear_failure, record_failure, recorded_failure
from asyncfl.planning.tuning import check_choice, read_chosen
from asyncfl.runs.folder import check_out
from asyncfl.settings.config import load_config, make_config, system_model_help, with_paths_from
from asyncfl.settings.errors import InputError
from asyncfl.settings.integrity import MAX_RECORD_BYTES, read_input
from asyncfl.settings.names import ALGORITHMS, MODELS

if TYPE_CHECKING:
    from asyncfl.launch import PlannedRun, TrainedFolder


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
    check_out(args.out)  # before its failure record is read, cleared or written: never the current folder's
    if args.attempt > 1 and (cause := recorded_failure(args.out)) is not None:
        raise InputError(
            f"not trained again on attempt {args.attempt}: an earlier attempt failed on its own ({cause}); a run "
            "fails the same way every time: fix that and run the workflow again"
        )
    clear_failure(args.out)
    try:
        config = load_config(args.config, args.settings, overrides)
        outcome = train_run(config, args.dataset, args.root, args.partition, args.out, args.threads, args.force)
    except InputError as error:
        record_failure(args.out, str(error))
        raise
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


def plan_numbers(text: str) -> list[int]:
    """argparse type of the hidden `--plan-numbers` of a `--processes` child: its runs' numbers in the
    parent's plan, comma-separated, so that its messages name the run the user's plan lists."""
    try:
        numbers = [int(item) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated run numbers, got {text!r}") from None
    if any(number < 0 for number in numbers) or len(set(numbers)) < len(numbers):
        raise argparse.ArgumentTypeError(f"expected distinct run numbers ≥ 0, got {text!r}")
    return numbers


def cmd_train_many(args: argparse.Namespace) -> None:
    """Train several runs in this process, stepped together: one start-up (imports, the dataset) for all
    of them, and their clients trained in shared calls (`lockstep.Lockstep`). Every run's settings are
    checked before the first one trains. Each run is exactly what `asyncfl train` makes of it alone:
    the same folder, resumed the same way, the same bytes. A run that fails leaves the others to finish.
    With --processes, the checked runs are dealt out to that many such processes."""
    numbers = args.plan_numbers
    if numbers is not None and len(numbers) != len(args.plan):
        raise InputError(f"--plan-numbers gives {len(numbers)} numbers for the plan's {len(args.plan)} runs")
    runs = checked_runs(args.plan, args.dataset, args.root, args.chosen, numbers)
    train_plan(args.plan, runs, args.dataset, args.root, args.threads, args.processes, args.at_once, numbers)


def train_plan(
    plan: list[dict],
    runs: list["PlannedRun"],
    dataset: str,
    root: Path | None,
    threads: int | None,
    processes: int,
    at_once: int | None,
    numbers: list[int] | None = None,
) -> None:
    """Train `runs` (`plan`'s, checked) stepped together in this process, or in several child processes
    where `processes` and the job's threads allow more than one (`processes.train_in_processes`), each
    process with at most `at_once` runs going at once (None: all of its own);
    `numbers`: each run's number in the whole plan, which the messages name (default: its index)."""
    numbers = numbers or list(range(len(runs)))
    count, each = process_shares(processes, threads, len(runs))
    if count > 1:
        train_in_processes(plan, runs, count, each, dataset, root, numbers, at_once)
    else:
        train_planned(runs, dataset, root, threads, numbers, at_once)


def checked_runs(
    plan: list[dict], dataset: str, root: Path | None, chosen_path: Path | None, numbers: list[int] | None = None
) -> list["PlannedRun"]:
    """The runs of a train-many plan with the choice at `chosen_path` applied, every one checked as it
    would be when it starts (nothing trains before all pass): one folder each, a choice among its
    run's grid points only."""
    from asyncfl.launch import PlannedRun, check_planned_run

    numbers = numbers or list(range(len(plan)))
    outs = [Path(run["out"]).resolve() for run in plan]  # r/tm6 and r/./tm6 are one folder
    for index, out in enumerate(outs):
        if out in outs[:index]:
            raise InputError(
                f"--plan runs {numbers[outs.index(out)]} and {numbers[index]} both write to {out}; give every run its "
                "own folder"
            )
    names = [run_name(run["out"]) for run in plan]
    chosen = {}
    if chosen_path:
        chosen = read_chosen(chosen_path)
        for run, name in zip(plan, names, strict=True):
            if name in chosen:
                check_choice(chosen_path, name, chosen[name], run.get("choices", []))
            elif run.get("choices"):  # a tuned run trained untuned would be a silent, wrong result
                raise InputError(
                    f"{chosen_path} chose nothing for {name}, which --plan tunes ({run['out']}); "
                    "run asyncfl select (or the workflow's tuning) again"
                )
    runs = [
        PlannedRun(
            make_config(
                with_paths_from({**run["settings"], **chosen.get(name, {})}, Path.cwd()),
                f"--plan run {numbers[index]} ({run['out']})",
            ),
            Path(run["partition"]),
            Path(run["out"]),
            chosen.get(name),
        )
        for index, (run, name) in enumerate(zip(plan, names, strict=True))
    ]
    for index, planned in enumerate(runs):  # before the first trains: nothing is half done
        where = f"--plan run {numbers[index]} ({planned.out})"
        check_planned_run(planned.config, dataset, root, planned.partition, where)
    return runs


def train_planned(
    runs: list["PlannedRun"],
    dataset: str,
    root: Path | None,
    threads: int | None,
    numbers: list[int],
    at_once: int | None = None,
) -> None:
    """Train `runs` stepped together, a line as each ends; every failure named (by its `numbers` in the
    whole plan), the first raised."""
    from asyncfl.launch import train_together

    def report(run: "PlannedRun", outcome: "TrainedFolder") -> None:
        print(trained_line(run.config.algorithm, outcome, run.out), flush=True)

    outcomes = train_together(runs, dataset, root, threads, report, at_once)
    failed = [(index, outcome) for index, outcome in enumerate(outcomes) if isinstance(outcome, BaseException)]
    if not failed:
        return
    if not all(isinstance(outcome, InputError) for _, outcome in failed):
        raise next(outcome for _, outcome in failed if not isinstance(outcome, InputError))
    for index, error in failed[1:]:
        print(f"asyncfl train-many: error: --plan run {numbers[index]} ({runs[index].out}): {error}", file=sys.stderr)
    first, error = failed[0]
    others = f"; {len(failed) - 1} other runs failed too (above)" if len(failed) > 1 else ""
    raise InputError(f"--plan run {numbers[first]} ({runs[first].out}): {error}{others}; the other runs finished")


def register(commands: Commands) -> None:
    """The train and train-many commands."""
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
    train.add_argument("--config", type=Path, help="YAML file with any other settings (docs/settings.md lists them)")
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
    train.add_argument(
        "--attempt",
        type=at_least(1),
        default=1,
        help="the workflow's attempt at this run (default 1); after the first, a run that failed on its own "
        "(its failed.json) ends at once with that cause",
    )
    train.set_defaults(run=cmd_train)

    many = commands.add_parser(
        "train-many",
        help="several training runs in one process, stepped together (the workflow's severity sweeps and packs)",
        description="Each run as asyncfl train would make it alone; settings as in asyncfl train --settings.",
    )
    add_dataset_arguments(many)
    many.add_argument(
        "--plan",
        type=planned_runs,
        required=True,
        help='JSON file: a list of {"partition": FILE.npz, "out": run folder, "settings": {algorithm, seed, …}}',
    )
    many.add_argument(
        "--threads", type=THREADS, help="CPU threads for torch, shared by the processes (default: torch's choice)"
    )
    many.add_argument(
        "--processes", type=PROCESSES, default=1, help="train the runs in this many processes (default 1: this one)"
    )
    many.add_argument(
        "--chosen", type=Path, help="the settings asyncfl select chose per run name, added to those runs' settings"
    )
    add_at_once(many)
    many.add_argument(
        "--plan-numbers", type=plan_numbers, help=argparse.SUPPRESS
    )  # a child's runs in its parent's plan
    many.set_defaults(run=cmd_train_many)
