"""The package's layers (docs/development.md "Code map"): a layer imports only the layers before it
in settings → planning → runs → data → models → fl → training → sim → launch → analysis; bench beside them may import
any but analysis; `files.py` is shared by all; cli/, at the top, imports every one."""

import ast
from pathlib import Path

import pytest

from conftest import REPO

PACKAGE = REPO / "src" / "asyncfl"
ORDER = ["settings", "planning", "files", "runs", "data", "models", "fl", "training", "sim", "launch", "analysis"]
BESIDE = {"bench": "launch"}  # imports up to and including this layer
TOP = {"cli", "api", "__main__", "__init__"}  # the front doors: the command line and Python
# The one import against the order: the config joins the settings each algorithm's file declares and takes
# its choices of s(τ) and learning-rate clocks from their implementations, all torch-free at import
UPWARD = {"settings/config.py": {"asyncfl.fl", "asyncfl.fl.algorithms"}}


def imported(path: Path) -> set[str]:
    """The asyncfl modules a file imports, at any depth (functions' own imports included)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("asyncfl"):
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names if alias.name.startswith("asyncfl"))
    return {name for name in names if name != "asyncfl"}


def own_layer(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def violations(path: Path, layer: str) -> list[str]:
    """The imports of `path` (of layer `layer`) that break the order."""
    highest = ORDER.index(BESIDE.get(layer, layer))
    broken = []
    for module in sorted(imported(path)):
        other = module.split(".")[1]  # asyncfl.LAYER[.module]
        if other != layer and (other not in ORDER or ORDER.index(other) > highest):
            broken.append(f"{module} ({other})")
    return broken


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_layer_imports_only_the_layers_before_it(path):
    layer = own_layer(path)
    if layer not in TOP:
        allowed = UPWARD.get(path.relative_to(PACKAGE).as_posix(), set())
        broken = [line for line in violations(path, layer) if line.split()[0] not in allowed]
        assert not broken, f"{path.relative_to(PACKAGE)} ({layer}) imports {broken}"


def test_an_import_against_the_order_is_found(tmp_path):
    source = tmp_path / "module.py"
    source.write_text("from asyncfl.settings.config import make_config\n\n\ndef f():\n    import asyncfl.sim.engine\n")
    assert violations(source, "runs") == ["asyncfl.sim.engine (sim)"]
    assert violations(source, "analysis") == []


def test_the_simulation_runs_its_own_loop_and_only_the_world_asks_who_is_online():
    """asyncio under sim/ only where the real clock lives (the paced queue, the clients, the engine's paced
    serve): the virtual clock's loop is sim/events.py's heap. No module but the world tests whether
    availability is on: the others ask the world (`always_online`, `online_test`, `next_eligible`)."""
    with_asyncio = set()
    for path in sorted((PACKAGE / "sim").glob("*.py")):
        tree = ast.parse(path.read_text())
        modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        modules |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        if "asyncio" in modules:
            with_asyncio.add(path.name)
        if path.name != "world.py":
            assert "availability is None" not in path.read_text(), path.name
    assert with_asyncio == {"events.py", "clients.py", "engine.py"}


def module_graph() -> dict[str, set[str]]:
    """Every module of the package → the package's modules it imports, at any depth."""
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(("asyncfl", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
        graph[name] = {
            module
            for module in imported(path)
            if (PACKAGE / module.split(".", 1)[1].replace(".", "/")).with_suffix(".py").exists()
        }
    return graph


def cycle_in(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of `graph` (functions' own imports included), or [] where there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str]:
        state[node] = 1
        for other in sorted(graph.get(node, ())):
            if state.get(other) == 1:
                return [*path[path.index(other) :], other]
            if other not in state and (found := visit(other, [*path, other])):
                return found
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node, [node])):
            return found
    return []


def test_no_module_imports_itself_through_others():
    """Even through an import inside a function, which hides a cycle from Python's import order."""
    assert cycle_in(module_graph()) == []
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
