"""procgen's object layout as data, and the programs the native engine runs over it.

A layout table (``layouts/*.json``, recorded from libenv.so's DWARF by ``engine/dwarf.py``) gives
member offsets of procgen's classes for the builds it lists by GNU build id. From it this module
builds, per game, the write program of csrc/live_game.h: the state format's walk (the section
order and the trailer declared in games.py) mapped onto member offsets, each member's DWARF type
checked against the kind the format gives it. A table whose checksum does not match, or a member
whose type disagrees, is refused (LayoutError): the engine then falls back to get_state.

The layout facts are procgen's (MIT, Copyright (c) 2019 OpenAI): src/game.h, src/entity.h,
src/basic-abstract-game.h, src/grid.h, src/randgen.h, src/vecgame.h and src/games/*.cpp at 0.10.7.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Dict, List, Mapping, Tuple

import numpy as np
import numpy.typing as npt

from procgen_entities._native._collector import LIVE_OPS
from procgen_entities.errors import LayoutError
from procgen_entities.games import ENTITY_FIELDS, ENTITY_INT_FIELDS, GAMES, Game

__all__ = [
    "KNOWN_LAYOUT_SHA256",
    "Layout",
    "LayoutError",
    "OP",
    "entity_program",
    "load_known_layout",
    "state_program",
]

#: sha256 of the canonical JSON of layouts/procgen-0.10.7.json's "classes".
KNOWN_LAYOUT_SHA256 = "29e39ccae2151bbd57b42a4c6ba08345a4278c67c6af3207a4c340eabb011a3a"
LAYOUT_FILE = "procgen-0.10.7.json"

#: The write program's ops by name: csrc/live_game.h pe_live_op, its values read from C.
OP: Dict[str, int] = dict(LIVE_OPS)

#: Itanium C++ ABI vtable slots of Game's virtuals (src/game.h:114-121: the virtual destructor
#: takes slots 0 and 1, then observe, game_init, game_reset, game_step, ...).
VTABLE_SLOTS = {"observe": 2, "game_reset": 4, "game_step": 5}

#: Local (non-exported) functions the engine calls, by mangled name.
FUNCTIONS = {
    "reset": "_ZN4Game5resetEv",
    "prepare_for_drawing": "_ZN17BasicAbstractGame19prepare_for_drawingEf",
}

#: What the format writes for each DWARF member kind (the trailer kinds of games.py, and i/f/b).
_KIND_OF_TYPE = (
    ("class std::vector<bool,", "vb"),
    ("class std::vector<int,", "vi"),
    ("class std::vector<float,", "vf"),
    ("class std::vector<std::shared_ptr<Entity>,", "ve"),
    ("bool", "b"),
    ("int", "i"),
    ("float", "f"),
    ("enum ", "i"),
)
_OP_OF_KIND = {"i": "w4", "f": "w4", "b": "b1", "vi": "vec4", "vf": "vec4", "vb": "vecbool",
               "ve": "entities"}  # fmt: skip


def _kind_of(type_text: str, size: int) -> str:
    for prefix, kind in _KIND_OF_TYPE:
        if type_text.startswith(prefix):
            expected = {"b": 1, "i": 4, "f": 4}.get(kind)
            if expected is not None and size != expected:
                break
            return kind
    raise LayoutError(f"unsupported member type {type_text!r} ({size} bytes)")


def canonical_digest(table: Mapping[str, Any]) -> str:
    body = json.dumps({"classes": table["classes"]}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


def _classes_of_games() -> Mapping[str, str]:
    return {name: game.cpp_class for name, game in GAMES.items()}


@dataclass(frozen=True)
class Layout:
    """Member offsets of one procgen build's classes."""

    build_ids: Tuple[str, ...]
    classes: Mapping[str, Any]
    #: Game name -> its C++ class: games.py's ``Game.cpp_class`` (the same in every build; the
    #: tables record only the classes' members).
    games: Mapping[str, str] = field(default_factory=_classes_of_games)

    def members(self, cls: str) -> Mapping[str, List[Any]]:
        try:
            return self.classes[cls]["members"]  # type: ignore[no-any-return]
        except KeyError:
            raise LayoutError(f"the layout has no class {cls}") from None

    def member(self, cls: str, name: str) -> Tuple[int, int, str]:
        found = self.members(cls).get(name)
        if found is None:
            raise LayoutError(f"the layout has no member {cls}::{name}")
        offset, size, type_text = found
        return int(offset), int(size), str(type_text)

    def offset(self, cls: str, path: str) -> int:
        """Byte offset of ``a.b`` (a member of cls, then of a's struct type)."""
        head, _, rest = path.partition(".")
        offset, _, type_text = self.member(cls, head)
        if not rest:
            return offset
        inner = type_text.removeprefix("struct ").removeprefix("class ").split()[0]
        return offset + self.offset(inner, rest)

    def game_member(self, cls: str, name: str) -> Tuple[int, str]:
        """(offset, kind) of a member serialised by Game/BasicAbstractGame/the game class."""
        for owner, prefix in (
            (cls, ""), ("BasicAbstractGame", ""), ("Game", ""),
            ("StepData", "step_data."), ("GameOptions", "options."),
        ):  # fmt: skip
            if name in self.members(owner):
                _, size, type_text = self.member(owner, name)
                return self.offset(owner if not prefix else "Game", prefix + name), _kind_of(
                    type_text, size
                )
        raise LayoutError(f"no member {name!r} in {cls} or its bases")

    def class_of(self, game: str) -> str:
        try:
            return self.games[game]
        except KeyError:
            raise LayoutError(f"the layout has no class for game {game!r}") from None


def load_known_layout() -> Layout:
    """The recorded table; LayoutError if it was altered."""
    text = resources.files("procgen_entities.engine").joinpath("layouts", LAYOUT_FILE).read_text()
    return layout_from_table(json.loads(text))


def layout_from_table(table: Mapping[str, Any]) -> Layout:
    if canonical_digest(table) != KNOWN_LAYOUT_SHA256:
        raise LayoutError("the layout table does not match its recorded checksum")
    return Layout(tuple(table["build_ids"]), table["classes"])


def _scalar_ops(layout: Layout, cls: str, section: int) -> List[Tuple[int, int]]:
    from procgen_entities._native._parser import SCALAR_KINDS, SCALAR_NAMES, SCALAR_POSITIONS

    ops = []
    for (sec, _at), name, kind in sorted(zip(SCALAR_POSITIONS, SCALAR_NAMES, SCALAR_KINDS)):
        if sec != section:
            continue
        offset, member_kind = layout.game_member(cls, name)
        if member_kind != kind:
            raise LayoutError(
                f"{cls}::{name} is {member_kind!r} in the layout, {kind!r} in a state"
            )
        ops.append((OP[_OP_OF_KIND[kind]], offset))
    return ops


def state_program(layout: Layout, game: Game) -> npt.NDArray[np.int32]:
    """(op, arg) pairs that write one state of ``game`` in get_state's format (empty RNG texts).

    The walk is the format's (docs/state-format.md): version, name, options, two RNGs, the step
    block, grid_size, entities, the base block, asset RNG, the camera block, the grid, the
    trailer in games.py order, the terminator.
    """
    cls = layout.class_of(game.name)
    rng_seeded = layout.offset("RandGen", "is_seeded")
    ops: List[Tuple[int, int]] = [(OP["const"], 0), (OP["name"], 0)]
    ops += _scalar_ops(layout, cls, 0)
    for rng in ("level_seed_rand_gen", "rand_gen"):
        ops.append((OP["rng"], layout.offset("Game", rng) + rng_seeded))
    ops += _scalar_ops(layout, cls, 1)
    ops.append((OP["w4"], layout.offset("BasicAbstractGame", "grid_size")))
    ops.append((OP["entities"], layout.offset("BasicAbstractGame", "entities")))
    ops += _scalar_ops(layout, cls, 2)
    ops.append((OP["rng"], layout.offset("BasicAbstractGame", "asset_rand_gen") + rng_seeded))
    ops += _scalar_ops(layout, cls, 3)
    ops.append((OP["grid"], layout.offset("BasicAbstractGame", "grid")))
    for name, kind in game.trailer:
        offset, member_kind = layout.game_member(cls, name)
        if member_kind != kind:
            raise LayoutError(
                f"{cls}::{name} is {member_kind!r} in the layout, {kind!r} in a state"
            )
        ops.append((OP[_OP_OF_KIND[kind]], offset))
    ops.append((OP["end"], 0))
    return np.asarray(ops, dtype=np.int32).reshape(-1)


def _entity_members(layout: Layout) -> List[Tuple[int, str]]:
    """(offset, kind) of every Entity field a state holds, in state order; LayoutError where the
    layout's type disagrees with the state's (int or float)."""
    members = []
    for name in ENTITY_FIELDS:
        offset, size, type_text = layout.member("Entity", name)
        kind = _kind_of(type_text, size)
        if (kind == "f") == (name in ENTITY_INT_FIELDS):
            raise LayoutError(f"Entity::{name} is {kind!r} in the layout")
        members.append((offset, kind))
    return members


def entity_program(layout: Layout) -> npt.NDArray[np.int32]:
    ops = [(OP[_OP_OF_KIND[kind]], offset) for offset, kind in _entity_members(layout)]
    return np.asarray(ops, dtype=np.int32).reshape(-1)


def live_read_map(layout: Layout, game: Game) -> Dict[str, Any]:
    """Where a live game keeps what an observation reads (csrc/live_game.h pe_live_map): the
    (offset, kind code) of every header/base scalar, trailer item and entity field, the same
    members the state program writes, so a direct read and a written state agree."""
    from procgen_entities._native._parser import (
        SCALAR_KINDS,
        SCALAR_NAMES,
        TRAILER_KINDS_BY_CODE,
    )

    cls = layout.class_of(game.name)

    def member(name: str, expected: str) -> Tuple[int, int]:
        offset, kind = layout.game_member(cls, name)
        if kind != expected:
            raise LayoutError(f"{cls}::{name} is {kind!r} in the layout, {expected!r} in a state")
        return offset, TRAILER_KINDS_BY_CODE[kind]

    entity = [(offset, TRAILER_KINDS_BY_CODE[kind]) for offset, kind in _entity_members(layout)]
    return {
        "scalars": [member(name, kind) for name, kind in zip(SCALAR_NAMES, SCALAR_KINDS)],
        "trailer": [member(name, kind) for name, kind in game.trailer],
        "entity": entity,
        "entities": layout.offset("BasicAbstractGame", "entities"),
        "agent": layout.offset("BasicAbstractGame", "agent"),  # the player, erased or not
        "grid": layout.offset("BasicAbstractGame", "grid"),
    }


def step_offsets(layout: Layout) -> Dict[str, int]:
    """Game members Game::step touches (csrc/live_game.h pe_live_spec *_at fields)."""
    names = {
        "action": "action", "cur_time": "cur_time", "reward": "step_data.reward",
        "done": "step_data.done", "level_complete": "step_data.level_complete",
        "timeout": "timeout", "total_reward": "total_reward",
        "last_reward_timer": "last_reward_timer", "last_reward": "last_reward",
        "prev_level_seed": "prev_level_seed", "current_level_seed": "current_level_seed",
        "use_sequential_levels": "options.use_sequential_levels",
        "episode_done": "episode_done", "default_action": "default_action",
    }  # fmt: skip
    offsets = {key: layout.offset("Game", path) for key, path in names.items()}
    offsets["games"] = layout.offset("VecGame", "games")
    offsets["grid_data"] = layout.offset("Grid<int>", "data")
    return offsets
