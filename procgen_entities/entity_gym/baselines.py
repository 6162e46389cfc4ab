"""The way entity observations of procgen were made before this library, kept as a baseline.

``SeedStyleEnv`` is one procgen env per entity-gym Environment: gym3's get_state (a fresh 1 MiB
buffer per call), a pure-Python parse per state, features picked out with numpy. Benchmarks
and training runs compare ProcgenVecEnv with ``EnvList`` of these, in the same process.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping

import numpy as np
from entity_gym.env import Environment, GlobalCategoricalActionMask, Observation, ObsSpace

from procgen_entities.entity_gym.observation import (
    VECTOR_HEAD_ITEMS,
    StepValues,
    action_space,
    global_features,
    observation_space,
)
from procgen_entities.features import batch_footing
from procgen_entities.games import get_game
from procgen_entities.parse import StateBatch
from procgen_entities.procgen_envs import make_procgen_env
from procgen_entities.reference import reference_parse_states

__all__ = ["SeedStyleEnv"]


def _step_values(batch: StateBatch) -> StepValues:
    """The inputs of the global features, for a batch of one state."""
    heads = {}
    for name, values in batch.vectors.items():
        if values.ndim == 1:  # scalar vectors (not starpilot's entity records)
            items = batch.vector(name, 0)[:VECTOR_HEAD_ITEMS]
            head = np.zeros((1, VECTOR_HEAD_ITEMS), dtype=np.float64)
            head[0, : len(items)] = items
            heads[name] = head
    footing = batch_footing(batch) if get_game(batch.game).support is not None else None
    return StepValues(
        scalars=batch.scalars, extras=batch.extras, vector_heads=heads, footing=footing
    )


class SeedStyleEnv(Environment):
    """The old way: one procgen env, get_state through gym3, a pure-Python parse per state."""

    def __init__(self, game: str, seed: int, **procgen_options: Any) -> None:
        self.game = get_game(game)
        self.env = make_procgen_env(game, 1, rand_seed=seed, **procgen_options)
        self.space = observation_space(self.game)

    def obs_space(self) -> ObsSpace:
        return self.space

    def action_space(self) -> Dict[str, Any]:
        return dict(action_space())

    def reset(self) -> Observation:
        return self._observe()

    def act(self, actions: Mapping[str, Any]) -> Observation:
        self.env.act(np.array([actions["move"].index], dtype=np.int32))
        return self._observe()

    def _observe(self) -> Observation:
        batch = reference_parse_states(self.env.callmethod("get_state"))
        types = batch.field("type").astype(int)
        features = {}
        for tid, name in self.game.entity_types.items():
            cols = [batch.entity_fields.index(f) for f in self.game.entity_features(name)]
            features[name] = batch.entities[types == tid][:, cols]
        return Observation(
            features=features,
            actions={"move": GlobalCategoricalActionMask()},
            global_features=global_features(
                self.game, self.space.global_features, _step_values(batch)
            )[0],
            done=bool(batch.done[0]),
            reward=float(batch.reward[0]),
        )
