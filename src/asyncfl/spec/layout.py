"""Names shared by the command line and the Snakemake workflow: dataset folders, run folders and figure files
(the figures themselves: asyncfl.spec.catalogue).

Kept free of heavy imports: the workflow imports it while it plans the DAG.
"""

import re
from pathlib import Path

from asyncfl.spec.names import VARIANT_SUFFIX

# Where `asyncfl data` and the workflow keep a dataset by default: DATA_DIR/{dataset}, with the
# workflow's marker PREPARED in it once the files are downloaded and verified.
DATA_DIR = "resources/data"
PREPARED = "prepared.json"

# The workflow's paths, each one pattern: str.format fills it for one file, and Snakemake reads the same
# string as the output pattern with these wildcards
PARTITION = "results/partitions/{dataset}_alpha{alpha}_C{clients}_seed{seed}"  # + .npz or .json
# A partition less a validation split of that fraction of every class (an experiment's validation_fraction)
VALIDATED_PARTITION = PARTITION + "_val{validation}"
RUN_FOLDER = "results/{experiment}/runs/{algorithm}/J{J}/seed{seed}"
# A run of an experiment that sweeps straggler severity (its `severities:`): one folder per severity
SEVERITY_RUN_FOLDER = "results/{experiment}/severities/{severity}/{algorithm}/J{J}/seed{seed}"
# A tuning run of an experiment's `tune:` grid: {point} names the grid point (`tuning.point_label`)
TUNING_RUN_FOLDER = "results/{experiment}/tuning/{point}/{algorithm}/J{J}/seed{seed}"
CHOSEN = "results/{experiment}/tuning/chosen.json"  # each tuned run name's chosen point (`asyncfl select`)
# A tuning search's rounds: the runs and CPU seconds of each (`asyncfl tune`)
SEARCH_TIMINGS = "results/{experiment}/tuning/search_timings.csv"
# The runs one training job trains (asyncfl train-many --plan): {job} is a severity, or ALGORITHM_JN
TRAIN_PLAN = "results/{experiment}/plans/{job}.json"
FIGURE = "results/figures/{experiment}/{name}"  # + .png, .pdf (and .csv for a figure's table)
STRAGGLER_VERDICTS = "straggler_verdicts"  # + .csv, beside straggler_claim: every paired comparison and its CI
ARCHIVE_DIR = "results/archive"
# A run folder's tail, as RUN_FOLDER ends, for commands given run folders by hand: {algorithm}/J{J}/seed{seed}
# (an algorithm, or a variant of one: ALGORITHM-SUFFIX, `names.base_algorithm`)
RUN_DIR = re.compile(rf"(?P<algorithm>[a-z][a-z_]*(?:-{VARIANT_SUFFIX})?)/J(?P<J>\d+)/seed(?P<seed>\d+)$")


def run_name(folder: str | Path) -> str:
    """The run name (an algorithm, or a variant of one) a run folder's tail gives; "" where it gives none."""
    match = RUN_DIR.search(Path(folder).as_posix())
    return match["algorithm"] if match else ""


# The files of a run folder (docs/outputs.md "Run folders"), named here only
METRICS, EVENTS, TIMINGS = "metrics.csv", "events.csv", "timings.csv"
EVALUATIONS = "evaluations.csv"  # only where the run evaluates on a time grid (eval_every_seconds)
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
