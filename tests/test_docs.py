"""The numbers in docs/training.md are what the checked-in metrics files give."""

from __future__ import annotations

from pathlib import Path

import pytest

from procgen_entities.tools.plot import load_run, summary_table

DOCS = Path(__file__).resolve().parent.parent / "docs"
RUNS = sorted((DOCS / "runs").glob("*.jsonl.gz"))


@pytest.mark.parametrize("path", RUNS, ids=[p.name for p in RUNS])
def test_training_table_rows_come_from_the_metrics(path: Path) -> None:
    row = summary_table([load_run(path)]).splitlines()[-1]
    assert row in (DOCS / "training.md").read_text(), f"{path.name}: {row}"


def test_every_game_was_trained_for_two_million_steps() -> None:
    for game in ("coinrun", "ninja", "climber"):
        run = load_run(DOCS / "runs" / f"{game}.jsonl.gz")
        assert run.steps[-1] >= 1_990_000 and run.meta["env"] == "fast"
