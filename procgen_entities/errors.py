"""The exceptions of procgen_entities; C status codes are mapped to them in one place."""

from __future__ import annotations

__all__ = ["MixedBatchError", "ProcgenEntitiesError", "StateDecodeError", "error_from_status"]


class ProcgenEntitiesError(Exception):
    """Base class of this package's own exceptions."""


class StateDecodeError(ProcgenEntitiesError, ValueError):
    """A get_state blob is malformed: truncated, corrupted, padded or not a procgen state.

    ``index`` is the state's position in the batch, ``offset`` the byte offset of the failing
    field within that state and ``field`` its name (as in the format reference).
    """

    def __init__(self, reason: str, *, index: int, offset: int, field: str, code: int = 0) -> None:
        self.reason = reason
        self.code = code
        self.index = index
        self.offset = offset
        self.field = field
        super().__init__(f"state {index}: {reason} (field {field!r} at byte {offset})")

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_rebuild, (self.reason, self.index, self.offset, self.field, self.code))


def _rebuild(reason: str, index: int, offset: int, field: str, code: int) -> StateDecodeError:
    return StateDecodeError(reason, index=index, offset=offset, field=field, code=code)


class MixedBatchError(ProcgenEntitiesError, ValueError):
    """States of different games, or of different grid sizes, were passed in one batch."""


#: C status codes (csrc/state_parser.h) that need more than a StateDecodeError.
STATUS_GAME = 3
STATUS_SHAPE = 10


def error_from_status(
    code: int, reason: str, index: int, offset: int, field: str
) -> StateDecodeError:
    return StateDecodeError(reason, index=index, offset=offset, field=field, code=code)
