"""Print a procgen state as text: ``python -m procgen_entities.dump GAME``.

Creates a one-env procgen ``ProcgenGym3Env`` (level = --seed), steps it --steps times with a
random or no-op policy, takes ``get_state`` and draws the parsed state: the tilemap (up at the
top), the entities over it, a legend and optionally a table of the entities. ``--state FILE``
draws a saved ``get_state`` blob instead (raw or gzip'ed), or a text level (``FILE.txt``, a
drawing in the legend's characters: level_files.py); with ``--steps``, ``--watch``, ``--video``
or ``--policy DIR`` the rollout starts from that state (validated as ``set_states`` validates).
``--save FILE`` writes the blob (gzip'ed if FILE ends in .gz), or with ``FILE.txt`` the text
level. ``--watch`` animates a rollout.

``--policy DIR`` plays a checkpoint folder (agents/checkpoint.py) instead: its env (the
observation it was trained on, its distribution mode unless ``--mode``) on level --seed, greedy,
for one episode (or --steps); it needs no torch for the SB3 checkpoints. ``--video FILE.gif``
(Pillow) or ``FILE.mp4`` (imageio-ffmpeg) writes procgen's own frames of the rollout, ``--scale``
times larger, with ``--beside`` the entity view next to them.

Exit status: 0 on success, 2 for a bad game, option, or state file (one line on stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from procgen_entities import level_files
from procgen_entities.backends import import_backend
from procgen_entities.errors import (
    StateDecodeError,
    UsageError,  # reported as one line, exit status 2
)
from procgen_entities.files import check_target, write_atomic
from procgen_entities.games import DISTRIBUTION_MODE_IDS, GAME_NAMES
from procgen_entities.parse import StateBatch, parse_state
from procgen_entities.procgen_envs import MODE_GAMES, valid_modes

# The rollouts and saved states are rollout.py's, which level_files.py reads too (it once read
# them from here, and this module read it: a circle); still importable from here.
from procgen_entities.rollout import (
    MAX_STATE_BYTES,
    Rollout,
    check_game_mode,
    env_options,
    load_state,
    record_state,
)
from procgen_entities.state import State

__all__ = ["main", "MAX_STATE_BYTES", "MODE_GAMES", "load_state", "record_state", "valid_modes"]

PROG = "python -m procgen_entities.dump"

MODES = tuple(DISTRIBUTION_MODE_IDS)
WATCH_STEPS = 200
EPISODE_STEPS = 1000  # procgen's time limit: a checkpoint's episode ends by then
MAX_SEED = 2**31 - 2


class _PolicyRollout:
    """A checkpoint playing one episode of level ``seed`` in its own env (greedy)."""

    def __init__(
        self, game: str, mode: Optional[str], seed: int, folder: str, start: Optional[bytes] = None
    ) -> None:
        from procgen_entities.agents.checkpoint import (
            Checkpoint,
            CheckpointError,
            load_policy,
            make_env,
        )
        from procgen_entities.engine import EngineUnavailable

        with contextlib.redirect_stderr(io.StringIO()):  # gym's notice, as in rollout.py
            import_backend()  # procgen-mirror or procgen-gym, whichever this Python has
        try:
            checkpoint = Checkpoint.load(Path(folder))
            config = checkpoint.env
            if config.game != game:
                raise UsageError(f"--policy {folder} plays {config.game}, not {game}")
            if mode is not None:
                check_game_mode(game, mode)
                config.distribution_mode = mode
            self.policy = load_policy(Path(folder))
            level: Dict[str, Any] = {"start_level": seed, "num_levels": 1,
                                     "flatten": self.policy.flatten}  # fmt: skip
            if start is not None:  # the env the state fits (its mode, levels and options)
                level.update(env_options(State.from_bytes(start)))
            try:  # the terminal state is shown last (the headless engine)
                self.env = make_env(config, 1, seed, autoreset_mode="NextStep", **level)
            except EngineUnavailable:
                self.env = make_env(config, 1, seed, **level)
        except ImportError as exc:
            raise UsageError(
                f"--policy {folder} needs a package that is not installed ({exc})"
            ) from None
        except (CheckpointError, ValueError) as exc:
            raise UsageError(f"--policy {folder}: {str(exc).splitlines()[0]}") from None
        if start is None:
            self.obs, _ = self.env.reset(seed=seed)
        else:
            self.obs, _ = self.env.reset(options={"states": [start]})
        self.done, self.steps, self.score, self.complete = False, 0, 0.0, False

    def step(self) -> None:
        self.obs, reward, terminated, truncated, info = self.env.step(self.policy(self.obs))
        self.steps += 1
        self.score += float(reward[0])
        self.done = bool(terminated[0] or truncated[0])
        self.complete = bool(info["prev_level_complete"][0]) if self.done else False

    def get_state(self) -> bytes:
        return bytes(self.env.get_states()[0])

    def frame(self) -> Any:
        return self.env.render()[0]

    def summary(self) -> str:
        end = "level complete" if self.complete else ("episode over" if self.done else "stopped")
        return f"{end} after {self.steps} steps, return {self.score:g}"


def _parse(blob: bytes, source: str) -> StateBatch:
    try:
        return parse_state(blob)
    except StateDecodeError as exc:
        raise UsageError(
            f"{source} is not a valid procgen 0.10.7 get_state blob: {exc.reason} "
            f"(field {exc.field!r} at byte {exc.offset} of {len(blob)}); "
            f"it must be the bytes of env.callmethod('get_state')[i] for one of: "
            f"{', '.join(GAME_NAMES)}"
        ) from None


def _save(path: str, blob: bytes) -> None:
    data = gzip.compress(blob, mtime=0) if path.endswith(".gz") else blob
    try:
        write_atomic(path, data)  # a failed write leaves no half-written file
    except OSError as exc:
        raise UsageError(f"cannot write state file {path!r}: {exc.strerror or exc}") from None


def _nonneg_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected a whole number in 0..{MAX_SEED}, got {value}")
    return value


def _delay(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}") from None
    if not 0 <= value <= 60:
        raise argparse.ArgumentTypeError(f"expected seconds in 0..60, got {value}")
    return value


def _scale(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 16:
        raise argparse.ArgumentTypeError(f"expected a whole number in 1..16, got {text!r}")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Draw a procgen state (tilemap + entities) as text, from a live env or a "
        "saved get_state blob.",
        epilog=f"games: {', '.join(GAME_NAMES)}. Modes: easy, hard (all games); extreme: "
        f"{', '.join(MODE_GAMES['extreme'])}; memory: {', '.join(MODE_GAMES['memory'])}.",
    )
    p.add_argument("game", nargs="?", metavar="GAME", help="procgen game (optional with --state)")
    p.add_argument("--seed", type=_nonneg_int, default=0, help="level and RNG seed (default 0)")
    p.add_argument(
        "--distribution-mode",
        "--mode",
        dest="mode",
        choices=MODES,
        default=None,
        help="procgen distribution mode (default hard, as procgen; with --policy DIR the "
        "checkpoint's)",
    )
    p.add_argument(
        "--steps",
        type=_nonneg_int,
        default=None,
        help=f"steps to take before drawing (default 0; {WATCH_STEPS} with --watch or --video; "
        "with --policy DIR one episode)",
    )
    p.add_argument(
        "--policy",
        default="random",
        metavar="random|noop|DIR",
        help="actions for --steps: random (default, seeded by --seed), noop, or a checkpoint "
        "folder (e.g. checkpoints/coinrun)",
    )
    _add_view_options(p)
    _add_output_options(p)
    return p


def _add_view_options(p: argparse.ArgumentParser) -> None:
    """What is drawn and how: the view, the entity table, colour."""
    view = p.add_mutually_exclusive_group()
    view.add_argument(
        "--window",
        dest="view",
        action="store_const",
        const="window",
        help="only the agent's camera view (default where the camera follows the agent)",
    )
    view.add_argument(
        "--full",
        dest="view",
        action="store_const",
        const="full",
        help="the whole grid (default for the other games)",
    )
    p.add_argument("--entities", action="store_true", help="add a table of the entities")
    p.add_argument(
        "--color",
        "--colour",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour: auto (when stdout is a terminal), always, never",
    )


def _add_output_options(p: argparse.ArgumentParser) -> None:
    """Where the drawing goes: an animation, a video, a saved state (or one read back)."""
    p.add_argument("--watch", action="store_true", help="animate the rollout step by step")
    p.add_argument(
        "--delay",
        type=_delay,
        default=0.05,
        help="seconds between frames with --watch (default 0.05)",
    )
    p.add_argument("--video", metavar="FILE", help="write procgen's frames as .gif or .mp4")
    p.add_argument(
        "--scale", type=_scale, default=4, help="--video: frame magnification (default 4)"
    )
    p.add_argument("--beside", action="store_true", help="--video: the entity view beside")
    p.add_argument("--state", metavar="FILE", help="draw a saved get_state blob (raw or .gz)")
    p.add_argument(
        "--save",
        metavar="FILE",
        help="write the drawn state's get_state blob (gzip'ed if FILE ends in .gz)",
    )


def _use_color(choice: str) -> bool:
    if choice == "always":
        return True
    if choice == "never":
        return False
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def _console(color: bool):  # type: ignore[no-untyped-def]
    from rich.console import Console

    from procgen_entities.viewer.render import plain_console

    if not color:
        return plain_console(sys.stdout, width=_width(200))
    tty = sys.stdout.isatty()
    return Console(
        file=sys.stdout,
        force_terminal=True,
        color_system="auto" if tty else "256",
        highlight=False,
        emoji=False,
        width=None if tty else 200,
    )


def _width(default: int) -> int:
    try:
        return (
            max(80, os.get_terminal_size(sys.stdout.fileno()).columns)
            if sys.stdout.isatty()
            else default
        )
    except (OSError, ValueError, AttributeError):
        return default


def _draw(console, batch: StateBatch, args: argparse.Namespace) -> None:  # type: ignore[no-untyped-def]
    from procgen_entities.viewer.render import render, render_text

    if console.color_system is None:
        # Identical to render_text (what the snapshot tests check).
        text = render_text(batch, view_mode=args.view, entities=args.entities, width=console.width)
        console.file.write(text if text.endswith("\n") else text + "\n")
    else:
        console.print(
            render(
                batch,
                view_mode=args.view,
                entities=args.entities,
                legend_width=min(100, console.width),
            )
        )


class _Recorder:
    """The frames of ``--video`` (procgen's, and with ``--beside`` the entity view)."""

    def __init__(self, path: Optional[Path], args: argparse.Namespace) -> None:
        self.path, self.args = path, args
        self.frames: List[Any] = []

    def add(self, rollout: Any, blob: bytes) -> None:
        if self.path is None:
            return
        from procgen_entities.viewer.render import cell_image
        from procgen_entities.viewer.video import compose

        beside = cell_image(_parse(blob, "get_state"), view_mode=self.args.view)
        self.frames.append(compose(rollout.frame(), self.args.scale, beside if self.args.beside
                                   else None))  # fmt: skip

    def write(self) -> None:
        if self.path is not None:
            from procgen_entities.viewer.video import VideoError, write_video

            try:
                write_video(self.path, self.frames)
            except VideoError as exc:
                raise UsageError(str(exc)) from None


def _play(
    console: Any, rollout: Any, steps: int, args: argparse.Namespace, recorder: _Recorder
) -> bytes:
    """Step the rollout ``steps`` times (a checkpoint's stops when its episode ends), drawing
    every state with --watch (else the last) and recording the video's frames."""
    from procgen_entities.viewer.render import render

    def frame(b: bytes):  # type: ignore[no-untyped-def]
        return render(
            _parse(b, "get_state"),
            view_mode=args.view,
            entities=args.entities,
            legend_width=min(100, console.width),
        )

    blob = rollout.get_state()
    recorder.add(rollout, blob)
    live: Any = None
    if args.watch and console.color_system is None:
        _draw(console, _parse(blob, "get_state"), args)  # no control codes: frames in sequence
    elif args.watch:
        from rich.live import Live

        live = Live(frame(blob), console=console, auto_refresh=False, transient=False)
        live.start(refresh=True)
    try:
        for _ in range(steps):
            if rollout.done:
                break
            if live is not None:
                time.sleep(args.delay)
            rollout.step()
            if not (args.watch or recorder.path is not None):
                continue  # only the last state is drawn
            blob = rollout.get_state()
            recorder.add(rollout, blob)
            if live is not None:
                live.update(frame(blob), refresh=True)
            elif args.watch:
                console.file.write("\n")
                _draw(console, _parse(blob, "get_state"), args)
    finally:
        if live is not None:
            live.stop()
    if not args.watch:
        blob = rollout.get_state()
        _draw(console, _parse(blob, "get_state"), args)
    return blob


def _is_builtin_policy(policy: str) -> bool:
    return policy in ("random", "noop")


def _read_start(path: str) -> tuple:
    """(blob, base) of ``--state FILE``: a text level's validated state and the LevelBase it is
    drawn over, or a saved blob as it is (validated only when played) and itself as the base."""
    try:
        if not _is_text_path(path):
            blob = load_state(path)
            return blob, level_files.LevelBase(path=os.path.abspath(path))
        level = level_files.read_level(path)
        level_files.validate([level])
    except level_files.LevelError as exc:
        raise UsageError(str(exc)) from None
    assert level.blob is not None and level.base is not None
    base = level.base
    if base.path is not None:  # kept relative to the text level's folder
        base = level_files.LevelBase(path=os.path.abspath(Path(path).parent / base.path))
    return level.blob, base


def _validated(blob: bytes, source: str) -> bytes:
    """A saved blob, checked as set_states checks it before procgen plays it."""
    _parse(blob, source)  # the usual message for a blob that is not a state
    try:
        level = level_files.Level(Path(source), State.from_bytes(blob))
        level_files.validate([level])
    except level_files.LevelError as exc:
        raise UsageError(str(exc)) from None
    assert level.blob is not None
    return level.blob


def _save_text(path: str, blob: bytes, base: Any) -> None:
    """``--save FILE.txt``: the drawn state as a text level over ``base`` (a LevelBase)."""
    if base is None:
        raise UsageError(
            f"--save {path}: a text level is drawn over a state it can be rebuilt from (a "
            "fresh level after --steps of random or noop, or a saved state): save a state file "
            "(not .txt) of this rollout"
        )
    if base.path is not None:
        relative = os.path.relpath(base.path, os.path.dirname(os.path.abspath(path)))
        base = level_files.LevelBase(path=relative)
    try:
        # LevelError: not readable back
        text = level_files.level_file_text(State.from_bytes(blob), base)
        write_atomic(path, text.encode("utf-8"))
    except level_files.LevelError as exc:
        raise UsageError(f"--save {path}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"cannot write level file {path!r}: {exc.strerror or exc}") from None


def _live_rollout(args: argparse.Namespace, video: Any, start: Optional[bytes]) -> tuple:
    """(rollout, default steps) of a live env: the viewer's own or a checkpoint's, from a fresh
    level --seed or from ``start``."""
    if _is_builtin_policy(args.policy):
        mode = args.mode or "hard"
        check_game_mode(args.game, mode)
        animated = args.watch or video is not None
        rollout = Rollout(args.game, mode, args.seed, args.policy, start)
        return rollout, WATCH_STEPS if animated else 0
    if args.game not in GAME_NAMES:
        raise UsageError(f"unknown game {args.game!r}; valid games: {', '.join(GAME_NAMES)}")
    if not Path(args.policy).is_dir():
        raise UsageError(f"--policy: expected random, noop or a checkpoint folder, "
                         f"got {args.policy!r}")  # fmt: skip
    return _PolicyRollout(args.game, args.mode, args.seed, args.policy, start), EPISODE_STEPS


def _rebuilt_base(args: argparse.Namespace, steps: int) -> Any:
    """The LevelBase a text level saved from this run is drawn over; with ``--save FILE.txt``,
    one its header cannot name (more steps than the game's longest episode) is refused before
    the rollout plays."""
    base = level_files.LevelBase(args.game, args.mode or "hard", args.seed, steps, args.policy)
    if args.save is not None and _is_text_path(args.save):
        try:
            base.header()
        except level_files.LevelError as exc:
            raise UsageError(f"--save {args.save}: {exc}") from None
    return base


def _check_steps(game: str, steps: Optional[int]) -> None:
    """``--steps`` at most the game's longest episode (level_files.max_steps, the bound of a text
    level header's steps=): 10**9 steps would play for hours before anything is drawn."""
    if steps is None:
        return
    longest = level_files.max_steps(game)
    if steps > longest:
        raise UsageError(f"--steps {steps}: more than {game}'s longest episode "
                         f"({longest} steps), the most one run plays")  # fmt: skip


def _plays(args: argparse.Namespace) -> bool:
    """Whether --state FILE starts a rollout (else it is only drawn)."""
    return bool(args.steps or args.watch or args.video or not _is_builtin_policy(args.policy))


def run(args: argparse.Namespace) -> int:
    color = _use_color(args.color)
    video = None
    if args.video is not None:
        from procgen_entities.viewer.video import VideoError, check_video_path

        try:
            video = check_video_path(args.video)
        except VideoError as exc:
            raise UsageError(str(exc)) from None
    if args.save is not None:
        _check_save_target(args.save)
    start: Optional[bytes] = None
    base: Any = None  # what a text level saved from this run is drawn over
    if args.state is not None:
        blob, base = _read_start(args.state)
        batch = _parse(blob, repr(args.state))
        if args.game is not None and args.game != batch.game:
            if args.game not in GAME_NAMES:
                raise UsageError(
                    f"unknown game {args.game!r}; valid games: {', '.join(GAME_NAMES)}"
                )
            print(
                f"note: {args.state!r} holds a {batch.game} state; drawing it as {batch.game}",
                file=sys.stderr,
            )
        if not _plays(args):
            _draw(_console(color), batch, args)
            if args.save is not None:
                _save_any(args.save, blob, base)
            return 0
        if args.mode is not None:
            raise UsageError("--mode: a rollout from --state FILE runs in the state's own mode")
        start, base, args.game = _validated(blob, repr(args.state)), None, batch.game
    elif args.game is None:
        raise UsageError(f"give a GAME or --state FILE; valid games: {', '.join(GAME_NAMES)}")
    rebuilt = start is None and _is_builtin_policy(args.policy)  # a text save's base exists
    if args.save is not None and _is_text_path(args.save) and not rebuilt:
        _save_text(args.save, b"", None)  # refused before the rollout, not after it
    rollout, default = _live_rollout(args, video, start)
    steps = args.steps if args.steps is not None else default
    if rebuilt:
        base = _rebuilt_base(args, steps)
    _check_steps(args.game, args.steps)
    recorder = _Recorder(video, args)
    console = _console(color)
    blob = _play(console, rollout, steps, args, recorder)
    recorder.write()
    if isinstance(rollout, _PolicyRollout):
        note = f"; {len(recorder.frames)} frames in {video}" if video is not None else ""
        print(f"{args.policy}: {rollout.summary()}{note}", file=sys.stderr)
    if args.save is not None:
        _save_any(args.save, blob, base)
    return 0


def _check_save_target(path: str) -> None:
    """``--save FILE``, refused before anything is drawn or played where FILE exists and is not
    a regular file (a FIFO would block the write forever; a device or folder is no file)."""
    try:
        check_target(path)
    except OSError as exc:
        what = "level" if _is_text_path(path) else "state"
        raise UsageError(f"cannot write {what} file {path!r}: {exc.strerror or exc}") from None


def _is_text_path(path: str) -> bool:
    return path.lower().endswith(".txt")


def _save_any(path: str, blob: bytes, base: Any) -> None:
    if _is_text_path(path):
        _save_text(path, blob, base)
    else:
        _save(path, blob)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except UsageError as exc:
        sys.stdout.flush()
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # e.g. `... | head`: stop quietly.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
