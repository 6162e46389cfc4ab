"""Gymnasium interface: procgen's entities as padded arrays with masks.

``EntityVectorEnv`` (a native ``gymnasium.vector.VectorEnv``) and ``EntityEnv`` (a
``gymnasium.Env``); importing this module registers ``procgen_entities/<game>-v0`` for all 16
games, with a ``vector_entry_point``, so ``gymnasium.make`` and ``gymnasium.make_vec`` give the
native classes. ``PrioritizedLevels`` wraps an EntityVectorEnv so that its episodes start on
the levels a ``level_sampling.LevelSampler`` draws (prioritized.py). Needs gymnasium, not
entity-gym.
"""

from __future__ import annotations

import gymnasium

from procgen_entities.games import GAME_NAMES
from procgen_entities.gymnasium.env import EntityEnv
from procgen_entities.gymnasium.prioritized import PrioritizedLevels
from procgen_entities.gymnasium.vector import EntityVectorEnv

__all__ = ["EntityEnv", "EntityVectorEnv", "PrioritizedLevels", "env_id", "register_envs"]


def env_id(game: str) -> str:
    return f"procgen_entities/{game}-v0"


def register_envs() -> None:
    """Register every game (idempotent)."""
    for game in GAME_NAMES:
        if env_id(game) in gymnasium.registry:
            continue
        gymnasium.register(
            id=env_id(game),
            entry_point="procgen_entities.gymnasium:EntityEnv",
            vector_entry_point="procgen_entities.gymnasium:EntityVectorEnv",
            kwargs={"game": game},
        )


register_envs()
