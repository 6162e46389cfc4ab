"""Tilemap -> entities: µs per state, against procgen's get_state cost measured in the same run.

    PYTHONPATH=. python benchmarks/bench_tilemap.py [--game coinrun] [--batch 64] [--repeat 7]

For each mode, with the agent window (the state's camera: center ± view_dim/2) and with the full
grid, times ``tilemap_to_entities_batch`` on a batch of real states (median of --repeat runs,
each long enough to be measurable) and prints µs per state and its ratio to
``callmethod("get_state")`` per state measured on the same env.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from procgen import ProcgenGym3Env

from procgen_entities import parse_states
from procgen_entities.games import NUM_ACTIONS
from procgen_entities.tilemap import COLUMN_TERRAIN, MODES, tilemap_to_entities_batch


def per_call(fn, repeat: int, min_time: float = 0.05) -> float:
    """Median seconds per call of fn()."""
    fn()
    loops = 1
    while True:
        t = time.perf_counter()
        for _ in range(loops):
            fn()
        if time.perf_counter() - t >= min_time:
            break
        loops *= 2
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(loops):
            fn()
        samples.append((time.perf_counter() - t) / loops)
    return float(np.median(samples))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--game", default="coinrun")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--distribution-mode", default="hard")
    args = ap.parse_args()

    env = ProcgenGym3Env(
        num=args.batch, env_name=args.game, distribution_mode=args.distribution_mode,
        start_level=0, num_levels=0,
    )  # fmt: skip
    rng = np.random.default_rng(0)
    for _ in range(30):  # spread the agents out a little
        env.act(rng.integers(0, NUM_ACTIONS, size=args.batch).astype(np.int32))
    get_state = per_call(lambda: env.callmethod("get_state"), args.repeat) / args.batch
    batch = parse_states(env.callmethod("get_state"))
    grids = batch.grid
    s = batch.scalars
    windows = np.stack([s["center_x"], s["center_y"], s["view_dim"]], axis=1)
    n = args.batch
    print(
        f"{args.game} {args.distribution_mode}: batch {n}, grid {grids.shape[1]}x{grids.shape[2]}, "
        f"view_dim {float(s['view_dim'][0]):.3g}"
    )
    print(f"get_state (gym3 callmethod), per state: {get_state * 1e6:8.2f} µs  (baseline)")
    print(f"{'mode':8} {'region':7} {'µs/state':>9} {'x get_state':>12} {'entities/state':>15}")
    for mode in MODES:
        if mode == "columns" and args.game not in COLUMN_TERRAIN:
            continue
        for region, wins in (("window", windows), ("full", None)):
            t = (
                per_call(
                    lambda mode=mode, wins=wins: tilemap_to_entities_batch(
                        grids, args.game, mode, windows=wins
                    ),
                    args.repeat,
                )
                / n
            )
            _, counts = tilemap_to_entities_batch(grids, args.game, mode, windows=wins)
            rows = sum(int(c.sum()) for c in counts.values()) / n
            print(f"{mode:8} {region:7} {t * 1e6:9.2f} {t / get_state:12.3f} {rows:15.1f}")


if __name__ == "__main__":
    main()
