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


AGENT_RUNS = sorted((DOCS / "runs" / "agents").glob("*/metrics.jsonl.gz"))


@pytest.mark.parametrize("path", AGENT_RUNS, ids=[p.parent.name for p in AGENT_RUNS])
def test_agent_curve_rows_come_from_the_metrics(path: Path) -> None:
    row = summary_table([load_run(path)]).splitlines()[-1]
    assert row in (DOCS / "training.md").read_text(), f"{path.parent.name}: {row}"


@pytest.mark.parametrize("game", ["coinrun", "ninja", "climber"])
def test_agent_evaluations_in_the_docs_are_the_checked_in_ones(game: str) -> None:
    import json

    evaluation = json.loads((DOCS / "runs" / "agents" / game / "evaluation.json").read_text())
    mine = next(v for k, v in evaluation.items() if k.startswith("checkpoint"))
    figure = f"{100 * mine['completion']:.1f}% ± {100 * mine['completion_ci95']:.1f}"
    assert figure in (DOCS / "training.md").read_text(), figure
    assert load_run(DOCS / "runs" / "agents" / game / "metrics.jsonl.gz").steps[-1] >= 2_990_000


@pytest.mark.parametrize(("folder", "runs"), [("ablations", 12), ("climber-tilemap", 4)])
def test_the_ablation_tables_come_from_the_runs(
    folder: str, runs: int, capsys: pytest.CaptureFixture
) -> None:
    from procgen_entities.tools.results import main

    folders = sorted(p for p in (DOCS / "runs" / folder).glob("*") if p.is_dir())
    assert len(folders) == runs  # configurations x 2 seeds
    main([*map(str, folders), "--group"])
    table = capsys.readouterr().out.strip().splitlines()
    text = (DOCS / "training.md").read_text()
    assert all(row in text for row in table), [row for row in table if row not in text]
