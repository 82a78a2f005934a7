"""The commands that read finished runs: `select` (a tuning grid's choice), `figures`, `stragglers`
(a severity sweep's figures and verdicts), `theory` (the sampling-variance check), `sim-vs-real` (the
simulator against measured runs) and `verdict-table` (a severity's verdicts as Markdown)."""

import argparse
import json
from pathlib import Path
from typing import Any

from asyncfl.cli.arguments import FRACTION, POSITIVE, POWER, Commands, add_dataset_arguments, at_least, json_mapping
from asyncfl.planning.experiments import first_repeated
from asyncfl.planning.tuning import TUNING_METRICS
from asyncfl.settings.catalogue import CATALOGUE, Scope


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


def sweep_command(
    commands: "argparse._SubParsersAction[argparse.ArgumentParser]",
    name: str,
    summary: str,
    description: str,
    helps: tuple[str, str],
    judged_without_partitions: bool = False,
) -> argparse.ArgumentParser:
    """A command that reads a sweep's runs at one budget, with what such commands share: the runs, their
    partitions, the target accuracy (`helps`: what the runs are, which split the target is read on),
    the budget, the title and the output folder (`judged_without_partitions`: --partition-stats optional)."""
    parser = commands.add_parser(name, help=summary, description=description)
    sweep_arguments(parser, helps, judged_without_partitions=judged_without_partitions)
    return parser


def sweep_arguments(parser: argparse.ArgumentParser, helps: tuple[str, str], runs: bool = True,
                    judged_without_partitions: bool = False) -> None:  # fmt: skip
    """The arguments of a command that reads a sweep's runs (`runs`: given as --runs; `asyncfl tune`
    trains its own; `judged_without_partitions`: a command that can decide from the runs' records alone,
    --partition-stats optional)."""
    if runs:
        parser.add_argument("--runs", type=Path, nargs="+", required=True, help=helps[0])
    partitions = "FILE.json of each partition"
    if judged_without_partitions:
        partitions += (
            " (optional: without them the runs are judged from their run.json and evaluations.csv alone, "
            'docs/outputs.md "Re-judging from what is kept")'
        )
    parser.add_argument(
        "--partition-stats", type=Path, nargs="+", default=[], required=not judged_without_partitions, help=partitions
    )
    parser.add_argument("--target-accuracy", type=FRACTION, required=True, help=helps[1])
    parser.add_argument("--virtual-time", type=POSITIVE, required=True, help="the runs' virtual-time budget T (s)")
    parser.add_argument("--title", default="", help="experiment name shown in the title")
    parser.add_argument("--out", type=Path, required=True, help="folder of the figures and their table")


def add_tuning_metric(parser: argparse.ArgumentParser) -> None:
    """The time a tuning point is scored by (`select`, `tune`)."""
    parser.add_argument(
        "--metric",
        choices=TUNING_METRICS,
        default=TUNING_METRICS[0],
        help="score each point by its time to first reach the target on validation (default) or to stay at or above it",
    )


def cmd_select(args: argparse.Namespace) -> None:
    """Choose each tuned run name's grid point on the validation split; draw the tuning figure."""
    from asyncfl.analysis.tuning import select

    target, budget = args.target_accuracy, args.virtual_time
    written = select(
        args.runs, args.partition_stats, args.grid, target, budget, args.out, args.chosen, args.title, args.metric
    )
    print(f"{len(written)} files → {args.out}, the choice in {args.chosen}")


def cmd_figures(args: argparse.Namespace) -> None:
    """Draw an experiment's figures from its runs' CSVs."""
    from asyncfl.analysis.figures import draw_figures

    written = draw_figures(args.runs, args.partition_stats, args.reference_j, args.out, args.title, args.emulation)
    print(f"{len(written)} files → {args.out}")


def cmd_stragglers(args: argparse.Namespace) -> None:
    """Draw the figures and tables of a severity sweep from its runs' CSVs."""
    from asyncfl.analysis.stragglers import draw_straggler_claim
    from asyncfl.planning.families import declared_family

    targets = [args.target_accuracy, *args.other_targets]
    family = None
    if args.family is not None:
        readings = (len(targets), 1 + len(args.other_budgets))
        family = declared_family(args.family, "--family", list(args.severities), None, *readings)
    written = draw_straggler_claim(
        args.runs,
        args.partition_stats,
        args.severities,
        targets,
        args.virtual_time,
        args.out,
        args.title,
        args.replication_seeds,
        args.other_budgets,
        args.equivalence_margin,
        family,
        args.power,
        args.pooled,
    )
    print(f"{len(written)} files → {args.out}")


def cmd_theory(args: argparse.Namespace) -> None:
    """The paper's sampling-variance claim on one finished run's client updates: table and figure."""
    from asyncfl.analysis.theory import sampling_variance

    written = sampling_variance(args.run_dir, args.dataset, args.root, args.partition, args.out, args.title)
    print(f"{len(written)} files → {args.out}")


def add_select(commands: Commands) -> None:
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
    add_tuning_metric(selecting)
    selecting.set_defaults(run=cmd_select)


def add_figures(commands: Commands) -> None:
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


def add_stragglers(commands: Commands) -> None:
    stragglers = sweep_command(
        commands,
        "stragglers",
        "the straggler_claim figure of a severity sweep (PNG, PDF and its table as CSV)",
        "Runs are …/SEVERITY/ALGORITHM/JN/seedS, as the workflow lays out an experiment with severities:.",
        ("run folders (…/SEVERITY/…)", "test accuracy to reach, in (0, 1]"),
        judged_without_partitions=True,
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
    stragglers.add_argument(
        "--replication-seeds",
        type=at_least(0),
        nargs="*",
        default=[],
        help="seeds of the runs whose verdicts are drawn apart, to replicate those of the other seeds",
    )
    stragglers.add_argument(
        "--other-budgets",
        type=POSITIVE,
        nargs="*",
        default=[],
        help="shorter virtual times (s) the verdicts are also read at, the runs cut there (each below --virtual-time)",
    )
    stragglers.add_argument(
        "--equivalence-margin",
        type=POSITIVE,
        default=None,
        help="m (virtual s): a comparison neither faster nor slower is equivalent within ±m (two one-sided tests) "
        "or undecided; without it, 'no significant difference'",
    )
    stragglers.add_argument(
        "--family",
        type=json_mapping,
        default=None,
        help='JSON object: the Holm family declared, {"severities": [...], "names": [...], "spans": ["targets", '
        '"budgets"]}; a comparison it holds that the runs lack counts at p = 1 (docs/theory.md "Stragglers"); '
        "without it, each target's and budget's comparisons at hand",
    )
    stragglers.add_argument(
        "--power",
        type=POWER,
        default=None,
        help="P in [0.5, 1): each comparison's detectable_difference, the smallest true mean difference its "
        'paired t at the family\'s level detects with probability P (docs/theory.md "Stragglers")',
    )
    stragglers.add_argument(
        "--pooled",
        action="store_true",
        help="decide each verdict on every seed; the discovery and replication sets (--replication-seeds) beside "
        'it check its sign (docs/theory.md "Stragglers")',
    )
    stragglers.set_defaults(run=cmd_stragglers)


def add_theory(commands: Commands) -> None:
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


def cmd_sim_vs_real(args: argparse.Namespace) -> None:
    """Replay measured runs on the virtual clock and compare (`analysis.sim_vs_real`)."""
    from asyncfl.analysis.sim_vs_real import sim_vs_real

    args.out.mkdir(parents=True, exist_ok=True)
    table = sim_vs_real(args.runs, args.partitions, args.out, args.root, args.replays, args.title)
    print(table.to_string(index=False))
    print(f"sim_vs_real.csv, .png and .pdf → {args.out}; {len(table)} replays → {args.replays or args.out / 'replays'}")


def add_sim_vs_real(commands: Commands) -> None:
    comparing = commands.add_parser(
        "sim-vs-real",
        help="replay runs with measured durations on the virtual clock and compare them (table and figure)",
        description='Each run trained with clock: real and durations: measured (docs/clocks.md "Measured durations").',
    )
    comparing.add_argument("--runs", type=Path, nargs="+", required=True, help="the measured run folders")
    comparing.add_argument("--partitions", type=Path, nargs="+", required=True, help="each run's FILE.npz, in order")
    comparing.add_argument("--root", type=Path, help="the dataset's folder (as for asyncfl train)")
    comparing.add_argument("--out", type=Path, required=True, help="folder of the table and the figure")
    comparing.add_argument("--replays", type=Path, help="folder of the replays, one run folder each (OUT/replays)")
    comparing.add_argument("--title", help="the figure's title before the catalogue's (the experiment)")
    comparing.set_defaults(run=cmd_sim_vs_real)


def cmd_verdict_table(args: argparse.Namespace) -> None:
    """Print one severity's verdicts as Markdown (`analysis.verdict_markdown`)."""
    from asyncfl.analysis.verdict_markdown import verdict_markdown

    print(verdict_markdown(args.verdicts, args.severity, args.target, args.budget), end="")


def add_verdict_table(commands: Commands) -> None:
    tables = commands.add_parser(
        "verdict-table",
        help="one severity's verdicts as Markdown tables, from straggler_verdicts.csv (docs/results.md's)",
        description="Each run name's time to stay above the target, and each asynchronous name against each "
        "synchronous one: the primary seed set's difference, interval and verdict, the other sets beside it.",
    )
    tables.add_argument("--verdicts", type=Path, required=True, help="straggler_verdicts.csv (asyncfl stragglers)")
    tables.add_argument("--severity", required=True, help="the row (a severity's name)")
    tables.add_argument("--target", type=FRACTION, required=True, help="the test accuracy the times are read at")
    tables.add_argument("--budget", type=POSITIVE, help="the budget the runs were cut at (default: the longest, T)")
    tables.set_defaults(run=cmd_verdict_table)


def register(commands: Commands) -> None:
    """The select, figures, stragglers, theory, sim-vs-real and verdict-table commands."""
    for add in (add_select, add_figures, add_stragglers, add_theory, add_sim_vs_real, add_verdict_table):
        add(commands)
