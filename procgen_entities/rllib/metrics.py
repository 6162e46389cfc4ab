"""RLlib results as the project's metrics file and one progress line per iteration.

``metrics.jsonl`` has the records ``python -m procgen_entities.plot`` reads: one ``run`` record
(game, R_min/R_max, settings), then per iteration its finished episodes (``episode``: return,
length, level_complete, the env step it ended near) and one ``update`` record (env steps so far,
seconds, steps/s of the whole run and of this iteration, mean return, healthy runners).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import IO, Any, Dict, List, Mapping, Optional

from procgen_entities.rllib.callbacks import EPISODES_KEY

__all__ = ["MetricsWriter", "episodes_of", "steps_sampled"]


def episodes_of(result: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The episode records the runners logged during this iteration (callbacks.record_episode).

    RLlib's results give a series of one item as the item itself, and none as NaN."""
    records = result.get("env_runners", {}).get(EPISODES_KEY)
    if isinstance(records, Mapping):
        return [dict(records)]
    if not isinstance(records, (list, tuple)):
        return []
    return [dict(r) for r in records]


def steps_sampled(result: Mapping[str, Any]) -> int:
    """Env steps sampled so far (RLlib's lifetime count; reset steps of NEXT_STEP excluded)."""
    runners = result.get("env_runners", {})
    value = result.get(
        "num_env_steps_sampled_lifetime", runners.get("num_env_steps_sampled_lifetime")
    )
    return int(value or 0)


class MetricsWriter:
    """Writes ``path`` (a metrics.jsonl) and formats the progress line of each iteration."""

    def __init__(self, path: Path, meta: Mapping[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file: IO[str] = path.open("w")
        self._write({"kind": "run", **meta})
        self._start = time.perf_counter()
        self._last_time = self._start
        self._last_steps = 0

    def add(self, result: Mapping[str, Any]) -> str:
        """Record one iteration's result; returns its progress line."""
        now = time.perf_counter()
        steps = steps_sampled(result)
        new_steps, seconds = steps - self._last_steps, now - self._last_time
        episodes = episodes_of(result)
        for k, record in enumerate(episodes):
            # Episodes end somewhere in this iteration's sampling: spread them over its steps.
            step = self._last_steps + round(new_steps * (k + 1) / len(episodes))
            self._write({
                "kind": "episode", "step": step, "return": record["return"],
                "length": record["length"], "level_complete": record.get("level_complete"),
                "runner": record.get("runner"),
            })  # fmt: skip
        total = now - self._start
        runners = result.get("env_runners", {})
        mean_return = runners.get("episode_return_mean")
        healthy = result.get("fault_tolerance", {}).get("num_healthy_workers")
        iteration_rate = new_steps / seconds if seconds > 0 else float("nan")
        self._write({
            "kind": "update", "iteration": int(result.get("training_iteration", 0)),
            "step": steps, "seconds": round(total, 2),
            "steps_per_second": round(steps / total, 1) if total > 0 else None,
            "iteration_steps_per_second": round(iteration_rate, 1),
            "episodes": len(episodes), "episode_return_mean": _finite(mean_return),
            "healthy_env_runners": healthy,
        })  # fmt: skip
        self._file.flush()
        self._last_time, self._last_steps = now, steps
        ret = "n/a" if _finite(mean_return) is None else f"{float(mean_return):.2f}"
        return (
            f"iter {int(result.get('training_iteration', 0)):4d}  steps {steps:>11,}  "
            f"sampled {iteration_rate:>9,.0f} steps/s  return {ret:>6} "
            f"({len(episodes)} episodes)  runners {healthy}"
        )

    def close(self) -> None:
        self._file.close()

    def _write(self, record: Mapping[str, Any]) -> None:
        self._file.write(json.dumps(record) + "\n")


def _finite(value: Optional[Any]) -> Optional[float]:
    if value is None:
        return None
    number = float(value)
    return number if number == number and abs(number) != float("inf") else None
