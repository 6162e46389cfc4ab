from typing import Any, Dict, List, Optional, Union

import numpy as np
import numpy.typing as npt

from procgen_entities._native._parser import GameSpec
from procgen_entities.observation import BuilderArgs, PaddedArrays, RaggedArrays

DEFAULT_CAPACITY: int
FEATURE_REL_X: int
CELL_OUTSIDE: float
FEATURE_REL_Y: int
MAX_SLOTS: int
DEFER_RESET: int
RESET_ONLY: int
LIVE_OPS: Dict[str, int]

class LiveGames:
    num_groups: int
    num_games: int
    def __init__(
        self,
        program: np.ndarray,
        entity_program: np.ndarray,
        name: bytes,
        offsets: Dict[str, int],
        game_step_slot: int,
        observe_slot: int,
        reset_address: int,
        prepare_address: int,
        render_height: float,
        group_sizes: List[int],
        read_map: Dict[str, Any],
    ) -> None: ...
    def attach(self, group: int, vecgame: int) -> None: ...
    def detach(self) -> None: ...
    def game_addresses(self, group: int) -> List[int]: ...
    def write_state(self, group: int, k: int, capacity: int = ...) -> bytes: ...
    def observe(self, group: int) -> None: ...

class StateCollector:
    num_threads: int
    num_states: int
    def __init__(
        self, spec: GameSpec, num_states: int, num_threads: int, capacity: int = ...
    ) -> None: ...
    def close(self) -> None: ...
    def collect(self, get_state: int, env: int, count: int, first: int) -> None: ...
    def fill(
        self, scalars: np.ndarray, trailer_scalars: np.ndarray, grid: Optional[np.ndarray] = ...
    ) -> None: ...
    def vector_heads(self, heads: np.ndarray, lengths: np.ndarray) -> None: ...
    def collect_live(self, live: LiveGames, group: int, first: int) -> None: ...
    def collect_full(
        self, live: LiveGames, group: int, get_state: int, env: int, first: int
    ) -> None: ...
    def step_live(
        self,
        live: LiveGames,
        group: int,
        actions: np.ndarray,
        first: int,
        terminal: Optional[StateCollector],
        flags: int,
        truncated: np.ndarray,
        terminal_written: np.ndarray,
        pending: np.ndarray,
        *,
        write: bool = ...,
    ) -> None: ...
    def collected(self) -> npt.NDArray[np.bool_]: ...
    def state_bytes(self, i: int) -> bytes: ...

def pad_rows(
    rows: np.ndarray,
    counts: np.ndarray,
    out: np.ndarray,
    mask: np.ndarray,
    dropped: np.ndarray,
    cx: int = ...,
    cy: int = ...,
    player: Optional[np.ndarray] = ...,
) -> None: ...
def episode_step(
    resetting: np.ndarray,
    reward: np.ndarray,
    done: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    returns: np.ndarray,
    lengths: np.ndarray,
    final_return: np.ndarray,
    final_length: np.ndarray,
) -> int: ...

GLOBAL_OPS: Dict[str, int]
MODE_BITS: Dict[str, int]
DERIVED_IS_TARGET: int
IMAGE_CENTRES: Dict[str, int]

class ObservationBuilder:
    num_states: int
    n_types: int
    n_globals: int
    image_size: int
    ragged: bool
    def __init__(self, args: BuilderArgs) -> None: ...
    def from_states(
        self,
        collector: StateCollector,
        outs: Union[PaddedArrays, RaggedArrays],
        indices: Optional[np.ndarray] = ...,
    ) -> Optional[List[Optional[npt.NDArray[np.float32]]]]: ...
    def from_live(
        self, collector: StateCollector, live: LiveGames, outs: Union[PaddedArrays, RaggedArrays]
    ) -> Optional[List[Optional[npt.NDArray[np.float32]]]]: ...
    def step_live(
        self,
        collector: StateCollector,
        live: LiveGames,
        actions: np.ndarray,
        terminal: Optional[StateCollector],
        flags: int,
        truncated: np.ndarray,
        terminal_written: np.ndarray,
        pending: np.ndarray,
        outs: Union[PaddedArrays, RaggedArrays],
    ) -> Optional[List[Optional[npt.NDArray[np.float32]]]]: ...
