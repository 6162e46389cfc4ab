"""Evaluate a checkpoint on levels it did not train on, next to baselines on the same levels.

    python -m procgen_entities.evaluate CHECKPOINT [--episodes 1000] [--seed S] [--sampled]
                                        [--baselines all|none]
    python -m procgen_entities.evaluate CHECKPOINT --levels DIR [--json FILE]

Runs the checkpoint (greedy unless ``--sampled``) for one episode on each of ``--episodes``
levels drawn with ``--seed`` (procgen's level sampling; the training used other seeds, and
with the full distribution a level repeats with probability ~1e-6; ``--train-levels``: drawn
from the checkpoint's own ``num_levels`` training levels instead), then the baselines on the
same levels: uniformly random actions, every constant action (the best is shown), and for
coinrun a scripted hazard-aware rule (``SCRIPTED``). Prints per policy the completion rate and
mean return with 95% confidence intervals and the episodes' ends by cause (complete, each of
the game's hazards as the terminal state shows it, timeout, other); the last line is the
checkpoint's ``completion <percent>% return <mean> over <N> episodes``. ``--json FILE`` writes
the table. A checkpoint is an SB3 one (tools/sb3_ppo.py; data files only, see tools/checkpoint.py)
or an enn-trainer one (``python -m procgen_entities.train`` writes ``DIR/checkpoint``;
tools/enn_policy.py). ``--backend numpy`` runs an SB3 checkpoint without torch (the default,
auto, uses torch when it and SB3 are installed).

``--levels DIR`` plays the checkpoint instead for one episode from each level file of DIR (text
levels ``*.txt`` and saved get_state blobs, tools/levels.py; every file not starting with '.',
all validated before any episode runs) and prints one row per level (how its episode ended,
return, steps), then the same last line over the levels. Each level is played in the env its
state fits (its distribution mode and options), with the checkpoint's observation; no baselines.

Exit status: 0 on success, 2 for a bad option or checkpoint folder (one line on stderr, checked
before any episode runs).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, NoReturn, Optional, Tuple

import numpy as np
from tqdm import tqdm

from procgen_entities.features import ACTION_LABELS, feature_space
from procgen_entities.games import Game, get_game
from procgen_entities.procgen_envs import valid_modes
from procgen_entities.tools.checkpoint import (
    Checkpoint,
    CheckpointError,
    EnvConfig,
    load_policy,
    make_env,
    wants_dict_observation,
)
from procgen_entities.tools.levels import Level, LevelError, env_options, level_paths, load_levels

__all__ = ["Episodes", "SCRIPTED", "death_cause", "main", "run_episodes"]

EVAL_SEED = 1_000_003  # the training tools never seed their envs with it
PROG = "python -m procgen_entities.evaluate"
#: procgen's rand_seed is an int32, and each env group seeds procgen with seed + its index.
MAX_SEED = 2**31 - 1 - 4096
Policy = Callable[[Any], np.ndarray]


@dataclass
class Episodes:
    """The first episode of every env: success, return, length and how it ended."""

    complete: np.ndarray
    returns: np.ndarray
    lengths: np.ndarray
    causes: List[str] = field(default_factory=list)

    def summary(self) -> Dict[str, Any]:
        n = len(self.complete)
        rate = float(self.complete.mean())
        spread = float(self.returns.std(ddof=1)) if n > 1 else 0.0
        ends = {c: self.causes.count(c) for c in dict.fromkeys(sorted(self.causes))}
        return {
            "episodes": n, "completion": rate,
            "completion_ci95": 1.96 * math.sqrt(max(rate * (1 - rate), 1e-12) / n),
            "return": float(self.returns.mean()), "return_ci95": 1.96 * spread / math.sqrt(n),
            "length": float(self.lengths.mean()), "ends": ends,
        }  # fmt: skip


def _overlaps(player: np.ndarray, others: np.ndarray, fields: Mapping[str, int]) -> bool:
    x, y, rx, ry = (fields[f] for f in ("x", "y", "rx", "ry"))
    dx = np.abs(others[:, x] - player[x]) < np.abs(others[:, rx]) + abs(player[rx])
    dy = np.abs(others[:, y] - player[y]) < np.abs(others[:, ry]) + abs(player[ry])
    return bool((dx & dy).any())


def _touches_tile(player: np.ndarray, grid: np.ndarray, tiles: tuple, fields: Mapping) -> bool:
    x, y, rx, ry = (float(player[fields[f]]) for f in ("x", "y", "rx", "ry"))
    h, w = grid.shape
    cols = range(max(0, math.floor(x - rx)), min(w, math.floor(x + rx) + 1))
    rows = range(max(0, math.floor(y - ry)), min(h, math.floor(y + ry) + 1))
    return any(int(grid[r, c]) in tiles for r in rows for c in cols)


def death_cause(game: Game, batch: Any, i: int) -> str:
    """Which of the game's hazards the player touches in terminal state ``i`` of a StateBatch
    (the first in declaration order), or "other"."""
    fields = {name: batch.entity_fields.index(name) for name in ("x", "y", "rx", "ry", "type")}
    rows = batch.state_entities(i)
    player = rows[0]
    types = rows[:, fields["type"]].astype(int)
    ids = {name: tid for tid, name in game.entity_types.items()}
    for hazard in game.hazards:
        if hazard in ids:
            if _overlaps(player, rows[types == ids[hazard]], fields):
                return hazard.lower()
        elif batch.grid is not None and _touches_tile(
            player, batch.grid[i], game.tiles[hazard], fields
        ):
            return hazard.lower()
    return "other"


def run_episodes(
    config: EnvConfig,
    policy: Policy,
    episodes: int,
    seed: int,
    *,
    flatten: bool = True,
    progress: Optional[Any] = None,
) -> Episodes:
    """``policy`` (a batch of observations -> actions) for one episode in each of ``episodes``
    envs seeded with ``seed``: the same levels for every policy with the same seed.
    ``progress``: a tqdm bar, advanced by every finished episode."""
    # consecutive group seeds: the levels every recorded evaluation was measured on
    env = make_env(config, episodes, seed, flatten=flatten, autoreset_mode="NextStep",
                   group_seeding="consecutive")  # fmt: skip
    obs, _ = env.reset(seed=seed)
    return _first_episodes(env, get_game(config.game), policy, obs, progress)


def _first_episodes(
    env: Any, game: Game, policy: Policy, obs: Any, progress: Optional[Any]
) -> Episodes:
    """Step ``env`` (NEXT_STEP resets, from observation ``obs``) until every env's episode has
    ended; closes it."""
    episodes = env.num_envs
    finished = np.zeros(episodes, dtype=bool)
    result = Episodes(np.zeros(episodes, bool), np.zeros(episodes), np.zeros(episodes, np.int64))
    causes = [""] * episodes
    while not finished.all():
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        live = ~finished
        result.returns[live] += reward[live]
        result.lengths[live] += 1
        ended = (terminated | truncated) & live
        if not ended.any():
            continue
        result.complete[ended] = info["prev_level_complete"][ended]
        indices, terminal = env._stepper.final_states()
        for k, i in enumerate(indices):
            if not ended[i]:
                continue
            if result.complete[i]:
                causes[i] = "complete"
            elif truncated[i]:
                causes[i] = "timeout"
            else:
                causes[i] = death_cause(game, terminal, k)
        finished |= ended
        if progress is not None:
            progress.update(int(ended.sum()))
    env.close()
    result.causes = causes
    return result


def scripted_coinrun(feature_names: Mapping[str, tuple]) -> Policy:
    """Right+jump, except walk right while the nearest hazard entity ahead (coinrun's saws and
    enemies, ``Game.hazards``; within 2 tiles of height) is 3.5-8 tiles away, so the jump starts
    close enough to clear it; a walk that is blocked (the player not moving right) jumps."""
    game = get_game("coinrun")
    hazards = [name for name in game.hazards if name in game.entity_types.values()]
    rel_x = feature_names[hazards[0]].index("rel_x")
    rel_y = feature_names[hazards[0]].index("rel_y")
    vx = feature_names["Player"].index("vx")
    right, right_up = ACTION_LABELS.index("right"), ACTION_LABELS.index("right_up")

    def policy(obs: Mapping[str, np.ndarray]) -> np.ndarray:
        nearest = np.full(len(obs["global"]), np.inf)
        for name in hazards:
            ahead = obs[f"{name}_mask"] & (obs[name][..., rel_x] > 0)
            ahead &= np.abs(obs[name][..., rel_y]) < 2
            distance = np.where(ahead, obs[name][..., rel_x], np.inf).min(axis=1)
            nearest = np.minimum(nearest, distance)
        moving = obs["Player"][:, 0, vx] > 0.05
        return np.where((nearest > 3.5) & (nearest < 8) & moving, right, right_up)

    return policy


def run_levels(
    config: EnvConfig,
    policy: Policy,
    levels: List[Level],
    seed: int,
    *,
    flatten: bool = True,
    progress: Optional[Any] = None,
) -> Episodes:
    """One episode of ``policy`` from each of ``levels`` (validated), in the checkpoint's
    observation; levels of the same procgen options share one env, restored with
    reset(options={"states": ...})."""
    groups: Dict[Tuple[Any, ...], List[int]] = {}
    for i, level in enumerate(levels):
        groups.setdefault(tuple(sorted(env_options(level.state).items())), []).append(i)
    n = len(levels)
    result = Episodes(np.zeros(n, bool), np.zeros(n), np.zeros(n, np.int64), [""] * n)
    for options, indices in groups.items():
        env = make_env(config, len(indices), seed, flatten=flatten, autoreset_mode="NextStep",
                       **dict(options))  # fmt: skip
        obs, _ = env.reset(options={"states": [levels[i].blob for i in indices]})
        part = _first_episodes(env, get_game(config.game), policy, obs, progress)
        for k, i in enumerate(indices):
            result.complete[i], result.returns[i] = part.complete[k], part.returns[k]
            result.lengths[i], result.causes[i] = part.lengths[k], part.causes[k]
    return result


#: Scripted baselines per game (a function of the dict observation's feature names).
SCRIPTED: Dict[str, Callable[[Mapping[str, tuple]], Policy]] = {"coinrun": scripted_coinrun}


def _constant(action: int, n: int) -> Policy:
    return lambda obs: np.full(n, action)


def baselines(
    config: EnvConfig, episodes: int, seed: int, progress: Optional[Any] = None
) -> Dict[str, Episodes]:
    """Random, the best constant action, and the game's scripted rule, on the same levels."""
    rng = np.random.default_rng(seed)
    n = len(ACTION_LABELS)
    results = {"random": run_episodes(config, lambda o: rng.integers(0, n, episodes), episodes,
                                      seed, flatten=False, progress=progress)}  # fmt: skip
    constants = {
        a: run_episodes(
            config, _constant(a, episodes), episodes, seed, flatten=False, progress=progress
        )  # fmt: skip
        for a in range(n)
    }
    best = max(constants, key=lambda a: (constants[a].complete.mean(), constants[a].returns.mean()))
    results[f"constant {ACTION_LABELS[best]} (best of {n})"] = constants[best]
    if config.game in SCRIPTED:
        space = feature_space(config.game, relative_positions=True)  # the env's entity features
        names = {name: tuple(e.features) for name, e in space.entities.items()}
        results["scripted"] = run_episodes(
            config, SCRIPTED[config.game](names), episodes, seed, flatten=False, progress=progress
        )
    return results


def _row(name: str, summary: Mapping[str, Any]) -> str:
    ends = " ".join(f"{k} {v}" for k, v in summary["ends"].items())
    normalised = f" ({summary['normalised']:+.2f})" if "normalised" in summary else ""
    return (
        f"{name:34s} {100 * summary['completion']:5.1f}% ± {100 * summary['completion_ci95']:4.1f}"
        f"   {summary['return']:6.2f} ± {summary['return_ci95']:4.2f}{normalised}   {ends}"
    )


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as one line (no usage block), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _fail(message: str) -> NoReturn:
    sys.stdout.flush()
    sys.stderr.write(f"{PROG}: error: {message}\n")
    raise SystemExit(2)


def _bounded(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {low}..{high}, got {value}")
        return value

    return parse


def _parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = _Parser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", type=Path, help="a checkpoint folder (env.json, policy.json)")
    parser.add_argument("--episodes", type=_bounded(1, 10**6), default=1000)
    parser.add_argument("--seed", type=_bounded(0, MAX_SEED), default=EVAL_SEED,
                        help=f"level sampling seed (0..{MAX_SEED})")  # fmt: skip
    parser.add_argument("--sampled", action="store_true", help="sample actions (not greedy)")
    parser.add_argument("--baselines", choices=("all", "none"), default="all")
    parser.add_argument("--mode", default=None, help="another distribution_mode than trained")
    parser.add_argument("--train-levels", action="store_true",
                        help="the levels the checkpoint trained on (its num_levels), not the "
                             "full distribution")  # fmt: skip
    parser.add_argument("--json", type=Path, default=None, help="write the table here")
    parser.add_argument("--backend", choices=("auto", "torch", "numpy"), default="auto",
                        help="SB3 checkpoints: torch (SB3) or numpy inference")  # fmt: skip
    parser.add_argument("--levels", type=Path, default=None, metavar="DIR",
                        help="one episode from each level file of DIR (text levels .txt, "
                             "saved states), reported per level")  # fmt: skip
    return parser.parse_args(argv)


def _prepare(args: argparse.Namespace) -> tuple:
    """(checkpoint, config, policy) of the command line, every problem a one-line exit 2."""
    if args.json is not None and (args.json.is_dir() or not args.json.parent.is_dir()):
        _fail(f"--json {args.json}: not a file in an existing folder")
    try:
        checkpoint = Checkpoint.load(args.checkpoint)
        config = checkpoint.env
        if args.mode:
            if args.mode not in valid_modes(config.game):
                _fail(f"--mode {args.mode!r}: {config.game} has "
                      f"{', '.join(valid_modes(config.game))}")  # fmt: skip
            config.distribution_mode = args.mode
        if not args.train_levels:
            config.num_levels, config.start_level = 0, 0  # test levels: the full distribution
        policy = load_policy(args.checkpoint, deterministic=not args.sampled,
                             backend=args.backend, seed=args.seed)  # fmt: skip
        flat = not wants_dict_observation(args.checkpoint)
        make_env(config, 1, args.seed, flatten=flat).close()  # env.json's keywords are valid
    except ImportError as exc:
        _fail(f"{args.checkpoint} needs a package that is not installed ({exc})")
    except (CheckpointError, ValueError, TypeError) as exc:
        line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        _fail(line if str(args.checkpoint) in line else f"{args.checkpoint}: {line}")
    return checkpoint, config, policy


def _read_levels(folder: Path, game: str) -> List[Level]:
    """The validated levels of ``--levels DIR``, every problem a one-line exit 2."""
    try:
        levels = load_levels(level_paths(folder))
    except LevelError as exc:
        _fail(f"--levels {folder}: {str(exc).splitlines()[0]}")
    for level in levels:
        if level.state.game != game:
            _fail(f"--levels {folder}: {level.name} is a {level.state.game} level; the "
                  f"checkpoint plays {game}")  # fmt: skip
    return levels


def _main_levels(args: argparse.Namespace, config: EnvConfig, policy: Policy, label: str) -> int:
    levels = _read_levels(args.levels, config.game)
    flat = not wants_dict_observation(args.checkpoint)
    with tqdm(total=len(levels), unit="episode", disable=None) as bar:
        result = run_levels(config, policy, levels, args.seed, flatten=flat, progress=bar)
    print(f"{config.game}, {label}, {len(levels)} levels from {args.levels}")
    width = max(24, *(len(level.name) for level in levels))
    print(f"{'level':{width}s} {'end':>10s} {'return':>8s} {'steps':>6s}")
    rows = {}
    for i, level in enumerate(levels):
        rows[level.name] = {"complete": bool(result.complete[i]), "end": result.causes[i],
                            "return": float(result.returns[i]),
                            "length": int(result.lengths[i])}  # fmt: skip
        print(f"{level.name:{width}s} {result.causes[i]:>10s} {result.returns[i]:8.2f} "
              f"{result.lengths[i]:6d}")  # fmt: skip
    summary = result.summary()
    if args.json:
        args.json.write_text(json.dumps({"levels": rows, label: summary}, indent=1) + "\n")
    print(f"completion {100 * summary['completion']:.1f}% return {summary['return']:.2f} "
          f"over {len(levels)} levels")  # fmt: skip
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    args = _parse_args(argv)
    checkpoint, config, policy = _prepare(args)
    if "torch" in sys.modules:  # one thread: its pool fought the env's for the cores (3x slower)
        sys.modules["torch"].set_num_threads(1)
    label = f"checkpoint ({'sampled' if args.sampled else 'greedy'}, {checkpoint.steps:,} steps)"
    if args.levels is not None:
        return _main_levels(args, config, policy, label)
    flat = not wants_dict_observation(args.checkpoint)
    policies = 1 + (len(ACTION_LABELS) + 1 + (config.game in SCRIPTED)) * (args.baselines == "all")
    with tqdm(total=policies * args.episodes, unit="episode", disable=None) as bar:
        results = {label: run_episodes(config, policy, args.episodes, args.seed, flatten=flat,
                                       progress=bar)}  # fmt: skip
        if args.baselines == "all":
            results.update(baselines(config, args.episodes, args.seed, bar))
    summaries = {name: r.summary() for name, r in results.items()}
    r_range = get_game(config.game).return_range
    if r_range is not None:  # the procgen paper's normalised return
        for summary in summaries.values():
            summary["normalised"] = (summary["return"] - r_range[0]) / (r_range[1] - r_range[0])
    levels = f"of its {config.num_levels} training levels" if config.num_levels else "levels"
    print(f"{config.game}, {config.distribution_mode}, {args.episodes} episodes on {levels} "
          f"(seed {args.seed})")  # fmt: skip
    print(f"{'policy':34s} {'completion':>14s}   {'return (normalised)':>13s}   episode ends")
    for name, summary in summaries.items():
        print(_row(name, summary))
    if args.json:
        args.json.write_text(json.dumps({"seed": args.seed, **summaries}, indent=1) + "\n")
    mine = summaries[label]
    print(f"completion {100 * mine['completion']:.1f}% return {mine['return']:.2f} "
          f"over {args.episodes} episodes")  # fmt: skip
    return 0
