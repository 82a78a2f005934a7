import json
import re
import shlex
import shutil
import sys
from pathlib import Path

# The package's light modules (configuration, file layout) plan the DAG; rules run its CLI.
SRC = Path(workflow.current_basedir).parents[1] / "src"
sys.path.insert(0, str(SRC))
from asyncfl.planning.cluster import attempt_runtime, cpu_job_resources, spread
from asyncfl.planning.cluster import attempt_minutes, gpu_job_resources, part_key
from asyncfl.planning.experiments import NAME
from asyncfl.planning.layout import ARCHIVE_DIR, ARCHIVE_FILES, DATA_DIR, EVENTS, FIGURE
from asyncfl.planning.layout import METRICS, MODEL, PARTITION, REPLAY_DIR, RUN_FILES
from asyncfl.planning.layout import RUN_FOLDER, RUN_RECORD, RUN_SUMMARY, TRAIN_PLAN
from asyncfl.planning.layout import STRAGGLER_VERDICTS, VALIDATED_PARTITION
from asyncfl.planning.plan import ONE_RUN, PACKED, SEVERITY, partition_file
from asyncfl.planning.plan import prepared_marker, timing_only
from asyncfl.planning.progress import pace_line, run_job_minutes
from asyncfl.planning.startup import checked_workflow, software_route
from asyncfl.planning.tuning import choice_files
from asyncfl.planning.tuning import choice_params as tuning_choice
from asyncfl.planning.workflow_config import config_name
from asyncfl.planning.workflow_config import failure_summary, record_command
from asyncfl.planning.workflow_config import report_folder
from asyncfl.settings.catalogue import Scope, catalogued, scope_figures
from asyncfl.settings.errors import InputError
from asyncfl.settings.names import ALGORITHMS
from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.settings.types import DeploymentMethod

# The rules run in the environment snakemake runs in (the project's .venv) unless conda is asked for;
# they name their conda environment only where conda is on PATH, so that -n plans without it.
CONDA_FOUND = shutil.which("conda") is not None
try:
    # numbers as users write them, the key named first, Snakemake's schema check (its defaults), then
    # the plan (asyncfl.planning.startup)
    PLAN = checked_workflow(
        config, workflow.configfiles, SRC.parent / "config/costs.csv"
    )
    TORCH_ENV = f"../envs/torch-{config['torch']}.yaml"
    # the archive of this config's results, apart from another config's in the same clone
    CONFIG_NAME = config_name(workflow.configfiles)
    CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
    logger.info(software_route(CONDA, CONDA_FOUND, TORCH_ENV, sys.prefix))
except InputError as error:
    raise WorkflowError(str(error)) from None
ASYNCFL = f"PYTHONPATH={shlex.quote(str(SRC))} python -m asyncfl"


def torch_env(wildcards):
    """The rules' conda environment, where conda can build it."""
    return TORCH_ENV if CONDA_FOUND else None


REFERENCE_J = config["reference_J"]
# What every job that trains or probes a model asks for, besides its runtime
TRAIN_THREADS = config["resources"]["train"]["threads"]
# What a job that trains asks for besides threads and runtime, and every other job: planning.cluster
TRAIN_RESOURCES = gpu_job_resources(config["resources"])
CPU_RESOURCES = cpu_job_resources(config["resources"])
ARCHIVE = [f"{ARCHIVE_DIR.format(config=CONFIG_NAME)}/{name}" for name in ARCHIVE_FILES]
MAX_RUNTIME = config["resources"]["max_runtime"]


# The archive's provenance records how the workflow was started; a report's folder is made for it.
record_command(sys.argv)
if (REPORT_FOLDER := report_folder(sys.argv)) is not None:
    REPORT_FOLDER.mkdir(parents=True, exist_ok=True)


wildcard_constraints:
    experiment=NAME.pattern,
    dataset=r"[a-z0-9-]+",
    alpha=r"[0-9.]+",
    validation=r"0\.[0-9]+",
    clients=r"\d+",
    seed=r"\d+",
    J=r"\d+",
    algorithm="|".join(ALGORITHMS),


def experiment(wildcards):
    return config["experiments"][wildcards.experiment]


def data_root(dataset):
    """A user's existing copy (config data.roots) or the workflow's own download folder."""
    return config["data"]["roots"].get(dataset, f"{DATA_DIR}/{dataset}")


def get_prepared_data(wildcards):
    """The prepared marker of the dataset of a rule's experiment."""
    return prepared_marker(experiment(wildcards)["dataset"])


def get_availability_trace(wildcards):
    """The traces an experiment's runs read (an edited trace makes them, and what reads them, again)."""
    return list(PLAN[wildcards.experiment].traces)


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


def one_of(names):
    """A wildcard's pattern that matches exactly these names (none: nothing)."""
    return "|".join(re.escape(name) for name in names) or "(?!)"


def get_partition_stats(wildcards):
    """The statistics of every partition an experiment's runs use, one per seed; the figures draw the
    first seed's and check each run against the one it was trained on."""
    exp = experiment(wildcards)
    return [partition_file(exp, seed, ".json") for seed in exp["seeds"]]


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


def choice_outputs(layout):
    """What choosing writes (asyncfl.planning.tuning.choice_files), its PNG in the report."""
    files = choice_files(layout, TUNING_FIGURE.name)
    label = {"figure": TUNING_FIGURE.name + layout.at_severity}
    caption = f"../report/{TUNING_FIGURE.key}.rst"
    files["png"] = report(
        files["png"], caption, category=layout.experiment, labels=label
    )
    return files


def get_train_runtime(wildcards, attempt):
    """The `train` job's minutes: the plan's, doubled on each retry, or the rest at the pace its
    checkpoint recorded (asyncfl.planning.progress), which the workflow says once an attempt.
    """
    folder = RUN_FOLDER.format(**wildcards)
    planned = PLAN[wildcards.experiment].job(folder).runtime
    safety = config["resources"]["cost"]["safety"]
    minutes, pace = run_job_minutes(Path(folder), planned, attempt, MAX_RUNTIME, safety)
    if pace is not None and (folder, attempt) not in PACES_SAID:
        PACES_SAID.add((folder, attempt))
        logger.info(pace_line(folder, pace, minutes))
    return minutes


PACES_SAID = set()
