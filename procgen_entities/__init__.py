"""Entity observations for OpenAI procgen: a C parser of get_state, entity-gym adapters, a fast vec env."""

from procgen_entities.errors import MixedBatchError, ProcgenEntitiesError, StateDecodeError
from procgen_entities.games import ENTITY_FIELDS, GAME_NAMES, GAMES, Game, get_game
from procgen_entities.parse import StateBatch, parse_state, parse_states
from procgen_entities.vec_env import ProcgenVecEnv
from procgen_entities.env import ProcgenEnv

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
    "get_game",
    "parse_state",
    "parse_states",
]
