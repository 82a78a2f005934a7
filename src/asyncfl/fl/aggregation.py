"""The aggregation arithmetic several algorithms share, as pure functions on state dicts (docs/design.md
"Training"); an algorithm's own step is in its file (`fl/algorithms/`), the staleness functions s(τ)
in `staleness`, the learning rate in `schedule`.

Floating-point entries (parameters and BatchNorm running statistics) combine linearly,
accumulated in float64. Integer entries (BatchNorm's num_batches_tracked) cannot be
averaged: the result takes the largest count among the inputs, i.e. the most batches
any contributing model has seen.
"""

import math
from typing import cast

import torch

from asyncfl.models import ModelState
from asyncfl.settings.errors import InputError


def linear_combination(terms: list[tuple[float, ModelState]]) -> ModelState:
    """Σ coefficient·state over floating entries; integer entries take the maximum over the states."""
    keys = terms[0][1].keys()
    result = {}
    for key in keys:
        reference = terms[0][1][key]
        if reference.is_floating_point():
            total = sum(coefficient * state[key].double() for coefficient, state in terms)
            result[key] = cast(torch.Tensor, total).to(reference.dtype)
        else:
            result[key] = torch.stack([state[key] for _, state in terms]).amax(dim=0)
    return result


def staleness_aware_average(
    global_model: ModelState, states: list[ModelState], sizes: list[int], weights: list[float], mixing: float
) -> tuple[ModelState, list[float]]:
    """afl (and sync, with s ≡ 1, β = 1): θ ← (1−β)θ + β·Σ w_c θ_c / Σ w_c, w_c = n_c·s(τ_c).

    Returns the new state and each client's coefficient β·w_c/Σw.
    """
    raw = [n * s for n, s in zip(sizes, weights, strict=True)]
    total = sum(raw)
    if total == 0:  # s(τ) underflows to 0 for every update (a huge staleness_a): nothing to average
        raise InputError(
            "every update of this round has staleness weight s(τ) = 0 (the staleness function underflows at "
            "these τ with this staleness_a); lower staleness_a or use another staleness function"
        )
    coefficients = [mixing * w / total for w in raw]
    terms = [(1.0 - mixing, global_model)] if mixing < 1 else []
    return linear_combination(terms + list(zip(coefficients, states, strict=True))), coefficients


def update_norm(new: ModelState, old: ModelState, parameters: list[str]) -> float:
    """‖θ_{v+1} − θ_v‖ over the model's parameters, the paper's θ: the convergence test against κ.
    BatchNorm's running statistics are buffers, not θ, and stay out of it (docs/design.md "Training")."""
    squares = sum(((new[k].double() - old[k].double()) ** 2).sum() for k in parameters)
    return math.sqrt(float(squares))
