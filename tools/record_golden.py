"""Record golden procgen states (and their expected parses) into tests/data/.

Run from the repository root:

    PYTHONPATH=.:tests python tools/record_golden.py            # all 16 games, easy and hard
    PYTHONPATH=.:tests python tools/record_golden.py coinrun    # some games only

For every game and mode a 2-env ``ProcgenGym3Env`` is stepped with a fixed seed and a fixed action
sequence. The states of both envs are kept at a few fixed steps and at the first steps right after
an episode ended (gym3 ``first`` = 1), found within ``MAX_STEPS`` steps. Two files are written per
game and mode:

* ``<game>-<mode>.states.npz``: the raw ``get_state`` bytes (concatenated, with offsets), the step
  and env index of each, and gym3's ``observe()`` reward and ``first`` for that env and step;
* ``<game>-<mode>.expected.npz``: the pure-Python reference parse of those states, flattened
  (see ``batch_to_arrays``).

Reading them back is tests/golden.py's job (the tests import it; this script only writes).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, Iterable, List

import numpy as np
from golden import DATA_DIR, MODES, batch_to_arrays, golden_name, split_states

from procgen_entities.games import NUM_ACTIONS

#: Steps whose states are always kept (step 0 is the state right after env creation).
FIXED_STEPS = (0, 3, 40)
#: How many post-done steps to keep, and how long to look for them.
DONE_STEPS = 2
MAX_STEPS = 1500
NUM_ENVS = 2
START_LEVEL = 100
NUM_LEVELS = 20


def _seed(game: str, mode: str) -> int:
    # Stable across runs and Python versions (unlike hash()).
    return sum((i + 1) * ord(ch) for i, ch in enumerate(f"{game}/{mode}"))


def record(game: str, mode: str) -> Dict[str, np.ndarray]:
    """Step a real procgen env and return the arrays of ``<game>-<mode>.states.npz``."""
    from procgen import ProcgenGym3Env

    seed = _seed(game, mode)
    env = ProcgenGym3Env(
        num=NUM_ENVS,
        env_name=game,
        distribution_mode=mode,
        start_level=START_LEVEL,
        num_levels=NUM_LEVELS,
        rand_seed=seed,
    )
    actions = np.random.default_rng(seed).integers(0, NUM_ACTIONS, size=(MAX_STEPS, NUM_ENVS))
    states: List[bytes] = []
    steps: List[int] = []
    envs: List[int] = []
    rewards: List[float] = []
    firsts: List[bool] = []

    def keep(step: int) -> None:
        rew, _, first = env.observe()
        for k, blob in enumerate(env.callmethod("get_state")):
            states.append(bytes(blob))
            steps.append(step)
            envs.append(k)
            rewards.append(float(rew[k]))
            firsts.append(bool(first[k]))

    keep(0)
    done_kept = 0
    for step in range(1, MAX_STEPS + 1):
        env.act(actions[step - 1])
        _, _, first = env.observe()
        if step in FIXED_STEPS or (first.any() and done_kept < DONE_STEPS):
            done_kept += int(first.any() and step not in FIXED_STEPS)
            keep(step)
        if step >= max(FIXED_STEPS) and done_kept >= DONE_STEPS:
            break

    lengths = np.array([len(s) for s in states], dtype=np.int64)
    return {
        "game": np.array(game),
        "mode": np.array(mode),
        "blob": np.frombuffer(b"".join(states), dtype=np.uint8),
        "offsets": np.concatenate(([0], np.cumsum(lengths))).astype(np.int64),
        "step": np.array(steps, dtype=np.int32),
        "env": np.array(envs, dtype=np.int32),
        "gym3_reward": np.array(rewards, dtype=np.float32),
        "gym3_first": np.array(firsts, dtype=np.bool_),
        "seed": np.array(seed, dtype=np.int64),
        "start_level": np.array(START_LEVEL, dtype=np.int32),
        "num_levels": np.array(NUM_LEVELS, dtype=np.int32),
    }


def main(games: Iterable[str]) -> None:
    from procgen_entities.reference import reference_parse_states

    DATA_DIR.mkdir(parents=True, exist_ok=True)
    total = 0
    for game in games:
        for mode in MODES:
            arrays = record(game, mode)
            states = split_states(arrays)
            expected = batch_to_arrays(reference_parse_states(states))
            base = DATA_DIR / golden_name(game, mode)
            np.savez_compressed(f"{base}.states.npz", **arrays)
            np.savez_compressed(f"{base}.expected.npz", **expected)
            size = Path(f"{base}.states.npz").stat().st_size
            size += Path(f"{base}.expected.npz").stat().st_size
            total += size
            print(
                f"{game:10s} {mode:4s} states={len(states):2d} steps={arrays['step'].tolist()} "
                f"first={arrays['gym3_first'].astype(int).tolist()} {size / 1e3:.0f} kB"
            )
    print(f"total {total / 1e6:.2f} MB in {DATA_DIR}")


if __name__ == "__main__":
    from procgen_entities.games import GAME_NAMES

    main(sys.argv[1:] or GAME_NAMES)
