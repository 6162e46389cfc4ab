"""Live procgen: parse_states on fresh get_state bytes agrees with procgen and the reference.

For every game and mode 4 procgen envs (the installed backend) take random actions; after every
step the parsed reward and done must equal procgen's ``observe()`` reward and ``first`` exactly,
entity 0 must be the player, and the C parse must equal the reference parse. Post-done states
(first = 1) are included wherever an episode ends within the rollout (and step 0 always has
first = 1).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_arrays_identical, assert_batches_identical

from procgen_entities import GAME_NAMES, parse_states
from procgen_entities.reference import reference_parse_states

pytestmark = pytest.mark.live

NUM_ENVS = 4
STEPS = 200


@pytest.mark.parametrize("mode", ["easy", "hard"])
@pytest.mark.parametrize("game", GAME_NAMES)
def test_live_rollout(game: str, mode: str) -> None:
    from procgen_entities.procgen_envs import make_procgen_env

    seed = GAME_NAMES.index(game) * 2 + (mode == "hard")
    env = make_procgen_env(game, NUM_ENVS, distribution_mode=mode, num_levels=0, rand_seed=seed)
    rng = np.random.default_rng(seed)
    all_states = []
    post_done = 0
    for step in range(STEPS + 1):
        if step:
            env.act(rng.integers(0, 15, size=NUM_ENVS))
        rew, _, first = env.observe()
        states = env.callmethod("get_state")
        batch = parse_states(states)
        assert batch.game == game
        assert_arrays_identical(batch.reward, rew.astype(np.float32), f"step {step} reward")
        assert_arrays_identical(batch.done, first.astype(bool), f"step {step} done")
        assert np.all(batch.field("type")[batch.entity_offsets[:-1]] == 0)
        assert np.all(batch.scalars["game_n"] == np.arange(NUM_ENVS))
        assert np.all(batch.scalars["distribution_mode"] == (mode == "hard"))
        if step == 0:
            assert batch.done.all() and not batch.scalars["episode_done"].any()
        else:
            post_done += int(batch.done.sum())
            assert np.all(batch.cur_time[batch.done] == 0)
        all_states.extend(states)
    print(f"{game}-{mode}: {post_done} post-done states")
    # The whole rollout as one batch: C == reference.
    assert_batches_identical(parse_states(all_states), reference_parse_states(all_states))
