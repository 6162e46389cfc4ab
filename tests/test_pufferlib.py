"""PufferLib's trainer on entity observations (procgen_entities.pufferlib): a short run, and the
native env's buffers against what EntityVectorEnv itself returns for the same seed and actions.

Skipped where pufferlib-core is not installed (it is no dependency or extra of the package; see
the module's docstring). The module is imported rather than ``pufferlib.pufferl`` directly: that
import would leave a SIGINT handler calling ``os._exit(0)`` and rich's traceback hook in the test
process, which procgen_entities.pufferlib undoes.
"""

from __future__ import annotations

import math
from typing import List, Tuple

import numpy as np
import pytest
import torch

puffer = pytest.importorskip("procgen_entities.pufferlib", exc_type=ImportError)

from procgen_entities.gymnasium import EntityVectorEnv  # noqa: E402

pytestmark = pytest.mark.live

ENVS, HORIZON = 8, 32


def test_a_short_run_trains(tmp_path) -> None:
    result = puffer.train(
        "coinrun", 3 * ENVS * HORIZON, num_envs=ENVS, num_threads=1,
        config_overrides={"bptt_horizon": HORIZON, "data_dir": str(tmp_path)},
    )  # fmt: skip
    assert result["updates"] == 3
    assert result["total_steps"] == 3 * ENVS * HORIZON
    assert result["steps"] == 2 * ENVS * HORIZON  # from the end of the first update
    assert result["seconds"] > 0 and result["steps_per_second"] > 0
    losses = result["losses"]
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl"):
        assert math.isfinite(losses[key]), (key, losses)
    assert list(tmp_path.rglob("model_*.pt")), "PuffeRL saved no checkpoint in data_dir"


def test_the_buffers_hold_what_the_vector_env_returns() -> None:
    """Stepped through PufferLib's own calls (async_reset, send, recv), the buffers match a
    separate EntityVectorEnv stepped with the same seed and actions, and the infos carry the
    returns and lengths of the episodes it ends."""
    env = puffer.EntityPufferEnv("coinrun", ENVS, training_recipe=True, num_threads=1)
    reference = EntityVectorEnv.for_training(
        "coinrun", ENVS, flatten=True, autoreset_mode="SameStep", num_threads=1
    )
    rng = np.random.default_rng(0)
    got: List[Tuple[float, int]] = []
    expected: List[Tuple[float, int]] = []
    try:
        env.async_reset(5)
        obs, _ = reference.reset(seed=5)
        np.testing.assert_array_equal(env.recv()[0], obs)
        for _ in range(400):
            actions = rng.integers(0, 15, size=ENVS, dtype=np.int32)
            env.send(actions)
            o, r, d, t, _, infos, _, _ = env.recv()
            obs, reward, terminated, truncated, info = reference.step(actions)
            np.testing.assert_array_equal(o, obs)
            np.testing.assert_array_equal(r, reward)
            np.testing.assert_array_equal(d, terminated)
            np.testing.assert_array_equal(t, truncated)
            for item in infos:
                got += [(x, n) for x, n in zip(item["episode_return"], item["episode_length"])]
            if "_episode_stats" in info:
                ended, stats = info["_episode_stats"], info["episode_stats"]
                expected += list(zip(stats["r"][ended].tolist(), stats["l"][ended].tolist()))
        assert got == expected
        assert got, "no episode ended in 400 steps: nothing compared"
    finally:
        env.close()
        reference.close()


def test_the_advantage_is_gae_without_off_policy_weights() -> None:
    """With ratios of 1, puff_advantage is GAE over each segment (the last step left at 0)."""
    gen = torch.Generator().manual_seed(0)
    values, rewards = torch.randn(3, 6, generator=gen), torch.randn(3, 6, generator=gen)
    terminals = (torch.rand(3, 6, generator=gen) < 0.3).float()
    out = puffer.puff_advantage(values, rewards, terminals, torch.ones(3, 6), torch.zeros(3, 6),
                                0.9, 0.8, 1.0, 1.0)  # fmt: skip
    for row in range(3):
        running = 0.0
        for t in range(4, -1, -1):
            alive = 1.0 - float(terminals[row, t + 1])
            delta = float(rewards[row, t + 1] + 0.9 * values[row, t + 1] * alive - values[row, t])
            running = delta + 0.9 * 0.8 * alive * running
            assert float(out[row, t]) == pytest.approx(running, rel=1e-5, abs=1e-6)
        assert float(out[row, 5]) == 0.0
