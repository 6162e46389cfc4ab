"""Level sampling by learning potential over a finite set of training levels (pure numpy).

``LevelSampler`` is Prioritized Level Replay (Jiang, Grefenstette and Rocktäschel, ICML 2021)
over levels ``0..num_levels-1`` (indices; the env maps index ``i`` to procgen level seed
``start_level + i``), written from the paper's definitions:

- each level keeps the score of its last scored episode (``update``; ``episode_score``: the mean
  of the positive part of the episode's GAE advantages, or of their absolute value);
- the replay distribution over the levels seen (scored) so far mixes rank prioritisation and
  staleness: ``P = (1 - rho) P_S + rho P_C``, with ``P_S(l)`` proportional to
  ``(1 / rank(l)) ** (1 / beta)`` (rank 1: the highest score; ties go to the lower index) and
  ``P_C(l)`` to ``c - C(l)``, where ``c`` counts the levels sampled so far and ``C(l)`` was the
  count when ``l`` was last sampled (uniform over the seen levels if every one was just sampled);
- unseen levels first: a draw replays a seen level with probability ``replay_prob``, by default
  the fraction of levels seen, and otherwise takes an unseen level, uniformly.

``sample()`` draws one level and counts it as sampled; ``draw(n)`` draws ``n`` from the current
probabilities without counting them (a caller that queues levels counts each one it starts:
``mark_sampled``). The generator is the sampler's own (``seed``, or a ``numpy.random.Generator``
the caller passes), never numpy's global one, and ``state_dict`` holds it with the scores, so a
resumed run draws on as the first would have. Misuse is a UsageError.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Dict, Optional

import numpy as np
import numpy.typing as npt

from procgen_entities.errors import UsageError

__all__ = ["SCORES", "LevelSampler", "episode_ends", "episode_score", "score_episodes"]

#: The episode scores (``episode_score``): the mean of the positive part of the episode's GAE
#: advantages (PLR's default), or the mean of their absolute values (L1).
SCORES = ("positive", "l1")
#: state_dict's format.
STATE_FORMAT = "level-sampler-1"


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise UsageError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise UsageError(f"{name} must be finite, got {value!r}")
    return number


class LevelSampler:
    """PLR's sampler over ``num_levels`` training levels (see the module's docstring).

    ``beta`` > 0: the rank prioritisation's temperature (0.1); ``rho`` in [0, 1]: the staleness
    share (0.1); ``replay_prob`` in [0, 1], or None for the fraction of levels seen; ``seed`` or
    ``rng``: the generator of the draws."""

    def __init__(
        self,
        num_levels: int,
        *,
        beta: float = 0.1,
        rho: float = 0.1,
        replay_prob: Optional[float] = None,
        seed: Optional[int] = None,
        rng: Optional[np.random.Generator] = None,
    ) -> None:
        if isinstance(num_levels, bool) or not isinstance(num_levels, (int, np.integer)):
            raise UsageError(f"num_levels must be an int, got {num_levels!r}")
        if num_levels < 1:
            raise UsageError(f"num_levels must be >= 1 (a finite set of levels), got {num_levels}")
        self.num_levels = int(num_levels)
        self.beta = _number(beta, "beta")
        if self.beta <= 0:
            raise UsageError(f"beta (the rank temperature) must be > 0, got {beta!r}")
        self.rho = _number(rho, "rho")
        if not 0.0 <= self.rho <= 1.0:
            raise UsageError(f"rho (the staleness share) must be in [0, 1], got {rho!r}")
        self.replay_prob = None if replay_prob is None else _number(replay_prob, "replay_prob")
        if self.replay_prob is not None and not 0.0 <= self.replay_prob <= 1.0:
            raise UsageError(f"replay_prob must be in [0, 1] or None, got {replay_prob!r}")
        if rng is not None and seed is not None:
            raise UsageError("LevelSampler takes a seed or an rng, not both")
        if rng is not None and not isinstance(rng, np.random.Generator):
            raise UsageError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        self.rng = rng if rng is not None else np.random.default_rng(seed)
        self.scores = np.zeros(self.num_levels, dtype=np.float64)
        self.seen = np.zeros(self.num_levels, dtype=np.bool_)
        self.last_sampled = np.zeros(self.num_levels, dtype=np.int64)
        self.count = 0

    # ---- the distribution ----

    def priorities(self) -> npt.NDArray[np.float64]:
        """The replay distribution over all levels, ``(1 - rho) P_S + rho P_C`` on the seen
        levels and 0 on the others (all zeros while none is seen)."""
        out = np.zeros(self.num_levels, dtype=np.float64)
        seen = np.flatnonzero(self.seen)
        if not len(seen):
            return out
        order = np.argsort(-self.scores[seen], kind="stable")
        ranks = np.empty(len(seen), dtype=np.float64)
        ranks[order] = np.arange(1, len(seen) + 1)
        log_h = -np.log(ranks) / self.beta  # (1 / rank) ** (1 / beta), in logs: no underflow
        h = np.exp(log_h - log_h.max())
        by_score = h / h.sum()
        stale = (self.count - self.last_sampled[seen]).astype(np.float64)
        total = stale.sum()
        by_staleness = stale / total if total > 0 else np.full(len(seen), 1.0 / len(seen))
        out[seen] = (1.0 - self.rho) * by_score + self.rho * by_staleness
        return out

    def replay_probability(self) -> float:
        """The chance that the next draw replays a seen level (1 once every level is seen, 0
        while none is)."""
        n_seen = int(self.seen.sum())
        if n_seen == 0:
            return 0.0
        if n_seen == self.num_levels:
            return 1.0
        return self.replay_prob if self.replay_prob is not None else n_seen / self.num_levels

    def probabilities(self) -> npt.NDArray[np.float64]:
        """The distribution of the next draw: replay (``priorities``) or an unseen level."""
        replay = self.replay_probability()
        out = replay * self.priorities()
        unseen = ~self.seen
        if unseen.any():
            out[unseen] += (1.0 - replay) / int(unseen.sum())
        out /= out.sum()
        return out

    # ---- drawing and scoring ----

    def draw(self, n: int) -> npt.NDArray[np.int64]:
        """``n`` levels from ``probabilities()`` (independent draws), not counted as sampled."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise UsageError(f"draw: n must be an int >= 0, got {n!r}")
        chosen = self.rng.choice(self.num_levels, size=int(n), p=self.probabilities())
        return np.asarray(chosen, dtype=np.int64)

    def mark_sampled(self, level: int) -> None:
        """Count ``level`` as sampled now (its staleness restarts from 0)."""
        index = self._level(level)
        self.count += 1
        self.last_sampled[index] = self.count

    def sample(self) -> int:
        """One level from ``probabilities()``, counted as sampled."""
        level = int(self.draw(1)[0])
        self.mark_sampled(level)
        return level

    def update(self, level: int, score: float) -> None:
        """``level``'s last episode scored ``score`` (finite): its score now, and it is seen."""
        index = self._level(level)
        self.scores[index] = _number(score, "score")
        self.seen[index] = True

    def _level(self, level: Any) -> int:
        if isinstance(level, bool) or not isinstance(level, (int, np.integer)):
            raise UsageError(f"a level is an int index, got {level!r}")
        if not 0 <= level < self.num_levels:
            raise UsageError(f"level {level} is out of range (0..{self.num_levels - 1})")
        return int(level)

    # ---- saving ----

    def settings(self) -> Dict[str, Any]:
        """What the sampler was made with (not its state): num_levels, beta, rho, replay_prob."""
        return {"num_levels": self.num_levels, "beta": self.beta, "rho": self.rho,
                "replay_prob": self.replay_prob}  # fmt: skip

    def state_dict(self) -> Dict[str, Any]:
        """Settings, scores, staleness and the generator's state, as JSON-ready values."""
        return {
            "format": STATE_FORMAT,
            **self.settings(),
            "scores": self.scores.tolist(),
            "seen": self.seen.tolist(),
            "last_sampled": self.last_sampled.tolist(),
            "count": self.count,
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue from ``state_dict()``'s output; UsageError if it is not one, or is a sampler
        with other settings."""
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise UsageError(f"not a LevelSampler state (format {STATE_FORMAT!r})")
        theirs = {key: state.get(key) for key in self.settings()}
        if theirs != self.settings():
            raise UsageError(f"the state is of a sampler with {theirs}, not {self.settings()}")
        n = self.num_levels
        try:
            scores = np.array(state["scores"], dtype=np.float64)
            seen = np.array(state["seen"], dtype=np.bool_)
            last = np.array(state["last_sampled"], dtype=np.int64)
            count = int(state["count"])
            rng = np.random.default_rng()
            rng.bit_generator.state = state["rng"]
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"a malformed LevelSampler state: {exc}") from None
        if scores.shape != (n,) or seen.shape != (n,) or last.shape != (n,):
            raise UsageError(f"a LevelSampler state of {n} levels holds arrays of another size")
        if not np.isfinite(scores).all() or count < 0 or (last < 0).any() or (last > count).any():
            raise UsageError("a LevelSampler state with non-finite scores or bad counts")
        kind = type(self.rng.bit_generator)
        if type(rng.bit_generator) is not kind:
            raise UsageError(f"the state's generator is not a {kind.__name__}")
        self.scores, self.seen, self.last_sampled, self.count = scores, seen, last, count
        self.rng.bit_generator.state = state["rng"]


def _parts(advantages: npt.NDArray[np.float64], score: str) -> npt.NDArray[np.float64]:
    """Each step's share of the score: max(A, 0), or |A|."""
    if score not in SCORES:
        raise UsageError(f"score must be one of {', '.join(SCORES)}, got {score!r}")
    return np.maximum(advantages, 0.0) if score == "positive" else np.abs(advantages)


def episode_score(advantages: npt.ArrayLike, score: str = "positive") -> float:
    """One episode's score from its steps' GAE advantages (``SCORES``)."""
    values = np.asarray(advantages, dtype=np.float64)
    if values.size == 0:
        raise UsageError("an episode has at least one step")
    return float(_parts(values, score).mean())


def episode_ends(starts: npt.ArrayLike, last_dones: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """[T, n]: step t of env i ended its episode. ``starts`` [T, n]: step t's observation began
    an episode (SB3's episode_starts); ``last_dones`` [n]: the rollout's last step ended one."""
    begun = np.asarray(starts) != 0
    last = np.asarray(last_dones).reshape(1, -1) != 0
    return np.concatenate([begun[1:], last], axis=0)


def score_episodes(
    sampler: LevelSampler,
    advantages: npt.ArrayLike,
    levels: npt.ArrayLike,
    ends: npt.ArrayLike,
    carry: Dict[str, Any],
    score: str = "positive",
) -> int:
    """Score each episode that ended in a rollout and ``update`` the sampler with it.

    ``advantages``, ``levels`` (the level of each step's episode) and ``ends`` (episode_ends):
    [T, n]. An episode still running at the rollout's end keeps its steps in ``carry`` (a dict
    the caller keeps between rollouts, empty at first), so its score covers all of its steps.
    Returns the number of episodes scored."""
    adv = np.asarray(advantages, dtype=np.float64)
    lv = np.asarray(levels, dtype=np.int64)
    done = np.asarray(ends, dtype=np.bool_)
    if adv.ndim != 2 or lv.shape != adv.shape or done.shape != adv.shape:
        raise UsageError(f"advantages, levels and ends are [steps, envs] arrays of one shape, got "
                         f"{adv.shape}, {lv.shape}, {done.shape}")  # fmt: skip
    parts = _parts(adv, score)
    n = adv.shape[1]
    sums = carry.setdefault("sums", np.zeros(n))
    counts = carry.setdefault("counts", np.zeros(n, dtype=np.int64))
    if sums.shape != (n,):
        raise UsageError(f"carry holds {sums.shape[0]} envs' episodes, the rollout {n}")
    scored = 0
    for i in range(n):
        start = 0
        for t in np.flatnonzero(done[:, i]).tolist():
            total = sums[i] + parts[start : t + 1, i].sum()
            length = counts[i] + t + 1 - start
            sampler.update(int(lv[t, i]), float(total / length))
            sums[i], counts[i], start = 0.0, 0, t + 1
            scored += 1
        sums[i] += parts[start:, i].sum()
        counts[i] += adv.shape[0] - start
    return scored
