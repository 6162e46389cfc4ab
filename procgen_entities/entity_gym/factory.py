"""enn-trainer EnvFactory for ProcgenVecEnv: callable(EnvConfig, num_envs, processes, index)."""

from __future__ import annotations

import itertools
import json
from typing import Any, Callable

from procgen_entities.entity_gym.vec_env import ProcgenVecEnv

__all__ = ["env_factory"]


def env_factory(game: str, *, seed: int = 0, **options: Any) -> Callable[..., ProcgenVecEnv]:
    """An EnvFactory that makes ``ProcgenVecEnv(game, num_envs, seed=..., **options)``.

    enn-trainer's 4th argument is the index of the first env (0 without distributed runs), not
    a seed; the procgen seed is ``seed`` plus that index, plus 1000 for each env made before
    (enn-trainer makes a fresh env for every evaluation, which should not replay the training
    levels). ``processes`` is ignored: the vec env spreads get_state over threads itself.
    Keyword arguments in the EnvConfig (``cfg.kwargs``, a JSON string or a dict) override
    ``options``; a ``seed`` there replaces ``seed``.
    """
    made = itertools.count()

    def make(cfg: Any, num_envs: int, processes: int, first_env_index: int) -> ProcgenVecEnv:
        overrides = getattr(cfg, "kwargs", None) or {}
        if isinstance(overrides, str):
            overrides = json.loads(overrides) if overrides.strip() else {}
        kwargs = {**options, **overrides}
        base = int(kwargs.pop("seed", seed))
        return ProcgenVecEnv(
            game, num_envs, seed=base + first_env_index + 1000 * next(made), **kwargs
        )

    return make
