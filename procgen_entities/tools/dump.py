"""Print a procgen state as text: ``python -m procgen_entities.dump GAME``.

Creates a one-env procgen ``ProcgenGym3Env`` (level = --seed), steps it --steps times with a
random or no-op policy, takes ``get_state`` and draws the parsed state: the tilemap (up at the
top), the entities over it, a legend and optionally a table of the entities. ``--state FILE``
draws a saved ``get_state`` blob instead (raw or gzip'ed); ``--save FILE`` writes the blob
(gzip'ed if FILE ends in .gz). ``--watch`` animates a rollout.

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
import zlib
from typing import Sequence

from procgen_entities.backends import import_backend
from procgen_entities.errors import StateDecodeError
from procgen_entities.games import GAME_NAMES
from procgen_entities.parse import StateBatch, parse_state
from procgen_entities.procgen_envs import MODE_GAMES, make_procgen_env, valid_modes

__all__ = ["main", "MODE_GAMES", "load_state", "record_state", "valid_modes"]

PROG = "python -m procgen_entities.dump"

MODES = ("easy", "hard", "extreme", "memory")
NUM_ACTIONS = 15
NOOP_ACTION = 4
WATCH_STEPS = 200
MAX_SEED = 2**31 - 2
#: The largest state file (decompressed): procgen's get_state buffer (procgen/env.py
#: MAX_STATE_SIZE) holds 1 MiB.
MAX_STATE_BYTES = 2**20


class UsageError(Exception):
    """A problem reported as one line on stderr with exit status 2."""


def _check_game_mode(game: str, mode: str) -> None:
    if game not in GAME_NAMES:
        raise UsageError(f"unknown game {game!r}; valid games: {', '.join(GAME_NAMES)}")
    if mode not in valid_modes(game):
        raise UsageError(
            f"{game} has no {mode!r} distribution mode; valid modes for {game}: "
            f"{', '.join(valid_modes(game))} ({mode} exists only for {', '.join(MODE_GAMES[mode])})"
        )


def _make_env(game: str, mode: str, seed: int):  # type: ignore[no-untyped-def]
    # gym (imported by procgen-mirror via gym3) prints a deprecation notice on import; keep it
    # quiet.
    with contextlib.redirect_stderr(io.StringIO()):
        import_backend()
    return make_procgen_env(
        game, 1, distribution_mode=mode, start_level=seed, num_levels=1, rand_seed=seed
    )


class _Rollout:
    """A one-env procgen rollout with a random or no-op policy."""

    def __init__(self, game: str, mode: str, seed: int, policy: str) -> None:
        import numpy as np

        self._np = np
        self.env = _make_env(game, mode, seed)
        self.policy = policy
        self.rng = np.random.default_rng(seed)

    def step(self) -> None:
        if self.policy == "random":
            action = self.rng.integers(0, NUM_ACTIONS, size=1, dtype=self._np.int32)
        else:
            action = self._np.full(1, NOOP_ACTION, dtype=self._np.int32)
        self.env.act(action)

    def get_state(self) -> bytes:
        return bytes(self.env.callmethod("get_state")[0])


def record_state(
    game: str, *, mode: str = "hard", seed: int = 0, steps: int = 0, policy: str = "random"
) -> bytes:
    """The get_state blob after ``steps`` steps of ``policy`` on level ``seed``, as the dump."""
    _check_game_mode(game, mode)
    rollout = _Rollout(game, mode, seed, policy)
    for _ in range(steps):
        rollout.step()
    return rollout.get_state()


def load_state(path: str) -> bytes:
    """Read a saved state (raw get_state bytes, or gzip'ed); UsageError if it can't be read or
    holds more than MAX_STATE_BYTES (read, or decompressed, as a stream up to that cap: a small
    gzip file can expand to gigabytes)."""
    try:
        with open(path, "rb") as f:
            blob = f.read(MAX_STATE_BYTES + 1)
            if blob[:2] == b"\x1f\x8b":
                f.seek(0)
                with gzip.GzipFile(fileobj=f) as unzipped:
                    blob = unzipped.read(MAX_STATE_BYTES + 1)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise UsageError(f"{path!r} is a corrupt gzip file: {exc}") from None
    except OSError as exc:
        raise UsageError(f"cannot read state file {path!r}: {exc.strerror or exc}") from None
    if len(blob) > MAX_STATE_BYTES:
        raise UsageError(
            f"{path!r} holds more than {MAX_STATE_BYTES} bytes (decompressed): procgen's "
            "get_state never writes more, so it is not a saved state"
        )
    return blob


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
        with open(path, "wb") as f:
            f.write(data)
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
        default="hard",
        help="procgen distribution mode (default hard, as procgen)",
    )
    p.add_argument(
        "--steps",
        type=_nonneg_int,
        default=None,
        help=f"steps to take before drawing (default 0; {WATCH_STEPS} with --watch)",
    )
    p.add_argument(
        "--policy",
        choices=("random", "noop"),
        default="random",
        help="actions for --steps (default random, seeded by --seed)",
    )
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
    p.add_argument("--watch", action="store_true", help="animate the rollout step by step")
    p.add_argument(
        "--delay",
        type=_delay,
        default=0.05,
        help="seconds between frames with --watch (default 0.05)",
    )
    p.add_argument("--state", metavar="FILE", help="draw a saved get_state blob (raw or .gz)")
    p.add_argument(
        "--save",
        metavar="FILE",
        help="write the drawn state's get_state blob (gzip'ed if FILE ends in .gz)",
    )
    return p


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

    from procgen_entities.tools.render import plain_console

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
    from procgen_entities.tools.render import render, render_text

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


def _watch(console, rollout: _Rollout, steps: int, args: argparse.Namespace) -> bytes:  # type: ignore[no-untyped-def]
    from procgen_entities.tools.render import render

    blob = rollout.get_state()
    if console.color_system is None:
        # No terminal control codes: print the frames one after another.
        _draw(console, _parse(blob, "get_state"), args)
        for _ in range(steps):
            rollout.step()
            blob = rollout.get_state()
            console.file.write("\n")
            _draw(console, _parse(blob, "get_state"), args)
        return blob
    from rich.live import Live

    def frame(b: bytes):  # type: ignore[no-untyped-def]
        return render(
            _parse(b, "get_state"),
            view_mode=args.view,
            entities=args.entities,
            legend_width=min(100, console.width),
        )

    with Live(frame(blob), console=console, auto_refresh=False, transient=False) as live:
        for _ in range(steps):
            time.sleep(args.delay)
            rollout.step()
            blob = rollout.get_state()
            live.update(frame(blob), refresh=True)
    return blob


def run(args: argparse.Namespace) -> int:
    color = _use_color(args.color)
    if args.state is not None:
        blob = load_state(args.state)
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
        console = _console(color)
        _draw(console, batch, args)
    else:
        if args.game is None:
            raise UsageError(f"give a GAME or --state FILE; valid games: {', '.join(GAME_NAMES)}")
        _check_game_mode(args.game, args.mode)
        steps = args.steps if args.steps is not None else (WATCH_STEPS if args.watch else 0)
        rollout = _Rollout(args.game, args.mode, args.seed, args.policy)
        console = _console(color)
        if args.watch:
            blob = _watch(console, rollout, steps, args)
        else:
            for _ in range(steps):
                rollout.step()
            blob = rollout.get_state()
            _draw(console, _parse(blob, "get_state"), args)
    if args.save is not None:
        _save(args.save, blob)
    return 0


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


if __name__ == "__main__":
    sys.exit(main())
