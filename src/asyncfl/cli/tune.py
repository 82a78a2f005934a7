"""`asyncfl tune`: an experiment's tuning grid trained, and searched past its edges (`tune.extend`,
config/README.md "Tuning"), then chosen as `asyncfl select` chooses, in one job: whether a point past an
edge is trained depends on the scores of those before it, which only a finished round gives."""

import argparse
import math
import resource
from pathlib import Path
from typing import Any

from asyncfl.cli.analysis import add_tuning_metric, sweep_arguments, tuning_grid
from asyncfl.cli.arguments import PROCESSES, THREADS, Commands, add_at_once, add_dataset_arguments, json_mapping
from asyncfl.cli.train import checked_runs, planned_runs, train_plan
from asyncfl.files import written_together
from asyncfl.planning.layout import run_name
from asyncfl.planning.tuning import is_number, next_points, point_label
from asyncfl.settings.errors import InputError


def search_axes_argument(text: str) -> dict[str, dict[str, list[Any]]]:
    """argparse type of `tune --axes`: run name → setting → its search values, two or more finite
    numbers, ascending."""
    axes = json_mapping(text)
    for name, settings in axes.items():
        if not isinstance(settings, dict) or not settings:
            raise argparse.ArgumentTypeError(f"{name}: expected a JSON object of setting → search values")
        for key, values in settings.items():
            numbers = isinstance(values, list) and len(values) >= 2 and all(map(is_number, values))
            if not numbers or not all(map(math.isfinite, values)) or values != sorted(set(values)):
                raise argparse.ArgumentTypeError(
                    f"{name}.{key}: expected two or more distinct finite numbers, ascending"
                )
    return axes


def cpu_seconds() -> float:
    """The CPU time so far of this process and of its children that ended (user and system, every
    thread): with --processes, the runs train in children."""
    usages = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(usage.ru_utime + usage.ru_stime for usage in usages)


def run_templates(plan: list[dict], grid: dict[str, list[dict]]) -> dict[tuple[str, str], list[dict]]:
    """The plan's runs by (run name, point label), each laid out as …/tuning/POINT/NAME/JN/seedS; a
    point of `grid` without runs, or a run of no point, refused."""
    labels = {(name, point_label(point)) for name, points in grid.items() for point in points}
    templates: dict[tuple[str, str], list[dict]] = {}
    for index, run in enumerate(plan):
        key = (run_name(run["out"]), Path(run["out"]).parents[2].name)
        if key not in labels:
            raise InputError(
                f"--plan run {index} ({run['out']}) is not a run of a point of --grid; give the tuning job's plan"
            )
        templates.setdefault(key, []).append(run)
    missing = sorted(labels - set(templates))
    if missing:
        raise InputError(f"--plan has no run of {missing[0][0]} at {missing[0][1]}; give the tuning job's plan")
    return templates


def runs_at(template: list[dict], point: dict[str, Any]) -> list[dict]:
    """The runs of a new grid point: those of `template` (another point of the same name, one a
    seed) with the point's settings and folders."""
    moved = []
    for run in template:
        out = Path(run["out"])
        folder = out.parents[3] / point_label(point) / out.relative_to(out.parents[2])
        moved.append({**run, "out": folder.as_posix(), "settings": {**run["settings"], **point}})
    return moved


def check_axes(axes: dict[str, dict[str, list[Any]]], grid: dict[str, list[dict]]) -> None:
    """Each searched name is tuned, each setting one of its grid's, holding every value of that grid."""
    for name, settings in axes.items():
        if name not in grid:
            raise InputError(f"--axes names {name}, which --grid does not tune; give the plan's axes")
        for key, values in settings.items():
            outside = [point[key] for point in grid[name] if point.get(key) not in values]
            if outside:
                raise InputError(f"--axes {name}.{key} lacks {outside[0]!r}, a value of its grid; give the plan's axes")


def cmd_tune(args: argparse.Namespace) -> None:
    """Train the grid; while a name's choice sits at an end of a searched setting, train the point one
    search value past it (every tuning seed) and choose again; then write the choice and the figure,
    with the search's rounds, runs and CPU time."""
    from asyncfl.analysis.tuning import choose, tuning_table, write_choice
    from asyncfl.launch import set_aside_other_runs
    from asyncfl.runs.folder import REPLACED

    grid = {name: list(points) for name, points in args.grid.items()}
    check_axes(args.axes, grid)
    templates = run_templates(args.plan, grid)
    folders: list[Path] = []
    rounds: list[dict[str, Any]] = []
    seconds: list[float] = []
    batch, added = list(args.plan), {name: [point_label(point) for point in points] for name, points in grid.items()}
    while batch:
        started = cpu_seconds()
        runs = checked_runs(batch, args.dataset, args.root, None)
        if rounds:  # a point the search added: its folder may hold an earlier config's run of that point
            for folder in set_aside_other_runs(runs, args.dataset):
                print(f"{folder} held a run of other settings (an earlier search's): moved into its {REPLACED}/")
        train_plan(batch, runs, args.dataset, args.root, args.threads, args.processes, args.at_once)
        seconds.append(cpu_seconds() - started)
        folders += [Path(run["out"]) for run in batch]
        rounds.append({"points": added, "runs": len(batch)})
        table = tuning_table(folders, args.partition_stats, grid, args.target_accuracy, args.virtual_time, args.metric)
        chosen, _ = choose(table, grid)
        batch, added = [], {}
        for name, points in grid.items():
            template = templates[(name, point_label(chosen[name]))]
            for point in next_points(points, chosen[name], args.axes.get(name, {})):
                templates[(name, point_label(point))] = runs_at(template, point)
                batch += templates[(name, point_label(point))]
                added.setdefault(name, []).append(point_label(point))
                points.append(point)
    search = {"rounds": rounds, "runs": len(folders)}
    # the last round's table: it added no point, so it holds every run of the final grid
    written = write_choice(table, grid, args.target_accuracy, args.virtual_time, args.out, args.chosen, args.title,
                           search)  # fmt: skip
    timings = "".join(
        f"{index},{round_['runs']},{cpu:.1f}\n"
        for index, (round_, cpu) in enumerate(zip(rounds, seconds, strict=True), 1)
    )
    with written_together([args.timings]) as temporaries:
        temporaries[args.timings].write_text("round,runs,cpu_seconds\n" + timings)
    print(
        f"{len(folders)} tuning runs in {len(rounds)} rounds, {sum(seconds):.0f} CPU s; {len(written)} files → "
        f"{args.out}, the choice in {args.chosen}"
    )


def register(commands: Commands) -> None:
    """The tune command."""
    tune = commands.add_parser(
        "tune",
        help="train a tuning grid, search past its edges, choose on the validation split (tune.extend)",
        description="The workflow's tuning job where an experiment's tune: has extend; plan as train-many's.",
    )
    add_dataset_arguments(tune)
    tune.add_argument("--plan", type=planned_runs, required=True, help="JSON file: the grid's runs, as train-many's")
    tune.add_argument(
        "--threads", type=THREADS, help="CPU threads for torch, shared by the processes (default: torch's choice)"
    )
    tune.add_argument(
        "--processes", type=PROCESSES, default=1, help="train each round's runs in this many processes (default 1)"
    )
    add_at_once(tune)
    tune.add_argument("--grid", type=tuning_grid, required=True, help="JSON object: each tuned run name's points")
    tune.add_argument(
        "--axes",
        type=search_axes_argument,
        default={},
        help='JSON object: run name → setting → the values a search may train at, ascending ({"afl": {"gamma0": […]}})',
    )
    sweep_arguments(tune, ("", "validation accuracy to reach, in (0, 1]"), runs=False)
    tune.add_argument("--chosen", type=Path, required=True, help="where the choice goes (JSON)")
    add_tuning_metric(tune)
    tune.add_argument(
        "--timings",
        type=Path,
        required=True,
        help="where each search round's runs and CPU seconds go (CSV: the one output that differs on a rerun)",
    )
    tune.set_defaults(run=cmd_tune)
