"""The exceptions of procgen_entities; C status codes are mapped to them in one place."""

from __future__ import annotations

__all__ = [
    "MixedBatchError",
    "ProcgenEntitiesError",
    "StateDecodeError",
    "TilemapError",
    "UsageError",
    "error_from_status",
]


class ProcgenEntitiesError(Exception):
    """Base class of this package's own exceptions."""


class StateDecodeError(ProcgenEntitiesError, ValueError):
    """A get_state blob is malformed: truncated, corrupted, padded or not a procgen state.

    ``index`` is the state's position in the batch, ``offset`` the byte offset of the failing
    field within that state and ``field`` its name (as in the format reference).
    """

    def __init__(
        self, reason: str, *, index: int, offset: int, field: str, code: int = 0, status: str = ""
    ) -> None:
        self.reason = reason
        self.code = code
        self.status = status  # the C status name, e.g. "PE_ERR_INVARIANT" ("" from Python checks)
        self.index = index
        self.offset = offset
        self.field = field
        super().__init__(f"state {index}: {reason} (field {field!r} at byte {offset})")

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (
            _rebuild,
            (self.reason, self.index, self.offset, self.field, self.code, self.status),
        )


def _rebuild(
    reason: str, index: int, offset: int, field: str, code: int, status: str = ""
) -> StateDecodeError:
    return StateDecodeError(
        reason, index=index, offset=offset, field=field, code=code, status=status
    )


class MixedBatchError(ProcgenEntitiesError, ValueError):
    """States of different games, or of different grid sizes, were passed in one batch."""


class UsageError(ProcgenEntitiesError, ValueError):
    """A call that is wrong whatever the states are: a bad argument, shape, spec or plan."""


class TilemapError(ProcgenEntitiesError, RuntimeError):
    """The tilemap kernel's two passes disagreed (a bug in this package, never the input)."""


#: What each C status becomes, by name: pe_status (csrc/state_parser.h) and tm_status
#: (csrc/tilemap.h). Every other PE_ERR_* is a StateDecodeError; parse.py refines PE_ERR_GAME
#: and PE_ERR_SHAPE into MixedBatchError when the batch, not the state, is at fault.
EXCEPTION_OF_STATUS: "dict[str, type[Exception]]" = {
    "PE_ERR_MEMORY": MemoryError,
    "PE_ERR_SPEC": UsageError,
    "PE_ERR_SPACE": UsageError,
    "TM_ERR_ARG": UsageError,
    "TM_ERR_SPEC": UsageError,
    "TM_ERR_SCRATCH": UsageError,
    "TM_ERR_OVERFLOW": TilemapError,
    "TM_ERR_MISMATCH": TilemapError,
}


def error_from_status(
    status: str, code: int, reason: str, index: int = 0, offset: int = 0, field: str = ""
) -> Exception:
    """The exception for a failed C call (``status``: the enum name, ``code``: its value)."""
    cls = EXCEPTION_OF_STATUS.get(status)
    if cls is not None:
        where = f" (state {index}, field {field!r})" if field else ""
        return cls(f"{reason}{where}")
    return StateDecodeError(
        reason, index=index, offset=offset, field=field, code=code, status=status
    )
