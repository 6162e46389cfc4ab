"""Run the observation/recipe ablations of docs/training.md (2 seeds each), a few at a time.

    python tools/run_ablations.py [--steps 1000000] [--jobs 2] [--out runs/ablations] [NAME ...]

Every configuration is the SB3 PPO recipe of procgen_entities/tools/sb3_ppo.py with one change
(``ABLATIONS``), trained for ``--steps`` on coinrun (easy, full distribution) with seeds 0 and 1,
then evaluated greedily on 1,000 levels (``--eval-episodes``). The actor ablation uses
enn-trainer (RogueNet: the only trainer here where an entity takes the action); its checkpoint
is evaluated the same way. ``python -m procgen_entities.tools.results --group`` makes the table.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

#: name -> extra arguments of the trainer ("enn:" prefix: procgen_entities.train).
ABLATIONS: Dict[str, List[str]] = {
    "recipe": [],
    "stale-support": ["--stale-support"],
    "no-window": ["--no-window"],
    "entropy-schedule": ["--ent-coef", "0.02:0.0"],
    "actor-global": ["enn:", "--actor", "global"],
    "actor-player": ["enn:", "--actor", "player"],
}
SEEDS = (0, 1)


def command(name: str, seed: int, steps: int, out: Path, episodes: int) -> List[str]:
    extra = ABLATIONS[name]
    folder = out / f"{name}-s{seed}"
    if extra and extra[0] == "enn:":  # train, then evaluate the checkpoint it saves
        train = [sys.executable, "-m", "procgen_entities.train", "coinrun", "--steps", str(steps),
                 "--seed", str(seed), "--out", str(folder), *extra[1:]]  # fmt: skip
        evaluate = [sys.executable, "-m", "procgen_entities.evaluate", str(folder / "checkpoint"),
                    "--episodes", str(episodes), "--baselines", "none",
                    "--json", str(folder / "evaluation.json")]  # fmt: skip
        return ["bash", "-c", f"{shlex.join(train)} && {shlex.join(evaluate)}"]
    return [sys.executable, "-m", "procgen_entities.tools.sb3_ppo", "coinrun",
            "--steps", str(steps), "--seed", str(seed), "--out", str(folder),
            "--eval-episodes", str(episodes), "--eval-baselines", "none", *extra]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", default=list(ABLATIONS))
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--eval-episodes", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=Path("runs/ablations"))
    args = parser.parse_args()
    queue = [(n, s) for n in args.names for s in SEEDS]
    running: List[subprocess.Popen] = []
    args.out.mkdir(parents=True, exist_ok=True)
    while queue or running:
        running = [p for p in running if p.poll() is None]
        while queue and len(running) < args.jobs:
            name, seed = queue.pop(0)
            log = (args.out / f"{name}-s{seed}.log").open("w")
            cmd = command(name, seed, args.steps, args.out, args.eval_episodes)
            print("started:", cmd[-1] if cmd[0] == "bash" else shlex.join(cmd[1:]), flush=True)
            running.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
        time.sleep(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
