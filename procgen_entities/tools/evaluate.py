"""Evaluate a checkpoint on levels it did not train on, next to baselines on the same levels.

    python -m procgen_entities.evaluate CHECKPOINT [--episodes 1000] [--seed S] [--sampled]
                                        [--baselines all|none] [--batch 256]
    python -m procgen_entities.evaluate CHECKPOINT --levels DIR [--json FILE]
    python -m procgen_entities.evaluate --game GAME [--episodes N] [--seed S] [--json FILE]

Runs the checkpoint (greedy unless ``--sampled``) for one episode on each of ``--episodes``
levels drawn with ``--seed`` (procgen's level sampling; the training used other seeds, and
with the full distribution a level repeats with probability ~1e-6; ``--train-levels``: drawn
from the checkpoint's own ``num_levels`` training levels instead), then the baselines on the
same levels: uniformly random actions, every constant action (the best is shown), and for
coinrun and bigfish a scripted hazard-aware rule (``SCRIPTED``). Prints per policy the
completion rate and mean return with 95% confidence intervals, the return normalised by the
procgen paper's range (``Game.return_range``), and the episodes' ends by cause (complete, each
of the game's hazards as the terminal state shows it, see death_cause, timeout, other); the
last line is the checkpoint's ``completion <percent>% return <mean> over <N> episodes``.
``--json FILE`` writes the table. At most ``--batch`` envs (default 256) run at once: more
episodes run in batches on the same levels, with the same results (the random baseline's draws
too; a ``--sampled`` checkpoint draws its actions from ``--seed`` batch after batch, so the same
seed and ``--batch`` repeat its figures exactly, and another ``--batch`` moves them within their
noise). A checkpoint is an SB3 one (tools/sb3_ppo.py; data files only, see agents/checkpoint.py)
or an enn-trainer one (``python -m procgen_entities.train`` writes ``DIR/checkpoint``;
agents/enn_policy.py). ``--backend numpy`` runs an SB3 checkpoint without torch (the default,
auto, uses torch when it and SB3 are installed).

``--levels DIR`` plays the checkpoint instead for one episode from each level file of DIR (text
levels ``*.txt`` and saved get_state blobs, level_files.py; every file not starting with '.',
all validated before any episode runs) and prints one row per level (how its episode ended,
return, steps), then the same last line over the levels. Each level is played in the env its
state fits (its distribution mode and options; at most ``--batch`` levels per env), with the
checkpoint's observation; no baselines.

``--game GAME`` (instead of a checkpoint) runs the baselines alone, with the game's default
observation (EntityVectorEnv's), on the levels a checkpoint of the game gets (the full
distribution, easy unless ``--mode``): the same table, no checkpoint row or last line; its
``--json`` also names the game and mode. The checkpoint's options (``--levels``,
``--train-levels``, ``--sampled``, ``--backend``, ``--baselines none``) are refused with it.

Exit status: 0 on success, 2 for a bad option or checkpoint folder, or for neither or both of
a checkpoint and ``--game`` (one line on stderr, checked before any episode runs).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, NoReturn, Optional

from tqdm import tqdm

from procgen_entities.agents.checkpoint import (
    Checkpoint,
    CheckpointError,
    EnvConfig,
    load_policy,
    make_env,
)

# The evaluation itself is agents/evaluation.py's; this path re-exports its names (they were
# defined here, and are a contract: tests/test_layers.py).
from procgen_entities.agents.evaluation import (
    DEFAULT_BATCH,
    EVAL_SEED,
    HAZARD_RULES,
    SCRIPTED,
    BatchedPolicy,
    Episodes,
    Policy,
    RandomActions,
    baselines,
    death_cause,
    first_level_seeds,
    observation_form,
    run_episodes,
    run_levels,
    scripted_bigfish,
    scripted_coinrun,
)
from procgen_entities.features import ACTION_LABELS
from procgen_entities.games import GAME_NAMES, get_game
from procgen_entities.level_files import Level, LevelError, level_paths, load_levels
from procgen_entities.procgen_envs import valid_modes

__all__ = [
    "BatchedPolicy", "DEFAULT_BATCH", "EVAL_SEED", "Episodes", "HAZARD_RULES", "Policy",
    "RandomActions", "SCRIPTED", "baselines", "death_cause", "first_level_seeds", "main",
    "observation_form", "run_episodes", "run_levels", "scripted_bigfish", "scripted_coinrun",
]  # fmt: skip

PROG = "python -m procgen_entities.evaluate"
#: procgen's rand_seed is an int32, and each env group seeds procgen with seed + its index.
MAX_SEED = 2**31 - 1 - 4096


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
    parser.add_argument("checkpoint", type=Path, nargs="?", default=None,
                        help="a checkpoint folder (env.json, policy.json)")  # fmt: skip
    parser.add_argument("--game", default=None,
                        help="no checkpoint: the baselines of GAME alone")  # fmt: skip
    parser.add_argument("--episodes", type=_bounded(1, 10**6), default=1000)
    parser.add_argument("--batch", type=_bounded(1, 10**6), default=DEFAULT_BATCH,
                        help="envs run at once (levels, results do not depend on it)")  # fmt: skip
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


def _check_json(args: argparse.Namespace) -> None:
    if args.json is not None and (args.json.is_dir() or not args.json.parent.is_dir()):
        _fail(f"--json {args.json}: not a file in an existing folder")


def _check_mode(config: EnvConfig, mode: Optional[str]) -> None:
    if mode:
        if mode not in valid_modes(config.game):
            _fail(f"--mode {mode!r}: {config.game} has {', '.join(valid_modes(config.game))}")
        config.distribution_mode = mode


#: Options that only a checkpoint uses, with their defaults: --game refuses them.
_CHECKPOINT_ONLY = {"levels": None, "train_levels": False, "sampled": False, "baselines": "all",
                    "backend": "auto"}  # fmt: skip


def _prepare_game(args: argparse.Namespace) -> EnvConfig:
    """The env of ``--game`` (no checkpoint): the game's default observation on the levels a
    checkpoint's evaluation plays (the full distribution, easy unless --mode), every problem a
    one-line exit 2."""
    if args.checkpoint is not None:
        _fail(f"give a checkpoint folder or --game, not both ({args.checkpoint})")
    if args.game not in GAME_NAMES:
        _fail(f"--game {args.game!r}: not a procgen game ({', '.join(GAME_NAMES)})")
    for name, default in _CHECKPOINT_ONLY.items():
        if getattr(args, name) != default:
            option = f"--{name.replace('_', '-')}" + (" none" if name == "baselines" else "")
            _fail(f"{option} needs a checkpoint (--game runs the baselines alone)")
    _check_json(args)
    config = EnvConfig(args.game)
    _check_mode(config, args.mode)
    return config


def _prepare(args: argparse.Namespace) -> tuple:
    """(checkpoint, config, policy) of the command line, every problem a one-line exit 2."""
    if args.checkpoint is None:
        _fail("give a checkpoint folder or --game GAME (the baselines alone)")
    _check_json(args)
    try:
        checkpoint = Checkpoint.load(args.checkpoint)
        config = checkpoint.env
        _check_mode(config, args.mode)
        if not args.train_levels:
            config.num_levels, config.start_level = 0, 0  # test levels: the full distribution
        policy = load_policy(args.checkpoint, deterministic=not args.sampled,
                             backend=args.backend, seed=args.seed)  # fmt: skip
        make_env(config, 1, args.seed, flatten=policy.flatten).close()  # env.json's keywords
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
    with tqdm(total=len(levels), unit="episode", disable=None) as bar:
        result = run_levels(config, policy, levels, args.seed, progress=bar, batch=args.batch)
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


def _summaries(game: str, results: Mapping[str, Episodes]) -> Dict[str, Dict[str, Any]]:
    """Each policy's summary with the procgen paper's normalised return (Game.return_range)."""
    summaries = {name: r.summary() for name, r in results.items()}
    r_range = get_game(game).return_range
    if r_range is not None:
        for summary in summaries.values():
            summary["normalised"] = (summary["return"] - r_range[0]) / (r_range[1] - r_range[0])
    return summaries


def _print_table(config: EnvConfig, args: argparse.Namespace, summaries: Mapping[str, Any]) -> None:
    levels = f"of its {config.num_levels} training levels" if config.num_levels else "levels"
    print(f"{config.game}, {config.distribution_mode}, {args.episodes} episodes on {levels} "
          f"(seed {args.seed})")  # fmt: skip
    print(f"{'policy':34s} {'completion':>14s}   {'return (normalised)':>13s}   episode ends")
    for name, summary in summaries.items():
        print(_row(name, summary))


def _main_game(args: argparse.Namespace) -> int:
    """``--game``: the baselines alone, on the levels a checkpoint of the game would play."""
    config = _prepare_game(args)
    policies = len(ACTION_LABELS) + 1 + (config.game in SCRIPTED)
    with tqdm(total=policies * args.episodes, unit="episode", disable=None) as bar:
        results = baselines(config, args.episodes, args.seed, bar, args.batch)
    summaries = _summaries(config.game, results)
    _print_table(config, args, summaries)
    if args.json:
        record = {"seed": args.seed, "game": config.game,
                  "distribution_mode": config.distribution_mode, **summaries}  # fmt: skip
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    args = _parse_args(argv)
    if args.game is not None:
        return _main_game(args)
    checkpoint, config, policy = _prepare(args)
    if "torch" in sys.modules:  # one thread: its pool fought the env's for the cores (3x slower)
        sys.modules["torch"].set_num_threads(1)
    label = f"checkpoint ({'sampled' if args.sampled else 'greedy'}, {checkpoint.steps:,} steps)"
    if args.levels is not None:
        return _main_levels(args, config, policy, label)
    policies = 1 + (len(ACTION_LABELS) + 1 + (config.game in SCRIPTED)) * (args.baselines == "all")
    with tqdm(total=policies * args.episodes, unit="episode", disable=None) as bar:
        results = {label: run_episodes(config, policy, args.episodes, args.seed, progress=bar,
                                       batch=args.batch)}  # fmt: skip
        if args.baselines == "all":
            results.update(baselines(config, args.episodes, args.seed, bar, args.batch))
    summaries = _summaries(config.game, results)
    _print_table(config, args, summaries)
    if args.json:
        args.json.write_text(json.dumps({"seed": args.seed, **summaries}, indent=1) + "\n")
    mine = summaries[label]
    print(f"completion {100 * mine['completion']:.1f}% return {mine['return']:.2f} "
          f"over {args.episodes} episodes")  # fmt: skip
    return 0
