"""The observation as one core object: ``ObservationSpec``, for every adapter.

An ``ObservationSpec`` owns what one game's observation for ``n`` envs is made of: the feature
space, the entity plan (which procgen entities go to which type, with which features), the caps
per type (padded) or the columns returned per type (ragged), the tilemap and the class image,
the grid's entity marks and the global features' ops. It builds the one native builder
(csrc/observation.h, ``_collector.ObservationBuilder``) from a ``BuilderArgs`` and makes the
arrays it writes (``PaddedArrays``, ``RaggedArrays``): a step is one native call
(``ProcgenStepper.step_observe(actions, spec.builder, arrays)``) and the adapters only format
the arrays: ``EntityVectorEnv`` (gymnasium/vector.py) as the dict or the flat form of
``PaddedObservation``, ``ProcgenVecEnv`` (entity_gym/vec_env.py) as one ``RaggedBufferF32`` per
type made from ``RaggedBatch``'s flat rows and counts. The numpy reference the builder is tested
against is observation_reference.py (test-only).

Padded (``ObservationSpec.padded``): every type is a fixed [cap, F] array with a mask; a state
with more rows of a type keeps those nearest the player (by ``rel_x``/``rel_y`` where the type
has them, else by ``x``/``y`` against the Player's row) and counts the rest as dropped. Ragged
(``ObservationSpec.ragged``): every row of each requested type, no caps, in the state's order
(tiles in the tilemap's), with its rows per state counted.

numpy only: no RL framework is imported.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Type, Union

import numpy as np
import numpy.typing as npt

from procgen_entities._native import _collector, _tilemap
from procgen_entities._native._parser import GameSpec
from procgen_entities.errors import UsageError
from procgen_entities.features import (
    EntityFeatures,
    EntityPlan,
    FeatureSpace,
    PlanArrays,
    SpaceLike,
    StepValues,
    feature_space,
    native_global_ops,
)
from procgen_entities.games import Game, default_caps, get_game
from procgen_entities.parse import game_spec
from procgen_entities.tilemap import (
    DEFAULT_CHUNK,
    EMPTY_IMAGE_TABLE,
    CameraConverter,
    TileTable,
    tile_class_names,
    tilemap_features,
)

__all__ = [
    "GLOBAL_KEY",
    "GRID_CENTRES",
    "GRID_KEY",
    "MAX_ENTITY_CAP",
    "MAX_GRID_SIZE",
    "ArraySpec",
    "BuilderArgs",
    "BuilderArrays",
    "BuiltRows",
    "ObservationSpec",
    "OutputType",
    "PaddedArrays",
    "PaddedObservation",
    "PlayerColumns",
    "RaggedArrays",
    "RaggedBatch",
    "StepArrays",
    "Support",
    "resolve_caps",
    "tile_caps",
    "training_caps",
]

GLOBAL_KEY = "global"
GRID_KEY = "grid"
#: Where the class image is centred (csrc/observation.h pe_image_centre): "camera", procgen's
#: camera square, what the pixels show; "player", the same number of cells around the player's
#: cell, which is then the image's middle cell wherever the player is (an egocentric view)
GRID_CENTRES: Dict[str, int] = dict(_collector.IMAGE_CENTRES)
#: The largest class image the native builder draws (csrc/tilemap.h TM_MAX_IMAGE), in cells a side.
MAX_GRID_SIZE: int = _tilemap.MAX_IMAGE
#: The largest ``max_entities`` cap (per type): 64x64 cells, a whole procgen grid. Caps are
#: allocated for every env and type at once (10**7 would take 5.7 GB), so larger ones are refused.
MAX_ENTITY_CAP = 64 * 64

Floats = npt.NDArray[np.float32]
Bytes = npt.NDArray[np.uint8]
Ints = npt.NDArray[np.int64]
Int32s = npt.NDArray[np.int32]
Caps = Union[None, int, Mapping[str, int]]


# ---- caps ----


def tile_caps(mode: Optional[str], names: List[str], window: int, chunk: int) -> Dict[str, int]:
    """The most entities a tilemap type can have in a ``window``-cell square (so none is ever
    dropped): a cell each (tiles), a run per two cells of a row (runs and the columns mode's
    runs), a Column per column, a chunk per k x k block."""
    runs = window * ((window + 1) // 2)
    caps = {}
    for name in names:
        if mode == "tiles":
            caps[name] = window * window
        elif mode == "chunks":
            caps[name] = (-(-window // chunk)) ** 2
        elif mode == "columns" and name == "Column":
            caps[name] = window
        else:
            caps[name] = runs
    return caps


def training_caps(game: Game, tilemap: Optional[str]) -> Dict[str, int]:
    """The recipe's caps (``Game.training_caps``) for the types an observation with ``tilemap``
    has; the other types keep their safe defaults (resolve_caps)."""
    types = set(game.entity_types.values())
    types |= set(tilemap_features(game.name, tilemap) if tilemap else ())
    return {k: v for k, v in game.training_caps.items() if k in types}


def resolve_caps(
    game: Game, space: FeatureSpace, max_entities: Caps, tiles: Mapping[str, int]
) -> Dict[str, int]:
    """Cap per entity type: games.default_caps for entities, ``tiles`` for tilemap types;
    ``max_entities`` (an int for all types or a dict per type) overrides them."""
    caps = {**default_caps(game.name), **tiles}
    if isinstance(max_entities, Mapping):
        unknown = sorted(set(max_entities) - set(space.entities))
        if unknown:
            raise UsageError(f"{game.name}: no entity types {unknown}")
        for name, cap in max_entities.items():
            caps[name] = _cap(f"max_entities[{name!r}]", cap)
    elif max_entities is not None:
        caps = dict.fromkeys(caps, _cap("max_entities", max_entities))
    return {name: caps[name] for name in space.entities}


def _cap(name: str, value: object) -> int:
    """A cap as an int in [1, MAX_ENTITY_CAP], or a UsageError."""
    cap = _integer(name, value)
    if not 1 <= cap <= MAX_ENTITY_CAP:
        raise UsageError(
            f"{name} must be in [1, {MAX_ENTITY_CAP}], got {cap} (the observation holds cap "
            "rows per env and entity type; no procgen level has more)"
        )
    return cap


def _check_grid_size(size: object) -> int:
    """``grid_size`` as an int in [1, MAX_GRID_SIZE], or a UsageError."""
    size = _integer("grid_size", size)
    if not 1 <= size <= MAX_GRID_SIZE:
        raise UsageError(f"grid_size must be in [1, {MAX_GRID_SIZE}] cells, got {size}")
    return size


def _integer(name: str, value: object) -> int:
    """An int (not a bool), or a UsageError."""
    try:
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise UsageError(f"{name} must be an int, got {value!r}") from None


# ---- the native builder's arguments and outputs (csrc/observation.h) ----


@dataclass(frozen=True)
class OutputType:
    """One output type of the builder (pe_obs_type): rows kept per state (padded), floats per
    row, and how a state's rows are ranked when it has more than ``cap``: nearest first by the
    columns ``cx``, ``cy`` (cx < 0: the first rows are kept), measured from the player type's
    row 0 when ``from_player`` (else the columns are relative already)."""

    cap: int
    width: int
    cx: int = -1
    cy: int = -1
    from_player: bool = False


@dataclass(frozen=True)
class PlayerColumns:
    """The type the ``from_player`` types rank from, and its x and y columns (pe_obs_spec's
    player_type, player_cx, player_cy); -1: no type ranks from the player."""

    type: int = -1
    x: int = -1
    y: int = -1


@dataclass(frozen=True)
class Support:
    """The platformers' on_ground test (pe_obs_support): the tile ids that hold the player up,
    the trailer scalar that does too (-1: none), and whether it must also be at rest."""

    tiles: Tuple[int, ...] = ()
    flag: int = -1
    at_rest: bool = False


@dataclass(frozen=True)
class BuilderArgs:
    """What ``_collector.ObservationBuilder`` is built from, field for field pe_obs_spec (and
    the states it is made for). ``derived``: pe_derived_feature per plan feature;
    ``target_vector``: the trailer vector of ``is_target`` (-1: none); ``types``: the plan's
    slots, then the tilemap types; ``global_ops``: [G, 3] (op, a, b); ``tiles``/``image``: the
    tilemap types' and the class image's tile tables (None: none); ``image_centre``:
    pe_image_centre (``_collector.IMAGE_CENTRES``); ``marks``: with an image,
    per slot the value its entities' cells take (0: not drawn), or None; ``image_boxes``: the
    marks cover each entity's box (x ± rx, y ± ry), not its cell; ``ragged``: None
    (padded), or per output type None (not returned) or the columns of its rows to return."""

    game: GameSpec
    num_states: int
    plan: PlanArrays
    derived: Int32s
    target_vector: int
    types: Tuple[OutputType, ...]
    player: PlayerColumns
    global_ops: Int32s
    support: Support
    tiles: Optional[TileTable] = None
    tile_mode: int = 0
    chunk: int = 0
    image: Optional[TileTable] = None
    image_size: int = 0
    image_centre: int = 0
    marks: Optional[Bytes] = None
    image_boxes: bool = False
    ragged: Optional[Tuple[Optional[Int32s], ...]] = None


@dataclass(frozen=True, slots=True)
class StepArrays:
    """A step's values, [count] each (None: not written): reward, done, level_complete (0/1)
    and the seeds of the current and the previous level."""

    reward: Optional[Floats] = None
    done: Optional[Bytes] = None
    level_complete: Optional[Bytes] = None
    level_seed: Optional[Ints] = None
    prev_level_seed: Optional[Ints] = None

    @classmethod
    def new(cls, count: int) -> "StepArrays":
        empty, u8, i64 = np.empty, np.uint8, np.int64
        return cls(
            empty(count, np.float32), empty(count, u8), empty(count, u8), empty(count, i64),
            empty(count, i64),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class PaddedArrays:
    """Where a padded build writes, for ``count`` states: per output type its values [count,
    cap, width] and mask [count, cap] (uint8, 1: a row), the globals [count, G], the class
    image [count, S, S] (None: none), the rows beyond the caps [count] and the step's values
    (None: a build without a step)."""

    values: Tuple[Floats, ...]
    masks: Tuple[Bytes, ...]
    globals: Floats
    image: Optional[Bytes]
    dropped: Ints
    step: Optional[StepArrays]


@dataclass(frozen=True, slots=True)
class RaggedArrays:
    """Where a ragged build writes, for ``count`` states: the rows of each output type and
    state [n_types, count], the globals [count, G], each state's rows over the returned types
    [count, 1] and the step's values. The rows themselves come back from the build, per output
    type its flat [rows, width] array (state after state), None for a type not returned."""

    counts: Ints
    globals: Floats
    totals: Ints
    step: Optional[StepArrays]


#: What a build writes (the builder's kind decides which), and what it returns: None (padded)
#: or per output type its rows [rows, width] (None: a type not returned).
BuilderArrays = Union[PaddedArrays, RaggedArrays]
BuiltRows = Optional[List[Optional[Floats]]]


@dataclass(frozen=True, slots=True)
class RaggedBatch:
    """One ragged build as typed arrays: per requested type (in ``ObservationSpec.names``'
    order) its flat rows [rows, F] and its rows per state [n], the globals [n, G], each state's
    rows over all types [n, 1] (the index an entity after all of them gets), and the step's
    reward, done and level_complete."""

    rows: Dict[str, Floats]
    counts: Dict[str, Ints]
    globals: Floats
    totals: Ints
    reward: Floats
    done: npt.NDArray[np.bool_]
    level_complete: npt.NDArray[np.bool_]


@dataclass(frozen=True)
class ArraySpec:
    """One array of an env's padded observation: its shape (per env), dtype and value range."""

    shape: Tuple[int, ...]
    dtype: Type[np.generic]
    low: float
    high: float


# ---- the padded layout ----


def _kept_columns(
    name: str, features: Sequence[str], dropped: Sequence[str]
) -> Optional[npt.NDArray[np.intp]]:
    """The columns of a type's rows that an observation without ``dropped`` keeps (None: all);
    a UsageError where none would be left."""
    kept = [i for i, feature in enumerate(features) if feature not in dropped]
    if len(kept) == len(features):
        return None
    if not kept:
        raise UsageError(f"dropping {', '.join(dropped)} leaves {name} no features")
    return np.array(kept, dtype=np.intp)


@dataclass
class PaddedObservation:
    """The padded layout of one game's observation for ``n`` envs: per entity type ``<Type>``
    float32 [cap, F] and ``<Type>_mask`` bool [cap], ``global`` float32 [G] and (``grid_size``
    > 0) ``grid``, a [grid_size, grid_size] uint8 class image. The flat form (``flatten``,
    ``unflatten``): per type its [cap * F] values then its [cap] mask, in declaration order,
    then the globals, then the class image. ``dropped``: features the builder still computes
    (it ranks the slots by them) but the observation leaves out, wherever a type has them:
    ``build_widths`` are the builder's rows, ``widths`` the observation's."""

    space: FeatureSpace
    caps: Dict[str, int]
    n: int
    grid_size: int = 0
    dropped: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        entities = self.space.entities
        self.build_widths = {name: len(e.features) for name, e in entities.items()}
        #: per type the builder's columns the observation keeps (None: all of them)
        self.columns: Dict[str, Optional[npt.NDArray[np.intp]]] = {
            name: _kept_columns(name, e.features, self.dropped) for name, e in entities.items()
        }
        self.widths = {
            name: len([f for f in e.features if f not in self.dropped])
            for name, e in entities.items()
        }  # fmt: skip
        self.n_globals = len(self.space.global_features)
        self.mask_keys = [f"{name}_mask" for name in self.caps]
        self._type_shapes = [(cap, self.build_widths[name]) for name, cap in self.caps.items()]
        self.flat_size = (
            sum(c * (self.widths[k] + 1) for k, c in self.caps.items()) + self.n_globals
            + self.grid_size**2
        )  # fmt: skip

    def arrays(self, n: Optional[int] = None, step: bool = False) -> PaddedArrays:
        """New arrays for one build of ``n`` envs (default: all; the builder writes every
        element), with the step's values when ``step``."""
        n = self.n if n is None else n
        # a step allocates these every time (fresh arrays, as Gymnasium's vector envs return):
        # shapes from __post_init__ and positional dtypes keep it to the allocations themselves
        f32, u8 = np.float32, np.uint8
        values = tuple([np.empty((n, cap, width), f32) for cap, width in self._type_shapes])
        masks = tuple([np.empty((n, cap), u8) for cap, _ in self._type_shapes])
        image = np.empty((n, self.grid_size, self.grid_size), u8) if self.grid_size else None
        return PaddedArrays(
            values, masks, np.zeros((n, self.n_globals), f32), image, np.empty(n, np.int64),
            StepArrays.new(n) if step else None,
        )  # fmt: skip

    def as_dict(self, arrays: PaddedArrays) -> Dict[str, npt.NDArray[Any]]:
        """A build's arrays as the observation dict (no copy; the masks as bool)."""
        out: Dict[str, npt.NDArray[Any]] = {}
        for name, key, values, mask in zip(self.caps, self.mask_keys, arrays.values, arrays.masks):
            kept = self.columns[name]
            out[name] = values if kept is None else values[:, :, kept]
            out[key] = mask.view(np.bool_)
        out[GLOBAL_KEY] = arrays.globals
        if arrays.image is not None:
            out[GRID_KEY] = arrays.image
        return out

    def empty(self, n: Optional[int] = None) -> Dict[str, npt.NDArray[Any]]:
        """New arrays for one build of ``n`` envs (default: all), as the dict of the builder's
        full rows (``select`` makes it the observation)."""
        arrays = self.arrays(n)
        full = dict(zip(self.caps, arrays.values))
        return {**self.as_dict(arrays), **full}

    def select(self, built: Mapping[str, npt.NDArray[Any]]) -> Dict[str, npt.NDArray[Any]]:
        """A dict of the builder's full rows (``empty``'s) as the observation: the ``dropped``
        features left out."""
        out = dict(built)
        for name in self.caps:
            kept = self.columns[name]
            if kept is not None:
                out[name] = built[name][..., kept]
        return out

    def flatten(self, obs: Mapping[str, npt.NDArray[Any]]) -> Floats:
        """[n, flat_size]: per type its values then its mask, in order, then the globals."""
        n = len(obs[GLOBAL_KEY])
        parts: List[npt.NDArray[Any]] = []
        for name in self.caps:
            parts.append(obs[name].reshape(n, -1))
            parts.append(obs[f"{name}_mask"].astype(np.float32))
        parts.append(obs[GLOBAL_KEY])
        if self.grid_size:
            parts.append(obs[GRID_KEY].reshape(n, -1).astype(np.float32))
        flat: Floats = np.concatenate(parts, axis=1).astype(np.float32, copy=False)
        return flat

    def unflatten(self, flat: npt.ArrayLike) -> Dict[str, npt.NDArray[Any]]:
        """The inverse of ``flatten`` for [flat_size] or [m, flat_size] arrays."""
        values = np.asarray(flat, dtype=np.float32)
        single = values.ndim == 1
        values = values.reshape(-1, self.flat_size)
        out: Dict[str, npt.NDArray[Any]] = {}
        at = 0
        for name, cap in self.caps.items():
            width = self.widths[name]
            out[name] = values[:, at : at + cap * width].reshape(-1, cap, width)
            at += cap * width
            out[f"{name}_mask"] = values[:, at : at + cap] > 0.5
            at += cap
        out[GLOBAL_KEY] = values[:, at : at + self.n_globals]
        if self.grid_size:
            image = values[:, at + self.n_globals :]
            out[GRID_KEY] = image.astype(np.uint8).reshape(-1, self.grid_size, self.grid_size)
        return {k: v[0] for k, v in out.items()} if single else out

    def feature_names(self) -> Dict[str, Tuple[str, ...]]:
        names = {
            name: tuple(f for f in e.features if f not in self.dropped)
            for name, e in self.space.entities.items()
        }
        names[GLOBAL_KEY] = tuple(self.space.global_features)
        return names


# ---- the observation ----


class ObservationSpec:
    """One game's observation for ``n`` envs and its native builder (``builder``); made by
    ``padded`` (EntityVectorEnv's) or ``ragged`` (ProcgenVecEnv's, one per observation filter).

    ``space``: the feature space the observation is drawn from (padded: the observation's own;
    ragged: the full one a filter chooses from); ``plan``: its entity plan; ``names``: the
    output entity types in order, ``features`` their features; ``layout``: the padded layout
    (None: ragged); ``tiles``: the tilemap types' converter, ``images``: the class image's
    (None: none); ``grid_marks``: the entity types drawn into the class image, in the order of
    their values; ``distance_columns``: per type how its distance to the player is measured.
    A build writes the arrays of ``padded_arrays`` or ``ragged_arrays`` (ragged ones are this
    spec's buffers, valid until its next build; ``ragged_batch`` makes the result typed)."""

    def __init__(
        self,
        game: Game,
        space: FeatureSpace,
        plan: EntityPlan,
        n: int,
        *,
        layout: Optional[PaddedObservation] = None,
        tiles: Optional[CameraConverter] = None,
        images: Optional[CameraConverter] = None,
        grid_entities: bool = False,
        grid_centre: str = "camera",
        tile_columns: Optional[Mapping[str, Int32s]] = None,
        grid_boxes: bool = False,
    ) -> None:
        """Use ``padded`` or ``ragged``; ``tile_columns`` (ragged): per requested tilemap type,
        the columns of ``space``'s features it returns."""
        self.game, self.space, self.plan, self.n = game, space, plan, _count("n", n)
        self.layout, self.tiles, self.images = layout, tiles, images
        #: the class image's tile table: the game's, or for an entity-only game's grid of marks
        #: an all-empty one (None: no image)
        self.image_table: Optional[TileTable] = (
            images.native_image_spec if images is not None
            else EMPTY_IMAGE_TABLE if layout is not None and layout.grid_size else None
        )  # fmt: skip
        self.grid_boxes = grid_boxes
        self.distance_columns = {
            name: _distance_columns(list(e.features)) for name, e in space.entities.items()
        }
        self.grid_marks = self._grid_marks() if grid_entities else ()
        self.grid_centre = grid_centre
        self._tile_columns = dict(tile_columns or {})
        self.features: Dict[str, List[str]] = {}
        if layout is not None:
            self.features = {name: list(space.entities[name].features) for name in layout.caps}
        else:
            self.features = dict(zip(plan.entity_types, plan.features))
            for name, columns in self._tile_columns.items():
                features = space.entities[name].features
                self.features[name] = [features[c] for c in columns]
        self.names = list(self.features)
        tile_names = list(tiles.names) if tiles is not None else []
        slots = len(plan.entity_types)
        #: per name, its output type in the builder (the plan's slots, then the tile types)
        self.order = list(range(len(self.names)))
        if layout is None:
            self.order[slots:] = [slots + tile_names.index(k) for k in self._tile_columns]
        self._pairs = list(zip(self.names, self.order))
        self.builder = _collector.ObservationBuilder(self.builder_args())
        # a ragged build's buffers: VecObs copies them (reward and done it keeps are new)
        self._counts = np.empty((self.builder.n_types, self.n), dtype=np.int64)
        self._globals = np.empty((self.n, len(plan.global_features)), dtype=np.float32)
        self._totals = np.empty((self.n, 1), dtype=np.int64)
        self._complete = np.empty(self.n, dtype=np.uint8)

    @classmethod
    def padded(
        cls,
        game: Union[str, Game],
        n: int,
        *,
        window: int,
        max_entities: Caps = None,
        tilemap: Optional[str] = None,
        relative_positions: bool = True,
        entity_window: bool = True,
        global_features: Optional[Sequence[str]] = None,
        grid: bool = False,
        grid_entities: bool = False,
        drop_features: Optional[Sequence[str]] = None,
        grid_centre: str = "camera",
        grid_size: Optional[int] = None,
        grid_boxes: bool = False,
    ) -> "ObservationSpec":
        """EntityVectorEnv's observation (its docstring says what each option does).
        ``window``: the camera square's cells at the start (``window_of``), which sizes the
        tilemap types' caps and (``grid_size`` None) the class image."""
        info = cls.check_padded(game, grid, grid_entities, grid_centre, grid_size, grid_boxes)
        window = _integer("window", window)
        if window < 1:
            raise UsageError(f"window must be >= 1 cells, got {window}")
        tile_entities = tilemap_features(info.name, tilemap, window=True) if tilemap else {}
        space = feature_space(
            info, relative_positions=relative_positions, extra_entities=tile_entities,
            global_features=global_features,
        )  # fmt: skip
        # Tilemap types are sized for the camera square procgen shows at the start (a window
        # that later grows keeps its nearest cells and counts the rest as dropped).
        tiles = tile_caps(tilemap, list(tile_entities), window, DEFAULT_CHUNK)
        caps = resolve_caps(info, space, max_entities, tiles)
        dropped = _dropped(info, space, drop_features)
        image = (grid_size or window) if grid else 0
        layout = PaddedObservation(space, caps, _count("n", n), image, dropped)
        plan = EntityPlan(info, space, space, window=entity_window)
        converter = CameraConverter(info.name, tilemap) if tilemap else None
        tiled = grid and info.has_tilemap  # an entity-only game's grid is its marks alone
        images = (converter or CameraConverter(info.name, "tiles")) if tiled else None
        return cls(info, space, plan, n, layout=layout, tiles=converter, images=images,
                   grid_entities=grid_entities, grid_centre=grid_centre,
                   grid_boxes=grid_boxes)  # fmt: skip

    @staticmethod
    def check_padded(
        game: Union[str, Game],
        grid: bool,
        grid_entities: bool,
        grid_centre: str = "camera",
        grid_size: Optional[int] = None,
        grid_boxes: bool = False,
    ) -> Game:
        """The game, or a UsageError for ``padded`` options that cannot work together (what an
        adapter checks before procgen starts)."""
        info = get_game(game) if isinstance(game, str) else game
        if not isinstance(grid_boxes, (bool, np.bool_)):
            raise UsageError(f"grid_boxes must be True or False, got {grid_boxes!r}")
        if grid and not info.has_tilemap and not grid_entities:
            raise UsageError(f"grid=True: {info.name} has no tiles (an entity-only game): its "
                             "grid is the entities' marks, grid_entities=True")  # fmt: skip
        if grid_entities and not grid:
            raise UsageError("grid_entities=True draws entities into the grid: it needs grid=True")
        if grid_boxes and not grid_entities:
            raise UsageError("grid_boxes=True draws the entities' boxes: it needs "
                             "grid_entities=True")  # fmt: skip
        if not isinstance(grid_centre, str) or grid_centre not in GRID_CENTRES:
            raise UsageError(f"grid_centre must be one of {sorted(GRID_CENTRES)}, "
                             f"got {grid_centre!r}")  # fmt: skip
        if grid_centre != "camera" and not grid:
            raise UsageError(f"grid_centre={grid_centre!r} places the grid: it needs grid=True")
        if grid_size is not None:
            _check_grid_size(grid_size)
            if not grid:
                raise UsageError(f"grid_size={grid_size!r} sizes the grid: it needs grid=True")
        return info

    @staticmethod
    def window_of(values: StepValues) -> int:
        """The camera square's cells of the largest of the given states (``padded``'s window)."""
        return int(np.ceil(values.scalars["view_dim"].max()))

    @classmethod
    def ragged(
        cls,
        game: Union[str, Game],
        full: SpaceLike,
        requested: SpaceLike,
        n: int,
        *,
        entity_window: bool = True,
        tilemap: Union[None, str, CameraConverter] = None,
    ) -> "ObservationSpec":
        """ProcgenVecEnv's observation of the filter ``requested`` of its full space ``full``:
        every entity of the filter's types with the filter's features (the entities in the
        state's order, tiles in the tilemap's: the mode's name, or its converter), and its
        globals. UsageError for a filter ``full`` does not hold."""
        info = get_game(game) if isinstance(game, str) else game
        space = FeatureSpace(
            global_features=list(full.global_features),
            entities={k: EntityFeatures(list(e.features)) for k, e in full.entities.items()},
        )
        plan = EntityPlan(info, space, requested, window=entity_window)
        wanted = [name for name in requested.entities if name not in plan.entity_types]
        tiles: Optional[CameraConverter] = None
        if isinstance(tilemap, CameraConverter):
            tiles = tilemap
        elif tilemap is not None and wanted:
            tiles = CameraConverter(info.name, tilemap)
        tiles = tiles if wanted else None  # only a tile type asked for reads the tiles
        columns = {name: _tile_columns(info, space, requested, name, tiles) for name in wanted}
        return cls(info, space, plan, n, tiles=tiles, tile_columns=columns)

    @property
    def ragged_output(self) -> bool:
        """Does this spec build ragged arrays (True) or padded ones?"""
        return self.layout is None

    # ---- the builder ----

    def builder_args(self) -> BuilderArgs:
        """The builder's construction arguments (csrc/observation.h pe_obs_spec)."""
        plan, game, tiles = self.plan, self.game, self.tiles
        types, player = self._padded_types() if self.layout is not None else self._ragged_types()
        vectors = list(game.trailer_vectors)
        return BuilderArgs(
            game=game_spec(game.name),
            num_states=self.n,
            plan=plan.arrays,
            derived=_derived_ops(plan),
            target_vector=vectors.index("target_bools") if "target_bools" in vectors else -1,
            types=types,
            player=player,
            global_ops=native_global_ops(game, plan.global_features),
            support=_support(game),
            tiles=tiles.native_spec if tiles is not None else None,
            tile_mode=tiles.mode if tiles is not None else 0,
            chunk=tiles.chunk if tiles is not None else 0,
            image=self.image_table,
            image_size=self.layout.grid_size if self.layout is not None else 0,
            image_centre=GRID_CENTRES[self.grid_centre],
            marks=self.mark_values() if self.grid_marks else None,
            image_boxes=self.grid_boxes,
            ragged=self._ragged_columns() if self.layout is None else None,
        )

    def _padded_types(self) -> Tuple[Tuple[OutputType, ...], PlayerColumns]:
        """Per output type its cap, width and ranking, and the type ranked from."""
        layout = self.padded_layout
        names = list(layout.caps)
        if names[: len(self.plan.entity_types)] != self.plan.entity_types:
            raise AssertionError("the layout's types must start with the plan's")
        columns = self.distance_columns
        player = PlayerColumns()
        own = columns.get("Player")
        if "Player" in layout.caps and own is not None:
            player = PlayerColumns(names.index("Player"), own[1], own[2])
        types = []
        for name in names:
            cap, width, at = layout.caps[name], layout.build_widths[name], columns[name]
            if at is not None and at[0] == "relative":
                types.append(OutputType(cap, width, at[1], at[2]))
            elif at is not None and player.type >= 0 and name != "Player":
                types.append(OutputType(cap, width, at[1], at[2], from_player=True))
            else:
                types.append(OutputType(cap, width))
        return tuple(types), player

    def _ragged_types(self) -> Tuple[Tuple[OutputType, ...], PlayerColumns]:
        """The plan's slots and every tile type of the converter: widths only (no caps)."""
        widths = [int(w) for w in self.plan.widths]
        if self.tiles is not None:
            widths += [len(self.space.entities[name].features) for name in self.tiles.names]
        return tuple(OutputType(0, width) for width in widths), PlayerColumns()

    def _ragged_columns(self) -> Tuple[Optional[Int32s], ...]:
        """Per output type the columns returned: all of a slot's, the requested ones of a
        requested tile type, None for the others."""
        slots: List[Optional[Int32s]] = [
            np.arange(width, dtype=np.int32) for width in self.plan.widths
        ]
        names = list(self.tiles.names) if self.tiles is not None else []
        return tuple(slots + [self._tile_columns.get(name) for name in names])

    def _grid_marks(self) -> Tuple[str, ...]:
        """The entity types drawn into the grid, in the order of their values (classes + 1 +
        index): the plan's types, the player last so that nothing covers it."""
        types = [name for name in self.plan.entity_types if name != "Player"]
        return tuple(types + ["Player"] * ("Player" in self.plan.entity_types))

    @property
    def tile_classes(self) -> int:
        """The class image's tile classes (0 for an entity-only game: its image is marks)."""
        return len(tile_class_names(self.game.name)) if self.game.has_tilemap else 0

    def mark_values(self) -> Bytes:
        """Per plan slot, the value its entities' cells take in the grid (0: not drawn)."""
        base = self.tile_classes + 1
        return np.array([base + self.grid_marks.index(name) if name in self.grid_marks else 0
                         for name in self.plan.entity_types], dtype=np.uint8)  # fmt: skip

    @property
    def grid_classes(self) -> int:
        """The class image's largest value: its tile classes and its entity marks."""
        return self.tile_classes + len(self.grid_marks)

    # ---- outputs ----

    @property
    def padded_layout(self) -> PaddedObservation:
        """The padded layout (UsageError for a ragged observation)."""
        if self.layout is None:
            raise UsageError("a ragged observation has no padded layout (ObservationSpec.padded)")
        return self.layout

    def padded_arrays(self, n: Optional[int] = None, step: bool = True) -> PaddedArrays:
        """New arrays for one padded build of ``n`` envs (default: all), with the step's
        values when ``step``."""
        return self.padded_layout.arrays(n, step)

    def as_dict(self, arrays: PaddedArrays) -> Dict[str, npt.NDArray[Any]]:
        """A padded build's arrays as the observation dict (PaddedObservation.as_dict)."""
        return self.padded_layout.as_dict(arrays)

    def fields(self) -> Dict[str, ArraySpec]:
        """Every array of one env's padded observation, in the dict's order: per type
        ``<Type>`` and ``<Type>_mask``, then ``global`` and (with a class image) ``grid``."""
        layout = self.padded_layout
        out: Dict[str, ArraySpec] = {}
        for name, cap in layout.caps.items():
            out[name] = ArraySpec((cap, layout.widths[name]), np.float32, -np.inf, np.inf)
            out[f"{name}_mask"] = ArraySpec((cap,), np.bool_, 0, 1)
        out[GLOBAL_KEY] = ArraySpec((layout.n_globals,), np.float32, -np.inf, np.inf)
        if layout.grid_size:
            size = (layout.grid_size, layout.grid_size)
            out[GRID_KEY] = ArraySpec(size, np.uint8, 0, self.grid_classes)
        return out

    def ragged_arrays(self) -> RaggedArrays:
        """The arrays of one ragged build of every env (this spec's buffers; reward and done
        new each time)."""
        if self.layout is not None:
            raise UsageError("a padded observation has no ragged arrays (ObservationSpec.ragged)")
        step = StepArrays(
            np.empty(self.n, dtype=np.float32), np.empty(self.n, dtype=np.uint8), self._complete
        )
        return RaggedArrays(self._counts, self._globals, self._totals, step)

    def ragged_batch(self, rows: BuiltRows, arrays: RaggedArrays) -> RaggedBatch:
        """A ragged build's result: ``rows`` (what the build returned) and its ``arrays``."""
        step = arrays.step
        if rows is None or step is None:
            raise UsageError("ragged_batch takes a ragged build's rows and its arrays")
        assert step.reward is not None and step.done is not None
        assert step.level_complete is not None
        counts = arrays.counts
        return RaggedBatch(
            {name: rows[t] for name, t in self._pairs},  # type: ignore[misc]
            {name: counts[t] for name, t in self._pairs}, arrays.globals, arrays.totals,
            step.reward, step.done.view(np.bool_), step.level_complete.view(np.bool_),
        )  # fmt: skip


def _count(name: str, value: object) -> int:
    """A number of envs: an int >= 1, or a UsageError."""
    count = _integer(name, value)
    if count < 1:
        raise UsageError(f"{name} must be >= 1, got {count}")
    return count


def _dropped(game: Game, space: FeatureSpace, names: Optional[Sequence[str]]) -> Tuple[str, ...]:
    """``drop_features``: entity feature names of this observation (UsageError otherwise)."""
    if names is None:
        return ()
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise UsageError(f"drop_features is a list of feature names, got {names!r}")
    present = {f for e in space.entities.values() for f in e.features}
    unknown = sorted(set(names) - present)
    if unknown:
        raise UsageError(f"{game.name}: drop_features {unknown} are no entity type's features "
                         f"here (features: {', '.join(sorted(present))})")  # fmt: skip
    return tuple(dict.fromkeys(names))


def _distance_columns(features: List[str]) -> Optional[Tuple[str, int, int]]:
    """Which columns measure an entity's distance to the player: (rel_x, rel_y) if present,
    else (x, y) against the Player row."""
    if "rel_x" in features and "rel_y" in features:
        return ("relative", features.index("rel_x"), features.index("rel_y"))
    if "x" in features and "y" in features:
        return ("absolute", features.index("x"), features.index("y"))
    return None


def _tile_columns(
    game: Game,
    full: FeatureSpace,
    requested: SpaceLike,
    name: str,
    tiles: Optional[CameraConverter],
) -> Int32s:
    """The columns a filter keeps of tilemap type ``name`` (UsageError: none such)."""
    entity = full.entities.get(name)
    if tiles is None or name not in tiles.names or entity is None:
        raise UsageError(f"{game.name}: no entity type {name!r} in the observation")
    features = list(entity.features)
    chosen = list(requested.entities[name].features)
    missing = [f for f in chosen if f not in features]
    if missing:
        raise UsageError(f"{game.name}: entity type {name!r} has no features {missing}")
    return np.array([features.index(f) for f in chosen], dtype=np.int32)


def _derived_ops(plan: EntityPlan) -> Int32s:
    """The derived op of every plan feature (pe_derived_feature; at least one entry)."""
    derived = np.zeros(max(1, len(plan.codes)), dtype=np.int32)
    for s, slot_derived in enumerate(plan.derived):
        for column, _ in slot_derived:
            derived[plan.feature_start[s] + column] = _collector.DERIVED_IS_TARGET
    return derived


def _support(game: Game) -> Support:
    """The platformers' support (``Game.support``) as the builder tests it."""
    if game.support is None:
        return Support()
    flag = game.support.flag
    return Support(
        tiles=tuple(t for name in game.support.tiles for t in game.tiles[name]),
        flag=list(game.trailer_scalars).index(flag) if flag is not None else -1,
        at_rest=bool(game.support.at_rest),
    )
