"""tools/soak.py for one minute (its 30-minute run: see its docstring and benchmarks/README.md):
threads on a shared env and on their own envs, forks with an env open, set_states of fuzzed
blobs, envs made and closed, parses of buffers another thread changes; the process's memory,
threads and descriptors hold after the warm-up and nothing crashes, hangs or raises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import procgen_entities

pytestmark = [pytest.mark.live, pytest.mark.slow]

TOOL = Path(__file__).resolve().parents[1] / "tools" / "soak.py"


def test_one_minute_soak_holds_memory_threads_and_descriptors() -> None:
    if not TOOL.is_file():
        pytest.skip("tools/ is not in this copy of the tests")
    package_root = Path(procgen_entities.__file__).resolve().parents[1]  # the package tested
    proc = subprocess.run(
        [sys.executable, str(TOOL), "--minutes", "1", "--seed", "5"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(package_root)},
    )  # fmt: skip
    assert proc.stdout, f"exit {proc.returncode}: {proc.stderr[-3000:]}"
    report = json.loads(proc.stdout)
    assert report["problems"] == [], proc.stderr[-3000:]
    assert proc.returncode == 0
    counts = report["counts"]
    ops = ("threads", "fork", "set_states", "create_close", "mutating_parse", "reset_states")
    for op in (*ops, "text_levels"):
        assert counts.get(op, 0) > 0, (op, counts)
    assert counts.get("set_states.refused", 0) > 0 and counts.get("set_states.accepted", 0) > 0
    assert report["end"]["fds"] <= report["after_warmup"]["fds"]
