"""Making and closing envs leaves nothing allocated: glibc's in-use heap (mallinfo2, every
arena) stays flat over many envs of every engine, and resident memory stays below the growth of
a kept-alive env (gym3's cffi keep-alive, which backends.py drops, was 53-65 KiB per env).
Resident memory alone is noisy: 1.8-22.8 KiB per env in runs of the same loops
(benchmarks/README.md), so the leak check is the in-use heap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import procgen_entities

pytestmark = pytest.mark.live

CHILD = textwrap.dedent(
    """
    import ctypes, gc, json, sys, warnings
    from procgen_entities.gymnasium import EntityVectorEnv

    class Mallinfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                    "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = Mallinfo2

    def in_use_kib():
        return libc.mallinfo2().uordblks / 1024

    def rss_kib():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS"):
                return int(line.split()[1])

    def cycle(engine):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the engines without terminal observations
            env = EntityVectorEnv("bigfish", 8, seed=0, engine=engine, num_threads=2)
        env.reset()
        env.step([0] * 8)
        env.close()
        gc.collect()

    engine, cycles = sys.argv[1], int(sys.argv[2])
    for _ in range(20):
        cycle(engine)
    start, used = rss_kib(), in_use_kib()
    for _ in range(cycles):
        cycle(engine)
    rss, in_use = rss_kib() - start, in_use_kib() - used
    print(json.dumps({"rss": rss / cycles, "in_use": in_use / cycles}))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc, glibc's mallinfo2")
@pytest.mark.parametrize("engine", ["headless", "direct", "get_state"])
def test_envs_made_and_closed_hold_resident_memory(engine: str) -> None:
    root = Path(procgen_entities.__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, engine, "150"], capture_output=True, text=True,
        timeout=600, env={**os.environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    growth = json.loads(proc.stdout.splitlines()[-1])
    assert growth["in_use"] < 1.0, f"{engine}: {growth['in_use']:.1f} KiB left allocated per env"
    assert growth["rss"] < 48.0, f"{engine}: resident memory grew {growth['rss']:.1f} KiB per env"
