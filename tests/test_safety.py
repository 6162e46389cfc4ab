"""Bad input from the Python side: options procgen would end the process on, seeds of any size,
failed resets, episode statistics after set_states, bad actions, state indices and resource
bounds. Anything that could crash runs in a child process with a time limit."""

from __future__ import annotations

import gzip
import subprocess
import sys
import textwrap
from contextlib import closing
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest
from ragged_buffer import RaggedBufferI64

from procgen_entities import ProcgenVecEnv
from procgen_entities.errors import UsageError
from procgen_entities.gymnasium import EntityVectorEnv
from procgen_entities.parse import parse_states
from procgen_entities.procgen_envs import (
    EXPLORATION_LEVELS,
    MODE_GAMES,
    fold_seed,
    group_seeds,
    procgen_options,
)

pytestmark = pytest.mark.live


def run_child(code: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter (a procgen exit or a crash cannot take pytest down)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# ---- options procgen would end the process on ----

#: (keywords of ProcgenVecEnv("coinrun", 2, ...), what the UsageError must name). Each one of
#: the first four ends the process with exit 1 when procgen sees it (a fassert, or "failed to
#: load image" for the asset folder).
BAD_OPTIONS = [
    ("start_level=-5", "start_level"),
    ("num_levels=-1", "num_levels"),
    ("procgen_threads=-1", "procgen_threads"),
    ("resource_root='/nonexistent'", "resource_root"),
    ("resource_root=EMPTY", "resource_root"),
    ("start_level=1.5", "start_level"),
    ("start_level=2**31", "start_level"),
    ("start_level=2**31 - 1, num_levels=1", "start_level + num_levels"),
    ("num_levels=True", "num_levels"),
    ("seed=1.5", "seed"),
    ("num_groups=1.5", "num_groups"),
    ("distribution_mode='exploration', num_levels=5", "exploration"),
    ("distribution_mode='extreme'", "valid modes for coinrun: easy, hard, exploration"),
    ("group_seeding='random'", "group_seeding"),
]


def test_options_procgen_would_die_on_are_refused_first(tmp_path: Path) -> None:
    cases = "\n".join(f"    ({options!r}, {name!r})," for options, name in BAD_OPTIONS)
    code = f"""
    from procgen_entities import ProcgenVecEnv
    from procgen_entities.errors import UsageError
    from procgen_entities.gymnasium import EntityVectorEnv
    EMPTY = {str(tmp_path)!r}
    for options, name in [
    {cases}
    ]:
        for cls in (ProcgenVecEnv, EntityVectorEnv):
            try:
                eval(f"cls('coinrun', 2, {{options}})")
            except UsageError as exc:
                assert name in str(exc), (options, str(exc))
                print("refused", cls.__name__, options, "|", exc, flush=True)
            else:
                raise SystemExit(f"accepted: {{options}}")
    """
    run = run_child(code)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert run.stdout.count("refused") == 2 * len(BAD_OPTIONS)


@pytest.mark.parametrize("num_envs", [1.5, 0, -2, "4", True])
def test_num_envs_must_be_a_positive_int(num_envs: Any) -> None:
    for cls in (ProcgenVecEnv, EntityVectorEnv):
        with pytest.raises(UsageError, match="num_envs"):
            cls("coinrun", num_envs)


def test_numpy_ints_are_ints() -> None:
    with closing(
        EntityVectorEnv("coinrun", np.int64(2), seed=np.uint32(3), start_level=np.int32(0))
    ) as env:
        assert env.num_envs == 2 and env.observation_space.shape is None


def test_a_resource_root_without_its_separator_is_procgens_own_assets() -> None:
    """procgen concatenates the root and the asset names: without the trailing separator it
    exits ("failed to load image .../assetskenney/..."); the option gets it added."""
    import procgen

    root = str(Path(procgen.__file__).parent / "data" / "assets")
    assert procgen_options("coinrun", {"resource_root": root})["resource_root"] == root + "/"
    code = f"""
    import numpy as np
    from procgen_entities.gymnasium import EntityVectorEnv
    env = EntityVectorEnv("coinrun", 2, seed=0, resource_root={root!r})
    env.reset()
    env.step(np.zeros(2, dtype=np.int64))
    print("stepped")
    """
    run = run_child(code)
    assert run.returncode == 0 and "stepped" in run.stdout, run.stderr[-2000:]


def test_exploration_mode_is_procgens_one_fixed_hard_level() -> None:
    """procgen's gym3 env refuses "exploration" whenever num_levels or start_level is passed,
    as every env here does: the mode is translated into what procgen means by it."""
    assert set(MODE_GAMES["exploration"]) == set(EXPLORATION_LEVELS)
    options = procgen_options("ninja", {"distribution_mode": "exploration"})
    assert options["distribution_mode"] == "hard" and options["num_levels"] == 1
    with closing(EntityVectorEnv("coinrun", 3, seed=4, distribution_mode="exploration")) as env:
        _, info = env.reset()
        assert (info["level_seed"] == EXPLORATION_LEVELS["coinrun"]).all()
        rng = np.random.default_rng(0)
        for _ in range(200):
            _, _, _, _, info = env.step(rng.integers(0, 15, 3))
        assert (info["level_seed"] == EXPLORATION_LEVELS["coinrun"]).all()
    with pytest.raises(UsageError, match="valid modes for bigfish: easy, hard$"):
        EntityVectorEnv("bigfish", 2, distribution_mode="exploration")


# ---- seeds ----


def test_seeds_fold_into_procgens_range_deterministically() -> None:
    for seed in (0, 1, 12345, 2**31 - 1):
        assert fold_seed(seed) == seed
        assert fold_seed(np.int64(seed)) == seed
    folded = {s: fold_seed(s) for s in (2**31, 2**32 - 1, -1, -(2**31), 10**30, -(10**30))}
    assert all(0 <= f < 2**31 for f in folded.values())
    assert len(set(folded.values())) == len(folded)
    assert fold_seed(np.uint32(2**32 - 1)) == folded[2**32 - 1]
    assert fold_seed(-1) != fold_seed(1)
    # pinned: the same on every machine, in every process
    assert folded[2**31] == 728019589 and folded[-1] == 594516694
    for bad in (1.0, "3", None, True):
        with pytest.raises(UsageError, match="seed"):
            fold_seed(bad)


def level_seeds(seed: Any, n: int = 8, **kw: Any) -> List[int]:
    with closing(EntityVectorEnv("bigfish", n, seed=seed, num_threads=1, **kw)) as env:
        _, info = env.reset()
        return [int(s) for s in info["level_seed"]]


def test_the_groups_of_different_seeds_play_different_levels() -> None:
    """With 8 envs (2 procgen groups), seed 0's second group used to be seeded 1: exactly seed
    1's first group's levels. Derived group seeds share nothing."""
    zero, one = level_seeds(0), level_seeds(1)
    assert not set(zero) & set(one)
    assert group_seeds(0, 2)[0] == 0 and group_seeds(0, 2)[1] not in (0, 1)
    # the first group is seeded as before: its levels are those of a one-group env
    assert zero[:4] == level_seeds(0, 4, num_groups=1)
    old = level_seeds(0, group_seeding="consecutive")
    assert old[:4] == zero[:4] and old[4:] == one[:4]  # the overlap consecutive seeds had


def test_any_seed_resets_including_sb3s_uint32_draws() -> None:
    with closing(EntityVectorEnv("bigfish", 2, seed=2**31, num_threads=1)) as env:
        _, first = env.reset()
        _, again = env.reset(seed=np.uint32(2**31))
        np.testing.assert_array_equal(first["level_seed"], again["level_seed"])
        _, folded = env.reset(seed=fold_seed(2**31))
        np.testing.assert_array_equal(first["level_seed"], folded["level_seed"])
        for seed in (-1, 2**32 - 1, np.uint32(4_000_000_000), 10**20):
            env.reset(seed=seed)
            env.step(np.zeros(2, dtype=np.int64))


# ---- failed resets ----


def test_a_refused_seed_leaves_the_env_as_it_was() -> None:
    with closing(EntityVectorEnv("bigfish", 2, seed=3, num_threads=1)) as env:
        _, before = env.reset()
        for _ in range(5):
            env.step(np.zeros(2, dtype=np.int64))
        with pytest.raises(UsageError, match="seed"):
            env.reset(seed=1.5)
        _, _, _, _, info = env.step(np.zeros(2, dtype=np.int64))
        np.testing.assert_array_equal(info["level_seed"], before["level_seed"])


def test_a_reset_that_fails_after_closing_procgen_closes_the_env() -> None:
    """A reset that fails once procgen's old envs are gone (here: the resource_root the env was
    made with is no longer an asset folder when the reset makes new envs) closes the env: its
    later calls raise instead of returning a frozen frame forever."""
    import procgen

    assets = str(Path(procgen.__file__).parent / "data" / "assets")
    code = f"""
    import os, tempfile
    import numpy as np
    from procgen_entities.errors import UsageError
    from procgen_entities.gymnasium import EntityVectorEnv
    from procgen_entities.procgen_envs import ASSET_FOLDERS
    for engine in ("headless", "direct", "get_state"):
        root = tempfile.mkdtemp()
        links = [os.path.join(root, name) for name in ASSET_FOLDERS]
        for link in links:
            os.symlink(os.path.join({assets!r}, os.path.basename(link)), link)
        env = EntityVectorEnv("coinrun", 2, seed=1, engine=engine, autoreset_mode="SameStep",
                              resource_root=root)
        env.reset()
        for link in links:
            os.unlink(link)
        try:
            env.reset(seed=2)
        except UsageError as exc:
            assert "resource_root" in str(exc)
        else:
            raise SystemExit("reset did not fail")
        for call in (lambda: env.step(np.zeros(2, dtype=np.int64)), env.reset, env.render):
            try:
                call()
            except RuntimeError as exc:
                assert "closed" in str(exc)
            else:
                raise SystemExit(f"{{engine}}: a call on a failed env went through")
        env.close()
        print("closed", engine, flush=True)
    """
    run = run_child(code)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert run.stdout.split() == ["closed", "headless", "closed", "direct", "closed", "get_state"]


# ---- episode statistics ----


def test_episode_statistics_restart_with_set_states() -> None:
    """A state saved at step 50 of a noop episode, restored after 150 more steps: the restored
    episode times out 950 steps later (procgen's limit is 1,000) and reports l=950, not 1,100."""
    with closing(EntityVectorEnv("coinrun", 1, seed=6, num_threads=1)) as env:
        env.reset()
        noop = np.array([4])
        for _ in range(50):
            env.step(noop)
        saved = env.get_states()
        assert parse_states(saved).cur_time[0] == 50
        for _ in range(150):
            env.step(noop)
        env.set_states(saved)
        for step in range(1, 1000):  # noqa: B007 (the step it ended on)
            _, reward, terminated, truncated, info = env.step(noop)
            if terminated[0] or truncated[0]:
                break
        assert truncated[0] and step == 950
        assert info["episode_stats"]["l"][0] == 950 and info["episode_stats"]["r"][0] == 0.0


# ---- actions ----

BAD_ACTIONS = [
    ("floats", lambda n: np.full(n, 1.0), "integers"),
    ("bools", lambda n: np.ones(n, dtype=bool), "integers"),
    ("one too many", lambda n: np.zeros(n + 1, dtype=np.int64), "shape"),
    ("2-d", lambda n: np.zeros((2, n), dtype=np.int64), "shape"),
    ("force-reset -1", lambda n: np.full(n, -1), "got -1"),
    ("uint32 wrapping to -1", lambda n: np.full(n, 2**32 - 1, dtype=np.uint32), "got 4294967295"),
    ("15", lambda n: np.full(n, 15, dtype=np.int8), "got 15"),
    # int32 [n] takes check_actions' fast path: the same checks
    ("int32 -1", lambda n: np.array([0, -1, 3][:n], dtype=np.int32), "got -1"),
    ("int32 15", lambda n: np.array([15, 0, 3][:n], dtype=np.int32), "got 15"),
]


@pytest.mark.parametrize("name,make,match", BAD_ACTIONS, ids=[b[0] for b in BAD_ACTIONS])
def test_bad_actions_raise_and_change_nothing(name: str, make: Any, match: str) -> None:
    n = 3
    with closing(EntityVectorEnv("coinrun", n, seed=2, num_threads=1)) as env:
        env.reset()
        env.step(np.zeros(n, dtype=np.int64))
        time_before = env.stepper.step_values().scalars["cur_time"].copy()
        with pytest.raises(UsageError, match=match):
            env.step(make(n))
        np.testing.assert_array_equal(env.stepper.step_values().scalars["cur_time"], time_before)
        env.step(np.arange(n, dtype=np.uint8))  # any integer dtype in range
        env.step(np.arange(n).reshape(n, 1))  # a policy's (n, 1) column
    with ProcgenVecEnv("coinrun", n, seed=2, num_threads=1) as vec:
        space = vec.obs_space()
        vec.reset(space)
        actions = make(n)
        if actions.dtype.kind in "iu" and actions.ndim == 1 and len(actions) == n:
            # entity-gym's actions are int64: the uint32 is 2**32 - 1 there, not -1
            with pytest.raises(UsageError, match=match):
                vec.act(move(actions), space)
        with pytest.raises(UsageError, match=match):
            vec.step(actions)  # the stepper's own step checks too
        vec.act(move(np.zeros(n, dtype=np.int64)), space)


def test_strided_and_byte_swapped_actions_step_like_plain_ones() -> None:
    """A column of a bigger int32 array (not contiguous) and big-endian int32 actions are
    copied into the int32 block the native step reads: the same steps as plain arrays."""
    n, rng = 4, np.random.default_rng(3)
    plan = rng.integers(0, 15, (40, n))
    envs = [EntityVectorEnv("bigfish", n, seed=7, num_threads=1) for _ in range(3)]
    try:
        for env in envs:
            env.reset()
        for actions in plan:
            wide = np.zeros((n, 3), np.int32)
            wide[:, 1] = actions
            shapes = (actions.astype(np.int32), wide[:, 1], actions.astype(">i4"))
            steps = [env.step(a) for env, a in zip(envs, shapes)]
            for obs, reward, *_ in steps[1:]:
                np.testing.assert_array_equal(reward, steps[0][1])
                for key, value in obs.items():
                    np.testing.assert_array_equal(value, steps[0][0][key])
    finally:
        for env in envs:
            env.close()


def move(actions: np.ndarray) -> Dict[str, RaggedBufferI64]:
    ones = np.ones(len(actions), np.int64)
    return {"move": RaggedBufferI64.from_flattened(actions.reshape(-1, 1).astype(np.int64), ones)}


# ---- state indices ----


def test_state_indices_count_from_the_end_like_a_list() -> None:
    with ProcgenVecEnv("starpilot", 3, seed=5, num_threads=1) as env:
        env.reset(env.obs_space())
        for _ in range(30):
            env.step(np.full(3, 7))
        batch = parse_states(env.get_states())
    assert len(batch) == 3
    for i in (-1, -2, -3):
        np.testing.assert_array_equal(batch.state_entities(i), batch.state_entities(3 + i))
        np.testing.assert_array_equal(batch.vector("spawners", i), batch.vector("spawners", 3 + i))
    assert len(batch.state_entities(-1)) == batch.entity_counts[2] > 0
    for bad in (3, -4):
        with pytest.raises(IndexError):
            batch.state_entities(bad)
        with pytest.raises(IndexError):
            batch.vector("spawners", bad)


# ---- resource bounds ----


@pytest.mark.parametrize("caps", [10**7, 0, 1.5, {"Saw": 10**7}, {"Saw": 0}, {"Saw": "4"}], ids=str)
def test_entity_caps_are_bounded(caps: Any) -> None:
    with pytest.raises(UsageError, match="max_entities"):
        EntityVectorEnv("coinrun", 1, max_entities=caps)


def test_the_largest_cap_still_builds() -> None:
    from procgen_entities.gymnasium.observation import MAX_ENTITY_CAP

    with closing(
        EntityVectorEnv("coinrun", 1, max_entities={"Saw": MAX_ENTITY_CAP}, seed=0)
    ) as env:
        obs, _ = env.reset()
        assert obs["Saw"].shape[1] == MAX_ENTITY_CAP


def test_state_files_are_read_up_to_procgens_largest_state(tmp_path: Path) -> None:
    """A 2 KiB gzip file that would expand to 64 MiB is refused after reading 1 MiB of it."""
    from procgen_entities.tools.dump import MAX_STATE_BYTES, load_state
    from procgen_entities.tools.dump import UsageError as DumpError

    bomb = tmp_path / "bomb.gz"
    with gzip.open(bomb, "wb") as f:
        for _ in range(64):
            f.write(bytes(2**20))
    assert bomb.stat().st_size < 100_000
    with pytest.raises(DumpError, match="more than 1048576 bytes"):
        load_state(str(bomb))
    raw = tmp_path / "big.bin"
    raw.write_bytes(bytes(MAX_STATE_BYTES + 1))
    with pytest.raises(DumpError, match="more than"):
        load_state(str(raw))
    with ProcgenVecEnv("coinrun", 1, seed=0, num_threads=1) as env:
        state = env.get_states()[0]
    good = tmp_path / "state.gz"
    good.write_bytes(gzip.compress(state))
    assert load_state(str(good)) == state
    broken = tmp_path / "broken.gz"
    broken.write_bytes(gzip.compress(state)[:-20])
    with pytest.raises(DumpError, match="corrupt gzip"):
        load_state(str(broken))


def test_sb3_make_vec_env_with_the_largest_seed_sb3_draws() -> None:
    """SB3 seeds env i with seed + i for a uint32 seed it draws when none is given: seeds past
    2**31 (half of its draws) used to reach gym3's option check as a bare AssertionError."""
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_util import make_vec_env

    import procgen_entities.gymnasium  # noqa: F401 (registers the ids)

    env = make_vec_env("procgen_entities/coinrun-v0", n_envs=2, seed=2**32 - 1)
    try:
        env.reset()
        env.step(np.array([7, 7]))
    finally:
        env.close()


@pytest.mark.parametrize("engine", ["headless", "direct", "get_state"])
def test_envs_left_open_at_exit_close_quietly(engine: str) -> None:
    """An env nobody closed is closed by the garbage collector while the interpreter shuts down,
    when imports no longer work: it exits 0 and prints nothing (closing looked up its
    malloc_trim when it was made, not at exit)."""
    mode = "NextStep" if engine == "headless" else "SameStep"  # the others announce SAME_STEP
    proc = run_child(f"""
        import numpy as np
        from procgen_entities import ProcgenVecEnv
        from procgen_entities.gymnasium import EntityVectorEnv
        env = EntityVectorEnv("bigfish", num_envs=4, seed=3, engine={engine!r},
                              autoreset_mode={mode!r})
        env.reset(seed=3)
        env.step(np.zeros(4, dtype=np.int64))
        vec = ProcgenVecEnv("coinrun", 2, seed=1, engine={engine!r})
        vec.reset(vec.obs_space())
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr == ""


# ---- misuse is named, not misread (issue 38 row 10) ----

#: Every env class, made small: (name, constructor).
ENV_CLASSES = {
    "ProcgenVecEnv": lambda: ProcgenVecEnv("coinrun", 2, seed=0, num_threads=1),
    "ProcgenEnv": lambda: _entity_gym_env(),
    "EntityVectorEnv": lambda: EntityVectorEnv("coinrun", 2, seed=0, num_threads=1),
    "EntityEnv": lambda: _gymnasium_env(),
}


def _entity_gym_env() -> Any:
    from procgen_entities import ProcgenEnv

    return ProcgenEnv("coinrun", seed=0)


def _gymnasium_env() -> Any:
    from procgen_entities.gymnasium import EntityEnv

    return EntityEnv("coinrun", seed=0)


def _start(name: str, env: Any) -> None:
    if name == "ProcgenVecEnv":
        env.reset(env.obs_space())
    else:
        env.reset()


@pytest.mark.parametrize("name", list(ENV_CLASSES))
def test_pickling_an_env_says_it_cannot_and_what_to_do(name: str) -> None:
    """pickle (and copy) said "cannot pickle '_thread.RLock' object"; each class now says that
    it cannot be pickled and to move its states or a function that makes it instead."""
    import copy
    import pickle

    with closing(ENV_CLASSES[name]()) as env:
        _start(name, env)
        for attempt in (pickle.dumps, copy.deepcopy):
            with pytest.raises(TypeError, match=rf"^{name} cannot be pickled or copied: .*"
                                                r"get_states\(\)"):  # fmt: skip
                attempt(env)


def test_a_wrapped_env_names_itself_when_pickled() -> None:
    import pickle

    import gymnasium

    import procgen_entities.gymnasium  # noqa: F401 (registers the ids)

    env = gymnasium.make("procgen_entities/coinrun-v0", num_threads=1)
    try:
        with pytest.raises(TypeError, match="^EntityEnv cannot be pickled"):
            pickle.dumps(env)
    finally:
        env.close()


@pytest.mark.parametrize("name", list(ENV_CLASSES))
def test_a_closed_env_names_its_own_class(name: str) -> None:
    """Every class said "ProcgenVecEnv is closed"."""
    env = ENV_CLASSES[name]()
    env.close()
    with pytest.raises(RuntimeError, match=f"^{name} is closed$"):
        _start(name, env)


def test_set_states_and_from_bytes_refuse_what_is_not_bytes() -> None:
    """bytes(1) is one zero byte: [1, 2] and 5 were read as truncated states."""
    from procgen_entities import State, states_from_bytes

    with ProcgenVecEnv("coinrun", 2, seed=0, num_threads=1) as vec:
        with pytest.raises(TypeError, match=r"states\[0\] is int, not get_state bytes"):
            vec.set_states([1, 2])
        with pytest.raises(TypeError, match="a sequence of get_state blobs, one per env"):
            vec.set_states(vec.get_states()[0])
    with closing(EntityVectorEnv("coinrun", 2, seed=0, num_threads=1)) as env:
        env.reset()
        with pytest.raises(TypeError, match=r"states\[1\] is NoneType"):
            env.set_states([env.stepper.get_states()[0], None])
        state = env.stepper.get_states()[0]
    with pytest.raises(TypeError, match="State.from_bytes takes get_state bytes, not int"):
        State.from_bytes(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"blobs\[1\] is int"):
        states_from_bytes([state, 7])  # type: ignore[list-item]
    assert State.from_bytes(bytearray(state)).game == "coinrun"


def test_reset_options_must_be_a_dict_of_known_keys() -> None:
    with closing(EntityVectorEnv("coinrun", 2, seed=0, num_threads=1)) as env:
        with pytest.raises(TypeError, match="options is a dict .* or None, not int"):
            env.reset(options=5)  # type: ignore[arg-type]
        with pytest.raises(UsageError, match=r"unknown options 'state' \(valid: reset_mask, "):
            env.reset(options={"state": [b"", b""]})  # a misspelt "states" reset anew before
        env.reset(options={})


def test_a_ragged_action_buffer_needs_one_action_per_env() -> None:
    """Per-env counts [2, 0] gave env 0's second action to env 1."""
    with ProcgenVecEnv("coinrun", 2, seed=0, num_threads=1) as vec:
        space = vec.obs_space()
        vec.reset(space)
        before = vec.step_values().scalars["cur_time"].copy()
        ragged = RaggedBufferI64.from_flattened(np.array([[1], [2]], np.int64),
                                                np.array([2, 0], np.int64))  # fmt: skip
        with pytest.raises(UsageError, match=r"per-env counts \[2, 0\]"):
            vec.act({"move": ragged}, space)
        np.testing.assert_array_equal(vec.step_values().scalars["cur_time"], before)
        vec.act(move(np.array([1, 2])), space)


def test_entity_fields_is_a_sequence_not_one_string() -> None:
    from procgen_entities.reference import reference_parse_states

    with ProcgenVecEnv("coinrun", 1, seed=0, num_threads=1) as vec:
        states = vec.get_states()
    for parse in (parse_states, reference_parse_states):
        with pytest.raises(TypeError, match="not one string \\('xy': write \\['xy'\\]\\)"):
            parse(states, entity_fields="xy")
    batch = parse_states(states, entity_fields=["x", "y"])
    np.testing.assert_array_equal(batch.field("y"), batch.entities[:, 1])
    with pytest.raises(UsageError, match=r"no entity field 'nope' in this batch \(its fields: "
                                         r"x, y\)"):  # fmt: skip
        batch.field("nope")


def test_render_modes_other_than_arrays_are_refused_at_construction() -> None:
    """render_mode="human" was accepted, and render() returned None."""
    from procgen_entities.gymnasium import EntityEnv

    for make in (EntityVectorEnv, EntityEnv):
        with pytest.raises(UsageError, match="render_mode must be 'rgb_array' .* got 'human'"):
            make("coinrun", render_mode="human")
    with closing(EntityVectorEnv("coinrun", 1, seed=0, render_mode=None)) as env:
        env.reset()
        assert env.render() is None
