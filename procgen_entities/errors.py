"""The exceptions of procgen_entities; C status codes are mapped to them in one place.

Every exception class of the package derives from ``ProcgenEntitiesError`` (and keeps a builtin
base where callers catch one: ``ValueError``, ``RuntimeError``); out of memory is Python's own
``MemoryError``. Each C status has exactly one class (``EXCEPTION_OF_STATUS``), whichever binding
raised it (procgen_entities/_native/_status.pyx check_status).
"""

from __future__ import annotations

__all__ = [
    "EXCEPTION_OF_STATUS",
    "LayoutError",
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
            (type(self), self.reason, self.index, self.offset, self.field, self.code, self.status),
        )


def _rebuild(
    cls: type[StateDecodeError],
    reason: str,
    index: int,
    offset: int,
    field: str,
    code: int,
    status: str = "",
) -> StateDecodeError:
    return cls(reason, index=index, offset=offset, field=field, code=code, status=status)


class MixedBatchError(StateDecodeError):
    """States of different games, or of different grid sizes, were passed in one batch.

    A StateDecodeError (the state at ``index`` is refused, at ``field``), so that one C status
    is one class: PE_ERR_SHAPE is always this; PE_ERR_GAME is a StateDecodeError, which
    parse_states narrows to this when the state names another known game.
    """


class UsageError(ProcgenEntitiesError, ValueError):
    """A call that is wrong whatever the states are: a bad argument, shape, spec or plan."""


class TilemapError(ProcgenEntitiesError, RuntimeError):
    """The tilemap kernel's two passes disagreed (a bug in this package, never the input)."""


class LayoutError(ProcgenEntitiesError, RuntimeError):
    """The layout table cannot describe this procgen build or game (engine/layout.py), or a live
    game's containers do not look like it (PE_ERR_LAYOUT)."""


#: The one class of each C status, by its enum member's name: pe_status (csrc/state_parser.h)
#: and tm_status (csrc/tilemap.h); tests/test_errors.py checks that every member has one.
EXCEPTION_OF_STATUS: "dict[str, type[Exception]]" = {
    "PE_ERR_TRUNCATED": StateDecodeError,
    "PE_ERR_VERSION": StateDecodeError,
    "PE_ERR_GAME": StateDecodeError,
    "PE_ERR_NEGATIVE": StateDecodeError,
    "PE_ERR_GRID": StateDecodeError,
    "PE_ERR_PLAYER": StateDecodeError,
    "PE_ERR_BOOL": StateDecodeError,
    "PE_ERR_TERMINATOR": StateDecodeError,
    "PE_ERR_TRAILING": StateDecodeError,
    "PE_ERR_SHAPE": MixedBatchError,
    "PE_ERR_SPEC": UsageError,
    "PE_ERR_INVARIANT": StateDecodeError,
    "PE_ERR_VALUE": StateDecodeError,
    "PE_ERR_SPACE": UsageError,
    "PE_ERR_MEMORY": MemoryError,
    "PE_ERR_ARG": UsageError,
    "PE_ERR_LAYOUT": LayoutError,
    "TM_ERR_ARG": UsageError,
    "TM_ERR_SPEC": UsageError,
    "TM_ERR_SCRATCH": UsageError,
    "TM_ERR_OVERFLOW": TilemapError,
    "TM_ERR_MISMATCH": TilemapError,
}


def error_from_status(
    status: str, code: int, reason: str, index: int = 0, offset: int = 0, field: str = ""
) -> Exception:
    """The exception for a failed C call (``status``: the enum member's name, ``code``: its
    value); a name no enum has is a bug of the bindings, reported as ProcgenEntitiesError."""
    cls = EXCEPTION_OF_STATUS.get(status)
    if cls is None:
        return ProcgenEntitiesError(f"{reason} (C status {status}, code {code})")
    if issubclass(cls, StateDecodeError):
        return cls(reason, index=index, offset=offset, field=field, code=code, status=status)
    where = f" (state {index}, field {field!r})" if field else ""
    return cls(f"{reason}{where}")
