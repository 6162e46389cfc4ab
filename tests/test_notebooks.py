"""The notebooks are stored without outputs (nbstripout). They are executed by nbmake as part of
the test run (pyproject.toml: testpaths includes notebooks/, addopts has --nbmake)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_stripped(path: Path) -> None:
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert not cell.get("outputs"), f"{path.name}: run nbstripout (outputs stored)"
            assert cell.get("execution_count") is None, f"{path.name}: run nbstripout"
