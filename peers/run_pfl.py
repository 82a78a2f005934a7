"""pfl-research's side of the peer comparison: `FederatedAveraging` on a `SimulatedBackend`, pfl's own
local training (its PyTorch SGD bridge with Adam), one cohort of J users per central iteration."""

import sys
from importlib.metadata import version
from pathlib import Path

import torch
from common import Record, Work, test_accuracy
from pfl.aggregate.simulate import SimulatedBackend
from pfl.algorithm import FederatedAveraging, NNAlgorithmParams
from pfl.callback.base import TrainingProcessCallback
from pfl.data.dataset import Dataset
from pfl.data.federated_dataset import FederatedDataset
from pfl.data.sampling import get_user_sampler
from pfl.hyperparam import NNEvalHyperParams, NNTrainHyperParams
from pfl.metrics import Metrics, Weighted
from pfl.model.pytorch import PyTorchModel
from torch import nn
from torch.nn import functional as F


class WithLoss(nn.Module):
    """The CNN with the `loss` and `metrics` pfl's PyTorch model asks of a module."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.nll_loss(self.net(x), y)

    @torch.no_grad()
    def metrics(self, x: torch.Tensor, y: torch.Tensor, eval: bool = False) -> dict:
        return {"loss": Weighted(float(F.nll_loss(self.net(x), y, reduction="sum")), len(y))}


class RoundTimer(TrainingProcessCallback):
    def __init__(self, record: Record, trained: list[int]):
        self.record, self.trained = record, trained

    def after_central_iteration(self, aggregate_metrics, model, *, central_iteration):
        self.record.round_done(sum(self.trained))
        self.trained.clear()
        return False, Metrics()


def main(folder: Path, out: Path) -> None:
    work = Work.load(folder)
    settings = work.settings
    epochs, trained = settings["local_epochs"], []

    def user_dataset(user: int) -> Dataset:
        images, labels = work.client_data(user)
        trained.append(len(labels) * epochs)
        return Dataset(raw_data=[images, labels], user_id=str(user))

    users = list(range(len(work.client_indices)))
    training = FederatedDataset(user_dataset, get_user_sampler("minimize_reuse", users))
    validation = FederatedDataset(user_dataset, get_user_sampler("minimize_reuse", users))
    net = WithLoss(work.model())
    model = PyTorchModel(net, torch.optim.Adam, torch.optim.SGD(net.parameters(), lr=1.0))
    rounds = settings["rounds"]
    algorithm_params = NNAlgorithmParams(
        central_num_iterations=rounds,
        evaluation_frequency=rounds + 1,  # the test set is evaluated once, after the run, as for every framework
        train_cohort_size=settings["clients_per_round"],
        val_cohort_size=0,
    )
    train_params = NNTrainHyperParams(
        local_batch_size=settings["batch_size"], local_num_epochs=epochs, local_learning_rate=settings["lr"]
    )
    record = Record("pfl", version("pfl"))
    FederatedAveraging().run(
        algorithm_params=algorithm_params,
        backend=SimulatedBackend(training_data=training, val_data=validation),
        model=model,
        model_train_params=train_params,
        model_eval_params=NNEvalHyperParams(local_batch_size=1000),
        callbacks=[RoundTimer(record, trained)],
    )
    record.test_accuracy = test_accuracy(net.net, work)
    record.write(out, work.device)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
