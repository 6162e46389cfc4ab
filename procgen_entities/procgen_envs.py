"""Creating procgen envs safely: every env this package makes goes through here.

procgen ends the whole process (exit 1, or an abort) on many bad options rather than raising, so
every option it would die on is checked here first and refused with a UsageError (a ValueError)
naming the option.
"""

from __future__ import annotations

import operator
import os
from typing import Any, Dict, List, Mapping

from procgen_entities.errors import UsageError
from procgen_entities.games import DISTRIBUTION_MODE_IDS, GAMES, get_game

__all__ = [
    "EXPLORATION_LEVELS",
    "MODE_GAMES",
    "SEED_LIMIT",
    "check_procgen_options",
    "make_procgen_env",
    "procgen_options",
    "valid_modes",
]

#: procgen's distribution modes.
DISTRIBUTION_MODES = (*DISTRIBUTION_MODE_IDS, "exploration")
#: procgen's "exploration" mode is hard mode on one fixed level, for these games only (the level
#: seeds are procgen's own, procgen/env.py EXPLORATION_LEVEL_SEEDS). procgen's gym3 env refuses
#: the mode whenever num_levels or start_level is passed at all, which every env here does, so
#: this package translates the mode itself (see procgen_options).
EXPLORATION_LEVELS: Mapping[str, int] = {
    g.name: g.exploration_level for g in GAMES.values() if g.exploration_level is not None
}
#: Modes only some games have (procgen aborts the whole process for the others), from games.py.
MODE_GAMES = {
    **{
        mode: tuple(g.name for g in GAMES.values() if mode in g.modes)
        for mode in ("extreme", "memory")
    },
    "exploration": tuple(g for g in GAMES if g in EXPLORATION_LEVELS),
}
#: procgen's integer options are C ints; its rand_seed, start_level and num_levels must be in
#: [0, SEED_LIMIT) (gym3 asserts on rand_seed; procgen exits on negative levels).
SEED_LIMIT = 2**31
#: procgen starts this many stepping threads per procgen env at most (a sane bound, not procgen's).
MAX_PROCGEN_THREADS = 4096
#: The asset folders procgen reads from its resource_root (a missing one ends the process).
ASSET_FOLDERS = (
    "kenney", "kenney-abstract", "misc_assets", "platform_backgrounds", "platform_backgrounds_2",
    "platformer", "space_backgrounds", "topdown_backgrounds", "water_backgrounds",
)  # fmt: skip


def valid_modes(game: str) -> List[str]:
    """The distribution modes procgen supports for a game (exploration aside)."""
    return list(get_game(game).modes)


def _as_int(name: str, value: Any) -> int:
    """``value`` as a Python int (numpy integers too; not a bool), or a UsageError naming it."""
    if isinstance(value, bool):
        raise UsageError(f"{name} must be an int, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise UsageError(f"{name} must be an int, got {value!r}") from None


def _int_option(name: str, value: Any, low: int, high: int = SEED_LIMIT) -> int:
    """``value`` as an int in [low, high), or a UsageError naming the option."""
    number = _as_int(name, value)
    if not low <= number < high:
        raise UsageError(f"{name} must be in [{low}, {high}), got {number}")
    return number


def _check_mode(game: str, mode: Any) -> None:
    if mode not in DISTRIBUTION_MODES:
        raise UsageError(
            f"unknown distribution_mode {mode!r}; valid modes: {', '.join(DISTRIBUTION_MODES)}"
        )
    if mode in MODE_GAMES and game not in MODE_GAMES[mode]:
        modes = valid_modes(game) + (["exploration"] if game in EXPLORATION_LEVELS else [])
        raise UsageError(
            f"{game} has no {mode!r} distribution mode (procgen would abort the process); "
            f"valid modes for {game}: {', '.join(modes)}"
        )


def _check_resource_root(root: Any) -> str:
    """procgen concatenates resource_root and asset names, and exits when a file is missing: the
    root gets its trailing separator and must hold procgen's asset folders."""
    if not isinstance(root, (str, os.PathLike)):
        raise UsageError(f"resource_root must be a path, got {root!r}")
    path = os.fspath(root)
    missing = [d for d in ASSET_FOLDERS if not os.path.isdir(os.path.join(path, d))]
    if missing:
        raise UsageError(
            f"resource_root {path!r} is not a procgen asset folder (no {', '.join(missing[:3])}"
            f"{', ...' if len(missing) > 3 else ''}); leave it unset for procgen's own assets"
        )
    return path if path.endswith(os.sep) else path + os.sep


def check_procgen_options(game: str, options: Dict[str, Any]) -> None:
    """Refuse options that would make procgen abort the process or fail obscurely."""
    procgen_options(game, options)


def procgen_options(game: str, options: Dict[str, Any]) -> Dict[str, Any]:
    """The options procgen is given for ``options`` (a ProcgenGym3Env's keywords, ``num`` and
    ``env_name`` aside), after refusing every value procgen would end the process on or assert
    on: ``exploration`` becomes procgen's own hard mode on its one level, ints are checked."""
    get_game(game)
    out = dict(options)
    if out.get("use_generated_assets"):
        raise UsageError(
            "use_generated_assets=True is not supported: procgen's get_state aborts the whole "
            "process with it (fassert '!options.use_generated_assets')"
        )
    mode = out.get("distribution_mode", "hard")
    _check_mode(game, mode)
    if mode == "exploration":
        if out.get("num_levels", 0) not in (0, 1) or out.get("start_level", 0) != 0:
            raise UsageError(
                "distribution_mode 'exploration' is one fixed level: leave num_levels and "
                "start_level at 0"
            )
        out.update(distribution_mode="hard", num_levels=1, start_level=EXPLORATION_LEVELS[game])
    start = out["start_level"] = _int_option("start_level", out.get("start_level", 0), 0)
    levels = out["num_levels"] = _int_option("num_levels", out.get("num_levels", 0), 0)
    if start + levels >= SEED_LIMIT:  # procgen stores it (level_seed_high) in a C int
        raise UsageError(
            f"start_level + num_levels must be below {SEED_LIMIT}, got {start} + {levels}"
        )
    if "num_threads" in out:
        name = "procgen_threads (procgen's num_threads)"
        out["num_threads"] = _int_option(name, out["num_threads"], 0, MAX_PROCGEN_THREADS + 1)
    if out.get("rand_seed") is not None:
        out["rand_seed"] = _int_option("rand_seed", out["rand_seed"], 0)
    if out.get("resource_root") is not None:
        out["resource_root"] = _check_resource_root(out["resource_root"])
    if "debug_mode" in out:
        out["debug_mode"] = _int_option("debug_mode", out["debug_mode"], -SEED_LIMIT)
    return out


def make_procgen_env(game: str, num: int, **options: Any) -> Any:
    """procgen envs (backends.ProcgenEnvs, on the installed backend) after procgen_options
    (refused options raise UsageError)."""
    num = _int_option("num (procgen envs)", num, 1)
    given = procgen_options(game, options)
    from procgen_entities.backends import make_envs

    return make_envs(game, num, **given)


def check_num_envs(num_envs: Any) -> int:
    """``num_envs`` as an int >= 1, or a UsageError."""
    return _int_option("num_envs", num_envs, 1)


#: How a vec env seeds its procgen groups (see group_seeds).
GROUP_SEEDINGS = ("derived", "consecutive")


def fold_seed(seed: Any) -> int:
    """Any integer seed (a Python int of any size or sign, a numpy integer, SB3's uint32 draws)
    as one of procgen's seeds, in [0, 2**31): itself when it already is one, else a hash of it
    (numpy's SeedSequence, the same on every machine and in every process)."""
    number = _as_int("seed", seed)
    if 0 <= number < SEED_LIMIT:
        return number
    import numpy as np

    # the sign is its own entropy word: -s and s fold to different seeds
    entropy = [1 if number < 0 else 0, abs(number)]
    return int(np.random.SeedSequence(entropy).generate_state(1, np.uint32)[0] >> 1)


def group_seeds(seed: Any, groups: int, seeding: str = "derived") -> List[int]:
    """procgen's rand_seed for each of a vec env's ``groups`` procgen envs seeded ``seed``.

    ``derived`` (the default): group 0 gets ``fold_seed(seed)`` and group g > 0 a seed hashed
    from (that seed, g), so the level streams of different seeds do not overlap (with
    consecutive seeds, seed s's second group plays seed s+1's first group's levels).
    ``consecutive``: ``fold_seed(seed + g)``, how every env was seeded before; the evaluation
    tool keeps it so that its recorded figures stay those of the same levels.
    """
    if seeding not in GROUP_SEEDINGS:
        raise UsageError(
            f"group_seeding must be one of {', '.join(GROUP_SEEDINGS)}, got {seeding!r}"
        )
    base = fold_seed(seed)
    if seeding == "consecutive":
        return [fold_seed(operator.index(seed) + g) for g in range(groups)]
    import numpy as np

    derived = np.random.SeedSequence(base).spawn(max(groups - 1, 0))
    return [base] + [int(s.generate_state(1, np.uint32)[0] >> 1) for s in derived]
