"""tools/run_ablations.py: every arm is a command its trainer accepts, and the runner resumes
(an evaluated arm is done, a trained one is evaluated, a stopped one resumes from its latest
periodic checkpoint). No training here: an arm's typo would otherwise surface only after the
arms queued before it had trained for an hour."""

from __future__ import annotations

import importlib.util
import shlex
import sys
from pathlib import Path
from typing import Any, List

import pytest

from procgen_entities.tools.sb3_ppo import HYPERPARAMETERS, _parse_args

TOOL = Path(__file__).resolve().parents[1] / "tools" / "run_ablations.py"


@pytest.fixture(scope="module")
def runner() -> Any:
    if not TOOL.is_file():
        pytest.skip("tools/ is not in this copy of the tests")
    spec = importlib.util.spec_from_file_location("run_ablations", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_sb3_arm_parses_and_names_known_ppo_settings(runner: Any) -> None:
    sb3_arms = {n: a for n, a in runner.ABLATIONS.items() if not a or a[0] != "enn:"}
    assert "mlp-grid-g999" in sb3_arms and len(sb3_arms) >= 10
    for name, extra in sb3_arms.items():
        args = _parse_args(["climber", *extra])
        for item in args.ppo:
            key, sep, value = item.partition("=")
            assert sep and key in HYPERPARAMETERS, (name, item)
            type(HYPERPARAMETERS[key])(value)  # the trainer converts it the same way


def _steps(command: List[str]) -> List[List[str]]:
    """The commands of a runner's ``bash -c "TRAIN && EVALUATE"`` (or the one command)."""
    if command[0] != "bash":
        return [command]
    return [shlex.split(part) for part in command[2].split(" && ")]


def test_the_runner_resumes_where_an_arm_stopped(runner: Any, tmp_path: Path) -> None:
    arm = tmp_path / "mlp-grid-g999-s1"
    first, evaluation = _steps(
        runner.command("climber", "mlp-grid-g999", 1, 3_000_000, tmp_path, 1000)
    )
    assert first[1:4] == ["-m", "procgen_entities.tools.sb3_ppo", "climber"]
    assert "--resume" not in first and first[first.index("--seed") + 1] == "1"
    # the older arms: the bare recipe under SB3's PPO, their own flags after (so they win)
    assert first.index("--recipe") < first.index("--grid")
    assert first[first.index("--recipe") + 1] == "none"
    assert first[first.index("--trainer") + 1] == "sb3"
    assert evaluation[1:3] == ["-m", "procgen_entities.evaluate"]
    assert "--sampled" not in evaluation
    sampled = _steps(runner.command("climber", "game-recipe", 0, 5_000_000, tmp_path, 1000, True))
    recipe_arm = sampled[0]
    assert recipe_arm[len(recipe_arm) - recipe_arm[::-1].index("--trainer")] == "lean"
    assert "--sampled" in sampled[1]
    for steps in (507904, 1015808):  # periodic checkpoints; only those with an optimizer count
        (arm / f"checkpoint-{steps}").mkdir(parents=True)
        (arm / f"checkpoint-{steps}" / "optimizer.pt").write_bytes(b"")
    (arm / "checkpoint-2000000").mkdir()  # a checkpoint cut off before its optimizer was saved
    resumed = _steps(runner.command("climber", "mlp-grid-g999", 1, 3_000_000, tmp_path, 1000))[0]
    assert resumed[resumed.index("--resume") + 1] == str(arm / "checkpoint-1015808")
    (arm / "checkpoint").mkdir()
    (arm / "checkpoint" / "env.json").write_text("{}")
    evaluate = runner.command("climber", "mlp-grid-g999", 1, 3_000_000, tmp_path, 1000)
    assert evaluate[1:3] == ["-m", "procgen_entities.evaluate"]
    assert evaluate[evaluate.index("--json") + 1] == str(arm / "evaluation.json")
    (arm / "evaluation.json").write_text("{}")
    assert runner.command("climber", "mlp-grid-g999", 1, 3_000_000, tmp_path, 1000) is None


def test_an_unknown_arm_is_a_usage_error(runner: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(sys, "argv", ["run_ablations.py", "no-such-arm"])
    with pytest.raises(SystemExit) as exit_:
        runner.main()
    assert exit_.value.code == 2


def test_an_enn_arm_resumes_from_its_rolling_checkpoint(runner: Any, tmp_path: Path) -> None:
    pytest.importorskip("entity_gym")  # procgen_entities.tools.train reads its checkpoints
    arm = tmp_path / "roguenet-2022-s0"
    first = runner.command("bigfish", "roguenet-2022", 0, 5_000_000, tmp_path, 1000)
    assert first[0] == "bash" and "--resume" not in first[-1]
    (arm / "checkpoints" / "latest-step000000409600").mkdir(parents=True)
    cut = runner.command("bigfish", "roguenet-2022", 0, 5_000_000, tmp_path, 1000)
    assert "--resume" not in cut[-1]  # hyperstate's folder without its state: nothing to resume
    (arm / "checkpoints" / "latest-step000000409600" / "state.ron").write_text("")
    resumed = runner.command("bigfish", "roguenet-2022", 0, 5_000_000, tmp_path, 1000)
    train, _, evaluate = resumed[-1].partition(" && ")
    assert f"--out {arm} --resume" in train and "procgen_entities.evaluate" in evaluate
