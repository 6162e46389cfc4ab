"""Tile grids -> entities (and back), computed by the C kernels in csrc/tilemap.c.

A procgen tile grid (``StateBatch.grid[i]``: int [H, W], row 0 = the BOTTOM of the world, cell
``(row, col)`` covers world ``[col, col+1) x [row, row+1)``) becomes one float32 table per entity
type. Tile ids are first mapped to the game's tile classes (``games.py``: ``Game.tiles``); ids of
no class (empty space 100, anything unknown) are empty. Entity type names are the class names
(``Wall``, ``Lava``, ...) plus ``Column`` and ``Chunk``; ``tilemap_features`` names the columns.

Modes (all positions in world units, y up):

``"tiles"``    one entity per non-empty cell: ``x = col + 0.5``, ``y = row + 0.5``.
``"runs"``     maximal horizontal runs of one class within a row: ``x`` (centre of the run),
               ``y = row + 0.5``, ``width`` (cells).
``"columns"``  platformers only (coinrun, climber, jumper, ninja). One ``Column`` per grid column:
               ``x = col + 0.5``; ``height`` = world y of the top of the terrain stack rising from
               the bottom row (coinrun: Wall cells, then Lava cells; the others: Wall);
               ``is_lava`` = the stack's surface is lava (coinrun only, 0 elsewhere);
               ``lava_depth`` = lava cells on top of the stack; ``is_gap`` = no ground at all.
               Every tile not in a stack (floating platforms, walls above gaps, goal, fire, ...)
               comes out as a ``"runs"`` entity of its class, so nothing is lost.
``"chunks"``   ``k x k`` chunks (``chunk=5``) aligned to the bottom-left of the grid (or window):
               one ``Chunk`` per chunk with any non-empty cell; ``x, y`` = centre of the chunk's
               area (clipped at the edge) and ``n_<class>`` = number of cells of each class.

Windows: ``window=None`` is the whole grid. Otherwise a ``Window`` or a tuple ``(center_x,
center_y, view_dim)`` in world units, as in the state's camera fields (``StateBatch.scalars``
``center_x``, ``center_y``, ``view_dim``): procgen shows the square ``center +- view_dim / 2``;
the crop is the ``n x n`` cells (``n = round(view_dim)``) whose centres lie in it. Cells outside
the world take the game's ``out_of_bounds_tile`` (a wall in most games; none = empty). With a
window every entity also gets ``rel_x, rel_y`` = its position minus the window centre (the
agent's position when the game centres the camera on it; climber and fruitbot do not); for
``Column`` ``rel_y`` is ``height - center_y`` and the stack rises from the window's bottom row.
The game's own entity types have features of the same names measured from the player instead
(features.RELATIVE_FEATURES says where the two differ).

``tilemap_images`` gives the window (or grid) as a square image of class ids instead (uint8,
class index + 1, 0 = empty, row 0 = the TOP row as procgen draws it): what a CNN reads
(``EntityVectorEnv(..., grid=True)``); ``tile_class_names`` lists the classes in id order.

``entities_to_tilemap`` inverts the lossless modes (tiles, runs, columns) to a grid of class
*representative tile ids*: the first id of each class in ``Game.tiles`` (coinrun Wall -> 15,
Lava -> 17), ``SPACE_TILE`` (100) where empty. ``class_tilemap`` maps a grid to the same form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from procgen_entities._native import _tilemap
from procgen_entities.errors import UsageError
from procgen_entities.games import GAMES, SPACE_TILE, Game, get_game

__all__ = [
    "COLUMN_TERRAIN",
    "DEFAULT_CHUNK",
    "MODES",
    "Window",
    "class_tilemap",
    "entities_to_tilemap",
    "tilemap_features",
    "tilemap_to_entities",
    "tilemap_to_entities_batch",
    "tile_class_names",
    "tilemap_images",
]

MODES: Tuple[str, ...] = ("tiles", "runs", "columns", "chunks")
LOSSLESS_MODES: Tuple[str, ...] = ("tiles", "runs", "columns")
DEFAULT_CHUNK = 5

#: Platformer -> (class of the column stack body, class that may cap it or None): games.py's
#: ``column_terrain``.
COLUMN_TERRAIN: Mapping[str, Tuple[str, Optional[str]]] = {
    g.name: g.column_terrain for g in GAMES.values() if g.column_terrain is not None
}

#: Tile ids >= this are empty (procgen's largest tile id is 1002).
_LUT_SIZE = 1024

WindowLike = Union["Window", Tuple[float, float, float], Sequence[float]]


@dataclass(frozen=True)
class Window:
    """A crop of the grid, ``[x0, x0 + width) x [y0, y0 + height)`` in cells, and the point
    ``(ref_x, ref_y)`` (world units) that ``rel_x``/``rel_y`` are measured from."""

    x0: int
    y0: int
    width: int
    height: int
    ref_x: float
    ref_y: float

    @classmethod
    def from_camera(cls, center_x: float, center_y: float, view_dim: float) -> "Window":
        """The cells procgen shows: the n x n cells (n = round(view_dim)) whose centres lie in
        ``center +- view_dim / 2``."""
        if not all(math.isfinite(v) for v in (center_x, center_y, view_dim)) or view_dim <= 0:
            raise UsageError(
                f"window needs finite center_x, center_y and view_dim > 0, got "
                f"({center_x}, {center_y}, {view_dim})"
            )
        n = max(1, int(round(view_dim)))
        if n > _tilemap.MAX_CROP:
            raise UsageError(f"view_dim {view_dim} is too large (at most {_tilemap.MAX_CROP})")
        return cls(
            x0=int(math.floor(center_x - n / 2 + 0.5)),
            y0=int(math.floor(center_y - n / 2 + 0.5)),
            width=n,
            height=n,
            ref_x=float(center_x),
            ref_y=float(center_y),
        )


# ---- per-game tables (cached) ----


@dataclass(frozen=True)
class _Tables:
    game: Game
    classes: Tuple[str, ...]
    representatives: npt.NDArray[np.int32]  # class index -> tile id; last entry = SPACE_TILE
    lut: npt.NDArray[np.int8]
    spec: "_tilemap.TileSpec"
    column_spec: Optional["_tilemap.TileSpec"]


@lru_cache(maxsize=None)
def _tables(game_name: str) -> _Tables:
    game = get_game(game_name)
    if not game.has_tilemap:
        raise UsageError(
            f"{game.name} is an entity-only game: its grid is all empty space and it has no "
            "tile classes (games.py); use its entities instead"
        )
    classes = tuple(game.tiles)
    if len(classes) > _tilemap.MAX_CLASSES:
        raise UsageError(f"{game.name}: more than {_tilemap.MAX_CLASSES} tile classes")
    lut = np.full(_LUT_SIZE, -1, dtype=np.int8)
    for c, ids in enumerate(game.tiles.values()):
        for tile_id in ids:
            if not 0 <= tile_id < _LUT_SIZE:
                raise UsageError(f"{game.name}: tile id {tile_id} outside [0, {_LUT_SIZE})")
            lut[tile_id] = c
    oob = game.out_of_bounds_tile
    oob_class = int(lut[oob]) if 0 <= oob < _LUT_SIZE else -1
    reps = np.array([ids[0] for ids in game.tiles.values()] + [SPACE_TILE], dtype=np.int32)
    lut_bytes = lut.tobytes()
    spec = _tilemap.TileSpec(lut_bytes, len(classes), oob_class, -1, -1)
    column_spec = None
    if game.name in COLUMN_TERRAIN:
        base, top = COLUMN_TERRAIN[game.name]
        column_spec = _tilemap.TileSpec(
            lut_bytes, len(classes), oob_class, classes.index(base),
            classes.index(top) if top is not None else -1,
        )  # fmt: skip
    return _Tables(game, classes, reps, lut, spec, column_spec)


def _check_mode(tables: _Tables, mode: str) -> None:
    if mode not in MODES:
        raise UsageError(f"unknown tilemap mode {mode!r}; valid modes: {', '.join(MODES)}")
    if mode == "columns" and tables.column_spec is None:
        raise UsageError(
            f"'columns' mode is for platformers ({', '.join(COLUMN_TERRAIN)}), not "
            f"{tables.game.name}"
        )


def _check_chunk(chunk: int) -> int:
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)):
        raise TypeError(f"chunk must be an int, got {type(chunk).__name__}")
    if not 1 <= chunk <= _tilemap.MAX_CROP:
        raise UsageError(f"chunk must be in [1, {_tilemap.MAX_CROP}], got {chunk}")
    return int(chunk)


def _snake(name: str) -> str:
    return "".join(
        "_" + ch.lower() if ch.isupper() and i else ch.lower() for i, ch in enumerate(name)
    )


@lru_cache(maxsize=None)
def _features(game_name: str, mode: str, window: bool) -> Tuple[Tuple[str, Tuple[str, ...]], ...]:
    tables = _tables(game_name)
    _check_mode(tables, mode)
    rel = ("rel_x", "rel_y") if window else ()
    run = ("x", "y", "width") + rel
    if mode == "tiles":
        out = [(c, ("x", "y") + rel) for c in tables.classes]
    elif mode == "runs":
        out = [(c, run) for c in tables.classes]
    elif mode == "columns":
        column = ("x", "height", "is_lava", "lava_depth", "is_gap") + rel
        out = [("Column", column)] + [(c, run) for c in tables.classes]
    else:
        counts = tuple(f"n_{_snake(c)}" for c in tables.classes)
        out = [("Chunk", ("x", "y") + counts + rel)]
    return tuple(out)


def tilemap_features(game: str, mode: str, *, window: bool = False) -> Dict[str, List[str]]:
    """Entity type name -> feature names for ``mode``; ``window=True`` adds ``rel_x, rel_y``.

    The keys and their order are exactly those ``tilemap_to_entities`` returns."""
    return {name: list(feats) for name, feats in _features(game, mode, bool(window))}


# ---- conversion ----


def _as_grids(grids: npt.NDArray[Any], ndim: int, what: str) -> npt.NDArray[Any]:
    if not isinstance(grids, np.ndarray):
        raise TypeError(f"{what} must be a numpy array, got {type(grids).__name__}")
    if grids.dtype.kind not in "iu":
        raise TypeError(f"{what} must have an integer dtype, got {grids.dtype}")
    if grids.ndim != ndim:
        raise UsageError(f"{what} must be {ndim}-D, got shape {grids.shape}")
    if grids.dtype != np.int32:
        if grids.size and (grids.min() < -(2**31) or grids.max() >= 2**31):
            raise UsageError(f"{what} has tile ids outside the int32 range")
        grids = grids.astype(np.int32)
    return np.ascontiguousarray(grids)


def camera_crops(
    center_x: npt.NDArray[Any],
    center_y: npt.NDArray[Any],
    view_dim: npt.NDArray[Any],
    crops: npt.NDArray[Any],
    refs: npt.NDArray[Any],
) -> None:
    """The camera squares as crops [n, 4] = (x0, y0, w, h) and reference points [n, 2] (the
    centres), written into the given arrays: the square of ``round(view_dim)`` cells centred on
    the camera, as ``Window.from_camera`` places it."""
    size = np.maximum(1, np.rint(view_dim))
    crops[:, 0] = np.floor(center_x - size / 2 + 0.5)
    crops[:, 1] = np.floor(center_y - size / 2 + 0.5)
    crops[:, 2] = size
    crops[:, 3] = size
    refs[:, 0] = center_x
    refs[:, 1] = center_y


class CameraConverter:
    """A game's tilemap in one mode as the adapters' native observation builders take it
    (csrc/tilemap.h's tm_spec): the entity types' names, the tile specs for the entities and
    for the class images, the mode and the chunk, checked once. The builders place each camera
    window themselves, as ``camera_crops`` and ``tilemap_to_entities_batch`` do."""

    def __init__(self, game: str, mode: str, chunk: int = DEFAULT_CHUNK) -> None:
        tables = _tables(game)
        _check_mode(tables, mode)
        self.chunk = _check_chunk(chunk)
        self.mode, self.mode_name = _tilemap.MODES[mode], mode
        self.names = [name for name, _ in _features(tables.game.name, mode, True)]
        oob = tables.game.out_of_bounds_tile
        oob_class = int(tables.lut[oob]) if 0 <= oob < _LUT_SIZE else -1
        lut, n_classes = tables.lut.tobytes(), len(tables.classes)
        base = top = -1
        if mode == "columns":
            body, cap = COLUMN_TERRAIN[tables.game.name]
            base = tables.classes.index(body)
            top = tables.classes.index(cap) if cap is not None else -1
        #: the tile spec (csrc/tilemap.h's tm_spec) for the entities; the class images' (classes,
        #: never the columns' stack marks)
        self.native_spec = TileTable(lut, n_classes, oob_class, base, top)
        self.native_image_spec = TileTable(lut, n_classes, oob_class, -1, -1)


@dataclass(frozen=True)
class TileTable:
    """A tilemap's tile table, field for field csrc/tilemap.h's tm_spec: procgen tile -> class
    (int8 bytes, -1: empty), the number of classes, the class outside the grid (-1: none) and
    the columns mode's body and top classes (-1: not the columns mode)."""

    lut: bytes
    n_classes: int
    oob_class: int
    base_class: int
    top_class: int


#: The class image table of an entity-only game's grid (procgen's grid there is all empty
#: space): every tile empty and no class outside the grid, so the image holds only the entity
#: marks (ObservationSpec ``grid_entities``). One placeholder class, as tm_spec needs one.
EMPTY_IMAGE_TABLE = TileTable(b"\xff" * _LUT_SIZE, 1, -1, -1, -1)


def _crops(
    windows: Optional[Union[npt.NDArray[Any], Sequence[WindowLike]]],
    n: int,
    height: int,
    width: int,
) -> Tuple[npt.NDArray[np.int32], Optional[npt.NDArray[np.float32]]]:
    """(int32 [n, 4] crops, float32 [n, 2] reference points or None)."""
    if windows is None:
        crops = np.empty((n, 4), dtype=np.int32)
        crops[:] = (0, 0, width, height)
        return crops, None
    if len(windows) and isinstance(windows[0], Window):
        objects = [w for w in windows if isinstance(w, Window)]
        if len(windows) != n or len(objects) != n:
            raise UsageError(f"windows must be {n} Window objects")
        crops = np.array([(w.x0, w.y0, w.width, w.height) for w in objects], dtype=np.int64)
        refs = np.array([(w.ref_x, w.ref_y) for w in objects], dtype=np.float32)
    else:
        arr = np.asarray(windows, dtype=np.float64)
        if arr.shape != (n, 3):
            raise UsageError(
                f"windows must have shape ({n}, 3) = (center_x, center_y, view_dim) per grid, "
                f"got {arr.shape}"
            )
        if not np.isfinite(arr).all() or (arr[:, 2] <= 0).any():
            raise UsageError("windows need finite center_x, center_y and view_dim > 0")
        crops = np.empty((n, 4), dtype=np.int64)
        refs = np.empty((n, 2), dtype=np.float32)
        camera_crops(arr[:, 0], arr[:, 1], arr[:, 2], crops, refs)
    limit = _tilemap.MAX_CROP
    if n and (
        (crops[:, 2:] < 0).any() or (crops[:, 2:] > limit).any()
        or (np.abs(crops[:, :2]) > 2**30).any()
    ):  # fmt: skip
        raise UsageError(f"window sizes must be in [0, {limit}] cells and offsets below 2**30")
    return np.ascontiguousarray(crops, dtype=np.int32), np.ascontiguousarray(refs)


def tilemap_to_entities_batch(
    grids: npt.NDArray[Any],
    game: str,
    mode: str = "tiles",
    *,
    windows: Optional[Union[npt.NDArray[Any], Sequence[WindowLike]]] = None,
    chunk: int = DEFAULT_CHUNK,
) -> Tuple[Dict[str, npt.NDArray[np.float32]], Dict[str, npt.NDArray[np.int64]]]:
    """``tilemap_to_entities`` for a batch of grids [N, H, W] in one C call (GIL released).

    ``windows``: None, an array [N, 3] of (center_x, center_y, view_dim) per grid (e.g.
    ``np.stack([b.scalars["center_x"], b.scalars["center_y"], b.scalars["view_dim"]], 1)``), or
    N ``Window`` objects. Returns (entity type -> float32 [total, F], rows of all grids in grid
    order; entity type -> int64 [N] rows per grid)."""
    tables = _tables(game)
    _check_mode(tables, mode)
    chunk = _check_chunk(chunk)
    grids = _as_grids(grids, 3, "grids")
    n, height, width = grids.shape
    crops, refs = _crops(windows, n, height, width)
    spec = tables.column_spec if mode == "columns" else tables.spec
    assert spec is not None  # _check_mode refused columns for games without column terrain
    outs, counts = _tilemap.convert(grids, spec, _tilemap.MODES[mode], chunk, crops, refs)
    names = [name for name, _ in _features(tables.game.name, mode, refs is not None)]
    return (
        dict(zip(names, outs)),
        {name: np.ascontiguousarray(counts[:, t]) for t, name in enumerate(names)},
    )


def tile_class_names(game: str) -> Tuple[str, ...]:
    """The tile classes of a game in image order: value ``k`` of ``tilemap_images`` is class
    ``k - 1`` of this tuple, 0 is empty."""
    return _tables(game).classes


def tilemap_images(
    grids: npt.NDArray[Any],
    game: str,
    *,
    windows: Optional[Union[npt.NDArray[Any], Sequence[WindowLike]]] = None,
    size: Optional[int] = None,
) -> npt.NDArray[np.uint8]:
    """Grids [N, H, W] (or their windows, as in ``tilemap_to_entities_batch``) as class images
    uint8 [N, size, size]: class index + 1 (``tile_class_names``), 0 = empty, row 0 = the top
    row. A crop of another size is centred (padded with 0 or cut evenly). ``size`` defaults to
    the first crop's larger side."""
    tables = _tables(game)
    grids = _as_grids(grids, 3, "grids")
    n, height, width = grids.shape
    crops, _ = _crops(windows, n, height, width)
    crops = np.ascontiguousarray(crops, dtype=np.int32)
    if size is None:
        size = int(crops[:, 2:].max()) if n else 1
    if not 1 <= size <= _tilemap.MAX_IMAGE:
        raise UsageError(f"size must be in [1, {_tilemap.MAX_IMAGE}], got {size}")
    out = np.empty((n, size, size), dtype=np.uint8)
    _tilemap.class_images(grids, tables.spec, crops, out)
    return out


def tilemap_to_entities(
    grid: npt.NDArray[Any],
    game: str,
    mode: str = "tiles",
    *,
    window: Optional[WindowLike] = None,
    chunk: int = DEFAULT_CHUNK,
) -> Dict[str, npt.NDArray[np.float32]]:
    """One grid [H, W] (row 0 = bottom) -> entity type name -> float32 [n, F] (see the module
    docstring for modes, windows and features; ``tilemap_features`` names the columns)."""
    grid = _as_grids(grid, 2, "grid")
    windows = None
    if window is not None:
        if not isinstance(window, Window):
            if isinstance(window, np.ndarray):
                window = tuple(window.tolist())
            if not isinstance(window, (tuple, list)) or len(window) != 3:
                raise TypeError(
                    "window must be None, a Window or a (center_x, center_y, view_dim) tuple"
                )
            window = Window.from_camera(*(float(v) for v in window))
        windows = [window]
    entities, _ = tilemap_to_entities_batch(grid[None], game, mode, windows=windows, chunk=chunk)
    return entities


# ---- the inverse ----


def _crop_of(window: Optional[WindowLike]) -> Optional[Window]:
    if window is None or isinstance(window, Window):
        return window
    if len(window) != 3:
        raise TypeError("window must be None, a Window or a (center_x, center_y, view_dim) tuple")
    return Window.from_camera(*(float(v) for v in window))


def class_tilemap(
    grid: npt.NDArray[Any], game: str, *, window: Optional[WindowLike] = None
) -> npt.NDArray[np.int32]:
    """A grid (or its window crop, out-of-bounds cells filled) with every tile replaced by its
    class representative id and everything else by SPACE_TILE: what ``entities_to_tilemap``
    rebuilds. Plain numpy."""
    tables = _tables(game)
    grid = _as_grids(grid, 2, "grid")
    ids = np.where((grid >= 0) & (grid < _LUT_SIZE), grid, _LUT_SIZE - 1)
    classes = tables.lut[ids].astype(np.int64)  # -1 -> last representative = SPACE_TILE
    out = tables.representatives[classes]
    crop = _crop_of(window)
    if crop is None:
        return np.asarray(out, dtype=np.int32)
    oob = tables.game.out_of_bounds_tile
    fill = tables.representatives[tables.lut[oob]] if 0 <= oob < _LUT_SIZE else SPACE_TILE
    result = np.full((crop.height, crop.width), fill, dtype=np.int32)
    h, w = out.shape
    ys = np.arange(crop.y0, crop.y0 + crop.height)
    xs = np.arange(crop.x0, crop.x0 + crop.width)
    iy, ix = (ys >= 0) & (ys < h), (xs >= 0) & (xs < w)
    result[np.ix_(iy, ix)] = out[np.ix_(ys[iy], xs[ix])]
    return result


def _cells(
    values: npt.NDArray[Any], origin: int, size: int, what: str, offset: float
) -> npt.NDArray[np.int64]:
    idx = values - offset - origin
    cells: npt.NDArray[np.int64] = np.rint(idx).astype(np.int64)
    if (np.abs(idx - cells) > 1e-3).any() or (cells < 0).any() or (cells >= size).any():
        raise UsageError(f"{what} values do not lie on cells of the requested shape")
    return cells


def _check_inverse_args(
    tables: _Tables, mode: str, shape: Tuple[int, int], window: Optional[WindowLike]
) -> Tuple[int, int, Optional[Window]]:
    """(H, W) and the crop of an entities_to_tilemap call, or a UsageError: a lossless mode, a
    shape of two non-negative ints, the window's crop shape if there is one."""
    _check_mode(tables, mode)
    if mode not in LOSSLESS_MODES:
        raise UsageError(
            f"mode {mode!r} is lossy; only {', '.join(LOSSLESS_MODES)} can be inverted"
        )
    if (
        not isinstance(shape, (tuple, list)) or len(shape) != 2
        or not all(isinstance(s, (int, np.integer)) and s >= 0 for s in shape)
    ):  # fmt: skip
        raise UsageError(f"shape must be (height, width) with non-negative ints, got {shape!r}")
    h, w = int(shape[0]), int(shape[1])
    crop = _crop_of(window)
    if crop is not None and (crop.height, crop.width) != (h, w):
        raise UsageError(
            f"shape {shape} differs from the window's crop ({crop.height}, {crop.width})"
        )
    return h, w, crop


def _paint_columns(
    out: npt.NDArray[np.int32], rows: npt.NDArray[Any], tables: _Tables, x0: int, y0: int
) -> None:
    """Column entities back into ``out``: the game's terrain stack, its top lava_depth cells
    of the top class."""
    h, w = out.shape
    reps = tables.representatives
    base, top = COLUMN_TERRAIN[tables.game.name]
    cols = _cells(rows[:, 0], x0, w, "Column x", 0.5)
    tops = _cells(rows[:, 1], y0, h + 1, "Column height", 0.0)
    lava = np.rint(rows[:, 3]).astype(np.int64)
    if (lava < 0).any() or (lava > tops).any():
        raise UsageError("Column lava_depth outside [0, stack height]")
    base_rep = reps[tables.classes.index(base)]
    top_rep = reps[tables.classes.index(top)] if top is not None else SPACE_TILE
    for c, t, d in zip(cols, tops, lava):
        out[: t - d, c] = base_rep
        out[t - d : t, c] = top_rep


def _paint_class(
    out: npt.NDArray[np.int32], rows: npt.NDArray[Any], name: str, rep: int, mode: str,
    x0: int, y0: int,
) -> None:  # fmt: skip
    """One tile class's entities (tiles, or horizontal runs) back into ``out``."""
    h, w = out.shape
    ys = _cells(rows[:, 1], y0, h, f"{name} y", 0.5)
    if mode == "tiles":
        out[ys, _cells(rows[:, 0], x0, w, f"{name} x", 0.5)] = rep
        return
    widths = np.rint(rows[:, 2]).astype(np.int64)
    starts = _cells(rows[:, 0] - rows[:, 2] / 2, x0, w, f"{name} run start", 0.0)
    if (widths < 1).any() or (starts + widths > w).any():
        raise UsageError(f"{name}: runs extend outside the requested shape")
    for y, s, n in zip(ys, starts, widths):
        out[y, s : s + n] = rep


def entities_to_tilemap(
    entities: Mapping[str, npt.NDArray[Any]],
    game: str,
    mode: str,
    shape: Tuple[int, int],
    *,
    window: Optional[WindowLike] = None,
) -> npt.NDArray[np.int32]:
    """Rebuild the class grid from ``tilemap_to_entities`` output (modes tiles, runs, columns).

    Returns int32 ``shape`` = (H, W) (row 0 at the bottom) of class representative tile ids
    (``class_tilemap``'s form). With ``window`` (the one used to make the entities) the result is
    the crop: cell (r, c) is world cell (y0 + r, x0 + c) and ``shape`` must be the crop's shape."""
    tables = _tables(game)
    h, w, crop = _check_inverse_args(tables, mode, shape, window)
    x0, y0 = (crop.x0, crop.y0) if crop is not None else (0, 0)
    features = dict(_features(tables.game.name, mode, crop is not None))
    unknown = set(entities) - set(features)
    if unknown:
        raise UsageError(f"unknown entity types for {game} {mode}: {sorted(unknown)}")
    out = np.full((h, w), SPACE_TILE, dtype=np.int32)
    for name, feats in features.items():
        rows = np.asarray(entities.get(name, np.empty((0, len(feats)), np.float32)))
        if rows.ndim != 2 or rows.shape[1] != len(feats):
            raise UsageError(f"{name}: expected [n, {len(feats)}] features, got {rows.shape}")
        if not len(rows):
            continue
        if name == "Column":
            _paint_columns(out, rows, tables, x0, y0)
        else:
            rep = tables.representatives[tables.classes.index(name)]
            _paint_class(out, rows, name, rep, mode, x0, y0)
    return out
