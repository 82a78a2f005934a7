"""`asyncfl data` and `asyncfl partition`: a dataset prepared and verified, and split among clients."""

import argparse
from pathlib import Path

from asyncfl.cli.arguments import Commands, add_dataset_arguments, at_least
from asyncfl.data.holdout import Holdout
from asyncfl.settings.integrity import check_output

DATA_HELP = """\
Files asyncfl looks for under --root (torchvision's layout, or the archives directly in --root):
  mnist, fashion-mnist  MNIST/raw/ or FashionMNIST/raw/: train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz
                        t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz
  cifar10               cifar-10-batches-py/ (data_batch_1..5, test_batch, batches.meta) or cifar-10-python.tar.gz
  digits                nothing: scikit-learn ships it
Every file is checked against torchvision's published MD5 before use."""


def cmd_data(args: argparse.Namespace) -> None:
    """Download if needed, verify and summarise a dataset."""
    from asyncfl.data.loading import prepare_dataset  # torch: ~1.4 s a process; the commands that draw need none

    if args.summary:
        check_output(args.summary, "--summary")
    print("\n".join(prepare_dataset(args.dataset, args.root, args.summary)))


def cmd_partition(args: argparse.Namespace) -> None:
    """Dirichlet-partition a training set; write FILE.npz and FILE.json; print per-client stats."""
    from asyncfl.data.partition import DirichletSplit, Subset, make_partition

    subset = None
    if args.subset_fraction is not None or args.subset_size is not None:
        subset = Subset(args.subset_fraction, args.subset_size)
    split = DirichletSplit(args.clients, args.alpha, args.seed, args.min_size, args.sizes == "equal")
    holdout = Holdout(args.validation_fraction) if args.validation_fraction is not None else None
    print("\n".join(make_partition(args.dataset, args.root, split, args.out, subset, holdout)))


def register(commands: Commands) -> None:
    """The data and partition commands."""
    data = commands.add_parser(
        "data",
        help="prepare a dataset: download when needed, verify",
        epilog=DATA_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_dataset_arguments(data)
    data.add_argument("--summary", type=Path, help="also write the summary as JSON (the pipeline's marker)")
    data.set_defaults(run=cmd_data)

    part = commands.add_parser("partition", help="Dirichlet label-skew partition into clients")
    add_dataset_arguments(part)
    part.add_argument("--clients", type=at_least(1), required=True, help="number of clients C")
    part.add_argument("--alpha", type=float, required=True, help="Dirichlet concentration (smaller: more skew)")
    part.add_argument("--seed", type=at_least(0), required=True)
    part.add_argument("--min-size", type=at_least(0), default=1, help="fewest samples a client may get (default 1)")
    part.add_argument(
        "--sizes",
        choices=("dirichlet", "equal"),
        default="dirichlet",
        help="dirichlet: each class split among the clients by Dir(alpha), sizes as they fall (the paper's); "
        "equal: every client floor(n/C) samples, its class mix drawn from Dir(alpha) over the classes",
    )
    part.add_argument("--out", type=Path, required=True, help="FILE.npz (stats go to FILE.json)")
    part_subset = part.add_mutually_exclusive_group()
    part_subset.add_argument(
        "--subset-fraction", type=float, help="partition only this fraction of the training set, drawn by --seed"
    )
    part_subset.add_argument(
        "--subset-size", type=at_least(1), help="partition only this many training samples, drawn by --seed"
    )
    part.add_argument(
        "--validation-fraction",
        type=float,
        help="hold this fraction of every class out of the clients as the validation split, drawn by --seed",
    )
    part.set_defaults(run=cmd_partition)
