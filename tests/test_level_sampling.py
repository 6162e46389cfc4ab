"""Level sampling by learning potential (issue 35): LevelSampler's probabilities against hand
computed ones, sampling that follows them, PrioritizedLevels starting the sampled levels in real
procgen exactly as procgen starts them itself, the episode scores, and the misuse errors."""

from __future__ import annotations

import struct
from typing import Any, List

import numpy as np
import pytest

from procgen_entities.agents.checkpoint import EnvConfig, make_env
from procgen_entities.errors import UsageError
from procgen_entities.gymnasium.prioritized import MT_WORDS, PrioritizedLevels, mt19937_untemper
from procgen_entities.level_sampling import (
    LevelSampler,
    episode_ends,
    episode_score,
    score_episodes,
)

# ---- the sampler ----


def test_probabilities_are_the_hand_computed_ones() -> None:
    """4 levels, 3 scored; beta 0.5 (h = 1 / rank**2), rho 0.2, replay 3/4 (the share seen)."""
    sampler = LevelSampler(4, beta=0.5, rho=0.2, seed=0)
    for level, score in ((0, 1.0), (1, 3.0), (2, 2.0)):  # ranks: level 1, 2, 0
        sampler.update(level, score)
    for level in (0, 1, 2, 1):  # count 4; last sampled at 1, 4, 3: staleness 3, 0, 1
        sampler.mark_sampled(level)
    by_score = np.array([1 / 9, 1, 1 / 4]) / (1 + 1 / 4 + 1 / 9)  # 4/49, 36/49, 9/49
    by_staleness = np.array([3, 0, 1]) / 4
    replay = 0.8 * by_score + 0.2 * by_staleness
    np.testing.assert_allclose(sampler.priorities(), [*replay, 0.0], rtol=1e-12)
    assert sampler.replay_probability() == 0.75
    np.testing.assert_allclose(sampler.probabilities(), [*(0.75 * replay), 0.25], rtol=1e-12)
    fixed = LevelSampler(4, beta=0.5, rho=0.2, replay_prob=0.5, seed=0)
    fixed.load_state_dict({**sampler.state_dict(), "replay_prob": 0.5})
    np.testing.assert_allclose(fixed.probabilities(), [*(0.5 * replay), 0.5], rtol=1e-12)


def test_unseen_levels_first_then_replay_only() -> None:
    sampler = LevelSampler(3, seed=0)
    np.testing.assert_array_equal(sampler.probabilities(), [1 / 3] * 3)  # none seen: uniform
    np.testing.assert_array_equal(sampler.priorities(), [0, 0, 0])
    sampler.update(1, 0.5)  # one seen: replayed a third of the time, each unseen a third
    np.testing.assert_allclose(sampler.probabilities(), [1 / 3] * 3)
    sampler.update(0, 0.5)
    sampler.update(2, 0.5)  # all seen: replay only, ties ranked by index (0 first)
    assert sampler.replay_probability() == 1.0
    h = 1 / np.arange(1, 4) ** 10.0
    staleness = np.full(3, 1 / 3)  # nothing sampled yet: every level equally stale (0)
    np.testing.assert_allclose(sampler.probabilities(), 0.9 * h / h.sum() + 0.1 * staleness)


def test_samples_follow_the_priorities_not_a_uniform_draw() -> None:
    """One level scored far above the rest gets most draws (rank 1 of 20 with beta 0.1: 0.999
    of the rank part; rho's staleness share spreads over the others); a uniform draw gives it
    a twentieth. With the priorities ignored this fails."""
    sampler = LevelSampler(20, seed=1)
    for level in range(20):
        sampler.update(level, 5.0 if level == 7 else 0.1)
    drawn = np.array([sampler.sample() for _ in range(2000)])
    share = float(np.mean(drawn == 7))
    assert share > 0.85, share
    uniform = np.random.default_rng(1).integers(0, 20, 2000)
    assert share > 10 * float(np.mean(uniform == 7))
    assert sampler.count == 2000 and sampler.last_sampled.max() == 2000


def test_the_state_dict_continues_the_draws() -> None:
    first = LevelSampler(6, beta=0.3, rho=0.4, seed=5)
    for level, score in ((0, 1.0), (3, 2.5), (4, 0.25)):
        first.update(level, score)
    [first.sample() for _ in range(7)]
    second = LevelSampler(6, beta=0.3, rho=0.4, seed=99)
    second.load_state_dict(first.state_dict())
    assert [first.sample() for _ in range(50)] == [second.sample() for _ in range(50)]
    np.testing.assert_array_equal(first.probabilities(), second.probabilities())


def test_sampler_misuse_is_a_usage_error() -> None:
    for kwargs in ({"beta": 0.0}, {"beta": -1}, {"beta": float("nan")}, {"rho": 1.5},
                   {"rho": -0.1}, {"replay_prob": 2.0}, {"beta": True}):  # fmt: skip
        with pytest.raises(UsageError):
            LevelSampler(4, **kwargs)
    for bad in (0, -3, 2.0, True):
        with pytest.raises(UsageError):
            LevelSampler(bad)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="seed or an rng"):
        LevelSampler(4, seed=1, rng=np.random.default_rng(1))
    sampler = LevelSampler(4, seed=0)
    with pytest.raises(UsageError, match="finite"):
        sampler.update(0, float("inf"))
    with pytest.raises(UsageError, match="out of range"):
        sampler.update(4, 1.0)
    with pytest.raises(UsageError, match="int index"):
        sampler.update(1.0, 1.0)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        sampler.mark_sampled(-1)
    with pytest.raises(UsageError):
        sampler.draw(-1)
    with pytest.raises(UsageError, match="other settings|sampler with"):
        LevelSampler(4, beta=0.2).load_state_dict(sampler.state_dict())
    with pytest.raises(UsageError):
        LevelSampler(5).load_state_dict({**sampler.state_dict(), "num_levels": 5})
    with pytest.raises(UsageError, match="not a LevelSampler state"):
        sampler.load_state_dict({"scores": []})
    assert sampler.state_dict()["count"] == 0  # nothing changed by the refusals


def test_episode_scores_cover_whole_episodes_across_rollouts() -> None:
    """Two envs, two rollouts of 3 steps. Env 0: an episode of steps 0-1, then one of 2..4
    (across the rollouts), then one from 5 on; env 1: one episode of all 6 steps."""
    sampler = LevelSampler(5, seed=0)
    carry: dict = {}
    adv = np.array([[1.0, -2.0], [-1.0, 2.0], [3.0, 4.0]])
    starts = np.array([[1, 1], [0, 0], [1, 0]])
    levels = np.array([[2, 4], [2, 4], [0, 4]])
    ends = episode_ends(starts, np.array([0, 0]))
    np.testing.assert_array_equal(ends, [[0, 0], [1, 0], [0, 0]])
    assert score_episodes(sampler, adv, levels, ends, carry) == 1
    assert sampler.scores[2] == episode_score([1.0, -1.0]) == 0.5
    adv2 = np.array([[-3.0, 0.0], [6.0, 1.0], [1.0, -1.0]])
    ends2 = episode_ends(np.array([[0, 0], [0, 0], [1, 0]]), np.array([0, 1]))
    levels2 = np.array([[0, 4], [0, 4], [1, 4]])
    assert score_episodes(sampler, adv2, levels2, ends2, carry) == 2
    assert sampler.scores[0] == (3 + 0 + 6) / 3  # its steps in both rollouts, A < 0 as 0
    assert sampler.scores[4] == (0 + 2 + 4 + 0 + 1 + 0) / 6
    assert sampler.seen.tolist() == [True, False, True, False, True]
    assert carry["counts"].tolist() == [1, 0] and carry["sums"][0] == 1.0  # level 1 goes on
    assert episode_score([1.0, -3.0], score="l1") == 2.0
    with pytest.raises(UsageError):
        episode_score([1.0], score="mean")
    with pytest.raises(UsageError):
        score_episodes(sampler, adv, levels[:2], ends, {})


# ---- procgen's level generator ----


def test_untempered_words_give_the_outputs() -> None:
    """numpy's MT19937 is std::mt19937 (as evaluate's level seeds rely on): from the words at
    position 0 it returns the wanted outputs, in order."""
    wanted = np.random.default_rng(3).integers(0, 2**32, MT_WORDS, dtype=np.uint64)
    state = np.random.RandomState(0)
    state.set_state(("MT19937", mt19937_untemper(wanted), 0))
    np.testing.assert_array_equal(state.randint(0, 2**32, MT_WORDS, dtype=np.uint32), wanted)


def _env(game: str, n: int, num_levels: int, start_level: int = 0, **kwargs: Any) -> Any:
    return make_env(EnvConfig(game, "easy", num_levels=num_levels, start_level=start_level),
                    n, 3, flatten=False, **kwargs)  # fmt: skip


def _without_level_rng(blob: bytes, game: str) -> bytes:
    at = 76 + len(game)  # level_seed_rand_gen (docs/state-format.md §1)
    (length,) = struct.unpack_from("<i", blob, at + 4)
    return blob[:at] + blob[at + 8 + length :]


@pytest.mark.live
def test_the_wrapper_starts_the_queued_levels_and_keeps_the_episodes() -> None:
    """Every episode after the first starts on the level its env's queue held (procgen's own
    level_seed), through refreshes (a queue of 3: a new one every third episode); a refresh
    changes nothing but the level generator; the episode lengths run across refreshes."""
    sampler = LevelSampler(10, seed=2)
    for level in range(10):
        sampler.update(level, float(level % 3))
    env = PrioritizedLevels(_env("bigfish", 8, 10, start_level=100), sampler, queue=3)
    _, info = env.reset(seed=3)
    np.testing.assert_array_equal(info["level_seed"], 100 + env.levels)
    rng, lengths, started = np.random.default_rng(0), np.zeros(8, int), []
    for _ in range(300):
        expected = env.next_levels
        _, _, terminated, truncated, info = env.step(rng.integers(0, 15, 8))
        lengths += 1
        ended = terminated | truncated
        np.testing.assert_array_equal(info["level_seed"][ended], 100 + expected[ended])
        np.testing.assert_array_equal(info["level_seed"], 100 + env.levels)
        if ended.any():
            np.testing.assert_array_equal(info["episode_stats"]["l"][ended], lengths[ended])
            lengths[ended] = 0
            started += expected[ended].tolist()
    assert len(started) > 12 and env.refreshes >= 3, (len(started), env.refreshes)
    before = env.env.get_states()
    env.refresh()
    after = env.env.get_states()
    assert all(a != b for a, b in zip(before, after))
    assert [_without_level_rng(b, "bigfish") for b in before] == [
        _without_level_rng(a, "bigfish") for a in after
    ]
    env.close()


@pytest.mark.live
def test_a_dominant_level_gets_the_episodes_procgen_would_spread() -> None:
    """Real procgen, 8 envs, 10 levels, level 3 scored far above the others: most episodes
    start on it; procgen's own draw gives it about a tenth."""

    def starts(env: Any) -> List[int]:
        env.reset(seed=4)
        rng, out = np.random.default_rng(1), []
        for _ in range(800):
            _, _, terminated, truncated, info = env.step(rng.integers(0, 15, 8))
            out += info["level_seed"][terminated | truncated].tolist()
        env.close()
        return out

    sampler = LevelSampler(10, seed=0)
    for level in range(10):
        sampler.update(level, 3.0 if level == 3 else 0.0)
    prioritized = np.array(starts(PrioritizedLevels(_env("bigfish", 8, 10), sampler)))
    uniform = np.array(starts(_env("bigfish", 8, 10)))
    assert len(prioritized) > 15 and len(uniform) > 15
    assert np.mean(prioritized == 3) > 0.7, np.bincount(prioritized)
    assert np.mean(uniform == 3) < 0.3, np.bincount(uniform)


@pytest.mark.live
@pytest.mark.parametrize("game", ["coinrun", "bigfish"])
def test_a_sampled_level_plays_as_procgens_own_start_of_it(game: str) -> None:
    """The episode the wrapper starts on level L (after another episode ended in that env) is
    the episode of a fresh env of level L alone: the same actions give the same observations,
    rewards and ends, step for step."""
    sampler = LevelSampler(20, seed=6)
    env = PrioritizedLevels(_env(game, 4, 20, start_level=50), sampler)
    env.reset(seed=6)
    rng = np.random.default_rng(2)
    for _ in range(3000):  # until env 0's episode ends (bigfish: ~130 steps, coinrun more)
        obs, _, terminated, truncated, _ = env.step(rng.integers(0, 15, 4))
        if terminated[0] or truncated[0]:
            break
    assert terminated[0] or truncated[0]
    level = 50 + int(env.levels[0])
    fresh = _env(game, 1, 1, start_level=level)
    theirs, _ = fresh.reset()
    for step in range(150):
        for key in obs:
            np.testing.assert_array_equal(obs[key][0], theirs[key][0], err_msg=f"{key} {step}")
        actions = rng.integers(0, 15, 4)
        obs, reward, terminated, truncated, _ = env.step(actions)
        theirs, their_reward, their_term, their_trunc, info = fresh.step(actions[:1])
        assert (reward[0], terminated[0], truncated[0]) == (
            their_reward[0], their_term[0], their_trunc[0]
        ), step  # fmt: skip
        if terminated[0] or truncated[0]:
            break
        assert info["level_seed"][0] == level
    env.close()
    fresh.close()


@pytest.mark.live
def test_wrapper_misuse_is_a_usage_error() -> None:
    sampler = LevelSampler(10)
    full = _env("bigfish", 2, 0)
    with pytest.raises(UsageError, match="num_levels > 0"):
        PrioritizedLevels(full, LevelSampler(10))
    full.close()
    env = _env("bigfish", 2, 10)
    with pytest.raises(UsageError, match="the sampler has 7 levels"):
        PrioritizedLevels(env, LevelSampler(7))
    for queue in (0, MT_WORDS + 1, 2.0):
        with pytest.raises(UsageError, match="queue"):
            PrioritizedLevels(env, sampler, queue=queue)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="LevelSampler"):
        PrioritizedLevels(env, object())  # type: ignore[arg-type]
    wrapped = PrioritizedLevels(env, sampler)
    with pytest.raises(UsageError, match="reset"):
        wrapped.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(UsageError, match="no options"):
        wrapped.reset(options={"reset_mask": np.ones(2, bool)})
    env.close()
    next_step = _env("bigfish", 2, 10, autoreset_mode="NextStep")
    with pytest.raises(UsageError, match="SAME_STEP"):
        PrioritizedLevels(next_step, sampler)
    next_step.close()


# ---- sb3_ppo --level-sampler plr ----

SMALL = ["--envs", "8", "--ppo", "n_steps=128", "--ppo", "batch_size=256", "--ppo", "n_epochs=1",
         "--eval-episodes", "0"]  # fmt: skip


@pytest.mark.live
def test_sb3_ppo_trains_with_plr_records_it_and_resumes(tmp_path: Any) -> None:
    """Two rollouts with the lean learner on 10 bigfish levels: env.json records the sampler,
    level_sampler.json its state (episodes were scored); a resume under SB3's own PPO continues
    that state (its counts go on, every scored level stays scored) and keeps the settings."""
    import json

    pytest.importorskip("stable_baselines3")
    from procgen_entities.tools.sb3_ppo import main as sb3_ppo

    out = tmp_path / "run"
    assert sb3_ppo(["bigfish", "--steps", "2048", "--num-levels", "10", "--level-sampler", "plr",
                    "--plr-beta", "0.2", "--out", str(out), *SMALL]) == 0  # fmt: skip
    settings = {"kind": "plr", "beta": 0.2, "rho": 0.1, "replay_prob": None, "score": "positive"}
    record = json.loads((out / "checkpoint" / "env.json").read_text())
    assert record["trainer"]["level_sampler"] == settings and record["env"]["num_levels"] == 10
    state = json.loads((out / "checkpoint" / "level_sampler.json").read_text())
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    levels = [r for r in records if r["kind"] == "levels"]
    assert [r["step"] for r in levels] == [1024, 2048] and levels[-1]["scored"] > 0
    assert sum(state["seen"]) == levels[-1]["seen"] > 0
    assert sb3_ppo(["bigfish", "--steps", "3072", "--resume", str(out / "checkpoint"),
                    "--trainer", "sb3", "--out", str(out), *SMALL]) == 0  # fmt: skip
    resumed = json.loads((out / "checkpoint" / "level_sampler.json").read_text())
    assert resumed["count"] > state["count"]
    assert all(after or not before for before, after in zip(state["seen"], resumed["seen"]))
    assert json.loads((out / "checkpoint" / "env.json").read_text())["trainer"][
        "level_sampler"] == settings  # fmt: skip
    runs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["level_sampler"] for r in runs if r["kind"] == "run"] == [settings, settings]


@pytest.mark.live
def test_sb3_ppo_default_draws_procgens_levels_and_records_no_sampler(tmp_path: Any) -> None:
    pytest.importorskip("stable_baselines3")
    import json

    from procgen_entities.tools.sb3_ppo import main as sb3_ppo

    out = tmp_path / "run"
    assert sb3_ppo(["bigfish", "--smoke", "--num-levels", "10", "--eval-episodes", "0",
                    "--out", str(out)]) == 0  # fmt: skip
    assert "level_sampler" not in json.loads((out / "checkpoint" / "env.json").read_text())[
        "trainer"]  # fmt: skip
    assert not (out / "checkpoint" / "level_sampler.json").exists()
    assert '"levels"' not in (out / "metrics.jsonl").read_text()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--level-sampler", "plr"], "--level-sampler plr needs --num-levels N > 0"),
        (["--num-levels", "10", "--plr-rho", "0.5"], "--plr-rho needs --level-sampler plr"),
        (["--num-levels", "10", "--level-sampler", "plr", "--plr-beta", "0"], "beta"),
        (["--num-levels", "10", "--level-sampler", "plr", "--plr-rho", "2"], "rho"),
    ],
)
def test_sb3_ppo_level_sampler_misuse_is_one_line(
    flags: List[str], message: str, tmp_path: Any, capsys: Any
) -> None:
    pytest.importorskip("stable_baselines3")
    from procgen_entities.tools.sb3_ppo import main as sb3_ppo

    with pytest.raises(SystemExit) as exit_:
        sb3_ppo(["bigfish", "--smoke", "--out", str(tmp_path / "run"), *flags])
    assert exit_.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("python -m procgen_entities.tools.sb3_ppo: error: ") and message in last
    assert not (tmp_path / "run").exists()
