"""Creating procgen envs safely: every env this package makes goes through here."""

from __future__ import annotations

from typing import Any, List

from procgen_entities.games import GAMES, get_game

__all__ = ["MODE_GAMES", "check_procgen_options", "make_procgen_env", "valid_modes"]

#: procgen's distribution modes.
DISTRIBUTION_MODES = ("easy", "hard", "extreme", "memory", "exploration")
#: Modes only some games have (procgen aborts the whole process for the others), from games.py.
MODE_GAMES = {
    mode: tuple(g.name for g in GAMES.values() if mode in g.modes) for mode in ("extreme", "memory")
}


def valid_modes(game: str) -> List[str]:
    """The distribution modes procgen supports for a game (exploration aside)."""
    return list(get_game(game).modes)


def check_procgen_options(game: str, options: dict) -> None:
    """Refuse options that would make procgen abort the process or fail obscurely."""
    get_game(game)
    if options.get("use_generated_assets"):
        raise ValueError(
            "use_generated_assets=True is not supported: procgen's get_state aborts the whole "
            "process with it (fassert '!options.use_generated_assets')"
        )
    mode = options.get("distribution_mode", "hard")
    if mode not in DISTRIBUTION_MODES:
        raise ValueError(
            f"unknown distribution_mode {mode!r}; valid modes: {', '.join(DISTRIBUTION_MODES)}"
        )
    if mode in MODE_GAMES and game not in MODE_GAMES[mode]:
        raise ValueError(
            f"{game} has no {mode!r} distribution mode (procgen would abort the process); "
            f"valid modes for {game}: {', '.join(valid_modes(game))}"
        )


def make_procgen_env(game: str, num: int, **options: Any) -> Any:
    """procgen envs (backends.ProcgenEnvs, on the installed backend) after
    check_procgen_options."""
    check_procgen_options(game, options)
    from procgen_entities.backends import make_envs

    return make_envs(game, num, **options)
