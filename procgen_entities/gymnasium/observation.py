"""Padded entity observations: every entity type as a fixed [cap, F] array with a mask.

``PaddedObservation`` holds a game's layout (entity types, features, caps) and turns what the C
gatherer produced for one step (rows of each type in env order, rows per env) into the dict of
padded arrays; types with more entities than their cap keep those nearest the player. The layout
also defines the flat form (``flatten``/``unflatten``): per type its [cap * F] values then its
[cap] mask, in declaration order, then the globals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

from procgen_entities.features import FeatureSpace
from procgen_entities.games import Game, default_caps

__all__ = ["PaddedObservation", "resolve_caps"]

GLOBAL_KEY = "global"


def resolve_caps(
    game: Game, space: FeatureSpace, max_entities: Union[None, int, Mapping[str, int]], window: int
) -> Dict[str, int]:
    """Cap per entity type: games.default_caps for entities, the window's cells for tilemap
    types; ``max_entities`` (an int for all types or a dict per type) overrides them."""
    caps = dict(default_caps(game.name))
    for name in space.entities:
        caps.setdefault(name, max(1, window * window))
    if isinstance(max_entities, int):
        if max_entities < 1:
            raise ValueError(f"max_entities must be >= 1, got {max_entities}")
        caps = dict.fromkeys(caps, max_entities)
    elif max_entities is not None:
        unknown = sorted(set(max_entities) - set(space.entities))
        if unknown:
            raise ValueError(f"{game.name}: no entity types {unknown}")
        for name, cap in max_entities.items():
            if cap < 1:
                raise ValueError(f"max_entities[{name!r}] must be >= 1, got {cap}")
            caps[name] = int(cap)
    return {name: caps[name] for name in space.entities}


@dataclass
class PaddedObservation:
    """The padded layout of one game's observation for ``n`` envs."""

    space: FeatureSpace
    caps: Dict[str, int]
    n: int

    def __post_init__(self) -> None:
        self.widths = {name: len(e.features) for name, e in self.space.entities.items()}
        self.n_globals = len(self.space.global_features)
        self.flat_size = (
            sum(c * (self.widths[k] + 1) for k, c in self.caps.items()) + self.n_globals
        )

    def empty(self) -> Dict[str, npt.NDArray]:
        out: Dict[str, npt.NDArray] = {}
        for name, cap in self.caps.items():
            out[name] = np.zeros((self.n, cap, self.widths[name]), dtype=np.float32)
            out[f"{name}_mask"] = np.zeros((self.n, cap), dtype=np.bool_)
        out[GLOBAL_KEY] = np.zeros((self.n, self.n_globals), dtype=np.float32)
        return out

    def pad(
        self,
        name: str,
        rows: npt.NDArray[np.float32],
        counts: npt.NDArray[np.int64],
        distance: Optional[npt.NDArray[np.float32]],
        out: Dict[str, npt.NDArray],
    ) -> npt.NDArray[np.int64]:
        """Write one type's rows (env order, ``counts`` per env) into ``out``; returns how many
        entities each env had beyond the cap (dropped: the farthest from the player)."""
        cap = self.caps[name]
        values, mask = out[name], out[f"{name}_mask"]
        values.fill(0.0)
        mask.fill(False)
        if len(rows) == 0:
            return np.zeros(self.n, dtype=np.int64)
        env = np.repeat(np.arange(self.n), counts)
        starts = np.cumsum(counts) - counts
        over = counts > cap
        if over.any() and distance is not None:
            order = np.lexsort((distance, env))  # within each env: nearest first (stable)
            rows = rows[order]
        position = np.arange(len(rows)) - np.repeat(starts, counts)
        keep = position < cap
        values[env[keep], position[keep]] = rows[keep]
        mask[env[keep], position[keep]] = True
        return np.maximum(counts - cap, 0)

    def flatten(self, obs: Mapping[str, npt.NDArray]) -> npt.NDArray[np.float32]:
        """[n, flat_size]: per type its values then its mask, in order, then the globals."""
        parts: List[npt.NDArray] = []
        for name in self.caps:
            parts.append(obs[name].reshape(self.n, -1))
            parts.append(obs[f"{name}_mask"].astype(np.float32))
        parts.append(obs[GLOBAL_KEY])
        return np.concatenate(parts, axis=1).astype(np.float32, copy=False)

    def unflatten(self, flat: npt.NDArray) -> Dict[str, npt.NDArray]:
        """The inverse of ``flatten`` for [flat_size] or [m, flat_size] arrays."""
        flat = np.asarray(flat, dtype=np.float32)
        single = flat.ndim == 1
        flat = flat.reshape(-1, self.flat_size)
        out: Dict[str, npt.NDArray] = {}
        at = 0
        for name, cap in self.caps.items():
            width = self.widths[name]
            out[name] = flat[:, at : at + cap * width].reshape(-1, cap, width)
            at += cap * width
            out[f"{name}_mask"] = flat[:, at : at + cap] > 0.5
            at += cap
        out[GLOBAL_KEY] = flat[:, at:]
        return {k: v[0] for k, v in out.items()} if single else out

    def feature_names(self) -> Dict[str, Tuple[str, ...]]:
        names = {name: tuple(e.features) for name, e in self.space.entities.items()}
        names[GLOBAL_KEY] = tuple(self.space.global_features)
        return names
