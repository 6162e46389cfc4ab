"""The old path of :mod:`procgen_entities.agents.lean_ppo` (moved from tools/): its names are a
contract, so this path re-exports them (tests/test_layers.py: they are the same objects)."""

from procgen_entities.agents.lean_ppo import (
    PRECISIONS,
    LeanHooks,
    LeanPPO,
    native_bfloat16,
    resolve_precision,
)

__all__ = [
    "LeanHooks",
    "LeanPPO",
    "PRECISIONS",
    "native_bfloat16",
    "resolve_precision",
]
