"""A validation split held out of the training set before it is partitioned (docs/design.md
"Validation"): every choice the pipeline makes from data reads it, and the test set only reports.

Stratified, so the split's class mix is the training set's; seeded from the partition's seed on its
own stream (`random_streams.VALIDATION`), so it depends on the seed alone, not on C or α, and every
algorithm of one seed is chosen on the same samples.
"""

from dataclasses import dataclass

import numpy as np

from asyncfl.settings import random_streams
from asyncfl.settings.errors import InputError


@dataclass(frozen=True)
class Holdout:
    """`fraction` of each class's training samples (rounded), held out as the validation split."""

    fraction: float

    def draw(self, labels: np.ndarray, seed: int) -> np.ndarray:
        """The held-out positions in `labels`, ascending; a one-line error for a fraction that would
        leave a class without training or without validation samples."""
        if not 0 < self.fraction < 1:
            raise InputError(f"--validation-fraction must be in (0, 1), got {self.fraction}")
        rng = np.random.default_rng([seed, random_streams.VALIDATION])
        held = []
        for label in np.unique(labels):
            members = np.flatnonzero(labels == label)
            take = round(self.fraction * len(members))
            if not 0 < take < len(members):
                left = "no validation sample" if take == 0 else "no training sample"
                raise InputError(
                    f"--validation-fraction {self.fraction} leaves class {label} ({len(members)} samples) with "
                    f"{left}; choose a fraction that keeps some of every class on both sides"
                )
            held.append(rng.choice(members, size=take, replace=False))
        return np.sort(np.concatenate(held)).astype(np.int64)

    def describe(self, labels: np.ndarray, held: np.ndarray, num_classes: int) -> dict:
        """What the partition's JSON records of the split."""
        counts = np.bincount(np.asarray(labels)[held], minlength=num_classes)
        return {"fraction": self.fraction, "samples": len(held), "class_counts": counts.tolist()}
