"""The `asyncfl` command: every pipeline step runs by hand with the same result as under Snakemake."""

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from asyncfl.config import ALGORITHMS, load_config
from asyncfl.data import DATASET_NAMES, default_root, load_dataset
from asyncfl.errors import InputError
from asyncfl.partition import dirichlet_partition, label_entropy, load_partition, partition_stats, save_partition

SHOWN_CLIENTS = 20

DATA_HELP = """\
Files asyncfl looks for under --root (torchvision's layout, or the archives directly in --root):
  mnist, fashion-mnist  MNIST/raw/ or FashionMNIST/raw/: train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz
                        t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz
  cifar10               cifar-10-batches-py/ (data_batch_1..5, test_batch, batches.meta) or cifar-10-python.tar.gz
  digits                nothing: scikit-learn ships it
Every file is checked against torchvision's published MD5 before use."""


def add_dataset_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, choices=DATASET_NAMES)
    parser.add_argument("--root", type=Path, help="dataset folder (default: resources/data/DATASET)")


def cmd_data(args: argparse.Namespace) -> None:
    """Download if needed, verify and summarise a dataset."""
    root = args.root or default_root(args.dataset)
    dataset = load_dataset(args.dataset, root, download=True)
    info = dataset.info
    train_per_class = np.bincount(dataset.train_labels.numpy(), minlength=info.num_classes)
    print(f"{info.name}: ready in {root if info.name != 'digits' else 'scikit-learn'} (checksums verified)")
    print(f"  train {len(dataset.train_labels)}  test {len(dataset.test_labels)}  "
          f"images {info.channels}×{info.size[0]}×{info.size[1]}  classes {info.num_classes}")
    print(f"  train samples per class: {' '.join(str(c) for c in train_per_class)}")


def cmd_partition(args: argparse.Namespace) -> None:
    """Dirichlet-partition a training set; write FILE.npz and FILE.json; print per-client stats."""
    labels = load_dataset(args.dataset, args.root).train_labels.numpy()
    num_classes = int(labels.max()) + 1
    start = time.perf_counter()
    partition, redraws = dirichlet_partition(labels, args.dataset, args.clients, args.alpha, args.seed, args.min_size)
    seconds = time.perf_counter() - start
    stats = partition_stats(partition, labels, num_classes, args.alpha, args.seed, args.min_size)
    save_partition(args.out, partition, stats)
    counts = np.array(stats["class_counts"])
    entropy = label_entropy(counts)
    print(f"{args.dataset}: {len(labels)} samples into {args.clients} clients (alpha={args.alpha}, seed={args.seed}) "
          f"in {seconds:.3f} s, {redraws} redraws → {args.out}")
    print(f"{'client':>6} {'samples':>7} {'entropy':>7}  per-class counts")
    for client in range(min(args.clients, SHOWN_CLIENTS)):
        print(f"{client:>6} {partition.sizes[client]:>7} {entropy[client]:>7.2f}  {' '.join(map(str, counts[client]))}")
    if args.clients > SHOWN_CLIENTS:
        print(f"   … {args.clients - SHOWN_CLIENTS} more clients in {Path(args.out).with_suffix('.json')}")
    sizes = partition.sizes
    print(f"sizes min/median/max {sizes.min()}/{int(np.median(sizes))}/{sizes.max()}, "
          f"mean label entropy {entropy.mean():.3f} bits (uniform: {np.log2(num_classes):.3f})")


def cmd_train(args: argparse.Namespace) -> None:
    """Run one federated training (or resume it from its checkpoint) and write its outputs."""
    from asyncfl.engine import Simulation, sha256

    overrides = {"algorithm": args.algorithm, "model": args.model, "clients_per_round": args.clients_per_round,
                 "rounds": args.rounds, "local_epochs": args.local_epochs, "seed": args.seed}
    config = load_config(args.config, overrides)
    partition = load_partition(args.partition)
    dataset = load_dataset(args.dataset, args.root)
    summary = Simulation(config, dataset, partition, args.out, sha256(args.partition)).run()
    print(f"{config.algorithm}: {summary['rounds_completed']} rounds ({summary['stop_reason']}), "
          f"virtual time {summary['virtual_time']:.1f} s, wall {summary['wall_seconds']:.1f} s → {args.out}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="asyncfl", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    data = commands.add_parser("data", help="prepare a dataset: download when needed, verify",
                               epilog=DATA_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dataset_arguments(data)
    data.set_defaults(run=cmd_data)

    part = commands.add_parser("partition", help="Dirichlet label-skew partition into clients")
    add_dataset_arguments(part)
    part.add_argument("--clients", type=int, required=True, help="number of clients C")
    part.add_argument("--alpha", type=float, required=True, help="Dirichlet concentration (smaller: more skew)")
    part.add_argument("--seed", type=int, required=True)
    part.add_argument("--min-size", type=int, default=1, help="fewest samples a client may get (default 1)")
    part.add_argument("--out", type=Path, required=True, help="FILE.npz (stats go to FILE.json)")
    part.set_defaults(run=cmd_partition)

    train = commands.add_parser("train", help="federated training on a virtual clock (resumes from a checkpoint)",
                                description="Options not given here come from --config, else the paper's defaults.")
    add_dataset_arguments(train)
    train.add_argument("--partition", type=Path, required=True, help="FILE.npz from asyncfl partition")
    train.add_argument("--algorithm", choices=ALGORITHMS)
    train.add_argument("--model", choices=("cnn", "resnet20"))
    train.add_argument("--clients-per-round", type=int, metavar="J")
    train.add_argument("--rounds", type=int, metavar="R")
    train.add_argument("--local-epochs", type=int, metavar="I")
    train.add_argument("--seed", type=int)
    train.add_argument("--config", type=Path, help="YAML file with any other settings (see config/README.md)")
    train.add_argument("--out", type=Path, required=True, help="run folder: metrics.csv, events.csv, model.pt, run.json")
    train.set_defaults(run=cmd_train)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except InputError as error:
        print(f"asyncfl {args.command}: error: {error}", file=sys.stderr)
        return 1
    return 0
