"""enn-trainer EnvFactory for ProcgenVecEnv: callable(EnvConfig, num_envs, processes, seed)."""

from __future__ import annotations

from typing import Any, Callable

from procgen_entities.vec_env import ProcgenVecEnv

__all__ = ["env_factory"]


def env_factory(game: str, **options: Any) -> Callable[..., ProcgenVecEnv]:
    """An EnvFactory that makes ``ProcgenVecEnv(game, num_envs, seed=seed, **options)``.

    enn-trainer's ``processes`` is ignored: the vec env already spreads get_state over threads.
    Keyword arguments in the EnvConfig (``cfg.kwargs``, a JSON string or dict) override
    ``options``.
    """

    def make(cfg: Any, num_envs: int, processes: int, seed: int) -> ProcgenVecEnv:
        overrides = getattr(cfg, "kwargs", None) or {}
        if isinstance(overrides, str):
            import json

            overrides = json.loads(overrides) if overrides.strip() else {}
        return ProcgenVecEnv(game, num_envs, seed=seed, **{**options, **overrides})

    return make
