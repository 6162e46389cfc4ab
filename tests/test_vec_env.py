"""ProcgenVecEnv against real procgen: the entity-gym contract, and values checked against procgen's
own reward/done (gym3 observe) and against the parser on the same get_state bytes."""

from __future__ import annotations

import json
import os
import threading
import zlib
from pathlib import Path

import numpy as np
import pytest
from entity_gym.env import Entity, ObsSpace, VecObs
from ragged_buffer import RaggedBufferI64

from procgen_entities import GAME_NAMES, GAMES, parse_states
from procgen_entities.entity_gym.observation import ACTION_LABELS, GLOBAL_ENTITY
from procgen_entities.entity_gym.vec_env import ProcgenVecEnv
from procgen_entities.features import batch_in_view
from procgen_entities.stepper import ProcgenStepper

OBS_SPACES = Path(__file__).parent / "data" / "obs_spaces.json"


def actions(rng: np.random.Generator, n: int) -> dict:
    chosen = rng.integers(0, len(ACTION_LABELS), size=(n, 1))
    return {"move": RaggedBufferI64.from_flattened(chosen, np.ones(n, dtype=np.int64))}


def check_contract(env: ProcgenVecEnv, obs: VecObs, space: ObsSpace) -> None:
    n = len(env)
    assert set(obs.features) == set(space.entities) | {GLOBAL_ENTITY}
    for name, entity in space.entities.items():
        buf = obs.features[name]
        assert buf.size0() == n
        assert buf.size2() == len(entity.features)
        assert np.isfinite(buf.as_array()).all()
    glob = obs.features[GLOBAL_ENTITY]
    assert list(glob.size1()) == [1] * n and glob.size2() == len(space.global_features)
    assert obs.reward.shape == (n,) and obs.reward.dtype == np.float32
    assert obs.done.shape == (n,) and obs.done.dtype == np.bool_
    actors = obs.action_masks["move"].actors.as_array().reshape(-1)
    entities_per_env = sum(obs.features[name].size1() for name in space.entities)
    assert (actors == entities_per_env).all()  # the global entity comes after all others


def pinned_spaces() -> dict:
    spaces = {}
    for game in GAME_NAMES:
        env = ProcgenVecEnv(game, 1, seed=0, num_threads=1)
        space = env.obs_space()
        spaces[game] = {
            "global_features": space.global_features,
            "entities": {k: v.features for k, v in space.entities.items()},
            "actions": env.action_space()["move"].index_to_label,
        }
        env.close()
    return spaces


def test_observation_spaces_are_pinned() -> None:
    """A feature change must be deliberate: trained checkpoints depend on these names."""
    current = pinned_spaces()
    if os.environ.get("UPDATE_SNAPSHOTS"):
        OBS_SPACES.write_text(json.dumps(current, indent=1) + "\n")
    assert current == json.loads(OBS_SPACES.read_text())


@pytest.mark.live
@pytest.mark.parametrize("engine", ["headless", "direct", "get_state"])
@pytest.mark.parametrize("game", GAME_NAMES)
@pytest.mark.parametrize("mode", ["easy", "hard"])
def test_contract_and_values_against_procgen(game: str, mode: str, engine: str) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{game}-{mode}".encode()))
    with ProcgenVecEnv(game, 6, distribution_mode=mode, seed=7, num_groups=2, engine=engine) as env:
        assert env.engine == engine
        space = env.obs_space()
        obs = env.reset(space)
        check_contract(env, obs, space)
        assert not obs.done.any()
        dones = 0
        for _ in range(60):
            obs = env.act(actions(rng, len(env)), space)
            check_contract(env, obs, space)
            if engine != "headless":  # procgen stepped: its own reward and flags (gym3 observe)
                rew = np.concatenate([e.observe()[0] for e in env.procgen_envs])
                first = np.concatenate([e.observe()[2] for e in env.procgen_envs])
                np.testing.assert_array_equal(obs.reward, rew)
                np.testing.assert_array_equal(obs.done, first)
            dones += int(obs.done.sum())
            # the player's position equals entity 0 of the parsed state
            batch = parse_states(env.get_states())
            player = obs.features["Player"].as_array()
            np.testing.assert_array_equal(obs.features["Player"].size1(), 1)
            offsets = batch.entity_offsets[:-1]
            np.testing.assert_array_equal(player[:, 0], batch.field("x")[offsets])
            np.testing.assert_array_equal(player[:, 1], batch.field("y")[offsets])
            np.testing.assert_array_equal(obs.reward, batch.reward)


@pytest.mark.live
def test_entity_counts_match_parsed_types() -> None:
    """Every declared entity of the raw state shows up under its type, hidden ones excepted."""
    rng = np.random.default_rng(1)
    with ProcgenVecEnv("bossfight", 4, seed=3) as env:
        space = env.obs_space()
        env.reset(space)
        shields_seen = {0: 0, 1: 0}
        for _ in range(80):
            obs = env.act(actions(rng, 4), space)
            batch = parse_states(env.get_states())
            types = batch.field("type").astype(int)
            env_of = np.repeat(np.arange(4), batch.entity_counts)
            shown = batch_in_view(batch)
            for tid, name in env.game.entity_types.items():
                kept = (types == tid) & (shown | (name == "Player"))
                expected = np.bincount(env_of[kept], minlength=4)
                if name == "Shields":
                    up = batch.extras["shields_are_up"]
                    expected = np.where(up, expected, 0)
                    for u in up:
                        shields_seen[int(u)] += 1
                np.testing.assert_array_equal(obs.features[name].size1(), expected, err_msg=name)
        assert shields_seen[0] and shields_seen[1], "both shield states should occur"


@pytest.mark.live
def test_entity_window_keeps_what_the_camera_shows() -> None:
    """coinrun's levels are wider than its camera: the window drops saws and enemies the agent
    cannot see (and only those); entity_window=False keeps every one."""
    rng = np.random.default_rng(4)
    windowed = ProcgenVecEnv("coinrun", 8, seed=9, relative_positions=True)
    everything = ProcgenVecEnv("coinrun", 8, seed=9, relative_positions=True, entity_window=False)
    space = windowed.obs_space()
    windowed.reset(space), everything.reset(space)
    dropped = 0
    for _ in range(40):
        chosen = actions(rng, 8)
        narrow, wide = windowed.act(chosen, space), everything.act(chosen, space)
        batch = parse_states(windowed.get_states())
        types = batch.field("type").astype(int)
        shown = batch_in_view(batch)
        env_of = np.repeat(np.arange(8), batch.entity_counts)
        for name in ("Saw", "Enemy", "Crate"):
            tid = {v: k for k, v in windowed.game.entity_types.items()}[name]
            all_of_type = np.bincount(env_of[types == tid], minlength=8)
            visible = np.bincount(env_of[(types == tid) & shown], minlength=8)
            np.testing.assert_array_equal(narrow.features[name].size1(), visible)
            np.testing.assert_array_equal(wide.features[name].size1(), all_of_type)
            rel_x = np.abs(narrow.features[name].as_array()[:, -2])
            assert (rel_x < batch.scalars["view_dim"].max()).all()
            dropped += int((all_of_type - visible).sum())
    windowed.close(), everything.close()
    assert dropped > 100


@pytest.mark.live
def test_obs_filter_gathers_only_requested() -> None:
    rng = np.random.default_rng(2)
    with ProcgenVecEnv("coinrun", 4, seed=5, relative_positions=True) as env:
        full = env.obs_space()
        small = ObsSpace(
            global_features=["step_fraction"],
            entities={"Player": Entity(["y"]), "Enemy": Entity(["rel_y", "rel_x", "x"])},
        )
        env.reset(full)
        for _ in range(30):
            obs = env.act(actions(rng, 4), small)
        assert set(obs.features) == {"Player", "Enemy", GLOBAL_ENTITY}
        assert obs.features["Enemy"].size2() == 3
        batch = parse_states(env.get_states())
        types = batch.field("type").astype(int)
        kept = (types == 5) & batch_in_view(batch)
        enemy = batch.entities[kept]
        ex, ey = enemy[:, 0], enemy[:, 1]
        env_of = np.repeat(np.arange(4), batch.entity_counts)[kept]
        px, py = (
            batch.field("x")[batch.entity_offsets[:-1]],
            batch.field("y")[batch.entity_offsets[:-1]],
        )
        got = obs.features["Enemy"].as_array()
        np.testing.assert_array_equal(got[:, 0], ey - py[env_of])
        np.testing.assert_array_equal(got[:, 1], ex - px[env_of])
        np.testing.assert_array_equal(got[:, 2], ex)
        with pytest.raises(ValueError, match="no features"):
            env.act(actions(rng, 4), ObsSpace(entities={"Player": Entity(["nope"])}))


@pytest.mark.live
@pytest.mark.parametrize("game", ["coinrun", "starpilot"])
def test_one_thread_and_many_threads_agree(game: str) -> None:
    results = []
    for threads in (1, 2, 3):
        rng = np.random.default_rng(11)
        with ProcgenVecEnv(game, 8, seed=21, num_threads=threads, num_groups=2) as env:
            space = env.obs_space()
            env.reset(space)
            steps = [env.act(actions(rng, 8), space) for _ in range(25)]
            results.append([{k: v.as_array().copy() for k, v in o.features.items()} for o in steps])
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert a.keys() == b.keys()
            for k in a:
                np.testing.assert_array_equal(a[k], b[k])


def test_close_is_idempotent_and_refuses_bad_options() -> None:
    env = ProcgenVecEnv("bigfish", 2, seed=0)
    env.reset(env.obs_space())
    env.close()
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.get_states()
    with pytest.raises(ValueError, match="use_generated_assets"):
        ProcgenVecEnv("bigfish", 2, use_generated_assets=True)
    with pytest.raises(ValueError, match="unknown procgen game"):
        ProcgenVecEnv("pong", 2)
    with pytest.raises(ValueError, match="distribution_mode"):
        ProcgenVecEnv("bigfish", 2, distribution_mode="nightmare")


@pytest.mark.slow
@pytest.mark.live
def test_rss_and_threads_stable_over_200k_steps() -> None:
    psutil = pytest.importorskip("psutil")
    proc = psutil.Process()
    rng = np.random.default_rng(0)
    n = 64
    with ProcgenVecEnv("bigfish", n, seed=1, num_groups=2) as env:
        space = env.obs_space()
        env.reset(space)
        acts = [actions(rng, n) for _ in range(16)]
        for k in range(300):
            env.act(acts[k % 16], space)
        rss0, threads0 = proc.memory_info().rss, threading.active_count()
        tasks0 = proc.num_threads()
        for k in range(200_000 // n - 300):
            env.act(acts[k % 16], space)
        growth = proc.memory_info().rss - rss0
        assert growth < 16 * 2**20, f"RSS grew by {growth / 2**20:.1f} MiB"
        assert threading.active_count() == threads0 and proc.num_threads() == tasks0


@pytest.mark.live
@pytest.mark.parametrize("mode", ["tiles", "runs", "columns", "chunks"])
@pytest.mark.parametrize("game", ["coinrun", "ninja", "climber", "maze"])
def test_tilemap_option_keeps_the_contract(game: str, mode: str) -> None:
    from procgen_entities.tilemap import tilemap_features, tilemap_to_entities

    if mode == "columns" and not GAMES[game].platformer:
        with pytest.raises(ValueError):
            ProcgenVecEnv(game, 2, tilemap=mode)
        return
    rng = np.random.default_rng(4)
    with ProcgenVecEnv(game, 4, seed=2, tilemap=mode, distribution_mode="easy") as env:
        space = env.obs_space()
        tile_types = tilemap_features(game, mode, window=True)
        assert set(tile_types) <= set(space.entities)
        obs = env.reset(space)
        check_contract(env, obs, space)
        for _ in range(20):
            obs = env.act(actions(rng, 4), space)
            check_contract(env, obs, space)
        # each env's tile entities equal the per-state conversion of its parsed grid and camera
        batch = parse_states(env.get_states())
        for i in range(4):
            window = tuple(float(batch.scalars[k][i]) for k in ("center_x", "center_y", "view_dim"))
            expected = tilemap_to_entities(batch.grid[i], game, mode, window=window)
            for name, rows in expected.items():
                np.testing.assert_array_equal(obs.features[name][i].as_array(), rows)


def test_without_tile_types_the_grid_is_not_read() -> None:
    """Without a tilemap, or with a filter that asks for no tile type, the native builder has
    no tile output (the grid is never read)."""
    with ProcgenVecEnv("coinrun", 2, seed=0) as env:
        view = env._view_for(env.obs_space())
        assert view.builder.n_types == len(view.plan.entity_types) == len(view.names)
    with ProcgenVecEnv("coinrun", 2, seed=0, tilemap="columns") as env:
        full = env.obs_space()
        assert env._view_for(full).builder.n_types > len(env.game.entity_types)
        entities_only = ObsSpace(entities={"Player": Entity(["x"])})
        env.reset(full)
        obs = env.act(actions(np.random.default_rng(0), 2), entities_only)
        assert set(obs.features) == {"Player", GLOBAL_ENTITY}
        assert env._view_for(entities_only).builder.n_types == 1


def test_env_factory_seeds_and_overrides() -> None:
    from types import SimpleNamespace

    from procgen_entities.entity_gym.factory import env_factory

    make = env_factory("bigfish", seed=5, distribution_mode="easy")
    train_env = make(SimpleNamespace(kwargs='{"relative_positions": true}'), 3, 4, 0)
    eval_env = make(SimpleNamespace(kwargs='{"seed": 40}'), 2, 1, 0)
    try:
        assert len(train_env) == 3 and train_env.seed == 5
        assert "rel_x" in train_env.obs_space().entities["Fish"].features
        assert eval_env.seed == 40 + 1000  # the second env made gets other levels
        train_env.reset(train_env.obs_space())
        assert parse_states(train_env.get_states()).scalars["distribution_mode"].tolist() == [0] * 3
    finally:
        train_env.close()
        eval_env.close()


def test_modes_a_game_lacks_are_refused_before_procgen_aborts() -> None:
    with pytest.raises(ValueError, match="no 'extreme' distribution mode"):
        ProcgenVecEnv("coinrun", 2, distribution_mode="extreme")
    with pytest.raises(ValueError, match="no 'memory' distribution mode"):
        ProcgenVecEnv("bigfish", 2, distribution_mode="memory")
    with ProcgenVecEnv("maze", 2, distribution_mode="memory", seed=0) as env:
        env.reset(env.obs_space())


@pytest.mark.live
def test_the_player_can_take_the_action() -> None:
    """actor="player": the action is taken by each env's Player entity (its index 0), the
    observation itself is unchanged."""
    rng = np.random.default_rng(0)
    player = ProcgenVecEnv("coinrun", 3, seed=2, actor="player", relative_positions=True)
    default = ProcgenVecEnv("coinrun", 3, seed=2, relative_positions=True)
    space = player.obs_space()
    assert type(player.action_space()["move"]).__name__ == "CategoricalActionSpace"
    obs, ref = player.reset(space), default.reset(space)
    for _ in range(20):
        chosen = actions(rng, 3)
        obs, ref = player.act(chosen, space), default.act(chosen, space)
    assert (obs.action_masks["move"].actors.as_array() == 0).all()
    for name in space.entities:
        np.testing.assert_array_equal(obs.features[name].as_array(), ref.features[name].as_array())
    no_player = ObsSpace(global_features=[], entities={"Saw": Entity(["x"])})
    with pytest.raises(ValueError, match="Player"):
        player.act(actions(rng, 3), no_player)
    player.close(), default.close()
    with pytest.raises(ValueError, match="actor"):
        ProcgenVecEnv("coinrun", 1, actor="saw")


#: Every public name of a ProcgenVecEnv when it inherited the stepper: a contract it keeps now
#: that it composes one.
PUBLIC_NAMES = [
    '__enter__', '__exit__', '__len__', 'act', 'action_space', 'actor',
    'advance', 'call_lock', 'close', 'collector', 'defer_resets', 'engine', 'entity_window',
    'final_states', 'game', 'get_states', 'has_global_entity', 'last_level_complete', 'num_envs',
    'num_threads', 'obs_space', 'observe', 'observe_terminal', 'pending_reset', 'read',
    'refresh', 'render', 'reset', 'reset_envs', 'restart', 'restore_states',
    'set_states', 'step', 'step_observe', 'step_values', 'terminal', 'tilemap',
    'truncated', 'values_of',
]  # fmt: skip


def test_the_public_surface_stays_and_reaches_the_stepper() -> None:
    """Composition keeps every name users had (by explicit delegation), offers every public
    member of the stepper, and the delegates answer with the stepper's own objects and values."""
    with ProcgenVecEnv("coinrun", 2, seed=3, tilemap="columns", engine="headless") as env:
        assert [name for name in PUBLIC_NAMES if not hasattr(env, name)] == []
        stepper = env.stepper
        assert isinstance(stepper, ProcgenStepper) and not isinstance(env, ProcgenStepper)
        public = [name for name in dir(stepper) if not name.startswith("_")]
        assert [name for name in public if not hasattr(env, name)] == []
        assert env.call_lock is stepper.call_lock and env.collector is stepper.collector
        assert env.game is stepper.game and (env.num_envs, env.engine) == (2, "headless")
        assert env.fresh and env.seed == 3 and len(env.procgen_envs) == 1
        options = env.procgen_options
        options["distribution_mode"] = "easy"  # a copy: the next envs are made as before
        assert env.procgen_options["distribution_mode"] == "hard"
        space = env.obs_space()
        env.reset(space)
        assert not env.fresh
        obs = env.act(actions(np.random.default_rng(0), 2), space)
        values = env.step_values()
        assert values is stepper.step_values()
        np.testing.assert_array_equal(obs.reward, values.scalars["reward"].astype(np.float32))
        np.testing.assert_array_equal(env.truncated, stepper.truncated)
        assert env.get_states() == stepper.get_states()
    with pytest.raises(RuntimeError, match="closed"):
        env.check_open()
