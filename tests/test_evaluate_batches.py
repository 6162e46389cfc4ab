"""evaluate in batches of envs: the levels and the episodes of one all-at-once vec env."""

from __future__ import annotations

import numpy as np
import pytest

from procgen_entities.agents.checkpoint import EnvConfig
from procgen_entities.agents.evaluation import (
    EVAL_SEED,
    RandomActions,
    first_level_seeds,
    run_episodes,
    scripted_coinrun,
)
from procgen_entities.features import feature_space
from procgen_entities.gymnasium import EntityVectorEnv


@pytest.mark.parametrize(
    "config,episodes",
    [
        (EnvConfig("coinrun", "hard"), 20),  # two procgen groups
        (EnvConfig("bigfish", "easy", num_levels=7, start_level=3), 5),  # one group, a range
    ],
)
def test_first_level_seeds_are_procgens(config: EnvConfig, episodes: int) -> None:
    env = EntityVectorEnv(config.game, episodes, seed=EVAL_SEED, group_seeding="consecutive",
                          **{**config.env_kwargs(), "tilemap": None})  # fmt: skip
    try:
        _, info = env.reset(seed=EVAL_SEED)
        levels = info["level_seed"].tolist()
    finally:
        env.close()
    assert first_level_seeds(config, episodes, EVAL_SEED) == levels
    if config.num_levels:
        assert all(3 <= level < 10 for level in levels)


def _scripted() -> object:
    space = feature_space("coinrun", relative_positions=True)
    return scripted_coinrun({name: tuple(e.features) for name, e in space.entities.items()})


@pytest.mark.parametrize("policy", ["random", "scripted"])
def test_batches_play_the_same_episodes(policy: str) -> None:
    config = EnvConfig("coinrun", "hard")
    episodes = 20

    def play(batch: int) -> object:
        act = RandomActions(7, 15, episodes) if policy == "random" else _scripted()
        return run_episodes(config, act, episodes, EVAL_SEED, flatten=False,  # type: ignore[arg-type]
                            batch=batch)  # fmt: skip

    whole, batched = play(episodes), play(7)  # 7, 7, 6 envs
    np.testing.assert_array_equal(batched.complete, whole.complete)
    np.testing.assert_array_equal(batched.returns, whole.returns)
    np.testing.assert_array_equal(batched.lengths, whole.lengths)
    assert batched.causes == whole.causes
    assert len(set(whole.lengths.tolist())) > 3  # the episodes differ: a real comparison


def test_batch_must_be_positive() -> None:
    with pytest.raises(ValueError, match="batch"):
        run_episodes(EnvConfig("coinrun"), RandomActions(0, 15, 2), 2, 0, batch=0)
