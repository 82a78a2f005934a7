"""FedASMU (`fl/algorithms/fedasmu.py`) against hand-computed weights and factors; its merge mid-training
in the trainers (each the same formula, bit for bit); and in the engine: clients ask for the global model
partway through, merge it when it moved on, and a killed run resumes its requests to the same bytes."""

import math

import pytest
import torch

from asyncfl.fl.algorithms import make_strategy
from asyncfl.fl.strategy import Update
from asyncfl.models import build_model
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.training.interface import LocalSettings, LocalTask, Merge, merge_into
from asyncfl.training.plain import PlainTrainer
from asyncfl.training.vectorised import VectorisedTrainer
from engine_cases import recorded_simulation, resumed_alike, tiny_dataset


def strategy(**settings):
    return make_strategy(make_config({"algorithm": "fedasmu", **settings}))


def model(value: float) -> dict[str, torch.Tensor]:
    return {"w": torch.tensor([value], dtype=torch.float64), "n": torch.tensor(3)}


def update(client: int, state: float, started: int, staleness: int, loss: float) -> Update:
    return Update(model(state), model(0.0), 10, 1.0, staleness, client, (0.1,), {}, 0.0, loss, started)


def test_the_server_weight_falls_with_the_version_and_the_staleness_and_the_factors_learn_from_the_loss():
    fedasmu = strategy(fedasmu_meta_lr=0.1)
    # t 1, o 1: ξ = 1·√1/(1·1^0.5) = 1, α = 1/2; a client's first loss is no signal
    new, coefficients, memory = fedasmu.aggregate_with_memory(model(1.0), [update(0, 3.0, 0, 0, 0.9)], {}, 4)
    assert new["w"].item() == 2.0 and new["n"].item() == 3 and coefficients == [0.5]
    assert memory["factors"][0] == {"lambda": 1.0, "sigma": 0.5, "iota": 0.0, "gamma": 1.0, "upsilon": 0.5}
    # t 2, o 2: ξ = √2/(2·√2) = 1/2, α = 1/3; r = 0.9 − 0.4 = 0.5, ηr = 0.05 (ι: 0.05/o)
    new, coefficients, memory = fedasmu.aggregate_with_memory(new, [update(0, 5.0, 0, 1, 0.4)], memory, 4)
    assert new["w"].item() == pytest.approx(3.0) and coefficients == [pytest.approx(1 / 3)]
    assert memory["factors"][0] == pytest.approx(
        {"lambda": 1.05, "sigma": 0.45, "iota": 0.025, "gamma": 1.05, "upsilon": 0.45}
    )
    # another client at t 3, o 3: its own factors, at the start: ξ = √3/(3·√3) = 1/3, α = 1/4
    _, coefficients, memory = fedasmu.aggregate_with_memory(new, [update(1, 7.0, 0, 2, 0.3)], memory, 4)
    assert coefficients == [pytest.approx(0.25)] and memory["loss"] == {0: 0.4, 1: 0.3}
    # a rise of 4 in the loss is clipped to a signal of −1: σ and υ rise by η, λ and γ fall by it
    _, _, memory = fedasmu.aggregate_with_memory(new, [update(1, 7.0, 3, 0, 4.3)], memory, 4)
    assert memory["factors"][1] == pytest.approx(
        {"lambda": 0.9, "sigma": 0.6, "iota": 0.0, "gamma": 0.9, "upsilon": 0.6}
    )


def test_the_merge_weight_and_the_request_step():
    fedasmu = strategy()
    # client 0's factors γ 1.05, υ 0.45, sent version 1, fresh 3: φ = 1.05/√4·(1 − 0.45/√4) = 0.406875
    memory = {"factors": {0: {"lambda": 1.0, "sigma": 0.5, "iota": 0.0, "gamma": 1.05, "upsilon": 0.45}}}
    assert fedasmu.merge_weight(0, 1, 3, memory) == pytest.approx(0.406875 / 1.406875)
    phi = 0.5 * (1 - 0.5 / math.sqrt(5))  # a client never heard from: γ 1, υ 0.5; sent 0, fresh 3
    assert fedasmu.merge_weight(5, 0, 3, memory) == pytest.approx(phi / (1 + phi))
    assert [fedasmu.merge_after(steps) for steps in (1, 2, 7, 10)] == [1, 1, 4, 5]  # round(S/2), at least 1
    assert strategy(fedasmu_refresh_fraction=1.0).merge_after(7) == 7


DATA = tiny_dataset(64)


def tasks(merges: list[Merge | None], epochs: int = 2) -> list[LocalTask]:
    start = {k: v.clone() for k, v in build_model("mlp", DATA.info, seed=1).state_dict().items()}
    indices = [torch.arange(0, 20), torch.arange(20, 44), torch.arange(44, 64)]
    return [
        LocalTask(start, index, (0.05,) * epochs, (0, 0, client, 0), merge=merge)
        for client, (index, merge) in enumerate(zip(indices, merges, strict=True))
    ]


def trainer(kind, optimizer: str = "adam"):
    settings = LocalSettings(batch_size=8, optimizer=optimizer)
    return kind(build_model("mlp", DATA.info, seed=1), DATA.train_images.float() / 255, DATA.train_labels, settings)


@pytest.mark.parametrize("kind", [PlainTrainer, VectorisedTrainer])
def test_a_merge_after_the_last_step_is_the_formula_on_the_unmerged_result(kind):
    fresh = {k: v.clone() for k, v in build_model("mlp", DATA.info, seed=7).state_dict().items()}
    unmerged = trainer(kind).train(tasks([None, None, None]))
    steps = [2 * math.ceil(n / 8) for n in (20, 24, 20)]  # two epochs of ⌈n/B⌉ steps
    merged = trainer(kind).train(tasks([Merge(s, fresh, 0.3) for s in steps]))
    for before, after in zip(unmerged, merged, strict=True):
        expected = {k: v.clone() for k, v in before.state.items()}
        merge_into(expected, Merge(1, fresh, 0.3))
        assert all(torch.equal(expected[k], after.state[k]) for k in expected)


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_the_trainers_merge_mid_training_alike_each_client_at_its_own_step(optimizer):
    fresh = {k: v.clone() for k, v in build_model("mlp", DATA.info, seed=7).state_dict().items()}
    merges = [Merge(2, fresh, 0.4), None, Merge(5, fresh, 0.9)]
    plain = trainer(PlainTrainer, optimizer).train(tasks(merges))
    vectorised = trainer(VectorisedTrainer, optimizer).train(tasks(merges))
    unmerged = trainer(PlainTrainer, optimizer).train(tasks([None, None, None]))
    for a, b in zip(plain, vectorised, strict=True):
        assert all(torch.allclose(a.state[k], b.state[k], atol=1e-5) for k in a.state)  # as without a merge
    weight = next(iter(plain[0].state))
    assert torch.equal(plain[1].state[weight], unmerged[1].state[weight])  # no merge, no change
    assert not torch.allclose(plain[0].state[weight], unmerged[0].state[weight], atol=1e-3)


SIZES = [8, 12, 16, 20, 24]
SETTINGS = dict(algorithm="fedasmu", clients_per_round=3, local_epochs=2, batch_size=4, rounds=10,
                seconds_per_sample=0.5, speed_sigma=1.0, checkpoint_every=3)  # fmt: skip


def test_in_the_engine_clients_merge_the_model_of_their_request_when_it_moved_on(tmp_path):
    simulation, recording = recorded_simulation(tmp_path, SIZES, **SETTINGS)
    simulation.run()
    trained = [task for call in recording.calls for task, _ in call]
    merged = [task for task in trained if task.merge is not None]
    assert merged and len(merged) < len(trained)  # the first dispatches find nothing newer at first
    for task in merged:
        steps = 2 * math.ceil(len(task.indices) / 4)
        assert task.merge.after_steps == max(1, round(steps / 2)) and 0 < task.merge.weight < 1
        assert any(not torch.equal(task.merge.model[k], task.start_model[k]) for k in task.start_model)


def test_a_killed_run_resumes_its_requests_to_the_same_bytes(tmp_path):
    checkpoint = resumed_alike(tmp_path, SIZES, 4, **SETTINGS)
    assert checkpoint["merges"] and checkpoint["server_memory"]["factors"]  # what resumed


def test_what_cannot_merge_mid_training_is_refused_in_one_line(tmp_path):
    from asyncfl.sim.engine import Simulation
    from engine_cases import contiguous_partition

    config = make_config({**SETTINGS, "trainer": "graphed", "device": "cpu"})
    with pytest.raises(InputError, match="merges a fresher global model mid-training, which trainer: graphed"):
        Simulation(config, tiny_dataset(sum(SIZES)), contiguous_partition(SIZES), tmp_path).run()
