"""Record golden ProcgenVecEnv observations into tests/data/observations/ (one npz per game).

Run from the repository root:

    PYTHONPATH=.:tests python tools/record_obs_golden.py            # all 16 games
    PYTHONPATH=.:tests python tools/record_obs_golden.py coinrun    # some games only

What each file holds, and how the rollouts are made, is tests/obs_golden.py's docstring;
tests/test_obs_golden.py replays them against the code as it is now. Re-record only for an
intended change of the observations (review what changed: the observations and ObsSpaces are
meant to stay bit for bit the same).
"""

from __future__ import annotations

import sys
import time
from typing import Iterable

import numpy as np
from obs_golden import OBS_DIR, golden_path, record, summary


def main(games: Iterable[str]) -> None:
    OBS_DIR.mkdir(parents=True, exist_ok=True)
    total = 0
    for game in games:
        start = time.perf_counter()
        arrays = record(game)
        np.savez_compressed(golden_path(game), **arrays)
        size = golden_path(game).stat().st_size
        total += size
        ends, rows = summary(arrays)
        warmups = [int(v) for k, v in arrays.items() if k.endswith("/warmup")]
        print(f"{game:10s} warmups={warmups} episode ends={ends:3d} entity rows={rows:6d} "
              f"{size / 1e3:5.0f} kB {time.perf_counter() - start:5.1f} s")  # fmt: skip
    print(f"total {total / 1e6:.2f} MB in {OBS_DIR}")


if __name__ == "__main__":
    from procgen_entities.games import GAME_NAMES

    main(sys.argv[1:] or GAME_NAMES)
