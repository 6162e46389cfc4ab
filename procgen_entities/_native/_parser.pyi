from typing import Any, Dict, Sequence, Tuple

import numpy as np

TRAILER_KINDS_BY_CODE: Dict[str, int]
SCALAR_NAMES: Tuple[str, ...]
SCALAR_KINDS: Tuple[str, ...]
SCALAR_POSITIONS: Tuple[Tuple[int, int], ...]
VALUE_KINDS_BY_TERM: Dict[str, int]
#: (name, byte offset, kind "i" or "f") per field, in record order.
ENTITY_RECORD: Tuple[Tuple[str, int, str], ...]
CAMERA_RECORD: Tuple[Tuple[str, int, str], ...]

class GameSpec:
    game: str
    n_trailer_scalars: int
    n_trailer_vectors: int
    def __init__(
        self,
        game: str,
        trailer: Tuple[Tuple[str, str], ...],
        invariants: Tuple[Tuple[str, Tuple[str, int], Tuple[str, int]], ...] = ...,
        check_invariants: bool = ...,
    ) -> None: ...

def read_game_name(state: Any) -> str: ...
def parse_batch(
    states: Sequence[Any], spec: GameSpec, entity_fields: np.ndarray, want_grid: bool
) -> Dict[str, Any]: ...
