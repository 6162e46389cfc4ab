"""Entity observations for OpenAI procgen.

The core (parser, games, tilemaps, engine) needs only numpy; the entity-gym adapters
(``ProcgenVecEnv``, ``ProcgenEnv``) are imported on first use.
"""

from typing import TYPE_CHECKING, Any

#: The package version, the one place it is written (pyproject.toml reads it; CHANGELOG.md).
__version__ = "0.1.0"

from procgen_entities.errors import MixedBatchError, ProcgenEntitiesError, StateDecodeError
from procgen_entities.games import ENTITY_FIELDS, GAME_NAMES, GAMES, Game, get_game
from procgen_entities.level_text import level_from_text, level_to_text
from procgen_entities.parse import StateBatch, parse_state, parse_states
from procgen_entities.state import ENTITY_DTYPE, State, states_from_bytes, states_to_bytes
from procgen_entities.tilemap import entities_to_tilemap, tilemap_features, tilemap_to_entities

if TYPE_CHECKING:
    from procgen_entities.entity_gym import ProcgenEnv, ProcgenVecEnv

#: Names served lazily (they import entity-gym and ragged-buffer).
_ADAPTERS = {name: "procgen_entities.entity_gym" for name in ("ProcgenEnv", "ProcgenVecEnv")}


def __getattr__(name: str) -> Any:
    module = _ADAPTERS.get(name)
    if module is None:
        raise AttributeError(f"module 'procgen_entities' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "ENTITY_DTYPE",
    "ENTITY_FIELDS",
    "GAMES",
    "GAME_NAMES",
    "Game",
    "MixedBatchError",
    "ProcgenEntitiesError",
    "ProcgenEnv",
    "ProcgenVecEnv",
    "State",
    "StateBatch",
    "StateDecodeError",
    "entities_to_tilemap",
    "get_game",
    "level_from_text",
    "level_to_text",
    "parse_state",
    "parse_states",
    "states_from_bytes",
    "states_to_bytes",
    "tilemap_features",
    "tilemap_to_entities",
]
