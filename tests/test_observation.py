"""The native observation builder (csrc/observation.c) against the reference path.

EntityVectorEnv's step reads procgen's live games straight into its observation arrays in one
native call. The reference is the numpy assembly of the C gather, padding and tilemap kernels
(``EntityVectorEnv._observe_reference``) over procgen's own get_state bytes of the same step:
every array must be bit for bit the same, on all 16 games, through episode ends, in the padded
dict, the flat form and (SAME_STEP) the terminal observations.
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from procgen_entities import GAME_NAMES
from procgen_entities.games import get_game
from procgen_entities.gymnasium import EntityVectorEnv

pytestmark = pytest.mark.live

ENVS = 4
STEPS = 80


def reference(env: EntityVectorEnv) -> Any:
    """The reference observation of the current step, parsed from procgen's get_state bytes."""
    stepper = env.stepper
    stepper.step_values()  # the stepper's own read first, then procgen's bytes over it
    stepper.get_states()  # procgen's serializer, parsed into the state collector
    stepper.refresh()
    obs, dropped = env._observe_reference(stepper.collector)
    return obs, dropped


def assert_same(native: Dict[str, np.ndarray], expected: Dict[str, np.ndarray], at: str) -> None:
    assert native.keys() == expected.keys()
    for key in expected:
        assert native[key].dtype == expected[key].dtype, (at, key)
        np.testing.assert_array_equal(native[key], expected[key], err_msg=f"{at}: {key}")


def options(game: str) -> Dict[str, Any]:
    info = get_game(game)
    return {"tilemap": info.training_tilemap} if info.training_tilemap else {}


@pytest.mark.parametrize("game", GAME_NAMES)
def test_native_observation_is_the_reference(game: str) -> None:
    actions = np.random.default_rng(1).integers(0, 15, (STEPS, ENVS))
    ended = 0
    with EntityVectorEnv(game, ENVS, seed=3, num_levels=5, **options(game)) as env:
        obs, _ = env.reset()
        assert_same(obs, reference(env)[0], f"{game} reset")
        for t in range(STEPS):
            obs, _, terminated, truncated, info = env.step(actions[t])
            expected, dropped = reference(env)
            assert_same(obs, expected, f"{game} step {t}")
            np.testing.assert_array_equal(info["dropped_entities"], dropped)
            values = env.stepper.step_values().scalars
            np.testing.assert_array_equal(info["level_seed"], values["current_level_seed"])
            ended += int((terminated | truncated).sum())
    if game in ("bigfish", "starpilot", "chaser"):  # random play dies within STEPS here
        assert ended


@pytest.mark.parametrize("game", ["bigfish", "plunder", "starpilot"])
def test_terminal_observations_same_step(game: str) -> None:
    """SAME_STEP builds final_obs for the envs that ended only, from their terminal states."""
    actions = np.random.default_rng(2).integers(0, 15, (200, ENVS))
    seen = 0
    with EntityVectorEnv(
        game, ENVS, seed=5, autoreset_mode=AutoresetMode.SAME_STEP, **options(game)
    ) as env:
        env.reset()
        stepper = env.stepper
        for t in range(200):
            _, _, terminated, truncated, info = env.step(actions[t])
            ended = terminated | truncated
            if not ended.any():
                continue
            expected, _ = env._observe_reference(
                stepper.terminal, stepper.values_of(stepper.terminal)
            )
            for i in np.flatnonzero(ended):
                final = info["final_obs"][i]
                assert_same(final, {k: v[i] for k, v in expected.items()}, f"{game} final {t}")
                seen += 1
            assert all(info["final_obs"][i] is None for i in np.flatnonzero(~ended))
    assert seen


def test_flat_and_grid_forms() -> None:
    """flatten=True and grid=True (the class image) from the same builder."""
    actions = np.random.default_rng(4).integers(0, 15, (40, ENVS))
    with EntityVectorEnv("coinrun", ENVS, seed=7, tilemap="runs", grid=True, flatten=True) as env:
        env.reset()
        for t in range(40):
            flat, *_ = env.step(actions[t])
            expected, _ = reference(env)
            np.testing.assert_array_equal(flat, expected, err_msg=str(t))  # flat already


@pytest.mark.parametrize("game", ["climber", "coinrun", "ninja", "maze"])
def test_grid_entities_are_the_reference(game: str) -> None:
    """grid_entities=True: the C builder's marks are the numpy reference's, every step, and the
    marks sit where procgen's parsed states put each entity (an independent check: the cell of
    the player's own x, y in its own camera square holds the player's mark)."""
    from procgen_entities.parse import parse_states
    from procgen_entities.tilemap import tile_class_names

    actions = np.random.default_rng(8).integers(0, 15, (60, ENVS))
    with EntityVectorEnv(game, ENVS, seed=9, grid=True, grid_entities=True, **options(game)) as env:
        obs, _ = env.reset()
        assert env.grid_marks[-1] == "Player" and "Player" not in env.grid_marks[:-1]
        player = len(tile_class_names(game)) + len(env.grid_marks)
        for t in range(60):
            obs, *_ = env.step(actions[t])
            expected, _ = reference(env)
            assert_same(obs, expected, f"{game} step {t}")
            batch = parse_states(env.stepper.get_states(), grid=False)
            x, y = batch.entities[batch.entity_offsets[:-1], :2].T
            cx, cy, dim = (batch.scalars[k] for k in ("center_x", "center_y", "view_dim"))
            size = obs["grid"].shape[1]
            col = np.floor(x) - np.floor(cx - np.rint(dim) / 2 + 0.5)
            row = size - 1 - (np.floor(y) - np.floor(cy - np.rint(dim) / 2 + 0.5))
            for i in range(ENVS):
                assert obs["grid"][i, int(row[i]), int(col[i])] == player, (game, t, i)
        assert int(obs["grid"].max()) <= env.single_observation_space["grid"].high.max()


def test_grid_entities_needs_the_grid() -> None:
    from procgen_entities.errors import UsageError

    with pytest.raises(UsageError, match="needs grid=True"):
        EntityVectorEnv("climber", 2, grid_entities=True)


def test_procgen_stepped_engine_builds_from_states() -> None:
    """The get_state engine builds the same observation from the collected states."""
    actions = np.random.default_rng(6).integers(0, 15, (20, ENVS))
    with EntityVectorEnv(
        "coinrun",
        ENVS,
        seed=9,
        engine="get_state",
        autoreset_mode=AutoresetMode.SAME_STEP,
        tilemap="columns",
    ) as env:
        env.reset()
        for t in range(20):
            obs, *_ = env.step(actions[t])
            assert_same(obs, reference(env)[0], f"get_state step {t}")
