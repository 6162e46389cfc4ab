"""Adapters for entity-gym (and enn-trainer): ProcgenVecEnv, ProcgenEnv, the enn-trainer
factory. Importing this package imports entity-gym and ragged-buffer; the core does not."""

from procgen_entities.entity_gym.env import ProcgenEnv
from procgen_entities.entity_gym.vec_env import ProcgenVecEnv

__all__ = ["ProcgenEnv", "ProcgenVecEnv"]
