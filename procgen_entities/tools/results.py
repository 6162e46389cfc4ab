"""Tables of trained runs, regenerated from their checked-in files.

    python -m procgen_entities.tools.results RUN_DIR [RUN_DIR ...] [--group]
    python -m procgen_entities.tools.results RUN_DIR [RUN_DIR ...] --time-to [RETURN]
    python -m procgen_entities.tools.results --games [--agents docs/runs/agents]

Each RUN_DIR holds ``metrics.jsonl`` (or ``.jsonl.gz``; written by tools/sb3_ppo.py) and
``evaluation.json`` (written by ``procgen_entities.evaluate --json``; without it, the
training columns only). Prints a Markdown table:
per run the env steps, the completion rate of the last 10% of training episodes (sampled
actions), and the greedy evaluation (completion and return with 95% intervals, episode ends).
``--group`` averages runs whose folder names differ only in a trailing ``-s<seed>``; where the
runs also hold ``evaluation-sampled.json`` (``evaluate --sampled --json``), the grouped table
adds the sampled evaluation (the metric the anchors' training returns compare with).
``--time-to`` prints when each run's training return (the mean of the last 2,000 finished
episodes, sampled actions: the anchors' own measure) first reached RETURN (default: the game's
``procgen_ppo`` anchor, the procgen authors' pixel PPO at 25M): the env step, and the wall-clock
minutes of training to it (the update records' seconds, summed over resumed segments).
``--games`` prints the benchmark's one table: per game of procgen's 16 the committed agent's
record (``AGENTS/GAME``: metrics and ``evaluate --json`` files of ``checkpoints/GAME``), its
sampled and greedy return on 1,000 new levels, steps and minutes of training, beside the
procgen authors' PPO at 25M (``Game.anchors["procgen_ppo"]``), both normalised with the procgen
paper's easy constants (``Game.return_range``), and the mean normalised scores.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from procgen_entities.agents.metrics import load_run, smooth
from procgen_entities.errors import UsageError
from procgen_entities.games import GAME_NAMES, get_game

__all__ = ["game_rows", "games_table", "main", "run_summary", "time_to_return"]

#: Episodes in the trailing mean ``--time-to`` reads (the anchors average 100 episodes per
#: update over 10 updates at 64 envs; 2,000 of ours span a few updates).
TIME_TO_WINDOW = 2000


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


def _wall_seconds(path: Path) -> Tuple[np.ndarray, np.ndarray]:
    """(env step, seconds of training) of each update record; a resumed run's records count
    their seconds from its restart, so each segment continues where the last one ended."""
    opener: Any = gzip.open if path.suffix == ".gz" else open
    steps: List[int] = []
    seconds: List[float] = []
    offset = last = 0.0
    with opener(path, "rt") as f:
        for line in f:
            record = json.loads(line)
            if record.get("kind") != "update" or "seconds" not in record:
                continue
            now = float(record["seconds"])
            if now < last:  # a new segment (sb3_ppo --resume)
                offset += last
            last = now
            steps.append(int(record["step"]))
            seconds.append(offset + now)
    return np.array(steps, np.int64), np.array(seconds, np.float64)


def time_to_return(folder: Path, target: Optional[float] = None,
                   window: int = TIME_TO_WINDOW) -> Dict[str, Any]:  # fmt: skip
    """When the trailing ``window``-episode training return first reached ``target`` (the
    game's procgen_ppo anchor by default): {"run", "target", "step", "minutes"} (step and
    minutes None if it never did)."""
    path = _metrics_path(folder)
    run = load_run(path)
    if target is None:
        target = get_game(run.meta["game"]).anchors.get("procgen_ppo")
        if target is None:
            raise UsageError(f"{folder}: {run.meta['game']} has no procgen_ppo anchor")
    trailing = smooth(run.returns, window)
    counted = np.arange(1, len(trailing) + 1) >= min(window, len(trailing))
    reached = np.flatnonzero((trailing >= target) & counted)
    found: Dict[str, Any] = {"run": folder.name, "target": target, "step": None, "minutes": None}
    if len(reached):
        step = int(run.steps[reached[0]])
        steps, seconds = _wall_seconds(path)
        at = min(int(np.searchsorted(steps, step)), len(steps) - 1)
        found.update(step=step, minutes=float(seconds[at]) / 60 if len(steps) else None)
    return found


def _time_to_rows(folders: List[Path], target: Optional[float]) -> List[str]:
    rows = []
    for folder in folders:
        t = time_to_return(folder, target)
        if t["step"] is None:
            rows.append(f"| {t['run']} | {t['target']:g} | not reached | |")
        else:
            rows.append(f"| {t['run']} | {t['target']:g} | {t['step']:,} | {t['minutes']:.0f} |")
    return rows


#: Where each committed agent's record lives: AGENTS_DIR/GAME holds the metrics and the
#: evaluations of checkpoints/GAME (evaluation-sampled.json: ``evaluate --sampled --json``).
AGENTS_DIR = Path("docs/runs/agents")


def _normalised(game: str, value: float) -> float:
    r_min, r_max = get_game(game).return_range or (0.0, 1.0)
    return (value - r_min) / (r_max - r_min)


def game_rows(agents: Path = AGENTS_DIR) -> List[Dict[str, Any]]:
    """One row per procgen game: its PPO anchor and, where ``agents/GAME`` holds a sampled
    evaluation, the agent's figures (return and its 95% interval, greedy return, steps,
    minutes of training, both normalised)."""
    rows = []
    for game in GAME_NAMES:
        ppo = get_game(game).anchors["procgen_ppo"]
        row: Dict[str, Any] = {"game": game, "ppo": ppo, "ppo_normalised": _normalised(game, ppo)}
        folder = agents / game
        if (folder / "evaluation-sampled.json").exists():
            sampled = _checkpoint_row(folder / "evaluation-sampled.json")
            steps, seconds = _wall_seconds(_metrics_path(folder))
            row.update(
                sampled=sampled["return"], sampled_ci95=sampled["return_ci95"],
                episodes=sampled["episodes"], normalised=_normalised(game, sampled["return"]),
                steps=int(steps[-1]) if len(steps) else None,
                minutes=float(seconds[-1]) / 60 if len(seconds) else None,
            )  # fmt: skip
            if (folder / "evaluation.json").exists():
                row["greedy"] = _checkpoint_row(folder / "evaluation.json")["return"]
        rows.append(row)
    return rows


def _game_line(r: Dict[str, Any]) -> str:
    ppo = f"{r['ppo']:.2f} | {r['ppo_normalised']:.2f}"
    if "sampled" not in r:
        return f"| {r['game']} | no agent yet | | | | {ppo} | |"
    greedy = f"{r['greedy']:.2f}" if "greedy" in r else ""
    minutes = f"{r['minutes']:.0f}" if r.get("minutes") is not None else ""
    mark = "above" if r["sampled"] >= r["ppo"] else "below"
    return (
        f"| {r['game']} | {r['sampled']:.2f} ± {r['sampled_ci95']:.2f} | {greedy} | "
        f"{r['steps']:,} | {minutes} | {ppo} | {r['normalised']:.2f} ({mark}) |"
    )


def games_table(agents: Path = AGENTS_DIR) -> List[str]:
    """The 16-game table's Markdown lines (see ``--games``)."""
    rows = game_rows(agents)
    lines = [
        "| game | ours, sampled (95% interval) | greedy | env steps | minutes | "
        "PPO 25M | PPO normalised | ours normalised |",
        "|---|---|---|---|---|---|---|---|",
        *(_game_line(r) for r in rows),
    ]
    have = [r for r in rows if "sampled" in r]
    ppo_all = float(np.mean([r["ppo_normalised"] for r in rows]))
    if have:
        ours = float(np.mean([r["normalised"] for r in have]))
        ppo_same = float(np.mean([r["ppo_normalised"] for r in have]))
        above = sum(r["sampled"] >= r["ppo"] for r in have)
        lines.append("")
        lines.append(f"Mean normalised score over the {len(have)} games with an agent: ours "
                     f"{ours:.3f}, PPO {ppo_same:.3f} ({above} of {len(have)} at or above "
                     f"PPO). PPO over all {len(rows)}: {ppo_all:.3f}.")  # fmt: skip
    return lines


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
        if any("completion" not in r for r in runs):  # no greedy evaluation (sampled only?)
            per_seed = ", ".join(f"{100 * x:.1f}" for x in train)
            rows.append(f"| {name} | {len(runs)} | {100 * np.mean(train):.1f}% ({per_seed}) | | |"
                        + (_sampled_cells(runs) if sampled else ""))  # fmt: skip
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
    parser.add_argument("runs", nargs="*", type=Path)
    parser.add_argument("--games", action="store_true",
                        help="the 16-game table of the committed agents' records")  # fmt: skip
    parser.add_argument("--agents", type=Path, default=AGENTS_DIR,
                        help="where --games reads each game's record (AGENTS/GAME)")  # fmt: skip
    parser.add_argument("--group", action="store_true", help="average over -s<seed> runs")
    parser.add_argument("--time-to", nargs="?", type=float, const=-1.0, default=None,
                        metavar="RETURN", help="when the training return first reached RETURN "
                        "(default: the game's procgen_ppo anchor)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.games:
        if args.runs or args.group or args.time_to is not None:
            parser.error("--games takes no RUN_DIR, --group or --time-to")
        print("\n".join(games_table(args.agents)))
        return 0
    if not args.runs:
        parser.error("give RUN_DIR(s), or --games")
    if args.time_to is not None:
        target = None if args.time_to == -1.0 else args.time_to
        try:
            rows = _time_to_rows(args.runs, target)
        except (FileNotFoundError, ValueError) as exc:
            raise SystemExit(f"error: {exc}") from None
        print(f"| run | training return reached (last {TIME_TO_WINDOW:,} episodes) "
              "| at env step | minutes of training |")  # fmt: skip
        print("|---|---|---|---|")
        print("\n".join(rows))
        return 0
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
