"""The old path of :mod:`procgen_entities.viewer.render` (moved from tools/): its names are a
contract, so this path re-exports them (tests/test_layers.py: they are the same objects)."""

from procgen_entities.viewer.render import (
    DISTRIBUTION_MODES,
    ENTITY_GLYPHS,
    FILL_TYPES,
    GAME_LOOKS,
    LOOKS,
    TILE_GLYPHS,
    TILE_REFINEMENTS,
    Glyph,
    Look,
    View,
    cell_image,
    choose_view,
    follows_agent,
    legend,
    look,
    render,
    render_text,
)

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
