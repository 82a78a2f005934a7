"""A day's rhythm (`availability: diurnal`): the population's online share swings by `diurnal_swing`
over 24 virtual hours, each client's periods its own, and a swing no share can reach refused."""

import math

import numpy as np
import pytest

from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.sim.availability import Availability
from asyncfl.sim.engine import Simulation
from asyncfl.sim.periods import DAY
from engine_cases import contiguous_partition, tiny_dataset

# Online for half an hour on average, offline for 1.5 h: online a quarter of the time over a day
DIURNAL = {"availability": "diurnal", "online_mean": 1800.0, "offline_mean": 5400.0}


def cycle(shares: np.ndarray, times: np.ndarray) -> tuple[float, float]:
    """The mean and amplitude of the daily cosine that fits the shares (least squares)."""
    angle = 2 * math.pi * times / DAY
    design = np.column_stack([np.ones_like(times), np.cos(angle), np.sin(angle)])
    (mean, cosine, sine), *_ = np.linalg.lstsq(design, shares, rcond=None)
    return float(mean), float(math.hypot(cosine, sine))


@pytest.mark.parametrize("swing", [4.0, 2.0])
def test_the_population_swings_by_the_setting_over_a_simulated_week(swing):
    """1,500 clients sampled every 10 virtual minutes for 7 days: the fitted daily cycle's peak over its
    trough is `diurnal_swing` (Bonawitz et al.'s 4× by default) within 10 %, its mean the share of
    online_mean / (online_mean + offline_mean), its peak at the clock's start (the population's night)."""
    availability = Availability.of(make_config({**DIURNAL, "diurnal_swing": swing}), 1500)
    assert availability is not None
    clients = np.arange(1500)
    times = np.arange(0.0, 7 * DAY, 600.0)
    shares = np.array([availability.online_mask(clients, t).mean() for t in times])
    mean, amplitude = cycle(shares, times)
    assert (mean + amplitude) / (mean - amplitude) == pytest.approx(swing, rel=0.1)
    assert mean == pytest.approx(0.25, rel=0.05)
    by_hour = shares.reshape(7, 24, 6).mean(axis=(0, 2))
    assert by_hour.argmax() in (23, 0, 1) and by_hour.argmin() in (11, 12, 13)


def test_periods_do_not_depend_on_the_order_they_are_asked_for():
    config = make_config({**DIURNAL, "seed": 4})
    far, near = Availability.of(config, 3), Availability.of(config, 3)
    assert far is not None and near is not None
    far.is_online(2, 3 * DAY)
    answers = [(near.is_online(2, t), near.online_until(2, t)) for t in np.arange(0.0, 3 * DAY, 997.0)]
    assert answers == [(far.is_online(2, t), far.online_until(2, t)) for t in np.arange(0.0, 3 * DAY, 997.0)]


def test_a_swing_no_share_can_reach_is_refused_in_one_line():
    config = make_config({**DIURNAL, "offline_mean": 1800.0})  # online half the time: a 4× swing peaks at 0.8
    assert Availability.of(config, 2) is not None
    too_much = make_config({**DIURNAL, "offline_mean": 600.0})  # online 75 %: its peak would pass 1
    with pytest.raises(InputError, match="needs an online share at the peak below 1") as raised:
        Availability.of(too_much, 2)
    assert len(str(raised.value).splitlines()) == 1
    with pytest.raises(InputError, match="diurnal_swing applies only with availability: diurnal"):
        make_config({"diurnal_swing": 3.0})


def test_a_swing_below_zero_at_night_is_not_blamed_on_the_means():
    """A wide spread flattens the population's cycle; a swing that still needs an amplitude above the
    mean would take the share below 0 at night: no offline_mean helps (once the advice given)."""
    config = make_config({**DIURNAL, "offline_mean": 1e6, "diurnal_swing": 1000.0, "diurnal_spread": 11.0})
    with pytest.raises(InputError, match="below 0 at night; lower diurnal_swing or diurnal_spread") as raised:
        Availability.of(config, 2)
    assert "raise offline_mean" not in str(raised.value)


def test_a_diurnal_run_trains_and_repeats_exactly(tmp_path):
    sizes = [4, 8, 12, 8, 6, 10]
    settings = {**DIURNAL, "clients_per_round": 2, "rounds": 6, "local_epochs": 1, "batch_size": 4,
                "seconds_per_sample": 60.0, "online_mean": 3600.0, "offline_mean": 7200.0}  # fmt: skip
    for name in ("a", "b"):
        Simulation(make_config(settings), tiny_dataset(sum(sizes)), contiguous_partition(sizes), tmp_path / name).run()
    for name in ("metrics.csv", "events.csv", "model.pt"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
