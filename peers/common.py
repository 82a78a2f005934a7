"""What every runner of the peer comparison shares: the exported work (data, partition, settings),
the paper's CNN from asyncfl's one model file, a plain local-training loop for frameworks that leave
it to the user, the test accuracy, and the result record.

Runners import this in their own framework's venv, where asyncfl is not installed: the model comes
from the checkout's src/ (asyncfl.models needs torch only). torchvision is never imported here."""

import functools
import json
import resource
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from asyncfl.data.dataset import DatasetInfo  # noqa: E402
from asyncfl.models import build_model  # noqa: E402


@dataclass(frozen=True)
class Work:
    """One comparison's FedAvg work, as `compare.py` exported it: every framework trains this."""

    train_images: torch.Tensor  # normalised float32, N×C×H×W, on the device
    train_labels: torch.Tensor
    test_images: torch.Tensor
    test_labels: torch.Tensor
    client_indices: list[torch.Tensor]  # each client's training indices (the asyncfl partition)
    info: DatasetInfo
    settings: dict  # rounds, clients_per_round, local_epochs, batch_size, lr, seed, device, threads

    @classmethod
    def load(cls, folder: Path) -> "Work":
        settings = json.loads((folder / "settings.json").read_text())
        torch.set_num_threads(settings["threads"])
        device = torch.device(settings["device"])
        with np.load(folder / "work.npz") as arrays:
            data = {key: arrays[key] for key in arrays.files}
        info = DatasetInfo(**{**settings["info"], "classes": tuple(settings["info"]["classes"])})
        mean = torch.tensor(info.mean).view(1, -1, 1, 1)
        std = torch.tensor(info.std).view(1, -1, 1, 1)

        def images(key: str) -> torch.Tensor:
            return ((torch.from_numpy(data[key]).float() / info.pixel_max - mean) / std).to(device)

        offsets = data["offsets"]
        indices = torch.from_numpy(data["indices"])
        return cls(
            images("train_images"),
            torch.from_numpy(data["train_labels"]).to(device),
            images("test_images"),
            torch.from_numpy(data["test_labels"]).to(device),
            [indices[offsets[c] : offsets[c + 1]].to(device) for c in range(len(offsets) - 1)],
            info,
            settings,
        )

    @property
    def device(self) -> torch.device:
        return torch.device(self.settings["device"])

    def model(self) -> torch.nn.Module:
        """The paper's CNN, initialised from the comparison's seed (the same start for every framework)."""
        return build_model("cnn", self.info, seed=self.settings["seed"]).to(self.device)

    def client_data(self, client: int) -> tuple[torch.Tensor, torch.Tensor]:
        indices = self.client_indices[client]
        return self.train_images[indices], self.train_labels[indices]


@functools.cache
def loaded(folder: str) -> Work:
    """The work, loaded once per process however many modules ask (APPFL loads its parts file anew for
    every agent, Flower makes a client for every call)."""
    return Work.load(Path(folder))


def local_train(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor, work: Work, seed: int) -> float:
    """Minibatch Adam over the client's tensors, a fresh optimizer per round (asyncfl's plain trainer's
    loop, for frameworks where the user writes the local training); the last epoch's mean loss."""
    settings = work.settings
    optimizer = torch.optim.Adam(model.parameters(), lr=settings["lr"])
    generator = torch.Generator().manual_seed(seed)
    model.train()
    total = 0.0
    for _ in range(settings["local_epochs"]):
        order = torch.randperm(len(labels), generator=generator).to(labels.device)
        total = 0.0
        for batch in order.split(settings["batch_size"]):
            loss = F.nll_loss(model(images[batch]), labels[batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
    return total / len(labels)


@torch.no_grad()
def test_accuracy(model: torch.nn.Module, work: Work) -> float:
    model.eval()
    correct = sum(
        int((model(images).argmax(1) == labels).sum())
        for images, labels in zip(work.test_images.split(1000), work.test_labels.split(1000), strict=True)
    )
    return correct / len(work.test_labels)


@dataclass
class Record:
    """What a runner reports: each round's end (seconds since the FL loop started) and samples trained."""

    framework: str
    version: str
    round_ends: list[float] = field(default_factory=list)
    round_samples: list[int] = field(default_factory=list)
    test_accuracy: float = float("nan")
    started: float = field(default_factory=time.perf_counter)

    def round_done(self, samples: int) -> None:
        self.round_ends.append(time.perf_counter() - self.started)
        self.round_samples.append(samples)

    def write(self, path: Path, device: torch.device) -> None:
        result = asdict(self)
        del result["started"]
        result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        result["cuda_peak_mib"] = torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else None
        path.write_text(json.dumps(result, indent=1))
