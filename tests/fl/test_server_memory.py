"""A strategy's server memory (`Strategy.aggregate_with_memory`): CA2FL's cache, FedStaleWeight's staleness
history, MIFA's and ACE's latest updates, PORT's previous global model, ASO-Fed's n, s_prev and h, FedAC's
control variates and moments (and the C each version in flight was sent with), DAAFL's version and weights
live in the checkpoint, so
a run that crashes resumes to the bytes of one that never stopped; a CA2FL checkpoint written before the
memory had its name still resumes; FedBuff's checkpoint holds none (its bytes as before). M = 4 in
flight, K = 2 (or one) of 5 clients, 16 arrivals."""

import hashlib
import io
from pathlib import Path

import pytest
import torch

from asyncfl.settings.names import UPDATES_PER_ROUND
from engine_cases import read_csv, recorded_simulation

# each algorithm with a memory, and the name it keeps it under
MEMORIES = {"ca2fl": "cache", "fedstaleweight": "staleness", "mifa": "latest", "ace": "latest", "port": "previous",
            "asofed": "average", "fedac": "controls", "daafl": "weights"}  # fmt: skip
SETTINGS = dict(clients_per_round=2, concurrency=4, local_epochs=1, batch_size=4, checkpoint_every=2)
SIZES = [8, 8, 12, 12, 16]
OUTPUTS = ("metrics.csv", "events.csv", "model.pt")


def checkpoint_of(path: Path) -> dict:
    """A checkpoint's payload: torch's bytes after its header line (`runs/checkpoint.py`)."""
    return torch.load(io.BytesIO(path.read_bytes().partition(b"\n")[2]), weights_only=True)


def as_written_before(path: Path) -> None:
    """A CA2FL checkpoint rewritten as the project wrote it before 2026-12-06: its cache alone, under
    "cached_updates" (`sim.state.memory_of`), behind a checksum of its own."""
    payload = checkpoint_of(path)
    payload["cached_updates"] = payload.pop("server_memory")["cache"]
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    header = path.read_bytes().partition(b"\n")[0].rsplit(b" ", 1)[0]
    path.write_bytes(header + b" " + hashlib.sha256(buffer.getvalue()).hexdigest().encode() + b"\n" + buffer.getvalue())


def run(folder: Path, algorithm: str, crash: bool = False) -> Path:
    """A run of `algorithm` into `folder`, to its end or crashed after a checkpoint; the folder."""
    # 16 arrivals: 8 rounds of K = 2, or 16 of one
    buffered = {"buffer_size": 2, "rounds": 8} if UPDATES_PER_ROUND[algorithm] == "K" else {"rounds": 16}
    simulation, _ = recorded_simulation(
        folder, SIZES, fail_on_call=5 if crash else None, algorithm=algorithm, **SETTINGS, **buffered
    )
    if crash:
        with pytest.raises(RuntimeError, match="injected crash"):
            simulation.run()
    else:
        simulation.run()
    return folder


@pytest.mark.parametrize("algorithm", sorted(MEMORIES))
def test_a_run_resumes_its_servers_memory_to_the_same_bytes_and_is_not_fedbuff(tmp_path, algorithm):
    whole = run(tmp_path / "whole", algorithm)
    crashed = run(tmp_path / "resumed", algorithm, crash=True)
    assert checkpoint_of(crashed / "checkpoint.pt")["server_memory"][MEMORIES[algorithm]]  # what resumes
    resumed = run(crashed, algorithm)
    for name in OUTPUTS:
        assert (resumed / name).read_bytes() == (whole / name).read_bytes(), name
    assert read_csv(run(tmp_path / "fedbuff", "fedbuff") / "metrics.csv") != read_csv(whole / "metrics.csv")


def test_an_older_ca2fl_checkpoint_resumes_and_fedbuffs_holds_no_memory(tmp_path):
    whole = run(tmp_path / "whole", "ca2fl")
    legacy = run(tmp_path / "legacy", "ca2fl", crash=True)
    as_written_before(legacy / "checkpoint.pt")
    for name in OUTPUTS:
        assert (run(legacy, "ca2fl") / name).read_bytes() == (whole / name).read_bytes(), name
    fedbuff = run(tmp_path / "fedbuff", "fedbuff", crash=True)
    assert "server_memory" not in checkpoint_of(fedbuff / "checkpoint.pt")
