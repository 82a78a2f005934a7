"""Names shared by the command line and the Snakemake workflow: run folders and figure files.

Kept free of heavy imports: the workflow imports it while it plans the DAG.
"""

import re

# A run folder below an experiment's runs/: {algorithm}/J{J}/seed{seed}
RUN_DIR = re.compile(r"(?P<algorithm>[a-z]+)/J(?P<J>\d+)/seed(?P<seed>\d+)$")
RUN_FILES = ("metrics.csv", "events.csv", "model.pt", "run.json")


def figure_titles(reference_j: int) -> dict[str, str]:
    """Every figure `asyncfl figures` draws (file name without extension) and its title."""
    return {
        f"server_loss_J{reference_j}": f"AFL server loss, J = {reference_j}",
        f"client_selection_J{reference_j}": f"Client participation, J = {reference_j}",
        "participation_sweep": "AFL server loss by clients per round",
        "afl_vs_sync": f"AFL vs synchronous FL, J = {reference_j}",
        "test_metrics_rounds": f"Global model on the test set, J = {reference_j}",
        "test_metrics_time": f"Global model on the test set over virtual time, J = {reference_j}",
        "staleness_distribution": f"Staleness of aggregated updates, J = {reference_j}",
        "partition_heatmap": "Training samples per client and class",
        "algorithms_compared": f"Algorithms compared, J = {reference_j}",
    }
