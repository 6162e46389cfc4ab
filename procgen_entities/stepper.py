"""The core of every vec env here: procgen envs of one game, stepped and read through an engine.

No RL framework is imported: the entity-gym and Gymnasium adapters build their observations on
top of a ProcgenStepper. A step with the default (headless) engine: this package's thread pool
runs procgen's own game logic for every env (``Game::step`` without its render, see
procgen_entities/engine). ``step`` then writes each state straight from procgen's game objects
and validates it; ``step_observe`` (what both adapters call) reads each game straight into an
observation builder's outputs in the same pool run instead, and ``advance`` reads nothing: the
states are written only when asked for (``collector``, ``step_values``, ``get_states``). The
``get_state`` engine lets procgen step and render on its own threads and calls procgen's
serializer from the pool; ``direct`` lets procgen step and reads the objects.

Episode boundaries are procgen's: after an episode ends the states are already the next level's
first ones, while ``reward`` and ``done`` describe the step that ended the episode; with the
headless engine ``final_states`` holds the terminal ones, and ``defer_reset`` shows them first.

Threads: an env may be shared between threads. Its calls (step, reset, render, get/set states,
close, and the adapters' act/step/reset around them) take one lock, so they run one at a time;
``close`` waits for a call in flight, and any call after it raises RuntimeError.

Fork: an env does not survive ``os.fork()`` (what multiprocessing's "fork" start method does):
procgen's threads and this package's stay in the parent. In the child, close (and the exit)
work without touching them, and every other call raises RuntimeError; create envs after the
fork, or use the "spawn" or "forkserver" start method.
"""

from __future__ import annotations

import functools
import os
import random
import threading
import warnings
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar, Union, cast

import numpy as np
import numpy.typing as npt

from procgen_entities._native import _collector
from procgen_entities.engine import ENGINES, EngineUnavailable, bind_engine
from procgen_entities.errors import UsageError
from procgen_entities.features import ACTION_LABELS, VECTOR_HEAD_ITEMS, StepValues
from procgen_entities.games import Game, get_game
from procgen_entities.observation import BuilderArrays, BuiltRows
from procgen_entities.parse import SCALAR_NAMES, StateBatch, game_spec, parse_states
from procgen_entities.procgen_envs import check_num_envs, group_seeds, make_procgen_env
from procgen_entities.procgen_envs import procgen_options as procgen_options_of
from procgen_entities.restore import check_restorable

__all__ = ["BytesLike", "EngineMismatch", "ProcgenStepper", "locked"]

BytesLike = Union[bytes, bytearray, memoryview]
NUM_ACTIONS = len(ACTION_LABELS)  # procgen's 15 actions
_Self = TypeVar("_Self", bound="ProcgenStepper")
_Method = TypeVar("_Method", bound=Callable[..., Any])

#: Every open stepper of this process, for the fork handler.
_OPEN: "weakref.WeakSet[ProcgenStepper]" = weakref.WeakSet()


class EngineMismatch(EngineUnavailable, ValueError):
    """An option needs another engine than the one this env runs (defer_reset: headless)."""


def locked(method: _Method) -> _Method:
    """Run ``method`` under its object's ``_call_lock`` (re-entrant: a locked method may call
    another): the native state an env steps, reads and frees is shared by all its calls."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._call_lock:
            return method(self, *args, **kwargs)

    return cast(_Method, call)


def _after_fork_in_child() -> None:
    for stepper in list(_OPEN):
        stepper._left_behind_by_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def unpicklable(name: str) -> TypeError:
    """What pickling (or copying) an env raises: its procgen envs, threads and native buffers
    live in this process only."""
    return TypeError(
        f"{name} cannot be pickled or copied: it holds procgen's native envs and threads. Save "
        "its states instead (get_states(), then set_states() or reset(options={'states': ...}) "
        "in a new env), or give the other process a function that makes the env (as "
        "gymnasium's AsyncVectorEnv and SB3's SubprocVecEnv take)"
    )


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, which taskset, cgroups' cpusets and
    job schedulers narrow), not the machine's count: the default number of pool threads."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def check_actions(actions: npt.ArrayLike, num_envs: int) -> npt.NDArray[np.int32]:
    """``actions`` as int32[num_envs], or a UsageError: one integer per env (shape (n,) or
    (n, 1)) in [0, 15). procgen itself would truncate floats and treat -1 (or a uint32 that wraps
    to it) as "end the episode now"; one max over the actions seen as unsigned (where a negative
    one is huge) keeps this to a single pass."""
    chosen = np.asarray(actions)
    if chosen.dtype is _INT32 and chosen.shape == (num_envs,) and chosen.flags.c_contiguous:
        # the training loop's own arrays: no conversion, one reduction (about half the cost)
        if num_envs and chosen.view(np.uint32).max() >= NUM_ACTIONS:
            raise UsageError(f"actions must be in [0, {NUM_ACTIONS}), got {_worst(chosen)}")
        return chosen
    if chosen.shape not in ((num_envs,), (num_envs, 1)):
        raise UsageError(
            f"expected one action per env, shape ({num_envs},), got shape {chosen.shape}"
        )
    if chosen.dtype.kind not in "iu":
        raise UsageError(f"actions must be integers (procgen's 15 actions), got {chosen.dtype}")
    kind = chosen.dtype.str
    unsigned = chosen.view(kind.replace("i", "u")) if chosen.dtype.kind == "i" else chosen
    if chosen.size and unsigned.max() >= NUM_ACTIONS:
        raise UsageError(f"actions must be in [0, {NUM_ACTIONS}), got {_worst(chosen)}")
    # contiguous too: the native step reads the actions as one int32 block (a strided view,
    # such as a column of a bigger array, is copied)
    return np.ascontiguousarray(chosen.reshape(num_envs), dtype=np.int32)


_INT32 = np.dtype(np.int32)


def _worst(chosen: npt.NDArray[Any]) -> int:
    """The action an out-of-range error names: the lowest if negative, else the highest."""
    low, high = int(chosen.min()), int(chosen.max())
    return low if low < 0 else high


def default_num_groups(num_envs: int) -> int:
    """The procgen vec envs a stepper of ``num_envs`` envs splits them over by default."""
    return 2 if num_envs >= 8 else 1


def group_sizes(num_envs: int, groups: int) -> List[int]:
    """The envs of each of ``groups`` procgen vec envs, in order (as even as possible)."""
    bounds = np.linspace(0, num_envs, groups + 1).round().astype(int)
    return [int(b - a) for a, b in zip(bounds[:-1], bounds[1:])]


def _check_groups(num_groups: Any, num_envs: int) -> int:
    """The number of procgen vec envs (default: default_num_groups), or a UsageError. Groups let
    one group's procgen stepping overlap the next one's get_state. They also seed procgen (one
    rand_seed per group), so every engine keeps the same default."""
    groups = num_groups or default_num_groups(num_envs)
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)):
        raise UsageError(f"num_groups must be an int, got {groups!r}")
    if not 1 <= groups <= num_envs:
        raise UsageError(f"num_groups must be in [1, num_envs], got {groups}")
    return int(groups)


@functools.lru_cache(maxsize=None)
def _malloc_trim() -> Optional[Callable[[int], int]]:
    """glibc's ``malloc_trim``, or None under another C library. Looked up once, when this
    module is imported: an env closed by the garbage collector at interpreter exit can no longer
    import ctypes (Python prints "Exception ignored ... import of ctypes halted")."""
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return cast(Callable[[int], int], trim)


_malloc_trim()  # cached now, while imports work (numpy has imported ctypes already)


def _return_free_memory() -> None:
    """Hand the pages a closed env freed back to the system. procgen's games, our collectors
    and the threads' arenas free megabytes on close that glibc keeps mapped: making and closing
    an 8-env EntityVectorEnv grew resident memory by 5-16 KiB per env with nothing left in use
    (mallinfo2 flat; MALLOC_ARENA_MAX=1 no better; tools/memory_cycles.py). The trim takes about
    0.3 ms of a 24 ms close (an 8-env bigfish env beside an open 64-env one)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _state_blobs(states: Any) -> List[bytes]:
    """set_states' argument as bytes: a sequence of get_state blobs (bytes, bytearray or
    memoryview), else a TypeError naming what it holds (bytes(5) would be five zero bytes)."""
    if isinstance(states, (bytes, bytearray, memoryview, str)) or not hasattr(states, "__iter__"):
        raise TypeError(f"set_states takes a sequence of get_state blobs, one per env, not "
                        f"{type(states).__name__}")  # fmt: skip
    states = list(states)
    for i, state in enumerate(states):
        if not isinstance(state, (bytes, bytearray, memoryview)):
            raise TypeError(f"set_states: states[{i}] is {type(state).__name__}, not get_state "
                            "bytes (bytes, bytearray or memoryview)")  # fmt: skip
    return [bytes(s) for s in states]


class ProcgenStepper:
    """``num_envs`` procgen envs of one game, stepped through an engine, their states parsed in
    place into ``step_values()`` arrays (see ProcgenVecEnv for the options). ``owner``: the env
    class its errors name (an adapter sets its own)."""

    owner = "ProcgenStepper"

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
        procgen_threads: Optional[int] = None,
        engine: str = "auto",
        defer_reset: bool = False,
        group_seeding: str = "derived",
        **procgen_options: Any,
    ) -> None:
        self._call_lock = threading.RLock()
        self._forked = False
        self._closed = True
        self.game: Game = get_game(game)
        if engine not in ENGINES:
            raise UsageError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        self.num_envs = n = check_num_envs(num_envs)
        self.num_threads = int(num_threads or usable_cpus())
        self._split_groups(_check_groups(num_groups, n), seed, group_seeding)
        options = dict(
            distribution_mode=distribution_mode, start_level=start_level, num_levels=num_levels,
            **procgen_options,
        )  # fmt: skip
        if procgen_threads is not None:
            options["num_threads"] = procgen_threads
        # checked (and exploration translated) before procgen sees them: procgen exits on some
        self._procgen_kwargs = procgen_options_of(self.game.name, options)
        self._spec = game_spec(self.game.name)
        self._collector = _collector.StateCollector(self._spec, n, self.num_threads)
        self._terminal: Optional[_collector.StateCollector] = None
        self._closed = False
        self._envs: List[Any] = []
        self._handles: List[Tuple[int, int]] = []
        self.engine = engine
        self._live: Optional[_collector.LiveGames] = None
        self._truncated = np.zeros(n, dtype=np.uint8)
        self._terminal_written = np.zeros(n, dtype=np.uint8)
        self._pending_reset = np.zeros(n, dtype=np.uint8)
        self._make_envs()
        self._step_flags = 0
        if defer_reset:
            try:
                self.defer_resets()
            except EngineMismatch:
                self.close()
                raise
        if self.engine == "headless":
            self._terminal = _collector.StateCollector(self._spec, n, 1)
        self._make_value_arrays()
        self._fresh = True  # every env is at the first state of a level, nothing stepped yet
        # after step_observe the state set (and the step_values arrays) lag the live games
        self._stale = False
        _OPEN.add(self)

    def _split_groups(self, groups: int, seed: Optional[int], group_seeding: str) -> None:
        """The envs split over ``groups`` procgen vec envs, each seeded with its own level
        stream (every seed folded into procgen's range)."""
        group_seeds(0, 1, group_seeding)  # refuse an unknown seeding before procgen starts
        self._group_seeding = group_seeding
        self._seed = random.SystemRandom().randrange(2**31 - 1) if seed is None else seed
        self._group_seeds = group_seeds(self._seed, groups, group_seeding)
        self._group_sizes = group_sizes(self.num_envs, groups)
        self._group_starts = [sum(self._group_sizes[:g]) for g in range(groups)]

    def _make_value_arrays(self) -> None:
        """The arrays refresh() parses the current states into, and step_values()' views."""
        n = self.num_envs
        self._scalars = np.zeros((n, len(SCALAR_NAMES)), dtype=np.float64)
        self._trailer = np.zeros((n, len(self.game.trailer_scalars)), dtype=np.float64)
        n_vectors = len(self.game.trailer_vectors)
        self._heads = np.zeros((n, n_vectors, VECTOR_HEAD_ITEMS), dtype=np.float64)
        self._head_lengths = np.zeros((n, n_vectors), dtype=np.int64)
        self._done, self._level_complete, self._cur_time, self._timeout = (
            SCALAR_NAMES.index(name) for name in ("done", "level_complete", "cur_time", "timeout")
        )
        self._values = self._step_values_of(
            self._scalars, self._trailer, self._heads, self._truncated.view(np.bool_)
        )

    def defer_resets(self) -> None:
        """From now on an ended env shows its terminal state and resets on its next step (as
        ``defer_reset=True``); EngineMismatch (a ValueError) unless the engine is headless
        (procgen's own stepping resets in the same step). For a caller that picks the mode
        after the engine is known."""
        if self.engine != "headless":
            raise EngineMismatch(
                f"defer_reset needs the headless engine (this env runs {self.engine})"
            )
        self._step_flags = _collector.DEFER_RESET

    def _left_behind_by_fork(self) -> None:
        """In a forked child: the threads of procgen's envs and of the pool are gone (the pool
        starts new ones itself, procgen's cannot), and the lock may be held by a thread that no
        longer exists. Mark the envs closed so that neither close nor gym3's finaliser joins
        procgen's missing threads; their memory is the parent's copy and is left as is."""
        self._call_lock = threading.RLock()
        self._forked = True
        for env in self._envs:
            env.abandon()

    # ---- procgen ----

    def _make_envs(self) -> None:
        for i, size in enumerate(self._group_sizes):
            env = make_procgen_env(
                self.game.name, size, rand_seed=self._group_seeds[i], **self._procgen_kwargs
            )
            self._envs.append(env)
            self._handles.append((env.get_state_address, env.handle))
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
        """States of every env from procgen's get_state (any engine; where the games are read
        live, a player that left the world at the episode's end is put back first, as the
        engine's own states have it: csrc/live_game.h)."""
        for group, ((get_state, handle), start, size) in enumerate(
            zip(self._handles, self._group_starts, self._group_sizes)
        ):
            if self._live is not None:
                self._collector.collect_full(self._live, group, get_state, handle, start)
            else:
                self._collector.collect(get_state, handle, size, start)

    def _games(self) -> _collector.LiveGames:
        """The live games the engine reads (headless, direct read); their engines always have
        them, so None here is a bug of this class, not of its caller."""
        if self._live is None:
            raise RuntimeError(f"the {self.engine} engine reads no live games")
        return self._live

    def _read(self) -> None:
        """States of every env, through the engine (procgen's threads must be idle)."""
        if self._live is None:
            self._collect()
            return
        self._collector.collect_live(self._live, -1, 0)

    def _step(self, chosen: npt.NDArray[np.int32]) -> None:
        if self.engine == "headless":  # every group in one pool run
            self._collector.step_live(
                self._games(), -1, chosen, 0, self._terminal, self._step_flags, self._truncated,
                self._terminal_written, self._pending_reset,
            )  # fmt: skip
            return
        # procgen steps (and renders) on its own threads: act on every group first.
        for env, start, size in zip(self._envs, self._group_starts, self._group_sizes):
            env.act(chosen[start : start + size])
        if self._live is None:
            self._collect()
        else:
            for env in self._envs:
                env.wait()  # for procgen's stepping threads
            self._read()

    # ---- stepping ----

    @locked
    def restart(self, seed: Optional[int] = None) -> None:
        """New procgen envs unless nothing was stepped yet (with ``seed``: always, seeded with
        it; else the same seeds as before); then read them."""
        self.check_open()
        if seed is not None:  # checked and folded before any env is touched
            self._group_seeds = group_seeds(seed, len(self._group_sizes), self._group_seeding)
            self._seed = seed
            self._fresh = False
        if not self._fresh:
            try:
                self._close_envs()
                self._make_envs()
            except BaseException:
                self.close()  # never an open env without its procgen envs (it would freeze)
                raise
        self._fresh = False
        self._read()
        self._stale = False
        self._truncated[:] = 0
        self._terminal_written[:] = 0
        self.refresh()

    @locked
    def step(self, chosen: npt.ArrayLike) -> None:
        """One step of every env with ``chosen[i]`` (procgen's 15 actions, checked: see
        check_actions), then refresh."""
        self.check_open()
        actions = check_actions(chosen, self.num_envs)
        self._fresh = False
        self._sync()
        cur_time_before = self._scalars[:, self._cur_time].copy()
        self._step(actions)
        self.refresh()
        if self.engine != "headless":
            # procgen stepped: an episode that ended on the step that reached the time limit
            # counts as truncated (procgen gives no other sign of it)
            done = self._scalars[:, self._done] != 0
            self._truncated[:] = done & (cur_time_before + 1 >= self._scalars[:, self._timeout])

    @locked
    def reset_envs(self, mask: npt.NDArray[np.bool_]) -> None:
        """Start the next episode (procgen's own reset: its next level) of the envs in ``mask``
        now, whether or not theirs ended; the other envs are not stepped (headless engine)."""
        self.check_open()
        if self.engine != "headless":
            raise UsageError(f"resetting some envs needs the headless engine (this env runs "
                             f"{self.engine}, where procgen resets its envs itself)")  # fmt: skip
        chosen = np.asarray(mask, dtype=bool)
        self._sync()  # the envs not reset keep their slot: it must hold their current state
        marks = chosen.astype(np.uint8)  # the C step clears each mark as it resets that env
        idle = np.zeros(self.num_envs, dtype=np.int32)  # ignored: nothing steps
        self._collector.step_live(
            self._games(), -1, idle, 0, self._terminal, self._step_flags | _collector.RESET_ONLY,
            self._truncated, self._terminal_written, marks,
        )  # fmt: skip
        self._pending_reset[chosen] = 0
        self.refresh()

    @locked
    def values_of(self, collector: _collector.StateCollector) -> StepValues:
        """StepValues of the states in another collector of this stepper's size (e.g. the
        terminal states), in new arrays; slots it never held a state in get the current values."""
        self._sync()
        n = self.num_envs
        scalars = np.zeros_like(self._scalars)
        trailer = np.zeros_like(self._trailer)
        heads, lengths = np.zeros_like(self._heads), np.zeros_like(self._head_lengths)
        collector.fill(scalars, trailer)
        if heads.shape[1]:
            collector.vector_heads(heads, lengths)
        empty = ~collector.collected()
        scalars[empty], trailer[empty], heads[empty] = (
            self._scalars[empty], self._trailer[empty], self._heads[empty],
        )  # fmt: skip
        return self._step_values_of(scalars, trailer, heads, np.zeros(n, dtype=np.bool_))

    # ---- the observation builder's steps (csrc/observation.h) ----

    @locked
    def step_observe(
        self, chosen: npt.ArrayLike, builder: _collector.ObservationBuilder, outs: BuilderArrays
    ) -> BuiltRows:
        """``step`` and the observation of every env into ``outs`` (``ObservationBuilder``'s
        outputs) in one native call with the headless engine: the games are read directly, no
        state is written (until something asks for the states: ``collector``, ``step_values``,
        ``get_states``). The other engines step, then build from the collected states. Returns
        what the builder returns (a ragged one: the rows of every type, and their totals)."""
        self.check_open()
        actions = check_actions(chosen, self.num_envs)
        if self.engine != "headless":
            self.step(actions)
            return builder.from_states(self._collector, outs)
        self._fresh = False
        result = builder.step_live(
            self._collector, self._games(), actions, self._terminal, self._step_flags,
            self._truncated, self._terminal_written, self._pending_reset, outs,
        )  # fmt: skip
        self._stale = True
        return result

    @locked
    def advance(self, chosen: npt.ArrayLike) -> None:
        """One step of every env and nothing read: procgen's game logic and this stepper's
        episode handling alone (headless engine; terminal states are still kept), what
        benchmarks/bench_vec_env.py's logic-only row measures. The states and ``step_values``
        catch up when next asked for. The procgen-stepped engines ``step``."""
        self.check_open()
        actions = check_actions(chosen, self.num_envs)
        if self.engine != "headless":
            self.step(actions)
            return
        self._fresh = False
        self._collector.step_live(
            self._games(), -1, actions, 0, self._terminal, self._step_flags, self._truncated,
            self._terminal_written, self._pending_reset, write=False,
        )  # fmt: skip
        self._stale = True

    @locked
    def observe(self, builder: _collector.ObservationBuilder, outs: BuilderArrays) -> BuiltRows:
        """The observation of the current states into ``outs`` (no step); returns what the
        builder returns."""
        self.check_open()
        if self.engine == "headless":
            return builder.from_live(self._collector, self._games(), outs)
        return builder.from_states(self._collector, outs)

    @locked
    def observe_terminal(
        self,
        builder: _collector.ObservationBuilder,
        outs: BuilderArrays,
        indices: npt.NDArray[np.int64],
    ) -> BuiltRows:
        """The observations of the terminal states of envs ``indices`` (their episodes ended at
        the last step; headless engine) into ``outs``, row k for env indices[k]; returns what
        the builder returns."""
        self.check_open()
        if self._terminal is None:
            raise RuntimeError(f"terminal states need the headless engine (this env runs "
                               f"{self.engine})")  # fmt: skip
        indices = np.ascontiguousarray(indices, dtype=np.int64)
        return builder.from_states(self._terminal, outs, indices)

    @property
    def collector(self) -> _collector.StateCollector:
        """The StateCollector holding every env's current state (written now if a
        ``step_observe`` left it behind)."""
        self._sync()
        return self._collector

    @property
    def terminal(self) -> Optional[_collector.StateCollector]:
        """The StateCollector of the terminal states (headless engine), or None."""
        return self._terminal

    @property
    def pending_reset(self) -> npt.NDArray[np.bool_]:
        """Per env: its episode ended and its reset waits for the next step (defer_reset)."""
        pending: npt.NDArray[np.bool_] = self._pending_reset.astype(np.bool_)  # a copy; 5x `!= 0`
        return pending

    @property
    def seed(self) -> int:
        """The seed procgen's level sampling was last seeded with (drawn at random when the
        env was made with ``seed=None``; see procgen_envs.group_seeds for the groups')."""
        return int(self._seed)

    @property
    def fresh(self) -> bool:
        """True until the first restart or step: the envs are as they were made, at their
        first levels' first states."""
        return self._fresh

    @property
    def procgen_options(self) -> Dict[str, Any]:
        """The options every procgen env of this stepper is made with (checked and translated
        by procgen_envs.procgen_options; a copy)."""
        return dict(self._procgen_kwargs)

    @property
    def procgen_envs(self) -> Tuple[Any, ...]:
        """procgen's own vec envs (backends.ProcgenEnvs), one per group in env order, to check
        against procgen: acting on them or setting their states behind the stepper leaves it
        reading stale games until ``read()``."""
        return tuple(self._envs)

    @property
    def call_lock(self) -> threading.RLock:
        """The lock every call of this stepper takes (an adapter's calls take it too)."""
        return self._call_lock

    @locked
    def read(self) -> None:
        """Read every env's current state again (through the engine) and refresh."""
        self.check_open()
        self._read()
        self.refresh()
        self._stale = False

    def _sync(self) -> None:
        if self._stale:
            self._stale = False
            self._read()
            self.refresh()

    def refresh(self) -> None:
        """Parse the current states into the step_values() arrays."""
        self._collector.fill(self._scalars, self._trailer)
        if self._heads.shape[1]:
            self._collector.vector_heads(self._heads, self._head_lengths)

    @locked
    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        """Every env's 64x64 RGB frame (headless: rendered now by the game's own observe())."""
        self.check_open()
        if self.engine == "headless":
            self._games().observe(-1)
        frames = [env.observe()[1]["rgb"] for env in self._envs]
        return np.concatenate(frames, axis=0)

    @locked
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._close_envs()
        self._collector.close()
        if self._terminal is not None:
            self._terminal.close()
        _return_free_memory()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise unpicklable(self.owner)

    # ---- states ----

    @locked
    def get_states(self) -> List[bytes]:
        """The raw procgen get_state bytes of the current step, one per env (every engine:
        procgen's own serializer is called for them)."""
        self.check_open()
        if self._live is not None:
            self._collect()
        return [self._collector.state_bytes(i) for i in range(self.num_envs)]

    @locked
    def restore_states(self, states: Sequence[BytesLike]) -> None:
        """Restore saved get_state blobs, one per env. Every blob is validated before any env is
        touched (restore.py: the parse with the game's invariants, same game, grid and options,
        measured value ranges, and a forked trial of procgen's set_state, steps and render),
        since procgen's set_state aborts or segfaults on bad input; a refused call raises
        StateDecodeError and changes nothing."""
        self.check_open()
        blobs = _state_blobs(states)
        current = parse_states(self.get_states(), game=self.game.name)
        check_restorable(blobs, self.game.name, current, self._procgen_kwargs)
        for group, (env, start, size) in enumerate(
            zip(self._envs, self._group_starts, self._group_sizes)
        ):
            env.set_state(blobs[start : start + size])
            if self._live is not None:  # re-read the game objects after procgen touched them
                self._live.attach(group, env.handle)
        self._pending_reset[:] = 0
        self._truncated[:] = 0
        self._terminal_written[:] = 0
        self._read()
        self._stale = False
        self.refresh()

    @locked
    def final_states(self) -> Tuple[npt.NDArray[np.int64], StateBatch]:
        """The terminal states of the episodes that ended at the last step (headless engine).

        Returns the indices of those envs and a StateBatch of their last states before the
        reset, with the camera recomputed as procgen would have rendered them. procgen itself
        never exposes these (its observation after an episode ends is already the next level);
        the other engines raise RuntimeError rather than guess.
        """
        self.check_open()
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
        truncated: npt.NDArray[np.bool_] = self._truncated.astype(np.bool_)  # a copy
        return truncated

    @property
    def last_level_complete(self) -> npt.NDArray[np.bool_]:
        """Per env: did the episode that ended at the last step end in success?"""
        self._sync()
        complete: npt.NDArray[np.bool_] = self._scalars[:, self._level_complete] != 0
        return complete

    def step_values(self) -> StepValues:
        """Scalars of the current step (header/base by name, trailer fields by name, the first
        items of the trailer vectors; no footing: features.batch_footing gives it of parsed
        states). The arrays are views that the next step overwrites: copy what you keep."""
        self._sync()
        return self._values

    def _step_values_of(
        self,
        scalars: npt.NDArray[np.float64],
        trailer: npt.NDArray[np.float64],
        heads: npt.NDArray[np.float64],
        truncated: npt.NDArray[np.bool_],
    ) -> StepValues:
        """StepValues as named column views of the arrays the collector fills."""
        return StepValues(
            truncated=truncated,
            scalars={name: scalars[:, i] for i, name in enumerate(SCALAR_NAMES)},
            extras={name: trailer[:, i] for i, name in enumerate(self.game.trailer_scalars)},
            vector_heads={name: heads[:, v] for v, name in enumerate(self.game.trailer_vectors)},
        )

    def check_open(self) -> None:
        """RuntimeError if this env is closed or was left behind by os.fork() (every call
        checks; an adapter checks before it touches its own state)."""
        if self._closed:
            raise RuntimeError(f"{self.owner} is closed")
        if self._forked:
            raise RuntimeError(
                "this env was created before os.fork(), in the parent process: procgen's "
                "threads and state stayed there. Create envs in the child (or use the 'spawn' "
                "or 'forkserver' multiprocessing start method)"
            )
