"""Issue 36: every game's return range, its episodes' end causes and its baselines without a
checkpoint (tools/evaluate.py ``--game``), against real procgen episodes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Tuple

import numpy as np
import pytest

from procgen_entities.agents.checkpoint import EnvConfig
from procgen_entities.agents.evaluation import (
    EVAL_SEED,
    HAZARD_RULES,
    SCRIPTED,
    RandomActions,
    baselines,
    run_episodes,
)
from procgen_entities.games import ACTION_LABELS, GAME_NAMES, GAMES, get_game

REPO = Path(__file__).resolve().parent.parent

#: openai/train-procgen train_procgen/constants.py EASY_GAME_RANGES: the procgen paper's
#: easy-mode (R_min, R_max).
EASY_GAME_RANGES = {
    "bigfish": (1, 40), "bossfight": (0.5, 13), "caveflyer": (3.5, 12), "chaser": (0.5, 13),
    "climber": (2, 12.6), "coinrun": (5, 10), "dodgeball": (1.5, 19), "fruitbot": (-1.5, 32.4),
    "heist": (3.5, 10), "jumper": (1, 10), "leaper": (1.5, 10), "maze": (5, 10),
    "miner": (1.5, 13), "ninja": (3.5, 10), "plunder": (4.5, 30), "starpilot": (2.5, 64),
}  # fmt: skip


def test_every_game_has_the_papers_return_range() -> None:
    assert set(EASY_GAME_RANGES) == set(GAME_NAMES)
    for name, game in GAMES.items():
        assert game.return_range is not None, name
        low, high = game.return_range
        assert low < high, name
        assert (low, high) == EASY_GAME_RANGES[name], name


def test_the_hazard_rules_name_declared_hazards() -> None:
    for game, hazard in HAZARD_RULES:
        assert hazard in get_game(game).hazards, (game, hazard)


#: Per game with hazards: the mode and policy whose 100 episodes (seed 21) end by every one of
#: the game's hazards at least once (the figures measured when the hazards were declared).
HAZARD_PLAYS = {
    "bigfish": ("easy", "random"),  # only a larger fish kills
    "bossfight": ("easy", "up"),  # up into the boss, its barriers and its bullets
    "caveflyer": ("easy", "random"),
    "chaser": ("easy", "random"),
    "climber": ("easy", "random"),
    "coinrun": ("easy", "random"),
    "dodgeball": ("easy", "random"),
    "fruitbot": ("hard", "up"),  # locked doors are hard mode's (fruitbot.cpp: door_prob)
    "jumper": ("easy", "random"),
    "leaper": ("easy", "up"),  # cars and water
    "miner": ("easy", "random"),  # falling boulders and diamonds
    "ninja": ("easy", "random"),
    "starpilot": ("hard", "random"),  # hard mode has the turrets, meteors and fast flyers
}
EPISODES = 100


def _play(game: str, mode: str, policy: str) -> Tuple[list, np.ndarray]:
    act = (RandomActions(7, len(ACTION_LABELS), EPISODES) if policy == "random"
           else (lambda obs: np.full(len(obs["global"]), ACTION_LABELS.index(policy))))  # fmt: skip
    episodes = run_episodes(EnvConfig(game, mode), act, EPISODES, 21, flatten=False)
    return episodes.causes, episodes.complete


def test_every_game_with_hazards_is_played() -> None:
    assert set(HAZARD_PLAYS) == {name for name, game in GAMES.items() if game.hazards}


@pytest.mark.live
@pytest.mark.parametrize("game", sorted(HAZARD_PLAYS))
def test_episodes_end_by_each_of_the_games_hazards(game: str) -> None:
    """Every declared hazard ends some episode, as death_cause reads the terminal state; every
    episode has one end; deaths that no hazard explains are at most 5% of the deaths."""
    causes, complete = _play(game, *HAZARD_PLAYS[game])
    hazards = {h.lower() for h in get_game(game).hazards}
    assert len(causes) == EPISODES and "" not in causes
    assert set(causes) <= hazards | {"complete", "timeout", "other"}
    assert hazards <= set(causes), sorted(hazards - set(causes))
    assert [c == "complete" for c in causes] == list(complete)
    ends = {c: causes.count(c) for c in set(causes)}
    assert sum(ends.values()) == EPISODES
    deaths = sum(n for c, n in ends.items() if c not in ("complete", "timeout"))
    assert ends.get("other", 0) <= 0.05 * deaths, ends


@pytest.mark.live
@pytest.mark.parametrize(("game", "policy"), [("heist", "random"), ("plunder", "random")])
def test_games_without_hazards_name_none(game: str, policy: str) -> None:
    """heist ends only at its exit or the time limit; plunder's other end is its juice running
    out, no touch: "other"."""
    causes, _ = _play(game, "easy", policy)
    allowed = {"heist": {"complete", "timeout"}, "plunder": {"complete", "timeout", "other"}}
    assert set(causes) <= allowed[game]
    if game == "plunder":
        assert causes.count("other") > EPISODES // 2


@pytest.mark.live
def test_the_scripted_bigfish_rule_beats_the_best_constant_action() -> None:
    results = baselines(EnvConfig("bigfish"), 32, EVAL_SEED)
    constant = next(k for k in results if k.startswith("constant "))
    assert set(results) == {"random", constant, "scripted"}
    scripted, best = results["scripted"].summary(), results[constant].summary()
    margin = scripted["return_ci95"] + best["return_ci95"]
    assert scripted["return"] - best["return"] > margin, (scripted, best)
    assert scripted["completion"] > best["completion"]


def _evaluate(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "procgen_entities.evaluate", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=REPO)


@pytest.mark.live
@pytest.mark.parametrize("game", ["maze", "bigfish"])
def test_game_runs_the_baselines_alone(tmp_path: Path, game: str) -> None:
    """``--game``: the baselines' table (random, the best constant, the scripted rule where one
    exists) with normalised returns, no checkpoint row; --json writes it."""
    out = tmp_path / "table.json"
    proc = _evaluate("--game", game, "--episodes", "4", "--seed", "5", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == f"{game}, easy, 4 episodes on levels (seed 5)"
    assert lines[1].startswith("policy")
    rows = [line.split()[0] for line in lines[2:]]
    assert rows == ["random", "constant"] + (["scripted"] if game in SCRIPTED else [])
    assert all("(+" in line or "(-" in line for line in lines[2:])  # normalised returns
    record = json.loads(out.read_text())
    assert record["seed"] == 5 and record["game"] == game and record["distribution_mode"] == "easy"
    policies = {k: v for k, v in record.items() if isinstance(v, dict)}
    assert len(policies) == len(rows) and not any(k.startswith("checkpoint") for k in policies)
    low, high = get_game(game).return_range  # type: ignore[misc]
    for summary in policies.values():
        assert summary["episodes"] == 4 and sum(summary["ends"].values()) == 4
        assert summary["normalised"] == pytest.approx((summary["return"] - low) / (high - low))


MISUSE = {
    "neither": ([], "give a checkpoint folder or --game"),
    "both": (["checkpoints/coinrun", "--game", "coinrun"], "not both"),
    "unknown game": (["--game", "pong"], "--game 'pong'"),
    "bad mode": (["--game", "coinrun", "--mode", "memory"], "--mode 'memory'"),
    "--sampled": (["--game", "coinrun", "--sampled"], "--sampled needs a checkpoint"),
    "--levels": (["--game", "coinrun", "--levels", "docs/levels"], "--levels needs a checkpoint"),
    "--train-levels": (["--game", "coinrun", "--train-levels"], "--train-levels needs"),
    "--baselines none": (["--game", "coinrun", "--baselines", "none"], "--baselines none"),
    "--backend": (["--game", "coinrun", "--backend", "numpy"], "--backend needs a checkpoint"),
    "--json in a missing folder": (["--game", "coinrun", "--json", "/nonexistent/t.json"],
                                   "--json"),
}  # fmt: skip


@pytest.mark.parametrize("case", MISUSE, ids=list(MISUSE))
def test_game_misuse_is_one_line_with_exit_status_2(case: str) -> None:
    args, needle = MISUSE[case]
    proc = _evaluate(*args, "--episodes", "1000")
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stdout == "" and needle in lines[0], lines[0]
