"""PPO from Stable-Baselines3 on entity observations (EntityVectorEnv, flat form), evaluated.

    python -m procgen_entities.tools.sb3_ppo GAME [--steps N] [--envs 64] [--seed S] [--out DIR]
                                               [--eval-episodes 500] [--ent-coef 0.01] [--smoke]

Trains SB3's PPO (MlpPolicy) on ``EntityVectorEnv(GAME, flatten=True, autoreset_mode=SameStep)``
with the game's training tilemap, writes ``DIR/metrics.jsonl`` (the format
``python -m procgen_entities.plot`` reads: one "run" record, "update" and "episode" records) and
``DIR/model.zip``, then evaluates the trained policy (greedy) and every constant action on the
same ``--eval-episodes`` levels the training never chose from (another seed, all levels) and
prints completion rates with 95% confidence intervals. Needs the train extra.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from procgen_entities.games import get_game

__all__ = ["evaluate", "main"]

EVAL_SEED = 1_000_003  # level sampling of the evaluation: not the training's


def make_env(game: str, n: int, seed: int, **options: Any) -> Any:
    from procgen_entities.gymnasium import EntityVectorEnv

    info = get_game(game)
    return EntityVectorEnv(
        game, n, seed=seed, flatten=True, autoreset_mode="SameStep",
        tilemap=info.training_tilemap, **options,
    )  # fmt: skip


def evaluate(
    game: str,
    policy: Callable[[np.ndarray], np.ndarray],
    episodes: int,
    seed: int = EVAL_SEED,
    **options: Any,
) -> Tuple[float, float, float]:
    """(completion rate, its 95% half-width, mean return) over the first episode of each of
    ``episodes`` envs (the same levels for every policy with the same seed)."""
    env = make_env(game, episodes, seed, **options)
    obs, _ = env.reset(seed=seed)
    finished = np.zeros(episodes, dtype=bool)
    complete = np.zeros(episodes, dtype=bool)
    returns = np.zeros(episodes, dtype=np.float64)
    while not finished.all():
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        returns[~finished] += reward[~finished]
        ended = (terminated | truncated) & ~finished
        complete[ended] = info["prev_level_complete"][ended]
        finished |= ended
    env.close()
    rate = float(complete.mean())
    half = 1.96 * math.sqrt(max(rate * (1 - rate), 1e-12) / episodes)
    return rate, half, float(returns.mean())


class _Metrics:
    """SB3 callback: one "update" record per rollout, one "episode" record per finished episode."""

    def __init__(self, path: Path, meta: Dict[str, Any]) -> None:
        from stable_baselines3.common.callbacks import BaseCallback

        self.file = path.open("w")
        self.file.write(json.dumps({"kind": "run", **meta}) + "\n")
        self.start = time.perf_counter()
        outer = self

        class Callback(BaseCallback):  # type: ignore[misc]
            def _on_step(self) -> bool:
                for info in self.locals.get("infos", []):
                    if "episode" in info:
                        outer.write(kind="episode", step=self.num_timesteps,
                                    **{"return": info["episode"]["r"]},
                                    length=info["episode"]["l"],
                                    level_complete=info.get("level_complete"))  # fmt: skip
                return True

            def _on_rollout_end(self) -> None:
                seconds = time.perf_counter() - outer.start
                outer.write(kind="update", step=self.num_timesteps, seconds=round(seconds, 2),
                            steps_per_second=round(self.num_timesteps / seconds, 1))  # fmt: skip

        self.callback = Callback()

    def write(self, **record: Any) -> None:
        self.file.write(json.dumps(record) + "\n")

    def close(self) -> None:
        self.file.close()


def _constant(action: int) -> Callable[[np.ndarray], np.ndarray]:
    return lambda obs: np.full(len(obs), action)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m procgen_entities.tools.sb3_ppo", description=__doc__.split("\n")[0]
    )
    parser.add_argument("game")
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--eval-episodes", type=int, default=500)
    parser.add_argument("--ent-coef", type=float, default=0.01, help="PPO entropy bonus")
    parser.add_argument("--mode", default="hard", help="procgen distribution_mode")
    parser.add_argument("--smoke", action="store_true", help="2 tiny updates, 16 eval episodes")
    args = parser.parse_args(argv)
    import torch
    from stable_baselines3 import PPO

    from procgen_entities.gymnasium.sb3 import SB3VecEnv

    torch.set_num_threads(1)  # the env's pool uses the other core
    if args.smoke:
        args.steps, args.envs, args.eval_episodes = 2 * 8 * 16, 8, 16
    out = args.out or Path("runs") / f"sb3-{args.game}-{args.seed}"
    out.mkdir(parents=True, exist_ok=True)
    info = get_game(args.game)
    n_steps = 16 if args.smoke else 256
    hyper = dict(n_steps=n_steps, batch_size=min(2048, n_steps * args.envs), n_epochs=3,
                 gamma=0.999, gae_lambda=0.95, ent_coef=args.ent_coef, learning_rate=5e-4,
                 clip_range=0.2, max_grad_norm=0.5)  # fmt: skip
    r_min, r_max = info.return_range or (0.0, 10.0)
    meta = {"game": args.game, "env": "sb3", "seed": args.seed, "tilemap": info.training_tilemap,
            "r_min": r_min, "r_max": r_max, "trainer": "stable-baselines3 PPO MlpPolicy",
            "hyperparameters": hyper, "envs": args.envs}  # fmt: skip
    metrics = _Metrics(out / "metrics.jsonl", meta)
    env = SB3VecEnv(make_env(args.game, args.envs, args.seed, distribution_mode=args.mode))
    model = PPO("MlpPolicy", env, seed=args.seed, verbose=0, device="cpu", **hyper)
    model.learn(total_timesteps=args.steps, callback=metrics.callback, progress_bar=False)
    metrics.close()
    model.save(out / "model.zip")
    env.close()

    def greedy(obs: np.ndarray) -> np.ndarray:
        return model.predict(obs, deterministic=True)[0]  # type: ignore[no-any-return]

    mode = dict(distribution_mode=args.mode)
    results = {"trained (greedy)": evaluate(args.game, greedy, args.eval_episodes, **mode)}
    for action in range(15):
        results[f"constant {action}"] = evaluate(
            args.game, _constant(action), args.eval_episodes, **mode
        )
    best = max((k for k in results if k.startswith("constant")), key=lambda k: results[k][0])
    for name in ("trained (greedy)", best):
        rate, half, ret = results[name]
        print(f"{name:18s} completion {100 * rate:5.1f}% ± {100 * half:.1f}  return {ret:.2f}")
    table: Dict[str, Any] = {
        k: {"completion": v[0], "ci95": v[1], "return": v[2]} for k, v in results.items()
    }
    table.update(episodes=args.eval_episodes, seed=EVAL_SEED)
    (out / "evaluation.json").write_text(json.dumps(table, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
