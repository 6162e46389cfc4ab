"""The old path of :mod:`procgen_entities.agents.numpy_policy` (moved from tools/): its names are a
contract, so this path re-exports them (tests/test_layers.py: they are the same objects)."""

from procgen_entities.agents.numpy_policy import (
    ACTIVATIONS,
    DICT_NORMALIZER_FILE,
    MAX_ARRAYS,
    MAX_VALUES,
    NORMALIZER_FILE,
    DictNormalizer,
    FlatGridPolicy,
    MlpPolicy,
    Normalizer,
    choose_actions,
    read_npz,
)

__all__ = [
    "ACTIVATIONS",
    "DICT_NORMALIZER_FILE",
    "DictNormalizer",
    "FlatGridPolicy",
    "MAX_ARRAYS",
    "MAX_VALUES",
    "MlpPolicy",
    "NORMALIZER_FILE",
    "Normalizer",
    "choose_actions",
    "read_npz",
]
