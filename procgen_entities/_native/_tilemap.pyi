from typing import Dict, List, Optional, Tuple

import numpy as np

MODES: Dict[str, int]
MAX_CLASSES: int
MAX_CROP: int
MAX_IMAGE: int

def n_types(mode: int, n_classes: int) -> int: ...
def n_features(mode: int, t: int, n_classes: int, with_rel: bool) -> int: ...

class TileSpec:
    def __init__(
        self, lut: bytes, n_classes: int, oob_class: int, base_class: int, top_class: int
    ) -> None: ...

def convert(
    grids: np.ndarray,
    spec: TileSpec,
    mode: int,
    chunk: int,
    crops: np.ndarray,
    refs: Optional[np.ndarray],
) -> Tuple[List[np.ndarray], np.ndarray]: ...
def class_images(grids: np.ndarray, spec: TileSpec, crops: np.ndarray, out: np.ndarray) -> None: ...
