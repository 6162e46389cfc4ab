"""Mirrored-level augmentation (issue 35): the mirror of an observation is what procgen's own
builder shows for the mirrored level, checked against procgen holding and playing the mirrored
state (built here by hand from the state's fields, independently of the transform); the wrapper
draws one mirror per episode, plays reflected actions, keeps masks and types, and refuses what
it cannot mirror."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List

import numpy as np
import numpy.typing as npt
import pytest

from procgen_entities.errors import UsageError
from procgen_entities.games import ACTION_LABELS, Mirror, get_game
from procgen_entities.gymnasium.mirrored import MIRRORED_ACTIONS, MirroredLevels, MirrorTransform
from procgen_entities.gymnasium.vector import EntityVectorEnv
from procgen_entities.state import State, states_to_bytes

CLIMBER_ENEMY = 5  # climber.cpp: ENEMY
N = 8


def _mirrored_state(blob: bytes, width: int) -> State:
    """The climber state reflected about x = width / 2, field by field: every entity's x,
    vx and spawn column, the grid's columns, which way the agent faces and its last actions."""
    state = State.from_bytes(blob, "climber")
    e = state.entities.copy()
    e["x"] = width - e["x"]
    e["vx"] = -e["vx"]
    enemy = e["type"] == CLIMBER_ENEMY
    e["climber_spawn_x"] = np.where(enemy, width - e["climber_spawn_x"], e["climber_spawn_x"])
    state.entities = e
    state.grid = state.grid[:, ::-1]
    state.trailer["facing_right"] = not state.trailer["facing_right"]
    labels = list(ACTION_LABELS)
    flip = {"left": "right", "right": "left"}
    for key in ("action", "last_move_action", "move_action"):
        label = labels[int(state.scalars[key])]
        state.scalars[key] = labels.index("_".join(flip.get(p, p) for p in label.split("_")))
    state.scalars["action_vx"] = -state.scalars["action_vx"]
    return state


def _pair(mode: str, seed: int) -> List[EntityVectorEnv]:
    kwargs: Dict[str, Any] = dict(grid=True, grid_entities=True, num_levels=200, start_level=0,
                                  seed=seed, distribution_mode=mode)  # fmt: skip
    return [EntityVectorEnv.for_training("climber", N, **kwargs) for _ in range(2)]


def _differences(want: Dict[str, Any], got: Dict[str, Any], rows: Any, atol: float) -> List[str]:
    bad = []
    for key, value in want.items():
        a, b = value[rows], got[key][rows]
        same = np.allclose(a, b, atol=atol) if a.dtype == np.float32 else np.array_equal(a, b)
        if not same:
            bad.append(key)
    return bad


@pytest.mark.parametrize("mode", ["easy", "hard"])
def test_the_mirror_is_the_observation_of_the_mirrored_level(mode: str) -> None:
    """States met in play (random actions, three moments), mirrored field by field and restored
    into procgen: its builder's observation of them is the transform's mirror of the real ones,
    every slot, mask, mark and cell (floats to 1e-5: rel_x is a difference of mirrored
    coordinates)."""
    real, mirrored = _pair(mode, seed=3)
    width = get_game("climber").mirror.width[mode]  # type: ignore[union-attr]
    transform = MirrorTransform(real.game, real.observation_spec, mode)
    every = np.ones(N, dtype=np.bool_)
    rng = np.random.default_rng(0)
    real.reset()
    mirrored.reset()
    reranked = 0
    with real, mirrored:
        for steps in (0, 40, 90):
            for _ in range(steps):
                obs, *_ = real.step(rng.integers(0, len(ACTION_LABELS), N))
            if steps == 0:
                obs = real.set_states(real.get_states())
            blobs = states_to_bytes([_mirrored_state(b, width) for b in real.get_states()])
            shown = mirrored.set_states(blobs)
            want = transform.observation(obs, every)
            assert _differences(want, shown, slice(None), atol=1e-5) == []
            # the columns' ranking was redone (a plain reflection lists them in another order)
            reranked += int(not np.array_equal(-obs["Column"][..., -2], shown["Column"][..., -2]))
    assert reranked == 3


def test_reflected_actions_play_the_mirrored_level() -> None:
    """Procgen steps the mirrored state under reflected actions as the mirror of the real
    level's steps: same rewards and ends, the mirrored observations (to float rounding; the
    entity marks are left out of the image, since an enemy walking through an integer x can
    land on either side of it after the mirrored arithmetic rounds differently)."""
    real, mirrored = _pair("easy", seed=5)
    transform = MirrorTransform(real.game, real.observation_spec, "easy")
    every = np.ones(N, dtype=np.bool_)
    classes = len(get_game("climber").tiles)
    rng = np.random.default_rng(1)
    with real, mirrored:
        real.reset()
        mirrored.reset()
        for _ in range(10):
            real.step(rng.integers(0, len(ACTION_LABELS), N))
        mirrored.set_states(states_to_bytes([_mirrored_state(b, 16) for b in real.get_states()]))
        live = np.ones(N, dtype=np.bool_)
        compared = 0
        for _ in range(80):
            actions = rng.integers(0, len(ACTION_LABELS), N)
            obs, reward, term, trunc, _ = real.step(actions)
            shown, reward_m, term_m, trunc_m, _ = mirrored.step(MIRRORED_ACTIONS[actions])
            np.testing.assert_array_equal(reward[live], reward_m[live])
            np.testing.assert_array_equal(term[live], term_m[live])
            live &= ~(term | trunc)
            want = transform.observation(obs, every)
            for view in (want, shown):
                view["grid"] = np.where(view["grid"] > classes, 0, view["grid"])
            assert _differences(want, shown, live, atol=1e-3) == []
            compared += int(live.sum())
        assert compared > 300


def test_mirrored_actions_swap_left_and_right() -> None:
    labels = [ACTION_LABELS[a] for a in MIRRORED_ACTIONS]
    assert labels[:9] == ["right_down", "right", "right_up", "down", "noop", "up",
                          "left_down", "left", "left_up"]  # fmt: skip
    assert labels[9:] == list(ACTION_LABELS[9:])
    np.testing.assert_array_equal(MIRRORED_ACTIONS[MIRRORED_ACTIONS], np.arange(15))


def _stepped(env: Any, steps: int, seed: int) -> List[Any]:
    rng = np.random.default_rng(seed)
    out = [env.reset()]
    for _ in range(steps):
        out.append(env.step(rng.integers(0, len(ACTION_LABELS), env.num_envs)))
    return out


def test_the_wrapper_mirrors_whole_episodes_and_their_terminal_observations() -> None:
    """MirroredLevels against a twin env stepped with the actions it played: its observations
    (and SAME_STEP's final_obs) are the twin's, mirrored where its flag says; a flag changes
    only where an episode ended; masks and the padded slots are the twin's."""
    kwargs: Dict[str, Any] = dict(grid=True, grid_entities=True, num_levels=200, seed=7,
                                  autoreset_mode="SameStep")  # fmt: skip
    wrapped = MirroredLevels(EntityVectorEnv.for_training("climber", N, **kwargs), 0.5, seed=2)
    twin = EntityVectorEnv.for_training("climber", N, **kwargs)
    transform = wrapped.transform
    rng = np.random.default_rng(4)
    with wrapped, twin:
        obs, _ = wrapped.reset()
        raw, _ = twin.reset()
        flags = wrapped.mirrored
        _assert_same(obs, transform.observation(raw, flags))
        mirrored_episodes = ended_total = 0
        for _ in range(1100):  # past procgen's time limit (1,000 steps): every env ends
            actions = rng.integers(0, len(ACTION_LABELS), N)
            obs, reward, term, trunc, info = wrapped.step(actions)
            raw, raw_reward, *_, raw_info = twin.step(transform.actions(actions, flags))
            np.testing.assert_array_equal(reward, raw_reward)
            ended = term | trunc
            for i in np.flatnonzero(ended):
                one = np.array([flags[i]])
                final = {k: v[None] for k, v in raw_info["final_obs"][i].items()}
                _assert_same({k: v[None] for k, v in info["final_obs"][i].items()},
                             transform.observation(final, one))  # fmt: skip
            now = wrapped.mirrored
            assert not (now != flags)[~ended].any()
            mirrored_episodes += int(now[ended].sum())
            ended_total += int(ended.sum())
            flags = now
            _assert_same(obs, transform.observation(raw, flags))
            for key in obs:
                if key.endswith("_mask"):
                    np.testing.assert_array_equal(obs[key], raw[key])
                    assert not obs[key[: -len("_mask")]][~obs[key]].any()  # padding stays 0
    assert ended_total >= N and 0 < mirrored_episodes < ended_total


def _assert_same(a: Dict[str, npt.NDArray[Any]], b: Dict[str, npt.NDArray[Any]]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_probability_zero_and_one_and_the_flat_form() -> None:
    kwargs: Dict[str, Any] = dict(num_levels=200, seed=1, autoreset_mode="SameStep")
    plain = _stepped(EntityVectorEnv.for_training("climber", 4, **kwargs), 30, 0)
    unmirrored = MirroredLevels(EntityVectorEnv.for_training("climber", 4, **kwargs), 0.0)
    never = _stepped(unmirrored, 30, 0)
    for a, b in zip(plain, never):
        _assert_same(a[0], b[0])
    flat = MirroredLevels(EntityVectorEnv.for_training("climber", 4, flatten=True, **kwargs), 1.0)
    always = MirroredLevels(EntityVectorEnv.for_training("climber", 4, **kwargs), 1.0)
    layout = always.transform  # the same transform either way
    assert layout.width == 16.0
    finals = 0
    for a, b in zip(_stepped(flat, 1100, 0), _stepped(always, 1100, 0)):
        _assert_same(flat.env.unflatten(a[0]), b[0])
        for i in np.flatnonzero(a[-1].get("_final_obs", [])):  # SAME_STEP's terminal ones
            _assert_same(flat.env.unflatten(a[-1]["final_obs"][i][None]),
                         {k: v[None] for k, v in b[-1]["final_obs"][i].items()})  # fmt: skip
            finals += 1
    assert always.mirrored.all() and finals >= 4
    for env in (flat, always):
        env.close()


def test_next_step_draws_when_the_next_episode_starts() -> None:
    """NEXT_STEP: the terminal observation is shown mirrored as the episode was; the flag is
    drawn again on the step that starts the next episode."""
    env = MirroredLevels(EntityVectorEnv.for_training("climber", N, num_levels=5, seed=0), 0.5)
    rng = np.random.default_rng(0)
    with env:
        env.reset()
        last = np.zeros(N, dtype=np.bool_)
        ends = redrawn = 0
        for _ in range(1100):  # past the time limit: every env ends at least once
            before = env.mirrored
            *_, term, trunc, _ = env.step(rng.integers(0, len(ACTION_LABELS), N))
            changed = env.mirrored != before
            assert not changed[~last].any()  # only the envs whose next episode starts now
            redrawn += int(changed.sum())
            last = term | trunc
            ends += int(last.sum())
        assert ends >= N and redrawn > 0


def test_misuse_is_refused() -> None:
    with EntityVectorEnv.for_training("coinrun", 2) as coinrun:
        with pytest.raises(UsageError, match="not declared left-right symmetric"):
            MirroredLevels(coinrun)
    with EntityVectorEnv.for_training("climber", 2) as env:
        for p in (-0.1, 1.5, True, "0.5", float("nan")):
            with pytest.raises(UsageError, match="probability"):
                MirroredLevels(env, p)  # type: ignore[arg-type]
        wrapped = MirroredLevels(env)
        with pytest.raises(UsageError, match="reset"):
            wrapped.step(np.zeros(2, dtype=np.int64))
        wrapped.reset()
        for bad in ([0, 15], [-1, 0], [0, 0, 0]):
            with pytest.raises(UsageError, match="actions"):
                wrapped.step(np.array(bad))
    with pytest.raises(UsageError, match="wraps an EntityVectorEnv"):
        MirroredLevels(object())
    climber = get_game("climber")
    with pytest.raises(UsageError, match="mirror widths for modes outside"):
        dataclasses.replace(climber, mirror=Mirror(width={"memory": 16}))  # climber has none
    with EntityVectorEnv.for_training("climber", 2, distribution_mode="hard") as hard:
        only_easy = dataclasses.replace(climber, mirror=Mirror(width={"easy": 16}))
        with pytest.raises(UsageError, match="no mirror width for distribution mode 'hard'"):
            MirrorTransform(only_easy, hard.observation_spec, "hard")


def test_sb3_ppo_mirror_is_recorded_kept_on_resume_and_refused_where_asymmetric(
    tmp_path: Any, capsys: Any
) -> None:
    """sb3_ppo --mirror P: env.json's trainer records P (its env config does not change, so
    evaluation plays the real levels), a resume keeps it without the flag, and a game not
    declared symmetric is refused before training."""
    pytest.importorskip("stable_baselines3")
    from procgen_entities.agents.checkpoint import Checkpoint
    from procgen_entities.tools.sb3_ppo import main as sb3_ppo

    out = tmp_path / "run"
    args = ["climber", "--smoke", "--eval-episodes", "0", "--out", str(out), "--num-levels", "200"]
    assert sb3_ppo([*args, "--mirror", "0.5"]) == 0
    folder = out / "checkpoint"
    saved = Checkpoint.load(folder)
    assert saved.trainer["mirror"] == 0.5
    assert "mirror" not in json.dumps(saved.env.env_kwargs())
    assert sb3_ppo([*args, "--resume", str(folder)]) == 0
    assert Checkpoint.load(folder).trainer["mirror"] == 0.5
    for bad, message in ((["coinrun", "--mirror", "0.5"], "not declared left-right symmetric"),
                         (["climber", "--mirror", "2"], "probability")):  # fmt: skip
        with pytest.raises(SystemExit):
            sb3_ppo([*bad, "--smoke", "--out", str(tmp_path / "refused")])
        assert message in capsys.readouterr().err


def test_mirror_over_prioritized_levels() -> None:
    """MirroredLevels over PrioritizedLevels: the sampler still chooses every level (procgen's
    level seeds are the queued ones) while the episodes are mirrored."""
    from procgen_entities.gymnasium.prioritized import PrioritizedLevels
    from procgen_entities.level_sampling import LevelSampler

    inner = EntityVectorEnv.for_training("climber", 4, num_levels=10, seed=0,
                                         autoreset_mode="SameStep")  # fmt: skip
    levels = PrioritizedLevels(inner, LevelSampler(10, seed=0), queue=8)
    env = MirroredLevels(levels, 1.0)
    rng = np.random.default_rng(0)
    with env:
        env.reset()
        ends = 0
        for _ in range(1100):  # each start is checked against its queue (PrioritizedLevels)
            *_, term, trunc, _ = env.step(rng.integers(0, len(ACTION_LABELS), 4))
            ends += int((term | trunc).sum())
        assert env.mirrored.all() and ends >= 4
        assert levels.sampler.count == 4 + ends  # every episode's level came from the sampler


def test_the_mirror_without_absolute_heights_is_the_full_mirrors_columns() -> None:
    """With drop_features (y, height) the mirror keeps the same slots in the same order: the
    kept columns of the full observation's mirror (the tiles ranked by rel_y where y is gone)."""
    kwargs: Dict[str, Any] = dict(grid=True, grid_entities=True, num_levels=200, seed=9)
    full = EntityVectorEnv.for_training("climber", N, **kwargs)
    lean = EntityVectorEnv.for_training("climber", N, drop_features=["y", "height"], **kwargs)
    whole = MirrorTransform(full.game, full.observation_spec, "easy")
    part = MirrorTransform(lean.game, lean.observation_spec, "easy")
    names, kept = full.metadata["feature_names"], lean.metadata["feature_names"]
    every = np.ones(N, dtype=np.bool_)
    rng = np.random.default_rng(2)
    with full, lean:
        a, b = full.reset()[0], lean.reset()[0]
        for _ in range(120):
            want, got = whole.observation(a, every), part.observation(b, every)
            for key in got:
                value = want[key]
                if key in kept and key != "global":
                    value = value[..., [names[key].index(f) for f in kept[key]]]
                np.testing.assert_array_equal(got[key], value, err_msg=key)
            actions = rng.integers(0, len(ACTION_LABELS), N)
            a, b = full.step(actions)[0], lean.step(actions)[0]
