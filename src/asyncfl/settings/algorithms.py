"""The federated algorithms a run can name, one catalogue entry each (like `catalogue.py`'s figures):
`names.py`'s tables (display names, round sizes, the asynchronous ones) derive from it, and the
strategies are found by it (`fl/algorithms`). Adding an algorithm: its entry here and its file
(docs/development.md "Adding an algorithm").

Kept free of heavy imports: Snakemake reads it while it plans the DAG.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Algorithm:
    """One algorithm.

    Attributes:
        key: its config name (`algorithm:`), and its run folders' name.
        display: its name in figures and tables.
        round_size: client updates it aggregates into one new global model: "J", "K" (FedBuff's
            buffer) or "1"; read by the strategies and by the workflow's budget checks.
        asynchronous: M clients in flight, staleness τ ≥ 0.
        staleness_weighted: an asynchronous algorithm weights its updates by s(τ) (the staleness
            settings apply); False where the rule has a staleness weight of its own.
        server_optimizer: for FedAvg with a server optimizer of its own (Reddi et al. 2021), that
            optimizer (`fl/server_optimizer.py`), which the run's config then records; "none" otherwise.
        default_staleness: the s(τ) a run of it gets when it names none, which its config then records:
            "constant" where its paper weights every update alike (CA2FL, FADAS); "polynomial",
            FedBuff's and FedAsync's (1 + τ)^−a, otherwise.
        strategy: its implementation, "file:Class" in `fl/algorithms/` (an entry point's form); the
            settings that file declares are the config keys only this algorithm reads.
        timed_untrained: its dispatches' times do not depend on what its aggregations compute, so a
            timing-only run (`trainer: none`) times it as a trained run would; False where they do
            (FedQueue's budgets learn from the updates' delays), and such a run is refused.
    """

    key: str
    display: str
    round_size: str
    asynchronous: bool = False
    server_optimizer: str = "none"
    staleness_weighted: bool = True
    default_staleness: str = "polynomial"
    strategy: str = field(kw_only=True)
    timed_untrained: bool = field(default=True, kw_only=True)


# In the order (and so the colour) every figure uses
CATALOGUE = (
    Algorithm("afl", "AFL", "J", asynchronous=True, strategy="afl:AFL"),
    Algorithm("sync", "Sync FL (FedAvg)", "J", strategy="sync:Sync"),
    Algorithm("fedasync", "FedAsync", "1", asynchronous=True, strategy="fedasync:FedAsync"),
    Algorithm("fedbuff", "FedBuff", "K", asynchronous=True, strategy="fedbuff:FedBuff"),
    Algorithm("afl_as_coded", "AFL as the paper's code runs it", "J", strategy="afl_as_coded:AFLAsCoded"),
    Algorithm("sync_as_coded", "Sync FL as the paper's code runs it", "J", strategy="sync_as_coded:SyncAsCoded"),
    Algorithm("fedavgm", "FedAvgM", "J", server_optimizer="sgd", strategy="sync:Sync"),  # Hsu et al. 2019
    Algorithm("fedadam", "FedAdam", "J", server_optimizer="adam", strategy="sync:Sync"),  # Reddi et al. 2021
    Algorithm("fedyogi", "FedYogi", "J", server_optimizer="yogi", strategy="sync:Sync"),  # Reddi et al. 2021
    # FedBuff's buffer of K arrivals, then AMSGrad on their mean update (Wang et al. 2024)
    Algorithm(
        "fadas",
        "FADAS",
        "K",
        asynchronous=True,
        server_optimizer="amsgrad",
        default_staleness="constant",
        strategy="fedbuff:FedBuff",
    ),
    # FedBuff's buffer, each update calibrated by the server's cache of its client's last (Wang et al. 2024)
    Algorithm("ca2fl", "CA2FL", "K", asynchronous=True, default_staleness="constant", strategy="ca2fl:CA2FL"),
    # arrival groups whose clients train as many steps as bring them back together (Li et al. 2024); an
    # aggregation takes a group's arrivals and the late updates held since, or one first-heard client's
    Algorithm("fedcompass", "FedCompass", "1", asynchronous=True, strategy="fedcompass:FedCompass"),
    # FedBuff's buffer, each update weighted by its client's average observed staleness (Ma et al. 2024)
    Algorithm(
        "fedstaleweight",
        "FedStaleWeight",
        "K",
        asynchronous=True,
        staleness_weighted=False,
        strategy="fedstaleweight:FedStaleWeight",
    ),
    # every arrival a round, stepped by λ/(γ + ε), γ the global model's distance moved over the update's length
    Algorithm(
        "asyncfeded", "AsyncFedED", "1", asynchronous=True, staleness_weighted=False, strategy="asyncfeded:AsyncFedED"
    ),  # Wang et al. 2022
    # every K arrivals, a step on the mean of every client's latest update, absent ones too (Gu et al. 2021)
    Algorithm("mifa", "MIFA", "K", asynchronous=True, staleness_weighted=False, strategy="mifa:MIFA"),
    # every arrival a round, a step on the mean of every client's latest update (Chang et al. 2025)
    Algorithm("ace", "ACE", "1", asynchronous=True, staleness_weighted=False, strategy="ace:ACE"),
    # FedBuff's buffer, each client model weighted by its freshness and its agreement with the last step (Su & Li 2022)
    Algorithm("port", "PORT", "K", asynchronous=True, staleness_weighted=False, strategy="port:PORT"),
    # every arrival a round: its client's progress less its previous, plus their running average (Chen et al. 2020)
    Algorithm("asofed", "ASO-Fed", "1", asynchronous=True, staleness_weighted=False, strategy="asofed:ASOFed"),
    # FedBuff's buffer, updates corrected by control variates and weighted by agreement, an Adam-like step (AFL-Lib)
    Algorithm("fedac", "FedAC", "K", asynchronous=True, staleness_weighted=False, strategy="fedac:FedAC"),
    # every arrival a round: its client's model mixed in by a weight that keeps the client's total on its
    # share of the data (Jiang et al. 2024, as AFL-Lib codes it)
    Algorithm("daafl", "DAAFL", "1", asynchronous=True, staleness_weighted=False, strategy="daafl:DAAFL"),
    # rounds of J, each client's steps budgeted to a period after its predicted delay, late updates deferred
    # a round at half weight (Li et al. 2026, as APPFL's example codes it)
    Algorithm("fedqueue", "FedQueue", "J", strategy="fedqueue:FedQueue", timed_untrained=False),
    # every arrival a round, mixed in by a learned staleness factor; each client merges the fresher global
    # model mid-training (Liu et al. 2024, as a public transcription codes it)
    Algorithm("fedasmu", "FedASMU", "1", asynchronous=True, staleness_weighted=False, strategy="fedasmu:FedASMU"),
    # a server of steps: clients chosen by their data's utility, the buffer aggregated when a pacer says (Jiang
    # et al. 2022, as its authors' code runs it); its choice reads the losses, so a timing-only run cannot time it
    Algorithm(
        "pisces",
        "Pisces",
        "1",
        asynchronous=True,
        staleness_weighted=False,
        strategy="pisces:Pisces",
        timed_untrained=False,
    ),
)


def check_catalogue(catalogue: tuple[Algorithm, ...]) -> None:
    """Each key and display name once: a copied line left with another's key would replace that algorithm."""
    for attribute in ("key", "display"):
        names = [getattr(algorithm, attribute) for algorithm in catalogue]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ImportError(f"settings/algorithms.py: {attribute} {', '.join(repeated)} on more than one line")


check_catalogue(CATALOGUE)
