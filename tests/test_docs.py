"""The docs are tests: the numbers in docs/training.md are what the checked-in metrics files
give, and every Python block of README.md and docs/*.md runs as written, its comments checked."""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import pytest

from procgen_entities.agents.metrics import load_run, summary_table

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


AGENT_RUNS = [
    path
    for folder in ("agents", "policy-ninja", "policy-bigfish", "policy-climber")
    for path in sorted((DOCS / "runs" / folder).glob("*/metrics.jsonl.gz"))
]


@pytest.mark.parametrize(
    "path", AGENT_RUNS, ids=[f"{p.parent.parent.name}/{p.parent.name}" for p in AGENT_RUNS]
)
def test_agent_curve_rows_come_from_the_metrics(path: Path) -> None:
    row = summary_table([load_run(path)]).splitlines()[-1]
    assert row in (DOCS / "training.md").read_text(), f"{path.parent.name}: {row}"


@pytest.mark.parametrize("game", ["coinrun", "ninja", "climber", "bigfish"])
def test_agent_evaluations_in_the_docs_are_the_checked_in_ones(game: str) -> None:
    import json

    evaluation = json.loads((DOCS / "runs" / "agents" / game / "evaluation.json").read_text())
    mine = next(v for k, v in evaluation.items() if k.startswith("checkpoint"))
    figure = f"{100 * mine['completion']:.1f}% ± {100 * mine['completion_ci95']:.1f}"
    assert figure in (DOCS / "training.md").read_text(), figure
    assert load_run(DOCS / "runs" / "agents" / game / "metrics.jsonl.gz").steps[-1] >= 2_990_000


@pytest.mark.parametrize("name", ["evaluation-sampled", "evaluation-sampled-train-levels"])
@pytest.mark.parametrize(
    "run",
    ["coinrun-200-25m", "climber-200-25m", "ninja-200-25m", "bigfish-200-25m", "starpilot-200-25m"],
)
def test_protocol_figures_in_the_docs_are_the_checked_in_evaluations(run: str, name: str) -> None:
    """Issue 35's table: each GAME-200 agent's sampled test and train returns are the
    evaluations' own."""
    import json

    evaluation = json.loads((DOCS / "runs/agents" / run / f"{name}.json").read_text())
    mine = next(v for k, v in evaluation.items() if k.startswith("checkpoint"))
    figure = f"{mine['return']:.2f} ± {mine['return_ci95']:.2f}"
    assert figure in (DOCS / "training.md").read_text(), figure


BASELINES = sorted((DOCS / "runs" / "baselines").glob("*.json"))


def baseline_row(record: Dict[str, Any]) -> str:
    """docs/training.md's row of one game's ``evaluate --game`` table (docs/runs/baselines):
    the return (normalised) of random, the best constant and the scripted rule, and random's
    episode ends."""

    def cell(summary: Optional[Dict[str, Any]]) -> str:
        if summary is None:
            return "-"
        mean, ci, normalised = summary["return"], summary["return_ci95"], summary["normalised"]
        return f"{mean:.2f} ± {ci:.2f} ({normalised:+.2f})"

    constant = next(k for k in record if k.startswith("constant "))
    ends = ", ".join(f"{k} {v}" for k, v in record["random"]["ends"].items())
    return (f"| {record['game']} | {cell(record['random'])} | {constant.split()[1]} | "
            f"{cell(record[constant])} | {cell(record.get('scripted'))} | {ends} |")  # fmt: skip


def test_every_game_has_its_baselines_recorded() -> None:
    from procgen_entities.agents.evaluation import EVAL_SEED
    from procgen_entities.games import GAME_NAMES

    assert [p.stem for p in BASELINES] == sorted(GAME_NAMES)
    for path in BASELINES:
        record = json.loads(path.read_text())
        assert record["seed"] == EVAL_SEED and record["distribution_mode"] == "easy"
        assert record["game"] == path.stem and record["random"]["episodes"] == 200


@pytest.mark.parametrize("path", BASELINES, ids=[p.stem for p in BASELINES])
def test_the_baselines_table_comes_from_the_runs(path: Path) -> None:
    """Issue 36's table: each game's row is its docs/runs/baselines JSON."""
    row = baseline_row(json.loads(path.read_text()))
    assert row in (DOCS / "training.md").read_text(), row


@pytest.mark.parametrize(
    ("folder", "runs"),
    [
        ("ablations", 12),
        ("climber-tilemap", 4),
        ("policy-ninja", 9),
        ("policy-bigfish", 4),
        ("policy-climber", 5),
        ("learner-coinrun", 3),  # issue 34: the lean learner against SB3's PPO
        ("learner-climber", 4),
    ],
)
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


def test_the_16_game_table_comes_from_the_committed_records(capsys: pytest.CaptureFixture) -> None:
    """Issue 36's table in docs/training.md is ``results --games`` as the files make it, and its
    anchors are the declared ones: PPO's 16-game mean normalised score is the issue's 0.646."""
    from procgen_entities.tools.results import game_rows, main

    main(["--games", "--agents", str(DOCS / "runs" / "agents")])
    table = capsys.readouterr().out.strip().splitlines()
    text = (DOCS / "training.md").read_text()
    assert all(row in text for row in table), [row for row in table if row not in text]
    rows = game_rows(DOCS / "runs" / "agents")
    assert len(rows) == 16
    assert round(sum(r["ppo_normalised"] for r in rows) / 16, 3) == 0.646
    coinrun = next(r for r in rows if r["game"] == "coinrun")
    recorded = json.loads((DOCS / "runs/agents/coinrun/evaluation-sampled.json").read_text())
    mine = next(v for k, v in recorded.items() if k.startswith("checkpoint"))
    assert coinrun["sampled"] == mine["return"] and coinrun["steps"] == 25_001_984


# ---- every Python block of README.md and docs/*.md runs as written ----

ROOT = DOCS.parent
#: ``<!-- test: EXTRA -->`` before a block: it needs that extra and runs only where it is installed.
EXTRAS = {
    "entity-gym": ("entity_gym",),
    "train": ("stable_baselines3", "torch"),
    "enn": ("enn_trainer",),
    "ray": ("ray.rllib",),
}
_BLOCK = re.compile(r"(?:<!-- test: ([\w-]+) -->\s*\n)?```python\n(.*?)```", re.S)
_SHAPED = re.compile(r"\b(float32|float64|int32|int64|uint8|bool)\s*\[([^\]]*)\]")


@dataclass(frozen=True)
class Block:
    doc: str
    line: int
    extra: Optional[str]
    source: str


def _blocks() -> List[Block]:
    found = []
    for path in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        text = path.read_text()
        for m in _BLOCK.finditer(text):
            line = text[: m.start(2)].count("\n") + 1
            found.append(Block(str(path.relative_to(ROOT)), line, m.group(1), m.group(2)))
    return found


BLOCKS = _blocks()


def _comments(source: str) -> Dict[int, str]:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {t.start[0]: t.string[1:].strip() for t in tokens if t.type == tokenize.COMMENT}


def _check_comment(value: Any, comment: str, where: str) -> None:
    """What an expression's comment states about it, where it states something checkable:
    dtypes and shapes (``float32[n, 31], bool[n]``: the dtype, the rank and every number), a
    Python literal (equal), or a repr (``Box(-inf, inf, (20, 6), float32)``: equal)."""
    shaped = _SHAPED.findall(comment)
    if shaped:
        values = value if isinstance(value, tuple) else (value,)
        shaped *= len(values) if len(shaped) == 1 else 1  # one spec for every value
        assert len(values) == len(shaped), f"{where}: {len(values)} values, comment {comment!r}"
        for v, (dtype, dims) in zip(values, shaped):
            array = np.asarray(v)
            assert array.dtype == np.dtype(dtype), f"{where}: {array.dtype}, comment {comment!r}"
            sizes = [d.strip() for d in dims.split(",")]
            assert array.ndim == len(sizes), f"{where}: shape {array.shape}, comment {comment!r}"
            for size, actual in zip(sizes, array.shape):
                assert not size.isdigit() or int(size) == actual, f"{where}: shape {array.shape}"
        return
    try:
        literal = ast.literal_eval(comment)
    except (ValueError, SyntaxError):
        if comment.startswith(f"{type(value).__name__}("):
            assert repr(value) == comment, f"{where}: {value!r}, comment {comment!r}"
        return
    if not isinstance(literal, (tuple, list, dict, str, int, float)) or "..." in comment:
        return
    assert value == literal, f"{where}: {value!r}, comment {comment!r}"


def _close_all(namespace: Dict[str, Any]) -> None:
    for value in namespace.values():
        module = type(value).__module__ or ""
        if module.startswith(("procgen", "gym")) and callable(getattr(value, "close", None)):
            value.close()


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{b.doc}:{b.line}" for b in BLOCKS])
def test_doc_block_runs_as_written(block: Block) -> None:
    """Each block alone, in a fresh namespace, statement by statement; an expression statement's
    comment is checked against its value (_check_comment)."""
    if block.extra is not None:
        assert block.extra in EXTRAS, f"{block.doc}:{block.line}: unknown extra {block.extra!r}"
        for module in EXTRAS[block.extra]:
            pytest.importorskip(module, reason=f"needs the {block.extra} extra ({module})")
    shift = block.line - 1  # line numbers of the document, in tracebacks too
    comments = {line + shift: text for line, text in _comments(block.source).items()}
    namespace: Dict[str, Any] = {"__name__": "__doc_block__"}
    tree = ast.increment_lineno(ast.parse(block.source), shift)
    filename = str(ROOT / block.doc)
    try:
        for statement in tree.body:
            where = f"{block.doc}:{statement.lineno}"
            if isinstance(statement, ast.Expr):
                code = compile(ast.Expression(statement.value), filename, "eval")
                value = eval(code, namespace)
                comment = comments.get(statement.end_lineno or statement.lineno)
                if comment:
                    _check_comment(value, comment, where)
            else:
                exec(compile(ast.Module([statement], []), filename, "exec"), namespace)
    finally:
        _close_all(namespace)


def test_every_python_block_is_found() -> None:
    """The README's and the docs' blocks (a changed fence would silently drop one)."""
    readme = (ROOT / "README.md").read_text()
    assert sum(b.doc == "README.md" for b in BLOCKS) == readme.count("```python")
    assert len(BLOCKS) == sum(p.read_text().count("```python") for p in [ROOT / "README.md",
                              *DOCS.glob("*.md")])  # fmt: skip
