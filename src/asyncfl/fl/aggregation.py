"""The server's aggregation rules, as pure functions on state dicts (docs/design.md "Training"); the
staleness functions s(τ) are in `staleness`, the learning rate in `schedule`.

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


def fedasync_update(
    global_model: ModelState, state: ModelState, alpha: float, weight: float
) -> tuple[ModelState, float]:
    """FedAsync: θ ← (1−α_t)θ + α_t θ_c with α_t = α·s(τ), computed afresh for every arrival."""
    alpha_t = alpha * weight
    return linear_combination([(1.0 - alpha_t, global_model), (alpha_t, state)]), alpha_t


def fedbuff_update(
    global_model: ModelState, states: list[ModelState], starts: list[ModelState], weights: list[float], server_lr: float
) -> tuple[ModelState, list[float]]:
    """FedBuff: θ ← θ + η_g · Σ s(τ_c)·(θ_c − θ_start,c) / K."""
    coefficients = [server_lr * s / len(states) for s in weights]
    terms = [(1.0, global_model)]
    for coefficient, state, start in zip(coefficients, states, starts, strict=True):
        terms += [(coefficient, state), (-coefficient, start)]
    return linear_combination(terms), coefficients


def compass_update(
    global_model: ModelState, states: list[ModelState], starts: list[ModelState], weights: list[float], step: float
) -> tuple[ModelState, list[float]]:
    """FedCompass: θ ← θ + Σ_i step·s(τ_i)·(θ_i − θ_start,i), `step` = α/M (APPFL's gradient-based
    aggregator: each update its own weight, however many an aggregation takes)."""
    coefficients = [step * s for s in weights]
    terms = [(1.0, global_model)]
    for coefficient, state, start in zip(coefficients, states, starts, strict=True):
        terms += [(coefficient, state), (-coefficient, start)]
    return linear_combination(terms), coefficients


def update_norm(new: ModelState, old: ModelState, parameters: list[str]) -> float:
    """‖θ_{v+1} − θ_v‖ over the model's parameters, the paper's θ: the convergence test against κ.
    BatchNorm's running statistics are buffers, not θ, and stay out of it (docs/design.md "Training")."""
    squares = sum(((new[k].double() - old[k].double()) ** 2).sum() for k in parameters)
    return math.sqrt(float(squares))


def calibrated_update(
    global_model: ModelState,
    updates: list[tuple[int, ModelState, ModelState, float]],
    cache: dict[int, ModelState],
    clients: int,
    server_lr: float,
) -> tuple[ModelState, list[float], dict[int, ModelState]]:
    """CA2FL: θ ← θ + η·(h + Σ_a s(τ_a)(Δ_a − h_{c_a}) / K), over the K arrivals a = (client c_a, θ_a,
    θ_start,a, s(τ_a)), Δ_a = θ_a − θ_start,a; h = Σ_c h_c / n, the mean of the `cache` of every one of
    the n = `clients` clients' last update as the round begins (0 for a client not yet heard from); h_{c_a}
    the cache as the update arrives, which it then replaces. Over floating entries, in float64, the
    cache kept in each entry's dtype; integer entries take the largest count, as everywhere.

    Returns the new state, each update's coefficient η·s(τ_a)/K, and the cache after the round.
    """
    floating = [key for key, value in global_model.items() if value.is_floating_point()]
    direction = {key: torch.zeros_like(global_model[key], dtype=torch.float64) for key in floating}
    for client in sorted(cache):  # a fixed order: the sum's rounding does not depend on arrival order
        for key in floating:
            direction[key] += cache[client][key].double() / clients
    after, coefficients = dict(cache), []
    for client, state, start, weight in updates:
        delta = {key: state[key].double() - start[key].double() for key in floating}
        for key in floating:
            previous = after[client][key].double() if client in after else 0.0
            direction[key] += weight * (delta[key] - previous) / len(updates)
        after[client] = {key: delta[key].to(state[key].dtype) for key in floating}
        coefficients.append(server_lr * weight / len(updates))
    new = {}
    for key, value in global_model.items():
        if key in direction:
            new[key] = (value.double() + server_lr * direction[key]).to(value.dtype)
        else:
            counts = [value, *(state[key] for _, state, _, _ in updates), *(start[key] for _, _, start, _ in updates)]
            new[key] = torch.stack(counts).amax(dim=0)
    return new, coefficients, after
