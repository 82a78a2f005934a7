"""The names a user can choose, with their display names: one table for the config, the CLI, the figures
and the workflow.

Kept free of heavy imports: Snakemake reads it while it plans the DAG, before any torch is loaded.
The implementations are found by these names: algorithms by their catalogue lines (`fl.algorithms`), datasets in
`datasets.load_dataset`, models in `models.MODELS`; each of those checks at import that it covers this table.
"""

import re

from asyncfl.settings.algorithms import CATALOGUE

# Federated algorithms, in the order (and so the colour) every figure uses (`algorithms.CATALOGUE`)
ALGORITHMS = {algorithm.key: algorithm.display for algorithm in CATALOGUE}
# Client updates each algorithm aggregates into one new global model (a round): J, K (FedBuff's buffer)
# or 1. Read by the strategies (`Strategy.arrivals_per_round`) and by the workflow's budget checks.
UPDATES_PER_ROUND = {algorithm.key: algorithm.round_size for algorithm in CATALOGUE}
# FedAvg (FedBuff for FADAS) with a server optimizer of its own: the one its name implies (`make_config` sets it)
SERVER_OPTIMIZER_OF = {algorithm.key: algorithm.server_optimizer for algorithm in CATALOGUE}
DEFAULT_STALENESS_OF = {algorithm.key: algorithm.default_staleness for algorithm in CATALOGUE}


def updates_per_round(algorithm: str, clients_per_round: int, buffer_size: int | None) -> int:
    """Client updates `algorithm` aggregates into one new global model (`UPDATES_PER_ROUND`)."""
    sizes = {"J": clients_per_round, "K": buffer_size or clients_per_round, "1": 1}
    return sizes[UPDATES_PER_ROUND[algorithm]]


# A variant of an algorithm is a run name `ALGORITHM-SUFFIX` with its own settings (an experiment's
# `variants:`, e.g. sync-deadline): the algorithm is what its name says before the dash.
VARIANT_SUFFIX = "[a-z0-9_]+"
# An experiment's or a severity's name: a folder, part of file names and a command-line value
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
MAX_NAME = 64
# An algorithm's config name: a lower-case letter, then letters, digits and underscores (`ca2fl`), as
# run folders (`layout.RUN_DIR`) and variants (`experiments.VARIANT`) spell it; checked here for each one
ALGORITHM_NAME = "[a-z][a-z0-9_]*"
if any(re.fullmatch(ALGORITHM_NAME, name) is None for name in ALGORITHMS):
    raise ImportError(f"an algorithm's name is not {ALGORITHM_NAME}: {sorted(ALGORITHMS)}")


def base_algorithm(run_name: str) -> str:
    """The algorithm a run name stands for: the name itself, or a variant's algorithm (sync-deadline: sync)."""
    return run_name.split("-", 1)[0]


# The asynchronous algorithms: M clients in flight, staleness τ ≥ 0; those that weight updates by s(τ)
ASYNCHRONOUS = tuple(algorithm.key for algorithm in CATALOGUE if algorithm.asynchronous)
# Whose dispatches' times depend on what their aggregations compute: a timing-only run of them is refused
TIMED_BY_TRAINING = tuple(algorithm.key for algorithm in CATALOGUE if not algorithm.timed_untrained)
STALENESS_WEIGHTED = tuple(
    algorithm.key for algorithm in CATALOGUE if algorithm.asynchronous and algorithm.staleness_weighted
)
DATASETS = {"mnist": "MNIST", "fashion-mnist": "Fashion-MNIST", "cifar10": "CIFAR-10", "digits": "digits (8×8)"}
MODELS = {"cnn": "CNN (3 conv layers)", "resnet20": "ResNet-20", "mlp": "MLP (2NN)"}
OPTIMIZERS = ("adam", "sgd")
# The server optimizers (fl/server_optimizer.py), each with its step η where server_optimizer_lr is not
# given: Flower's FedAvgM, FedAdagrad, FedAdam and FedYogi defaults (Reddi et al. 2021 tune η per task);
# AMSGrad's (FADAS's) 0.01 is AFL-Lib's default (Wang et al. 2024 tune η per task)
SERVER_OPTIMIZER_LR = {"sgd": 1.0, "adagrad": 0.1, "adam": 0.1, "yogi": 0.01, "amsgrad": 0.01}
SERVER_OPTIMIZERS = ("none", *SERVER_OPTIMIZER_LR)
DEVICES = ("auto", "cpu", "cuda")
# `trainer: none` trains nothing: a timing-only run (`training/timing_only.py`)
TIMING_ONLY = "none"
TRAINERS = ("auto", "vectorised", "plain", "graphed", TIMING_ONLY)
PRECISIONS = ("fp32", "tf32", "bf16")
