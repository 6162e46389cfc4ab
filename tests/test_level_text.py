"""Text levels: level_from_text(level_to_text(s), base=s) keeps the grid and every entity for all
16 games; a drawing with a moved saw and a new wall becomes a state procgen restores and plays."""

from __future__ import annotations

import math
from typing import List

import numpy as np
import pytest
from conftest import GOLDEN_NAMES, load_golden

from procgen_entities import State, level_from_text, level_to_text
from procgen_entities.errors import UsageError


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_text_round_trip_keeps_grid_and_entities(name: str) -> None:
    for blob in load_golden(name).states:
        state = State.from_bytes(blob)
        text = level_to_text(state)
        h, w = state.grid.shape
        assert [len(line) for line in text.splitlines()] == [w] * h
        again = level_from_text(text, base=state)
        np.testing.assert_array_equal(again.grid, state.grid)
        for field in ("type", "x", "y"):
            np.testing.assert_array_equal(again.entities[field], state.entities[field])
        assert again.to_bytes(validate=False) == blob


def _cells(text: str) -> List[List[str]]:
    return [list(line) for line in text.splitlines()][::-1]  # [y][x], row 0 the bottom


def _text(cells: List[List[str]]) -> str:
    return "\n".join("".join(row) for row in cells[::-1]) + "\n"


def _drawn_coinrun() -> tuple[State, State, tuple[int, int], tuple[int, int]]:
    base = State.from_bytes(load_golden("coinrun-hard").states[0])
    cells = _cells(level_to_text(base))
    saw = next((x, y) for y, row in enumerate(cells) for x, c in enumerate(row) if c == "S")
    cells[saw[1]][saw[0]] = "."
    to = (saw[0] + 1, saw[1])
    assert cells[to[1]][to[0]] == "."
    cells[to[1]][to[0]] = "S"
    cells[1][3] = "#"  # a wall in front of the player
    return base, level_from_text(_text(cells), base=base), saw, to


def test_drawing_moves_an_entity_and_sets_tiles() -> None:
    base, drawn, saw, to = _drawn_coinrun()
    assert drawn.grid[1, 3] == 15 and base.grid[1, 3] == 100
    saws = drawn.entities[drawn.entities["type"] == 2]
    tiles = {(math.floor(s["x"]), math.floor(s["y"])) for s in saws}
    assert to in tiles and saw not in tiles
    assert len(saws) == int((base.entities["type"] == 2).sum())
    moved = saws[[(math.floor(s["x"]), math.floor(s["y"])) == to for s in saws]][0]
    assert (moved["x"], moved["y"]) == (to[0] + 0.5, to[1] + 0.5)
    assert moved["rx"] == base.entities[base.entities["type"] == 2][0]["rx"]  # defaults kept
    assert level_to_text(drawn).splitlines()[-2][3] == "#"


def test_bad_drawings_are_refused() -> None:
    base = State.from_bytes(load_golden("coinrun-hard").states[0])
    text = level_to_text(base)
    with pytest.raises(UsageError, match="rows"):
        level_from_text(text + "#" * 64 + "\n", base=base)
    with pytest.raises(UsageError, match="characters"):
        level_from_text(text.replace("\n", "#\n", 1), base=base)
    with pytest.raises(UsageError, match="legend"):
        level_from_text(text.replace(".", "@", 1), base=base)
    with pytest.raises(UsageError, match="exactly one player"):
        level_from_text(text.replace("A", "."), base=base)
    with pytest.raises(UsageError, match="exactly one player"):
        level_from_text(text.replace("#A..", "#AA."), base=base)
    assert not (base.entities["type"] == 20).any()
    with pytest.raises(UsageError, match="no Crate"):
        level_from_text(text.replace("#A..", "#AC."), base=base)


@pytest.mark.live
def test_drawn_level_plays_in_procgen() -> None:
    from procgen import ProcgenGym3Env

    _, drawn, _, _ = _drawn_coinrun()
    blob = drawn.to_bytes()  # validated: trial restore included
    env = ProcgenGym3Env(num=1, env_name="coinrun", distribution_mode="hard")
    env.callmethod("set_state", [blob])
    assert env.callmethod("get_state")[0] == blob
    for _ in range(50):
        env.act(np.array([7]))  # right: the player walks into the drawn wall
        env.observe()
    state = State.from_bytes(env.callmethod("get_state")[0])
    assert state.scalars["cur_time"] == 50  # the episode goes on
    assert state.entities["x"][0] < 3.0  # stopped by the wall at x = 3


@pytest.mark.live
def test_engines_agree_on_a_drawn_level() -> None:
    """The headless engine and procgen's own stepping give the same observations for 500 random
    steps from a drawn level (restored with set_states)."""
    from test_restore import features, move

    from procgen_entities.entity_gym.vec_env import ProcgenVecEnv

    _, drawn, _, _ = _drawn_coinrun()
    blob = drawn.to_bytes(validate=False)  # set_states validates it
    low, high = drawn.scalars["level_seed_low"], drawn.scalars["level_seed_high"]
    acts = np.random.default_rng(1).integers(0, 15, size=(500, 2))
    runs = {}
    for engine in ("headless", "get_state"):
        with ProcgenVecEnv(
            "coinrun", 2, seed=2, engine=engine, distribution_mode="hard", start_level=low,
            num_levels=high - low,
        ) as env:  # fmt: skip
            assert env.engine == engine
            space = env.obs_space()
            env.reset(space)
            env.set_states([blob, blob])
            runs[engine] = [features(env.act(move(a), space)) for a in acts]
    for step, (a, b) in enumerate(zip(runs["headless"], runs["get_state"])):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=f"step {step} {name}")
