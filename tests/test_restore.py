"""ProcgenVecEnv.set_states: saved states restore exactly, and no blob, however mutated, crashes
procgen (refused with StateDecodeError, nothing changed) or, once accepted, fails to step and
render."""

from __future__ import annotations

import os
import re
import struct
from typing import Any, Callable, Dict, List

import numpy as np
import pytest
from conftest import prefix_offsets
from entity_gym.env import ObsSpace
from ragged_buffer import RaggedBufferI64

from procgen_entities import State, StateDecodeError
from procgen_entities.entity_gym.vec_env import ProcgenVecEnv
from procgen_entities.errors import MixedBatchError

pytestmark = pytest.mark.live


def move(actions: np.ndarray) -> Dict[str, RaggedBufferI64]:
    ones = np.ones(len(actions), np.int64)
    return {"move": RaggedBufferI64.from_flattened(actions.reshape(-1, 1), ones)}


def features(obs) -> Dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    return {k: v.as_array().copy() for k, v in obs.features.items()}


@pytest.mark.parametrize("game", ["coinrun", "heist", "plunder", "bossfight", "starpilot"])
@pytest.mark.parametrize("engine", ["headless", "get_state"])
def test_round_trip_restores_observations_and_futures(game: str, engine: str) -> None:
    rng = np.random.default_rng(4)
    acts = rng.integers(0, 15, size=(40, 3))
    with ProcgenVecEnv(game, 3, seed=2, engine=engine) as env:
        space = env.obs_space()
        env.reset(space)
        for a in acts[:10]:
            now = env.act(move(a), space)
        saved = env.get_states()
        future = [features(env.act(move(a), space)) for a in acts[10:]]
        restored = env.set_states(saved)
        assert env.get_states() == saved
        for name, rows in features(now).items():
            np.testing.assert_array_equal(features(restored)[name], rows)
        again = [features(env.act(move(a), space)) for a in acts[10:]]
        for a, b in zip(future, again):
            for name in a:
                np.testing.assert_array_equal(a[name], b[name])


def test_refused_batches_change_nothing() -> None:
    with (
        ProcgenVecEnv("heist", 2, seed=3) as env,
        ProcgenVecEnv("heist", 2, seed=3, distribution_mode="easy") as easy,
    ):
        space = env.obs_space()
        env.reset(space), easy.reset(space)
        before = env.get_states()
        good, other = before[0], easy.get_states()[0]
        with pytest.raises(ValueError, match="one per env"):
            env.set_states([good])
        with pytest.raises(StateDecodeError):
            env.set_states([good, good[:-8]])  # the first blob is fine, the second is not
        with pytest.raises(MixedBatchError):
            env.set_states([good, other])  # easy heist: another grid size in the batch
        with pytest.raises(StateDecodeError, match="grid"):
            env.set_states([other, other])  # ... and than the env's
        painted = bytearray(good)
        painted[8 + 5] = 1  # paint_vel_info, the first option after the 5-byte name "heist"
        with pytest.raises(StateDecodeError, match="option paint_vel_info"):
            env.set_states([good, bytes(painted)])
        with pytest.raises(MixedBatchError):
            env.set_states([good, _coinrun_state()])
        assert env.get_states() == before


def _coinrun_state() -> bytes:
    with ProcgenVecEnv("coinrun", 1, seed=0) as env:
        env.reset(env.obs_space())
        return env.get_states()[0]


def _mutations(state: bytes, game: str, rng: np.random.Generator, count: int) -> List[bytes]:
    """Mutations aimed at the grid, the entity records and the trailer: random i32/f32 values,
    special values, bit flips and small deltas on 1-3 aligned fields."""
    offsets = prefix_offsets(state, game)
    regions = [
        (offsets["grid.count"] + 4, offsets["trailer"]),  # grid cells
        (
            offsets["entities"] + 4,
            offsets["entities"]
            + 4
            + 124 * int.from_bytes(state[offsets["entities"] : offsets["entities"] + 4], "little"),
        ),
        (offsets["trailer"], len(state) - 4),
        (offsets["main_width"], offsets["grid.count"] + 4),  # camera block and grid header
    ]
    special = [0, 1, -1, 2, 100, 1000, 2**31 - 1, -(2**31), 0x7FC00000, 0x7F800000, 0xFF800000]
    out = []
    for _ in range(count):
        blob = bytearray(state)
        lo, hi = regions[int(rng.integers(len(regions)))]
        if hi - lo < 4:
            continue
        for _ in range(int(rng.integers(1, 4))):
            at = lo + 4 * int(rng.integers((hi - lo) // 4))
            old = struct.unpack_from("<i", blob, at)[0]
            choice = int(rng.integers(4))
            if choice == 0:
                value = int(rng.integers(-(2**31), 2**31))
            elif choice == 1:
                value = special[int(rng.integers(len(special)))]
            elif choice == 2:
                value = old ^ (1 << int(rng.integers(32)))
            else:
                value = old + int(rng.integers(-3, 4))
            struct.pack_into("<I", blob, at, value & 0xFFFFFFFF)
        out.append(bytes(blob))
    return out


@pytest.mark.parametrize(
    "game", ["heist", "plunder", "bossfight", "coinrun", "chaser", "starpilot"]
)
def test_mutated_blobs_never_crash_procgen(game: str) -> None:
    """The issue's criterion is 10,000 blobs; PROCGEN_ENTITIES_MUTATIONS sets the count per game
    (default 1,700: ~10,000 over the six games)."""
    per_game = int(os.environ.get("PROCGEN_ENTITIES_MUTATIONS", "1700"))
    rng = np.random.default_rng(abs(hash_game(game)))
    accepted = refused = 0
    with ProcgenVecEnv(game, 1, seed=5) as env:
        space = env.obs_space()
        env.reset(space)
        for t in range(30):
            env.act(move(np.array([t % 15])), space)
        state = env.get_states()[0]
        for blob in _mutations(state, game, rng, per_game):
            try:
                env.set_states([blob])
            except StateDecodeError:
                refused += 1
                continue
            accepted += 1
            for t in range(5):
                env.act(move(np.array([(t * 4) % 15])), space)
            assert env.render().shape == (1, 64, 64, 3)
            env.set_states([state])  # back to the unmutated state for the next blob
    assert accepted > 0 and refused > 0, (accepted, refused)


def hash_game(game: str) -> int:
    return int.from_bytes(game.encode(), "little") % (2**31)


SPAWNER_CHILD = """
import json, os, struct, sys, warnings
if os.environ.get("PROCGEN_ENTITIES_SANITIZER_RUN"):  # as in conftest.py
    import cffi
    _dlopen = cffi.FFI.dlopen
    cffi.FFI.dlopen = lambda self, name, flags=0: _dlopen(self, name, flags & ~self.RTLD_DEEPBIND)
warnings.simplefilter("ignore")
import numpy as np
from ragged_buffer import RaggedBufferI64
from procgen_entities import StateDecodeError, parse_states
from procgen_entities.entity_gym.vec_env import ProcgenVecEnv
field, value = sys.argv[1], float(sys.argv[2])
with ProcgenVecEnv("starpilot", 1, seed=5) as env:
    space = env.obs_space()
    env.reset(space)
    one = np.ones(1, np.int64)
    for t in range(30):
        env.act({"move": RaggedBufferI64.from_flattened(np.array([[t % 15]]), one)}, space)
    state = env.get_states()[0]
    count = int(parse_states([state], game="starpilot").vector_counts["spawners"][0])
    k = parse_states([state]).entity_fields.index(field)
    at = len(state) - 4 - 124 * count + 4 * k  # the last spawner record's field
    blob = bytearray(state)
    if field in ("type", "image_type", "spawn_time"):
        struct.pack_into("<i", blob, at, int(value))
    else:
        struct.pack_into("<f", blob, at, value)
    try:
        env.set_states([bytes(blob)])
        outcome = "accepted"
    except StateDecodeError as exc:
        outcome = exc.field
    env.set_states([state])  # the unedited state is still accepted
    print(json.dumps({"count": count, "outcome": outcome}))
"""


@pytest.mark.live
@pytest.mark.parametrize(
    "field, value",
    [("type", -(2**31)), ("type", 99), ("image_type", -7), ("x", float("nan")), ("vx", 1e30)],
)
def test_spawner_records_are_range_checked(field: str, value: float) -> None:
    """starpilot's future spawns (the ``spawners`` trailer) hold entity records that procgen
    only reads when the spawn time comes, after the trial restore's steps: a bad one crashed
    every engine later. Each field is now held to its measured range (in a child process)."""
    import json
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", SPAWNER_CHILD, field, repr(value)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["count"] > 0
    assert out["outcome"] == f"vector.spawners.{field}"


SIGCHLD_CHILD = """
import json, os, signal, sys, warnings
if os.environ.get("PROCGEN_ENTITIES_SANITIZER_RUN"):  # as in conftest.py
    import cffi
    _dlopen = cffi.FFI.dlopen
    cffi.FFI.dlopen = lambda self, name, flags=0: _dlopen(self, name, flags & ~self.RTLD_DEEPBIND)
warnings.simplefilter("ignore")
from procgen_entities import StateDecodeError, restore
from procgen_entities.entity_gym.vec_env import ProcgenVecEnv
if sys.argv[1] == "ignored":
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
real_probe = restore._probe_child
def crash(*args):
    os.kill(os.getpid(), signal.SIGSEGV)
def fail(*args):
    raise RuntimeError("procgen refused")
outcomes = {}
with ProcgenVecEnv("heist", 2, seed=3) as env:
    env.reset(env.obs_space())
    states = env.get_states()
    for name, probe in (("real", real_probe), ("crash", crash), ("fail", fail)):
        restore._probe_child = probe
        try:
            env.set_states(states[::-1])
            outcomes[name] = "accepted"
        except StateDecodeError as exc:
            outcomes[name] = exc.reason
    restore._probe_child = real_probe
    outcomes["same"] = env.get_states() == states[::-1]
print(json.dumps(outcomes))
"""


@pytest.mark.live
@pytest.mark.parametrize("sigchld", ["default", "ignored"])
def test_trial_restore_works_when_sigchld_is_ignored(sigchld: str) -> None:
    """The trial restore's verdict comes through a pipe: with SIGCHLD ignored the kernel reaps
    the child and waitpid has no status (set_states raised ChildProcessError). The probe's
    child is made to crash or fail here to show both still refuse the batch."""
    import json
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", SIGCHLD_CHILD, sigchld], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # the signal's name where waitpid can tell it (SIGABRT under ASan, which catches SIGSEGV)
    crashed = r"procgen crashed on" if sigchld == "ignored" else r"procgen crashed \(SIG\w+\) on"
    assert re.fullmatch(crashed + " the restored states", out.pop("crash")), out
    failed = "procgen failed on the restored states"
    assert out == {"real": "accepted", "fail": failed, "same": True}


def test_a_real_state_of_a_rare_level_restores() -> None:
    """Climber level 455 has 9 coins, more than the recorded rollouts ever saw (1-8, in 3 of
    the first 2,000 levels): the game's declared reachable range (climber.cpp) lets its real
    state through, where the measured range alone refused it (the evaluation's start states
    once did)."""
    from procgen_entities import get_game, parse_state

    with ProcgenVecEnv(
        "climber", 1, seed=0, start_level=455, num_levels=1, distribution_mode="easy"
    ) as env:
        env.reset(env.obs_space())
        saved = env.get_states()
        assert parse_state(saved[0]).extras["coin_quota"] == 9
        assert get_game("climber").reachable["trailer.coin_quota"][1] >= 9
        env.set_states(saved)
        assert env.get_states() == saved


def test_a_slowed_probe_is_not_taken_for_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trial restore's child is stopped (SIGSTOP) for 3 s, as a busy machine slows it,
    with a hang limit of 1 s: the limit counts the child's CPU time, so the good batch is still
    accepted (on wall time it was refused as "procgen hung")."""
    import threading

    from procgen_entities import restore

    monkeypatch.setattr(restore, "PROBE_TIMEOUT_S", 1.0)
    parent, stopped = os.getpid(), []

    def stop_the_child() -> None:
        import signal
        import time

        for _ in range(2000):
            for pid in _children(parent):
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
                time.sleep(3.0)
                os.kill(pid, signal.SIGCONT)
                return
            time.sleep(0.001)

    with ProcgenVecEnv("coinrun", 2, seed=1) as env:
        env.reset(env.obs_space())
        saved = env.get_states()
        thread = threading.Thread(target=stop_the_child)
        thread.start()
        env.set_states(saved)  # the trial restore's child is the one process this one forks
        thread.join()
        assert stopped, "the probe's child was not seen"
        assert env.get_states() == saved


def test_a_spinning_child_is_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child that spins without a verdict is taken for hung once it has run the limit's CPU
    seconds."""
    import signal
    import time

    from procgen_entities import restore

    monkeypatch.setattr(restore, "PROBE_TIMEOUT_S", 0.5)
    verdict_fd, report_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        while True:
            pass
    started = time.monotonic()
    try:
        assert restore._read_verdict(verdict_fd, pid) is None
        assert time.monotonic() - started < 30
        assert (restore._cpu_seconds(pid) or 0.0) >= 0.5
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(verdict_fd)
        os.close(report_fd)


def _children(parent: int) -> List[int]:
    """The live child processes of ``parent`` (Linux /proc)."""
    from procgen_entities.restore import _proc_stat

    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = _proc_stat(int(entry))
            except OSError:
                continue
            if int(fields[1]) == parent and fields[0] != b"Z":
                found.append(int(entry))
    return found


def test_a_state_with_the_starpilot_finish_line_restores() -> None:
    """starpilot adds its finish line (type 9) at t = 500 (starpilot.cpp:423-429), later than
    any recorded rollout got: a state moved to t = 499 and stepped by procgen holds procgen's
    own finish line, and set_states accepts it (the recorded types alone refused it)."""
    from procgen_entities import parse_state

    with ProcgenVecEnv("starpilot", 2, seed=5) as env:
        space = _start_edited(env, lambda state: state.scalars.update(cur_time=499))
        env.act(move(np.full(2, 4)), space)  # noop
        stepped = env.get_states()
        types = [set(parse_state(s).field("type").tolist()) for s in stepped]
        assert any(9 in t for t in types), types
        env.set_states(stepped)
        assert env.get_states() == stepped


def test_the_state_after_a_completed_bigfish_level_restores() -> None:
    """The recorded rollouts never completed a bigfish level (30 fish): with fish_eaten set
    to 29, procgen's own play completes levels, and the state after (level_complete 1, reward
    10 + the fish) restores through the game's declared reachable ranges (bigfish.cpp)."""
    from procgen_entities import parse_states

    rng = np.random.default_rng(0)
    with ProcgenVecEnv("bigfish", 16, seed=3) as env:
        space = _start_edited(env, lambda state: state.trailer.update(fish_eaten=29))
        for _ in range(400):
            env.act(move(rng.integers(0, 9, 16)), space)
            after = env.get_states()
            done = parse_states(after).scalars["level_complete"]
            if done.any():
                break
        assert done.any(), "no env completed a level"
        assert parse_states(after).scalars["reward"][done.argmax()] >= 10
        env.set_states(after)
        assert env.get_states() == after


def _start_edited(env: ProcgenVecEnv, edit: Callable[[State], object]) -> ObsSpace:
    """Reset ``env`` and restore its states with ``edit`` applied to each; its obs space."""
    from procgen_entities import states_from_bytes, states_to_bytes

    space = env.obs_space()
    env.reset(space)
    states = states_from_bytes(env.get_states())
    for state in states:
        edit(state)
    env.set_states(states_to_bytes(states))
    return space


UNSEEDED_CHILD = """
import json, os, sys, tempfile, warnings
if os.environ.get("PROCGEN_ENTITIES_SANITIZER_RUN"):  # as in conftest.py
    import cffi
    _dlopen = cffi.FFI.dlopen
    cffi.FFI.dlopen = lambda self, name, flags=0: _dlopen(self, name, flags & ~self.RTLD_DEEPBIND)
warnings.simplefilter("ignore")
import numpy as np
from procgen_entities import State, StateDecodeError
from procgen_entities.gymnasium import EntityVectorEnv
from procgen_entities.level_files import LevelError, load_levels
which = int(sys.argv[1])
outcomes = {}
with EntityVectorEnv("coinrun", 1, seed=0) as env:
    env.reset(seed=0)
    state = State.from_bytes(env.get_states()[0])
    rngs = list(state.rngs)
    rngs[which] = (False, rngs[which][1])
    state.rngs = tuple(rngs)
    blob = state.to_bytes(validate=False)
    path = os.path.join(tempfile.mkdtemp(), "unseeded.state")
    with open(path, "wb") as f:
        f.write(blob)
    calls = {
        "to_bytes": lambda: state.to_bytes(validate=True),
        "set_states": lambda: env.set_states([blob]),
        "reset": lambda: env.reset(options={"states": [blob]}),
        "load_levels": lambda: load_levels([path]),
    }
    for name, call in calls.items():
        try:
            call()
            outcomes[name] = "accepted"
        except StateDecodeError as exc:
            outcomes[name] = exc.field
        except LevelError as exc:
            outcomes[name] = str(exc)
    if "accepted" in outcomes.values():  # procgen draws from the RNG at the episode's end
        env.set_states([blob])
        for _ in range(1100):
            env.step(np.array([4]))
print(json.dumps(outcomes))
"""


@pytest.mark.live
@pytest.mark.parametrize("which", [0, 1])
def test_an_unseeded_rng_is_refused_before_procgen_draws_from_it(which: int) -> None:
    """procgen draws the next level's seed from level_seed_rand_gen at the episode's end,
    after the 16-step trial restore, and step_rand_int from rand_gen at every step: unseeded,
    either was accepted everywhere and procgen exited (``fassert failed 'is_seeded'``). Each
    way in now refuses it, naming the flag (in a child process)."""
    import json
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", UNSEEDED_CHILD, str(which)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    field = ("level_seed_rand_gen", "rand_gen")[which] + ".is_seeded"
    assert out.pop("load_levels").endswith(f"(field {field!r})"), out
    assert out == {"to_bytes": field, "set_states": field, "reset": field}


def _rng_text_edits() -> Dict[str, Callable[[bytes, np.random.Generator], bytes]]:
    """Texts that are not procgen's std::mt19937 serialisation, from a real one."""

    def words(edit: Callable[[List[bytes]], object]) -> Callable[[bytes, Any], bytes]:
        def apply(text: bytes, rng: Any) -> bytes:
            split = text.split(b" ")
            edit(split)
            return b" ".join(split)

        return apply

    return {
        "random digits": lambda text, rng: "".join(map(str, rng.integers(0, 10, 60))).encode(),
        "empty": lambda text, rng: b"",
        "a word of 2**32": words(lambda w: w.__setitem__(5, str(2**32).encode())),
        "a word of 11 digits": words(lambda w: w.__setitem__(0, b"12345678901")),
        "a word with letters": words(lambda w: w.__setitem__(7, b"12ab")),
        "a negative word": words(lambda w: w.__setitem__(9, b"-5")),
        "a leading zero": words(lambda w: w.__setitem__(3, b"0" + w[3])),
        "the position 625": words(lambda w: w.__setitem__(-1, b"625")),
        "a word missing": words(lambda w: w.pop(100)),
        "a word too many": words(lambda w: w.insert(100, b"7")),
        "a trailing space": lambda text, rng: text + b" ",
        "a newline for a space": lambda text, rng: text.replace(b" ", b"\n", 1),
        "too long": lambda text, rng: b"1 " * 4000 + b"0",
        "the all-zero state": words(lambda w: w.__setitem__(slice(0, 624), [b"0"] * 624)),
    }


RNG_TEXT_EDITS = _rng_text_edits()


@pytest.fixture(scope="module")
def coinrun_state() -> bytes:
    return _coinrun_state()


@pytest.mark.parametrize("edit", list(RNG_TEXT_EDITS))
@pytest.mark.parametrize("which", [0, 1, 2])
def test_rng_texts_other_than_procgens_are_refused(
    coinrun_state: bytes, which: int, edit: str
) -> None:
    """procgen reads an RNG's text with std::mt19937's operator>>, which stops at the first
    word it cannot read and keeps the rest of the generator the env had: garbage text was
    accepted and the levels after the episode depended on the env the state went into. Only
    operator<<'s own form (624 words below 2**32 and the position 0..624) is accepted now."""
    name = ("level_seed_rand_gen", "rand_gen", "asset_rand_gen")[which]
    state = State.from_bytes(coinrun_state)
    rngs = list(state.rngs)
    rngs[which] = (rngs[which][0], RNG_TEXT_EDITS[edit](rngs[which][1], np.random.default_rng(0)))
    state.rngs = tuple(rngs)
    with pytest.raises(StateDecodeError, match=f"{name}: ") as info:
        state.to_bytes(validate=True)
    from procgen_entities.restore import _rngs_of

    assert info.value.field == name
    assert info.value.offset == _rngs_of(coinrun_state)[which][1] + 8  # the text's first byte


def test_garbage_rng_text_is_refused_by_set_states_and_changes_nothing() -> None:
    with ProcgenVecEnv("coinrun", 2, seed=1) as env:
        env.reset(env.obs_space())
        before = env.get_states()
        state = State.from_bytes(before[1])
        digits = "".join(map(str, np.random.default_rng(1).integers(0, 10, 40))).encode()
        state.rngs = ((True, digits), state.rngs[1], state.rngs[2])
        with pytest.raises(StateDecodeError, match="level_seed_rand_gen: its text holds 1 "):
            env.set_states([before[0], state.to_bytes(validate=False)])
        assert env.get_states() == before


def test_the_rngs_of_real_states_are_accepted() -> None:
    """Every golden state (16 games, both modes): the two RNGs procgen draws from seeded, the
    asset RNG not, and all three texts procgen's own."""
    from golden import DATA_DIR, load_states

    from procgen_entities.restore import RNG_NAMES, _rngs_of, mt19937_text_problem

    seen = 0
    for path in sorted(DATA_DIR.glob("*.states.npz")):
        for blob in load_states(path)[1]:
            rngs = _rngs_of(blob)
            assert [name for name, *_ in rngs] == list(RNG_NAMES)
            assert [seeded for _, _, seeded, _ in rngs] == [1, 1, 0], path.name
            for name, at, _, text in rngs:
                assert blob[at + 4 : at + 8] == len(text).to_bytes(4, "little")
                assert mt19937_text_problem(text) is None, (path.name, name)
            seen += 1
    assert seen > 300


def _leaving_envs(game: str, engine: str, mode: str) -> Any:
    """8 envs of ``game`` whose players are moved where procgen lets them leave the world:
    jumper's into the top row (a wall they are pushed up out of, above the grid), bigfish's
    left of it."""
    from procgen_entities import states_from_bytes
    from procgen_entities.gymnasium import EntityVectorEnv

    env = EntityVectorEnv(
        game, 8, seed=0, engine=engine, distribution_mode="easy", autoreset_mode=mode
    )
    env.reset(seed=0)
    states = states_from_bytes(env.get_states())
    for state in states:
        if game == "jumper":
            state.entities[0]["y"] = state.grid.shape[0] - 0.5
        else:
            state.entities[0]["x"] = -3.0
    env.reset(options={"states": states})
    return env


def _players_gone(batch: Any, rows: Any) -> int:
    """How many of states ``rows`` of a StateBatch show their player (entity 0, which the parse
    checks) out of the world, as procgen's is_out_of_bounds has it."""
    gone = 0
    for i in rows:
        first = batch.entity_offsets[i]
        x, y, rx, ry = (batch.field(name)[first] for name in ("x", "y", "rx", "ry"))
        h, w = batch.grid.shape[1:]
        gone += bool(x + rx < 0 or y + ry < 0 or x - rx > w or y - ry > h)
    return gone


@pytest.mark.parametrize("game", ["jumper", "bigfish"])
def test_a_player_that_leaves_the_world_plays_as_procgen_plays_it(game: str) -> None:
    """procgen erases an entity out of the world (auto_erase), the player too, and the step
    ends the episode. Its terminal state has no player; the headless engine read it and raised
    "entity 0 is not the player" (and get_states failed until the next step), where procgen
    played on. The headless engine now puts the player back first, where it left, in what it
    reads of such a state: the same rewards, episode ends and states as procgen's stepping."""
    from procgen_entities import parse_states

    rng = np.random.default_rng(0)
    headless = _leaving_envs(game, "headless", "SameStep")
    deferred = _leaving_envs(game, "headless", "NextStep")
    direct = _leaving_envs(game, "direct", "SameStep")
    gone = {"final_states": 0, "get_states": 0}
    try:
        for _ in range(60):
            actions = rng.integers(0, 15, 8)
            out, ref = headless.step(actions), direct.step(actions)
            for k in (1, 2, 3):  # reward, terminated, truncated
                np.testing.assert_array_equal(out[k], ref[k])
            assert headless.get_states() == direct.get_states()
            ended, final = headless.stepper.final_states()
            gone["final_states"] += _players_gone(final, range(len(ended)))
            terminated = deferred.step(actions)[2]
            shown = parse_states(deferred.get_states())  # the terminal states, reset pending
            gone["get_states"] += _players_gone(shown, np.flatnonzero(terminated))
    finally:
        for env in (headless, deferred, direct):
            env.close()
    assert min(gone.values()) >= 3, gone


@pytest.mark.parametrize(
    "game, field, value", [("starpilot", "will_erase", 1), ("jumper", "expire_time", 5)]
)
def test_a_player_procgen_would_erase_mid_episode_is_refused(
    game: str, field: str, value: int
) -> None:
    """A player with will_erase, or an expire_time its life_time passes, is erased by
    procgen's step while the episode goes on without one: every engine's states failed from
    then on (the ranges of all entities let both through: starpilot's bullets are erased,
    jumper's trails expire). Such a player is refused, naming the field."""
    with ProcgenVecEnv(game, 1, seed=0) as env:
        env.reset(env.obs_space())
        state = State.from_bytes(env.get_states()[0])
        state.entities[0][field] = value
        with pytest.raises(StateDecodeError, match=f"the player's {field} is {value}") as info:
            env.set_states([state.to_bytes(validate=False)])
        assert info.value.field == f"entities[0].{field}"
