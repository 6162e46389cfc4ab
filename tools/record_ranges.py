"""Measure the values real procgen states take, per game, into procgen_entities/value_ranges.json.

    PYTHONPATH=. python tools/record_ranges.py [--envs 32] [--steps 1500] [GAME ...]

For every game and every distribution mode it has, a headless ProcgenVecEnv (seed fixed per game
and mode) plays ``--steps`` steps with ``--envs`` envs: each env presses one favourite action half
of the time and a random one otherwise, so that agents also get far into levels. Every state of
every step is parsed with the C parser (so every one is checked against the game's invariants),
and per game the minimum and maximum of every header/base scalar, trailer scalar, trailer vector
item (per field for entity records) and entity field are kept, with the entity types and tile ids
seen and the most entities of each type in one state (games.default_caps, the Gymnasium adapter's
caps). restore.py refuses blobs whose values fall outside these ranges (with a margin for counters
and coordinates), which keeps states that procgen would crash on away from its set_state.
"""

from __future__ import annotations

import argparse
import json
import sys
import zlib
from pathlib import Path
from typing import Dict, List

import numpy as np

from procgen_entities.games import ENTITY_FIELDS, GAME_NAMES, NUM_ACTIONS, get_game
from procgen_entities.parse import parse_states
from procgen_entities.procgen_envs import valid_modes

OUT = Path(__file__).resolve().parent.parent / "procgen_entities" / "value_ranges.json"


class Ranges:
    def __init__(self) -> None:
        self.lo: Dict[str, float] = {}
        self.hi: Dict[str, float] = {}
        self.sets: Dict[str, set] = {"entity_types": set(), "tiles": set()}
        self.max_counts: Dict[int, int] = {}  # entity type -> most entities of it in one state
        self.states = 0

    def add(self, key: str, values: np.ndarray) -> None:
        if values.size == 0:
            return
        lo, hi = float(values.min()), float(values.max())
        self.lo[key] = min(self.lo.get(key, lo), lo)
        self.hi[key] = max(self.hi.get(key, hi), hi)

    def as_json(self) -> Dict[str, object]:
        return {
            "states": self.states,
            "ranges": {k: [self.lo[k], self.hi[k]] for k in sorted(self.lo)},
            "max_counts": {str(k): v for k, v in sorted(self.max_counts.items())},
            **{name: sorted(int(v) for v in values) for name, values in self.sets.items()},
        }


def rollout(game: str, mode: str, envs: int, steps: int, ranges: Ranges) -> None:
    from ragged_buffer import RaggedBufferI64

    from procgen_entities.entity_gym.vec_env import ProcgenVecEnv

    seed = zlib.crc32(f"{game}/{mode}".encode())
    rng = np.random.default_rng(seed)
    favourite = rng.integers(0, NUM_ACTIONS, envs)
    ones = np.ones(envs, dtype=np.int64)
    info = get_game(game)
    with ProcgenVecEnv(
        game, envs, seed=seed % 2**31, distribution_mode=mode, engine="headless"
    ) as env:
        space = env.obs_space()
        env.reset(space)
        for _ in range(steps):
            chosen = np.where(rng.random(envs) < 0.5, favourite, rng.integers(0, NUM_ACTIONS, envs))
            env.act({"move": RaggedBufferI64.from_flattened(chosen.reshape(-1, 1), ones)}, space)
            states = [env.collector.state_bytes(i) for i in range(envs)]
            batch = parse_states(states, game=game)
            ranges.states += envs
            for name, values in batch.scalars.items():
                ranges.add(f"scalar.{name}", np.asarray(values, dtype=np.float64))
            for name, values in batch.extras.items():
                ranges.add(f"trailer.{name}", np.asarray(values, dtype=np.float64))
            for name, kind in info.trailer:
                if kind == "ve":  # entity records (starpilot's future spawns): per field
                    records = np.asarray(batch.vectors[name], dtype=np.float64)
                    for k, field in enumerate(ENTITY_FIELDS):
                        ranges.add(f"vector.{name}.{field}", records[:, k])
                elif kind.startswith("v"):
                    ranges.add(f"vector.{name}", np.asarray(batch.vectors[name], dtype=np.float64))
            for k, field in enumerate(batch.entity_fields):
                ranges.add(f"entity.{field}", batch.entities[:, k].astype(np.float64))
            types = batch.field("type").astype(np.int64)
            ranges.sets["entity_types"].update(np.unique(types).tolist())
            owner = np.repeat(np.arange(envs), batch.entity_counts)
            for t in np.unique(types):
                most = int(np.bincount(owner[types == t], minlength=envs).max())
                ranges.max_counts[int(t)] = max(ranges.max_counts.get(int(t), 0), most)
            ranges.sets["tiles"].update(np.unique(batch.grid).tolist())


def main(argv: List[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("games", nargs="*", default=list(GAME_NAMES))
    parser.add_argument("--envs", type=int, default=32)
    parser.add_argument("--steps", type=int, default=1500)
    args = parser.parse_args(argv)
    table = json.loads(OUT.read_text()) if OUT.exists() else {}
    total = 0
    for game in args.games:
        ranges = Ranges()
        for mode in valid_modes(game):
            rollout(game, mode, args.envs, args.steps, ranges)
        table[game] = ranges.as_json()
        total += ranges.states
        print(f"{game:10s} {ranges.states:8d} states, all accepted", flush=True)
    table = {k: table[k] for k in sorted(table)}
    OUT.write_text(json.dumps(table, indent=1) + "\n")
    print(f"{total} states in {len(args.games)} games; wrote {OUT}")


if __name__ == "__main__":
    main(sys.argv[1:])
