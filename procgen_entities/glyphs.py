"""The characters of the package's drawings: one per tile id and entity type of each game.

What is what comes from games.py, the single declaration of each game (entity type ids and names,
tile classes and their ids). This module only says how each NAME looks (``LOOKS``, with
``GAME_LOOKS`` where games draw the same name differently, and ``TILE_REFINEMENTS`` for the few
tile ids drawn apart from their class); ``TILE_GLYPHS``, ``ENTITY_GLYPHS`` and ``FILL_TYPES`` are
derived from the two.

Both drawings read these tables: the text levels (level_text.py) and the terminal viewer
(viewer/render.py, which re-exports every name here and adds the glyphs that depend on a state).
A core module: it needs no rich (a style is only the name of a rich style, a string), so that
``import procgen_entities`` does not depend on the viewer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, FrozenSet, Mapping, Optional

from procgen_entities.games import GAMES, SPACE_TILE, Game

__all__ = [
    "ENTITY_GLYPHS",
    "FILL_TYPES",
    "GAME_LOOKS",
    "GOAL_STYLE",
    "Glyph",
    "LETHAL_STYLE",
    "LOOKS",
    "Look",
    "SHOT_STYLE",
    "TILE_GLYPHS",
    "TILE_REFINEMENTS",
    "WALL_STYLE",
    "glyph_of",
    "look",
]


@dataclass(frozen=True)
class Look:
    """How a named entity type or tile class is drawn, whatever its ids."""

    char: str
    style: str = ""
    #: Explanation shown in parentheses after the name in the legend, e.g. "invisible".
    note: str = ""
    #: Drawing order among point entities: higher is drawn later (on top).
    priority: int = 1
    #: Entities only: drawn over every tile its extent covers rather than one tile.
    fill: bool = False


@dataclass(frozen=True)
class Glyph:
    """How one tile id or entity is drawn: a character, the name of what it is (from games.py,
    or a presentation-only name, see ``TILE_REFINEMENTS``), a rich style and a legend note."""

    char: str
    name: str
    style: str = ""
    #: Drawing order among point entities: higher is drawn later (on top).
    priority: int = 1
    note: str = ""

    @property
    def label(self) -> str:
        """The legend text: the name, and the note in parentheses."""
        return f"{self.name} ({self.note})" if self.note else self.name


# Styles shared by all games (and by the viewer's state-dependent glyphs).
WALL_STYLE = "grey70"
GOAL_STYLE = "bold yellow"
LETHAL_STYLE = "bold red"
SHOT_STYLE = "bright_cyan"

#: Entity type or tile class name (as declared in games.py) -> how it is drawn, in every game that
#: declares the name unless GAME_LOOKS says otherwise. Also the presentation-only tile names
#: "Space" (SPACE_TILE, every game), "OutOfBounds", "WallTop" and "LavaTop" (TILE_REFINEMENTS).
LOOKS: Mapping[str, Look] = {
    # Terrain: tiles, and entities that act as terrain.
    "Space": Look(".", "grey35"),
    "OutOfBounds": Look("%", "grey50"),
    "Wall": Look("#", WALL_STYLE),
    "WallTop": Look("=", WALL_STYLE),
    "Lava": Look("~", "red"),
    "LavaTop": Look("^", "bright_red"),
    "Fire": Look("~", "red"),
    "Road": Look(":", "grey50"),
    "Water": Look("~", "blue"),
    "Dirt": Look(":", "yellow"),
    "Border": Look("%", "grey50"),
    "Boulder": Look("O", "grey70"),
    "MovingBoulder": Look("0", "bold white"),
    "Barrier": Look("#", WALL_STYLE, fill=True),
    "Panel": Look("#", WALL_STYLE, fill=True),
    "Log": Look("=", "yellow", fill=True),
    "Crate": Look("C", "yellow"),
    "Meteor": Look("M", "yellow", fill=True),
    "Obstacle": Look("O", "yellow", "meteor"),
    "Cloud": Look("c", "grey50", priority=0),
    # The agent and its shots.
    "Player": Look("A", "bold bright_green", priority=9),
    "PlayerBullet": Look("!", SHOT_STYLE),
    "PlayerBall": Look("o", SHOT_STYLE),
    "ThrowingStar": Look("*", SHOT_STYLE),
    "ReflectedBullet": Look("r", "grey50"),
    # Goals, things to collect, doors.
    "Goal": Look("G", GOAL_STYLE),
    "Exit": Look("E", GOAL_STYLE, priority=0),
    "FinishLine": Look("F", GOAL_STYLE, fill=True),
    "Door": Look("D", GOAL_STYLE, "open when no enemies left", fill=True),
    "Present": Look("P", GOAL_STYLE),
    "Coin": Look("o", GOAL_STYLE),
    "Orb": Look("o", "yellow"),
    "LargeOrb": Look("O", "bold yellow"),
    "Diamond": Look("*", "bold bright_cyan"),
    "MovingDiamond": Look("+", "bold cyan"),
    "GoodFruit": Look("+", "bold bright_green"),
    "Key": Look("x", "bold"),
    "LockedDoor": Look("D", "red", fill=True),
    "Lock": Look("L", "yellow"),
    "Ship": Look("s", "grey70", "not a target"),
    "Fish": Look("f", "bright_cyan", "smaller: edible"),
    # Dangers.
    "Enemy": Look("E", LETHAL_STYLE),
    "EnemyEgg": Look("g", "magenta"),
    "EnemyBullet": Look("*", LETHAL_STYLE),
    "EnemyBall": Look("*", LETHAL_STYLE),
    "TurretBullet": Look("+", LETHAL_STYLE),
    "BadFruit": Look("x", LETHAL_STYLE),
    "Boss": Look("B", LETHAL_STYLE, priority=2, fill=True),
    "Shields": Look("S", "bold blue", "when up", priority=3),
    "Target": Look("T", LETHAL_STYLE),
    "Saw": Look("S", LETHAL_STYLE),
    "Spike": Look("^", LETHAL_STYLE),
    "Car": Look("C", LETHAL_STYLE),
    "Bomb": Look("B", LETHAL_STYLE),
    "Flyer": Look("f", LETHAL_STYLE),
    "FastFlyer": Look("F", LETHAL_STYLE),
    "Turret": Look("T", LETHAL_STYLE),
    "Explosion": Look("x", "magenta", priority=0),
}


def _noted(name: str, note: str) -> Look:
    return replace(LOOKS[name], note=note)


#: game -> name -> look, where a game draws a name differently from LOOKS.
GAME_LOOKS: Mapping[str, Mapping[str, Look]] = {
    "bossfight": {"Barrier": Look("M", "yellow", "meteor")},
    "chaser": {"Wall": Look("#", "blue")},
    "coinrun": {"Barrier": Look("|", "grey23", "invisible")},  # the enemies' turning points
    "dodgeball": {"Wall": Look("#", "red", "lava", fill=True)},
    "heist": {"Exit": Look("$", GOAL_STYLE, "gem"), "LockedDoor": Look("X", "bold")},
    "jumper": {"Goal": _noted("Goal", "carrot")},
    "maze": {"Goal": _noted("Goal", "cheese")},
    "ninja": {"Goal": _noted("Goal", "mushroom")},
    "starpilot": {"FinishLine": Look("|", GOAL_STYLE, fill=True)},
}

#: Presentation only: game -> tile id -> name in LOOKS, for the ids drawn apart from their class
#: in games.py (the top row of a wall or lava block, "WallTop"/"LavaTop", is drawn as a surface)
#: or that games.py declares no class for (the out-of-bounds tile of dodgeball and fruitbot).
TILE_REFINEMENTS: Mapping[str, Mapping[int, str]] = {
    "climber": {16: "WallTop"},
    "coinrun": {16: "WallTop", 18: "LavaTop"},
    "dodgeball": {10: "OutOfBounds"},
    "fruitbot": {2: "OutOfBounds"},
    "jumper": {7: "WallTop"},
}


def look(game: str, name: str) -> Optional[Look]:
    """How ``name`` (an entity type or tile class of ``game``, or a presentation-only tile name)
    is drawn in ``game``; None if neither GAME_LOOKS nor LOOKS has it."""
    found = GAME_LOOKS.get(game, {}).get(name)
    return found if found is not None else LOOKS.get(name)


def glyph_of(game: str, name: str) -> Optional[Glyph]:
    """The glyph of ``name`` in ``game`` (its look, named); None where it has no look."""
    found = look(game, name)
    if found is None:
        return None
    return Glyph(found.char, name, found.style, found.priority, found.note)


def _tile_names(game: Game) -> Dict[int, str]:
    """Tile id -> name: the games.py classes in their order (refined where TILE_REFINEMENTS
    says), then Space, then the refinements of ids that have no class."""
    refined = TILE_REFINEMENTS.get(game.name, {})
    names = {tile: refined.get(tile, cls) for cls, ids in game.tiles.items() for tile in ids}
    names[SPACE_TILE] = "Space"
    for tile, name in refined.items():
        names.setdefault(tile, name)
    return names


def _glyphs(game: str, names: Mapping[int, str]) -> Dict[int, Glyph]:
    """id -> glyph; ids whose name has no look are left out (and drawn as "?")."""
    out = {}
    for i, name in names.items():
        found = glyph_of(game, name)
        if found is not None:
            out[i] = found
    return out


#: game -> tile id -> glyph, for every tile id of the game's classes, SPACE_TILE and refinements.
TILE_GLYPHS: Mapping[str, Mapping[int, Glyph]] = {
    name: _glyphs(name, _tile_names(game)) for name, game in GAMES.items()
}

#: game -> entity type id -> glyph (the default glyph; the viewer draws a few types by their
#: state, viewer/render.py _VARIANTS).
ENTITY_GLYPHS: Mapping[str, Mapping[int, Glyph]] = {
    name: _glyphs(name, game.entity_types) for name, game in GAMES.items()
}


def _fill_types(game: Game) -> FrozenSet[int]:
    fill = {t for t, n in game.entity_types.items() if (found := look(game.name, n)) and found.fill}
    return frozenset(fill)


#: game -> entity type ids drawn over their whole extent rather than one tile (Look.fill).
FILL_TYPES: Mapping[str, FrozenSet[int]] = {name: _fill_types(game) for name, game in GAMES.items()}
