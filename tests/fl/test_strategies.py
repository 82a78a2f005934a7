"""The algorithms as objects: one registry, what each answers, and aggregation through the pure functions."""

import dataclasses
import sys
import types

import pytest
import torch

from asyncfl.fl import algorithms
from asyncfl.fl.aggregation import staleness_aware_average
from asyncfl.fl.algorithms import declared_settings, make_strategy, strategy_class
from asyncfl.fl.algorithms.fedasync import fedasync_update
from asyncfl.fl.algorithms.fedbuff import fedbuff_update
from asyncfl.fl.server_optimizer import ServerOptimizerParameters
from asyncfl.fl.strategy import AsyncParameters, Strategy, Update
from asyncfl.settings.algorithms import CATALOGUE, check_catalogue
from asyncfl.settings.config import (
    DEFAULTS,
    SETTING_READERS,
    SHARED_SETTINGS,
    TRAINING_ONLY,
    TrainConfig,
    applies,
    make_config,
    with_declared_settings,
)
from asyncfl.settings.errors import InputError
from asyncfl.settings.names import ALGORITHMS, SERVER_OPTIMIZER_OF, UPDATES_PER_ROUND
from asyncfl.settings.rules import POSITIVE, Group, setting


def state(value: float) -> dict[str, torch.Tensor]:
    return {"w": torch.full((2,), value), "n": torch.tensor(int(value))}


def test_every_catalogue_line_finds_its_strategy_and_a_declared_setting_joins_the_config():
    """An algorithm is its file and its catalogue line: the line's `strategy` names a `Strategy` in
    `fl/algorithms/`, and a setting declared on the file's `Parameters` is a config key that algorithm
    alone reads, refused for another, with the rule and default it was declared with."""
    for algorithm in ALGORITHMS:
        assert issubclass(strategy_class(algorithm), Strategy), algorithm
    assert strategy_class("fadas") is strategy_class("fedbuff") and strategy_class("fedavgm") is strategy_class("sync")
    declared = declared_settings()
    assert {"staleness_window", "fedac_lr", "port_staleness_bound"} <= set(declared)
    owner, item = declared["port_staleness_bound"]
    assert owner.__module__ == "asyncfl.fl.algorithms.port" and SETTING_READERS["port_staleness_bound"] == ("port",)
    assert DEFAULTS["port_staleness_bound"] == item.default == 10 and "port_staleness_bound" in TRAINING_ONLY
    assert make_config({"algorithm": "port", "port_staleness_bound": 3}).port_staleness_bound == 3
    with pytest.raises(InputError, match="port_staleness_bound does not apply to algorithm fedbuff"):
        make_config({"algorithm": "fedbuff", "port_staleness_bound": 3})
    with pytest.raises(InputError, match="port_staleness_bound must be a finite number > 0, got 0"):
        make_config({"algorithm": "port", "port_staleness_bound": 0})


def test_a_file_that_declares_a_setting_the_config_has_is_an_import_error():
    """Two declarations of one key would leave one of them unread: refused while the config is made."""

    @dataclasses.dataclass(frozen=True)
    class Shared:
        fedac_lr: float = 1.0

    with pytest.raises(ImportError, match="FedACParameters.fedac_lr: TrainConfig already has a setting fedac_lr"):
        with_declared_settings(Shared)


def test_two_files_that_declare_one_setting_are_an_import_error():
    """One key with two meanings (defaults, rules, readers): the second would be read as the first."""
    files = []
    for name in ("first", "second"):
        module = types.ModuleType(f"asyncfl.fl.algorithms.{name}")
        parameters = dataclasses.make_dataclass(
            f"{name.title()}Parameters",
            [("shared_knob", float, setting(Group.SERVER, 1.0, lowest=POSITIVE))],
            bases=(AsyncParameters,),
            frozen=True,
        )
        parameters.__module__ = module.__name__
        module.Parameters = parameters
        files.append(module)
    assert set(declared_settings(files[:1])) == {"shared_knob"}
    with pytest.raises(
        ImportError,
        match="SecondParameters and asyncfl.fl.algorithms.first.FirstParameters both declare",
    ):
        declared_settings(files)


@pytest.mark.parametrize(
    "settings,K,first,after_plain,after_aggregated",
    [
        ({"algorithm": "afl", "clients_per_round": 3}, 3, 3, 1, 1),
        ({"algorithm": "afl", "clients_per_round": 3, "concurrency": 5}, 3, 5, 1, 1),
        ({"algorithm": "sync", "clients_per_round": 3}, 3, 3, 0, 3),
        ({"algorithm": "sync_as_coded", "clients_per_round": 3}, 3, 3, 0, 3),
        ({"algorithm": "fedasync", "clients_per_round": 3}, 1, 3, 1, 1),
        ({"algorithm": "fedbuff", "clients_per_round": 3}, 3, 3, 1, 1),
        ({"algorithm": "fedbuff", "clients_per_round": 3, "buffer_size": 4}, 4, 3, 1, 1),
    ],
)
def test_round_shape_of_each_algorithm(settings, K, first, after_plain, after_aggregated):
    strategy = make_strategy(make_config(settings))
    assert strategy.arrivals_per_round == K
    assert strategy.initial_clients == first
    assert strategy.clients_after_arrival(aggregated=False) == after_plain
    assert strategy.clients_after_arrival(aggregated=True) == after_aggregated


def test_each_strategy_aggregates_with_its_pure_function():
    old = state(0.0)
    updates = [Update(state(1.0), state(0.0), 10, 1.0, 0, 0), Update(state(3.0), state(-1.0), 30, 0.5, 2, 1)]
    states, sizes, weights = (
        [u.state for u in updates],
        [u.size for u in updates],
        [u.staleness_weight for u in updates],
    )
    expected = {
        "afl": staleness_aware_average(old, states, sizes, weights, 0.7),
        "sync": staleness_aware_average(old, states, sizes, weights, 1.0),
        "fedbuff": fedbuff_update(old, states, [u.start for u in updates], weights, 0.9),
    }
    own = {"afl": {"mixing": 0.7}, "sync": {}, "fedbuff": {"server_lr": 0.9}}  # each reads only its own settings
    for algorithm, (new, coefficients) in expected.items():
        config = make_config({"algorithm": algorithm, **own[algorithm]})
        got, got_coefficients = make_strategy(config).aggregate(old, updates)
        assert got_coefficients == coefficients
        assert all(torch.equal(got[k], new[k]) for k in new), algorithm
    new, alpha_t = fedasync_update(old, updates[1].state, 0.6, 0.5)
    got, coefficients = make_strategy(make_config({"algorithm": "fedasync"})).aggregate(old, updates[1:])
    assert coefficients == [alpha_t] and torch.equal(got["w"], new["w"])


@pytest.mark.parametrize(
    "settings,version,updates,expected_t",
    [
        ({"algorithm": "afl", "lr_time": "round"}, 4, 20, [4, 4]),
        ({"algorithm": "afl", "lr_time": "equivalent_round"}, 4, 20, [4, 4]),  # the same for AFL at J = 5
        ({"algorithm": "fedasync", "lr_time": "round"}, 20, 20, [20, 20]),  # a FedAsync round is one update
        ({"algorithm": "fedasync", "lr_time": "equivalent_round"}, 20, 20, [4, 4]),  # 20 updates / J
        ({"algorithm": "fedbuff", "lr_time": "equivalent_round", "buffer_size": 2}, 10, 20, [4, 4]),
        ({"algorithm": "afl", "lr_time": "epoch"}, 4, 20, [0, 1]),
        ({"algorithm": "afl_as_coded", "lr_time": "round"}, 4, 20, [0, 1]),  # always the epoch, as coded
    ],
)
def test_learning_rate_clock_of_each_setting(settings, version, updates, expected_t):
    """γ = γ0 / (√(t+1)·(1 + α·d)) with t as lr_time says; as coded: t the epoch and d = 2 s always."""
    config = make_config({"clients_per_round": 5, "local_epochs": 2, "gamma0": 0.1, "alpha_lr": 0.5, **settings})
    delay = 2.0 if settings["algorithm"] == "afl_as_coded" else 7.0
    expected = tuple(0.1 / ((t + 1) ** 0.5 * (1 + 0.5 * delay)) for t in expected_t)
    assert make_strategy(config).learning_rates(version, updates, 7.0) == pytest.approx(expected, rel=1e-15)


def test_afl_as_coded_keeps_client_models_and_a_fresh_adam_per_epoch():
    as_coded = make_strategy(make_config({"algorithm": "afl_as_coded"}))
    described = make_strategy(make_config({"algorithm": "afl"}))
    assert not as_coded.clients_load_global_model and as_coded.optimizer_per_epoch and as_coded.lr_clock == "epoch"
    assert described.clients_load_global_model and not described.optimizer_per_epoch


@pytest.mark.parametrize(
    "algorithm,key,value",
    [
        ("sync", "concurrency", 5),
        ("sync", "staleness_a", 2.0),
        ("afl_as_coded", "lr_time", "equivalent_round"),
        ("afl_as_coded", "staleness", "constant"),
        ("afl", "buffer_size", 4),
        ("fedasync", "mixing", 0.5),
        ("fedbuff", "fedasync_alpha", 0.3),
        ("sync_as_coded", "server_lr", 2.0),
    ],
)
def test_a_setting_the_algorithm_ignores_is_refused(algorithm, key, value):
    """It was accepted silently and entered the run's identity as if it had changed something."""
    with pytest.raises(InputError, match=f"{key} does not apply to algorithm {algorithm} \\(only "):
        make_config({"algorithm": algorithm, key: value})
    make_config({"algorithm": algorithm, key: dataclasses.asdict(make_config({}))[key]})  # the default: fine


def test_every_algorithm_states_its_round_size_in_the_torch_free_table():
    """The workflow's budget checks and the engine read one table (`names.UPDATES_PER_ROUND`)."""
    for algorithm in ALGORITHMS:
        config = make_config({"algorithm": algorithm, "clients_per_round": 4})
        expected = {"J": 4, "K": 4, "1": 1}[UPDATES_PER_ROUND[algorithm]]
        assert make_strategy(config).arrivals_per_round == expected


def test_each_algorithm_reads_its_own_settings_by_name():
    """An algorithm's frozen parameters are read from the config keys of their names; a key read by one
    algorithm alone (config `read_by`, which the light settings layer keeps so the workflow validates
    without torch) is a field of that algorithm's parameters, and no field is a key its algorithm
    does not read but stays at its default (the emulations inherit sync's rounds, straggler handling off),
    or of the server optimizer its name implies (FADAS's `delay_threshold`)."""
    defaults = TrainConfig()
    for name in ALGORITHMS:
        strategy = make_strategy(make_config({"algorithm": name}))
        parameters = getattr(strategy, "parameters", None)
        fields = {item.name for item in dataclasses.fields(parameters)} if parameters else set()
        unread = {key for key in fields if not applies(key, name)}
        assert all(getattr(parameters, key) == getattr(defaults, key) for key in unread), (name, unread)
        own = {key for key, readers in SETTING_READERS.items() if readers == (name,)}
        if SERVER_OPTIMIZER_OF[name] != "none":  # FADAS's delay step: a setting of the server's optimizer
            own -= {item.name for item in dataclasses.fields(ServerOptimizerParameters)}
        if name in ("afl", "fedasync", "fedbuff"):
            own |= {key for key, readers in SETTING_READERS.items() if key in ("concurrency", "max_staleness")}
        assert own <= fields, (name, own - fields)
    fedbuff = make_strategy(make_config({"algorithm": "fedbuff", "clients_per_round": 4, "server_lr": 2.0}))
    assert (fedbuff.parameters.buffer_size, fedbuff.parameters.concurrency, fedbuff.parameters.server_lr) == (4, 4, 2.0)


def test_fedcompass_steps_alpha_s_over_m_on_each_update_and_bounds_its_steps():
    """θ + Σ α·s(τ)/M·(θ_i − θ_start,i): (3 − (−1))·0.5·0.9/4 + (1 − 0)·1·0.9/4 on θ = 0."""
    old = state(0.0)
    updates = [Update(state(1.0), state(0.0), 10, 1.0, 0, 0), Update(state(3.0), state(-1.0), 30, 0.5, 2, 1)]
    strategy = make_strategy(make_config({"algorithm": "fedcompass", "clients_per_round": 4}))
    new, coefficients = strategy.aggregate(old, updates)
    assert coefficients == [0.9 / 4, 0.45 / 4] and new["w"].tolist() == pytest.approx([0.9 / 4 + 0.45] * 2)
    assert strategy.schedules_groups and not strategy.convex
    assert strategy.parameters.step_bounds(34) == (7, 34) and strategy.parameters.step_bounds(2) == (1, 2)


@pytest.mark.parametrize(
    "key,value,message",
    [
        ("compass_alpha", float("nan"), "compass_alpha must be a finite number > 0"),
        ("compass_alpha", 1.5, r"compass_alpha must be in \(0, 1\]"),
        ("compass_min_steps", 0.0, "compass_min_steps must be a finite number > 0"),
        ("latest_time_factor", 0.9, "latest_time_factor must be ≥ 1"),
        ("latest_time_factor", float("inf"), "latest_time_factor must be a finite number > 0"),
        ("latest_time_factor", 1e9, "latest_time_factor must be ≤ 1000"),
        ("speed_momentum", -0.1, "speed_momentum must be a finite number > 0"),
    ],
)
def test_fedcompass_refuses_settings_outside_their_range(key, value, message):
    with pytest.raises(InputError, match=message):
        make_config({"algorithm": "fedcompass", key: value})
    with pytest.raises(InputError, match=f"{key} does not apply to algorithm fedbuff"):
        make_config({"algorithm": "fedbuff", key: 0.5 if key != "latest_time_factor" else 2.0})


def test_fedcompass_refuses_a_staleness_cap_it_would_ignore():
    """Its late updates wait for the next group: a cap would be read by no code, so it is refused."""
    with pytest.raises(InputError, match="max_staleness does not apply to algorithm fedcompass"):
        make_config({"algorithm": "fedcompass", "max_staleness": 3})


def made_file(monkeypatch, name: str, fields: list, base: type = AsyncParameters) -> types.ModuleType:
    """An algorithm's file made in the test, put where `fl.algorithms` finds it, fedbuff's line pointing at
    it: a Strategy and one Parameters with `fields`."""
    module = types.ModuleType(f"asyncfl.fl.algorithms.{name}")
    parameters = dataclasses.make_dataclass(f"{name.title()}Parameters", fields, bases=(base,), frozen=True)
    parameters.__module__ = module.__name__
    module.Parameters, module.Made = parameters, type("Made", (strategy_class("fedbuff"),), {})
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(algorithms.STRATEGY_OF, "fedbuff", f"{name}:Made")
    return module


def test_a_declaration_that_would_fail_a_users_run_is_an_import_error_naming_it(monkeypatch):
    """A default outside its rule or type would fail every config, the user blamed; a plain field no
    config key gives would fail at the run's start; a line that names no Strategy at its first use."""
    knob = ("made_knob", float, setting(Group.SERVER, -1.0, lowest=POSITIVE))
    made_file(monkeypatch, "broken", [knob])
    with pytest.raises(ImportError, match=r"broken.BrokenParameters.made_knob must be a finite number > 0, got -1.0"):
        with_declared_settings(SHARED_SETTINGS)
    made_file(monkeypatch, "typed", [("made_knob", int, setting(Group.SERVER, 0.5, lowest=POSITIVE))])
    with pytest.raises(ImportError, match=r"TypedParameters.made_knob: its default 0.5 is not of its type"):
        with_declared_settings(SHARED_SETTINGS)
    made_file(monkeypatch, "plain", [("made_knob", float, dataclasses.field(default=0.5))])
    with pytest.raises(ImportError, match=r"PlainParameters.made_knob is no setting: declare it with setting"):
        with_declared_settings(SHARED_SETTINGS)
    monkeypatch.setitem(algorithms.STRATEGY_OF, "fedbuff", "fedbuff")
    with pytest.raises(ImportError, match="fedbuff's strategy='fedbuff' names no Strategy class"):
        strategy_class("fedbuff")


def test_a_setting_inherited_from_another_files_parameters_is_read_by_both(monkeypatch):
    """Readers are the algorithms whose Parameters have the field, inherited or not: a subclass in another
    file reads its parent's knob, and the config lets its runs set it."""
    made_file(monkeypatch, "parent", [("made_knob", float, setting(Group.SERVER, 0.5, lowest=POSITIVE))])
    parent = sys.modules["asyncfl.fl.algorithms.parent"].Parameters
    child = types.ModuleType("asyncfl.fl.algorithms.child")
    child.Parameters = dataclasses.make_dataclass("ChildParameters", [], bases=(parent,), frozen=True)
    child.Parameters.__module__, child.Made = child.__name__, strategy_class("ca2fl")
    monkeypatch.setitem(sys.modules, child.__name__, child)
    monkeypatch.setitem(algorithms.STRATEGY_OF, "ca2fl", "child:Made")
    made = with_declared_settings(SHARED_SETTINGS)
    (knob,) = [item for item in dataclasses.fields(made) if item.name == "made_knob"]
    assert knob.metadata["read_by"] == ("fedbuff", "ca2fl") and knob.metadata["declared_by"] is parent


def test_a_catalogue_line_copied_with_another_algorithms_key_is_an_import_error():
    line = CATALOGUE[0]
    with pytest.raises(ImportError, match="settings/algorithms.py: key afl on more than one line"):
        check_catalogue((*CATALOGUE, dataclasses.replace(line, display="Another")))
