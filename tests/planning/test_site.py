"""The config's `resources:` against a site as sinfo and scontrol describe it (asyncfl.planning.site): the
refusals a strict site gives at submission, said at `snakemake -n` naming the key. The site texts are the
commands' output on the sites the cluster issue was tried on (partition names, typed and untyped GPUs,
select/cons_res); tests/test_slurm.py asks the test cluster itself."""

import math

import pytest

from asyncfl.planning.site import Partition, check_site, node_gpus, read_site, slurm_minutes
from asyncfl.settings.errors import InputError

# sinfo -h -o "%R|%l|%G" on a site with untyped GPUs; another with typed GPUs in two node groups
UNTYPED = "standard|8:00:00|(null)\ngpu_a100|1-12:00:00|gpu:2\n"
TYPED = (
    "cpu|1-00:00:00|(null)\ngpu|2-00:00:00|gpu:a100:4(S:0-1)\ngpu|2-00:00:00|gpu:v100:2,mps:200\nlong|infinite|(null)\n"
)
CONS_TRES = "ClusterName             = site\nSelectType              = select/cons_tres\n"
CONS_RES = "SelectType              = select/cons_res\nSelectTypeParameters    = CR_CORE\n"
TRAIN = {"threads": 4, "mem_mb": 1000, "runtime": 60}


def resources(partitions: dict, max_runtime: int = 480, **train) -> dict:
    return {"max_runtime": max_runtime, "partitions": partitions, "train": {**TRAIN, "gpu": 1, **train}}


def test_the_site_is_read_from_sinfo_and_scontrol():
    site = read_site(TYPED, CONS_TRES)
    assert site.select_type == "select/cons_tres"
    assert site.partitions["gpu"] == Partition(2880, {"a100": 4, "v100": 2})
    assert site.partitions["cpu"] == Partition(1440, {}) and site.partitions["long"].minutes == math.inf
    assert node_gpus("gpu:tesla:2(S:0,1),gpu:1") == {"tesla": 2, None: 1} and node_gpus("(null)") == {}
    assert read_site("", "").partitions == {} and read_site("garbage\n", "").select_type == ""


def test_slurm_time_limits_in_minutes():
    assert [slurm_minutes(t) for t in ("1-12:00:00", "30:00", "2:00:00", "7-00:00:00")] == [2160, 30, 120, 10080]
    assert slurm_minutes("infinite") == math.inf


@pytest.mark.parametrize(
    ("sinfo", "config", "asked", "longest"),
    [
        (UNTYPED, CONS_TRES, resources({"cpu": "standard", "gpu": "gpu_a100"}, 2160), 2160),
        (UNTYPED, CONS_RES, resources({"cpu": "standard", "gpu": "gpu_a100"}, 2160, gpu=0, gres="gpu:2"), 60),
        (TYPED, CONS_TRES, resources({"cpu": "cpu", "gpu": "gpu"}, 2880, gpu_model="v100", gpu=2), 60),
        (TYPED, CONS_TRES, resources({"cpu": "long", "gpu": "gpu"}, 10**6, gpu=0), 10**5),  # a CPU job
        (TYPED, CONS_TRES, resources({"cpu": None, "gpu": None}, 10**6), 10**5),  # default partitions: not asked
    ],
)
def test_a_plan_the_site_can_schedule_passes(sinfo, config, asked, longest):
    check_site(asked, longest, read_site(sinfo, config))


@pytest.mark.parametrize(
    ("sinfo", "config", "asked", "message"),
    [
        # P2: the shipped cap on a 36 h site: the first attempts fit, a retry asks 2,880 min
        (
            UNTYPED,
            CONS_TRES,
            resources({"cpu": "standard", "gpu": "gpu_a100"}, 2880),
            "resources.max_runtime is 2880 min, over partition gpu_a100's MaxTime of 2160 min",
        ),
        (
            UNTYPED,
            CONS_TRES,
            resources({"cpu": "standard", "gpu": "gpus"}),
            "resources.partitions.gpu is 'gpus', which this cluster does not have; its partitions: gpu_a100, standard",
        ),
        (UNTYPED, CONS_TRES, resources({"cpu": "cpu", "gpu": "gpu_a100"}), "resources.partitions.cpu is 'cpu'"),
        # P6: training on CPUs (gpu: 0) goes to the CPU partition: its MaxTime is the cap
        (
            UNTYPED,
            CONS_TRES,
            resources({"cpu": "standard", "gpu": "gpu_a100"}, 2160, gpu=0),
            "over partition standard's MaxTime of 480 min",
        ),
        # P3: a GPU type on untyped GPUs, in either spelling; a type the nodes lack
        (
            UNTYPED,
            CONS_TRES,
            resources({"cpu": "standard", "gpu": "gpu_a100"}, gpu_model="a100"),
            "resources.train.gpu_model asks for GPU type 'a100', which partition gpu_a100's nodes lack; they are "
            "untyped: remove gpu_model",
        ),
        (
            UNTYPED,
            CONS_TRES,
            resources({"cpu": "standard", "gpu": "gpu_a100"}, gpu=0, gres="gpu:a100:1"),
            "resources.train.gres asks for GPU type 'a100'",
        ),
        (TYPED, CONS_TRES, resources({"cpu": "cpu", "gpu": "gpu"}, gpu_model="h100"), "its types: a100, v100"),
        # P3: --gpus on select/cons_res
        (
            UNTYPED,
            CONS_RES,
            resources({"cpu": "standard", "gpu": "gpu_a100"}),
            'refuses: write resources.train.gres: "gpu:1" instead of gpu',
        ),
        # there, the gres it is told to write asks for a type the nodes have: a missing type is named first
        (
            UNTYPED,
            CONS_RES,
            resources({"cpu": "standard", "gpu": "gpu_a100"}, gpu_model="a100"),
            "resources.train.gpu_model asks for GPU type 'a100', which partition gpu_a100's nodes lack",
        ),
        (
            TYPED,
            CONS_RES,
            resources({"cpu": "cpu", "gpu": "gpu"}, 2880, gpu_model="a100"),
            'refuses: write resources.train.gres: "gpu:a100:1" instead of gpu and gpu_model',
        ),
        (
            UNTYPED,
            CONS_TRES,
            resources({"cpu": "standard", "gpu": "standard"}),
            "resources.partitions.gpu is 'standard', whose nodes have no GPUs",
        ),
        (
            TYPED,
            CONS_TRES,
            resources({"cpu": "cpu", "gpu": "gpu"}, 2880, gpu_model="v100", gpu=4),
            "resources.train.gpu asks for 4 GPUs, more than a node of partition gpu has (2)",
        ),
    ],
)
def test_what_the_site_would_refuse_is_one_line_naming_the_key(sinfo, config, asked, message):
    with pytest.raises(InputError, match="^[^\n]*$") as refused:
        check_site(asked, 60, read_site(sinfo, config))
    assert message in str(refused.value)


def test_the_longest_first_attempt_over_the_partition_names_the_cap():
    site = read_site(UNTYPED, CONS_TRES)
    with pytest.raises(InputError, match="a gpu job asks for 2200 min, over partition gpu_a100's MaxTime of 2160 min"):
        check_site(resources({"cpu": "standard", "gpu": "gpu_a100"}, 2160), 2200, site)
