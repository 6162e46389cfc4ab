"""Padded entity observations: every entity type as a fixed [cap, F] array with a mask.

The layout (``PaddedObservation``), the caps and the keys moved to the core
(procgen_entities/observation.py, where ``ObservationSpec`` owns the whole observation); they
are the same objects here, so the old import path keeps working.
"""

from __future__ import annotations

from procgen_entities.observation import (
    GLOBAL_KEY,
    GRID_KEY,
    MAX_ENTITY_CAP,
    PaddedObservation,
    resolve_caps,
    tile_caps,
    training_caps,
)

__all__ = [
    "GLOBAL_KEY",
    "GRID_KEY",
    "MAX_ENTITY_CAP",
    "PaddedObservation",
    "resolve_caps",
    "tile_caps",
    "training_caps",
]
