"""Dirichlet label-skew partitions of a training set into clients (docs/cli.md "Partitions").

For each class k a share vector p_k ~ Dir(α·1_C) splits that class's (shuffled)
indices among the C clients; every sample goes to exactly one client. All of it is
vectorised NumPy driven by one explicit Generator, so equal inputs give equal bytes.

With `sizes: equal` every client holds exactly ⌊n/C⌋ samples instead, its class mix drawn from
Dir(α·1_K) over the K classes (Hsu et al. 2019's per-client form, the one simulators with equal clients
use, e.g. NVFlare's FedRevive): each client in turn takes its mix from the classes still unassigned,
its shares renormalised over those left where a class runs out; the n mod C samples left over stay out.
"""

import functools
import math
import time
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asyncfl.data.holdout import Holdout
from asyncfl.data.labels import train_labels
from asyncfl.files import sha256, write_json, write_npz
from asyncfl.planning.layout import NPZ_HASH
from asyncfl.settings import random_streams
from asyncfl.settings.config import MAX_SEED
from asyncfl.settings.errors import InputError
from asyncfl.settings.integrity import check_output

MAX_REDRAWS = 1000


@dataclass(frozen=True)
class Partition:
    """Client c owns training samples `indices[offsets[c]:offsets[c + 1]]`."""

    indices: np.ndarray  # int64, grouped by client: every training index once (a subset's, for a subset partition)
    offsets: np.ndarray  # int64, C + 1 entries
    dataset: str
    source: str = "the partition"  # how error messages name it: its file, once loaded
    subset_of: int | None = None  # a subset partition: the training set's size it was drawn from
    validation: np.ndarray | None = None  # the training indices held out as the validation split, if any

    @classmethod
    def of_sizes(cls, sizes: np.ndarray, dataset: str) -> "Partition":
        """Clients that own a count of samples and no sample: a timing-only run's (`trainer: none`), which
        never reads its clients' data, so that C = 10^8 clients fit a machine whose data could not."""
        offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        return cls(np.zeros(0, dtype=np.int64), offsets, dataset, "a partition of sizes only")

    @property
    def sizes_only(self) -> bool:
        """Whether the clients own counts and no samples (`of_sizes`)."""
        return len(self.indices) != self.offsets[-1]

    @property
    def num_clients(self) -> int:
        return len(self.offsets) - 1

    @functools.cached_property
    def sizes(self) -> np.ndarray:
        """n_c per client, computed once (0.7 s at 10^8 clients)."""
        return np.diff(self.offsets)

    def client_indices(self, client: int) -> np.ndarray:
        return self.indices[self.offsets[client] : self.offsets[client + 1]]


@dataclass(frozen=True)
class DirichletSplit:
    """How a training set is split into clients by Dirichlet label skew.

    Attributes:
        clients: C.
        alpha: the Dirichlet concentration (smaller: more label skew; the paper: 0.5).
        seed: of the draw (and of a subset's draw).
        min_size: the fewest samples a client may get; client shares are redrawn (same generator, so
            still deterministic) until every client has them, at most MAX_REDRAWS times.
        equal_sizes: every client exactly ⌊n/C⌋ samples, its class mix its own Dirichlet draw (see above).
    """

    clients: int
    alpha: float
    seed: int
    min_size: int = 1
    equal_sizes: bool = False

    def check(self, n: int, dataset: str) -> None:
        """A one-line error for a split that `n` training samples cannot give."""
        if self.clients < 1:
            raise InputError(f"clients must be at least 1 (got {self.clients})")
        if not (math.isfinite(self.alpha) and self.alpha > 0):
            raise InputError(
                f"alpha must be a finite number > 0 (got {self.alpha}); smaller alpha means more label skew, "
                "the paper uses 0.5"
            )
        if self.seed > MAX_SEED:
            raise InputError(f"seed must be ≤ {MAX_SEED} (got {self.seed})")
        if self.clients > n:
            raise InputError(
                f"{self.clients} clients exceed the {n} training samples of {dataset}; use at most {n} clients"
            )
        if self.equal_sizes and self.min_size > n // self.clients:
            raise InputError(
                f"equal sizes give each of {self.clients} clients {n // self.clients} of {dataset}'s {n} samples, "
                f"fewer than --min-size {self.min_size}; use fewer clients or a lower --min-size"
            )
        if self.min_size < 0 or self.clients * self.min_size > n:
            raise InputError(
                f"min-size {self.min_size} is impossible for {self.clients} clients and {n} samples; "
                f"use 0 ≤ min-size ≤ {n // self.clients}"
            )

    def partition(self, labels: np.ndarray, dataset: str) -> tuple[Partition, int]:
        """The partition of the samples with these `labels`, and the redraws it took."""
        labels = np.asarray(labels)
        n, clients = len(labels), self.clients
        self.check(n, dataset)
        rng = np.random.default_rng(self.seed)
        classes, class_sizes = np.unique(labels, return_counts=True)
        # Shuffle once, then group by class: each class's indices in random order, classes ascending.
        shuffled = rng.permutation(n)
        by_class = shuffled[np.argsort(labels[shuffled], kind="stable")]
        if self.equal_sizes:
            return self.equal_partition(rng, by_class, class_sizes, dataset), 0
        for redraw in range(MAX_REDRAWS):
            shares = rng.dirichlet(np.full(clients, self.alpha), size=len(classes))
            counts = split_counts(shares, class_sizes)
            if counts.sum(axis=0).min() >= self.min_size:
                owner = np.empty(n, dtype=np.int64)
                owner[by_class] = np.repeat(np.tile(np.arange(clients), len(classes)), counts.ravel())
                indices = np.argsort(owner, kind="stable").astype(np.int64)
                offsets = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=clients))]).astype(np.int64)
                return Partition(indices, offsets, dataset), redraw
        raise InputError(
            f"no Dirichlet draw gave all {clients} clients at least {self.min_size} samples in {MAX_REDRAWS} tries "
            f"(alpha={self.alpha}); lower --min-size, raise --alpha or use fewer clients"
        )

    def equal_partition(
        self, rng: np.random.Generator, by_class: np.ndarray, class_sizes: np.ndarray, dataset: str
    ) -> Partition:
        """Every client ⌊n/C⌋ samples, its class mix drawn from Dir(α·1_K), taken in client order from the
        classes' shuffled indices still unassigned (`by_class`, grouped by class)."""
        size, left = len(by_class) // self.clients, class_sizes.astype(np.int64).copy()
        counts = np.zeros((self.clients, len(class_sizes)), dtype=np.int64)
        for client in range(self.clients):
            shares = rng.dirichlet(np.full(len(class_sizes), self.alpha))
            while (need := size - counts[client].sum()) > 0:  # a class run out: the shares of those left
                open_shares = np.where(left > 0, shares, 0.0)
                open_shares = open_shares if open_shares.sum() > 0 else (left > 0).astype(float)
                take = np.minimum(split_counts(open_shares[None] / open_shares.sum(), np.array([need]))[0], left)
                if not take.any():  # rounding left the rest to a class run out: one from the largest share left
                    take[np.argmax(open_shares)] = 1
                counts[client] += take
                left -= take
        starts = np.concatenate([[0], np.cumsum(class_sizes)[:-1]])  # where each class begins in by_class
        taken = np.cumsum(counts, axis=0) - counts  # per client, how many of each class earlier clients took
        indices = np.concatenate(
            [by_class[starts[k] + taken[c, k] : starts[k] + taken[c, k] + counts[c, k]] for c in range(self.clients)
             for k in range(len(class_sizes))]
        ).astype(np.int64)  # fmt: skip
        offsets = np.arange(0, size * self.clients + 1, size, dtype=np.int64)
        leftover = len(by_class) - len(indices)
        return Partition(indices, offsets, dataset, subset_of=len(by_class) if leftover else None)

    def partition_subset(
        self, labels: np.ndarray, dataset: str, subset: "Subset | None", holdout: Holdout | None = None
    ) -> tuple[Partition, int]:
        """The partition of a seeded subset of the training set (all of it without `subset`), less the
        validation split `holdout` draws from it, in the training set's indices."""
        kept = subset.draw(len(labels), self.seed) if subset else np.arange(len(labels), dtype=np.int64)
        validation = kept[holdout.draw(np.asarray(labels)[kept], self.seed)] if holdout else None
        if validation is not None:
            kept = np.setdiff1d(kept, validation)
        local, redraws = self.partition(np.asarray(labels)[kept], dataset)
        partition = Partition(kept[local.indices], local.offsets, dataset, subset_of=len(labels), validation=validation)
        return partition, redraws


@dataclass(frozen=True)
class Subset:
    """Part of a training set to partition, for experiments with fewer samples than the dataset has:
    `size` samples, or a `fraction` of them, drawn uniformly without replacement from the seed's
    SUBSET stream (so the subset depends on the seed alone, not on C or α)."""

    fraction: float | None = None
    size: int | None = None

    def count(self, n: int) -> int:
        """How many of `n` training samples the subset keeps; a one-line error when it cannot."""
        if self.fraction is not None:
            if not 0 < self.fraction <= 1:
                raise InputError(f"--subset-fraction must be in (0, 1], got {self.fraction}")
            count = round(self.fraction * n)
        else:
            count = int(self.size or 0)
        if not 1 <= count <= n:
            raise InputError(f"a subset of {count} samples is impossible: the training set has {n}; keep 1…{n}")
        return count

    def draw(self, n: int, seed: int) -> np.ndarray:
        """The kept training indices, ascending."""
        rng = np.random.default_rng([seed, random_streams.SUBSET])
        return np.sort(rng.choice(n, size=self.count(n), replace=False)).astype(np.int64)

    def describe(self, n: int) -> dict:
        """What the partition's JSON records of it."""
        return {"of": n, "samples": self.count(n), "fraction": self.fraction, "size": self.size}


def split_counts(shares: np.ndarray, class_sizes: np.ndarray) -> np.ndarray:
    """Per class, cut n_k indices at the cumulative shares: K×C counts whose rows sum to n_k exactly."""
    cuts = np.floor(np.cumsum(shares, axis=1) * class_sizes[:, None]).astype(np.int64)
    cuts[:, -1] = class_sizes  # the remainder of rounding goes to the last client, never dropped
    return np.diff(cuts, axis=1, prepend=0)


def class_counts(partition: Partition, labels: np.ndarray, num_classes: int) -> np.ndarray:
    """C×K matrix: how many samples of each class each client holds."""
    owner = np.repeat(np.arange(partition.num_clients), partition.sizes)
    flat = owner * num_classes + np.asarray(labels)[partition.indices]
    return np.bincount(flat, minlength=partition.num_clients * num_classes).reshape(-1, num_classes)


def label_entropy(counts: np.ndarray) -> np.ndarray:
    """Per-client entropy (bits) of the label distribution: low means skewed, log2(K) means uniform."""
    totals = counts.sum(axis=1, keepdims=True)
    p = np.divide(counts, totals, out=np.zeros(counts.shape), where=totals > 0)
    logs = np.log2(p, out=np.zeros(p.shape), where=p > 0)
    return -(p * logs).sum(axis=1) + 0.0  # + 0.0: no −0.00 for a one-class client


def partition_stats(partition: Partition, labels: np.ndarray, num_classes: int, split: DirichletSplit) -> dict:
    """The JSON sidecar: inputs and per-client per-class counts."""
    counts = class_counts(partition, labels, num_classes)
    return {
        "dataset": partition.dataset,
        "clients": partition.num_clients,
        "alpha": split.alpha,
        "seed": split.seed,
        "min_size": split.min_size,
        **({"equal_sizes": True} if split.equal_sizes else {}),
        "num_samples": int(partition.offsets[-1]),
        "sizes": partition.sizes.tolist(),
        "class_counts": counts.tolist(),
        "mean_label_entropy_bits": float(label_entropy(counts).mean()),
    }


def save_partition(path: Path, partition: Partition, stats: dict) -> None:
    """Write FILE.npz (indices, offsets, dataset; `subset_of` for a subset), then its FILE.json stats
    sidecar with the .npz's SHA-256, which ties the two: a .json left beside another .npz (a kill
    between the two writes, a copy) is refused by its readers."""
    path = Path(path)
    arrays = {"indices": partition.indices, "offsets": partition.offsets, "dataset": np.array(partition.dataset)}
    if partition.subset_of is not None:
        arrays["subset_of"] = np.array(partition.subset_of, dtype=np.int64)
    if partition.validation is not None:
        arrays["validation"] = partition.validation
    write_npz(path, arrays)
    write_json(path.with_suffix(".json"), {**stats, NPZ_HASH: sha256(path)})


def load_partition(path: Path) -> Partition:
    """Read a partition file, checking that it is one: the three arrays, offsets that cover the indices,
    every index once. Whether the indices fit the dataset is `checks.check_run`'s to judge."""
    path = Path(path)
    remake = f"make it again with `asyncfl partition ... --out {path}`"
    if path.is_dir():
        raise InputError(f"partition file {path} is a folder; give the FILE.npz that asyncfl partition wrote")
    if not path.is_file():
        raise InputError(f"partition file {path} not found; make it with `asyncfl partition ... --out {path}`")
    try:
        npz = np.load(path, allow_pickle=False)
        if not isinstance(npz, np.lib.npyio.NpzFile):
            raise ValueError("a single array, not an .npz archive")
        with npz:
            missing = [key for key in ("indices", "offsets", "dataset") if key not in npz.files]
            if missing:
                raise InputError(f"partition file {path} lacks the array {missing[0]!r}; {remake}")
            indices, offsets, dataset = npz["indices"], npz["offsets"], str(npz["dataset"])
            subset_of = int(npz["subset_of"]) if "subset_of" in npz.files else None
            validation = npz["validation"] if "validation" in npz.files else None
    except MemoryError:
        raise InputError(f"partition file {path} claims arrays larger than memory; {remake}") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as error:
        # numpy calls any non-archive "pickled data" and suggests loading it unsafely: not repeated here
        reason = "not an .npz archive" if "pickle" in str(error) else str(error).splitlines()[0][:100]
        raise InputError(
            f"partition file {path} is not a readable .npz ({reason or type(error).__name__}); {remake}"
        ) from None
    integer = indices.dtype.kind in "iu" and offsets.dtype.kind in "iu" and indices.ndim == offsets.ndim == 1
    if (
        not integer
        or len(offsets) < 2
        or offsets[0] != 0
        or offsets[-1] != len(indices)
        or np.any(np.diff(offsets) < 0)
        or len(np.unique(indices)) != len(indices)
    ):
        raise InputError(f"partition file {path} is inconsistent (its offsets and indices disagree); {remake}")
    if validation is not None and (
        validation.dtype.kind not in "iu"
        or validation.ndim != 1
        or len(np.unique(validation)) != len(validation)
        or np.intersect1d(validation, indices).size
    ):
        raise InputError(f"partition file {path}: its validation split overlaps its clients' samples; {remake}")
    held = None if validation is None else validation.astype(np.int64)
    return Partition(indices.astype(np.int64), offsets.astype(np.int64), dataset, str(path), subset_of, held)


SHOWN_CLIENTS = 20


def make_partition(
    dataset: str,
    root: Path | None,
    split: DirichletSplit,
    out: Path,
    subset: Subset | None = None,
    holdout: Holdout | None = None,
) -> list[str]:
    """`asyncfl partition`: partition a training set (or a seeded subset of it, less a validation split
    where `holdout` asks for one), write FILE.npz and FILE.json, describe the result."""
    if Path(out).suffix != ".npz":
        raise InputError(f"--out must end in .npz (the statistics go beside it as .json), got {out}")
    for path in (Path(out), Path(out).with_suffix(".json")):  # before the data is read, not after
        check_output(path, "--out")
    labels = train_labels(dataset, root)
    num_classes = int(labels.max()) + 1
    start = time.perf_counter()
    if subset is None and holdout is None:
        partition, redraws = split.partition(labels, dataset)
    else:
        partition, redraws = split.partition_subset(labels, dataset, subset, holdout)
    seconds = time.perf_counter() - start
    stats = partition_stats(partition, labels, num_classes, split)
    clients = split.clients
    if subset is not None:
        stats["subset"] = subset.describe(len(labels))
    if holdout is not None and partition.validation is not None:
        stats["validation"] = holdout.describe(labels, partition.validation, num_classes)
    save_partition(out, partition, stats)
    counts = np.array(stats["class_counts"])
    entropy, sizes = label_entropy(counts), partition.sizes
    lines = [
        f"{dataset}: {len(partition.indices)}{f' of {len(labels)}' if subset else ''} samples into {clients} clients "
        f"(alpha={split.alpha}, seed={split.seed}{', equal sizes' if split.equal_sizes else ''}) "
        f"in {seconds:.3f} s, {redraws} redraws → {out}",
        f"{'client':>6} {'samples':>7} {'entropy':>7}  per-class counts",
    ]
    lines += [
        f"{c:>6} {sizes[c]:>7} {entropy[c]:>7.2f}  {' '.join(map(str, counts[c]))}"
        for c in range(min(clients, SHOWN_CLIENTS))
    ]
    if clients > SHOWN_CLIENTS:
        lines.append(f"   … {clients - SHOWN_CLIENTS} more clients in {Path(out).with_suffix('.json')}")
    lines.append(
        f"sizes min/median/max {sizes.min()}/{int(np.median(sizes))}/{sizes.max()}, "
        f"mean label entropy {entropy.mean():.3f} bits (uniform: {np.log2(num_classes):.3f})"
    )
    return lines
