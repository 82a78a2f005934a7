"""The same FedAvg work in asyncfl and in every installed peer framework, side by side (docs/performance.md "Speed").

Each framework runs in its own venv (`peers/setup.sh`; never a dependency of asyncfl) and trains the
paper's CNN on one asyncfl partition: J clients per round, I local epochs of minibatch Adam at a
constant rate, the size-weighted mean as the server's model, for R rounds; each samples its clients
its own way. Runs are interleaved (A B C A B C …) so that a machine whose speed drifts biases none.
Per framework the table gives the median seconds per round and the time per trained sample (both
over rounds 2..R − 1: start-up, the first round's warm-up and the last round excluded), the peak
resident memory of the runner's process, and the global model's final test accuracy.

    .venv/bin/python peers/compare.py --dataset fashion-mnist --root /usr/share/datasets/fashion-mnist
"""

import argparse
import dataclasses
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PEERS = ("flwr", "pfl", "appfl", "fedlab")  # each a venv under --venvs and a peers/run_NAME.py


def export_work(args: argparse.Namespace, folder: Path) -> None:
    """The partition (asyncfl's own command), the data as uint8 arrays, and the settings, into `folder`."""
    from asyncfl.data.loading import load_dataset

    folder.mkdir(parents=True, exist_ok=True)
    partition = folder / "partition.npz"
    made = subprocess.run(
        [sys.executable, "-m", "asyncfl", "partition", "--dataset", args.dataset, "--root", str(args.root),
         "--clients", str(args.clients), "--alpha", str(args.alpha), "--seed", str(args.seed), "--out", str(partition),
         "--subset-fraction", str(args.subset_fraction)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    if made.returncode != 0:  # asyncfl's own one-line error says what is wrong
        sys.exit(f"compare.py: the partition could not be made: {made.stderr.strip().splitlines()[-1]}")
    dataset = load_dataset(args.dataset, args.root)
    with np.load(partition) as split:
        indices, offsets = split["indices"], split["offsets"]
    np.savez(
        folder / "work.npz",
        train_images=dataset.train_images.numpy(),
        train_labels=dataset.train_labels.numpy(),
        test_images=dataset.test_images.numpy(),
        test_labels=dataset.test_labels.numpy(),
        indices=indices,
        offsets=offsets,
    )
    info = dataset.info
    settings = {
        "dataset": args.dataset,
        "root": str(args.root),
        "info": {**dataclasses.asdict(info), "classes": list(info.classes)},
        **{key: getattr(args, key) for key in ("rounds", "clients_per_round", "local_epochs", "batch_size")},
        **{key: getattr(args, key) for key in ("lr", "seed", "device", "threads")},
    }
    (folder / "settings.json").write_text(json.dumps(settings, indent=1))


def summary(result: dict) -> dict:
    """Seconds per round and per trained sample over rounds 2..R − 1, from a runner's record: start-up,
    the first round's warm-up and the last round (where asyncfl also evaluates its model) left out."""
    ends, samples = result["round_ends"][:-1], result["round_samples"][:-1]
    return {
        "seconds_per_round": statistics.median(np.diff(ends)),
        "us_per_sample": (ends[-1] - ends[0]) / sum(samples[1:]) * 1e6,
        "peak_mib": result["peak_rss_mib"] if result["cuda_peak_mib"] is None else result["cuda_peak_mib"],
        "accuracy": result["test_accuracy"],
    }


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Every argument checked before any run starts: one line naming it (argparse's error, exit 2)."""
    from asyncfl.settings.names import DATASETS

    if args.dataset not in DATASETS:
        parser.error(f"--dataset must be one of {', '.join(DATASETS)}, got {args.dataset!r}")
    if args.rounds < 4 or args.rounds > 10_000:
        parser.error("--rounds must be 4…10000: the times are taken over rounds 2 to R − 1")
    for name in ("clients", "clients_per_round", "local_epochs", "batch_size", "threads", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.clients_per_round > args.clients:
        parser.error(f"--clients-per-round {args.clients_per_round} exceeds --clients {args.clients}")
    if not 0 < args.subset_fraction <= 1:
        parser.error(f"--subset-fraction must be in (0, 1], got {args.subset_fraction}")
    if not (math.isfinite(args.lr) and args.lr > 0) or not (math.isfinite(args.alpha) and args.alpha > 0):
        parser.error("--lr and --alpha must be finite numbers > 0")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out} is a file; give a folder for the runs' records")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="fashion-mnist")
    parser.add_argument("--root", type=Path, default=Path("/usr/share/datasets/fashion-mnist"))
    parser.add_argument("--clients", type=int, default=10, help="C (default 10)")
    parser.add_argument("--alpha", type=float, default=0.5, help="Dirichlet α (default 0.5)")
    parser.add_argument(
        "--subset-fraction", type=float, default=0.1, help="of the training set the clients share (default 0.1)"
    )
    parser.add_argument("--rounds", type=int, default=8, help="R (default 8)")
    parser.add_argument("--clients-per-round", type=int, default=5, help="J (default 5)")
    parser.add_argument("--local-epochs", type=int, default=1, help="I (default 1)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam's constant learning rate (default 1e-3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of every framework (default 1)")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved runs of each framework (default 2)")
    parser.add_argument("--venvs", type=Path, default=HERE / ".venvs", help="one venv per peer: VENVS/NAME/bin/python")
    parser.add_argument("--out", type=Path, default=Path("results/peers"))
    args = parser.parse_args()
    check_arguments(parser, args)
    if args.local_epochs != 1:
        print("note: with I > 1 asyncfl's epoch clock lowers γ within a dispatch, unlike the peers' constant rate")
    export_work(args, args.out)
    frameworks = {"asyncfl": Path(sys.executable)}
    for peer in PEERS:
        python = args.venvs / peer / "bin" / "python"
        if python.is_file():
            frameworks[peer] = python
        else:
            print(f"{peer}: skipped ({python} is missing; peers/setup.sh {peer} makes it)")
    results: dict[str, list[dict]] = {name: [] for name in frameworks}
    for repeat in range(args.repeats):
        for name, python in frameworks.items():
            record = args.out / f"{name}-{repeat}.json"
            command = [str(python), str(HERE / f"run_{name}.py"), str(args.out), str(record)]
            run = subprocess.run(command, cwd=HERE, capture_output=True, text=True)
            (args.out / f"{name}-{repeat}.log").write_text(run.stdout + run.stderr)
            if run.returncode != 0:
                print(f"{name}: run {repeat} failed; see {args.out / f'{name}-{repeat}.log'}")
                continue
            results[name].append(json.loads(record.read_text()))
    rows = []
    for name, runs in results.items():
        if runs:
            parts = [summary(run) for run in runs]
            row = {key: statistics.median(p[key] for p in parts) for key in parts[0]}
            rows.append({"framework": name, "version": runs[0]["version"], "runs": len(runs), **row})
    (args.out / "peers.json").write_text(json.dumps(rows, indent=1, allow_nan=False))
    print(
        f"{args.dataset} ({args.subset_fraction:g} of its training set), C = {args.clients}, α = {args.alpha:g}, "
        f"J = {args.clients_per_round}, I = {args.local_epochs}, R = {args.rounds}, batch "
        f"{args.batch_size}, Adam {args.lr:g}, {args.threads} thread(s), {args.device}; medians of the runs"
    )
    print(f"{'framework':10} {'version':8} {'runs':>4} {'s/round':>8} {'µs/sample':>9} {'peak MiB':>8} {'accuracy':>8}")
    for row in rows:
        print(
            f"{row['framework']:10} {row['version']:8} {row['runs']:>4} {row['seconds_per_round']:>8.3f} "
            f"{row['us_per_sample']:>9.1f} {row['peak_mib']:>8.0f} {row['accuracy']:>8.3f}"
        )
    failed = sum(args.repeats - len(runs) for runs in results.values())
    if failed:  # a table with holes is not a comparison: the exit status says so
        sys.exit(f"compare.py: {failed} of {args.repeats * len(results)} runs failed; their logs are in {args.out}")


if __name__ == "__main__":
    main()
