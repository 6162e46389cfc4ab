"""Soak the state writer: State.from_bytes(b).to_bytes() == b on many real procgen states.

Long random-action rollouts of every game in easy and hard mode (episodes end and levels reset
along the way), round-robin, until --states states are checked or --seconds run out. Every
state is written back one by one and, per step, all envs' states as one batch
(states_to_bytes); both must equal procgen's bytes. Prints a JSON summary (states checked, per
game and mode, post-done states, failures) and exits 1 on any mismatch.

    python tools/soak_state_writer.py --states 100000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Dict, List

import numpy as np

from procgen_entities import GAME_NAMES, State, states_from_bytes, states_to_bytes
from procgen_entities.games import NUM_ACTIONS


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--states", type=int, default=100_000, help="stop after this many")
    parser.add_argument("--seconds", type=float, default=float("inf"), help="or after this long")
    parser.add_argument("--steps", type=int, default=1000, help="steps per rollout")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--games", nargs="+", default=list(GAME_NAMES))
    parser.add_argument("--modes", nargs="+", default=["easy", "hard"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from procgen import ProcgenGym3Env

    start = time.monotonic()
    checked, post_done, failures = 0, 0, 0
    per_run: Dict[str, int] = {}
    rollout = 0
    while checked < args.states and time.monotonic() - start < args.seconds:
        game = args.games[rollout % len(args.games)]
        mode = args.modes[(rollout // len(args.games)) % len(args.modes)]
        seed = args.seed * 100_000 + rollout
        env = ProcgenGym3Env(
            num=args.num_envs, env_name=game, distribution_mode=mode, rand_seed=seed
        )
        rng = np.random.default_rng(seed)
        for step in range(args.steps + 1):
            if step:
                env.act(rng.integers(0, NUM_ACTIONS, size=args.num_envs))
            blobs = env.callmethod("get_state")
            states = states_from_bytes(blobs)
            singles = [State.from_bytes(b).to_bytes(validate=False) for b in blobs]
            batch = states_to_bytes(states, validate=False)
            bad = sum(a != b for a, b in zip(singles, blobs)) + sum(
                a != b for a, b in zip(batch, blobs)
            )
            if bad:
                failures += bad
                print(f"MISMATCH {game} {mode} seed {seed} step {step}", file=sys.stderr)
            if step:
                post_done += sum(bool(s.scalars["done"]) for s in states)
            checked += len(blobs)
            key = f"{game}-{mode}"
            per_run[key] = per_run.get(key, 0) + len(blobs)
            if checked >= args.states or time.monotonic() - start >= args.seconds:
                break
        env.close()
        rollout += 1
    summary = {
        "states_checked": checked,
        "post_done_states": post_done,
        "failures": failures,
        "rollouts": rollout,
        "seconds": round(time.monotonic() - start, 1),
        "per_game_mode": per_run,
    }
    print(json.dumps(summary, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
