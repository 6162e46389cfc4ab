"""The observations the native builder (csrc/observation.c) must give, assembled in numpy from
parsed get_state bytes: the reference both adapters are tested against, bit for bit.

It stands apart from the builder: the states are procgen's own serializer's bytes (the stepper's
``get_states``, or ``final_states`` for terminal ones) parsed by ``parse_states`` (itself held
to reference.py), the entities are gathered by type in numpy (``batch_in_view`` for the camera
window, the hidden_unless flags, ``rel_x``/``rel_y``, plunder's ``is_target`` lookup), the
globals come from ``features.global_features`` (``batch_footing`` for ``on_ground``) and each
camera window's tiles from ``tilemap_to_entities_batch``. Only the tilemap kernels and the
padding kernel (``_collector.pad_rows``, csrc/padding.c) are shared with the builder.

Test-only: no adapter imports it. ``ragged_observation`` is ProcgenVecEnv's observation (every
entity of the filter's types, in the state's order), ``padded_observation`` EntityVectorEnv's
(caps, masks, nearest first, the class image and its entity marks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from procgen_entities._native import _collector
from procgen_entities.features import (
    RELATIVE_FEATURES,
    VECTOR_HEAD_ITEMS,
    EntityPlan,
    StepValues,
    apply_derived_features,
    batch_footing,
    batch_in_view,
    global_features,
)
from procgen_entities.games import DISTRIBUTION_MODE_IDS, Game, get_game
from procgen_entities.observation import GLOBAL_KEY, GRID_KEY, ObservationSpec
from procgen_entities.parse import StateBatch
from procgen_entities.tilemap import (
    DEFAULT_CHUNK,
    camera_crops,
    tilemap_images,
    tilemap_to_entities_batch,
)

__all__ = [
    "RaggedReference",
    "batch_values",
    "gather_entities",
    "padded_observation",
    "ragged_observation",
    "window_tiles",
]

Rows = npt.NDArray[np.float32]
Counts = npt.NDArray[np.int64]


def batch_values(batch: StateBatch) -> StepValues:
    """The inputs of the global and derived features of every state of a parsed batch: its
    scalars and trailer scalars, the first VECTOR_HEAD_ITEMS items of each trailer vector
    (zero-padded) and, for the platformers, the player's footing."""
    n = len(batch)
    heads: Dict[str, npt.NDArray[np.float64]] = {}
    for name, values in batch.vectors.items():
        if values.ndim != 1:  # entity vectors (starpilot): no feature reads them
            continue
        head = np.zeros((n, VECTOR_HEAD_ITEMS), dtype=np.float64)
        for i in range(n):
            items = batch.vector(name, i)[:VECTOR_HEAD_ITEMS]
            head[i, : len(items)] = items
        heads[name] = head
    footing = batch_footing(batch) if get_game(batch.game).support is not None else None
    return StepValues(
        scalars=batch.scalars, extras=batch.extras, vector_heads=heads, footing=footing
    )


def _mode_bits(codes: Any) -> npt.NDArray[np.int64]:
    """Per state, its distribution mode's bit in a plan's windowed masks (DISTRIBUTION_MODE_IDS
    by name to _collector.MODE_BITS; a code no mode has: "other")."""
    by_code = {code: _collector.MODE_BITS[name] for name, code in DISTRIBUTION_MODE_IDS.items()}
    other = _collector.MODE_BITS["other"]
    return np.array([by_code.get(int(c), other) for c in np.asarray(codes)], dtype=np.int64)


def _slot_records(plan: EntityPlan, batch: StateBatch) -> List[npt.NDArray[np.intp]]:
    """Per slot, the batch's entity records it gathers, in state and record order."""
    game = plan.game
    env_of = np.repeat(np.arange(len(batch)), batch.entity_counts)
    types = batch.field("type").astype(np.int64)
    shown = batch_in_view(batch)
    mode_bits = _mode_bits(batch.scalars["distribution_mode"])
    type_ids = {name: tid for tid, name in game.entity_types.items()}
    trailer = list(game.trailer_scalars)
    records = []
    for s, name in enumerate(plan.entity_types):
        keep = types == type_ids[name]
        if plan.windowed[s]:  # cropped in the modes of its mask: each state's own mode
            keep &= shown | ((mode_bits[env_of] & int(plan.windowed[s])) == 0)
        if plan.condition[s] >= 0:
            keep &= (np.asarray(batch.extras[trailer[plan.condition[s]]]) != 0)[env_of]
        records.append(np.flatnonzero(keep))
    return records


def gather_entities(
    plan: EntityPlan, batch: StateBatch, values: StepValues
) -> Tuple[List[Rows], Counts]:
    """Every slot's entities of every state: float32 rows (state after state, each state's in
    its record order, derived features filled) and int64 [slots, n] counts."""
    n = len(batch)
    env_of = np.repeat(np.arange(n), batch.entity_counts)
    player = batch.entity_offsets[:-1][env_of]  # each row's state's first record
    rows: List[Rows] = []
    counts = np.zeros((len(plan.entity_types), n), dtype=np.int64)
    for s, at in enumerate(_slot_records(plan, batch)):
        codes = plan.codes[plan.feature_start[s] : plan.feature_start[s + 1]]
        slot_rows = np.empty((len(at), len(codes)), dtype=np.float32)
        for column, code in enumerate(codes):
            slot_rows[:, column] = _feature(batch, at, player[at], int(code))
        counts[s] = np.bincount(env_of[at], minlength=n)
        apply_derived_features(slot_rows, plan.derived[s], counts[s], values)
        rows.append(slot_rows)
    return rows, counts


def _feature(
    batch: StateBatch, at: npt.NDArray[np.int64], player: npt.NDArray[np.int64], code: int
) -> Rows:
    """Entity field ``code`` of rows ``at`` (float32), or rel_x / rel_y against the player."""
    relative = {v: k for k, v in RELATIVE_FEATURES.items()}.get(code)
    if relative is None:
        return batch.entities[at, code]
    column = batch.entity_fields.index(relative[-1])  # rel_x -> x, rel_y -> y
    out: Rows = batch.entities[at, column] - batch.entities[player, column]
    return out


def _camera(batch: StateBatch) -> npt.NDArray[np.float64]:
    """[n, 3] (center_x, center_y, view_dim): each state's camera window."""
    keys = ("center_x", "center_y", "view_dim")
    return np.stack([np.asarray(batch.scalars[k], dtype=np.float64) for k in keys], axis=1)


def window_tiles(
    batch: StateBatch, mode: str, chunk: int = DEFAULT_CHUNK
) -> Tuple[Dict[str, Rows], Dict[str, Counts]]:
    """The tilemap types of each state's camera window (rows, and rows per state)."""
    assert batch.grid is not None, "the tiles need the states' grids"
    return tilemap_to_entities_batch(
        batch.grid, batch.game, mode, windows=_camera(batch), chunk=chunk
    )


@dataclass
class RaggedReference:
    """ProcgenVecEnv's observation of a batch: per entity type (the VecObs' order) its rows and
    counts, the global features, each env's actor index, reward, done and level_complete."""

    features: Dict[str, Tuple[Rows, Counts]]
    globals: npt.NDArray[np.float32]
    actors: Counts
    reward: npt.NDArray[np.float32]
    done: npt.NDArray[np.bool_]
    level_complete: npt.NDArray[np.bool_]


def ragged_observation(
    game: Game,
    full: Any,
    requested: Any,
    batch: StateBatch,
    *,
    window: bool = True,
    tilemap: Optional[str] = None,
    actor: str = "global",
) -> RaggedReference:
    """ProcgenVecEnv's observation of the states of ``batch`` for the filter ``requested`` of
    its full ObsSpace ``full`` (``window``, ``tilemap``, ``actor``: the env's options)."""
    plan = EntityPlan(game, full, requested, window=window)
    values = batch_values(batch)
    rows, counts = gather_entities(plan, batch, values)
    features = {name: (rows[s], counts[s]) for s, name in enumerate(plan.entity_types)}
    wanted = [name for name in requested.entities if name not in features]
    if wanted:
        assert tilemap is not None, "tile types without a tilemap"
        tiles, tile_counts = window_tiles(batch, tilemap)
        for name in wanted:
            full_features = list(full.entities[name].features)
            columns = [full_features.index(f) for f in requested.entities[name].features]
            features[name] = (np.ascontiguousarray(tiles[name][:, columns]), tile_counts[name])
    total = np.zeros(len(batch), dtype=np.int64)
    for _, lengths in features.values():
        total += lengths
    return RaggedReference(
        features=features,
        globals=global_features(game, plan.global_features, values),
        actors=np.zeros_like(total) if actor == "player" else total,
        reward=np.asarray(batch.reward, dtype=np.float32),
        done=np.asarray(batch.done, dtype=np.bool_),
        level_complete=np.asarray(batch.level_complete, dtype=np.bool_),
    )


# ---- EntityVectorEnv's padded observation ----


def pad(
    caps: Mapping[str, int],
    name: str,
    rows: Rows,
    counts: Counts,
    out: Dict[str, npt.NDArray[Any]],
    nearest: Optional[Tuple[int, int, Optional[Rows]]] = None,
) -> Counts:
    """One type's rows (state order, ``counts`` per state) into ``out[name]`` [n, cap, F] and
    its mask; returns each state's rows beyond the cap. ``nearest``: (x column, y column,
    player positions [n, 2] or None when the columns are relative already) by which the rows
    nearest the player are kept first; None keeps the first ones."""
    dropped = np.empty(len(counts), dtype=np.int64)
    cx, cy, player = nearest if nearest is not None else (-1, -1, None)
    _collector.pad_rows(
        np.ascontiguousarray(rows, dtype=np.float32), np.ascontiguousarray(counts),
        out[name], out[f"{name}_mask"].view(np.uint8), dropped, cx, cy, player,
    )  # fmt: skip
    assert out[name].shape[1] == caps[name]
    return dropped


def padded_observation(env: Any, batch: StateBatch) -> Tuple[Any, Counts]:
    """EntityVectorEnv ``env``'s observation of the states of ``batch`` (any number of them:
    the current ones, or the terminal ones of ``final_states``) and, per state, the entities
    beyond the caps: the dict of padded arrays, or the flat form with ``flatten=True``."""
    spec: ObservationSpec = env.observation_spec
    layout, plan, n = spec.padded_layout, spec.plan, len(batch)
    values = batch_values(batch)
    out = layout.empty(n)
    rows, counts = gather_entities(plan, batch, values)
    dropped = np.zeros(n, dtype=np.int64)
    for s, name in enumerate(plan.entity_types):
        dropped += pad(layout.caps, name, rows[s], counts[s], out, _nearest(spec, name, out))
    if spec.tiles is not None:
        tiles, tile_counts = window_tiles(batch, spec.tiles.mode_name, spec.tiles.chunk)
        for name in spec.tiles.names:
            nearest = _nearest(spec, name, out)
            dropped += pad(layout.caps, name, tiles[name], tile_counts[name], out, nearest)
    if spec.image_table is not None:
        crops = _class_image(spec, batch, out[GRID_KEY])
        if spec.grid_marks and spec.grid_boxes:
            _mark_boxes(spec, plan, batch, rows, counts, crops, out[GRID_KEY])
        elif spec.grid_marks:
            _mark(spec, plan.entity_types, rows, counts, crops, out[GRID_KEY])
    out[GLOBAL_KEY][:] = global_features(spec.game, spec.space.global_features, values)
    out = layout.select(out)
    return (layout.flatten(out) if env.flatten else out), dropped


def _nearest(
    spec: ObservationSpec, name: str, out: Dict[str, npt.NDArray[Any]]
) -> Optional[Tuple[int, int, Optional[Rows]]]:
    """How ``pad`` ranks this type's rows by distance to the player (None: it cannot)."""
    columns = spec.distance_columns[name]
    if columns is None:
        return None
    kind, cx, cy = columns
    if kind == "relative":
        return cx, cy, None
    player_columns = spec.distance_columns.get("Player")
    if "Player" not in out or player_columns is None or name == "Player":
        return None
    _, px, py = player_columns
    player: Rows = np.ascontiguousarray(out["Player"][:, 0, [px, py]])
    return cx, cy, player


def _class_image(
    spec: ObservationSpec, batch: StateBatch, out: npt.NDArray[np.uint8]
) -> npt.NDArray[Any]:
    """The camera windows' class images into ``out`` (an entity-only game's: empty, for its
    marks); returns the windows' crops [n, 4]."""
    assert batch.grid is not None, "the class image needs the states' grids"
    camera = _camera(batch)
    if spec.images is None:
        out[:] = 0
    else:
        out[:] = tilemap_images(batch.grid, spec.game.name, windows=camera, size=out.shape[1])
    crops = np.empty((len(batch), 4), dtype=np.int64)
    camera_crops(camera[:, 0], camera[:, 1], camera[:, 2], crops, np.empty((len(batch), 2)))
    return crops


def _mark(
    spec: ObservationSpec,
    slots: Sequence[str],
    rows: List[Rows],
    counts: Counts,
    crops: npt.NDArray[Any],
    out: npt.NDArray[np.uint8],
) -> None:
    """The entity marks of the grid: each marked slot's rows' cells, placed in the windows as
    the class image places them, the largest value where several meet."""
    size, n = out.shape[1], len(out)
    for s, value in enumerate(spec.mark_values()):
        if not value:
            continue
        features = list(spec.space.entities[slots[s]].features)
        xy = np.floor(rows[s][:, [features.index("x"), features.index("y")]])
        state = np.repeat(np.arange(n), counts[s])
        cx, cy = xy[:, 0] - crops[state, 0], xy[:, 1] - crops[state, 1]
        inside = (cx >= 0) & (cx < crops[state, 2]) & (cy >= 0) & (cy < crops[state, 3])
        col = cx + (size - crops[state, 2]) // 2
        row = size - 1 - (size - crops[state, 3]) // 2 - cy
        inside &= (col >= 0) & (col < size) & (row >= 0) & (row < size)
        at = (state[inside], row[inside].astype(np.int64), col[inside].astype(np.int64))
        np.maximum.at(out, at, np.uint8(value))


def _mark_boxes(
    spec: ObservationSpec,
    plan: EntityPlan,
    batch: StateBatch,
    rows: List[Rows],
    counts: Counts,
    crops: npt.NDArray[Any],
    out: npt.NDArray[np.uint8],
) -> None:
    """``_mark`` with ``grid_boxes``: every cell of each marked entity's open span x ± rx,
    y ± ry (rx, ry from the raw fields, 0 where not finite and positive; at least the
    position's cell), one entity at a time, the crop's cells inside the image as the class
    image places the crop, the largest value where several meet."""
    size = out.shape[1]
    half = np.stack([batch.field("rx"), batch.field("ry")], axis=1).astype(np.float64)
    half = np.where(np.isfinite(half) & (half > 0), half, 0.0)
    records = _slot_records(plan, batch)
    for s, value in enumerate(spec.mark_values()):
        if not value:
            continue
        features = list(spec.space.entities[plan.entity_types[s]].features)
        xy = rows[s][:, [features.index("x"), features.index("y")]].astype(np.float64)
        for k, r in enumerate(np.repeat(np.arange(len(out)), counts[s])):
            ox, oy = (size - crops[r, 2]) // 2, (size - crops[r, 3]) // 2
            x, y = xy[k, 0] - crops[r, 0], xy[k, 1] - crops[r, 1]
            if not (np.isfinite(x) and np.isfinite(y)):
                continue
            hx, hy = half[records[s][k]]
            x0, y0 = np.floor(x - hx), np.floor(y - hy)
            x1, y1 = max(np.ceil(x + hx) - 1, x0), max(np.ceil(y + hy) - 1, y0)
            cols = np.arange(max(x0, 0, -ox), min(x1, crops[r, 2] - 1, size - 1 - ox) + 1)
            lines = np.arange(max(y0, 0, -oy), min(y1, crops[r, 3] - 1, size - 1 - oy) + 1)
            at = (size - 1 - oy - lines.astype(np.int64))[:, None], cols.astype(np.int64) + ox
            out[r][at] = np.maximum(out[r][at], np.uint8(value))
