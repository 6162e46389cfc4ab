"""Entity steps/s of ProcgenVecEnv against baselines measured in the same run.

    python benchmarks/bench_vec_env.py [--games coinrun bigfish starpilot] [--envs 64]
                                       [--steps 50] [--repeats 7]

Baselines, all with the same number of envs and random actions:
  serial     procgen act + get_state (gym3 callmethod) in a Python loop: states, not entities
  pixels     procgen act + observe: what pixel agents pay
  seed-style one procgen env per env, a per-state pure-Python parse, entity-gym's EnvList
Then ProcgenVecEnv's thread scaling (1 .. cores) and where its step time goes.
Prints ratios; machines are noisy, so compare within one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Callable, Dict, List

import numpy as np
from entity_gym.env import EnvList
from ragged_buffer import RaggedBufferI64

from procgen_entities.baselines import SeedStyleEnv
from procgen_entities.procgen_envs import make_procgen_env
from procgen_entities.vec_env import ProcgenVecEnv


def interleaved_rates(
    runners: Dict[str, Callable[[int], None]], steps: Dict[str, int], envs: int, repeats: int
) -> Dict[str, float]:
    """Median env steps/s of each runner. Runners take turns block by block, so a slow spell of
    this shared machine hits all of them alike instead of whichever ran at the time."""
    for name, run in runners.items():
        run(max(5, steps[name] // 10))  # warm up
    samples: Dict[str, List[float]] = {name: [] for name in runners}
    for _ in range(repeats):
        for name, run in runners.items():
            t = time.perf_counter()
            run(steps[name])
            samples[name].append(steps[name] * envs / (time.perf_counter() - t))
    return {name: statistics.median(values) for name, values in samples.items()}


def action_batches(n: int, count: int = 32) -> List[Dict[str, RaggedBufferI64]]:
    rng = np.random.default_rng(0)
    ones = np.ones(n, dtype=np.int64)
    return [
        {"move": RaggedBufferI64.from_flattened(rng.integers(0, 15, (n, 1)), ones)}
        for _ in range(count)
    ]


def bench_game(game: str, n: int, steps: int, repeats: int) -> Dict[str, float]:
    raw = np.random.default_rng(0).integers(0, 15, (32, n)).astype(np.int32)
    acts = action_batches(n)
    serial_env = make_procgen_env(game, n, rand_seed=0)
    pixel_env = make_procgen_env(game, n, rand_seed=0)
    seed_env = EnvList(lambda: SeedStyleEnv(game, 0), n)
    seed_space = seed_env.obs_space()
    seed_env.reset(seed_space)
    cores = os.cpu_count() or 1
    vec_envs = {t: ProcgenVecEnv(game, n, seed=0, num_threads=t) for t in sorted({1, 2, cores})}
    for vec in vec_envs.values():
        vec.reset(vec.obs_space())

    def serial(k: int) -> None:
        for i in range(k):
            serial_env.act(raw[i % 32])
            serial_env.callmethod("get_state")

    def pixels(k: int) -> None:
        for i in range(k):
            pixel_env.act(raw[i % 32])
            pixel_env.observe()

    def seed_style(k: int) -> None:
        for i in range(k):
            seed_env.act(acts[i % 32], seed_space)

    def vec_runner(vec: ProcgenVecEnv) -> Callable[[int], None]:
        space = vec.obs_space()

        def run(k: int) -> None:
            for i in range(k):
                vec.act(acts[i % 32], space)

        return run

    runners: Dict[str, Callable[[int], None]] = {
        "serial act+get_state": serial,
        "act+observe (pixels)": pixels,
        "seed-style EnvList": seed_style,
    }
    for t, vec in vec_envs.items():
        runners[f"ProcgenVecEnv {t} thread(s)"] = vec_runner(vec)
    block = {name: steps for name in runners}
    block["seed-style EnvList"] = max(5, steps // 8)  # it is slow; keep its blocks short
    try:
        return interleaved_rates(runners, block, n, repeats)
    finally:
        serial_env.close()
        pixel_env.close()
        seed_env.close()
        for vec in vec_envs.values():
            vec.close()


def breakdown(game: str, n: int, steps: int) -> Dict[str, float]:
    """µs per env step in each phase of ProcgenVecEnv.act, phases forced apart (no overlap)."""
    vec = ProcgenVecEnv(game, n, seed=0)
    space = vec.obs_space()
    vec.reset(space)
    acts = action_batches(n)
    phases = dict.fromkeys(
        ["act", "waiting for procgen", "get_state+measure", "parse", "VecObs"], 0.0
    )
    for i in range(steps):
        chosen = acts[i % 32]["move"].as_array().reshape(-1).astype(np.int32)
        t0 = time.perf_counter()
        for env, start, size in zip(vec._envs, vec._group_starts, vec._group_sizes):
            env.act(chosen[start : start + size])
        t1 = time.perf_counter()
        for env in vec._envs:
            env.observe()  # waits until procgen finished stepping
        t2 = time.perf_counter()
        vec._collect()
        t3 = time.perf_counter()
        plan = vec._plan_for(space)
        vec._collector.fill(vec._scalars, vec._trailer)
        counts = np.empty((len(plan.entity_types), n), dtype=np.int64)
        vec._collector.count(counts)
        offsets = np.zeros(len(plan.entity_types) + 1, dtype=np.int64)
        np.cumsum(counts.sum(axis=1) * plan.widths, out=offsets[1:])
        vec._collector.gather(counts, offsets, np.empty(offsets[-1], dtype=np.float32))
        t4 = time.perf_counter()
        vec._observe(space)
        t5 = time.perf_counter()
        for key, dt in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, (t5 - t4) - (t4 - t3))):
            phases[key] += dt
    vec.close()
    return {k: v / steps / n * 1e6 for k, v in phases.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--games", nargs="+", default=["coinrun", "bigfish", "starpilot"])
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=50, help="steps per timed block")
    parser.add_argument("--repeats", type=int, default=7, help="blocks per runner")
    args = parser.parse_args()
    print(f"{args.envs} envs, {args.steps} steps x {args.repeats} repeats, {os.cpu_count()} cores")
    for game in args.games:
        results = bench_game(game, args.envs, args.steps, args.repeats)
        base = results["serial act+get_state"]
        seed = results["seed-style EnvList"]
        print(f"\n{game}")
        print(f"  {'':32s} {'steps/s':>9s} {'vs serial':>9s} {'vs seed':>9s}")
        for name, value in results.items():
            print(f"  {name:32s} {value:9.0f} {value / base:8.2f}x {value / seed:8.2f}x")
        print("  where a ProcgenVecEnv step goes (µs per env step, phases run apart):")
        for name, us in breakdown(game, args.envs, 100).items():
            print(f"    {name:24s} {us:7.2f}")


if __name__ == "__main__":
    main()
