"""The class image around the player (``grid_centre="player"``, issue 36): checked cell for cell
against an image built here in numpy from the states procgen holds (their tile grid, the
game's tile classes, the entities' cells), on both engines and over steps of random play, and
the options that cannot work refused."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List

import numpy as np
import numpy.typing as npt
import pytest

from procgen_entities._native import _collector
from procgen_entities.agents.checkpoint import Checkpoint, EnvConfig
from procgen_entities.errors import ProcgenEntitiesError, UsageError
from procgen_entities.games import get_game
from procgen_entities.gymnasium.mirrored import MirroredLevels
from procgen_entities.gymnasium.vector import EntityVectorEnv
from procgen_entities.observation import GRID_CENTRES, ObservationSpec
from procgen_entities.state import State
from procgen_entities.tilemap import tile_class_names

N = 4


def _classes(game: str) -> Dict[int, int]:
    """procgen tile id -> image value (class index + 1), from the game's declared tiles."""
    info = get_game(game)
    names = tile_class_names(game)
    return {tile: k + 1 for k, name in enumerate(names) for tile in info.tiles[name]}


def _expected(blob: bytes, game: str, size: int, marks: List[str]) -> npt.NDArray[np.uint8]:
    """The size x size image around the player's cell of one state: tiles as classes, outside
    the world the out-of-bounds tile's class, then each marked entity's cell (the largest mark
    where several meet; the games used here show the whole level, so every entity is in view)."""
    state = State.from_bytes(blob, game)
    info, lut = get_game(game), _classes(game)
    height, width = state.grid.shape
    e = state.entities
    x0 = int(np.floor(e["x"][0])) - (size - 1) // 2
    y0 = int(np.floor(e["y"][0])) - (size - 1) // 2
    image = np.zeros((size, size), dtype=np.uint8)
    for row in range(size):
        for col in range(size):
            x, y = x0 + col, y0 + size - 1 - row
            inside = 0 <= x < width and 0 <= y < height
            tile = int(state.grid[y, x]) if inside else info.out_of_bounds_tile
            image[row, col] = lut.get(tile, 0)
    base = len(tile_class_names(game)) + 1
    for kind, x, y in zip(e["type"], e["x"], e["y"]):
        name = info.entity_types.get(int(kind))
        if name not in marks:
            continue
        col, row = int(np.floor(x)) - x0, size - 1 - (int(np.floor(y)) - y0)
        if 0 <= col < size and 0 <= row < size:
            image[row, col] = max(image[row, col], base + marks.index(name))
    return image


@pytest.mark.parametrize("engine", ["headless", "get_state"])
@pytest.mark.parametrize("game", ["maze", "heist"])
def test_the_image_around_the_player_is_the_states_cells(game: str, engine: str) -> None:
    env = EntityVectorEnv(game, N, grid=True, grid_entities=True, grid_centre="player",
                          distribution_mode="easy", engine=engine, seed=11,
                          autoreset_mode="SameStep")  # fmt: skip
    rng = np.random.default_rng(3)
    obs, _ = env.reset(seed=11)
    size = obs["grid"].shape[-1]
    marks, moved = list(env.grid_marks), 0
    try:
        for _ in range(40):
            for k, blob in enumerate(env.get_states()):
                want = _expected(blob, game, size, marks)
                np.testing.assert_array_equal(obs["grid"][k], want)
                # the player's mark is the image's middle cell, wherever the player is
                assert obs["grid"][k][size // 2, (size - 1) // 2] == want.max()
            before = [State.from_bytes(b, game).entities["x"][0] for b in env.get_states()]
            obs, *_ = env.step(rng.integers(0, 15, size=N))
            after = [State.from_bytes(b, game).entities["x"][0] for b in env.get_states()]
            moved += sum(a != b for a, b in zip(after, before))
    finally:
        env.close()
    assert moved > 0  # the player moved, so the crop moved with it


def test_the_camera_image_is_unchanged_by_default() -> None:
    kwargs: Dict[str, Any] = dict(grid=True, grid_entities=True, distribution_mode="easy", seed=5)
    with EntityVectorEnv("maze", N, **kwargs) as camera:
        with EntityVectorEnv("maze", N, grid_centre="camera", **kwargs) as named:
            a, _ = camera.reset(seed=5)
            b, _ = named.reset(seed=5)
            np.testing.assert_array_equal(a["grid"], b["grid"])
        with EntityVectorEnv("maze", N, grid_centre="player", **kwargs) as player:
            c, _ = player.reset(seed=5)
    # maze's camera is the level's middle and the player starts in a corner: the images differ
    assert not np.array_equal(a["grid"], c["grid"])
    assert a["grid"].shape == c["grid"].shape


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(grid=True, grid_centre="agent"), "grid_centre must be one of"),
        (dict(grid=True, grid_centre=["player"]), "grid_centre must be one of"),
        (dict(grid=False, grid_centre="player"), "needs grid=True"),
    ],
)
def test_bad_grid_centres_are_refused(kwargs: Dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        EntityVectorEnv("maze", 2, **kwargs)


def test_an_even_image_around_the_player_does_not_mirror() -> None:
    # climber's square is 16 cells: no middle column for the mirror to keep the player on
    with EntityVectorEnv.for_training("climber", 2, grid=True, grid_centre="player") as env:
        assert env.single_observation_space["grid"].shape[-1] % 2 == 0
        with pytest.raises(UsageError, match="odd sizes"):
            MirroredLevels(env, 0.5)


def test_env_json_records_the_centre_only_where_set(tmp_path: Any) -> None:
    camera = EnvConfig(game="maze", grid=True, grid_entities=True)
    assert "grid_centre" not in camera.record()  # committed checkpoints' env.json unchanged
    player = EnvConfig(game="maze", grid=True, grid_entities=True, grid_centre="player")
    Checkpoint(env=player).save(tmp_path)
    loaded = Checkpoint.load(tmp_path)
    assert loaded.env.grid_centre == "player"
    assert loaded.env.env_kwargs()["grid_centre"] == "player"


def test_the_native_builder_refuses_an_unknown_centre() -> None:
    spec = ObservationSpec.padded("maze", 2, window=25, grid=True, grid_centre="player")
    args = spec.builder_args()
    assert args.image_centre == GRID_CENTRES["player"] != GRID_CENTRES["camera"]
    for bad in (len(GRID_CENTRES), -1):  # past the C enum: the spec check, not a crash
        with pytest.raises(ProcgenEntitiesError):
            _collector.ObservationBuilder(dataclasses.replace(args, image_centre=bad))


# ---- grid_size: the image's cells a side ----


def test_a_wide_image_around_the_player_is_the_states_cells_and_the_whole_level() -> None:
    # maze's world is 15 cells a side in easy mode (maze.cpp choose_world_dim): 29 cells around
    # the player hold all of it from any cell, corners included
    env = EntityVectorEnv("maze", N, grid=True, grid_entities=True, grid_centre="player",
                          grid_size=29, distribution_mode="easy", seed=7,
                          autoreset_mode="SameStep")  # fmt: skip
    rng = np.random.default_rng(5)
    try:
        obs, _ = env.reset(seed=7)
        assert obs["grid"].shape == (N, 29, 29)
        assert env.single_observation_space["grid"].shape == (29, 29)
        marks = list(env.grid_marks)
        for _ in range(25):
            for k, blob in enumerate(env.get_states()):
                want = _expected(blob, "maze", 29, marks)
                np.testing.assert_array_equal(obs["grid"][k], want)
                state = State.from_bytes(blob, "maze")
                # every cell of the level is in the image: the player's mark is the only one
                # of its value, and the image holds as many in-level cells as the level has
                assert (want == want.max()).sum() == 1
                assert _in_level_cells(state, 29) == state.grid.size
            obs, *_ = env.step(rng.integers(0, 15, size=N))
    finally:
        env.close()


def _in_level_cells(state: State, size: int) -> int:
    """How many of the level's cells a size x size square around the player's cell covers."""
    height, width = state.grid.shape
    x0 = int(np.floor(state.entities["x"][0])) - (size - 1) // 2
    y0 = int(np.floor(state.entities["y"][0])) - (size - 1) // 2
    cols = max(0, min(width, x0 + size) - max(0, x0))
    rows = max(0, min(height, y0 + size) - max(0, y0))
    return cols * rows


@pytest.mark.parametrize("extra", [4, -4])
def test_a_camera_image_of_another_size_is_the_camera_square_centred(extra: int) -> None:
    kwargs: Dict[str, Any] = dict(grid=True, grid_entities=True, distribution_mode="easy", seed=3)
    with EntityVectorEnv("maze", N, **kwargs) as camera:
        a, _ = camera.reset(seed=3)
        side = a["grid"].shape[-1]
        with EntityVectorEnv("maze", N, grid_size=side + extra, **kwargs) as sized:
            b, _ = sized.reset(seed=3)
    assert b["grid"].shape == (N, side + extra, side + extra)
    m = abs(extra) // 2
    if extra > 0:  # padded with 0 (empty) on every side
        np.testing.assert_array_equal(b["grid"][:, m:-m, m:-m], a["grid"])
        inner = np.zeros(b["grid"].shape, dtype=bool)
        inner[:, m:-m, m:-m] = True
        assert not b["grid"][~inner].any()
    else:  # cut evenly
        np.testing.assert_array_equal(b["grid"], a["grid"][:, m:-m, m:-m])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(grid=True, grid_size=0), r"grid_size must be in \[1, 256\]"),
        (dict(grid=True, grid_size=257), r"grid_size must be in \[1, 256\]"),
        (dict(grid=True, grid_size=-3), r"grid_size must be in \[1, 256\]"),
        (dict(grid=True, grid_size="29"), "grid_size must be an int"),
        (dict(grid=True, grid_size=29.0), "grid_size must be an int"),
        (dict(grid=True, grid_size=True), "grid_size must be an int"),
        (dict(grid=False, grid_size=29), "needs grid=True"),
    ],
)
def test_bad_grid_sizes_are_refused_before_procgen(kwargs: Dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        EntityVectorEnv("maze", 2, **kwargs)


def test_env_json_records_the_size_only_where_set(tmp_path: Any) -> None:
    plain = EnvConfig(game="maze", grid=True, grid_entities=True, grid_centre="player")
    assert "grid_size" not in plain.record()  # committed checkpoints' env.json unchanged
    wide = dataclasses.replace(plain, grid_size=29)
    Checkpoint(env=wide).save(tmp_path)
    loaded = Checkpoint.load(tmp_path)
    assert loaded.env.grid_size == 29
    assert loaded.env.record()["grid_size"] == 29


@pytest.mark.parametrize("size, grid", [(0, True), (29.0, True), ("29", True), (29, False)])
def test_a_recipe_refuses_a_bad_grid_size(size: Any, grid: bool) -> None:
    from procgen_entities.games import Recipe

    with pytest.raises(UsageError, match="grid_size"):
        Recipe(grid=grid, grid_size=size)
