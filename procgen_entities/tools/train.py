"""Train RogueNet with enn-trainer (PPO) on ProcgenVecEnv.

    python -m procgen_entities.train GAME [--smoke] [--steps N] [--minutes M] [--seed S]
                                          [--num-levels 200] [--env fast|seed-style] [--out DIR]
                                          [OVERRIDES ...]

OVERRIDES are enn-trainer fields as ``a.b=value`` (``optim.lr=3e-4 net.d_model=128``); they come
after the game's own (``Game.recipe.enn_overrides``, the committed agent's settings), so they win.
``--num-levels 200`` trains on levels 0-199 only (procgen's generalization protocol); the
checkpoint records it, and ``evaluate`` then tests on levels outside them.
Each run writes DIR/metrics.jsonl: one line per finished episode (``"kind": "episode"``: global
step, return, length, level_complete) and one per update (``"kind": "update"``: step, steps/s,
mean episodic return of the update). ``python -m procgen_entities.plot`` turns these into curves.
Needs the train extra (docs/train-install.sh, or ``bash run.sh train GAME``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, TextIO, Tuple

import numpy as np
from entity_gym.env import ObsSpace, VecEnv, VecObs
from ragged_buffer import RaggedBufferI64

from procgen_entities.agents.metrics import MACHINE_OVERRIDES
from procgen_entities.errors import UsageError
from procgen_entities.games import GAMES, NUM_ACTIONS, get_game

__all__ = ["GameDefaults", "DEFAULTS", "EpisodeLogger", "main", "trainer_overrides"]


@dataclass(frozen=True)
class GameDefaults:
    """What suits a game: its tilemap mode and procgen options. R_min/R_max are the procgen
    paper's normalisation constants (easy mode)."""

    tilemap: Optional[str]
    r_min: float
    r_max: float
    env_options: Mapping[str, Any] = field(default_factory=dict)


#: From games.py: the training tilemap and the paper's return range of each game that has them.
DEFAULTS: Dict[str, GameDefaults] = {
    g.name: GameDefaults(g.training_tilemap, *g.return_range)
    for g in GAMES.values()
    if g.return_range is not None
}

#: PPO settings after the procgen paper (64 envs, gamma .999, lambda .95, lr 5e-4, entropy .01),
#: scaled for a 2-core CPU: 64-step rollouts, 2 epochs, a one-layer d_model 32 transformer
#: (d_model 64 / 2 layers / 3 epochs trained at 565 steps/s here, this at ~2,400).
BASE_OVERRIDES = [
    "cuda=false",
    "rollout.num_envs=64",
    "rollout.steps=64",
    "rollout.processes=1",
    "optim.bs=1024",
    "optim.update_epochs=2",
    "optim.lr=5e-4",
    "optim.max_grad_norm=0.5",
    "ppo.gamma=0.999",
    "ppo.gae_lambda=0.95",
    "ppo.ent_coef=0.01",
    "net.d_model=32",
    "net.n_layer=1",
    "net.n_head=2",
    "net.d_qk=16",
]
SMOKE_OVERRIDES = [
    "rollout.num_envs=16",
    "rollout.steps=32",
    "optim.bs=256",
    "optim.update_epochs=1",
]
SMOKE_STEPS = 4096
#: hyperstate's rolling checkpoint of the run (``latest-step<N>``, rewritten at every update):
#: what ``--resume`` continues from after a session stops.
RESUME_FOLDER = "checkpoints"


def trainer_overrides(game: str, steps: int, seed: int, smoke: bool, extra: List[str]) -> List[str]:
    """BASE_OVERRIDES, the run's own fields, the game's recipe (when its trainer is enn-trainer),
    then ``extra``: a later field wins, so the user's override the recipe."""
    overrides = list(BASE_OVERRIDES) + (SMOKE_OVERRIDES if smoke else [])
    overrides += [f"total_timesteps={steps}", f"seed={seed}", f"name={game}", "track=false"]
    overrides.append(f"env.id=procgen-{game}")  # names the TensorBoard run
    recipe = GAMES[game].recipe if game in GAMES else None
    if recipe is not None and recipe.trainer == "enn":
        overrides += recipe.enn_overrides
    return overrides + list(extra)


class EpisodeLogger(VecEnv):
    """A pass-through VecEnv that writes every finished episode to a JSONL file. ``steps``: the
    env steps before it (a resumed run's), from which its records count on."""

    def __init__(self, env: VecEnv, out: TextIO, steps: int = 0) -> None:
        self.env = env
        self.out = out
        self.returns = np.zeros(len(env), dtype=np.float64)
        self.lengths = np.zeros(len(env), dtype=np.int64)
        self.steps = steps
        self.recent: List[float] = []

    def obs_space(self) -> ObsSpace:
        return self.env.obs_space()

    def action_space(self) -> Dict[str, Any]:
        return self.env.action_space()

    def reset(self, obs_config: ObsSpace) -> VecObs:
        self.returns[:] = 0
        self.lengths[:] = 0
        return self.env.reset(obs_config)

    def act(self, actions: Mapping[str, RaggedBufferI64], obs_filter: ObsSpace) -> VecObs:
        obs = self.env.act(actions, obs_filter)
        self.steps += len(self.env)
        self.returns += obs.reward
        self.lengths += 1
        for i in np.flatnonzero(obs.done):
            # A procgen episode succeeds exactly when it pays the level's completion reward;
            # level_complete is read from the state by the vec env when available.
            complete = getattr(self.env, "last_level_complete", None)
            record = {
                "kind": "episode",
                "step": self.steps,
                "return": float(self.returns[i]),
                "length": int(self.lengths[i]),
                "level_complete": bool(complete[i]) if complete is not None else None,
            }
            self.out.write(json.dumps(record) + "\n")
            self.recent.append(float(self.returns[i]))
            self.returns[i] = 0
            self.lengths[i] = 0
        return obs

    def render(self, **kwargs: Any) -> Any:
        return self.env.render(**kwargs)

    def __len__(self) -> int:
        return len(self.env)

    def close(self) -> None:
        self.env.close()


def procgen_options(defaults: GameDefaults) -> Dict[str, Any]:
    """What training passes to procgen besides the game: easy mode and the game's options."""
    return {"distribution_mode": "easy", **defaults.env_options}


def make_env(
    kind: str, game: str, num_envs: int, seed: int, defaults: GameDefaults, actor: str = "global"
) -> VecEnv:
    from procgen_entities.entity_gym.vec_env import ProcgenVecEnv

    options = procgen_options(defaults)
    if kind == "fast":
        return ProcgenVecEnv(
            game, num_envs, seed=seed, relative_positions=True, tilemap=defaults.tilemap,
            actor=actor, **options,
        )  # fmt: skip
    if kind == "seed-style":
        if defaults.tilemap:
            raise UsageError("the seed-style env has no tilemap entities: pass --tilemap none")
        from entity_gym.env import EnvList

        from procgen_entities.entity_gym.baselines import SeedStyleEnv

        seeds = iter(range(seed, seed + num_envs))  # one procgen per env: give each its own levels
        return EnvList(lambda: SeedStyleEnv(game, next(seeds), **options), num_envs)
    raise UsageError(f"unknown env kind {kind!r}; valid: fast, seed-style")


def run_random_policy(env: EpisodeLogger, steps: int, metrics: TextIO, bar: Any, seed: int) -> None:
    """Uniformly random actions for `steps` env steps, logged like a training run."""
    rng = np.random.default_rng(seed)
    space = env.obs_space()
    n = len(env)
    ones = np.ones(n, dtype=np.int64)
    started = time.perf_counter()
    env.reset(space)
    try:
        while env.steps < steps:
            for _ in range(64):
                chosen = rng.integers(0, NUM_ACTIONS, size=(n, 1))
                env.act({"move": RaggedBufferI64.from_flattened(chosen, ones)}, space)
            elapsed = time.perf_counter() - started
            record = {
                "kind": "update", "step": env.steps, "seconds": round(elapsed, 2),
                "steps_per_second": round(env.steps / max(elapsed, 1e-9), 1),
                "mean_return": float(np.mean(env.recent)) if env.recent else None,
                "episodes": len(env.recent),
            }  # fmt: skip
            metrics.write(json.dumps(record) + "\n")
            env.recent = []
            bar.update(env.steps - bar.n)
    finally:
        env.close()


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m procgen_entities.train", description=__doc__.split("\n")[0]
    )
    parser.add_argument("game", help=f"one of {', '.join(DEFAULTS)} (others run with no tilemap)")
    parser.add_argument("--smoke", action="store_true", help="a tiny run (< 2 minutes)")
    parser.add_argument("--steps", type=int, default=2_000_000, help="total env steps")
    parser.add_argument("--minutes", type=float, default=None, help="stop after this long")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-levels", type=int, default=0,
                        help="train on levels 0..N-1 only (0: the full distribution)")  # fmt: skip
    parser.add_argument("--env", default="fast", choices=["fast", "seed-style"])
    parser.add_argument(
        "--tilemap",
        default="default",
        choices=["default", "none", "tiles", "runs", "columns", "chunks"],
        help="tilemap entities (default: the game's; seed-style envs have none)",
    )
    parser.add_argument("--out", default=None, help="run folder (default runs/GAME-SEED-TIME)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --out from its latest checkpoint")  # fmt: skip
    parser.add_argument("--actor", default="global", choices=["global", "player"],
                        help="the entity that takes the action")  # fmt: skip
    parser.add_argument(
        "--random-policy", action="store_true",
        help="no training: uniformly random actions in the same env, as a baseline curve",
    )  # fmt: skip
    parser.add_argument("overrides", nargs="*", help="enn-trainer fields: a.b=value")
    return parser.parse_intermixed_args(argv)


def _usage_error(args: argparse.Namespace) -> Optional[str]:
    """What is wrong with the command line before anything is imported, or None."""
    try:
        get_game(args.game)
    except ValueError as exc:
        return str(exc)
    bad = [o for o in args.overrides if "=" not in o]
    if bad:
        return f"overrides must look like field.path=value, got {bad}"
    if not 0 <= args.num_levels < 2**31:
        return f"--num-levels must be 0 (all levels) or a positive count, not {args.num_levels}"
    if args.resume and (args.out is None or args.random_policy or args.smoke):
        return "--resume continues the run in --out (not with --smoke or --random-policy)"
    found = resumed_steps(Path(args.out)) if args.out is not None else None
    if found is not None and not args.resume:
        return f"{args.out} holds a run's checkpoints: pass --resume, or another --out"
    if args.resume and found is None:
        return f"--resume: {args.out} has no {RESUME_FOLDER}/latest-step* checkpoint"
    return None


def resumed_steps(out_dir: Path) -> Optional[int]:
    """The env steps of the run's rolling checkpoint in ``out_dir`` (None: there is none)."""
    found = []
    for path in (out_dir / RESUME_FOLDER).glob("latest-step*"):
        match = re.fullmatch(r"latest-step(\d+)", path.name)
        if match and (path / "state.ron").is_file():
            found.append(int(match.group(1)))
    return max(found) if found else None


def recorded_overrides(overrides: List[str]) -> List[str]:
    """The trainer overrides a run records (metrics, env.json): all but MACHINE_OVERRIDES (a
    record that held them would carry one machine's absolute paths into committed files)."""
    return [o for o in overrides if not o.startswith(MACHINE_OVERRIDES)]


def _run_settings(args: argparse.Namespace) -> Tuple[GameDefaults, int, Path, List[str]]:
    """(the game's env settings with --tilemap applied, steps, the run folder (made), the
    trainer's overrides)."""
    defaults = DEFAULTS.get(args.game, GameDefaults(tilemap=None, r_min=0.0, r_max=10.0))
    if args.tilemap != "default":
        tilemap = None if args.tilemap == "none" else args.tilemap
        defaults = GameDefaults(tilemap, defaults.r_min, defaults.r_max, defaults.env_options)
    if args.num_levels:  # procgen's option: the env, the run record and env.json all carry it
        options = {**defaults.env_options, "num_levels": args.num_levels}
        defaults = GameDefaults(defaults.tilemap, defaults.r_min, defaults.r_max, options)
    steps = SMOKE_STEPS if args.smoke else args.steps
    out_dir = Path(args.out or f"runs/{args.game}-{args.seed}-{time.strftime('%Y%m%d-%H%M%S')}")
    out_dir.mkdir(parents=True, exist_ok=True)
    overrides = trainer_overrides(args.game, steps, args.seed, args.smoke, args.overrides)
    overrides.append(f"data_dir={out_dir}")  # str fields are taken verbatim (no quotes)
    if args.minutes:
        overrides.append(f"max_train_time={int(args.minutes * 60)}")
    return defaults, steps, out_dir, overrides


def _progress_manager(
    base: Any, loggers: List[EpisodeLogger], metrics: TextIO, bar: Any, resumed: int = 0
) -> Any:
    """A hyperstate StateManager class (``base``) that logs an update record and moves the bar
    at every step() (enn-trainer calls it once per update, after logging). ``resumed``: the
    steps the run had before this process (its steps/s counts only this process's)."""
    started = time.perf_counter()

    class Progress(base):  # type: ignore[misc, valid-type]
        def step(self) -> None:
            super().step()
            done = loggers[0].steps if loggers else 0
            elapsed = time.perf_counter() - started
            recent = loggers[0].recent if loggers else []
            record = {
                "kind": "update", "step": done, "seconds": round(elapsed, 2),
                "steps_per_second": round((done - resumed) / max(elapsed, 1e-9), 1),
                "mean_return": float(np.mean(recent)) if recent else None,
                "episodes": len(recent),
            }  # fmt: skip
            metrics.write(json.dumps(record) + "\n")
            if loggers:
                loggers[0].recent = []
            bar.update(done - bar.n)
            if recent:
                bar.set_postfix(
                    ret=f"{np.mean(recent):.2f}", sps=f"{record['steps_per_second']:.0f}"
                )

    return Progress


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    problem = _usage_error(args)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    # One torch thread: the env's own threads need the other core (2-8x faster measured here).
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    from enn_trainer import State, TrainConfig, init_train_state, train
    from hyperstate import StateManager
    from tqdm import tqdm

    torch.set_num_threads(1)
    defaults, steps, out_dir, overrides = _run_settings(args)
    done = resumed_steps(out_dir) if args.resume else 0
    assert done is not None  # _usage_error checked it
    metrics = _open_metrics(args, out_dir / "metrics.jsonl", defaults, overrides, done)
    loggers: List[EpisodeLogger] = []

    def factory(cfg: Any, num_envs: int, processes: int, first_env_index: int) -> EpisodeLogger:
        # first_env_index is not a seed (always 0 without xprun): seed from the run instead,
        # and a resumed run from its steps too (new levels, not the first ones again)
        seed = args.seed + 1000 * len(loggers) + done
        env = EpisodeLogger(
            make_env(args.env, args.game, num_envs, seed, defaults, args.actor), metrics, done
        )
        loggers.append(env)
        return env

    bar = tqdm(total=steps, initial=done, unit="step", desc=f"{args.game} ({args.env})",
               file=sys.stderr)  # fmt: skip
    if args.random_policy:
        try:
            run_random_policy(factory(None, 64, 1, 0), steps, metrics, bar, args.seed)
        finally:
            bar.close()
            metrics.close()
        print(f"metrics: {out_dir / 'metrics.jsonl'}")
        return 0
    progress = _progress_manager(StateManager, loggers, metrics, bar, done)
    # hyperstate loads the latest checkpoint of checkpoint_dir (config and state: weights,
    # optimiser, step) when there is one, and rewrites it at every update
    sm = progress(TrainConfig, State, init_train_state, init_path=None, overrides=overrides,
                  checkpoint_dir=out_dir / RESUME_FOLDER)  # fmt: skip
    try:
        train(sm, factory)
    finally:
        bar.close()
        metrics.close()
    if args.env == "fast":
        steps_done = loggers[0].steps if loggers else 0
        save_checkpoint(sm, out_dir / "checkpoint", args, defaults, steps_done, overrides)
        print(f"checkpoint: {out_dir / 'checkpoint'}")
    print(f"metrics: {out_dir / 'metrics.jsonl'}")
    return 0


def _open_metrics(
    args: argparse.Namespace, path: Path, defaults: GameDefaults, overrides: List[str], done: int
) -> TextIO:
    """metrics.jsonl, started with the run record (a resumed run appends one more, with
    ``resumed_at``, as sb3_ppo does)."""
    metrics = open(path, "a" if done else "w", buffering=1)
    meta = {
        "kind": "run", "game": args.game, "seed": args.seed,
        "env": args.env + (", random policy" if args.random_policy else ""),
        "tilemap": defaults.tilemap, "r_min": defaults.r_min, "r_max": defaults.r_max,
        "overrides": recorded_overrides(overrides), "user_overrides": args.overrides,
        "actor": args.actor, "resumed_at": done, "num_levels": args.num_levels,
    }  # fmt: skip
    metrics.write(json.dumps(meta) + "\n")
    return metrics


def save_checkpoint(
    sm: Any, folder: Path, args: argparse.Namespace, defaults: GameDefaults, steps: int,
    overrides: List[str],
) -> None:  # fmt: skip
    """The trained RogueNet (hyperstate's checkpoint, in ``folder/enn``) with the env it was
    trained on, for ``python -m procgen_entities.evaluate`` (agents/checkpoint.py)."""
    from procgen_entities.agents.checkpoint import Checkpoint, EnvConfig
    from procgen_entities.agents.enn_policy import ENN_FOLDER

    env = EnvConfig(game=args.game, tilemap=defaults.tilemap, **procgen_options(defaults))
    trainer = {
        "trainer": "enn-trainer PPO RogueNet",
        "seed": args.seed,
        "actor": args.actor,
        "overrides": recorded_overrides(overrides),
        "user_overrides": args.overrides,
    }

    Checkpoint(env=env, steps=steps, trainer=trainer).save(folder)
    if (folder / ENN_FOLDER).is_dir():  # a resumed run's earlier final checkpoint: replaced
        shutil.rmtree(folder / ENN_FOLDER)
    sm.checkpoint(str(folder / ENN_FOLDER))
