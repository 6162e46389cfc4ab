"""What an entity-gym agent sees of each game: the core feature space (features.py) as an
entity-gym ObsSpace, and procgen's 15 actions as one global categorical action."""

from __future__ import annotations

from typing import Dict, Mapping, Optional, Sequence

from entity_gym.env import (
    ActionSpace,
    CategoricalActionSpace,
    Entity,
    GlobalCategoricalActionSpace,
    ObsSpace,
)

from procgen_entities.errors import UsageError
from procgen_entities.features import (
    ACTION_LABELS,
    VECTOR_HEAD_ITEMS,
    EntityPlan,
    StepValues,
    apply_derived_features,
    entity_features,
    feature_space,
    global_feature_names,
    global_features,
)
from procgen_entities.games import Game

__all__ = [
    "ACTION_LABELS",
    "ACTION_NAME",
    "ACTORS",
    "GLOBAL_ENTITY",
    "VECTOR_HEAD_ITEMS",
    "EntityPlan",
    "StepValues",
    "action_space",
    "apply_derived_features",
    "entity_features",
    "global_feature_names",
    "global_features",
    "observation_space",
]

ACTION_NAME = "move"
GLOBAL_ENTITY = "__global__"


def observation_space(
    game: str | Game,
    *,
    relative_positions: bool = False,
    extra_entities: Optional[Mapping[str, Sequence[str]]] = None,
) -> ObsSpace:
    """The full ObsSpace of a game (features.feature_space as entity-gym types)."""
    space = feature_space(
        game, relative_positions=relative_positions, extra_entities=extra_entities
    )
    return ObsSpace(
        global_features=list(space.global_features),
        entities={name: Entity(list(e.features)) for name, e in space.entities.items()},
    )


#: Who takes the action: the global entity (its own input is the global features) or the Player
#: entity (its input is the player's features; both see every entity through attention).
ACTORS = ("global", "player")


def action_space(actor: str = "global") -> Dict[str, ActionSpace]:
    if actor not in ACTORS:
        raise UsageError(f"actor must be one of {ACTORS}, got {actor!r}")
    if actor == "player":
        return {ACTION_NAME: CategoricalActionSpace(list(ACTION_LABELS))}
    return {ACTION_NAME: GlobalCategoricalActionSpace(list(ACTION_LABELS))}
