"""The pool when processes share the CPUs: two processes stepping at once against one alone.

    python benchmarks/bench_oversubscribed.py [--game bigfish] [--envs 64] [--seconds 10]
                                              [--work-us 0 2000] [--repeats 3]

Each run starts ``--processes`` child processes at the same moment; each steps a headless
``EntityVectorEnv`` of ``--envs`` envs with random actions for ``--seconds``, doing
``--work-us`` microseconds of its own single-threaded busy work between steps (0: a bare
stepping loop; 2,000: about what a small policy's inference takes, the gap in which the pool's
workers spin or sleep). Runs take turns: 1 and 2 processes, the default thread count and
``num_threads=1``. Prints each configuration's env steps/s per process (the median over repeats)
and the ratios that matter: 2 processes against 1 (1.0: no loss beyond sharing; 0.5: each gets
half) and the pool against 1 thread in the same configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

import numpy as np


def child(game: str, envs: int, threads: Optional[int], seconds: float, work_us: int,
          start_at: float) -> float:  # fmt: skip
    """Env steps/s of one process: step, then ``work_us`` of busy work, until time is up."""
    from procgen_entities.gymnasium import EntityVectorEnv

    env = EntityVectorEnv(game, envs, seed=os.getpid(), engine="headless", num_threads=threads,
                          autoreset_mode="SameStep")  # fmt: skip
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 15, (16, envs))
    env.reset()
    for k in range(10):
        env.step(actions[k % 16])
    while time.time() < start_at:
        time.sleep(0.001)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        env.step(actions[steps % 16])
        steps += 1
        until = time.perf_counter() + work_us * 1e-6
        while time.perf_counter() < until:
            pass
    rate = steps * envs / (time.perf_counter() - t0)
    env.close()
    return rate


def run(args: argparse.Namespace, processes: int, threads: Optional[int], work_us: int) -> float:
    """The mean env steps/s per process of ``processes`` children started together."""
    start_at = time.time() + 8.0  # after every child has built its env
    command = [sys.executable, __file__, "--child", args.game, str(args.envs),
               str(threads or 0), str(args.seconds), str(work_us), repr(start_at)]  # fmt: skip
    children = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
                for _ in range(processes)]  # fmt: skip
    rates = [json.loads(c.communicate()[0]) for c in children]
    return statistics.mean(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--game", default="bigfish")
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--work-us", type=int, nargs="+", default=[0, 2000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.game}, {args.envs} envs, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    configs: List[Tuple[int, Optional[int], int]] = [
        (p, t, w) for w in args.work_us for p in (1, 2) for t in (None, 1)
    ]
    samples: Dict[Tuple[int, Optional[int], int], List[float]] = {c: [] for c in configs}
    for _ in range(args.repeats):
        for config in configs:
            samples[config].append(run(args, *config))
    rate = {c: statistics.median(v) for c, v in samples.items()}
    for w in args.work_us:
        print(f"work between steps {w} us (env steps/s per process)")
        for t in (None, 1):
            one, two = rate[(1, t, w)], rate[(2, t, w)]
            name = "default threads" if t is None else "num_threads=1"
            print(f"  {name:16s} 1 process {one:8.0f}   2 processes {two:8.0f}   "
                  f"2 vs 1: {two / one:5.2f}")  # fmt: skip
        for p in (1, 2):
            print(f"  pool vs 1 thread, {p} process{'es' if p > 1 else ''}: "
                  f"{rate[(p, None, w)] / rate[(p, 1, w)]:5.2f}x")  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        game, envs, threads, seconds, work_us, start_at = sys.argv[2:8]
        print(json.dumps(child(game, int(envs), int(threads) or None, float(seconds),
                               int(work_us), float(start_at))))  # fmt: skip
    else:
        main()
