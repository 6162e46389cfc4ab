"""Editable states: a get_state blob as arrays and mappings you can change, written back to bytes.

``State.from_bytes(blob)`` splits a blob into its parts with the C parser; ``to_bytes()`` writes
them back with the C writer (csrc/state_writer.c), bit-identical to the blob when nothing was
changed: the RNG texts, raw entity records and trailer vectors are kept verbatim. Edits are
validated, never trusted: by default ``to_bytes`` applies what ``set_states`` applies
(restore.check_restorable: the game's invariants, the grid size and options of the state it was
read from, the value ranges of real states, and a trial restore, step and render in a forked
procgen) and raises StateDecodeError naming the field. The writing rules: docs/state-format.md §8.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from procgen_entities._native import _writer
from procgen_entities._native._parser import SCALAR_KINDS, SCALAR_NAMES, read_game_name
from procgen_entities.errors import StateDecodeError, UsageError
from procgen_entities.games import DISTRIBUTION_MODE_IDS, GAMES, get_game
from procgen_entities.parse import game_spec, parse_states
from procgen_entities.reference import ENTITY_DTYPE

__all__ = ["ENTITY_DTYPE", "State", "states_from_bytes", "states_to_bytes"]

BytesLike = Union[bytes, bytearray, memoryview]
#: An RNG as stored: is_seeded and its mt19937 text (level_seed_rand_gen, rand_gen, asset_rand_gen).
Rng = Tuple[bool, bytes]

_SCALAR_TYPES = {"i": int, "f": float, "b": bool}
_VECTOR_DTYPES = {"vi": np.dtype("<i4"), "vf": np.dtype("<f4"), "vb": np.dtype(np.bool_)}
#: procgen's distribution_mode codes (the header's value) by the name make_procgen_env takes.
_MODE_NAMES = {code: name for name, code in DISTRIBUTION_MODE_IDS.items()}
#: Header options a procgen env is created with for the trial restore.
_ENV_OPTIONS = (
    "paint_vel_info", "use_monochrome_assets", "restrict_themes", "use_backgrounds",
    "center_agent", "use_sequential_levels",
)  # fmt: skip


class State:
    """One procgen state, editable.

    ``game``: the game's name. ``grid``: int32 [H, W] tile ids, row 0 the bottom of the world.
    ``entities``: a numpy structured array (ENTITY_DTYPE: the 31 fields of procgen's entity
    record, i32 or f32 as stored), entity 0 the player. ``scalars``: every header and base field
    by name (int, float or bool as stored). ``trailer``: the game's trailer fields by name
    (scalars as int / float / bool, vectors as numpy arrays: int32, float32, bool, or
    ENTITY_DTYPE records for starpilot's spawners). ``rngs``: the three RNGs as
    (is_seeded, text), kept verbatim. All of them may be changed in place or replaced.
    """

    def __init__(
        self,
        game: str,
        *,
        scalars: Dict[str, Any],
        entities: npt.NDArray[Any],
        grid: npt.NDArray[Any],
        trailer: Dict[str, Any],
        rngs: Sequence[Rng],
        base: Optional[bytes] = None,
    ) -> None:
        self.game = get_game(game).name
        self.scalars = scalars
        self.entities = entities
        self.grid = grid
        self.trailer = trailer
        self.rngs = tuple(rngs)
        #: The blob this state was read from: the env it must fit (grid size, options) when
        #: validated. None for a state built from scratch (only the structural checks apply).
        self.base = base

    # ---- the parts, converted on assignment ----

    @property
    def grid(self) -> npt.NDArray[np.int32]:
        return self._grid

    @grid.setter
    def grid(self, value: Any) -> None:
        grid = np.asarray(value)
        if grid.ndim != 2 or grid.dtype.kind not in "iub":
            raise UsageError(f"grid must be a 2-D integer array, got {grid.dtype} {grid.shape}")
        limits = np.iinfo(np.int32)
        if grid.size and (grid.min() < limits.min or grid.max() > limits.max):
            raise UsageError("grid values must fit in int32")
        self._grid = np.array(grid, dtype=np.int32, order="C")

    @property
    def entities(self) -> npt.NDArray[Any]:
        return self._entities

    @entities.setter
    def entities(self, value: Any) -> None:
        self._entities = _entity_records(value, "entities")

    # ---- bytes ----

    @classmethod
    def from_bytes(cls, blob: BytesLike, game: Optional[str] = None) -> "State":
        """A state from procgen's get_state bytes (StateDecodeError if they are malformed)."""
        if not isinstance(blob, (bytes, bytearray, memoryview)):
            raise TypeError(f"State.from_bytes takes get_state bytes, not {type(blob).__name__}")
        return states_from_bytes([blob], game=game)[0]

    def to_bytes(self, validate: bool = True) -> bytes:
        """The state's get_state bytes. ``validate=False`` skips the checks set_states applies
        (the writer's own checks always apply: types, counts, grid size against main_width /
        main_height, the player first, the game's invariants). Validation includes a trial
        restore in a forked procgen, which costs about a second: validate many states with one
        ``states_to_bytes`` call (one trial per game and options)."""
        return states_to_bytes([self], validate=validate)[0]

    def copy(self) -> "State":
        return State(
            self.game,
            scalars=dict(self.scalars),
            entities=self.entities.copy(),
            grid=self.grid.copy(),
            trailer={
                k: v.copy() if isinstance(v, np.ndarray) else v for k, v in self.trailer.items()
            },
            rngs=self.rngs,
            base=self.base,
        )

    def __repr__(self) -> str:
        h, w = self.grid.shape
        return f"State({self.game!r}, grid {w}x{h}, {len(self.entities)} entities)"


def _entity_records(value: Any, field: str) -> npt.NDArray[Any]:
    """value as a C-contiguous ENTITY_DTYPE array (fields matched by name)."""
    records = np.asarray(value)
    if records.dtype == ENTITY_DTYPE:
        return np.array(records, order="C").reshape(-1)
    names = records.dtype.names
    if names is None or set(names) != set(ENTITY_DTYPE.names or ()):
        raise UsageError(
            f"{field} must be a structured array with the 31 entity fields (ENTITY_DTYPE)"
        )
    out = np.empty(records.size, dtype=ENTITY_DTYPE)
    for name in names:
        out[name] = records[name].reshape(-1)
    return out


def _from_parts(game: str, parts: Dict[str, Any], blob: bytes) -> State:
    info = get_game(game)
    scalars = {
        name: _SCALAR_TYPES[kind](value.item())
        for name, kind, value in zip(SCALAR_NAMES, SCALAR_KINDS, parts["scalars"])
    }
    trailer: Dict[str, Any] = {}
    values = iter(parts["trailer_scalars"])
    vectors = iter(parts["vectors"])
    for name, kind in info.trailer:
        if kind == "ve":
            trailer[name] = np.frombuffer(next(vectors), dtype=ENTITY_DTYPE).copy()
        elif kind == "vb":
            trailer[name] = np.frombuffer(next(vectors), dtype="<i4") != 0
        elif kind.startswith("v"):
            trailer[name] = np.frombuffer(next(vectors), dtype=_VECTOR_DTYPES[kind]).copy()
        else:
            trailer[name] = _SCALAR_TYPES[kind](next(values).item())
    return State(
        game,
        scalars=scalars,
        entities=np.frombuffer(parts["entities"], dtype=ENTITY_DTYPE).copy(),
        grid=parts["grid"],
        trailer=trailer,
        rngs=tuple((bool(seeded), text) for seeded, text in parts["rngs"]),
        base=blob,
    )


def states_from_bytes(blobs: Sequence[BytesLike], game: Optional[str] = None) -> List[State]:
    """Many blobs, each of any game unless ``game`` is given; StateDecodeError names the first
    malformed one (its index in ``blobs``)."""
    if isinstance(blobs, (bytes, bytearray, memoryview, str)):
        raise TypeError("states_from_bytes takes a sequence of states; use State.from_bytes")
    out = []
    for i, raw in enumerate(blobs):
        if not isinstance(raw, (bytes, bytearray, memoryview)):  # bytes(5): five zero bytes
            raise TypeError(f"states_from_bytes: blobs[{i}] is {type(raw).__name__}, not bytes")
        blob = bytes(raw)
        try:
            name = game or read_game_name(blob)
            if name not in GAMES:
                raise StateDecodeError(
                    f"unknown game name {name!r}", index=0, offset=4, field="game_name"
                )
            out.append(_from_parts(name, _writer.split_state(blob, game_spec(name)), blob))
        except StateDecodeError as exc:
            raise _at_index(exc, i) from None
    return out


def _at_index(exc: StateDecodeError, index: int) -> StateDecodeError:
    return StateDecodeError(
        exc.reason, index=index, offset=exc.offset, field=exc.field, code=exc.code,
        status=exc.status,
    )  # fmt: skip


def _writer_item(state: State) -> Tuple[Any, ...]:
    info = get_game(state.game)
    try:
        scalars = np.array([float(state.scalars[name]) for name in SCALAR_NAMES])
        trailer = np.array(
            [float(state.trailer[n]) for n, kind in info.trailer if not kind.startswith("v")]
        )
    except KeyError as exc:
        raise UsageError(f"{state.game} state: field {exc.args[0]!r} is missing") from None
    unknown = (set(state.scalars) - set(SCALAR_NAMES)) | (
        set(state.trailer) - {n for n, _ in info.trailer}
    )
    if unknown:
        raise UsageError(f"{state.game} state: unknown fields {sorted(unknown)}")
    vectors = []
    for name, kind in info.trailer:
        if kind == "ve":
            vectors.append(_entity_records(state.trailer[name], f"trailer.{name}"))
        elif kind == "vb":
            vectors.append(_bool_words(state.trailer[name], name))
        elif kind.startswith("v"):
            vectors.append(np.ascontiguousarray(state.trailer[name], dtype=_VECTOR_DTYPES[kind]))
    if len(state.rngs) != 3:
        raise UsageError("rngs must hold 3 (is_seeded, text) pairs")
    rngs = tuple((int(bool(seeded)), bytes(text)) for seeded, text in state.rngs)
    entities = _entity_records(state.entities, "entities")
    return (scalars, rngs, entities, state.grid, trailer, tuple(vectors))


def _bool_words(value: Any, name: str) -> npt.NDArray[Any]:
    """A bool vector as the i32 0/1 words it is stored as; other values are refused."""
    values = np.asarray(value).reshape(-1)
    if values.dtype != np.bool_ and values.size and not np.isin(values, (0, 1)).all():
        raise StateDecodeError(
            f"trailer vector {name} holds values other than 0 and 1", index=0, offset=0,
            field=name, status="PE_ERR_BOOL",
        )  # fmt: skip
    return values.astype("<i4")


def states_to_bytes(states: Sequence[State], validate: bool = True) -> List[bytes]:
    """The bytes of many states (one C size pass and one write pass per game); validated as
    State.to_bytes is, StateDecodeError naming the first refused state by its index."""
    out: List[Optional[bytes]] = [None] * len(states)
    by_game: Dict[str, List[int]] = {}
    for i, state in enumerate(states):
        by_game.setdefault(state.game, []).append(i)
    for game, indices in by_game.items():
        items = []
        for i in indices:
            try:
                items.append(_writer_item(states[i]))
            except StateDecodeError as exc:
                raise _at_index(exc, i) from None
        try:
            blobs = _writer.write_states(items, game_spec(game))
        except StateDecodeError as exc:
            raise _at_index(exc, indices[exc.index]) from None
        for i, blob in zip(indices, blobs):
            out[i] = blob
    result = [b for b in out if b is not None]
    if validate:
        _validate(states, result)
    return result


def procgen_options(scalars: Mapping[str, Any]) -> Dict[str, Any]:
    """make_procgen_env options for an env a state with these header scalars fits."""
    mode = _MODE_NAMES.get(int(scalars["distribution_mode"]))
    if mode is None:
        raise StateDecodeError(
            f"distribution_mode {scalars['distribution_mode']} is not one of procgen's",
            index=0, offset=0, field="distribution_mode",
        )  # fmt: skip
    return {"distribution_mode": mode, **{k: bool(scalars[k]) for k in _ENV_OPTIONS}}


def _validate(states: Sequence[State], blobs: Sequence[bytes]) -> None:
    """restore.check_restorable, per group of states that fit one env (game and options),
    against the blobs they were read from (a state without one is held to itself)."""
    from procgen_entities.restore import check_restorable

    groups: Dict[Tuple[str, Tuple[Any, ...]], List[int]] = {}
    for i, state in enumerate(states):
        try:
            options = procgen_options(state.scalars)
        except StateDecodeError as exc:
            raise _at_index(exc, i) from None
        groups.setdefault((state.game, tuple(sorted(options.items()))), []).append(i)
    for (game, option_items), indices in groups.items():
        bases = [states[i].base or blobs[i] for i in indices]
        try:
            current = parse_states(bases, game=game)
            check_restorable([blobs[i] for i in indices], game, current, dict(option_items))
        except StateDecodeError as exc:
            raise _at_index(exc, indices[exc.index]) from None
