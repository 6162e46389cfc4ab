"""Packaging facts written once: the version (procgen_entities.__version__, read by pyproject.toml
and CHANGELOG.md) and the tools' commands (one ``python -m`` module and one console script each)."""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from pathlib import Path
from typing import Dict

import pytest

import procgen_entities

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "procgen_entities"

tomllib = pytest.importorskip("tomllib")  # Python 3.11+


def pyproject() -> Dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())  # type: ignore[no-any-return]


def test_version_is_written_once() -> None:
    """pyproject.toml takes the version from the package, the installed metadata agrees (after
    ``pip install -e .``) and CHANGELOG.md's latest release is it."""
    project = pyproject()
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "procgen_entities.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", procgen_entities.__version__)
    assert importlib.metadata.version("procgen-entities") == procgen_entities.__version__
    released = re.findall(r"^## (\d+\.\d+\.\d+)", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert released and released[0] == procgen_entities.__version__


def runnable_modules() -> set:
    """Every module ``python -m`` runs: a package's __main__ or a module with a main guard."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if path.name == "__main__.py":
            found.add(module)
        elif re.search(r'^if __name__ == "__main__":', path.read_text(), re.M):
            found.add(module)
    return found


def test_one_runnable_path_and_one_console_script_per_tool() -> None:
    scripts = pyproject()["project"]["scripts"]
    targets = [value.split(":")[0] for value in scripts.values()]
    assert len(set(targets)) == len(targets), "two scripts run the same module"
    assert set(targets) == runnable_modules()
    assert all(name.startswith("procgen-entities-") for name in scripts)


@pytest.mark.parametrize("script", sorted(pyproject()["project"]["scripts"]))
def test_console_script_resolves(script: str) -> None:
    """Each entry point names a module that imports and a callable ``main(argv=None) -> int``;
    an installed distribution declares the same entry point."""
    target = pyproject()["project"]["scripts"][script]
    module_name, _, function = target.partition(":")
    module = importlib.import_module(module_name)
    main = getattr(module, function)
    assert callable(main)
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    installed = {
        ep.name: ep.value
        for ep in importlib.metadata.distribution("procgen-entities").entry_points
        if ep.group == "console_scripts"
    }
    if installed:  # an install from before [project.scripts] has none
        assert installed.get(script) == target


def test_the_readme_lists_every_command_once() -> None:
    """README.md's "Command-line tools" table is [project.scripts]: each console script with the
    one ``python -m`` spelling that runs its module (a package's ``__main__`` runs as the
    package), no more, no fewer."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Command-line tools\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([\w.]+)` \| `([\w-]+)` \|", section, re.M)
    expected = {
        (value.split(":")[0].removesuffix(".__main__"), name)
        for name, value in pyproject()["project"]["scripts"].items()
    }
    assert len(rows) == len(set(rows)) and set(rows) == expected
