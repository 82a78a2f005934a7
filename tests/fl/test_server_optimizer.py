"""The server optimizer (Reddi et al. 2021's Algorithm 2, Hsu et al. 2019's FedAvgM): each step by
hand on one parameter, the buffers taking the aggregate, its moments carried across rounds and
through a crash, and its settings refused where they would do nothing."""

import math

import pytest
import torch

from asyncfl.fl.server_optimizer import ServerOptimizer
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from engine_cases import read_csv, recorded_simulation


def optimizer(kind: str, **settings) -> ServerOptimizer:
    optimizer = ServerOptimizer.of(make_config({"server_optimizer": kind, **settings}), ["w"])
    assert optimizer is not None
    return optimizer


OLD = {"w": torch.tensor([1.0, -2.0], dtype=torch.float64), "count": torch.tensor(3)}
AGGREGATE = {"w": torch.tensor([1.5, -2.5], dtype=torch.float64), "count": torch.tensor(5)}  # Δ = ±0.5


def test_sgd_with_momentum_is_fedavgm_and_without_it_the_aggregate_itself():
    sgd = optimizer("sgd", server_momentum=0.5, server_optimizer_lr=2.0)
    first, moments = sgd.step(OLD, AGGREGATE, {})
    assert first["w"].tolist() == [2.0, -3.0]  # θ + 2 × Δ
    assert first["count"].item() == 5  # a buffer takes the aggregate
    second, _ = sgd.step(first, {**first, "w": first["w"] + 0.5}, moments)  # Δ = 0.5 again
    assert second["w"].tolist() == [2.0 + 2 * (0.5 * 0.5 + 0.5), -3.0 + 2 * (0.5 * -0.5 + 0.5)]
    plain = optimizer("sgd", server_momentum=0.0)
    old = {"w": torch.randn(1000, generator=torch.Generator().manual_seed(0))}
    aggregate = {"w": old["w"] + torch.randn(1000, generator=torch.Generator().manual_seed(1))}
    assert torch.equal(plain.step(old, aggregate, {})[0]["w"], aggregate["w"])  # float32, bit for bit


@pytest.mark.parametrize(("kind", "eta"), [("sgd", 1.0), ("adagrad", 0.1), ("adam", 0.1), ("yogi", 0.01)])
def test_an_unset_step_is_the_optimizers_own_and_a_set_one_wins(kind, eta):
    """Flower's defaults: Adam at sgd's η = 1 would move every weight by about 1 a round."""
    assert optimizer(kind).parameters.server_optimizer_lr == eta
    assert optimizer(kind, server_optimizer_lr=0.2).parameters.server_optimizer_lr == 0.2


@pytest.mark.parametrize(
    ("kind", "v"),
    [
        ("adagrad", 1e-6 + 0.25),  # v = τ² + Δ²
        ("adam", 0.99 * 1e-6 + 0.01 * 0.25),  # v = β2·τ² + (1 − β2)·Δ²
        ("yogi", 1e-6 + 0.01 * 0.25),  # v = τ² − (1 − β2)·Δ²·sign(τ² − Δ²)
    ],
)
def test_the_adaptive_optimizers_first_step_by_hand(kind, v):
    step, moments = optimizer(kind, server_optimizer_lr=0.1).step(OLD, AGGREGATE, {})
    m = 0.1 * 0.5  # (1 − β1)·Δ
    expected = 1.0 + 0.1 * m / (math.sqrt(v) + 1e-3)
    assert step["w"][0].item() == pytest.approx(expected, rel=1e-12)
    assert moments["v"]["w"][0].item() == pytest.approx(v, rel=1e-12)
    assert step["w"][1].item() == pytest.approx(-2.0 - (expected - 1.0), rel=1e-12)  # symmetric in Δ's sign


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"server_momentum": 0.5}, "server_momentum applies only with server_optimizer: sgd"),
        ({"server_optimizer": "sgd", "server_beta2": 0.9}, "server_beta2 applies only with server_optimizer: adam"),
        ({"server_optimizer_lr": 0.1}, "server_optimizer_lr applies only with server_optimizer other than none"),
        ({"server_optimizer": "lamb"}, "server_optimizer must be one of none, sgd, adagrad, adam, yogi"),
        ({"server_optimizer": "adam", "server_tau": 0.0}, "server_tau must be"),
        ({"server_optimizer": "sgd", "server_momentum": math.nan}, "server_momentum must be"),
    ],
)
def test_settings_that_would_do_nothing_or_nonsense_are_refused(settings, message):
    with pytest.raises(InputError, match=message):
        make_config(settings)


@pytest.mark.parametrize("kind", ["sgd", "adagrad", "adam", "yogi"])
def test_a_run_with_a_server_optimizer_resumes_its_moments_to_the_same_bytes(tmp_path, kind):
    """The moments live in the checkpoint: a run that crashes after a checkpoint and resumes writes the
    bytes of one that never stopped (and the optimizer changed what it wrote: not the aggregate's)."""
    settings = dict(algorithm="afl", clients_per_round=2, rounds=6, local_epochs=1, batch_size=4, checkpoint_every=2,
                    server_optimizer=kind, server_optimizer_lr=0.05)  # fmt: skip
    sizes = [8, 8, 12, 12]
    whole, _ = recorded_simulation(tmp_path / "whole", sizes, **settings)
    whole.run()
    crashed, _ = recorded_simulation(tmp_path / "resumed", sizes, fail_on_call=4, **settings)
    with pytest.raises(RuntimeError, match="injected crash"):
        crashed.run()
    assert (tmp_path / "resumed" / "checkpoint.pt").exists()
    resumed, _ = recorded_simulation(tmp_path / "resumed", sizes, **settings)
    resumed.run()
    for name in ("metrics.csv", "events.csv", "model.pt"):
        assert (tmp_path / "resumed" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
    plain_settings = {**settings, "server_optimizer": "none", "server_optimizer_lr": None}
    plain, _ = recorded_simulation(tmp_path / "plain", sizes, **plain_settings)
    plain.run()
    assert read_csv(tmp_path / "plain" / "metrics.csv") != read_csv(tmp_path / "whole" / "metrics.csv")


@pytest.mark.parametrize(("algorithm", "kind"), [("fedavgm", "sgd"), ("fedadam", "adam"), ("fedyogi", "yogi")])
def test_fedavgm_fedadam_and_fedyogi_are_fedavg_with_the_servers_optimizer_their_name_gives(tmp_path, algorithm, kind):
    """A named algorithm trains exactly sync with that server optimizer (the same bytes), and its config
    records the optimizer; another optimizer beside the name is refused."""
    settings = dict(clients_per_round=2, rounds=3, local_epochs=1, batch_size=4, server_optimizer_lr=0.05)
    assert make_config({"algorithm": algorithm}).server_optimizer == kind
    named, _ = recorded_simulation(tmp_path / "named", [8, 8, 12, 12], algorithm=algorithm, **settings)
    named.run()
    spelled, _ = recorded_simulation(
        tmp_path / "spelled", [8, 8, 12, 12], algorithm="sync", server_optimizer=kind, **settings
    )
    spelled.run()
    for name in ("metrics.csv", "events.csv", "model.pt"):
        assert (tmp_path / "named" / name).read_bytes() == (tmp_path / "spelled" / name).read_bytes(), name
    other = "adam" if kind != "adam" else "sgd"
    with pytest.raises(InputError, match=f"algorithm {algorithm} is FedAvg with server_optimizer {kind}, not {other}"):
        make_config({"algorithm": algorithm, "server_optimizer": other})


def test_amsgrads_step_by_hand_keeps_the_largest_second_moment():
    """FADAS's box (Wang et al. 2024, Algorithm 1), in Reddi et al.'s form: round 1, Δ = 0.5: m = 0.05,
    v = v̂ = 0.99·τ² + 0.01·0.25; round 2, Δ = 0.01: m = 0.9·0.05 + 0.001, v falls to 0.99·v₁ + 0.01·1e-4,
    v̂ stays v₁, and the step divides by √v̂ (Adam's would divide by the smaller √v)."""
    ams = optimizer("amsgrad", server_optimizer_lr=0.1)
    first, after_first = ams.step(OLD, AGGREGATE, {})
    moments = after_first
    v1 = 0.99 * 1e-6 + 0.01 * 0.25
    assert first["w"][0].item() == pytest.approx(1.0 + 0.1 * 0.05 / (math.sqrt(v1) + 1e-3), rel=1e-12)
    assert moments["v_max"]["w"][0].item() == pytest.approx(v1, rel=1e-12)
    second, moments = ams.step(
        first, {**first, "w": first["w"] + torch.tensor([0.01, -0.01], dtype=torch.float64)}, moments
    )
    m2, v2 = 0.9 * 0.05 + 0.1 * 0.01, 0.99 * v1 + 0.01 * 1e-4
    assert moments["v"]["w"][0].item() == pytest.approx(v2, rel=1e-12) and v2 < v1
    assert moments["v_max"]["w"][0].item() == pytest.approx(v1, rel=1e-12)
    assert second["w"][0].item() == pytest.approx(first["w"][0].item() + 0.1 * m2 / (math.sqrt(v1) + 1e-3), rel=1e-12)
    adam = optimizer("adam", server_optimizer_lr=0.1)
    adam_second, _ = adam.step(first, {**first, "w": first["w"] + 0.01}, after_first)
    assert adam_second["w"][0].item() > second["w"][0].item()  # the smaller √v: a longer step


@pytest.mark.parametrize(("stalest", "eta"), [(0, 0.5), (3, 0.5), (4, 0.25), (20, 0.05)])
def test_fadas_delay_adaptive_step_is_one_over_the_stalest_delay_past_the_threshold(stalest, eta):
    """η_t = η while τ_max ≤ τ_c (3), min(η, 1/τ_max) past it: 1/4 at 4, 1/20 at 20 (FADAS, Algorithm 1;
    AFL-Lib's code steps η/τ_max instead, 0.125 and 0.025 here)."""
    config = make_config({"algorithm": "fadas", "server_optimizer_lr": 0.5, "delay_threshold": 3})
    fadas = ServerOptimizer.of(config, ["w"])
    assert fadas is not None and fadas.learning_rate(stalest) == eta
    step, _ = fadas.step(OLD, AGGREGATE, {}, stalest)
    v = 0.99 * 1e-6 + 0.01 * 0.25
    assert step["w"][0].item() == pytest.approx(1.0 + eta * 0.05 / (math.sqrt(v) + 1e-3), rel=1e-12)


def test_fadas_is_fedbuff_with_amsgrad_and_its_delay_step(tmp_path):
    """The named algorithm trains exactly FedBuff with `server_optimizer: amsgrad` and s(τ) = 1 (FADAS's
    paper's, its default) (the same bytes) where no round is over τ_c; its threshold changes the run where
    rounds are (M = 4 clients in flight, K = 2: updates arrive 2 or more versions behind, where 1/τ_max <
    η); it resumes its moments to the same bytes; FADAS's own setting is refused for the others."""
    settings = dict(clients_per_round=2, concurrency=4, buffer_size=2, rounds=6, local_epochs=1, batch_size=4,
                    server_optimizer_lr=0.9, checkpoint_every=2)  # fmt: skip
    sizes = [8, 8, 12, 12, 16]
    assert make_config({"algorithm": "fadas"}).server_optimizer == "amsgrad"
    named, _ = recorded_simulation(tmp_path / "named", sizes, algorithm="fadas", **settings)
    named.run()
    spelled, _ = recorded_simulation(
        tmp_path / "spelled", sizes, algorithm="fedbuff", server_optimizer="amsgrad", staleness="constant", **settings
    )
    spelled.run()
    far, _ = recorded_simulation(tmp_path / "far", sizes, algorithm="fadas", delay_threshold=1000, **settings)
    far.run()
    near, _ = recorded_simulation(tmp_path / "near", sizes, algorithm="fadas", delay_threshold=0, **settings)
    near.run()
    crashed, _ = recorded_simulation(
        tmp_path / "resumed", sizes, fail_on_call=3, algorithm="fadas", delay_threshold=0, **settings
    )
    with pytest.raises(RuntimeError, match="injected crash"):
        crashed.run()
    resumed, _ = recorded_simulation(tmp_path / "resumed", sizes, algorithm="fadas", delay_threshold=0, **settings)
    resumed.run()
    staleness = [row["staleness"] for row in read_csv(tmp_path / "near" / "events.csv")]
    assert max(map(int, staleness)) >= 2  # 1/τ_max < η = 0.9 there: the delay-adapted step stepped less
    for name in ("metrics.csv", "events.csv", "model.pt"):
        assert (tmp_path / "named" / name).read_bytes() == (tmp_path / "spelled" / name).read_bytes(), name
        assert (tmp_path / "far" / name).read_bytes() == (tmp_path / "named" / name).read_bytes(), name
        assert (tmp_path / "resumed" / name).read_bytes() == (tmp_path / "near" / name).read_bytes(), name
    assert (tmp_path / "near" / "model.pt").read_bytes() != (tmp_path / "named" / "model.pt").read_bytes()
    with pytest.raises(InputError, match="algorithm fadas is FedBuff with server_optimizer amsgrad, not adam"):
        make_config({"algorithm": "fadas", "server_optimizer": "adam"})
    with pytest.raises(InputError, match="delay_threshold"):
        make_config({"algorithm": "fedbuff", "delay_threshold": 3})
