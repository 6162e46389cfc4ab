"""Where the viewer's and the level files' states come from: a fresh procgen level played for a
few steps by a random or no-op policy (``record_state``, ``Rollout``), a saved get_state file
(``load_state``), and the procgen env a state fits (``env_options``).

The viewer (tools/dump.py) draws and plays these states; the level files (level_files.py) are
drawn over them. Both import this module, which imports neither, so the two need not import
each other.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import zlib
from typing import Any, Dict, Optional

from procgen_entities.backends import import_backend
from procgen_entities.errors import UsageError
from procgen_entities.files import open_regular
from procgen_entities.games import GAME_NAMES, NOOP_ACTION, NUM_ACTIONS
from procgen_entities.procgen_envs import MODE_GAMES, make_procgen_env, valid_modes
from procgen_entities.state import State, procgen_options

__all__ = [
    "ALL_LEVELS_HIGH",
    "MAX_STATE_BYTES",
    "Rollout",
    "check_game_mode",
    "env_options",
    "load_state",
    "record_state",
]

#: procgen's level_seed_high for num_levels = 0 (INT32_MAX; docs/state-format.md §1).
ALL_LEVELS_HIGH = 2**31 - 1
#: The largest state file (decompressed): procgen's get_state buffer (procgen/env.py
#: MAX_STATE_SIZE) holds 1 MiB.
MAX_STATE_BYTES = 2**20


def check_game_mode(game: str, mode: str) -> None:
    """UsageError naming the valid games, or the game's valid modes, unless both are valid."""
    if game not in GAME_NAMES:
        raise UsageError(f"unknown game {game!r}; valid games: {', '.join(GAME_NAMES)}")
    if mode not in valid_modes(game):
        games = MODE_GAMES.get(mode)
        where = f"exists only for {', '.join(games)}" if games else "is no procgen mode"
        raise UsageError(
            f"{game} has no {mode!r} distribution mode; valid modes for {game}: "
            f"{', '.join(valid_modes(game))} ({mode} {where})"
        )


def env_options(state: State) -> Dict[str, Any]:
    """The options of the procgen env ``state`` fits (distribution_mode, the header's flags, and
    start_level / num_levels from its level seed range): what make_procgen_env and the vec envs
    take."""
    low, high = int(state.scalars["level_seed_low"]), int(state.scalars["level_seed_high"])
    levels = (0, 0) if (low, high) == (0, ALL_LEVELS_HIGH) else (low, high - low)
    return {**procgen_options(state.scalars), "start_level": levels[0], "num_levels": levels[1]}


def _quiet_backend() -> None:
    # gym (imported by procgen-mirror via gym3) prints a deprecation notice on import; keep it
    # quiet.
    with contextlib.redirect_stderr(io.StringIO()):
        import_backend()


def _make_env(game: str, mode: str, seed: int):  # type: ignore[no-untyped-def]
    _quiet_backend()
    return make_procgen_env(
        game, 1, distribution_mode=mode, start_level=seed, num_levels=1, rand_seed=seed
    )


def _make_start_env(game: str, seed: int, start: bytes):  # type: ignore[no-untyped-def]
    """A one-env procgen env of the options ``start`` fits, restored to it (``start`` was
    validated: procgen's set_state trusts its input)."""
    _quiet_backend()
    env = make_procgen_env(game, 1, **env_options(State.from_bytes(start)), rand_seed=seed)
    env.callmethod("set_state", [start])
    return env


class Rollout:
    """A one-env procgen rollout with a random or no-op policy (from ``start``, a validated
    state, if given)."""

    def __init__(
        self, game: str, mode: str, seed: int, policy: str, start: Optional[bytes] = None
    ) -> None:
        import numpy as np

        self._np = np
        if start is None:
            self.env = _make_env(game, mode, seed)
        else:
            self.env = _make_start_env(game, seed, start)
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

    def frame(self) -> Any:
        """procgen's 64x64 RGB observation of the current step."""
        return self.env.observe()[1]["rgb"][0]

    @property
    def done(self) -> bool:
        return False  # these policies play on across episodes


def record_state(
    game: str, *, mode: str = "hard", seed: int = 0, steps: int = 0, policy: str = "random"
) -> bytes:
    """The get_state blob after ``steps`` steps of ``policy`` on level ``seed``, as the dump."""
    check_game_mode(game, mode)
    rollout = Rollout(game, mode, seed, policy)
    for _ in range(steps):
        rollout.step()
    return rollout.get_state()


def load_state(path: str) -> bytes:
    """Read a saved state (raw get_state bytes, or gzip'ed); UsageError if it can't be read, is
    not a regular file (a FIFO would block forever) or holds more than MAX_STATE_BYTES (read, or
    decompressed, as a stream up to that cap: a small gzip file can expand to gigabytes)."""
    try:
        with open_regular(path) as f:
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
