"""`asyncfl bench --together`: runs stepped together measured against one alone from their own round
walls, and the sweep's hours with its jobs of several runs stepped together."""

import pytest
import torch

from asyncfl.bench.paper_round import PAPER_SHAPES, load_sweep
from asyncfl.bench.scale import check_scales
from asyncfl.bench.together import sweep_projection, together_row
from asyncfl.cli import main
from asyncfl.settings.errors import InputError
from conftest import REPO

SWEEP = REPO / "config" / "config.yaml"


def test_a_together_row_times_every_runs_training_rounds_and_fills_one_call_with_all_runs():
    (mlp,) = [shape for shape in PAPER_SHAPES if shape.model == "mlp"]
    row = together_row(mlp, 3, torch.device("cpu"), "auto", None, quick=True)
    assert len(row["round_walls_alone"]) == 2 and len(row["round_walls_together"]) == 3 * 2
    assert row["largest_call"] == 3 * 5  # every run's J = 5 first dispatches in one call
    expected = 3 * row["seconds_per_round_alone"] / row["seconds_per_round_together"]
    assert row["gain"] == pytest.approx(expected, rel=1e-2) and row["profile"] == "fp32"


def test_the_updates_stepped_together_are_those_of_jobs_of_at_least_that_many_runs():
    every = load_sweep(SWEEP, together=1)
    assert every["together"] == {m: every["runs"].get(m, 0) + every["tuning"].get(m, 0) for m in every["together"]}
    assert load_sweep(SWEEP, together=10**6)["together"] == {}
    severities = load_sweep(SWEEP, together=2)["together"]  # the straggler sweeps' jobs, 18 runs each
    assert 0 < sum(severities.values()) < sum(every["together"].values())


def test_the_projection_divides_only_the_updates_stepped_together_by_the_gain():
    rows = [
        {"model": shape.model, "samples_per_client": shape.samples, "seconds_per_round_alone": 0.5, "gain": 2.0}
        for shape in PAPER_SHAPES
    ]
    projection = sweep_projection(rows, SWEEP, 2)
    updates = projection["sweep_client_updates"]
    for model in ("cnn", "resnet20"):
        total = updates["runs"][model] + updates["tuning"].get(model, 0)
        per_update = 0.5 * 10 / 5 / 3600  # I = 1 → the paper's I = 10; a round is J = 5 updates
        stepped = updates["together"][model]
        assert projection["device_hours_alone"][model] == pytest.approx(total * per_update, abs=0.01)
        assert projection["device_hours_together"][model] == pytest.approx((total - stepped / 2) * per_update, abs=0.01)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--together", "1"], "must be an integer ≥ 2"),
        (["--together", "300"], "must be ≤ 256"),
        (["--together", "4", "--profile", "turbo"], "invalid choice: 'turbo'"),
    ],
)
def test_bad_together_arguments_are_one_line(argv, message, capsys):
    with pytest.raises(SystemExit):
        main(["bench", *argv])
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--profile", "fast", "--engine", "--quick"], "--profile does nothing for --engine: only --together read"),
        (["--sweep", "config/config.yaml", "--engine", "--quick"], "--sweep does nothing for --engine"),
        (["--scales", "300"], "--scales does nothing for the trainers' speeds (no flag): only --engine read it"),
        (["--costs", "c.csv", "--json", "r.json"], "--json does nothing for --costs"),
        (["--profile-cost", "2", "--quick"], "--quick does nothing for --profile-cost"),
        (["--engine", "--together", "4"], "--engine and --together are separate measurements"),
        (["--profile", "fast"], "--profile does nothing for the trainers' speeds (no flag)"),
    ],
)
def test_an_option_the_measurement_does_not_read_is_refused_naming_both(argv, message, capsys):
    """Every bench option is read by some measurements only (`cli.benchmark.READS`): given to another it
    would be dropped without a word (BN12, BN13), so it is one line before anything is measured."""
    assert main(["bench", *argv]) == 1
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--engine", "--scales", "1"], "--scales 1: the engine's rows dispatch J = 100 clients at once"),
        (["--engine", "--scales", "1000", "50"], "--scales 50: the engine's rows dispatch J = 100"),
        (["--engine", "--quick", "--scales", "1000000000"], r"--scales 1000000000: a row needs about 100.3 GB"),
    ],
)
def test_engine_rows_that_cannot_run_here_are_one_line_before_any_runs(argv, message, capsys):
    """`--scales 1` once ended in a traceback after the first rows; 10^9 clients were admitted with no memory
    check (about 100 GB) and ended in numpy's allocation error."""
    assert main(["bench", *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_the_memory_check_counts_what_a_row_holds():
    check_scales((10_000_000,), available=4e9)  # images: 0.3 GB + 3 GB
    with pytest.raises(InputError, match="a row needs about 3.3 GB .* more than the 3.0 GB"):
        check_scales((10_000_000,), available=3e9)
    with pytest.raises(InputError, match=r"about 10.3 GB \(100 bytes a client holding sizes"):
        check_scales((100_000_000,), available=4e9)  # the documented 10^8 under a 4 GB limit
