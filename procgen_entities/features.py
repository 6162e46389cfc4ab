"""What an agent sees of each game, derived from the declarations in games.py, for every adapter.

``feature_space(game)`` gives the entity types, their features and the global features;
``EntityPlan`` turns a feature space (or a filter of it, e.g. an entity-gym ObsSpace) into the
arrays the native observation builder reads (``native_global_ops`` its global features; the rest
of what it takes, and the builder itself, are observation.py's ``ObservationSpec``);
``global_features`` computes the
per-state globals from parsed scalars in numpy, as the builder computes them in C (the
reference, procgen_entities/observation_reference.py, and the seed-style baseline use it).
Games stay data: nothing here is written per game except the few derived values named in
``DERIVED_GLOBALS``. No RL framework is imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from procgen_entities._native import _collector
from procgen_entities.errors import UsageError
from procgen_entities.games import (
    ACTION_LABELS,
    ENTITY_FIELDS,
    GAMES,
    DerivedFeature,
    Game,
    get_game,
)

__all__ = [
    "ACTION_LABELS",
    "EntityFeatures",
    "EntityPlan",
    "FeatureSpace",
    "PlanArrays",
    "SpaceLike",
    "StepValues",
    "VECTOR_HEAD_ITEMS",
    "available_globals",
    "batch_footing",
    "batch_in_view",
    "entity_features",
    "feature_space",
    "global_feature_names",
    "global_features",
    "on_ground",
]

#: Entity features relative to the player (C feature codes). One name, two origins, both
#: pinned (tests/data/obs_spaces.json, the committed checkpoints), so neither is renamed:
#:
#: - on an entity type of the game, ``rel_x`` is the entity's ``x`` minus the Player entity's
#:   ``x`` in the same state (``rel_y`` likewise), computed in C from the raw records
#:   (csrc/observation.c); the Player itself has none;
#: - on a tilemap type (tilemap.py, ``window=True``), ``rel_x`` is the tile entity's ``x`` minus
#:   the camera centre ``center_x`` (``Column``: ``rel_y`` is ``height - center_y``).
#:
#: The camera centre is the player's position where procgen centres the camera on the agent
#: (BasicAbstractGame::choose_center, basic-abstract-game.cpp:664-667); climber and fruitbot
#: choose another centre (climber.cpp:261-265: the level's middle in x, above the player in y),
#: so there the two origins differ. The padded adapter ranks every type's rows by
#: ``rel_x^2 + rel_y^2`` where it has them (csrc/padding.c): tiles nearest the camera centre,
#: entities nearest the player.
RELATIVE_FEATURES = {"rel_x": _collector.FEATURE_REL_X, "rel_y": _collector.FEATURE_REL_Y}


def _derived_entity_features() -> Dict[str, DerivedFeature]:
    """Every game's derived entity features by name; a name means one thing in every game."""
    out: Dict[str, DerivedFeature] = {}
    for game in GAMES.values():
        for name, spec in game.derived_features.items():
            if out.setdefault(name, spec) != spec:
                raise UsageError(f"derived feature {name!r} is declared twice differently")
    return out


#: Entity features that are lookups in per-state vectors (declared as data with the games,
#: ``Game.derived_features``; plunder: is this ship a target?).
DERIVED_ENTITY_FEATURES: Mapping[str, DerivedFeature] = _derived_entity_features()


@dataclass
class StepValues:
    """Per-state numbers the global features are computed from (arrays of length n)."""

    scalars: Mapping[str, npt.NDArray[Any]]  # header/base scalars by name
    extras: Mapping[str, npt.NDArray[Any]]  # trailer scalars by name
    vector_heads: Mapping[str, npt.NDArray[Any]]  # trailer vector name -> [n, k] first items
    #: the episode that ended at this step ended by the time limit, not by the game
    truncated: Optional[npt.NDArray[Any]] = None
    #: platformers: [n, 3] cells under the player's bottom corners and its vy (batch_footing
    #: of parsed states; None from the stepper, whose on_ground is the builder's, in C)
    footing: Optional[npt.NDArray[Any]] = None


def _scaled_time(v: StepValues) -> npt.NDArray[Any]:
    scaled: npt.NDArray[Any] = v.scalars["cur_time"] / np.maximum(v.scalars["timeout"], 1)
    return scaled


def _chaser_eat_time_left(v: StepValues) -> npt.NDArray[Any]:
    since = v.scalars["cur_time"] - v.extras["eat_time"]
    timeout = np.maximum(v.extras["eat_timeout"], 1)
    left: npt.NDArray[Any] = np.clip(timeout - since, 0, None) / timeout
    return left


def _vector_item(name: str, k: int) -> Callable[[StepValues], npt.NDArray[Any]]:
    return lambda v: v.vector_heads[name][:, k]


#: Global features that are not a single stored field. Every other global is read by name from
#: the trailer scalars, then from the header/base scalars.
DERIVED_GLOBALS: Dict[str, Callable[[StepValues], npt.NDArray[Any]]] = {
    "step_fraction": _scaled_time,
    "enemies_edible": lambda v: (_chaser_eat_time_left(v) > 0).astype(np.float64),
    "eat_time_left": _chaser_eat_time_left,
    "orbs_left": lambda v: v.extras["total_orbs"] - v.extras["orbs_collected"],
    "coins_left": lambda v: v.extras["coin_quota"] - v.extras["coins_collected"],
    "door_open": lambda v: (v.extras["num_enemies"] == 0).astype(np.float64),
    "targets_left": lambda v: v.extras["target_quota"] - v.extras["targets_hit"],
    **{f"has_key_{k}": _vector_item("has_keys", k) for k in range(3)},
    **{f"target_{k}": _vector_item("target_bools", k) for k in range(6)},
}


#: The native form of each derived global (csrc/observation.h pe_global_op, with its trailer
#: scalar or vector operands by name): what the C observation builder computes, bit for bit.
NATIVE_DERIVED_GLOBALS: Dict[str, Tuple[str, str, Any]] = {
    "step_fraction": ("step_fraction", "", ""),
    "enemies_edible": ("edible", "eat_time", "eat_timeout"),
    "eat_time_left": ("eat_time_left", "eat_time", "eat_timeout"),
    "orbs_left": ("difference", "total_orbs", "orbs_collected"),
    "coins_left": ("difference", "coin_quota", "coins_collected"),
    "door_open": ("is_zero", "num_enemies", ""),
    "targets_left": ("difference", "target_quota", "targets_hit"),
    **{f"has_key_{k}": ("vector_item", "has_keys", k) for k in range(3)},
    **{f"target_{k}": ("vector_item", "target_bools", k) for k in range(6)},
    "on_ground": ("on_ground", "", ""),
}


def native_global_ops(game: Game, names: Sequence[str]) -> npt.NDArray[Any]:
    """int32 [G, 3] (op, a, b) per global feature, for ``_collector.ObservationBuilder``."""
    from procgen_entities.parse import SCALAR_NAMES

    scalars = list(game.trailer_scalars)
    vectors = list(game.trailer_vectors)
    ops = np.zeros((len(names), 3), dtype=np.int32)
    for j, name in enumerate(names):
        if name in NATIVE_DERIVED_GLOBALS:
            op, a, b = NATIVE_DERIVED_GLOBALS[name]
            if op == "vector_item":
                ops[j] = (_collector.GLOBAL_OPS[op], vectors.index(a), b)
            else:
                index = [scalars.index(x) if x else 0 for x in (a, b)]
                ops[j] = (_collector.GLOBAL_OPS[op], *index)
        elif name in scalars:
            ops[j] = (_collector.GLOBAL_OPS["trailer"], scalars.index(name), 0)
        else:
            ops[j] = (_collector.GLOBAL_OPS["scalar"], SCALAR_NAMES.index(name), 0)
    return ops


def on_ground(game: Game, v: StepValues) -> npt.NDArray[Any]:
    """1.0 where the player can jump at the next step (``game.support``): a supporting tile or
    the world's edge under a bottom corner (and, per game, at rest or on a crate). procgen's own
    ``has_support`` is this value one step late."""
    support = game.support
    if support is None or v.footing is None:
        raise UsageError(f"{game.name}: on_ground needs a declared support and the footing")
    cells, vy = v.footing[:, :2], v.footing[:, 2]
    edge = v.scalars["out_of_bounds_object"][:, None]
    cells = np.where(cells == _collector.CELL_OUTSIDE, edge, cells)
    tiles = [t for name in support.tiles for t in game.tiles[name]]
    supported = (np.isin(cells, tiles) | (cells == edge)).any(axis=1)
    if support.flag is not None:
        supported |= v.extras[support.flag] != 0
    if support.at_rest:
        supported &= vy == 0
    return np.asarray(supported, dtype=np.float64)


def batch_footing(batch: Any) -> npt.NDArray[Any]:
    """The player's footing of every state of a parsed StateBatch (either parser), in numpy:
    cells under its bottom-left and bottom-right corner, probed where procgen's platformers do
    before each step (x -+ (rx - .01), y - (ry + .01); coinrun.cpp:458-461), CELL_OUTSIDE off
    the grid, and its vy; NaN for a state without entities. What ``on_ground`` reads, for the
    reference (observation_reference.py) and the seed-style baseline; the native builder
    computes on_ground itself (csrc/observation.c)."""
    n = len(batch)
    out = np.full((n, 3), np.nan)
    fields = {name: batch.entity_fields.index(name) for name in ("x", "y", "vy", "rx", "ry")}
    offsets = batch.entity_offsets
    for i in range(n):
        if batch.entity_counts[i] == 0 or batch.grid is None:
            continue
        x, y, vy, rx, ry = (float(batch.entities[offsets[i], fields[f]]) for f in fields)
        grid = batch.grid[i]
        below = np.float32(y - (ry + 0.01))
        for k, px in enumerate((x - (rx - 0.01), x + (rx - 0.01))):
            out[i, k] = _cell_at(grid, np.float32(px), below)
        out[i, 2] = vy
    return out


def _cell_at(grid: npt.NDArray[Any], x: np.float32, y: np.float32) -> float:
    if x < 0 or y < 0:
        return float(_collector.CELL_OUTSIDE)
    cx, cy = int(np.floor(x)), int(np.floor(y))
    if cx >= grid.shape[1] or cy >= grid.shape[0]:
        return float(_collector.CELL_OUTSIDE)
    return float(grid[cy, cx])


def batch_in_view(batch: Any) -> npt.NDArray[Any]:
    """bool per entity row of a parsed StateBatch: does it overlap the square its state's camera
    shows (``center +- view_dim / 2``)? What ``EntityPlan(window=True)`` keeps, in numpy."""
    env_of = np.repeat(np.arange(len(batch)), batch.entity_counts)
    field = {n: batch.entities[:, batch.entity_fields.index(n)] for n in ("x", "y", "rx", "ry")}
    half = (batch.scalars["view_dim"].astype(np.float32) / np.float32(2))[env_of]
    dx = np.abs(field["x"] - batch.scalars["center_x"].astype(np.float32)[env_of])
    dy = np.abs(field["y"] - batch.scalars["center_y"].astype(np.float32)[env_of])
    inside: npt.NDArray[Any] = (dx < half + np.abs(field["rx"])) & (dy < half + np.abs(field["ry"]))
    return inside


#: Global features computed from the game's declaration as well as the step's values.
GAME_DERIVED_GLOBALS: Dict[str, Callable[[Game, StepValues], npt.NDArray[Any]]] = {
    "on_ground": on_ground,
}
VECTOR_HEAD_ITEMS = 6  # enough for heist has_keys (<= 3) and plunder target_bools (6)


def global_feature_names(game: Game) -> List[str]:
    return ["step_fraction", *game.global_features]


def entity_features(game: Game, entity_type: str, relative_positions: bool) -> List[str]:
    features = list(game.entity_features(entity_type))
    if relative_positions and entity_type != "Player":
        features += list(RELATIVE_FEATURES)
    return features


@dataclass(frozen=True)
class EntityFeatures:
    features: List[str]


@dataclass(frozen=True)
class FeatureSpace:
    """Entity type -> its features, and the global features (entity-gym's ObsSpace has the same
    shape and can stand in for it)."""

    global_features: List[str]
    entities: Dict[str, EntityFeatures]


class SpaceLike(Protocol):
    """A FeatureSpace or anything of its shape (entity-gym's ObsSpace)."""

    @property
    def global_features(self) -> Sequence[str]: ...

    @property
    def entities(self) -> Mapping[str, "_EntityLike"]: ...


class _EntityLike(Protocol):
    @property
    def features(self) -> Sequence[str]: ...


def feature_space(
    game: str | Game,
    *,
    relative_positions: bool = False,
    extra_entities: Optional[Mapping[str, Sequence[str]]] = None,
    global_features: Optional[Sequence[str]] = None,
) -> FeatureSpace:
    """A game's entity types (in declaration order, then ``extra_entities`` such as tilemap
    types) with their features, and its global features (the game's, or ``global_features``:
    any of its trailer fields or derived globals, e.g. to compare ``has_support`` with
    ``on_ground``)."""
    info = get_game(game) if isinstance(game, str) else game
    entities = {
        name: EntityFeatures(entity_features(info, name, relative_positions))
        for name in info.entity_types.values()
    }
    for name, features in (extra_entities or {}).items():
        entities[name] = EntityFeatures(list(features))
    if global_features is None:
        return FeatureSpace(global_features=global_feature_names(info), entities=entities)
    unknown = [g for g in global_features if g not in available_globals(info)]
    if unknown:
        raise UsageError(f"{info.name}: unknown global features {unknown}")
    return FeatureSpace(global_features=list(global_features), entities=entities)


def available_globals(game: Game) -> List[str]:
    """Every global feature a game can give: its trailer scalars and the derived values its
    declaration supports."""
    names = global_feature_names(game) + (["on_ground"] if game.support else [])
    return list(dict.fromkeys([*names, *game.trailer_scalars]))


def global_features(game: Game, names: Sequence[str], values: StepValues) -> npt.NDArray[Any]:
    """float32 [n, len(names)] global features."""
    n = len(values.scalars["cur_time"])
    out = np.empty((n, len(names)), dtype=np.float32)
    for j, name in enumerate(names):
        if name in DERIVED_GLOBALS:
            out[:, j] = DERIVED_GLOBALS[name](values)
        elif name in GAME_DERIVED_GLOBALS:
            out[:, j] = GAME_DERIVED_GLOBALS[name](game, values)
        elif name in values.extras:
            out[:, j] = values.extras[name]
        else:
            out[:, j] = values.scalars[name]
    return out


def window_modes(game: Game, name: str) -> int:
    """The distribution modes (``_collector.MODE_BITS``) in which entity type ``name`` keeps only
    the entities in the camera's square: every mode (and any other code) but the ones whose
    pixels show the type wherever it is (``Game.hud_entities``); none for the Player."""
    if name == "Player":
        return 0
    shown = game.hud_entities.get(name, ())
    return sum(bit for mode, bit in _collector.MODE_BITS.items() if mode not in shown)


class EntityPlan:
    """Which procgen entities go to which entity type, with which features: the arrays the
    native observation builder reads, built from a feature space (the full one or a filter of
    it)."""

    def __init__(
        self, game: Game, full_space: SpaceLike, requested: SpaceLike, window: bool = True
    ) -> None:
        """``window``: entity types other than the Player keep only the entities that overlap
        the square procgen's camera shows (what a pixel agent sees; tile types are cropped
        the same way by the tilemap), but for a type a HUD shows, in the modes that draw it
        (``window_modes``: each state's own distribution mode decides, in C)."""
        self.game = game
        type_ids = {name: tid for tid, name in game.entity_types.items()}
        trailer_scalars = list(game.trailer_scalars)
        self.entity_types: List[str] = []
        self.features: List[List[str]] = []
        self.derived: List[List[Tuple[int, str]]] = []  # per slot: (column, derived name)
        lut = np.full(max(type_ids.values()) + 1, -1, dtype=np.int32)
        feature_start, codes, condition = [0], [], []
        for name, entity in requested.entities.items():
            if name not in full_space.entities:
                raise UsageError(f"{game.name}: no entity type {name!r} in the observation space")
            if name not in type_ids:
                continue  # not an entity of the raw state (e.g. a tilemap type)
            available = full_space.entities.get(name)
            unknown = [
                f for f in entity.features if available is None or f not in available.features
            ]
            if unknown:
                raise UsageError(f"{game.name}: entity type {name!r} has no features {unknown}")
            slot = len(self.entity_types)
            lut[type_ids[name]] = slot
            self.entity_types.append(name)
            self.features.append(list(entity.features))
            derived = []
            for column, feature in enumerate(entity.features):
                if feature in DERIVED_ENTITY_FEATURES:
                    derived.append((column, feature))
                    codes.append(ENTITY_FIELDS.index(DERIVED_ENTITY_FEATURES[feature].index))
                elif feature in RELATIVE_FEATURES:
                    codes.append(RELATIVE_FEATURES[feature])
                else:
                    codes.append(ENTITY_FIELDS.index(feature))
            self.derived.append(derived)
            feature_start.append(len(codes))
            flag = game.hidden_unless.get(name)
            condition.append(trailer_scalars.index(flag) if flag else -1)
        self.type_to_slot = lut
        self.feature_start = np.array(feature_start, dtype=np.int32)
        self.codes = np.array(codes, dtype=np.int32)
        self.condition = np.array(condition, dtype=np.int32)
        self.windowed = np.array(
            [window_modes(game, name) if window else 0 for name in self.entity_types],
            dtype=np.uint8,
        )
        self.widths = np.diff(self.feature_start).astype(np.int64)
        unknown_globals = [
            g for g in requested.global_features if g not in full_space.global_features
        ]
        if unknown_globals:
            raise UsageError(f"{game.name}: unknown global features {unknown_globals}")
        self.global_features = list(requested.global_features)

    @property
    def arrays(self) -> "PlanArrays":
        """The plan as ``_collector.ObservationBuilder`` takes it (csrc/state_set.h's
        pe_entity_plan)."""
        return PlanArrays(
            self.type_to_slot, self.feature_start, self.codes, self.condition, self.windowed
        )


@dataclass(frozen=True)
class PlanArrays:
    """An entity plan's arrays, field for field csrc/state_set.h's pe_entity_plan: procgen
    type -> slot (-1: not observed), per slot its features' start in ``features`` (n_slots + 1),
    the feature codes (entity fields or RELATIVE_FEATURES), the trailer scalar that hides the
    slot's entities while 0 (-1: none), and whether the slot keeps only the camera's entities."""

    type_to_slot: npt.NDArray[np.int32]
    feature_start: npt.NDArray[np.int32]
    features: npt.NDArray[np.int32]
    condition: npt.NDArray[np.int32]
    windowed: npt.NDArray[np.uint8]


def apply_derived_features(
    slot_rows: npt.NDArray[Any],
    derived: Sequence[Tuple[int, str]],
    counts: npt.NDArray[Any],
    values: StepValues,
) -> None:
    """Fill derived entity columns in place: each column holds its feature's raw index field
    (``DerivedFeature.index``, gathered there) and becomes that item of the state's vector (in
    numpy, for the reference; the builder does it in C)."""
    if not derived or len(slot_rows) == 0:
        return
    env_of_row = np.repeat(np.arange(len(counts)), counts)
    for column, name in derived:
        spec = DERIVED_ENTITY_FEATURES[name]
        index = slot_rows[:, column].astype(np.int64).clip(0, VECTOR_HEAD_ITEMS - 1)
        slot_rows[:, column] = values.vector_heads[spec.vector][env_of_row, index]
