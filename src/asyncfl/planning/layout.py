"""Names shared by the command line and the Snakemake workflow: dataset folders, run folders and figure files
(the figures themselves: asyncfl.settings.catalogue).

Kept free of heavy imports: the workflow imports it while it plans the DAG.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from asyncfl.settings.names import ALGORITHM_NAME, VARIANT_SUFFIX

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
# An experiment's tuning (`tune:`): a tuning run of its grid, {point} naming the grid point
# (`tuning.point_label`), each tuned run name's chosen point (`asyncfl select`), and a search's rounds:
# the runs and CPU seconds of each (`asyncfl tune`), all in TUNING_DIR, or with `tune.per_severity` in
# a folder per severity under it (`TuningLayout` gives each path)
TUNING_DIR = "results/{experiment}/tuning"
TUNING_JOB = "tuning"  # the key of an experiment's one tuning job (its plan file's and log's name)
TUNING_RUN_TAIL, CHOSEN_FILE, SEARCH_TIMINGS_FILE = (
    "{point}/{algorithm}/J{J}/seed{seed}",
    "chosen.json",
    "search_timings.csv",
)
TUNING_RUN_FOLDER = f"{TUNING_DIR}/{TUNING_RUN_TAIL}"
# The runs one training job trains (asyncfl train-many --plan): {job} is a severity, or ALGORITHM_JN
TRAIN_PLAN = "results/{experiment}/plans/{job}.json"
FIGURE = "results/figures/{experiment}/{name}"  # + .png, .pdf (and .csv for a figure's table)
# The virtual-clock replays of an experiment's measured runs that its sim_vs_real figure compares them with
REPLAY_DIR = "results/{experiment}/replays"
STRAGGLER_VERDICTS = "straggler_verdicts"  # + .csv, beside straggler_claim: every paired comparison and its CI
# What every run of one config shares, in a folder named by the config (`workflow_config.config_name`);
# its report goes to results/reports/CONFIG.html (Makefile, docs/outputs.md)
ARCHIVE_DIR = "results/archive/{config}"
# A run folder's tail, as RUN_FOLDER ends, for commands given run folders by hand: {algorithm}/J{J}/seed{seed}
# (an algorithm, or a variant of one: ALGORITHM-SUFFIX, `names.base_algorithm`)
RUN_DIR = re.compile(rf"(?P<algorithm>{ALGORITHM_NAME}(?:-{VARIANT_SUFFIX})?)/J(?P<J>\d+)/seed(?P<seed>\d+)$")


@dataclass(frozen=True)
class TuningLayout:
    """Where one tuning job of an experiment keeps its plan, runs, choice and figure: the experiment's one
    tuning (`severity` None) at the paths above, or with `tune.per_severity` each severity's tuning in
    a folder named by it (a severity's name has no `/`, so no severity's job or folder is another's)."""

    experiment: str
    severity: str | None = None

    @property
    def job(self) -> str:
        """The tuning job's key: its plan file's and log's name."""
        return TUNING_JOB if self.severity is None else f"{TUNING_JOB}/{self.severity}"

    @property
    def suffix(self) -> str:
        """What names its workflow rules and logs apart from another severity's: "" or "_SEVERITY"."""
        return "" if self.severity is None else f"_{self.severity}"

    def within(self, folder: str) -> str:
        """`folder`, or with a severity of its own that severity's folder inside it."""
        return folder if self.severity is None else f"{folder}/{self.severity}"

    @property
    def folder(self) -> str:
        """Its runs' and choice's folder."""
        return self.within(TUNING_DIR.format(experiment=self.experiment))

    def run_folder(self, point: str, algorithm: str, j: int, seed: int) -> str:
        return f"{self.folder}/" + TUNING_RUN_TAIL.format(point=point, algorithm=algorithm, J=j, seed=seed)

    @property
    def chosen(self) -> str:
        return f"{self.folder}/{CHOSEN_FILE}"

    @property
    def timings(self) -> str:
        return f"{self.folder}/{SEARCH_TIMINGS_FILE}"

    @property
    def at_severity(self) -> str:
        """The words " at SEVERITY" where each severity has its own tuning (its figure's title and label)."""
        return "" if self.severity is None else f" at {self.severity}"

    def figure(self, name: str) -> str:
        """The stem of the tuning figure `name` (+ .png, .pdf, .csv)."""
        return FIGURE.format(experiment=self.within(self.experiment), name=name)


def run_name(folder: str | Path) -> str:
    """The run name (an algorithm, or a variant of one) a run folder's tail gives; "" where it gives none."""
    match = RUN_DIR.search(Path(folder).as_posix())
    return match["algorithm"] if match else ""


# The files of a run folder (docs/outputs.md "Run folders"), named here only
METRICS, EVENTS, TIMINGS = "metrics.csv", "events.csv", "timings.csv"
EVALUATIONS = "evaluations.csv"  # only where the run evaluates on a time grid (eval_every_seconds)
MODEL, RUN_RECORD, CHECKPOINT = "model.pt", "run.json", "checkpoint.pt"
# beside a checkpoint: the share of its work the run had done and the wall seconds it took (`planning.progress`)
PROGRESS = "progress.json"
FAILED = "failed.json"  # the cause of the run's own failure (`planning.progress`): its retries end at once
WALL = "wall.csv"  # a real-clock run's trainings in wall time (`sim.clients`)
RUN_OUTPUTS = (MODEL, METRICS, EVENTS)  # byte-identical for equal runs; hashed in run.json
RUN_LOGS = (METRICS, EVENTS)  # what the figures read and the archive ships of a run, beside its run.json
RUN_FILES = (METRICS, EVENTS, MODEL, RUN_RECORD)  # a finished run, as the workflow expects it
RUN_SUMMARY = (*RUN_LOGS, RUN_RECORD)  # what the figures and the archive read of a run
# What `asyncfl archive` writes into its folder, as one set: written together or not at all
TARBALL, CHECKSUMS, PROVENANCE, ZENODO = "asyncfl-results.tar.gz", "SHA256SUMS", "provenance.json", ".zenodo.json"
ARCHIVE_FILES = (TARBALL, CHECKSUMS, PROVENANCE, ZENODO)
# The key of a partition's FILE.json that holds the SHA-256 of the FILE.npz it describes
NPZ_HASH = "npz_sha256"
