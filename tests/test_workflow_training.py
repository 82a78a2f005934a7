"""The workflow training through real snakemake: a severity job split under the runtime cap, a failed job's
finished runs kept, tuning searches, a timing-only experiment, the real-clock experiment. A file apart from
test_workflow.py so that `make test` runs the two beside each other (docs/development.md "Test tiers")."""

import csv
import json
from pathlib import Path

import pytest
import yaml

from asyncfl.planning.layout import RUN_OUTPUTS
from asyncfl.settings.catalogue import Scope, scope_figures
from conftest import QUICK_CONFIG, REPO, snakemake
from workflow_cases import job_counts, tiny_config

pytestmark = pytest.mark.workflow


def small_sweep(folder: Path, resources: dict | None = None, **sweep) -> Path:
    """The quick config's straggler sweep made small (one severity, AFL and sync, two seeds, no tuning or
    variants, 8 virtual seconds), updated with `sweep` and its `resources` with `resources`, written into `folder`."""
    config = yaml.safe_load(QUICK_CONFIG.read_text())
    small = config["experiments"]["digits_stragglers"]
    small.pop("tune")
    small.update(algorithms=["afl", "sync"], seeds=[0, 1], severities={"sigma0": {"speed_sigma": 0.0}})
    small.update({"variants": {}, "budget": {"virtual_time": 8}, **sweep})
    config["experiments"] = {"small": small}
    config["resources"].pop("cost")  # nothing measured: each run asks for resources.train.runtime
    config["resources"].update(resources or {})
    folder.mkdir(exist_ok=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return folder / "config.yaml"


def test_a_severity_split_within_the_cap_trains_each_run_to_the_bytes_of_the_whole_job(tmp_path):
    """resources.max_runtime under a severity job's minutes: the job is split into parts (rules
    train_SWEEP_partK), each run in one of them, each written as the unsplit job wrote it."""
    runs = [f"results/small/severities/sigma0/{name}/J5/seed{seed}" for name in ("afl", "sync") for seed in (0, 1)]
    targets = [f"{run}/{name}" for run in runs for name in RUN_OUTPUTS]
    counts = {}
    for folder, resources in (("whole", {}), ("split", {"max_runtime": 2 * 30})):  # 4 runs of 30 min: 2 parts
        config = small_sweep(tmp_path / folder, resources)
        result = snakemake(*targets, "--cores", "2", "--configfile", str(config), workdir=tmp_path / folder)
        assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
        counts[folder] = job_counts(result.stdout + result.stderr)
    assert counts["whole"]["train_small"] == 1 and "train_small_part0" not in counts["whole"]
    assert counts["split"]["train_small_part0"] == counts["split"]["train_small_part1"] == 1
    for target in targets:
        assert (tmp_path / "split" / target).read_bytes() == (tmp_path / "whole" / target).read_bytes(), target


def test_a_failed_severity_job_keeps_the_runs_it_finished(tmp_path):
    """Snakemake deletes every output of a failed job: the AFL run this severity's job finished before
    its diverging variant failed is deleted with it. The rerun restores it from its kept hard links,
    checked against its sealed run.json, instead of training it again (the same run.json: not retrained)."""
    bad = {"sync-bad": {"optimizer": "sgd", "gamma0": 1e12}}
    config = small_sweep(tmp_path, algorithms=["afl", "sync-bad"], seeds=[0], variants=bad)
    targets = [f"results/small/severities/sigma0/{name}/J5/seed0/run.json" for name in ("afl", "sync-bad")]
    failed = snakemake(*targets, "--cores", "1", "--configfile", str(config), workdir=tmp_path)
    assert failed.returncode != 0 and "training loss is" in failed.stdout + failed.stderr
    afl = tmp_path / "results/small/severities/sigma0/afl/J5/seed0"
    assert not (afl / "run.json").exists()  # deleted by Snakemake with the failed job's other outputs
    kept = (afl / ".finished/run.json").read_bytes()
    small_sweep(tmp_path, algorithms=["afl", "sync-bad"], seeds=[0], variants={"sync-bad": {"gamma0": 0.01}})
    rerun = snakemake(*targets, "--cores", "1", "--configfile", str(config), workdir=tmp_path)
    assert rerun.returncode == 0, (rerun.stdout + rerun.stderr)[-3000:]
    assert (afl / "run.json").read_bytes() == kept
    assert "seed0: this run already finished" in (tmp_path / "logs/train/small/sigma0.log").read_text()
    assert sorted(path.name for path in afl.iterdir()) == sorted(
        [".finished", ".lock", "evaluations.csv", "events.csv", "metrics.csv", "model.pt", "run.json", "timings.csv"]
    )  # nothing else left behind


def test_a_tuning_search_runs_under_snakemake_and_its_choice_reaches_the_final_runs(tmp_path):
    """`tune.extend`: the tuning job searches past the grid's edges and chooses (no select job); the
    final runs' plan admits the searched values, and their jobs read the choice."""
    config = yaml.safe_load((QUICK_CONFIG).read_text())
    sweep = config["experiments"]["digits_stragglers"]
    sweep.update(algorithms=["afl", "sync"], variants={}, seeds=[0, 1], budget={"virtual_time": 8})
    sweep["tune"].update(extend=1, virtual_time=6, metric="time_to_stay")  # trained to, and scored at, 6 of 8 s
    config["experiments"] = {"digits_stragglers": sweep}
    config["resources"]["train"]["processes"] = 2  # each job's runs in two processes of one thread each
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    chosen = "results/digits_stragglers/tuning/chosen.json"
    result = snakemake(chosen, "--cores", "2", "-p", "--configfile", str(path), workdir=tmp_path)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "select_tuning" not in result.stdout + result.stderr
    assert "--processes 2 --threads 2 --grid" in result.stdout + result.stderr
    choice = json.loads((tmp_path / chosen).read_text())
    rounds = choice["search"]["rounds"]
    assert rounds[0]["runs"] == 2 * 2 and len(rounds) >= 2  # a two-value grid's choice always sits on an end
    timings = (tmp_path / "results/digits_stragglers/tuning/search_timings.csv").read_text().splitlines()
    assert timings[0] == "round,runs,cpu_seconds" and len(timings) == 1 + len(rounds)
    assert "tuning runs in" in (tmp_path / "logs/train/digits_stragglers/tuning.log").read_text()
    plan = json.loads((tmp_path / "results/digits_stragglers/plans/tuning.json").read_text())
    assert len(plan) == 4  # the grid's runs: the search adds its own
    assert {run["settings"]["max_virtual_time"] for run in plan} == {6} and choice["budget"] == 6
    assert "--virtual-time 6 --metric time_to_stay --title" in result.stdout + result.stderr
    assert choice["metric"] == "time_to_stay"
    dry = snakemake("-n", "-p", "--cores", "2", "--configfile", str(path), workdir=tmp_path)
    assert dry.returncode == 0, dry.stderr[-2000:]
    jobs = dry.stdout.split("\n\n")
    assert not any("rule tune_digits_stragglers" in job for job in jobs)  # done: nothing to redo
    trains = [job for job in jobs if "rule train_digits_stragglers" in job]
    assert len(trains) == 2 and all(f"--chosen {chosen} --processes 2 --threads 2 " in job for job in trains)


def test_per_severity_tuning_chooses_at_each_severity_and_each_severitys_runs_train_with_its_choice(tmp_path):
    """`tune.per_severity`: one tuning job and choice per severity, in that severity's folder, trained
    and scored to its own budget (`tune.virtual_time` by severity); the severity's final runs read that
    choice, and the archive takes every one."""
    config = yaml.safe_load((QUICK_CONFIG).read_text())
    sweep = config["experiments"]["digits_stragglers"]
    severities = {"sigma0": sweep["severities"]["sigma0"], "heavy_tail": sweep["severities"]["heavy_tail"]}
    sweep.update(algorithms=["afl", "sync"], variants={}, seeds=[0], severities=severities, budget={"virtual_time": 8})
    budgets = {"sigma0": 6, "heavy_tail": 8}
    sweep["tune"] = {"seeds": [10], "per_severity": True, "virtual_time": budgets, "grid": {"gamma0": [0.01, 0.05]}}
    config["experiments"] = {"digits_stragglers": sweep}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    chosen = {severity: f"results/digits_stragglers/tuning/{severity}/chosen.json" for severity in severities}
    runs = [
        f"results/digits_stragglers/severities/{s}/{n}/J5/seed0/run.json" for s in severities for n in ("afl", "sync")
    ]
    figures = [f"results/figures/digits_stragglers/{severity}/tuning.png" for severity in severities]
    result = snakemake(*runs, *figures, "--cores", "2", "-p", "--configfile", str(path), workdir=tmp_path)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    jobs = (result.stdout + result.stderr).split("\n\n")
    for severity in severities:
        (train,) = [job for job in jobs if "rule train_digits_stragglers:" in job and f"plans/{severity}.json" in job]
        assert f"--chosen {chosen[severity]} " in train  # its own severity's choice, no other
        (select,) = [job for job in jobs if f"rule select_tuning_digits_stragglers_{severity}:" in job]
        assert f"--virtual-time {budgets[severity]} " in select  # scored at its own budget
    for severity in severities:
        choice = json.loads((tmp_path / chosen[severity]).read_text())["chosen"]
        assert set(choice) == {"afl", "sync"}
        for name in ("afl", "sync"):
            record = json.loads(
                (tmp_path / f"results/digits_stragglers/severities/{severity}/{name}/J5/seed0/run.json").read_text()
            )
            assert record["tuned"] == choice[name] and record["config"]["gamma0"] == choice[name]["gamma0"]
            tuning_run = tmp_path / f"results/digits_stragglers/tuning/{severity}/gamma0_0.01/{name}/J5/seed10/run.json"
            tuned = json.loads(tuning_run.read_text())["config"]
            assert tuned["slow_fraction"] == severities[severity].get("slow_fraction", 0.0)
            assert tuned["max_virtual_time"] == budgets[severity]
        assert (tmp_path / f"results/figures/digits_stragglers/{severity}/tuning.csv").stat().st_size > 0
        assert (tmp_path / f"logs/figures/digits_stragglers_tuning_{severity}.log").exists()
    dry = snakemake("-n", "--cores", "2", "--configfile", str(path), workdir=tmp_path)
    assert dry.returncode == 0, dry.stderr[-2000:]
    (archive,) = [job for job in dry.stdout.split("\n\n") if "rule archive:" in job]
    assert all(path in archive for path in chosen.values())
    assert "rule tune_digits_stragglers" not in dry.stdout and "rule select_tuning" not in dry.stdout  # done


@pytest.mark.subprocess
def test_a_timing_only_experiment_runs_and_draws_the_clocks_figures(tmp_path):
    """`train: {trainer: none}`: every run timing-only, and the figures drawn from the clock alone
    (no loss, no score, no theory probe of a model that never trained)."""
    config = tiny_config()
    config["experiments"]["tiny"]["algorithms"] = ["afl", "sync", "fedbuff"]
    config["experiments"]["tiny"]["train"] = {"trainer": "none", "eval_every": 5, "checkpoint_every": 10}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    result = snakemake("--cores", "2", "--configfile", str(path), workdir=tmp_path)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    drawn = sorted(path.name for path in (tmp_path / "results/figures/tiny").glob("*.png"))
    timing = scope_figures(Scope.EXPERIMENT, 5, timing_only=True)
    assert drawn == sorted(f"{figure.name}.png" for figure in timing)
    assert {"system_timeline.png", "staleness_distribution.png"} <= set(drawn) and "afl_vs_sync.png" not in drawn
    for record in (tmp_path / "results/tiny/runs").glob("*/J5/seed0/run.json"):
        assert json.loads(record.read_text())["config"]["trainer"] == "none"
    # P7: the report as docs/cluster.md gives it, with no results/reports/ yet (a cluster run makes none)
    report = snakemake("--configfile", str(path), "--report", "results/reports/config.html", workdir=tmp_path)
    assert report.returncode == 0, (report.stdout + report.stderr)[-3000:]
    assert (tmp_path / "results/reports/config.html").stat().st_size > 0


def test_the_real_clock_experiment_replays_its_measured_runs_and_compares_them(tmp_path):
    """.test/config/real_clock.yaml under Snakemake: AFL, FedBuff and sync trained with their clients as
    asyncio tasks on the real clock, each dispatch's compute measured; the sim_vs_real rule replays each
    on the virtual clock beside it and compares them, a row of its table per run."""
    config = REPO / ".test/config/real_clock.yaml"
    figure = "results/figures/digits_real_clock/sim_vs_real"
    result = snakemake(f"{figure}.png", "--cores", "2", "--configfile", str(config), workdir=tmp_path)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    with (tmp_path / f"{figure}.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [row["run"] for row in rows] == ["afl/J5/seed0", "fedbuff/J5/seed0", "sync/J5/seed0"]
    budget = yaml.safe_load(config.read_text())["experiments"]["digits_real_clock"]["budget"]["virtual_time"]
    for row in rows:
        assert float(row["virtual_time_real"]) >= budget and float(row["virtual_time_replay"]) >= budget
        run = tmp_path / "results/digits_real_clock/runs" / row["run"]
        assert json.loads((run / "run.json").read_text())["config"]["durations"] == "measured"
        assert (run / "wall.csv").stat().st_size > 0
        replay = tmp_path / "results/digits_real_clock/replays" / row["run"]
        assert json.loads((replay / "run.json").read_text())["config"]["clock"] == "virtual"
    assert (tmp_path / f"{figure}.pdf").stat().st_size > 0
