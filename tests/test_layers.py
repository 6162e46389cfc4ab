"""The package's layers and error mapping: the core imports without the RL stack or the viewer,
no module imports itself through others, ProcgenEnv holds to entity-gym's own validator, C
statuses become the documented exceptions and misuse is a UsageError."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Set, Tuple

import numpy as np
import pytest
from conftest import load_golden

from procgen_entities import StateDecodeError
from procgen_entities.errors import (
    UsageError,
)


def test_core_imports_without_entity_gym() -> None:
    """parse_states, the tilemaps and the engine's layout work with entity-gym, ragged-buffer and
    gym3 made unimportable (as in a venv that lacks them)."""
    state = load_golden("coinrun-hard").states[0]
    code = textwrap.dedent(
        f"""
        import sys
        for name in ("entity_gym", "ragged_buffer", "gym3", "torch"):
            sys.modules[name] = None  # any import of them now fails
        import procgen_entities as pe
        from procgen_entities.engine.layout import load_known_layout, state_program
        batch = pe.parse_states([{state!r}])
        assert batch.entity_counts[0] >= 1
        rows = pe.tilemap_to_entities(batch.grid[0], "coinrun", "columns")
        assert "Column" in rows
        assert len(state_program(load_known_layout(), pe.get_game("coinrun"))) > 0
        try:
            pe.ProcgenVecEnv
        except ImportError:
            print("adapters need entity-gym: ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "adapters need entity-gym: ok" in out.stdout


@pytest.mark.live
@pytest.mark.parametrize("game", ["coinrun", "bossfight", "plunder", "maze"])
def test_procgen_env_passes_entity_gyms_validator(game: str) -> None:
    from entity_gym.env import GlobalCategoricalAction, ValidatingEnv

    from procgen_entities.entity_gym.env import ProcgenEnv

    env = ValidatingEnv(ProcgenEnv(game, seed=3, relative_positions=True))
    obs = env.reset()
    rng = np.random.default_rng(0)
    labels = env.action_space()["move"].index_to_label
    ends = 0
    for _ in range(300):
        k = int(rng.integers(len(labels)))
        obs = env.act({"move": GlobalCategoricalAction(index=k, label=labels[k])})
        if obs.done:
            ends += 1
            obs = env.reset()
    assert obs.features


def test_caller_bugs_are_usage_errors_not_decode_errors() -> None:
    from procgen_entities._native import _collector
    from procgen_entities.parse import game_spec
    from procgen_entities.tilemap import tilemap_to_entities_batch

    collector = _collector.StateCollector(game_spec("coinrun"), 4, 1)
    with pytest.raises(UsageError, match="collect range"):
        collector.collect(1, 1, 8, 0)  # more envs than the collector holds: refused before any call
    with pytest.raises(UsageError, match="shape"):
        collector.fill(np.zeros((3, 60)), np.zeros((4, 5)))
    with pytest.raises(UsageError):
        tilemap_to_entities_batch(np.zeros((1, 4, 4), np.int32), "coinrun", "tiles", chunk=0)
    collector.close()


def test_fill_after_a_failed_collect_reads_nothing() -> None:
    """A collect that fails (here: coinrun states collected as ninja) leaves every state marked
    failed; fill then writes zeros instead of following a broken layout."""
    from procgen_entities._native import _collector
    from procgen_entities.games import get_game
    from procgen_entities.parse import game_spec
    from procgen_entities.procgen_envs import make_procgen_env

    env = make_procgen_env("coinrun", 3, rand_seed=0)
    collector = _collector.StateCollector(game_spec("ninja"), 3, 2)
    handles = (env.get_state_address, env.handle)
    with pytest.raises(StateDecodeError, match="game name"):
        collector.collect(*handles, 3, 0)
    scalars = np.full((3, 60), 7.0)
    trailer = np.full((3, len(get_game("ninja").trailer_scalars)), 7.0)
    collector.fill(scalars, trailer)
    assert not scalars.any() and not trailer.any()
    assert not collector.collected().any()
    collector.close()
    env.close()


# ----------------------------------------------------------------------------------------------
# The core does not need the viewer: the glyph tables are glyphs.py's, which needs no rich.

SAVED_STATE = Path(__file__).resolve().parent / "data" / "dump" / "coinrun.state.gz"


def test_core_and_text_levels_import_without_rich() -> None:
    """``import procgen_entities`` and the text levels work with rich made unimportable (a
    meta-path finder refuses it, as a venv without it would), and leave no rich module loaded;
    the viewer, which does need rich, is refused by the same finder."""
    code = textwrap.dedent(
        f"""
        import gzip, sys

        class NoRich:
            def find_spec(self, name, path=None, target=None):
                if name == "rich" or name.startswith("rich."):
                    raise ImportError(f"{{name}} is blocked")
                return None

        sys.meta_path.insert(0, NoRich())
        import procgen_entities as pe
        import procgen_entities.level_text
        from procgen_entities.glyphs import ENTITY_GLYPHS, TILE_GLYPHS
        state = pe.State.from_bytes(gzip.open({str(SAVED_STATE)!r}).read())
        text = pe.level_to_text(state)
        assert pe.level_to_text(pe.level_from_text(text, base=state)) == text
        assert TILE_GLYPHS["coinrun"] and ENTITY_GLYPHS["coinrun"]
        loaded = sorted(m for m in sys.modules if m == "rich" or m.startswith("rich."))
        assert not loaded, loaded
        try:
            import procgen_entities.viewer.render
        except ImportError:
            print("the viewer needs rich: ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "the viewer needs rich: ok" in out.stdout


def test_the_viewer_keeps_exporting_the_glyph_tables() -> None:
    """viewer/render.py's names for the tables (a public contract, at its old path
    tools/render.py too) are glyphs.py's objects."""
    from procgen_entities import glyphs
    from procgen_entities.viewer import render

    for name in ("ENTITY_GLYPHS", "FILL_TYPES", "GAME_LOOKS", "Glyph", "LOOKS", "Look",
                 "TILE_GLYPHS", "TILE_REFINEMENTS", "look"):  # fmt: skip
        assert getattr(render, name) is getattr(glyphs, name), name
        assert name in render.__all__, name


# ----------------------------------------------------------------------------------------------
# No import circles: the package's import graph, read from its syntax trees.

PACKAGE = Path(__file__).resolve().parents[1] / "procgen_entities"
#: These tests read the package's sources, .pyx included; .ci/wheel.sh copies only the tests
#: beside an installed wheel (which ships no .pyx), so there they skip rather than read nothing.
needs_source_tree = pytest.mark.skipif(
    not (PACKAGE / "__init__.py").is_file(), reason="reads the source tree (not here: tests run "
    "beside an installed wheel)")  # fmt: skip
#: A Python-level import statement of a Cython source (``cimport`` lines are C, not imports).
_PYX_IMPORT = re.compile(
    r"^[ \t]*(from[ \t]+[\w.]+[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)|import[ \t][^\n]*)", re.M
)


def package_modules(package: Path) -> Dict[str, Path]:
    """Dotted name -> source of every module of ``package``: its .py files and the extensions'
    .pyx sources (which import Python modules too)."""
    modules = {}
    for path in sorted(package.rglob("*.py")) + sorted(package.rglob("*.pyx")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _import_statements(path: Path) -> Iterator[ast.stmt]:
    """Every import of a module, at module level or inside functions (under TYPE_CHECKING
    too: a circle there is one as soon as the annotations are evaluated)."""
    if path.suffix == ".pyx":
        trees = [ast.parse(m[1].strip()) for m in _PYX_IMPORT.finditer(path.read_text())]
    else:
        trees = [ast.parse(path.read_text(), filename=str(path))]
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node


def _from_base(name: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The module ``from M import ...`` names, relative imports resolved against ``name``."""
    if not node.level:
        return node.module or ""
    parts = name.split(".")
    kept = parts[: len(parts) - node.level + int(is_package)]  # a package is its own level 1
    return ".".join(kept + ([node.module] if node.module else []))


def _imported(name: str, is_package: bool, node: ast.stmt, modules: Set[str]) -> Iterator[str]:
    """The package modules one import statement of module ``name`` imports: the module named,
    or for ``from M import x`` the submodule M.x where there is one, else M itself (which
    defines or re-exports x). A parent package that Python runs first is no edge of its own:
    a package's __init__ importing its submodules is not a circle."""
    if isinstance(node, ast.ImportFrom):
        base = _from_base(name, is_package, node)
        targets = [f"{base}.{a.name}" for a in node.names]
        targets = [t if t in modules else base for t in targets]
    else:
        assert isinstance(node, ast.Import)
        targets = [alias.name for alias in node.names]
    for target in targets:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            yield target


def import_graph(package: Path) -> Dict[str, Dict[str, int]]:
    """module -> {module it imports: the line of the first such import}."""
    modules = package_modules(package)
    graph: Dict[str, Dict[str, int]] = {}
    for name, path in modules.items():
        edges = graph.setdefault(name, {})
        for node in _import_statements(path):
            for target in _imported(name, path.stem == "__init__", node, set(modules)):
                edges.setdefault(target, node.lineno)
    return graph


def find_cycle(graph: Mapping[str, Iterable[str]]) -> Optional[List[str]]:
    """One circle of ``graph`` as [a, b, ..., a], or None (an iterative depth-first search)."""
    done: Set[str] = set()
    for root in sorted(graph):
        if root in done:
            continue
        path = [root]
        stack = [iter(sorted(graph.get(root, ())))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                done.add(path.pop())
                stack.pop()
            elif nxt in path:
                return path[path.index(nxt) :] + [nxt]
            elif nxt not in done:
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_the_cycle_finder_finds_circles() -> None:
    assert find_cycle({"a": ["b"], "b": ["c"], "c": []}) is None
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["b"]}) == ["b", "c", "b"]
    assert find_cycle({"a": ["a"]}) == ["a", "a"]


def test_the_graph_reads_relative_imports_in_functions(tmp_path: Path) -> None:
    """A circle made by a relative import inside a function is found; a package's __init__
    importing its submodules is none, unless one of them imports what the __init__ defines."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg import a\nVERSION = 1\n")
    (pkg / "a.py").write_text("import pkg.sub.b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..a import thing\n")
    graph = import_graph(pkg)
    assert graph["pkg.sub.b"] == {"pkg.a": 2}
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.a"]
    (pkg / "sub" / "b.py").write_text("import numpy\n")  # pkg runs pkg.a, pkg.sub: no circle
    assert find_cycle(import_graph(pkg)) is None
    (pkg / "sub" / "b.py").write_text("from .. import VERSION\n")  # the __init__'s own name
    assert find_cycle(import_graph(pkg)) == ["pkg", "pkg.a", "pkg.sub.b", "pkg"]


@needs_source_tree
def test_the_graph_reads_the_packages_imports() -> None:
    """Module-level and in functions, and the Cython extensions' too."""
    graph = import_graph(PACKAGE)
    assert "procgen_entities.errors" in graph["procgen_entities._native._status"]  # a .pyx
    assert "procgen_entities.level_files" in graph["procgen_entities.tools.dump"]
    assert "procgen_entities.agents.checkpoint" in graph["procgen_entities.tools.dump"]  # in a def
    assert "procgen_entities.glyphs" in graph["procgen_entities.level_text"]


@needs_source_tree
def test_the_package_has_no_import_circle() -> None:
    graph = import_graph(PACKAGE)
    assert len(graph) > 50, sorted(graph)  # the whole package was read, not an empty folder
    cycle = find_cycle(graph)
    if cycle is not None:
        steps = [f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:])]
        pytest.fail("import circle: " + " -> ".join([*steps, cycle[-1]]))


# ----------------------------------------------------------------------------------------------
# tools/ holds the command-line programs; the libraries it held moved out (issue 37), and their
# old module paths re-export the very same objects (the names shipped there are a contract).

#: Each module that moved out of tools/ -> where it is now (evaluate and plot: their libraries;
#: the commands stay).
MOVED_FROM_TOOLS = {
    "procgen_entities.tools.checkpoint": "procgen_entities.agents.checkpoint",
    "procgen_entities.tools.enn_policy": "procgen_entities.agents.enn_policy",
    "procgen_entities.tools.evaluate": "procgen_entities.agents.evaluation",
    "procgen_entities.tools.lean_ppo": "procgen_entities.agents.lean_ppo",
    "procgen_entities.tools.numpy_policy": "procgen_entities.agents.numpy_policy",
    "procgen_entities.tools.plot": "procgen_entities.agents.metrics",
    "procgen_entities.tools.plr": "procgen_entities.agents.plr",
    "procgen_entities.tools.render": "procgen_entities.viewer.render",
    "procgen_entities.tools.video": "procgen_entities.viewer.video",
    "procgen_entities.tools.files": "procgen_entities.files",
    "procgen_entities.tools.rollout": "procgen_entities.rollout",
    "procgen_entities.tools.levels": "procgen_entities.level_files",
}


def _import_or_skip(name: str) -> Any:
    """The module, or a skip where an optional dependency it needs (torch) is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if exc.name is None or exc.name.split(".")[0] != "torch":
            raise
        pytest.skip(f"{name} needs {exc.name}")


@pytest.mark.parametrize("old, new", sorted(MOVED_FROM_TOOLS.items()))
def test_the_old_tool_paths_export_the_moved_objects(old: str, new: str) -> None:
    """Every name the old path exports is the moved module's own object (no copy, no wrapper),
    the old path exports every name the new one does, and ``from OLD import *`` gives exactly
    them; a name defined at the old path itself is a command's own (the path is a program)."""
    old_module, new_module = _import_or_skip(old), _import_or_skip(new)
    assert set(new_module.__all__) <= set(old_module.__all__), old
    for name in old_module.__all__:
        value = getattr(old_module, name)
        if name in new_module.__all__:
            assert value is getattr(new_module, name), f"{old}.{name}"
        else:
            # the command's own (main; plot's plot_runs, which draws with matplotlib)
            assert hasattr(old_module, "main") and value.__module__ == old, f"{old}.{name}"
    namespace: Dict[str, Any] = {}
    exec(f"from {old} import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(old_module.__all__)


def _tools_modules() -> Tuple[Set[str], Set[str]]:
    """tools/'s programs (modules that define ``main``) and its old paths (modules that define
    nothing of their own: only imports and __all__), by name."""
    programs, old_paths = set(), set()
    for path in sorted((PACKAGE / "tools").glob("*.py")):
        if path.name == "__init__.py":
            continue
        tree = ast.parse(path.read_text())
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        if "main" in defined:
            programs.add(path.stem)
        else:
            assert all(isinstance(n, (ast.Import, ast.ImportFrom, ast.Assign, ast.Expr))
                       for n in tree.body), path  # fmt: skip
            assert not defined, path
            old_paths.add(path.stem)
    return programs, old_paths


@needs_source_tree
def test_tools_holds_only_command_line_programs() -> None:
    """Each module of tools/ is a program (it defines ``main``; [project.scripts] or a stable
    ``python -m procgen_entities.X`` runs it: tests/test_packaging.py) or an old path."""
    programs, old_paths = _tools_modules()
    assert programs == {"checkpoint", "dump", "evaluate", "plot", "results", "sb3_ppo", "train"}
    assert old_paths == {m.rsplit(".", 1)[1] for m in MOVED_FROM_TOOLS} - programs


@needs_source_tree
def test_the_package_imports_the_moved_modules_from_their_new_place() -> None:
    """Nothing in the package imports an old path that only re-exports (they are kept for
    users' code); the programs among the old paths are imported to run them."""
    old_paths = {f"procgen_entities.tools.{m}" for m in _tools_modules()[1]}
    assert len(old_paths) == 9, sorted(old_paths)
    graph = import_graph(PACKAGE)
    users = {a: sorted(set(edges) & old_paths) for a, edges in graph.items()}
    assert not {a: b for a, b in users.items() if b}


# ----------------------------------------------------------------------------------------------
# Misuse is UsageError: no bare ValueError is raised for a wrong call.

#: The ``raise ValueError`` the package keeps, by file and function, and why each is not misuse.
KEPT_VALUE_ERRORS: Dict[Tuple[str, str], str] = {
    **{("agents/numpy_policy.py", f): "a malformed checkpoint file (its .npz arrays or their "
       "weights), not a wrong call: the data's fault, like a StateDecodeError; checkpoint.py "
       "reports it as a CheckpointError" for f in (
        "_npz_values", "_check_npz", "read_npz", "Normalizer.load", "MlpPolicy.__init__",
        "FlatGridPolicy.__init__", "FlatGridPolicy._layer", "DictNormalizer.load")},
    ("agents/metrics.py", "load_run"): "a file that is not a training run's metrics: bad data",
}  # fmt: skip


def _qualified_raises(tree: ast.Module, exception: str) -> Iterator[Tuple[str, int]]:
    """(qualified name of the enclosing function or class, line) of each ``raise exception``
    or ``raise exception(...)``."""

    def visit(node: ast.AST, scope: Tuple[str, ...]) -> Iterator[Tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = (*scope, child.name)
            if isinstance(child, ast.Raise) and child.exc is not None:
                raised = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
                if isinstance(raised, ast.Name) and raised.id == exception:
                    yield ".".join(scope) or "<module>", child.lineno
            yield from visit(child, inner)

    return visit(tree, ())


@needs_source_tree
def test_misuse_raises_usage_error_not_value_error() -> None:
    """Every ``raise ValueError`` left in the package is in KEPT_VALUE_ERRORS, with its reason,
    and every entry there still names one (UsageError is a ValueError: callers that catch
    ValueError catch it still)."""
    assert issubclass(UsageError, ValueError)
    found: Dict[Tuple[str, str], List[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for scope, line in _qualified_raises(tree, "ValueError"):
            found.setdefault((path.relative_to(PACKAGE).as_posix(), scope), []).append(line)
    for path in sorted(PACKAGE.rglob("*.pyx")):  # Cython: no syntax tree, but the same words
        assert not re.search(r"\braise\s+ValueError\b", path.read_text()), path
    bare = [f"{file}:{lines} in {scope}" for (file, scope), lines in found.items()
            if (file, scope) not in KEPT_VALUE_ERRORS]  # fmt: skip
    assert not bare, (
        "raise UsageError for misuse (or list the case with its reason):\n" + "\n".join(bare)
    )
    stale = sorted(set(KEPT_VALUE_ERRORS) - set(found))
    assert not stale, f"KEPT_VALUE_ERRORS entries that raise no ValueError now: {stale}"
