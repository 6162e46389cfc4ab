"""Padded entity observations: every entity type as a fixed [cap, F] array with a mask.

``PaddedObservation`` holds a game's layout (entity types, features, caps) and makes the arrays
the native builder (csrc/observation.h) pads each step's rows into; types with more entities
than their cap keep those nearest the player. The layout also defines the flat form
(``flatten``/``unflatten``): per type its [cap * F] values then its [cap] mask, in declaration
order, then the globals, then (``grid_size > 0``) the class image.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

from procgen_entities.errors import UsageError
from procgen_entities.features import FeatureSpace
from procgen_entities.games import Game, default_caps
from procgen_entities.tilemap import tilemap_features

__all__ = [
    "GLOBAL_KEY",
    "GRID_KEY",
    "MAX_ENTITY_CAP",
    "PaddedObservation",
    "resolve_caps",
    "training_caps",
]

GLOBAL_KEY = "global"
GRID_KEY = "grid"
#: The largest ``max_entities`` cap (per type): 64x64 cells, a whole procgen grid. Caps are
#: allocated for every env and type at once (10**7 would take 5.7 GB), so larger ones are refused.
MAX_ENTITY_CAP = 64 * 64


def tile_caps(mode: Optional[str], names: List[str], window: int, chunk: int) -> Dict[str, int]:
    """The most entities a tilemap type can have in a ``window``-cell square (so none is ever
    dropped): a cell each (tiles), a run per two cells of a row (runs and the columns mode's
    runs), a Column per column, a chunk per k x k block."""
    runs = window * ((window + 1) // 2)
    caps = {}
    for name in names:
        if mode == "tiles":
            caps[name] = window * window
        elif mode == "chunks":
            caps[name] = (-(-window // chunk)) ** 2
        elif mode == "columns" and name == "Column":
            caps[name] = window
        else:
            caps[name] = runs
    return caps


def training_caps(game: Game, tilemap: Optional[str]) -> Dict[str, int]:
    """The recipe's caps (``Game.training_caps``) for the types an observation with ``tilemap``
    has; the other types keep their safe defaults (resolve_caps)."""
    types = set(game.entity_types.values())
    types |= set(tilemap_features(game.name, tilemap) if tilemap else ())
    return {k: v for k, v in game.training_caps.items() if k in types}


def resolve_caps(
    game: Game,
    space: FeatureSpace,
    max_entities: Union[None, int, Mapping[str, int]],
    tiles: Mapping[str, int],
) -> Dict[str, int]:
    """Cap per entity type: games.default_caps for entities, ``tiles`` for tilemap types;
    ``max_entities`` (an int for all types or a dict per type) overrides them."""
    caps = {**default_caps(game.name), **tiles}
    if isinstance(max_entities, Mapping):
        unknown = sorted(set(max_entities) - set(space.entities))
        if unknown:
            raise UsageError(f"{game.name}: no entity types {unknown}")
        for name, cap in max_entities.items():
            caps[name] = _cap(f"max_entities[{name!r}]", cap)
    elif max_entities is not None:
        caps = dict.fromkeys(caps, _cap("max_entities", max_entities))
    return {name: caps[name] for name in space.entities}


def _cap(name: str, value: object) -> int:
    """A cap as an int in [1, MAX_ENTITY_CAP], or a UsageError."""
    try:
        if isinstance(value, bool):
            raise TypeError
        cap = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise UsageError(f"{name} must be an int, got {value!r}") from None
    if not 1 <= cap <= MAX_ENTITY_CAP:
        raise UsageError(
            f"{name} must be in [1, {MAX_ENTITY_CAP}], got {cap} (the observation holds cap "
            "rows per env and entity type; no procgen level has more)"
        )
    return cap


@dataclass
class PaddedObservation:
    """The padded layout of one game's observation for ``n`` envs."""

    space: FeatureSpace
    caps: Dict[str, int]
    n: int
    grid_size: int = 0  # > 0: a [grid_size, grid_size] uint8 class image under GRID_KEY

    def __post_init__(self) -> None:
        self.widths = {name: len(e.features) for name, e in self.space.entities.items()}
        self.n_globals = len(self.space.global_features)
        self.mask_keys = [f"{name}_mask" for name in self.caps]
        self.flat_size = (
            sum(c * (self.widths[k] + 1) for k, c in self.caps.items()) + self.n_globals
            + self.grid_size**2
        )  # fmt: skip

    def empty(self, n: Optional[int] = None) -> Dict[str, npt.NDArray]:
        """New arrays for one observation of ``n`` envs (default: all; the native builder
        writes every element)."""
        n = self.n if n is None else n
        out: Dict[str, npt.NDArray] = {}
        for name, cap in self.caps.items():
            out[name] = np.empty((n, cap, self.widths[name]), dtype=np.float32)
            out[f"{name}_mask"] = np.empty((n, cap), dtype=np.bool_)
        out[GLOBAL_KEY] = np.zeros((n, self.n_globals), dtype=np.float32)
        if self.grid_size:
            out[GRID_KEY] = np.empty((n, self.grid_size, self.grid_size), dtype=np.uint8)
        return out

    def flatten(self, obs: Mapping[str, npt.NDArray]) -> npt.NDArray[np.float32]:
        """[n, flat_size]: per type its values then its mask, in order, then the globals."""
        parts: List[npt.NDArray] = []
        for name in self.caps:
            parts.append(obs[name].reshape(len(obs[GLOBAL_KEY]), -1))
            parts.append(obs[f"{name}_mask"].astype(np.float32))
        parts.append(obs[GLOBAL_KEY])
        if self.grid_size:
            parts.append(obs[GRID_KEY].reshape(len(obs[GLOBAL_KEY]), -1).astype(np.float32))
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
        out[GLOBAL_KEY] = flat[:, at : at + self.n_globals]
        if self.grid_size:
            image = flat[:, at + self.n_globals :]
            out[GRID_KEY] = image.astype(np.uint8).reshape(-1, self.grid_size, self.grid_size)
        return {k: v[0] for k, v in out.items()} if single else out

    def feature_names(self) -> Dict[str, Tuple[str, ...]]:
        names = {name: tuple(e.features) for name, e in self.space.entities.items()}
        names[GLOBAL_KEY] = tuple(self.space.global_features)
        return names
