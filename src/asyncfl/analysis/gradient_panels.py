"""The gradient-norm figure's panels: ‖∇L(θ_v)‖² of the global model and its running mean against the
slopes the paper's bounds give, and the size of the server's steps (docs/outputs.md "Outputs")."""

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from asyncfl.analysis.panels import (
    ALGORITHM_COLOURS,
    EQUIVALENT_ROUNDS,
    by_algorithm,
    present_algorithms,
    relabel_algorithms,
)
from asyncfl.settings.config import LR_CLOCKS
from asyncfl.settings.names import ALGORITHMS

# The rate the paper gives for the running mean Ψ = (1/𝒥) Σ_j E‖∇L(θ_j)‖², by what t of γ counts:
# γ ∝ 1/√(t+1) over rounds (Lemma 3: O(log 𝒥/√𝒥)); γ constant over rounds, t the local epoch
# (Theorem 1: O(1/𝒥) down to a floor set by σ², ν² and γ). Upper bounds; their constants are unknown.
PAPER_RATES = {
    "round": (-0.5, "Lemma 3, γ ∝ 1/√t"),
    "equivalent_round": (-0.5, "Lemma 3, γ ∝ 1/√t"),
    "epoch": (-1.0, "Theorem 1, γ constant over rounds, before its floor"),
}
if tuple(PAPER_RATES) != LR_CLOCKS:  # a rate for every learning-rate clock the config offers
    raise ImportError(f"paper rates for {list(PAPER_RATES)} differ from the config's clocks {LR_CLOCKS}")


def gradient_norms(axes: Sequence[Axes], metrics: pd.DataFrame, reference_j: int) -> None:
    """Left: ‖∇L(θ_v)‖² of the global model on the training set at its evaluations, and its running mean
    (the paper's Ψ), log–log over equivalent rounds, with the paper's rate for each schedule drawn as a
    slope only, and the slopes measured over the second half of the rounds named in the legend.
    Right: ‖θ_{v+1} − θ_v‖², the update size, which carries γ² and is not the theorem's quantity."""
    data = metrics.dropna(subset=["gradient_norm_squared"]).sort_values("round")
    data = data.assign(equivalent_round=data.updates / reference_j)
    data["running_mean"] = data.groupby(["algorithm", "seed"]).gradient_norm_squared.transform(
        lambda g: g.expanding().mean()
    )
    ax = axes[0]
    order = present_algorithms(data)
    for algorithm in order:
        runs = data[data.algorithm == algorithm]
        colour = ALGORITHM_COLOURS[algorithm]
        mean = runs.groupby("equivalent_round")[["gradient_norm_squared", "running_mean"]].mean()
        ax.plot(mean.index, mean.gradient_norm_squared, color=colour, lw=0.8, alpha=0.5)
        slope = fitted_slope(mean.index.to_numpy(), mean.running_mean.to_numpy())
        ax.plot(mean.index, mean.running_mean, color=colour, lw=1.6, label=f"{ALGORITHMS[algorithm]}: slope {slope}")
    for clock in sorted(set(data.lr_clock)):
        rate, source = PAPER_RATES[clock]
        x = np.unique(data.equivalent_round[data.lr_clock == clock])
        anchor = data[data.lr_clock == clock].running_mean.median()
        ax.plot(
            x, anchor * (x / x[len(x) // 2]) ** rate, ls="--", color="grey", lw=1, label=f"slope {rate:g}: {source}"
        )
    ax.set(xscale="log", yscale="log", xlabel=EQUIVALENT_ROUNDS, ylabel="‖∇L(θ)‖² on the training set")
    ax.legend(
        title="Thick: running mean Ψ over the evaluations (at the same update counts\nfor every algorithm), "
        "its slope over the 2nd half; thin: at each evaluation.\nDashed: the paper's "
        "upper-bound rate, a slope only (constants unknown):\na slope at or below it agrees with the paper; "
        "a shallower one does not show it",
        title_fontsize="xx-small",
        fontsize="xx-small",
        loc="upper left",
        bbox_to_anchor=(0, -0.22),
        ncols=1,
    )
    norms = metrics.assign(update_norm_squared=metrics.update_norm**2)
    norms = norms[norms.update_norm_squared > 0].assign(equivalent_round=lambda d: d.updates / reference_j)
    by_algorithm(axes[1], norms, "equivalent_round", "update_norm_squared", EQUIVALENT_ROUNDS, "")
    axes[1].set(xscale="log", yscale="log", ylabel="‖θ_{v+1} − θ_v‖²")
    axes[1].set_title("Update size: carries γ², not Theorem 1's quantity", fontsize="small")
    axes[1].legend(fontsize="xx-small", loc="upper left", bbox_to_anchor=(0, -0.22))
    relabel_algorithms(axes[1])


def fitted_slope(x: np.ndarray, y: np.ndarray) -> str:
    """The least-squares slope of log y on log x over the second half of the points, as text."""
    half = slice(len(x) // 2, None)
    keep = (x[half] > 0) & (y[half] > 0)
    if keep.sum() < 2:
        return "n/a (too few evaluations)"
    return f"{np.polyfit(np.log(x[half][keep]), np.log(y[half][keep]), 1)[0]:+.2f}"
