"""Training runs' metrics files (``metrics.jsonl``, or ``.jsonl.gz``; written by
``python -m procgen_entities.train`` and ``procgen_entities.tools.sb3_ppo``): the run record and
its finished episodes read into a ``Run``, the trailing mean the curves draw, and the final
figures (mean return of the last 10% of episodes, normalised score, level_complete rate,
steps/s) as a Markdown table. numpy only; the curves themselves are tools/plot.py's.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Sequence

import numpy as np

__all__ = ["MACHINE_OVERRIDES", "Run", "final_stats", "load_run", "smooth", "summary_table"]


@dataclass
class Run:
    path: Path
    meta: Dict[str, Any]
    steps: np.ndarray  # env step at which each episode finished
    returns: np.ndarray
    complete: np.ndarray  # level_complete per episode (bool)
    steps_per_second: float  # over the whole run
    last_step: int = 0  # the last env step any record reports (updates come after episodes)

    @property
    def label(self) -> str:
        meta = self.meta
        tiles = meta.get("tilemap") or "no tilemap"
        # sb3_ppo records the env's config; tools/train.py (enn-trainer) its num_levels
        levels = (meta.get("env_config") or {}).get("num_levels") or meta.get("num_levels")
        train_on = f", {levels} levels" if levels else ""
        policy = _policy_label(meta) + "".join(f", {o}" for o in _user_overrides(meta))
        return (
            f"{meta.get('game')} ({meta.get('env', 'fast')}, {tiles}{train_on}{policy}, "
            f"seed {meta.get('seed')})"
        )


def _policy_label(meta: Dict[str, Any]) -> str:
    """The policy arms of tools/run_ablations.py where they differ from the recipe (older runs
    record none of these)."""
    policy = f", {meta['policy']}" if meta.get("policy") else ""
    env = meta.get("env_config") or {}
    if env.get("grid"):
        marks = " with entity boxes" if env.get("grid_boxes") else " with entities"
        policy += " + grid" + (marks if env.get("grid_entities") else "")
        if env.get("grid_centre", "camera") != "camera":
            policy += f" around the {env['grid_centre']}"
        if env.get("grid_size"):
            policy += f", {env['grid_size']} cells a side"
    if meta.get("grid_cnn", "small") != "small":
        policy += f" ({meta['grid_cnn']} CNN)"
    if meta.get("separate_value"):
        policy += ", separate value extractor"
    if meta.get("level_sampler"):  # sb3_ppo records the PLR settings only (uniform: none)
        policy += ", PLR"
    if meta.get("mirror"):
        policy += f", mirrored {meta['mirror']:g}"
    if meta.get("policy") and meta.get("gamma", 0.99) != 0.99:
        policy += f", gamma {meta['gamma']}"
    if meta.get("policy") and meta.get("ent_coef", [0.01, 0.01]) != [0.01, 0.01]:
        low, high = meta["ent_coef"]
        policy += f", entropy {low}" + (f":{high}" if high != low else "")
    if meta.get("policy") == "mlp" and meta.get("net", "256,256") != "256,256":
        policy += f", net {meta['net']}"
    if meta.get("learner") == "sb3":  # runs from before the lean learner record no learner
        policy += ", SB3's PPO"
    elif meta.get("learner") == "lean":
        policy += f", lean learner ({meta.get('precision', 'float32')})"
    if meta.get("anneal_lr_to"):
        policy += f", lr {meta.get('learning_rate')} to 0 at {meta['anneal_lr_to'] / 1e6:g}M"
    return policy


#: enn-trainer overrides that say where this machine put a run and for how long, not what the
#: recipe is: run records leave them out (tools/train.py), and older records' labels skip them.
MACHINE_OVERRIDES = ("data_dir=", "max_train_time=")


def _user_overrides(meta: Dict[str, Any]) -> List[str]:
    """An enn-trainer run's settings beyond tools/train.py's base ones: what its record lists
    after ``env.id=...`` (the game's recipe, then the user's overrides; the run folder and time
    limit are not settings of the recipe), or ``user_overrides`` where a record has no list."""
    overrides = [str(o) for o in meta.get("overrides", [])]
    ids = [i for i, o in enumerate(overrides) if o.startswith("env.id=")]
    if ids:
        kept = [o for o in overrides[ids[-1] + 1 :] if not o.startswith(MACHINE_OVERRIDES)]
    else:
        kept = [str(o) for o in meta.get("user_overrides", [])]
    return [re.sub(r"^(net|optim|ppo)\.", "", o) for o in kept]  # d_model=16, lr=0.01, ...


def _steps_per_second(update: Dict[str, Any], meta: Dict[str, Any]) -> float:
    if "steps_per_second" in update:
        return float(update["steps_per_second"])
    # tools/sb3_ppo.py: steps since the (resumed) run started, over its seconds
    done = update["step"] - meta.get("resumed_at", 0)
    return float(done / max(update.get("seconds", 0.0), 1e-9))


def load_run(path: Path) -> Run:
    meta: Dict[str, Any] = {}
    episodes: List[Dict[str, Any]] = []
    sps = float("nan")
    last_step = 0
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        for line in f:
            record = json.loads(line)
            last_step = max(last_step, int(record.get("step", 0)))
            kind = record.get("kind")
            if kind == "run":
                meta = record
                # a resumed run trained again from its checkpoint's step: what the stopped
                # process logged after that step was lost with it, so it is not counted twice
                resumed = int(record.get("resumed_at", 0))
                episodes = [e for e in episodes if e["step"] <= resumed]
            elif kind == "episode":
                episodes.append(record)
            elif kind == "update":
                sps = _steps_per_second(record, meta)
    if not meta:
        raise ValueError(f"{path}: not a metrics file of procgen_entities.train (no run record)")
    return Run(
        path=path,
        meta=meta,
        steps=np.array([e["step"] for e in episodes], dtype=np.int64),
        returns=np.array([e["return"] for e in episodes], dtype=np.float64),
        complete=np.array(
            [
                np.nan if e["level_complete"] is None else float(e["level_complete"])
                for e in episodes
            ],
            dtype=np.float64,
        ),
        steps_per_second=sps,
        last_step=last_step,
    )


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over up to `window` values."""
    if len(values) == 0:
        return values
    cumsum = np.concatenate(([0.0], np.cumsum(values)))
    idx = np.arange(1, len(values) + 1)
    start = np.maximum(idx - window, 0)
    return (cumsum[idx] - cumsum[start]) / (idx - start)


def final_stats(run: Run, fraction: float = 0.1) -> Dict[str, float]:
    n = max(1, int(len(run.returns) * fraction))
    mean_return = float(run.returns[-n:].mean()) if len(run.returns) else float("nan")
    r_min, r_max = run.meta.get("r_min", 0.0), run.meta.get("r_max", 10.0)
    return {
        "episodes": float(len(run.returns)),
        "steps": float(run.steps[-1]) if len(run.steps) else 0.0,
        "mean_return": mean_return,
        "normalised": (mean_return - r_min) / (r_max - r_min),
        "level_complete": _nanmean(run.complete[-n:]),
        "steps_per_second": run.steps_per_second,
    }


def _percent(value: float) -> str:
    return "n/a" if np.isnan(value) else f"{value:.0%}"


def _nanmean(values: np.ndarray) -> float:
    known = values[~np.isnan(values)]
    return float(known.mean()) if len(known) else float("nan")


def summary_table(runs: Sequence[Run]) -> str:
    lines = [
        "| run | env steps | episodes | mean return (last 10%) | R_min / R_max | normalised | "
        "level complete | steps/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        s = final_stats(run)
        lines.append(
            f"| {run.label} | {s['steps']:,.0f} | {s['episodes']:,.0f} | {s['mean_return']:.2f} | "
            f"{run.meta.get('r_min')} / {run.meta.get('r_max')} | {s['normalised']:.2f} | "
            f"{_percent(s['level_complete'])} | {s['steps_per_second']:,.0f} |"
        )
    return "\n".join(lines)
