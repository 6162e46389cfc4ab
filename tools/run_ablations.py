"""Run the recipe ablations of docs/training.md (2 seeds each), a few at a time, resumably.

    python tools/run_ablations.py [--game coinrun] [--steps 1000000] [--jobs 1]
        [--out runs/ablations] [NAME ...]

Every configuration is the SB3 PPO recipe of procgen_entities/tools/sb3_ppo.py with one change
(``ABLATIONS``), trained for ``--steps`` on ``--game`` (easy, full distribution) with seeds 0
and 1, then evaluated greedily on 1,000 levels (``--eval-episodes``). The actor ablation uses
enn-trainer (RogueNet: the only trainer here where an entity takes the action); its checkpoint
is evaluated the same way. ``python -m procgen_entities.tools.results --group`` makes the table.

Resumable (a session can stop at any time): an arm whose folder has ``evaluation.json`` is done;
one with ``checkpoint-<steps>`` folders resumes from the latest (sb3_ppo ``--resume``), an
enn-trainer one from its rolling ``checkpoints/latest-step<N>`` (``procgen_entities.train
--resume``); one whose training finished but not its evaluation is evaluated.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

#: name -> extra arguments of the trainer ("enn:" prefix: procgen_entities.train).
ABLATIONS: Dict[str, List[str]] = {
    "recipe": [],
    "stale-support": ["--stale-support"],
    "no-window": ["--no-window"],
    "entropy-schedule": ["--ent-coef", "0.02:0.0"],
    "actor-global": ["enn:", "--actor", "global"],
    "actor-player": ["enn:", "--actor", "player"],
    # issue 19: the policy (flat MLP / attention over the slots / CNN over the class image plus
    # attention over the entities), then gamma 0.999 with reward normalisation
    "attention": ["--policy", "attention"],
    "attention-grid": ["--policy", "attention", "--grid", "--tilemap", "none"],
    "mlp-g999": ["--ppo", "gamma=0.999"],
    "mlp-grid": ["--grid"],  # the MLP recipe plus a CNN over the class image
    "mlp-grid-g999": ["--grid", "--ppo", "gamma=0.999"],
    # the 2022 entity agent's settings (enn-zoo configs/procgen: RogueNet d_model 16, 2 layers,
    # lr 0.01, entropy 0.05, gamma 0.999) on this package's enn-trainer rollout settings
    "roguenet-2022": [
        "enn:",
        "net.d_model=16",
        "net.n_layer=2",
        "optim.lr=0.01",
        "ppo.ent_coef=0.05",
        "ppo.gamma=0.999",
    ],  # fmt: skip
    "attention-grid-g999": [
        "--policy",
        "attention",
        "--grid",
        "--tilemap",
        "none",
        "--ppo",
        "gamma=0.999",
    ],  # fmt: skip
    # climber: 25M of mlp-grid-g999 plateaued at 6.9 sampled against pixel PPO's ~8.7; its
    # width, entropy and step size, each at the same budget (docs/training.md)
    "mlp-grid-g999-w512": ["--grid", "--net", "512,512", "--ppo", "gamma=0.999"],
    "mlp-grid-g999-ent02": ["--grid", "--ent-coef", "0.02", "--ppo", "gamma=0.999"],
    "mlp-grid-g999-lr2e4": ["--grid", "--ppo", "gamma=0.999", "--ppo", "learning_rate=2e-4"],
    # the grid's CNN: a stride-1 layer first and an 8x8 reading (policy.GRID_CNNS "deep")
    "mlp-grid-g999-deep": ["--grid", "--grid-cnn", "deep", "--ppo", "gamma=0.999"],
    # the entities' cells marked in the grid (EntityVectorEnv grid_entities), as pixels show them
    "mlp-marks-g999": ["--grid-entities", "--ppo", "gamma=0.999"],
    "mlp-marks-g999-deep": ["--grid-entities", "--grid-cnn", "deep", "--ppo", "gamma=0.999"],
    # CleanRL's procgen PPO (the pixel anchor) anneals its learning rate to 0 over the run
    "mlp-marks-g999-anneal": ["--grid-entities", "--anneal-lr", "--ppo", "gamma=0.999"],
    # bigfish (no terrain): 25M of mlp-g999 returned 13.4 sampled against pixel PPO's 16.5;
    # RogueNet's entropy bonus, and width
    "mlp-g999-ent05": ["--ent-coef", "0.05", "--ppo", "gamma=0.999"],
    "mlp-g999-w512": ["--net", "512,512", "--ppo", "gamma=0.999"],
}
# issue 34: the game's committed recipe (Game.recipe), trained by the lean learner (sb3_ppo's
# default) and by SB3's own PPO; every other arm is the bare recipe with flags, under SB3's PPO,
# as those arms were run (BASE)
ABLATIONS["game-recipe"] = ["--recipe", "game", "--trainer", "lean"]
ABLATIONS["game-recipe-sb3"] = ["--recipe", "game", "--trainer", "sb3"]
# issue 35: procgen's protocol (levels 0-199; evaluate's default for such a checkpoint is 1,000
# levels outside them) with the game's recipe under the lean learner, then one lever each: PLR
# over the 200 levels, and the value head on its own features extractor (DAAC's decoupling)
PROTOCOL = ["--recipe", "game", "--trainer", "lean", "--num-levels", "200"]
ABLATIONS["protocol-200"] = PROTOCOL
ABLATIONS["protocol-200-plr"] = [*PROTOCOL, "--level-sampler", "plr"]
ABLATIONS["protocol-200-separate-value"] = [*PROTOCOL, "--separate-value"]
# half the episodes mirrored left-right (games declared symmetric: climber): 400 levels from 200
ABLATIONS["protocol-200-mirror"] = [*PROTOCOL, "--mirror", "0.5"]
# no absolute heights (y, a Column's height): only positions relative to the player and the
# camera, so a policy cannot key its moves to where in a memorised level it is
RELATIVE = ["--drop-feature", "y", "--drop-feature", "height"]
ABLATIONS["protocol-200-relative"] = [*PROTOCOL, *RELATIVE]
# the recipe without its class image (coinrun's and climber's marked grid): the entities and
# tiles only, the observation choice the protocol asks about, as a CNN over 200 levels' images
# has layouts to memorise
ABLATIONS["protocol-200-no-grid"] = [*PROTOCOL, "--no-grid"]
# the two that kept the plain figure or moved it up at 5M (mirror 5.57, relative 5.45, plain
# 5.41), together
ABLATIONS["protocol-200-mirror-relative"] = [*ABLATIONS["protocol-200-mirror"], *RELATIVE]
# issue 36: screens of a game with no recipe yet, under the lean learner: the marked grid
# (the SB3 recipe of coinrun and climber), and RogueNet on the tiles as entities
ABLATIONS["lean-marks-g999"] = ["--trainer", "lean", "--grid-entities", "--ppo", "gamma=0.999"]
ABLATIONS["roguenet-2022-tiles"] = [*ABLATIONS["roguenet-2022"], "--tilemap", "tiles"]
# the same image around the player, for the games whose camera shows the whole level (maze,
# heist, miner, chaser, leaper): the player is the middle cell in every level and every step
ABLATIONS["lean-marks-ego-g999"] = [*ABLATIONS["lean-marks-g999"], "--grid-centre", "player"]
# fruitbot: 25M of roguenet-2022 climbed slowly after 3M and reached the procgen authors' PPO's
# 28.49 only at 24M (PPO is at 26.35 by 5M): the entropy bonus a fifth as large (a step sampled
# into a barrier costs the episode), and a wider RogueNet (enn-trainer's own default width)
ABLATIONS["roguenet-2022-ent01"] = [*ABLATIONS["roguenet-2022"], "ppo.ent_coef=0.01"]
ABLATIONS["roguenet-2022-d32"] = [*ABLATIONS["roguenet-2022"], "net.d_model=32"]
#: what every sb3_ppo arm starts from (its own flags come after, and win)
BASE = ["--recipe", "none", "--trainer", "sb3"]
SEEDS = (0, 1)


def latest_checkpoint(folder: Path) -> Optional[Path]:
    """The periodic checkpoint with the most steps (None if there is none)."""
    found = []
    for path in folder.glob("checkpoint-*"):
        match = re.fullmatch(r"checkpoint-(\d+)", path.name)
        if match and ((path / "optimizer.pt").is_file() or (path / "model.zip").is_file()):
            found.append((int(match.group(1)), path))
    return max(found)[1] if found else None


def evaluate_command(folder: Path, episodes: int, sampled: bool = False) -> List[str]:
    return [sys.executable, "-m", "procgen_entities.evaluate", str(folder / "checkpoint"),
            "--episodes", str(episodes), "--baselines", "none",
            "--json", str(folder / "evaluation.json")] + ["--sampled"] * sampled  # fmt: skip


def command(
    game: str, name: str, seed: int, steps: int, out: Path, episodes: int, sampled: bool = False
) -> Optional[List[str]]:
    """The next command of an arm (None when it is done)."""
    extra = ABLATIONS[name]
    folder = out / f"{name}-s{seed}"
    if (folder / "evaluation.json").is_file():
        return None
    if (folder / "checkpoint" / "env.json").is_file():
        return evaluate_command(folder, episodes, sampled)
    if extra and extra[0] == "enn:":  # train (resumed where it stopped), then evaluate
        from procgen_entities.tools.train import resumed_steps  # needs the train extra

        again = ["--resume"] if folder.is_dir() and resumed_steps(folder) is not None else []
        train = [sys.executable, "-m", "procgen_entities.train", game, "--steps", str(steps),
                 "--seed", str(seed), "--out", str(folder), *again, *extra[1:]]  # fmt: skip
        evaluate = evaluate_command(folder, episodes, sampled)
        return ["bash", "-c", f"{shlex.join(train)} && {shlex.join(evaluate)}"]
    resume = latest_checkpoint(folder) if folder.is_dir() else None
    # a run of this runner from before the data format resumes from its own pickles, trusted
    trust = ["--trust-pickle"] if resume and (resume / "model.zip").is_file() else []
    if resume is None and (folder / "metrics.jsonl").is_file():
        (folder / "metrics.jsonl").unlink()  # a start from scratch: the old records go
    train = [sys.executable, "-m", "procgen_entities.tools.sb3_ppo", game,
             "--steps", str(steps), "--seed", str(seed), "--out", str(folder),
             "--eval-episodes", "0", *BASE, *extra,
             *(["--resume", str(resume)] if resume else []), *trust]  # fmt: skip
    evaluate = evaluate_command(folder, episodes, sampled)
    return ["bash", "-c", f"{shlex.join(train)} && {shlex.join(evaluate)}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", default=list(ABLATIONS))
    parser.add_argument("--game", default="coinrun")
    parser.add_argument("--steps", type=int, default=1_000_000)
    # one at a time: each run's env pool and torch already use every core, and two runs on 2
    # cores measured 409 steps/s each against 6,280 alone (ninja, mlp-grid, 2026-12-01)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    parser.add_argument("--eval-episodes", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=Path("runs/ablations"))
    parser.add_argument("--sampled", action="store_true",
                        help="evaluate with sampled actions (evaluate --sampled)")  # fmt: skip
    args = parser.parse_args()
    unknown = sorted(set(args.names) - set(ABLATIONS))
    if unknown:
        parser.error(f"unknown ablations {unknown} (one of {', '.join(ABLATIONS)})")
    seeds = [int(s) for s in args.seeds.split(",")]
    queue = [(n, s) for s in seeds for n in args.names]
    running: List[subprocess.Popen] = []
    args.out.mkdir(parents=True, exist_ok=True)
    while queue or running:
        running = [p for p in running if p.poll() is None]
        while queue and len(running) < args.jobs:
            name, seed = queue.pop(0)
            cmd = command(args.game, name, seed, args.steps, args.out, args.eval_episodes,
                          args.sampled)  # fmt: skip
            if cmd is None:
                print(f"done: {name}-s{seed}", flush=True)
                continue
            log = (args.out / f"{name}-s{seed}.log").open("a")
            print("started:", cmd[-1] if cmd[0] == "bash" else shlex.join(cmd[1:]), flush=True)
            running.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
        time.sleep(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
