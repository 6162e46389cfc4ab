"""The state writer: State.from_bytes(b).to_bytes() == b for real states of all 16 games (golden
and live rollouts with episode ends), the batch writer agrees, edits are written as made and
refused with a typed error naming the field, and an edited state restored into procgen is what
procgen itself then serializes, and steps."""

from __future__ import annotations

import ast
import math
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import List

import numpy as np
import pytest
from conftest import GOLDEN_NAMES, load_golden

import procgen_entities as pe
from procgen_entities import State, StateDecodeError, states_from_bytes, states_to_bytes
from procgen_entities.errors import UsageError
from procgen_entities.games import GAME_NAMES
from procgen_entities.reference import reference_write_state

ROOT = Path(__file__).resolve().parents[1]


def golden_states(name: str) -> List[bytes]:
    return list(load_golden(name).states)


def coinrun_state() -> bytes:
    return golden_states("coinrun-hard")[0]


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_golden_round_trip(name: str) -> None:
    blobs = golden_states(name)
    states = states_from_bytes(blobs)
    for state, blob in zip(states, blobs):
        assert state.game == load_golden(name).game
        assert State.from_bytes(blob).to_bytes(validate=False) == blob
        assert reference_write_state(state) == blob
    assert states_to_bytes(states, validate=False) == blobs


def test_parts_are_the_parsers() -> None:
    blob = golden_states("starpilot-easy")[3]
    state, batch = State.from_bytes(blob), pe.parse_state(blob)
    assert batch.grid is not None
    np.testing.assert_array_equal(state.grid, batch.grid[0])
    for k, field in enumerate(batch.entity_fields):
        column = state.entities[field].astype(np.float32)
        np.testing.assert_array_equal(column, batch.entities[:, k])
    for name, values in batch.scalars.items():
        assert state.scalars[name] == values[0], name
    np.testing.assert_array_equal(
        np.stack([state.trailer["spawners"][f] for f in pe.ENTITY_FIELDS], 1).astype(np.float32),
        batch.vectors["spawners"],
    )
    assert [text for _, text in state.rngs] == _rng_texts(blob)
    assert state.rngs[0][0] and state.rngs[1][0] and not state.rngs[2][0]


def _rng_texts(blob: bytes) -> List[bytes]:
    """The three RNG texts at the offsets of the format reference (§1, §2)."""
    name_len = struct.unpack_from("<i", blob, 4)[0]
    at, texts = 8 + name_len + 68, []
    for _ in range(2):
        n = struct.unpack_from("<i", blob, at + 4)[0]
        texts.append(blob[at + 8 : at + 8 + n])
        at += 8 + n
    batch = pe.parse_state(blob)
    at += 60 + 8 + 124 * int(batch.entity_counts[0]) + 76  # step, grid_size + entities, base
    n = struct.unpack_from("<i", blob, at + 4)[0]
    return texts + [blob[at + 8 : at + 8 + n]]


def test_edits_are_written_as_made() -> None:
    state = State.from_bytes(coinrun_state())
    state.grid[1, 3] = 15
    state.entities["x"][0] += 1.0
    state.scalars["cur_time"] = 7
    state.trailer["has_support"] = False
    again = State.from_bytes(state.to_bytes(validate=False))
    assert again.grid[1, 3] == 15
    assert again.entities["x"][0] == state.entities["x"][0]
    assert again.scalars["cur_time"] == 7 and again.trailer["has_support"] is False
    np.testing.assert_array_equal(again.grid, state.grid)
    assert again.rngs == state.rngs


def test_entity_tables_can_be_replaced() -> None:
    state = State.from_bytes(coinrun_state())
    n = len(state.entities)
    state.entities = np.concatenate([state.entities, state.entities[1:2]])
    assert len(State.from_bytes(state.to_bytes(validate=False)).entities) == n + 1
    state.entities = state.entities[:1]
    assert len(State.from_bytes(state.to_bytes(validate=False)).entities) == 1
    with pytest.raises(UsageError, match="ENTITY_DTYPE"):
        state.entities = np.zeros(3)


def _refused(state: State, status: str, field: str, validate: bool = False) -> None:
    with pytest.raises(StateDecodeError) as info:
        state.to_bytes(validate=validate)
    assert info.value.field == field, info.value
    if status:
        assert info.value.status == status, info.value


@pytest.mark.parametrize(
    "field, value, status",
    [
        ("cur_time", 2.5, "PE_ERR_VALUE"),
        ("cur_time", 2.0**31, "PE_ERR_VALUE"),
        ("cur_time", float("nan"), "PE_ERR_VALUE"),
        ("done", 2, "PE_ERR_BOOL"),
        ("reward", 1e39, "PE_ERR_VALUE"),
        ("main_width", 63, "PE_ERR_GRID"),
    ],
)
def test_writer_refuses_bad_scalars(field: str, value: float, status: str) -> None:
    state = State.from_bytes(coinrun_state())
    state.scalars[field] = value
    _refused(state, status, field)


def test_writer_refuses_bad_structure() -> None:
    state = State.from_bytes(coinrun_state())
    state.grid = np.full((60, 64), 100)
    _refused(state, "PE_ERR_GRID", "main_height")
    state = State.from_bytes(coinrun_state())
    state.entities["type"][0] = 2
    _refused(state, "PE_ERR_PLAYER", "entities[0].type")
    state.entities = state.entities[:0]
    _refused(state, "PE_ERR_PLAYER", "entities")
    state = State.from_bytes(coinrun_state())
    state.trailer["has_support"] = 3
    _refused(state, "PE_ERR_BOOL", "has_support")
    heist = State.from_bytes(golden_states("heist-hard")[0])
    heist.trailer["has_keys"] = np.append(heist.trailer["has_keys"], True)
    _refused(heist, "PE_ERR_INVARIANT", "len(has_keys) == num_keys")
    heist = State.from_bytes(golden_states("heist-hard")[0])
    heist.trailer["has_keys"] = np.full(len(heist.trailer["has_keys"]), 2)
    _refused(heist, "PE_ERR_BOOL", "has_keys")
    del heist.scalars["cur_time"]
    with pytest.raises(UsageError, match="cur_time"):
        heist.to_bytes(validate=False)
    heist.scalars["cur_time"], heist.scalars["cur_tme"] = 0, 0
    with pytest.raises(UsageError, match="cur_tme"):
        heist.to_bytes(validate=False)
    with pytest.raises(UsageError, match="2-D integer"):
        heist.grid = np.zeros((3, 3), dtype=np.float32)


def test_batch_errors_name_the_state() -> None:
    good = State.from_bytes(coinrun_state())
    bad = good.copy()
    bad.scalars["action"] = 0.5
    with pytest.raises(StateDecodeError) as info:
        states_to_bytes([good, good, bad], validate=False)
    assert info.value.index == 2 and info.value.field == "action"
    with pytest.raises(StateDecodeError) as info:
        states_from_bytes([coinrun_state(), coinrun_state()[:-3]])
    assert info.value.index == 1


@pytest.mark.live
def test_validation_refuses_what_set_states_refuses() -> None:
    blob = coinrun_state()
    assert State.from_bytes(blob).to_bytes() == blob  # validated, trial restore included
    for edit, field in [
        (lambda s: s.grid.__setitem__((1, 3), 12345), "grid.data"),
        (lambda s: s.entities["type"].__setitem__(1, 999), "entity.type"),
        (lambda s: s.entities["x"].__setitem__(1, np.inf), "entities.x"),
        (lambda s: s.scalars.__setitem__("paint_vel_info", True), "paint_vel_info"),
        (lambda s: s.scalars.__setitem__("distribution_mode", 7), "distribution_mode"),
    ]:
        state = State.from_bytes(blob)
        edit(state)
        _refused(state, "", field, validate=True)


def _rollout(game: str, mode: str, steps: int, num: int = 4) -> List[bytes]:
    from procgen import ProcgenGym3Env

    seed = GAME_NAMES.index(game) * 2 + (mode == "hard")
    env = ProcgenGym3Env(num=num, env_name=game, distribution_mode=mode, rand_seed=seed)
    rng = np.random.default_rng(seed)
    blobs: List[bytes] = []
    for step in range(steps + 1):
        if step:
            env.act(rng.integers(0, 15, size=num))
        blobs.extend(env.callmethod("get_state"))
    return blobs


@pytest.mark.live
@pytest.mark.parametrize("mode", ["easy", "hard"])
@pytest.mark.parametrize("game", GAME_NAMES)
def test_live_round_trip(game: str, mode: str) -> None:
    blobs = _rollout(game, mode, steps=150)
    states = states_from_bytes(blobs)
    assert [s.to_bytes(validate=False) for s in states] == blobs
    assert states_to_bytes(states, validate=False) == blobs
    assert sum(s.scalars["done"] for s in states) >= 4  # the first states, and any episode end


@pytest.mark.live
def test_edited_state_is_what_procgen_serializes() -> None:
    from procgen import ProcgenGym3Env

    env = ProcgenGym3Env(
        num=1, env_name="coinrun", distribution_mode="hard", start_level=21, num_levels=1
    )
    blob = env.callmethod("get_state")[0]
    state = State.from_bytes(blob)
    assert state.grid[1, 3] == 100 and state.entities["type"][0] == 0
    state.grid[1, 3] = 15  # a wall in front of the player
    saws = np.flatnonzero(state.entities["type"] == 2)
    state.entities["x"][saws[0]] -= 1.0  # a saw one tile to the left
    edited = state.to_bytes()
    assert edited != blob

    other = ProcgenGym3Env(num=1, env_name="coinrun", distribution_mode="hard")
    other.callmethod("set_state", [edited])
    assert other.callmethod("get_state")[0] == edited
    rng = np.random.default_rng(0)
    for _ in range(100):
        other.act(rng.integers(0, 15, size=1))
        other.observe()
        now = State.from_bytes(other.callmethod("get_state")[0])
    assert now.grid[1, 3] == 15 or now.scalars["done"]


FUZZ = """
import sys
import numpy as np
sys.path.insert(0, {tests!r})
from conftest import GOLDEN_NAMES, load_golden
from procgen_entities import State, StateDecodeError
from procgen_entities.errors import UsageError
from procgen_entities.reference import reference_write_state

rng = np.random.default_rng(int(sys.argv[1]))
blobs = [b for name in GOLDEN_NAMES for b in load_golden(name).states]
VALUES = [0, 1, -1, 2, 0.5, -0.0, 1e39, -1e39, 2.0**31, -2.0**31, 2.0**31 - 1, float("nan"),
          float("inf"), 1e9, 100, 15]
counts = {{"written": 0, "refused": 0}}
for trial in range({n}):
    state = State.from_bytes(blobs[rng.integers(len(blobs))])
    for _ in range(rng.integers(1, 4)):
        what = rng.integers(6)
        value = VALUES[rng.integers(len(VALUES))]
        if what == 0:
            state.scalars[rng.choice(list(state.scalars))] = value
        elif what == 1 and state.grid.size:
            state.grid.flat[rng.integers(state.grid.size)] = rng.integers(-5, 2000)
        elif what == 2 and len(state.entities):
            field = rng.choice(list(state.entities.dtype.names))
            with np.errstate(invalid="ignore", over="ignore"):
                state.entities[field][rng.integers(len(state.entities))] = np.float32(value) \\
                    if state.entities.dtype[field].kind == "f" else int(rng.integers(-9, 9))
        elif what == 3:
            keep = rng.integers(0, len(state.entities) + 2)
            state.entities = np.resize(state.entities, keep)
        elif what == 4 and state.trailer:
            name = rng.choice(list(state.trailer))
            old = state.trailer[name]
            state.trailer[name] = np.resize(old, rng.integers(0, len(old) + 3)) \\
                if isinstance(old, np.ndarray) else value
        elif what == 5:
            h, w = state.grid.shape
            state.grid = np.full((h + rng.integers(-1, 2), w), 100)
    try:
        out = state.to_bytes(validate=False)
    except (StateDecodeError, UsageError):
        counts["refused"] += 1
        continue
    assert reference_write_state(state) == out
    again = State.from_bytes(out)
    assert again.to_bytes(validate=False) == out
    np.testing.assert_array_equal(again.grid, state.grid)
    assert again.entities.tobytes() == state.entities.tobytes()
    counts["written"] += 1
print(counts)
"""


def test_random_edits_never_crash_the_writer() -> None:
    """Random fields, values, grids and entity tables: each edit is refused with a typed error
    or written as the pure-Python reference writer writes it, and parses back to exactly what
    was written (in a child: a crash there fails this test instead of killing the run)."""
    code = textwrap.dedent(FUZZ).format(tests=str(ROOT / "tests"), n=2000)
    done = subprocess.run(
        [sys.executable, "-c", code, "7"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    counts = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert counts["written"] > 20 and counts["refused"] > 20, counts


@pytest.mark.live
def test_procgen_renders_the_edit_where_it_is() -> None:
    """Maze shows its whole 15x15 world in the 64x64 frame: a wall added at tile (5, 11), far from
    the player, changes the pixels of that tile only (the player stands still: no-op)."""
    from procgen import ProcgenGym3Env

    env = ProcgenGym3Env(
        num=2, env_name="maze", distribution_mode="easy", start_level=3, num_levels=1
    )
    blob = env.callmethod("get_state")[0]
    state = State.from_bytes(blob)
    h, w = state.grid.shape
    assert (h, w) == (15, 15) and state.scalars["view_dim"] == pytest.approx(15)
    assert state.grid[11, 5] == 100 and tuple(state.entities[["x", "y"]][0]) == (3.5, 3.5)
    state.grid[11, 5] = 51
    env.callmethod("set_state", [blob, state.to_bytes()])
    env.act(np.array([4, 4]))
    _, obs, _ = env.observe()
    rows, cols = np.nonzero(np.any(obs["rgb"][0] != obs["rgb"][1], axis=-1))
    assert len(rows) > 0
    px = 64 / w  # pixels per tile; screen row 0 is the top of the world
    assert math.floor(5 * px) <= cols.min() and cols.max() <= math.ceil(6 * px)
    assert math.floor((h - 12) * px) <= rows.min() and rows.max() <= math.ceil((h - 11) * px)
