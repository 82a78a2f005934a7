"""Bad workflow configs, each with the words of its refusal: tests/planning/test_startup.py refuses each in
process, tests/test_workflow.py shows Snakemake printing some."""

from pathlib import Path

import yaml

from conftest import QUICK_CONFIG

# Each bad config and the words of its refusal: every stage of the workflow's checks (its schema, the
# package's checks of the experiments, the resources and the plan, the cost table), all run in
# `checked_workflow` as Snakemake parses the workflow
BAD_CONFIGS = [
    (lambda c: c["experiments"]["digits_mlp"].update(rounds_per_epoch=3), "'rounds_per_epoch' was unexpected"),
    (lambda c: c.update(reference_J="five"), "reference_J: 'five' is not of type 'integer'"),
    (lambda c: c["experiments"]["digits_mlp"]["train"].update(gama0=0.1), "unknown key 'gama0'"),
    (lambda c: c["experiments"]["digits_mlp"]["train"].update(patience=1.5), "patience must be int"),
    (lambda c: c["experiments"]["digits_mlp"].update(dataset="mnsit"), "digits_mlp.dataset: unknown name 'mnsit'"),
    (
        lambda c: c["experiments"]["digits_mlp"].update(participation=[2, 3]),
        "participation [2, 3] lacks reference_J = 5",
    ),
    (
        lambda c: c["experiments"]["digits_mlp"]["train"].update(seed=7),
        "digits_mlp.train.seed is set by the workflow",
    ),
    # each of these once passed the dry run and failed after training
    (lambda c: c.update(experiments={"-n": c["experiments"]["digits_mlp"]}), "not starting with -; rename it"),
    (lambda c: c["experiments"]["digits_mlp"].update(alpha=1e-300), "characters written out in the partition"),
    (lambda c: c["experiments"]["digits_mlp"]["train"].update(concurrency=20), "exceeds the 10 clients"),
    (lambda c: c["experiments"]["digits_stragglers"].update(replication_seeds=[3, 3]), "non-unique elements"),
    (lambda c: c["resources"]["train"].update(processes=0), "0 is less than the minimum of 1"),
    (
        lambda c: c["experiments"]["digits_stragglers"]["tune"].update(virtual_time=31),
        "tune.virtual_time 31 is not a virtual time in (0, 30]",
    ),
    (  # it once trained the whole tuning, then found no evaluation to score it by
        lambda c: c["experiments"]["digits_stragglers"]["tune"].update(virtual_time=0.5),
        "tune.virtual_time 0.5 is before the time grid's first evaluation, at "
        "experiments.digits_stragglers.train.eval_every_seconds 1",
    ),
    (
        lambda c: c["experiments"]["digits_stragglers"].update(replication_seeds=[9]),
        "replication_seeds [9] are not",
    ),
    (
        lambda c: c["experiments"]["digits_stragglers"]["tune"].update(metric="time_to_reach"),
        "'time_to_reach' is not one of ['time_to_target', 'time_to_stay']",
    ),
    # what a cluster would refuse or never run (asyncfl.planning.cluster)
    (lambda c: c["resources"].update(max_runtime=20), "runtime is 30 min for one run, over resources.max_runtime"),
    (lambda c: c["resources"]["train"].update(gres="gpu:1"), "resources.train has gres and gpu/gpu_model"),
    (lambda c: c["resources"]["train"].update(runtime=-5), "-5 is less than the minimum of 1"),
    (
        lambda c: c["resources"]["train"].update(runtime=float("nan")),
        "resources.train.runtime: nan is not of type 'integer'",
    ),
    (
        lambda c: c["resources"].update(max_runtime=float("inf")),
        "resources.max_runtime: inf is not of type 'integer'",
    ),
    (lambda c: c["resources"].update(partitions={"gpu": "../gpu"}), "resources.partitions.gpu is '../gpu'"),
    (lambda c: c["resources"].update(partitions={"tpu": "x"}), "'tpu' was unexpected"),
    # where a job's minutes come from (asyncfl.planning.run_cost)
    (
        lambda c: c["resources"].update(cost={"device": "cuda-nosuch"}),
        "resources.cost.device is 'cuda-nosuch', which config/costs.csv has no row of",
    ),
    (lambda c: c["resources"].update(cost={"device": "../gpu"}), "resources.cost.device is '../gpu'"),
    (lambda c: c["resources"].update(cost={"safety": float("nan")}), "resources.cost.safety is nan"),
    (lambda c: c["resources"].update(cost={"safety": 0.5}), "resources.cost.safety is 0.5: a factor from 1"),
    (lambda c: c["resources"].update(cost={"safety": "x"}), "resources.cost.safety: 'x' is not of type 'number'"),
    (  # every quick run's measured start alone is 2 × 60 s on the H100 row
        lambda c: (
            c["resources"].update(max_runtime=2, cost={"device": "cuda-h100-80gb-hbm3"}),
            c["resources"]["train"].update(runtime=1),
        ),
        "min, over resources.max_runtime 2 min, the longest job",
    ),
    (  # a timing-only sweep would train for hours, then find no accuracy to judge
        lambda c: c["experiments"]["digits_stragglers"]["train"].update(trainer="none"),
        "digits_stragglers.train.trainer: none (timing-only) trains no model, and a severity sweep's",
    ),
    (
        lambda c: c["experiments"]["digits_mlp"]["train"].update(trainer="none"),
        "digits_mlp.train: lr_time is read only by training or scoring, and trainer: none trains nothing",
    ),
]


def bad_config_file(tmp_path: Path, edit) -> Path:
    """The quick config with `edit` made, written as a user's file."""
    config = yaml.safe_load(QUICK_CONFIG.read_text())
    edit(config)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path
