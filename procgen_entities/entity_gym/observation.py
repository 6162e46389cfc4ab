"""What an entity-gym agent sees of each game: the core feature space (features.py) as an
entity-gym ObsSpace, procgen's 15 actions as one global categorical action, and
``RaggedObservation``: one observation filter's core observation (observation.py's
``ObservationSpec.ragged``, built by csrc/observation.h) formatted as entity-gym's VecObs."""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt
from entity_gym.env import (
    ActionSpace,
    CategoricalActionSpace,
    Entity,
    GlobalCategoricalActionSpace,
    ObsSpace,
    VecObs,
)
from entity_gym.env.vec_env import Metric, VecActionMask, VecCategoricalActionMask
from ragged_buffer import RaggedBufferF32, RaggedBufferI64

from procgen_entities._native import _collector
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
from procgen_entities.observation import ObservationSpec, RaggedArrays
from procgen_entities.tilemap import CameraConverter

__all__ = [
    "ACTION_LABELS",
    "ACTION_NAME",
    "ACTORS",
    "GLOBAL_ENTITY",
    "VECTOR_HEAD_ITEMS",
    "EntityPlan",
    "RaggedObservation",
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


class RaggedObservation:
    """One observation filter of a game's full ObsSpace for ``n`` envs as entity-gym's VecObs:
    the core's ragged observation (observation.py's ``ObservationSpec.ragged``: every entity of
    the filter's types, no caps, entities in the state's order, tiles in the tilemap's; its
    global features, reward, done and level_complete, in one native call per step), formatted
    as one ``RaggedBufferF32`` per type without per-entity Python. ``tiles``: the env's tilemap
    (its mode name or CameraConverter) when it has one; ``window``, ``actor``: as
    ProcgenVecEnv's. Refuses (UsageError) a filter the full space does not hold, before
    anything is stepped."""

    def __init__(
        self,
        game: Game,
        full: ObsSpace,
        requested: ObsSpace,
        n: int,
        *,
        window: bool,
        tiles: Union[None, str, CameraConverter],
        actor: str,
    ) -> None:
        self.spec = ObservationSpec.ragged(
            game, full, requested, n, entity_window=window, tilemap=tiles
        )
        types = self.spec.plan.entity_types
        if actor == "player" and (not types or types[0] != "Player"):
            raise UsageError("actor='player' needs the Player entity in the observation")
        self.player_actor = actor == "player"
        self.n = n
        self._ones = np.ones(n, dtype=np.int64)
        self._no_actor = np.zeros((n, 1), dtype=np.int64)

    @property
    def builder(self) -> _collector.ObservationBuilder:
        """The native builder (the core's)."""
        return self.spec.builder

    @property
    def plan(self) -> EntityPlan:
        return self.spec.plan

    @property
    def names(self) -> List[str]:
        """The VecObs' entity types in order (the global entity comes after them)."""
        return self.spec.names

    def outputs(self) -> RaggedArrays:
        """The builder's arrays for one call (ObservationSpec.ragged_arrays)."""
        return self.spec.ragged_arrays()

    def vec_obs(
        self, rows: Optional[List[Optional[npt.NDArray[np.float32]]]], outs: RaggedArrays
    ) -> VecObs:
        """The VecObs of one call's ``rows`` (what the build returned) and ``outs``. The
        global entity comes after all others; the Player is each env's first entity."""
        batch = self.spec.ragged_batch(rows, outs)
        features: Dict[str, RaggedBufferF32] = {
            name: RaggedBufferF32.from_flattened(batch.rows[name], batch.counts[name])
            for name in self.spec.names
        }
        features[GLOBAL_ENTITY] = RaggedBufferF32.from_flattened(batch.globals, self._ones)
        actors = self._no_actor if self.player_actor else batch.totals
        action_masks: Dict[str, VecActionMask] = {
            ACTION_NAME: VecCategoricalActionMask(
                RaggedBufferI64.from_flattened(actors, self._ones), None
            )
        }
        ended = batch.done
        metrics: Dict[str, Metric] = {}
        if ended.any():
            finished = batch.level_complete[ended]
            metrics["level_complete"] = Metric(
                count=int(ended.sum()), sum=float(finished.sum()),
                min=float(finished.min()), max=float(finished.max()),
            )  # fmt: skip
        return VecObs(
            features=features, visible={}, action_masks=action_masks, reward=batch.reward,
            done=ended, metrics=metrics,
        )  # fmt: skip
