"""The old path of :mod:`procgen_entities.rollout` (moved from tools/): its names are a
contract, so this path re-exports them (tests/test_layers.py: they are the same objects)."""

from procgen_entities.rollout import (
    ALL_LEVELS_HIGH,
    MAX_STATE_BYTES,
    Rollout,
    check_game_mode,
    env_options,
    load_state,
    record_state,
)

__all__ = [
    "ALL_LEVELS_HIGH",
    "MAX_STATE_BYTES",
    "Rollout",
    "check_game_mode",
    "env_options",
    "load_state",
    "record_state",
]
