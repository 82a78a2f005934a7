"""The workflow's parse-time checks: each mistake fails with the key named, before any job runs."""

import copy

import pytest
import yaml

from asyncfl.spec.errors import InputError
from asyncfl.spec.experiments import WORKFLOW_OWNED, check_workflow_config, run_settings
from conftest import QUICK_CONFIG, REPO

QUICK = yaml.safe_load((QUICK_CONFIG).read_text())


def edited(edit) -> dict:
    config = copy.deepcopy(QUICK)
    edit(config["experiments"]["digits_cnn"], config)
    return config


@pytest.mark.parametrize("path", [".test/config/quick.yaml", "config/config.yaml"])
def test_shipped_configs_pass(path):
    check_workflow_config(yaml.safe_load((REPO / path).read_text()))


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda e, c: e.update(model="resnet"), "experiments.digits_cnn.model: unknown name 'resnet'"),
        (lambda e, c: e.update(algorithms=["afl", "fedavg"]), "digits_cnn.algorithms: unknown name 'fedavg'"),
        (lambda e, c: c["data"]["roots"].update(cifar="/data"), "data.roots: unknown name 'cifar'"),
        (lambda e, c: e.update(participation=[3, 8]), "lacks reference_J = 5"),
        (lambda e, c: e.update(participation=[5, 11]), "J = 11 > clients = 10; use J ≤ 10"),
        (lambda e, c: e["train"].update(rounds=3), "digits_cnn.train.rounds is set by the workflow"),
        (lambda e, c: e["train"].update(gama0=1.0), "experiments.digits_cnn.train: unknown key 'gama0'"),
        (lambda e, c: e.update(budget={"updates": 12}), "budget.updates = 12 is not a multiple of afl's 5"),
        (
            lambda e, c: e.update(budget={"updates": 15}) or e["train"].update(buffer_size=4),
            "budget.updates = 15 is not a multiple of fedbuff's 4 updates per round, so that run would pay 16",
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
    experiment = {**QUICK["experiments"]["digits_cnn"], "budget": {"updates": 150, "virtual_time": 80.0}}
    compared = run_settings(experiment, 5, 5)
    assert (compared["max_updates"], compared["max_virtual_time"], compared["rounds"]) == (150, 80.0, 150)
    sweep = run_settings(experiment, 3, 5)
    assert "max_updates" not in sweep and sweep["rounds"] == experiment["rounds"]


def test_a_budget_and_the_same_train_setting_are_refused():
    def edit(e, c):
        e["train"]["max_updates"] = 10

    with pytest.raises(InputError, match="train.max_updates and experiments.digits_cnn.budget.updates both set"):
        check_workflow_config(edited(edit))
