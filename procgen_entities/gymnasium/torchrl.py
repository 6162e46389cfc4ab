"""TorchRL on EntityVectorEnv: ``torchrl_env(game, n)`` is ``GymWrapper`` of the native vector
env in the one autoreset mode TorchRL wants, ``DISABLED`` (TorchRL resets finished envs itself,
through ``reset(options={"reset_mask": ...})``; it refuses NEXT_STEP). The single env needs
nothing: ``torchrl.envs.GymEnv("procgen_entities/<game>-v0")``. Needs torchrl and tensordict.
"""

from __future__ import annotations

from typing import Any

from procgen_entities.gymnasium.vector import EntityVectorEnv

__all__ = ["torchrl_env"]


def torchrl_env(game: str, num_envs: int = 1, **kwargs: Any) -> Any:
    """``GymWrapper(EntityVectorEnv(game, num_envs, autoreset_mode="Disabled", **kwargs))``
    (the headless engine; the recipe's observation:
    ``GymWrapper(EntityVectorEnv.for_training(game, n, autoreset_mode="Disabled"))``)."""
    from torchrl.envs import GymWrapper

    return GymWrapper(EntityVectorEnv(game, num_envs, autoreset_mode="Disabled", **kwargs))
