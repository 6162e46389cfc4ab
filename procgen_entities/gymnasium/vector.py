"""EntityVectorEnv: procgen's entities as a native Gymnasium VectorEnv (padded arrays and masks).

Built on the core stepper (stepper.py) and the core observation (observation.py's
``ObservationSpec``, whose native builder is csrc/observation.h), like ProcgenVecEnv: with the
headless engine one native call steps every env and reads its game straight into the padded
arrays of the observation dict (no per-env Python); this module only formats them (the dict, the
flat form, Gymnasium's spaces). The numpy reference it is tested against is
procgen_entities/observation_reference.py.

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

from procgen_entities.engine import EngineFallbackWarning, EngineUnavailable
from procgen_entities.episodes import EpisodeStats
from procgen_entities.errors import UsageError
from procgen_entities.features import ACTION_LABELS
from procgen_entities.games import get_game
from procgen_entities.observation import (
    ObservationSpec,
    PaddedArrays,
    PaddedObservation,
    StepArrays,
    training_caps,
)
from procgen_entities.stepper import ProcgenStepper, locked, unpicklable

__all__ = ["EntityVectorEnv"]


class EntityVectorEnv(gymnasium.vector.VectorEnv):  # type: ignore[type-arg]
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
    the largest wins), the image procgen's pixels give a CNN. ``drop_features``: entity
    features left out of every type that has them (``("y", "height")``: no absolute heights,
    only positions relative to the player or the camera; the slots are still ranked by them).
    ``grid_centre="player"`` (with ``grid``): the S x S cells around the player's cell instead
    of the camera square, the player's cell the middle one (column (S - 1) // 2, row S // 2)
    wherever it is, cells outside the level as the game's out-of-bounds tile: an egocentric
    view for the games whose camera shows the whole level (maze, heist, miner, chaser, leaper).
    ``grid_size`` (with ``grid``, 1 to ``observation.MAX_GRID_SIZE``): S, instead of the camera
    square's cells at the start: the camera square centred in it (padded with 0 or cut evenly),
    or the cells around the player (``2 * cells - 1`` shows the whole level from any cell).
    ``grid_boxes=True`` (with ``grid_entities``): each marked entity covers every cell its box
    (x ± rx, y ± ry) overlaps, as the pixels draw it (dodgeball's walls, fruitbot's barriers),
    not only its centre's cell. An entity-only game (dodgeball, bigfish, ...) takes ``grid``
    with ``grid_entities``: an image of the marks alone (its grid has no tiles).
    Actions: procgen's 15
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
        drop_features: Optional[Sequence[str]] = None,
        grid_centre: str = "camera",
        grid_size: Optional[int] = None,
        grid_boxes: bool = False,
        engine: str = "auto",
        seed: Optional[int] = None,
        autoreset_mode: Union[AutoresetMode, str, None] = None,
        render_mode: Optional[str] = "rgb_array",
        stats_key: str = "episode_stats",
        **options: Any,
    ) -> None:
        _check_arguments(game, render_mode, grid, grid_entities, grid_centre, grid_size,
                         grid_boxes)  # fmt: skip
        self.stats_key = stats_key
        self._stepper = ProcgenStepper(game, num_envs, engine=engine, seed=seed, **options)
        self._stepper.owner = type(self).__name__  # the name its errors give
        self.autoreset_mode = mode = self._autoreset(autoreset_mode)
        self.engine = self._stepper.engine
        self.game = self._stepper.game
        self.num_envs = num_envs = self._stepper.num_envs
        self.render_mode = render_mode
        self._stepper.read()  # the camera square at the start sizes the tilemap types' caps
        self._spec = ObservationSpec.padded(
            self.game, num_envs, window=ObservationSpec.window_of(self._stepper.step_values()),
            max_entities=max_entities, tilemap=tilemap, relative_positions=relative_positions,
            entity_window=entity_window, global_features=global_features, grid=grid,
            grid_entities=grid_entities, drop_features=drop_features, grid_centre=grid_centre,
            grid_size=grid_size, grid_boxes=grid_boxes,
        )  # fmt: skip
        self._layout: PaddedObservation = self._spec.padded_layout
        self.grid_marks = self._spec.grid_marks
        self.flatten = flatten
        self._set_spaces(mode)
        self._episodes = EpisodeStats(num_envs)

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
    def observation_spec(self) -> ObservationSpec:
        """The core observation this env formats (its layout, plan, caps, native builder)."""
        return self._spec

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

    # ---- spaces ----

    def _single_space(self) -> spaces.Space[Any]:
        if self.flatten:
            size = self._layout.flat_size
            return spaces.Box(-np.inf, np.inf, (size,), np.float32)
        entries: Dict[str, spaces.Space[Any]] = {
            key: spaces.Box(field.low, field.high, field.shape, field.dtype)  # type: ignore[arg-type]
            for key, field in self._spec.fields().items()
        }
        return spaces.Dict(entries)

    def unflatten(self, flat: npt.NDArray[np.float32]) -> Dict[str, npt.NDArray[Any]]:
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
        self._episodes.restart(reset)
        arrays = self._spec.padded_arrays()
        self._stepper.observe(self._spec.builder, arrays)
        return self._finish(arrays), self._info(arrays)

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise unpicklable(type(self).__name__)

    def _reset_mask(self, given: Any, seed: Optional[int]) -> npt.NDArray[np.bool_]:
        mask: npt.NDArray[np.bool_] = np.asarray(given)
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
        arrays = self._spec.padded_arrays()
        stepper.step_observe(actions, self._spec.builder, arrays)  # checks the actions first
        step = _step_of(arrays)
        reward, done, level_complete = step.reward, step.done, step.level_complete
        assert reward is not None and done is not None and level_complete is not None
        # returns, lengths, the resetting envs' cleared step and the ended episodes' statistics
        # in one native pass (procgen_entities.episodes)
        outcome = self._episodes.step(resetting, reward, done, stepper.truncated)
        terminated, truncated = outcome.terminated, outcome.truncated
        info = self._info(arrays)
        info["prev_level_complete"] = level_complete.view(np.bool_)
        if outcome.ended_count:
            ended = outcome.ended
            info[self.stats_key] = {"r": outcome.final_return, "l": outcome.final_length}
            info[f"_{self.stats_key}"] = ended
            if self.autoreset_mode == AutoresetMode.SAME_STEP:
                self._add_final(info, ended)
        return self._finish(arrays), reward, terminated, truncated, info

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

    def _finish(self, arrays: PaddedArrays) -> Any:
        """A build's arrays as this env's observation: the dict, or its flat form."""
        obs = self._layout.as_dict(arrays)
        return self._layout.flatten(obs) if self.flatten else obs

    def _add_final(self, info: Dict[str, Any], ended: npt.NDArray[np.bool_]) -> None:
        """SAME_STEP: the terminal observations (headless engine only; never made up), built
        for the envs that ended only."""
        if self._stepper.terminal is None:
            return
        indices = np.flatnonzero(ended)
        arrays = self._spec.padded_arrays(len(indices), step=False)
        self._stepper.observe_terminal(self._spec.builder, arrays, indices)
        final = self._finish(arrays)
        obs_list: List[Any] = [None] * self.num_envs
        for k, i in enumerate(indices):
            obs_list[i] = final[k] if self.flatten else {key: v[k] for key, v in final.items()}
        info["final_obs"] = np.array(obs_list, dtype=object)
        info["_final_obs"] = ended.copy()
        key = self.stats_key
        info["final_info"] = {key: info[key], f"_{key}": ended.copy()}
        info["_final_info"] = ended.copy()

    def _info(self, arrays: PaddedArrays) -> Dict[str, Any]:
        step = _step_of(arrays)
        return {
            "level_seed": step.level_seed,
            "prev_level_seed": step.prev_level_seed,
            "dropped_entities": arrays.dropped,
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
        self._episodes.restart()
        arrays = self._spec.padded_arrays(step=False)
        self._stepper.observe(self._spec.builder, arrays)
        return self._finish(arrays)


#: What reset(options=...) takes (EntityVectorEnv.reset).
RESET_OPTIONS = ("reset_mask", "states")
#: The render modes: procgen's frames as arrays (render()), or none.
RENDER_MODES = ("rgb_array", None)


def _check_arguments(
    game: str,
    render_mode: Any,
    grid: bool,
    grid_entities: bool,
    grid_centre: str,
    grid_size: Optional[int],
    grid_boxes: bool = False,
) -> None:
    """UsageError for EntityVectorEnv arguments that cannot work together (before procgen)."""
    if render_mode not in RENDER_MODES:
        raise UsageError(f"render_mode must be 'rgb_array' (frames as arrays, from render()) "
                         f"or None, got {render_mode!r}: no window is drawn")  # fmt: skip
    ObservationSpec.check_padded(game, grid, grid_entities, grid_centre, grid_size, grid_boxes)


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


def _step_of(arrays: PaddedArrays) -> StepArrays:
    """The step's values of a build made with them."""
    if arrays.step is None:
        raise AssertionError("a build without the step's values")
    return arrays.step
