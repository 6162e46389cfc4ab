"""ProcgenVecEnv: an entity-gym VecEnv over procgen, with get_state parallelised in C.

A step: act on every procgen vec env (procgen steps them on its own threads and returns at
once), then for each of them call procgen's C ``get_state`` for all its envs from our thread
pool with the GIL released, parse in place, and gather the requested entity types and features
straight into one float32 buffer. Python only builds one RaggedBufferF32 per entity type.

Episode boundaries are procgen's: after an episode ends the observation is already the next
level's first state, while ``reward`` and ``done`` describe the step that ended the episode.
"""

from __future__ import annotations

import os
import random
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import numpy.typing as npt
from entity_gym.env import ActionSpace, ObsSpace, VecEnv, VecObs
from entity_gym.env.vec_env import Metric, VecActionMask, VecCategoricalActionMask
from ragged_buffer import RaggedBufferF32, RaggedBufferI64

from procgen_entities import _collector
from procgen_entities.adapters import (
    ACTION_NAME,
    GLOBAL_ENTITY,
    VECTOR_HEAD_ITEMS,
    EntityPlan,
    StepValues,
    action_space,
    apply_derived_features,
    global_features,
    observation_space,
)
from procgen_entities.games import Game, get_game
from procgen_entities.parse import SCALAR_NAMES, game_spec
from procgen_entities.procgen_envs import make_procgen_env
from procgen_entities.tilemap import tilemap_features, tilemap_to_entities_batch

__all__ = ["ProcgenVecEnv"]


class ProcgenVecEnv(VecEnv):
    """``num_envs`` procgen envs of one game as an entity-gym VecEnv.

    ``distribution_mode``, ``start_level``, ``num_levels`` and ``**procgen_options`` go to
    procgen (``use_generated_assets=True`` is refused: procgen's get_state aborts with it).
    ``seed`` seeds procgen's level sampling (None: random). ``num_threads``: threads that call
    get_state (default: the number of cores). ``num_groups``: procgen vec envs the envs are
    split over, so that one group's stepping overlaps the next group's get_state (default: 2 when
    there are at least 8 envs). ``relative_positions`` adds ``rel_x``/``rel_y`` (position minus
    the player's) to every non-player entity type. ``tilemap`` ("tiles", "runs", "columns",
    "chunks" or None) adds the tilemap's entity types (see tilemap.py), cropped to what procgen
    shows the agent (the state's camera square), with ``rel_x``/``rel_y`` from the camera centre;
    without it the grid is never read. ``procgen_threads``: procgen's own stepping threads per
    group (procgen's ``num_threads``; default: procgen's 4, which measured best here even on
    2 cores).
    """

    def __init__(
        self,
        game: str,
        num_envs: int,
        *,
        distribution_mode: str = "hard",
        start_level: int = 0,
        num_levels: int = 0,
        seed: Optional[int] = None,
        num_threads: Optional[int] = None,
        num_groups: Optional[int] = None,
        relative_positions: bool = False,
        tilemap: Optional[str] = None,
        procgen_threads: Optional[int] = None,
        **procgen_options: Any,
    ) -> None:
        self.game: Game = get_game(game)
        self.tilemap = tilemap
        tile_entities = tilemap_features(self.game.name, tilemap, window=True) if tilemap else {}
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.num_envs = int(num_envs)
        self.num_threads = int(num_threads or os.cpu_count() or 1)
        groups = num_groups or (2 if num_envs >= 8 else 1)
        if not 1 <= groups <= num_envs:
            raise ValueError(f"num_groups must be in [1, num_envs], got {groups}")
        self._closed = True
        self._seed = random.SystemRandom().randrange(2**31 - 1) if seed is None else int(seed)
        self._procgen_kwargs = dict(
            distribution_mode=distribution_mode,
            start_level=start_level,
            num_levels=num_levels,
            **procgen_options,
        )
        if procgen_threads is not None:
            self._procgen_kwargs["num_threads"] = int(procgen_threads)
        bounds = np.linspace(0, num_envs, groups + 1).round().astype(int)
        self._group_sizes = [int(b - a) for a, b in zip(bounds[:-1], bounds[1:])]
        self._group_starts = [int(a) for a in bounds[:-1]]
        self._obs_space = observation_space(
            self.game, relative_positions=relative_positions, extra_entities=tile_entities
        )
        self._spec = game_spec(self.game.name)
        self._collector = _collector.StateCollector(self._spec, self.num_envs, self.num_threads)
        self._closed = False
        self._envs: List[Any] = []
        self._handles: List[Tuple[int, int]] = []
        self._make_envs()
        n = self.num_envs
        self._scalars = np.zeros((n, len(SCALAR_NAMES)), dtype=np.float64)
        self._trailer = np.zeros((n, len(self.game.trailer_scalars)), dtype=np.float64)
        n_vectors = len(self.game.trailer_vectors)
        self._heads = np.zeros((n, n_vectors, VECTOR_HEAD_ITEMS), dtype=np.float64)
        self._head_lengths = np.zeros((n, n_vectors), dtype=np.int64)
        self._grid: Optional[np.ndarray] = None
        self._reward, self._done, self._level_complete = (
            SCALAR_NAMES.index(name) for name in ("reward", "done", "level_complete")
        )
        self._center_x, self._center_y, self._view_dim = (
            SCALAR_NAMES.index(name) for name in ("center_x", "center_y", "view_dim")
        )
        self._plans: Dict[Any, EntityPlan] = {}
        self._plan: Optional[EntityPlan] = None
        self._fresh = True  # every env is at the first state of a level, nothing stepped yet

    # ---- procgen ----

    def _make_envs(self) -> None:
        for i, size in enumerate(self._group_sizes):
            env = make_procgen_env(
                self.game.name, size, rand_seed=self._seed + i, **self._procgen_kwargs
            )
            self._envs.append(env)
            ffi = env._ffi
            self._handles.append(
                (int(ffi.cast("uintptr_t", env._c_lib.get_state)),
                 int(ffi.cast("uintptr_t", env._c_env)))
            )  # fmt: skip

    def _close_envs(self) -> None:
        for env in self._envs:
            env.close()
        self._envs, self._handles = [], []

    def _collect(self) -> None:
        for (get_state, handle), start, size in zip(
            self._handles, self._group_starts, self._group_sizes
        ):
            self._collector.collect(get_state, handle, size, start)

    # ---- entity-gym VecEnv ----

    def obs_space(self) -> ObsSpace:
        return self._obs_space

    def action_space(self) -> Dict[str, ActionSpace]:
        return dict(action_space())

    def __len__(self) -> int:
        return self.num_envs

    def reset(self, obs_config: ObsSpace) -> VecObs:
        self._check_open()
        if not self._fresh:
            self._close_envs()
            self._make_envs()
        self._fresh = False
        self._collect()
        obs = self._observe(obs_config)
        obs.reward[:] = 0.0
        obs.done[:] = False
        obs.metrics.clear()
        return obs

    def act(self, actions: Mapping[str, RaggedBufferI64], obs_filter: ObsSpace) -> VecObs:
        self._check_open()
        self._fresh = False
        chosen = actions[ACTION_NAME].as_array().reshape(-1).astype(np.int32)
        if chosen.shape[0] != self.num_envs:
            raise ValueError(f"expected one {ACTION_NAME!r} action per env ({self.num_envs})")
        # Act on every group first: procgen steps them on its own threads while we collect.
        for env, start, size in zip(self._envs, self._group_starts, self._group_sizes):
            env.act(chosen[start : start + size])
        self._collect()
        return self._observe(obs_filter)

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        self._check_open()
        frames = [env.observe()[1]["rgb"] for env in self._envs]
        return np.concatenate(frames, axis=0)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._collector.close()
        self._close_envs()

    def __enter__(self) -> "ProcgenVecEnv":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    # ---- beyond the VecEnv contract ----

    def get_states(self) -> List[bytes]:
        """The raw procgen get_state bytes of the current step, one per env."""
        self._check_open()
        return [self._collector.state_bytes(i) for i in range(self.num_envs)]

    @property
    def last_level_complete(self) -> npt.NDArray[np.bool_]:
        """Per env: did the episode that ended at the last step end in success?"""
        return self._scalars[:, self._level_complete] != 0

    def step_values(self) -> StepValues:
        """Scalars of the current step (header/base by name, trailer fields by name)."""
        return StepValues(
            scalars={name: self._scalars[:, i] for i, name in enumerate(SCALAR_NAMES)},
            extras={name: self._trailer[:, i] for i, name in enumerate(self.game.trailer_scalars)},
            vector_heads={
                name: self._heads[:, v] for v, name in enumerate(self.game.trailer_vectors)
            },
        )

    # ---- building observations ----

    def _add_tile_entities(
        self, features: Dict[str, RaggedBufferF32], obs_filter: ObsSpace, counts: np.ndarray
    ) -> None:
        if not self.tilemap or self._grid is None:
            return
        wanted = [
            name for name in obs_filter.entities if name not in self.game.entity_types.values()
        ]
        if not wanted:
            return
        windows = self._scalars[:, [self._center_x, self._center_y, self._view_dim]]
        rows, lengths = tilemap_to_entities_batch(
            self._grid, self.game.name, self.tilemap, windows=windows
        )
        for name in wanted:
            full = self._obs_space.entities.get(name)
            if name not in rows or full is None:
                raise ValueError(f"{self.game.name}: no entity type {name!r} in the observation")
            requested = obs_filter.entities[name].features
            missing = [f for f in requested if f not in full.features]
            if missing:
                raise ValueError(
                    f"{self.game.name}: entity type {name!r} has no features {missing}"
                )
            if list(requested) != list(full.features):
                columns = [full.features.index(f) for f in requested]
                data = np.ascontiguousarray(rows[name][:, columns])
            else:
                data = rows[name]
            features[name] = RaggedBufferF32.from_flattened(data, lengths[name])

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("ProcgenVecEnv is closed")

    def _plan_for(self, obs_filter: ObsSpace) -> EntityPlan:
        key = (
            tuple((name, tuple(e.features)) for name, e in obs_filter.entities.items()),
            tuple(obs_filter.global_features),
        )
        plan = self._plans.get(key)
        if plan is None:
            plan = EntityPlan(self.game, self._obs_space, obs_filter)
            self._plans[key] = plan
        if plan is not self._plan:
            self._collector.set_plan(
                plan.type_to_slot, plan.feature_start, plan.codes, plan.condition
            )
            self._plan = plan
        return plan

    def _observe(self, obs_filter: ObsSpace) -> VecObs:
        plan = self._plan_for(obs_filter)
        collector = self._collector
        if self.tilemap:
            if self._grid is None:
                self._grid = np.empty((self.num_envs, *collector.grid_shape()), dtype=np.int32)
            collector.fill(self._scalars, self._trailer, self._grid)
        else:
            collector.fill(self._scalars, self._trailer)
        if self._heads.shape[1]:
            collector.vector_heads(self._heads, self._head_lengths)
        n_slots = len(plan.entity_types)
        counts = np.empty((n_slots, self.num_envs), dtype=np.int64)
        collector.count(counts)
        totals = counts.sum(axis=1)
        slot_offsets = np.zeros(n_slots + 1, dtype=np.int64)
        np.cumsum(totals * plan.widths, out=slot_offsets[1:])
        flat = np.empty(slot_offsets[-1], dtype=np.float32)
        collector.gather(counts, slot_offsets, flat)

        values = self.step_values()
        features: Dict[str, RaggedBufferF32] = {}
        for s, name in enumerate(plan.entity_types):
            rows = flat[slot_offsets[s] : slot_offsets[s + 1]].reshape(-1, int(plan.widths[s]))
            apply_derived_features(rows, plan.derived[s], counts[s], values)
            features[name] = RaggedBufferF32.from_flattened(rows, counts[s])
        self._add_tile_entities(features, obs_filter, counts)
        globals_ = global_features(self.game, plan.global_features, values)
        features[GLOBAL_ENTITY] = RaggedBufferF32.from_flattened(
            globals_, np.ones(self.num_envs, dtype=np.int64)
        )
        # The global action is taken by the global entity, which comes after all others.
        actor = sum(
            (features[name].size1() for name in obs_filter.entities if name in features),
            np.zeros(self.num_envs, dtype=np.int64),
        ).reshape(-1, 1)
        action_masks: Dict[str, VecActionMask] = {
            ACTION_NAME: VecCategoricalActionMask(
                RaggedBufferI64.from_flattened(actor, np.ones(self.num_envs, dtype=np.int64)),
                None,
            )
        }
        done = self._scalars[:, self._done] != 0
        metrics: Dict[str, Metric] = {}
        if done.any():
            finished = self._scalars[done, self._level_complete]
            metrics["level_complete"] = Metric(
                count=int(done.sum()), sum=float(finished.sum()),
                min=float(finished.min()), max=float(finished.max()),
            )  # fmt: skip
        return VecObs(
            features=features,
            visible={},
            action_masks=action_masks,
            reward=self._scalars[:, self._reward].astype(np.float32),
            done=done,
            metrics=metrics,
        )
