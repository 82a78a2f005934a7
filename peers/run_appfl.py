"""APPFL's side of the peer comparison: a `ServerAgent` with its `FedAvgAggregator` (weights by sample
size) behind a `SyncScheduler`, and one `ClientAgent` per client with APPFL's `VanillaTrainer` (a
DataLoader per client, Adam created for each round's training), run serially as APPFL's serial
examples do; J clients drawn per round, so the scheduler aggregates every J updates."""

import logging
import sys
from concurrent.futures import Future
from importlib.metadata import version
from pathlib import Path

import numpy as np
from common import Record, loaded, test_accuracy
from omegaconf import OmegaConf

from asyncfl.data.vision import import_torchvision

import_torchvision()  # PyPI's torchvision beside the CPU torch needs asyncfl's op fix before APPFL imports it

from appfl.agent import ClientAgent, ServerAgent  # noqa: E402
from appfl.config import ClientAgentConfig, ServerAgentConfig  # noqa: E402

HERE = Path(__file__).resolve().parent


def configs(folder: Path, settings: dict, clients: int, scratch: Path) -> tuple[ServerAgentConfig, list]:
    train = {
        "trainer": "VanillaTrainer",
        "mode": "epoch",
        "num_local_epochs": settings["local_epochs"],
        "optim": "Adam",
        "optim_args": {"lr": settings["lr"]},
        "loss_fn": "NLLLoss",
        "metric_path": str(HERE / "appfl_parts.py"),
        "metric_name": "accuracy",
        "train_batch_size": settings["batch_size"],
        "train_data_shuffle": True,
        "do_validation": False,
        "device": settings["device"],
        "logging_output_dirname": str(scratch),
    }
    model = {"model_path": str(HERE / "appfl_parts.py"), "model_name": "cnn", "model_kwargs": {"folder": str(folder)}}
    per_round = settings["clients_per_round"]
    server = ServerAgentConfig(
        client_configs=OmegaConf.create({"train_configs": train, "model_configs": model}),
        server_configs=OmegaConf.create(
            {
                "num_clients": per_round,
                "num_global_epochs": settings["rounds"],
                "device": settings["device"],
                "aggregator": "FedAvgAggregator",
                "aggregator_kwargs": {"client_weights_mode": "sample_size"},
                "scheduler": "SyncScheduler",
                "scheduler_kwargs": {"num_clients": per_round, "same_init_model": True},
                "logging_output_dirname": str(scratch),
                "logging_output_filename": "server",
            }
        ),
    )
    data = {"dataset_path": str(HERE / "appfl_parts.py"), "dataset_name": "client_data"}
    client_configs = [
        ClientAgentConfig(
            train_configs=OmegaConf.create({"logging_id": f"client{c}", "logging_output_dirname": str(scratch)}),
            data_configs=OmegaConf.create({**data, "dataset_kwargs": {"folder": str(folder), "client": c}}),
        )
        for c in range(clients)
    ]
    return server, client_configs


def main(folder: Path, out: Path) -> None:
    logging.disable(logging.INFO)
    work = loaded(str(folder))
    settings = work.settings
    clients = len(work.client_indices)
    server_config, client_configs = configs(folder, settings, clients, folder / "appfl-logs")
    server = ServerAgent(server_agent_config=server_config)
    agents = [ClientAgent(client_agent_config=config) for config in client_configs]
    for agent in agents:
        agent.load_config(server.get_client_configs())
        agent.load_parameters(server.get_parameters(serial_run=True))
        server.set_sample_size(agent.get_id(), agent.get_sample_size())
    rng = np.random.default_rng(settings["seed"])
    record = Record("appfl", version("appfl"))
    while not server.training_finished():
        chosen = [agents[c] for c in rng.choice(clients, settings["clients_per_round"], replace=False)]
        updates = []
        for agent in chosen:
            agent.train()
            local = agent.get_parameters()
            updates.append(server.global_update(agent.get_id(), local[0] if isinstance(local, tuple) else local))
        aggregated = [update.result() if isinstance(update, Future) else update for update in updates][-1]
        global_model = aggregated[0] if isinstance(aggregated, tuple) else aggregated  # the same for every update
        for agent in agents:
            agent.load_parameters(global_model)
        record.round_done(sum(agent.get_sample_size() for agent in chosen) * settings["local_epochs"])
    model = work.model()
    model.load_state_dict(global_model)
    record.test_accuracy = test_accuracy(model, work)
    record.write(out, work.device)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
