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


def _c_without_comments_and_literals(text: str) -> str:
    """C source with its comments, strings and character literals blanked (line breaks kept),
    so that braces count as code."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\\n])*'", "''", text)


def long_c_functions(pattern: str) -> List[str]:
    """``path:line name (n lines)`` of every C function body over MAX_FUNCTION_LINES: a
    top-level brace block whose head ends in ``)`` (not a struct, enum or initializer),
    counted from the line of its opening brace's head to its closing brace."""
    out = []
    for path in sorted(ROOT.glob(pattern)):
        lines = _c_without_comments_and_literals(path.read_text()).split("\n")
        depth, head_line = 0, 0
        for i, line in enumerate(lines):
            for j, ch in enumerate(line):
                if ch == "{" and depth == 0:
                    before = " ".join(lines[max(0, i - 4) : i] + [line[:j]]).rstrip()
                    head_line = i if line[:j].strip() else i - 1
                    is_function = before.endswith(")")
                    name = re.findall(r"(\w+)\s*\(", before)
                depth += (ch == "{") - (ch == "}")
                if ch == "}" and depth == 0 and is_function:
                    n = i - head_line + 1
                    if n > MAX_FUNCTION_LINES:
                        out.append(f"{path.relative_to(ROOT)}:{head_line + 1} "
                                   f"{name[0] if name else '?'} ({n})")  # fmt: skip
    return out


_PYX_DEF = re.compile(r"^(\s*)(?:async\s+)?(?:def|cdef|cpdef)\s+[^=]*?(\w+)\s*\(")


def long_pyx_functions(pattern: str) -> List[str]:
    """The same for Cython's def/cdef/cpdef functions: from the def to its block's last line
    (the next line indented no deeper ends it; blank lines and comments do not)."""
    out = []
    for path in sorted(ROOT.glob(pattern)):
        lines = path.read_text().split("\n")
        for i, line in enumerate(lines):
            match = _PYX_DEF.match(line)
            if not match:
                continue
            indent, last = len(match.group(1)), i
            for k in range(i + 1, len(lines)):
                text = lines[k]
                if not text.strip() or text.lstrip().startswith("#"):
                    continue
                if len(text) - len(text.lstrip()) <= indent and not text.lstrip().startswith(")"):
                    break
                last = k
            n = last - i + 1
            if n > MAX_FUNCTION_LINES:
                out.append(f"{path.relative_to(ROOT)}:{i + 1} {match.group(2)} ({n})")
    return out


def test_the_c_and_cython_functions_stay_under_60_lines() -> None:
    """The length rule holds for the native core and its marshalling too (issue 37)."""
    assert long_c_functions("csrc/*.c") + long_c_functions("csrc/*.h") == []
    assert long_pyx_functions("procgen_entities/_native/*.pyx") == []


def test_the_length_checkers_see_long_functions(tmp_path: Path) -> None:
    """The C and Cython checkers report a 70-line function (and not a 70-line initializer)."""
    body = "\n".join(f"    x += {k};" for k in range(68))
    (tmp_path / "long.c").write_text(
        f"static int table[] = {{\n{body}\n}};\nint f(int x) {{\n{body}\n}}\n"
    )
    (tmp_path / "long.pyx").write_text("cdef int g(int x):\n" + body.replace(";", "") + "\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert [r.split(" ")[1] for r in long_c_functions("long.c")] == ["f"]
        assert [r.split(" ")[1] for r in long_pyx_functions("long.pyx")] == ["g"]
    finally:
        ROOT = saved
