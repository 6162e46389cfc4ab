"""Member offsets of procgen's C++ classes, read from libenv.so's own DWARF with pyelftools.

Used twice: by ``python -m procgen_entities.engine.dwarf LIBENV`` to (re)record the layout table
of a procgen build (``layouts/*.json``), and at run time for a libenv whose build id is not in
that table: the layout derived from the loaded build's own DWARF (cached per build id in the
user's cache directory, since a cold derivation walks many compile units) is what the engine
then runs on, after the checks of engine/__init__.py.

The type texts follow the spelling the table was first recorded with (gdb's ``ptype /o``) for
everything the engine reads (scalars, std::vector members, nested classes); ``same_layout``
compares two tables on offsets, sizes and those type heads.

The classes are procgen's (MIT, Copyright (c) 2019 OpenAI): VecGame (src/vecgame.h), Game
(src/game.h), BasicAbstractGame (src/basic-abstract-game.h), Entity (src/entity.h), RandGen
(src/randgen.h) and each game's class in src/games/*.cpp.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from types import MappingProxyType
from typing import Any, Dict, Iterator, List, Mapping, Optional, Set, Tuple

from procgen_entities.errors import ProcgenEntitiesError
from procgen_entities.games import GAMES

__all__ = [
    "BASE_CLASSES",
    "CLASS_OF_GAME",
    "DwarfError",
    "cache_dir",
    "cached_layout",
    "extract_layout",
    "same_layout",
]

#: The C++ class of each game (src/games/<game>.cpp, 0.10.7), as declared in games.py.
CLASS_OF_GAME: Mapping[str, str] = MappingProxyType({g.name: g.cpp_class for g in GAMES.values()})

BASE_CLASSES = ("VecGame", "Game", "BasicAbstractGame", "Entity", "RandGen", "GameOptions",
                "StepData", "Grid<int>")  # fmt: skip

#: Where each class is most likely defined in full (GCC emits a class with virtual functions
#: only in the compile unit of its first non-inline virtual), tried before every other unit.
_UNIT_OF_CLASS = {
    "VecGame": "vecgame.cpp", "Game": "game.cpp", "BasicAbstractGame": "basic-abstract-game.cpp",
    "Entity": "entity.cpp", "RandGen": "randgen.cpp", "GameOptions": "game.cpp",
    "StepData": "game.cpp", "Grid<int>": "basic-abstract-game.cpp",
    **{cls: f"games/{game}.cpp" for game, cls in CLASS_OF_GAME.items()},
}  # fmt: skip

_CACHE_VERSION = 1

Member = List[Any]  # [offset, size, type text]


class DwarfError(ProcgenEntitiesError, RuntimeError):
    """The library has no usable DWARF for procgen's classes."""


def _name(die: Any) -> Optional[str]:
    attr = die.attributes.get("DW_AT_name")
    return None if attr is None else bytes(attr.value).decode("utf-8", "replace")


def _qualified(die: Any) -> str:
    """``ns::Outer::name`` of a type DIE (its enclosing namespaces and classes)."""
    parts = [_name(die) or "(anonymous)"]
    parent = die.get_parent()
    while parent is not None and parent.tag != "DW_TAG_compile_unit":
        if parent.tag in ("DW_TAG_namespace", "DW_TAG_class_type", "DW_TAG_structure_type"):
            parts.append(_name(parent) or "(anonymous namespace)")
        parent = parent.get_parent()
    return "::".join(reversed(parts))


_KEYWORD = {"DW_TAG_class_type": "class ", "DW_TAG_structure_type": "struct ",
            "DW_TAG_union_type": "union ", "DW_TAG_enumeration_type": "enum "}  # fmt: skip


def _type_of(die: Any) -> Optional[Any]:
    return die.get_DIE_from_attribute("DW_AT_type") if "DW_AT_type" in die.attributes else None


def _type_text(die: Optional[Any]) -> str:
    if die is None:
        return "void"
    tag = die.tag
    if tag == "DW_TAG_base_type":
        return _name(die) or "?"
    if tag in _KEYWORD:
        return _KEYWORD[tag] + _qualified(die)
    if tag == "DW_TAG_typedef":
        return _qualified(die)
    if tag == "DW_TAG_const_type":
        return "const " + _type_text(_type_of(die))
    if tag == "DW_TAG_volatile_type":
        return "volatile " + _type_text(_type_of(die))
    if tag == "DW_TAG_pointer_type":
        return _type_text(_type_of(die)) + " *"
    if tag in ("DW_TAG_reference_type", "DW_TAG_rvalue_reference_type"):
        return _type_text(_type_of(die)) + " &"
    return str(tag).removeprefix("DW_TAG_")


def _byte_size(die: Optional[Any]) -> int:
    while die is not None:
        if "DW_AT_byte_size" in die.attributes:
            return int(die.attributes["DW_AT_byte_size"].value)
        if die.tag in ("DW_TAG_pointer_type", "DW_TAG_reference_type",
                       "DW_TAG_rvalue_reference_type"):  # fmt: skip
            return 8
        if die.tag == "DW_TAG_array_type":
            count = 1
            for sub in die.iter_children():
                if "DW_AT_count" in sub.attributes:
                    count *= int(sub.attributes["DW_AT_count"].value)
                elif "DW_AT_upper_bound" in sub.attributes:
                    count *= int(sub.attributes["DW_AT_upper_bound"].value) + 1
            return count * _byte_size(_type_of(die))
        die = _type_of(die)
    raise DwarfError("a member type without a size")


def _array_dims(die: Any) -> Tuple[str, Any]:
    """('[n][m]', element type DIE) of an array type DIE."""
    dims = ""
    for sub in die.iter_children():
        if "DW_AT_count" in sub.attributes:
            dims += f"[{int(sub.attributes['DW_AT_count'].value)}]"
        elif "DW_AT_upper_bound" in sub.attributes:
            dims += f"[{int(sub.attributes['DW_AT_upper_bound'].value) + 1}]"
    return dims, _type_of(die)


def _member_location(die: Any) -> Optional[int]:
    attr = die.attributes.get("DW_AT_data_member_location")
    if attr is None:
        return None
    if isinstance(attr.value, int):
        return attr.value
    expr = list(attr.value)  # DWARF 2 style: DW_OP_plus_uconst (0x23) n, ULEB128
    if expr and expr[0] == 0x23:
        value, shift = 0, 0
        for byte in expr[1:]:
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        return value
    raise DwarfError(f"unsupported member location {expr!r}")


def _class_layout(die: Any) -> Dict[str, Any]:
    """{"size": n, "members": {name: [offset, size, type]}} of a class's own data members."""
    members: Dict[str, Member] = {}
    for child in die.iter_children():
        if child.tag != "DW_TAG_member":
            continue
        offset = _member_location(child)
        name = _name(child)
        if offset is None or name is None or "DW_AT_artificial" in child.attributes:
            continue  # static members have no location; the vtable pointer is artificial
        type_die = _type_of(child)
        if type_die is not None and type_die.tag == "DW_TAG_array_type":
            dims, element = _array_dims(type_die)
            name, text = name + dims, _type_text(element)
        else:
            text = _type_text(type_die)
        members[name] = [offset, _byte_size(type_die), text]
    return {"size": int(die.attributes["DW_AT_byte_size"].value), "members": members}


def _definitions(top: Any, wanted: Set[str]) -> Iterator[Tuple[str, Any]]:
    """Full (non-declaration) definitions of wanted classes at a unit's top level."""
    for die in top.iter_children():
        if die.tag not in ("DW_TAG_class_type", "DW_TAG_structure_type"):
            continue
        if "DW_AT_declaration" in die.attributes or "DW_AT_byte_size" not in die.attributes:
            continue
        name = _name(die)
        if name is not None and name in wanted:
            yield name, die


def extract_layout(libenv: str) -> Dict[str, Any]:
    """{"classes": {class: {"size": n, "members": {name: [offset, size, type]}}}} from
    ``libenv``'s DWARF; DwarfError if it has none or lacks a class. Which class is which game's
    is not a DWARF fact: games.py declares it (``Game.cpp_class``)."""
    try:
        from elftools.common.exceptions import ELFError
        from elftools.elf.elffile import ELFFile
    except ImportError as exc:  # a dependency; only absent in a broken install
        raise DwarfError(f"pyelftools is not installed ({exc})") from None
    wanted = set(BASE_CLASSES) | set(CLASS_OF_GAME.values())
    classes: Dict[str, Any] = {}
    try:
        with open(libenv, "rb") as f:
            elf = ELFFile(f)
            if not elf.has_dwarf_info() or elf.get_section_by_name(".debug_info") is None:
                raise DwarfError(f"{libenv} has no DWARF")
            units = {}
            for cu in elf.get_dwarf_info().iter_CUs():
                top = cu.get_top_DIE()
                units[_name(top) or f"@{cu.cu_offset}"] = top
            for cls in sorted(wanted):  # the likely unit first; the rest only if needed
                if cls in classes:
                    continue
                hint = _UNIT_OF_CLASS[cls]
                likely = [top for name, top in units.items() if name.endswith("/" + hint)]
                for top in likely + [t for t in units.values() if t not in likely]:
                    for name, die in _definitions(top, wanted - set(classes)):
                        classes[name] = _class_layout(die)
                    if cls in classes:
                        break
    except (ELFError, OSError, KeyError, ValueError, AttributeError) as exc:
        raise DwarfError(f"cannot read the DWARF of {libenv}: {exc}") from None
    missing = sorted(wanted - set(classes))
    if missing:
        raise DwarfError(f"{libenv}'s DWARF has no definition of {', '.join(missing)}")
    return {"classes": classes}


def _type_head(text: str) -> str:
    """The part of a type text both spellings share: no template commentary, base list or brace,
    pointers by their pointee (gdb writes the ``*`` with the name), and no const (gdb writes
    ``X const`` inside template arguments where the DWARF names say ``const X``)."""
    for cut in (" [with ", " : ", " {"):
        text = text.split(cut)[0]
    text = text.removesuffix(" *").removesuffix(" &").strip()
    return text.replace("const ", "").replace(" const", "")


def same_layout(a: Mapping[str, Any], b: Mapping[str, Any]) -> List[str]:
    """The differences between two tables' classes (empty: the same layout). Template
    parameters that gdb prints by their parameter name (``T``) match any type."""
    diffs: List[str] = []
    for cls in sorted(set(a["classes"]) | set(b["classes"])):
        ca, cb = a["classes"].get(cls), b["classes"].get(cls)
        if ca is None or cb is None:
            diffs.append(f"{cls}: only in one table")
            continue
        if ca["size"] != cb["size"]:
            diffs.append(f"{cls}: size {ca['size']} != {cb['size']}")
        for name in sorted(set(ca["members"]) | set(cb["members"])):
            ma, mb = ca["members"].get(name), cb["members"].get(name)
            if ma is None or mb is None:
                diffs.append(f"{cls}::{name}: only in one table")
                continue
            ta, tb = _type_head(ma[2]), _type_head(mb[2])
            generic = "T" in (ta, tb) or "class std::vector<T, std::allocator<T> >" in (ta, tb)
            if ma[:2] != mb[:2] or (ta != tb and not generic):
                diffs.append(f"{cls}::{name}: {ma} != {mb}")
    return diffs


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/procgen-entities (default ~/.cache/procgen-entities)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "procgen-entities"


def cached_layout(libenv: str, build_id: str) -> Dict[str, Any]:
    """extract_layout(libenv), kept in the cache directory under its build id. A cache file that
    cannot be read is derived again; one that cannot be written is only a slower next start."""
    path = cache_dir() / f"layout-{build_id}.json"
    try:
        cached = json.loads(path.read_text())
        if cached.get("version") == _CACHE_VERSION and cached.get("build_id") == build_id:
            return {"classes": cached["classes"]}
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    table = extract_layout(libenv)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        body = {"version": _CACHE_VERSION, "build_id": build_id, **table}
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as tmp:
            json.dump(body, tmp, sort_keys=True)
        os.replace(tmp.name, path)  # atomic: concurrent processes never read half a file
    except OSError:
        pass
    return table


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m procgen_entities.engine.dwarf",
        description="Print the member layout of procgen's classes from a libenv.so's DWARF "
        "(the classes of a layouts/*.json table).",
    )
    parser.add_argument("libenv", metavar="LIBENV_SO")
    args = parser.parse_args(argv)
    try:
        table = extract_layout(args.libenv)
    except DwarfError as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 1
    json.dump(table, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
