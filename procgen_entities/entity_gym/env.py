"""ProcgenEnv: one procgen game as an entity-gym Environment (for EnvList and friends).

It is a ProcgenVecEnv of one env underneath, so observations are identical to the vec env's.
procgen resets by itself: after a step that ends an episode the env is already at the next
level's first state, so ``reset`` right after a done returns that state instead of starting over.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import numpy as np
import numpy.typing as npt
from entity_gym.env import (
    Action,
    ActionSpace,
    Environment,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    Observation,
    ObsSpace,
)
from ragged_buffer import RaggedBufferI64

from procgen_entities.entity_gym.observation import ACTION_NAME, GLOBAL_ENTITY
from procgen_entities.entity_gym.vec_env import ProcgenVecEnv
from procgen_entities.stepper import unpicklable

__all__ = ["ProcgenEnv"]


class ProcgenEnv(Environment):
    """A single procgen env; keyword arguments as for ProcgenVecEnv."""

    def __init__(self, game: str, *, seed: Optional[int] = None, **kwargs: Any) -> None:
        kwargs.setdefault("num_threads", 1)
        self._vec = ProcgenVecEnv(game, 1, seed=seed, **kwargs)
        self._vec.stepper.owner = type(self).__name__  # the name its errors give
        self._at_episode_start = True

    def obs_space(self) -> ObsSpace:
        return self._vec.obs_space()

    def action_space(self) -> Dict[str, ActionSpace]:
        return self._vec.action_space()

    def reset(self) -> Observation:
        return self.reset_filter(self.obs_space())

    def reset_filter(self, obs_filter: ObsSpace) -> Observation:
        if self._at_episode_start and not self._vec.fresh:
            # procgen already started the next level after the last done.
            obs = self._to_observation(self._vec._observe(obs_filter))
            obs.done, obs.reward = False, 0.0
            return obs
        return self._to_observation(self._vec.reset(obs_filter))

    def act(self, actions: Mapping[str, Action]) -> Observation:
        return self.act_filter(actions, self.obs_space())

    def act_filter(self, actions: Mapping[str, Action], obs_filter: ObsSpace) -> Observation:
        action = actions[ACTION_NAME]
        if not isinstance(action, GlobalCategoricalAction):
            raise TypeError(f"expected a GlobalCategoricalAction for {ACTION_NAME!r}")
        chosen = RaggedBufferI64.from_flattened(
            np.array([[action.index]], dtype=np.int64), np.ones(1, dtype=np.int64)
        )
        obs = self._to_observation(self._vec.act({ACTION_NAME: chosen}, obs_filter))
        self._at_episode_start = obs.done
        return obs

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        return self._vec.render(**kwargs)[0]

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise unpicklable(type(self).__name__)

    def close(self) -> None:
        self._vec.close()

    def get_state(self) -> bytes:
        return self._vec.get_states()[0]

    @staticmethod
    def _to_observation(vec_obs: Any) -> Observation:
        features = {
            name: buf.as_array().copy()
            for name, buf in vec_obs.features.items()
            if name != GLOBAL_ENTITY
        }
        return Observation(
            features=features,
            global_features=vec_obs.features[GLOBAL_ENTITY].as_array()[0].copy(),
            actions={ACTION_NAME: GlobalCategoricalActionMask()},
            done=bool(vec_obs.done[0]),
            reward=float(vec_obs.reward[0]),
            metrics={k: m.mean for k, m in vec_obs.metrics.items()},
        )
