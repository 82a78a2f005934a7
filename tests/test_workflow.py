"""The Snakemake workflow, through real snakemake: plan, lint, format, schema errors, the quick config end to end."""

import csv
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from asyncfl.planning.layout import RUN_OUTPUTS
from asyncfl.planning.plan import plan_workflow
from asyncfl.planning.run_cost import read_cost_table
from asyncfl.settings.catalogue import Scope, scope_figures
from bad_configs import BAD_CONFIGS, bad_config_file
from conftest import ENV, QUICK_CONFIG, REPO, figure_names, snakemake

pytestmark = pytest.mark.workflow

OFFLINE = {**ENV, "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9"}


def job_counts(output: str) -> dict[str, int]:
    table = output.split("Job stats:")[1].split("total")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}


def test_paper_config_plans_every_training_run():
    result = snakemake("-n")
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    sweeps = {name: exp for name, exp in config["experiments"].items() if "severities" in exp}
    expected = sum(
        len(exp["seeds"]) * sum(len(exp["participation"]) if a == "afl" else 1 for a in exp["algorithms"])
        for name, exp in config["experiments"].items()
        if name not in sweeps
    )
    counts = job_counts(result.stdout)
    # the straggler sweeps of MNIST and CIFAR-10: each severity's 10 algorithms × 3 seeds in one job, its
    # runs' measured minutes on the H100 row (417 and 2,059) within resources.max_runtime (2 days); at 720
    # min a run, unmeasured, they were 8 parts each (tests/planning/test_run_cost.py)
    for name in sweeps:
        assert counts[f"train_{name}"] == 5 and f"train_{name}_part0" not in counts, name
    assert counts["straggler_claim"] == 2
    # MNIST: (AFL at J = 3..8 + sync, FedAsync, FedBuff, AFL and sync as coded at J = 5) × 3 seeds; CIFAR-10
    # without the as-coded ones; both staleness-aware variants and MNIST's FedProx one × (AFL, FedAsync,
    # FedBuff at J = 5) × 3 seeds; MNIST in the clients' world × (AFL, sync, FedAsync, FedBuff): 33 + 27 + 3 × 9 + 12
    assert expected == 99
    assert counts["train"] == expected and counts["figures"] == counts["theory"] == 6 and counts["archive"] == 1
    assert counts["figure_as_coded_vs_described"] == counts["figure_afl_vs_sync_as_published"] == 1


def test_packed_runs_train_in_jobs_of_pack_runs_that_ask_for_their_runtime(tmp_path):
    """The quick config packs digits_mlp's 16 runs 8 a job, and digits_resnet20's and digits_world's 4
    runs each in one: a job per pack, asking for its runs' runtime, none left to the per-run rule."""
    quick = yaml.safe_load(QUICK_CONFIG.read_text())
    mlp = quick["experiments"]["digits_mlp"]
    assert mlp["pack_runs"] == 8 and mlp["seeds"] == [0, 1]
    result = snakemake("-n", "-p", "--configfile", str(QUICK_CONFIG), workdir=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    counts = job_counts(result.stdout)
    assert counts["train_digits_mlp_pack0"] == counts["train_digits_mlp_pack1"] == 1 and "train" not in counts
    assert counts["train_digits_resnet20_pack0"] == counts["train_digits_world_pack0"] == 1
    jobs = result.stdout.split("\n\n")
    packed = [job for job in jobs if "rule train_digits_mlp_pack1:" in job]
    assert len(packed) == 1
    # its 8 runs' cost at the config's measured row (resources.cost), not 8 × resources.train.runtime
    pack = plan_workflow(quick, read_cost_table(REPO / "config/costs.csv"))["digits_mlp"].job("pack1")
    assert f"runtime={pack.runtime}," in packed[0] and pack.runtime < quick["resources"]["train"]["runtime"]
    for seed in (0, 1):
        assert f"results/digits_mlp/runs/fedadam/J5/seed{seed}/metrics.csv" in packed[0]
    assert "--plan results/digits_mlp/plans/pack1.json" in packed[0].split("train-many")[1]
    assert counts["plan_training"] == 2 + 1 + 1 + 2 + 1  # and one per severity of digits_stragglers, one for its tuning
    plan = "results/digits_mlp/plans/pack1.json"
    made = snakemake(plan, "--cores", "1", "--configfile", str(QUICK_CONFIG), workdir=tmp_path)
    assert made.returncode == 0, made.stderr[-2000:]
    runs = json.loads((tmp_path / plan).read_text())
    assert [run["out"].split("/runs/")[1] for run in runs] == [
        "fedbuff/J5/seed0", "fedbuff/J5/seed1", "afl_as_coded/J5/seed0", "afl_as_coded/J5/seed1",
        "sync_as_coded/J5/seed0", "sync_as_coded/J5/seed1", "fedadam/J5/seed0", "fedadam/J5/seed1",
    ]  # fmt: skip
    assert runs[0]["settings"]["seed"] == 0 and runs[0]["settings"]["algorithm"] == "fedbuff"
    assert runs[6]["settings"]["algorithm"] == "fedadam" and "server_optimizer_lr" not in runs[6]["settings"]


def test_a_trace_under_a_severity_is_an_input_of_the_severity_jobs(tmp_path):
    """A trace set under a severity is declared as an input of the sweep's jobs (its own among them), so
    editing it makes them again; it used to be read from `train:` only."""
    trace = tmp_path / "trace.csv"
    trace.write_text("client,start,end\n" + "".join(f"{c},0,1000\n" for c in range(10)))
    config = yaml.safe_load(QUICK_CONFIG.read_text())
    sweep = config["experiments"]["digits_stragglers"]
    sweep["severities"]["heavy_tail"].update(availability="trace", availability_trace=str(trace))
    config["experiments"] = {"digits_stragglers": sweep}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    result = snakemake("-n", "--configfile", str(tmp_path / "config.yaml"), workdir=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    jobs = [job for job in result.stdout.split("\n\n") if "rule train_digits_stragglers:" in job]
    assert len(jobs) == 2 and all(str(trace) in job.split("output:")[0] for job in jobs)


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


def test_lint_is_clean():
    result = snakemake("--lint")
    assert result.returncode == 0 and "Congratulations" in result.stdout + result.stderr, result.stdout + result.stderr


def test_snakefmt_is_clean():
    result = subprocess.run(
        [sys.executable, "-m", "snakefmt", "--check", "Snakefile", "workflow"], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("case", [0, 5, 16], ids=["schema", "experiment", "resources"])
def test_snakemake_shows_a_bad_configs_refusal_naming_the_key(tmp_path, case):
    """Snakemake prints the refusal of `checked_workflow` (every case: tests/planning/test_startup.py)."""
    edit, message = BAD_CONFIGS[case]
    result = snakemake("-n", "--configfile", str(bad_config_file(tmp_path, edit)))
    assert result.returncode != 0
    assert message in result.stdout + result.stderr, result.stdout + result.stderr


def dry_run_job(tmp_path, config: dict, rule: str) -> str:
    """The one job of `rule` that `snakemake -n -p` plans for `config`, with its shell command."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    result = snakemake("-n", "-p", "--configfile", str(path), workdir=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    (job,) = [job for job in result.stdout.split("\n\n") if f"rule {rule}:" in job]
    return job


def test_replication_seeds_a_margin_a_family_and_a_power_reach_the_verdicts_and_train_with_the_others(tmp_path):
    config = yaml.safe_load((QUICK_CONFIG).read_text())
    sweep = config["experiments"]["digits_stragglers"]
    sweep["replication_seeds"], sweep["equivalence_margin"] = [3, 4], 5
    sweep["power"], sweep["verdict_family"] = 0.8, {"severities": ["sigma0", "heavy_tail", "slow40"]}
    claim = dry_run_job(tmp_path, config, "straggler_claim")
    assert "--replication-seeds 3 4 --virtual-time" in claim
    family = '{"severities": ["sigma0", "heavy_tail", "slow40"], "names": ["afl", "afl-m7"'
    assert f" --equivalence-margin=5 '--family={family}" in claim and "]}' --power=0.8 --title" in claim
    assert all(f"/seed{seed}/" in claim for seed in sweep["seeds"])  # every seed's runs are read, 3 and 4 too


def test_a_choice_made_at_the_tunings_own_budget_is_scored_there(tmp_path):
    config = yaml.safe_load((QUICK_CONFIG).read_text())
    config["experiments"]["digits_stragglers"]["tune"]["virtual_time"] = 15  # the budget is 30
    select = dry_run_job(tmp_path, config, "select_tuning_digits_stragglers")
    assert "--virtual-time 15 --metric time_to_target --title" in select  # the first reach: the default
    claim = dry_run_job(tmp_path, config, "straggler_claim")
    assert "--virtual-time 30 " in claim  # the verdicts at the final runs' budget
    assert "--equivalence-margin" not in claim  # none declared: "no significant difference", as before


def test_a_failed_rule_shows_its_log(tmp_path):
    config = yaml.safe_load((QUICK_CONFIG).read_text())
    config["experiments"] = {"offline": {**config["experiments"]["digits_mlp"], "dataset": "mnist"}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    result = snakemake(
        "resources/data/mnist/prepared.json", "--cores", "1", "--configfile", str(path), workdir=tmp_path, env=OFFLINE
    )
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "logs/prepare_data/mnist.log" in output
    assert "asyncfl data: error: mnist: download failed" in output  # the log's content, shown by snakemake
    # P8: the output's end names the failed job, its output and its one-line cause (not hundreds of lines up)
    end = "\n".join(result.stderr.strip().splitlines()[-8:])
    assert "asyncfl: 1 job(s) failed" in end, end
    assert "prepare_data → resources/data/mnist/prepared.json: asyncfl data: error: mnist: download failed" in end


def test_quick_config_end_to_end(quick_run):
    """Every figure, the report and the archive from real snakemake (on the test cluster where one runs:
    `quick_run`); a second run, local, has nothing to do."""
    tmp_path, config = quick_run.workdir, str(quick_run.config)
    quick = yaml.safe_load(quick_run.config.read_text())
    for name in quick["experiments"]:
        for figure in figure_names(quick, name):
            for ext in ("png", "pdf"):
                assert (tmp_path / f"results/figures/{name}/{figure}.{ext}").stat().st_size > 1000
    archive = tmp_path / "results/archive/quick"
    tarball = archive / "asyncfl-results.tar.gz"
    sums = dict(reversed(line.split("  ")) for line in (archive / "SHA256SUMS").read_text().splitlines())
    assert sums.pop(tarball.name) == hashlib.sha256(tarball.read_bytes()).hexdigest()
    with tarfile.open(tarball) as tar:
        assert all(member.mtime == 0 and member.uid == 0 for member in tar.getmembers())
        assert sums == {m.name: hashlib.sha256(tar.extractfile(m).read()).hexdigest() for m in tar.getmembers()}
    assert "config/quick.yaml" in sums and any(n.startswith("results/partitions/") for n in sums)
    # digits_mlp: 16 runs (2 jobs of 8), digits_resnet20: 4, digits_world: 4, digits_stragglers: 2
    # severities × 8 × 8 seeds (its 16 tuning runs are not results: not archived)
    assert sum(n.endswith("run.json") for n in sums) == 24 + 128
    # The tuning stage's choice reached the final runs through the DAG: each run name trained with its γ0
    chosen = json.loads((tmp_path / "results/digits_stragglers/tuning/chosen.json").read_text())["chosen"]
    assert set(chosen) == set(quick["experiments"]["digits_stragglers"]["algorithms"])
    for run in (tmp_path / "results/digits_stragglers/severities").glob("*/*/J5/seed*/run.json"):
        record = json.loads(run.read_text())
        assert record["config"]["gamma0"] == chosen[run.parents[2].name]["gamma0"], run
        assert record["tuned"] == chosen[run.parents[2].name], run  # recorded as the tuning stage's choice
    assert "results/figures/digits_stragglers/straggler_claim.png" in sums
    world = (tmp_path / "results/digits_world/runs/sync/J5/seed0/events.csv").read_text()
    assert ",offline\n" in world and "upload_seconds" in world  # the world experiment's runs lose dispatches
    for emulation in ("as_coded_vs_described", "afl_vs_sync_as_published"):
        assert (tmp_path / f"results/figures/digits_mlp/{emulation}.png").stat().st_size > 1000
        assert not (tmp_path / f"results/figures/digits_resnet20/{emulation}.png").exists()

    again = snakemake("--cores", "2", "--configfile", config, workdir=tmp_path)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    # Another command line (the archive's provenance records it) is no reason to redo anything.
    other = snakemake("-n", "--cores", "1", "--keep-going", "--configfile", config, workdir=tmp_path)
    assert other.returncode == 0 and "Nothing to be done" in other.stdout + other.stderr, other.stdout[-2000:]

    report = snakemake("--configfile", config, "--report", str(tmp_path / "report.html"), workdir=tmp_path)
    assert report.returncode == 0, report.stderr[-2000:]
    assert (tmp_path / "report.html").stat().st_size > 100_000

    # Same inputs, same archive: rebuild it from the same files.
    first_sums = (archive / "SHA256SUMS").read_text()
    shutil.rmtree(archive)
    rebuilt = snakemake("--cores", "1", "--configfile", config, workdir=tmp_path)
    assert rebuilt.returncode == 0 and (archive / "SHA256SUMS").read_text() == first_sums


def test_the_quick_pipeline_and_the_papers_sweep_keep_their_archives_apart(tmp_path):
    """One clone runs both: what every run of a config shares lies in a folder of that config."""
    outputs = {}
    for config in (QUICK_CONFIG, REPO / "config/config.yaml"):
        dry = snakemake("archive", "-n", "-p", "--configfile", str(config), workdir=tmp_path)
        assert dry.returncode == 0, dry.stderr[-2000:]
        (job,) = [job for job in dry.stdout.split("\n\n") if "rule archive:" in job]
        outputs[config.stem] = re.search(r"output: (.*)", job)[1].split(", ")
    assert {Path(path).parent.as_posix() for path in outputs["quick"]} == {"results/archive/quick"}
    assert {Path(path).parent.as_posix() for path in outputs["config"]} == {"results/archive/config"}


def test_slurm_profile_plans_without_conda():
    """P1: a site without conda runs the main command as is: the profile runs the rules in snakemake's own
    environment (the .venv), and -n says so; conda is opt-in, and asked for without conda it is one line
    at -n (it once passed -n and failed in the first SLURM job, "Error running conda info")."""
    path = os.pathsep.join(d for d in ENV["PATH"].split(os.pathsep) if not (Path(d) / "conda").exists())
    result = snakemake("-n", "--profile", "profiles/slurm", env={**ENV, "PATH": path})
    assert result.returncode == 0, (result.stdout + result.stderr)[-2000:]
    assert job_counts(result.stdout)["train"] == 99
    assert "rules run in this Python environment" in result.stdout + result.stderr
    conda = snakemake("-n", "--profile", "profiles/slurm", "--sdm", "conda", env={**ENV, "PATH": path})
    assert conda.returncode != 0
    assert "--software-deployment-method conda asks for conda, which is not on PATH" in conda.stdout + conda.stderr


def test_paths_with_spaces_reach_the_commands_whole(tmp_path):
    folder = tmp_path / "my configs"
    folder.mkdir()
    config = folder / "quick copy.yaml"
    shutil.copy(QUICK_CONFIG, config)
    result = snakemake("archive", "-n", "-p", "--configfile", str(config), workdir=tmp_path / "work dir")
    assert result.returncode == 0, result.stderr[-2000:]
    command = next(line for line in result.stdout.splitlines() if " archive --files " in line)
    words = shlex.split(command.split(" > ")[0])
    assert words[words.index("--config") + 1] == str(config)


def test_fashion_mnist_config_plans_from_debians_copy():
    result = snakemake("-n", "-p", "--configfile", str(REPO / "config/fashion-mnist.yaml"))
    assert result.returncode == 0, (result.stdout + result.stderr)[-2000:]
    counts = job_counts(result.stdout)
    assert counts["train"] == 51 and counts["theory"] == 3 and counts["figures"] == 3
    assert "--root /usr/share/datasets/fashion-mnist" in result.stdout


def test_an_availability_trace_is_an_input_of_the_runs_that_read_it(tmp_path):
    """The trace CSV is a file the runs, the theory check and the timeline read: Snakemake plans it as
    their input, and a missing one is named before anything runs."""
    config = tiny_config()
    trace = tmp_path / "trace.csv"
    config["experiments"]["tiny"]["train"].update(availability="trace", availability_trace=str(trace))
    path = tmp_path / "trace.yaml"
    path.write_text(yaml.safe_dump(config))
    missing = snakemake("-n", "--configfile", str(path), workdir=tmp_path)
    assert missing.returncode != 0 and "trace.csv" in missing.stdout + missing.stderr
    trace.write_text("client,start,end\n" + "".join(f"{c},0,1000\n" for c in range(10)))
    planned = snakemake("-n", "-p", "--configfile", str(path), workdir=tmp_path)
    assert planned.returncode == 0, (planned.stdout + planned.stderr)[-2000:]
    for rule in ("train", "theory", "figures"):
        jobs = [job for job in planned.stdout.split("rule ")[1:] if job.startswith(f"{rule}:")]
        assert jobs and all(str(trace) in job.split("output:")[0] for job in jobs), rule


def tiny_config(**changes) -> dict:
    """The quick config cut to one small experiment: AFL and sync, one seed, two rounds."""
    config = yaml.safe_load((QUICK_CONFIG).read_text())
    tiny = {**config["experiments"]["digits_mlp"], "rounds": 2, "participation": [5], "seeds": [0]}
    tiny.update(algorithms=["afl", "sync"], budget={"updates": 10})
    tiny.pop("pack_runs", None)  # one job per run: the `train` rule
    config["experiments"] = {"tiny": tiny}
    config.update(changes)
    return config


def test_no_config_value_or_path_reaches_a_shell_as_code(tmp_path):
    """Shell code planted in every user value that reaches a rule's command: the whole pipeline runs
    and no marker appears, or the value is refused while Snakemake parses."""
    marker = "$(touch INJECTED)`touch INJECTED`"
    workdir = tmp_path / f"work {marker}"
    workdir.mkdir()
    config = tiny_config(data={"roots": {"digits": f"root {marker}"}})
    path = workdir / f"tiny {marker} '.yaml"
    path.write_text(yaml.safe_dump(config))
    result = snakemake("--cores", "2", "--configfile", str(path), workdir=workdir)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    archive = workdir / "results/archive" / path.stem  # the config's own folder, named as its file
    assert (archive / "SHA256SUMS").is_file()
    assert not list(tmp_path.rglob("INJECTED")) and not (REPO / "INJECTED").exists()
    provenance = (archive / "provenance.json").read_text()
    assert marker.replace("`", "") in provenance.replace("`", "")  # the command line, recorded as text

    for edit, message in (
        ({"zenodo": {"record": f"{marker}123"}}, "does not match '^[0-9]+$'"),
        ({"experiments": {f"x{marker}": config["experiments"]["tiny"]}}, "an experiment's name must be"),
    ):
        path.write_text(yaml.safe_dump({**config, **edit}))
        refused = snakemake("-n", "--configfile", str(path), workdir=workdir)
        assert refused.returncode != 0 and message in refused.stdout + refused.stderr, refused.stderr[-2000:]
    assert not list(tmp_path.rglob("INJECTED"))


def test_numbers_as_users_write_them(tmp_path):
    """Scientific notation is a number, and an α of 1e-06 names its partition file in decimals."""
    config = tiny_config()
    config["experiments"]["tiny"]["alpha"] = 1e-06
    text = yaml.safe_dump(config).replace("gamma0: 0.001", "gamma0: 1e-3").replace("alpha: 1.0e-06", "alpha: 1e-6")
    assert "gamma0: 1e-3" in text and "alpha: 1e-6" in text  # text to PyYAML, as users write them
    path = tmp_path / "config.yaml"
    path.write_text(text)
    result = snakemake("-n", "-p", "--configfile", str(path), workdir=tmp_path)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "results/partitions/digits_alpha0.000001_C10_seed0.npz" in result.stdout
    assert '"gamma0": 0.001' in result.stdout


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
    """.test/config/real_clock.yaml (its budget and epochs cut) under Snakemake: AFL, FedBuff and sync
    trained with their clients as asyncio tasks on the real clock, each dispatch's compute measured; the
    sim_vs_real rule replays each on the virtual clock beside it and compares them, a row of its table
    per run."""
    shipped = yaml.safe_load((REPO / ".test/config/real_clock.yaml").read_text())
    experiment = shipped["experiments"]["digits_real_clock"]
    experiment["budget"]["virtual_time"] = 2  # half its 4 s and 2 local epochs of its 5: the suite's time
    experiment["train"]["local_epochs"] = 2
    config = tmp_path / "real_clock.yaml"
    config.write_text(yaml.safe_dump(shipped))
    figure = "results/figures/digits_real_clock/sim_vs_real"
    result = snakemake(f"{figure}.png", "--cores", "2", "--configfile", str(config), workdir=tmp_path)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    with (tmp_path / f"{figure}.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [row["run"] for row in rows] == ["afl/J5/seed0", "fedbuff/J5/seed0", "sync/J5/seed0"]
    budget = experiment["budget"]["virtual_time"]
    for row in rows:
        assert float(row["virtual_time_real"]) >= budget and float(row["virtual_time_replay"]) >= budget
        run = tmp_path / "results/digits_real_clock/runs" / row["run"]
        assert json.loads((run / "run.json").read_text())["config"]["durations"] == "measured"
        assert (run / "wall.csv").stat().st_size > 0
        replay = tmp_path / "results/digits_real_clock/replays" / row["run"]
        assert json.loads((replay / "run.json").read_text())["config"]["clock"] == "virtual"
    assert (tmp_path / f"{figure}.pdf").stat().st_size > 0
