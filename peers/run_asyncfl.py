"""asyncfl's side of the peer comparison: `asyncfl train` with the synchronous algorithm (FedAvg) on the
exported work, in this process; its rounds' times from the run's own timings.csv (its last round also
holds the run's final evaluation, which `compare.summary` leaves out of every framework's times)."""

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from common import Record

from asyncfl import __version__
from asyncfl.data.partition import load_partition
from asyncfl.launch import train_run
from asyncfl.settings.config import make_config


def main(folder: Path, out: Path) -> None:
    settings = json.loads((folder / "settings.json").read_text())  # asyncfl loads the data itself, once
    torch.set_num_threads(settings["threads"])
    config = make_config(
        {
            "algorithm": "sync",
            "model": "cnn",
            "clients_per_round": settings["clients_per_round"],
            "rounds": settings["rounds"],
            "local_epochs": settings["local_epochs"],
            "batch_size": settings["batch_size"],
            "optimizer": "adam",
            "gamma0": settings["lr"],
            "alpha_lr": 0.0,  # no delay term, and with I = 1 the epoch clock keeps γ = γ0: a constant rate
            "lr_time": "epoch",
            "seed": settings["seed"],
            "eval_every": settings["rounds"],
            "checkpoint_every": settings["rounds"],
            "device": settings["device"],
        }
    )
    record = Record("asyncfl", __version__)
    run = folder / "asyncfl-run"
    train_run(config, settings["dataset"], Path(settings["root"]), folder / "partition.npz", run, force=True)
    sizes = load_partition(folder / "partition.npz").sizes
    events = pd.read_csv(run / "events.csv")
    samples = events.groupby("round").client.apply(lambda c: int(sizes[c.to_numpy()].sum())) * settings["local_epochs"]
    record.round_ends = pd.read_csv(run / "timings.csv").wall_seconds.tolist()
    record.round_samples = [int(s) for s in samples.sort_index()]
    record.test_accuracy = float(pd.read_csv(run / "metrics.csv").test_accuracy.dropna().iloc[-1])
    record.write(out, torch.device(settings["device"]))
    np.testing.assert_equal(len(record.round_ends), settings["rounds"])


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
