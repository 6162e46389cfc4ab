"""An enn-trainer (RogueNet) checkpoint as a policy over EntityVectorEnv's padded dict observation.

The evaluation runs every policy on the same padded env (the same levels, the same terminal
states for death causes). RogueNet was trained on ProcgenVecEnv's ragged observation; this turns
the padded arrays back into it: per entity type the rows under the mask, with the columns the
network's observation space names (the padded form adds ``rel_x``/``rel_y`` where the trained
one may not have them), the global features as the ``__global__`` entity, and the actor index
ProcgenVecEnv gives (the global entity, after all others of its env, or the Player, first).
Entity order within a type does not matter to the transformer, only which entity acts. The
padded env must keep every entity (its default caps do; tests/test_agents.py checks the logits
equal those on ProcgenVecEnv's own observation).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional

import numpy as np

from procgen_entities.agents.numpy_policy import choose_actions

__all__ = ["ENN_FOLDER", "load_enn_policy", "vec_obs_from_padded"]

#: The hyperstate checkpoint (config.ron, state.ron) inside a checkpoint folder.
ENN_FOLDER = "enn"


def vec_obs_from_padded(
    obs: Mapping[str, np.ndarray], names: Mapping[str, tuple], space: Any, actor: str
) -> Any:
    """ProcgenVecEnv's VecObs (features and action masks) from a padded dict observation.

    ``names``: the padded layout's feature names per type; ``space``: the network's ObsSpace;
    ``actor``: "global" or "player"."""
    from entity_gym.env import VecObs
    from entity_gym.env.vec_env import VecCategoricalActionMask
    from ragged_buffer import RaggedBufferF32, RaggedBufferI64

    from procgen_entities.entity_gym.observation import ACTION_NAME, GLOBAL_ENTITY

    n = len(obs["global"])
    ones = np.ones(n, dtype=np.int64)
    features: Dict[str, Any] = {}
    others = np.zeros(n, dtype=np.int64)
    for name, entity in space.entities.items():
        if name == GLOBAL_ENTITY:
            continue
        columns = [names[name].index(f) for f in entity.features]
        mask = obs[f"{name}_mask"]
        rows = obs[name][mask][:, columns]
        counts = mask.sum(axis=1).astype(np.int64)
        features[name] = RaggedBufferF32.from_flattened(np.ascontiguousarray(rows), counts)
        others += counts
    features[GLOBAL_ENTITY] = RaggedBufferF32.from_flattened(
        np.ascontiguousarray(obs["global"], dtype=np.float32), ones
    )
    acting = others if actor == "global" else np.zeros(n, dtype=np.int64)
    masks: Dict[str, Any] = {ACTION_NAME: VecCategoricalActionMask(
        RaggedBufferI64.from_flattened(acting.reshape(-1, 1), ones), None)}  # fmt: skip
    return VecObs(features, {}, masks, np.zeros(n, np.float32), np.zeros(n, bool), {})


def load_enn_policy(
    folder: Path,
    names: Mapping[str, tuple],
    actor: str,
    *,
    deterministic: bool = True,
    rng: Optional[np.random.Generator] = None,
) -> Callable[[Mapping[str, np.ndarray]], np.ndarray]:
    """The RogueNet of ``folder/enn`` as a function of a batch of padded dict observations
    (argmax of its logits, or sampled: from ``rng`` as the SB3 policies sample,
    numpy_policy.choose_actions, where given, else from torch's global generator)."""
    import torch
    from enn_trainer import load_checkpoint
    from entity_gym.simple_trace import Tracer

    from procgen_entities.entity_gym.observation import ACTION_NAME

    net = load_checkpoint(str(folder / ENN_FOLDER)).state.agent
    net.eval()
    tracer = Tracer(cuda=False)

    def policy(obs: Mapping[str, np.ndarray]) -> np.ndarray:
        vec = vec_obs_from_padded(obs, names, net.obs_space, actor)
        with torch.no_grad():
            actions, _, _, _, _, logits = net.get_action_and_auxiliary(
                vec.features, vec.visible, vec.action_masks, tracer=tracer
            )
        if deterministic:
            return logits[ACTION_NAME].argmax(dim=-1).cpu().numpy()  # type: ignore[no-any-return]
        if rng is not None:
            z = logits[ACTION_NAME].cpu().numpy()
            return choose_actions(z.reshape(-1, z.shape[-1]), rng)
        return actions[ACTION_NAME].as_array().reshape(-1)  # type: ignore[no-any-return]

    return policy
