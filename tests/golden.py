"""Golden procgen states in tests/data/ and their expected parses: reading and flattening.

Recorded by ``tools/record_golden.py`` (see there for what is kept); the tests only read them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

DATA_DIR = Path(__file__).resolve().parent / "data"
MODES = ("easy", "hard")


def golden_name(game: str, mode: str) -> str:
    return f"{game}-{mode}"


def split_states(arrays: Dict[str, np.ndarray]) -> List[bytes]:
    blob = arrays["blob"].tobytes()
    offsets = arrays["offsets"]
    return [blob[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]


def batch_to_arrays(batch) -> Dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    """A StateBatch as a flat dict of arrays (dict fields become ``"<dict>.<name>"`` keys)."""
    out: Dict[str, np.ndarray] = {
        "game": np.array(batch.game),
        "entity_fields": np.array(batch.entity_fields),
    }
    for name in ("reward", "done", "level_complete", "cur_time", "level_seed", "entities",
                 "entity_counts", "sizes"):  # fmt: skip
        out[name] = getattr(batch, name)
    if batch.grid is not None:
        out["grid"] = batch.grid
    for group in ("extras", "vectors", "vector_counts", "scalars"):
        for name, values in getattr(batch, group).items():
            out[f"{group}.{name}"] = values
    return out


def load_states(path: Path) -> Tuple[Dict[str, np.ndarray], List[bytes]]:
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    return arrays, split_states(arrays)


def load_expected(path: Path) -> Dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}
