"""procgen_entities.episodes (csrc/episodes.c): the native episode accounting against the
array-by-array rule EntityVectorEnv applied before it, on random steps, and its misuse."""

from __future__ import annotations

from typing import Tuple

import numpy as np
import numpy.typing as npt
import pytest

from procgen_entities.episodes import EpisodeStats
from procgen_entities.errors import UsageError

Arrays = Tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_], npt.NDArray[np.bool_]]


def reference_step(
    returns: npt.NDArray[np.float64], lengths: npt.NDArray[np.int64],
    resetting: npt.NDArray[np.bool_], reward: npt.NDArray[np.float32],
    done: npt.NDArray[np.uint8], truncated: npt.NDArray[np.bool_],
) -> Tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_], npt.NDArray[np.float32],
           npt.NDArray[np.int32]]:  # fmt: skip
    """The rule as numpy operations (EntityVectorEnv.step before csrc/episodes.c)."""
    reward[resetting] = 0.0
    terminated = done.view(np.bool_) & ~truncated
    terminated[resetting] = truncated[resetting] = False
    returns[resetting], lengths[resetting] = 0.0, 0
    live = ~resetting
    returns[live] += reward[live]
    lengths[live] += 1
    ended = terminated | truncated
    final_r = np.where(ended, returns, 0.0).astype(np.float32)
    final_l = np.where(ended, lengths, 0).astype(np.int32)
    returns[ended], lengths[ended] = 0.0, 0
    return terminated, truncated, final_r, final_l


@pytest.mark.parametrize("seed", range(5))
def test_native_accounting_matches_the_array_rule(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 70))
    stats = EpisodeStats(n)
    returns, lengths = np.zeros(n), np.zeros(n, np.int64)
    ended_total = 0
    for _ in range(200):
        resetting = rng.random(n) < 0.1
        reward = (rng.integers(-2, 5, n) * rng.random(n)).astype(np.float32)
        done = (rng.random(n) < 0.08).astype(np.uint8)
        truncated = (done == 1) & (rng.random(n) < 0.3)
        want = reference_step(returns, lengths, resetting, reward.copy(), done, truncated.copy())
        got_reward = reward.copy()
        out = stats.step(resetting, got_reward, done, truncated.copy())
        assert (got_reward == np.where(resetting, 0.0, reward)).all()
        for got, expected in zip(
            (out.terminated, out.truncated, out.final_return, out.final_length), want
        ):
            assert got.dtype == expected.dtype and (got == expected).all()
        assert out.ended_count == int(out.ended.sum()) == int((want[0] | want[1]).sum())
        assert np.array_equal(stats.returns, returns) and np.array_equal(stats.lengths, lengths)
        ended_total += out.ended_count
    assert ended_total > 0  # the random steps did end episodes


def test_restart_zeroes_only_the_chosen_envs() -> None:
    stats = EpisodeStats(3)
    no = np.zeros(3, np.bool_)
    stats.step(no, np.array([1.0, 2.0, 3.0], np.float32), np.zeros(3, np.uint8), no.copy())
    stats.restart(np.array([False, True, False]))
    assert stats.returns.tolist() == [1.0, 0.0, 3.0] and stats.lengths.tolist() == [1, 0, 1]


def test_arrays_of_other_sizes_are_a_usage_error() -> None:
    stats = EpisodeStats(4)
    no = np.zeros(4, np.bool_)
    with pytest.raises(UsageError, match="4 entries"):
        stats.step(no, np.zeros(3, np.float32), np.zeros(4, np.uint8), no.copy())
    with pytest.raises(ValueError):  # a float64 reward is not the step's float32 array
        stats.step(no, np.zeros(4), np.zeros(4, np.uint8), no.copy())  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="bool or uint8"):
        stats.step([False] * 4, np.zeros(4, np.float32), np.zeros(4, np.uint8), no.copy())  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="int64"):
        stats.step(no, np.zeros(4, np.float32), np.zeros(4, np.int64), no.copy())
