"""Prioritized Level Replay in sb3_ppo's runs (``--level-sampler plr``): the sampler, the env
wrapper and the scoring hook, for the lean learner and SB3's PPO alike.

A run's ``LevelReplay`` wraps its EntityVectorEnv in ``PrioritizedLevels``; sb3_ppo's hooks
tell it where each rollout starts and steps (it records every step's level) and hand it the
rollout's GAE advantages (``advantages``: after GAE, before the update), from which it scores
each finished episode for its level (level_sampling.score_episodes) and writes every env's next
levels from the new scores (``PrioritizedLevels.refresh``). The settings go to env.json
(``trainer["level_sampler"]``), the sampler's state to ``level_sampler.json`` beside the
checkpoint's other files (JSON: data only), which ``--resume`` continues from.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from procgen_entities.errors import UsageError
from procgen_entities.gymnasium.prioritized import PrioritizedLevels
from procgen_entities.level_sampling import (
    SCORES,
    LevelSampler,
    episode_ends,
    score_episodes,
)

__all__ = ["DEFAULTS", "SAMPLER_FILE", "LevelReplay", "read_state"]

#: The sampler's state in a checkpoint folder.
SAMPLER_FILE = "level_sampler.json"
#: env.json's record of a PLR run's sampler (PLR's defaults; ``replay_prob`` None: the fraction
#: of the levels seen).
DEFAULTS: Dict[str, Any] = {"kind": "plr", "beta": 0.1, "rho": 0.1, "replay_prob": None,
                            "score": "positive"}  # fmt: skip


def check_settings(settings: Dict[str, Any]) -> Dict[str, Any]:
    """A run's sampler settings (``DEFAULTS``' keys), checked: UsageError naming the problem."""
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown or settings.get("kind") != "plr":
        raise UsageError(f"a level_sampler record is {sorted(DEFAULTS)} with kind 'plr', got "
                         f"{settings!r}")  # fmt: skip
    if settings.get("score") not in SCORES:
        raise UsageError(f"level_sampler score must be one of {', '.join(SCORES)}")
    full = {**DEFAULTS, **settings}
    LevelSampler(1, beta=full["beta"], rho=full["rho"], replay_prob=full["replay_prob"])
    return full


def read_state(folder: Path) -> Optional[Dict[str, Any]]:
    """The sampler state a checkpoint folder holds (None if it has none)."""
    path = folder / SAMPLER_FILE
    if not path.is_file():
        return None
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a level sampler state ({exc})") from None
    if not isinstance(state, dict):
        raise UsageError(f"{path}: not a level sampler state")
    return state


class LevelReplay:
    """A run's sampler (``settings``: DEFAULTS' keys; ``seed``: its draws; ``state``: a saved
    one to continue) around ``env``; ``env`` (the PrioritizedLevels) is what the run steps."""

    def __init__(
        self, env: Any, settings: Dict[str, Any], seed: int, state: Optional[Dict[str, Any]]
    ) -> None:
        self.settings = check_settings(settings)
        num_levels = int(env.stepper.procgen_options.get("num_levels", 0))
        if num_levels <= 0:
            raise UsageError("level sampling needs a finite set of levels: num_levels > 0")
        s = self.settings
        self.sampler = LevelSampler(num_levels, beta=s["beta"], rho=s["rho"],
                                    replay_prob=s["replay_prob"], seed=seed)  # fmt: skip
        if state is not None:
            self.sampler.load_state_dict(state)
        self.env = PrioritizedLevels(env, self.sampler, seed=seed)
        self._levels: List[np.ndarray] = []
        self._carry: Dict[str, Any] = {}
        #: Episodes scored, and seconds spent writing the queues, since the run started.
        self.scored = 0
        self.refresh_seconds = 0.0

    def rollout_start(self) -> None:
        self._levels = [self.env.levels]

    def step(self) -> None:
        self._levels.append(self.env.levels)

    def advantages(self, advantages: Any, starts: Any, dones: Any) -> None:
        """After GAE: score the rollout's finished episodes, then write the next levels."""
        adv = np.asarray(advantages)
        levels = np.stack(self._levels[: len(adv)])
        ends = episode_ends(starts, dones)
        self.scored += score_episodes(self.sampler, adv, levels, ends, self._carry,
                                      self.settings["score"])  # fmt: skip
        began = time.perf_counter()
        self.env.refresh()
        self.refresh_seconds += time.perf_counter() - began

    def record(self) -> Dict[str, Any]:
        """The run's level figures for metrics.jsonl (a "levels" record per rollout)."""
        return {"seen": int(self.sampler.seen.sum()), "scored": self.scored,
                "refreshes": self.env.refreshes,
                "refresh_seconds": round(self.refresh_seconds, 2)}  # fmt: skip

    def save(self, folder: Path) -> None:
        (folder / SAMPLER_FILE).write_text(json.dumps(self.sampler.state_dict()) + "\n")
