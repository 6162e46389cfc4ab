"""The engine on builds it does not know by id: the layout from the loaded libenv.so's own DWARF
(pyelftools, no gdb) equals the committed table for the recorded builds, is cached per build id,
and a build not known by its id steps headlessly only after the construction-time self-check;
a build without DWARF, with a corrupted layout or failing the self-check falls back cleanly.
Needs no entity-gym (runs on every backend's stack)."""

from __future__ import annotations

import json
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any, Dict, Iterator

import numpy as np
import pytest

import procgen_entities.engine as engine
from procgen_entities import GAME_NAMES, backends
from procgen_entities.engine import EngineFallbackWarning, EngineUnavailable, library_info
from procgen_entities.engine import dwarf as dwarf_module
from procgen_entities.engine import elf as elf_module
from procgen_entities.engine.layout import load_known_layout
from procgen_entities.games import get_game
from procgen_entities.procgen_envs import make_procgen_env
from procgen_entities.stepper import ProcgenStepper

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def libenv() -> str:
    env = make_procgen_env("coinrun", 1, rand_seed=0)
    try:
        return library_info(env).path
    finally:
        env.close()


@pytest.fixture(scope="module")
def cache_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def fresh_caches(cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The tests derive into their own cache directory (one derivation for the module), with no
    in-process results kept between tests."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))
    engine._derived_layout.cache_clear()
    engine._SELF_CHECKS.clear()
    yield
    engine._derived_layout.cache_clear()
    engine._SELF_CHECKS.clear()


def _pretend_unknown_build(monkeypatch: pytest.MonkeyPatch) -> None:
    real = engine._read_elf_cached

    def unknown(path: str) -> elf_module.ElfInfo:
        info = real(path)
        return elf_module.ElfInfo("00" * 20, info.functions, info.function_table)

    monkeypatch.setattr(engine, "_read_elf_cached", unknown)


def test_dwarf_layout_equals_the_committed_table(libenv: str) -> None:
    """An independent check of the table: pyelftools on the loaded build's own DWARF gives the
    recorded offsets, sizes and member types of every class (on a recorded build); on any other
    build it gives every class the engine needs, with Game's members after its std::string."""
    table = dwarf_module.extract_layout(libenv)
    known = load_known_layout()
    build_id = elf_module.read_elf(libenv).build_id
    same = dwarf_module.same_layout(table, {"classes": known.classes})
    if build_id in known.build_ids or build_id == "80700cbc39f37b23db90da9e4a61c2d7b9a35a56":
        assert same == []  # the cp311 builds, and procgen-mirror's cp312 build
    else:
        assert set(table["classes"]) == set(known.classes)
    string_size = table["classes"]["Game"]["members"]["game_name"][1]
    shift = string_size - 8  # the old libstdc++ ABI's std::string is one pointer
    for name in ("action", "timeout", "cur_time", "total_reward"):
        got = table["classes"]["Game"]["members"][name][0]
        assert got == known.classes["Game"]["members"][name][0] + shift, name
    entity = {k: v[:2] for k, v in table["classes"]["Entity"]["members"].items()}
    assert entity == {k: v[:2] for k, v in known.classes["Entity"]["members"].items()}


def test_same_layout_reports_a_moved_member(libenv: str) -> None:
    table = dwarf_module.extract_layout(libenv)
    moved = json.loads(json.dumps(table))
    moved["classes"]["CoinRun"]["members"]["has_support"][0] += 4
    assert dwarf_module.same_layout(table, table) == []
    assert dwarf_module.same_layout(table, moved) == [
        f"CoinRun::has_support: {table['classes']['CoinRun']['members']['has_support']} != "
        f"{moved['classes']['CoinRun']['members']['has_support']}"
    ]


def test_layout_is_cached_per_build_id(libenv: str, cache_home: Path) -> None:
    path = dwarf_module.cache_dir() / "layout-abc.json"
    assert path.parent == cache_home / "procgen-entities"
    first = dwarf_module.cached_layout(libenv, "abc")
    assert json.loads(path.read_text())["classes"] == first["classes"]
    path.write_text("{not json")  # a damaged cache file is derived again
    assert dwarf_module.cached_layout(libenv, "abc") == first
    assert json.loads(path.read_text())["build_id"] == "abc"


def test_unknown_build_with_dwarf_runs_headless_after_the_self_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _pretend_unknown_build(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning
        stepper = ProcgenStepper("coinrun", 4, seed=1)
    try:
        assert stepper.engine == "headless"
        assert list(engine._SELF_CHECKS.values()) == [None]
        assert (dwarf_module.cache_dir() / f"layout-{'00' * 20}.json").is_file()
        stepper.restart()
        for acts in np.random.default_rng(0).integers(0, 15, size=(30, 4)):
            stepper.step(acts.astype(np.int32))
    finally:
        stepper.close()


@pytest.mark.parametrize("game", GAME_NAMES)
def test_headless_equals_procgen_on_this_backend(game: str) -> None:
    """On whichever backend is installed (the build the engine uses here): 6 envs stepped
    headlessly and by procgen from the same states, with episode ends (step limits of 6 to 51
    steps at the start, then procgen's own), give identical get_state bytes after every one of
    150 steps (rewards, dones, level seeds and RNGs included)."""
    env = make_procgen_env(game, 1, rand_seed=0)
    try:
        lib = library_info(env)
    finally:
        env.close()
    layout, _trusted = engine._layout_for(lib, None)
    ends = engine._run_self_check(get_game(game), lib, layout, {}, n=6, steps=150)
    assert ends >= 6


def test_failed_self_check_keeps_procgen_stepping(monkeypatch: pytest.MonkeyPatch) -> None:
    """Headless stepping that does not reproduce procgen's (here: the camera computed for a
    wrong render height) is caught by the self-check: auto uses the direct engine with one
    warning, an explicit headless raises."""
    _pretend_unknown_build(monkeypatch)
    monkeypatch.setattr(engine, "RENDER_HEIGHT", 32.0)
    with pytest.warns(EngineFallbackWarning, match="self-check"):
        stepper = ProcgenStepper("coinrun", 4, seed=1)
    with stepper:
        assert stepper.engine == "direct"
    with pytest.raises(EngineUnavailable, match="self-check"):
        ProcgenStepper("coinrun", 4, seed=1, engine="headless")


def test_corrupted_layout_of_an_unknown_build_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    _pretend_unknown_build(monkeypatch)
    real = dwarf_module.cached_layout

    def corrupted(path: str, build_id: str) -> Dict[str, Any]:
        table = real(path, build_id)
        table["classes"]["Game"]["members"]["timeout"][0] += 4
        return table

    monkeypatch.setattr(dwarf_module, "cached_layout", corrupted)
    with pytest.warns(EngineFallbackWarning, match="differs from procgen's get_state"):
        stepper = ProcgenStepper("coinrun", 4, seed=1)
    with stepper:
        assert stepper.engine == "get_state"
        stepper.restart()
        stepper.step(np.full(4, 7, dtype=np.int32))


def _pretend_unknown_build_without_dwarf(
    libenv: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The DWARF-less build is a real one: a copy of libenv.so with its debug sections stripped,
    read by the same code path."""
    strip = shutil.which("strip")
    if strip is None:
        pytest.skip("binutils' strip is not installed")
    stripped = tmp_path / "libenv-stripped.so"
    subprocess.run([strip, "--strip-debug", "-o", str(stripped), libenv], check=True)
    with pytest.raises(dwarf_module.DwarfError, match="no DWARF"):
        dwarf_module.extract_layout(str(stripped))
    _pretend_unknown_build(monkeypatch)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))  # nothing derived yet
    real = dwarf_module.cached_layout
    monkeypatch.setattr(
        dwarf_module, "cached_layout", lambda path, build_id: real(str(stripped), build_id)
    )


def test_unknown_build_without_dwarf_falls_back(
    libenv: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pretend_unknown_build_without_dwarf(libenv, tmp_path, monkeypatch)
    with pytest.warns(EngineFallbackWarning, match="no layout from its DWARF"):
        stepper = ProcgenStepper("coinrun", 4, seed=1)
    with stepper:
        assert stepper.engine == "get_state"
    for name in ("headless", "direct"):
        with pytest.raises(EngineUnavailable, match="unknown procgen build"):
            ProcgenStepper("coinrun", 4, seed=1, engine=name)


def test_backend_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    name = backends.backend_name()
    monkeypatch.setenv(backends.BACKEND_VARIABLE, name)
    assert backends.backend_name() == name
    env = backends.make_envs("maze", 2, rand_seed=0)
    try:
        assert env.backend == name
        states = env.get_state()
        env.set_state(states)
        env.act(np.zeros(2, dtype=np.int32))
        reward, obs, first = env.observe()
        assert obs["rgb"].shape == (2, 64, 64, 3) and reward.shape == (2,)
        assert env.get_state() != states
    finally:
        env.close()
    monkeypatch.setenv(backends.BACKEND_VARIABLE, "nonsense")
    with pytest.raises(ValueError, match="mirror, gym"):
        backends.backend_name()


def test_defaults_run_headless_with_next_step_on_this_backend() -> None:
    """The Gymnasium default on whichever backend is installed: headless, NEXT_STEP, no
    fallback warning (on 3.12/3.13 the build is unknown by id: DWARF layout and self-check)."""
    import gymnasium
    from gymnasium.vector import AutoresetMode

    import procgen_entities.gymnasium  # noqa: F401  (registers the ids)

    with warnings.catch_warnings():
        warnings.simplefilter("error", EngineFallbackWarning)
        env = gymnasium.make_vec(
            "procgen_entities/coinrun-v0", num_envs=64, vectorization_mode="vector_entry_point"
        )
    try:
        assert env.unwrapped.engine == "headless"  # type: ignore[attr-defined]
        assert env.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
        env.reset(seed=0)
        for _ in range(5):
            env.step(env.action_space.sample())
    finally:
        env.close()


def test_default_make_vec_on_a_fallback_engine_declares_same_step(
    libenv: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where ``auto`` cannot run headless (an unknown build without DWARF), the default
    ``make_vec`` still builds: it runs and declares SAME_STEP (procgen's stepping resets in the
    same step), warns, and gives no made-up terminal observation; RLlib's explicit NEXT_STEP is
    refused with the reason."""
    import gymnasium
    from gymnasium.vector import AutoresetMode

    import procgen_entities.gymnasium  # noqa: F401  (registers the ids)
    from procgen_entities.gymnasium import vector

    _pretend_unknown_build_without_dwarf(libenv, tmp_path, monkeypatch)
    monkeypatch.setattr(vector, "_WARNED_SAME_STEP", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gymnasium.make_vec(
            "procgen_entities/coinrun-v0", num_envs=4, vectorization_mode="vector_entry_point"
        )
    messages = [str(w.message) for w in caught if w.category is EngineFallbackWarning]
    assert any("get_state engine cannot show terminal observations" in m for m in messages)
    try:
        assert env.unwrapped.engine == "get_state"  # type: ignore[attr-defined]
        assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
        env.reset(seed=0)
        rng = np.random.default_rng(0)
        for _ in range(1000):
            _, reward, terminated, truncated, info = env.step(rng.integers(0, 15, 4))
            if (terminated | truncated).any():
                break
        ended = terminated | truncated
        assert ended.any() and "final_obs" not in info
        # SAME_STEP: the ending step already shows the next level
        assert (info["level_seed"][ended] != info["prev_level_seed"][ended]).all()
    finally:
        env.close()
    with pytest.raises(EngineUnavailable, match="NEXT_STEP needs the headless engine"):
        with pytest.warns(EngineFallbackWarning, match="falling back to the get_state engine"):
            gymnasium.make_vec(
                "procgen_entities/coinrun-v0", num_envs=4, vectorization_mode="vector_entry_point",
                autoreset_mode="NextStep",
            )  # fmt: skip
