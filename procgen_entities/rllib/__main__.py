"""PPO from RLlib on a Ray cluster, one native EntityVectorEnv in every EnvRunner.

    python -m procgen_entities.rllib GAME [--address ADDR] [--env-runners K]
                                          [--envs-per-runner N] [--iterations I] [--out DIR]

Without ``--address`` a Ray instance is started on this machine; ``--address auto`` (or
HOST:PORT) joins a running cluster (docs/distributed.md). Each iteration samples
``--rollout`` steps of every env on the K runners, trains on them here (the driver) and prints
one line: env steps, steps sampled per second over the iteration, mean return of recent episodes.
Metrics go to ``DIR/metrics.jsonl`` (``python -m procgen_entities.plot DIR/metrics.jsonl``).
Needs the ray extra.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from procgen_entities.games import GAME_NAMES, get_game

__all__ = ["main"]


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m procgen_entities.rllib", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("game", choices=GAME_NAMES)
    parser.add_argument(
        "--address",
        default=None,
        help="Ray cluster to join ('auto' or HOST:PORT); default: start one here",
    )
    parser.add_argument("--env-runners", type=int, default=2, help="EnvRunner actors (K)")
    parser.add_argument(
        "--envs-per-runner", type=int, default=64, help="envs in each runner's EntityVectorEnv (N)"
    )
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument(
        "--rollout",
        type=int,
        default=128,
        help="steps of each env per iteration (train batch: K * N * rollout)",
    )
    parser.add_argument("--minibatch", type=int, default=2048)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--ent-coef", type=float, default=0.01)
    parser.add_argument(
        "--hiddens", type=int, nargs="+", default=[256, 256], help="MLP layer sizes"
    )
    parser.add_argument(
        "--env-threads",
        type=int,
        default=1,
        help="threads of each runner's env pool (and CPUs it asks Ray for)",
    )
    parser.add_argument("--torch-threads", type=int, default=1, help="torch threads per runner")
    parser.add_argument(
        "--vectorize",
        default="vector_entry_point",
        choices=["vector_entry_point", "sync", "async"],
        help="how runners vectorize (sync/async: Gymnasium's, for comparison)",
    )
    parser.add_argument("--distribution-mode", default="hard")
    parser.add_argument("--seed", type=int, default=None, help="level seeds (default: random)")
    parser.add_argument("--out", type=Path, default=None, help="default: runs/rllib-GAME")
    return parser.parse_args(argv)  # fmt: skip


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    import ray

    from procgen_entities.rllib import build_config, env_options
    from procgen_entities.rllib.metrics import MetricsWriter

    info = get_game(args.game)
    config = build_config(
        args.game, env_runners=args.env_runners, envs_per_runner=args.envs_per_runner,
        vectorize=args.vectorize, rollout_length=args.rollout, minibatch_size=args.minibatch,
        num_epochs=args.epochs, lr=args.lr, entropy_coeff=args.ent_coef, hiddens=args.hiddens,
        env_threads=args.env_threads, torch_threads=args.torch_threads, seed=args.seed,
        env_config={"distribution_mode": args.distribution_mode},
    )  # fmt: skip
    if args.address is None:
        # A local instance: enough logical CPUs for every runner (runners are idle while the
        # driver trains, so oversubscribing the cores is what one machine can do).
        cpus = max(os.cpu_count() or 1, args.env_runners * max(1, args.env_threads))
        ray.init(num_cpus=cpus, include_dashboard=False)
    else:
        ray.init(address=args.address)
    out = args.out or Path("runs") / f"rllib-{args.game}"
    r_min, r_max = info.return_range or (0.0, 10.0)
    options = env_options(args.game, vectorize=args.vectorize, env_threads=args.env_threads)
    meta: Dict[str, Any] = {
        "game": args.game, "env": f"rllib {args.vectorize}", "seed": args.seed,
        "tilemap": options["tilemap"], "r_min": r_min, "r_max": r_max,
        "trainer": "RLlib PPO (new API stack), default MLP on the flat observation",
        "env_runners": args.env_runners, "envs_per_runner": args.envs_per_runner,
        "envs": args.env_runners * args.envs_per_runner, "address": args.address,
        "nodes": len([n for n in ray.nodes() if n.get("Alive")]),
        "hyperparameters": {"rollout": args.rollout, "minibatch": args.minibatch,
                            "epochs": args.epochs, "lr": args.lr, "ent_coef": args.ent_coef,
                            "gamma": config.gamma, "lambda": config.lambda_,
                            "hiddens": args.hiddens},
    }  # fmt: skip
    try:
        algo = config.build_algo()
        try:
            _train(algo, args.iterations, MetricsWriter(out / "metrics.jsonl", meta))
        finally:
            algo.stop()
    finally:
        ray.shutdown()
    return 0


def _train(algo: Any, iterations: int, writer: Any) -> None:
    from procgen_entities.rllib.runners import describe_runners

    for r in describe_runners(algo):
        print(
            f"runner {r['index']}: {r['host']} (node {r['node'][:12]}), pid {r['pid']}, "
            f"{r['env_class'].rsplit('.', 1)[-1]} of {r['num_envs']} envs, "
            f"{r['env_threads']} env / {r['torch_threads']} torch threads"
        )
    try:
        for _ in range(iterations):
            print(writer.add(algo.train()), flush=True)
    finally:
        writer.close()
    print(f"wrote {writer.path}")


if __name__ == "__main__":
    sys.exit(main())
