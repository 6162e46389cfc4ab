"""The old path of :mod:`procgen_entities.level_files` (moved from tools/): its names are a
contract, so this path re-exports them (tests/test_layers.py: they are the same objects)."""

from procgen_entities.level_files import (
    ALL_LEVELS_HIGH,
    HEADER,
    Level,
    LevelBase,
    LevelError,
    env_options,
    level_file_text,
    load_levels,
    max_steps,
    read_level,
)

__all__ = [
    "ALL_LEVELS_HIGH",
    "HEADER",
    "Level",
    "LevelBase",
    "LevelError",
    "env_options",
    "level_file_text",
    "load_levels",
    "max_steps",
    "read_level",
]
