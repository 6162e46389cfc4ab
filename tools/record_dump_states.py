"""Record the golden states of tests/test_dump.py into tests/data/dump/ (one gzip'ed get_state blob
per game, plus a few extra modes) and their recipes into tests/data/dump/manifest.json.

    PYTHONPATH=. python tools/record_dump_states.py

Recording needs procgen; the tests only read the files. Re-recording changes the snapshots:
regenerate them with UPDATE_SNAPSHOTS=1 pytest tests/test_dump.py and review the diff.
"""

from __future__ import annotations

import gzip
import json
import pathlib

from procgen_entities.games import GAME_NAMES
from procgen_entities.tools.dump import record_state

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "dump"

#: name -> (game, distribution mode, level seed, random steps). The three step-0 states are the
#: examples drawn in docs/state-format.md §5.3.
RECIPES = {name: (name, "hard", 1, 30) for name in GAME_NAMES}
RECIPES.update(
    coinrun=("coinrun", "hard", 21, 0),
    ninja=("ninja", "easy", 3, 0),
    climber=("climber", "hard", 9, 0),
    maze_memory=("maze", "memory", 2, 10),
    dodgeball_memory=("dodgeball", "memory", 4, 20),
    chaser_extreme=("chaser", "extreme", 5, 40),
)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = {}
    for name, (game, mode, seed, steps) in sorted(RECIPES.items()):
        blob = record_state(game, mode=mode, seed=seed, steps=steps, policy="random")
        (OUT / f"{name}.state.gz").write_bytes(gzip.compress(blob, mtime=0))
        manifest[name] = {
            "game": game,
            "mode": mode,
            "seed": seed,
            "steps": steps,
            "policy": "random",
        }
        print(f"{name}: {game} {mode} seed={seed} steps={steps}: {len(blob)} bytes")
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
