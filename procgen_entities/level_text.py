"""Text levels: a state's tiles and entities as the viewer's characters, and a drawing back to a
state.

``level_to_text(s)``: one line per grid row, the top row first (up is up), one character per tile:
the tile's character from the viewer's legend (``python -m procgen_entities.dump``;
glyphs.py TILE_GLYPHS), or, where an entity stands (tile ``(floor(x), floor(y))``), the
entity's (ENTITY_GLYPHS; the player on top, then the glyphs' priorities). Every character means
one tile id or one entity type in its game, so a drawing can be read back.

``level_from_text(text, base=s)``: the drawing becomes a state, everything not drawn taken from
``base``. A tile character sets that tile; an entity character keeps the tile ``base`` has there.
An entity drawn where ``base`` draws the same type is kept unchanged; one drawn elsewhere is a
``base`` entity of that type that was not drawn again (moved to the new tile's centre, its other
fields kept), or a copy of one (the game's defaults for its other fields, from ``base``).
Entities the text cannot show (cosmetic or HUD types, entities under another one, outside the
grid) are kept as in ``base``. In games whose camera follows the player, the camera moves with it.
"""

from __future__ import annotations

import math
from typing import Dict, List, Tuple

import numpy as np

from procgen_entities.errors import UsageError
from procgen_entities.games import get_game
from procgen_entities.glyphs import ENTITY_GLYPHS, TILE_GLYPHS
from procgen_entities.state import State

__all__ = ["level_from_text", "level_to_text"]

#: Drawn for a tile id the legend has no character for (read back as base's tile).
UNKNOWN = "?"


def _drawn(state: State) -> Tuple[List[List[str]], Dict[Tuple[int, int], int]]:
    """chars[y][x] (row 0 the bottom) and which entity (index) is drawn on each cell."""
    game = get_game(state.game)
    tiles, glyphs = TILE_GLYPHS[game.name], ENTITY_GLYPHS[game.name]
    h, w = state.grid.shape
    chars = [[tiles[t].char if t in tiles else UNKNOWN for t in row] for row in state.grid.tolist()]
    on: Dict[Tuple[int, int], Tuple[Tuple[int, int], int]] = {}
    ents = state.entities
    for k in range(len(ents)):
        etype = int(ents["type"][k])
        glyph = glyphs.get(etype)
        if glyph is None or etype in game.ignored_types or ents["use_abs_coords"][k]:
            continue
        x, y = float(ents["x"][k]), float(ents["y"][k])
        if not (math.isfinite(x) and math.isfinite(y)):
            continue
        cell = (math.floor(x), math.floor(y))
        if not (0 <= cell[0] < w and 0 <= cell[1] < h):
            continue
        rank = (9 if k == 0 else glyph.priority, k)
        if cell not in on or on[cell][0] < rank:
            on[cell] = (rank, k)
    owners = {cell: k for cell, (_, k) in on.items()}
    for (x, y), k in owners.items():
        chars[y][x] = glyphs[int(ents["type"][k])].char
    return chars, owners


def level_to_text(state: State) -> str:
    """The state's level as text: H lines of W characters, the top row first."""
    chars, _ = _drawn(state)
    return "\n".join("".join(row) for row in reversed(chars)) + "\n"


def _read_rows(text: str, w: int, h: int) -> List[str]:
    rows = [line.rstrip("\r") for line in text.splitlines()]
    while rows and not rows[-1].strip():
        rows.pop()
    if len(rows) != h:
        raise UsageError(f"the text has {len(rows)} rows; the base state's grid has {h}")
    for i, row in enumerate(rows):
        if len(row) != w:
            raise UsageError(f"text line {i + 1} has {len(row)} characters, the grid is {w} wide")
    return rows[::-1]  # row 0 the bottom


def level_from_text(text: str, base: State) -> State:
    """A state drawn as text (level_to_text's format), the rest taken from ``base``."""
    game = get_game(base.game)
    h, w = base.grid.shape
    rows = _read_rows(text, w, h)
    tile_of = {g.char: t for t, g in TILE_GLYPHS[game.name].items()}
    type_of = {g.char: t for t, g in ENTITY_GLYPHS[game.name].items()}
    _, owners = _drawn(base)
    ents = base.entities
    grid = base.grid.copy()
    kept, placed = set(), []
    for y, row in enumerate(rows):
        for x, char in enumerate(row):
            owner = owners.get((x, y))
            if char in tile_of:
                grid[y, x] = tile_of[char]
            elif char in type_of:
                etype = type_of[char]
                if owner is not None and int(ents["type"][owner]) == etype:
                    kept.add(owner)
                else:
                    placed.append((etype, x, y))
            elif char != UNKNOWN or TILE_GLYPHS[game.name].get(int(base.grid[y, x])) is not None:
                raise UsageError(
                    f"text line {h - y}, column {x + 1}: {char!r} is not in {game.name}'s legend"
                )
    undrawn = [k for k in range(len(ents)) if k not in owners.values()]
    spare = [k for k in owners.values() if k not in kept]
    records = ents.copy()
    used = set(kept) | set(undrawn)
    copies = []
    for etype, x, y in placed:
        reuse = next((k for k in spare if int(ents["type"][k]) == etype and k not in used), None)
        if reuse is not None:
            used.add(reuse)
            target = records[reuse : reuse + 1]
        else:
            template = np.flatnonzero(ents["type"] == etype)
            if not len(template):
                name = game.entity_types.get(etype, str(etype))
                raise UsageError(f"the base state has no {name} to take its other fields from")
            target = ents[template[0] : template[0] + 1].copy()
            copies.append(target)
        target["x"], target["y"] = x + 0.5, y + 0.5
    order = sorted(used)
    table = np.concatenate([records[order], *copies]) if copies else records[order]
    players = np.flatnonzero(table["type"] == 0)
    if len(players) != 1 or players[0] != 0:
        raise UsageError(f"a level needs exactly one player (A); the text gives {len(players)}")
    state = base.copy()
    state.grid = grid
    state.entities = table
    _follow_player(state, base)
    return state


def _follow_player(state: State, base: State) -> None:
    """Move the camera with the player where base's camera is centred on it."""
    old = base.entities[0]
    new = state.entities[0]
    cx, cy = base.scalars["center_x"], base.scalars["center_y"]
    if abs(cx - float(old["x"])) < 1e-3 and abs(cy - float(old["y"])) < 1e-3:
        state.scalars["center_x"] = float(new["x"])
        state.scalars["center_y"] = float(new["y"])
