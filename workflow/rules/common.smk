import json
import re
import shlex
import shutil
import sys
from pathlib import Path

# The package's light modules (configuration, file layout) plan the DAG; rules run its CLI.
SRC = Path(workflow.current_basedir).parents[1] / "src"
sys.path.insert(0, str(SRC))
from asyncfl.spec.config import with_numbers
from asyncfl.spec.errors import InputError
from asyncfl.spec.experiments import (
    check_config_files,
    check_workflow_config,
    decimal_text,
    experiment_runs,
    experiment_traces,
    record_command,
    run_settings,
)
from asyncfl.spec.layout import (
    ARCHIVE_DIR,
    ARCHIVE_FILES,
    FIGURE,
    PARTITION,
    RUN_FOLDER,
    EMULATION_FIGURES,
    DATA_DIR,
    EVENTS,
    METRICS,
    MODEL,
    PREPARED,
    RUN_FILES,
    RUN_RECORD,
    RUN_SUMMARY,
    SAMPLING_VARIANCE_FIGURE,
    SEVERITY_RUN_FOLDER,
    STRAGGLER_FIGURE,
    TRAIN_PLAN,
    experiment_figures,
)
from asyncfl.spec.names import ALGORITHMS, base_algorithm
from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.settings.types import DeploymentMethod
from snakemake.utils import validate

# 1e-3 as users write it: a number (Snakemake's YAML reader, like PyYAML, would keep it as text).
config.update(with_numbers(config))
validate(config, "../schemas/config.schema.yaml")
try:
    check_workflow_config(config)
    check_config_files(workflow.configfiles)
except InputError as error:
    raise WorkflowError(str(error)) from None

ASYNCFL = f"PYTHONPATH={shlex.quote(str(SRC))} python -m asyncfl"
TORCH_ENV = f"../envs/torch-{config['torch']}.yaml"
# Snakemake asks conda itself about an environment as soon as a rule names one, even in a dry
# run; rules name theirs only where conda is on PATH, so `snakemake -n --profile profiles/slurm`
# plans on a laptop without conda. Where a run asks for conda and none is found, jobs run in the
# environment snakemake runs in, and the log says so (docs/cluster.md "The paper's experiments on a SLURM cluster").
CONDA_FOUND = shutil.which("conda") is not None
if (
    DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
    and not CONDA_FOUND
):
    logger.warning(
        "conda is not on PATH: rules run in this Python environment instead of envs/torch-*.yaml"
    )


def torch_env(wildcards):
    """The rules' conda environment, where conda can build it."""
    return TORCH_ENV if CONDA_FOUND else None


REFERENCE_J = config["reference_J"]
FIGURES = experiment_figures(REFERENCE_J)
ARCHIVE = [f"{ARCHIVE_DIR}/{name}" for name in ARCHIVE_FILES]
# The archive's provenance records how the workflow was started.
record_command(sys.argv)


wildcard_constraints:
    experiment=r"[A-Za-z0-9_-]+",
    dataset=r"[a-z0-9-]+",
    alpha=r"[0-9.]+",
    clients=r"\d+",
    seed=r"\d+",
    J=r"\d+",
    algorithm="|".join(ALGORITHMS),


def experiment(wildcards):
    return config["experiments"][wildcards.experiment]


def data_root(dataset):
    """A user's existing copy (config data.roots) or the workflow's own download folder."""
    return config["data"]["roots"].get(dataset, f"{DATA_DIR}/{dataset}")


def prepared_marker(dataset):
    """What prepare_data writes once a dataset is downloaded and verified ("{dataset}": its pattern)."""
    return f"{DATA_DIR}/{dataset}/{PREPARED}"


def get_prepared_data(wildcards):
    """The prepared marker of the dataset of a rule's experiment."""
    return prepared_marker(experiment(wildcards)["dataset"])


def availability_trace(exp):
    """The experiment's availability trace CSVs, wherever its `train:`, a severity or a variant names
    one: its runs, its theory check and its system timeline read them (each checks its trace against
    the SHA-256 its run recorded), so an edited trace makes them again."""
    return experiment_traces(exp)


def get_availability_trace(wildcards):
    return availability_trace(experiment(wildcards))


def partition_file(exp, seed, suffix=".npz"):
    """Partitions depend on data, α, C and seed only, so every algorithm of one seed shares one.
    α is written out in decimals (1e-06 as 0.000001), as the alpha wildcard expects."""
    alpha = decimal_text(exp["alpha"])
    pattern = PARTITION.format(
        dataset=exp["dataset"], alpha=alpha, clients=exp["clients"], seed=seed
    )
    return pattern + suffix


def get_partition_stats(wildcards):
    """The statistics of every partition an experiment's runs use, one per seed; the figures draw the
    first seed's and check each run against the one it was trained on."""
    exp = experiment(wildcards)
    return [partition_file(exp, seed, ".json") for seed in exp["seeds"]]


def runs(name):
    """(algorithm, J, seed) of an experiment: AFL over the J sweep, the others at the reference J."""
    return experiment_runs(config["experiments"][name], REFERENCE_J)


def severities(name):
    """The straggler severities an experiment sweeps (config/README.md "Stragglers"); none: a plain one."""
    return list(config["experiments"][name].get("severities", {}))


SWEEPS = [name for name in config["experiments"] if severities(name)]
# Plain experiments whose seeds one job trains, per algorithm × J (config/README.md "An experiment")
SEED_PACKED = [
    name
    for name in config["experiments"]
    if config["experiments"][name].get("pack_seeds") and not severities(name)
]
# The experiments of the `train` rule, one job per run; "(?!)" matches nothing
ONE_RUN_PER_JOB = (
    "|".join(
        re.escape(name)
        for name in config["experiments"]
        if name not in SWEEPS and name not in SEED_PACKED
    )
    or "(?!)"
)


def severity_run_folder(name, severity, algorithm, seed):
    return SEVERITY_RUN_FOLDER.format(
        experiment=name,
        severity=severity,
        algorithm=algorithm,
        J=REFERENCE_J,
        seed=seed,
    )


def run_folders(name):
    """The experiment's run folders: only those of the config, whatever else lies beside them."""
    if severities(name):
        return [
            severity_run_folder(name, severity, algorithm, seed)
            for severity in severities(name)
            for algorithm, _, seed in runs(name)
        ]
    return [
        RUN_FOLDER.format(experiment=name, algorithm=algorithm, J=J, seed=seed)
        for algorithm, J, seed in runs(name)
    ]


def experiment_data_root(name):
    """For a rule: the data folder of an experiment's dataset (a function, as Snakemake's lint asks of paths)."""
    return lambda wildcards: data_root(config["experiments"][name]["dataset"])


def planned_run(name, algorithm, J, seed, out, severity=None):
    """One run of an `asyncfl train-many --plan`: its partition, folder and settings."""
    exp = config["experiments"][name]
    return {
        "partition": partition_file(exp, seed),
        "out": out,
        "settings": {
            **run_settings(exp, algorithm, J, REFERENCE_J, severity),
            "algorithm": base_algorithm(algorithm),
            "clients_per_round": J,
            "seed": seed,
        },
    }


def severity_plan(name, severity):
    """The plan of one severity of a sweep: its runs (algorithms and variants × seeds)."""
    return [
        planned_run(
            name,
            algorithm,
            J,
            seed,
            severity_run_folder(name, severity, algorithm, seed),
            severity,
        )
        for algorithm, J, seed in runs(name)
    ]


def seeds_plan(name, algorithm, J):
    """The plan of one algorithm × J of an experiment with `pack_seeds`: its run of every seed."""
    return [
        planned_run(name, algorithm, J, seed, folder)
        for seed, folder in zip(
            config["experiments"][name]["seeds"],
            packed_run_folders(name, algorithm, J),
        )
    ]


PACKED_JOB = re.compile(r"(?P<algorithm>[a-z_]+)_J(?P<J>\d+)")


def get_train_plan(wildcards):
    """The runs of the training job `wildcards.job` of an experiment (a severity of a sweep, or
    "ALGORITHM_JN" of one with `pack_seeds`), which `plan_training` writes to its plan file.
    """
    name = wildcards.experiment
    if severities(name):
        return severity_plan(name, wildcards.job)
    packed = PACKED_JOB.fullmatch(wildcards.job)
    return seeds_plan(name, packed["algorithm"], int(packed["J"]))


def train_plan(name, job):
    """The plan file of one job that trains several runs of an experiment (`job`: a pattern, or a name)."""
    return TRAIN_PLAN.format(experiment=name, job=job)


def packed_run_folders(name, algorithm, J):
    """The run folders of one algorithm × J of an experiment, one per seed (the wildcards' patterns
    where algorithm and J are "{algorithm}" and "{J}")."""
    return [
        RUN_FOLDER.format(experiment=name, algorithm=algorithm, J=J, seed=seed)
        for seed in config["experiments"][name]["seeds"]
    ]


def train_many_inputs(name):
    """The inputs of a job that trains several runs of an experiment: its dataset, the partition of
    every seed and its availability trace, if any."""
    exp = config["experiments"][name]
    return {
        "data": prepared_marker(exp["dataset"]),
        "partitions": [partition_file(exp, seed) for seed in exp["seeds"]],
        "trace": availability_trace(exp),
    }


# The command of the jobs that train several runs one after another (`input.plan`: their runs, a file,
# since a sweep of hundreds of runs outgrows a command line)
TRAIN_MANY = (
    ASYNCFL
    + " train-many --dataset {params.dataset:q} --root {params.root:q} --plan {input.plan:q}"
    " --threads {threads:q} > {log:q} 2>&1"
)


def train_runtime(runs_trained):
    """A training job's runtime (minutes): `resources.train.runtime` is one run's; a job that trains
    several one after another asks for that many times it."""
    return config["resources"]["train"]["runtime"] * runs_trained


def run_files(name, files=RUN_FILES):
    return [f"{folder}/{file}" for folder in run_folders(name) for file in files]


def figures_of(name):
    """Every figure of an experiment; each figure of the paper's code as it ran where the experiment
    runs every algorithm that figure compares."""
    if severities(name):
        return [STRAGGLER_FIGURE]
    algorithms = set(config["experiments"][name]["algorithms"])
    emulations = [
        figure for figure in EMULATION_FIGURES if set(figure.compares) <= algorithms
    ]
    return FIGURES + [SAMPLING_VARIANCE_FIGURE] + emulations


def figure_png(figure):
    """A figure's PNG, in the report with its caption (asyncfl.spec.layout.Figure)."""
    return report(
        FIGURE.format(experiment="{experiment}", name=figure.name) + ".png",
        caption=f"../report/{figure.caption}.rst",
        category="{experiment}",
        labels={"figure": figure.name},
    )


def figure_pdf(figure):
    return FIGURE.format(experiment="{experiment}", name=figure.name) + ".pdf"


def run_output(file):
    """A file of the run folder that the `train` rule writes."""
    return f"{RUN_FOLDER}/{file}"


def all_figures():
    return [
        FIGURE.format(experiment=name, name=figure.name) + f".{ext}"
        for name in config["experiments"]
        for figure in figures_of(name)
        for ext in ("png", "pdf")
    ]


def emulation_run_folders(figure):
    """For a rule: the runs an emulation figure compares (Figure.compares), at reference_J."""

    def folders(wildcards):
        return [
            folder
            for folder, (algorithm, J, _) in zip(
                run_folders(wildcards.experiment), runs(wildcards.experiment)
            )
            if algorithm in figure.compares and J == REFERENCE_J
        ]

    return folders


def emulation_run_files(figure):
    """For a rule: the files the figures read of the runs an emulation figure compares."""
    folders = emulation_run_folders(figure)
    return lambda wildcards: [
        f"{folder}/{file}" for folder in folders(wildcards) for file in RUN_SUMMARY
    ]


def probed_run(wildcards):
    """The run whose final model the theory figures probe: AFL at reference_J, first seed."""
    seed = experiment(wildcards)["seeds"][0]
    return RUN_FOLDER.format(
        experiment=wildcards.experiment, algorithm="afl", J=REFERENCE_J, seed=seed
    )


def train_settings(wildcards):
    """The run's settings as JSON for `asyncfl train --settings` (asyncfl.spec.experiments.run_settings)."""
    return json.dumps(
        run_settings(
            experiment(wildcards), wildcards.algorithm, int(wildcards.J), REFERENCE_J
        )
    )
