"""Text rendering of one parsed procgen state: tilemap + entities as characters, a legend, an
entity table. Used by ``python -m procgen_entities.dump``.

Conventions (see ../shared/procgen-state-format.md §2): y grows upward, grid index = y*W + x, so
the highest row is printed first. An entity is drawn in tile (floor(x), floor(y)); wall-like
entities (dodgeball walls, fruitbot barriers, leaper logs, ...) are drawn over every tile whose
centre lies inside their extent ``[x-rx, x+rx] x [y-ry, y+ry]``.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import IO, Callable, Dict, List, Mapping, Sequence, Tuple

import numpy as np
from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from procgen_entities.games import ENTITY_FIELDS, GAMES, Game
from procgen_entities.parse import StateBatch

__all__ = [
    "DISTRIBUTION_MODES",
    "ENTITY_GLYPHS",
    "Glyph",
    "TILE_GLYPHS",
    "View",
    "choose_view",
    "follows_agent",
    "legend",
    "render",
    "render_text",
]

#: distribution_mode header value -> name.
DISTRIBUTION_MODES: Mapping[int, str] = {0: "easy", 1: "hard", 2: "extreme", 10: "memory"}


@dataclass(frozen=True)
class Glyph:
    """How one tile id or entity type is drawn: a character, a legend name and a rich style."""

    char: str
    name: str
    style: str = ""
    #: Drawing order among point entities: higher is drawn later (on top).
    priority: int = 1


# Styles shared by all games.
_SPACE = Glyph(".", "Space", "grey35")
_WALL = "grey70"
_PLAYER = Glyph("A", "Player", "bold bright_green", priority=9)
_GOAL = "bold yellow"
_LETHAL = "bold red"
_SHOT = "bright_cyan"
_FX = "magenta"
_OOB_BLANK = Glyph(" ", "OutOfBounds", "")


def _t(**glyphs: Glyph) -> Dict[int, Glyph]:
    return {int(k[1:]): g for k, g in glyphs.items()}


#: game -> tile id -> glyph. Every tile id a game uses (format reference §3) has one.
TILE_GLYPHS: Mapping[str, Mapping[int, Glyph]] = {
    "bigfish": _t(t100=_SPACE),
    "bossfight": _t(t100=_SPACE),
    "caveflyer": _t(t8=Glyph("#", "CaveWall", _WALL), t100=_SPACE),
    "chaser": _t(t5=Glyph("#", "Wall", "blue"), t1002=Glyph("o", "Orb", "yellow"), t100=_SPACE),
    "climber": _t(t15=Glyph("#", "Wall", _WALL), t16=Glyph("=", "WallTop", _WALL), t100=_SPACE),
    "coinrun": _t(
        t15=Glyph("#", "Wall", _WALL),
        t16=Glyph("=", "WallTop", _WALL),
        t17=Glyph("~", "Lava", "red"),
        t18=Glyph("^", "LavaTop", "bright_red"),
        t19=Glyph("|", "EnemyBarrier (invisible)", "grey23"),
        t1=Glyph("G", "Goal", _GOAL),
        t100=_SPACE,
    ),
    "dodgeball": _t(t100=_SPACE, t10=Glyph("%", "OutOfBounds", "grey50")),
    "fruitbot": _t(t100=_SPACE, t2=Glyph("%", "OutOfBounds", "grey50")),
    "heist": _t(t51=Glyph("#", "Wall", _WALL), t100=_SPACE),
    "jumper": _t(
        t6=Glyph("#", "CaveWall", _WALL), t7=Glyph("=", "CaveWallTop", _WALL), t100=_SPACE
    ),
    "leaper": _t(t2=Glyph(":", "Road", "grey50"), t3=Glyph("~", "Water", "blue"), t100=_SPACE),
    "maze": _t(t51=Glyph("#", "Wall", _WALL), t2=Glyph("G", "Goal (cheese)", _GOAL), t100=_SPACE),
    "miner": _t(
        t1=Glyph("O", "Boulder", "grey70"),
        t2=Glyph("*", "Diamond", "bold bright_cyan"),
        t3=Glyph("0", "MovingBoulder", "bold white"),
        t4=Glyph("+", "MovingDiamond", "bold cyan"),
        t9=Glyph(":", "Dirt", "yellow"),
        t10=Glyph("%", "Border", "grey50"),
        t100=_SPACE,
    ),
    "ninja": _t(
        t20=Glyph("#", "Wall", _WALL),
        t14=Glyph("~", "Fire", "red"),
        t6=Glyph("B", "Bomb", _LETHAL),
        t100=_SPACE,
    ),
    "plunder": _t(t100=_SPACE),
    "starpilot": _t(t100=_SPACE),
}


def _e(**glyphs: Glyph) -> Dict[int, Glyph]:
    out = {0: _PLAYER}
    out.update({int(k[1:]): g for k, g in glyphs.items()})
    return out


_EXPLOSION = Glyph("x", "Explosion", _FX, priority=0)

#: game -> entity type id -> glyph (the default glyph; see _VARIANTS for state-dependent ones).
ENTITY_GLYPHS: Mapping[str, Mapping[int, Glyph]] = {
    "bigfish": _e(e2=Glyph("f", "Fish (smaller: edible)", "bright_cyan")),
    "bossfight": _e(
        e1=Glyph("!", "PlayerBullet", _SHOT),
        e2=Glyph("B", "Boss", _LETHAL, priority=2),
        e3=Glyph("S", "Shields (when up)", "bold blue", priority=3),
        e4=Glyph("*", "EnemyBullet", _LETHAL),
        e6=Glyph("r", "ReflectedBullet", "grey50"),
        e7=Glyph("M", "Barrier (meteor)", "yellow"),
        e54=_EXPLOSION,
    ),
    "caveflyer": _e(
        e1=Glyph("G", "Goal", _GOAL),
        e2=Glyph("O", "Obstacle (meteor)", "yellow"),
        e3=Glyph("T", "Target", _LETHAL),
        e4=Glyph("!", "PlayerBullet", _SHOT),
        e5=Glyph("E", "Enemy", _LETHAL),
        e54=_EXPLOSION,
    ),
    "chaser": _e(
        e2=Glyph("O", "LargeOrb", "bold yellow"),
        e4=Glyph("g", "EnemyEgg", "magenta"),
        e6=Glyph("E", "Enemy", _LETHAL),
    ),
    "climber": _e(e1=Glyph("o", "Coin", _GOAL), e5=Glyph("E", "Enemy", _LETHAL)),
    "coinrun": _e(
        e2=Glyph("S", "Saw", _LETHAL),
        e5=Glyph("E", "Enemy", _LETHAL),
        e20=Glyph("C", "Crate", "yellow"),
    ),
    "dodgeball": _e(
        e1=Glyph("#", "Wall (lava)", "red"),
        e3=Glyph("o", "PlayerBall", _SHOT),
        e4=Glyph("E", "Enemy", _LETHAL),
        e5=Glyph("D", "Door (open when no enemies left)", _GOAL),
        e6=Glyph("*", "EnemyBall", _LETHAL),
    ),
    "fruitbot": _e(
        e1=Glyph("#", "Barrier", _WALL),
        e3=Glyph("!", "PlayerBullet", _SHOT),
        e4=Glyph("x", "BadFruit", _LETHAL),
        e7=Glyph("+", "GoodFruit", "bold bright_green"),
        e10=Glyph("D", "LockedDoor", "red"),
        e11=Glyph("L", "Lock", "yellow"),
        e12=Glyph("P", "Present", _GOAL),
    ),
    "heist": _e(
        e1=Glyph("X", "LockedDoor", "bold"),
        e2=Glyph("x", "Key", "bold"),
        e9=Glyph("$", "Exit (gem)", _GOAL),
    ),
    "jumper": _e(e1=Glyph("G", "Goal (carrot)", _GOAL), e2=Glyph("^", "Spike", _LETHAL)),
    "leaper": _e(
        e1=Glyph("=", "Log", "yellow"),
        e4=Glyph("C", "Car", _LETHAL),
        e5=Glyph("F", "FinishLine", _GOAL),
    ),
    "maze": _e(),
    "miner": _e(e6=Glyph("E", "Exit", _GOAL, priority=0)),
    "ninja": _e(
        e1=Glyph("G", "Goal (mushroom)", _GOAL),
        e7=Glyph("*", "ThrowingStar", _SHOT),
        e54=_EXPLOSION,
    ),
    "plunder": _e(
        e1=Glyph("!", "PlayerBullet", _SHOT),
        e6=Glyph("#", "Panel", _WALL),
        e7=Glyph("s", "Ship (not a target)", "grey70"),
        e54=_EXPLOSION,
    ),
    "starpilot": _e(
        e1=Glyph("!", "PlayerBullet", _SHOT),
        e2=Glyph("*", "EnemyBullet", _LETHAL),
        e3=Glyph("+", "TurretBullet", _LETHAL),
        e4=Glyph("f", "Flyer", _LETHAL),
        e5=Glyph("M", "Meteor", "yellow"),
        e6=Glyph("c", "Cloud", "grey50", priority=0),
        e7=Glyph("T", "Turret", _LETHAL),
        e8=Glyph("F", "FastFlyer", _LETHAL),
        e9=Glyph("|", "FinishLine", _GOAL),
        e54=_EXPLOSION,
    ),
}

#: (game, entity type) drawn over their whole extent rather than one tile.
FILL_TYPES: Mapping[str, frozenset] = {
    "bossfight": frozenset({2}),
    "dodgeball": frozenset({1, 5}),
    "fruitbot": frozenset({1, 10}),
    "leaper": frozenset({1, 5}),
    "plunder": frozenset({6}),
    "starpilot": frozenset({5, 9}),
}

_HEIST_KEYS = ("x", "y", "z")
_HEIST_DOORS = ("X", "Y", "Z")
_HEIST_STYLES = ("bold blue", "bold green", "bold red")


@dataclass
class _Context:
    """What state-dependent glyphs need to know about the state being drawn."""

    batch: StateBatch
    index: int
    ents: np.ndarray  # [N, 31] float32, ENTITY_FIELDS order

    def extra(self, name: str) -> float:
        return float(self.batch.extras[name][self.index])


_F = {name: i for i, name in enumerate(ENTITY_FIELDS)}


def _bigfish_fish(ctx: _Context, row: np.ndarray) -> Glyph:
    if row[_F["rx"]] > ctx.ents[0, _F["rx"]]:
        return Glyph("F", "Fish (bigger: lethal)", _LETHAL)
    return ENTITY_GLYPHS["bigfish"][2]


def _chaser_enemy(ctx: _Context, row: np.ndarray) -> Glyph:
    cur_time = int(ctx.batch.cur_time[ctx.index])
    if cur_time - ctx.extra("eat_time") < ctx.extra("eat_timeout"):
        return Glyph("e", "Enemy (edible)", "bold bright_blue")
    return ENTITY_GLYPHS["chaser"][6]


def _heist_theme(chars: Sequence[str], kind: str) -> Callable[[_Context, np.ndarray], Glyph]:
    def pick(ctx: _Context, row: np.ndarray) -> Glyph:
        theme = int(row[_F["image_theme"]])
        if 0 <= theme < len(chars):
            return Glyph(chars[theme], f"{kind} (colour {theme})", _HEIST_STYLES[theme])
        return Glyph("?", f"{kind} (colour {theme})", "bold")

    return pick


def _plunder_ship(ctx: _Context, row: np.ndarray) -> Glyph:
    targets = ctx.batch.vector("target_bools", ctx.index)
    theme = int(row[_F["image_theme"]])
    if 0 <= theme < len(targets) and targets[theme]:
        return Glyph("T", "Ship (target)", "bold bright_green")
    return ENTITY_GLYPHS["plunder"][7]


#: (game, entity type) -> glyph chooser for state-dependent glyphs.
_VARIANTS: Mapping[Tuple[str, int], Callable[[_Context, np.ndarray], Glyph]] = {
    ("bigfish", 2): _bigfish_fish,
    ("chaser", 6): _chaser_enemy,
    ("heist", 1): _heist_theme(_HEIST_DOORS, "LockedDoor"),
    ("heist", 2): _heist_theme(_HEIST_KEYS, "Key"),
    ("plunder", 7): _plunder_ship,
}

#: Extra legend entries for the variants: game -> glyphs (shown after the defaults).
_VARIANT_LEGEND: Mapping[str, Tuple[Glyph, ...]] = {
    "bigfish": (Glyph("F", "Fish (bigger: lethal)", _LETHAL),),
    "chaser": (Glyph("e", "Enemy (edible)", "bold bright_blue"),),
    "plunder": (Glyph("T", "Ship (target)", "bold bright_green"),),
}


def _legend_glyphs(game: str) -> List[Glyph]:
    glyphs: List[Glyph] = list(TILE_GLYPHS[game].values())
    if game == "heist":
        glyphs.append(_PLAYER)
        glyphs.append(Glyph("/".join(_HEIST_KEYS), "Key (colour 0/1/2)", "bold"))
        glyphs.append(Glyph("/".join(_HEIST_DOORS), "LockedDoor (colour 0/1/2)", "bold"))
        glyphs.append(ENTITY_GLYPHS["heist"][9])
    else:
        glyphs.extend(ENTITY_GLYPHS[game].values())
        glyphs.extend(_VARIANT_LEGEND.get(game, ()))
    seen, out = set(), []
    for g in glyphs:
        if (g.char, g.name) not in seen:
            seen.add((g.char, g.name))
            out.append(g)
    return out


def legend(game: str, width: int = 100) -> List[Text]:
    """The legend of one game (char -> name), wrapped to ``width`` columns."""
    lines: List[Text] = []
    line = Text("legend: ")
    indent = " " * len(line.plain)
    for g in _legend_glyphs(game):
        item = Text()
        item.append(g.char, style=g.style)
        item.append(" " + g.name)
        if len(line.plain) + len(item.plain) + 2 > width and line.plain.strip() != "legend:":
            lines.append(line)
            line = Text(indent)
        elif line.plain not in ("legend: ", indent):
            line.append("  ")
        line.append_text(item)
    lines.append(line)
    return lines


# ----------------------------------------------------------------------------------------------
# Views


@dataclass(frozen=True)
class View:
    """The rectangle of world tiles to print: columns x0..x0+w-1, rows y0..y0+h-1."""

    x0: int
    y0: int
    w: int
    h: int
    kind: str  # "window" or "full"


def follows_agent(batch: StateBatch, i: int = 0) -> bool:
    """True if the camera shows less than the world (it follows the agent): coinrun, ninja,
    caveflyer, jumper, and the memory modes of dodgeball/heist/maze/miner. Climber and fruitbot
    show the full width and scroll vertically only; they count as not following."""
    grid = batch.grid
    assert grid is not None
    h, w = grid.shape[1:]
    view_dim = float(batch.scalars["view_dim"][i])
    return 0 < view_dim < min(w, h) - 1e-3


def choose_view(batch: StateBatch, i: int = 0, mode: str | None = None) -> View:
    """``mode`` "window" (the camera square center ± view_dim/2), "full" (the whole grid) or None
    (window for games whose camera follows the agent, full otherwise)."""
    grid = batch.grid
    assert grid is not None
    h, w = grid.shape[1:]
    if mode is None:
        mode = "window" if follows_agent(batch, i) else "full"
    if mode == "full":
        return View(0, 0, w, h, "full")
    if mode != "window":
        raise ValueError(f"view mode must be 'window' or 'full', not {mode!r}")
    view_dim = float(batch.scalars["view_dim"][i])
    if not (0 < view_dim < 10_000) or not math.isfinite(view_dim):
        return View(0, 0, w, h, "full")
    n = max(1, int(round(view_dim)))
    cx = float(batch.scalars["center_x"][i])
    cy = float(batch.scalars["center_y"][i])
    x0 = int(math.floor(cx - view_dim / 2 + 0.5))
    y0 = int(math.floor(cy - view_dim / 2 + 0.5))
    return View(x0, y0, n, n, "window")


# ----------------------------------------------------------------------------------------------
# Drawing


def _entity_glyph(game: Game, ctx: _Context, row: np.ndarray) -> Glyph | None:
    """The glyph of one entity, or None if it is not drawn (ignored, HUD, hidden)."""
    etype = int(row[_F["type"]])
    if etype in game.ignored_types or row[_F["use_abs_coords"]] != 0:
        return None
    name = game.entity_types.get(etype)
    if name is not None and name in game.hidden_unless:
        if not ctx.extra(game.hidden_unless[name]):
            return None
    variant = _VARIANTS.get((game.name, etype))
    if variant is not None:
        return variant(ctx, row)
    glyph = ENTITY_GLYPHS[game.name].get(etype)
    if glyph is None:
        return Glyph("?", f"unknown entity type {etype}", "bold magenta")
    return glyph


def _tile_glyph(game: str, tile: int) -> Glyph:
    glyph = TILE_GLYPHS[game].get(tile)
    if glyph is None:
        return Glyph("?", f"unknown tile {tile}", "bold magenta")
    return glyph


def _oob_glyph(game: Game, batch: StateBatch, i: int) -> Glyph:
    tile = game.out_of_bounds_tile
    if tile < 0:
        tile = int(batch.scalars["out_of_bounds_object"][i])
    return TILE_GLYPHS[game.name].get(tile, _OOB_BLANK)


def _cells(batch: StateBatch, i: int, view: View) -> List[List[Glyph]]:
    """cells[r][c]: the glyph at world (view.x0 + c, view.y0 + r)."""
    game = GAMES[batch.game]
    grid = batch.grid
    assert grid is not None, "render needs a StateBatch parsed with grid=True"
    tiles = grid[i]
    h, w = tiles.shape
    oob = _oob_glyph(game, batch, i)
    lut: Dict[int, Glyph] = {}
    cells: List[List[Glyph]] = []
    for r in range(view.h):
        y = view.y0 + r
        out_row: List[Glyph] = []
        for c in range(view.w):
            x = view.x0 + c
            if 0 <= x < w and 0 <= y < h:
                tile = int(tiles[y, x])
                glyph = lut.get(tile)
                if glyph is None:
                    glyph = lut[tile] = _tile_glyph(game.name, tile)
                out_row.append(glyph)
            else:
                out_row.append(oob)
        cells.append(out_row)

    ents = _all_fields(batch, i)
    ctx = _Context(batch, i, ents)
    fill = FILL_TYPES.get(game.name, frozenset())
    filled: List[Tuple[np.ndarray, Glyph]] = []
    points: List[Tuple[int, int, np.ndarray, Glyph]] = []
    for k, row in enumerate(ents):
        glyph = _entity_glyph(game, ctx, row)
        if glyph is None:
            continue
        if int(row[_F["type"]]) in fill:
            filled.append((row, glyph))
        else:
            points.append((glyph.priority, k, row, glyph))

    def put(x: int, y: int, glyph: Glyph) -> None:
        if 0 <= x < w and 0 <= y < h:
            c, r = x - view.x0, y - view.y0
            if 0 <= c < view.w and 0 <= r < view.h:
                cells[r][c] = glyph

    for row, glyph in filled:
        ex, ey, rx, ry = (float(row[_F[f]]) for f in ("x", "y", "rx", "ry"))
        if not all(map(math.isfinite, (ex, ey, rx, ry))):
            continue
        xs = range(math.ceil(ex - rx - 0.5), math.floor(ex + rx - 0.5) + 1)
        ys = range(math.ceil(ey - ry - 0.5), math.floor(ey + ry - 0.5) + 1)
        if len(xs) == 0:
            xs = range(math.floor(ex), math.floor(ex) + 1)
        if len(ys) == 0:
            ys = range(math.floor(ey), math.floor(ey) + 1)
        for yy in ys:
            for xx in xs:
                put(xx, yy, glyph)
    for _, _, row, glyph in sorted(points, key=lambda p: (p[0], p[1])):
        ex, ey = float(row[_F["x"]]), float(row[_F["y"]])
        if math.isfinite(ex) and math.isfinite(ey):
            put(math.floor(ex), math.floor(ey), glyph)
    return cells


def _all_fields(batch: StateBatch, i: int) -> np.ndarray:
    """State i's entities as [N, 31] in ENTITY_FIELDS order, whatever fields the batch holds."""
    ents = batch.state_entities(i)
    if tuple(batch.entity_fields) == ENTITY_FIELDS:
        return ents
    missing = [
        f for f in ("x", "y", "rx", "ry", "type", "use_abs_coords") if f not in batch.entity_fields
    ]
    if missing:
        raise ValueError(f"render needs entity fields {missing}; parse with all entity fields")
    out = np.zeros((len(ents), len(ENTITY_FIELDS)), dtype=np.float32)
    for j, name in enumerate(batch.entity_fields):
        out[:, _F[name]] = ents[:, j]
    return out


def header(batch: StateBatch, i: int = 0, view: View | None = None) -> Text:
    """One line: game, distribution mode, level seed, step, reward, done (and the view)."""
    mode_id = int(batch.scalars["distribution_mode"][i])
    mode = DISTRIBUTION_MODES.get(mode_id, f"mode{mode_id}")
    reward = float(batch.reward[i])
    text = Text()
    text.append(batch.game, style="bold")
    text.append(
        f"  mode={mode}  level={int(batch.level_seed[i])}  step={int(batch.cur_time[i])}"
        f"  reward={reward:g}  done={int(bool(batch.done[i]))}"
    )
    if view is not None:
        grid = batch.grid
        assert grid is not None
        h, w = grid.shape[1:]
        if view.kind == "window":
            text.append(
                f"  [window {view.w}x{view.h}: x {view.x0}..{view.x0 + view.w - 1},"
                f" y {view.y0}..{view.y0 + view.h - 1} of {w}x{h}]",
                style="grey50",
            )
        else:
            text.append(f"  [full {w}x{h}]", style="grey50")
    return text


def map_lines(batch: StateBatch, i: int = 0, view: View | None = None) -> List[Text]:
    """The map rows, highest y first, each prefixed by its y coordinate."""
    if view is None:
        view = choose_view(batch, i)
    cells = _cells(batch, i, view)
    labels = [str(view.y0 + r) for r in range(view.h)]
    label_w = max(len(s) for s in labels)
    lines = []
    for r in range(view.h - 1, -1, -1):
        line = Text(labels[r].rjust(label_w) + " ", style="grey50")
        row = cells[r]
        start = 0
        # Merge runs of the same glyph into one styled span (much less output with colour).
        for c in range(1, len(row) + 1):
            if c == len(row) or row[c] is not row[start]:
                g = row[start]
                line.append(g.char * (c - start), style=g.style or None)
                start = c
        lines.append(line)
    return lines


def _fmt(v: float) -> str:
    if not math.isfinite(v):
        return str(v)
    return f"{v:.2f}"


def entity_table(batch: StateBatch, i: int = 0, *, ascii_only: bool = False) -> Table:
    """A rich table of state i's entities with their key features (ignored/HUD types omitted)."""
    game = GAMES[batch.game]
    ents = _all_fields(batch, i)
    ctx = _Context(batch, i, ents)
    grid = batch.grid
    h, w = grid.shape[1:] if grid is not None else (0, 0)
    table = Table(
        title=f"{batch.game} entities",
        title_justify="left",
        box=box.ASCII if ascii_only else box.HEAVY_HEAD,
    )
    for col in ("#", "ch", "type", "id", "x", "y", "vx", "vy", "rx", "ry", "rot", "health", "note"):
        table.add_column(col, justify="right" if col not in ("ch", "type", "note") else "left")
    omitted: Dict[str, int] = {}
    for k, row in enumerate(ents):
        etype = int(row[_F["type"]])
        if etype in game.ignored_types or row[_F["use_abs_coords"]] != 0:
            key = game.ignored_types.get(etype, f"type {etype} (screen coordinates)")
            omitted[key] = omitted.get(key, 0) + 1
            continue
        glyph = _entity_glyph(game, ctx, row)
        name = game.entity_types.get(etype, f"?{etype}")
        notes = []
        if glyph is None:
            notes.append("hidden")
        x, y = float(row[_F["x"]]), float(row[_F["y"]])
        if not (0 <= x < w and 0 <= y < h):
            notes.append("off-grid")
        if row[_F["will_erase"]]:
            notes.append("will_erase")
        if "image_theme" in game.type_features.get(name, ()):
            notes.append(f"theme={int(row[_F['image_theme']])}")
        ch = Text(glyph.char, style=glyph.style) if glyph is not None else Text("")
        table.add_row(
            str(k),
            ch,
            name,
            str(etype),
            *(
                _fmt(float(row[_F[f]]))
                for f in ("x", "y", "vx", "vy", "rx", "ry", "rotation", "health")
            ),
            " ".join(notes),
        )
    if omitted:
        table.caption = "not shown: " + ", ".join(f"{n} x {why}" for why, n in omitted.items())
        table.caption_justify = "left"
    return table


def render(
    batch: StateBatch,
    i: int = 0,
    *,
    view_mode: str | None = None,
    entities: bool = False,
    legend_width: int = 100,
    ascii_only: bool = False,
) -> RenderableType:
    """Header, map, legend (and with ``entities=True`` the entity table) as one rich renderable."""
    view = choose_view(batch, i, view_mode)
    parts: List[RenderableType] = [header(batch, i, view)]
    parts.extend(map_lines(batch, i, view))
    parts.extend(legend(batch.game, legend_width))
    if entities:
        parts.append(entity_table(batch, i, ascii_only=ascii_only))
    return Group(*parts)


def plain_console(file: IO[str] | None = None, width: int = 200) -> Console:
    """A console that writes plain text: no colour and no escape codes of any kind."""
    return Console(
        file=file if file is not None else io.StringIO(),
        color_system=None,
        force_terminal=False,
        force_jupyter=False,
        force_interactive=False,
        width=width,
        no_color=True,
        highlight=False,
        emoji=False,
        soft_wrap=False,
        legacy_windows=False,
        _environ={},
    )


def render_text(
    batch: StateBatch,
    i: int = 0,
    *,
    view_mode: str | None = None,
    entities: bool = False,
    width: int = 200,
) -> str:
    """``render`` as plain text (what the dump prints when its output is not a terminal)."""
    buf = io.StringIO()
    console = plain_console(buf, width)
    console.print(render(batch, i, view_mode=view_mode, entities=entities, ascii_only=True))
    return "\n".join(line.rstrip() for line in buf.getvalue().rstrip("\n").split("\n"))
