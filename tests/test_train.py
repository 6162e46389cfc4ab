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

from procgen_entities.agents.metrics import load_run, summary_table  # noqa: E402
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


def test_a_game_trains_its_committed_recipe_by_default() -> None:
    """bigfish's recipe (Game.recipe.enn_overrides) comes after the base settings, so that
    ``python -m procgen_entities.train bigfish`` trains the committed checkpoint's settings; the
    user's fields still come last."""
    committed = json.loads(Path("checkpoints/bigfish/env.json").read_text())["trainer"]
    recorded = [o for o in committed["overrides"] if not o.startswith("data_dir=")]
    assert trainer_overrides("bigfish", 25_000_000, 0, False, []) == recorded
    assert (
        trainer_overrides("bigfish", 10, 0, False, ["ppo.ent_coef=0.1"])[-1] == "ppo.ent_coef=0.1"
    )
    # coinrun's recipe is SB3's: no enn-trainer fields are added for it
    assert not any(o.startswith("net.n_layer=2") for o in trainer_overrides("coinrun", 10, 0,
                                                                          False, []))  # fmt: skip


def test_bad_game_and_bad_override_fail_cleanly() -> None:
    for args in (["pong", "--smoke"], ["coinrun", "--smoke", "not-an-override"],
                 ["coinrun", "--smoke", "--num-levels", "-1"]):  # fmt: skip
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


def test_tensorboard_logs_go_into_the_run_folder_and_records_keep_no_paths(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "procgen_entities.train", "coinrun", "--smoke", "--out", str(out),
         "ppo.ent_coef=0.02", "--num-levels", "200"],
        capture_output=True, text=True, timeout=240, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list(out.glob("runs/*/events.out.tfevents.*")), sorted(map(str, tmp_path.rglob("*")))
    assert not (tmp_path / '"').exists()  # a quoted data_dir once made a folder named '"'
    # the records keep the recipe, not where this machine put the run
    for record in (out / "metrics.jsonl", out / "checkpoint" / "env.json"):
        assert str(tmp_path) not in record.read_text(), record
    run = load_run(out / "metrics.jsonl")
    assert run.meta["user_overrides"] == ["ppo.ent_coef=0.02"] and "ent_coef=0.02" in run.label
    # the protocol's training levels are recorded where evaluate reads them (levels 0-199)
    env = json.loads((out / "checkpoint" / "env.json").read_text())["env"]
    assert (env["num_levels"], env["start_level"]) == (200, 0) and run.meta["num_levels"] == 200


@pytest.mark.live
@pytest.mark.parametrize(("game", "actor"), [("coinrun", "global"), ("climber", "player")])
def test_checkpoint_acts_the_same_on_the_padded_observation(
    game: str, actor: str, tmp_path: Path
) -> None:
    """A training run saves its RogueNet with its env; the evaluation feeds it the padded form
    (agents/enn_policy.py): its logits equal those on ProcgenVecEnv's own observation of the
    same levels, step after step, and the evaluate command runs it."""
    import numpy as np
    import torch
    from entity_gym.simple_trace import Tracer
    from ragged_buffer import RaggedBufferI64

    from procgen_entities.agents.checkpoint import Checkpoint, make_env
    from procgen_entities.agents.enn_policy import ENN_FOLDER, vec_obs_from_padded
    from procgen_entities.entity_gym.observation import ACTION_NAME
    from procgen_entities.entity_gym.vec_env import ProcgenVecEnv

    out = tmp_path / "run"
    train = [sys.executable, "-m", "procgen_entities.train", game, "--smoke", "--out", str(out),
             "--actor", actor]  # fmt: skip
    proc = subprocess.run(train, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = out / "checkpoint"
    checkpoint = Checkpoint.load(folder)
    assert checkpoint.trainer["actor"] == actor and checkpoint.steps == SMOKE_STEPS
    from enn_trainer import load_checkpoint

    net = load_checkpoint(str(folder / ENN_FOLDER)).state.agent
    n, tracer = 8, Tracer(cuda=False)
    config = checkpoint.env
    ragged = ProcgenVecEnv(game, n, seed=9, relative_positions=True, tilemap=config.tilemap,
                           actor=actor, distribution_mode=config.distribution_mode)  # fmt: skip
    padded = make_env(config, n, 9, flatten=False)
    names = padded.metadata["feature_names"]
    theirs = ragged.reset(ragged.obs_space())
    mine, _ = padded.reset(seed=9)
    rng = np.random.default_rng(0)
    for _ in range(60):
        logits = []
        for obs in (theirs, vec_obs_from_padded(mine, names, net.obs_space, actor)):
            with torch.no_grad():
                *_, out_logits = net.get_action_and_auxiliary(
                    obs.features, obs.visible, obs.action_masks, tracer=tracer
                )
            logits.append(out_logits[ACTION_NAME].numpy())
        np.testing.assert_allclose(logits[0], logits[1], rtol=1e-4, atol=1e-5)
        actions = rng.integers(0, 15, n)
        chosen = RaggedBufferI64.from_flattened(actions.reshape(-1, 1), np.ones(n, np.int64))
        theirs = ragged.act({ACTION_NAME: chosen}, ragged.obs_space())
        mine, *_ = padded.step(actions)
    ragged.close()
    padded.close()
    evaluate = [sys.executable, "-m", "procgen_entities.evaluate", str(folder), "--episodes", "4",
                "--baselines", "none"]  # fmt: skip
    proc = subprocess.run(evaluate, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1].endswith("over 4 episodes")


@pytest.mark.live
def test_a_stopped_run_resumes_from_its_rolling_checkpoint(tmp_path: Path) -> None:
    """A run keeps hyperstate's rolling checkpoint in --out; ``--resume`` continues it (enn-
    trainer's own state says it restarted from the saved step, and only the missing updates
    run), appends to metrics.jsonl with a second run record, and the final checkpoint replaces
    the first one. Reusing the folder without --resume, or resuming nothing, is exit 2."""
    from enn_trainer import load_checkpoint

    from procgen_entities.agents.enn_policy import ENN_FOLDER

    out = tmp_path / "run"
    small = ["rollout.num_envs=16", "rollout.steps=32", "optim.bs=256", "optim.update_epochs=1"]

    def train(steps: int, *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "procgen_entities.train", "bigfish", "--steps", str(steps),
             "--out", str(out), *extra, *small],
            capture_output=True, text=True, timeout=240,
        )  # fmt: skip

    first = train(1024)
    assert first.returncode == 0, first.stderr[-3000:]
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["latest-step000000001024"]
    again = train(2048)
    assert again.returncode == 2 and "--resume" in again.stderr and "Traceback" not in again.stderr
    resumed = train(2048, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    runs = [i for i, r in enumerate(records) if r["kind"] == "run"]
    assert [records[i]["resumed_at"] for i in runs] == [0, 1024]
    updates = [r["step"] for r in records[runs[1] :] if r["kind"] == "update"]
    assert updates == [1536, 2048]  # from the checkpoint's step: two updates, not four
    state = load_checkpoint(str(out / "checkpoint" / ENN_FOLDER)).state
    assert (state.step, state.restart) == (2048, 1)
    assert json.loads((out / "checkpoint" / "env.json").read_text())["steps"] == 2048
    empty = subprocess.run(
        [sys.executable, "-m", "procgen_entities.train", "bigfish", "--resume", "--out",
         str(tmp_path / "empty")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert empty.returncode == 2 and "no checkpoints/latest-step*" in empty.stderr


def test_a_resumed_runs_lost_stretch_is_not_counted_twice(tmp_path: Path) -> None:
    """A process stopped past its last checkpoint logged episodes that the resumed one trains
    again: load_run keeps the resumed process's, not both (an enn run's record appends)."""
    path = tmp_path / "metrics.jsonl"
    records = [{"kind": "run", "game": "bigfish", "resumed_at": 0}]
    records += [{"kind": "episode", "step": s, "return": 1.0, "length": 5, "level_complete": False}
                for s in (100, 200, 300)]  # fmt: skip
    records.append({"kind": "run", "game": "bigfish", "resumed_at": 200})
    records += [{"kind": "episode", "step": s, "return": 2.0, "length": 5, "level_complete": True}
                for s in (250, 350)]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    run = load_run(path)
    assert run.steps.tolist() == [100, 200, 250, 350]
    assert run.returns.tolist() == [1.0, 1.0, 2.0, 2.0] and run.last_step == 350


def _png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the PNG's IHDR chunk."""
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")


def test_plot_wraps_the_games_panels_into_rows(tmp_path: Path) -> None:
    """``--columns 2`` puts three games' panels in two rows (one row by default: a wide strip);
    a window or column count below range is a usage error."""
    from procgen_entities.tools.plot import main as plot_main

    agents = Path(__file__).resolve().parent.parent / "docs" / "runs" / "agents"
    metrics = [str(agents / g / "metrics.jsonl.gz") for g in ("coinrun", "ninja", "bigfish")]
    strip, grid = tmp_path / "strip.png", tmp_path / "grid.png"
    assert plot_main([*metrics, "-o", str(strip)]) == 0
    assert plot_main([*metrics, "-o", str(grid), "--columns", "2"]) == 0
    (sw, sh), (gw, gh) = _png_size(strip), _png_size(grid)
    assert sh / sw < 0.5 < gh / gw, ((sw, sh), (gw, gh))
    for bad in (["--columns", "-1"], ["--window", "0"]):
        with pytest.raises(SystemExit) as exit_info:
            plot_main([metrics[0], "-o", str(tmp_path / "bad.png"), *bad])
        assert exit_info.value.code == 2
