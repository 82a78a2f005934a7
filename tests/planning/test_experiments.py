"""The workflow's parse-time checks: each mistake fails with the key named, before any job runs."""

import copy
import json
import math
from pathlib import Path

import pytest
import yaml

from asyncfl.planning.experiments import VARIANT, WORKFLOW_OWNED, experiment_traces, run_settings
from asyncfl.planning.families import family_option
from asyncfl.planning.layout import run_name
from asyncfl.planning.plan import plan_workflow
from asyncfl.planning.workflow_config import (
    check_config_files,
    check_workflow_config,
    config_name,
    failure_summary,
    report_folder,
)
from asyncfl.settings.errors import InputError
from asyncfl.settings.names import ALGORITHMS
from conftest import QUICK_CONFIG, REPO

QUICK = yaml.safe_load((QUICK_CONFIG).read_text())


def edited(edit) -> dict:
    config = copy.deepcopy(QUICK)
    edit(config["experiments"]["digits_mlp"], config)
    return config


@pytest.mark.parametrize("path", [".test/config/quick.yaml", "config/config.yaml"])
def test_shipped_configs_pass(path):
    check_workflow_config(yaml.safe_load((REPO / path).read_text()))


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda e, c: e.update(model="resnet"), "experiments.digits_mlp.model: unknown name 'resnet'"),
        (lambda e, c: e.update(algorithms=["afl", "fedavg"]), "digits_mlp.algorithms: unknown name 'fedavg'"),
        (lambda e, c: c["data"]["roots"].update(cifar="/data"), "data.roots: unknown name 'cifar'"),
        (lambda e, c: e.update(participation=[3, 8]), "lacks reference_J = 5"),
        (lambda e, c: e.update(participation=[5, 11]), "J = 11 > experiments.digits_mlp.clients = 10; use J ≤ 10"),
        (lambda e, c: e["train"].update(rounds=3), "digits_mlp.train.rounds is set by the workflow"),
        (lambda e, c: e["train"].update(gama0=1.0), "experiments.digits_mlp.train: unknown key 'gama0'"),
        # found by the generated layer: under a budget eval_every × J was computed before the type was checked
        (lambda e, c: e["train"].update(eval_every={"a": 1}), "digits_mlp.train: eval_every must be int, got"),
        (lambda e, c: e.update(budget={"updates": 12}), "budget.updates = 12 is not a multiple of afl's 5"),
        (
            lambda e, c: e.update(budget={"updates": 15}) or e["train"].update(buffer_size=4),
            r"budget.updates = 15 is not a multiple of fedbuff's 4 updates per round "
            r"\(K, experiments.digits_mlp.train.buffer_size\), so that run would pay 16",
        ),
    ],
)
def test_mistakes_name_the_key(edit, message):
    with pytest.raises(InputError, match=message):
        check_workflow_config(edited(edit))


@pytest.mark.parametrize("key", WORKFLOW_OWNED)
def test_every_workflow_owned_key_is_refused_under_train(key):
    with pytest.raises(InputError, match=f"train.{key} is set by the workflow"):
        check_workflow_config(edited(lambda e, c: e["train"].update({key: 1})))


def test_a_budget_applies_to_the_comparison_runs_only():
    experiment = {**QUICK["experiments"]["digits_mlp"], "budget": {"updates": 150, "virtual_time": 80.0}}
    compared = run_settings(experiment, "fedasync", 5, 5)
    assert (compared["max_updates"], compared["max_virtual_time"], compared["rounds"]) == (150, 80.0, 150)
    # every compared algorithm evaluated at the same update counts: eval_every rounds of J updates
    assert compared["eval_every_updates"] == experiment["train"]["eval_every"] * 5 and "eval_every" not in compared
    sweep = run_settings(experiment, "afl", 3, 5)
    assert "max_updates" not in sweep and sweep["rounds"] == experiment["rounds"]
    assert sweep["eval_every"] == experiment["train"]["eval_every"] and "eval_every_updates" not in sweep


def test_a_work_budget_stops_the_comparison_runs_at_a_dispatch_count():
    experiment = {**QUICK["experiments"]["digits_mlp"], "budget": {"dispatches": 200}}
    compared = run_settings(experiment, "sync", 5, 5)
    assert compared["max_dispatches"] == 200 and "max_updates" not in compared and compared["rounds"] > 200


def test_a_budget_and_the_same_train_setting_are_refused():
    def edit(e, c):
        e["train"]["max_updates"] = 10

    with pytest.raises(InputError, match="train.max_updates and experiments.digits_mlp.budget.updates both set"):
        check_workflow_config(edited(edit))


def renamed(name: str) -> dict:
    config = copy.deepcopy(QUICK)
    config["experiments"] = {name: config["experiments"]["digits_mlp"]}
    return config


@pytest.mark.parametrize("name", ["-n", "--title", "a" * 260, "x.y", ""])
def test_an_unsafe_experiment_name_is_refused_while_parsing(name):
    """A name starting with - reached `--title -n` after hours of training; 260 letters, ENAMETOOLONG."""
    with pytest.raises(InputError, match="an experiment's name must be 1–64 letters, digits, _ or -, not starting"):
        check_workflow_config(renamed(name))


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda e, c: e.update(seeds=[0, 2**64]), r"seeds: 18446744073709551616 is larger than 9223372036854775807"),
        (lambda e, c: e.update(alpha=1e-300), r"alpha = 1e-300 is 302 characters written out"),
        (lambda e, c: e.update(alpha=1e300), r"alpha = 1e\+300 is 303 characters written out"),
        (lambda e, c: e.update(alpha=float("inf")), "alpha must be a finite number > 0"),
        (lambda e, c: e["train"].update(concurrency=20), "train: concurrency \\(M\\) = 20 exceeds the 10 clients"),
    ],
    ids=["seed 2^64", "alpha 1e-300", "alpha 1e300", "alpha inf", "M > C"],
)
def test_mistakes_found_only_after_training_are_found_while_parsing(edit, message):
    """Each of these once passed the dry run and failed in every job (or at the archive, hours later)."""
    with pytest.raises(InputError, match=message):
        check_workflow_config(edited(edit))


def test_concurrency_above_c_is_accepted_with_replacement():
    check_workflow_config(edited(lambda e, c: e["train"].update(concurrency=20, replacement=True)))


def test_two_config_files_with_one_base_name_are_refused():
    """The archive keeps each config as config/BASENAME: a clash once failed only at the very end."""
    check_config_files(["config/config.yaml", "./config/config.yaml", ".test/config/quick.yaml"])
    with pytest.raises(InputError, match="have one base name, config.yaml"):
        check_config_files(["config/config.yaml", "mine/config.yaml"])


def test_a_configs_outputs_are_named_by_its_file():
    assert config_name(["config/config.yaml"]) == "config" and config_name([".test/config/quick.yaml"]) == "quick"
    assert config_name(["a/claim.yaml", "b/my site.yaml"]) == "claim+my site"
    for bad in ("..yaml", ".hidden.yaml", "{experiment}.yaml", "tab\t.yaml"):
        with pytest.raises(InputError, match="names the config's archive folder"):
            config_name([f"mine/{bad}"])


def sweep_edited(edit) -> dict:
    config = copy.deepcopy(QUICK)
    edit(config["experiments"]["digits_stragglers"])
    return config


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda e: e["variants"].update({"sync_deadline": {}}), "variants.sync_deadline: a variant's name is"),
        (lambda e: e["variants"].update({"fedavg-x": {}}), "variants.fedavg-x: a variant's name is"),
        (lambda e: e["variants"].update({"sync-late": {}}), "variants.sync-late is not listed under"),
        (lambda e: e["algorithms"].append("sync-late"), "digits_stragglers.algorithms: unknown name 'sync-late'"),
        (lambda e: e["variants"]["sync-deadline"].update(max_staleness=3), "variants.sync-deadline.*max_staleness"),
        (lambda e: e["variants"]["sync-deadline"].update(seed=3), "variants.sync-deadline.seed is set by the work"),
        (
            lambda e: e["variants"]["sync-deadline"].update(speed_sigma=0.5),
            "variants.sync-deadline.speed_sigma changes the clients' world, which every run of a severity shares",
        ),
        (
            lambda e: e["variants"]["sync-deadline"].update(population="mobile"),
            "variants.sync-deadline.population changes the clients' world",
        ),
        (
            lambda e: e["severities"]["heavy_tail"].update(rounds=3),
            "severities.heavy_tail.rounds is set by the workflow",
        ),
        (lambda e: e["severities"]["heavy_tail"].update(speed_sigma=-1), "severity heavy_tail.*speed_sigma must be"),
        (lambda e: e["severities"].update({"a/b": {}}), "severities.'a/b': a severity's name is a folder"),
        (  # a timing-only run in a sweep gets no accuracy: once judged as reaching every target at once
            lambda e: e["variants"]["sync-deadline"].update(trainer="none"),
            r"variants.sync-deadline.trainer: none \(timing-only\) trains no model",
        ),
        (
            lambda e: e["severities"]["heavy_tail"].update(trainer="none"),
            r"severities.heavy_tail.trainer: none \(timing-only\) trains no model",
        ),
        (lambda e: e.update(participation=[3, 5]), "participation must be \\[5\\]"),
        (lambda e: e.update(budget={"updates": 50}), "budget.virtual_time is missing"),
        (lambda e: e.pop("target_accuracy"), "target_accuracy is missing"),
        (lambda e: e.pop("severities"), "variants run in experiments with severities: only"),
        (lambda e: e.update(pack_runs=2), "pack_runs: a severity sweep already trains one job per severity"),
        (
            lambda e: e["severities"]["heavy_tail"].update(max_virtual_time=1000),
            "severities.heavy_tail.max_virtual_time and experiments.digits_stragglers.budget.virtual_time both set it",
        ),
        (
            lambda e: e["variants"]["sync-deadline"].update(eval_every_updates=7),
            "variants.sync-deadline.eval_every_updates and experiments.digits_stragglers.budget .* both set it",
        ),
        (lambda e: e.update(target_accuracy=float("nan")), "target accuracy nan is not a number in"),
        (
            lambda e: e.update(budget={"virtual_time": float("nan")}),
            r"budget.virtual_time \(a run's max_virtual_time\)",
        ),
        (lambda e: e.update(other_targets=[0.85, 0.8]), r"0.8 is given twice \(target_accuracy and other_targets\)"),
        (lambda e: e.update(other_targets=[0.85, 0.85]), r"0.85 is given twice \(other_targets\); give each once"),
        (lambda e: e.update(other_budgets=[30]), r"other_budgets: 30 is not a virtual time in \(0, 30\), the runs'"),
        (lambda e: e.update(other_budgets=[float("nan")]), "other_budgets: nan is not a virtual time in"),
        (lambda e: e.update(other_budgets=[1e300]), "other_budgets: 1e.300 is not a virtual time in"),
        (lambda e: e.update(other_budgets=[0]), "other_budgets: 0 is not a virtual time in"),
        (lambda e: e.update(other_budgets=[True]), "other_budgets: True is not a virtual time in"),
        (lambda e: e.update(other_budgets=[15, 15.0]), "other_budgets gives 15.0 twice"),
        (  # OB08: a budget no run has a score at, refused before any trains (it once failed after, naming a flag)
            lambda e: e.update(other_budgets=[15, 1e-9]),
            r"other_budgets: 1e-09 is before the first evaluation of the runs of experiments.digits_stragglers.train "
            r"\(eval_every_seconds 1\)",
        ),
        (
            lambda e: (e.update(other_budgets=[3]), e["variants"]["sync-deadline"].update(eval_every_seconds=4.0)),
            r"other_budgets: 3 is before the first evaluation of the runs of .*variants.sync-deadline",
        ),
        (lambda e: e.update(equivalence_margin=30), r"equivalence_margin: 30 is not a time in \(0, 30\) s, below"),
        (
            lambda e: e.update(equivalence_margin=12, other_budgets=[10]),
            r"equivalence_margin: 12 is not a time in \(0, 10\) s",
        ),
        (lambda e: e.update(equivalence_margin=float("nan")), "equivalence_margin: nan is not a time in"),
        (lambda e: e.update(equivalence_margin=1e300), "equivalence_margin: 1e.300 is not a time in"),
        (lambda e: e.update(equivalence_margin=-1), "equivalence_margin: -1 is not a time in"),
        (lambda e: e.update(equivalence_margin="5"), "equivalence_margin: '5' is not a time in"),
        (lambda e: e.update(equivalence_margin=True), "equivalence_margin: True is not a time in"),
        (lambda e: e.update(replication="pooled"), r"replication says how to read the replication seeds; name them"),
        (
            lambda e: e.update(replication_seeds=[6, 7], replication="both"),
            r"replication: 'both' is not apart .* or pooled",
        ),
        (
            lambda e: e.update(replication_seeds=[6, 7], replication=["pooled"]),
            r"replication: \['pooled'\] is not apart",
        ),
        (lambda e: e.update(power=0.4), r"power: 0.4 is not a power in \[0.5, 1\)"),
        (lambda e: e.update(power=1), r"power: 1 is not a power in \[0.5, 1\)"),
        (lambda e: e.update(power=math.nan), r"power: nan is not a power"),
        (lambda e: e.update(power=True), r"power: True is not a power"),
        (lambda e: e.update(power="0.8"), r"power: '0.8' is not a power"),
        (lambda e: e.update(verdict_family={}), r"verdict_family must be a mapping of severities, names and spans"),
        (lambda e: e.update(verdict_family=[]), r"verdict_family must be a mapping"),
        (lambda e: e.update(verdict_family={"rows": ["sigma0"]}), r"verdict_family must be a mapping .*'rows'"),
        (lambda e: e.update(verdict_family={"severities": "sigma0"}), r"verdict_family.severities must be a list"),
        (lambda e: e.update(verdict_family={"severities": [math.nan]}), r"verdict_family.severities must be a list"),
        (lambda e: e.update(verdict_family={"severities": [""]}), r"verdict_family.severities must be a list"),
        (
            lambda e: e.update(verdict_family={"severities": ["sigma0"]}),
            r"verdict_family does not hold the sweep's "
            r"severity 'heavy_tail': a family declares every comparison the sweep makes; add 'heavy_tail'",
        ),
        (
            lambda e: e.update(verdict_family={"names": ["afl", "sync"]}),
            r"verdict_family does not hold the sweep's "
            r"run name 'afl-m7'",
        ),
        (
            lambda e: e.update(verdict_family={"names": ["afl", "afl-m7", "fedasync", "fedbuff"]}),
            r"verdict_family.names hold no asynchronous and synchronous name to compare",
        ),
        (lambda e: e.update(verdict_family={"names": ["../x", "afl"]}), r"verdict_family.names: '../x' is not a run"),
        (lambda e: e.update(verdict_family={"severities": []}), r"verdict_family.severities is empty: list the"),
        (lambda e: e.update(verdict_family={"names": ["afl", "afl-m7", "sync-"]}), r"names: 'sync-' is not a run"),
        (
            lambda e: e.update(verdict_family={"severities": ["sigma0", "heavy_tail", "../x"]}),
            r"verdict_family.severities: '../x' is not a severity's name",
        ),
        (lambda e: e.update(verdict_family={"severities": ["sigma0", "sigma0"]}), r"names 'sigma0' twice"),
        (lambda e: e.update(verdict_family={"spans": ["seeds"]}), r"verdict_family.spans: 'seeds' is not one of"),
        (
            lambda e: e.update(verdict_family={"spans": ["budgets"]}),
            r"verdict_family.spans: budgets changes nothing "
            r"where the sweep reads one budget",
        ),
    ],
)
def test_sweep_mistakes_name_the_key(edit, message):
    with pytest.raises(InputError, match=message):
        check_workflow_config(sweep_edited(edit))


def test_a_target_or_a_budget_without_severities_is_refused():
    with pytest.raises(InputError, match="digits_mlp.target_accuracy applies to experiments with severities"):
        check_workflow_config(edited(lambda e, c: e.update(target_accuracy=0.5)))
    with pytest.raises(InputError, match="digits_mlp.other_budgets applies to experiments with severities"):
        check_workflow_config(edited(lambda e, c: e.update(other_budgets=[5])))
    with pytest.raises(InputError, match="digits_mlp.equivalence_margin applies to experiments with severities"):
        check_workflow_config(edited(lambda e, c: e.update(equivalence_margin=5)))
    with pytest.raises(InputError, match="digits_mlp.power applies to experiments with severities"):
        check_workflow_config(edited(lambda e, c: e.update(power=0.8)))
    with pytest.raises(InputError, match="digits_mlp.verdict_family applies to experiments with severities"):
        check_workflow_config(edited(lambda e, c: e.update(verdict_family={"spans": ["targets"]})))


def test_a_declared_family_reaches_the_verdicts_job_with_the_sweeps_own_names_filled_in():
    """`verdict_family` as the workflow passes it to `asyncfl stragglers`: the severities and names it
    leaves out are the experiment's, the rows it adds (a referee's cut config) kept."""
    sweep = sweep_edited(lambda e: e.update(verdict_family={"severities": ["sigma0", "heavy_tail", "slow40"],
                                                            "spans": ["targets"]}))  # fmt: skip
    check_workflow_config(sweep)
    experiment = sweep["experiments"]["digits_stragglers"]
    (option,) = family_option(experiment)
    assert json.loads(option.removeprefix("--family=")) == {
        "severities": ["sigma0", "heavy_tail", "slow40"], "names": experiment["algorithms"], "spans": ["targets"]
    }  # fmt: skip
    assert family_option(QUICK["experiments"]["digits_stragglers"]) == []


def test_a_run_of_a_sweep_has_its_severitys_and_its_variants_settings():
    """Experiment-wide settings, then the severity's (each where its algorithm reads it), then the variant's."""
    sweep = {**QUICK["experiments"]["digits_stragglers"], "train": {"gamma0": 0.01, "max_staleness": 4}}
    variant = run_settings(sweep, "sync-deadline", 5, 5, "heavy_tail")
    assert variant["round_deadline"] == 4.0 and variant["slow_fraction"] == 0.2 and variant["speed_sigma"] == 0.0
    assert "max_staleness" not in variant and variant["max_virtual_time"] == 30
    plain = run_settings(sweep, "afl", 5, 5, "sigma0")
    assert (
        plain["speed_sigma"] == 0.0
        and "slow_fraction" not in plain
        and plain["max_staleness"] == 4
        and "round_deadline" not in plain
    )


def test_a_trace_under_a_severity_is_the_experiments_and_checked_while_parsing(tmp_path):
    """A trace read by a severity's runs is an input of their jobs (an edit makes them again), and a
    trace naming a client the experiment lacks fails while parsing, not in the job."""
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text("client,start,end\n0,0,100\n3,0,50\n")
    bad.write_text("client,start,end\n0,0,100\n10,0,50\n")

    def with_traces(first_trace, second_trace):
        def edit(e):
            e["severities"]["sigma0"].update(availability="trace", availability_trace=str(first_trace))
            e["severities"]["heavy_tail"].update(availability="trace", availability_trace=str(second_trace))

        return sweep_edited(edit)

    config = with_traces(good, good)
    check_workflow_config(config)
    assert experiment_traces(config["experiments"]["digits_stragglers"]) == [str(good)]
    assert experiment_traces(with_traces(good, bad)["experiments"]["digits_stragglers"]) == [str(bad), str(good)]
    with pytest.raises(InputError, match=f"availability_trace {bad}, line 3: client 10 is not one of the run's"):
        check_workflow_config(with_traces(bad, good))


def test_one_experiment_name_pattern():
    """An experiment's name is checked by `NAME` alone (with a one-line error, not the schema's), and the
    workflow's wildcard is that pattern."""
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    assert "propertyNames" not in schema["properties"]["experiments"]
    assert "experiment=NAME.pattern," in (REPO / "workflow/rules/common.smk").read_text()


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_algorithms_run_folders_and_variants_read_back_as_its_name(name):
    """A name with a digit (`ca2fl`) once read back as "fl" from its folder, and `asyncfl select` refused
    its tuning runs after training them all."""
    assert run_name(f"results/x/severities/slow10/{name}/J10/seed100") == name
    assert run_name(f"results/x/tuning/slow10/gamma0_0.01/{name}-fast/J10/seed1") == f"{name}-fast"
    assert VARIANT.fullmatch(f"{name}-fast")["algorithm"] == name


def test_a_shared_setting_that_needs_another_applies_to_the_runs_that_have_it():
    """SW04: FedAdam's server step size under `train:` beside AFL, which has no server optimizer, was refused
    for AFL ("applies only with server_optimizer other than none"); it is FedAdam's alone, and refused
    where no run of the experiment reads it, naming the block."""
    config = edited(lambda e, c: e["train"].update(server_optimizer_lr=0.05))
    check_workflow_config(config)
    runs = plan_workflow(config)["digits_mlp"].runs
    assert {run.name for run in runs if "server_optimizer_lr" in run.settings} == {"fedadam"}
    without = edited(lambda e, c: (e["train"].update(server_optimizer_lr=0.05), e.update(algorithms=["afl", "sync"])))
    message = "^experiments.digits_mlp.train.server_optimizer_lr applies only with server_optimizer other than none, "
    with pytest.raises(InputError, match=message + "which no run of this experiment has"):
        check_workflow_config(without)


def test_the_report_folder_is_read_from_the_command_line():
    assert report_folder(["snakemake", "--report", "results/reports/c.html"]) == Path("results/reports")
    assert report_folder(["snakemake", "--report=out/r.html", "-n"]) == Path("out")
    assert report_folder(["snakemake", "--report", "--cores", "1"]) is None
    assert report_folder(["snakemake", "-n"]) is None


def test_a_failed_workflows_summary_names_each_failed_job_once_with_its_logs_last_line(tmp_path):
    (tmp_path / "a.log").write_text("resuming from round 3\nasyncfl train: error: the loss is nan at round 4\n")
    block = "Error in rule {rule}:\n    jobid: 1\n    output: {out}, x/events.csv\n    log: {log} (check log file(s) "
    block += "for error details)\n"
    text = "\n".join([
        block.format(rule="train", out="results/e/runs/afl/J5/seed0/metrics.csv", log=tmp_path / "a.log"),
        "Retrying", block.format(rule="train", out="results/e/runs/afl/J5/seed0/metrics.csv", log=tmp_path / "a.log"),
        block.format(rule="figures", out="results/figures/e/x.png", log=tmp_path / "missing.log"), "done",
    ])  # fmt: skip
    (tmp_path / "snakemake.log").write_text(text)
    summary = failure_summary([str(tmp_path / "snakemake.log")]).splitlines()
    assert summary[0].startswith("asyncfl: 2 job(s) failed")
    assert summary[1].startswith("  train → results/e/runs/afl/J5/seed0/metrics.csv: asyncfl train: error: the loss")
    assert summary[2].startswith("  figures → results/figures/e/x.png: its log was not written")
    assert "no log to read" in failure_summary([str(tmp_path / "nowhere.log")])
    (tmp_path / "quiet.log").write_text("RuleException:\nCalledProcessError in file data.smk, line 17:\n")
    assert "names no failed job (with -q" in failure_summary([str(tmp_path / "quiet.log")])


def test_a_config_file_with_a_key_given_twice_is_refused_naming_the_file_and_the_line(tmp_path):
    """Snakemake's YAML reading keeps the last of a key written twice (`power: 0.3` then `power: 0.8`
    passed); the planner reads every config file as asyncfl does and refuses it."""
    path = tmp_path / "twice.yaml"
    path.write_text("experiments:\n  x:\n    power: 0.3\n    seeds: [0]\n    power: 0.8\n")
    with pytest.raises(InputError, match=r"twice.yaml: 'power' is given twice in one mapping \(line 5\)"):
        check_config_files([str(path)])
    merged = tmp_path / "merged.yaml"  # a merge's keys are meant to be overridden: not a repetition
    merged.write_text("base: &base {a: 1, b: 2}\nrun:\n  <<: *base\n  b: 3\n")
    check_config_files([str(merged)])
