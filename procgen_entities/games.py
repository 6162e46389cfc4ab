"""The 16 procgen games, declared as data.

One ``Game`` per game: the trailer layout of its ``get_state`` bytes, its entity types, its tile
classes and the features the entity-gym adapters expose. Everything game-specific in the package is
read from here; the C parser and the adapters are generic.

Layouts follow docs/state-format.md (procgen 0.10.7).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Mapping, Optional

from procgen_entities._native._parser import ENTITY_RECORD
from procgen_entities.errors import UsageError

__all__ = [
    "ACTION_LABELS",
    "DISTRIBUTION_MODE_IDS",
    "DerivedFeature",
    "ENTITY_FIELDS",
    "ENTITY_INT_FIELDS",
    "GAMES",
    "ANCHOR_SOURCES",
    "Mirror",
    "GAME_NAMES",
    "NOOP_ACTION",
    "NUM_ACTIONS",
    "TRAILER_KINDS",
    "Game",
    "Recipe",
    "default_caps",
    "get_game",
    "value_ranges",
]

#: The 31 fields of procgen's 124-byte entity record, in procgen's order: read from the record
#: that csrc/state_parser.h declares (PE_ENTITY_RECORD), which every C reader uses too.
ENTITY_FIELDS: tuple[str, ...] = tuple(name for name, _, _ in ENTITY_RECORD)

#: Entity fields stored as i32 (or i32 bools); the rest are f32.
ENTITY_INT_FIELDS: frozenset[str] = frozenset(
    name for name, _, kind in ENTITY_RECORD if kind == "i"
)

#: Trailer item kinds: i32, f32, bool (i32 0/1), and vectors of those, or of entity records.
TRAILER_KINDS: tuple[str, ...] = ("i", "f", "b", "vi", "vf", "vb", "ve")

SPACE_TILE = 100

#: The 15 button combinations procgen maps its discrete actions to, the same in every game
#: (procgen/env.py get_combos, 0.10.7). Every action count and the no-op
#: in the package are read from here.
ACTION_LABELS: tuple[str, ...] = (
    "left_down", "left", "left_up", "down", "noop", "up", "right_down", "right", "right_up",
    "key_d", "key_a", "key_w", "key_s", "key_q", "key_e",
)  # fmt: skip
NUM_ACTIONS: int = len(ACTION_LABELS)
NOOP_ACTION: int = ACTION_LABELS.index("noop")

#: procgen's distribution modes by name, with the code its options and the state header store
#: (src/game.h: EasyMode 0, HardMode 1, ExtremeMode 2, MemoryMode 10). procgen's "exploration"
#: is hard mode on one fixed level (Game.exploration_level), not a code of its own.
DISTRIBUTION_MODE_IDS: Mapping[str, int] = MappingProxyType(
    {"easy": 0, "hard": 1, "extreme": 2, "memory": 10}
)


@dataclass(frozen=True)
class DerivedFeature:
    """An entity feature that is no field of procgen's entity record but a lookup: the raw field
    ``index`` of each entity is gathered into the feature's column, then replaced by item
    ``index`` of the state's trailer vector ``vector`` (features.apply_derived_features; indices
    are clipped to the first features.VECTOR_HEAD_ITEMS items)."""

    #: the raw entity field (ENTITY_FIELDS) that indexes the vector
    index: str
    #: the trailer vector (of this game) looked up
    vector: str


@dataclass(frozen=True)
class Support:
    """When a platformer lets its player jump, read from the state after a step: what procgen's
    ``set_action_xy`` computes at the start of the next step (coinrun.cpp:458-463,
    ninja.cpp:358-361, climber.cpp:278-281, jumper.cpp:400-405). The stored ``has_support`` is
    the value from the start of the step that made the state, one step stale."""

    #: tile classes that hold the player up under either bottom corner (off the grid also does)
    tiles: tuple[str, ...] = ("Wall",)
    #: only while vy == 0 (coinrun)
    at_rest: bool = False
    #: a trailer bool that also counts as support (coinrun's is_on_crate)
    flag: str | None = None


@dataclass(frozen=True)
class Mirror:
    """The game is the same game reflected left-right about the middle of its world: its
    physics treats left and right alike, its camera square is centred on that middle, and its
    observation's features other than ``positions`` and ``negated`` do not depend on the side.
    What mirrored-level augmentation (gymnasium/mirrored.py) relies on; tests/test_mirrored.py
    checks it against procgen playing the mirrored state itself."""

    #: the world's width in cells, by distribution mode: the mirror line is width / 2
    width: Mapping[str, int]
    #: entity features that are x coordinates in the world (x -> width - x)
    positions: tuple[str, ...] = ("x",)
    #: entity features that change sign (velocities, offsets along x)
    negated: tuple[str, ...] = ("vx", "rel_x")


@dataclass(frozen=True)
class Recipe:
    """How a game's committed agent was trained: what ``python -m procgen_entities.tools.sb3_ppo
    GAME`` (trainer "sb3") or ``python -m procgen_entities.train GAME`` (trainer "enn") train
    with no flags; their flags override it. The observation's tilemap and caps are the game's
    own ``training_tilemap`` and ``training_caps``; everything else is here."""

    #: "sb3": tools/sb3_ppo.py (SB3's policy network, the lean PPO learner); "enn":
    #: enn-trainer's RogueNet (tools/train.py)
    trainer: str = "sb3"
    #: the camera square's class image beside the flat slots, read by a small CNN
    grid: bool = False
    #: the entities' cells marked in that image (EntityVectorEnv grid_entities)
    grid_entities: bool = False
    #: where that image is centred (EntityVectorEnv grid_centre): "camera" or "player"
    grid_centre: str = "camera"
    #: that image's cells a side (EntityVectorEnv grid_size); None: the camera square's
    grid_size: Optional[int] = None
    #: the marks cover the entities' boxes, not their cells (EntityVectorEnv grid_boxes)
    grid_boxes: bool = False
    gamma: float = 0.99
    #: the learning rate falls linearly to 0 at the run's last step (sb3_ppo --anneal-lr)
    anneal_lr: bool = False
    #: the MLP's hidden layers (policy and value each)
    net: str = "256,256"
    ent_coef: float = 0.01
    #: enn-trainer fields (``a.b=value``) after tools/train.py's base settings
    enn_overrides: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.trainer not in ("sb3", "enn"):
            raise UsageError(f"recipe trainer must be sb3 or enn, not {self.trainer!r}")
        if self.grid_entities and not self.grid:
            raise UsageError("grid_entities needs grid")
        if self.grid_boxes and not self.grid_entities:
            raise UsageError("grid_boxes needs grid_entities")
        if self.grid_centre not in ("camera", "player") or (
            self.grid_centre != "camera" and not self.grid
        ):
            raise UsageError(
                f"recipe grid_centre must be camera or player (with grid), not {self.grid_centre!r}"
            )
        if self.grid_size is not None and (
            type(self.grid_size) is not int or self.grid_size < 1 or not self.grid
        ):
            raise UsageError(f"recipe grid_size must be >= 1 cells (with grid): {self.grid_size!r}")


#: The agents docs/training.md measures ours against (Game.anchors), with where the figures are
#: printed. Both are 25M-step PPO runs on the full level distribution, easy mode; the returns are
#: episode returns during training (sampled actions).
ANCHOR_SOURCES: Mapping[str, str] = {
    "pixel_ppo": (
        "pixel PPO, IMPALA CNN, 25M steps: CleanRL's ppo_procgen benchmark "
        "(vwxyzjn/cleanrl docs/rl-algorithms/ppo.md prints bigfish 16.46, starpilot 30.99; the "
        "other games read off the figure in entity-neural-network/notebooks "
        "clemens/2022-12-14-procgen-final.ipynb, +-0.2)"
    ),
    "procgen_ppo": (
        "the procgen authors' PPO, IMPALA CNN, 25M steps: openai/train-procgen "
        "train_procgen/results/easy-all-run{0,1,2}/progress-GAME.csv, eprewmean (the last 100 "
        "training episodes, sampled actions) averaged over the 10 updates before 25M steps, then "
        "over the 3 runs"
    ),
    "roguenet_2022": (
        "the 2022 entity agent, 25M steps: enn-zoo's RogueNet (d_model 16, 2 layers, positions "
        "relative to the player, lr 0.01, entropy 0.05, gamma 0.999; enn-zoo "
        "configs/procgen/*.ron), read off the same figure (+-0.2)"
    ),
}


@dataclass(frozen=True)
class Game:
    """Everything the package knows about one procgen game.

    ``trailer``: the per-game fields after the grid, in byte order, as (name, kind) with kind
    in TRAILER_KINDS. ``entity_types``: procgen type id -> CamelCase entity type name for the
    entities an agent should see. ``ignored_types``: type ids that exist but are cosmetic or HUD,
    with the reason. ``features``: the entity features every type gets; ``type_features`` adds
    per-type extras. ``hidden_unless``: entity type -> trailer scalar that must be non-zero for
    it to be in the world. ``tiles``: tile class name -> tile ids (empty for entity-only games).
    ``global_features``: per-state values exposed as global features (trailer or header fields
    by name, or a derived value from features.DERIVED_GLOBALS / GAME_DERIVED_GLOBALS).
    """

    name: str
    #: The game's C++ class in procgen (src/games/<name>.cpp): what the engine's DWARF layout
    #: (engine/dwarf.py) reads and the write programs (engine/layout.py) are built on.
    cpp_class: str
    trailer: tuple[tuple[str, str], ...]
    entity_types: Mapping[int, str]
    features: tuple[str, ...] = ("x", "y", "vx", "vy")
    type_features: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    ignored_types: Mapping[int, str] = field(default_factory=dict)
    hidden_unless: Mapping[str, str] = field(default_factory=dict)
    #: Entity types the pixels show wherever they are, by the distribution modes that show them
    #: (a HUD: jumper's compass points at the goal): the observation keeps them outside the
    #: camera's square in those modes, where every other type but the Player is cropped.
    hud_entities: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    tiles: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    out_of_bounds_tile: int = -1
    global_features: tuple[str, ...] = ()
    platformer: bool = False
    #: Equalities every real state satisfies; a state breaking one would crash procgen's
    #: set_state or later steps. Terms: a trailer scalar, len(trailer vector), grid.w, grid.h,
    #: grid.cells or an integer. Checked by the C parser (StateDecodeError naming it).
    invariants: tuple[str, ...] = ()
    #: procgen's distribution modes for the game (procgen aborts the process for the others).
    modes: tuple[str, ...] = ("easy", "hard")
    #: The one level of procgen's "exploration" mode (hard mode on that level seed; procgen/env.py
    #: EXPLORATION_LEVEL_SEEDS), for the games that have the mode.
    exploration_level: int | None = None
    #: Platformers' terrain for the tilemap "columns" mode: (class of a column's body, class that
    #: may cap it or None).
    column_terrain: tuple[str, str | None] | None = None
    #: The procgen paper's R_min, R_max (easy mode) for normalised returns, as openai/train-procgen
    #: train_procgen/constants.py EASY_GAME_RANGES prints them; every game declares its own.
    return_range: tuple[float, float] | None = None
    #: The tilemap mode training uses (tools/train.py): the layout the terrain is best read in.
    training_tilemap: str | None = None
    #: Padded slots per type for MLP training (tools/sb3_ppo.py; nearest first): at least the
    #: most the camera square holds, measured with the training tilemap, so nothing is dropped.
    training_caps: Mapping[str, int] = field(default_factory=dict)
    #: Platformers: what lets the player jump (the derived global feature ``on_ground``).
    support: Support | None = None
    #: Entity types and tile classes whose touch ends an episode (the evaluation's death causes,
    #: in the order agents/evaluation.py death_cause tries them; it tests a few by procgen's own,
    #: narrower rule: bigfish's larger fish, leaper's drowning, miner's falling rocks).
    hazards: tuple[str, ...] = ()
    #: Published returns to beat (easy, full distribution, 25M steps, episode return during
    #: training), by ANCHOR_SOURCES key: what docs/training.md and the curves compare against.
    anchors: Mapping[str, float] = field(default_factory=dict)
    #: Entity features that are lookups rather than record fields, by feature name (one
    #: definition per name across the games: features.DERIVED_ENTITY_FEATURES).
    derived_features: Mapping[str, DerivedFeature] = field(default_factory=dict)
    #: Values procgen's own code reaches that the recorded rollouts (value_ranges.json, played
    #: by a scripted policy) may never show, read from the game's source: a range key
    #: ("trailer.coin_quota", "scalar.reward", ...) -> (lo, hi). restore.py accepts the union
    #: of these and the measured ranges, so a real state of a rare level or of good play is
    #: never refused.
    reachable: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    #: How the committed agent (checkpoints/<name>) was trained; the training tools' defaults.
    recipe: Recipe = field(default_factory=Recipe)
    #: Left-right symmetric (None: not declared so): mirrored levels are levels of the game.
    mirror: Mirror | None = None

    def __post_init__(self) -> None:
        for name, kind in self.trailer:
            if kind not in TRAILER_KINDS:
                raise UsageError(f"{self.name}: trailer field {name!r} has unknown kind {kind!r}")
        clash = set(self.entity_types.values()) & set(self.tiles)
        if clash:
            raise UsageError(f"{self.name}: names used by entities and tiles: {sorted(clash)}")
        for etype in [*self.type_features, *self.hidden_unless, *self.hud_entities]:
            if etype not in self.entity_types.values():
                raise UsageError(f"{self.name}: unknown entity type {etype!r}")
        for etype, shown in self.hud_entities.items():
            if etype == "Player" or not set(shown) <= set(self.modes):
                raise UsageError(f"{self.name}: hud_entities {etype!r} names modes {shown} "
                                 f"outside {self.modes}")  # fmt: skip
        self.invariant_terms()  # refuse a malformed invariant at import
        if self.support is not None:
            unknown = [t for t in self.support.tiles if t not in self.tiles]
            flag = self.support.flag
            if unknown or (flag is not None and flag not in self.trailer_scalars):
                raise UsageError(f"{self.name}: support names unknown tiles or flag")
        known = set(self.entity_types.values()) | set(self.tiles)
        if not set(self.hazards) <= known:
            raise UsageError(f"{self.name}: unknown hazards {sorted(set(self.hazards) - known)}")
        if not set(self.anchors) <= set(ANCHOR_SOURCES):
            raise UsageError(f"{self.name}: unknown anchors {sorted(self.anchors)}")
        if not set(self.training_caps) <= known | {"Column"}:
            raise UsageError(f"{self.name}: unknown capped types {sorted(self.training_caps)}")
        if self.mirror is not None and not set(self.mirror.width) <= set(self.modes):
            raise UsageError(f"{self.name}: mirror widths for modes outside {self.modes}")
        self._check_features()

    def _check_features(self) -> None:
        """Every declared entity feature is a record field or one of the game's derived
        features, and every derived feature reads a record field and one of its vectors."""
        for name, spec in self.derived_features.items():
            if spec.index not in ENTITY_FIELDS or spec.vector not in self.trailer_vectors:
                raise UsageError(f"{self.name}: derived feature {name!r} reads unknown fields")
        declared = set(self.features).union(*self.type_features.values())
        unknown = declared - set(ENTITY_FIELDS) - set(self.derived_features)
        if unknown:
            raise UsageError(f"{self.name}: unknown entity features {sorted(unknown)}")

    def invariant_terms(self) -> tuple[tuple[str, tuple[str, int], tuple[str, int]], ...]:
        """Each invariant as pairs of terms: (text, (kind, index), (kind, index)) with kind in
        const, scalar, length, grid_w, grid_h, grid_cells and index the trailer item or constant."""
        items = [name for name, _ in self.trailer]
        vectors = set(self.trailer_vectors)

        def term(text: str) -> tuple[str, int]:
            text = text.strip()
            grid = {"grid.w": "grid_w", "grid.h": "grid_h", "grid.cells": "grid_cells"}
            if text in grid:
                return grid[text], 0
            if text.lstrip("-").isdigit():
                return "const", int(text)
            if text.startswith("len(") and text.endswith(")") and text[4:-1] in vectors:
                return "length", items.index(text[4:-1])
            if text in items and text not in vectors:
                return "scalar", items.index(text)
            raise UsageError(
                f"{self.name}: invariant term {text!r} is not a trailer scalar, "
                "len(trailer vector), grid.w/h/cells or an integer"
            )

        out = []
        for text in self.invariants:
            terms = [term(t) for t in text.split("==")]
            if len(terms) < 2:
                raise UsageError(f"{self.name}: invariant {text!r} is not an equality")
            for a, b in zip(terms, terms[1:]):
                out.append((text, a, b))
        return tuple(out)

    @property
    def trailer_scalars(self) -> tuple[str, ...]:
        return tuple(n for n, k in self.trailer if not k.startswith("v"))

    @property
    def trailer_vectors(self) -> tuple[str, ...]:
        return tuple(n for n, k in self.trailer if k.startswith("v"))

    @property
    def has_tilemap(self) -> bool:
        return bool(self.tiles)

    def entity_features(self, entity_type: str) -> tuple[str, ...]:
        return self.features + self.type_features.get(entity_type, ())

    def tile_class(self, tile_id: int) -> str | None:
        for name, ids in self.tiles.items():
            if tile_id in ids:
                return name
        return None


def _ints(*names: str) -> tuple[tuple[str, str], ...]:
    return tuple((n, "i") for n in names)


def _floats(*names: str) -> tuple[tuple[str, str], ...]:
    return tuple((n, "f") for n in names)


#: The marked grid under the lean learner, gamma 0.999, the rate annealed to 0 (docs/training.md):
#: climber's recipe, and jumper's, where the screen of the games without a training tilemap
#: ran it first
_MARKED_GRID_RECIPE = Recipe(grid=True, grid_entities=True, gamma=0.999, anneal_lr=True)
#: The same around the player (grid_centre "player"), for the games whose camera shows the whole
#: level: it won their 2M screen against the camera image (docs/training.md, issue 36)
_PLAYER_GRID_RECIPE = replace(_MARKED_GRID_RECIPE, grid_centre="player")

#: The 2022 entity agent's RogueNet settings (enn-trainer), which won bigfish's 5M ablation
#: (docs/training.md): the recipe of the all-entity games (no terrain), taken as a prior there
_ROGUENET_RECIPE = Recipe(
    trainer="enn",
    gamma=0.999,
    enn_overrides=(
        "net.d_model=16",
        "net.n_layer=2",
        "optim.lr=0.01",
        "ppo.ent_coef=0.05",
        "ppo.gamma=0.999",
    ),
)

_PLATFORM_PHYSICS = (("gravity", "f"), ("air_control", "f"))

_GAME_LIST = [
    Game(
        name="bigfish",
        cpp_class="BigFish",
        anchors={"procgen_ppo": 19.99, "pixel_ppo": 16.46, "roguenet_2022": 34.0},
        # bigfish.cpp:45-58: a touched fish with a larger rx than the player's ends it (a
        # smaller one is eaten and erased that step); agents/evaluation.py counts only those
        hazards=("Fish",),
        # the 2022 entity agent's settings won the 5M ablation (docs/training.md)
        recipe=_ROGUENET_RECIPE,
        return_range=(1.0, 40.0),  # the procgen paper's easy-mode constants (Cobbe et al. 2020)
        trailer=(("fish_eaten", "i"), ("r_inc", "f")),
        entity_types={0: "Player", 2: "Fish"},
        features=("x", "y", "vx", "vy", "rx"),
        global_features=("fish_eaten",),
        # bigfish.cpp:96-100: fish_eaten reaching FISH_QUOTA = 30 (16) completes with +10 on top
        # of that step's fish (52, +1 each), so fish_eaten is 0-29; game.cpp:96-109 keeps that
        # reward and level_complete through the reset, 137-140 copy it to last_reward (10 + the
        # 5 fish in one step the padding already takes; the rollouts never completed a level)
        reachable={
            "scalar.level_complete": (0, 1),
            "scalar.reward": (0, 15),
            "scalar.last_reward": (-1, 15),
            "trailer.fish_eaten": (0, 29),
        },
    ),
    Game(
        name="bossfight",
        anchors={"procgen_ppo": 8.74},
        return_range=(0.5, 13.0),  # train-procgen EASY_GAME_RANGES
        hazards=("Boss", "Barrier", "EnemyBullet"),  # bossfight.cpp:109-120
        cpp_class="BossfightGame",
        # taken as a prior (all entities), not screened: checkpoints/bossfight, 12.15 sampled
        recipe=_ROGUENET_RECIPE,
        invariants=("len(attack_modes) == num_rounds",),
        trailer=(("attack_modes", "vi"),)
        + _ints(
            "last_fire_time",
            "time_to_swap",
            "invulnerable_duration",
            "vulnerable_duration",
            "num_rounds",
            "round_num",
            "round_health",
            "boss_vel_timeout",
            "curr_vel_timeout",
            "attack_mode",
            "player_laser_theme",
            "boss_laser_theme",
            "damaged_until_time",
        )
        + (("shields_are_up", "b"), ("barriers_moves_right", "b"))
        + _floats(
            "base_fire_prob",
            "boss_bullet_vel",
            "barrier_vel",
            "barrier_spawn_prob",
            "rand_pct",
            "rand_fire_pct",
            "rand_pct_x",
            "rand_pct_y",
        ),
        entity_types={
            0: "Player",
            1: "PlayerBullet",
            2: "Boss",
            3: "Shields",
            4: "EnemyBullet",
            6: "ReflectedBullet",
            7: "Barrier",
            54: "Explosion",
        },
        features=("x", "y", "vx", "vy", "rx", "ry"),
        type_features={"Boss": ("health",)},
        ignored_types={5: "laser trail (cosmetic)"},
        hidden_unless={"Shields": "shields_are_up"},
        global_features=("shields_are_up", "round_num", "num_rounds", "attack_mode"),
        # bossfight.cpp:221: 1-5 rounds; 152-157: each won round but the last adds one to
        # round_num, the last completes (the rollouts saw 0-2)
        reachable={"trailer.round_num": (0, 4)},
    ),  # fmt: skip
    Game(
        name="caveflyer",
        anchors={"procgen_ppo": 7.38},
        return_range=(3.5, 12.0),  # train-procgen EASY_GAME_RANGES
        hazards=("Obstacle", "Enemy", "Target"),  # caveflyer.cpp:56-70
        exploration_level=1259048185,
        cpp_class="CaveFlyerGame",
        modes=("easy", "hard", "memory"),
        trailer=(),
        entity_types={
            0: "Player",
            1: "Goal",
            2: "Obstacle",
            3: "Target",
            4: "PlayerBullet",
            5: "Enemy",
            54: "Explosion",
        },
        features=("x", "y", "vx", "vy", "rx"),
        type_features={"Player": ("rotation",), "Target": ("health",)},
        ignored_types={9: "exhaust (cosmetic)"},
        tiles={"Wall": (8,)},
        out_of_bounds_tile=8,
        # jumper's (its camera follows the player too): the marked grid shows the cave walls
        # the bare observation leaves out; it led the 2M screen (docs/training.md)
        recipe=_MARKED_GRID_RECIPE,
    ),  # fmt: skip
    Game(
        name="chaser",
        anchors={"procgen_ppo": 6.99},
        return_range=(0.5, 13.0),  # train-procgen EASY_GAME_RANGES
        # chaser.cpp:119-132: an enemy ends it unless edible, and an edible one touched is
        # erased that step, so the terminal state shows only the one that caught the player
        hazards=("Enemy",),
        cpp_class="ChaserGame",
        modes=("easy", "hard", "extreme"),
        invariants=("len(is_space_vec) == grid.cells",),
        trailer=(("free_cells", "vi"), ("is_space_vec", "vb"))
        + _ints(
            "eat_timeout",
            "egg_timeout",
            "eat_time",
            "total_enemies",
            "total_orbs",
            "orbs_collected",
            "maze_dim",
        ),
        entity_types={0: "Player", 2: "LargeOrb", 4: "EnemyEgg", 6: "Enemy"},
        features=("x", "y", "vx", "vy"),
        type_features={"EnemyEgg": ("health",)},
        tiles={"Wall": (5,), "Orb": (1002,)},
        out_of_bounds_tile=5,
        global_features=("enemies_edible", "eat_time_left", "orbs_left"),
        # 21 cells around the player (2 * easy's maze_dim 11 - 1, chaser.cpp:144) show the whole
        # maze, every enemy and orb from any cell: 8.07 sampled against 5.98 with 11
        # (docs/training.md, issue 36)
        recipe=replace(_PLAYER_GRID_RECIPE, grid_size=21),
        # chaser.cpp:381-385: eating the last of total_orbs completes (+10, with that orb's 0.04
        # at 377 and up to all 5 large orbs at 124, 186), so orbs_collected < total_orbs <= 270:
        # a 19x19 maze opens at most the 280 cells off its 9x9 odd pillars (mazegen.cpp:138-152,
        # 196-209), less 5 large orbs and 5 eggs (153, 237); game.cpp:28, game.h:89: last_reward
        # -1 and last_reward_timer 0 until the first reward (the rollouts saw 0-58 collected)
        reachable={
            "scalar.level_complete": (0, 1),
            "scalar.reward": (0, 10.24),
            "scalar.last_reward": (-1, 10.24),
            "scalar.last_reward_timer": (0, 10),
            "trailer.orbs_collected": (0, 269),
        },
    ),  # fmt: skip
    Game(
        name="climber",
        exploration_level=1561126160,
        cpp_class="Climber",
        anchors={"procgen_ppo": 10.42, "pixel_ppo": 8.7, "roguenet_2022": 5.2},
        recipe=_MARKED_GRID_RECIPE,
        column_terrain=("Wall", None),
        return_range=(2.0, 12.6),
        # columns: the side walls and floor are 16 Columns in a fixed layout and the runs are
        # just the platforms (at most 5 in view); with "runs" the side walls made a run on
        # every row, ~33 runs of which the platforms were a few (docs/training.md)
        training_tilemap="columns",
        training_caps={"Coin": 6, "Enemy": 6, "Column": 16, "Wall": 8},
        trailer=(("has_support", "b"), ("facing_right", "b"))
        + _ints("coin_quota", "coins_collected", "wall_theme")
        + _PLATFORM_PHYSICS,
        entity_types={0: "Player", 1: "Coin", 5: "Enemy"},
        features=("x", "y", "vx", "vy"),
        type_features={"Enemy": ("climber_spawn_x",)},
        tiles={"Wall": (15, 16)},
        out_of_bounds_tile=15,
        global_features=("on_ground", "coins_left"),
        # climber.cpp:172-175: difficulty 0-2 makes up to (2+1)^2+1 = 10 platforms; 219-222:
        # at most one coin on each; 95: one per coin collected, 313-317: the last completes
        # (the rollouts saw 1-8 and 0-1). 168, 200: platforms 3-5 apart, so the top is y <= 51.5
        # and a jump (114-120: vy 1.5, -0.2 a step) rises 6.4 more; 263: center_y = y + W/2 - 2.5
        # <= 65.4, y_off = unit * (center_y - W/2) <= 4 * 55.4 (basic-abstract-game.cpp:831-837)
        reachable={
            "trailer.coin_quota": (1, 10),
            "trailer.coins_collected": (0, 9),
            "scalar.center_y": (6.9, 65.5),
            "scalar.y_off": (-4.1, 222),
        },
        platformer=True,
        support=Support(),
        hazards=("Enemy",),  # climber.cpp:88-92
        # climber.cpp:230-233: the world is 16 cells wide in easy mode, 20 in hard; 261-265:
        # the camera's centre is the world's middle in x; 267-270: a move's vx is -1, 0 or 1;
        # the walls, gravity and the enemies' walk (smart_step) know no side
        mirror=Mirror(width={"easy": 16, "hard": 20}, positions=("x", "climber_spawn_x")),
    ),
    Game(
        name="coinrun",
        exploration_level=1949448038,
        cpp_class="CoinRun",
        anchors={"procgen_ppo": 9.12, "pixel_ppo": 9.2, "roguenet_2022": 9.4},
        recipe=Recipe(grid=True, grid_entities=True, gamma=0.999),
        column_terrain=("Wall", "Lava"),
        return_range=(5.0, 10.0),
        training_tilemap="columns",
        # most seen in 770K views of a random climbing policy: 8 saws, 10 enemies, 14 crates
        training_caps=dict(Saw=10, Enemy=12, Crate=16, Wall=16, Lava=8, Goal=2, Barrier=6),
        trailer=(("last_agent_y", "f"), ("wall_theme", "i"), ("has_support", "b"))
        + (("facing_right", "b"), ("is_on_crate", "b"))
        + _PLATFORM_PHYSICS,
        entity_types={0: "Player", 2: "Saw", 5: "Enemy", 20: "Crate"},
        features=("x", "y", "vx", "vy"),
        ignored_types={59: "trail puffs behind enemies (cosmetic)"},
        tiles={"Wall": (15, 16), "Lava": (17, 18), "Goal": (1,), "Barrier": (19,)},
        out_of_bounds_tile=15,
        global_features=("on_ground", "is_on_crate"),
        platformer=True,
        support=Support(at_rest=True, flag="is_on_crate"),
        hazards=("Saw", "Enemy", "Lava"),  # coinrun.cpp:123-152
    ),
    Game(
        name="dodgeball",
        anchors={"procgen_ppo": 6.49},
        return_range=(1.5, 19.0),  # train-procgen EASY_GAME_RANGES
        hazards=("Enemy", "EnemyBall", "Wall"),  # dodgeball.cpp:102-118
        cpp_class="DodgeballGame",
        # taken as a prior (all entities), not screened: checkpoints/dodgeball, 6.35 sampled,
        # short of the procgen authors' PPO's 6.49 (docs/training.md)
        recipe=_ROGUENET_RECIPE,
        modes=("easy", "hard", "extreme", "memory"),
        trailer=_floats("min_dim", "hard_min_dim", "ball_vscale", "ball_r")
        + _ints("last_fire_time", "num_enemies", "enemy_fire_delay"),
        entity_types={
            0: "Player",
            1: "Wall",
            3: "PlayerBall",
            4: "Enemy",
            5: "Door",
            6: "EnemyBall",
        },
        features=("x", "y", "vx", "vy", "rx", "ry"),
        ignored_types={8: "dust cloud (cosmetic)"},
        global_features=("num_enemies", "door_open"),
        # dodgeball.cpp:347, 310: 3-19 enemies (memory); 394-400: the count after a step is 0
        # once all are hit; 109-114: the open door completes (+10; no enemy is left to add 2)
        reachable={
            "scalar.level_complete": (0, 1),
            "scalar.reward": (0, 10),
            "trailer.num_enemies": (0, 19),
        },
    ),  # fmt: skip
    Game(
        name="fruitbot",
        anchors={"procgen_ppo": 28.49},
        # taken as a prior (all entities), not screened: checkpoints/fruitbot (docs/training.md)
        recipe=_ROGUENET_RECIPE,
        return_range=(-1.5, 32.4),  # train-procgen EASY_GAME_RANGES
        hazards=("Barrier", "LockedDoor"),  # fruitbot.cpp:96-116 (doors: hard mode)
        cpp_class="FruitBotGame",
        trailer=_floats("min_dim", "bullet_vscale") + _ints("last_fire_time"),
        entity_types={
            0: "Player",
            1: "Barrier",
            3: "PlayerBullet",
            4: "BadFruit",
            7: "GoodFruit",
            10: "LockedDoor",
            11: "Lock",
            12: "Present",
        },
        features=("x", "y", "vx", "vy", "rx", "ry"),
        # fruitbot.cpp:101-115: -4 / +1 per fruit touched, +10 per present; 234-237: presents
        # fill the top row 1 wide, so the 0.8-wide agent (basic-abstract-game.cpp:778) touches 2;
        # 239-240: fruits take disjoint 1x1 boxes, so it touches at most 4, 2 beside the presents
        reachable={
            "scalar.level_complete": (0, 1),
            "scalar.reward": (-16, 22),
            "scalar.last_reward": (-16, 22),
        },
    ),  # fmt: skip
    Game(
        name="heist",
        anchors={"procgen_ppo": 7.18},
        return_range=(3.5, 10.0),  # train-procgen EASY_GAME_RANGES
        # no hazards: only the exit ends an episode before the time limit (heist.cpp:80-96)
        exploration_level=876640971,
        recipe=_PLAYER_GRID_RECIPE,
        cpp_class="HeistGame",
        modes=("easy", "hard", "memory"),
        trailer=_ints("num_keys", "world_dim") + (("has_keys", "vb"),),
        invariants=("world_dim == grid.w == grid.h", "len(has_keys) == num_keys"),
        entity_types={0: "Player", 1: "LockedDoor", 2: "Key", 9: "Exit"},
        features=("x", "y"),
        type_features={"LockedDoor": ("image_theme",), "Key": ("image_theme",)},
        ignored_types={11: "key ring HUD icon (screen coordinates; see has_key_* globals)"},
        tiles={"Wall": (51,)},
        out_of_bounds_tile=51,
        global_features=("has_key_0", "has_key_1", "has_key_2"),
    ),
    Game(
        name="jumper",
        anchors={"procgen_ppo": 7.78},
        return_range=(1.0, 10.0),  # train-procgen EASY_GAME_RANGES
        hazards=("Spike",),  # jumper.cpp:80-90
        exploration_level=1434825276,
        cpp_class="Jumper",
        modes=("easy", "hard", "memory"),
        column_terrain=("Wall", None),
        trailer=_ints("jump_count", "jump_delta", "jump_time")
        + (("has_support", "b"), ("facing_right", "b"), ("wall_theme", "i"), ("compass_dim", "f")),
        entity_types={0: "Player", 1: "Goal", 2: "Spike"},
        features=("x", "y", "vx", "vy"),
        # jumper.cpp:137-176: a compass in the frame's corner points from the agent at the
        # goal and a bar under it shows their distance, drawn in every mode but memory (the
        # goal is in the camera's square 9% of the time under random play)
        hud_entities={"Goal": ("easy", "hard")},
        ignored_types={59: "trail (cosmetic)"},
        tiles={"Wall": (6, 7)},
        out_of_bounds_tile=6,
        global_features=("on_ground", "jump_count"),
        platformer=True,
        support=Support(),
        # the screen of the seven games without a training tilemap (docs/training.md): the
        # marked grid shows the platforms and spikes the bare observation leaves out
        recipe=_MARKED_GRID_RECIPE,
    ),
    Game(
        name="leaper",
        anchors={"procgen_ppo": 7.1},
        return_range=(1.5, 10.0),  # train-procgen EASY_GAME_RANGES
        # leaper.cpp:77-85 (cars); 259-274: the player at rest with its centre in Water and
        # no Log under it drowns (agents/evaluation.py tests that, not a touch)
        hazards=("Car", "Water"),
        exploration_level=1318677581,
        cpp_class="LeaperGame",
        modes=("easy", "hard", "extreme"),
        trailer=(("bottom_road_y", "i"), ("road_lane_speeds", "vf"), ("bottom_water_y", "i"))
        + (("water_lane_speeds", "vf"), ("goal_y", "i")),
        entity_types={0: "Player", 1: "Log", 4: "Car", 5: "FinishLine"},
        features=("x", "y", "vx", "vy", "rx"),
        tiles={"Road": (2,), "Water": (3,)},
        global_features=("goal_y",),
        recipe=_PLAYER_GRID_RECIPE,
    ),
    Game(
        name="maze",
        anchors={"procgen_ppo": 9.86},
        return_range=(5.0, 10.0),  # train-procgen EASY_GAME_RANGES
        # no hazards: only the goal ends an episode before the time limit (maze.cpp:105-123)
        exploration_level=158988835,
        # 29 cells around the player (2 * easy's world_dim 15 - 1, maze.cpp:44) show the whole
        # maze from any cell: 9.48 sampled against 8.90 with 15 (docs/training.md, issue 36)
        recipe=replace(_PLAYER_GRID_RECIPE, grid_size=29),
        cpp_class="MazeGame",
        modes=("easy", "hard", "memory"),
        trailer=_ints("maze_dim", "world_dim"),
        invariants=("world_dim == grid.w == grid.h",),
        entity_types={0: "Player"},
        features=("x", "y"),
        tiles={"Goal": (2,), "Wall": (51,)},
        out_of_bounds_tile=51,
    ),
    Game(
        name="miner",
        anchors={"procgen_ppo": 11.1},
        return_range=(1.5, 13.0),  # train-procgen EASY_GAME_RANGES
        # miner.cpp:271-292: a falling boulder or diamond in the cell above the player's
        # ends it (agents/evaluation.py tests that cell, not a touch)
        hazards=("MovingBoulder", "MovingDiamond"),
        recipe=_PLAYER_GRID_RECIPE,
        cpp_class="MinerGame",
        modes=("easy", "hard", "memory"),
        trailer=_ints("diamonds_remaining"),
        entity_types={0: "Player", 6: "Exit"},
        features=("x", "y"),
        tiles={
            "Boulder": (1,),
            "Diamond": (2,),
            "MovingBoulder": (3,),
            "MovingDiamond": (4,),
            "Dirt": (9,),
            "Border": (10,),
        },
        out_of_bounds_tile=10,
        global_features=("diamonds_remaining",),
        # miner.cpp:143-146: 36 diamonds in memory's 35x35; 271-305: a diamond that slides right
        # (296-298) is counted again at idx + 1, so the count is at most twice that (saw 0-38)
        reachable={"trailer.diamonds_remaining": (0, 72)},
    ),  # fmt: skip
    Game(
        name="ninja",
        exploration_level=1123500215,
        cpp_class="Ninja",
        anchors={"procgen_ppo": 8.2, "pixel_ppo": 9.0, "roguenet_2022": 6.4},
        recipe=Recipe(grid=True, gamma=0.999),
        column_terrain=("Wall", None),
        return_range=(3.5, 10.0),
        training_tilemap="runs",
        training_caps=dict(ThrowingStar=2, Explosion=4, Goal=1, Wall=24, Fire=8, Bomb=8),
        trailer=(("has_support", "b"), ("facing_right", "b"))
        + _ints("last_fire_time", "wall_theme")
        + _PLATFORM_PHYSICS
        + _floats("jump_charge", "jump_charge_inc"),
        entity_types={0: "Player", 1: "Goal", 7: "ThrowingStar", 54: "Explosion"},
        features=("x", "y", "vx", "vy"),
        tiles={"Wall": (20,), "Fire": (14,), "Bomb": (6,)},
        out_of_bounds_tile=20,
        global_features=("on_ground", "jump_charge"),
        platformer=True,
        support=Support(),
        hazards=("Explosion", "Fire", "Bomb"),  # ninja.cpp:77-96
    ),
    Game(
        name="plunder",
        anchors={"procgen_ppo": 14.63},
        return_range=(4.5, 30.0),  # train-procgen EASY_GAME_RANGES
        # no hazards: the other end is the juice running out (plunder.cpp:225-226), no touch
        cpp_class="PlunderGame",
        # all entities (ships, shots, the panel; the targets marked by is_target), as bigfish
        # and starpilot: their RogueNet settings, taken as a prior (docs/training.md)
        recipe=_ROGUENET_RECIPE,
        invariants=(
            "len(lane_directions) == num_lanes == len(lane_vels)",
            "len(target_bools) == len(image_permutation)",
        ),
        trailer=(("last_fire_time", "i"), ("lane_directions", "vb"), ("target_bools", "vb"))
        + (("image_permutation", "vi"), ("lane_vels", "vf"))
        + _ints("num_lanes", "num_current_ship_types", "targets_hit", "target_quota")
        + _floats("juice_left", "r_scale", "spawn_prob", "legend_r", "min_agent_x"),
        entity_types={0: "Player", 1: "PlayerBullet", 6: "Panel", 7: "Ship", 54: "Explosion"},
        features=("x", "y", "vx", "vy", "rx"),
        type_features={"Ship": ("image_theme", "is_target")},
        # a ship is a target iff target_bools[its image_theme] (plunder.cpp:79-81 is_target)
        derived_features={"is_target": DerivedFeature(index="image_theme", vector="target_bools")},
        ignored_types={2: "target legend (HUD)", 3: "target legend background (HUD)"},
        global_features=(
            "juice_left",
            "targets_left",
            "target_0",
            "target_1",
            "target_2",
            "target_3",
            "target_4",
            "target_5",
        ),
        # plunder.cpp:231-235: targets_hit reaching target_quota = 20 (123) completes with +10
        # on top of that step's hits (94-95); shots go up 1 a step, 3 steps apart (217-222), and
        # the 5 lanes (202) span < 6 - 2 * (0.25 + ship ry), so at most 2 hits a step
        reachable={
            "scalar.level_complete": (0, 1),
            "scalar.reward": (0, 12),
            "scalar.last_reward": (-1, 12),
            "trailer.targets_hit": (0, 19),
        },
    ),  # fmt: skip
    Game(
        name="starpilot",
        cpp_class="StarPilotGame",
        anchors={"procgen_ppo": 34.16, "pixel_ppo": 30.99},
        return_range=(2.5, 64.0),  # train-procgen EASY_GAME_RANGES
        # all entities, as bigfish: its RogueNet settings, not screened (docs/training.md)
        recipe=_ROGUENET_RECIPE,
        # starpilot.cpp:126-136, 346-350 (is_lethal): one touch kills, the player has no health
        hazards=("Flyer", "FastFlyer", "EnemyBullet", "TurretBullet", "Turret", "Meteor"),
        modes=("easy", "hard", "extreme"),
        trailer=(("spawners", "ve"),),
        entity_types={
            0: "Player",
            1: "PlayerBullet",
            2: "EnemyBullet",
            3: "TurretBullet",
            4: "Flyer",
            5: "Meteor",
            6: "Cloud",
            7: "Turret",
            8: "FastFlyer",
            9: "FinishLine",
            54: "Explosion",
        },
        features=("x", "y", "vx", "vy", "rx"),
        type_features={k: ("health",) for k in ("Flyer", "Turret", "FastFlyer")},
        # starpilot.cpp:423-429, 129-132: the finish line (from t = 500) completes with +10 on
        # top of that step's kills (396, +1 each; 10 + the 5 the padding already takes)
        reachable={
            "scalar.level_complete": (0, 1),
            "scalar.reward": (0, 15),
            "scalar.last_reward": (-1, 15),
        },
    ),  # fmt: skip
]

#: Game name -> declaration, in procgen's alphabetical order.
GAMES: Mapping[str, Game] = MappingProxyType({g.name: g for g in _GAME_LIST})
GAME_NAMES: tuple[str, ...] = tuple(GAMES)


def get_game(name: str) -> Game:
    """The declaration of one game; UsageError (a ValueError) naming the valid games otherwise."""
    try:
        return GAMES[name]
    except (KeyError, TypeError):
        raise UsageError(
            f"unknown procgen game {name!r}; valid games: {', '.join(GAME_NAMES)}"
        ) from None


@lru_cache(maxsize=None)
def value_ranges(game: str) -> Mapping[str, object]:
    """What real states of ``game`` hold, measured by tools/record_ranges.py over long rollouts of
    every distribution mode (value_ranges.json): ``ranges`` maps "scalar.<name>",
    "trailer.<name>", "vector.<name>" and "entity.<field>" to [min, max]; ``entity_types`` and
    ``tiles`` list the ids seen; ``states`` counts the states measured."""
    table = json.loads(
        resources.files("procgen_entities").joinpath("value_ranges.json").read_text()
    )
    if game not in table:
        raise KeyError(f"no value ranges recorded for {game!r}")
    return MappingProxyType(table[game])


def default_caps(game: str) -> Mapping[str, int]:
    """The Gymnasium adapter's default number of slots per entity type: the most entities of
    that type seen in one state over the recorded rollouts (value_ranges.json), plus a quarter,
    rounded up to a multiple of 4; 1 for a type that is never more than one (the player); 4 for
    types never seen."""
    info = get_game(game)
    seen = value_ranges(game).get("max_counts", {})
    assert isinstance(seen, Mapping)
    caps = {}
    for type_id, name in info.entity_types.items():
        most = int(seen.get(str(type_id), 0))
        caps[name] = 1 if most == 1 else max(4, -(-(most + (most + 3) // 4) // 4) * 4)
    return MappingProxyType(caps)
