"""What `make run` prints once its environment is set up: the CPU capability torch dispatches to on this
machine and how long the quick pipeline took on each kind, so a newcomer knows what to expect.

Small convolutions and matrix products run about 3× apart between AVX2 and AVX-512 builds of torch's
kernels, so one duration would mislead on the other kind; and a busy machine stretches both (the
pipeline's jobs share two cores). The numbers are docs/performance.md "The quick pipeline, measured"
(a test checks that they agree).
"""

import os

import torch

# Snakemake's Elapsed time of `make run`'s pipeline on 2 idle cores, by torch's CPU capability (AVX-512's
# measured before the straggler miniature's last change, which moved AVX2's by 3 %: docs/performance.md)
MEASURED_SECONDS = {"AVX2": 184, "AVX512": 88}
# How much longer the pipeline took on a machine busy with other work than idle (8 min 41 s against 1 min 51 s)
BUSY_FACTOR = 5


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(seconds % 60)} s"


def estimate_line(capability: str, cores: int) -> str:
    """One line: the capability, the cores, and the duration measured on 2 idle cores of that kind (AVX2's
    where torch reports another, e.g. DEFAULT or an ARM one: the slowest measured)."""
    measured = ", ".join(f"{minutes(s)} with {kind}" for kind, s in MEASURED_SECONDS.items())
    seconds = MEASURED_SECONDS.get(capability.replace("-", ""), MEASURED_SECONDS["AVX2"])
    return (
        f"CPU: torch dispatches to {capability} ({cores} cores here; make run uses 2). The quick pipeline took "
        f"{measured} on 2 idle cores (docs/performance.md), up to {BUSY_FACTOR}x that on a busy machine: "
        f"expect about {minutes(seconds)}."
    )


if __name__ == "__main__":
    print(estimate_line(torch.backends.cpu.get_cpu_capability(), os.cpu_count() or 1))
