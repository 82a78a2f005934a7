"""Flower's side of the peer comparison: its `FedAvg` strategy on the Ray-based simulation engine
(`start_simulation`), J of C clients per round, each a `NumPyClient` whose fit is the plain minibatch
loop every framework without its own local trainer uses (common.local_train). Ray gets the same CPU
budget as every other framework (--threads cores), so clients train at most that many at a time."""

import os
import sys
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ["PYTHONPATH"] = f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"  # Ray's workers import `common`

import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import Record, loaded, local_train, test_accuracy  # noqa: E402
from flwr.client import NumPyClient  # noqa: E402
from flwr.common import Context, ndarrays_to_parameters, parameters_to_ndarrays  # noqa: E402
from flwr.server import ServerConfig  # noqa: E402
from flwr.server.strategy import FedAvg  # noqa: E402
from flwr.simulation import start_simulation  # noqa: E402


def weights(model: torch.nn.Module) -> list[np.ndarray]:
    return [value.detach().cpu().numpy() for value in model.state_dict().values()]


def load_weights(model: torch.nn.Module, arrays: list[np.ndarray]) -> None:
    keys = model.state_dict().keys()
    model.load_state_dict({key: torch.from_numpy(array) for key, array in zip(keys, arrays, strict=True)})


class Client(NumPyClient):
    def __init__(self, folder: str, client: int):
        self.work, self.client = loaded(folder), client

    def fit(self, parameters, config):
        model = self.work.model()
        load_weights(model, parameters)
        images, labels = self.work.client_data(self.client)
        local_train(model, images, labels, self.work, seed=int(config["round"]) * 1000 + self.client)
        return weights(model), len(labels), {}


class TimedFedAvg(FedAvg):
    """FedAvg, with each round's end and its trained samples noted."""

    def __init__(self, record: Record, epochs: int, **options):
        super().__init__(**options)
        self.record, self.epochs = record, epochs

    def aggregate_fit(self, server_round, results, failures):
        aggregated = super().aggregate_fit(server_round, results, failures)
        self.record.round_done(sum(fit.num_examples for _, fit in results) * self.epochs)
        self.final = aggregated[0]
        return aggregated


def main(folder: Path, out: Path) -> None:
    work = loaded(str(folder))
    settings = work.settings
    clients, per_round = len(work.client_indices), settings["clients_per_round"]
    record = Record("flwr", version("flwr"))
    strategy = TimedFedAvg(
        record,
        settings["local_epochs"],
        fraction_fit=per_round / clients,
        min_fit_clients=per_round,
        min_available_clients=clients,
        fraction_evaluate=0.0,
        initial_parameters=ndarrays_to_parameters(weights(work.model())),
        on_fit_config_fn=lambda server_round: {"round": server_round},
    )

    def client_fn(context: Context):
        return Client(str(folder), int(context.node_config["partition-id"])).to_client()

    threads = settings["threads"]
    start_simulation(
        client_fn=client_fn,
        num_clients=clients,
        config=ServerConfig(num_rounds=settings["rounds"]),
        strategy=strategy,
        client_resources={"num_cpus": 1, "num_gpus": 1.0 if settings["device"] == "cuda" else 0.0},
        ray_init_args={"num_cpus": threads, "include_dashboard": False},
    )
    model = work.model()
    load_weights(model, parameters_to_ndarrays(strategy.final))
    record.test_accuracy = test_accuracy(model, work)
    record.write(out, work.device)


if __name__ == "__main__":  # by its module name, so that Ray's workers find the client classes
    import run_flwr

    run_flwr.main(Path(sys.argv[1]), Path(sys.argv[2]))
