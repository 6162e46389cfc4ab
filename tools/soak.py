"""A soak of the ways an application uses (and misuses) envs over a long run: one env shared by
threads and envs made in threads, forks with envs open (children that exit, that get the clear
error, that make their own env), set_states of fuzzed blobs (trailer vectors and the rest of the
state: each refused, or accepted and stepped), saved states through reset options on the headless
and direct engines, text levels written, read back and played, envs of every game and engine made
and closed, and parses of buffers another thread changes. Between operations it samples this
process's resident memory, thread count and open file descriptors, and fails (exit status 1) when
any of them grows after the warm-up, when a forked child hangs or crashes, or when an operation
raises what it should not. A crash of this process is a failure too: run it as a child
(tests/test_soak.py).

    python tools/soak.py --minutes 30
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import struct
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any, Callable, Dict, List

import numpy as np

from procgen_entities import GAME_NAMES, StateDecodeError, parse_states
from procgen_entities.gymnasium import EntityVectorEnv

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuzz_trailer_vectors import VECTOR_GAMES, mutate  # noqa: E402

FORK_TIMEOUT_S = 60.0
ENGINES = ("auto", "headless", "direct", "get_state")


def sample() -> Dict[str, int]:
    """Resident memory (KiB), threads and open descriptors of this process (Linux /proc)."""
    status = dict(
        line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line
    )
    return {
        "rss_kib": int(status["VmRSS"].split()[0]),
        "threads": int(status["Threads"]),
        "fds": len(os.listdir("/proc/self/fd")),
    }


class Soak:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.counts: Counter = Counter()
        self.failures: List[str] = []
        # the long-lived env: shared by threads, open across forks
        self.shared = EntityVectorEnv("bigfish", 8, seed=seed, num_threads=2)
        self.shared.reset()
        self.states = {game: self._states(game) for game in VECTOR_GAMES + ["coinrun"]}

    def _states(self, game: str) -> List[bytes]:
        with closing(
            EntityVectorEnv(game, 2, seed=1, num_threads=1, autoreset_mode="SameStep")
        ) as e:
            e.reset()
            out: List[bytes] = []
            for _ in range(6):
                for _ in range(9):
                    e.step(self.rng.integers(0, 15, 2))
                out.extend(e.get_states())
            return out

    def fail(self, what: str) -> None:
        self.failures.append(what)
        print(f"soak: FAILURE {what}", file=sys.stderr, flush=True)

    # ---- the operations ----

    def threads(self) -> None:
        """Three threads on the shared env (step, render, get_states) and two with their own."""
        errors: List[str] = []
        env = self.shared
        calls: Dict[str, Callable[[], Any]] = {
            "step": lambda: env.step(np.random.default_rng().integers(0, 15, 8)),
            "render": env.render,
            "get_states": env.get_states,
        }

        def loop(call: Callable[[], Any]) -> None:
            try:
                for _ in range(20):
                    call()
            except Exception as exc:  # noqa: BLE001 (reported as a failure)
                errors.append(repr(exc))

        def own(game: str) -> None:
            try:
                with closing(EntityVectorEnv(game, 4, seed=2, num_threads=2)) as mine:
                    mine.reset()
                    for _ in range(20):
                        mine.step(np.random.default_rng().integers(0, 15, 4))
            except Exception as exc:  # noqa: BLE001
                errors.append(repr(exc))

        workers = [threading.Thread(target=loop, args=(c,)) for c in calls.values()]
        workers += [threading.Thread(target=own, args=(g,)) for g in ("coinrun", "starpilot")]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        for error in errors:
            self.fail(f"threads: {error}")

    def fork(self) -> None:
        """A forked child: exits at once, exits normally, gets the error and closes, or makes
        and steps its own env."""
        kind = ["os_exit", "exit", "clear_error", "own_env"][int(self.rng.integers(4))]
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                if kind == "exit":
                    sys.exit(0)  # finalisers, atexit, the shared env's __del__
                if kind == "clear_error":
                    try:
                        self.shared.reset()
                        code = 4
                    except RuntimeError as exc:
                        code = 0 if "os.fork()" in str(exc) else 5
                    self.shared.close()
                if kind == "own_env":
                    with closing(EntityVectorEnv("maze", 2, seed=3, num_threads=2)) as mine:
                        mine.reset()
                        for _ in range(10):
                            mine.step(np.zeros(2, dtype=np.int64))
            except SystemExit:
                raise
            except BaseException:
                code = 6
            os._exit(code)
        deadline = time.monotonic() + FORK_TIMEOUT_S
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                self.fail(f"fork {kind}: the child hung")
                return
            time.sleep(0.005)
        if status != 0:
            self.fail(f"fork {kind}: child wait status {status}")
        self.counts[f"fork.{kind}"] += 1
        self.shared.step(np.zeros(8, dtype=np.int64))  # the parent's env is unaffected

    def set_states(self) -> None:
        """Four fuzzed blobs of one game into a fresh env: each refused, or accepted and stepped."""
        game = random.Random(int(self.rng.integers(2**31))).choice(list(self.states))
        states = self.states[game]
        with closing(
            EntityVectorEnv(game, 1, seed=1, num_threads=1, autoreset_mode="SameStep")
        ) as env:
            env.reset()
            for _ in range(4):
                blob = states[int(self.rng.integers(len(states)))]
                if game in VECTOR_GAMES and self.rng.random() < 0.7:
                    _, blob = mutate(self.rng, game, blob, states)
                else:
                    blob = self._flipped(blob)
                try:
                    env.set_states([blob])
                except StateDecodeError:
                    self.counts["set_states.refused"] += 1
                    continue
                self.counts["set_states.accepted"] += 1
                for _ in range(30):
                    env.step(self.rng.integers(0, 15, 1))

    def _flipped(self, blob: bytes) -> bytes:
        out = bytearray(blob)
        for _ in range(int(self.rng.integers(1, 4))):
            at = 4 * int(self.rng.integers(len(out) // 4))
            struct.pack_into("<I", out, at, int(self.rng.integers(2**32)))
        return bytes(out)

    def create_close(self) -> None:
        game = GAME_NAMES[int(self.rng.integers(len(GAME_NAMES)))]
        engine = ENGINES[int(self.rng.integers(len(ENGINES)))]
        n = int(self.rng.integers(1, 9))
        threads = int(self.rng.integers(1, 4))
        seed = int(self.rng.integers(2**31))
        env = EntityVectorEnv(
            game, n, seed=seed, engine=engine, num_threads=threads, autoreset_mode="SameStep"
        )
        try:
            env.reset()
            for _ in range(10):
                env.step(self.rng.integers(0, 15, n))
            env.render()
        finally:
            env.close()
        self.counts[f"create_close.{engine}"] += 1

    def mutating_parse(self) -> None:
        """parse_states on a bytearray whose trailer another thread keeps rewriting."""
        blob = self.states["starpilot"][int(self.rng.integers(len(self.states["starpilot"])))]
        buf = bytearray(blob)
        stop = threading.Event()
        at = len(buf) - 8

        def mutate_forever() -> None:
            while not stop.is_set():
                buf[at - 400 : at] = os.urandom(400)
                buf[:] = blob

        thread = threading.Thread(target=mutate_forever)
        thread.start()
        try:
            deadline = time.monotonic() + 0.3
            while time.monotonic() < deadline:
                try:
                    parse_states([buf, memoryview(buf)], game="starpilot")
                    self.counts["parse.ok"] += 1
                except StateDecodeError:
                    self.counts["parse.refused"] += 1
        finally:
            stop.set()
            thread.join()

    def reset_states(self) -> None:
        """Saved states of one game through reset(options=...), some envs then reset by a
        reset_mask, on the headless or the direct engine, then steps across episode ends."""
        game = random.Random(int(self.rng.integers(2**31))).choice(list(self.states))
        engine = ("headless", "direct")[int(self.rng.integers(2))]
        states = self.states[game]
        with closing(EntityVectorEnv(game, 4, seed=2, engine=engine, num_threads=2)) as env:
            env.reset()
            picks = [states[int(self.rng.integers(len(states)))] for _ in range(4)]
            env.reset(options={"states": picks})
            mask = self.rng.random(4) < 0.5
            mask[0] = True
            if engine == "headless":  # the direct engine refuses a mask (procgen resets all)
                env.reset(options={"reset_mask": mask})  # these anew, the others keep the states
            for _ in range(60):
                env.step(self.rng.integers(0, 15, 4))
            env.get_states()
        self.counts[f"reset_states.{engine}"] += 1

    def text_levels(self) -> None:
        """A level file written from a live state, read back, validated and played."""
        from procgen_entities.level_files import LevelBase, level_file_text, load_levels
        from procgen_entities.state import State

        blob = self.states["coinrun"][int(self.rng.integers(len(self.states["coinrun"])))]
        with tempfile.TemporaryDirectory() as folder:
            base = Path(folder) / "base.state"
            base.write_bytes(blob)
            text = level_file_text(State.from_bytes(blob), LevelBase(path=base.name))
            (Path(folder) / "level.txt").write_text(text)
            (level,) = load_levels([Path(folder) / "level.txt"])
        assert level.blob is not None
        with closing(EntityVectorEnv("coinrun", 2, seed=3, num_threads=1)) as env:
            env.reset(options={"states": [level.blob, level.blob]})
            for _ in range(40):
                env.step(self.rng.integers(0, 15, 2))
        self.counts["text_levels.played"] += 1

    def run_one(self) -> None:
        ops = [self.threads, self.fork, self.set_states, self.create_close, self.mutating_parse,
               self.reset_states, self.text_levels]  # fmt: skip
        op = ops[int(self.rng.integers(len(ops)))]
        try:
            op()
        except Exception as exc:  # noqa: BLE001 (any exception from a valid use is a failure)
            self.fail(f"{op.__name__}: {exc!r}")
        self.counts[op.__name__] += 1


def judge(samples: List[Dict[str, int]], warmup: int, rss_growth_mib: float) -> List[str]:
    """What grew after the warm-up, the last ten samples against the first ten: threads and
    descriptors by their floor (a thread that join() has let go may still be exiting when a
    sample is taken; a leaked one raises the floor), memory by the median."""
    after = samples[warmup:]
    if len(after) < 20:
        return [f"only {len(after)} samples after the warm-up: run longer"]
    problems = []
    for key, allowed, level in (
        ("threads", 0, min),
        ("fds", 0, min),
        ("rss_kib", rss_growth_mib * 1024, statistics.median),
    ):
        start = level(s[key] for s in after[:10])
        end = level(s[key] for s in after[-10:])
        if end - start > allowed:
            problems.append(f"{key} grew from {start:g} to {end:g}")
    return problems


def _by_minute(samples: List[Dict[str, int]]) -> List[float]:
    """The last resident memory sample of each minute, MiB."""
    last: Dict[int, int] = {}
    for s in samples:
        last[s["t"] // 60] = s["rss_kib"]
    return [round(last[m] / 1024, 1) for m in sorted(last)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup", type=float, default=0.2, help="fraction of the run")
    parser.add_argument("--rss-growth-mib", type=float, default=48.0)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # engine notices; the summary is the output
    start = time.monotonic()
    soak = Soak(args.seed)
    samples: List[Dict[str, int]] = []
    end = start + 60 * args.minutes
    warmup_until = start + 60 * args.minutes * args.warmup
    warmup = None
    next_report = start + 60
    while time.monotonic() < end:
        soak.run_one()
        samples.append({**sample(), "t": int(time.monotonic() - start)})
        if warmup is None and time.monotonic() >= warmup_until:
            warmup = len(samples) - 1
        if time.monotonic() >= next_report:
            print(
                f"soak: {samples[-1]} after {len(samples)} operations", file=sys.stderr, flush=True
            )
            next_report += 60
    soak.shared.close()
    problems = soak.failures + judge(samples, warmup or 0, args.rss_growth_mib)
    base = samples[warmup or 0]
    counts = dict(sorted(soak.counts.items()))
    print(json.dumps({
        "minutes": args.minutes, "operations": len(samples), "counts": counts,
        "start": samples[0], "after_warmup": base, "end": samples[-1],
        "max": {k: max(s[k] for s in samples[warmup or 0:]) for k in ("rss_kib", "threads", "fds")},
        "rss_mib_by_minute": _by_minute(samples),
        "problems": problems,
    }, indent=1))  # fmt: skip
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
