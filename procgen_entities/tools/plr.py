"""The old path of :mod:`procgen_entities.agents.plr` (moved from tools/): its names are a
contract, so this path re-exports them (tests/test_layers.py: they are the same objects)."""

from procgen_entities.agents.plr import (
    DEFAULTS,
    SAMPLER_FILE,
    LevelReplay,
    read_state,
)

__all__ = [
    "DEFAULTS",
    "LevelReplay",
    "SAMPLER_FILE",
    "read_state",
]
