"""Tables of trained runs, regenerated from their checked-in files.

    python -m procgen_entities.tools.results RUN_DIR [RUN_DIR ...] [--group]

Each RUN_DIR holds ``metrics.jsonl`` (or ``.jsonl.gz``; written by tools/sb3_ppo.py) and
``evaluation.json`` (written by ``procgen_entities.evaluate --json``; without it, the
training columns only). Prints a Markdown table:
per run the env steps, the completion rate of the last 10% of training episodes (sampled
actions), and the greedy evaluation (completion and return with 95% intervals, episode ends).
``--group`` averages runs whose folder names differ only in a trailing ``-s<seed>``; where the
runs also hold ``evaluation-sampled.json`` (``evaluate --sampled --json``), the grouped table
adds the sampled evaluation (the metric the anchors' training returns compare with).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from procgen_entities.games import get_game
from procgen_entities.tools.plot import load_run

__all__ = ["main", "run_summary"]


def _metrics_path(folder: Path) -> Path:
    for name in ("metrics.jsonl", "metrics.jsonl.gz"):
        if (folder / name).exists():
            return folder / name
    raise FileNotFoundError(f"{folder}: no metrics.jsonl(.gz)")


def run_summary(folder: Path) -> Dict[str, Any]:
    """Steps, training completion (last 10% of episodes) and the checkpoint's evaluation."""
    run = load_run(_metrics_path(folder))
    tail = run.complete[-max(1, len(run.complete) // 10) :]
    summary = {
        "run": folder.name,
        "steps": run.last_step,
        "train_completion": float(np.mean(tail == 1.0)),
    }
    if (folder / "evaluation-sampled.json").exists():
        sampled = _checkpoint_row(folder / "evaluation-sampled.json")
        summary.update(sampled_completion=sampled["completion"], sampled_return=sampled["return"])
    if not (folder / "evaluation.json").exists():  # e.g. enn-trainer runs: training only
        return summary
    mine = _checkpoint_row(folder / "evaluation.json")
    r_min, r_max = get_game(run.meta["game"]).return_range or (0.0, 1.0)
    summary.update(
        normalised=(mine["return"] - r_min) / (r_max - r_min),
        completion=mine["completion"], completion_ci95=mine["completion_ci95"],
        episodes=mine["episodes"], ends=mine["ends"], **{"return": mine["return"]},
    )  # fmt: skip
    return summary


def _checkpoint_row(path: Path) -> Dict[str, Any]:
    """The checkpoint's entry of an ``evaluate --json`` table (the others are baselines)."""
    evaluation = json.loads(path.read_text())
    return next(v for k, v in evaluation.items() if k.startswith("checkpoint"))  # type: ignore[no-any-return]


def _row(s: Dict[str, Any]) -> str:
    if "completion" not in s:
        return f"| {s['run']} | {s['steps']:,} | {100 * s['train_completion']:.1f}% | | | |"
    ends = ", ".join(f"{k} {v}" for k, v in s["ends"].items())
    return (
        f"| {s['run']} | {s['steps']:,} | {100 * s['train_completion']:.1f}% | "
        f"{100 * s['completion']:.1f}% ± {100 * s['completion_ci95']:.1f} | {s['return']:.2f} "
        f"({s['normalised']:.2f}) | "
        f"{ends} |"
    )


def _sampled_cells(runs: List[Dict[str, Any]]) -> str:
    rates = [r["sampled_completion"] for r in runs if "sampled_completion" in r]
    if len(rates) < len(runs):
        return " | |"
    returns = [r["sampled_return"] for r in runs]
    per_seed = ", ".join(f"{100 * x:.1f}" for x in rates)
    return f" {100 * np.mean(rates):.1f}% ({per_seed}) | {np.mean(returns):.2f} |"


def _grouped(summaries: List[Dict[str, Any]], sampled: bool) -> List[str]:
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for s in summaries:
        groups.setdefault(re.sub(r"-s\d+$", "", s["run"]), []).append(s)
    rows = []
    for name, runs in groups.items():
        train = [r["train_completion"] for r in runs]
        if any("completion" not in r for r in runs):
            per_seed = ", ".join(f"{100 * x:.1f}" for x in train)
            rows.append(f"| {name} | {len(runs)} | {100 * np.mean(train):.1f}% ({per_seed}) | | |")
            continue
        rates = [r["completion"] for r in runs]
        rows.append(
            f"| {name} | {len(runs)} | {100 * np.mean(train):.1f}% | "
            f"{100 * np.mean(rates):.1f}% ({', '.join(f'{100 * x:.1f}' for x in rates)}) | "
            f"{np.mean([r['return'] for r in runs]):.2f} |"
            + (_sampled_cells(runs) if sampled else "")
        )
    return rows


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m procgen_entities.tools.results", description=__doc__.split("\n")[0]
    )
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--group", action="store_true", help="average over -s<seed> runs")
    args = parser.parse_args(argv)
    try:
        summaries = [run_summary(folder) for folder in args.runs]
    except FileNotFoundError as exc:
        raise SystemExit(f"error: {exc}") from None
    if args.group:
        sampled = any("sampled_completion" in s for s in summaries)
        print("| configuration | seeds | training completion (last 10%) "
              "| greedy completion (per seed) | greedy return |"
              + " sampled completion (per seed) | sampled return |" * sampled)  # fmt: skip
        print("|---|---|---|---|---|" + "---|---|" * sampled)
        print("\n".join(_grouped(summaries, sampled)))
        return 0
    print("| run | env steps | training completion (last 10%) | greedy completion | "
          "greedy return (normalised) | episode ends |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    print("\n".join(_row(s) for s in summaries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
