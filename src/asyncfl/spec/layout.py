"""Names shared by the command line and the Snakemake workflow: dataset folders, run folders and figure files.

Kept free of heavy imports: the workflow imports it while it plans the DAG.
"""

import re
from dataclasses import dataclass

from asyncfl.spec.names import VARIANT_SUFFIX

# Where `asyncfl data` and the workflow keep a dataset by default: DATA_DIR/{dataset}, with the
# workflow's marker PREPARED in it once the files are downloaded and verified.
DATA_DIR = "resources/data"
PREPARED = "prepared.json"

# The workflow's paths, each one pattern: str.format fills it for one file, and Snakemake reads the same
# string as the output pattern with these wildcards
PARTITION = "results/partitions/{dataset}_alpha{alpha}_C{clients}_seed{seed}"  # + .npz or .json
RUN_FOLDER = "results/{experiment}/runs/{algorithm}/J{J}/seed{seed}"
# A run of an experiment that sweeps straggler severity (its `severities:`): one folder per severity
SEVERITY_RUN_FOLDER = "results/{experiment}/severities/{severity}/{algorithm}/J{J}/seed{seed}"
# The runs one training job trains (asyncfl train-many --plan): {job} is a severity, or ALGORITHM_JN
TRAIN_PLAN = "results/{experiment}/plans/{job}.json"
FIGURE = "results/figures/{experiment}/{name}"  # + .png, .pdf (and .csv for a figure's table)
ARCHIVE_DIR = "results/archive"
# A run folder's tail, as RUN_FOLDER ends, for commands given run folders by hand: {algorithm}/J{J}/seed{seed}
# (an algorithm, or a variant of one: ALGORITHM-SUFFIX, `names.base_algorithm`)
RUN_DIR = re.compile(rf"(?P<algorithm>[a-z][a-z_]*(?:-{VARIANT_SUFFIX})?)/J(?P<J>\d+)/seed(?P<seed>\d+)$")
# The files of a run folder (docs/outputs.md "Run folders"), named here only
METRICS, EVENTS, TIMINGS = "metrics.csv", "events.csv", "timings.csv"
MODEL, RUN_RECORD, CHECKPOINT = "model.pt", "run.json", "checkpoint.pt"
RUN_OUTPUTS = (MODEL, METRICS, EVENTS)  # byte-identical for equal runs; hashed in run.json
RUN_LOGS = (METRICS, EVENTS)  # what the figures read and the archive ships of a run, beside its run.json
RUN_FILES = (METRICS, EVENTS, MODEL, RUN_RECORD)  # a finished run, as the workflow expects it
RUN_SUMMARY = (*RUN_LOGS, RUN_RECORD)  # what the figures and the archive read of a run
# What `asyncfl archive` writes into its folder, as one set: written together or not at all
TARBALL, CHECKSUMS, PROVENANCE, ZENODO = "asyncfl-results.tar.gz", "SHA256SUMS", "provenance.json", ".zenodo.json"
ARCHIVE_FILES = (TARBALL, CHECKSUMS, PROVENANCE, ZENODO)
# The key of a partition's FILE.json that holds the SHA-256 of the FILE.npz it describes
NPZ_HASH = "npz_sha256"


@dataclass(frozen=True)
class Figure:
    """One figure, as the command that draws it, the workflow and the tests know it.

    Attributes:
        name: the file stem (NAME.png, NAME.pdf) and the report's label.
        title: shown above the panels, after the experiment's name.
        caption: the report's caption, workflow/report/CAPTION.rst.
        panels: side by side, one column width each.
        rows: of panels, one above the other (the figure's height is shared among them).
        height: inches, plus `height_per_client` for each client (a figure with a row per client).
        compares: for a figure of the paper's code as it ran, the algorithms it compares: it is drawn
            (by its own workflow rule) where the experiment runs every one of them.
    """

    name: str
    title: str
    caption: str
    panels: int = 1
    rows: int = 1
    height: float = 2.6
    height_per_client: float = 0.0
    compares: tuple[str, ...] = ()


def experiment_figures(reference_j: int) -> list[Figure]:
    """Every figure `asyncfl figures` draws of an experiment; single-J ones at J = `reference_j`."""
    j = f"J = {reference_j}"
    return [
        Figure(f"server_loss_J{reference_j}", f"AFL server loss, {j}", "server_loss"),
        Figure(f"client_selection_J{reference_j}", f"Client participation, {j}", "client_selection"),
        Figure(f"participation_J{reference_j}", f"Updates per client vs duration, {j}", "participation", height=3.4),
        Figure("participation_sweep", "AFL server loss by clients per round", "participation_sweep"),
        Figure("afl_vs_sync", f"AFL vs synchronous FL at equal client updates, {j}", "afl_vs_sync"),
        Figure(
            "test_metrics_updates",
            f"Global model on the test set by client updates, {j}",
            "test_metrics_updates",
            2,
            height=3.4,
        ),
        Figure(
            "test_metrics_time",
            f"Global model on the test set over virtual time, {j}",
            "test_metrics_time",
            2,
            height=3.4,
        ),
        Figure("staleness_distribution", f"Staleness of aggregated updates, {j}", "staleness_distribution"),
        Figure(
            "partition_heatmap",
            "Training samples per client and class",
            "partition_heatmap",
            height=0.9,
            height_per_client=0.18,
        ),
        Figure("algorithms_compared", f"Algorithms compared at their budget, {j}", "algorithms_compared", 2),
        Figure("gradient_norm", f"Training-gradient norm of the global model, {j}", "gradient_norm", 2, height=4.4),
        Figure(
            "system_timeline",
            f"Clients over virtual time, first rounds, {j}",
            "system_timeline",
            panels=2,
            rows=2,
            height=2.0,
            height_per_client=0.3,
        ),
    ]


# Drawn only for experiments that run `afl_as_coded` (its own workflow rule): that emulation beside AFL.
AS_CODED_FIGURE = Figure(
    "as_coded_vs_described",
    "AFL as the paper's code runs it vs as the paper describes it",
    "as_coded_vs_described",
    panels=2,
    height=3.6,
    compares=("afl", "afl_as_coded"),
)
# Drawn only for experiments that also run `sync` and `sync_as_coded`: AFL vs sync as published (both
# as the paper's code ran them) beside AFL vs sync as described.
AS_PUBLISHED_FIGURE = Figure(
    "afl_vs_sync_as_published",
    "AFL vs synchronous FL as the paper's code ran them, and as described",
    "afl_vs_sync_as_published",
    panels=3,
    height=3.6,
    compares=("afl", "sync", "afl_as_coded", "sync_as_coded"),
)
# The one figure of an experiment that sweeps straggler severity (`severities:`), from all its runs,
# with the table of its numbers (CSV)
STRAGGLER_FIGURE = Figure(
    "straggler_claim",
    "Stragglers: time to the target accuracy, and accuracy at the budget, by severity",
    "straggler_claim",
    panels=2,
    height=3.8,
)
# The figures of the paper's code as it ran beside the algorithms as described, each by its own rule
EMULATION_FIGURES = (AS_CODED_FIGURE, AS_PUBLISHED_FIGURE)
# Drawn by `asyncfl theory` from one finished run per experiment, beside the figures above.
SAMPLING_VARIANCE_FIGURE = Figure(
    "sampling_variance", "Variance of the sampled mean update", "sampling_variance", height=2.8
)
