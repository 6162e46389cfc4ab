"""Resident memory per env made and closed, against what the allocator holds in use: tells a
leak (in-use memory grows) from memory glibc keeps after it was freed (only RSS grows, and
``malloc_trim`` gives it back).

    python tools/memory_cycles.py [--cycles 200] [--game bigfish] [--envs 8] MODE...

MODE: ``procgen`` (procgen's envs alone, through backends.make_envs: no engine, no collector)
or an engine (``headless``, ``direct``, ``get_state``: an EntityVectorEnv made, reset, stepped
once and closed). After 20 warm-up cycles, prints per cycle the growth of VmRSS, of glibc's
in-use heap (mallinfo2 ``uordblks``, every arena), and of VmRSS once ``malloc_trim(0)`` ran.
Run it under ``MALLOC_ARENA_MAX=1`` to see whether per-thread arenas matter. Linux, glibc.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import warnings


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]  # fmt: skip


LIBC = ctypes.CDLL(None)
LIBC.mallinfo2.restype = _Mallinfo2


def rss_kib() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def in_use_kib() -> int:
    return int(LIBC.mallinfo2().uordblks) // 1024


def cycle(mode: str, game: str, envs: int) -> None:
    if mode == "procgen":
        from procgen_entities.backends import make_envs

        make_envs(game, envs, rand_seed=0).close()
    else:
        from procgen_entities.gymnasium import EntityVectorEnv

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # engines without terminal observations
            env = EntityVectorEnv(game, envs, seed=0, engine=mode, num_threads=2)
        env.reset()
        env.step([0] * envs)
        env.close()
    gc.collect()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("modes", nargs="+")
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--game", default="bigfish")
    parser.add_argument("--envs", type=int, default=8)
    args = parser.parse_args()
    for mode in args.modes:
        for _ in range(20):
            cycle(mode, args.game, args.envs)
        LIBC.malloc_trim(0)
        rss0, used0 = rss_kib(), in_use_kib()
        for _ in range(args.cycles):
            cycle(mode, args.game, args.envs)
        rss1, used1 = rss_kib(), in_use_kib()
        LIBC.malloc_trim(0)
        rss2 = rss_kib()
        n = args.cycles
        print(f"{mode:10s} {args.game} x{args.envs}, {n} cycles: RSS {(rss1 - rss0) / n:+.1f} KiB"
              f"/cycle, in use {(used1 - used0) / n:+.1f} KiB/cycle, RSS after malloc_trim "
              f"{(rss2 - rss0) / n:+.1f} KiB/cycle", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
