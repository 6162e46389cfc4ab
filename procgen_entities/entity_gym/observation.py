"""What an entity-gym agent sees of each game: the core feature space (features.py) as an
entity-gym ObsSpace, procgen's 15 actions as one global categorical action, and
``RaggedObservation``: one observation filter's native builder (csrc/observation.h, ragged
output) and the VecObs made of its outputs."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

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
    native_global_ops,
    native_plan_inputs,
)
from procgen_entities.games import Game
from procgen_entities.parse import game_spec

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
    """One observation filter of a game's full ObsSpace for ``n`` envs, built natively: every
    entity of the filter's types (no caps; entities in the state's order, tiles in the
    tilemap's), its global features, reward, done and the level_complete metric, in one native
    call per step (``ObservationBuilder`` with ragged output). ``tiles``: the env's
    CameraConverter when it has a tilemap; ``window``, ``actor``: as ProcgenVecEnv's. Refuses
    (UsageError) a filter the full space does not hold, before anything is stepped."""

    def __init__(
        self,
        game: Game,
        full: ObsSpace,
        requested: ObsSpace,
        n: int,
        *,
        window: bool,
        tiles: Optional[Any],
        actor: str,
    ) -> None:
        self.plan = plan = EntityPlan(game, full, requested, window=window)
        if actor == "player" and (not plan.entity_types or plan.entity_types[0] != "Player"):
            raise UsageError("actor='player' needs the Player entity in the observation")
        self.player_actor = actor == "player"
        wanted = [name for name in requested.entities if name not in plan.entity_types]
        tile_names: List[str] = list(tiles.names) if tiles is not None and wanted else []
        returned = {name: self._tile_columns(game, full, requested, name, tile_names)
                    for name in wanted}  # fmt: skip
        derived, target, support = native_plan_inputs(game, plan)
        widths = [int(w) for w in plan.widths]
        widths += [len(full.entities[name].features) for name in tile_names]
        types = [(0, width, -1, -1, 0) for width in widths]
        ragged: List[Optional[npt.NDArray[np.int32]]] = [
            np.arange(width, dtype=np.int32) for width in plan.widths
        ]
        ragged += [returned.get(name) for name in tile_names]
        tile_spec = None
        if tile_names:
            assert tiles is not None
            tile_spec = (*tiles.native_spec, tiles.mode, tiles.chunk)
        self.builder = _collector.ObservationBuilder(
            game_spec(game.name), n, plan.arrays, derived, target, types, (-1, -1, -1),
            native_global_ops(game, plan.global_features), support, tile_spec, None, None,
            ragged,
        )  # fmt: skip
        #: the VecObs' entity types in order, and each one's output type in the builder
        self.names = plan.entity_types + wanted
        n_slots = len(plan.entity_types)
        self.order = list(range(n_slots)) + [n_slots + tile_names.index(k) for k in wanted]
        self.n = n
        self._counts = np.empty((len(types), n), dtype=np.int64)
        self._globals = np.empty((n, len(plan.global_features)), dtype=np.float32)
        self._complete = np.empty(n, dtype=np.uint8)
        self._ones = np.ones(n, dtype=np.int64)
        self._no_actor = np.zeros((n, 1), dtype=np.int64)

    @staticmethod
    def _tile_columns(
        game: Game, full: ObsSpace, requested: ObsSpace, name: str, tile_names: List[str]
    ) -> npt.NDArray[np.int32]:
        """The columns a filter keeps of tilemap type ``name`` (UsageError: none such)."""
        entity = full.entities.get(name)
        if name not in tile_names or entity is None:
            raise UsageError(f"{game.name}: no entity type {name!r} in the observation")
        features = list(entity.features)
        chosen = list(requested.entities[name].features)
        missing = [f for f in chosen if f not in features]
        if missing:
            raise UsageError(f"{game.name}: entity type {name!r} has no features {missing}")
        return np.array([features.index(f) for f in chosen], dtype=np.int32)

    def outputs(self) -> Tuple[Any, ...]:
        """The builder's outputs for one call (reward and done new each time: VecObs keeps
        them; the rest is copied into the ragged buffers)."""
        step = (np.empty(self.n, dtype=np.float32), np.empty(self.n, dtype=np.uint8),
                self._complete, None, None)  # fmt: skip
        return (self._counts, self._globals, step)

    def vec_obs(
        self, result: Optional[Tuple[List[Any], npt.NDArray[np.int64]]], outs: Tuple[Any, ...]
    ) -> VecObs:
        """The VecObs of one call's ``result`` (the builder's rows and totals) and ``outs``.
        The global entity comes after all others; the Player is each env's first entity."""
        if result is None:  # this builder is ragged: every call returns its rows
            raise RuntimeError("the ragged observation builder returned no rows")
        rows, totals = result
        counts, globals_, (reward, done, complete, _, _) = outs
        features: Dict[str, RaggedBufferF32] = {
            name: RaggedBufferF32.from_flattened(rows[t], counts[t])
            for name, t in zip(self.names, self.order)
        }
        features[GLOBAL_ENTITY] = RaggedBufferF32.from_flattened(globals_, self._ones)
        actors = self._no_actor if self.player_actor else totals
        action_masks: Dict[str, VecActionMask] = {
            ACTION_NAME: VecCategoricalActionMask(
                RaggedBufferI64.from_flattened(actors, self._ones), None
            )
        }
        ended = done.view(np.bool_)
        metrics: Dict[str, Metric] = {}
        if ended.any():
            finished = complete[ended]
            metrics["level_complete"] = Metric(
                count=int(ended.sum()), sum=float(finished.sum()),
                min=float(finished.min()), max=float(finished.max()),
            )  # fmt: skip
        return VecObs(
            features=features, visible={}, action_masks=action_masks, reward=reward,
            done=ended, metrics=metrics,
        )  # fmt: skip
