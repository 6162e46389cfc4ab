"""The old path of :mod:`procgen_entities.files` (moved from tools/): its names are a
contract, so this path re-exports them (tests/test_layers.py: they are the same objects)."""

from procgen_entities.files import (
    check_target,
    open_regular,
    write_atomic,
)

__all__ = [
    "check_target",
    "open_regular",
    "write_atomic",
]
