"""PrioritizedLevels: EntityVectorEnv episodes that start on the levels a LevelSampler draws.

How an env starts a chosen level. At an episode's end procgen's own ``Game::reset`` draws the
next level seed from the game's ``level_seed_rand_gen``, one output per episode:
``start_level + output % num_levels`` (game.cpp: Game::reset, randgen.cpp: RandGen::randint);
nothing else draws from that generator. The wrapper writes that generator's state, a
std::mt19937 (624 words and a position, in the state's text form: docs/state-format.md §1.1),
so that its next outputs give the levels the sampler drew for that env: the words are the
untempered outputs, position 0. procgen then generates each level itself, exactly as a fresh env
of that level does (tests/test_level_sampling.py plays both with the same actions).

Restoring a captured start state at every episode's end would do the same through the public
path (``set_states``, ``reset(options={"states": ...})``), but every restore is validated with a
forked trial of procgen (restore.py): 0.5 s for 64 envs here, 3 s on the loaded machine, while
an env step of 64 envs takes 0.15-0.3 ms and 64 trained envs end an episode every step or two.
So the restore happens once per queue instead: ``refresh()`` (the learner calls it after the
scores change, once per rollout) draws every env's next ``queue`` levels from the sampler's
current probabilities and writes them in one validated ``set_states`` (the states are the envs'
own, only the level generator differs: the observation is unchanged).
Within a queue the draws use the probabilities of the moment it was written. The scores and
the seen set change only when the learner scores a rollout, but the staleness moves on as each
queued level starts, and the queue's draws do not see that. An env that uses up its queue gets a
new one at once.

Every level an env starts is counted (``sampler.mark_sampled``) and checked against procgen's
``info["level_seed"]``; ``levels`` is each env's current level index (what a learner records
per step to score the episodes, level_sampling.score_episodes). Episode statistics
(``info["episode_stats"]``) are the wrapper's own sums, so a refresh (which restarts the env's)
does not cut them. Needs the headless engine, ``autoreset_mode`` SAME_STEP (what SB3 uses) and
``num_levels`` > 0.
"""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional, Tuple, Union

import gymnasium
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode

from procgen_entities.errors import UsageError
from procgen_entities.gymnasium.vector import EntityVectorEnv
from procgen_entities.level_sampling import LevelSampler

__all__ = ["MT_WORDS", "PrioritizedLevels", "mt19937_untemper"]

#: std::mt19937's state words: the longest queue one state can hold.
MT_WORDS = 624
_U32 = np.uint64(0xFFFFFFFF)


def mt19937_untemper(outputs: npt.ArrayLike) -> npt.NDArray[np.uint32]:
    """The state words whose outputs (std::mt19937's tempering) are ``outputs`` (uint32s): a
    generator holding them at position 0 returns ``outputs`` in order."""
    y = np.asarray(outputs, dtype=np.uint64) & _U32
    y = y ^ (y >> np.uint64(18))
    y = y ^ ((y << np.uint64(15)) & np.uint64(0xEFC60000))
    x = y.copy()
    for _ in range(5):  # y ^ ((x << 7) & B): 7 more bits right per round
        x = y ^ ((x << np.uint64(7)) & np.uint64(0x9D2C5680))
    y = x & _U32
    x = y.copy()
    for _ in range(3):  # y ^ (x >> 11): 11 more bits right per round
        x = y ^ (x >> np.uint64(11))
    return (x & _U32).astype(np.uint32)


def _level_rng_at(game: str) -> int:
    """The byte offset of level_seed_rand_gen's is_seeded in a state of ``game`` (then its text
    length and text: docs/state-format.md §1)."""
    return 76 + len(game.encode())


def _with_level_rng(blob: bytes, at: int, text: bytes) -> bytes:
    """``blob`` with level_seed_rand_gen's text replaced by ``text``."""
    seeded, length = struct.unpack_from("<ii", blob, at)
    if seeded != 1 or not 0 < length <= len(blob) - at - 8:
        raise RuntimeError("a state without a seeded level_seed_rand_gen where one belongs")
    head, tail = blob[: at + 4], blob[at + 8 + length :]
    return head + struct.pack("<i", len(text)) + text + tail


class PrioritizedLevels(gymnasium.vector.VectorWrapper):  # type: ignore[misc]
    """``PrioritizedLevels(EntityVectorEnv(game, n, num_levels=N, autoreset_mode="SameStep"),
    LevelSampler(N, seed=0))``: every episode starts on a level the sampler drew (see the
    module's docstring). ``queue``: levels queued per env (1..624); ``seed``: the generator of
    the queue's unused bits (not of the levels)."""

    def __init__(
        self, env: EntityVectorEnv, sampler: LevelSampler, *, queue: int = MT_WORDS, seed: int = 0
    ) -> None:
        _check(env, sampler, queue)
        super().__init__(env)
        self._entity_env = env  # self.env, typed
        options = env.stepper.procgen_options
        self.sampler = sampler
        self.start_level = int(options.get("start_level", 0))
        self.queue = int(queue)
        #: How many times the queues were written (one validated set_states each).
        self.refreshes = 0
        self._game = env.game.name
        self._words = np.random.default_rng(seed)
        n = env.num_envs
        self._queue = np.zeros((n, self.queue), dtype=np.int64)
        self._next = np.zeros(n, dtype=np.int64)
        self._levels = np.full(n, -1, dtype=np.int64)
        self._returns = np.zeros(n, dtype=np.float64)
        self._lengths = np.zeros(n, dtype=np.int64)

    # ---- what SB3VecEnv and the tools read of an EntityVectorEnv ----

    @property
    def autoreset_mode(self) -> AutoresetMode:
        return self._entity_env.autoreset_mode

    @property
    def engine(self) -> str:
        return self._entity_env.engine

    @property
    def stats_key(self) -> str:
        return self._entity_env.stats_key

    @property
    def levels(self) -> npt.NDArray[np.int64]:
        """Each env's current level (an index into the sampler's levels; -1 before reset)."""
        return self._levels.copy()

    @property
    def next_levels(self) -> npt.NDArray[np.int64]:
        """The level each env starts when its episode ends (from its queue)."""
        return self._queue[np.arange(self.num_envs), self._next].copy()

    # ---- Gymnasium ----

    def reset(
        self,
        *,
        seed: Union[int, List[int], None] = None,
        options: Optional[Dict[str, Any]] = None,
    ) -> Tuple[Any, Dict[str, Any]]:
        """New envs (``seed``: an int, as EntityVectorEnv's), then every env starts its first
        sampled level: the queues are written and every env resets into its queue's first one."""
        if options:
            raise UsageError("PrioritizedLevels chooses the levels: reset takes no options")
        if seed is not None and not isinstance(seed, int):
            raise UsageError(f"PrioritizedLevels.reset: seed is an int or None, got {seed!r}")
        self.env.reset(seed=seed)
        self.refresh()
        n = self.num_envs
        obs, info = self.env.reset(options={"reset_mask": np.ones(n, dtype=np.bool_)})
        self._start(np.ones(n, dtype=np.bool_), info)
        self._returns[:] = 0.0
        self._lengths[:] = 0
        return obs, info

    def step(self, actions: Any) -> Tuple[Any, Any, Any, Any, Dict[str, Any]]:
        if (self._levels < 0).any():
            raise UsageError("PrioritizedLevels: reset() first")
        obs, reward, terminated, truncated, info = self.env.step(actions)
        self._returns += reward
        self._lengths += 1
        ended = terminated | truncated
        if ended.any():
            stats = info[self.stats_key]  # the same arrays as final_info's
            stats["r"][ended] = self._returns[ended]
            stats["l"][ended] = self._lengths[ended]
            self._returns[ended] = 0.0
            self._lengths[ended] = 0
            self._start(ended, info)
            if (self._next >= self.queue).any():
                self.refresh()
        return obs, reward, terminated, truncated, info

    # ---- the queues ----

    def refresh(self) -> None:
        """Draw every env's next ``queue`` levels from the sampler's current probabilities and
        write them into its level generator (one validated set_states of every env)."""
        n, q = self.num_envs, self.queue
        chosen = self.sampler.draw(n * q).reshape(n, q)
        blobs = self._entity_env.get_states()
        at = _level_rng_at(self._game)
        texts = self._texts(chosen)
        self._entity_env.set_states([_with_level_rng(b, at, t) for b, t in zip(blobs, texts)])
        self._queue, self._next[:] = chosen, 0
        self.refreshes += 1

    def _texts(self, chosen: npt.NDArray[np.int64]) -> List[bytes]:
        """Per env, the mt19937 text whose outputs start its episodes on ``chosen[i]`` in order:
        output ``index + N k`` (any k >= 1 keeps the level; k is drawn so that no state is the
        all-zero one), then untempered words for the rest of the 624."""
        n_levels = self.sampler.num_levels
        k_max = (2**32 - n_levels) // n_levels
        rows = []
        for levels in chosen:
            filler = self._words.integers(0, n_levels, MT_WORDS - len(levels))
            wanted = np.concatenate([levels, filler]).astype(np.uint64)
            k = self._words.integers(1, k_max + 1, MT_WORDS).astype(np.uint64)
            words = mt19937_untemper(wanted + np.uint64(n_levels) * k)
            rows.append((" ".join(map(str, words.tolist())) + " 0").encode())
        return rows

    def _start(self, mask: npt.NDArray[np.bool_], info: Dict[str, Any]) -> None:
        """The envs in ``mask`` began their queues' next levels: check procgen's level seeds,
        advance the queues and count each level as sampled."""
        envs = np.flatnonzero(mask)
        chosen = self._queue[envs, self._next[envs]]
        got = np.asarray(info["level_seed"])[envs] - self.start_level
        if not np.array_equal(got, chosen):
            raise RuntimeError(f"PrioritizedLevels: envs {envs.tolist()} started levels "
                               f"{got.tolist()}, not the queued {chosen.tolist()}")  # fmt: skip
        self._next[envs] += 1
        self._levels[envs] = chosen
        for level in chosen.tolist():
            self.sampler.mark_sampled(level)


def _check(env: Any, sampler: Any, queue: Any) -> None:
    """UsageError unless the wrapper can choose this env's levels."""
    if not isinstance(env, EntityVectorEnv):
        raise UsageError(f"PrioritizedLevels wraps an EntityVectorEnv, not {type(env).__name__}")
    if not isinstance(sampler, LevelSampler):
        raise UsageError(f"PrioritizedLevels takes a LevelSampler, not {type(sampler).__name__}")
    options = env.stepper.procgen_options
    num_levels = int(options.get("num_levels", 0))
    if num_levels <= 0:
        raise UsageError("PrioritizedLevels samples a finite set of levels: the env needs "
                         "num_levels > 0")  # fmt: skip
    if sampler.num_levels != num_levels:
        raise UsageError(f"the sampler has {sampler.num_levels} levels, the env {num_levels}")
    if options.get("use_sequential_levels"):
        raise UsageError("PrioritizedLevels: use_sequential_levels chooses procgen's next level")
    if env.autoreset_mode != AutoresetMode.SAME_STEP or env.engine != "headless":
        raise UsageError("PrioritizedLevels needs the headless engine and autoreset_mode "
                         f"SAME_STEP (got {env.engine}, {env.autoreset_mode.name})")  # fmt: skip
    if isinstance(queue, bool) or not isinstance(queue, int) or not 1 <= queue <= MT_WORDS:
        raise UsageError(f"queue must be an int in [1, {MT_WORDS}], got {queue!r}")
