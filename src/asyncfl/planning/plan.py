"""The workflow's plan: which runs exist, which job trains each, with what inputs, resources and
runtime, and which figures each experiment gets (docs/development.md "The run planner").

One pure function of the validated workflow config, `plan_workflow`, torch-free, so the plan is
tested directly and Snakemake's rules only look it up (workflow/rules/common.smk). A run's settings
are assembled here once (`experiments.run_settings`, plus algorithm, J and seed). Three shapes of
training job:

- one run per job (`train`), the default: a cluster with many GPUs trains the seeds in parallel;
- one job per `pack_runs` runs, in the experiment's run order (a process start saved per run: a
  small model's run costs less than torch's imports; a GPU fills with several runs' clients);
- one job per severity training every algorithm and variant × seed (an experiment with `severities:`).

A stage whose output feeds later runs (a tuning selection) plugs in as one more job shape whose
output file is an input of the jobs it feeds; docs/development.md says how.
"""

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from asyncfl.planning.cluster import JobBudget, job_budget, part_key
from asyncfl.planning.experiments import decimal_text, experiment_runs, experiment_traces, run_settings
from asyncfl.planning.layout import (
    DATA_DIR,
    FIGURE,
    PARTITION,
    PREPARED,
    RUN_FOLDER,
    SEVERITY_RUN_FOLDER,
    TRAIN_PLAN,
    VALIDATED_PARTITION,
    TuningLayout,
)
from asyncfl.planning.run_cost import MeasuredCost, RunWork, run_work
from asyncfl.planning.tuning import (
    per_severity,
    point_label,
    search_axes,
    searchable_points,
    tuned_names,
    tuned_settings,
    tuning_points,
    tuning_severities,
)
from asyncfl.settings.catalogue import Figure, Scope, scope_figures
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.settings.names import TIMING_ONLY, base_algorithm

# The jobs' shapes, by what each trains
ONE_RUN, PACKED, SEVERITY, TUNING = "one run", "packed", "severity", "tuning"
PACK_KEY = "pack{index}"  # the key of the index-th job of an experiment with `pack_runs`


@dataclass(frozen=True)
class PlannedRun:
    """One training run.

    Attributes:
        name: the algorithm or variant (`ALGORITHM-SUFFIX`) it runs.
        j: J, clients per round.
        seed: its seed.
        severity: the straggler severity it belongs to (None: a plain experiment's run).
        folder: its run folder.
        partition: its partition's FILE.npz.
        settings: its `asyncfl train --settings` (without algorithm, J and seed, which its command gives).
        choices: the points of its tuning grid, where it is a final run of a tuned name: the choice
            `asyncfl train-many --chosen` may apply to it is one of these, nothing else.
    """

    name: str
    j: int
    seed: int
    severity: str | None
    folder: str
    partition: str
    settings: dict[str, Any]
    choices: tuple[dict[str, Any], ...] = ()

    @property
    def train_settings(self) -> dict[str, Any]:
        """Every setting of the run, as `asyncfl train-many --plan` takes them."""
        return {**self.settings, "algorithm": base_algorithm(self.name), "clients_per_round": self.j, "seed": self.seed}

    @property
    def measured(self) -> bool:
        """Trained on the real clock with measured durations: `asyncfl sim-vs-real` replays it."""
        return self.settings.get("clock") == "real" and self.settings.get("durations") == "measured"

    def plan_entry(self) -> dict[str, Any]:
        """The run as one entry of a train-many plan file."""
        entry = {"partition": self.partition, "out": self.folder, "settings": self.train_settings}
        return {**entry, "choices": list(self.choices)} if self.choices else entry


@dataclass(frozen=True)
class TrainingJob:
    """One job that trains runs: its shape, its key (the run folder, `packN`, the severity or the tuning's,
    with `.partN` where the cap split it: `cluster.part_key`), its runs, the minutes it asks for
    (`cluster.JobBudget.minutes`), and the tuning's layout where it tunes."""

    experiment: str
    shape: str
    key: str
    runs: tuple[PlannedRun, ...]
    runtime: int
    layout: TuningLayout | None = None

    @property
    def plan_file(self) -> str:
        """Where a job that trains several runs finds them (`asyncfl train-many --plan`)."""
        return TRAIN_PLAN.format(experiment=self.experiment, job=self.key)

    def plan_entries(self) -> list[dict[str, Any]]:
        return [run.plan_entry() for run in self.runs]


@dataclass(frozen=True)
class ExperimentPlan:
    """An experiment's runs, the jobs that train them, its inputs and its figures."""

    name: str
    dataset: str
    runs: tuple[PlannedRun, ...]
    jobs: tuple[TrainingJob, ...]
    partitions: tuple[str, ...]  # every seed's FILE.npz, in the order of the seeds
    traces: tuple[str, ...]  # the availability traces its runs read (inputs of their jobs and figures)
    figures: tuple[Figure, ...]
    severities: tuple[str, ...] = ()
    # the runs of its `tune:` grid, before the others: one job, or one per severity (`tune.per_severity`),
    # each split into parts within resources.max_runtime where it does not search
    tunings: tuple[TrainingJob, ...] = ()
    tuning_layouts: tuple[TuningLayout, ...] = ()  # where each of `tunings` keeps its runs, choice and figure
    tuning_partitions: tuple[str, ...] = ()  # every tuning seed's FILE.npz
    tuning_grid: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # each tuned name's points
    # with `tune.extend`: each tuned name's settings → the values a search past the grid's edges may train
    search_axes: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    probed_run: str = ""  # the run whose final model the theory figures probe: AFL at reference_J, first seed

    @property
    def tuning_stats(self) -> list[str]:
        """The statistics of the tuning seeds' partitions (what choosing reads besides the runs)."""
        return [partition.replace(".npz", ".json") for partition in self.tuning_partitions]

    @property
    def shape(self) -> str:
        return self.jobs[0].shape

    @property
    def severity_parts(self) -> int:
        """The jobs each severity's runs are split into within resources.max_runtime (every severity alike)."""
        return sum(job.runs[0].severity == self.severities[0] for job in self.jobs) if self.severities else 1

    def job(self, key: str) -> TrainingJob:
        (job,) = [job for job in (*self.jobs, *self.tunings) if job.key == key]
        return job

    def run(self, folder: str) -> PlannedRun:
        (run,) = [run for run in self.runs if run.folder == folder]
        return run

    def run_folders(self, names: tuple[str, ...], j: int) -> list[str]:
        """The folders of the runs of these names at J = `j` (an emulation figure's runs)."""
        return [run.folder for run in self.runs if run.name in names and run.j == j]

    @property
    def measured_runs(self) -> tuple[PlannedRun, ...]:
        """The runs its sim_vs_real figure replays and compares (`PlannedRun.measured`)."""
        return tuple(run for run in self.runs if run.measured)

    @property
    def replay_minutes(self) -> int:
        """What replaying its measured runs asks for: the minutes of the jobs that trained them, an upper
        bound (a replay computes what its run did, without the real clock's waits)."""
        return sum(job.runtime for job in self.jobs if any(run.measured for run in job.runs))

    def figure_stems(self) -> list[str]:
        """Its figures' paths less .png/.pdf: a tuning figure once per tuning job, in its layout's folder."""
        return [
            stem
            for figure in self.figures
            for stem in (
                [layout.figure(figure.name) for layout in self.tuning_layouts]
                if figure.scope == Scope.TUNING
                else [FIGURE.format(experiment=self.name, name=figure.name)]
            )
        ]

    def run_files(self, files: tuple[str, ...]) -> list[str]:
        """These files of every run, in the runs' order (a figure rule's inputs, a job's outputs)."""
        return [f"{run.folder}/{file}" for run in self.runs for file in files]

    def job_inputs(self) -> dict[str, Any]:
        """What a job that trains its runs reads: the prepared dataset, every seed's partition and the
        availability traces, if any."""
        return {"data": prepared_marker(self.dataset), "partitions": list(self.partitions), "trace": list(self.traces)}

    def chosen_input(self) -> dict[str, str]:
        """What its final runs read besides, where it is tuned: the tuning stage's choice, or with
        `tune.per_severity` their severity's (`{severity}` left as the severity job's wildcard)."""
        if not self.tunings:
            return {}
        each_severity = self.tuning_layouts[0].severity is not None
        return {"chosen": TuningLayout(self.name, "{severity}" if each_severity else None).chosen}

    def tuning_parts(self, layout: TuningLayout) -> tuple[TrainingJob, ...]:
        """The jobs that train one tuning's runs."""
        return tuple(job for job in self.tunings if job.layout == layout)

    def severity_job_outputs(self, files: tuple[str, ...], part: int = 0) -> list[str]:
        """The outputs of one part of its severity jobs with `{severity}` left as the rule's wildcard:
        every severity trains the same runs (a sweep's runs at reference_J), split alike."""
        return [
            SEVERITY_RUN_FOLDER.format(
                experiment=self.name, severity="{severity}", algorithm=run.name, J=run.j, seed=run.seed
            )
            + f"/{file}"
            for run in self.jobs[part].runs
            for file in files
        ]


@dataclass(frozen=True)
class WorkflowPlan:
    """Every experiment's plan, by name, in the config's order."""

    experiments: dict[str, ExperimentPlan] = field(default_factory=dict)

    def __getitem__(self, name: str) -> ExperimentPlan:
        return self.experiments[name]

    def of_shape(self, shape: str) -> list[str]:
        """The experiments whose training jobs have this shape."""
        return [name for name, plan in self.experiments.items() if plan.shape == shape]

    def longest_job(self) -> int:
        """The minutes of its longest training job (at most resources.max_runtime)."""
        return max(job.runtime for plan in self.experiments.values() for job in (*plan.jobs, *plan.tunings))

    def most_runs_in_a_process(self, processes: int) -> int:
        """The most runs one training process is given: a sweep's job (a severity's, a tuning's) deals its
        runs out over `processes` processes (`cli/processes.py`), any other job trains them in one."""
        return max(
            -(-len(job.runs) // (processes if job.shape in (SEVERITY, TUNING) else 1))
            for plan in self.experiments.values()
            for job in (*plan.jobs, *plan.tunings)
        )

    def figure_files(self) -> list[str]:
        """Every figure of every experiment, PNG and PDF: the workflow's targets."""
        return [
            stem + f".{ext}"
            for plan in self.experiments.values()
            for stem in plan.figure_stems()
            for ext in ("png", "pdf")
        ]


def prepared_marker(dataset: str) -> str:
    """What the data rule writes once a dataset is downloaded and verified."""
    return f"{DATA_DIR}/{dataset}/{PREPARED}"


def partition_file(experiment: dict[str, Any], seed: int | str, suffix: str = ".npz") -> str:
    """A seed's partition: it depends on data, α, C, seed and the validation fraction only, so every
    algorithm of one seed shares it; numbers written out in decimals (1e-06 as 0.000001), as the
    wildcards expect."""
    names = dict(dataset=experiment["dataset"], alpha=decimal_text(experiment["alpha"]), clients=experiment["clients"])
    if "validation_fraction" in experiment:
        validation = decimal_text(experiment["validation_fraction"])
        return VALIDATED_PARTITION.format(**names, seed=seed, validation=validation) + suffix
    return PARTITION.format(**names, seed=seed) + suffix


def plan_workflow(config: dict[str, Any], costs: dict[tuple[str, str], MeasuredCost] | None = None) -> WorkflowPlan:
    """The plan of a validated workflow config (`workflow_config.check_workflow_config`), its jobs' minutes
    from the cost table's rows (`run_cost.read_cost_table`; none: each run `resources.train.runtime`)."""
    reference_j, budget = config["reference_J"], job_budget(config["resources"], costs)
    return WorkflowPlan(
        {
            name: plan_experiment(name, experiment, reference_j, budget)
            for name, experiment in config["experiments"].items()
        }
    )


def plan_experiment(name: str, experiment: dict[str, Any], reference_j: int, budget: JobBudget) -> ExperimentPlan:
    severities = tuple(experiment.get("severities", {}))
    runs = tuple(planned_runs(name, experiment, reference_j, severities))
    jobs = training_jobs(name, experiment, runs, severities, budget)
    tunings: tuple[TrainingJob, ...] = ()
    layouts: tuple[TuningLayout, ...] = ()
    axes = {}
    if "tune" in experiment:
        axes = {
            algorithm: found
            for algorithm in tuned_names(experiment)
            if (found := search_axes(experiment, algorithm, reference_j))
        }
        searched = sum(  # the points a search adds stepping each setting's values, each on every tuning seed
            len(values) - len({point[key] for point in tuning_points(experiment, algorithm)})
            for algorithm, settings in axes.items()
            for key, values in settings.items()
        )
        severities_tuned = tuning_severities(experiment)
        layouts = tuple(TuningLayout(name, s if per_severity(experiment) else None) for s in severities_tuned)
        for layout, severity in zip(layouts, severities_tuned, strict=True):
            tuning_runs = tuple(planned_tuning_runs(layout, experiment, reference_j, severity))
            tunings += tuning_jobs(layout, experiment, tuning_runs, searched if axes else None, budget)
    return ExperimentPlan(
        name,
        experiment["dataset"],
        runs,
        jobs,
        tuple(partition_file(experiment, seed) for seed in experiment["seeds"]),
        tuple(experiment_traces(experiment)),
        tuple(figures_of(experiment, reference_j, any(run.measured for run in runs))),
        severities,
        tunings,
        layouts,
        tuple(partition_file(experiment, seed) for seed in experiment.get("tune", {}).get("seeds", [])),
        {algorithm: tuning_points(experiment, algorithm) for algorithm in tuned_names(experiment)}
        if "tune" in experiment
        else {},
        axes,
        RUN_FOLDER.format(experiment=name, algorithm="afl", J=reference_j, seed=experiment["seeds"][0]),
    )


def training_jobs(
    name: str, experiment: dict[str, Any], runs: tuple[PlannedRun, ...], severities: tuple[str, ...], budget: JobBudget
) -> tuple[TrainingJob, ...]:
    """The jobs that train an experiment's final runs: per severity (in parts within the cap, every
    severity split alike, at the most any severity's run asks for), per `pack_runs` runs (fewer where a
    pack would outlast the cap), or one a run."""
    if severities:
        by_severity = [[run for run in runs if run.severity == severity] for severity in severities]
        each = [run_seconds(experiment, severity_runs, budget) for severity_runs in by_severity]
        seconds = [max(alike) for alike in zip(*each, strict=True)]
        parts = within_cap(name, budget, seconds, spread=True)
        return tuple(
            job
            for severity, severity_runs in zip(severities, by_severity, strict=True)
            for job in part_jobs(name, SEVERITY, severity, severity_runs, seconds, parts, budget)
        )
    seconds = run_seconds(experiment, runs, budget)
    if "pack_runs" in experiment:
        within_cap(name, budget, seconds, spread=False)  # every run alone within the cap

        def packs(size: int) -> list[range]:
            return [range(i, min(i + size, len(runs))) for i in range(0, len(runs), size)]

        def minutes(pack: range) -> int:
            return budget.minutes(seconds[pack.start : pack.stop], False)

        size = next(n for n in range(experiment["pack_runs"], 0, -1) if all(minutes(p) <= budget.cap for p in packs(n)))
        return tuple(
            TrainingJob(name, PACKED, PACK_KEY.format(index=index), runs[p.start : p.stop], minutes(p))
            for index, p in enumerate(packs(size))
        )
    within_cap(name, budget, seconds, spread=False)
    return tuple(
        TrainingJob(name, ONE_RUN, run.folder, (run,), budget.minutes([each], False))
        for run, each in zip(runs, seconds, strict=True)
    )


def run_seconds(experiment: dict[str, Any], runs: Sequence[PlannedRun], budget: JobBudget) -> list[float]:
    """The seconds each of `runs` asks for (`cluster.JobBudget.run_seconds`): its work counted from its
    settings (`run_cost.run_work`) at the device kind's measured cost; on the real clock, its paced
    length besides (`cluster.JobBudget.real_clock_seconds`)."""
    kept = 1 - experiment.get("validation_fraction", 0)  # the clients' share of the training set

    def work(run: PlannedRun) -> RunWork:
        algorithm = base_algorithm(run.name)
        return run_work(run.settings, algorithm, run.j, experiment["dataset"], experiment["clients"], kept)

    def seconds(run: PlannedRun) -> float:
        computing = budget.run_seconds(experiment["model"], functools.partial(work, run))
        if run.settings.get("clock") != "real":
            return computing
        config = make_config(run.train_settings)
        return budget.real_clock_seconds(computing, config.time_scale, config.max_virtual_time)

    return [seconds(run) for run in runs]


def within_cap(name: str, budget: JobBudget, seconds: Sequence[float], spread: bool) -> list[range]:
    """`JobBudget.parts`, its refusal naming the experiment."""
    try:
        return budget.parts(seconds, spread)
    except InputError as error:
        raise InputError(f"experiments.{name}: {error}") from None


def part_jobs(
    name: str,
    shape: str,
    key: str,
    runs: Sequence[PlannedRun],
    seconds: Sequence[float],
    parts: list[range],
    budget: JobBudget,
    layout: TuningLayout | None = None,
) -> tuple[TrainingJob, ...]:
    """The jobs of runs that one job spreads over its processes (a severity's, a tuning grid's), one per
    part of `parts` (`JobBudget.parts`), each keyed `cluster.part_key` and asking for its part's minutes."""
    return tuple(
        TrainingJob(
            name,
            shape,
            part_key(key, index, len(parts)),
            tuple(runs[part.start : part.stop]),
            budget.minutes(seconds[part.start : part.stop], True),
            layout,
        )
        for index, part in enumerate(parts)
    )


def tuning_jobs(
    layout: TuningLayout,
    experiment: dict[str, Any],
    runs: tuple[PlannedRun, ...],
    searched: int | None,
    budget: JobBudget,
) -> tuple[TrainingJob, ...]:
    """The jobs of one tuning: its grid's runs in parts within the cap, or, where it searches past the
    grid's edges (`searched`: the points the search may add), one job, since each step of the search reads
    the scores of all the runs before it."""
    seconds = run_seconds(experiment, runs, budget)
    if searched is None:
        parts = within_cap(layout.experiment, budget, seconds, spread=True)
        return part_jobs(layout.experiment, TUNING, layout.job, runs, seconds, parts, budget, layout)
    seeds = len(experiment["tune"]["seeds"])
    minutes = budget.minutes(seconds, True, searched, seeds)  # a search's steps may add one point each
    if minutes > budget.cap:
        raise InputError(
            f"experiments.{layout.experiment}: its tuning searches past its grid in one job of up to "
            f"{len(runs) + searched * seeds} runs, {minutes} min, over resources.max_runtime {budget.cap}: raise "
            "max_runtime or resources.train.processes, or lower resources.train.runtime to what a run takes"
        )
    return (TrainingJob(layout.experiment, TUNING, layout.job, runs, minutes, layout),)


def planned_tuning_runs(
    layout: TuningLayout, experiment: dict[str, Any], reference_j: int, severity: str
) -> Iterator[PlannedRun]:
    """Every run of one tuning job: each tuned run name at each of its points, on each tuning seed, at
    `severity`, in `layout`'s folder."""
    for algorithm in tuned_names(experiment):
        for point in tuning_points(experiment, algorithm):
            for seed in experiment["tune"]["seeds"]:
                folder = layout.run_folder(point_label(point), algorithm, reference_j, seed)
                settings = tuned_settings(experiment, algorithm, reference_j, point, severity)
                partition = partition_file(experiment, seed)
                yield PlannedRun(algorithm, reference_j, seed, severity, folder, partition, settings)


def planned_runs(
    name: str, experiment: dict[str, Any], reference_j: int, severities: tuple[str, ...]
) -> Iterator[PlannedRun]:
    """Every run of an experiment: of a sweep, severity by severity; AFL over the J sweep, the others at reference_J."""
    tuned = (
        {name: tuple(searchable_points(experiment, name, reference_j)) for name in tuned_names(experiment)}
        if "tune" in experiment
        else {}
    )
    for severity in severities or (None,):
        for algorithm, j, seed in experiment_runs(experiment, reference_j):
            if severity is None:
                folder = RUN_FOLDER.format(experiment=name, algorithm=algorithm, J=j, seed=seed)
            else:
                folder = SEVERITY_RUN_FOLDER.format(
                    experiment=name, severity=severity, algorithm=algorithm, J=j, seed=seed
                )
            settings = run_settings(experiment, algorithm, j, reference_j, severity)
            choices = tuned.get(algorithm, ())
            yield PlannedRun(algorithm, j, seed, severity, folder, partition_file(experiment, seed), settings, choices)


def timing_only(experiment: dict[str, Any]) -> bool:
    """Whether the experiment's runs are timing-only (`train: {trainer: none}`)."""
    return experiment.get("train", {}).get("trainer") == TIMING_ONLY


def figures_of(experiment: dict[str, Any], reference_j: int, measured: bool = False) -> list[Figure]:
    """An experiment's figures: a sweep's straggler claim; otherwise every figure, the sampling check, and
    each figure of the paper's code as it ran where the experiment runs every algorithm it compares; and
    where some of its runs are `measured`, the simulator against them."""
    against = scope_figures(Scope.MEASURED, reference_j) if measured else []
    if experiment.get("severities"):
        tuning = scope_figures(Scope.TUNING, reference_j) if "tune" in experiment else []
        return [*scope_figures(Scope.SEVERITY_SWEEP, reference_j), *tuning, *against]
    if timing_only(experiment):  # no model to probe, no loss to compare: the clock's figures alone
        return scope_figures(Scope.EXPERIMENT, reference_j, timing_only=True)
    algorithms = set(experiment["algorithms"])
    emulations = [f for f in scope_figures(Scope.EMULATION, reference_j) if set(f.compares) <= algorithms]
    return [
        *scope_figures(Scope.EXPERIMENT, reference_j),
        *scope_figures(Scope.THEORY, reference_j),
        *emulations,
        *against,
    ]
