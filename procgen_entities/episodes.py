"""Episode statistics of a vectorised env: each env's running return and length, kept the way
Gymnasium reports them (``info["episode"]``-style ``r`` and ``l`` of the episodes that ended),
with the NEXT_STEP autoreset's rule that a resetting env's step is its reset. One native pass per
step (csrc/episodes.h) instead of a dozen array operations in Python."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

import numpy as np
import numpy.typing as npt

from procgen_entities._native import _collector
from procgen_entities.errors import UsageError

Bools = npt.NDArray[np.bool_]
_BOOL = np.dtype(np.bool_)


@dataclass(frozen=True, slots=True)
class EpisodeStep:
    """One step's outcome per env: ``terminated`` (ended by the game) and ``truncated`` (by
    procgen's time limit), the ended episodes' return and length (0 for the others) and how many
    ended."""

    terminated: Bools
    truncated: Bools
    final_return: npt.NDArray[np.float32]
    final_length: npt.NDArray[np.int32]
    ended_count: int

    @property
    def ended(self) -> Bools:
        """Per env: its episode ended at this step."""
        ended: Bools = self.terminated | self.truncated
        return ended


class EpisodeStats:
    """Running return (float64) and length of each of ``n`` envs' episodes."""

    def __init__(self, n: int) -> None:
        self.returns = np.zeros(n, dtype=np.float64)
        self.lengths = np.zeros(n, dtype=np.int64)

    def restart(self, which: Union[slice, Bools, npt.NDArray[np.intp]] = slice(None)) -> None:
        """The envs ``which`` (default: all) start a new episode at return 0, length 0."""
        self.returns[which] = 0.0
        self.lengths[which] = 0

    def step(
        self, resetting: Bools, reward: npt.NDArray[np.float32], done: npt.NDArray[Any],
        truncated: Bools,
    ) -> EpisodeStep:  # fmt: skip
        """Account one step: ``resetting`` (bool [n]) the envs whose step only reset them
        (their ``reward`` is set to 0 in place, they are neither terminated nor truncated);
        ``done`` (uint8 or bool [n]) and ``truncated`` (bool [n], cleared in place for the
        resetting envs) as the stepper reports them."""
        n = len(self.returns)
        terminated = np.empty(n, np.bool_)
        final_return, final_length = np.empty(n, np.float32), np.empty(n, np.int32)
        ended = _collector.episode_step(
            _bytes(resetting), reward, _bytes(done), terminated.view(np.uint8), _bytes(truncated),
            self.returns, self.lengths, final_return, final_length,
        )  # fmt: skip
        return EpisodeStep(terminated, truncated, final_return, final_length, int(ended))


def _bytes(flags: npt.NDArray[Any]) -> npt.NDArray[np.uint8]:
    """A bool or uint8 array as uint8 without a copy (the native side reads 0/1 bytes)."""
    dtype = getattr(flags, "dtype", None)
    if dtype is _BOOL:  # the common case, by identity (numpy's builtin dtypes are singletons)
        return flags.view(np.uint8)
    if dtype == np.uint8:
        return flags
    if dtype != np.bool_:
        raise UsageError(f"episode flags must be a bool or uint8 array, got {type(flags).__name__}"
                         f"{'' if dtype is None else f' of {dtype}'}")  # fmt: skip
    return flags.view(np.uint8)
