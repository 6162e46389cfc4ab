"""Stable-Baselines3 on EntityVectorEnv: an adapter to SB3's own VecEnv interface.

SB3 wants flat (``MlpPolicy``) or dict (``MultiInputPolicy``) observations, same-step resets
and the terminal observation in ``infos[i]["terminal_observation"]`` (with
``"TimeLimit.truncated"``): exactly EntityVectorEnv with SAME_STEP on the headless engine
(which has the true terminal states). Episode returns and lengths (the env's
``info["episode_stats"]``) go to ``infos[i]["episode"]`` as SB3's Monitor writes them, so
``model.ep_info_buffer`` and its logs work. ``EntityExtractor`` is the entity-native features
extractor for ``MultiInputPolicy`` on the dict form (gymnasium/policy.py). Needs
stable-baselines3 (the train extra).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Type

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from procgen_entities.errors import UsageError
from procgen_entities.gymnasium.observation import GRID_KEY
from procgen_entities.gymnasium.policy import EntityEncoder, FlatGridEncoder, encoder_inputs
from procgen_entities.gymnasium.vector import EntityVectorEnv

__all__ = [
    "EntityExtractor",
    "FlatGridExtractor",
    "FlatVecNormalize",
    "SB3VecEnv",
    "normalized_keys",
]


class SB3VecEnv(VecEnv):  # type: ignore[misc]
    """``SB3VecEnv(EntityVectorEnv(game, n, flatten=True, autoreset_mode="SameStep"))`` (or
    ``flatten=False`` for ``MultiInputPolicy``)."""

    def __init__(self, env: EntityVectorEnv) -> None:
        if env.autoreset_mode != AutoresetMode.SAME_STEP:
            raise UsageError("SB3 needs EntityVectorEnv(..., autoreset_mode='SameStep')")
        if env.engine != "headless":
            raise UsageError("SB3 needs terminal observations: the headless engine")
        self.env = env
        self._actions: Optional[np.ndarray] = None
        self._seed: Optional[int] = None
        super().__init__(env.num_envs, env.single_observation_space, env.single_action_space)

    def reset(self) -> np.ndarray:
        obs, _ = self.env.reset(seed=self._seed)
        self._seed = None
        return obs  # type: ignore[no-any-return]

    def seed(self, seed: Optional[int] = None) -> List[Optional[int]]:
        self._seed = seed
        return [seed] * self.num_envs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self) -> Any:
        assert self._actions is not None, "step_async first"
        obs, reward, terminated, truncated, info = self.env.step(self._actions)
        dones = terminated | truncated
        infos: List[dict] = [{} for _ in range(self.num_envs)]
        for i in np.flatnonzero(dones):
            stats = info[self.env.stats_key]
            infos[i]["terminal_observation"] = info["final_obs"][i]
            infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
            infos[i]["episode"] = {
                "r": float(stats["r"][i]),
                "l": int(stats["l"][i]),
                "t": 0.0,
            }
            infos[i]["level_complete"] = bool(info["prev_level_complete"][i])
        return obs, reward, dones, infos

    def close(self) -> None:
        self.env.close()

    def get_attr(self, attr_name: str, indices: Any = None) -> List[Any]:
        return [getattr(self.env, attr_name)] * len(self._indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        setattr(self.env, attr_name, value)

    def env_method(
        self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any
    ) -> List[Any]:
        result = getattr(self.env, method_name)(*args, **kwargs)
        return [result] * len(self._indices(indices))

    def env_is_wrapped(self, wrapper_class: Type[Any], indices: Any = None) -> List[bool]:
        return [False] * len(self._indices(indices))

    def get_images(self) -> Sequence[Optional[np.ndarray]]:
        return list(self.env.render())

    def _indices(self, indices: Any) -> List[int]:
        if indices is None:
            return list(range(self.num_envs))
        return [indices] if isinstance(indices, int) else list(indices)


def normalized_keys(observation_space: spaces.Dict) -> List[str]:
    """The dict form's keys VecNormalize may normalise: slot values and globals (not the
    masks, not the class image)."""
    return [k for k in observation_space.spaces if not k.endswith("_mask") and k != GRID_KEY]


class FlatVecNormalize(VecNormalize):  # type: ignore[misc]
    """SB3's ``VecNormalize`` with the dict form's keys normalised in one pass: the keys'
    values side by side in one [envs, D] array, so each step makes one mean, one variance and
    one normalisation instead of three numpy calls per key, and no deep copy of the
    observation. The statistics stay SB3's (one ``RunningMeanStd`` per key, updated from the
    same moments, elementwise the same arithmetic: tests/test_lean_ppo.py compares them with
    VecNormalize's bit for bit), so checkpoints and ``load_normalizer`` are unchanged. The flat
    form is VecNormalize's own."""

    def __init__(self, venv: VecEnv, **kwargs: Any) -> None:
        super().__init__(venv, **kwargs)
        self._layout: List[Any] = []
        if self.norm_obs and isinstance(self.obs_rms, dict):
            start = 0
            space: Any = self.observation_space
            for key in self.norm_obs_keys or ():
                shape = tuple(space.spaces[key].shape)
                size = int(np.prod(shape))
                self._layout.append((key, slice(start, start + size), shape))
                start += size

    def _side_by_side(self, obs: Dict[str, np.ndarray], n: int) -> np.ndarray:
        return np.concatenate([obs[key].reshape(n, -1) for key, _, _ in self._layout], axis=1)

    def _update_stats(self, obs: Any) -> None:
        if not self._layout:
            self.obs_rms.update(obs)
            return
        n = len(obs[self._layout[0][0]])
        flat = self._side_by_side(obs, n)
        mean, var = np.mean(flat, axis=0), np.var(flat, axis=0)
        for key, part, shape in self._layout:
            self.obs_rms[key].update_from_moments(mean[part].reshape(shape),
                                                  var[part].reshape(shape), n)  # fmt: skip

    def normalize_obs(self, obs: Any) -> Any:
        if not self._layout or not isinstance(obs, dict):
            return super().normalize_obs(obs)
        key0, _, shape0 = self._layout[0]
        single = obs[key0].shape == shape0  # a terminal observation: one env's, no batch axis
        batch = {k: v[None] for k, v in obs.items()} if single else obs
        n = len(batch[key0])
        flat = self._side_by_side(batch, n)
        mean = np.concatenate([self.obs_rms[k].mean.reshape(-1) for k, _, _ in self._layout])
        var = np.concatenate([self.obs_rms[k].var.reshape(-1) for k, _, _ in self._layout])
        normed = np.clip((flat - mean) / np.sqrt(var + self.epsilon), -self.clip_obs,
                         self.clip_obs).astype(np.float32)  # fmt: skip
        out = dict(batch)
        for key, part, shape in self._layout:
            out[key] = normed[:, part].reshape(n, *shape)
        return {k: v[0] for k, v in out.items()} if single else out

    def step_wait(self) -> Any:
        obs, rewards, dones, infos = self.venv.step_wait()
        self.old_obs, self.old_reward = obs, rewards  # type: ignore[assignment]
        if self.training and self.norm_obs:
            self._update_stats(obs)
        obs = self.normalize_obs(obs)
        if self.training:
            self._update_reward(rewards)
        rewards = self.normalize_reward(rewards)
        for i in np.flatnonzero(dones):
            if "terminal_observation" in infos[i]:
                infos[i]["terminal_observation"] = self.normalize_obs(
                    infos[i]["terminal_observation"]
                )
        self.returns[dones] = 0
        return obs, rewards, dones, infos


class FlatGridExtractor(BaseFeaturesExtractor):  # type: ignore[misc]
    """``FlatGridEncoder``: the flat MLP input plus a CNN over ``grid``, for
    ``MultiInputPolicy`` on ``EntityVectorEnv(..., grid=True)`` (normalise with
    ``VecNormalize(env, norm_obs_keys=normalized_keys(space))``)."""

    def __init__(
        self, observation_space: spaces.Dict, grid_dim: Optional[int] = None, cnn: str = "small"
    ) -> None:
        types, n_globals, grid = encoder_inputs(observation_space)
        if grid is None:
            raise UsageError("FlatGridExtractor needs EntityVectorEnv(..., grid=True)")
        net = FlatGridEncoder(types, n_globals, grid, grid_dim=grid_dim, cnn=cnn)
        super().__init__(observation_space, net.out_dim)
        self.net = net

    def forward(self, observations: Dict[str, torch.Tensor]) -> torch.Tensor:
        return self.net(observations)  # type: ignore[no-any-return]


class EntityExtractor(BaseFeaturesExtractor):  # type: ignore[misc]
    """``EntityEncoder`` as SB3's features extractor: ``PPO("MultiInputPolicy", env,
    policy_kwargs={"features_extractor_class": EntityExtractor})`` on the dict form. Keywords
    go to EntityEncoder (d_model, n_heads, n_layers, grid_dim)."""

    def __init__(self, observation_space: spaces.Dict, **encoder: Any) -> None:
        types, n_globals, grid = encoder_inputs(observation_space)
        net = EntityEncoder(types, n_globals, grid=grid, **encoder)
        super().__init__(observation_space, net.out_dim)
        self.net = net

    def forward(self, observations: Dict[str, torch.Tensor]) -> torch.Tensor:
        return self.net(observations)  # type: ignore[no-any-return]
