"""Figures from CSVs: every file, for runs laid out as the workflow lays them out."""

import csv
import hashlib
import json

import numpy as np
import pytest

from asyncfl.analysis.figures import draw_figures, heading, load_partitions, load_runs
from asyncfl.analysis.gradient_panels import fitted_slope
from asyncfl.analysis.panels import participation_table
from asyncfl.runs.logs import EVENTS_COLUMNS, METRICS_COLUMNS
from asyncfl.runs.record import FORMAT_KEY, RUN_FOLDER_FORMAT
from asyncfl.settings.catalogue import CATALOGUE, Scope, scope_figures
from asyncfl.settings.errors import InputError
from asyncfl.settings.integrity import sealed
from conftest import REPO

METRICS = ",".join(METRICS_COLUMNS) + "\n"
EVENTS = ",".join(EVENTS_COLUMNS) + "\n"


PARTITION = b"the partition's .npz, as far as the figures are concerned"
PARTITION_SHA = hashlib.sha256(PARTITION).hexdigest()


def write_run(folder, speed: float, seed: int):
    folder.mkdir(parents=True)
    gradient = ",{},{}"  # the global model's training loss and squared gradient norm, at evaluations only
    rows = [
        f"{r},{r * speed},{2 / r},{2.2 / r},{min(0.95, 0.1 * r + 0.01 * seed)},0.5,1,0.1,0.001"
        + (gradient.format(2.1 / r, r**-0.5) if r % 2 == 0 else ",,")
        for r in range(1, 11)
    ]
    (folder / "metrics.csv").write_text(METRICS + "\n".join(rows) + "\n")
    events = [f"{r},{(r + c) % 4},{r - 1},0.0,1.0,{c % 2},0.5,0.001,1,10,0.5" for r in range(1, 11) for c in range(2)]
    (folder / "events.csv").write_text(EVENTS + "\n".join(events) + "\n")
    seal(folder)


def seal(folder, **changes) -> None:
    """The run.json a finished run writes beside its CSVs: what the run is (read from the folder the
    fixture puts it in), the partition's SHA-256, the CSVs' hashes and its own."""
    hashes = {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in ("metrics.csv", "events.csv")}
    config = {
        "algorithm": folder.parts[-3],
        "clients_per_round": int(folder.parts[-2][1:]),
        "seed": int(folder.parts[-1][4:]),
    }
    record = {"sha256": hashes, "config": config, "partition_sha256": PARTITION_SHA, "lr_clock": "round"}
    record = {**record, FORMAT_KEY: RUN_FOLDER_FORMAT, **changes}
    (folder / "run.json").write_text(json.dumps(sealed(record)))


def partitions(runs) -> dict:
    return load_partitions([runs / "stats.json"])[1]


def run_folders(runs) -> list:
    return sorted((runs / "runs").glob("*/J*/seed*"))


@pytest.fixture
def runs(tmp_path):
    for seed in (0, 1):
        for algorithm, J, speed in [
            ("afl", 3, 1.0),
            ("afl", 5, 1.0),
            ("sync", 5, 2.0),
            ("fedbuff", 5, 1.2),
            ("afl_as_coded", 5, 2.0),
        ]:
            write_run(tmp_path / "runs" / algorithm / f"J{J}" / f"seed{seed}", speed, seed)
    stats = {
        "dataset": "tiny",
        "clients": 4,
        "alpha": 0.5,
        "seed": 0,
        "class_counts": [[5, 5], [1, 9], [9, 1], [0, 10]],
        "npz_sha256": PARTITION_SHA,
    }
    (tmp_path / "stats.npz").write_bytes(PARTITION)
    (tmp_path / "stats.json").write_text(json.dumps(stats))
    return tmp_path


def test_every_figure_as_png_and_pdf(runs):
    written = draw_figures(run_folders(runs), [runs / "stats.json"], 5, runs / "figures", "tiny")
    expected = {f"{figure.name}.{ext}" for figure in scope_figures(Scope.EXPERIMENT, 5) for ext in ("png", "pdf")}
    assert {p.name for p in written} == expected
    for figure in scope_figures(Scope.EXPERIMENT, 5):  # every panel drew data: colour, where empty axes are grey
        assert coloured_share(runs / "figures" / f"{figure.name}.png", figure.panels) > 0.002, figure.name


def coloured_share(png, panels: int) -> float:
    """The smallest share, over the figure's panels (equal vertical strips), of clearly coloured pixels:
    curves, bars and heatmaps are coloured; grids, text and empty axes are grey."""
    from matplotlib.image import imread

    pixels = imread(png)[..., :3]
    coloured = (pixels.max(axis=2) - pixels.min(axis=2)) > 0.2
    return min(strip.mean() for strip in np.array_split(coloured, panels, axis=1))


def test_the_as_coded_figure_needs_an_as_coded_run(runs):
    emulation = "as_coded_vs_described"
    written = draw_figures(run_folders(runs), [runs / "stats.json"], 5, runs / "figures", "tiny", emulation)
    assert {p.name for p in written} == {f"{emulation}.png", f"{emulation}.pdf"}
    without = [folder for folder in run_folders(runs) if "afl_as_coded" not in folder.parts]
    with pytest.raises(InputError, match="no afl_as_coded run with J = 5"):
        draw_figures(without, [runs / "stats.json"], 5, runs / "figures", "tiny", emulation)


def test_fitted_slope_is_the_log_log_slope_of_the_second_half():
    x = np.arange(1.0, 21.0)
    assert fitted_slope(x, 3 * x**-0.5) == "-0.50"
    assert fitted_slope(x, np.where(x > 10, x**-1.0, 1.0)) == "-1.00"  # the first half is left out
    assert fitted_slope(x[:2], x[:2]).startswith("n/a")  # one point in the second half


def test_reference_j_without_runs_is_an_error(runs):
    with pytest.raises(InputError, match="no AFL run with J = 7"):
        draw_figures(run_folders(runs), [runs / "stats.json"], 7, runs / "figures", "tiny")


def test_no_runs_is_an_error(tmp_path):
    with pytest.raises(InputError, match="no run folders given"):
        draw_figures([], [tmp_path / "stats.json"], 5, tmp_path / "figures", "tiny")


@pytest.mark.parametrize(
    "damage",
    [
        lambda f: (f / "metrics.csv").write_text(""),
        lambda f: (f / "metrics.csv").write_text(METRICS),
        lambda f: (f / "events.csv").write_bytes(bytes(range(256))),
        lambda f: (f / "metrics.csv").write_text((f / "metrics.csv").read_text().replace("0.5,1,", "0.5,2,")),
        lambda f: (f / "events.csv").unlink(),
    ],
    ids=["empty", "header-only", "random-bytes", "edited", "missing"],
)
def test_a_csv_its_run_did_not_write_is_refused_by_name(runs, damage):
    folder = runs / "runs" / "sync" / "J5" / "seed1"
    damage(folder)
    with pytest.raises(InputError, match=r"seed1/(metrics|events)\.csv (is not the file its run wrote|is missing)"):
        draw_figures(run_folders(runs), [runs / "stats.json"], 5, runs / "figures", "tiny")
    assert not (runs / "figures").exists()


def test_only_the_runs_given_are_drawn(runs):
    """A run folder left beside the config's runs (removed from the config) is not drawn."""
    given = [f for f in run_folders(runs) if "fedbuff" not in str(f)]
    metrics = load_runs(given, partitions(runs)).metrics
    assert set(metrics.algorithm) == {"afl", "sync", "afl_as_coded"}


@pytest.mark.parametrize(
    "stats", ["", "[]", '{"clients": 4}', '{"dataset": "x", "clients": 3, "alpha": 1, "seed": 0, "class_counts": []}']
)
def test_bad_partition_stats_are_refused_by_name(runs, stats):
    (runs / "stats.json").write_text(stats)
    with pytest.raises(InputError, match="stats.json is not"):
        draw_figures(run_folders(runs), [runs / "stats.json"], 5, runs / "figures", "tiny")


def test_participation_counts_equal_the_events(runs):
    """The participation figure's points: per algorithm, seed and client, the updates in events.csv."""
    events = load_runs(run_folders(runs), partitions(runs)).events
    table = participation_table(events[events.J == 5])
    for row in table.itertuples():
        path = runs / "runs" / row.algorithm / "J5" / f"seed{row.seed}" / "events.csv"
        with open(path) as stream:
            rows = [r for r in csv.DictReader(stream) if int(r["client"]) == row.client]
        assert row.updates == len(rows)
        assert row.duration == pytest.approx(
            np.mean([float(r["arrival_time"]) - float(r["dispatch_time"]) for r in rows])
        )
    assert table.updates.sum() == len(events[events.J == 5])


def test_updates_axis_counts_the_client_updates_aggregated(runs):
    metrics = load_runs(run_folders(runs), partitions(runs)).metrics
    run = metrics[(metrics.algorithm == "sync") & (metrics.seed == 0)]
    assert run.updates.tolist() == [2 * r for r in run["round"]]  # two events per round in the fixture


def test_every_registered_figure_has_its_caption_its_drawer_and_its_documentation():
    """One catalogue entry registers a figure: its caption, its drawer and its outputs.md line are found by
    its key, and no drawer is left without an entry."""
    import inspect

    from asyncfl.analysis import drawers

    keys = [figure.key for figure in CATALOGUE]
    assert len(set(keys)) == len(keys)
    outputs = (REPO / "docs/outputs.md").read_text()
    for figure in CATALOGUE:
        assert (REPO / "workflow/report" / f"{figure.key}.rst").is_file(), figure.key
        assert f"`{figure.key}" in outputs, figure.key
    drawn = {figure.key for figure in CATALOGUE if figure.scope in (Scope.EXPERIMENT, Scope.EMULATION)}
    functions = {
        name
        for name, function in inspect.getmembers(drawers, inspect.isfunction)
        if function.__module__ == drawers.__name__
    }
    assert functions == drawn
    for key in drawn:
        assert list(inspect.signature(getattr(drawers, key)).parameters) == ["axes", "drawing"], key


def test_a_run_moved_into_another_runs_folder_is_refused(runs):
    """Identity comes from run.json, not the path: FedBuff's files in AFL's folder are not drawn as AFL."""
    import shutil

    target = runs / "runs" / "afl" / "J5" / "seed0"
    shutil.rmtree(target)
    shutil.copytree(runs / "runs" / "fedbuff" / "J5" / "seed0", target)
    with pytest.raises(InputError, match="afl/J5/seed0/run.json records algorithm = 'fedbuff'"):
        draw_figures(run_folders(runs), [runs / "stats.json"], 5, runs / "figures", "tiny")


def test_an_edited_run_record_is_refused(runs):
    """run.json vouches for itself: a config edited by hand, hashes of the outputs left intact, is refused."""
    record = runs / "runs" / "sync" / "J5" / "seed1" / "run.json"
    content = json.loads(record.read_text())
    content["config"]["seed"] = 1  # the same value: only the text's own hash can tell an edit
    content["lr_clock"] = "epoch"
    record.write_text(json.dumps(content))
    with pytest.raises(InputError, match="does not match its own record_sha256"):
        draw_figures(run_folders(runs), [runs / "stats.json"], 5, runs / "figures", "tiny")
    record.write_text(json.dumps({k: v for k, v in content.items() if k != "record_sha256"}))
    with pytest.raises(InputError, match="has no record_sha256"):
        draw_figures(run_folders(runs), [runs / "stats.json"], 5, runs / "figures", "tiny")


def test_a_run_folder_of_an_older_format_is_refused_in_one_line(runs):
    """Before format 2, events.csv called the aggregation coefficient `weight`: such a folder, sealed and
    intact, is refused by name with what to do, never read with a missing column."""
    folder = runs / "runs" / "sync" / "J5" / "seed1"
    events = (folder / "events.csv").read_text().replace("coefficient", "weight", 1)
    (folder / "events.csv").write_text(events)
    seal(folder, **{FORMAT_KEY: 1})
    with pytest.raises(InputError, match=r"sync/J5/seed1/run.json is a run folder of format 1.*train it again") as e:
        draw_figures(run_folders(runs), [runs / "stats.json"], 5, runs / "figures", "tiny")
    assert len(str(e.value).splitlines()) == 1


def test_statistics_of_another_partition_are_refused(runs):
    """A partition's .json records its .npz's SHA-256: one left beside another .npz is refused, and so is
    a run trained on a partition none of the statistics describes."""
    (runs / "stats.npz").write_bytes(b"another partition")
    with pytest.raises(InputError, match="does not describe the .*stats.npz beside it"):
        draw_figures(run_folders(runs), [runs / "stats.json"], 5, runs / "figures", "tiny")
    (runs / "stats.npz").write_bytes(PARTITION)
    seal(runs / "runs" / "sync" / "J5" / "seed1", partition_sha256="0" * 64)
    with pytest.raises(InputError, match="sync/J5/seed1 was trained on a partition none of --partition-stats"):
        draw_figures(run_folders(runs), [runs / "stats.json"], 5, runs / "figures", "tiny")


def test_a_folder_given_twice_counts_once_and_a_copy_is_refused(runs):
    """Overlapping globs give a folder several times: it is drawn once. Two folders holding one run are refused."""
    import shutil

    once = load_runs(run_folders(runs), partitions(runs)).metrics
    thrice = load_runs(run_folders(runs) * 3, partitions(runs)).metrics
    assert thrice.equals(once)
    copy = runs / "copy" / "sync" / "J5" / "seed1"
    shutil.copytree(runs / "runs" / "sync" / "J5" / "seed1", copy)
    with pytest.raises(InputError, match="hold the same run"):
        load_runs([*run_folders(runs), copy], partitions(runs))


def timing_only(folder) -> None:
    """The run's record as a timing-only run's (`trainer: none`)."""
    config = {
        "algorithm": folder.parts[-3],
        "clients_per_round": int(folder.parts[-2][1:]),
        "seed": int(folder.parts[-1][4:]),
    }
    seal(folder, config={**config, "trainer": "none"})


def test_timing_only_runs_draw_the_clocks_figures_and_a_mix_is_refused(runs):
    folders = run_folders(runs)
    timing_only(folders[0])
    with pytest.raises(InputError, match="mixes timing-only runs .trainer: none. with trained ones"):
        draw_figures(folders, [runs / "stats.json"], 5, runs / "figures", "tiny")
    for folder in folders[1:]:
        timing_only(folder)
    written = draw_figures(folders, [runs / "stats.json"], 5, runs / "figures", "tiny")
    timing = scope_figures(Scope.EXPERIMENT, 5, timing_only=True)
    assert {p.name for p in written} == {f"{figure.name}.{ext}" for figure in timing for ext in ("png", "pdf")}
    assert {figure.key for figure in timing} == {
        "client_selection", "participation", "staleness_distribution", "partition_heatmap", "system_timeline"
    }  # fmt: skip
    with pytest.raises(InputError, match="compares losses, and the runs are timing-only"):
        draw_figures(folders, [runs / "stats.json"], 5, runs / "figures", "tiny", "as_coded_vs_described")


def test_every_algorithm_has_a_colour_of_its_own():
    """seaborn's colourblind palette has ten colours and cycles past them: the eleventh algorithm (CA2FL)
    was drawn in AFL's blue, the same line in every curve and legend."""
    from asyncfl.analysis.panels import ALGORITHM_COLOURS
    from asyncfl.settings.names import ALGORITHMS

    assert set(ALGORITHM_COLOURS) == set(ALGORITHMS)
    assert len(set(ALGORITHM_COLOURS.values())) == len(ALGORITHMS)


def test_every_run_name_of_a_sweep_has_a_colour_of_its_own():
    """The claim's four synchronous run names were all sync's orange, told apart by the dash alone: each
    name now has its own colour, an algorithm's own runs keep the algorithm's."""
    from asyncfl.analysis.panels import ALGORITHM_COLOURS
    from asyncfl.analysis.run_styles import run_colours

    names = ["afl", "afl-m13", "fedasync", "fedbuff", "fadas", "ca2fl", "sync", "sync-over30", "sync-deadline"]
    colours = run_colours([*names, "sync-partial"])
    assert len(set(colours.values())) == len(colours) == 10
    assert all(colours[name] == ALGORITHM_COLOURS[name] for name in ("afl", "sync", "ca2fl", "fadas"))
    assert run_colours(names) == {name: colours[name] for name in names}  # a name's colour: the names before it


def test_a_figure_without_an_experiment_title_starts_with_its_own():
    """Without --title a figure's suptitle began ": …" (the hostile check of 2026-12-07)."""
    assert heading("", "The claim at a glance") == "The claim at a glance"
    assert heading("digits", "The claim at a glance") == "digits: The claim at a glance"
