"""Training speed: env steps/s of PufferLib's PuffeRL against sb3_ppo's flat MLP, interleaved.

    python benchmarks/bench_pufferlib.py [--game coinrun] [--updates 6] [--rounds 3]
                                         [--envs 64] [--horizon 256] [--out DIR]
                                         [--puffer-python PY] [--sb3-python PY]

Each run is its own process, ``--updates`` updates of ``--envs`` x ``--horizon`` env steps:

- **pufferlib**: ``procgen_entities.pufferlib.train(GAME, N, num_envs=E)`` with
  ``bptt_horizon`` H (PuffeRL on CPU, its MLP shaped as sb3_ppo's); the rate is what ``train``
  returns;
- **sb3_ppo**: ``python -m procgen_entities.tools.sb3_ppo GAME --recipe none --steps N --envs E
  --ppo n_steps=H`` (the flat MLP on the same observation, the lean learner); the rate is read
  from the run's ``metrics.jsonl``.

Both rates count the env steps between the end of the first update and the end of the last
over the seconds between them (so imports, the env's start and the first rollout are left out;
with ``--updates 1`` there is nothing between, and the whole run is timed instead, start-up
included: a smoke run only). The two take turns, the order swapped each round, so a change in
the machine's load touches both alike; prints every run, the medians and the ratio. Needs
pufferlib-core (see procgen_entities/pufferlib.py) and the train extra; where they live in
two venvs (pufferlib-core kept apart from the training one), ``--puffer-python`` and
``--sb3-python`` name each one's interpreter (default: this one). Run it on an otherwise idle
machine.
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

#: The child that runs PuffeRL: its result, one JSON line, is the last line it prints.
PUFFER_CHILD = """
import json, sys
from procgen_entities.pufferlib import train
game, steps, envs, horizon = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
result = train(game, steps, num_envs=envs, config_overrides={"bptt_horizon": horizon})
print(json.dumps(result))
"""


def _run(cmd: List[str]) -> str:
    """The command's stdout; its stderr's tail in the error when it fails."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.splitlines()[-20:])
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed ({done.returncode}):\n{tail}")
    return done.stdout


def run_pufferlib(python: str, game: str, steps: int, envs: int, horizon: int) -> float:
    out = _run([python, "-c", PUFFER_CHILD, game, str(steps), str(envs), str(horizon)])
    lines = [line for line in out.splitlines() if line.strip()]
    return float(json.loads(lines[-1])["steps_per_second"])


def run_sb3(python: str, game: str, steps: int, envs: int, horizon: int, out: Path) -> float:
    minibatch = min(2048, envs * horizon)  # the recipe's, or the whole batch when smaller
    _run([python, "-m", "procgen_entities.tools.sb3_ppo", game, "--recipe", "none",
          "--steps", str(steps), "--envs", str(envs), "--ppo", f"n_steps={horizon}",
          "--ppo", f"batch_size={minibatch}", "--out", str(out),
          "--checkpoint-every", "0"])  # fmt: skip
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    updates = [r for r in records if r.get("kind") == "update"]
    first, last = updates[0], updates[-1]
    if len(updates) == 1:  # nothing between updates: the whole run since its start
        return float(last["step"]) / float(last["seconds"])
    return (last["step"] - first["step"]) / (last["seconds"] - first["seconds"])


def _report(rates: Dict[str, List[float]], args: argparse.Namespace) -> None:
    print(f"\n{args.game}: medians over {args.rounds} rounds, {args.updates} updates of "
          f"{args.envs} x {args.horizon} env steps each:")  # fmt: skip
    base = statistics.median(rates["sb3_ppo"])
    for name, values in rates.items():
        rate = statistics.median(values)
        print(f"{name:10s} {rate:8.0f} env steps/s  {rate / base:5.2f}x sb3_ppo")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--game", default="coinrun")
    parser.add_argument("--updates", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--horizon", type=int, default=256, help="env steps per env per update")
    parser.add_argument("--out", type=Path, default=None, help="keep the sb3_ppo runs here")
    parser.add_argument("--puffer-python", default=sys.executable, help="runs the PuffeRL child")
    parser.add_argument("--sb3-python", default=sys.executable, help="runs sb3_ppo")
    args = parser.parse_args()
    if min(args.updates, args.rounds, args.envs, args.horizon) < 1:
        parser.error("--updates, --rounds, --envs and --horizon must be positive")
    if args.updates == 1:
        print("note: --updates 1 times whole runs, start-up included (a smoke run)")
    root = args.out or Path(tempfile.mkdtemp(prefix="bench_pufferlib-"))
    steps = args.updates * args.envs * args.horizon
    rates: Dict[str, List[float]] = {"sb3_ppo": [], "pufferlib": []}
    for round_ in range(args.rounds):
        order = ["pufferlib", "sb3_ppo"][:: 1 if round_ % 2 == 0 else -1]
        for name in order:
            if name == "pufferlib":
                rate = run_pufferlib(args.puffer_python, args.game, steps, args.envs, args.horizon)
            else:
                out = root / f"sb3-{args.game}-{round_}"
                rate = run_sb3(args.sb3_python, args.game, steps, args.envs, args.horizon, out)
            rates[name].append(rate)
            print(f"round {round_}  {name:10s} {rate:8.0f} env steps/s", flush=True)
    _report(rates, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
