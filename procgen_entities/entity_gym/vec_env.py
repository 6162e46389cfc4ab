"""ProcgenVecEnv: an entity-gym VecEnv over procgen, stepped and read in C (see stepper.py).

It composes the core stepper and the core observation (as EntityVectorEnv does). A step is one
native call: with the headless engine the pool steps every game and reads it straight into the
observation (observation.py's ``ObservationSpec.ragged``, built by csrc/observation.h: every
entity of the requested types and features, the tilemap's types, the global features, reward
and done), and Python wraps the flat arrays into one RaggedBufferF32 per entity type
(``RaggedObservation``, one per observation filter). The
stepper's public calls (``step_values``, ``final_states``, ``get_states``, ...) are this env's
too, by delegation; they write the states only when asked for.

Episode boundaries are procgen's: after an episode ends the observation is already the next
level's first state, while ``reward`` and ``done`` describe the step that ended the episode.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt
from entity_gym.env import ActionSpace, ObsSpace, VecEnv, VecObs
from ragged_buffer import RaggedBufferI64

from procgen_entities._native import _collector
from procgen_entities.entity_gym.observation import (
    ACTION_NAME,
    RaggedObservation,
    action_space,
    observation_space,
)
from procgen_entities.errors import UsageError
from procgen_entities.features import StepValues
from procgen_entities.games import Game
from procgen_entities.observation import BuilderArrays, BuiltRows
from procgen_entities.parse import StateBatch
from procgen_entities.stepper import BytesLike, ProcgenStepper, locked, unpicklable
from procgen_entities.tilemap import CameraConverter, tilemap_features

__all__ = ["ProcgenVecEnv"]


class ProcgenVecEnv(VecEnv):
    """``num_envs`` procgen envs of one game as an entity-gym VecEnv.

    ``distribution_mode``, ``start_level``, ``num_levels`` and ``**procgen_options`` go to
    procgen (``use_generated_assets=True`` is refused: procgen's get_state aborts with it).
    ``seed`` seeds procgen's level sampling (None: random; any integer, folded into procgen's
    [0, 2**31) by procgen_envs.fold_seed). ``num_threads``: threads of the pool
    that steps and reads the envs (default: the CPUs this process may run on, its affinity; a step
    never runs more threads at once than those). ``num_groups``: procgen vec
    envs the envs are split over (default: 2 when there are at least 8 envs; each group has its
    own procgen rand_seed, so the grouping is part of the configuration). ``group_seeding``:
    "derived" (group 0 gets the seed, the others seeds hashed from it and their index) or
    "consecutive" (seed + g, as before; see procgen_envs.group_seeds). ``relative_positions``
    adds ``rel_x``/``rel_y`` (position minus the player's) to every non-player entity type.
    ``tilemap`` ("tiles", "runs", "columns", "chunks" or None) adds the tilemap's entity types
    (see tilemap.py), cropped to what procgen shows the agent (the state's camera square), with
    ``rel_x``/``rel_y`` from the camera centre; without it the grid is never read.
    ``entity_window`` (default True) likewise keeps only the entities (other than the Player)
    that overlap the camera square; False gives every entity of the level. ``actor``: the
    entity that takes the action, "global" (the global entity) or "player" (the Player entity).
    ``procgen_threads``: procgen's own stepping threads per group (procgen's ``num_threads``;
    used by the procgen-stepped engines).

    ``engine``: "headless" (our pool runs procgen's game logic without rendering and reads the
    games directly), "direct" (procgen steps and renders, the games are read directly),
    "get_state" (procgen steps and renders, its serializer writes the states) or "auto" (the
    best one this procgen build passes; one EngineFallbackWarning when it is not headless). All
    give the same observations; ``self.engine`` says which one runs. ``defer_reset`` (headless
    only): a finished episode's observation is its terminal state and its reset happens at the
    next ``act``, whose action is ignored for that env.
    """

    def __init__(
        self,
        game: str,
        num_envs: int,
        *,
        relative_positions: bool = False,
        tilemap: Optional[str] = None,
        entity_window: bool = True,
        actor: str = "global",
        **options: Any,
    ) -> None:
        action_space(actor)  # refuse an unknown actor before procgen starts
        self._stepper = ProcgenStepper(game, num_envs, **options)
        self._stepper.owner = type(self).__name__  # the name its errors give
        self.tilemap = tilemap
        self.entity_window = entity_window
        self.actor = actor
        tile_entities = tilemap_features(self.game.name, tilemap, window=True) if tilemap else {}
        self._obs_space = observation_space(
            self.game, relative_positions=relative_positions, extra_entities=tile_entities
        )
        self._tiles = CameraConverter(self.game.name, tilemap) if tilemap else None
        self._views: Dict[Any, RaggedObservation] = {}

    @property
    def stepper(self) -> ProcgenStepper:
        """The stepper this env composes (every public name of it is also delegated below)."""
        return self._stepper

    @property
    def _call_lock(self) -> Any:
        """The stepper's lock (replaced in a forked child), taken by the @locked methods."""
        return self._stepper.call_lock

    # ---- the stepper's public surface, delegated (stepper.py documents each) ----

    @property
    def game(self) -> Game:
        return self._stepper.game

    @property
    def num_envs(self) -> int:
        return self._stepper.num_envs

    @property
    def num_threads(self) -> int:
        return self._stepper.num_threads

    @property
    def engine(self) -> str:
        return self._stepper.engine

    @property
    def seed(self) -> int:
        return self._stepper.seed

    @property
    def fresh(self) -> bool:
        return self._stepper.fresh

    @property
    def procgen_options(self) -> Dict[str, Any]:
        return self._stepper.procgen_options

    @property
    def procgen_envs(self) -> Tuple[Any, ...]:
        return self._stepper.procgen_envs

    @property
    def collector(self) -> Any:
        return self._stepper.collector

    @property
    def terminal(self) -> Any:
        return self._stepper.terminal

    @property
    def pending_reset(self) -> npt.NDArray[np.bool_]:
        return self._stepper.pending_reset

    @property
    def call_lock(self) -> Any:
        return self._stepper.call_lock

    @property
    def owner(self) -> str:
        return self._stepper.owner

    @property
    def truncated(self) -> npt.NDArray[np.bool_]:
        return self._stepper.truncated

    @property
    def last_level_complete(self) -> npt.NDArray[np.bool_]:
        return self._stepper.last_level_complete

    def check_open(self) -> None:
        self._stepper.check_open()

    def defer_resets(self) -> None:
        self._stepper.defer_resets()

    def restart(self, seed: Optional[int] = None) -> None:
        self._stepper.restart(seed)

    def step(self, chosen: npt.ArrayLike) -> None:
        self._stepper.step(chosen)

    def reset_envs(self, mask: npt.NDArray[np.bool_]) -> None:
        self._stepper.reset_envs(mask)

    def values_of(self, collector: Any) -> StepValues:
        return self._stepper.values_of(collector)

    def step_observe(
        self, chosen: npt.ArrayLike, builder: _collector.ObservationBuilder, outs: BuilderArrays
    ) -> BuiltRows:
        return self._stepper.step_observe(chosen, builder, outs)

    def advance(self, chosen: npt.ArrayLike) -> None:
        self._stepper.advance(chosen)

    def observe(self, builder: _collector.ObservationBuilder, outs: BuilderArrays) -> BuiltRows:
        return self._stepper.observe(builder, outs)

    def observe_terminal(
        self,
        builder: _collector.ObservationBuilder,
        outs: BuilderArrays,
        indices: npt.NDArray[np.int64],
    ) -> BuiltRows:
        return self._stepper.observe_terminal(builder, outs, indices)

    def read(self) -> None:
        self._stepper.read()

    def refresh(self) -> None:
        self._stepper.refresh()

    def step_values(self) -> StepValues:
        return self._stepper.step_values()

    def get_states(self) -> List[bytes]:
        return self._stepper.get_states()

    def restore_states(self, states: Sequence[BytesLike]) -> None:
        self._stepper.restore_states(states)

    def final_states(self) -> Tuple[npt.NDArray[np.int64], StateBatch]:
        return self._stepper.final_states()

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        return self._stepper.render(**kwargs)

    def close(self) -> None:
        stepper = getattr(self, "_stepper", None)  # None if __init__ failed
        if stepper is not None:
            stepper.close()

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise unpicklable(type(self).__name__)

    def __enter__(self) -> "ProcgenVecEnv":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- entity-gym VecEnv ----

    def obs_space(self) -> ObsSpace:
        return self._obs_space

    def action_space(self) -> Dict[str, ActionSpace]:
        return dict(action_space(self.actor))

    def __len__(self) -> int:
        return self.num_envs

    @locked
    def reset(self, obs_config: ObsSpace) -> VecObs:
        self._view_for(obs_config)  # an invalid filter is refused before the envs restart
        self._stepper.restart()
        obs = self._observe(obs_config)
        obs.reward[:] = 0.0
        obs.done[:] = False
        obs.metrics.clear()
        return obs

    @locked
    def act(self, actions: Mapping[str, RaggedBufferI64], obs_filter: ObsSpace) -> VecObs:
        self._stepper.check_open()
        given = actions[ACTION_NAME]  # a RaggedBufferI64, or an array of one action per env
        if hasattr(given, "size1"):  # ragged: exactly one action in each env's row
            counts = np.asarray(given.size1())
            if counts.shape != (self.num_envs,) or (counts != 1).any():
                raise UsageError(f"expected one {ACTION_NAME!r} action per env ({self.num_envs} "
                                 f"envs), got a ragged buffer of per-env counts "
                                 f"{counts.tolist()[:16]}")  # fmt: skip
        chosen = np.asarray(given.as_array() if hasattr(given, "as_array") else given)
        chosen = chosen.reshape(-1)
        if chosen.shape[0] != self.num_envs:
            raise UsageError(f"expected one {ACTION_NAME!r} action per env ({self.num_envs})")
        view = self._view_for(obs_filter)  # an invalid filter is refused before the step
        outs = view.outputs()
        # step and observation in one native call (checks the actions' dtype and range)
        return view.vec_obs(self._stepper.step_observe(chosen, view.builder, outs), outs)

    @locked
    def set_states(self, states: Sequence[BytesLike]) -> VecObs:
        """Restore saved get_state blobs (one per env; see ProcgenStepper.restore_states) and
        return their observation (the full observation space)."""
        self._stepper.restore_states(states)
        return self._observe(self._obs_space)

    # ---- building observations ----

    def _view_for(self, obs_filter: ObsSpace) -> RaggedObservation:
        """The native observation of a filter (made once per distinct filter)."""
        key = (
            tuple((name, tuple(e.features)) for name, e in obs_filter.entities.items()),
            tuple(obs_filter.global_features),
        )
        view = self._views.get(key)
        if view is None:
            view = RaggedObservation(
                self.game, self._obs_space, obs_filter, self.num_envs,
                window=self.entity_window, tiles=self._tiles, actor=self.actor,
            )  # fmt: skip
            self._views[key] = view
        return view

    def _observe(self, obs_filter: ObsSpace) -> VecObs:
        """The observation of the current states (no step)."""
        view = self._view_for(obs_filter)
        outs = view.outputs()
        return view.vec_obs(self._stepper.observe(view.builder, outs), outs)
