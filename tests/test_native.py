"""The binding layer (procgen_entities/_native): one ``.pxd`` per C header, each a line-for-line
mirror of it (same names in the same order: macros, enum members, structs and their fields,
functions), the package root free of binding files, and the Python values of C enums read from C.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import List

import pytest

from procgen_entities._native import _collector, _parser, _status, _tilemap

ROOT = Path(__file__).resolve().parent.parent
NATIVE = ROOT / "procgen_entities" / "_native"
CSRC = ROOT / "csrc"
#: Headers the Cython side declares; live_read.h and le_read.h are inline helpers internal to C.
MIRRORED = (
    "state_parser",
    "state_set",
    "state_writer",
    "tilemap",
    "padding",
    "episodes",
    "observation",
    "live_game",
    "thread_pool",
)
INTERNAL = ("live_read", "le_read")
IDENT = r"[A-Za-z_]\w*"


def _declarator_names(text: str) -> List[str]:
    """`const int32_t *a, b[N]` -> ["a", "b"]: the last identifier of each declarator."""
    names = []
    for part in re.sub(r"\[[^\]]*\]", "", text).split(","):
        found = re.findall(IDENT, part)
        if found:
            names.append(found[-1])
    return names


def _block_members(body: str, is_enum: bool) -> List[str]:
    if is_enum:
        return [m.group(1) for m in re.finditer(rf"({IDENT})\s*(?:=[^,]*)?(?:,|$)", body.strip())]
    return [name for decl in body.split(";") if decl.strip() for name in _declarator_names(decl)]


def header_names(path: Path) -> List[str]:
    """The declared names of a C header in order; a typedef'd enum or struct gives its name and
    then its members, a constant table (``static const T NAME[N] = {...};``) its name."""
    text = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)
    text = re.sub(r"#ifdef __cplusplus.*?#endif", "", text, flags=re.S)
    guard = re.search(r"#ifndef (\w+)", text)
    names: List[str] = []
    # Macros become statements so that their position among the declarations is kept.
    text = re.sub(r"^#define (\w+).*$", r"@define \1;", text, flags=re.M)
    text = re.sub(r"^#.*$", "", text, flags=re.M)
    pattern = re.compile(
        rf"@define ({IDENT});"
        rf"|typedef\s+(enum|struct)\s*{{(.*?)}}\s*({IDENT})\s*;"
        rf"|enum\s*{{(.*?)}}\s*;"
        rf"|typedef\s+struct\s+{IDENT}\s+({IDENT})\s*;"
        rf"|static\s+const\s+{IDENT}\s+({IDENT})\s*\[[^\]]*\]\s*=\s*{{.*?}}\s*;"
        rf"|typedef\s+[^;(]*\(\s*\*\s*({IDENT})\s*\)\s*\([^;]*\)\s*;"
        rf"|(?!typedef)(?=\w)[^;{{}}@]*?({IDENT})\s*\([^;{{]*\)\s*;",
        re.S,
    )
    for m in pattern.finditer(text):
        macro, kind, body, typedef, anon, opaque, table, fn_type, function = m.groups()
        if macro:
            if guard is None or macro != guard.group(1):
                names.append(macro)
        elif kind:
            names += [typedef, *_block_members(body, kind == "enum")]
        elif anon is not None:
            names += _block_members(anon, True)
        else:
            names.append(opaque or table or fn_type or function)
    return names


def pxd_names(path: Path) -> List[str]:
    """The names declared in a .pxd's `cdef extern from` block, in the header's terms."""
    text = path.read_text().replace("\\\n", " ")
    block = text[text.index("cdef extern from") :]
    names: List[str] = []
    lines = [line for line in block.splitlines()[1:] if line.strip()]
    in_block = None
    for line in lines:
        indent = len(line) - len(line.lstrip())
        code = line.strip()
        if indent >= 8:
            if in_block == "enum":
                names.append(code)
            elif in_block == "struct" and code != "pass":
                names += _declarator_names(code)
            continue
        in_block = None
        if code.startswith("enum:"):
            in_block = "enum"
        elif m := re.match(rf"ctypedef (enum|struct) ({IDENT}):", code):
            in_block = m.group(1)
            names.append(m.group(2))
        elif m := re.match(rf"ctypedef [^(]*\(\s*\*\s*({IDENT})\)", code):
            names.append(m.group(1))
        elif m := re.match(rf"[^(]*?({IDENT})\(", code):
            names.append(m.group(1))
        elif m := re.match(rf"double ({IDENT})$", code):  # a float macro, declared as a constant
            names.append(m.group(1))
        elif m := re.match(rf"const {IDENT} ({IDENT})\[", code):  # a constant table
            names.append(m.group(1))
    return names


@pytest.mark.parametrize("header", MIRRORED)
def test_each_pxd_mirrors_its_header_line_for_line(header: str) -> None:
    expected = header_names(CSRC / f"{header}.h")
    assert expected, f"nothing parsed from {header}.h"
    assert pxd_names(NATIVE / f"{header}.pxd") == expected


def test_every_header_is_mirrored_or_internal() -> None:
    headers = {path.stem for path in CSRC.glob("*.h")}
    assert headers == set(MIRRORED) | set(INTERNAL)


def test_the_package_root_holds_no_binding_files() -> None:
    root = ROOT / "procgen_entities"
    loose = [p.name for p in root.iterdir() if p.suffix in (".pyx", ".pxd", ".pyi", ".c", ".so")]
    assert loose == []
    assert {p.stem for p in NATIVE.glob("*.pyx")} == {
        "_collector",
        "_parser",
        "_status",
        "_tilemap",
        "_writer",
    }
    for module in (_collector, _parser, _status, _tilemap):
        assert Path(module.__file__).parent == NATIVE


def _enum_members(header: str, enum: str) -> List[tuple]:
    """(name, value) of a typedef'd enum whose members all have explicit values."""
    text = re.sub(r"/\*.*?\*/", "", (CSRC / f"{header}.h").read_text(), flags=re.S)
    body = re.search(rf"typedef enum {{([^}}]*)}} {enum};", text)
    assert body, enum
    return [(m.group(1), int(m.group(2))) for m in re.finditer(r"(\w+) = (\d+)", body.group(1))]


def test_python_values_of_c_enums_come_from_c() -> None:
    """The game declarations' codes map onto every member of the C enums, at the C values."""
    trailer = _enum_members("state_parser", "pe_trailer_kind")
    assert sorted(_parser.TRAILER_KINDS_BY_CODE.values()) == [value for _, value in trailer]
    kinds = _enum_members("state_parser", "pe_value_kind")
    assert sorted(_parser.VALUE_KINDS_BY_TERM.values()) == [value for _, value in kinds]
    modes = dict(_enum_members("tilemap", "tm_mode"))
    assert _tilemap.MODES == {name[3:].lower(): value for name, value in modes.items()}
    ops = {name: value for name, value in _enum_members("observation", "pe_global_op")}
    assert {op: ops[f"PE_G_{op.upper()}"] for op in _collector.GLOBAL_OPS} == _collector.GLOBAL_OPS
    assert len(_collector.GLOBAL_OPS) == ops["PE_G_N_OPS"]
    live = {name: value for name, value in _enum_members("live_game", "pe_live_op")}
    assert {op: live[f"PE_OP_{op.upper()}"] for op in _collector.LIVE_OPS} == _collector.LIVE_OPS
    assert sorted(_collector.LIVE_OPS.values()) == sorted(live.values())


def test_every_c_status_has_its_name_in_c() -> None:
    """pe_status_name / tm_status_name give every member's own name, and the codes of the two
    enums never meet (so a code alone names the status)."""
    members = _enum_members("state_parser", "pe_status") + _enum_members("tilemap", "tm_status")
    for name, code in members:
        if name == "TM_OK":  # success is 0 in both enums
            assert code == 0 and _status.status_name(0) == "PE_OK"
            continue
        assert _status.status_name(code) == name
        assert _status.status_text(code) not in ("", "unknown status")
    codes = [code for name, code in members if not name.endswith("_OK")]
    assert len(set(codes)) == len(codes)
    pe_codes = [code for name, code in members if name.startswith("PE_")]
    tm_errors = [code for name, code in members if name.startswith("TM_ERR")]
    assert max(pe_codes) < _status.STATUS_END <= min(tm_errors)
    for unknown in (-1, max(pe_codes) + 1, max(tm_errors) + 1):
        assert _status.status_name(unknown) is None


#: games.ENTITY_FIELDS and ENTITY_INT_FIELDS as they shipped (a public contract), written out.
SHIPPED_ENTITY_FIELDS = (
    "x", "y", "vx", "vy", "rx", "ry", "type", "image_type", "image_theme", "render_z",
    "will_erase", "collides_with_entities", "collision_margin", "rotation", "vrot",
    "is_reflected", "fire_time", "spawn_time", "life_time", "expire_time", "use_abs_coords",
    "friction", "smart_step", "avoids_collisions", "auto_erase", "alpha", "health", "theta",
    "grow_rate", "alpha_decay", "climber_spawn_x",
)  # fmt: skip
SHIPPED_ENTITY_INT_FIELDS = frozenset(
    {
        "type", "image_type", "image_theme", "render_z", "will_erase",
        "collides_with_entities", "is_reflected", "fire_time", "spawn_time", "life_time",
        "expire_time", "use_abs_coords", "smart_step", "avoids_collisions", "auto_erase",
    }
)  # fmt: skip


def test_the_entity_record_is_declared_in_c_and_python_reads_it() -> None:
    """games' names for the entity fields are state_parser.h's record (PE_ENTITY_RECORD, read
    through the binding) and equal what shipped; the record's ids are its enum's, in order, and
    its 31 four-byte fields tile the 124-byte record."""
    from procgen_entities import ENTITY_FIELDS
    from procgen_entities.games import ENTITY_INT_FIELDS

    assert ENTITY_FIELDS == SHIPPED_ENTITY_FIELDS
    assert ENTITY_INT_FIELDS == SHIPPED_ENTITY_INT_FIELDS
    record = _parser.ENTITY_RECORD
    assert tuple(name for name, _, _ in record) == ENTITY_FIELDS
    assert {name for name, _, kind in record if kind == "i"} == ENTITY_INT_FIELDS
    assert {kind for _, _, kind in record} == {"i", "f"}
    assert [at for _, at, _ in record] == [4 * i for i in range(31)]
    ids = _enum_members("state_parser", "pe_entity_field")
    assert ids == [(f"PE_F_{name.upper()}", i) for i, name in enumerate(ENTITY_FIELDS)]


def test_the_camera_record_is_the_scalars_and_the_grid_header() -> None:
    """The camera section of state_parser.h (PE_CAMERA_RECORD): its first nine fields are the
    last header/base scalars, at the same offsets and kinds (the parser reads them from it),
    then the grid's w, h and cell count, as the format reference places them (§2, A+0..A+47)."""
    expected = [
        ("main_width", 0, "i"), ("main_height", 4, "i"), ("out_of_bounds_object", 8, "i"),
        ("unit", 12, "f"), ("view_dim", 16, "f"), ("x_off", 20, "f"), ("y_off", 24, "f"),
        ("visibility", 28, "f"), ("min_visibility", 32, "f"), ("grid.w", 36, "i"),
        ("grid.h", 40, "i"), ("grid.count", 44, "i"),
    ]  # fmt: skip
    assert list(_parser.CAMERA_RECORD) == expected
    camera = [i for i, (section, _) in enumerate(_parser.SCALAR_POSITIONS) if section == 3]
    assert camera == list(range(len(_parser.SCALAR_NAMES) - 9, len(_parser.SCALAR_NAMES)))
    scalars = [
        (_parser.SCALAR_NAMES[i], _parser.SCALAR_POSITIONS[i][1], _parser.SCALAR_KINDS[i])
        for i in camera
    ]
    assert scalars == expected[:9]
    ids = _enum_members("state_parser", "pe_camera_field")
    assert [name for name, _ in ids] == [
        "PE_CAM_" + name.replace("grid.", "grid_").upper() for name, _, _ in expected
    ]
