"""NVFlare's FedRevive timing setup in asyncfl, beside its published counts and NVFlare's own loop
(docs/world.md "A published simulator's setup"): every preset of `config/fedrevive.yaml` run timing-only
over seeds by `asyncfl train-many`, the same presets through NVFlare's scheduler re-expressed
(`nvflare_fedrevive_clock.py`) over as many seeds, one table.

A count is the model versions made before the preset's time budget (metrics.csv rows with
`virtual_time` below it; NVFlare's loop's own count adds one where the upload that crosses the budget
completes a buffer, `published` is that count for its one seed). One published number is one seed of a
random schedule: NVFlare's spread over seeds is the yardstick, and the table gives each side's mean, its
range, and the difference's 95 % confidence interval (Welch). Mean staleness is set beside (K − 1)/B.

    .venv/bin/python peers/fedrevive.py --seeds 10 --out results/fedrevive

One preset, one seed, from asyncfl's own command line (a partition of 1,000 clients of equal size):

    asyncfl partition --dataset digits --clients 1000 --alpha 0.5 --seed 0 --sizes equal --out p.npz
    asyncfl train --dataset digits --partition p.npz --out run \
        --settings "$(.venv/bin/python peers/fedrevive.py --settings fedrevive_shifted)"
"""

import argparse
import csv
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import yaml
from scipy import stats

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from nvflare_fedrevive_clock import Clock  # noqa: E402

SETUP = HERE.parent / "config" / "fedrevive.yaml"


def preset_settings(setup: dict, name: str, budget_fraction: float) -> dict:
    """One preset's `asyncfl train` settings: the setup, its schedule's changes, its own; the budget scaled."""
    preset = setup["presets"][name]
    settings = setup["setup"] | setup["schedules"][preset["schedule"]] | preset["settings"]
    settings["max_virtual_time"] *= budget_fraction
    return settings


def scheduler(settings: dict) -> tuple[int, int, int]:
    """(K, B, O) of a preset's settings: the slots, the buffer, the redistribution threshold."""
    slots = settings.get("concurrency") or settings["clients_per_round"]
    return (
        slots,
        settings.get("buffer_size") or settings["clients_per_round"],
        settings.get("redistribution_threshold", 1),
    )


def asyncfl_runs(setup: dict, names: list[str], seeds: int, fraction: float, out: Path, processes: int) -> dict:
    """Every preset over seeds 0 … seeds − 1, timing-only, in one `asyncfl train-many`: per preset,
    per seed, (versions before the budget, mean staleness of the aggregated updates)."""
    partition = out / "partition.npz"
    if not partition.is_file():  # every client one digit: a dispatch's time never reads its data
        made = subprocess.run(
            [sys.executable, "-m", "asyncfl", "partition", "--dataset", "digits", "--clients", str(setup["clients"]),
             "--alpha", "0.5", "--seed", "0", "--sizes", "equal", "--out", str(partition)],
            capture_output=True, text=True,
        )  # fmt: skip
        if made.returncode:
            sys.exit(f"fedrevive: asyncfl partition failed: {made.stderr.strip()[-500:]}")
    plan = [
        {"partition": str(partition), "out": str(out / name / f"seed{seed}"),
         "settings": preset_settings(setup, name, fraction) | {"seed": seed}}
        for name in names for seed in range(seeds)
    ]  # fmt: skip
    (out / "plan.json").write_text(json.dumps(plan, indent=1))
    command = [sys.executable, "-m", "asyncfl", "train-many", "--dataset", "digits", "--plan", str(out / "plan.json")]
    done = subprocess.run([*command, "--processes", str(processes)], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"fedrevive: asyncfl train-many failed: {done.stderr.strip()[-1500:]}")
    counts: dict[str, list[tuple[int, float]]] = {name: [] for name in names}
    for run in plan:
        folder, budget = Path(run["out"]), run["settings"]["max_virtual_time"]
        rows = list(csv.DictReader((folder / "metrics.csv").open()))
        events = [row for row in csv.DictReader((folder / "events.csv").open()) if not row.get("lost")]
        staleness = statistics.fmean(int(row["staleness"]) for row in events)
        counts[folder.parent.name].append((sum(float(row["virtual_time"]) < budget for row in rows), staleness))
    return counts


def nvflare_runs(setup: dict, names: list[str], seeds: int, fraction: float) -> dict:
    """Every preset through NVFlare's loop, setup and run seed 10 … 10 + seeds − 1 (10: the published one):
    per preset, per seed, (versions before the budget, mean staleness, versions as NVFlare counts them)."""
    counts = {}
    for name in names:
        settings, schedule = preset_settings(setup, name, fraction), setup["presets"][name]["schedule"]
        slots, buffer, threshold = scheduler(settings)
        clocks = [
            Clock(setup["clients"], slots, buffer, threshold, settings["max_virtual_time"], schedule, seed, seed).run()
            for seed in range(10, 10 + seeds)
        ]
        counts[name] = [(c.versions_before, statistics.fmean(c.staleness), c.versions) for c in clocks]
    return counts


def summary(values: list[float]) -> str:
    return f"{statistics.fmean(values):,.1f} [{min(values):,.0f}–{max(values):,.0f}]"


def difference(ours: list[float], theirs: list[float]) -> str:
    """asyncfl's mean − NVFlare's, with its Welch 95 % confidence interval."""
    if len(ours) < 2 or len(theirs) < 2:
        return "n/a (one seed)"
    if statistics.pstdev(ours) == statistics.pstdev(theirs) == 0:
        return f"{statistics.fmean(ours) - statistics.fmean(theirs):+,.1f} (no spread)"
    test = stats.ttest_ind(ours, theirs, equal_var=False)
    low, high = test.confidence_interval(0.95)
    mid = statistics.fmean(ours) - statistics.fmean(theirs)
    return f"{mid:+,.1f} [{low:+,.1f}, {high:+,.1f}]" if math.isfinite(low) else f"{mid:+,.1f}"


def expected_staleness(slots: int, buffer: int, threshold: int) -> str:
    """Little's law: (K − 1)/B with every slot refilled as it opens (O = 1); 0 for a synchronous cohort
    (O = B = K); no closed form between."""
    if threshold == 1:
        return f"{(slots - 1) / buffer:.2f}"
    return "0" if threshold == slots == buffer else "—"


def table(setup: dict, names: list[str], ours: dict, theirs: dict, fraction: float) -> str:
    head = (
        "| preset | K, B, O | budget | published | NVFlare's loop, by the budget | asyncfl, by the budget "
        "| asyncfl − NVFlare (95 % CI) | mean staleness: asyncfl / NVFlare / Little's law |\n"
        "|---|---|---:|---:|---:|---:|---:|---|"
    )
    lines = [head]
    for name in names:
        settings = preset_settings(setup, name, fraction)
        slots, buffer, threshold = scheduler(settings)
        a_counts, a_stale = zip(*ours[name], strict=True)
        n_counts, n_stale, _ = zip(*theirs[name], strict=True)
        published = setup["presets"][name]["published"] if fraction == 1 else "—"
        lines.append(
            f"| {name} | {slots}, {buffer}, {threshold} | {settings['max_virtual_time']:g} | {published} "
            f"| {summary(n_counts)} | {summary(a_counts)} | {difference(list(a_counts), list(n_counts))} "
            f"| {statistics.fmean(a_stale):.2f} / {statistics.fmean(n_stale):.2f} "
            f"/ {expected_staleness(slots, buffer, threshold)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10, help="seeds per preset and side [10]")
    parser.add_argument("--presets", nargs="+", help="some of config/fedrevive.yaml's presets [all]")
    parser.add_argument("--budget-fraction", type=float, default=1.0, help="every budget × this, for a quick look")
    parser.add_argument("--processes", type=int, default=1, help="asyncfl train-many --processes [1]")
    parser.add_argument("--out", type=Path, default=Path("results/fedrevive"))
    parser.add_argument(
        "--settings", metavar="PRESET", help="only print the preset's settings as JSON, for asyncfl train --settings"
    )
    args = parser.parse_args()
    setup = yaml.safe_load(SETUP.read_text())
    names = args.presets or ([args.settings] if args.settings else list(setup["presets"]))
    if unknown := sorted(set(names) - set(setup["presets"])):
        parser.error(f"{', '.join(unknown)}: not a preset of {SETUP.name} (it has {', '.join(setup['presets'])})")
    if args.settings:
        print(json.dumps(preset_settings(setup, args.settings, 1.0)))
        return
    if not 1 <= args.seeds <= 1000 or not 0 < args.budget_fraction <= 1:
        parser.error("--seeds must be 1…1000 and --budget-fraction in (0, 1]")
    args.out.mkdir(parents=True, exist_ok=True)
    ours = asyncfl_runs(setup, names, args.seeds, args.budget_fraction, args.out, args.processes)
    theirs = nvflare_runs(setup, names, args.seeds, args.budget_fraction)
    text = table(setup, names, ours, theirs, args.budget_fraction)
    (args.out / "table.md").write_text(text + "\n")
    (args.out / "counts.json").write_text(json.dumps({"asyncfl": ours, "nvflare": theirs}, indent=1))
    print(text)


if __name__ == "__main__":
    main()
