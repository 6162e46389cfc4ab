"""EntityVectorEnv: procgen's entities as a native Gymnasium VectorEnv (padded arrays and masks).

Built on the core stepper (stepper.py) and the native observation builder (csrc/observation.h),
like ProcgenVecEnv: with the headless engine one native call steps every env and reads its
game straight into the padded arrays of the observation dict (no per-env Python); the numpy
reference it is tested against is procgen_entities/observation_reference.py.

Episodes (``autoreset_mode``):

- ``NEXT_STEP`` (Gymnasium's default, what RLlib assumes; needs the headless engine): the step
  that ends an episode returns its terminal observation; the env's next step resets it, ignores
  its action, and returns the new episode's first observation with reward 0. The default
  (``autoreset_mode=None``) is NEXT_STEP on the headless engine; on the procgen-stepped ones,
  which cannot offer it, SAME_STEP with one EngineFallbackWarning (``metadata["autoreset_mode"]``
  says which); an explicit NEXT_STEP or DISABLED there raises EngineUnavailable.
- ``SAME_STEP``: the step that ends an episode returns the next episode's first observation;
  with the headless engine ``info["final_obs"]`` (and ``info["final_info"]``) hold the terminal
  one. The procgen-stepped engines have no terminal state (procgen reset already): they give no
  ``final_obs`` rather than a made-up one.
- ``DISABLED`` (headless): as NEXT_STEP, but ``reset(options={"reset_mask": mask})`` starts the
  next episode of the masked envs without stepping the others (an ended env that is stepped
  instead resets as in NEXT_STEP). ``reset_mask`` works in the other modes too (headless).

Episode returns and lengths go to ``info["episode_stats"]`` (``stats_key``), not Gymnasium's
``info["episode"]``, which ``RecordEpisodeStatistics`` writes and refuses to find already there.

``terminated`` is the game's end (death or success), ``truncated`` procgen's time limit.
"""

from __future__ import annotations

import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

import gymnasium
import numpy as np
import numpy.typing as npt
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from procgen_entities._native import _collector
from procgen_entities.engine import EngineFallbackWarning, EngineUnavailable
from procgen_entities.errors import UsageError
from procgen_entities.features import (
    ACTION_LABELS,
    EntityPlan,
    FeatureSpace,
    feature_space,
    native_global_ops,
    native_plan_inputs,
)
from procgen_entities.games import get_game
from procgen_entities.gymnasium.observation import (
    GLOBAL_KEY,
    GRID_KEY,
    PaddedObservation,
    resolve_caps,
    tile_caps,
    training_caps,
)
from procgen_entities.parse import game_spec
from procgen_entities.stepper import ProcgenStepper, locked, unpicklable
from procgen_entities.tilemap import (
    DEFAULT_CHUNK,
    CameraConverter,
    tile_class_names,
    tilemap_features,
)

__all__ = ["EntityVectorEnv"]


class EntityVectorEnv(gymnasium.vector.VectorEnv):  # type: ignore[misc]
    """``num_envs`` procgen envs of ``game`` with padded entity observations.

    Observation (a ``Dict``, or with ``flatten=True`` one ``Box`` per env): per entity type
    ``<Type>`` float32 [cap, F] and ``<Type>_mask`` bool [cap], then ``global`` float32 [G];
    feature names in ``metadata["feature_names"]``. Caps: ``games.default_caps`` (measured) or
    ``max_entities`` (an int for every type or a dict per type); a step with more entities of a
    type keeps those nearest the player and counts the rest in ``info["dropped_entities"]``.
    ``entity_window``: keep only the entities the camera shows (default). ``global_features``:
    another choice of globals (``features.available_globals``). ``grid=True`` (tilemap games):
    also ``grid``, the camera square's tile classes as a uint8 [S, S] image (S = the square's
    cells at the start; ``tilemap.tilemap_images``: class + 1, 0 = empty, row 0 = top), for a
    CNN; entities stay entities. ``grid_entities=True`` (with ``grid``) also marks the cell of
    every entity of the observation's entity types in the grid (``grid_marks``: the types in
    value order, after the tile classes; the player's mark is the largest, where several meet
    the largest wins), the image procgen's pixels give a CNN. Actions: procgen's 15
    (``metadata["action_labels"]``). Other keywords go to the stepper / procgen
    (distribution_mode (procgen's default: hard), num_levels, start_level, num_threads, ...).
    ``EntityVectorEnv.for_training(game, n)``: the training recipe's observation. A context
    manager (closes on exit).

    Threads and fork as in stepper.py: calls take the stepper's lock (one at a time, ``close``
    waits for a call in flight); in a forked child only ``close`` works.
    """

    metadata: Dict[str, Any] = {
        "render_modes": ["rgb_array"],
        "render_fps": 15,
        "autoreset_mode": AutoresetMode.NEXT_STEP,
    }

    def __init__(
        self,
        game: str,
        num_envs: int = 1,
        *,
        max_entities: Union[None, int, Mapping[str, int]] = None,
        tilemap: Optional[str] = None,
        relative_positions: bool = True,
        entity_window: bool = True,
        global_features: Optional[Sequence[str]] = None,
        flatten: bool = False,
        grid: bool = False,
        grid_entities: bool = False,
        engine: str = "auto",
        seed: Optional[int] = None,
        autoreset_mode: Union[AutoresetMode, str, None] = None,
        render_mode: Optional[str] = "rgb_array",
        stats_key: str = "episode_stats",
        **options: Any,
    ) -> None:
        _check_arguments(game, render_mode, grid, grid_entities)  # before procgen starts
        self.stats_key = stats_key
        self._stepper = ProcgenStepper(game, num_envs, engine=engine, seed=seed, **options)
        self._stepper.owner = type(self).__name__  # the name its errors give
        self.autoreset_mode = mode = self._autoreset(autoreset_mode)
        self.engine = self._stepper.engine
        self.game = self._stepper.game
        self.num_envs = num_envs = self._stepper.num_envs
        self.render_mode = render_mode
        tile_entities = tilemap_features(self.game.name, tilemap, window=True) if tilemap else {}
        self._space: FeatureSpace = feature_space(
            self.game, relative_positions=relative_positions, extra_entities=tile_entities,
            global_features=global_features,
        )  # fmt: skip
        # Tilemap types are sized for the camera square procgen shows at the start (a window
        # that later grows keeps its nearest cells and counts the rest as dropped).
        self._stepper.read()
        window = int(np.ceil(self._stepper.step_values().scalars["view_dim"].max()))
        tiles = tile_caps(tilemap, list(tile_entities), window, DEFAULT_CHUNK)
        caps = resolve_caps(self.game, self._space, max_entities, tiles)
        self._layout = PaddedObservation(self._space, caps, num_envs, window if grid else 0)
        self._plan = EntityPlan(self.game, self._space, self._space, window=entity_window)
        self.grid_marks = self._grid_marks() if grid_entities else ()
        self._tiles = CameraConverter(self.game.name, tilemap) if tilemap else None
        self._images: Optional[CameraConverter] = None
        if grid:  # the tilemap's converter places the windows; without one, its own
            self._images = self._tiles or CameraConverter(self.game.name, "tiles")
        self.flatten = flatten
        self._distance_columns = {
            name: _distance_columns(list(e.features)) for name, e in self._space.entities.items()
        }
        self._set_spaces(mode)
        self._returns = np.zeros(num_envs, dtype=np.float64)
        self._lengths = np.zeros(num_envs, dtype=np.int64)
        self._builder = self._make_builder()

    def _set_spaces(self, mode: AutoresetMode) -> None:
        """Gymnasium's spaces and this env's metadata (after the layout is known)."""
        self.single_action_space = spaces.Discrete(len(ACTION_LABELS))
        self.action_space = spaces.MultiDiscrete([len(ACTION_LABELS)] * self.num_envs)
        self.single_observation_space = self._single_space()
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.metadata = {
            **type(self).metadata,
            "autoreset_mode": mode,
            "feature_names": self._layout.feature_names(),
            "entity_caps": dict(self._layout.caps),
            "action_labels": ACTION_LABELS,
            "engine": self.engine,
        }

    def _autoreset(self, requested: Union[AutoresetMode, str, None]) -> AutoresetMode:
        """The episode mode: ``requested``, or by default NEXT_STEP where the engine can show
        terminal states (headless) and SAME_STEP, with one warning, where it cannot (procgen's
        own stepping has reset already: a terminal observation would be made up)."""
        mode = AutoresetMode.NEXT_STEP if requested is None else AutoresetMode(requested)
        if mode == AutoresetMode.SAME_STEP:
            return mode
        if self._stepper.engine == "headless":
            self._stepper.defer_resets()  # NEXT_STEP and DISABLED show terminal states first
            return mode
        if requested is not None:
            self._stepper.close()
            raise EngineUnavailable(
                f"autoreset_mode {mode.name} needs the headless engine (procgen's own stepping "
                f"resets in the same step); use SAME_STEP with the {self._stepper.engine} engine"
            )
        _warn_same_step_once(self._stepper.engine)
        return AutoresetMode.SAME_STEP

    @property
    def stepper(self) -> ProcgenStepper:
        """The stepper this env composes (its public surface: procgen options, final states,
        pending resets); what tools built on the env read instead of its private members."""
        return self._stepper

    @property
    def _call_lock(self) -> Any:
        """The stepper's lock (replaced in a forked child), taken by the @locked methods."""
        return self._stepper.call_lock

    @classmethod
    def for_training(cls, game: str, num_envs: int = 64, **kwargs: Any) -> "EntityVectorEnv":
        """The observation and levels the training recipe uses (docs/training.md, sb3_ppo): the
        game's training tilemap (``Game.training_tilemap``) and caps (``Game.training_caps``),
        easy mode, the full level distribution; ``kwargs`` override any of them or add others
        (``flatten=True`` for an MLP, ``seed``, ``autoreset_mode``, ...)."""
        info = get_game(game)
        tilemap = kwargs.get("tilemap", info.training_tilemap)
        recipe: Dict[str, Any] = {"distribution_mode": "easy", "tilemap": tilemap}
        caps = training_caps(info, tilemap)
        if caps:
            recipe["max_entities"] = caps
        return cls(game, num_envs, **{**recipe, **kwargs})

    def _grid_marks(self) -> Tuple[str, ...]:
        """The entity types drawn into the grid, in the order of their values (classes + 1 +
        index): the plan's types, the player last so that nothing covers it."""
        types = [name for name in self._plan.entity_types if name != "Player"]
        return tuple(types + ["Player"] * ("Player" in self._plan.entity_types))

    def _mark_values(self) -> npt.NDArray[np.uint8]:
        """Per plan slot, the value its entities' cells take in the grid (0: not drawn)."""
        base = len(tile_class_names(self.game.name)) + 1
        return np.array([base + self.grid_marks.index(name) if name in self.grid_marks else 0
                         for name in self._plan.entity_types], dtype=np.uint8)  # fmt: skip

    # ---- spaces ----

    def _single_space(self) -> spaces.Space:
        if self.flatten:
            size = self._layout.flat_size
            return spaces.Box(-np.inf, np.inf, (size,), np.float32)
        entries: Dict[str, spaces.Space] = {}
        for name, cap in self._layout.caps.items():
            width = self._layout.widths[name]
            entries[name] = spaces.Box(-np.inf, np.inf, (cap, width), np.float32)
            entries[f"{name}_mask"] = spaces.Box(0, 1, (cap,), np.bool_)  # type: ignore[arg-type]
        entries[GLOBAL_KEY] = spaces.Box(-np.inf, np.inf, (self._layout.n_globals,), np.float32)
        size = self._layout.grid_size
        if size:
            classes = len(tile_class_names(self.game.name)) + len(self.grid_marks)
            entries[GRID_KEY] = spaces.Box(0, classes, (size, size), np.uint8)
        return spaces.Dict(entries)

    def unflatten(self, flat: npt.NDArray) -> Dict[str, npt.NDArray]:
        """A flat observation ([flat_size] or [m, flat_size]) as the dict of padded arrays."""
        return self._layout.unflatten(flat)

    # ---- Gymnasium ----

    @locked
    def reset(
        self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None
    ) -> Tuple[Any, Dict[str, Any]]:
        """New envs; ``seed`` seeds procgen's level sampling (the same seed, the same levels).
        ``options={"reset_mask": mask}`` (bool [num_envs], headless engine): only the masked envs
        start their next episode, the others keep theirs (not stepped).
        ``options={"states": states}`` (one get_state blob or ``State`` per env): every env
        starts from its state, validated as ``set_states`` validates (no ``seed``: the states
        hold their RNGs)."""
        chosen = _reset_options(options)
        given, states = chosen.get("reset_mask"), chosen.get("states")
        reset: Any = slice(None)  # the envs whose episode statistics restart
        if states is not None:
            self._reset_to_states(states, seed, given)
        elif given is None:
            self._stepper.restart(seed)
        else:
            reset = self._reset_mask(given, seed)
            self._stepper.reset_envs(reset)
        self._returns[reset] = 0.0
        self._lengths[reset] = 0
        outs, obs = self._outputs(self.num_envs, step=True)
        self._stepper.observe(self._builder, outs)
        return self._finish(obs), self._info(outs)

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise unpicklable(type(self).__name__)

    def _reset_mask(self, mask: Any, seed: Optional[int]) -> npt.NDArray[np.bool_]:
        mask = np.asarray(mask)
        if mask.dtype != np.bool_ or mask.shape != (self.num_envs,):
            raise UsageError(f"reset_mask must be a bool array of shape ({self.num_envs},), got "
                             f"{mask.dtype} {mask.shape}")  # fmt: skip
        if seed is not None:
            raise UsageError("procgen seeds all envs together: reset(seed=...) without reset_mask")
        return mask

    def _reset_to_states(self, states: Sequence[Any], seed: Optional[int], mask: Any) -> None:
        """reset(options={"states": ...}): set_states' validated restore."""
        from procgen_entities.state import State

        if mask is not None or seed is not None:  # a state holds its own RNGs: nothing to seed
            raise UsageError("reset(options={'states': ...}) takes no seed and no reset_mask")
        if isinstance(states, (bytes, bytearray, memoryview, str)):
            raise UsageError("reset: options['states'] is a sequence of states, one per env")
        blobs = [s.to_bytes(validate=False) if isinstance(s, State) else s for s in states]
        if not all(isinstance(b, (bytes, bytearray, memoryview)) for b in blobs):
            raise TypeError("reset: options['states'] holds get_state bytes or State objects")
        self._stepper.restore_states(blobs)  # validates every blob before any env changes

    @locked
    def step(
        self, actions: npt.ArrayLike
    ) -> Tuple[
        Any, npt.NDArray[np.float32], npt.NDArray[np.bool_], npt.NDArray[np.bool_], Dict[str, Any]
    ]:
        stepper = self._stepper
        resetting = stepper.pending_reset  # NEXT_STEP: these only reset now
        outs, obs = self._outputs(self.num_envs, step=True)
        stepper.step_observe(actions, self._builder, outs)  # checks the actions first
        reward, done, level_complete = outs[5][:3]
        truncated = stepper.truncated
        terminated = done.view(np.bool_) & ~truncated
        any_resetting = resetting.any()
        if any_resetting:
            reward[resetting] = 0.0
            terminated[resetting] = truncated[resetting] = False
            self._returns[resetting] = 0.0
            self._lengths[resetting] = 0
            live = ~resetting
            self._returns[live] += reward[live]
            self._lengths[live] += 1
        else:
            self._returns += reward
            self._lengths += 1
        ended = terminated | truncated
        info = self._info(outs)
        info["prev_level_complete"] = level_complete.view(np.bool_)
        if ended.any():
            info[self.stats_key] = {
                "r": np.where(ended, self._returns, 0.0).astype(np.float32),
                "l": np.where(ended, self._lengths, 0).astype(np.int32),
            }
            info[f"_{self.stats_key}"] = ended
            if self.autoreset_mode == AutoresetMode.SAME_STEP:
                self._add_final(info, ended)
            self._returns[ended] = 0.0
            self._lengths[ended] = 0
        return self._finish(obs), reward, terminated, truncated, info

    @locked
    def render(self) -> Any:
        """Every env's 64x64 RGB frame, [n, 64, 64, 3] (rendered on demand when headless)."""
        return self._stepper.render() if self.render_mode == "rgb_array" else None

    def __enter__(self) -> "EntityVectorEnv":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close_extras(self, **kwargs: Any) -> None:
        stepper = getattr(self, "_stepper", None)  # None if __init__ failed
        if stepper is not None:
            stepper.close()

    # ---- observations ----

    def _make_builder(self) -> Any:
        """The native observation builder (csrc/observation.h) of this layout."""
        plan, layout, game = self._plan, self._layout, self.game
        names = list(layout.caps)
        if names[: len(plan.entity_types)] != plan.entity_types:
            raise AssertionError("the layout's types must start with the plan's")
        derived, target, support = native_plan_inputs(game, plan)
        player_columns = self._distance_columns.get("Player")
        player = (-1, -1, -1)
        if "Player" in layout.caps and player_columns is not None:
            player = (names.index("Player"), player_columns[1], player_columns[2])
        types = []
        for name in names:
            columns = self._distance_columns[name]
            rank = (-1, -1, 0)
            if columns is not None and columns[0] == "relative":
                rank = (columns[1], columns[2], 0)
            elif columns is not None and player[0] >= 0 and name != "Player":
                rank = (columns[1], columns[2], 1)
            types.append((layout.caps[name], layout.widths[name], *rank))
        tiles = image = None
        if self._tiles is not None:
            tiles = (*self._tiles.native_spec, self._tiles.mode, self._tiles.chunk)
        if self._images is not None:
            image = (*self._images.native_image_spec, layout.grid_size)
        marks = self._mark_values() if self.grid_marks else None
        return _collector.ObservationBuilder(
            game_spec(game.name), self.num_envs, plan.arrays, derived, target, types, player,
            native_global_ops(game, self._space.global_features), support, tiles, image, marks,
        )  # fmt: skip

    def _outputs(self, n: int, step: bool) -> Tuple[Tuple[Any, ...], Dict[str, npt.NDArray]]:
        """New observation arrays for n envs and the builder's view of them (plus the step's
        reward, done, level_complete and seeds when ``step``)."""
        obs = self._layout.empty(n)
        values = [obs[name] for name in self._layout.caps]
        masks = [obs[key].view(np.uint8) for key in self._layout.mask_keys]
        values_of_step = None
        if step:
            values_of_step = (
                np.empty(n, dtype=np.float32), np.empty(n, dtype=np.uint8),
                np.empty(n, dtype=np.uint8), np.empty(n, dtype=np.int64),
                np.empty(n, dtype=np.int64),
            )  # fmt: skip
        dropped = np.empty(n, dtype=np.int64)
        outs = (values, masks, obs[GLOBAL_KEY], obs.get(GRID_KEY), dropped, values_of_step)
        return outs, obs

    def _finish(self, obs: Dict[str, npt.NDArray]) -> Any:
        return self._layout.flatten(obs) if self.flatten else obs

    def _add_final(self, info: Dict[str, Any], ended: npt.NDArray[np.bool_]) -> None:
        """SAME_STEP: the terminal observations (headless engine only; never made up), built
        for the envs that ended only."""
        if self._stepper.terminal is None:
            return
        indices = np.flatnonzero(ended)
        outs, final = self._outputs(len(indices), step=False)
        self._stepper.observe_terminal(self._builder, outs, indices)
        flat = self._finish(final)
        obs_list: List[Any] = [None] * self.num_envs
        for k, i in enumerate(indices):
            obs_list[i] = flat[k] if self.flatten else {key: v[k] for key, v in final.items()}
        info["final_obs"] = np.array(obs_list, dtype=object)
        info["_final_obs"] = ended.copy()
        key = self.stats_key
        info["final_info"] = {key: info[key], f"_{key}": ended.copy()}
        info["_final_info"] = ended.copy()

    def _info(self, outs: Tuple[Any, ...]) -> Dict[str, Any]:
        _, _, _, level_seed, prev_level_seed = outs[5]
        return {
            "level_seed": level_seed,
            "prev_level_seed": prev_level_seed,
            "dropped_entities": outs[4],
        }

    # ---- beyond Gymnasium ----

    @locked
    def get_states(self) -> List[bytes]:
        return self._stepper.get_states()

    @locked
    def set_states(self, states: List[bytes]) -> Any:
        """Restore saved states (validated first, see ProcgenStepper.restore_states) and return
        their observation. Episode statistics (``info["episode_stats"]``) restart from the restored
        states: their return and length count the steps taken after the restore."""
        self._stepper.restore_states(states)
        self._returns[:] = 0.0
        self._lengths[:] = 0
        outs, obs = self._outputs(self.num_envs, step=False)
        self._stepper.observe(self._builder, outs)
        return self._finish(obs)


#: What reset(options=...) takes (EntityVectorEnv.reset).
RESET_OPTIONS = ("reset_mask", "states")
#: The render modes: procgen's frames as arrays (render()), or none.
RENDER_MODES = ("rgb_array", None)


def _check_arguments(game: str, render_mode: Any, grid: bool, grid_entities: bool) -> None:
    """UsageError for EntityVectorEnv arguments that cannot work together."""
    if render_mode not in RENDER_MODES:
        raise UsageError(f"render_mode must be 'rgb_array' (frames as arrays, from render()) "
                         f"or None, got {render_mode!r}: no window is drawn")  # fmt: skip
    if grid and not get_game(game).has_tilemap:
        raise UsageError(f"grid=True: {game} has no tiles (an entity-only game)")
    if grid_entities and not grid:
        raise UsageError("grid_entities=True draws entities into the grid: it needs grid=True")


def _reset_options(options: Any) -> Mapping[str, Any]:
    """reset's ``options``: None or a dict of RESET_OPTIONS (TypeError, UsageError else)."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(f"reset: options is a dict (keys {', '.join(RESET_OPTIONS)}) or None, "
                        f"not {type(options).__name__}")  # fmt: skip
    unknown = sorted(str(key) for key in options if key not in RESET_OPTIONS)
    if unknown:
        raise UsageError(f"reset: unknown options {', '.join(map(repr, unknown))} (valid: "
                         f"{', '.join(RESET_OPTIONS)})")  # fmt: skip
    return options


#: The engines the SAME_STEP fallback has been announced for (one warning per process each).
_WARNED_SAME_STEP: Set[str] = set()


def _warn_same_step_once(engine: str) -> None:
    if engine in _WARNED_SAME_STEP:
        return
    _WARNED_SAME_STEP.add(engine)
    warnings.warn(
        f"the {engine} engine cannot show terminal observations (procgen resets in the same "
        "step): this env runs autoreset_mode SAME_STEP (metadata['autoreset_mode']) without "
        "info['final_obs']; pass autoreset_mode='SameStep' to silence this, or use a build the "
        "headless engine supports (docs/engine.md) for NEXT_STEP",
        EngineFallbackWarning,
        stacklevel=4,
    )


def _distance_columns(features: List[str]) -> Optional[Tuple[str, int, int]]:
    """Which columns measure an entity's distance to the player: (rel_x, rel_y) if present,
    else (x, y) against the Player row."""
    if "rel_x" in features and "rel_y" in features:
        return ("relative", features.index("rel_x"), features.index("rel_y"))
    if "x" in features and "y" in features:
        return ("absolute", features.index("x"), features.index("y"))
    return None
