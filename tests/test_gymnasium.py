"""The Gymnasium interface against ProcgenVecEnv (same seeds and actions, padded and masked), its
episode modes against each other, caps and overflow, time limits, seeding and Gymnasium's own
env checker."""

from __future__ import annotations

import warnings
from typing import Any, Dict

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode

from procgen_entities import GAME_NAMES, parse_states
from procgen_entities.engine import EngineUnavailable
from procgen_entities.gymnasium import EntityEnv, EntityVectorEnv, env_id

pytestmark = pytest.mark.live


def move(actions: np.ndarray) -> Dict[str, Any]:
    from ragged_buffer import RaggedBufferI64

    ones = np.ones(len(actions), np.int64)
    return {"move": RaggedBufferI64.from_flattened(actions.reshape(-1, 1).astype(np.int64), ones)}


def unpad(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return values[mask]


def rows_of_each_env(rows: np.ndarray, counts: np.ndarray) -> list:
    """Rows split per env, each env's rows in a canonical order (the padded form orders them by
    distance to the player, entity-gym in state order: the same rows, another order)."""
    out = []
    for part in np.split(rows, np.cumsum(counts)[:-1]):
        out.append(part[np.lexsort(part.T[::-1])] if len(part) else part)
    return out


@pytest.mark.parametrize("game", GAME_NAMES)
def test_observations_equal_the_entity_gym_vec_envs(game: str) -> None:
    """Padded and masked, every entity type and the globals equal ProcgenVecEnv's, every step
    (same-step autoreset, as procgen; caps large enough that nothing is dropped)."""
    n, kw = 4, dict(seed=9, num_groups=1, relative_positions=True)
    tilemap = "columns" if game in ("coinrun", "ninja", "climber", "jumper") else None
    gym_env = EntityVectorEnv(
        game, n, max_entities=1024, tilemap=tilemap, autoreset_mode="SameStep", **kw
    )
    pytest.importorskip("ragged_buffer", reason="the entity-gym extra is not installed")
    from procgen_entities.entity_gym.vec_env import ProcgenVecEnv

    with ProcgenVecEnv(game, n, tilemap=tilemap, **kw) as ref:
        space = ref.obs_space()
        ref_obs = ref.reset(space)
        obs, _ = gym_env.reset()
        rng = np.random.default_rng(3)
        for t in range(120):
            for name in space.entities:
                counts = ref_obs.features[name].size1()
                expected = rows_of_each_env(ref_obs.features[name].as_array(), counts)
                got = [unpad(obs[name][i], obs[f"{name}_mask"][i]) for i in range(n)]
                np.testing.assert_array_equal(obs[f"{name}_mask"].sum(axis=1), counts)
                for i in range(n):
                    np.testing.assert_array_equal(
                        rows_of_each_env(got[i], np.array([len(got[i])]))[0],
                        expected[i],
                        err_msg=f"{name} env {i} step {t}",
                    )
            np.testing.assert_array_equal(
                obs["global"], ref_obs.features["__global__"].as_array(), err_msg=f"step {t}"
            )
            acts = rng.integers(0, 15, n)
            obs, reward, terminated, truncated, info = gym_env.step(acts)
            ref_obs = ref.act(move(acts), space)
            np.testing.assert_array_equal(reward, ref_obs.reward)
            np.testing.assert_array_equal(terminated | truncated, ref_obs.done)
            assert not info["dropped_entities"].any()
    gym_env.close()


def test_caps_keep_the_entities_nearest_the_player() -> None:
    full = EntityVectorEnv("bossfight", 3, seed=2, max_entities=4096, autoreset_mode="SameStep")
    small = EntityVectorEnv("bossfight", 3, seed=2, max_entities=3, autoreset_mode="SameStep")
    full.reset(), small.reset()
    rng = np.random.default_rng(1)
    dropped_seen = 0
    for _ in range(80):
        acts = rng.integers(0, 15, 3)
        big, _, _, _, _ = full.step(acts)
        few, _, _, _, info = small.step(acts)
        for name in ("EnemyBullet", "Barrier"):
            if name not in big:
                continue
            mask = big[f"{name}_mask"]
            counts = mask.sum(axis=1)
            np.testing.assert_array_equal(
                info["dropped_entities"] >= np.maximum(counts - 3, 0), True
            )
            for i in range(3):
                rows = big[name][i][mask[i]]
                kept = few[name][i][few[f"{name}_mask"][i]]
                assert len(kept) == min(3, len(rows))
                col = list(full.metadata["feature_names"][name]).index("rel_x")
                dist_all = np.sort(np.hypot(rows[:, col], rows[:, col + 1]))
                dist_kept = np.hypot(kept[:, col], kept[:, col + 1])
                assert (np.diff(dist_kept) >= 0).all()  # slot 0 is the nearest
                np.testing.assert_allclose(dist_kept, dist_all[: len(kept)])
                dropped_seen += max(0, len(rows) - 3)
    assert dropped_seen > 0
    full.close(), small.close()


def test_next_step_returns_the_terminal_observation_then_resets() -> None:
    """NEXT_STEP's terminal observation is SAME_STEP's final_obs; the following step returns the
    observation SAME_STEP returned on the ending step, with reward 0 and no episode end."""
    kw: Dict[str, Any] = dict(seed=5, num_groups=1)
    nxt = EntityVectorEnv("bigfish", 1, autoreset_mode="NextStep", **kw)
    same = EntityVectorEnv("bigfish", 1, autoreset_mode="SameStep", **kw)
    assert nxt.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    nxt.reset(), same.reset()
    rng = np.random.default_rng(2)
    ends = 0
    for _ in range(800):
        a = rng.integers(0, 15, 1)
        o1, r1, te1, tr1, i1 = nxt.step(a)
        o2, r2, te2, tr2, i2 = same.step(a)
        np.testing.assert_array_equal(r1, r2)
        np.testing.assert_array_equal(te1, te2)
        if te2[0] or tr2[0]:
            ends += 1
            final = i2["final_obs"][0]
            for k in final:
                np.testing.assert_array_equal(o1[k][0], final[k])
            assert i1["episode_stats"]["r"][0] == i2["episode_stats"]["r"][0]
            o1, r1, te1, tr1, _ = nxt.step(rng.integers(0, 15, 1))  # only resets
            assert r1[0] == 0 and not te1[0] and not tr1[0]
            for k in o2:
                np.testing.assert_array_equal(o1[k], o2[k])
        else:
            for k in o2:
                np.testing.assert_array_equal(o1[k], o2[k])
    assert ends >= 2
    nxt.close(), same.close()


def test_time_limit_is_truncation_not_termination() -> None:
    """bigfish's 6,000-step limit, reached by restoring a state two steps before it."""
    env = EntityVectorEnv("bigfish", 1, seed=8, autoreset_mode="SameStep")
    env.reset()
    env.step(np.array([4]))
    state = bytearray(env.get_states()[0])
    name_len = int.from_bytes(state[4:8], "little")
    r1 = int.from_bytes(state[80 + name_len : 84 + name_len], "little")
    r2_at = 88 + name_len + r1
    at = r2_at + 4 + int.from_bytes(state[r2_at : r2_at + 4], "little") + 52
    state[at : at + 4] = np.int32(5998).tobytes()
    env.set_states([bytes(state)])
    _, _, te, tr, _ = env.step(np.array([4]))
    assert not te[0] and not tr[0]
    _, _, te, tr, info = env.step(np.array([4]))
    assert tr[0] and not te[0]
    assert info["episode_stats"]["l"][0] >= 1
    final = info["final_obs"][0]
    assert parse_states(env.get_states()).cur_time[0] == 0 and final["global"][0] == 1.0
    env.close()


def test_reset_seed_is_deterministic() -> None:
    env = EntityVectorEnv("coinrun", 3, tilemap="columns")
    a, info_a = env.reset(seed=42)
    b, info_b = env.reset(seed=42)
    c, info_c = env.reset(seed=43)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    np.testing.assert_array_equal(info_a["level_seed"], info_b["level_seed"])
    assert (info_a["level_seed"] != info_c["level_seed"]).any()
    env.close()


def test_flat_form_round_trips() -> None:
    env = EntityVectorEnv("starpilot", 2, seed=1, flatten=True)
    flat, _ = env.reset()
    assert env.observation_space.contains(flat)
    dict_env = EntityVectorEnv("starpilot", 2, seed=1)
    full, _ = dict_env.reset()
    back = env.unflatten(flat)
    for k in full:
        np.testing.assert_array_equal(back[k], full[k])
    np.testing.assert_array_equal(env.unflatten(flat[0])["global"], full["global"][0])
    env.close(), dict_env.close()


@pytest.mark.parametrize("game", ["coinrun", "bigfish", "heist", "plunder", "starpilot"])
def test_single_env_passes_gymnasiums_env_checker(game: str) -> None:
    env = EntityEnv(game, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the checker's note on infinite bounds
        check_env(env, skip_render_check=False)
    env.close()


def test_registered_ids_give_the_native_classes() -> None:
    env = gymnasium.make(env_id("maze"))
    assert isinstance(env.unwrapped, EntityEnv)
    env.close()
    vec = gymnasium.make_vec(env_id("maze"), num_envs=3, vectorization_mode="vector_entry_point")
    assert isinstance(vec, EntityVectorEnv) and vec.num_envs == 3
    obs, _ = vec.reset(seed=0)
    assert vec.observation_space.contains(obs)
    vec.close()


def test_engines_without_terminal_states_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """An explicit NEXT_STEP or DISABLED is refused on an engine procgen steps; the default
    becomes SAME_STEP there, declared in the metadata, with one warning per process."""
    from procgen_entities.engine import EngineFallbackWarning
    from procgen_entities.gymnasium import vector

    for mode in ("NextStep", "Disabled"):
        with pytest.raises(EngineUnavailable, match="needs the headless engine"):
            EntityVectorEnv("bigfish", 2, engine="get_state", autoreset_mode=mode)
    monkeypatch.setattr(vector, "_WARNED_SAME_STEP", set())
    with pytest.warns(EngineFallbackWarning, match="get_state engine .* SAME_STEP"):
        EntityVectorEnv("bigfish", 2, engine="get_state").close()
    env = EntityVectorEnv("bigfish", 2, seed=3, engine="get_state")  # warned already: silent
    assert env.autoreset_mode == env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(400):
        _, _, te, tr, info = env.step(rng.integers(0, 15, 2))
        if (te | tr).any():
            assert "final_obs" not in info and "episode_stats" in info
            break
    else:
        pytest.fail("no episode ended")
    env.close()


def test_pad_rows_keeps_the_nearest_in_order_of_distance() -> None:
    from procgen_entities._native import _collector

    rng = np.random.default_rng(0)
    counts = np.array([0, 3, 7, 5], dtype=np.int64)
    rows = rng.normal(size=(counts.sum(), 3)).astype(np.float32)
    rows[1:3, :2] = [[5.0, 5.0], [0.0, 0.0]]  # env 1: state order is not distance order
    rows[5, 0] = np.nan  # a NaN distance ranks last
    player = rng.normal(size=(4, 2)).astype(np.float32)
    cap = 4
    out = np.full((4, cap, 3), 9.0, np.float32)
    mask = np.ones((4, cap), np.uint8)
    dropped = np.empty(4, np.int64)
    _collector.pad_rows(rows, counts, out, mask, dropped, 0, 1, player)
    np.testing.assert_array_equal(dropped, [0, 0, 3, 1])
    assert not np.array_equal(out[1, :3], rows[0:3])
    starts = np.cumsum(counts) - counts
    for i in range(4):
        mine = rows[starts[i] : starts[i] + counts[i]]
        d = np.hypot(mine[:, 0] - player[i, 0], mine[:, 1] - player[i, 1])
        d = np.where(np.isnan(d), np.inf, d)
        expect = mine[np.argsort(d, kind="stable")[:cap]]  # slot 0: the nearest
        kept = min(cap, counts[i])
        np.testing.assert_array_equal(out[i, :kept], expect)
        assert not out[i, kept:].any() and mask[i].sum() == kept and mask[i, :kept].all()
    with pytest.raises(ValueError, match="disagree"):
        _collector.pad_rows(rows, counts[:3], out[:3], mask[:3], dropped[:3])


def test_sb3_adapter_reports_terminal_observations() -> None:
    pytest.importorskip("stable_baselines3")
    from procgen_entities.gymnasium.sb3 import SB3VecEnv

    env = SB3VecEnv(EntityVectorEnv("bigfish", 4, seed=1, flatten=True, autoreset_mode="SameStep"))
    obs = env.reset()
    assert obs.shape == (4, env.observation_space.shape[0])
    rng = np.random.default_rng(0)
    seen = 0
    for _ in range(400):
        env.step_async(rng.integers(0, 15, 4))
        obs, reward, dones, infos = env.step_wait()
        for i in np.flatnonzero(dones):
            assert env.observation_space.contains(infos[i]["terminal_observation"])
            assert "episode" in infos[i] and isinstance(infos[i]["TimeLimit.truncated"], bool)
            seen += 1
    assert seen > 0
    with pytest.raises(ValueError, match="SameStep"):
        SB3VecEnv(EntityVectorEnv("bigfish", 2, seed=1))
    env.close()
    # the dict form (MultiInputPolicy): terminal observations are dicts of the single space
    env = SB3VecEnv(EntityVectorEnv("bigfish", 4, seed=1, autoreset_mode="SameStep"))
    env.reset()
    seen = 0
    for _ in range(400):
        env.step_async(np.random.default_rng(seen).integers(0, 15, 4))
        _, _, dones, infos = env.step_wait()
        for i in np.flatnonzero(dones):
            terminal = infos[i]["terminal_observation"]
            assert isinstance(terminal, dict) and env.observation_space.contains(terminal)
            seen += 1
    assert seen > 0
    env.close()
