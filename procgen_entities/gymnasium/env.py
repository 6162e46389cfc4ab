"""EntityEnv: one procgen env with padded entity observations as a ``gymnasium.Env``.

It is an EntityVectorEnv of one env with NEXT_STEP autoreset underneath (so the headless engine):
a step that ends an episode returns the true terminal observation; ``reset()`` then starts the
next episode (procgen's own next level), and ``reset(seed=...)`` restarts procgen with that seed.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import gymnasium
import numpy as np

from procgen_entities.gymnasium.vector import EntityVectorEnv
from procgen_entities.stepper import unpicklable

__all__ = ["EntityEnv"]


class EntityEnv(gymnasium.Env):  # type: ignore[misc]
    """A single procgen env; keyword arguments as for EntityVectorEnv (engine: headless)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 15}

    def __init__(self, game: str, render_mode: Optional[str] = "rgb_array", **kwargs: Any) -> None:
        kwargs.setdefault("num_threads", 1)
        self._vec = EntityVectorEnv(
            game, 1, autoreset_mode="NextStep", render_mode=render_mode, **kwargs
        )
        self._vec.stepper.owner = type(self).__name__  # the name its errors give
        self.observation_space = self._vec.single_observation_space
        self.action_space = self._vec.single_action_space
        self.render_mode = render_mode
        self.metadata = {**type(self).metadata, **{
            k: v for k, v in self._vec.metadata.items() if k != "autoreset_mode"
        }}  # fmt: skip
        self._needs_reset = True

    def reset(
        self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None
    ) -> Tuple[Any, Dict[str, Any]]:
        super().reset(seed=seed)
        vec = self._vec
        if seed is None and vec.stepper.pending_reset.any():
            obs, _, _, _, info = vec.step(np.zeros(1, dtype=np.int64))  # only resets
        else:
            obs, info = vec.reset(seed=seed)
        self._needs_reset = False
        return self._one(obs), self._one(info)

    def step(self, action: Any) -> Tuple[Any, float, bool, bool, Dict[str, Any]]:
        obs, reward, terminated, truncated, info = self._vec.step(np.asarray([action]))
        return (
            self._one(obs),
            float(reward[0]),
            bool(terminated[0]),
            bool(truncated[0]),
            self._one(info),
        )

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise unpicklable(type(self).__name__)

    def render(self) -> Any:
        frames = self._vec.render()
        return None if frames is None else frames[0]

    def close(self) -> None:
        self._vec.close()

    def _one(self, batch: Any) -> Any:
        if isinstance(batch, dict):
            return {k: self._one(v) for k, v in batch.items()}
        if isinstance(batch, np.ndarray):
            return batch[0]
        return batch
