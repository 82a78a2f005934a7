"""The paper's sampling claim, put to the test on real client updates (docs/theory.md "Theory checks").

The paper (Section II) states, for the mean of s vectors drawn from a population of m with
variance ν² = (1/m) Σ‖θ_k − θ̄‖²: E‖θ̄_ψ − θ̄‖² = ν²/s with replacement and (m − s)/(s(m − 1))·ν²
without, so drawing clients without replacement lowers the variance of the aggregate. Here the
population is a real one: every client's update θ_c − θ from one global model of a finished run,
and the variance of the mean of J of them is computed three ways: the closed forms, and the
engine's own draws (`rng.choice` / `rng.integers`) repeated over many seeds.
"""

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from asyncfl.data.loading import load_dataset
from asyncfl.data.partition import load_partition
from asyncfl.files import sha256, written_together
from asyncfl.planning.layout import EVENTS, MODEL
from asyncfl.runs.checkpoint import load_failure
from asyncfl.runs.record import verify_run_files
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.settings.random_streams import shuffle_key
from asyncfl.sim.context import RunContext, prepare_run
from asyncfl.training.interface import LocalTask
from asyncfl.training.runtime import configure_process

PROBE_DISPATCH = 1 << 30  # the dispatch index that keys the probe's jitter draws: no run reaches it


def population_variance(vectors: np.ndarray) -> float:
    """ν² = (1/m) Σ‖θ_k − θ̄‖² of the rows of `vectors`."""
    return float(((vectors - vectors.mean(axis=0)) ** 2).sum(axis=1).mean())


def closed_form_variance(vectors: np.ndarray, s: int, replacement: bool) -> float:
    """E‖θ̄_ψ − θ̄‖² of the mean of s rows drawn uniformly, as the paper states it."""
    m, nu2 = len(vectors), population_variance(vectors)
    if replacement:
        return nu2 / s
    return 0.0 if m == 1 else (m - s) / (s * (m - 1)) * nu2


def centred_gram(vectors: np.ndarray) -> np.ndarray:
    """G_ij = ⟨θ_i − θ̄, θ_j − θ̄⟩: then ‖mean of a draw − θ̄‖² = n_dᵀ G n_d / s², with n_d the draw's
    count of each member, so a draw costs a row of one matrix product whatever the model's size."""
    centred = vectors - vectors.mean(axis=0)
    return centred @ centred.T


def draws_variances(gram: np.ndarray, draws: list[np.ndarray]) -> np.ndarray:
    """‖mean of each draw − θ̄‖², all draws in one matrix product (their counts as rows). A squared
    norm is never negative: rounding that makes one −1e-18 (every client drawn once) gives 0."""
    counts = np.zeros((len(draws), len(gram)))
    for row, chosen in enumerate(draws):
        np.add.at(counts[row], chosen, 1.0)
    sizes = counts.sum(axis=1)
    return np.maximum(((counts @ gram) * counts).sum(axis=1) / sizes**2, 0.0)


def enumerated_variance(vectors: np.ndarray, s: int, replacement: bool) -> float:
    """The same expectation by brute force over every equally likely draw (small populations only)."""
    gram, m = centred_gram(vectors), len(vectors)
    draws = itertools.product(range(m), repeat=s) if replacement else itertools.combinations(range(m), s)
    return float(np.mean(draws_variances(gram, [np.asarray(d) for d in draws])))


def drawn_variance(vectors: np.ndarray, s: int, replacement: bool, draws: int, seed: int) -> float:
    """The expectation over `draws` draws made as the engine makes them (one generator per seed)."""
    return gram_drawn_variance(centred_gram(vectors), s, replacement, draws, seed)


def gram_drawn_variance(gram: np.ndarray, s: int, replacement: bool, draws: int, seed: int) -> float:
    rng, m = np.random.default_rng(seed), len(gram)
    chosen = [rng.integers(m, size=s) if replacement else rng.choice(m, size=s, replace=False) for _ in range(draws)]
    return float(draws_variances(gram, chosen).mean())


MAX_PROBED_J = 24  # J values of the table beyond which they are spaced geometrically (1, …, C kept)


def probed_js(clients: int) -> list[int]:
    """Every J = 1…C for a small C; about MAX_PROBED_J values from 1 to C, geometrically spaced, for a
    large one, so the table's cost grows like C² (one matrix product per J), not C⁴."""
    if clients <= MAX_PROBED_J:
        return list(range(1, clients + 1))
    return sorted({int(j) for j in np.round(np.geomspace(1, clients, MAX_PROBED_J))} | {clients})


def client_updates(run: Path, dataset: str, root: Path | None, partition_path: Path) -> np.ndarray:
    """θ_c − θ for every client c, each trained once (the run's settings and learning-rate schedule at
    its last round) from the run's final global model θ: the population the sampling claim is about."""
    summary = verify_run_files(run, (MODEL, EVENTS))
    threads = summary.get("torch_threads")
    if not isinstance(summary.get("rounds_completed"), int) or not isinstance(threads, int) or threads < 1:
        raise InputError(f"{run}/run.json lacks the run's rounds or torch threads; train it again")
    torch.set_num_threads(threads)  # the run's own: a sum split over other threads rounds differently
    config = make_config({**summary["config"], "trainer": "plain"}, f"{run}/run.json")
    partition = load_partition(partition_path)
    if sha256(partition_path) != summary.get("partition_sha256") or dataset != summary.get("dataset"):
        raise InputError(
            f"{partition_path} ({dataset}) is not the partition {run} was trained on; give that run's "
            "--dataset and --partition (its run.json names the dataset and the partition's SHA-256)"
        )
    configure_process(config.precision)
    context = prepare_run(config, load_dataset(dataset, root), partition, sha256(partition_path), None)
    start = load_model_state(run / MODEL, context.model, context.device)
    events = pd.read_csv(run / EVENTS)
    updates = int(events.lost.isna().sum()) if "lost" in events else len(events)  # a row per update aggregated
    # (and, where dispatches can be lost, one per dispatch lost, its `lost` filled)
    tasks = probe_tasks(context, start, summary["rounds_completed"], updates)
    names = [name for name, _ in context.model.named_parameters()]
    flat = [
        torch.cat([result.state[n].double().flatten() - start[n].double().flatten() for n in names])
        for result in context.trainer.train(tasks)
    ]
    return torch.stack(flat).cpu().numpy()


def probe_tasks(context: RunContext, start: dict[str, torch.Tensor], version: int, updates: int) -> list[LocalTask]:
    """One dispatch of every client from `start`, as the run would make it after `version` rounds and
    `updates` aggregated updates: the run's own learning-rate schedule (its strategy's), its own delays."""
    strategy, system, tasks = context.strategy, context.system, []
    for client in range(len(context.sizes)):
        duration = system.duration(client, int(context.sizes[client]), PROBE_DISPATCH)
        lrs = strategy.learning_rates(version, updates, system.delay(client, duration))
        stream = shuffle_key(context.config.seed, client, 0)
        indices = context.client_indices(client)
        tasks.append(LocalTask(start, indices, lrs, stream, context.config.prox_mu, strategy.optimizer_per_epoch))
    return tasks


def load_model_state(path: Path, model: torch.nn.Module, device: torch.device) -> dict[str, torch.Tensor]:
    """The global model a run saved, read without unpickling code, with the keys of the run's model."""
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as error:  # torch reports a bad file with many types; none of them is a bug of ours
        raise InputError(f"{path} is not a readable model ({load_failure(error)}); train the run again") from None
    expected = model.state_dict()
    if not isinstance(state, dict) or set(state) != set(expected):
        raise InputError(f"{path} does not hold the weights of the run's {type(model).__name__}; train the run again")
    return state


def sampling_variance_table(updates: np.ndarray, draws: int, seeds: int) -> pd.DataFrame:
    """Per J (`probed_js`) and sampling rule: the closed form, and the engine's draws as mean ± sd over seeds."""
    rows, gram = [], centred_gram(updates)  # one Gram matrix for every J, rule and seed
    for j in probed_js(len(updates)):
        for replacement in (False, True):
            drawn = [gram_drawn_variance(gram, j, replacement, draws, seed) for seed in range(seeds)]
            rows.append(
                {
                    "J": j,
                    "sampling": "with replacement" if replacement else "without replacement",
                    "closed_form": closed_form_variance(updates, j, replacement),
                    "drawn_mean": float(np.mean(drawn)),
                    "drawn_sd": float(np.std(drawn)),
                }
            )
    return pd.DataFrame(rows)


def sampling_variance(
    run: Path,
    dataset: str,
    root: Path | None,
    partition: Path,
    out: Path,
    title: str,
    draws: int = 2000,
    seeds: int = 5,
) -> list[Path]:
    """`asyncfl theory`: the table (sampling_variance.csv) and its figure, from one finished run."""
    from asyncfl.analysis.figures import draw_sampling_variance, write_figures

    table = sampling_variance_table(client_updates(Path(run), dataset, root, Path(partition)), draws, seeds)
    drawn = draw_sampling_variance(table, Path(out), title)
    csv = drawn.stem.with_suffix(".csv")  # the figure's table, beside it
    with written_together([csv, *drawn.paths()]) as temporaries:
        table.to_csv(temporaries[csv], index=False, float_format="%.10g")
        write_figures([drawn], temporaries)
    return [csv, *drawn.paths()]
