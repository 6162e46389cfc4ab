"""parse_states: many get_state blobs of one game -> one StateBatch of numpy arrays."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from procgen_entities._native import _parser
from procgen_entities.errors import MixedBatchError, StateDecodeError, UsageError
from procgen_entities.games import ENTITY_FIELDS, GAMES, Game, get_game

__all__ = [
    "StateBatch", "parse_state", "parse_states", "game_spec", "entity_field_indices",
    "entity_field_names",
]  # fmt: skip

BytesLike = Union[bytes, bytearray, memoryview]

#: Header and base scalars written by the C parser, in its column order.
SCALAR_NAMES: Tuple[str, ...] = _parser.SCALAR_NAMES
_KIND_DTYPES = {"i": np.int32, "f": np.float32, "b": np.bool_}
_VECTOR_DTYPES = {"vi": np.int32, "vf": np.float32, "vb": np.bool_, "ve": np.float32}


@dataclass(frozen=True, eq=False)
class StateBatch:
    """Parsed states of one game. State ``i`` owns entity rows
    ``entity_offsets[i]:entity_offsets[i + 1]``.

    ``extras`` maps every scalar trailer field of the game to an array[n] (int32, float32 or bool
    as the field is stored). Trailer vectors are in ``vectors`` (name -> flat values of all states,
    concatenated in state order) with ``vector_counts`` (name -> int64[n] items per state); for
    starpilot's ``spawners`` the flat values are float32[total, 31], one entity record per row in
    ``ENTITY_FIELDS`` order. ``vector(name, i)`` slices one state's items. ``scalars`` holds every
    header and base field (camera, options, actions) by its name in the format reference.
    """

    game: str
    reward: npt.NDArray[np.float32]
    done: npt.NDArray[np.bool_]
    level_complete: npt.NDArray[np.bool_]
    cur_time: npt.NDArray[np.int32]
    level_seed: npt.NDArray[np.int32]
    entity_fields: Tuple[str, ...]
    entities: npt.NDArray[np.float32]
    entity_counts: npt.NDArray[np.int64]
    grid: Optional[npt.NDArray[np.int32]]
    extras: Dict[str, npt.NDArray[Any]]
    vectors: Dict[str, npt.NDArray[Any]]
    vector_counts: Dict[str, npt.NDArray[np.int64]]
    scalars: Dict[str, npt.NDArray[Any]]
    sizes: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.reward)

    @property
    def entity_offsets(self) -> npt.NDArray[np.int64]:
        """int64[n + 1]: state i's entities are rows offsets[i]:offsets[i + 1]."""
        return np.concatenate(([0], np.cumsum(self.entity_counts)))

    def state_entities(self, i: int) -> npt.NDArray[np.float32]:
        """State ``i``'s entity rows (a negative ``i`` counts from the end, as in a list)."""
        i = self._index(i)
        offsets = self.entity_offsets
        return self.entities[offsets[i] : offsets[i + 1]]

    def vector(self, name: str, i: int) -> npt.NDArray[Any]:
        """State ``i``'s items of trailer vector ``name`` (``i`` as for state_entities)."""
        counts = self.vector_counts[name]
        i = self._index(i)
        start = int(counts[:i].sum())
        return self.vectors[name][start : start + int(counts[i])]

    def _index(self, i: int) -> int:
        """A state index as a list takes it: negative from the end, IndexError outside."""
        n = len(self)
        index = operator.index(i)
        if not -n <= index < n:
            raise IndexError(f"state index {index} out of range for a batch of {n} states")
        return index % n

    @classmethod
    def from_parts(
        cls,
        game: str,
        *,
        scalars: Dict[str, npt.NDArray[Any]],
        entity_fields: Tuple[str, ...],
        entities: npt.NDArray[np.float32],
        entity_counts: npt.NDArray[np.int64],
        grid: Optional[npt.NDArray[np.int32]],
        extras: Dict[str, npt.NDArray[Any]],
        vectors: Dict[str, npt.NDArray[Any]],
        vector_counts: Dict[str, npt.NDArray[np.int64]],
        sizes: npt.NDArray[np.int64],
    ) -> "StateBatch":
        """A batch whose headline arrays (reward, done, ...) are taken from ``scalars``."""
        return cls(
            game=game,
            reward=scalars["reward"],
            done=scalars["done"],
            level_complete=scalars["level_complete"],
            cur_time=scalars["cur_time"],
            level_seed=scalars["current_level_seed"],
            entity_fields=entity_fields,
            entities=entities,
            entity_counts=entity_counts,
            grid=grid,
            extras=extras,
            vectors=vectors,
            vector_counts=vector_counts,
            scalars=scalars,
            sizes=sizes,
        )

    def field(self, name: str) -> npt.NDArray[np.float32]:
        """One entity field (a column of ``entities``) by name; UsageError for a field this
        batch did not gather."""
        if name not in self.entity_fields:
            raise UsageError(f"StateBatch.field: no entity field {name!r} in this batch (its "
                             f"fields: {', '.join(self.entity_fields)})")  # fmt: skip
        return self.entities[:, self.entity_fields.index(name)]


@lru_cache(maxsize=None)
def game_spec(game: str, check_invariants: bool = True) -> _parser.GameSpec:
    """The C parser's view of a game (cached: one per game per process)."""
    info = get_game(game)
    return _parser.GameSpec(game, info.trailer, info.invariant_terms(), check_invariants)


@lru_cache(maxsize=64)
def _field_indices(fields: Tuple[str, ...]) -> npt.NDArray[Any]:
    unknown = [f for f in fields if f not in ENTITY_FIELDS]
    if unknown:
        raise UsageError(
            f"unknown entity fields {unknown}; valid fields: {', '.join(ENTITY_FIELDS)}"
        )
    indices = np.array([ENTITY_FIELDS.index(f) for f in fields], dtype=np.int32)
    indices.setflags(write=False)
    return indices


def entity_field_indices(fields: Sequence[str]) -> npt.NDArray[Any]:
    """int32 indices into the 31-field entity record; UsageError naming unknown fields."""
    return _field_indices(tuple(fields))


def entity_field_names(entity_fields: Optional[Sequence[str]]) -> Tuple[str, ...]:
    """``entity_fields`` as a tuple (None: all 31); a TypeError for one string, which would be
    read as its characters ("xy" as ["x", "y"])."""
    if entity_fields is None:
        return tuple(ENTITY_FIELDS)
    if isinstance(entity_fields, (str, bytes)):
        raise TypeError(f"entity_fields is a sequence of field names, not one string "
                        f"({entity_fields!r}: write [{entity_fields!r}])")  # fmt: skip
    return tuple(entity_fields)


def _detect_game(states: Sequence[BytesLike], game: Optional[str]) -> Game:
    if game is not None:
        return get_game(game)
    if len(states) == 0:
        raise UsageError("parse_states needs at least one state, or game= for an empty batch")
    name = _parser.read_game_name(states[0])
    if name not in GAMES:
        raise StateDecodeError(f"unknown game name {name!r}", index=0, offset=4, field="game_name")
    return GAMES[name]


def _split_vectors(
    game: Game, raw: Dict[str, Any]
) -> Tuple[Dict[str, npt.NDArray[Any]], Dict[str, npt.NDArray[Any]]]:
    names = game.trailer_vectors
    if not names:
        return {}, {}
    kinds = [kind for _, kind in game.trailer if kind.startswith("v")]
    counts = raw["vector_counts"]  # int64[n, V]
    values = raw["vector_values"]
    widths = np.array([len(ENTITY_FIELDS) if k == "ve" else 1 for k in kinds], dtype=np.int64)
    # The C side writes state 0's vectors, then state 1's, ...: vector v of state i is the
    # segment starts[i, v] : starts[i, v] + lengths[i, v]. Gather each vector's segments with one
    # index array (a single vector, e.g. starpilot's spawners, is already contiguous).
    lengths = counts * widths
    flat = lengths.reshape(-1)
    starts = (np.cumsum(flat) - flat).reshape(lengths.shape)
    vectors, vector_counts = {}, {}
    for v, (name, kind) in enumerate(zip(names, kinds)):
        if len(names) == 1:
            picked = values
        else:
            seg = lengths[:, v]
            out_starts = np.cumsum(seg) - seg
            shift = np.repeat(starts[:, v] - out_starts, seg)
            picked = values[np.arange(int(seg.sum()), dtype=np.int64) + shift]
        picked = picked.astype(_VECTOR_DTYPES[kind])
        vectors[name] = picked.reshape(-1, len(ENTITY_FIELDS)) if kind == "ve" else picked
        vector_counts[name] = counts[:, v].copy()
    return vectors, vector_counts


def parse_states(
    states: Sequence[BytesLike],
    *,
    entity_fields: Optional[Sequence[str]] = None,
    grid: bool = True,
    game: Optional[str] = None,
) -> StateBatch:
    """Parse get_state() blobs of one game into a StateBatch.

    ``states``: a sequence of bytes, bytearray or memoryview. ``entity_fields``: which of the 31
    entity fields to gather (default: all, in procgen's order). ``grid=False`` skips the tile
    grid. ``game``: the expected game (required only for an empty batch).

    Raises StateDecodeError (a ValueError) naming the state, field and byte offset of the first
    malformed state; MixedBatchError (a ValueError) for states of different games or grid sizes;
    TypeError for objects that are not bytes-like.
    """
    if isinstance(states, (bytes, bytearray, memoryview, str)):
        raise TypeError("parse_states takes a sequence of states; use parse_state for one")
    fields = entity_field_names(entity_fields)
    indices = entity_field_indices(fields)
    info = _detect_game(states, game)
    try:
        raw = _parser.parse_batch(states, game_spec(info.name), indices, bool(grid))
    except StateDecodeError as exc:
        raise _mixed_batch_error(states, info, exc) or exc from None
    vectors, vector_counts = _split_vectors(info, raw)
    trailer_kinds = [kind for _, kind in info.trailer if not kind.startswith("v")]
    return StateBatch.from_parts(
        info.name,
        scalars=_columns_by_kind(raw["scalars"], SCALAR_NAMES, _parser.SCALAR_KINDS),
        entity_fields=fields,
        entities=raw["entities"],
        entity_counts=raw["entity_counts"],
        grid=raw["grid"],
        extras=_columns_by_kind(raw["trailer_scalars"], info.trailer_scalars, trailer_kinds),
        vectors=vectors,
        vector_counts=vector_counts,
        sizes=raw["sizes"],
    )


@lru_cache(maxsize=None)
def _casts(
    names: Tuple[str, ...], kinds: Tuple[str, ...]
) -> Tuple[Tuple[type, npt.NDArray[Any], Tuple[str, ...]], ...]:
    """Per kind: its dtype, the columns of that kind and their names."""
    plan = []
    for kind, dtype in _KIND_DTYPES.items():
        picked = [j for j, k in enumerate(kinds) if k == kind]
        if picked:
            plan.append((dtype, np.array(picked), tuple(names[j] for j in picked)))
    return tuple(plan)


def _columns_by_kind(
    columns: npt.NDArray[Any], names: Sequence[str], kinds: Sequence[str]
) -> Dict[str, npt.NDArray[Any]]:
    """Name -> column of a float64 [n, k] array, cast to its kind's dtype (one cast per kind)."""
    out: Dict[str, npt.NDArray[Any]] = {}
    for dtype, picked, picked_names in _casts(tuple(names), tuple(kinds)):
        out.update(zip(picked_names, columns[:, picked].T.astype(dtype)))  # rows: contiguous
    return {name: out[name] for name in names}  # in the declared order


def _mixed_batch_error(
    states: Sequence[BytesLike], game: Game, exc: StateDecodeError
) -> Optional[MixedBatchError]:
    """A state whose name is another known game's: the batch is mixed, not the state corrupt
    (PE_ERR_SHAPE, the other mix, is a MixedBatchError from the C status already)."""
    if exc.status != "PE_ERR_GAME" or isinstance(exc, MixedBatchError):
        return None
    try:
        other = _parser.read_game_name(states[exc.index])
    except StateDecodeError:
        return None
    if other not in GAMES:
        return None
    return MixedBatchError(
        f"a {other} state in a {game.name} batch; parse one game per call",
        index=exc.index,
        offset=exc.offset,
        field=exc.field,
        code=exc.code,
        status=exc.status,
    )


def parse_state(
    state: BytesLike,
    *,
    entity_fields: Optional[Sequence[str]] = None,
    grid: bool = True,
    game: Optional[str] = None,
) -> StateBatch:
    """parse_states for a single state: a StateBatch of length 1."""
    return parse_states([state], entity_fields=entity_fields, grid=grid, game=game)
