"""parse_states (C) == reference parser == recorded expected outputs, on golden procgen states."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import Golden, assert_arrays_identical, assert_batches_identical, load_golden
from golden import batch_to_arrays

from procgen_entities import ENTITY_FIELDS, GAMES, StateBatch, parse_state, parse_states
from procgen_entities._native._parser import SCALAR_KINDS, SCALAR_NAMES
from procgen_entities.reference import HEADER_SCALARS, reference_parse_states

_KIND_DTYPES = {"i": np.int32, "f": np.float32, "b": np.bool_}


def test_c_parse_equals_recorded(golden: Golden) -> None:
    assert_batches_identical(parse_states(list(golden.states)), golden.expected)


def test_reference_parse_equals_recorded(golden: Golden) -> None:
    assert_batches_identical(reference_parse_states(list(golden.states)), golden.expected)


def test_recorded_data_covers_resets(golden: Golden) -> None:
    """Each golden file has step 0, later steps, and (where reachable) post-done states."""
    steps = golden.meta["step"]
    assert 0 in steps and steps.max() > 0
    post_done = golden.meta["gym3_first"] & (steps > 0)
    assert post_done.any(), f"{golden.name}: no state right after an episode ended"


def test_reward_and_done_match_gym3(golden: Golden) -> None:
    batch = parse_states(list(golden.states))
    assert_arrays_identical(batch.reward, golden.meta["gym3_reward"], "reward")
    assert_arrays_identical(batch.done, golden.meta["gym3_first"], "done")
    # Right after a reset the new episode has not taken a step yet.
    assert np.all(batch.cur_time[batch.done] == 0)


def test_dtypes_and_shapes(golden: Golden) -> None:
    batch = parse_states(list(golden.states))
    game = GAMES[golden.game]
    n = len(golden.states)
    assert isinstance(batch, StateBatch) and len(batch) == n and batch.game == golden.game
    assert batch.reward.dtype == np.float32 and batch.done.dtype == np.bool_
    assert batch.level_complete.dtype == np.bool_
    assert batch.cur_time.dtype == np.int32 and batch.level_seed.dtype == np.int32
    assert batch.entities.dtype == np.float32
    assert batch.entities.shape == (int(batch.entity_counts.sum()), len(ENTITY_FIELDS))
    assert batch.entity_counts.dtype == np.int64 and batch.sizes.dtype == np.int64
    assert batch.sizes.tolist() == [len(s) for s in golden.states]
    assert batch.grid is not None and batch.grid.dtype == np.int32
    height, width = batch.grid.shape[1:]
    assert np.all(batch.scalars["main_width"] == width)
    assert np.all(batch.scalars["main_height"] == height)
    assert list(batch.scalars) == list(SCALAR_NAMES)
    for name, kind in zip(SCALAR_NAMES, SCALAR_KINDS):
        assert batch.scalars[name].dtype == _KIND_DTYPES[kind], name
    assert sorted(batch.extras) == sorted(game.trailer_scalars)
    assert sorted(batch.vectors) == sorted(game.trailer_vectors)
    for name, kind in game.trailer:
        if kind in _KIND_DTYPES:
            assert batch.extras[name].dtype == _KIND_DTYPES[kind], name
        else:
            assert batch.vector_counts[name].dtype == np.int64
            assert len(batch.vectors[name]) == batch.vector_counts[name].sum()
    # Entity 0 of every state is the player.
    assert np.all(batch.field("type")[batch.entity_offsets[:-1]] == 0)


def test_reference_scalar_table_matches_c_names_and_kinds() -> None:
    """Both parsers' header/base tables: same names, same kinds (written independently)."""
    assert dict(HEADER_SCALARS) == dict(zip(SCALAR_NAMES, SCALAR_KINDS))
    assert len(HEADER_SCALARS) == len(SCALAR_NAMES) == 60


def test_states_parse_alone_as_in_a_batch(golden: Golden) -> None:
    batch = parse_states(list(golden.states))
    for i, state in enumerate(golden.states):
        single = parse_state(state)
        assert len(single) == 1
        assert_arrays_identical(single.entities, batch.state_entities(i), f"entities[{i}]")
        assert_arrays_identical(single.grid[0], batch.grid[i], f"grid[{i}]")
        for name in batch.vectors:
            assert_arrays_identical(single.vectors[name], batch.vector(name, i), name)
        for name, values in batch.scalars.items():
            assert_arrays_identical(single.scalars[name][0], values[i], name)
        for name, values in batch.extras.items():
            assert_arrays_identical(single.extras[name][0], values[i], name)


@pytest.mark.parametrize("kind", ["bytearray", "memoryview", "numpy"])
def test_bytes_like_inputs(kind: str) -> None:
    golden = load_golden("starpilot-hard")
    convert = {
        "bytearray": bytearray,
        "memoryview": memoryview,
        "numpy": lambda s: np.frombuffer(s, dtype=np.uint8),
    }[kind]
    states = [convert(s) for s in golden.states]
    assert_batches_identical(parse_states(states), golden.expected)
    assert_batches_identical(reference_parse_states(states), golden.expected)


FIELD_SUBSETS = [
    ("x", "y"),
    ("type", "x", "y", "vx", "vy", "rx", "ry"),
    ("health", "type", "will_erase", "theta"),
    tuple(reversed(ENTITY_FIELDS)),
    ("x", "x"),
    (),
]


@pytest.mark.parametrize("fields", FIELD_SUBSETS, ids=lambda f: ",".join(f) or "none")
@pytest.mark.parametrize("name", ["coinrun-hard", "bossfight-easy", "starpilot-easy"])
def test_entity_field_subsets(name: str, fields: tuple) -> None:
    golden = load_golden(name)
    full = golden.expected["entities"]
    expected = full[:, [ENTITY_FIELDS.index(f) for f in fields]].reshape(len(full), len(fields))
    for parse in (parse_states, reference_parse_states):
        batch = parse(list(golden.states), entity_fields=list(fields))
        assert batch.entity_fields == fields
        assert_arrays_identical(batch.entities, expected, f"{parse.__name__} entities")
        assert_arrays_identical(batch.entity_counts, golden.expected["entity_counts"], "counts")
        for f in fields:
            assert_arrays_identical(batch.field(f), full[:, ENTITY_FIELDS.index(f)], f)


def test_grid_false(golden: Golden) -> None:
    expected = {k: v for k, v in golden.expected.items() if k != "grid"}
    for parse in (parse_states, reference_parse_states):
        batch = parse(list(golden.states), grid=False)
        assert batch.grid is None
        assert_batches_identical(batch_to_arrays(batch), expected)


def test_game_argument(golden: Golden) -> None:
    batch = parse_states(list(golden.states), game=golden.game)
    assert_batches_identical(batch, golden.expected)


def test_int_entity_fields_are_exact() -> None:
    """i32 fields become float32 by value (not by reinterpreting their bits)."""
    golden = load_golden("starpilot-easy")
    batch = parse_states(list(golden.states))
    for name in ("type", "fire_time", "spawn_time", "expire_time", "life_time"):
        column = batch.field(name)
        assert np.all(column == np.round(column)), name
    assert set(np.unique(batch.field("type")).tolist()) <= {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 54}
    # The spawners vector holds whole entity records, sorted by spawn_time descending.
    spawners = batch.vector("spawners", 0)
    assert spawners.shape[1] == len(ENTITY_FIELDS) and len(spawners) > 0
    spawn_time = spawners[:, ENTITY_FIELDS.index("spawn_time")]
    assert np.all(np.diff(spawn_time) <= 0)


# ---- known tiles and orientation ----

WALL_TILES = {"coinrun": (15, 16), "climber": (15, 16), "jumper": (6, 7), "ninja": (20,)}
WALL_TOP = {"coinrun": 16, "climber": 16, "jumper": 7}


def _player_tile(batch: StateBatch, i: int) -> tuple:
    player = batch.state_entities(i)[0]
    return int(np.floor(player[batch.entity_fields.index("y")])), int(
        np.floor(player[batch.entity_fields.index("x")])
    )


@pytest.mark.parametrize("mode", ["easy", "hard"])
@pytest.mark.parametrize("game", ["coinrun", "climber", "jumper", "ninja"])
def test_platformer_tiles_and_orientation(game: str, mode: str) -> None:
    golden = load_golden(f"{game}-{mode}")
    batch = parse_states(list(golden.states))
    walls = np.isin(batch.grid, WALL_TILES[game])
    for i in range(len(batch)):
        y, x = _player_tile(batch, i)
        assert not walls[i, y, x], f"state {i}: player inside a wall at tile ({x}, {y})"
        if batch.cur_time[i] == 0 and game != "jumper":
            # A new episode starts with the agent standing on the floor (y grows upward).
            assert walls[i, y - 1, x], f"state {i}: no floor below the starting player"
    if game in WALL_TOP:
        # A wall-top tile has no wall directly above it: that only holds with row 0 at the bottom.
        tops = batch.grid == WALL_TOP[game]
        assert tops.any()
        above = np.zeros_like(tops)
        above[:, :-1, :] = walls[:, 1:, :]
        assert not np.any(tops & above)
        if game != "climber":  # climber's platforms are one tile thick
            flipped_above = np.zeros_like(tops)
            flipped_above[:, 1:, :] = walls[:, :-1, :]
            assert np.any(tops & flipped_above), "the check above could not tell up from down"
    if game in ("coinrun", "climber"):
        # Row 0 is the floor: all walls. The side columns are walls too.
        assert walls[:, 0, :].all()
        assert walls[:, :, 0].all() and walls[:, :, -1].all()
        # ... and the top row is solid wall (15) while the floor row has wall tops (16).
        assert np.all(batch.grid[:, -1, :] == 15)
        assert np.all((batch.grid[:, 0, :] == 16).any(axis=1))


@pytest.mark.parametrize("mode", ["easy", "hard"])
def test_coinrun_goal_and_start(mode: str) -> None:
    golden = load_golden(f"coinrun-{mode}")
    batch = parse_states(list(golden.states))
    for i in range(len(batch)):
        grid = batch.grid[i]
        assert np.count_nonzero(grid == 1) >= 1, "the goal tile (1) is missing"
        goal_x = int(np.argwhere(grid == 1)[:, 1].max())
        # Every column right of the goal is solid wall.
        assert np.all(grid[:, goal_x + 1 :] == 15)
        assert set(np.unique(grid).tolist()) <= {1, 15, 16, 17, 18, 19, 100}
    start = batch.cur_time == 0
    assert start.any()
    player = batch.entities[batch.entity_offsets[:-1]]
    assert np.all(player[start, ENTITY_FIELDS.index("x")] == 1.5)


@pytest.mark.parametrize("mode", ["easy", "hard"])
def test_ninja_start_position(mode: str) -> None:
    batch = parse_states(list(load_golden(f"ninja-{mode}").states))
    player = batch.entities[batch.entity_offsets[:-1]]
    start = batch.cur_time == 0
    assert start.any()
    assert np.all(player[start][:, :2] == [1.5, 32.5])


@pytest.mark.parametrize("mode", ["easy", "hard"])
def test_maze_has_one_goal_and_player_on_floor(mode: str) -> None:
    batch = parse_states(list(load_golden(f"maze-{mode}").states))
    assert np.all(batch.entity_counts == 1)
    for i in range(len(batch)):
        assert np.count_nonzero(batch.grid[i] == 2) == 1
        y, x = _player_tile(batch, i)
        assert batch.grid[i, y, x] != 51


@pytest.mark.parametrize("mode", ["easy", "hard"])
def test_chaser_trailer_vectors_match_grid(mode: str) -> None:
    """is_space_vec is in grid storage order (y*W + x); free_cells are its 1-positions."""
    batch = parse_states(list(load_golden(f"chaser-{mode}").states))
    cells = batch.grid.shape[1] * batch.grid.shape[2]
    for i in range(len(batch)):
        space = batch.vector("is_space_vec", i)
        assert space.dtype == np.bool_ and len(space) == cells
        free_cells = np.flatnonzero(space).astype(np.int32)
        assert_arrays_identical(batch.vector("free_cells", i), free_cells, "free_cells")
        assert_arrays_identical(space, batch.grid[i].reshape(-1) != 5, "is_space_vec vs walls")


@pytest.mark.parametrize(
    "game, vector, count_field",
    [("heist", "has_keys", "num_keys"), ("bossfight", "attack_modes", "num_rounds")],
)
@pytest.mark.parametrize("mode", ["easy", "hard"])
def test_trailer_vector_lengths(game: str, vector: str, count_field: str, mode: str) -> None:
    batch = parse_states(list(load_golden(f"{game}-{mode}").states))
    assert_arrays_identical(batch.vector_counts[vector], batch.extras[count_field].astype(np.int64))


@pytest.mark.parametrize("mode", ["easy", "hard"])
def test_plunder_vector_lengths(mode: str) -> None:
    batch = parse_states(list(load_golden(f"plunder-{mode}").states))
    expected = {"lane_directions": 5, "target_bools": 6, "image_permutation": 6, "lane_vels": 5}
    for name, length in expected.items():
        assert np.all(batch.vector_counts[name] == length), name
