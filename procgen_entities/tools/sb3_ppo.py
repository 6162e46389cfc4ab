"""PPO from Stable-Baselines3 on entity observations (EntityVectorEnv, flat form): train, save
checkpoints, resume, evaluate.

    python -m procgen_entities.tools.sb3_ppo GAME [--steps N] [--out DIR] [--seed S]
        [--mode easy|hard] [--num-levels 200] [--resume DIR] [--checkpoint-every N]
        [--ent-coef A[:B]] [--no-window] [--stale-support] [--no-normalize] [--eval-episodes N]
        [--tilemap MODE] [--cap TYPE=N ...] [--drop-feature NAME ...] [--policy mlp|attention]
        [--grid | --no-grid] [--trust-pickle]
        [--separate-value] [--mirror P]
        [--level-sampler uniform|plr [--plr-beta B] [--plr-rho R] [--plr-score positive|l1]
        [--plr-replay-prob P]] [--smoke]

Trains SB3's PPO (MlpPolicy) on ``EntityVectorEnv(GAME, flatten=True, autoreset_mode=SameStep)``
with the game's training tilemap and caps (``Game.training_caps``), writes ``DIR/metrics.jsonl``
(the format ``python -m procgen_entities.plot`` reads) and checkpoint folders (``DIR/checkpoint``
and, every ``--checkpoint-every`` steps, ``DIR/checkpoint-<steps>``; see agents/checkpoint.py).
``--eval-episodes N`` then evaluates the final checkpoint with ``procgen_entities.evaluate``
(into ``DIR/evaluation.json``; the default 0 only prints the command, since 1,000 episodes and
17 policies take minutes). ``--resume DIR`` continues a checkpoint (its env config, policy,
weights, optimizer state, normaliser and step count; the PPO settings it recorded, then
``--ppo``); checkpoints are data files only (agents/checkpoint.py), and a folder in the old
pickled format is refused unless ``--trust-pickle`` (which converts it first). ``--ent-coef
A:B``: the entropy bonus goes linearly from A to B over the run. ``--policy attention``: SB3's
``MultiInputPolicy`` on the dict form with the entity encoder (gymnasium/policy.py: attention
over the masked slots, inputs through symlog, so only rewards are normalised); ``--grid`` adds
the camera square's class image, read by a small CNN (with the MLP: FlatGridExtractor);
``--no-grid`` takes it away from a recipe that has it (the entities and tiles only).
``--separate-value``: the value head gets its own copy of the features extractor (with
``--grid``, its own CNN) instead of sharing the policy's, so the value loss no longer shapes the
features the policy reads (Raileanu and Fergus, "Decoupling Value and Policy for Generalization
in Reinforcement Learning", ICML 2021: a shared trunk fits level-specific value detail that the
policy then overfits to); the MLPs of the two heads are separate either way.
``--mirror P``: each episode is played mirrored left-right with probability P
(gymnasium/mirrored.py: the mirror image of the level, for the games declared symmetric,
``Game.mirror``), which doubles the levels a run learns from; training only, recorded in env.json's
trainer and kept on resume (evaluation plays the real levels).
``--level-sampler plr`` (with ``--num-levels N``): the next episode of an env starts on a level
Prioritized Level Replay draws, by the scores of the levels' last episodes (agents/plr.py); the
default ``uniform`` is procgen's own uniform draw. Needs the train extra.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, NoReturn, Optional, Tuple

from procgen_entities.agents.checkpoint import (
    OPTIMIZER,
    Checkpoint,
    CheckpointError,
    EnvConfig,
    convert,
    load_normalizer,
    make_env,
    read_spec,
    save_sb3,
)
from procgen_entities.errors import UsageError
from procgen_entities.games import Game, Recipe, get_game
from procgen_entities.level_sampling import SCORES

if TYPE_CHECKING:
    from procgen_entities.agents.plr import LevelReplay

__all__ = ["main"]

#: PPO settings: the procgen paper's lambda, lr, clip, epochs and 64 envs x 256 steps per update,
#: with gamma 0.99 (0.999 in the paper: greedy 63% against 68% on coinrun at 1M steps here, with
#: 3x the timeouts; docs/training.md).
HYPERPARAMETERS: Dict[str, Any] = dict(
    n_steps=256, batch_size=2048, n_epochs=3, gamma=0.99, gae_lambda=0.95, learning_rate=5e-4,
    clip_range=0.2, max_grad_norm=0.5,
)  # fmt: skip


class _Metrics:
    """A run's bookkeeping: one "update" record per rollout, one "episode" record per finished
    episode, the entropy schedule, and checkpoints every ``every`` steps. LeanPPO calls its
    hooks (``rollout_start``, ``step``, ``rollout_end``) itself; ``sb3_callback`` wraps them for
    SB3's PPO."""

    def __init__(self, out: Path, meta: Dict[str, Any], schedule: tuple, total: int,
                 every: int, save: Any) -> None:  # fmt: skip
        self.file = (out / "metrics.jsonl").open("a")
        self.file.write(json.dumps({"kind": "run", **meta}) + "\n")
        self.start = time.perf_counter()
        self.schedule, self.total, self.every, self.save = schedule, total, every, save
        self.saved = 0
        self.train_threads = 1
        self.resumed_at = int(meta.get("resumed_at", 0))
        self.levels: Optional["LevelReplay"] = None  # --level-sampler plr

    def rollout_start(self) -> None:
        """The level sampler's record of the rollout's start (SB3's callback sets its torch
        threads here: sb3_callback)."""
        if self.levels is not None:
            self.levels.rollout_start()

    def advantages(self, advantages: Any, starts: Any, dones: Any) -> None:
        """After GAE ([steps, envs] advantages and episode starts, the last step's dones):
        the level sampler scores the finished episodes."""
        if self.levels is not None:
            self.levels.advantages(advantages, starts, dones)

    def step(self, infos: Any, num_timesteps: int) -> None:
        if self.levels is not None:
            self.levels.step()
        for info in infos:
            if "episode" in info:
                self.write(kind="episode", step=num_timesteps,
                           **{"return": info["episode"]["r"]}, length=info["episode"]["l"],
                           level_complete=info.get("level_complete"))  # fmt: skip

    def rollout_end(self, model: Any) -> None:
        seconds = time.perf_counter() - self.start
        start, end = self.schedule
        done = min(1.0, model.num_timesteps / max(self.total, 1))
        coef = start + (end - start) * done
        model.ent_coef = coef  # read per update, by SB3's PPO and LeanPPO alike
        sps = (model.num_timesteps - self.resumed_at) / max(seconds, 1e-9)
        self.write(kind="update", step=model.num_timesteps, seconds=round(seconds, 2),
                   steps_per_second=round(sps, 1), ent_coef=round(coef, 5))  # fmt: skip
        if self.levels is not None:
            self.write(kind="levels", step=model.num_timesteps, **self.levels.record())
        if self.every and model.num_timesteps // self.every > self.saved:
            self.saved = model.num_timesteps // self.every
            self.save(model, f"checkpoint-{model.num_timesteps}")

    def sb3_callback(self) -> Any:
        """The hooks as an SB3 callback (``PPO.learn(callback=...)``), with SB3's torch threads:
        one while the env's pool steps, every usable core for the update."""
        import torch
        from stable_baselines3.common.callbacks import BaseCallback

        outer = self

        class Callback(BaseCallback):  # type: ignore[misc]
            def _on_step(self) -> bool:
                outer.step(self.locals.get("infos", []), self.num_timesteps)
                return True

            def _on_rollout_start(self) -> None:
                torch.set_num_threads(1)  # the env's pool steps on the other core
                outer.rollout_start()

            def _on_rollout_end(self) -> None:
                # the gradient steps that follow have the machine to themselves (the pool's
                # workers sleep between rollouts); LeanPPO sets its own threads
                torch.set_num_threads(outer.train_threads)
                buffer = self.model.rollout_buffer  # type: ignore[attr-defined]  # after GAE
                outer.advantages(buffer.advantages, buffer.episode_starts, self.locals["dones"])
                outer.rollout_end(self.model)

        return Callback()

    def write(self, **record: Any) -> None:
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def _fail(message: str) -> NoReturn:
    """A command-line error: one line on stderr, exit status 2."""
    sys.stderr.write(f"python -m procgen_entities.tools.sb3_ppo: error: {message}\n")
    raise SystemExit(2)


def _parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m procgen_entities.tools.sb3_ppo", description=__doc__.split("\n")[0]
    )
    parser.add_argument("game")
    parser.add_argument("--steps", type=int, default=1_000_000, help="env steps (in total)")
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--mode", default="easy", help="procgen distribution_mode")
    parser.add_argument("--num-levels", type=int, default=0, help="0: the full distribution")
    parser.add_argument("--resume", type=Path, default=None, help="a checkpoint folder")
    parser.add_argument("--trust-pickle", action="store_true",
                        help="--resume from an old pickled checkpoint (converted first; "
                             "unpickling can run code: only folders you trust)")  # fmt: skip
    parser.add_argument("--checkpoint-every", type=int, default=500_000)
    _recipe_args(parser)
    parser.add_argument("--no-window", action="store_true", help="every entity of the level")
    parser.add_argument("--stale-support", action="store_true",
                        help="procgen's has_support instead of on_ground")  # fmt: skip
    parser.add_argument("--no-normalize", action="store_true", help="raw observations")
    _observation_args(parser)
    parser.add_argument("--net", default=None,
                        help="hidden layer sizes (mlp: 256,256; attention: 256)")  # fmt: skip
    parser.add_argument("--policy", choices=("mlp", "attention"), default="mlp",
                        help="flat MLP, or attention over the entity slots")  # fmt: skip
    _grid_args(parser)
    parser.add_argument("--d-model", type=int, default=32, help="attention: token width")
    parser.add_argument("--layers", type=int, default=0, help="attention: self-attention layers")
    parser.add_argument("--ppo", action="append", default=[], metavar="KEY=VALUE",
                        help="override a PPO setting (n_epochs=10, gamma=0.99, ...)")  # fmt: skip
    parser.add_argument("--eval-episodes", type=int, default=0,
                        help="evaluate the final checkpoint on N levels (0: do not)")  # fmt: skip
    parser.add_argument("--eval-baselines", choices=("all", "none"), default="all")
    parser.add_argument(
        "--train-threads",
        type=int,
        default=0,
        help="torch threads for the gradient steps (default: the usable CPUs)",
    )
    _learner_args(parser)
    _level_args(parser)
    parser.add_argument("--smoke", action="store_true", help="2 tiny updates, 16 eval episodes")
    return parser.parse_args(argv)


def _grid_args(parser: argparse.ArgumentParser) -> None:
    """The tile-class image beside the entities, and the CNN that reads it."""
    parser.add_argument(
        "--grid",
        action="store_true",
        help="also the camera square's tile classes as an image (a CNN reads it)",
    )
    parser.add_argument("--grid-entities", action="store_true",
                        help="--grid with the entities' cells marked in it")  # fmt: skip
    parser.add_argument("--grid-boxes", action="store_true",
                        help="--grid-entities with each entity's whole box marked (x ± rx, "
                             "y ± ry: walls, barriers), not only its centre's cell")  # fmt: skip
    parser.add_argument("--grid-centre", choices=("camera", "player"),
                        help="the grid's centre: the camera square (what the pixels show) or "
                             "the same cells around the player (egocentric); default: the "
                             "recipe's")  # fmt: skip
    parser.add_argument("--grid-size", type=int, metavar="CELLS",
                        help="the grid's cells a side (default: the recipe's, else the camera "
                             "square's); around the player, 2 * the level's - 1 shows all of "
                             "it from any cell")  # fmt: skip
    parser.add_argument("--grid-cnn", choices=("small", "deep"), default="small",
                        help="the CNN over the grid (policy.GRID_CNNS)")  # fmt: skip
    parser.add_argument("--separate-value", action="store_true",
                        help="the value head reads its own features extractor (its own grid "
                             "CNN), not the policy's: DAAC's decoupling")  # fmt: skip


def _observation_args(parser: argparse.ArgumentParser) -> None:
    """The observation's tilemap, caps and features beside the recipe's."""
    parser.add_argument("--tilemap", default=None,
                        choices=("tiles", "runs", "columns", "chunks", "none"),
                        help="another tilemap than the game's training one (none: no tile "
                             "entities, e.g. with --grid)")  # fmt: skip
    parser.add_argument("--cap", action="append", default=[], metavar="TYPE=N",
                        help="padded slots of a type (default: Game.training_caps)")  # fmt: skip
    parser.add_argument("--drop-feature", action="append", default=[], metavar="NAME",
                        help="leave an entity feature out of every type (e.g. y and height: "
                             "no absolute heights)")  # fmt: skip
    parser.add_argument("--no-grid", action="store_true",
                        help="no class image, where the game's recipe has one (its entities "
                             "and tiles only)")  # fmt: skip


def _recipe_args(parser: argparse.ArgumentParser) -> None:
    """The recipe's own options beside the observation's."""
    parser.add_argument("--ent-coef", default=None,
                        help="A or A:B (linear from A to B; default: the recipe's)")  # fmt: skip
    parser.add_argument("--recipe", choices=("game", "none"), default="game",
                        help="game: the game's committed recipe (Game.recipe) is the default, "
                             "the flags override it; none: the flags alone")  # fmt: skip
    parser.add_argument("--anneal-lr", action="store_true",
                        help="the learning rate falls linearly to 0 at --steps (CleanRL's "
                             "procgen PPO); a resumed run keeps its own schedule")  # fmt: skip


def _learner_args(parser: argparse.ArgumentParser) -> None:
    """The learner's options (the learner changes no setting of the recipe)."""
    parser.add_argument("--trainer", choices=("lean", "sb3"), default="lean",
                        help="the learner: agents/lean_ppo.py (default) or SB3's own PPO "
                             "(the same network, algorithm and checkpoints; slower)")  # fmt: skip
    parser.add_argument("--precision", choices=("auto", "float32", "bfloat16"), default="auto",
                        help="the lean learner's arithmetic (lean_ppo.PRECISIONS; auto: bfloat16 "
                             "where the CPU multiplies it natively)")  # fmt: skip


def _level_args(parser: argparse.ArgumentParser) -> None:
    """What the training levels are: mirrored ones, and the level sampler's options
    (--num-levels N > 0 only)."""
    parser.add_argument("--mirror", type=float, default=None, metavar="P",
                        help="play each episode mirrored left-right with probability P "
                             "(Game.mirror games; a resumed run keeps its own)")  # fmt: skip
    parser.add_argument("--level-sampler", choices=("uniform", "plr"), default=None,
                        help="uniform: procgen's own draw of the next level (the default); plr: "
                             "Prioritized Level Replay over the --num-levels training levels "
                             "(a resumed run keeps its own)")  # fmt: skip
    parser.add_argument("--plr-beta", type=float, default=None,
                        help="plr: the rank prioritisation's temperature (0.1)")  # fmt: skip
    parser.add_argument("--plr-rho", type=float, default=None,
                        help="plr: the staleness share (0.1)")  # fmt: skip
    parser.add_argument("--plr-score", choices=SCORES, default=None,
                        help="plr: a level's score, the mean over its last episode of the "
                             "positive GAE advantages (positive) or of |A| (l1)")  # fmt: skip
    parser.add_argument("--plr-replay-prob", type=float, default=None,
                        help="plr: the chance of replaying a seen level (default: the fraction "
                             "of the levels seen)")  # fmt: skip


def _mirror_setting(args: argparse.Namespace, checkpoint: Checkpoint) -> Optional[float]:
    """The run's mirrored-level probability: the flag's, else a resumed run's recorded one;
    None (or 0) for none. Refused for a game not declared symmetric or outside [0, 1]."""
    recorded = checkpoint.trainer.get("mirror")
    p = args.mirror if args.mirror is not None else recorded
    if p is None or p == 0:
        return None
    if not 0.0 <= p <= 1.0:
        _fail(f"--mirror is a probability in [0, 1], got {p}")
    if get_game(args.game).mirror is None:
        _fail(f"--mirror: {args.game} is not declared left-right symmetric (Game.mirror)")
    return float(p)


def _level_settings(args: argparse.Namespace, checkpoint: Checkpoint) -> Optional[Dict[str, Any]]:
    """The run's level sampler: None (uniform, procgen's own draw), or the PLR settings env.json
    records: a resumed run's recorded ones, else the flags'."""
    recorded = checkpoint.trainer.get("level_sampler")
    given = {"beta": args.plr_beta, "rho": args.plr_rho, "score": args.plr_score,
             "replay_prob": args.plr_replay_prob}  # fmt: skip
    given = {k: v for k, v in given.items() if v is not None}
    if recorded is None and (args.level_sampler or "uniform") == "uniform":
        if given:
            _fail(f"--plr-{next(iter(given)).replace('_', '-')} needs --level-sampler plr")
        return None
    if checkpoint.env.num_levels <= 0:
        _fail("--level-sampler plr needs --num-levels N > 0 (a finite set of training levels)")
    from procgen_entities.agents.plr import DEFAULTS, check_settings

    try:
        return check_settings(dict(recorded) if recorded else {**DEFAULTS, **given})
    except UsageError as exc:
        _fail(f"--level-sampler plr: {exc}")


def _recipe(args: argparse.Namespace) -> Recipe:
    """The defaults a new run starts from: the game's recipe, or (--recipe none) the bare one."""
    return get_game(args.game).recipe if args.recipe == "game" else Recipe()


def _env_config(args: argparse.Namespace) -> EnvConfig:
    info = get_game(args.game)
    recipe = _recipe(args)
    globals_ = None
    if args.stale_support:
        if info.support is None:
            _fail(f"{args.game} has no support feature")
        from procgen_entities.features import global_feature_names

        globals_ = ["has_support" if g == "on_ground" else g for g in global_feature_names(info)]
    if args.no_grid and (args.grid or args.grid_entities or args.grid_boxes):
        _fail("--no-grid takes the class image away: not with --grid, --grid-entities or "
              "--grid-boxes")  # fmt: skip
    boxes = not args.no_grid and (args.grid_boxes or recipe.grid_boxes)
    marks = not args.no_grid and (args.grid_entities or boxes or recipe.grid_entities)
    grid = not args.no_grid and (args.grid or marks or recipe.grid)
    centre = args.grid_centre or (recipe.grid_centre if grid else "camera")
    if centre != "camera" and not grid:
        _fail(f"--grid-centre {centre} places the class image: it needs a grid")
    # 0 is not "unset": it is refused, not replaced by the recipe's size
    size = args.grid_size if args.grid_size is not None else (recipe.grid_size if grid else None)
    if size is not None and size < 1:
        _fail(f"--grid-size must be >= 1 cells, got {size}")
    if size is not None and not grid:
        _fail(f"--grid-size {size} sizes the class image: it needs a grid")
    tilemap = args.tilemap or info.training_tilemap
    if tilemap == "none":
        tilemap = None
    return EnvConfig(
        game=args.game, distribution_mode=args.mode, num_levels=args.num_levels,
        tilemap=tilemap, entity_window=not args.no_window,
        global_features=globals_, max_entities=_caps(info, tilemap, args.cap) or None,
        grid=grid, grid_entities=marks, grid_boxes=boxes,
        drop_features=list(args.drop_feature) or None, grid_centre=centre, grid_size=size,
    )  # fmt: skip


def _caps(info: Game, tilemap: Optional[str], overrides: List[str]) -> Dict[str, int]:
    """The game's training caps for the types this tilemap has (the others keep their safe
    defaults), then ``--cap TYPE=N``."""
    from procgen_entities.gymnasium.observation import training_caps
    from procgen_entities.tilemap import tilemap_features

    types = set(info.entity_types.values()) | set(
        tilemap_features(info.name, tilemap) if tilemap else ()
    )
    caps = training_caps(info, tilemap)
    for item in overrides:
        name, _, value = item.partition("=")
        if name not in types or not value.isdigit():
            _fail(f"--cap: expected TYPE=N with TYPE one of {', '.join(sorted(types))}")
        caps[name] = int(value)
    return caps


def _truncate_metrics(path: Path, steps: int) -> None:
    """A resumed run drops what its first run logged past the checkpoint (a run stopped between
    two checkpoints would otherwise count those episodes twice)."""
    if not path.is_file():
        return
    kept = [
        line
        for line in path.read_text().splitlines()
        if line.strip() and json.loads(line).get("step", 0) <= steps
    ]
    path.write_text("".join(line + "\n" for line in kept))


def _resume(folder: Path, trust_pickle: bool) -> tuple:
    """(Checkpoint, policy.json) of the folder to resume; an old pickled folder is converted
    first when trusted, else refused."""
    try:
        checkpoint = Checkpoint.load(folder)
        try:
            spec = read_spec(folder)
        except CheckpointError:
            if not trust_pickle:
                raise
            convert(folder)
            spec = read_spec(folder)
    except CheckpointError as exc:
        _fail(str(exc))
    return checkpoint, spec


def _normalized(env: Any, resume: Optional[Path], gamma: float, attention: bool,
                flat_grid: bool, lean: bool = True) -> Any:  # fmt: skip
    """SB3's VecNormalize around the env: the flat form's every value; the dict form's slot
    values and globals (FlatGridExtractor) or, for the attention encoder, rewards only; with
    ``resume``, its statistics and settings. ``lean``: FlatVecNormalize (the same statistics,
    one numpy pass per step) instead of VecNormalize itself."""
    from stable_baselines3.common.vec_env import VecNormalize

    from procgen_entities.gymnasium.sb3 import FlatVecNormalize, normalized_keys

    keys = normalized_keys(env.observation_space) if flat_grid else None
    kind = FlatVecNormalize if lean else VecNormalize
    if resume is None:
        return kind(env, gamma=gamma, norm_obs=not attention, norm_obs_keys=keys)
    stats = load_normalizer(resume)
    wrapped = kind(env, gamma=stats.gamma, norm_obs=stats.norm_obs,
                   norm_reward=stats.norm_reward, clip_obs=stats.clip_obs,
                   clip_reward=stats.clip_reward, epsilon=stats.epsilon,
                   norm_obs_keys=keys)  # fmt: skip
    stats.apply_to(wrapped)
    return wrapped


def _new_policy(attention: bool, flat_grid: bool, net: str,
                args: argparse.Namespace) -> Tuple[str, Dict[str, Any]]:  # fmt: skip
    """(SB3's policy name, policy_kwargs) of a new run: the MLP on the flat form, or the dict
    form with the entity encoder (attention) or the flat input plus a CNN over the grid."""
    kwargs: Dict[str, Any] = {"net_arch": [int(x) for x in net.split(",")]}
    if args.separate_value:
        kwargs["share_features_extractor"] = False
    if attention:
        from procgen_entities.gymnasium.sb3 import EntityExtractor

        kwargs["features_extractor_class"] = EntityExtractor
        kwargs["features_extractor_kwargs"] = {"d_model": args.d_model, "n_layers": args.layers}
    elif flat_grid:
        from procgen_entities.gymnasium.sb3 import FlatGridExtractor

        kwargs["features_extractor_class"] = FlatGridExtractor
        if args.grid_cnn != "small":  # the small stack's policy.json stays as it was
            kwargs["features_extractor_kwargs"] = {"cnn": args.grid_cnn}
    return ("MultiInputPolicy" if attention or flat_grid else "MlpPolicy"), kwargs


def _start(
    args: argparse.Namespace, resume: Optional[Tuple[Checkpoint, Dict[str, Any]]]
) -> Tuple[Checkpoint, Dict[str, Any], Optional[Dict[str, Any]], int]:
    """(checkpoint, PPO settings, the resumed run's policy spec or None, steps done): a resumed
    run's own settings, or a new run's; --ppo overrides either."""
    hyper = dict(HYPERPARAMETERS)
    spec: Optional[Dict[str, Any]] = None
    if resume is not None:
        checkpoint, spec = resume
        done = checkpoint.steps
        hyper.update({k: type(v)(checkpoint.trainer[k]) for k, v in hyper.items()
                      if k in checkpoint.trainer})  # fmt: skip
    else:
        done = 0
        checkpoint = Checkpoint(env=_env_config(args), normalize=not args.no_normalize)
        hyper["gamma"] = _recipe(args).gamma
        if _recipe(args).trainer != "sb3":
            print(f"note: {args.game}'s committed recipe trains with enn-trainer "
                  f"(python -m procgen_entities.train {args.game}); this is the SB3 MLP",
                  file=sys.stderr)  # fmt: skip
        args.anneal_lr = args.anneal_lr or _recipe(args).anneal_lr
    for item in args.ppo:
        key, _, value = item.partition("=")
        if key not in hyper:
            _fail(f"--ppo: unknown setting {key!r} (one of {', '.join(hyper)})")
        hyper[key] = type(hyper[key])(value)
    # --anneal-lr: 0 at --steps; a resumed run keeps the step its schedule reaches 0 at
    args.anneal_lr = checkpoint.trainer.get("anneal_lr_to") or (args.steps if args.anneal_lr else 0)
    return checkpoint, hyper, spec, done


def _entropy_schedule(args: argparse.Namespace, checkpoint: Checkpoint) -> Tuple[float, float]:
    """--ent-coef A[:B], else a resumed run's recorded schedule, else the recipe's."""
    if args.ent_coef is None:
        recorded = checkpoint.trainer.get("ent_coef")
        if isinstance(recorded, list) and len(recorded) == 2:
            return float(recorded[0]), float(recorded[1])
        args.ent_coef = str(_recipe(args).ent_coef)
    try:
        start, end = (float(x) for x in (args.ent_coef.split(":") * 2)[:2])
    except ValueError:
        _fail(f"--ent-coef: expected A or A:B, got {args.ent_coef!r}")
    return start, end


def _anneal(model: Any, rate: float, zero_at: int) -> None:
    """The learning rate from ``rate`` down to 0 at env step ``zero_at`` (0: no schedule),
    linear in the steps done (``num_timesteps`` counts from the run's start, so a resumed run
    stays on the line; SB3's own schedules restart with each ``learn``)."""
    if zero_at > 0:  # else the constant rate SB3 was given
        model.lr_schedule = lambda _: rate * max(0.0, 1.0 - model.num_timesteps / zero_at)


def _new_model(
    args: argparse.Namespace,
    kind: str,
    env: Any,
    coef: float,
    policy_kwargs: Dict[str, Any],
    hyper: Dict[str, Any],
    threads: int,
) -> Any:
    """The learner: LeanPPO (the default) or SB3's own PPO (``--trainer sb3``); the same policy
    network and checkpoints either way."""
    if args.trainer == "sb3":
        from stable_baselines3 import PPO

        return PPO(kind, env, seed=args.seed, verbose=0, device="cpu", ent_coef=coef,
                   policy_kwargs=policy_kwargs, **hyper)  # fmt: skip
    from procgen_entities.agents.lean_ppo import LeanPPO

    return LeanPPO(kind, env, seed=args.seed, ent_coef=coef, policy_kwargs=policy_kwargs,
                   train_threads=threads, precision=args.precision, **hyper)  # fmt: skip


def _load_resumed(model: Any, folder: Path, done: int) -> None:
    """The resumed run's weights and Adam's state (when saved) into a new PPO model."""
    import torch

    from procgen_entities.agents.checkpoint import _torch_state

    try:
        model.policy.load_state_dict(_torch_state(folder))
    except (CheckpointError, RuntimeError) as exc:
        _fail(str(exc).splitlines()[0])
    if (folder / OPTIMIZER).is_file():
        optimizer = model.policy.optimizer
        # the saved param groups carry the saving learner's "fused" flag: keep this one's
        fused = [group.get("fused") for group in optimizer.param_groups]
        optimizer.load_state_dict(
            torch.load(folder / OPTIMIZER, map_location="cpu", weights_only=True)
        )
        for group, flag in zip(optimizer.param_groups, fused):
            group["fused"] = flag
    else:
        print(f"note: {folder} has no {OPTIMIZER}: Adam's moments start afresh",
              file=sys.stderr)  # fmt: skip
    model.num_timesteps = done


def _evaluate_trained(args: argparse.Namespace, out: Path, steps: int) -> int:
    """--eval-episodes: the final checkpoint evaluated into evaluation.json; else the command."""
    if args.eval_episodes <= 0:
        print(f"trained {steps:,} steps into {out / 'checkpoint'}; evaluate it with "
              f"python -m procgen_entities.evaluate {out / 'checkpoint'}")  # fmt: skip
        return 0
    from procgen_entities.tools.evaluate import main as evaluate

    return evaluate(
        [
            str(out / "checkpoint"),
            "--episodes",
            str(args.eval_episodes),
            "--baselines",
            args.eval_baselines,
            "--json",
            str(out / "evaluation.json"),
        ]
    )


def _policy_of(
    args: argparse.Namespace, spec: Optional[Dict[str, Any]], grid: bool
) -> Tuple[str, Dict[str, Any]]:
    """(SB3 policy class name, policy_kwargs): a resumed run's own network (policy.json, whatever
    the flags say; ``args`` takes its policy, d_model and layers), or the flags' new one."""
    from procgen_entities.agents.checkpoint import policy_kwargs_of

    if spec is not None:
        extractor = spec.get("extractor_kwargs") or {}
        args.policy = "attention" if spec.get("extractor") == "EntityExtractor" else "mlp"
        args.d_model = extractor.get("d_model", args.d_model)
        args.layers = extractor.get("n_layers", args.layers)
        args.grid_cnn = extractor.get("cnn", "small")
        args.separate_value = not spec.get("share_features_extractor", True)
        return policy_kwargs_of(spec)
    attention = args.policy == "attention"
    default = "256" if attention else _recipe(args).net
    return _new_policy(attention, not attention and grid, args.net or default, args)


def _record_trainer(
    checkpoint: Checkpoint,
    args: argparse.Namespace,
    hyper: Dict[str, Any],
    schedule: Tuple[float, ...],
    net: Any,
    flat_grid: bool,
    levels: Optional[Dict[str, Any]] = None,
) -> None:
    """The trainer settings the checkpoint records (env.json), and the attention encoder's
    reward-only normalisation; ``levels``: the PLR sampler's settings (none for uniform)."""
    attention = args.policy == "attention"
    name = ("MultiInputPolicy + EntityExtractor" if attention
            else "MultiInputPolicy + FlatGridExtractor" if flat_grid else "MlpPolicy")  # fmt: skip
    checkpoint.trainer = {"trainer": f"stable-baselines3 PPO {name}", "seed": args.seed,
                          "envs": args.envs, "ent_coef": list(schedule),
                          "net": ",".join(map(str, net)) if isinstance(net, list) else net,
                          "policy": args.policy, "learner": args.trainer, **hyper}  # fmt: skip
    if args.trainer == "lean":
        from procgen_entities.agents.lean_ppo import resolve_precision

        checkpoint.trainer["precision"] = resolve_precision(args.precision)
    if flat_grid and args.grid_cnn != "small":
        checkpoint.trainer["grid_cnn"] = args.grid_cnn
    if args.separate_value:
        checkpoint.trainer["separate_value"] = True
    if args.anneal_lr:
        checkpoint.trainer["anneal_lr_to"] = args.anneal_lr
    if levels is not None:
        checkpoint.trainer["level_sampler"] = levels
    if args.mirror:
        checkpoint.trainer["mirror"] = args.mirror
    if attention:
        checkpoint.trainer.update(d_model=args.d_model, layers=args.layers)
        checkpoint.normalize = True  # rewards only (the encoder reads symlog inputs)


def _run_meta(args: argparse.Namespace, checkpoint: Any, done: int) -> Dict[str, Any]:
    """The run's description at the head of metrics.jsonl (the game's return range for the
    normalised figures, the trainer's settings, the env's)."""
    r_min, r_max = get_game(args.game).return_range or (0.0, 10.0)
    return {"game": args.game, "env": "sb3", "seed": args.seed, "tilemap": checkpoint.env.tilemap,
            "r_min": r_min, "r_max": r_max, "resumed_at": done, **checkpoint.trainer,
            "env_config": checkpoint.env.env_kwargs()}  # fmt: skip


def _run_env(
    args: argparse.Namespace,
    checkpoint: Checkpoint,
    done: int,
    levels: Optional[Dict[str, Any]],
    gamma: float,
    attention: bool,
    flat_grid: bool,
) -> Tuple[Any, Optional["LevelReplay"]]:
    """The run's SB3 VecEnv (normalised where the checkpoint is) and, with ``levels``, the PLR
    sampler around its EntityVectorEnv (a resumed run's state continued)."""
    from procgen_entities.gymnasium.sb3 import SB3VecEnv

    flatten = not (attention or flat_grid)
    try:
        venv = make_env(checkpoint.env, args.envs, args.seed + done, flatten=flatten)
    except UsageError as exc:  # the observation's options (--drop-feature, --cap, ...)
        _fail(str(exc))
    replay = None
    if levels is not None:
        from procgen_entities.agents.plr import SAMPLER_FILE, LevelReplay, read_state

        try:
            state = read_state(args.resume) if args.resume else None
            if args.resume and state is None:
                print(f"note: {args.resume} has no {SAMPLER_FILE}: the level scores start afresh",
                      file=sys.stderr)  # fmt: skip
            replay = LevelReplay(venv, levels, args.seed + done, state)
        except UsageError as exc:
            venv.close()
            _fail(str(exc))
    stepped: Any = replay.env if replay is not None else venv
    if args.mirror:
        from procgen_entities.gymnasium.mirrored import MirroredLevels

        stepped = MirroredLevels(stepped, args.mirror, seed=args.seed + done)
    env: Any = SB3VecEnv(stepped)
    if checkpoint.normalize:
        env = _normalized(env, args.resume, gamma, attention, flat_grid,
                          lean=args.trainer == "lean")  # fmt: skip
    return env, replay


def _learn(model: Any, args: argparse.Namespace, total: int, metrics: _Metrics) -> None:
    """``total`` more env steps by the chosen learner, with the run's bookkeeping."""
    if args.trainer == "sb3":
        # SB3's bar (tqdm's rich bar) on a terminal only: piped, it warns and draws nothing
        bar = sys.stderr.isatty()
        model.learn(total_timesteps=total, callback=metrics.sb3_callback(), progress_bar=bar,
                    reset_num_timesteps=not args.resume)  # fmt: skip
    else:
        model.learn(total, hooks=metrics, reset_num_timesteps=not args.resume, progress_bar=True)


def main(argv: Optional[List[str]] = None) -> int:
    args = _parse_args(argv)
    # The folder to resume is checked first: its errors come before the imports' output.
    resume = _resume(args.resume, args.trust_pickle) if args.resume else None
    import torch

    from procgen_entities.agents.numpy_policy import DictNormalizer, Normalizer

    torch.set_num_threads(1)  # while the env's pool steps (see _Metrics for the updates)
    checkpoint, hyper, spec, done = _start(args, resume)
    levels = _level_settings(args, checkpoint)
    args.mirror = _mirror_setting(args, checkpoint)
    config = checkpoint.env
    schedule = _entropy_schedule(args, checkpoint)
    out = args.out or Path("runs") / f"sb3-{args.game}-{args.seed}"
    out.mkdir(parents=True, exist_ok=True)
    if args.smoke:  # two tiny updates past where the run starts
        args.steps, args.envs, args.eval_episodes = done + 2 * 8 * 16, 8, 16
        hyper.update(n_steps=16, batch_size=128)
    if spec is not None:
        _truncate_metrics(out / "metrics.jsonl", done)
    kind, policy_kwargs = _policy_of(args, spec, config.grid)
    attention = args.policy == "attention"
    flat_grid = not attention and config.grid  # the MLP recipe plus a CNN over the image
    dict_form = attention or flat_grid
    _record_trainer(checkpoint, args, hyper, schedule, policy_kwargs["net_arch"], flat_grid,
                    levels)  # fmt: skip
    meta = _run_meta(args, checkpoint, done)
    env, replay = _run_env(args, checkpoint, done, levels, hyper["gamma"], attention, flat_grid)

    def save(model: Any, name: str) -> None:
        folder = out / name
        checkpoint.steps = int(model.num_timesteps)  # counted from the first run
        checkpoint.save(folder)
        stats = None
        if checkpoint.normalize:
            kind = DictNormalizer if dict_form else Normalizer
            stats = kind.from_vec_normalize(env)
        save_sb3(folder, model.policy, stats, optimizer=True)
        if replay is not None:
            replay.save(folder)

    total = args.steps - done
    if total <= 0:
        _fail(f"the checkpoint already has {done} steps (--steps {args.steps})")
    metrics = _Metrics(out, meta, schedule, args.steps, args.checkpoint_every, save)
    metrics.saved = done // args.checkpoint_every if args.checkpoint_every else 0
    metrics.train_threads = args.train_threads or len(os.sched_getaffinity(0))
    metrics.levels = replay
    start, end = schedule
    coef = start + (end - start) * min(1.0, done / max(args.steps, 1))
    model = _new_model(args, kind, env, coef, policy_kwargs, hyper, metrics.train_threads)
    if args.resume:
        _load_resumed(model, args.resume, done)
    _anneal(model, float(hyper["learning_rate"]), int(args.anneal_lr))
    _learn(model, args, total, metrics)
    metrics.close()
    save(model, "checkpoint")
    env.close()
    return _evaluate_trained(args, out, int(model.num_timesteps))


if __name__ == "__main__":
    sys.exit(main())
