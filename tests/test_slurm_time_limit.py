"""A training job killed by SLURM at its time limit (TIMEOUT), submitted again by the running workflow
asking for the rest of its run at the pace its checkpoint recorded, resumes to the bytes of the run
trained straight through. A file of its own: its
test mostly waits on the cluster, and `make test` runs it beside the other SLURM files.

Without a cluster this test skips; CI starts one and sets ASYNCFL_REQUIRE_ALL=1, which turns the skip
into a failure.
"""

import json
import re

import pytest
import yaml

from conftest import snakemake
from slurm_cases import RUN, SLURM_PROFILE, assert_resumed_to_the_straight_bytes, slurm_jobs, write_config

pytestmark = pytest.mark.slurm


# A run that outlasts a 1-minute limit on any machine: SLURM checks limits about every 30 s, so a job asking
# for 1 minute is killed 60-90 s after it starts. Paced by the real clock (`clock: real`), the run lasts
# PACED_SECONDS of wall time however fast the machine trains, and its resume, asking for the rest at the
# recorded pace × 2 and a minute to start, finishes it.
LIMITED_ROUNDS, PACED_SECONDS = 120, 110.0


def test_a_job_killed_at_its_time_limit_resumes_in_the_same_invocation_at_its_recorded_pace(tmp_path):
    """The real time limit: a training job asking for 1 minute (`runtime: 1`, nothing measured) whose run
    takes longer is killed by SLURM (TIMEOUT), submitted again by the running workflow (the profile's
    retries) asking for the rest of the run at the pace its checkpoint recorded, as the workflow says,
    and resumes from its checkpoint, until the run ends with the bytes of the same run trained straight
    through on the virtual clock. The run on the cluster is paced by the real clock, so its length is the
    same on a fast idle machine and a slow loaded one; a loaded one may take another TIMEOUT, each retry
    again at the pace recorded."""
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
    cluster = snakemake(
        f"{RUN}/model.pt", *SLURM_PROFILE, "--retries", "3", "--configfile", str(paced), workdir=tmp_path / "cluster"
    )
    assert cluster.returncode == 0, (cluster.stdout + cluster.stderr)[-3000:]
    jobs = slurm_jobs("train", tmp_path / "cluster")
    states = [job["JobState"] for job in jobs]
    assert states[0] == "TIMEOUT" and states[-1] == "COMPLETED" and set(states[1:-1]) <= {"TIMEOUT"}, states
    said = [
        int(m)
        for m in re.findall(
            r"resumes at its recorded pace: .*; its job asks for (\d+) min", cluster.stdout + cluster.stderr
        )
    ]
    limits = [job["TimeLimit"] for job in jobs]
    assert limits == ["00:01:00", *(f"00:{minutes:02d}:00" for minutes in said)], (limits, said)
    assert_resumed_to_the_straight_bytes(tmp_path / "cluster", tmp_path / "local")
