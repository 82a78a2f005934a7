"""`asyncfl train`: one run folder, from the command line's pieces to its finished outputs."""

from pathlib import Path

import torch

from asyncfl.config import TrainConfig
from asyncfl.data import load_dataset
from asyncfl.engine import Simulation
from asyncfl.files import sha256
from asyncfl.partition import load_partition


def train_run(config: TrainConfig, dataset: str, root: Path | None, partition_path: Path, out: Path,
              threads: int | None = None) -> dict:
    """Run (or resume) the training that `config` describes into `out`; return run.json's content."""
    if threads:
        torch.set_num_threads(threads)  # the job's CPUs, and the same reduction order everywhere
    partition = load_partition(partition_path)
    data = load_dataset(dataset, root)
    return Simulation(config, data, partition, out, sha256(partition_path)).run()
