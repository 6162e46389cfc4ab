"""Training speed: env steps/s of SB3's PPO against the lean learner, the same recipe, interleaved.

    python benchmarks/bench_training.py [--games coinrun climber] [--updates 6] [--rounds 2]
                                        [--trainers sb3 lean] [--out DIR]

Each run is ``python -m procgen_entities.tools.sb3_ppo GAME --steps N --trainer T`` in its own
process: the game's committed recipe (``Game.recipe``: its observation, network and PPO
settings), 64 envs x 256 steps per update, ``--updates`` updates. Its rate is read from the
run's own ``metrics.jsonl``: env steps between the first and the last update record over the
seconds between them (so the first update's imports, env start and first rollout are left
out). The trainers take turns, round by round, so a change in the machine's load touches each
alike. Prints every run, then per game the median steps/s of each trainer and the ratio to the
first one (``sb3``: SB3 2.9's own PPO, the code path of every committed checkpoint).
Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

ROLLOUT = 64 * 256  # env steps per update (the recipe's 64 envs x n_steps 256)


def run_once(game: str, trainer: str, updates: int, out: Path) -> float:
    """Env steps/s of one training run (updates 2..N of its metrics)."""
    name, _, precision = trainer.partition(":")
    cmd = [sys.executable, "-m", "procgen_entities.tools.sb3_ppo", game,
           "--steps", str(updates * ROLLOUT), "--trainer", name, "--out", str(out),
           "--checkpoint-every", "0"]  # fmt: skip
    cmd += ["--precision", precision] if precision else []
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    updates_ = [r for r in records if r.get("kind") == "update"]
    first, last = updates_[0], updates_[-1]
    return (last["step"] - first["step"]) / (last["seconds"] - first["seconds"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--games", nargs="+", default=["coinrun", "climber"])
    parser.add_argument(
        "--trainers",
        nargs="+",
        default=["sb3", "lean"],
        help="sb3, lean, or lean:bfloat16 (the lean learner in bfloat16)",
    )
    parser.add_argument("--updates", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="keep the runs here")
    args = parser.parse_args()
    if args.updates < 2:
        parser.error("--updates must be at least 2 (the rate is read between updates)")
    root = args.out or Path(tempfile.mkdtemp(prefix="bench_training-"))
    rates: Dict[str, Dict[str, List[float]]] = {g: {t: [] for t in args.trainers}
                                                for g in args.games}  # fmt: skip
    for round_ in range(args.rounds):
        for game in args.games:
            for trainer in args.trainers:
                rate = run_once(
                    game,
                    trainer,
                    args.updates,
                    root / f"{game}-{trainer.replace(':', '-')}-{round_}",
                )
                rates[game][trainer].append(rate)
                print(
                    f"round {round_}  {game:8s} {trainer:14s} {rate:8.0f} env steps/s", flush=True
                )
    print(f"\nmedians over {args.rounds} rounds, {args.updates} updates of {ROLLOUT} steps each:")
    for game, by_trainer in rates.items():
        base = statistics.median(by_trainer[args.trainers[0]])
        for trainer, values in by_trainer.items():
            rate = statistics.median(values)
            print(f"{game:8s} {trainer:14s} {rate:8.0f} env steps/s  {rate / base:5.2f}x "
                  f"{args.trainers[0]}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
