"""Training end to end: `python -m procgen_entities.train GAME --smoke` with enn-trainer, then the
plot command on what it wrote. Needs the train extra (installed by `bash run.sh test`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

if not os.environ.get("CI"):  # CI installs the train extra: there a missing one must fail
    pytest.importorskip(
        "enn_trainer", reason="the train extra is not installed (docs/train-install.sh)"
    )

from procgen_entities.tools.plot import load_run, summary_table  # noqa: E402
from procgen_entities.tools.train import SMOKE_STEPS, trainer_overrides  # noqa: E402


@pytest.mark.live
@pytest.mark.parametrize("game", ["coinrun", "ninja", "climber"])
def test_smoke_run_trains_and_writes_metrics(game: str, tmp_path: Path) -> None:
    out = tmp_path / game
    proc = subprocess.run(
        [sys.executable, "-m", "procgen_entities.train", game, "--smoke", "--out", str(out)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert records[0]["kind"] == "run" and records[0]["game"] == game
    updates = [r for r in records if r["kind"] == "update"]
    assert updates and updates[-1]["step"] == SMOKE_STEPS
    assert all(u["steps_per_second"] > 0 for u in updates)
    for episode in (r for r in records if r["kind"] == "episode"):
        assert episode["length"] > 0 and isinstance(episode["level_complete"], bool)
        # procgen pays 10 for finishing coinrun/ninja and up to 12.6 in climber, 0 otherwise
        assert (episode["return"] >= 10) == episode["level_complete"] or game == "climber"
    png = tmp_path / "curves.png"
    plot = subprocess.run(
        [sys.executable, "-m", "procgen_entities.plot", str(out / "metrics.jsonl"),
         "-o", str(png), "--table"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert plot.returncode == 0, plot.stderr
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    assert game in summary_table([load_run(out / "metrics.jsonl")])


def test_overrides_put_the_user_last() -> None:
    overrides = trainer_overrides("coinrun", 1000, 3, False, ["optim.lr=1e-4"])
    assert overrides[-1] == "optim.lr=1e-4"
    assert (
        "seed=3" in overrides and "total_timesteps=1000" in overrides and "cuda=false" in overrides
    )


def test_bad_game_and_bad_override_fail_cleanly() -> None:
    for args in (["pong", "--smoke"], ["coinrun", "--smoke", "not-an-override"]):
        proc = subprocess.run(
            [sys.executable, "-m", "procgen_entities.train", *args],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.live
def test_random_policy_baseline_writes_episodes(tmp_path: Path) -> None:
    out = tmp_path / "random"
    proc = subprocess.run(
        [sys.executable, "-m", "procgen_entities.train", "bigfish", "--random-policy",
         "--steps", "8192", "--out", str(out)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = load_run(out / "metrics.jsonl")
    assert run.meta["env"] == "fast, random policy"
    assert len(run.returns) > 0 and run.steps[-1] <= 8192 + 64 * 64


def test_tensorboard_logs_go_into_the_run_folder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "procgen_entities.train", "coinrun", "--smoke", "--out", str(out)],
        capture_output=True, text=True, timeout=240, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list(out.glob("runs/*/events.out.tfevents.*")), sorted(map(str, tmp_path.rglob("*")))
    assert not (tmp_path / '"').exists()  # a quoted data_dir once made a folder named '"'
