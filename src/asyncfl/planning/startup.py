"""What the workflow decides while Snakemake parses it, before any rule exists: the config checked, its
runs planned, the plan checked against the site it is about to go to, and the environment the rules run
in. Each refusal is an InputError naming the key, which the workflow shows as one line; Snakemake's own
schema check (which fills in defaults) runs between `check_schema` and `checked_plan` (`checked_workflow`).
"""

from pathlib import Path
from typing import Any

from asyncfl.planning.cluster import check_resources
from asyncfl.planning.plan import WorkflowPlan, plan_workflow
from asyncfl.planning.run_cost import check_cost, read_cost_table
from asyncfl.planning.site import ask_site, check_site
from asyncfl.planning.workflow_config import SCHEMA, check_config_files, check_schema, check_workflow_config
from asyncfl.settings.errors import InputError
from asyncfl.settings.yaml_files import with_numbers


def checked_workflow(config: dict[str, Any], config_files: list[str], cost_table: Path) -> WorkflowPlan:
    """What the workflow does with `config` as Snakemake parses it, in place: numbers as users write them
    (1e-3, which Snakemake's YAML reader keeps as text), the key named first (`check_schema`), Snakemake's
    own schema check (it fills in the defaults the plan reads), then `checked_plan`. One function, so that
    the tests refuse a bad config in process as `snakemake -n` does."""
    from snakemake.utils import validate  # type: ignore[import-untyped]

    config.update(with_numbers(config))
    check_schema(config)
    validate(config, str(SCHEMA))
    return checked_plan(config, config_files, cost_table)


def checked_plan(config: dict[str, Any], config_files: list[str], cost_table: Path) -> WorkflowPlan:
    """The plan of `config` (asyncfl.planning.plan), every run and job, after its checks: the experiments,
    the resources, the config files' names, the cost rows of `resources.cost.device` in `cost_table`;
    then, on a login node where the config names partitions, the plan against the site."""
    check_workflow_config(config)
    check_resources(config["resources"])
    check_config_files(config_files)
    cost = config["resources"]["cost"]
    costs = read_cost_table(cost_table) if cost.get("device") is not None else {}
    check_cost(cost, costs)
    plan = plan_workflow(config, costs)
    check_at_once(config["resources"]["train"], plan)
    site = ask_site(config["resources"])
    if site is not None:
        check_site(config["resources"], plan.longest_job(), site)
    return plan


def check_at_once(train: dict[str, Any], plan: WorkflowPlan) -> None:
    """`resources.train.at_once`, refused where no training process of `plan` is given more runs than it
    lets go at once: it would change nothing."""
    at_once = train.get("at_once")
    if at_once is None:
        return
    most = plan.most_runs_in_a_process(train.get("processes", 1))
    if most <= at_once:
        raise InputError(
            f"resources.train.at_once is {at_once}, but no training process of this config is given more than "
            f"{most} runs, so it would change nothing: remove it, or lower it to cap a process's memory"
        )


def software_route(conda_asked: bool, conda_found: bool, conda_env: str, environment: str) -> str:
    """Where the rules run, said at every start (`-n` included): in the environment snakemake runs in
    (`environment`, README's .venv on a cluster's shared filesystem), or in `conda_env` where
    `--software-deployment-method conda` asks for it. Conda asked for and absent is refused now: Snakemake
    would call it from each job and fail there (docs/cluster.md "Your cluster")."""
    if not conda_asked:
        return f"rules run in this Python environment ({environment}); conda: --software-deployment-method conda"
    if not conda_found:
        raise InputError(
            "--software-deployment-method conda asks for conda, which is not on PATH: install it, or leave "
            "the option out to run the rules in this environment"
        )
    return f"rules run in conda environments ({conda_env})"
