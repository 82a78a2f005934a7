"""FedLab's side of the peer comparison: its `SyncServerHandler` (FedAvg) and serial client trainer
in a `StandalonePipeline`, each client on FedLab's per-client DataLoader; the trainer's optimizer is
Adam, created afresh for every client's round (FedLab's default is one SGD for the whole run)."""

import sys
import time
from importlib.metadata import version
from pathlib import Path

import torch
from common import Record, Work, test_accuracy
from torch.utils.data import DataLoader, TensorDataset

from asyncfl.data.vision import import_torchvision

import_torchvision()  # PyPI's torchvision beside the CPU torch needs asyncfl's op fix before FedLab imports it

from fedlab.contrib.algorithm.basic_client import SGDSerialClientTrainer  # noqa: E402
from fedlab.contrib.algorithm.basic_server import SyncServerHandler  # noqa: E402
from fedlab.core.standalone import StandalonePipeline  # noqa: E402


class ClientData:
    """FedLab's dataset interface: one DataLoader per client over its tensors."""

    def __init__(self, work: Work, generator: torch.Generator):
        self.work, self.generator = work, generator

    def get_dataloader(self, client: int, batch_size: int) -> DataLoader:
        images, labels = self.work.client_data(client)
        return DataLoader(TensorDataset(images, labels), batch_size, shuffle=True, generator=self.generator)


class AdamTrainer(SGDSerialClientTrainer):
    def train(self, model_parameters, train_loader):
        self.optimizer = torch.optim.Adam(self._model.parameters(), self.lr)  # fresh state for every client
        return super().train(model_parameters, train_loader)


class TimedHandler(SyncServerHandler):
    """FedAvg's server, with each round's end and its trained samples noted."""

    def __init__(self, record: Record, work: Work, **options):
        super().__init__(**options)
        self.record, self.work = record, work

    def sample_clients(self):
        self.sampled = super().sample_clients()
        return self.sampled

    def global_update(self, buffer):
        super().global_update(buffer)
        epochs = self.work.settings["local_epochs"]
        self.record.round_done(sum(len(self.work.client_indices[c]) for c in self.sampled) * epochs)


class QuietPipeline(StandalonePipeline):
    def evaluate(self):
        """The test set is evaluated once, after the run, as for every framework."""


def main(folder: Path, out: Path) -> None:
    work = Work.load(folder)
    settings = work.settings
    clients, cuda = len(work.client_indices), settings["device"] == "cuda"
    record = Record("fedlab", version("fedlab"))
    handler = TimedHandler(
        record,
        work,
        model=work.model(),
        global_round=settings["rounds"],
        sample_ratio=settings["clients_per_round"] / clients,
        cuda=cuda,
    )
    trainer = AdamTrainer(work.model(), clients, cuda=cuda)
    trainer.setup_dataset(ClientData(work, torch.Generator().manual_seed(settings["seed"])))
    trainer.setup_optim(settings["local_epochs"], settings["batch_size"], settings["lr"])
    record.started = time.perf_counter()  # the FL loop starts now: data and models are ready
    QuietPipeline(handler, trainer).main()
    record.test_accuracy = test_accuracy(handler.model, work)
    record.write(out, work.device)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
