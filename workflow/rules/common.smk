import json
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
    record_command,
    run_settings,
)
from asyncfl.spec.layout import (
    ARCHIVE_FILES,
    AS_CODED_FIGURE,
    DATA_DIR,
    EVENTS,
    METRICS,
    MODEL,
    PREPARED,
    RUN_FILES,
    RUN_RECORD,
    RUN_SUMMARY,
    SAMPLING_VARIANCE_FIGURE,
    experiment_figures,
)
from asyncfl.spec.names import ALGORITHMS
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
# environment snakemake runs in, and the log says so (README "The paper's experiments on a SLURM cluster").
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
ARCHIVE_DIR = "results/archive"
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


def partition_file(exp, seed, suffix=".npz"):
    """Partitions depend on data, α, C and seed only, so every algorithm of one seed shares one.
    α is written out in decimals (1e-06 as 0.000001), as the alpha wildcard expects."""
    alpha = decimal_text(exp["alpha"])
    return f"results/partitions/{exp['dataset']}_alpha{alpha}_C{exp['clients']}_seed{seed}{suffix}"


def get_partition_stats(wildcards):
    """The statistics of every partition an experiment's runs use, one per seed; the figures draw the
    first seed's and check each run against the one it was trained on."""
    exp = experiment(wildcards)
    return [partition_file(exp, seed, ".json") for seed in exp["seeds"]]


def runs(name):
    """(algorithm, J, seed) of an experiment: AFL over the J sweep, the others at the reference J."""
    return experiment_runs(config["experiments"][name], REFERENCE_J)


def run_folders(name):
    """The experiment's run folders: only those of the config, whatever else lies beside them."""
    return [
        f"results/{name}/runs/{algorithm}/J{J}/seed{seed}"
        for algorithm, J, seed in runs(name)
    ]


def run_files(name, files=RUN_FILES):
    return [f"{folder}/{file}" for folder in run_folders(name) for file in files]


def figures_of(name):
    """Every figure of an experiment; the as-coded one where it runs AFL as the paper's code does."""
    as_coded = "afl_as_coded" in config["experiments"][name]["algorithms"]
    return (
        FIGURES + [SAMPLING_VARIANCE_FIGURE] + ([AS_CODED_FIGURE] if as_coded else [])
    )


def figure_png(figure):
    """A figure's PNG, in the report with its caption (asyncfl.spec.layout.Figure)."""
    return report(
        f"results/figures/{{experiment}}/{figure.name}.png",
        caption=f"../report/{figure.caption}.rst",
        category="{experiment}",
        labels={"figure": figure.name},
    )


def figure_pdf(figure):
    return f"results/figures/{{experiment}}/{figure.name}.pdf"


def run_output(file):
    """A file of the run folder that the `train` rule writes."""
    return f"results/{{experiment}}/runs/{{algorithm}}/J{{J}}/seed{{seed}}/{file}"


def all_figures():
    return [
        f"results/figures/{name}/{figure.name}.{ext}"
        for name in config["experiments"]
        for figure in figures_of(name)
        for ext in ("png", "pdf")
    ]


def as_coded_run_folders(name):
    """The runs the as-coded figure compares: AFL as coded and as described, at reference_J."""
    return [
        folder
        for folder, (algorithm, J, _) in zip(run_folders(name), runs(name))
        if algorithm in ("afl", "afl_as_coded") and J == REFERENCE_J
    ]


def probed_run(wildcards):
    """The run whose final model the theory figures probe: AFL at reference_J, first seed."""
    seed = experiment(wildcards)["seeds"][0]
    return f"results/{wildcards.experiment}/runs/afl/J{REFERENCE_J}/seed{seed}"


def train_settings(wildcards):
    """The run's settings as JSON for `asyncfl train --settings` (asyncfl.spec.experiments.run_settings)."""
    return json.dumps(
        run_settings(experiment(wildcards), int(wildcards.J), REFERENCE_J)
    )
