"""``python -m procgen_entities.tools.checkpoint convert``: old pickled checkpoint folders to the
data format (procgen_entities/agents/checkpoint.py, where the format moved from here). This path
re-exports the format's names too, which are a contract (tests/test_layers.py: the same objects).
"""

import argparse
import sys
from pathlib import Path
from typing import List, Optional

from procgen_entities.agents.checkpoint import (
    MAX_HIDDEN_LAYERS,
    MAX_LAYER_WIDTH,
    PICKLED_FILES,
    Checkpoint,
    CheckpointError,
    CheckpointPolicy,
    EnvConfig,
    NotACheckpoint,
    build_sb3_policy,
    convert,
    declared_values,
    load_normalizer,
    load_policy,
    make_env,
    policy_kwargs_of,
    read_spec,
    save_sb3,
    torch_logits,
    wants_dict_observation,
)

__all__ = [
    "main",
    "Checkpoint",
    "CheckpointError",
    "CheckpointPolicy",
    "EnvConfig",
    "MAX_HIDDEN_LAYERS",
    "MAX_LAYER_WIDTH",
    "NotACheckpoint",
    "PICKLED_FILES",
    "build_sb3_policy",
    "convert",
    "declared_values",
    "load_normalizer",
    "load_policy",
    "make_env",
    "policy_kwargs_of",
    "read_spec",
    "save_sb3",
    "torch_logits",
    "wants_dict_observation",
]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m procgen_entities.tools.checkpoint",
        description="Convert old pickled checkpoint folders to the data format.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    conv = sub.add_parser("convert", help="vecnormalize.pkl/policy.pth/model.zip -> data files")
    conv.add_argument("folders", nargs="+", type=Path)
    conv.add_argument("--trust-pickle", action="store_true",
                      help="required: converting unpickles the folder's files, which can run "
                           "code; only for folders whose source you trust")  # fmt: skip
    conv.add_argument("--remove-pickles", action="store_true", help="delete the pickles after")
    args = parser.parse_args(argv)
    if not args.trust_pickle:
        parser.exit(2, f"{parser.prog}: error: converting runs the folder's pickles (code): "
                       "pass --trust-pickle if you trust its source\n")  # fmt: skip
    for folder in args.folders:
        try:
            written = convert(folder, remove_pickles=args.remove_pickles)
        except CheckpointError as exc:
            parser.exit(2, f"{parser.prog}: error: {exc}\n")
        print(f"{folder}: wrote {', '.join(written)} (checked against the pickles)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
