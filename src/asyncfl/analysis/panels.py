"""The panels of the figures, one function each, and the style they share: every algorithm keeps one
colour in every figure, the J of a sweep get distinct colours in the order of J, and every axis says
what it measures (the paper's "server loss" is labelled as the training-loss proxy it is)."""

import textwrap
from collections.abc import Iterable, Sequence

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from asyncfl.settings.names import ALGORITHMS, ASYNCHRONOUS  # noqa: E402

# One colour per algorithm, in the catalogue's order: seaborn's colourblind palette has ten, and past
# them it starts again (CA2FL, the eleventh, was drawn in AFL's blue); then black, the dark palette's and
# the bright palette's
PALETTE = [
    *sns.color_palette("colorblind", 10),
    (0.0, 0.0, 0.0),
    *sns.color_palette("dark", 10),
    *sns.color_palette("bright", 10),
]
if len(ALGORITHMS) > len(PALETTE):
    raise ImportError(f"{len(ALGORITHMS)} algorithms and {len(PALETTE)} colours: add colours to PALETTE")
ALGORITHM_COLOURS = dict(zip(ALGORITHMS, PALETTE, strict=False))
SERVER_LOSS = "Server loss\n(mean client training NLL)"
ROUND = "Round (server aggregations)"
EQUIVALENT_ROUNDS = "Equivalent rounds (client updates / J)"
UPDATES = "Client updates aggregated (the budget)"
VIRTUAL_TIME = "Virtual wall-clock time (s)"
BAND = ("sd", 1)


AS_CODED_LOSS = "train_loss_as_coded"  # metrics.csv: the server loss as the reference code computed it


def as_coded_vs_described(axes: Sequence[Axes], metrics: pd.DataFrame) -> None:
    """The paper's server-loss proxy and the global model's test accuracy, for AFL as the paper's code runs
    it and as the paper describes it, on the same seeds: the proxy can fall while the model does not learn.
    The as-coded run's loss is drawn twice: as asyncfl computes the proxy (solid) and as the reference
    code computed and published it (dashed)."""
    data = metrics[metrics.algorithm.isin(["afl", "afl_as_coded"])]
    by_algorithm(axes[0], data, "round", "train_loss", ROUND, SERVER_LOSS + ",\na training-loss proxy")
    published = data[data.algorithm == "afl_as_coded"]
    if AS_CODED_LOSS in published and published[AS_CODED_LOSS].notna().any():
        colour = ALGORITHM_COLOURS["afl_as_coded"]
        sns.lineplot(published, x="round", y=AS_CODED_LOSS, color=colour, ls="--", errorbar=BAND, ax=axes[0])
        axes[0].plot([], [], color=colour, ls="--", label="AFL as coded: the loss as its code logged it")
    axes[0].set_yscale("log")
    legend_below(axes[0])
    evaluated = data.dropna(subset=["test_accuracy"])
    by_algorithm(axes[1], evaluated, "round", "test_accuracy", ROUND, "Test accuracy of the global model")
    axes[1].axhline(0.1, ls=":", color="grey", lw=1, label="chance (10 classes)")
    legend_below(axes[1])


def as_published(axes: Sequence[Axes], metrics: pd.DataFrame) -> None:
    """AFL against synchronous FL as the paper's code ran both (no broadcast; the loss as it logged it),
    beside AFL and FedAvg as described (asyncfl's proxy), against client updates, and the global models'
    test accuracy: what the published comparison measured, and what the algorithms do."""
    coded = metrics[metrics.algorithm.isin(["afl_as_coded", "sync_as_coded"])]
    described = metrics[metrics.algorithm.isin(["afl", "sync"])]
    by_algorithm(axes[0], coded, "updates", AS_CODED_LOSS, UPDATES, "Server loss as published\n(reference's own mean)")
    by_algorithm(axes[1], described, "updates", "train_loss", UPDATES, SERVER_LOSS)
    for ax, title in zip(axes[:2], ("As the paper's code ran them", "As the paper describes them"), strict=True):
        ax.set_yscale("log")
        ax.set_title(title, fontsize="small")
        legend_below(ax)
    evaluated = metrics[metrics.algorithm.isin(["afl_as_coded", "sync_as_coded", "afl", "sync"])]
    by_algorithm(axes[2], evaluated.dropna(subset=["test_accuracy"]), "updates", "test_accuracy", UPDATES,
                 "Test accuracy of the global model")  # fmt: skip
    axes[2].axhline(0.1, ls=":", color="grey", lw=1, label="chance (10 classes)")
    axes[2].set_title("Both, on the test set", fontsize="small")
    legend_below(axes[2])


def legend_below(ax: Axes, ncols: int = 1) -> None:
    """The axes' legend under the panel, never on the data (algorithm names as displayed)."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, [ALGORITHMS.get(label, label) for label in labels], fontsize="x-small")
        sns.move_legend(ax, "upper center", bbox_to_anchor=(0.5, -0.28), ncols=ncols, frameon=False)


def server_loss(ax: Axes, afl: pd.DataFrame) -> None:
    sns.lineplot(
        afl,
        x="round",
        y="train_loss",
        color=ALGORITHM_COLOURS["afl"],
        errorbar=BAND,
        ax=ax,
        label=f"AFL ({afl.seed.nunique()} seed{'s' if afl.seed.nunique() > 1 else ''}, mean ± sd)",
    )
    ax.set(xlabel=ROUND, ylabel=SERVER_LOSS)


def client_selection(ax: Axes, events: pd.DataFrame, clients: int) -> None:
    """How many updates each client contributed (mean ± sd over seeds), per algorithm."""
    counts = (
        events.groupby(["algorithm", "seed"])
        .client.value_counts()
        .unstack(fill_value=0)
        .reindex(columns=range(clients), fill_value=0)
        .stack()
        .rename("updates")
        .reset_index()
    )
    order = present_algorithms(counts)
    sns.barplot(
        counts,
        x="client",
        y="updates",
        hue="algorithm",
        hue_order=order,
        palette=ALGORITHM_COLOURS,
        errorbar=BAND,
        ax=ax,
    )
    ax.set(xlabel="Client", ylabel="Updates aggregated (count)")
    legend_below(ax, ncols=2)  # six algorithms' bars fill the panel: a legend on it would hide them


def participation_table(events: pd.DataFrame) -> pd.DataFrame:
    """Per algorithm, seed and client: updates aggregated and mean dispatch duration (virtual s)."""
    events = events.assign(duration=events.arrival_time - events.dispatch_time)
    return (
        events.groupby(["algorithm", "seed", "client"])
        .agg(updates=("round", "size"), duration=("duration", "mean"))
        .reset_index()
    )


def participation(ax: Axes, events: pd.DataFrame) -> None:
    """Updates aggregated per client against the client's mean dispatch duration, per algorithm: with
    M clients kept in flight and the next client drawn among the idle ones, fast clients return and
    are redrawn more often, so asynchronous dispatch favours them (docs/design.md "Training")."""
    per_client = participation_table(events)
    order = present_algorithms(per_client)
    # AFL, FedAsync and FedBuff with one M dispatch the same clients at the same times (only the
    # aggregation differs), so their points coincide: nested marker sizes keep each one visible.
    # Sync and AFL as coded dispatch alike too, so they nest the same way.
    sizes = {"afl": 110, "sync": 60, "fedasync": 45, "afl_as_coded": 22, "sync_as_coded": 16, "fedbuff": 10}
    per_client = per_client.sort_values("algorithm", key=lambda a: -a.map(sizes).fillna(30), kind="stable")
    sns.scatterplot(
        per_client,
        x="duration",
        y="updates",
        hue="algorithm",
        hue_order=order,
        palette=ALGORITHM_COLOURS,
        size="algorithm",
        sizes={a: sizes.get(a, 30) for a in order},
        ax=ax,
        alpha=0.85,
    )
    ax.set(xlabel="Client's mean dispatch duration (virtual s)", ylabel="Updates aggregated per seed")
    relabel_algorithms(ax)
    sns.move_legend(ax, "upper center", bbox_to_anchor=(0.5, -0.3), ncols=2, frameon=False)  # never on the data


def participation_sweep(ax: Axes, afl: pd.DataFrame) -> None:
    sns.lineplot(afl, x="round", y="train_loss", hue="J", palette=j_colours(afl.J.unique()), errorbar=BAND, ax=ax)
    ax.set(xlabel=ROUND, ylabel=SERVER_LOSS)
    ax.legend(title="AFL, J clients per round", fontsize="small", title_fontsize="small")


def j_colours(values: Iterable[int]) -> dict[int, tuple]:
    """One colour per J of the sweep, spread over viridis in the order of J: distinct for any number of J."""
    ordered = sorted(int(j) for j in values)
    return dict(zip(ordered, sns.color_palette("viridis", len(ordered)), strict=True))


def by_algorithm(ax: Axes, data: pd.DataFrame, x: str, y: str, xlabel: str, ylabel: str) -> None:
    order = present_algorithms(data)
    sns.lineplot(data, x=x, y=y, hue="algorithm", hue_order=order, palette=ALGORITHM_COLOURS, errorbar=BAND, ax=ax)
    ax.set(xlabel=xlabel, ylabel=ylabel)
    relabel_algorithms(ax)


def test_metrics(axes: Sequence[Axes], data: pd.DataFrame, x: str, xlabel: str) -> None:
    """Test accuracy and loss of the global model, the honest counterpart of the server loss. One legend,
    under the panels: on a panel it would cover the final (best) values."""
    evaluated = data.dropna(subset=["test_accuracy"])
    by_algorithm(axes[0], evaluated, x, "test_accuracy", xlabel, "Test accuracy of the global model")
    by_algorithm(axes[1], evaluated, x, "test_loss", xlabel, "Test loss of the global model (NLL)")
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes:
        legend = ax.get_legend()
        if legend is not None:
            legend.remove()
    names = [ALGORITHMS.get(label, label) for label in labels]
    axes[0].figure.legend(handles, names, loc="outside lower center", ncols=3, frameon=False, fontsize="x-small")


def on_time_grid(metrics: pd.DataFrame, points: int = 100) -> pd.DataFrame:
    """Seeds reach evaluations at different virtual times: interpolate each run onto a common grid."""
    evaluated = metrics.dropna(subset=["test_accuracy"])
    frames = []
    for algorithm, runs in evaluated.groupby("algorithm"):
        times = runs.groupby("seed").virtual_time
        grid = np.linspace(times.min().max(), times.max().min(), points)  # where every seed has evaluations
        for seed, run in runs.groupby("seed"):
            frames.append(
                pd.DataFrame(
                    {
                        "algorithm": algorithm,
                        "seed": seed,
                        "virtual_time": grid,
                        "test_accuracy": np.interp(grid, run.virtual_time, run.test_accuracy),
                        "test_loss": np.interp(grid, run.virtual_time, run.test_loss),
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)


def staleness_distribution(ax: Axes, events: pd.DataFrame) -> None:
    """τ of the asynchronous algorithms only: sync and the as-coded emulations wait for every client they
    dispatched, so their τ is 0 by construction. τ counts server versions, and a version is one update
    for FedAsync but J (AFL) or K (FedBuff) updates for the others: the axis says so."""
    data = events[events.algorithm.isin(ASYNCHRONOUS)]
    order = present_algorithms(data)
    sns.histplot(
        data,
        x="staleness",
        hue="algorithm",
        hue_order=order,
        palette=ALGORITHM_COLOURS,
        discrete=True,
        stat="probability",
        common_norm=False,
        multiple="dodge",
        shrink=0.8,
        ax=ax,
    )
    ax.set(
        xlabel="Staleness τ: server versions since dispatch\n"
        "(a version: 1 update for FedAsync,\nJ for AFL, K for FedBuff)",
        ylabel="Fraction of updates",
    )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    relabel_algorithms(ax)


def partition_heatmap(ax: Axes, stats: dict) -> None:
    counts = pd.DataFrame(stats["class_counts"]).rename_axis(index="Client", columns="Class")
    sns.heatmap(
        counts,
        cmap="mako_r",
        annot=stats["clients"] <= 20,
        fmt="d",
        annot_kws={"fontsize": 5},
        cbar_kws={"label": "Training samples"},
        ax=ax,
    )
    ax.set_title(f"{stats['dataset']}, Dirichlet α = {stats['alpha']}, seed {stats['seed']}", fontsize="small")


def algorithms_compared(axes: Sequence[Axes], metrics: pd.DataFrame) -> None:
    """Final test accuracy, and virtual time to reach 90% of the best final accuracy: the claim of AFL.
    The target is a choice, so it is read on the validation split where the runs have one (the test
    set then only reports the times)."""
    evaluated = metrics.dropna(subset=["test_accuracy"])
    last = evaluated.sort_values("round").groupby(["algorithm", "seed"]).tail(1)
    budgets = last.groupby("algorithm").updates.mean()
    target, validated = comparison_target(last)
    chosen_on = "\n(90 % of the best final validation accuracy)" if validated else ""
    reached = evaluated[evaluated.test_accuracy >= target].groupby(["algorithm", "seed"]).virtual_time.min()
    times = reached.reindex(last.set_index(["algorithm", "seed"]).index).rename("time").reset_index()
    order = present_algorithms(last)
    for ax, data, y, label in (
        (axes[0], last, "test_accuracy", "Final test accuracy"),
        (axes[1], times, "time", f"Virtual time to reach\n{target:.0%} test accuracy (s){chosen_on}"),
    ):
        sns.barplot(
            data,
            x="algorithm",
            y=y,
            order=order,
            hue="algorithm",
            hue_order=order,
            palette=ALGORITHM_COLOURS,
            errorbar=BAND,
            ax=ax,
            legend=False,
        )
        # One budget for all (the equal-cost comparison) is said once, under the axis, not under every bar
        equal = budgets[order].nunique() == 1
        ax.set(xlabel=f"each at {budgets[order[0]]:.0f} client updates" if equal else "", ylabel=label)
        ticks = [textwrap.fill(ALGORITHMS[a], 10) + ("" if equal else f"\n{budgets[a]:.0f} updates") for a in order]
        ax.set_xticks(range(len(order)), ticks, fontsize=4.5)
    never = times[times.time.isna()].groupby("algorithm").size()
    for position, algorithm in enumerate(order):
        if algorithm in never:
            axes[1].annotate(
                f"{never[algorithm]}\nnever\nreached",
                (position, 0),
                ha="center",
                va="bottom",
                fontsize="x-small",
            )


def comparison_target(last: pd.DataFrame) -> tuple[float, bool]:
    """90 % of the best mean final accuracy over the algorithms (`last`: each run's last evaluation),
    read on the validation split where every run has one (True), else on the test set."""
    validated = "validation_accuracy" in last and bool(last.validation_accuracy.notna().all())
    column = "validation_accuracy" if validated else "test_accuracy"
    return 0.9 * float(last.groupby("algorithm")[column].mean().max()), validated


def present_algorithms(data: pd.DataFrame) -> list[str]:
    """The algorithms in `data`, in the one order (and colour) every figure uses."""
    return [a for a in ALGORITHM_COLOURS if a in set(data.algorithm)]


def relabel_algorithms(ax: Axes) -> None:
    legend = ax.get_legend()
    if legend is None:
        return
    for text in legend.get_texts():
        text.set_text(ALGORITHMS.get(text.get_text(), text.get_text()))
    legend.set_title("")
