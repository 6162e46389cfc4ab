"""The shape of the code, read from its syntax trees: the adapters compose the stepper and use
only its public surface, and no function of the package runs over 60 lines."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Iterator, List, Set, Tuple

ROOT = Path(__file__).resolve().parents[1]
STEPPER = ROOT / "procgen_entities" / "stepper.py"
#: Where stepper objects are used: the package, its tools, the benchmarks and these tests.
SCANNED = ("procgen_entities", "tools", "benchmarks", "tests")
MAX_FUNCTION_LINES = 60


def _python_files(*folders: str) -> Iterator[Path]:
    for folder in folders:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _stepper_class() -> ast.ClassDef:
    tree = ast.parse(STEPPER.read_text())
    return next(
        node
        for node in tree.body
        if isinstance(node, ast.ClassDef) and node.name == "ProcgenStepper"
    )


def stepper_private_names() -> Set[str]:
    """Every single-underscore member of ProcgenStepper: the attributes its methods set or
    read on ``self`` and the methods it defines."""
    names: Set[str] = set()
    for node in ast.walk(_stepper_class()):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


_DOTTED = re.compile(r"(?=\b(\w+)\.(_[A-Za-z]\w*)\b)")  # overlapping: a._b._c


def private_uses(path: Path, private: Set[str]) -> List[Tuple[int, str]]:
    """(line, text) of each place in ``path`` that reaches one of ``private`` on another
    object: ``obj._name`` where obj is not ``self``/``cls`` (a class's own members of the same
    name are its own), getattr/setattr/hasattr/delattr with the name as a string, or
    ``obj._name`` in a string (the code the tests run in child processes)."""
    found: List[Tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Attribute) and node.attr in private:
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.append((node.lineno, ast.unparse(node)))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in private
        ):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for match in _DOTTED.finditer(node.value):
                if match[2] in private and match[1] not in ("self", "cls"):
                    found.append((node.lineno, f"{match[1]}.{match[2]}"))
    return found


def test_the_scan_knows_the_steppers_private_members() -> None:
    """The scan below is only as good as its list: it holds the members the adapters once
    reached into (a rename in stepper.py that drops them would show here)."""
    private = stepper_private_names()
    for name in ("_collector", "_live", "_envs", "_scalars", "_fresh", "_seed", "_read",
                 "_step", "_procgen_kwargs", "_pending_reset", "_sync"):  # fmt: skip
        assert name in private, name
    assert "check_open" not in private and "_call_lock" in private


def test_no_module_outside_the_stepper_touches_its_private_members() -> None:
    """The adapters, tools, benchmarks and tests use the stepper's public surface only
    (collector, terminal, pending_reset, read, step_observe, procgen_envs, ...)."""
    private = stepper_private_names()
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for path in _python_files(*SCANNED)
        if path != STEPPER and path != Path(__file__).resolve()
        for line, text in private_uses(path, private)
    ]
    assert not found, "private stepper members used outside stepper.py:\n" + "\n".join(found)


def test_the_scan_finds_a_private_use(tmp_path: Path) -> None:
    """The scan is not vacuous: a module that reads a stepper's private member is caught."""
    path = tmp_path / "probe.py"  # parsed, never imported
    path.write_text(
        "def f(env):\n    return env._stepper._collector, getattr(env, '_live'), self._seed\n"
        "CHILD = 'env._envs[0].close()'\n"
    )
    uses = private_uses(path, stepper_private_names())
    assert sorted(text for _, text in uses) == [
        "env._envs", "env._stepper._collector", "getattr(env, '_live')",
    ]  # fmt: skip


def test_no_class_inherits_the_stepper() -> None:
    """The adapters compose the stepper (``self._stepper``) instead of inheriting it, so none of
    its private members is an adapter's own: the scan above would miss them on ``self``."""
    heirs = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}"
        for path in _python_files(*SCANNED)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
        and any(ast.unparse(base).endswith("ProcgenStepper") for base in node.bases)
    ]
    assert not heirs, heirs


def long_functions(*folders: str) -> List[str]:
    """``path:line name (n lines)`` of every function over MAX_FUNCTION_LINES, counted from its
    ``def`` to its last line (docstring included)."""
    out = []
    for path in _python_files(*folders):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines})")
    return out


def test_no_function_of_the_package_runs_over_60_lines() -> None:
    assert long_functions("procgen_entities") == []


def test_the_tools_and_benchmarks_stay_under_60_lines_too() -> None:
    assert long_functions("tools", "benchmarks") == []
