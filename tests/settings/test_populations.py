"""Named populations and client classes: a preset expands to exactly its documented settings, a given
setting wins, and classes split the clients in proportion, each class's draws its own."""

import re
from pathlib import Path

import numpy as np
import pytest

from asyncfl.settings.classes import class_counts, parse_classes
from asyncfl.settings.config import TrainConfig, make_config
from asyncfl.settings.errors import InputError
from asyncfl.settings.populations import POPULATIONS
from asyncfl.sim.client_system import ClientSystem
from asyncfl.sim.engine import Simulation
from asyncfl.sim.network import Links
from engine_cases import contiguous_partition, tiny_dataset

README = Path(__file__).resolve().parents[2] / "docs/settings.md"


def documented() -> dict[str, dict[str, str]]:
    """docs/settings.md's Populations table: each preset's `key: value` items, as text."""
    rows = re.findall(r"^\| `(\w+)` \| (`.*?`) \| ", README.read_text(), flags=re.MULTILINE)
    return {name: dict(item.split(": ", 1) for item in re.findall(r"`([^`]+)`", cells)) for name, cells in rows
            if name in POPULATIONS}  # fmt: skip


@pytest.mark.parametrize("name", sorted(POPULATIONS))
def test_a_preset_expands_to_exactly_its_documented_settings(name):
    config, defaults = make_config({"population": name}), TrainConfig()
    table = documented()[name]
    assert set(table) == set(POPULATIONS[name])
    for key, value in POPULATIONS[name].items():
        assert getattr(config, key) == value and str(value) == table[key], key
    changed = {key for key in vars(defaults) if getattr(config, key) != getattr(defaults, key)}
    assert "population" in changed and changed <= set(POPULATIONS[name]) | {"population"}  # nothing else moves


def test_a_setting_beside_a_preset_wins_and_is_recorded():
    config = make_config({"population": "edge", "upload_fraction": 0.5, "seed": 3})
    assert config.upload_fraction == 0.5 and config.speed_classes == "1:1,1:1.81,1:11.6"
    with pytest.raises(InputError, match="population must be one of cross_silo, edge, mobile, queueing, got 'moon'"):
        make_config({"population": "moon"})


def test_classes_split_the_clients_by_largest_remainder():
    assert class_counts([1, 1, 1], 10) == [4, 3, 3]  # ties to the earlier class
    assert class_counts([1, 2], 10) == [3, 7]
    assert class_counts([1, 1.81, 11.6], 3) == [0, 0, 3]
    assert parse_classes("1:150-600, 2:20", "link_classes")[1].high == 20.0
    for text, message in (("1:x", "is not SHARE:VALUE"), ("1:5-2", "low ≤ high"), ("0:1", "> 0")):
        with pytest.raises(InputError, match=message):
            make_config({"speed_classes": text})


def test_class_values_in_every_syntax_a_user_writes():
    """An exponent's `-` once read as a range: `1:1e-6`, the documented bandwidth floor, was "not numbers"."""
    assert parse_classes("1:1e-6", "link_classes")[0].low == 1e-6
    assert parse_classes(" +2 : 1E-3 - 2e+1 ,.5:3.", "link_classes") == (
        parse_classes("2:0.001-20", "link_classes")[0], parse_classes("0.5:3", "link_classes")[0]
    )  # fmt: skip
    for text in ("1:inf", "1:nan", "nan:1", "1:1e-6-inf", "1:-1", "1:2--3", "1:1e", "1:"):
        with pytest.raises(InputError, match="is not SHARE:VALUE or SHARE:LOW-HIGH"):
            parse_classes(text, "link_classes")


def test_edge_devices_compute_at_their_classes_times_and_links_stay_in_their_ranges():
    config = make_config({"population": "edge", "seed": 1})
    system = ClientSystem.draw(config, 30, model_bytes=1000)
    assert sorted(set(np.round(1 / system.speed, 9))) == [1.0, 1.81, 11.6]
    assert [int(np.sum(np.isclose(1 / system.speed, f))) for f in (1.0, 1.81, 11.6)] == [10, 10, 10]
    links = Links.draw(config, system.speed, 1000)
    assert links is not None
    megabits = links.down / 1e6
    assert np.all((megabits >= 20) & (megabits <= 1000)) and np.allclose(links.up, 0.7 * links.down)
    other = ClientSystem.draw(make_config({"population": "edge", "seed": 2}), 30)
    assert not np.array_equal(other.speed, system.speed)  # the classes' members come from the seed


def test_link_classes_and_a_median_bandwidth_are_one_or_the_other():
    with pytest.raises(InputError, match="link_classes and bandwidth_median both set the links"):
        make_config({"link_classes": "1:10", "bandwidth_median": 5.0})


@pytest.mark.parametrize("name", sorted(POPULATIONS))
def test_each_population_trains_and_repeats_exactly(tmp_path, name):
    sizes = [4, 8, 12, 8, 6, 10]
    settings = {"population": name, "clients_per_round": 2, "rounds": 4, "local_epochs": 1, "batch_size": 4}
    for run in ("a", "b"):
        Simulation(make_config(settings), tiny_dataset(sum(sizes)), contiguous_partition(sizes), tmp_path / run).run()
    for file in ("metrics.csv", "events.csv", "model.pt"):
        assert (tmp_path / "a" / file).read_bytes() == (tmp_path / "b" / file).read_bytes(), file


def test_the_fast_profile_is_bf16_and_channels_last_and_a_given_setting_wins():
    """A speed profile is a preset like a population: expanded first, a setting beside it wins, a name
    not offered is refused in one line; off by default (fp32, the paper's numerics)."""
    assert make_config({}).profile is None and make_config({}).precision == "fp32"
    fast = make_config({"profile": "fast"})
    assert (fast.precision, fast.channels_last) == ("bf16", True)
    assert make_config({"profile": "fast", "channels_last": False}).channels_last is False
    with pytest.raises(InputError, match="profile must be one of fast, got 'turbo'"):
        make_config({"profile": "turbo"})


def test_a_fast_run_repeats_exactly_and_differs_from_fp32(tmp_path):
    """bf16 changes the numbers (or the profile would do nothing) and stays deterministic."""
    sizes = [8, 8, 12, 12]
    settings = {"model": "cnn", "clients_per_round": 2, "rounds": 3, "local_epochs": 1, "batch_size": 4}
    for run, profile in (("fast", "fast"), ("again", "fast"), ("fp32", None)):
        config = make_config({**settings, "profile": profile})
        Simulation(config, tiny_dataset(sum(sizes)), contiguous_partition(sizes), tmp_path / run).run()
    model = {run: (tmp_path / run / "model.pt").read_bytes() for run in ("fast", "again", "fp32")}
    assert model["fast"] == model["again"] and model["fast"] != model["fp32"]


@pytest.mark.parametrize(
    ("settings", "message"),
    [  # P10, PD50: a preset's classes named as the population's, never as the user's own setting
        ({"population": "mobile", "bandwidth_median": 5.0}, "population mobile's link_classes and bandwidth_median"),
        ({"population": "mobile", "class_draw": "probability"},
         r"the shares of population mobile's link_classes sum to 2, .*; give the classes yourself, or use"),
        ({"population": "edge", "class_draw": "probability"}, "the shares of population edge's speed_classes sum"),
        ({"population": "mobile", "upload_seconds": "1:2"}, "upload_seconds gives the transfers' times and "
         "population mobile's link_classes their bandwidths"),
        ({"link_classes": "1:5,1:10", "class_draw": "probability"}, "the shares of link_classes sum to 2, .*; rescale"),
    ],
)  # fmt: skip
def test_a_line_names_a_presets_setting_as_the_presets(settings, message):
    with pytest.raises(InputError, match=message):
        make_config(settings)


@pytest.mark.parametrize(
    ("settings", "message"),
    [  # LC04, LC11, LC14: links too slow for the upload bound, blamed on what set them
        ({"link_classes": "1:1e-9"}, r"with link_classes = '1:1e-9' \(Mbit/s\) .*; raise the slowest class"),
        ({"link_classes": "1:1e-9-1", "transfer_draws": "per_dispatch"}, r"with link_classes = '1:1e-9-1'"),
        ({"bandwidth_median": 1e-6, "bandwidth_follows_speed": True, "upload_fraction": 1e-6},
         "bandwidth_median = 1e-06 Mbit/s following each client's speed .*; raise bandwidth_median or upload_fraction"),
        ({"bandwidth_median": 1e-6, "upload_fraction": 1e-6},
         "bandwidth_sigma = 0.5 and upload_fraction = 1e-06, .*; .* or lower bandwidth_sigma"),
    ],
)  # fmt: skip
def test_links_too_slow_to_upload_name_what_set_them(settings, message):
    config = make_config(settings)
    with pytest.raises(InputError, match=message) as raised:
        Links.draw(config, ClientSystem.draw(config, 10).speed, 220_840)
    assert "bandwidth_median = None" not in str(raised.value)
