"""Text rendering of one parsed procgen state: tilemap + entities as characters, a legend, an
entity table. Used by ``python -m procgen_entities.dump``.

Conventions (see docs/state-format.md §2): y grows upward, grid index = y*W + x, so
the highest row is printed first. An entity is drawn in tile (floor(x), floor(y)); wall-like
entities (dodgeball walls, fruitbot barriers, leaper logs, ...) are drawn over every tile whose
centre lies inside their extent ``[x-rx, x+rx] x [y-ry, y+ry]``.

The glyph of each tile id and entity type (``TILE_GLYPHS``, ``ENTITY_GLYPHS``, ``FILL_TYPES``,
derived from games.py and the looks ``LOOKS``, ``GAME_LOOKS``, ``TILE_REFINEMENTS``) is declared in
procgen_entities/glyphs.py, which the text levels read too; this module re-exports those names
and adds the glyphs that depend on the state drawn (``_VARIANTS``).
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

from procgen_entities.errors import UsageError
from procgen_entities.games import DISTRIBUTION_MODE_IDS, ENTITY_FIELDS, GAMES, Game

# The glyph tables are the core's (glyphs.py); these names stay importable from here.
from procgen_entities.glyphs import (
    ENTITY_GLYPHS,
    FILL_TYPES,
    GAME_LOOKS,
    LETHAL_STYLE,
    LOOKS,
    TILE_GLYPHS,
    TILE_REFINEMENTS,
    Glyph,
    Look,
    glyph_of,
    look,
)
from procgen_entities.parse import StateBatch
from procgen_entities.tilemap import Window

__all__ = [
    "DISTRIBUTION_MODES",
    "ENTITY_GLYPHS",
    "FILL_TYPES",
    "GAME_LOOKS",
    "Glyph",
    "LOOKS",
    "Look",
    "TILE_GLYPHS",
    "TILE_REFINEMENTS",
    "View",
    "cell_image",
    "choose_view",
    "follows_agent",
    "legend",
    "look",
    "render",
    "render_text",
]

#: distribution_mode header value -> name.
DISTRIBUTION_MODES: Mapping[int, str] = {code: name for name, code in DISTRIBUTION_MODE_IDS.items()}


def _default(game: str, name: str) -> Glyph:
    glyph = glyph_of(game, name)
    if glyph is None:
        raise KeyError(f"{game}: no look for {name!r}; add it to LOOKS or GAME_LOOKS")
    return glyph


_OOB_BLANK = Glyph(" ", "OutOfBounds", "")

# State-dependent glyphs (_VARIANTS) and their legend entries (_VARIANT_LEGEND).
_FISH_SMALLER = _default("bigfish", "Fish")
_FISH_BIGGER = Glyph("F", "Fish", LETHAL_STYLE, note="bigger: lethal")
_ENEMY = _default("chaser", "Enemy")
_ENEMY_EDIBLE = Glyph("e", "Enemy", "bold bright_blue", note="edible")
_SHIP = _default("plunder", "Ship")
_SHIP_TARGET = Glyph("T", "Ship", "bold bright_green", note="target")
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
        return _FISH_BIGGER
    return _FISH_SMALLER


def _chaser_enemy(ctx: _Context, row: np.ndarray) -> Glyph:
    cur_time = int(ctx.batch.cur_time[ctx.index])
    if cur_time - ctx.extra("eat_time") < ctx.extra("eat_timeout"):
        return _ENEMY_EDIBLE
    return _ENEMY


def _heist_theme(chars: Sequence[str], kind: str) -> Callable[[_Context, np.ndarray], Glyph]:
    themed = [
        Glyph(c, kind, s, note=f"colour {t}") for t, (c, s) in enumerate(zip(chars, _HEIST_STYLES))
    ]

    def pick(ctx: _Context, row: np.ndarray) -> Glyph:
        theme = int(row[_F["image_theme"]])
        if 0 <= theme < len(themed):
            return themed[theme]
        return Glyph("?", kind, "bold", note=f"colour {theme}")

    return pick


def _plunder_ship(ctx: _Context, row: np.ndarray) -> Glyph:
    targets = ctx.batch.vector("target_bools", ctx.index)
    theme = int(row[_F["image_theme"]])
    if 0 <= theme < len(targets) and targets[theme]:
        return _SHIP_TARGET
    return _SHIP


#: (game, entity type name) -> glyph chooser for state-dependent glyphs.
_VARIANTS: Mapping[Tuple[str, str], Callable[[_Context, np.ndarray], Glyph]] = {
    ("bigfish", "Fish"): _bigfish_fish,
    ("chaser", "Enemy"): _chaser_enemy,
    ("heist", "LockedDoor"): _heist_theme(_HEIST_DOORS, "LockedDoor"),
    ("heist", "Key"): _heist_theme(_HEIST_KEYS, "Key"),
    ("plunder", "Ship"): _plunder_ship,
}

#: Extra legend entries for the variants: game -> glyphs (shown after the defaults).
_VARIANT_LEGEND: Mapping[str, Tuple[Glyph, ...]] = {
    "bigfish": (_FISH_BIGGER,),
    "chaser": (_ENEMY_EDIBLE,),
    "plunder": (_SHIP_TARGET,),
}


def _legend_glyphs(game: str) -> List[Glyph]:
    glyphs: List[Glyph] = list(TILE_GLYPHS[game].values())
    if game == "heist":
        glyphs.append(_default(game, "Player"))
        glyphs.append(Glyph("/".join(_HEIST_KEYS), "Key", "bold", note="colour 0/1/2"))
        glyphs.append(Glyph("/".join(_HEIST_DOORS), "LockedDoor", "bold", note="colour 0/1/2"))
        glyphs.append(_default(game, "Exit"))
    else:
        glyphs.extend(ENTITY_GLYPHS[game].values())
        glyphs.extend(_VARIANT_LEGEND.get(game, ()))
    seen, out = set(), []
    for g in glyphs:
        if (g.char, g.label) not in seen:
            seen.add((g.char, g.label))
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
        item.append(" " + g.label)
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
        raise UsageError(f"view mode must be 'window' or 'full', not {mode!r}")
    camera = (float(batch.scalars[k][i]) for k in ("center_x", "center_y", "view_dim"))
    try:
        crop = Window.from_camera(*camera)
    except ValueError:  # no usable camera in this state: show the whole grid
        return View(0, 0, w, h, "full")
    return View(crop.x0, crop.y0, crop.width, crop.height, "window")


# ----------------------------------------------------------------------------------------------
# Drawing


def _entity_glyph(game: Game, ctx: _Context, row: np.ndarray) -> Glyph | None:
    """The glyph of one entity, or None if it is not drawn (ignored, HUD, hidden)."""
    etype = int(row[_F["type"]])
    if etype in game.ignored_types or row[_F["use_abs_coords"]] != 0:
        return None
    name = game.entity_types.get(etype)
    if name is not None:
        if name in game.hidden_unless and not ctx.extra(game.hidden_unless[name]):
            return None
        variant = _VARIANTS.get((game.name, name))
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


def _tile_cells(batch: StateBatch, i: int, view: View) -> List[List[Glyph]]:
    """cells[r][c]: the tile glyph at world (view.x0 + c, view.y0 + r), out of bounds included."""
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
    return cells


def _entity_glyphs(
    batch: StateBatch, i: int
) -> Tuple[List[Tuple[np.ndarray, Glyph]], List[Tuple[int, int, np.ndarray, Glyph]]]:
    """The entities drawn: those that fill their extent, and the points as (priority, index,
    row, glyph) so that sorting them draws the higher priorities last."""
    game = GAMES[batch.game]
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
    return filled, points


def _extent_cells(row: np.ndarray) -> Tuple[range, range] | None:
    """The cells (xs, ys) a filled entity covers (at least its centre's), None if not finite."""
    ex, ey, rx, ry = (float(row[_F[f]]) for f in ("x", "y", "rx", "ry"))
    if not all(map(math.isfinite, (ex, ey, rx, ry))):
        return None
    xs = range(math.ceil(ex - rx - 0.5), math.floor(ex + rx - 0.5) + 1)
    ys = range(math.ceil(ey - ry - 0.5), math.floor(ey + ry - 0.5) + 1)
    if len(xs) == 0:
        xs = range(math.floor(ex), math.floor(ex) + 1)
    if len(ys) == 0:
        ys = range(math.floor(ey), math.floor(ey) + 1)
    return xs, ys


def _cells(batch: StateBatch, i: int, view: View) -> List[List[Glyph]]:
    """cells[r][c]: the glyph at world (view.x0 + c, view.y0 + r)."""
    cells = _tile_cells(batch, i, view)
    assert batch.grid is not None
    h, w = batch.grid[i].shape
    filled, points = _entity_glyphs(batch, i)

    def put(x: int, y: int, glyph: Glyph) -> None:
        if 0 <= x < w and 0 <= y < h:
            c, r = x - view.x0, y - view.y0
            if 0 <= c < view.w and 0 <= r < view.h:
                cells[r][c] = glyph

    for row, glyph in filled:
        extent = _extent_cells(row)
        if extent is None:
            continue
        xs, ys = extent
        for yy in ys:
            for xx in xs:
                put(xx, yy, glyph)
    for _, _, row, glyph in sorted(points, key=lambda p: (p[0], p[1])):
        ex, ey = float(row[_F["x"]]), float(row[_F["y"]])
        if math.isfinite(ex) and math.isfinite(ey):
            put(math.floor(ex), math.floor(ey), glyph)
    return cells


def cell_image(batch: StateBatch, i: int = 0, *, view_mode: str | None = None) -> np.ndarray:
    """The map of ``render`` as an RGB image, one pixel per cell in the colour of its glyph
    ([h, w, 3] uint8, the highest row first): the entity view beside procgen's frames in a
    video."""
    from rich.style import Style

    colours: Dict[str, Tuple[int, int, int]] = {}

    def colour(style: str) -> Tuple[int, int, int]:
        if style not in colours:
            parsed = Style.parse(style).color if style else None
            if parsed is None:  # unstyled: the terminal's default foreground
                colours[style] = (255, 255, 255)
            else:
                rgb = parsed.get_truecolor()
                colours[style] = (rgb.red, rgb.green, rgb.blue)
        return colours[style]

    cells = _cells(batch, i, choose_view(batch, i, view_mode))
    image = np.array([[colour(g.style) for g in row] for row in cells], dtype=np.uint8)
    return image[::-1].reshape(len(cells), -1, 3)


def _all_fields(batch: StateBatch, i: int) -> np.ndarray:
    """State i's entities as [N, 31] in ENTITY_FIELDS order, whatever fields the batch holds."""
    ents = batch.state_entities(i)
    if tuple(batch.entity_fields) == ENTITY_FIELDS:
        return ents
    missing = [
        f for f in ("x", "y", "rx", "ry", "type", "use_abs_coords") if f not in batch.entity_fields
    ]
    if missing:
        raise UsageError(f"render needs entity fields {missing}; parse with all entity fields")
    out = np.zeros((len(ents), len(ENTITY_FIELDS)), dtype=np.float32)
    for j, name in enumerate(batch.entity_fields):
        out[:, _F[name]] = ents[:, j]
    return out


def header(batch: StateBatch, i: int = 0, view: View | None = None) -> Text:
    """One line: game, distribution mode, level seed, step, reward, done (and the view).

    ``reward`` and ``done`` are the last step's: ``done=1`` where the step that led here ended
    an episode (a terminal state, or the next level's first after procgen's reset). A fresh
    level's first state says 0: procgen's Game constructor sets ``done`` before any step (the
    gym3 ``first`` flag; procgen 0.10.7 src/game.cpp:35), so there only ``episode_done``, which
    a step sets to its ``done`` (:153) and which is 0 before one, tells the two apart."""
    mode_id = int(batch.scalars["distribution_mode"][i])
    mode = DISTRIBUTION_MODES.get(mode_id, f"mode{mode_id}")
    reward = float(batch.reward[i])
    fresh = int(batch.cur_time[i]) == 0 and not batch.scalars["episode_done"][i]
    done = int(bool(batch.done[i]) and not fresh)
    text = Text()
    text.append(batch.game, style="bold")
    text.append(
        f"  mode={mode}  level={int(batch.level_seed[i])}  step={int(batch.cur_time[i])}"
        f"  reward={reward:g}  done={done}"
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
