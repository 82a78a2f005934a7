import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

# The package's light modules (configuration, file layout) plan the DAG; rules run its CLI.
SRC = Path(workflow.current_basedir).parents[1] / "src"
sys.path.insert(0, str(SRC))
from asyncfl.settings.catalogue import Scope, catalogued, scope_figures
from asyncfl.planning.cluster import attempt_minutes, check_partitions, check_resources
from asyncfl.planning.cluster import cpu_job_resources
from asyncfl.planning.cluster import gpu_job_resources, part_key, training_kind
from asyncfl.settings.errors import InputError
from asyncfl.planning.experiments import NAME
from asyncfl.planning.layout import ARCHIVE_DIR, ARCHIVE_FILES, DATA_DIR, EVENTS
from asyncfl.planning.layout import (
    FIGURE,
    METRICS,
    REPLAY_DIR,
    MODEL,
    PARTITION,
    RUN_FILES,
    RUN_FOLDER,
)
from asyncfl.planning.layout import (
    RUN_RECORD,
    RUN_SUMMARY,
    STRAGGLER_VERDICTS,
)
from asyncfl.planning.layout import TRAIN_PLAN
from asyncfl.planning.layout import VALIDATED_PARTITION
from asyncfl.settings.names import ALGORITHMS
from asyncfl.planning.plan import (
    ONE_RUN,
    PACKED,
    SEVERITY,
    partition_file,
    plan_workflow,
)
from asyncfl.planning.plan import prepared_marker, timing_only
from asyncfl.planning.run_cost import check_cost, read_cost_table
from asyncfl.planning.tuning import tuning_budget, tuning_metric
from asyncfl.planning.workflow_config import check_config_files, check_schema
from asyncfl.planning.workflow_config import check_workflow_config
from asyncfl.planning.workflow_config import config_name, failure_summary
from asyncfl.planning.workflow_config import record_command, report_folder
from asyncfl.settings.yaml_files import with_numbers
from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.settings.types import DeploymentMethod
from snakemake.utils import validate

# 1e-3 as users write it: a number (Snakemake's YAML reader, like PyYAML, would keep it as text).
config.update(with_numbers(config))
try:
    # the key named first, then Snakemake's check (which fills in the schema's defaults)
    check_schema(config)
    validate(config, "../schemas/config.schema.yaml")
    check_workflow_config(config)
    check_resources(config["resources"])
    check_config_files(workflow.configfiles)
except InputError as error:
    raise WorkflowError(str(error)) from None

ASYNCFL = f"PYTHONPATH={shlex.quote(str(SRC))} python -m asyncfl"
TORCH_ENV = f"../envs/torch-{config['torch']}.yaml"
# The rules run in the environment snakemake runs in (the project's .venv) unless conda is asked for
# (--software-deployment-method conda), which then must be on PATH: Snakemake would call it from each
# job and fail there (docs/cluster.md "Your cluster"). Rules name their conda environment only
# where conda is on PATH, so that `snakemake -n` plans without it; -n says which route a run takes.
CONDA_FOUND = shutil.which("conda") is not None
if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method:
    if not CONDA_FOUND:
        raise WorkflowError(
            "--software-deployment-method conda asks for conda, which is not on PATH: install it, or leave "
            "the option out to run the rules in this environment"
        )
    logger.info(f"rules run in conda environments ({TORCH_ENV})")
else:
    logger.info(
        f"rules run in this Python environment ({sys.prefix}); conda: --software-deployment-method conda"
    )


def torch_env(wildcards):
    """The rules' conda environment, where conda can build it."""
    return TORCH_ENV if CONDA_FOUND else None


REFERENCE_J = config["reference_J"]
# What every job that trains or probes a model asks for, besides its runtime
TRAIN_THREADS = config["resources"]["train"]["threads"]
# A job that trains a sweep's runs (a severity, the tuning) spreads them over this many processes of
# TRAIN_THREADS threads each (`asyncfl train-many --processes`); their outputs are one process's.
TRAIN_PROCESSES = config["resources"]["train"]["processes"]
SWEEP_THREADS = TRAIN_THREADS * TRAIN_PROCESSES


def spread(command):
    """A sweep job's `command` with its runs spread over TRAIN_PROCESSES processes (as is for one)."""
    processes = f" --processes {TRAIN_PROCESSES}" if TRAIN_PROCESSES > 1 else ""
    return command.replace(" --threads", f"{processes} --threads", 1)


# What a job that trains asks for besides threads and runtime (GPUs in the site's spelling, memory, the
# GPU partition), and what every other job asks for (the CPU partition): asyncfl.planning.cluster
TRAIN_RESOURCES = gpu_job_resources(config["resources"])
CPU_RESOURCES = cpu_job_resources(config["resources"])
# The figures each rule draws (asyncfl.settings.catalogue)
FIGURES = scope_figures(Scope.EXPERIMENT, REFERENCE_J)
TIMING_FIGURES = scope_figures(Scope.EXPERIMENT, REFERENCE_J, timing_only=True)
# The experiments whose runs are timing-only (train: {trainer: none}), and the others
TIMED = [name for name, setup in config["experiments"].items() if timing_only(setup)]
TRAINED = [name for name in config["experiments"] if name not in TIMED]
EMULATION_FIGURES = scope_figures(Scope.EMULATION, REFERENCE_J)
STRAGGLER_FIGURES = scope_figures(Scope.SEVERITY_SWEEP, REFERENCE_J)
SAMPLING_VARIANCE_FIGURE = catalogued("sampling_variance")
TUNING_FIGURE = catalogued("tuning")
SIM_VS_REAL_FIGURE = catalogued("sim_vs_real")
VERDICT_CURVE_FIGURE = catalogued("verdict_over_budget")
# The archive of this config's results, apart from another config's in the same clone
try:
    CONFIG_NAME = config_name(workflow.configfiles)
except InputError as error:
    raise WorkflowError(str(error)) from None
ARCHIVE = [f"{ARCHIVE_DIR.format(config=CONFIG_NAME)}/{name}" for name in ARCHIVE_FILES]
# Which runs exist, the jobs that train them and each experiment's figures (asyncfl.planning.plan): the
# functions below only look them up for the rules.
# What each run asks a cluster for where a device kind is named: its work at the cost measured there
# (config/costs.csv, asyncfl.planning.run_cost); otherwise resources.train.runtime
COST_TABLE = SRC.parent / "config" / "costs.csv"
try:
    COSTS = (
        read_cost_table(COST_TABLE)
        if config["resources"]["cost"].get("device") is not None
        else {}
    )
    check_cost(config["resources"]["cost"], COSTS)
    PLAN = plan_workflow(config, COSTS)
except InputError as error:
    raise WorkflowError(str(error)) from None
MAX_RUNTIME = config["resources"]["max_runtime"]


def retried(minutes):
    """A job's runtime resource: `minutes`, twice as much on each retry after a time limit, within the cap."""
    return lambda wildcards, attempt: attempt_minutes(minutes, attempt, MAX_RUNTIME)


def get_train_runtime(wildcards, attempt):
    """The runtime of the `train` job of one run, its own in the plan, doubled on each retry."""
    job = PLAN[wildcards.experiment].job(RUN_FOLDER.format(**wildcards))
    return attempt_minutes(job.runtime, attempt, MAX_RUNTIME)


# The experiments by the shape of their training jobs: one job per severity, per `pack_runs` runs,
# or per run (the `train` rule; "(?!)" matches nothing)
SWEEPS = PLAN.of_shape(SEVERITY)
PACKED_EXPERIMENTS = PLAN.of_shape(PACKED)
ONE_RUN_PER_JOB = "|".join(map(re.escape, PLAN.of_shape(ONE_RUN))) or "(?!)"
# The experiments with runs on the real clock with measured durations (their sim_vs_real figure)
MEASURED = [name for name, plan in PLAN.experiments.items() if plan.measured_runs]
# The archive's provenance records how the workflow was started; a report's folder is made for it.
record_command(sys.argv)
if (REPORT_FOLDER := report_folder(sys.argv)) is not None:
    REPORT_FOLDER.mkdir(parents=True, exist_ok=True)


def cluster_partitions():
    """The partitions this cluster has, with their MaxTime (`sinfo`), where it can be asked: on the
    login node, not inside a job (its workflow was checked when it was submitted); None elsewhere, or
    where sinfo does not answer."""
    if (
        not any(config["resources"].get("partitions", {}).values())
        or shutil.which("sinfo") is None
        or "SLURM_JOB_ID" in os.environ
    ):
        return None
    try:
        listed = subprocess.run(
            ["sinfo", "-h", "-o", "%R %l"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return listed.stdout if listed.returncode == 0 else None


# The partitions named in the config exist and allow the longest job each gets: refused now, before
# anything is submitted, where the cluster can be asked (a login node; not a laptop).
PARTITIONS = cluster_partitions()
if PARTITIONS is not None:
    try:
        check_partitions(
            config["resources"],
            {training_kind(config["resources"]): PLAN.longest_job()},
            PARTITIONS,
        )
    except InputError as error:
        raise WorkflowError(str(error)) from None


wildcard_constraints:
    experiment=NAME.pattern,
    dataset=r"[a-z0-9-]+",
    alpha=r"[0-9.]+",
    validation=r"0\.[0-9]+",
    clients=r"\d+",
    seed=r"\d+",
    J=r"\d+",
    algorithm="|".join(ALGORITHMS),


def one_of(names):
    """A wildcard's pattern that matches exactly these names (none: nothing)."""
    return "|".join(re.escape(name) for name in names) or "(?!)"


def experiment(wildcards):
    return config["experiments"][wildcards.experiment]


def data_root(dataset):
    """A user's existing copy (config data.roots) or the workflow's own download folder."""
    return config["data"]["roots"].get(dataset, f"{DATA_DIR}/{dataset}")


def get_prepared_data(wildcards):
    """The prepared marker of the dataset of a rule's experiment."""
    return prepared_marker(experiment(wildcards)["dataset"])


def get_availability_trace(wildcards):
    """The availability traces an experiment's runs read, wherever its `train:`, a severity or a variant
    names one: its runs, its theory check and its system timeline read them (each checks its trace
    against the SHA-256 its run recorded), so an edited trace makes them again."""
    return list(PLAN[wildcards.experiment].traces)


def get_partition_stats(wildcards):
    """The statistics of every partition an experiment's runs use, one per seed; the figures draw the
    first seed's and check each run against the one it was trained on."""
    exp = experiment(wildcards)
    return [partition_file(exp, seed, ".json") for seed in exp["seeds"]]


def run_folders(name):
    """The experiment's run folders: only those of the config, whatever else lies beside them."""
    return [run.folder for run in PLAN[name].runs]


def experiment_data_root(name):
    """For a rule: the data folder of an experiment's dataset (a function, as Snakemake's lint asks of paths)."""
    return lambda wildcards: data_root(PLAN[name].dataset)


def get_train_plan(wildcards):
    """The runs of the training job `wildcards.job` of an experiment (a severity of a sweep, or
    "packN" of one with `pack_runs`), which `plan_training` writes to its plan file.
    """
    return PLAN[wildcards.experiment].job(wildcards.job).plan_entries()


def train_plan(name, job):
    """The plan file of one job that trains several runs of an experiment (`job`: a pattern, or a name)."""
    return TRAIN_PLAN.format(experiment=name, job=job)


# The experiments with a `tune:` grid, whose tuning jobs run before their others: one each, or one per
# severity (`tune.per_severity`), each with its layout (asyncfl.planning.layout.TuningLayout)
TUNED = [name for name, plan in PLAN.experiments.items() if plan.tunings]
TUNING_LAYOUTS = [layout for name in TUNED for layout in PLAN[name].tuning_layouts]


def run_files(name, files=RUN_FILES):
    return PLAN[name].run_files(files)


def figure_png(figure, experiment="{experiment}"):
    """A figure's PNG, in the report with its caption (asyncfl.settings.catalogue.Figure)."""
    return report(
        FIGURE.format(experiment=experiment, name=figure.name) + ".png",
        caption=f"../report/{figure.key}.rst",
        category=experiment,
        labels={"figure": figure.name},
    )


def figure_pdf(figure, experiment="{experiment}"):
    return FIGURE.format(experiment=experiment, name=figure.name) + ".pdf"


def run_output(file):
    """A file of the run folder that the `train` rule writes."""
    return f"{RUN_FOLDER}/{file}"


def emulation_run_folders(figure):
    """For a rule: the runs an emulation figure compares (Figure.compares), at reference_J."""
    return lambda wildcards: PLAN[wildcards.experiment].run_folders(
        figure.compares, REFERENCE_J
    )


def emulation_run_files(figure):
    """For a rule: the files the figures read of the runs an emulation figure compares."""
    folders = emulation_run_folders(figure)
    return lambda wildcards: [
        f"{folder}/{file}" for folder in folders(wildcards) for file in RUN_SUMMARY
    ]


def get_probed_run(wildcards):
    """The run whose final model the theory figures probe (asyncfl.planning.plan.ExperimentPlan)."""
    return PLAN[wildcards.experiment].probed_run


def train_settings(wildcards):
    """The run's settings as JSON for `asyncfl train --settings` (asyncfl.planning.plan.PlannedRun)."""
    folder = RUN_FOLDER.format(**wildcards)
    return json.dumps(PLAN[wildcards.experiment].run(folder).settings)


def tuning_stats(name):
    """The partition statistics of an experiment's tuning seeds (the choice's inputs)."""
    return [
        partition.replace(".npz", ".json") for partition in PLAN[name].tuning_partitions
    ]


def choice_outputs(layout):
    """What choosing writes: the choice, the tuning figure and its table, where `layout` keeps them."""
    stem = layout.figure(TUNING_FIGURE.name)
    return {
        "chosen": layout.chosen,
        "png": report(
            f"{stem}.png",
            caption=f"../report/{TUNING_FIGURE.key}.rst",
            category=layout.experiment,
            labels={"figure": TUNING_FIGURE.name + at_severity(layout)},
        ),
        "pdf": f"{stem}.pdf",
        "table": f"{stem}.csv",
    }


def at_severity(layout):
    """The words " at SEVERITY" where each severity has its own tuning (its figure's title and label)."""
    return "" if layout.severity is None else f" at {layout.severity}"


def choice_params(layout):
    """What choosing reads besides the runs: the grid, the target, the budget and the metric it scores by."""
    name = layout.experiment
    return {
        "grid": json.dumps(PLAN[name].tuning_grid),
        "target": config["experiments"][name]["target_accuracy"],
        "budget": tuning_budget(config["experiments"][name], layout.severity),
        "metric": tuning_metric(config["experiments"][name]),
        "title": layout.experiment + at_severity(layout),
        "out": subpath(layout.figure(TUNING_FIGURE.name), parent=True),
    }
