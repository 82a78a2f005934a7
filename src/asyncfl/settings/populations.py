"""Named presets of plain settings: populations (`population: …`; docs/settings.md "Populations") and
speed profiles (`profile: …`). Each population is a preset of plain settings, every number with its
source or marked as the project's choice. A preset is expanded into
its settings before a run's settings are checked and its identity taken, so run.json records the
settings, beside the population's name; a setting given beside a preset wins and is recorded.
"""

from typing import Any

from asyncfl.settings.errors import InputError

POPULATIONS: dict[str, dict[str, Any]] = {
    # Cross-silo: a few institutions, equal, fast, always online (the project's choice of numbers: equal
    # compute, 50 ms latency, 1 Gbit/s links both ways)
    "cross_silo": {
        "speed_distribution": "constant",
        "latency_distribution": "constant",
        "latency_median": 0.05,
        "link_classes": "1:1000",
        "upload_fraction": 1.0,
    },
    # Edge devices as AFL-Lib models them (utils/sys_utils.py): Jetson TX2, Jetson Nano and Raspberry Pi
    # computing in the time ratio 1 : 1.81 : 11.6, and WiFi (150–600 Mbit/s), 4G (20–100) and 5G
    # (50–1000) links, uniform within each range; equal shares of each class: the project's choice;
    # uplink 0.7 of the downlink (FLASH, Yang et al. 2021)
    "edge": {
        "speed_distribution": "constant",
        "speed_classes": "1:1,1:1.81,1:11.6",
        "link_classes": "1:150-600,1:20-100,1:50-1000",
        "upload_fraction": 0.7,
    },
    # Mobile phones after FedScale (Lai et al. 2022, client_metadata.py): compute time per sample 5 ms ×
    # a lognormal factor of μ = 1, σ = 0.6 (median 5·e ms = 13.6 ms at speed 1); WiFi or 4G links (AFL-Lib's
    # ranges; half each: the project's choice), uplink 0.7 of the downlink (FLASH); a day's rhythm with
    # Bonawitz et al. 2019's 4× swing, online a quarter of the time in half-hour periods (the project's
    # choice); 8 % of dispatches failing (Bonawitz et al. 2019: 6–10 % drop out per round; the middle)
    "mobile": {
        "speed_distribution": "lognormal",
        "speed_sigma": 0.6,
        "seconds_per_sample": 0.0136,
        "link_classes": "1:150-600,1:20-100",
        "upload_fraction": 0.7,
        "availability": "diurnal",
        "online_mean": 1800.0,
        "offline_mean": 5400.0,
        "diurnal_swing": 4.0,
        "failure_probability": 0.08,
    },
    # The queueing model of asynchronous FL (e.g. Alahyane et al. 2025): each client an exponential server
    # of its own rate, every dispatch's compute time exponential around its client's mean
    # (`jitter_distribution`), no latency besides; three classes of clients in the proportions 0.5, 0.3 and
    # 0.2 computing 1, 3 and 10 times slower: the project's choice, a heavy tail like the straggler claim's
    "queueing": {
        "speed_distribution": "constant",
        "speed_classes": "0.5:1,0.3:3,0.2:10",
        "jitter_distribution": "exponential",
        "latency_distribution": "constant",
        "latency_median": 0.0,
    },
}
POPULATION_NAMES = tuple(POPULATIONS)


# Speed profiles (`profile: …`): a preset of the machine's settings. `fast`: bfloat16 autocast and
# channels_last, 1.73× on resnet20's paper round on an H100 (docs/gpu.md "On a GPU"); its
# accuracy cost in docs/gpu.md "The fast profile's cost". Not the paper's numerics: fp32 stays
# the default
PROFILES: dict[str, dict[str, Any]] = {"fast": {"precision": "bf16", "channels_last": True}}
PRESETS = {"population": POPULATIONS, "profile": PROFILES}  # the settings that name a preset


def with_presets(values: dict[str, Any], source: str) -> dict[str, Any]:
    """`values` with each named preset's settings under them (the given settings win); unchanged without."""
    expanded = dict(values)
    for key, presets in PRESETS.items():
        name = values.get(key)
        if name is None:
            continue
        if not isinstance(name, str) or name not in presets:
            raise InputError(f"{source}: {key} must be one of {', '.join(presets)}, got {name!r}")
        expanded = {**presets[name], **expanded}
    return expanded
