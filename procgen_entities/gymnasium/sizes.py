"""The sizes of policy.py's encoders and of SB3's actor-critic MLP, computed without torch.

``policy_values`` counts the values of an SB3 ActorCriticPolicy's state dict (every weight and
bias, each features extractor under the three names SB3 saves it by) from its architecture and
the env's observation space, so a checkpoint can be refused for its size before any tensor is
made (agents/checkpoint.py). tests/test_checkpoint.py checks each count against torch's.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from procgen_entities.errors import UsageError
from procgen_entities.gymnasium.observation import GLOBAL_KEY, GRID_KEY

__all__ = ["GRID_CNNS", "encoder_inputs", "mlp_layers", "policy_values"]

#: GridEncoder's convolution stacks: (out channels, stride) of each 3x3 convolution, and the
#: head's width. "small" (the committed recipe's): two stride-2 layers, a 4x4 reading of a 16x16
#: square. "deep": a stride-1 layer first, so edges are found at full resolution (a ledge one
#: cell from the player), then an 8x8 reading and a wider head; ~3x the small stack's compute.
GRID_CNNS: Dict[str, Tuple[Tuple[Tuple[int, int], ...], int]] = {
    "small": (((16, 2), (32, 2)), 64),
    "deep": (((16, 1), (32, 2), (32, 1)), 256),
}

#: The names SB3's ActorCriticPolicy saves its features extractor under (features_extractor,
#: pi_features_extractor, vf_features_extractor: one module, or two when not shared).
EXTRACTOR_NAMES = 3


def encoder_inputs(
    space: Any,
) -> Tuple[Dict[str, Tuple[int, int]], int, Optional[Tuple[int, int]]]:
    """(entity type -> (cap, F), G, (values, S) of the class image or None) of
    EntityVectorEnv's single dict observation space: the encoders' constructor arguments."""
    shapes = {key: tuple(box.shape or ()) for key, box in space.spaces.items()}
    types = {
        key: (int(shape[0]), int(shape[1]))
        for key, shape in shapes.items()
        if key not in (GLOBAL_KEY, GRID_KEY) and not key.endswith("_mask")
    }
    grid = None
    if GRID_KEY in shapes:  # uint8 class ids 0..high: high + 1 values
        grid = (int(space.spaces[GRID_KEY].high.max()) + 1, int(shapes[GRID_KEY][0]))
    return types, int(shapes[GLOBAL_KEY][0]), grid


def _linear(inputs: int, outputs: int) -> int:
    return inputs * outputs + outputs


def mlp_layers(net_arch: Any) -> Tuple[List[int], List[int]]:
    """(policy widths, value widths) of SB3's ``net_arch``: a list for both, or a dict of
    ``pi`` and ``vf`` lists."""
    if isinstance(net_arch, Mapping):
        return list(net_arch.get("pi", [])), list(net_arch.get("vf", []))
    return list(net_arch), list(net_arch)


def _mlp_values(features: int, net_arch: Any, actions: int) -> int:
    """MlpExtractor's two nets, then action_net and value_net."""
    total = 0
    for widths, outputs in zip(mlp_layers(net_arch), (actions, 1)):
        width = features
        for size in widths:
            total += _linear(width, size)
            width = size
        total += _linear(width, outputs)
    return total


def grid_encoder_values(n_values: int, size: int, out: Optional[int], cnn: str) -> Tuple[int, int]:
    """(values, out_dim) of GridEncoder: the 3x3 convolutions (padding 1), the head."""
    stack, head = GRID_CNNS[cnn]
    total, before, side = 0, n_values, size
    for width, stride in stack:
        total += before * width * 9 + width
        before, side = width, (side - 1) // stride + 1
    out = head if out is None else out
    return total + _linear(before * side * side, out), out


def _entity_encoder_values(
    types: Mapping[str, Tuple[int, int]], n_globals: int, grid: Optional[Tuple[int, int]],
    d_model: int = 64, n_heads: int = 4, n_layers: int = 0, n_queries: int = 4,
    grid_dim: int = 64,
) -> Tuple[int, int]:  # fmt: skip
    """(values, out_dim) of EntityEncoder (``n_heads`` changes no size)."""
    d = d_model
    total = sum(_linear(f, d) + d for _, f in types.values())  # embed, type_vectors
    total += _linear(d, d) + _linear(max(n_globals, 1), d)  # slot_mlp, embed_global
    total += n_layers * (8 * d * d + 11 * d)  # attention 4d^2 + 4d, feed-forward, two norms
    total += n_queries * d + 4 * d * d + 4 * d  # queries, pool
    out = (1 + n_queries) * d
    if grid is not None:
        values, width = grid_encoder_values(grid[0], grid[1], grid_dim, "small")
        total, out = total + values, out + width
    return total, out


def policy_values(
    extractor: Optional[str], kwargs: Mapping[str, Any], net_arch: Sequence[Any] | Mapping,
    actions: int, space: Any,
) -> int:  # fmt: skip
    """The values of the state dict of an SB3 ActorCriticPolicy with ``extractor`` (None: the
    flat MLP, ``space`` a Box; "FlatGridExtractor" or "EntityExtractor" with ``kwargs``, ``space``
    the Dict observation space), ``net_arch`` and ``actions``."""
    if extractor is None:
        return _mlp_values(int(space.shape[0]), net_arch, actions)
    types, n_globals, grid = encoder_inputs(space)
    if extractor == "EntityExtractor":
        values, features = _entity_encoder_values(types, n_globals, grid, **kwargs)
    else:
        if grid is None:
            raise UsageError("FlatGridExtractor needs EntityVectorEnv(..., grid=True)")
        values, width = grid_encoder_values(
            grid[0], grid[1], kwargs.get("grid_dim"), kwargs.get("cnn", "small")
        )
        features = sum(c * (f + 1) for c, f in types.values()) + n_globals + width
    return EXTRACTOR_NAMES * values + _mlp_values(features, net_arch, actions)
