"""Benchmark parse_states against procgen's own get_state and a per-state Python parse.

    PYTHONPATH=. python benchmarks/bench_parse.py [--repeats N] [--mode hard]   # from the repo root

For each game a 64-env ProcgenGym3Env takes a few random steps, then, all in this run:

* get_state: wall time of ``env.callmethod("get_state")`` (64 states) / 64;
* C parse:   ``parse_states(states)`` on the 64 states that get_state call returned, / 64:
             "cold" = the first call (the pipeline case: procgen's 64 fresh 1 MiB buffers have
             just gone through the caches), "warm" = the median of 20 more calls;
* Python:    ``reference_parse_states([state])`` once per state (the pure-Python reference
             parser, one state per call), total / 64.

Everything is measured in interleaved rounds so that all figures see the same load (the machine
is shared); figures are medians over the rounds, in microseconds per state, and the ratios (C
parse as a share of get_state, speedup over the per-state Python parse) are medians of the
per-round ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable, Dict, List

import numpy as np

from procgen_entities import parse_states
from procgen_entities.games import NUM_ACTIONS
from procgen_entities.reference import reference_parse_states

NUM_ENVS = 64
CASES = [("coinrun", True), ("coinrun", False), ("bigfish", True), ("starpilot", True)]


def _us_per_state(fn: Callable[[], object], n_states: int) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) / n_states * 1e6


def bench(game: str, grid: bool, mode: str, repeats: int, warmup_steps: int) -> dict:
    from procgen import ProcgenGym3Env

    env = ProcgenGym3Env(num=NUM_ENVS, env_name=game, distribution_mode=mode, rand_seed=0)
    rng = np.random.default_rng(0)
    for _ in range(warmup_steps):
        env.act(rng.integers(0, NUM_ACTIONS, size=NUM_ENVS))
    states = env.callmethod("get_state")  # also waits for procgen's stepping threads
    parse_states(states, grid=grid)  # warm caches (game spec, field indices)

    # Interleaved rounds: the machine is shared, so every round measures everything under the
    # same load; figures are medians over rounds, ratios are medians of per-round ratios.
    # "cold" is the first parse of the states a get_state call just returned (the pipeline case:
    # procgen's 64 fresh 1 MiB buffers have just evicted our caches); "warm" is 20 more calls.
    rounds: Dict[str, List[float]] = {"get_state": [], "cold": [], "warm": [], "python": []}
    for _ in range(repeats):
        fresh: list = []
        rounds["get_state"].append(
            _us_per_state(lambda fresh=fresh: fresh.extend(env.callmethod("get_state")), NUM_ENVS)
        )
        rounds["cold"].append(
            _us_per_state(lambda fresh=fresh: parse_states(fresh, grid=grid), NUM_ENVS)
        )
        rounds["warm"].append(
            statistics.median(
                _us_per_state(lambda fresh=fresh: parse_states(fresh, grid=grid), NUM_ENVS)
                for _ in range(20)
            )
        )
        rounds["python"].append(
            _us_per_state(
                lambda fresh=fresh: [reference_parse_states([s], grid=grid) for s in fresh],
                NUM_ENVS,
            )
        )
    out: Dict[str, object] = {k: statistics.median(v) for k, v in rounds.items()}
    for kind in ("cold", "warm"):
        out[f"share_{kind}"] = statistics.median(
            c / g for c, g in zip(rounds[kind], rounds["get_state"])
        )
        out[f"speedup_{kind}"] = statistics.median(
            p / c for p, c in zip(rounds["python"], rounds[kind])
        )
    batch = parse_states(states, grid=grid)
    out.update(
        game=game + ("" if grid else " (grid=False)"),
        bytes=int(np.mean(batch.sizes)),
        entities=float(np.mean(batch.entity_counts)),
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--mode", default="hard")
    parser.add_argument("--warmup-steps", type=int, default=50)
    args = parser.parse_args()

    rows = [bench(g, grid, args.mode, args.repeats, args.warmup_steps) for g, grid in CASES]
    print(
        f"| game ({args.mode}, {NUM_ENVS} states) | bytes | entities | get_state | "
        "C parse cold | C parse warm | Python parse | cold / get_state | warm / get_state | "
        "Python / cold | Python / warm |"
    )
    print("|" + "---|" * 11)
    for r in rows:
        print(
            f"| {r['game']} | {r['bytes']:,} | {r['entities']:.1f} | {r['get_state']:.1f} | "
            f"{r['cold']:.2f} | {r['warm']:.2f} | {r['python']:.1f} | "
            f"{100 * r['share_cold']:.1f}% | {100 * r['share_warm']:.1f}% | "
            f"{r['speedup_cold']:.0f}x | {r['speedup_warm']:.0f}x |"
        )
    print("(µs per state, medians over rounds; bytes and entities are per-state means)")


if __name__ == "__main__":
    main()
