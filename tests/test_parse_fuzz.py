"""Mutated golden states: the C parser must agree with the reference parser, or both reject.

Acceptable outcomes for any mutated input: both parsers return identical batches, or both raise
StateDecodeError (MixedBatchError when a mutation turns the name into another known game). A
truncated or padded state must always be rejected. The C parser must never crash.
"""

from __future__ import annotations

import time
from typing import Optional, Tuple

import numpy as np
import pytest
from conftest import (
    LENGTH_PREFIXES,
    all_golden_states,
    assert_batches_identical,
    prefix_offsets,
    replace_i32,
)
from hypothesis import given
from hypothesis import strategies as st

from procgen_entities import MixedBatchError, StateDecodeError, parse_states
from procgen_entities.reference import reference_parse_states

golden_states = st.sampled_from(all_golden_states())


def _outcome(parse, data: bytes, game: Optional[str]):  # type: ignore[no-untyped-def]
    try:
        return parse([data], game=game)
    except MixedBatchError as exc:
        return exc
    except StateDecodeError as exc:
        assert exc.index == 0
        assert 0 <= exc.offset <= len(data), (exc.offset, len(data))
        assert exc.field
        return exc


def check_same_outcome(data: bytes, game: Optional[str] = None) -> bool:
    """Parse with both parsers; assert they agree. Returns True if the state was accepted."""
    c = _outcome(parse_states, data, game)
    ref = _outcome(reference_parse_states, data, game)
    if isinstance(c, Exception) or isinstance(ref, Exception):
        assert type(c) is type(ref), f"C: {c!r}\nreference: {ref!r}"
        return False
    assert_batches_identical(c, ref)
    return True


def check_rejected(data: bytes, game: Optional[str] = None) -> None:
    for parse in (parse_states, reference_parse_states):
        with pytest.raises(StateDecodeError):
            parse([data], game=game)


@given(golden_states, st.data())
def test_truncated(case: Tuple[str, bytes], data: st.DataObject) -> None:
    game, state = case
    n = data.draw(st.integers(0, len(state) - 1))
    check_rejected(state[:n])
    check_rejected(state[:n], game)


@given(golden_states, st.binary(min_size=1, max_size=200))
def test_padded(case: Tuple[str, bytes], padding: bytes) -> None:
    game, state = case
    check_rejected(state + padding)


@given(golden_states, st.data())
def test_slice_cut_out(case: Tuple[str, bytes], data: st.DataObject) -> None:
    game, state = case
    start = data.draw(st.integers(0, len(state) - 1))
    length = data.draw(st.integers(1, len(state) - start))
    cut = state[:start] + state[start + length :]
    # Usually rejected; a cut that happens to leave another valid state must parse identically.
    check_same_outcome(cut)
    check_same_outcome(cut, game)


@given(golden_states, st.lists(st.integers(0, 2**31), min_size=1, max_size=8))
def test_bit_flips(case: Tuple[str, bytes], bits: list) -> None:
    game, state = case
    mutated = bytearray(state)
    for bit in bits:
        bit %= 8 * len(state)
        mutated[bit // 8] ^= 1 << (bit % 8)
    check_same_outcome(bytes(mutated))


@given(golden_states, st.data())
def test_bit_flips_in_structure(case: Tuple[str, bytes], data: st.DataObject) -> None:
    """Flip bits near the fields that steer the walk (prefixes, grid, terminator)."""
    game, state = case
    where = prefix_offsets(state, game)
    anchor = data.draw(st.sampled_from(sorted(where.values()) + [len(state) - 4]))
    at = min(len(state) - 1, anchor + data.draw(st.integers(0, 7)))
    bit = data.draw(st.integers(0, 7))
    mutated = bytearray(state)
    mutated[at] ^= 1 << bit
    check_same_outcome(bytes(mutated))


def _int32s() -> st.SearchStrategy[int]:
    return st.one_of(
        st.integers(-(2**31), 2**31 - 1),
        st.integers(-8, 300),
        st.sampled_from([2**31 - 1, -(2**31), 2**30, 0x10000000, 0x7FFFFFFF // 124]),
    )


@given(golden_states, st.data())
def test_overwrite_length_prefix(case: Tuple[str, bytes], data: st.DataObject) -> None:
    game, state = case
    where = prefix_offsets(state, game)
    vectors = [k for k in where if k not in LENGTH_PREFIXES and k != "trailer"]
    name = data.draw(st.sampled_from(LENGTH_PREFIXES + tuple(vectors)))
    original = int(np.frombuffer(state, "<i4", 1, where[name])[0])
    value = data.draw(st.one_of(_int32s(), st.integers(-4, 4).map(lambda d: original + d)))
    value = int(np.int32(np.int64(value).astype(np.int32)))
    mutated = replace_i32(state, where[name], value)
    start = time.perf_counter()
    accepted = check_same_outcome(mutated)
    assert time.perf_counter() - start < 2.0
    if name in ("grid_size", "grid.w", "grid.h", "grid.count", "main_width", "main_height"):
        # These six must agree with each other, so changing one alone is always caught.
        assert accepted == (value == original)


# ---- a plain seeded loop over many mutated states ----

MUTATIONS = ("truncate", "pad", "flip", "flips", "cut", "prefix", "byte_run", "splice")


def mutate(rng: np.random.Generator, game: str, state: bytes) -> Tuple[str, bytes]:
    kind = MUTATIONS[rng.integers(len(MUTATIONS))]
    n = len(state)
    if kind == "truncate":
        return kind, state[: rng.integers(0, n)]
    if kind == "pad":
        return kind, state + rng.integers(0, 256, rng.integers(1, 16), dtype=np.uint8).tobytes()
    if kind in ("flip", "flips"):
        out = bytearray(state)
        for _ in range(1 if kind == "flip" else rng.integers(2, 16)):
            at = rng.integers(0, n)
            out[at] ^= 1 << rng.integers(0, 8)
        return kind, bytes(out)
    if kind == "cut":
        start = rng.integers(0, n)
        return kind, state[:start] + state[start + rng.integers(1, 64) :]
    if kind == "prefix":
        where = prefix_offsets(state, game)
        keys = [k for k in where if k != "trailer"]
        at = where[keys[rng.integers(len(keys))]]
        value = (
            int(rng.integers(-(2**31), 2**31))
            if rng.random() < 0.5
            else int(np.frombuffer(state, "<i4", 1, at)[0] + rng.integers(-3, 4))
        )
        return kind, replace_i32(state, at, value)
    if kind == "byte_run":
        start = rng.integers(0, n)
        run = rng.integers(0, 256, rng.integers(1, 12), dtype=np.uint8).tobytes()
        return kind, (state[:start] + run + state[start + len(run) :])[:n]
    # splice: the head of one golden state onto the tail of another of the same game
    return kind, state[: rng.integers(0, n)] + state[rng.integers(0, n) :]


def test_many_mutated_states() -> None:
    """20,000 mutated states through parse_states one at a time; the reference must agree."""
    rng = np.random.default_rng(20240601)
    cases = all_golden_states()
    accepted = {k: 0 for k in MUTATIONS}
    seen = {k: 0 for k in MUTATIONS}
    start = time.perf_counter()
    for _ in range(20_000):
        game, state = cases[rng.integers(len(cases))]
        kind, mutated = mutate(rng, game, state)
        seen[kind] += 1
        ok = check_same_outcome(mutated)
        if kind in ("truncate", "pad"):
            assert not ok, kind
        accepted[kind] += ok
    elapsed = time.perf_counter() - start
    # The mutations do exercise both outcomes (bit flips in floats or RNG text parse fine).
    assert accepted["flip"] > 0 and seen["prefix"] > accepted["prefix"]
    assert elapsed < 120, f"took {elapsed:.0f} s"
