"""The native observation builder (csrc/observation.c) against the reference path.

EntityVectorEnv's step reads procgen's live games straight into its observation arrays in one
native call. The reference (procgen_entities/observation_reference.py) assembles the same
observation in numpy from procgen's own get_state bytes of the same step, parsed: every array
must be bit for bit the same, on all 16 games, through episode ends, in the padded dict, the
flat form and (SAME_STEP) the terminal observations.
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from procgen_entities import GAME_NAMES
from procgen_entities.games import get_game
from procgen_entities.gymnasium import EntityVectorEnv
from procgen_entities.observation_reference import padded_observation
from procgen_entities.parse import parse_states

pytestmark = pytest.mark.live

ENVS = 4
STEPS = 80


def reference(env: EntityVectorEnv) -> Any:
    """The reference observation of the current step, parsed from procgen's get_state bytes."""
    return padded_observation(env, parse_states(env.stepper.get_states()))


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
            indices, states = stepper.final_states()
            np.testing.assert_array_equal(indices, np.flatnonzero(ended))
            expected, _ = padded_observation(env, states)
            for k, i in enumerate(indices):
                final = info["final_obs"][i]
                assert_same(final, {key: v[k] for key, v in expected.items()}, f"{game} {t}")
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


RAGGED_TILEMAPS = {"caveflyer": "chunks", "chaser": "tiles", "heist": "runs", "maze": "tiles"}


def ragged_options(game: str) -> Dict[str, Any]:
    tilemap = get_game(game).training_tilemap or RAGGED_TILEMAPS.get(game)
    return {"tilemap": tilemap} if tilemap else {}


def assert_ragged_same(obs: Any, expected: Any, at: str) -> None:
    from procgen_entities.entity_gym.observation import GLOBAL_ENTITY

    assert list(obs.features) == [*expected.features, GLOBAL_ENTITY], at
    for name, (rows, counts) in expected.features.items():
        buf = obs.features[name]
        got = buf.as_array()
        assert got.dtype == rows.dtype and got.shape == rows.shape, (at, name)
        assert got.tobytes() == rows.tobytes(), f"{at}: {name}"
        np.testing.assert_array_equal(buf.size1(), counts, err_msg=f"{at}: {name} counts")
    assert obs.features[GLOBAL_ENTITY].as_array().tobytes() == expected.globals.tobytes(), at
    actors = obs.action_masks["move"].actors.as_array().reshape(-1)
    np.testing.assert_array_equal(actors, expected.actors, err_msg=at)
    assert obs.reward.tobytes() == expected.reward.tobytes(), at
    np.testing.assert_array_equal(obs.done, expected.done, err_msg=at)
    if expected.done.any():
        metric = obs.metrics["level_complete"]
        finished = expected.level_complete[expected.done]
        assert (metric.count, metric.sum) == (int(expected.done.sum()), float(finished.sum()))
    else:
        assert not obs.metrics, at


@pytest.mark.parametrize("game", GAME_NAMES)
def test_ragged_observation_is_the_reference(game: str) -> None:
    """ProcgenVecEnv's one native call per step against the numpy reference over procgen's
    parsed get_state bytes: every entity type's rows and counts, the globals, the actors,
    reward, done and the metric; the full space and a filter of it in turn, with deferred
    resets on every other game (its terminal observations too) and the player as the actor."""
    from entity_gym.env import Entity, ObsSpace
    from ragged_buffer import RaggedBufferI64

    from procgen_entities.entity_gym.vec_env import ProcgenVecEnv
    from procgen_entities.observation_reference import ragged_observation

    defer = GAME_NAMES.index(game) % 2 == 1
    options = {"defer_reset": defer, "actor": "player" if defer else "global",
               **ragged_options(game)}  # fmt: skip
    actions = np.random.default_rng(3).integers(0, 15, (STEPS, ENVS, 1))
    ones = np.ones(ENVS, dtype=np.int64)
    with ProcgenVecEnv(game, ENVS, seed=4, relative_positions=True, **options) as env:
        full = env.obs_space()
        names = list(full.entities)
        small = ObsSpace(
            global_features=list(full.global_features)[::-1],
            entities={name: Entity(list(full.entities[name].features)[::-2])
                      for name in ["Player"] + [n for n in names[::-2] if n != "Player"]},
        )  # fmt: skip
        obs = env.reset(full)
        for t in range(STEPS):
            space = small if t % 2 else full
            chosen = {"move": RaggedBufferI64.from_flattened(actions[t], ones)}
            obs = env.act(chosen, space)
            expected = ragged_observation(
                env.game, full, space, parse_states(env.get_states()),
                tilemap=options.get("tilemap"), actor=options["actor"],
            )  # fmt: skip
            assert_ragged_same(obs, expected, f"{game} step {t}")


@pytest.mark.parametrize("mode", ["easy", "hard", "memory"])
def test_jumpers_goal_is_kept_off_camera_where_its_compass_is_drawn(mode: str) -> None:
    """Jumper's compass (jumper.cpp:137-176, every mode but memory) shows the goal from anywhere:
    there the Goal slot holds the goal of procgen's own state wherever it is; in memory mode only
    while it overlaps the camera's square, like every other type."""
    from procgen_entities.features import batch_in_view

    actions = np.random.default_rng(4).integers(0, 15, (60, ENVS))
    off_camera = 0
    with EntityVectorEnv("jumper", ENVS, seed=2, distribution_mode=mode) as env:
        env.reset()
        for t in range(60):
            obs, *_ = env.step(actions[t])
            batch = parse_states(env.stepper.get_states())
            types = batch.field("type").astype(int)
            shown = batch_in_view(batch)
            x, y = batch.field("x"), batch.field("y")
            starts = batch.entity_offsets[:-1]
            for k in range(ENVS):
                rows = np.flatnonzero(types[starts[k] : starts[k] + batch.entity_counts[k]] == 1)
                assert len(rows) == 1  # one goal per level
                goal = starts[k] + rows[0]
                off_camera += int(not shown[goal])
                kept = mode != "memory" or bool(shown[goal])
                assert bool(obs["Goal_mask"][k, 0]) == kept, (t, k)
                if kept:
                    np.testing.assert_array_equal(obs["Goal"][k, 0, :2], [x[goal], y[goal]])
    assert off_camera > 0  # the goal did leave the square, so the test can fail
