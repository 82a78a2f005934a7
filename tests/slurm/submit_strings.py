"""The sbatch command line the SLURM plugin writes for every job of a config's plan, as JSON on stdout.

    python tests/slurm/submit_strings.py CONFIG PROFILE [WORKFLOW_PROFILE]

Snakemake's API builds the DAG as `snakemake --profile PROFILE --configfile CONFIG` would, in the current
folder; the plugin's own `get_submit_command` and `set_gres_string` write each job's line, with the
profile's default resources and its executor settings (`slurm-requeue`), so a test reads the strings
the plugin would submit instead of deriving them. Only the partition and account arguments, which the
plugin's executor adds from the job's `slurm_partition` (and a site's accounts), are added here as it
adds them for an explicit partition; the job's command (`--wrap`) is left to the caller. A separate
process: Snakemake's API changes the working folder and keeps global state.
"""

import json
import shlex
import sys
from pathlib import Path

import yaml
from snakemake.api import SnakemakeApi
from snakemake.resources import Resources
from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, Quietness, ResourceSettings
from snakemake_executor_plugin_slurm import ExecutorSettings
from snakemake_executor_plugin_slurm.submit_string import get_submit_command
from snakemake_executor_plugin_slurm.utils import set_gres_string

REPO = Path(__file__).resolve().parents[2]


def profile_settings(paths: list[Path]) -> dict:
    """The profiles' keys, a later one's replacing an earlier one's (as Snakemake reads them)."""
    settings: dict = {}
    for path in paths:
        settings.update(yaml.safe_load((path / "config.yaml").read_text()))
    return settings


def main(config: Path, profiles: list[Path]) -> None:
    settings = profile_settings(profiles)
    executor = ExecutorSettings(requeue=bool(settings.get("slurm-requeue")))
    defaults = Resources.from_mapping(settings.get("default-resources", {}))
    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
        workflow_api = api.workflow(
            resource_settings=ResourceSettings(
                nodes=100,
                default_resources=defaults,
                overwrite_resources={
                    rule: Resources.from_mapping(values) for rule, values in settings.get("set-resources", {}).items()
                },
            ),
            config_settings=ConfigSettings(configfiles=[config]),
            snakefile=REPO / "Snakefile",
            workdir=Path.cwd(),
        )
        workflow_api.dag(DAGSettings())
        workflow = workflow_api._workflow  # the DAG itself: the API builds it only to run or print it
        workflow._prepare_dag(forceall=False, ignore_incomplete=False, lock_warn_only=True, nolock=True)
        workflow._build_dag()
        submits = []
        for job in workflow.dag.needrun_jobs():
            if job.rule.name in workflow._localrules or job.rule.norun:
                continue  # runs where snakemake runs, or nothing to run
            partition = job.resources.get("slurm_partition")
            params = {
                "run_uuid": "asyncfl-test",
                "slurm_logfile": "/dev/null",
                "comment_str": f"rule_{job.name}",
                "account": "",
                "partition": f" -p {shlex.quote(str(partition))}" if partition else "",
                "workdir": str(Path.cwd()),
            }
            call = get_submit_command(job, params, settings=executor) + set_gres_string(job)
            submits.append({"rule": job.rule.name, "threads": job.threads, "call": call})
    print(json.dumps(submits))


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), [Path(p).resolve() for p in sys.argv[2:]])
