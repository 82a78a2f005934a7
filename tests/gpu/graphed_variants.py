"""The graphed trainer's step under variants, for the GPU issue (docs/gpu.md "On a GPU"): five
clients of 640 random samples, two epochs of batch 64, one JSON line with milliseconds per client-step
(the median of three calls after the one that captures), whether a second call and each client alone
gave the same bytes, and the largest relative difference to the plain trainer. One process per
variant, so that a caller's `timeout` bounds a capture that hangs; on the CPU it runs uncaptured.

    PYTHONPATH=src python3 tests/gpu/graphed_variants.py MODEL VARIANT
    VARIANT: base (five streams) | stream1 (one stream, BatchNorm models' rule before 2026-11-25) |
             nondet (non-deterministic kernels) | tf32 | bf16 | nhwc
"""

import json
import sys
import time
from pathlib import Path

import torch

from asyncfl.data.dataset import DatasetInfo
from asyncfl.models import build_model
from asyncfl.settings.random_streams import shuffle_key
from asyncfl.training import graphed
from asyncfl.training.interface import LocalResult, LocalSettings, LocalTask
from asyncfl.training.numerics import Numerics
from asyncfl.training.plain import PlainTrainer
from asyncfl.training.runtime import configure_process

sys.path.insert(0, str(Path(__file__).parents[1]))  # the trainer tests' helpers, one definition
from training_cases import relative_difference  # noqa: E402

CLIENTS, SAMPLES, EPOCHS, BATCH = 5, 640, 2, 64


def same(first: list[LocalResult], second: list[LocalResult]) -> bool:
    return all(torch.equal(a.state[k], b.state[k]) for a, b in zip(first, second, strict=True) for k in a.state)


def main(name: str, variant: str) -> dict:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    precision = variant if variant in ("tf32", "bf16") else "fp32"
    configure_process(precision)
    if variant == "nondet":
        torch.use_deterministic_algorithms(False)
    if variant == "stream1":
        graphed.STREAMS = 1
    numerics = Numerics(precision, variant == "nhwc")
    shape = (3, 32, 32) if name == "resnet20" else (1, 28, 28)
    info = DatasetInfo("p", tuple("abcdefghij"), shape[0], shape[1:], (0.5,) * shape[0], (0.25,) * shape[0], 255.0)
    torch.manual_seed(0)
    model = numerics.prepare(build_model(name, info)).to(device)
    generator = torch.Generator().manual_seed(1)
    labels = torch.randint(0, 10, (CLIENTS * SAMPLES,), generator=generator)
    images = (torch.randn(CLIENTS * SAMPLES, *shape, generator=generator) + labels.view(-1, 1, 1, 1) * 0.1).to(device)
    labels = labels.to(device)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    tasks = [
        LocalTask(
            start, torch.arange(c * SAMPLES, (c + 1) * SAMPLES, device=device), (1e-3,) * EPOCHS, shuffle_key(0, c, 0)
        )
        for c in range(CLIENTS)
    ]
    settings = LocalSettings(BATCH, "adam", 10, numerics)
    trainer = graphed.GraphedTrainer(model, images, labels, settings)

    def timed() -> tuple[list[LocalResult], float]:
        started = time.perf_counter()
        results = trainer.train(tasks)
        if device == "cuda":
            torch.cuda.synchronize()
        return results, time.perf_counter() - started

    first, capture = timed()
    repeats = [timed() for _ in range(3)]
    steps = CLIENTS * EPOCHS * (SAMPLES // BATCH)
    plain = PlainTrainer(model, images, labels, settings).train(tasks)
    return {
        "model": name,
        "variant": variant,
        "replicas": len(trainer.replicas),
        "ms_per_client_step": round(1000 * sorted(seconds for _, seconds in repeats)[1] / steps, 3),
        "first_call_s": round(capture, 2),
        "repeat_same": same(first, repeats[0][0]),
        "alone_same": same(first, [trainer.train([task])[0] for task in tasks]),
        "rel_vs_plain": max(relative_difference(r, p, start) for r, p in zip(first, plain, strict=True)),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
