"""Every game declared in games.py is complete: each artefact the package and its tests keep per
game exists and agrees with the declaration. A new game (CONTRIBUTING.md, "Adding a game") is
done when this passes; each test names what is missing and the tool that records it.

Pure data: no procgen env is made here (the live tests hold the artefacts to procgen).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from golden import DATA_DIR, MODES, golden_name, load_states

from procgen_entities.engine.layout import load_known_layout, state_program
from procgen_entities.features import feature_space
from procgen_entities.games import (
    ACTION_LABELS,
    DISTRIBUTION_MODE_IDS,
    ENTITY_FIELDS,
    GAME_NAMES,
    GAMES,
    SPACE_TILE,
    default_caps,
    value_ranges,
)
from procgen_entities.glyphs import look

TESTS = Path(__file__).resolve().parent
MANIFEST = json.loads((DATA_DIR / "dump" / "manifest.json").read_text())
OBS_SPACES = json.loads((DATA_DIR / "obs_spaces.json").read_text())


def test_the_declarations_are_the_artefacts_games() -> None:
    """No artefact holds a game games.py does not declare, and games.py names every mode it uses."""
    assert set(OBS_SPACES) == set(GAME_NAMES)
    assert {entry["game"] for entry in MANIFEST.values()} == set(GAME_NAMES)
    recorded = resources.files("procgen_entities").joinpath("value_ranges.json").read_text()
    assert set(json.loads(recorded)) == set(GAME_NAMES)
    for game in GAMES.values():
        assert set(game.modes) <= set(DISTRIBUTION_MODE_IDS), game.name


@pytest.mark.parametrize("name", GAME_NAMES)
def test_value_ranges_cover_the_declaration(name: str) -> None:
    """value_ranges.json (tools/record_ranges.py) measured every field the game stores, and every
    id it saw is declared: entity types (or ignored ones) and tile classes (or empty space)."""
    game, recorded = GAMES[name], value_ranges(name)
    assert int(recorded["states"]) > 0
    ranges = recorded["ranges"]
    for field in ENTITY_FIELDS:
        assert f"entity.{field}" in ranges, field
    for scalar in game.trailer_scalars:
        assert f"trailer.{scalar}" in ranges, scalar
    for vector in game.trailer_vectors:
        assert any(k == f"vector.{vector}" or k.startswith(f"vector.{vector}.") for k in ranges)
    assert set(recorded["entity_types"]) <= set(game.entity_types) | set(game.ignored_types)
    tile_ids = {t for ids in game.tiles.values() for t in ids}
    assert set(recorded["tiles"]) <= tile_ids | {SPACE_TILE}
    assert set(default_caps(name)) == set(game.entity_types.values())
    for key, (lo, hi) in game.reachable.items():  # the source's ranges only widen the measured
        assert key in ranges and lo <= ranges[key][0] and ranges[key][1] <= hi, key


@pytest.mark.parametrize("name", GAME_NAMES)
def test_layout_has_the_class_and_every_member(name: str) -> None:
    """The committed layout table has the game's C++ class (Game.cpp_class), and the engine's
    write program finds a member of the right kind for every trailer field (engine/dwarf.py)."""
    layout = load_known_layout()
    game = GAMES[name]
    assert layout.class_of(name) == game.cpp_class
    assert game.cpp_class in layout.classes
    assert len(state_program(layout, game)) > 0  # LayoutError names a missing member


@pytest.mark.parametrize("name", GAME_NAMES)
@pytest.mark.parametrize("mode", MODES)
def test_golden_states_are_recorded(name: str, mode: str) -> None:
    """tests/data/<game>-<mode>.{states,expected}.npz (tools/record_golden.py)."""
    base = golden_name(name, mode)
    meta, states = load_states(DATA_DIR / f"{base}.states.npz")
    assert states and str(meta["game"]) == name and str(meta["mode"]) == mode
    assert (DATA_DIR / f"{base}.expected.npz").exists()


@pytest.mark.parametrize("name", GAME_NAMES)
def test_dump_fixture_and_snapshot(name: str) -> None:
    """A viewer state in tests/data/dump/ (tools/record_dump_states.py) and its snapshot in
    tests/snapshots/dump/ (UPDATE_SNAPSHOTS=1 pytest tests/test_dump.py)."""
    entries = [key for key, entry in MANIFEST.items() if entry["game"] == name]
    assert entries, f"{name}: no dump state in the manifest"
    for key in entries:
        assert (DATA_DIR / "dump" / f"{key}.state.gz").exists(), key
        assert (TESTS / "snapshots" / "dump" / f"{key}.txt").exists(), key


@pytest.mark.parametrize("name", GAME_NAMES)
def test_observation_space_is_pinned(name: str) -> None:
    """tests/data/obs_spaces.json (UPDATE_SNAPSHOTS=1 pytest tests/test_vec_env.py) holds the
    game's entity types and features as declared, its globals and procgen's actions."""
    pinned = OBS_SPACES[name]
    space = feature_space(name)
    assert pinned["global_features"] == space.global_features
    assert pinned["entities"] == {k: v.features for k, v in space.entities.items()}
    assert pinned["actions"] == list(ACTION_LABELS)


@pytest.mark.parametrize("name", GAME_NAMES)
def test_every_name_has_a_glyph(name: str) -> None:
    """The drawings (the viewer, the text levels) draw every entity type and tile class
    (glyphs.py LOOKS/GAME_LOOKS)."""
    game = GAMES[name]
    missing = [n for n in [*game.entity_types.values(), *game.tiles] if look(name, n) is None]
    assert not missing, f"{name}: no look for {missing}"
