"""Error handling of parse_states / parse_state, checked for the C parser and the reference."""

from __future__ import annotations

import struct
import time

import numpy as np
import pytest
from conftest import assert_batches_identical, load_golden, prefix_offsets
from conftest import read_i32 as _i32
from conftest import replace_i32 as _replace_i32

from procgen_entities import MixedBatchError, StateDecodeError, parse_state, parse_states
from procgen_entities.reference import reference_parse_states

PARSERS = [parse_states, reference_parse_states]
parsers = pytest.mark.parametrize("parse", PARSERS, ids=["c", "reference"])


def _state(name: str = "coinrun-easy", i: int = 0) -> bytes:
    return load_golden(name).states[i]


# ---- types ----


@parsers
@pytest.mark.parametrize(
    "bad",
    [
        ["not bytes"],
        [1, 2, 3],
        [[0, 0, 0, 0]],
        [None],
        [memoryview(b"\0" * 64)[::2]],
        [np.zeros((8, 8), dtype=np.uint8)[:, ::2]],
    ],
    ids=["str", "ints", "list_of_ints", "none", "strided_memoryview", "strided_numpy"],
)
def test_non_bytes_like_is_type_error(parse, bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError):
        parse(bad)


@parsers
@pytest.mark.parametrize("bad", [b"abc", "abc", bytearray(b"abc"), memoryview(b"abc")])
def test_a_single_state_instead_of_a_sequence_is_type_error(parse, bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError):
        parse(bad)


def test_non_sequence_is_type_error() -> None:
    with pytest.raises(TypeError):
        parse_states(5)  # type: ignore[arg-type]


def test_parse_state_takes_one_state() -> None:
    golden = load_golden("coinrun-easy")
    batch = parse_state(golden.states[0])
    assert len(batch) == 1
    assert batch.sizes.tolist() == [len(golden.states[0])]
    assert_batches_identical(batch, reference_parse_states(golden.states[:1]))


# ---- empty batches ----


@parsers
def test_empty_batch_needs_game(parse) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError):
        parse([])


@parsers
@pytest.mark.parametrize("game", ["coinrun", "starpilot", "plunder", "caveflyer"])
def test_empty_batch_with_game(parse, game: str) -> None:  # type: ignore[no-untyped-def]
    batch = parse([], game=game)
    assert len(batch) == 0 and batch.game == game
    assert batch.entities.shape == (0, 31) and batch.entities.dtype == np.float32
    assert batch.grid is not None and batch.grid.shape[0] == 0
    assert batch.reward.shape == (0,) and batch.reward.dtype == np.float32
    assert all(len(v) == 0 for v in batch.vectors.values())
    assert all(len(v) == 0 for v in batch.extras.values())


def test_empty_batches_identical() -> None:
    for game in ("coinrun", "starpilot", "plunder", "chaser"):
        assert_batches_identical(parse_states([], game=game), reference_parse_states([], game=game))


@parsers
def test_unknown_game_argument(parse) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="unknown procgen game"):
        parse([], game="pong")


@parsers
def test_unknown_entity_field(parse) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="nonsense"):
        parse([_state()], entity_fields=["x", "nonsense"])


# ---- game names and mixed batches ----


def _rename(data: bytes, new_name: bytes) -> bytes:
    old_len = _i32(data, 4)
    return data[:4] + struct.pack("<i", len(new_name)) + new_name + data[8 + old_len :]


@parsers
def test_unknown_game_name(parse) -> None:  # type: ignore[no-untyped-def]
    bad = _rename(_state(), b"pong")
    with pytest.raises(StateDecodeError) as info:
        parse([bad])
    assert info.value.field == "game_name" and info.value.index == 0
    assert not isinstance(info.value, MixedBatchError)


@parsers
def test_unknown_game_name_later_in_batch(parse) -> None:  # type: ignore[no-untyped-def]
    bad = _rename(_state(), b"coinruX")
    with pytest.raises(StateDecodeError) as info:
        parse([_state(), _state(i=1), bad])
    assert info.value.field == "game_name" and info.value.index == 2


@parsers
def test_mixed_games(parse) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MixedBatchError, match="bigfish"):
        parse([_state("coinrun-easy"), _state("bigfish-easy")])
    with pytest.raises(MixedBatchError):
        parse([_state("bigfish-easy")], game="coinrun")


@parsers
def test_easy_and_hard_coinrun_mix(parse) -> None:  # type: ignore[no-untyped-def]
    """Same game and same 64x64 grid: one batch is fine."""
    states = [_state("coinrun-easy"), _state("coinrun-hard")]
    batch = parse(states)
    assert batch.scalars["distribution_mode"].tolist() == [0, 1]


@parsers
def test_caveflyer_easy_and_hard_are_a_mixed_batch(parse) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MixedBatchError, match="grid"):
        parse([_state("caveflyer-easy"), _state("caveflyer-hard")])


# ---- malformed bytes ----


@parsers
def test_every_truncation_is_rejected(parse) -> None:  # type: ignore[no-untyped-def]
    data = _state("heist-easy")
    step = 1 if parse is parse_states else 97  # the reference is slow; sample its prefixes
    for n in range(0, len(data), step):
        with pytest.raises(StateDecodeError) as info:
            parse([data[:n]])
        err = info.value
        assert err.index == 0
        assert 0 <= err.offset <= n, (n, err.offset)
        assert err.field


@parsers
def test_truncation_reports_where(parse) -> None:  # type: ignore[no-untyped-def]
    data = _state("coinrun-hard", 3)
    where = prefix_offsets(data)
    with pytest.raises(StateDecodeError) as info:
        parse([data[: where["entities"] + 2]])
    assert info.value.field == "entities" and info.value.offset == where["entities"]
    with pytest.raises(StateDecodeError) as info:
        parse([data[:-1]])
    assert info.value.field == "terminator"
    with pytest.raises(StateDecodeError) as info:
        parse([data[:0]])
    assert info.value.offset == 0 and info.value.field == "version"


@parsers
@pytest.mark.parametrize("padding", [b"\0", b"\0" * 4, b"\xfe\xca\xfe\xca", b"x" * 1000])
def test_padding_is_rejected(parse, padding: bytes) -> None:  # type: ignore[no-untyped-def]
    data = _state("bigfish-hard")
    with pytest.raises(StateDecodeError) as info:
        parse([data + padding])
    assert info.value.field == "terminator"
    assert info.value.offset == len(data)


@parsers
@pytest.mark.parametrize("byte", [-4, -3, -2, -1])
def test_damaged_terminator(parse, byte: int) -> None:  # type: ignore[no-untyped-def]
    data = bytearray(_state("chaser-hard"))
    data[byte] ^= 0x01
    with pytest.raises(StateDecodeError) as info:
        parse([bytes(data)])
    assert info.value.field == "terminator" and info.value.offset == len(data) - 4


@parsers
def test_bad_state_index_in_batch(parse) -> None:  # type: ignore[no-untyped-def]
    states = list(load_golden("miner-hard").states)
    states[4] = states[4][:-8]
    with pytest.raises(StateDecodeError) as info:
        parse(states)
    assert info.value.index == 4


@parsers
def test_random_bytes_are_rejected(parse) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    for n in [0, 3, 4, 8, 100, 5000, 40000]:
        for _ in range(5):
            with pytest.raises(StateDecodeError):
                parse([rng.integers(0, 256, n, dtype=np.uint8).tobytes()], game="coinrun")
    with pytest.raises(StateDecodeError):
        parse([b"\0" * 40000], game="coinrun")


@parsers
def test_version_must_be_zero(parse) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(StateDecodeError) as info:
        parse([_replace_i32(_state(), 0, 1)])
    assert info.value.field == "version" and info.value.offset == 0


@parsers
@pytest.mark.parametrize("value", [0x7FFFFFFF, 0x10000000, -1, -(2**31)])
@pytest.mark.parametrize(
    "prefix",
    ["game_name", "level_seed_rand_gen", "rand_gen", "entities", "asset_rand_gen", "grid.count"],
)
def test_huge_or_negative_length_prefix(parse, prefix: str, value: int) -> None:  # type: ignore[no-untyped-def]
    data = _state("coinrun-easy")
    at = prefix_offsets(data)[prefix]
    bad = _replace_i32(data, at, value)
    start = time.perf_counter()
    with pytest.raises(StateDecodeError) as info:
        parse([bad] * 8)
    assert time.perf_counter() - start < 0.5, "a huge length prefix must fail fast"
    assert info.value.index == 0
    if parse is parse_states and prefix != "grid.count":
        assert info.value.field == prefix and info.value.offset == at


@parsers
def test_grid_dimension_checks(parse) -> None:  # type: ignore[no-untyped-def]
    data = _state("caveflyer-hard", 5)
    where = prefix_offsets(data)
    width = _i32(data, where["grid.w"])
    cases = {
        "grid_size": width * width + 1,
        "grid.w": width + 1,
        "grid.h": width - 1,
        "grid.count": width * width - 1,
        "main_width": width + 1,
        "main_height": 0,
    }
    for field, value in cases.items():
        with pytest.raises(StateDecodeError) as info:
            parse([_replace_i32(data, where[field], value)])
        if parse is parse_states:
            assert info.value.field in (field, "grid.count", "grid_size"), field


@parsers
def test_player_must_be_entity_0(parse) -> None:  # type: ignore[no-untyped-def]
    data = _state("dodgeball-easy")
    where = prefix_offsets(data)
    with pytest.raises(StateDecodeError) as info:
        parse([_replace_i32(data, where["entities"] + 4 + 24, 1)])
    assert info.value.offset == where["entities"] + 4 + 24
    assert "entities" in info.value.field


@parsers
def test_no_entities(parse) -> None:  # type: ignore[no-untyped-def]
    data = _state("maze-easy")  # maze has exactly one entity: the player
    where = prefix_offsets(data)
    at = where["entities"]
    bad = data[:at] + struct.pack("<i", 0) + data[at + 4 + 124 :]
    with pytest.raises(StateDecodeError) as info:
        parse([bad])
    assert info.value.field == "entities" and info.value.offset == at


@parsers
@pytest.mark.parametrize("value", [2, -1, 256])
def test_bools_must_be_0_or_1(parse, value: int) -> None:  # type: ignore[no-untyped-def]
    data = _state("heist-hard", 2)
    name_len = _i32(data, 4)
    where = prefix_offsets(data)
    n_entities = _i32(data, where["entities"])
    step_at = where["grid_size"] - 60
    base_at = where["entities"] + 4 + 124 * n_entities
    bools = {
        "paint_vel_info": 8 + name_len,
        "center_agent": 8 + name_len + 20,
        "grid_step": 8 + name_len + 48,
        "level_seed_rand_gen.is_seeded": where["level_seed_rand_gen"] - 4,
        "rand_gen.is_seeded": where["rand_gen"] - 4,
        "done": step_at + 4,
        "level_complete": step_at + 8,
        "episode_done": step_at + 32,
        "is_waiting_for_step": step_at + 56,
        "use_procgen_background": base_at,
        "random_agent_start": base_at + 64,
        "has_useful_vel_info": base_at + 68,
        "asset_rand_gen.is_seeded": where["asset_rand_gen"] - 4,
        # heist trailer: num_keys i, world_dim i, has_keys vec<bool>; items start after the count
        "has_keys": where["trailer"] + 12,
    }
    assert _i32(data, where["trailer"] + 8) > 0, "golden state should hold keys"
    for field, at in bools.items():
        assert _i32(data, at) in (0, 1), field
        with pytest.raises(StateDecodeError) as info:
            parse([_replace_i32(data, at, value)])
        assert info.value.offset == at, field
        if parse is parse_states and field not in ("paint_vel_info", "center_agent", "grid_step"):
            assert field in info.value.field
    # An int field set to 2 is fine (a control for the loop above).
    timer_at = step_at + 36
    parse([_replace_i32(data, timer_at, 2)])


@parsers
def test_trailer_bool_scalar(parse) -> None:  # type: ignore[no-untyped-def]
    data = _state("climber-easy")
    at = prefix_offsets(data)["trailer"]  # has_support b
    with pytest.raises(StateDecodeError) as info:
        parse([_replace_i32(data, at, 7)])
    assert info.value.offset == at
    assert info.value.field == "has_support"


@parsers
def test_error_message_names_field_and_offset(parse) -> None:  # type: ignore[no-untyped-def]
    data = _state("leaper-hard")
    at = prefix_offsets(data)["entities"]
    with pytest.raises(StateDecodeError) as info:
        parse([_state("leaper-hard", 1), _replace_i32(data, at, -5)])
    err = info.value
    message = str(err)
    assert err.index == 1 and "state 1" in message
    assert err.field in message and str(err.offset) in message
    assert isinstance(err, ValueError)


def test_decode_error_pickles() -> None:
    import pickle

    try:
        parse_states([b"\0\0"])
    except StateDecodeError as exc:
        again = pickle.loads(pickle.dumps(exc))
        assert (again.index, again.offset, again.field, str(again)) == (
            exc.index, exc.offset, exc.field, str(exc),
        )  # fmt: skip
    else:
        pytest.fail("no error")


# ---- game invariants: structurally valid states that would crash procgen ----


@pytest.mark.parametrize("game", ["heist", "plunder", "bossfight"])
def test_bytes_deleted_inside_the_grid_never_give_an_accepted_state(game: str) -> None:
    """Deleting 4k bytes (k = 1..16) anywhere inside the grid shifts the trailer into the grid's
    place; some shifts re-align into a structurally valid state that procgen's set_state then
    crashes on (heist in set_state, plunder a few steps later). Every one must be refused,
    by the C parser and by the reference parser alike."""
    states = [s for mode in ("easy", "hard") for s in load_golden(f"{game}-{mode}").states[::6]]
    checked = 0
    for state in states:
        offsets = prefix_offsets(state)
        first, end = offsets["grid.count"] + 4, offsets["trailer"]
        for k in range(1, 17):
            for at in range(first, end - 4 * k + 1):
                cut = state[:at] + state[at + 4 * k :]
                with pytest.raises(StateDecodeError):
                    parse_states([cut], game=game)
                checked += 1
        # the reference parser on a sample of the same cuts
        for at in range(first, end - 64, 97):
            for k in (1, 4, 16):
                with pytest.raises(StateDecodeError):
                    reference_parse_states([state[:at] + state[at + 4 * k :]], game=game)
    assert checked > 10_000


@pytest.mark.parametrize(
    "game,item,value,invariant",
    [
        ("bossfight", "num_rounds", 7, "len(attack_modes) == num_rounds"),
        ("heist", "world_dim", 5, "world_dim == grid.w == grid.h"),
        ("heist", "num_keys", 9, "len(has_keys) == num_keys"),
        ("plunder", "num_lanes", 4, "len(lane_directions) == num_lanes == len(lane_vels)"),
        ("maze", "world_dim", 3, "world_dim == grid.w == grid.h"),
    ],
)
def test_broken_invariant_is_named(game: str, item: str, value: int, invariant: str) -> None:
    from procgen_entities.games import GAMES

    state = load_golden(f"{game}-hard").states[0]
    at = prefix_offsets(state, game)["trailer"]
    for name, kind in GAMES[game].trailer:
        if name == item:
            break
        at += 4 + (_i32(state, at) * (124 if kind == "ve" else 4) if kind.startswith("v") else 0)
    bad = _replace_i32(state, at, value)
    for parse in (parse_states, reference_parse_states):
        with pytest.raises(StateDecodeError, match="invariant") as info:
            parse([bad], game=game)
        assert info.value.field == invariant
    # opting out of the invariants (for reading such a state as it is) still parses it
    from procgen_entities._native import _parser
    from procgen_entities.parse import game_spec

    lax = game_spec(game, check_invariants=False)
    raw = _parser.parse_batch([bad], lax, np.arange(31, dtype=np.int32), False)
    assert raw["trailer_scalars"].shape[0] == 1
