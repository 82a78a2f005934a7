"""Names shared by the command line and the Snakemake workflow: dataset folders, run folders and figure files.

Kept free of heavy imports: the workflow imports it while it plans the DAG.
"""

import re

# Where `asyncfl data` and the workflow keep a dataset by default: DATA_DIR/{dataset}, with the
# workflow's marker PREPARED in it once the files are downloaded and verified.
DATA_DIR = "resources/data"
PREPARED = "prepared.json"

# A run folder below an experiment's runs/: {algorithm}/J{J}/seed{seed}
RUN_DIR = re.compile(r"(?P<algorithm>[a-z][a-z_]*)/J(?P<J>\d+)/seed(?P<seed>\d+)$")
RUN_FILES = ("metrics.csv", "events.csv", "model.pt", "run.json")
# Drawn by `asyncfl theory` from one finished run per experiment, beside the figures above.
THEORY_FIGURES = ("sampling_variance",)


def figure_titles(reference_j: int) -> dict[str, str]:
    """Every figure `asyncfl figures` draws (file name without extension) and its title."""
    return {
        f"server_loss_J{reference_j}": f"AFL server loss, J = {reference_j}",
        f"client_selection_J{reference_j}": f"Client participation, J = {reference_j}",
        f"participation_J{reference_j}": f"Updates per client vs duration, J = {reference_j}",
        "participation_sweep": "AFL server loss by clients per round",
        "afl_vs_sync": f"AFL vs synchronous FL at equal client updates, J = {reference_j}",
        "test_metrics_updates": f"Global model on the test set by client updates, J = {reference_j}",
        "test_metrics_time": f"Global model on the test set over virtual time, J = {reference_j}",
        "staleness_distribution": f"Staleness of aggregated updates, J = {reference_j}",
        "partition_heatmap": "Training samples per client and class",
        "algorithms_compared": f"Algorithms compared at their budget, J = {reference_j}",
        "gradient_norm": f"Training-gradient norm of the global model, J = {reference_j}",
    }


# Drawn only for experiments that run `afl_as_coded` (its own workflow rule): that emulation beside AFL.
AS_CODED_FIGURE = "as_coded_vs_described"
AS_CODED_TITLE = "AFL as the paper's code runs it vs as the paper describes it"
