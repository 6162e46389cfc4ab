"""Entity observations for OpenAI procgen.

A C parser of get_state, entity-gym adapters, a fast vec env, tilemaps as entities.
"""

from procgen_entities.env import ProcgenEnv
from procgen_entities.errors import MixedBatchError, ProcgenEntitiesError, StateDecodeError
from procgen_entities.games import ENTITY_FIELDS, GAME_NAMES, GAMES, Game, get_game
from procgen_entities.parse import StateBatch, parse_state, parse_states
from procgen_entities.tilemap import entities_to_tilemap, tilemap_features, tilemap_to_entities
from procgen_entities.vec_env import ProcgenVecEnv

__all__ = [
    "ENTITY_FIELDS",
    "GAMES",
    "GAME_NAMES",
    "Game",
    "MixedBatchError",
    "ProcgenEntitiesError",
    "ProcgenEnv",
    "ProcgenVecEnv",
    "StateBatch",
    "StateDecodeError",
    "entities_to_tilemap",
    "get_game",
    "parse_state",
    "parse_states",
    "tilemap_features",
    "tilemap_to_entities",
]
