"""The names a user can choose, with their display names: one table for the config, the CLI, the figures
and the workflow.

Kept free of heavy imports: Snakemake reads it while it plans the DAG, before any torch is loaded.
The implementations are found by these names: algorithms in `strategies.STRATEGIES`, datasets in
`datasets.load_dataset`, models in `models.MODELS`; each of those checks at import that it covers this table.
"""

# Federated algorithms, in the order (and so the colour) every figure uses.
ALGORITHMS = {
    "afl": "AFL",
    "sync": "Sync FL (FedAvg)",
    "fedasync": "FedAsync",
    "fedbuff": "FedBuff",
    "afl_as_coded": "AFL as the paper's code runs it",
}
DATASETS = {"mnist": "MNIST", "fashion-mnist": "Fashion-MNIST", "cifar10": "CIFAR-10", "digits": "digits (8×8)"}
MODELS = {"cnn": "CNN (3 conv layers)", "resnet20": "ResNet-20"}
OPTIMIZERS = ("adam", "sgd")
DEVICES = ("auto", "cpu", "cuda")
TRAINERS = ("auto", "vectorised", "plain", "graphed")
PRECISIONS = ("fp32", "tf32", "bf16")
