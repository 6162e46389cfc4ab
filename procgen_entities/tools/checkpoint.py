"""Checkpoints of agents trained on EntityVectorEnv: a folder that rebuilds its own env.

A checkpoint folder holds ``model.zip`` (Stable-Baselines3 PPO with its optimizer, what
training resumes from) and ``policy.pth`` (the policy alone, ~1/3 of the size: what released
checkpoints keep and evaluation needs), ``env.json`` (the game and every
EntityVectorEnv keyword it was trained with, the trainer settings and the env steps done) and,
when observations were normalised, ``vecnormalize.pkl`` (SB3's running statistics). Everything
that evaluates or resumes a checkpoint builds its env from ``env.json``, so an agent always sees
the observation it was trained on.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Optional

import numpy as np

__all__ = ["Checkpoint", "EnvConfig", "load_policy", "make_env", "wants_dict_observation"]


@dataclass
class EnvConfig:
    """What EntityVectorEnv is built with (the observation, the level distribution)."""

    game: str
    distribution_mode: str = "easy"
    num_levels: int = 0
    start_level: int = 0
    tilemap: Optional[str] = None
    entity_window: bool = True
    global_features: Optional[list] = None
    max_entities: Optional[Dict[str, int]] = None
    grid: bool = False  # the camera square's class image (EntityVectorEnv(grid=True))

    def env_kwargs(self) -> Dict[str, Any]:
        kwargs = asdict(self)
        kwargs.pop("game")
        return kwargs


def make_env(
    config: EnvConfig, num_envs: int, seed: int, *, flatten: bool = True, **overrides: Any
) -> Any:
    """EntityVectorEnv of a config (the flat form and same-step resets SB3 wants by default)."""
    from procgen_entities.gymnasium import EntityVectorEnv

    kwargs = {**config.env_kwargs(), "autoreset_mode": "SameStep", **overrides}
    return EntityVectorEnv(config.game, num_envs, seed=seed, flatten=flatten, **kwargs)


@dataclass
class Checkpoint:
    """A checkpoint folder's ``env.json``."""

    env: EnvConfig
    steps: int = 0
    normalize: bool = False
    trainer: Dict[str, Any] = field(default_factory=dict)

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        record = {"env": asdict(self.env), "steps": self.steps, "normalize": self.normalize,
                  "trainer": self.trainer}  # fmt: skip
        (folder / "env.json").write_text(json.dumps(record, indent=1) + "\n")

    @classmethod
    def load(cls, folder: Path) -> "Checkpoint":
        path = folder / "env.json"
        if not path.is_file():
            raise FileNotFoundError(f"{folder} is not a checkpoint folder (no env.json)")
        record = json.loads(path.read_text())
        return cls(
            env=EnvConfig(**record["env"]),
            steps=int(record.get("steps", 0)),
            normalize=bool(record.get("normalize", False)),
            trainer=dict(record.get("trainer", {})),
        )


def wants_dict_observation(folder: Path) -> bool:
    """An enn-trainer checkpoint (RogueNet) and an SB3 one with the entity encoder
    (``trainer["policy"] == "attention"``) read the padded dict form, an SB3 MLP the flat form."""
    from procgen_entities.tools.enn_policy import ENN_FOLDER

    if (folder / ENN_FOLDER).is_dir():
        return True
    checkpoint = Checkpoint.load(folder)
    return checkpoint.env.grid or checkpoint.trainer.get("policy", "mlp") == "attention"


def load_policy(folder: Path, *, deterministic: bool = True) -> Callable[[Any], np.ndarray]:
    """The checkpoint's policy as a function of a batch of observations: flat ones (normalised
    with the checkpoint's statistics when it was trained so) for SB3, padded dicts for
    enn-trainer (``wants_dict_observation``)."""
    checkpoint = Checkpoint.load(folder)
    from procgen_entities.tools.enn_policy import ENN_FOLDER

    if (folder / ENN_FOLDER).is_dir():
        from procgen_entities.tools.enn_policy import load_enn_policy

        probe = make_env(checkpoint.env, 1, 0, flatten=False)
        names = probe.metadata["feature_names"]
        probe.close()
        actor = checkpoint.trainer.get("actor", "global")
        return load_enn_policy(folder, names, actor, deterministic=deterministic)
    model: Any
    if (folder / "model.zip").exists():
        from stable_baselines3 import PPO

        model = PPO.load(folder / "model.zip", device="cpu")
    else:  # a released checkpoint: the policy alone
        from stable_baselines3.common.policies import (
            ActorCriticPolicy,
            MultiInputActorCriticPolicy,
        )

        cls = MultiInputActorCriticPolicy if wants_dict_observation(folder) else ActorCriticPolicy
        model = cls.load(str(folder / "policy.pth"), device="cpu")
    normalize: Callable[[np.ndarray], np.ndarray] = lambda obs: obs  # noqa: E731
    if checkpoint.normalize:
        import pickle

        with (folder / "vecnormalize.pkl").open("rb") as f:
            stats = pickle.load(f)
        normalize = stats.normalize_obs

    def policy(obs: np.ndarray) -> np.ndarray:
        return model.predict(normalize(obs), deterministic=deterministic)[0]  # type: ignore[no-any-return]

    return policy
