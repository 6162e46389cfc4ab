"""The trailer vectors (the variable-length vectors after the grid: counts and items) against
mutations aimed at them, through parse_states and set_states: tools/fuzz_trailer_vectors.py in
a short run (its long run: see its docstring), and the cases it found.

Before set_states compared chaser's ``is_space_vec`` and ``free_cells`` with the grid, a
shuffled ``is_space_vec`` passed every value check and the trial restore, then procgen died of
SIGFPE when an enemy at a junction found no free neighbour (``% space_neighbors.size()``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import List

import numpy as np
import pytest

import procgen_entities
from procgen_entities import State, StateDecodeError, parse_states
from procgen_entities.gymnasium import EntityVectorEnv
from procgen_entities.restore import check_values

pytestmark = pytest.mark.live

TOOL = Path(__file__).resolve().parents[1] / "tools" / "fuzz_trailer_vectors.py"


def test_fuzzing_the_trailer_vectors_finds_no_crash(tmp_path: Path) -> None:
    """30 mutations per game with trailer vectors (about 1.5 minutes): the C parser agrees with
    the reference on every blob, and every blob set_states accepts survives 300 steps on both
    stepping engines in a child process (a signal, a fassert or a hang fails the run)."""
    if not TOOL.is_file():
        pytest.skip("tools/ is not in this copy of the tests")
    package_root = Path(procgen_entities.__file__).resolve().parents[1]  # the package tested
    env = {**os.environ, "PYTHONPATH": str(package_root)}
    proc = subprocess.run(
        [sys.executable, str(TOOL), "--mutations", "30", "--steps", "300", "--seed", "3",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=900, env=env,
    )  # fmt: skip
    assert proc.stdout, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    for game, result in report["games"].items():
        assert result["disagreements"] == [], game
        assert result["crashes"] == [], game
        refused = sum(result["set_states_refused"].values())
        assert refused > 0 and result["set_states_accepted"] > 0, (game, result)
    assert proc.returncode == 0 and not report["failed"]
    assert sorted(report["games"]) == sorted(
        ["bossfight", "chaser", "heist", "leaper", "plunder", "starpilot"]
    )


def rollout_states(game: str, mode: str, steps: int = 300, n: int = 4) -> List[bytes]:
    rng = np.random.default_rng(7)
    out: List[bytes] = []
    with closing(
        EntityVectorEnv(game, n, seed=11, num_threads=1, distribution_mode=mode,
                        autoreset_mode="SameStep")
    ) as env:  # fmt: skip
        env.reset()
        for t in range(steps):
            env.step(rng.integers(0, 15, n))
            if t % 5 == 0:
                out.extend(env.get_states())
    return out


@pytest.mark.parametrize("game", ["chaser", "leaper"])
@pytest.mark.parametrize("mode", ["easy", "hard"])
def test_real_states_pass_the_trailer_vector_checks(game: str, mode: str) -> None:
    """Every state of 300 random steps of 4 envs (episode ends and new levels included)."""
    states = rollout_states(game, mode)
    for k in range(0, len(states), 4):
        current = parse_states(states[k : k + 4])
        check_values(states[k : k + 4], game, current)


def edited(blob: bytes, **trailer: np.ndarray) -> bytes:
    state = State.from_bytes(blob)
    for name, value in trailer.items():
        state.trailer[name] = value
    return state.to_bytes(validate=False)


def test_chaser_vectors_must_match_the_grid() -> None:
    with closing(EntityVectorEnv("chaser", 1, seed=3, num_threads=1)) as env:
        env.reset()
        for _ in range(5):
            env.step(np.array([4]))
        blob = env.get_states()[0]
        state = State.from_bytes(blob)
        space, free = state.trailer["is_space_vec"], state.trailer["free_cells"]
        rng = np.random.default_rng(0)
        cases = {
            "vector.is_space_vec": [
                edited(blob, is_space_vec=np.zeros_like(space)),
                edited(blob, is_space_vec=rng.permutation(space)),
            ],
            "vector.free_cells": [
                edited(blob, free_cells=free[:0]),
                edited(blob, free_cells=free[:-1]),
                edited(blob, free_cells=np.full_like(free, 300)),
            ],
        }
        for field, blobs in cases.items():
            for bad in blobs:
                with pytest.raises(StateDecodeError) as info:
                    env.set_states([bad])
                assert info.value.field == field
        env.set_states([edited(blob, free_cells=free.copy())])  # rewritten, unchanged: accepted
        env.step(np.array([4]))


def test_leaper_lanes_must_match_the_grid() -> None:
    with closing(EntityVectorEnv("leaper", 1, seed=4, num_threads=1)) as env:
        env.reset()
        blob = env.get_states()[0]
        state = State.from_bytes(blob)
        road, water = state.trailer["road_lane_speeds"], state.trailer["water_lane_speeds"]
        assert len(road) and len(water)
        for name, value in (
            ("road_lane_speeds", np.concatenate([road, road[:1]])),
            ("road_lane_speeds", road[:-1]),
            ("water_lane_speeds", np.concatenate([water] * 40)),
        ):
            with pytest.raises(StateDecodeError) as info:
                env.set_states([edited(blob, **{name: value})])
            assert info.value.field == f"vector.{name}"
        # other speeds for the same lanes are another valid level
        env.set_states([edited(blob, road_lane_speeds=-road)])
        env.step(np.array([4]))
