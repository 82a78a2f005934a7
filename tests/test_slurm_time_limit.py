"""A training job killed by SLURM at its time limit (TIMEOUT), submitted again by the running workflow
with twice the time, resumes to the bytes of the run trained straight through. A file of its own: its
test mostly waits on the cluster, and `make test` runs it beside the other SLURM files.

Without a cluster this test skips; CI starts one and sets ASYNCFL_REQUIRE_ALL=1, which turns the skip
into a failure.
"""

import json

import pytest
import yaml

from conftest import snakemake
from slurm_cases import RUN, SLURM_PROFILE, assert_resumed_to_the_straight_bytes, slurm_jobs, write_config

pytestmark = pytest.mark.slurm


# A run that outlasts a 1-minute limit on any machine: SLURM checks limits about every 30 s, so a job asking
# for 1 minute is killed 60-90 s after it starts. Paced by the real clock (`clock: real`), the run lasts
# PACED_SECONDS of wall time however fast the machine trains, and its resume (asking 2 min) finishes it.
LIMITED_ROUNDS, PACED_SECONDS = 120, 110.0


def test_a_job_killed_at_its_time_limit_is_submitted_again_with_twice_the_time_and_resumes(tmp_path):
    """The real time limit: a training job asking for 1 minute (`runtime: 1`, nothing measured) whose run
    takes longer is killed by SLURM (TIMEOUT), submitted again by the running workflow asking for twice
    the time (the profile's retries), and resumes from its checkpoint, until the run ends with the bytes
    of the same run trained straight through on the virtual clock. The run on the cluster is paced by the
    real clock, so its length is the same on a fast idle machine and a slow loaded one."""
    config = write_config(
        tmp_path / "straight.yaml", rounds=LIMITED_ROUNDS, local_epochs=1, checkpoint_every=2, eval_every=20
    )
    straight = snakemake(f"{RUN}/model.pt", "--cores", "1", "--configfile", str(config), workdir=tmp_path / "local")
    assert straight.returncode == 0, (straight.stdout + straight.stderr)[-3000:]
    virtual_seconds = json.loads((tmp_path / "local" / RUN / "run.json").read_text())["virtual_time"]
    limited = yaml.safe_load(config.read_text())
    limited["resources"]["train"]["runtime"] = 1
    train = limited["experiments"]["small"]["train"]
    train.update(clock="real", time_scale=PACED_SECONDS / virtual_seconds)
    paced = tmp_path / "limited.yaml"
    paced.write_text(yaml.safe_dump(limited))
    cluster = snakemake(*SLURM_PROFILE, "--retries", "3", "--configfile", str(paced), workdir=tmp_path / "cluster")
    assert cluster.returncode == 0, (cluster.stdout + cluster.stderr)[-3000:]
    jobs = slurm_jobs("train", tmp_path / "cluster")
    states = [job["JobState"] for job in jobs]
    assert states[0] == "TIMEOUT" and states[-1] == "COMPLETED" and set(states[1:-1]) <= {"TIMEOUT"}, states
    limits = [job["TimeLimit"] for job in jobs]
    assert limits == ["00:01:00", "00:02:00", "00:04:00", "00:08:00"][: len(jobs)], limits
    assert_resumed_to_the_straight_bytes(tmp_path / "cluster", tmp_path / "local")
