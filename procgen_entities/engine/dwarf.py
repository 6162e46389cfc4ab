"""Member offsets of procgen's C++ classes, read from libenv.so's own DWARF through gdb.

Used twice: by ``python -m procgen_entities.engine.dwarf LIBENV`` to (re)record the layout table
of a procgen build (``layouts/*.json``), and at run time for a libenv whose build id is unknown:
if gdb is installed and that library's DWARF gives exactly a known layout, the engine may read it
directly (never step it headlessly: its step logic is unverified).

The classes are procgen's (MIT, Copyright (c) 2019 OpenAI): VecGame (src/vecgame.h), Game
(src/game.h), BasicAbstractGame (src/basic-abstract-game.h), Entity (src/entity.h), RandGen
(src/randgen.h) and each game's class in src/games/*.cpp.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

__all__ = ["CLASS_OF_GAME", "BASE_CLASSES", "extract_layout", "parse_ptype"]

#: The C++ class of each game (src/games/<game>.cpp, 0.10.7).
CLASS_OF_GAME: Dict[str, str] = {
    "bigfish": "BigFish", "bossfight": "BossfightGame", "caveflyer": "CaveFlyerGame",
    "chaser": "ChaserGame", "climber": "Climber", "coinrun": "CoinRun",
    "dodgeball": "DodgeballGame", "fruitbot": "FruitBotGame", "heist": "HeistGame",
    "jumper": "Jumper", "leaper": "LeaperGame", "maze": "MazeGame", "miner": "MinerGame",
    "ninja": "Ninja", "plunder": "PlunderGame", "starpilot": "StarPilotGame",
}  # fmt: skip

BASE_CLASSES = ("VecGame", "Game", "BasicAbstractGame", "Entity", "RandGen", "GameOptions",
                "StepData", "Grid<int>")  # fmt: skip

Member = Tuple[int, int, str]  # offset, size, type text

_LINE = re.compile(r"^/\*\s*(\d+)\s*(?::\s*\d+)?\s*\|\s*(\d+)\s*\*/(\s*)(.*)$")
_TOTAL = re.compile(r"/\* total size \(bytes\):\s*(\d+) \*/")
_CLOSE = re.compile(r"^\s*}\s*(\w+);\s*$")


def parse_ptype(text: str) -> Tuple[Dict[str, Member], int]:
    """Top-level data members of one ``ptype /o`` print, and the class size.

    A member whose type prints over several lines (a class member) has its offset on the
    opening line and its name on the matching closing ``} name;``; nested members are skipped.
    """
    members: Dict[str, Member] = {}
    size = -1
    top_indent: Optional[int] = None
    open_stack: List[Tuple[int, int, str]] = []  # offset, size, type of open multi-line members
    for raw in text.splitlines()[1:]:
        m = _LINE.match(raw)
        if m:
            offset, msize, indent, body = int(m[1]), int(m[2]), len(m[3]), m[4]
            if top_indent is None:
                top_indent = indent
            if body.endswith("{"):
                open_stack.append((offset, msize, body))
                continue
            if indent == top_indent and not open_stack and body.endswith(";") and "(" not in body:
                decl = body[:-1].rsplit(None, 1)
                if len(decl) == 2:
                    members[decl[1].lstrip("*&")] = (offset, msize, decl[0])
            continue
        close = _CLOSE.match(raw)
        if close and open_stack:
            offset, msize, body = open_stack.pop()
            if not open_stack:
                members[close[1]] = (offset, msize, body)
            continue
        total = _TOTAL.search(raw)
        if total and not open_stack:
            size = int(total[1])
    return members, size


def _ptype(libenv: str, names: List[str]) -> List[str]:
    gdb = shutil.which("gdb")
    if gdb is None:
        raise RuntimeError("gdb is not installed")
    marker = "@@@PE@@@"
    args = [gdb, "-batch", "-nx"]
    for name in names:
        args += ["-ex", f"echo {marker}\\n", "-ex", f"ptype /o {name}"]
    # gdb must not inherit a preloaded sanitizer runtime (the ASan test run sets LD_PRELOAD).
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    out = subprocess.run(
        args + [libenv], capture_output=True, text=True, timeout=120, env=env
    ).stdout
    parts = out.split(marker + "\n")[1:]
    if len(parts) != len(names):
        raise RuntimeError("gdb did not print every class")
    return parts


def extract_layout(libenv: str) -> Dict[str, object]:
    """{"classes": {class: {"size": n, "members": {name: [offset, size, type]}}}, "games": ...}."""
    names = list(BASE_CLASSES) + list(CLASS_OF_GAME.values())
    classes: Dict[str, object] = {}
    for name, text in zip(names, _ptype(libenv, names)):
        members, size = parse_ptype(text)
        if size < 0 or not members:
            raise RuntimeError(f"no layout for class {name} in {libenv}")
        classes[name] = {"size": size, "members": {k: list(v) for k, v in members.items()}}
    return {"classes": classes, "games": dict(CLASS_OF_GAME)}


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m procgen_entities.engine.dwarf LIBENV_SO", file=sys.stderr)
        return 2
    json.dump(extract_layout(args[0]), sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
