"""The paper's sampling claim: closed forms against brute-force enumeration, and the engine's draws."""

import numpy as np
import pytest
import torch

from asyncfl.analysis.theory import (
    MAX_PROBED_J,
    centred_gram,
    closed_form_variance,
    drawn_variance,
    draws_variances,
    enumerated_variance,
    population_variance,
    probe_tasks,
    probed_js,
    sampling_variance_table,
)
from asyncfl.settings.config import make_config
from asyncfl.sim.context import prepare_run
from engine_cases import contiguous_partition, tiny_dataset

# Four points on a line, m = 4: mean 1.5, ν² = (2.25 + 0.25 + 0.25 + 2.25)/4 = 1.25.
TOY = np.array([[0.0], [1.0], [2.0], [3.0]])


def test_toy_population_variance():
    assert population_variance(TOY) == pytest.approx(1.25)


@pytest.mark.parametrize("s", [1, 2, 3, 4])
def test_closed_forms_match_enumeration_of_every_draw(s):
    """With replacement ν²/s; without (m − s)/(s(m − 1))·ν²: for s = 2, 0.625 and 5/12."""
    for replacement in (True, False):
        assert enumerated_variance(TOY, s, replacement) == pytest.approx(closed_form_variance(TOY, s, replacement))
    assert enumerated_variance(TOY, s, True) >= enumerated_variance(TOY, s, False)
    if s == 2:
        assert closed_form_variance(TOY, 2, True) == pytest.approx(0.625)
        assert closed_form_variance(TOY, 2, False) == pytest.approx(5 / 12)
    if s == 4:
        assert enumerated_variance(TOY, 4, False) == 0.0  # every client once: no sampling noise left


def test_engine_draws_converge_to_the_closed_forms():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(10, 5))
    for replacement in (True, False):
        drawn = drawn_variance(vectors, 3, replacement, draws=20_000, seed=1)
        assert drawn == pytest.approx(closed_form_variance(vectors, 3, replacement), rel=0.05)


def test_table_has_both_rules_for_every_j():
    table = sampling_variance_table(TOY, draws=50, seeds=2)
    assert len(table) == 8 and set(table.sampling) == {"with replacement", "without replacement"}
    wide = table.pivot(index="J", columns="sampling", values="closed_form")
    assert (wide["with replacement"] >= wide["without replacement"]).all()


@pytest.mark.parametrize("clock", ["round", "equivalent_round", "epoch"])
def test_the_probe_trains_with_the_runs_own_schedule(clock):
    """The probe's learning rates are the run's for every lr_time (it once used the round clock under
    `epoch` too): γ0 / (√(t+1)·(1 + α·d_c)) with d_c the probe dispatch's duration."""
    config = make_config({"lr_time": clock, "local_epochs": 3, "gamma0": 0.1, "alpha_lr": 0.5, "clients_per_round": 2})
    context = prepare_run(config, tiny_dataset(24), contiguous_partition([8, 8, 8]), "", None)
    start = {k: v.clone() for k, v in context.model.state_dict().items()}
    tasks = probe_tasks(context, start, version=6, updates=10)
    for client, task in enumerate(tasks):
        duration = context.system.duration(client, 8, 1 << 30)
        t = {"round": [6] * 3, "equivalent_round": [5] * 3, "epoch": [0, 1, 2]}[clock]
        assert task.lrs == pytest.approx([0.1 / ((s + 1) ** 0.5 * (1 + 0.5 * duration)) for s in t], rel=1e-15)
        assert torch.equal(task.indices, context.client_indices(client))


def test_a_large_population_is_probed_at_a_bounded_number_of_j():
    """The draws once cost C × 2 × 2,000 × 5 Python iterations of O(J²) work (93 s at C = 140, hours at
    C = 1,000): now every J up to 24, then about 24 geometrically spaced J from 1 to C."""
    assert probed_js(10) == list(range(1, 11))
    large = probed_js(1000)
    assert large[0] == 1 and large[-1] == 1000 and len(large) <= MAX_PROBED_J + 1 and large == sorted(set(large))
    table = sampling_variance_table(np.random.default_rng(0).normal(size=(140, 30)), draws=20, seeds=2)
    assert sorted(set(table.J)) == probed_js(140) and len(table) == 2 * len(probed_js(140))


def test_all_draws_at_once_equal_each_draw_summed_alone():
    """The vectorised variances are the per-draw sums of the centred Gram matrix they replace."""
    rng = np.random.default_rng(3)
    gram = centred_gram(rng.normal(size=(12, 7)))
    draws = [rng.integers(12, size=4), rng.choice(12, size=5, replace=False), np.arange(12)]
    by_one = [gram[np.ix_(d, d)].sum() / len(d) ** 2 for d in draws]
    assert draws_variances(gram, draws) == pytest.approx(np.maximum(by_one, 0.0), rel=1e-12, abs=1e-15)


def test_the_table_never_holds_a_negative_variance():
    """Every client once (J = C) leaves no sampling noise: 0, never a rounding error below it (was −1.95e-18)."""
    updates = np.random.default_rng(1).normal(size=(10, 50)) * 1e3 + 7.0
    table = sampling_variance_table(updates, draws=200, seeds=3)
    assert (table[["closed_form", "drawn_mean"]] >= 0).all().all()
    full = table[(table.J == 10) & (table.sampling == "without replacement")]
    assert (full.closed_form == 0).all() and (full.drawn_mean < 1e-12 * table.closed_form.max()).all()
