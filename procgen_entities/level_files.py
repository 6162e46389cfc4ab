"""Level files: text levels you can draw, and saved states, read into validated states.

A **text level** (``.txt``) is ``level_to_text``'s drawing under one header line that says which
state the drawing is made over (``level_from_text``'s ``base``: every field the text cannot show,
the RNGs, velocities, timers and options, comes from it)::

    ; procgen-entities level game=coinrun mode=easy seed=5
    ################################################################
    #.....................##########################################
    ...

``game=G mode=M seed=S`` (and optionally ``steps=K policy=random|noop``) is the state
``python -m procgen_entities.dump G --mode M --seed S --steps K --policy P`` draws (procgen's
level S, so the header regenerates it exactly; K at most the game's longest episode,
``max_steps``); ``base=FILE`` is a saved get_state blob (raw or .gz, relative to the text file's
folder; a regular file). Further lines starting with ``;`` before the drawing are comments (no
game's legend uses ``;``). Any other file is a saved get_state blob.

``load_levels`` reads them and validates them all (``states_to_bytes``: what ``set_states``
checks, one trial restore per game and options), so a level that is read is one procgen plays.
``env_options`` (rollout.py) gives the procgen options of the env a state fits
(``set_states`` refuses a state of other options).
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, cast

from procgen_entities.errors import ProcgenEntitiesError, StateDecodeError, UsageError
from procgen_entities.files import open_regular
from procgen_entities.games import GAME_NAMES, value_ranges
from procgen_entities.level_text import level_from_text, level_to_text
from procgen_entities.procgen_envs import valid_modes

# The states levels are drawn over are rollout.py's (once tools/dump.py's, which imports this
# module: a circle); env_options and ALL_LEVELS_HIGH stay importable from here.
from procgen_entities.rollout import ALL_LEVELS_HIGH, env_options, load_state, record_state
from procgen_entities.state import State, states_to_bytes

__all__ = [
    "ALL_LEVELS_HIGH",
    "HEADER",
    "Level",
    "LevelBase",
    "LevelError",
    "env_options",
    "level_file_text",
    "load_levels",
    "max_steps",
    "read_level",
]

#: The first line of a text level starts with this.
HEADER = "; procgen-entities level"
#: The biggest text level read (a 64x64 drawing is ~4 KB).
MAX_TEXT_BYTES = 2**20
#: The largest seed= of a header (procgen's level seeds, as the viewer's --seed).
MAX_SEED = 2**31 - 2
#: A header number: ASCII digits only (str.isdigit also takes '²', which int() refuses), at
#: most 10 of them (int() of thousands of digits is slow, then refused).
NUMBER = re.compile(r"[0-9]{1,10}")
#: The most level files ``level_paths`` takes from one folder (each read level is kept in memory
#: with its state, ~0.5 MB: 10,000 files are ~5 GB).
MAX_LEVEL_FILES = 10_000
#: Levels validated at once (``validate``): one trial-restore env of this many games.
VALIDATE_BATCH = 64


class LevelError(ProcgenEntitiesError, ValueError):
    """A level file that cannot be read, or whose level procgen would not play."""


def max_steps(game: str) -> int:
    """The most ``steps=`` a header takes: the game's longest episode (procgen's timeout in its
    longest mode, as value_ranges.json records it: 1,000 steps for most games, 500 for leaper
    and maze, 6,000 for bigfish), so that reading a level never replays more than one."""
    if game not in GAME_NAMES:
        raise LevelError(f"unknown game {game!r}; valid games: {', '.join(GAME_NAMES)}")
    ranges = cast(Mapping[str, Sequence[float]], value_ranges(game)["ranges"])
    return int(ranges["scalar.timeout"][1])


@dataclass(frozen=True)
class LevelBase:
    """The state a text level is drawn over: a fresh level (game, mode, seed, after ``steps``
    steps of ``policy`` as the viewer takes them) or a saved state file (``path``)."""

    game: str = ""
    mode: str = "hard"
    seed: int = 0
    steps: int = 0
    policy: str = "random"
    path: Optional[str] = None

    def header(self) -> str:
        """The header line that names this base; LevelError for a base no header line can name,
        so that a text level written is one that reads back."""
        if self.path is not None:
            if "".join(self.path.splitlines()) != self.path or not _is_utf8(self.path):
                raise LevelError(f"the base file name {self.path!r} cannot be written in a text "
                                 "level's one-line UTF-8 header (a line break, or bytes that are "
                                 "not UTF-8): rename the file")  # fmt: skip
            return f"{HEADER} base={shlex.quote(self.path)}"
        if self.steps > max_steps(self.game):
            raise LevelError(f"steps={self.steps} is more than {self.game}'s longest episode "
                             f"({max_steps(self.game)} steps), the most a text level's header "
                             "takes")  # fmt: skip
        more = f" steps={self.steps} policy={self.policy}" if self.steps else ""
        return f"{HEADER} game={self.game} mode={self.mode} seed={self.seed}{more}"

    def state(self, folder: Path) -> bytes:
        """The base's get_state blob (``folder``: where a relative ``path`` is)."""
        try:
            if self.path is not None:
                return load_state(str(folder / self.path))
            return record_state(
                self.game, mode=self.mode, seed=self.seed, steps=self.steps, policy=self.policy
            )
        except UsageError as exc:
            raise LevelError(str(exc)) from None


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")  # a file name's undecodable bytes are lone surrogates here
    except UnicodeEncodeError:
        return False
    return True


@dataclass
class Level:
    """A level read from ``path``: its state, the base a text level is drawn over (None for a
    saved state), and after validation its get_state bytes."""

    path: Path
    state: State
    base: Optional[LevelBase] = None
    blob: Optional[bytes] = None

    @property
    def name(self) -> str:
        return self.path.name


def level_file_text(state: State, base: LevelBase) -> str:
    """The text level of ``state`` (drawn over ``base``, which it should be made from)."""
    return f"{base.header()}\n{level_to_text(state)}"


def _parse_header(line: str, where: str) -> LevelBase:
    try:
        words = shlex.split(line[len(HEADER) :])
    except ValueError as exc:
        raise LevelError(f"{where}: bad header line: {exc}") from None
    fields: Dict[str, str] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or key not in ("game", "mode", "seed", "steps", "policy", "base"):
            raise LevelError(f"{where}: header field {word!r} is not one of game=, mode=, "
                             "seed=, steps=, policy=, base=")  # fmt: skip
        fields[key] = value
    if "base" in fields:
        if len(fields) > 1:
            raise LevelError(f"{where}: base=FILE stands alone in the header")
        return LevelBase(path=fields["base"])
    game = fields.get("game", "")
    if game not in GAME_NAMES:
        raise LevelError(f"{where}: header game={game!r} is not one of {', '.join(GAME_NAMES)}")
    mode = fields.get("mode", "hard")
    if mode not in valid_modes(game):
        raise LevelError(f"{where}: header mode={mode!r} is not one of {game}'s modes "
                         f"({', '.join(valid_modes(game))})")  # fmt: skip
    numbers = {}
    for key, most in (("seed", MAX_SEED), ("steps", max_steps(game))):
        text = fields.get(key, "0")
        if not NUMBER.fullmatch(text) or int(text) > most:
            longest = f" ({game}'s longest episode)" if key == "steps" else ""
            raise LevelError(f"{where}: header {key}={text!r} is not a whole number in "
                             f"0..{most}{longest}")  # fmt: skip
        numbers[key] = int(text)
    policy = fields.get("policy", "random")
    if policy not in ("random", "noop"):
        raise LevelError(f"{where}: header policy={policy!r} is not random or noop")
    return LevelBase(game, mode, numbers["seed"], numbers["steps"], policy)


def _split_text(text: str, where: str) -> Tuple[LevelBase, str]:
    lines = text.splitlines()
    if not lines or not lines[0].startswith(HEADER):
        raise LevelError(f"{where}: a text level starts with {HEADER!r} game=... or base=...")
    base = _parse_header(lines[0], where)
    body = [line for line in lines[1:] if not line.startswith(";")]
    return base, "\n".join(body) + "\n"


def _is_text(path: Path) -> bool:
    return path.suffix.lower() == ".txt"


def read_level(path: os.PathLike | str) -> Level:
    """A text level or a saved state (not yet validated); LevelError if it cannot be read."""
    file = Path(path)
    if not _is_text(file):
        try:
            blob = load_state(str(file))
        except UsageError as exc:
            raise LevelError(str(exc)) from None
        try:
            return Level(file, State.from_bytes(blob))
        except StateDecodeError as exc:
            raise LevelError(f"{file}: not a procgen get_state blob: {exc.reason}") from None
    try:
        with open_regular(file) as f:  # a FIFO would block open() forever
            raw = f.read(MAX_TEXT_BYTES + 1)
        text = raw.decode("utf-8")
    except OSError as exc:
        raise LevelError(f"cannot read level {str(file)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise LevelError(f"{file}: a text level is UTF-8 text") from None
    if len(raw) > MAX_TEXT_BYTES:
        raise LevelError(f"{file}: more than {MAX_TEXT_BYTES} bytes: not a text level")
    base_spec, drawing = _split_text(text, str(file))
    try:
        blob = base_spec.state(file.parent)
    except LevelError as exc:  # the base file's own problem, said with the level's name
        raise LevelError(f"{file}: its base: {exc}") from None
    try:
        base = State.from_bytes(blob)
        return Level(file, level_from_text(drawing, base=base), base_spec)
    except StateDecodeError as exc:
        reason = exc.reason
        raise LevelError(f"{file}: its base is not a procgen get_state blob: {reason}") from None
    except UsageError as exc:
        raise LevelError(f"{file}: {exc}") from None


def validate(levels: Sequence[Level]) -> None:
    """Write every level's bytes, validated as set_states validates (LevelError naming the file
    and the field of the first one refused), ``VALIDATE_BATCH`` levels at a time: the trial
    restore's procgen env holds every game of its batch (~4 MB each)."""
    for start in range(0, len(levels), VALIDATE_BATCH):
        batch = levels[start : start + VALIDATE_BATCH]
        try:
            blobs = states_to_bytes([level.state for level in batch])
        except StateDecodeError as exc:
            raise LevelError(f"{batch[exc.index].path}: procgen would not play it: "
                             f"{exc.reason} (field {exc.field!r})") from None  # fmt: skip
        except UsageError as exc:
            raise LevelError(str(exc)) from None
        for level, blob in zip(batch, blobs):
            level.blob = blob


def level_paths(folder: os.PathLike | str) -> List[Path]:
    """The level files of a folder: every file not starting with '.', sorted by name; at most
    ``MAX_LEVEL_FILES`` of them (LevelError above it, before any is read)."""
    where = Path(folder)
    if not where.is_dir():
        raise LevelError(f"{str(where)!r} is not a folder")
    paths: List[Path] = []
    for p in where.iterdir():
        if p.is_file() and not p.name.startswith("."):
            paths.append(p)
            if len(paths) > MAX_LEVEL_FILES:
                raise LevelError(f"{str(where)!r} holds more than {MAX_LEVEL_FILES} level files, "
                                 "the most one folder may hold: split it into folders of at "
                                 f"most {MAX_LEVEL_FILES}")  # fmt: skip
    if not paths:
        raise LevelError(f"{str(where)!r} holds no level files (.txt text levels or saved states)")
    return sorted(paths)


def load_levels(paths: Sequence[os.PathLike | str]) -> List[Level]:
    """Read and validate level files (their ``blob`` set)."""
    levels = [read_level(p) for p in paths]
    validate(levels)
    return levels
