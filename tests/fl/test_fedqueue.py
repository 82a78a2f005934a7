"""FedQueue (`fl/algorithms/fedqueue.py`) against hand-computed budgets and steps, and in the engine: its
late updates deferred a round at half weight, its budgets cut the dispatches' steps, its memory resumed."""

import hashlib
import io

import pytest
import torch

from asyncfl.fl.algorithms import make_strategy
from asyncfl.fl.strategy import Update
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from engine_cases import read_csv, recorded_simulation, resumed_alike


def strategy(**settings):
    return make_strategy(make_config({"algorithm": "fedqueue", "clients_per_round": 2, **settings}))


def model(value: float) -> dict[str, torch.Tensor]:
    return {"w": torch.tensor([value], dtype=torch.float64), "n": torch.tensor(3)}


def update(client: int, state: float, start: float, delay: float) -> Update:
    return Update(model(state), model(start), 10, 1.0, 0, client, (0.1,), {}, delay)


def test_the_budgets_are_the_steps_that_fit_the_period_after_the_predicted_delay():
    # T 10, θ 2: J_k = 10 − q̂_k − 2, at least 0.5; E_k = ⌊c_k·J_k⌋ at least 1, at most its epochs' steps
    fedqueue = strategy(fedqueue_lr_floor=0.3)
    memory = {"predicted": [0.0, 3.0, 9.0, 1.0]}
    work = fedqueue.dispatch_work([0, 1, 2, 3], memory, [2.0, 2.0, 3.0, 1.0], [100, 100, 100, 4])
    # E: ⌊2·8⌋ = 16, ⌊2·5⌋ = 10, ⌊3·0.5⌋ = 1, min(4, ⌊1·7⌋) = 4; η/γ = E_min/E_k = 1/E_k, at least 0.3
    assert work == [(16, 0.3), (10, 0.3), (1, 1.0), (4, 0.3)]
    assert strategy().dispatch_work([0, 1], memory, [2.0, 2.0], [100, 100]) == [(16, 10 / 16), (10, 1.0)]


def test_a_late_update_is_deferred_a_round_and_joins_the_next_at_half_weight():
    fedqueue = strategy(fedqueue_slack=0.1)  # admitted where q_k ≤ q̂_k + 1 (α·T), q̂_k ← (q̂_k + q_k)/2
    memory = fedqueue.initial_memory(torch.tensor([10, 10, 10]).numpy())
    assert memory == {"predicted": [0.0, 0.0, 0.0], "deferred": []}
    # client 0: q 1.5 → q̂ 0.75, 1.5 ≤ 1.75 admitted; client 1: q 4 → q̂ 2, 4 > 3 deferred
    new, coefficients, memory = fedqueue.aggregate_with_memory(
        model(1.0), [update(0, 3.0, 1.0, 1.5), update(1, 9.0, 1.0, 4.0)], memory, 3
    )
    assert new["w"].item() == 3.0 and new["n"].item() == 3 and coefficients == [1.0, 0.0]
    assert memory["predicted"] == [0.75, 2.0, 0.0] and [entry["client"] for entry in memory["deferred"]] == [1]
    # the next round: client 2 admitted (Δ +3, w 1) beside client 1's deferred Δ +8 (w 1/2): θ + (3 + 4)/1.5
    new, coefficients, memory = fedqueue.aggregate_with_memory(new, [update(2, 6.0, 3.0, 0.5)], memory, 3)
    assert new["w"].item() == pytest.approx(3.0 + (3.0 + 0.5 * 8.0) / 1.5) and coefficients == [pytest.approx(2 / 3)]
    assert memory["deferred"] == [] and memory["predicted"] == [0.75, 2.0, 0.25]
    # a round whose every update is deferred, with nothing carried: the model unchanged
    same, coefficients, memory = fedqueue.aggregate_with_memory(new, [update(0, 5.0, 1.0, 9.0)], memory, 3)
    assert torch.equal(same["w"], new["w"]) and coefficients == [0.0] and len(memory["deferred"]) == 1


SIZES = [8, 12, 16, 20, 24]
SETTINGS = dict(algorithm="fedqueue", clients_per_round=3, local_epochs=2, batch_size=4, rounds=6,
                seconds_per_sample=0.5, speed_sigma=1.0, checkpoint_every=2, fedqueue_slack=0.0)  # fmt: skip


def test_in_the_engine_budgets_cut_the_steps_and_late_updates_count_a_round_later(tmp_path):
    simulation, _ = recorded_simulation(tmp_path, SIZES, **SETTINGS)
    simulation.run()
    events = read_csv(tmp_path / "events.csv")
    whole = [2 * SIZES[int(row["client"])] for row in events]
    assert any(int(row["samples_trained"]) < most for row, most in zip(events, whole, strict=True))  # cut by T
    assert any(float(row["coefficient"]) == 0.0 for row in events)  # at slack 0, a first arrival is late
    lrs = {float(row["lr"]) for row in events if row["round"] == "1"}
    assert len(lrs) > 1  # E_min/E_k: each client its own step size


def test_a_timing_only_run_of_it_is_refused_in_one_line():
    with pytest.raises(InputError, match="algorithm: fedqueue times its dispatches by what its aggregations learn"):
        make_config({"algorithm": "fedqueue", "trainer": "none"})


def test_a_crashed_run_resumes_its_predictions_and_deferred_updates_to_the_same_bytes(tmp_path):
    assert resumed_alike(tmp_path, SIZES, 4, **SETTINGS)["server_memory"]["deferred"]  # what resumed


def test_a_checkpoint_written_before_its_settings_existed_resumes_where_they_are_at_their_defaults(tmp_path):
    """FedQueue's own settings dropped from a FedBuff checkpoint's identity (as an asyncfl before them wrote
    it): the run resumes to the bytes of one that never stopped."""
    fedbuff = dict(algorithm="fedbuff", clients_per_round=3, buffer_size=2, local_epochs=1, batch_size=4, rounds=6,
                   checkpoint_every=2)  # fmt: skip
    whole, _ = recorded_simulation(tmp_path / "whole", SIZES, **fedbuff)
    whole.run()
    crashed, _ = recorded_simulation(tmp_path / "resumed", SIZES, fail_on_call=4, **fedbuff)
    with pytest.raises(RuntimeError, match="injected crash"):
        crashed.run()
    path = tmp_path / "resumed" / "checkpoint.pt"
    header, _, content = path.read_bytes().partition(b"\n")
    payload = torch.load(io.BytesIO(content), weights_only=True)
    payload["identity"]["config"] = {
        key: value for key, value in payload["identity"]["config"].items() if not key.startswith("fedqueue_")
    }
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    digest = hashlib.sha256(buffer.getvalue()).hexdigest().encode()
    path.write_bytes(header.rsplit(b" ", 1)[0] + b" " + digest + b"\n" + buffer.getvalue())
    resumed, _ = recorded_simulation(tmp_path / "resumed", SIZES, **fedbuff)
    resumed.run()
    for name in ("metrics.csv", "events.csv", "model.pt"):
        assert (tmp_path / "resumed" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
