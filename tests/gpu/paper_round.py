"""One row of tests/gpu/session.sh's paper-round table: the real engine (`asyncfl bench`'s synthetic AFL
run, C = 10, J = 5, batch 64, the paper's per-client sizes) with one model and trainer, at I = EPOCHS local
epochs, printed as one JSON line. A round's cost is linear in I (the same steps, I times), so a row
measured at I < 10 also gives its paper round scaled to I = 10 and says it was scaled. Its own process,
so that the caller's `timeout` bounds a CUDA graph capture that hangs.

    python3 tests/gpu/paper_round.py MODEL TRAINER EPOCHS ROUNDS [DEVICE [PROFILE]]

PROFILE: fp32 (the default, the paper's numerics) or a speed profile (`fast`: bf16 and channels_last).
"""

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from asyncfl.bench.paper_round import CLIENTS, EPOCHS, PAPER_SHAPES, PER_ROUND, QUICK_SAMPLES
from asyncfl.bench.synthetic import synthetic_data, synthetic_run


def main(model: str, trainer: str, epochs: int, rounds: int, device: str = "cuda", profile: str = "fp32") -> dict:
    (shape,) = [shape for shape in PAPER_SHAPES if shape.model == model]
    samples = QUICK_SAMPLES if device == "cpu" else shape.samples  # a CPU smoke run checks the script only
    dataset, partition = synthetic_data("paper-round", shape.shape, CLIENTS, samples)
    settings = {
        "model": model,
        "clients_per_round": PER_ROUND,
        "rounds": rounds,
        "local_epochs": epochs,
        "device": device,
        "trainer": trainer,
    } | ({} if profile == "fp32" else {"profile": profile})
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        walls = synthetic_run(dataset, partition, settings, Path(scratch))
    training = walls.training_rounds()  # the first round pays captures and warm-up, the last the evaluation
    per_round = float(np.median(training))
    return {
        "model": model,
        "trainer": trainer,
        "profile": profile,
        "samples_per_client": samples,
        "local_epochs": epochs,
        "rounds": rounds,
        "first_round_s": round(walls.rounds[0], 3),
        "round_walls": [round(wall, 3) for wall in training],
        "seconds_per_round": round(per_round, 4),
        "paper_seconds_per_round": round(per_round * EPOCHS / epochs, 3),
        "scaled_from_epochs": epochs if epochs != EPOCHS else None,
        "process_s": round(time.perf_counter() - started, 1),
    }


if __name__ == "__main__":
    model, trainer, epochs, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if rounds < 3:
        sys.exit(f"rounds {rounds}: give at least 3 (the first and the last round are not timed)")
    print(json.dumps(main(model, trainer, epochs, rounds, *sys.argv[5:])))
