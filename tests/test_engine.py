"""The engines against procgen itself: direct reads equal procgen's get_state byte for byte (RNG
texts aside), headless stepping reproduces procgen's own stepping exactly, and a build or layout
the engine does not know is refused with the get_state fallback, never a crash."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import numpy as np
import pytest
from ragged_buffer import RaggedBufferI64

from procgen_entities import GAME_NAMES, parse_states
from procgen_entities.engine import (
    EngineFallbackWarning,
    EngineUnavailable,
    bind_engine,
    library_info,
    without_rng_texts,
)
from procgen_entities.engine import elf as elf_module
from procgen_entities.engine.layout import (
    Layout,
    LayoutError,
    layout_from_table,
    load_known_layout,
)
from procgen_entities.entity_gym.vec_env import ProcgenVecEnv
from procgen_entities.games import get_game
from procgen_entities.procgen_envs import make_procgen_env, valid_modes

pytestmark = pytest.mark.live


def move(actions: np.ndarray) -> Dict[str, RaggedBufferI64]:
    return {
        "move": RaggedBufferI64.from_flattened(
            actions.reshape(-1, 1), np.ones(len(actions), np.int64)
        )
    }


def actions_for(seed: int, steps: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 15, size=(steps, n))


@pytest.mark.parametrize("game", GAME_NAMES)
def test_direct_read_equals_get_state_bytes(game: str) -> None:
    """Every env of every valid mode, after procgen has stepped it: the direct read is procgen's
    get_state with the RNG texts emptied, byte for byte (entities, grid, trailer, scalars)."""
    for mode in valid_modes(game):
        env = make_procgen_env(game, 4, distribution_mode=mode, rand_seed=3)
        binding = bind_engine("direct", get_game(game), [env], [4], {})
        assert binding.name == "direct"
        for t, acts in enumerate(actions_for(1, 120, 4)):
            env.act(acts.astype(np.int32))
            if t % 20 == 19:
                states = env.callmethod("get_state")  # waits for procgen's threads
                for k, state in enumerate(states):
                    direct = binding.live.write_state(0, k)
                    assert direct == without_rng_texts(state), (mode, t, k)
                    a, b = parse_states([direct]), parse_states([state])
                    np.testing.assert_array_equal(a.entities, b.entities)
                    np.testing.assert_array_equal(a.grid, b.grid)
        binding.live.detach()
        env.close()


def run_pair(game: str, steps: int, n: int = 6, check_every: int = 100, **options: Any) -> int:
    """Step a headless env and a procgen-stepped (get_state) env with the same seeds and actions;
    every step's reward/done/level seeds and periodic get_state bytes must be identical.
    Returns the number of episode ends seen."""
    kw = dict(seed=11, num_groups=1, **options)
    ends = 0
    with (
        ProcgenVecEnv(game, n, engine="headless", **kw) as fast,
        ProcgenVecEnv(game, n, engine="get_state", **kw) as ref,
    ):
        assert fast.engine == "headless" and ref.engine == "get_state"
        space = fast.obs_space()
        fast.reset(space), ref.reset(space)
        assert fast.get_states() == ref.get_states()
        for t, acts in enumerate(actions_for(5, steps, n)):
            a, b = fast.act(move(acts), space), ref.act(move(acts), space)
            np.testing.assert_array_equal(a.reward, b.reward, err_msg=f"step {t}")
            np.testing.assert_array_equal(a.done, b.done, err_msg=f"step {t}")
            va, vb = fast.step_values(), ref.step_values()
            for name in ("current_level_seed", "prev_level_seed", "cur_time", "level_complete"):
                np.testing.assert_array_equal(va.scalars[name], vb.scalars[name], err_msg=name)
            for name in a.features:
                np.testing.assert_array_equal(
                    a.features[name].as_array(), b.features[name].as_array(), err_msg=name
                )
            ends += int(a.done.sum())
            if t % check_every == check_every - 1:
                assert fast.get_states() == ref.get_states(), f"get_state differs at step {t}"
        assert fast.get_states() == ref.get_states()
    return ends


@pytest.mark.parametrize("game", GAME_NAMES)
def test_headless_stepping_reproduces_procgen(game: str) -> None:
    ends = run_pair(game, 1000)
    assert ends > 0, "the run should cross episode ends"


@pytest.mark.parametrize(
    "game,options",
    [
        ("coinrun", {"num_levels": 3, "use_sequential_levels": True, "distribution_mode": "easy"}),
        ("ninja", {"num_levels": 2, "use_sequential_levels": True}),
        ("climber", {"center_agent": False}),
        ("bigfish", {"center_agent": False, "distribution_mode": "easy"}),
        ("starpilot", {"num_levels": 10, "start_level": 50, "distribution_mode": "easy"}),
        ("heist", {"distribution_mode": "memory"}),
        ("caveflyer", {"center_agent": False, "distribution_mode": "easy", "num_levels": 1}),
    ],
)
def test_headless_reproduces_procgen_with_options(game: str, options: Dict[str, Any]) -> None:
    assert run_pair(game, 1000, **options) > 0


def test_thread_counts_give_identical_observations() -> None:
    results: List[List[np.ndarray]] = []
    for threads in (1, 2, 3):
        with ProcgenVecEnv("ninja", 10, seed=2, num_threads=threads, engine="headless") as env:
            space = env.obs_space()
            env.reset(space)
            got = []
            for acts in actions_for(9, 150, 10):
                obs = env.act(move(acts), space)
                got.extend(v.as_array().copy() for v in obs.features.values())
            results.append(got)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


def test_terminal_states_are_the_last_frame_before_reset() -> None:
    """final_states(): the state procgen never shows: same level as before, the episode's end."""
    with ProcgenVecEnv("bigfish", 8, seed=4, engine="headless", num_groups=1) as env:
        space = env.obs_space()
        env.reset(space)
        seen = 0
        for acts in actions_for(3, 400, 8):
            before = env.step_values().scalars["current_level_seed"].copy()
            cur_time = env.step_values().scalars["cur_time"].copy()
            obs = env.act(move(acts), space)
            ended, batch = env.final_states()
            np.testing.assert_array_equal(ended, np.flatnonzero(obs.done))
            if len(ended):
                seen += len(ended)
                np.testing.assert_array_equal(batch.level_seed, before[ended])
                np.testing.assert_array_equal(batch.cur_time, cur_time[ended] + 1)
                assert batch.done.all()
                # the next observation is already the next level's first state
                assert (env.step_values().scalars["cur_time"][ended] == 0).all()
        assert seen > 0


@pytest.mark.parametrize("engine", ["headless", "get_state"])
def test_truncation_by_time_limit_is_told_apart(engine: str) -> None:
    """bigfish's limit is 6,000 steps: restore a state 2 steps before it; the episode ends on
    the step that reaches the limit and is reported as truncated, not terminated."""
    with ProcgenVecEnv("bigfish", 2, seed=8, engine=engine, num_groups=1) as env:
        space = env.obs_space()
        env.reset(space)
        env.act(move(np.array([4, 4])), space)
        states = env.get_states()
        timeout = int(parse_states(states).scalars["timeout"][0])
        assert timeout == 6000
        state = bytearray(states[0])
        at = _cur_time_offset(states[0])
        state[at : at + 4] = np.int32(timeout - 2).tobytes()
        env.procgen_envs[0].callmethod("set_state", [bytes(state), states[1]])
        env.get_states()  # re-read after procgen's set_state
        env.read()
        obs = env.act(move(np.array([4, 4])), space)
        assert not obs.done.any() and not env.truncated.any()
        assert env.step_values().scalars["cur_time"][0] == timeout - 1
        obs = env.act(move(np.array([4, 4])), space)
        assert obs.done[0] and env.truncated[0]
        assert not obs.done[1] and not env.truncated[1]
        assert env.step_values().truncated is not None and env.step_values().truncated[0]
        if engine == "headless":
            ended, batch = env.final_states()
            assert list(ended) == [0] and batch.cur_time[0] == timeout


def _cur_time_offset(state: bytes) -> int:
    name_len = int.from_bytes(state[4:8], "little")
    r1 = int.from_bytes(state[80 + name_len : 84 + name_len], "little")
    r2_at = 88 + name_len + r1
    r2 = int.from_bytes(state[r2_at : r2_at + 4], "little")
    return r2_at + 4 + r2 + 52


# ---- refusing what the engine does not know ----


def test_unknown_build_without_layout_falls_back_to_get_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An unknown build id whose DWARF gives no layout (tests/test_engine_builds.py strips a
    real one): auto falls back to get_state, explicit engines raise."""
    import procgen_entities.engine as engine
    from procgen_entities.engine import dwarf

    real = engine._read_elf_cached

    def unknown(path: str) -> elf_module.ElfInfo:
        info = real(path)
        return elf_module.ElfInfo("00" * 20, info.functions, info.function_table)

    def no_dwarf(path: str, build_id: str) -> Dict[str, Any]:
        raise dwarf.DwarfError(f"{path} has no DWARF")

    monkeypatch.setattr(engine, "_read_elf_cached", unknown)
    monkeypatch.setattr(dwarf, "cached_layout", no_dwarf)
    engine._derived_layout.cache_clear()
    try:
        with pytest.warns(EngineFallbackWarning, match="unknown procgen build"):
            env = ProcgenVecEnv("coinrun", 4, seed=1)
        with env:
            assert env.engine == "get_state"
            space = env.obs_space()
            env.reset(space)
            obs = env.act(move(np.full(4, 7)), space)
            assert obs.features["Player"].size0() == 4
        for name in ("headless", "direct"):
            with pytest.raises(EngineUnavailable, match="unknown procgen build"):
                ProcgenVecEnv("coinrun", 4, seed=1, engine=name)
    finally:
        engine._derived_layout.cache_clear()


def _table() -> Dict[str, Any]:
    from importlib import resources

    text = resources.files("procgen_entities.engine").joinpath("layouts", "procgen-0.10.7.json")
    return json.loads(text.read_text())  # type: ignore[no-any-return]


def test_altered_layout_table_is_refused() -> None:
    table = _table()
    table["classes"]["Entity"]["members"]["x"][0] += 4
    with pytest.raises(LayoutError, match="checksum"):
        layout_from_table(table)
    assert load_known_layout().member("Entity", "x")[0] == 0


def test_wrong_offsets_fail_the_read_check_and_fall_back() -> None:
    """A layout that passes every structural check but misplaces a field (here the time
    limit) is caught by comparing the direct read with procgen's get_state."""
    known = load_known_layout()
    classes = json.loads(json.dumps(known.classes))
    classes["Game"]["members"]["timeout"][0] += 4
    wrong = Layout(known.build_ids, classes)
    env = make_procgen_env("coinrun", 2, rand_seed=0)
    try:
        with pytest.raises(EngineUnavailable, match="differs from procgen's get_state"):
            bind_engine("headless", get_game("coinrun"), [env], [2], {}, layout=wrong)
        with pytest.warns(EngineFallbackWarning):
            binding = bind_engine("auto", get_game("coinrun"), [env], [2], {}, layout=wrong)
        assert binding.name == "get_state" and binding.live is None
    finally:
        env.close()


def test_member_of_the_wrong_type_is_refused() -> None:
    known = load_known_layout()
    classes = json.loads(json.dumps(known.classes))
    classes["CoinRun"]["members"]["has_support"][2] = "float"
    classes["CoinRun"]["members"]["has_support"][1] = 4
    wrong = Layout(known.build_ids, classes)
    env = make_procgen_env("coinrun", 2, rand_seed=0)
    try:
        with pytest.raises(EngineUnavailable, match="has_support"):
            bind_engine("direct", get_game("coinrun"), [env], [2], {}, layout=wrong)
    finally:
        env.close()


def test_render_mode_keeps_procgen_rendering() -> None:
    env = make_procgen_env("coinrun", 2, rand_seed=0, render_mode="rgb_array")
    try:
        with pytest.raises(EngineUnavailable, match="render_mode"):
            bind_engine("headless", get_game("coinrun"), [env], [2], {"render_mode": "rgb_array"})
    finally:
        env.close()


def test_library_is_the_recorded_build() -> None:
    env = make_procgen_env("maze", 1, rand_seed=0)
    try:
        lib = library_info(env)
        assert lib.elf.build_id in load_known_layout().build_ids
        assert lib.path.endswith("libenv.so")
    finally:
        env.close()


def test_headless_render_equals_procgen_render() -> None:
    """Frames rendered on demand from headless-stepped games equal procgen's own frames."""
    with (
        ProcgenVecEnv("coinrun", 3, seed=6, engine="headless", num_groups=1) as fast,
        ProcgenVecEnv("coinrun", 3, seed=6, engine="get_state", num_groups=1) as ref,
    ):
        space = fast.obs_space()
        fast.reset(space), ref.reset(space)
        for acts in actions_for(4, 40, 3):
            fast.act(move(acts), space), ref.act(move(acts), space)
        np.testing.assert_array_equal(fast.render(), ref.render())
        # rendering does not disturb the games: they go on identically
        for acts in actions_for(5, 40, 3):
            a, b = fast.act(move(acts), space), ref.act(move(acts), space)
            np.testing.assert_array_equal(a.reward, b.reward)
        assert fast.get_states() == ref.get_states()


def test_deferred_reset_shows_the_terminal_state_then_resets() -> None:
    """defer_reset: the ending step returns the terminal state (what eager stepping captures
    in final_states); the next act only resets, its action ignored, after which the env is
    exactly where procgen's same-step reset put it, and both go on identically."""
    kw: Dict[str, Any] = dict(seed=12, engine="headless", num_groups=1)
    with (
        ProcgenVecEnv("bigfish", 1, defer_reset=True, **kw) as lazy,
        ProcgenVecEnv("bigfish", 1, **kw) as eager,
    ):
        space = lazy.obs_space()
        lazy.reset(space), eager.reset(space)
        ends = 0
        for acts in actions_for(7, 600, 1):
            obs, ref = lazy.act(move(acts), space), eager.act(move(acts), space)
            np.testing.assert_array_equal(obs.reward, ref.reward)
            np.testing.assert_array_equal(obs.done, ref.done)
            if not ref.done[0]:
                assert lazy.get_states() == eager.get_states()
                continue
            ends += 1
            _, final = eager.final_states()
            shown = parse_states(lazy.get_states())
            np.testing.assert_array_equal(shown.entities, final.entities)
            np.testing.assert_array_equal(shown.cur_time, final.cur_time)
            lazy.act(move(np.array([13])), space)  # only resets
            assert not lazy.pending_reset.any()
            assert lazy.get_states() == eager.get_states()
        assert ends >= 2


@pytest.mark.parametrize("game", ["bigfish", "coinrun"])
def test_advance_steps_the_games_as_step_does(game: str) -> None:
    """advance (the benchmark's logic-only row) steps exactly as step does, reading nothing:
    the same states, rewards, terminal states and truncations after it catches up, through
    episode ends, deferred resets included."""
    from procgen_entities.stepper import ProcgenStepper

    for defer in (False, True):
        kw: Dict[str, Any] = dict(seed=5, engine="headless", defer_reset=defer)
        with ProcgenStepper(game, 6, **kw) as fast, ProcgenStepper(game, 6, **kw) as ref:
            fast.restart(), ref.restart()
            ends = 0
            for t, chosen in enumerate(actions_for(3, 300, 6).astype(np.int32)):
                fast.advance(chosen)
                ref.step(chosen)
                if t % 7 and not ref.truncated.any() and not ref.pending_reset.any():
                    continue  # compared every few steps, and wherever an episode ended
                assert fast.get_states() == ref.get_states(), (game, defer, t)
                np.testing.assert_array_equal(fast.truncated, ref.truncated)
                np.testing.assert_array_equal(fast.pending_reset, ref.pending_reset)
                a, b = fast.step_values().scalars, ref.step_values().scalars
                np.testing.assert_array_equal(a["reward"], b["reward"])
                fast_ended, fast_final = fast.final_states()
                ref_ended, ref_final = ref.final_states()
                np.testing.assert_array_equal(fast_ended, ref_ended)
                np.testing.assert_array_equal(fast_final.entities, ref_final.entities)
                ends += len(ref_ended)
            if game == "bigfish":
                assert ends
