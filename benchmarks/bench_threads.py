"""The pool's thread counts against 1 thread: oversubscription and the CPU affinity.

    python benchmarks/bench_threads.py [--game bigfish] [--envs 64] [--steps 200] [--repeats 5]
                                       [--threads 1 2 16 2048]

A headless ProcgenStepper (no observation building) steps ``--envs`` envs with random actions,
once per thread count, the runs taking turns block by block; then the same with the process
pinned to one CPU (os.sched_setaffinity), where the default thread count is compared with 1.
Prints env steps/s (medians over repeats) and each count's time per step relative to 1 thread.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Dict, List, Optional

import numpy as np

from procgen_entities.games import NUM_ACTIONS
from procgen_entities.stepper import ProcgenStepper


def rates(
    game: str, envs: int, threads: List[Optional[int]], steps: int, repeats: int
) -> Dict[str, float]:
    """Median env steps/s per thread count (None: the default)."""
    rng = np.random.default_rng(0)
    actions = rng.integers(0, NUM_ACTIONS, (16, envs)).astype(np.int32)
    steppers = {
        ("default" if t is None else str(t)): ProcgenStepper(
            game, envs, seed=0, num_threads=t, engine="headless"
        )
        for t in threads
    }
    try:
        for stepper in steppers.values():
            stepper.restart()
            for k in range(10):
                stepper.step(actions[k % 16])
        samples: Dict[str, List[float]] = {name: [] for name in steppers}
        for _ in range(repeats):
            for name, stepper in steppers.items():
                t0 = time.perf_counter()
                for k in range(steps):
                    stepper.step(actions[k % 16])
                samples[name].append(steps * envs / (time.perf_counter() - t0))
        return {name: statistics.median(v) for name, v in samples.items()}
    finally:
        for stepper in steppers.values():
            stepper.close()


def report(title: str, measured: Dict[str, float]) -> None:
    base = measured.get("1")
    print(title)
    for name, rate in measured.items():
        slower = f"  {base / rate:6.2f}x the time of 1 thread" if base else ""
        print(f"  threads={name:8s} {rate:10.0f} env steps/s{slower}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--game", default="bigfish")
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 16, 2048])
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    print(f"{args.game}, {args.envs} envs, {args.steps} steps x {args.repeats}; "
          f"{os.cpu_count()} cores, affinity {len(cpus) or '?'} CPUs")  # fmt: skip
    counts: List[Optional[int]] = [*args.threads, None]
    report("all CPUs of the affinity:", rates(args.game, args.envs, counts, args.steps,
                                              args.repeats))  # fmt: skip
    if len(cpus) > 1:
        os.sched_setaffinity(0, {cpus[0]})
        try:
            pinned = rates(args.game, args.envs, [1, None], args.steps, args.repeats)
        finally:
            os.sched_setaffinity(0, set(cpus))
        report("pinned to one CPU:", pinned)


if __name__ == "__main__":
    main()
