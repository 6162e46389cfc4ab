"""ProcgenVecEnv: an entity-gym VecEnv over procgen, stepped and read in C.

A step with the default (headless) engine: our thread pool runs procgen's own game logic for
every env (``Game::step`` without its render, see procgen_entities/engine), writes each state
straight from procgen's game objects and validates it; then the requested entity types and
features are gathered in C into one float32 buffer and Python builds one RaggedBufferF32 per
entity type. The ``get_state`` engine instead lets procgen step and render on its own threads and
calls procgen's serializer from our pool; ``direct`` lets procgen step and reads the objects.

Episode boundaries are procgen's: after an episode ends the observation is already the next
level's first state, while ``reward`` and ``done`` describe the step that ended the episode.
"""

from __future__ import annotations

import os
import random
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt
from entity_gym.env import ActionSpace, ObsSpace, VecEnv, VecObs
from entity_gym.env.vec_env import Metric, VecActionMask, VecCategoricalActionMask
from ragged_buffer import RaggedBufferF32, RaggedBufferI64

from procgen_entities import _collector
from procgen_entities.engine import ENGINES, bind_engine
from procgen_entities.entity_gym.observation import (
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
from procgen_entities.parse import SCALAR_NAMES, StateBatch, game_spec, parse_states
from procgen_entities.procgen_envs import make_procgen_env
from procgen_entities.restore import check_restorable
from procgen_entities.tilemap import CameraConverter, tilemap_features

__all__ = ["ProcgenVecEnv"]

BytesLike = Union[bytes, bytearray, memoryview]


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
        distribution_mode: str = "hard",
        start_level: int = 0,
        num_levels: int = 0,
        seed: Optional[int] = None,
        num_threads: Optional[int] = None,
        num_groups: Optional[int] = None,
        relative_positions: bool = False,
        tilemap: Optional[str] = None,
        procgen_threads: Optional[int] = None,
        engine: str = "auto",
        defer_reset: bool = False,
        **procgen_options: Any,
    ) -> None:
        self.game: Game = get_game(game)
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        self.tilemap = tilemap
        tile_entities = tilemap_features(self.game.name, tilemap, window=True) if tilemap else {}
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.num_envs = int(num_envs)
        self.num_threads = int(num_threads or os.cpu_count() or 1)
        # Groups let one group's procgen stepping overlap the next one's get_state. They also
        # seed procgen (one rand_seed per group), so every engine keeps the same default.
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
        self.engine = engine
        self._live: Any = None
        n = self.num_envs
        self._truncated = np.zeros(n, dtype=np.uint8)
        self._terminal_written = np.zeros(n, dtype=np.uint8)
        self._pending_reset = np.zeros(n, dtype=np.uint8)
        self._make_envs()
        if defer_reset and self.engine != "headless":
            self.close()
            raise ValueError(f"defer_reset needs the headless engine (this env runs {self.engine})")
        self._step_flags = _collector.DEFER_RESET if defer_reset else 0
        self._terminal: Optional[_collector.StateCollector] = (
            _collector.StateCollector(self._spec, n, 1) if self.engine == "headless" else None
        )
        self._scalars = np.zeros((n, len(SCALAR_NAMES)), dtype=np.float64)
        self._trailer = np.zeros((n, len(self.game.trailer_scalars)), dtype=np.float64)
        n_vectors = len(self.game.trailer_vectors)
        self._heads = np.zeros((n, n_vectors, VECTOR_HEAD_ITEMS), dtype=np.float64)
        self._head_lengths = np.zeros((n, n_vectors), dtype=np.int64)
        self._grid: Optional[np.ndarray] = None
        self._tiles = CameraConverter(self.game.name, tilemap, n) if tilemap else None
        self._reward, self._done, self._level_complete = (
            SCALAR_NAMES.index(name) for name in ("reward", "done", "level_complete")
        )
        self._cur_time, self._timeout = (SCALAR_NAMES.index(n) for n in ("cur_time", "timeout"))
        self._center_x, self._center_y, self._view_dim = (
            SCALAR_NAMES.index(name) for name in ("center_x", "center_y", "view_dim")
        )
        self._values = self._make_step_values()
        self._ones = np.ones(n, dtype=np.int64)
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
        with warnings.catch_warnings():
            if self._live is not None or self.engine == "get_state":
                warnings.simplefilter("ignore")  # warned when the engine was first chosen
            binding = bind_engine(
                self.engine, self.game, self._envs, self._group_sizes, self._procgen_kwargs
            )
        self.engine, self._live = binding.name, binding.live
        self._pending_reset[:] = 0

    def _close_envs(self) -> None:
        if self._live is not None:
            self._live.detach()  # procgen's games are about to be freed
        for env in self._envs:
            env.close()
        self._envs, self._handles = [], []

    def _collect(self) -> None:
        """States of every env from procgen's get_state (any engine)."""
        for (get_state, handle), start, size in zip(
            self._handles, self._group_starts, self._group_sizes
        ):
            self._collector.collect(get_state, handle, size, start)

    def _read(self) -> None:
        """States of every env, through the engine (procgen's threads must be idle)."""
        if self._live is None:
            self._collect()
            return
        self._collector.collect_live(self._live, -1, 0)

    def _step(self, chosen: npt.NDArray[np.int32]) -> None:
        if self.engine == "headless":  # every group in one pool run
            self._collector.step_live(
                self._live, -1, chosen, 0, self._terminal, self._step_flags, self._truncated,
                self._terminal_written, self._pending_reset,
            )  # fmt: skip
            return
        # procgen steps (and renders) on its own threads: act on every group first.
        before = self._scalars[:, self._cur_time].copy()
        for env, start, size in zip(self._envs, self._group_starts, self._group_sizes):
            env.act(chosen[start : start + size])
        if self._live is None:
            self._collect()
        else:
            for env in self._envs:
                env._c_lib.libenv_observe(env._c_env)  # wait for procgen's stepping threads
            self._read()
        self._truncated_from_time(before)

    def _truncated_from_time(self, cur_time_before: npt.NDArray[np.float64]) -> None:
        """procgen-stepped engines: an episode that ended on the step that reached the time
        limit counts as truncated (procgen gives no other sign of it)."""
        self._collector.fill(self._scalars, self._trailer)
        done = self._scalars[:, self._done] != 0
        timeout = self._scalars[:, self._timeout]
        self._truncated[:] = done & (cur_time_before + 1 >= timeout)

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
        self._read()
        self._truncated[:] = 0
        self._terminal_written[:] = 0
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
        self._step(chosen)
        return self._observe(obs_filter)

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        """Every env's 64x64 RGB frame (headless: rendered now by the game's own observe())."""
        self._check_open()
        if self.engine == "headless":
            self._live.observe(-1)
        frames = [env.observe()[1]["rgb"] for env in self._envs]
        return np.concatenate(frames, axis=0)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._close_envs()
        self._collector.close()
        if self._terminal is not None:
            self._terminal.close()

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
        """The raw procgen get_state bytes of the current step, one per env (every engine:
        procgen's own serializer is called for them)."""
        self._check_open()
        if self._live is not None:
            self._collect()
        return [self._collector.state_bytes(i) for i in range(self.num_envs)]

    def set_states(self, states: Sequence[BytesLike]) -> VecObs:
        """Restore saved get_state blobs, one per env, and return their observation (the full
        observation space). Every blob is validated before any env is touched (restore.py: the
        parse with the game's invariants, same game, grid and options, finite entities, and a
        forked trial of procgen's set_state, steps and render), since procgen's set_state aborts
        or segfaults on bad input; a refused call raises StateDecodeError and changes nothing."""
        self._check_open()
        current = parse_states(self.get_states(), game=self.game.name)
        blobs = [bytes(s) for s in states]
        check_restorable(blobs, self.game.name, current, self._procgen_kwargs)
        for group, (env, start, size) in enumerate(
            zip(self._envs, self._group_starts, self._group_sizes)
        ):
            env.callmethod("set_state", blobs[start : start + size])
            if self._live is not None:  # re-read the game objects after procgen touched them
                self._live.attach(group, int(env._ffi.cast("uintptr_t", env._c_env)))
        self._pending_reset[:] = 0
        self._truncated[:] = 0
        self._terminal_written[:] = 0
        self._read()
        return self._observe(self._obs_space)

    def final_states(self) -> Tuple[npt.NDArray[np.int64], StateBatch]:
        """The terminal states of the episodes that ended at the last step (headless engine).

        Returns the indices of those envs and a StateBatch of their last states before the
        reset, with the camera recomputed as procgen would have rendered them. procgen itself
        never exposes these (its observation after an episode ends is already the next level);
        the other engines raise RuntimeError rather than guess.
        """
        self._check_open()
        if self._terminal is None:
            raise RuntimeError(
                f"final states need the headless engine (this env runs {self.engine})"
            )
        ended = np.flatnonzero(self._terminal_written).astype(np.int64)
        states = [self._terminal.state_bytes(int(i)) for i in ended]
        return ended, parse_states(states, game=self.game.name)

    @property
    def truncated(self) -> npt.NDArray[np.bool_]:
        """Per env: the episode that ended at the last step ended by procgen's time limit."""
        return self._truncated != 0

    @property
    def last_level_complete(self) -> npt.NDArray[np.bool_]:
        """Per env: did the episode that ended at the last step end in success?"""
        return self._scalars[:, self._level_complete] != 0

    def step_values(self) -> StepValues:
        """Scalars of the current step (header/base by name, trailer fields by name). The arrays
        are views that the next step overwrites: copy what you keep."""
        return self._values

    def _make_step_values(self) -> StepValues:
        return StepValues(
            truncated=self._truncated.view(np.bool_),
            scalars={name: self._scalars[:, i] for i, name in enumerate(SCALAR_NAMES)},
            extras={name: self._trailer[:, i] for i, name in enumerate(self.game.trailer_scalars)},
            vector_heads={
                name: self._heads[:, v] for v, name in enumerate(self.game.trailer_vectors)
            },
        )

    # ---- building observations ----

    def _add_tile_entities(
        self, features: Dict[str, RaggedBufferF32], obs_filter: ObsSpace, actor: np.ndarray
    ) -> None:
        """Add the requested tilemap entity types; their counts are added to ``actor``."""
        if self._tiles is None or self._grid is None:
            return
        wanted = [
            name for name in obs_filter.entities if name not in self.game.entity_types.values()
        ]
        if not wanted:
            return
        s = self._scalars
        crops = self._tiles.set_cameras(
            s[:, self._center_x], s[:, self._center_y], s[:, self._view_dim]
        )
        # copy only the rows the windows cover (a 13-row window of coinrun's 64-row grid)
        self._collector.fill_grid_rows(
            np.ascontiguousarray(crops[:, 1]), np.ascontiguousarray(crops[:, 3]), self._grid
        )
        outs, counts = self._tiles.convert(self._grid)
        for name in wanted:
            full = self._obs_space.entities.get(name)
            if name not in self._tiles.names or full is None:
                raise ValueError(f"{self.game.name}: no entity type {name!r} in the observation")
            t = self._tiles.names.index(name)
            requested = obs_filter.entities[name].features
            if list(requested) != list(full.features):
                missing = [f for f in requested if f not in full.features]
                if missing:
                    raise ValueError(
                        f"{self.game.name}: entity type {name!r} has no features {missing}"
                    )
                columns = [full.features.index(f) for f in requested]
                data = np.ascontiguousarray(outs[t][:, columns])
            else:
                data = outs[t]
            lengths = np.ascontiguousarray(counts[:, t])
            features[name] = RaggedBufferF32.from_flattened(data, lengths)
            actor += lengths

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
        if self.tilemap and self._grid is None:
            self._grid = np.zeros((self.num_envs, *collector.grid_shape()), dtype=np.int32)
        collector.fill(self._scalars, self._trailer)  # grid rows: in _add_tile_entities
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

        values = self._values
        features: Dict[str, RaggedBufferF32] = {}
        for s, name in enumerate(plan.entity_types):
            rows = flat[slot_offsets[s] : slot_offsets[s + 1]].reshape(-1, int(plan.widths[s]))
            apply_derived_features(rows, plan.derived[s], counts[s], values)
            features[name] = RaggedBufferF32.from_flattened(rows, counts[s])
        # The global action is taken by the global entity, which comes after all others.
        actor = counts.sum(axis=0)
        self._add_tile_entities(features, obs_filter, actor)
        globals_ = global_features(self.game, plan.global_features, values)
        features[GLOBAL_ENTITY] = RaggedBufferF32.from_flattened(globals_, self._ones)
        action_masks: Dict[str, VecActionMask] = {
            ACTION_NAME: VecCategoricalActionMask(
                RaggedBufferI64.from_flattened(actor.reshape(-1, 1), self._ones), None
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
