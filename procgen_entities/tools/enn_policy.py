"""The old path of :mod:`procgen_entities.agents.enn_policy` (moved from tools/): its names are a
contract, so this path re-exports them (tests/test_layers.py: they are the same objects)."""

from procgen_entities.agents.enn_policy import (
    ENN_FOLDER,
    load_enn_policy,
    vec_obs_from_padded,
)

__all__ = [
    "ENN_FOLDER",
    "load_enn_policy",
    "vec_obs_from_padded",
]
