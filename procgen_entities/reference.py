"""A readable pure-Python reference parser of procgen 0.10.7 ``get_state`` bytes.

Written from docs/state-format.md, independently of the C parser
(csrc/state_parser.c), so that tests can demand that both give identical results. It walks each
state with ``struct.unpack_from`` and reads the 124-byte entity record with a numpy structured
dtype. It is meant to be easy to check against the format reference, not to be fast. The record's
field names and kinds are the one declaration of them (games.ENTITY_FIELDS, read from
csrc/state_parser.h's table; tests/test_native.py holds it to the shipped list); the walk, the
offsets and the checks here are its own.

``reference_parse_states`` returns the same ``StateBatch`` as ``parse_states``, and accepts and
rejects exactly the same inputs. ``reference_write_state`` is the same for the writer: the bytes of
a ``State``, as csrc/state_writer.c must write them.
"""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple, cast

import numpy as np
import numpy.typing as npt

from procgen_entities.errors import MixedBatchError, StateDecodeError, UsageError
from procgen_entities.games import ENTITY_FIELDS, ENTITY_INT_FIELDS, GAMES, Game, get_game
from procgen_entities.parse import StateBatch, entity_field_names

__all__ = [
    "ENTITY_DTYPE",
    "HEADER_SCALARS",
    "reference_parse_state",
    "reference_parse_states",
    "reference_write_state",
]

TERMINATOR = 0xCAFECAFE
ENTITY_BYTES = 124

#: The 124-byte entity record (format reference §2.1): 31 little-endian 4-byte fields, no padding.
ENTITY_DTYPE = np.dtype(
    [(name, "<i4" if name in ENTITY_INT_FIELDS else "<f4") for name in ENTITY_FIELDS],
    align=False,
)
assert ENTITY_DTYPE.itemsize == ENTITY_BYTES

# The fixed-size runs of header/base scalars, in byte order, as (name, kind) with kind
# "i" (i32), "f" (f32) or "b" (i32 that must be 0 or 1). Format reference §1 and §2.

#: After the game name: the options block (offset 8 + L).
OPTIONS = (
    ("paint_vel_info", "b"),
    ("use_generated_assets", "b"),
    ("use_monochrome_assets", "b"),
    ("restrict_themes", "b"),
    ("use_backgrounds", "b"),
    ("center_agent", "b"),
    ("debug_mode", "i"),
    ("distribution_mode", "i"),
    ("use_sequential_levels", "b"),
    ("use_easy_jump", "b"),
    ("plain_assets", "i"),
    ("physics_mode", "i"),
    ("grid_step", "b"),
    ("level_seed_low", "i"),
    ("level_seed_high", "i"),
    ("game_type", "i"),
    ("game_n", "i"),
)
# then: level_seed_rand_gen (rng), rand_gen (rng)

#: The step state (offset P = 92 + L + R1 + R2).
STEP = (
    ("reward", "f"),
    ("done", "b"),
    ("level_complete", "b"),
    ("action", "i"),
    ("timeout", "i"),
    ("current_level_seed", "i"),
    ("prev_level_seed", "i"),
    ("episodes_remaining", "i"),
    ("episode_done", "b"),
    ("last_reward_timer", "i"),
    ("last_reward", "f"),
    ("default_action", "i"),
    ("fixed_asset_seed", "i"),
    ("cur_time", "i"),
    ("is_waiting_for_step", "b"),
)
# then: grid_size (i32), entities (vec<ent>)

#: BasicAbstractGame fields after the entity vector (offset E).
BASE = (
    ("use_procgen_background", "b"),
    ("background_index", "i"),
    ("bg_tile_ratio", "f"),
    ("bg_pct_x", "f"),
    ("char_dim", "f"),
    ("last_move_action", "i"),
    ("move_action", "i"),
    ("special_action", "i"),
    ("mixrate", "f"),
    ("maxspeed", "f"),
    ("max_jump", "f"),
    ("action_vx", "f"),
    ("action_vy", "f"),
    ("action_vrot", "f"),
    ("center_x", "f"),
    ("center_y", "f"),
    ("random_agent_start", "b"),
    ("has_useful_vel_info", "b"),
    ("step_rand_int", "i"),
)
# then: asset_rand_gen (rng)

#: After asset_rand_gen (offset A).
CAMERA = (
    ("main_width", "i"),
    ("main_height", "i"),
    ("out_of_bounds_object", "i"),
    ("unit", "f"),
    ("view_dim", "f"),
    ("x_off", "f"),
    ("y_off", "f"),
    ("visibility", "f"),
    ("min_visibility", "f"),
)
# then: grid.w, grid.h, grid.count, grid.data, trailer, terminator

#: Every header/base scalar, in byte order.
HEADER_SCALARS: Tuple[Tuple[str, str], ...] = OPTIONS + STEP + BASE + CAMERA

_KIND_DTYPES = {"i": np.int32, "f": np.float32, "b": np.bool_}
_VECTOR_DTYPES = {"vi": np.int32, "vf": np.float32, "vb": np.bool_}


class _Reader:
    """A cursor over one state; every read checks that the bytes exist."""

    def __init__(self, data: bytes, index: int) -> None:
        self.data = data
        self.index = index
        self.at = 0

    def error(self, reason: str, offset: int, field: str) -> StateDecodeError:
        return StateDecodeError(reason, index=self.index, offset=offset, field=field)

    def need(self, nbytes: int, field: str, offset: Optional[int] = None) -> None:
        if nbytes > len(self.data) - self.at:
            raise self.error("state is truncated", self.at if offset is None else offset, field)

    def i32(self, field: str) -> int:
        self.need(4, field)
        (value,) = struct.unpack_from("<i", self.data, self.at)
        self.at += 4
        return int(value)

    def f32(self, field: str) -> float:
        self.need(4, field)
        (value,) = struct.unpack_from("<f", self.data, self.at)
        self.at += 4
        return float(value)

    def boolean(self, field: str) -> bool:
        value = self.i32(field)
        if value not in (0, 1):
            raise self.error("bool field is neither 0 nor 1", self.at - 4, field)
        return bool(value)

    def scalar(self, name: str, kind: str):  # type: ignore[no-untyped-def]
        if kind == "f":
            return self.f32(name)
        if kind == "b":
            return self.boolean(name)
        return self.i32(name)

    def count(self, field: str, item_bytes: int) -> int:
        """A vector's item count, checked against the bytes that follow it."""
        at = self.at
        n = self.i32(field)
        if n < 0:
            raise self.error("negative length or count", at, field)
        self.need(n * item_bytes, field, offset=at)
        return n

    def raw(self, nbytes: int) -> bytes:
        chunk = self.data[self.at : self.at + nbytes]
        self.at += nbytes
        return bytes(chunk)

    def skip_rng(self, name: str) -> None:
        """An mt19937 generator: is_seeded bool, then length-prefixed text (skipped)."""
        self.boolean(f"{name}.is_seeded")
        text_len = self.count(name, 1)
        self.at += text_len


class _ParsedState:
    """Everything read from one state, in plain Python / small numpy form."""

    game: str
    scalars: Dict[str, object]
    entities: npt.NDArray[Any]  # structured, ENTITY_DTYPE
    grid: npt.NDArray[Any]  # int32 [H, W]
    trailer_scalars: Dict[str, object]
    trailer_vectors: Dict[str, npt.NDArray[Any]]
    size: int
    grid_w_at: int  # byte offset of grid.w (where a batch's grid sizes are compared)


def _read_game_name(reader: _Reader) -> str:
    version = reader.i32("version")
    if version != 0:
        raise reader.error("unsupported serialisation version (expected 0)", 0, "version")
    name_len = reader.count("game_name", 1)
    return reader.raw(name_len).decode("latin-1")


def _parse_one(data: bytes, index: int, game: Game) -> _ParsedState:
    """One state, section by section in the format's order (docs/state-format.md)."""
    reader = _Reader(data, index)
    out = _ParsedState()
    out.scalars = {}
    out.game = _read_header(reader, game, out.scalars)
    out.entities, out.grid = _read_base(reader, out.scalars)
    out.grid_w_at = reader.at - 4 * (3 + out.grid.size)  # w, h, count, then the cells
    trailer_at = reader.at
    out.trailer_scalars, out.trailer_vectors = _read_trailer(reader, game)
    _read_terminator(reader)
    _check_invariants(reader, game, out, trailer_at)
    out.size = len(data)
    return out


def _read_header(reader: _Reader, game: Game, scalars: Dict[str, object]) -> str:
    """HEADER: the game's name (it must be the batch's game), the options, the two RNGs and the
    step block; the scalars go into ``scalars``."""
    name = _read_game_name(reader)
    if name != game.name:
        raise reader.error("game name differs from the batch's game", 4, "game_name")
    for field, kind in OPTIONS:
        scalars[field] = reader.scalar(field, kind)
    reader.skip_rng("level_seed_rand_gen")
    reader.skip_rng("rand_gen")
    for field, kind in STEP:
        scalars[field] = reader.scalar(field, kind)
    return name


def _read_base(
    reader: _Reader, scalars: Dict[str, object]
) -> Tuple[npt.NDArray[Any], npt.NDArray[np.int32]]:
    """BASE: grid_size, the entities (entity 0 the player), the base scalars, the asset RNG, the
    camera block and the grid, checked against each other. (entities, grid [H, W])."""
    data = reader.data
    grid_size_at = reader.at
    grid_size = reader.i32("grid_size")
    count_at = reader.at
    n_entities = reader.count("entities", ENTITY_BYTES)
    if n_entities < 1:
        raise reader.error("no entities (the player must be entity 0)", count_at, "entities")
    entities = np.frombuffer(data, dtype=ENTITY_DTYPE, count=n_entities, offset=reader.at)
    if entities[0]["type"] != 0:
        raise reader.error("entity 0 is not the player", reader.at + 24, "entities[0].type")
    reader.at += n_entities * ENTITY_BYTES
    for field, kind in BASE:
        scalars[field] = reader.scalar(field, kind)
    reader.skip_rng("asset_rand_gen")
    camera_at = reader.at
    for field, kind in CAMERA:
        scalars[field] = reader.scalar(field, kind)
    width = reader.i32("grid.w")
    height = reader.i32("grid.h")
    cells_at = reader.at
    cells = reader.i32("grid.count")
    if width < 0 or height < 0:
        raise reader.error("negative grid dimension", cells_at - 8, "grid.w/h")
    if width * height != cells:
        raise reader.error("grid.count != grid.w * grid.h", cells_at, "grid.count")
    if grid_size != cells:
        raise reader.error("grid_size != grid.count", grid_size_at, "grid_size")
    if scalars["main_width"] != width or scalars["main_height"] != height:
        raise reader.error("main_width/height differ from the grid", camera_at, "main_width")
    reader.need(4 * cells, "grid.data")
    # Storage order is index y*W + x with y = 0 the bottom row: reshape to [H, W] keeps that.
    grid = np.frombuffer(data, dtype="<i4", count=cells, offset=reader.at).reshape(height, width)
    reader.at += 4 * cells
    return entities, grid


def _read_trailer(
    reader: _Reader, game: Game
) -> Tuple[Dict[str, object], Dict[str, npt.NDArray[Any]]]:
    """TRAILER: the game's fields (games.py order) as (scalars, vectors) by name."""
    trailer_scalars: Dict[str, object] = {}
    trailer_vectors: Dict[str, npt.NDArray[Any]] = {}
    for field, kind in game.trailer:
        if kind in ("i", "f", "b"):
            trailer_scalars[field] = reader.scalar(field, kind)
        elif kind == "ve":
            k = reader.count(field, ENTITY_BYTES)
            trailer_vectors[field] = np.frombuffer(
                reader.data, ENTITY_DTYPE, count=k, offset=reader.at
            )
            reader.at += k * ENTITY_BYTES
        else:
            k = reader.count(field, 4)
            items = [reader.scalar(field, kind[1]) for _ in range(k)]
            trailer_vectors[field] = np.array(items, dtype=_VECTOR_DTYPES[kind])
    return trailer_scalars, trailer_vectors


def _read_terminator(reader: _Reader) -> None:
    """TERMINATOR: 0xCAFECAFE, and nothing after it."""
    terminator_at = reader.at
    reader.need(4, "terminator")
    (terminator,) = struct.unpack_from("<I", reader.data, terminator_at)
    if terminator != TERMINATOR:
        raise reader.error("missing 0xCAFECAFE terminator", terminator_at, "terminator")
    if terminator_at + 4 != len(reader.data):
        raise reader.error("bytes after the terminator", terminator_at + 4, "terminator")


def _check_invariants(reader: _Reader, game: Game, state: _ParsedState, trailer_at: int) -> None:
    """INVARIANTS (games.py): equalities that every real state satisfies."""
    height, width = state.grid.shape
    grid_values = {"grid.w": width, "grid.h": height, "grid.cells": width * height}

    def value(term: str) -> int:
        term = term.strip()
        if term.startswith("len("):
            return len(state.trailer_vectors[term[4:-1]])
        if term in grid_values:
            return grid_values[term]
        if term in state.trailer_scalars:
            return int(cast(Any, state.trailer_scalars[term]))
        return int(term)

    for invariant in game.invariants:
        values = [value(term) for term in invariant.split("==")]
        if len(set(values)) != 1:
            raise reader.error("a game invariant does not hold", trailer_at, invariant)


def _as_bytes(state: object, index: int) -> bytes:
    if isinstance(state, bytes):
        return state
    try:
        view = memoryview(state)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"state {index}: expected a contiguous bytes-like object, got {type(state).__name__}"
        ) from None
    if not view.c_contiguous:
        raise TypeError(f"state {index}: expected a contiguous bytes-like object")
    return view.tobytes()


def _records_to_float32(records: npt.NDArray[Any], fields: Sequence[str]) -> npt.NDArray[Any]:
    """Entity records -> float32 [n, len(fields)]; int fields are converted to float32."""
    out = np.empty((len(records), len(fields)), dtype=np.float32)
    for j, name in enumerate(fields):
        out[:, j] = records[name].astype(np.float32)
    return out


def _batch_game(states: List[bytes], game: Optional[str]) -> Game:
    if game is not None:
        return get_game(game)
    if not states:
        raise UsageError("parse_states needs at least one state, or game= for an empty batch")
    name = _read_game_name(_Reader(states[0], 0))
    if name not in GAMES:
        raise StateDecodeError(f"unknown game name {name!r}", index=0, offset=4, field="game_name")
    return GAMES[name]


def _parse_all(states: List[bytes], info: Game) -> List[_ParsedState]:
    parsed: List[_ParsedState] = []
    for i, data in enumerate(states):
        try:
            state = _parse_one(data, i, info)
        except StateDecodeError as exc:
            if exc.field == "game_name":
                # Another known game in the batch is a usage error, not a corrupt state.
                try:
                    other = _read_game_name(_Reader(data, i))
                except StateDecodeError:
                    other = None
                if other in GAMES and other != info.name:
                    raise MixedBatchError(
                        f"a {other} state in a {info.name} batch",
                        index=i,
                        offset=exc.offset,
                        field=exc.field,
                        status="PE_ERR_GAME",
                    ) from None
            raise
        if parsed and state.grid.shape != parsed[0].grid.shape:
            raise MixedBatchError(
                "grid size differs from the first state of the batch",
                index=i,
                offset=state.grid_w_at,
                field="grid.w",
                status="PE_ERR_SHAPE",
            )
        parsed.append(state)
    return parsed


def _batch_vectors(
    info: Game, parsed: Sequence[_ParsedState]
) -> Tuple[Dict[str, npt.NDArray[Any]], Dict[str, npt.NDArray[np.int64]]]:
    """Every trailer vector of the batch, flat in state order, and its per-state lengths."""
    vectors: Dict[str, npt.NDArray[Any]] = {}
    vector_counts: Dict[str, npt.NDArray[np.int64]] = {}
    for name, kind in info.trailer:
        if not kind.startswith("v"):
            continue
        per_state = [p.trailer_vectors[name] for p in parsed]
        vector_counts[name] = np.array([len(v) for v in per_state], dtype=np.int64)
        if kind == "ve":
            records = np.concatenate(per_state) if per_state else np.empty(0, ENTITY_DTYPE)
            vectors[name] = _records_to_float32(records, ENTITY_FIELDS)
        else:
            dtype = _VECTOR_DTYPES[kind]
            vectors[name] = (
                np.concatenate(per_state).astype(dtype) if per_state else np.empty(0, dtype)
            )
    return vectors, vector_counts


def _batch_grid(parsed: Sequence[_ParsedState]) -> npt.NDArray[np.int32]:
    """int32 [n, H, W]: the states' grids (one shape: _parse_all refuses mixed ones)."""
    shape = parsed[0].grid.shape if parsed else (0, 0)
    grids = np.empty((len(parsed), *shape), dtype=np.int32)
    for i, p in enumerate(parsed):
        grids[i] = p.grid
    return grids


def reference_parse_states(
    states: Sequence[object],
    *,
    entity_fields: Optional[Sequence[str]] = None,
    grid: bool = True,
    game: Optional[str] = None,
) -> StateBatch:
    """Pure-Python twin of ``parse_states``: same arguments, same StateBatch, same errors."""
    if isinstance(states, (bytes, bytearray, memoryview, str)):
        raise TypeError("reference_parse_states takes a sequence of states")
    fields = entity_field_names(entity_fields)
    unknown = [f for f in fields if f not in ENTITY_FIELDS]
    if unknown:
        raise UsageError(f"unknown entity fields {unknown}")
    blobs = [_as_bytes(s, i) for i, s in enumerate(states)]
    info = _batch_game(blobs, game)
    parsed = _parse_all(blobs, info)

    scalars: Dict[str, Any] = {
        name: np.array([p.scalars[name] for p in parsed], dtype=_KIND_DTYPES[kind])
        for name, kind in HEADER_SCALARS
    }
    extras = {
        name: np.array([p.trailer_scalars[name] for p in parsed], dtype=_KIND_DTYPES[kind])
        for name, kind in info.trailer
        if not kind.startswith("v")
    }
    vectors, vector_counts = _batch_vectors(info, parsed)
    records = np.concatenate([p.entities for p in parsed]) if parsed else np.empty(0, ENTITY_DTYPE)
    grid_array = _batch_grid(parsed) if grid else None
    return StateBatch.from_parts(
        info.name,
        scalars=scalars,
        entity_fields=fields,
        entities=_records_to_float32(records, fields),
        entity_counts=np.array([len(p.entities) for p in parsed], dtype=np.int64),
        grid=grid_array,
        extras=extras,
        vectors=vectors,
        vector_counts=vector_counts,
        sizes=np.array([p.size for p in parsed], dtype=np.int64),
    )


def reference_parse_state(state: object, **kwargs) -> StateBatch:  # type: ignore[no-untyped-def]
    """reference_parse_states for a single state: a StateBatch of length 1."""
    return reference_parse_states([state], **kwargs)


def reference_write_state(state: Any) -> bytes:
    """A ``procgen_entities.State`` written with ``struct`` from the field lists above, in the
    format reference's order: the pure-Python twin of csrc/state_writer.c, for tests to demand
    the same bytes. It checks nothing the C writer checks (struct refuses what cannot be packed)."""
    game = get_game(state.game)
    out = bytearray()

    def put(kind: str, value: Any) -> None:
        out.extend(struct.pack("<f" if kind == "f" else "<i", value if kind == "f" else int(value)))

    def put_rng(rng: Tuple[bool, bytes]) -> None:
        put("b", rng[0])
        put("i", len(rng[1]))
        out.extend(rng[1])

    name = game.name.encode("ascii")
    put("i", 0)
    put("i", len(name))
    out.extend(name)
    for field, kind in OPTIONS:
        put(kind, state.scalars[field])
    put_rng(state.rngs[0])
    put_rng(state.rngs[1])
    for field, kind in STEP:
        put(kind, state.scalars[field])
    h, w = state.grid.shape
    put("i", w * h)  # grid_size
    put("i", len(state.entities))
    out.extend(np.asarray(state.entities, dtype=ENTITY_DTYPE).tobytes())
    for field, kind in BASE:
        put(kind, state.scalars[field])
    put_rng(state.rngs[2])
    for field, kind in CAMERA:
        put(kind, state.scalars[field])
    for value in (w, h, w * h):
        put("i", value)
    out.extend(np.asarray(state.grid, dtype="<i4").tobytes())
    for field, kind in game.trailer:
        value = state.trailer[field]
        if not kind.startswith("v"):
            put(kind, value)
            continue
        put("i", len(value))
        dtype = ENTITY_DTYPE if kind == "ve" else np.dtype("<f4" if kind == "vf" else "<i4")
        out.extend(np.asarray(value, dtype=dtype).tobytes())
    out.extend(struct.pack("<I", TERMINATOR))
    return bytes(out)
