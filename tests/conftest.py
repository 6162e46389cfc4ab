"""Shared test helpers: golden states, batch comparison, hypothesis profiles.

Golden data is written by tools/record_golden.py (run it to re-record). Hypothesis profiles:
``default`` (modest, for local runs) and ``ci`` (more examples); pick one with the environment
variable HYPOTHESIS_PROFILE.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from functools import cache
from typing import Dict, List, Tuple

import numpy as np
import pytest
from golden import DATA_DIR, MODES, batch_to_arrays, golden_name, load_expected, load_states
from hypothesis import HealthCheck, settings

if os.environ.get("PROCGEN_ENTITIES_SANITIZER_RUN"):
    # gym3 dlopens procgen's libenv with RTLD_DEEPBIND, which the ASan runtime refuses
    # (google/sanitizers#611). Load it without that flag in the sanitizer run only.
    import cffi

    _dlopen = cffi.FFI.dlopen
    cffi.FFI.dlopen = lambda self, name, flags=0: _dlopen(self, name, flags & ~self.RTLD_DEEPBIND)

settings.register_profile(
    "default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@dataclass(frozen=True)
class Golden:
    """One recorded game+mode: its states and what parsing them must give."""

    name: str
    game: str
    mode: str
    states: Tuple[bytes, ...]
    meta: Dict[str, np.ndarray]
    expected: Dict[str, np.ndarray]


def _golden_names() -> List[str]:
    from procgen_entities.games import GAME_NAMES

    return [golden_name(game, mode) for game in GAME_NAMES for mode in MODES]


GOLDEN_NAMES: List[str] = _golden_names()


@cache
def load_golden(name: str) -> Golden:
    states_path = DATA_DIR / f"{name}.states.npz"
    expected_path = DATA_DIR / f"{name}.expected.npz"
    if not states_path.exists() or not expected_path.exists():
        pytest.fail(f"golden data {name} missing; run tools/record_golden.py (see its docstring)")
    meta, states = load_states(states_path)
    return Golden(
        name=name,
        game=str(meta["game"]),
        mode=str(meta["mode"]),
        states=tuple(states),
        meta=meta,
        expected=load_expected(expected_path),
    )


@cache
def all_golden_states() -> Tuple[Tuple[str, bytes], ...]:
    """(game, state) for every golden state."""
    goldens = [load_golden(name) for name in GOLDEN_NAMES]
    return tuple((g.game, s) for g in goldens for s in g.states)


@pytest.fixture(params=GOLDEN_NAMES)
def golden(request: pytest.FixtureRequest) -> Golden:
    return load_golden(request.param)


def assert_arrays_identical(actual: np.ndarray, expected: np.ndarray, what: str = "") -> None:
    """Same dtype, same shape, same values (NaN equals NaN; -0.0 and 0.0 are told apart)."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if actual.dtype.kind == "f":
        # Compare bit patterns except that all NaNs are alike.
        both_nan = np.isnan(actual) & np.isnan(expected)
        same_bits = actual.view(f"u{actual.itemsize}") == expected.view(f"u{expected.itemsize}")
        bad = ~(both_nan | same_bits)
    else:
        bad = actual != expected
    if np.any(bad):
        where = np.argwhere(bad)[:5].tolist()
        raise AssertionError(f"{what}: {int(np.sum(bad))} values differ, first at {where}")


def assert_batches_identical(actual, expected) -> None:  # type: ignore[no-untyped-def]
    """Two StateBatches (or their batch_to_arrays dicts) hold exactly the same data."""
    a = actual if isinstance(actual, dict) else batch_to_arrays(actual)
    e = expected if isinstance(expected, dict) else batch_to_arrays(expected)
    assert sorted(a) == sorted(e), f"keys differ: {sorted(set(a) ^ set(e))}"
    for key in e:
        assert_arrays_identical(a[key], e[key], key)


# ---- where the length prefixes are (walked from a valid state, format reference §1-§3) ----


def read_i32(data: bytes, at: int) -> int:
    return int(np.frombuffer(data, dtype="<i4", count=1, offset=at)[0])


def prefix_offsets(data: bytes, game: str = "") -> Dict[str, int]:
    """Byte offsets of the length prefixes and grid fields of one valid state.

    Keys: game_name, level_seed_rand_gen, rand_gen, grid_size, entities, asset_rand_gen,
    main_width, main_height, grid.w, grid.h, grid.count, trailer (where the trailer starts) and,
    if ``game`` is given, one key per trailer vector (the offset of its count).
    """
    name_len = read_i32(data, 4)
    at = 8 + name_len + 68
    out = {"game_name": 4}
    for rng in ("level_seed_rand_gen", "rand_gen"):
        out[rng] = at + 4
        at += 8 + read_i32(data, at + 4)
    at += 60
    out["grid_size"] = at
    out["entities"] = at + 4
    at += 8 + 124 * read_i32(data, at + 4)
    at += 76
    out["asset_rand_gen"] = at + 4
    at += 8 + read_i32(data, at + 4)
    out["main_width"], out["main_height"] = at, at + 4
    out["grid.w"], out["grid.h"], out["grid.count"] = at + 36, at + 40, at + 44
    at += 48 + 4 * read_i32(data, at + 44)
    out["trailer"] = at
    if game:
        from procgen_entities.games import GAMES

        for name, kind in GAMES[game].trailer:
            if kind.startswith("v"):
                out[name] = at
                at += 4 + (124 if kind == "ve" else 4) * read_i32(data, at)
            else:
                at += 4
        assert at + 4 == len(data), "prefix_offsets walked off the state"
    return out


def replace_i32(data: bytes, at: int, value: int) -> bytes:
    return data[:at] + struct.pack("<i", value) + data[at + 4 :]


LENGTH_PREFIXES = (
    "game_name", "level_seed_rand_gen", "rand_gen", "entities", "asset_rand_gen",
    "grid_size", "grid.w", "grid.h", "grid.count", "main_width", "main_height",
)  # fmt: skip
