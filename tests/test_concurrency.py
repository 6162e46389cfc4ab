"""Threads, fork and oversubscription: the thread pool and an env shared or forked.

Each case that could crash or hang runs in a child process (``sys.executable -c``) with a
timeout, and the child prints what it observed; the test asserts on that.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any, Dict

import numpy as np
import pytest

from procgen_entities.stepper import ProcgenStepper, usable_cpus

# The sanitizer run loads procgen without RTLD_DEEPBIND (see conftest.py); children do the same.
PRELUDE = """
import json, os, sys, threading, time
if os.environ.get("PROCGEN_ENTITIES_SANITIZER_RUN"):
    import cffi
    _dlopen = cffi.FFI.dlopen
    cffi.FFI.dlopen = lambda self, name, flags=0: _dlopen(self, name, flags & ~self.RTLD_DEEPBIND)
import warnings
warnings.simplefilter("ignore")
import numpy as np
"""


def run_child(code: str, timeout: float = 240) -> Dict[str, Any]:
    """Run ``code`` in a fresh interpreter; it must exit 0 and print one JSON line last."""
    script = PRELUDE + textwrap.dedent(code)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"child exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---- the pool: oversubscribed, and the default from the affinity ----


@pytest.mark.live
@pytest.mark.parametrize("threads", [2, 16, 512])  # 512: within small pid limits
def test_oversubscribed_pool_steps_the_same_states(threads: int) -> None:
    rng = np.random.default_rng(3)
    acts = rng.integers(0, 15, (30, 12)).astype(np.int32)
    states = []
    for n_threads in (1, threads):
        with ProcgenStepper("bigfish", 12, seed=5, num_threads=n_threads, engine="headless") as s:
            s.restart()
            for a in acts:
                s.step(a)
            states.append(s.get_states())
    assert states[0] == states[1]


def test_default_threads_follow_the_cpu_affinity() -> None:
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no sched_getaffinity on this platform")
    assert usable_cpus() == len(os.sched_getaffinity(0))
    out = run_child(
        """
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        from procgen_entities.stepper import ProcgenStepper, usable_cpus
        with ProcgenStepper("bigfish", 4, seed=0, engine="headless") as s:
            s.restart()
            s.step(np.zeros(4, dtype=np.int32))
            print(json.dumps({"cpus": usable_cpus(), "threads": s.num_threads}))
        """
    )
    assert out == {"cpus": 1, "threads": 1}


# ---- fork ----

FORK_CHILD = """
from procgen_entities.entity_gym.vec_env import ProcgenVecEnv
from procgen_entities.gymnasium import EntityVectorEnv
env = {make}
env.reset({reset_args})
pid = os.fork()
if pid == 0:
    {child}
    sys.exit(0)  # a normal exit: finalisers, atexit, the env's __del__
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    time.sleep(0.01)
else:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    status = -1
env.reset({reset_args})  # the parent's env is unaffected
env.close()
print(json.dumps({{"status": status}}))
"""

ENVS = {
    "entity-gym": ("ProcgenVecEnv('bigfish', 8, seed=1, num_threads=2)", "env.obs_space()"),
    "entity-gym procgen threads": (
        "ProcgenVecEnv('bigfish', 8, seed=1, num_threads=2, engine='get_state', procgen_threads=2)",
        "env.obs_space()",
    ),
    "gymnasium": ("EntityVectorEnv('bigfish', 8, seed=1, num_threads=2)", ""),
}


@pytest.mark.live
@pytest.mark.parametrize("kind", list(ENVS))
def test_forked_child_that_ignores_the_env_exits(kind: str) -> None:
    make, reset_args = ENVS[kind]
    child = "pass"
    out = run_child(FORK_CHILD.format(make=make, reset_args=reset_args, child=child))
    assert out["status"] == 0


@pytest.mark.live
@pytest.mark.parametrize("kind", list(ENVS))
def test_forked_child_gets_a_clear_error_and_can_close(kind: str) -> None:
    make, reset_args = ENVS[kind]
    child = textwrap.indent(
        textwrap.dedent(
            f"""
            try:
                env.reset({reset_args})
                os._exit(4)  # used an env whose procgen threads stayed in the parent
            except RuntimeError as exc:
                if "os.fork()" not in str(exc):
                    os._exit(5)
            env.close()
            """
        ),
        "    ",
    ).strip()
    out = run_child(FORK_CHILD.format(make=make, reset_args=reset_args, child=child))
    assert out["status"] == 0


@pytest.mark.live
def test_forked_child_can_make_and_step_its_own_env() -> None:
    make, reset_args = ENVS["entity-gym procgen threads"]
    child = textwrap.indent(
        textwrap.dedent(
            """
            own = ProcgenVecEnv("bigfish", 8, seed=1, num_threads=2, engine="get_state")
            space = own.obs_space()
            own.reset(space)
            for _ in range(20):
                own.render()
            same = own.get_states() == parent_states  # same seed, same first states
            own.close()
            env.close()
            if not same:
                os._exit(6)
            """
        ),
        "    ",
    ).strip()
    code = FORK_CHILD.format(make=make, reset_args=reset_args, child=child)
    code = code.replace("pid = os.fork()", "parent_states = env.get_states()\npid = os.fork()")
    assert run_child(code)["status"] == 0


@pytest.mark.live
def test_pool_created_before_fork_works_in_the_child() -> None:
    """The C pool itself re-creates its workers after a fork (the stepper refuses anyway)."""
    out = run_child(
        """
        from procgen_entities._native import _collector
        from procgen_entities.parse import game_spec
        from procgen_entities.procgen_envs import make_procgen_env
        env = make_procgen_env("bigfish", 6, rand_seed=2, num_threads=0)
        get_state, handle = env.get_state_address, env.handle
        collector = _collector.StateCollector(game_spec("bigfish"), 6, 4)
        collector.collect(get_state, handle, 6, 0)
        expected = [collector.state_bytes(i) for i in range(6)]
        pid = os.fork()
        if pid == 0:
            for _ in range(20):
                collector.collect(get_state, handle, 6, 0)
            same = [collector.state_bytes(i) for i in range(6)] == expected
            collector.close()
            os._exit(0 if same else 7)
        _, status = os.waitpid(pid, 0)
        collector.close()
        print(json.dumps({"status": status}))
        """
    )
    assert out["status"] == 0


# ---- one env, several threads ----

THREADS_CHILD = """
from procgen_entities.entity_gym.vec_env import ProcgenVecEnv
from procgen_entities.gymnasium import EntityVectorEnv
from ragged_buffer import RaggedBufferI64
n = 8
env = {make}
space = {space}
ones = np.ones(n, dtype=np.int64)
def step():
    a = np.random.default_rng().integers(0, 15, n)
    if space is None:
        env.step(a)
    else:
        env.act({{"move": RaggedBufferI64.from_flattened(a.reshape(-1, 1), ones)}}, space)
def reset():
    env.reset() if space is None else env.reset(space)
calls = {{
    "step": step,
    "reset": reset,
    "render": lambda: env.render(),
    "get_states": lambda: env.get_states(),
    "set_states": lambda: env.set_states(saved),
}}
reset()
saved = env.get_states()
done, errors, closed = [], [], []
def loop(name):
    k = 0
    try:
        while k < {calls_each}:
            calls[name]()
            k += 1
    except Exception as exc:
        errors.append(repr(exc))
    done.append((name, k))
threads = [threading.Thread(target=loop, args=(name,)) for name in {names}]
for t in threads:
    t.start()
for t in threads:
    t.join()
# close while steps are in flight: close waits for the one running, later calls raise
def until_closed():
    try:
        while True:
            step()
    except RuntimeError as exc:
        closed.append(str(exc))
stepping = threading.Thread(target=until_closed)
stepping.start()
time.sleep(0.2)
env.close()
stepping.join()
try:
    step()
except RuntimeError as exc:
    closed.append(str(exc))
print(json.dumps({{"done": done, "errors": errors, "closed": closed}}))
"""

SHARED = {
    "entity-gym": ("ProcgenVecEnv('bigfish', n, seed=3, num_threads=2)", "env.obs_space()"),
    "gymnasium": ("EntityVectorEnv('bigfish', n, seed=3, num_threads=2)", "None"),
}


@pytest.mark.live
@pytest.mark.parametrize("kind", list(SHARED))
@pytest.mark.parametrize(
    "names",
    [("step", "step"), ("step", "render"), ("step", "reset"), ("step", "get_states", "set_states")],
)
def test_one_env_shared_by_threads(kind: str, names: tuple) -> None:
    make, space = SHARED[kind]
    calls_each = 6 if "set_states" in names else 150
    out = run_child(
        THREADS_CHILD.format(make=make, space=space, names=list(names), calls_each=calls_each)
    )
    assert out["errors"] == []
    assert sorted(out["done"]) == sorted([name, calls_each] for name in names)
    assert out["closed"] == [f"{make.split('(')[0]} is closed"] * 2  # each class names itself


# ---- buffers that change while the parser runs ----


@pytest.mark.live
def test_parse_states_on_buffers_another_thread_mutates() -> None:
    """A bytearray, its memoryview and an mmap whose spawners count another thread keeps
    flipping to a huge value and back: every parse is right or a StateDecodeError (the fill pass
    once re-read the count the measure pass had checked, and wrote past the arrays)."""
    out = run_child(
        """
        import mmap, struct
        from procgen_entities import StateDecodeError, parse_states
        from procgen_entities.procgen_envs import make_procgen_env
        env = make_procgen_env("starpilot", 1, rand_seed=0, num_threads=0)
        for _ in range(60):
            env.act(np.zeros(1, np.int32))
        state = env.callmethod("get_state")[0]
        good = parse_states([state], game="starpilot")
        count = int(good.vector_counts["spawners"][0])
        at = len(state) - 8 - 124 * count  # the count: the last trailer item
        assert struct.unpack_from("<i", state, at)[0] == count
        buf = bytearray(state)
        mm = mmap.mmap(-1, len(state))
        mm[:] = state
        huge, orig = struct.pack("<i", count + 100000), struct.pack("<i", count)
        stop = threading.Event()
        def mutate(target):
            while not stop.is_set():
                target[at:at + 4] = huge
                target[at:at + 4] = orig
        sys.setswitchinterval(1e-6)
        threads = [threading.Thread(target=mutate, args=(t,)) for t in (buf, mm)]
        for t in threads:
            t.start()
        batch = [buf, memoryview(buf), mm] * 16
        expected = np.tile(good.vectors["spawners"], (len(batch), 1))
        ok = refused = 0
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            try:
                parsed = parse_states(batch, game="starpilot")
            except StateDecodeError:
                refused += 1
                continue
            assert (parsed.vector_counts["spawners"] == count).all()
            assert np.array_equal(parsed.vectors["spawners"], expected)
            ok += 1
        stop.set()
        for t in threads:
            t.join()
        print(json.dumps({"ok": ok, "refused": refused, "count": count}))
        """
    )
    assert out["count"] > 0 and out["ok"] > 0
