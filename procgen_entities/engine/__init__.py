"""The engine: read procgen's live games, and step them without rendering.

Three engines produce the same observations (tests/test_engine.py holds them to it):

- ``get_state``: procgen steps and renders, then its serializer writes each state and the C
  parser reads it (the reference path; works on any procgen 0.10.7 build).
- ``direct``: procgen steps and renders; the states are read straight from procgen's game
  objects (no serializer).
- ``headless``: procgen's ``Game::step`` without its render, on this package's thread pool,
  calling each game's own game_step/reset through the live object; the states are read directly.
  The terminal state of every episode is captured before its reset.

``bind_engine`` decides which one a vec env gets: the layout table must describe the loaded
libenv.so (its build id is recorded, or, with gdb installed, its own DWARF gives the same layout:
then only ``direct``), procgen's local functions and virtual slots must be where the table says,
and a direct read of every env must equal procgen's get_state exactly (RNG texts aside). ``auto``
takes the best that passes and warns once when it falls back; an explicit engine that cannot be
used raises EngineUnavailable.
"""

from __future__ import annotations

import ctypes
import functools
import shutil
import struct
import subprocess
import warnings
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

from procgen_entities.engine.elf import ElfError, ElfInfo, read_elf
from procgen_entities.engine.layout import (
    FUNCTIONS,
    VTABLE_SLOTS,
    Layout,
    LayoutError,
    entity_program,
    load_known_layout,
    state_program,
    step_offsets,
)
from procgen_entities.games import Game

__all__ = [
    "ENGINES",
    "EngineFallbackWarning",
    "EngineUnavailable",
    "LibraryInfo",
    "bind_engine",
    "library_info",
    "without_rng_texts",
]

ENGINES = ("auto", "headless", "direct", "get_state")
#: The height procgen renders observations at (RES_H in src/game.h); camera fields depend on it.
RENDER_HEIGHT = 64.0


class EngineUnavailable(RuntimeError):
    """The requested engine cannot be used with this procgen build or these options."""


class EngineFallbackWarning(RuntimeWarning):
    """engine="auto" fell back to a slower engine (the message says why)."""


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


@dataclass(frozen=True)
class LibraryInfo:
    """The libenv.so a procgen env runs on."""

    path: str
    base: int
    elf: ElfInfo


def library_info(env: Any) -> LibraryInfo:
    """Find the file and load address of the library holding ``env``'s get_state."""
    address = int(env._ffi.cast("uintptr_t", env._c_lib.get_state))
    info = _DlInfo()
    libc = ctypes.CDLL(None)
    libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    if not libc.dladdr(ctypes.c_void_p(address), ctypes.byref(info)) or not info.dli_fname:
        raise EngineUnavailable("cannot locate procgen's libenv.so in this process")
    path = info.dli_fname.decode()
    return LibraryInfo(path, int(info.dli_fbase or 0), _read_elf_cached(path))


@functools.lru_cache(maxsize=4)
def _read_elf_cached(path: str) -> ElfInfo:
    return read_elf(path, FUNCTIONS.values())


@functools.lru_cache(maxsize=4)
def _dwarf_layout_matches(path: str) -> bool:
    from procgen_entities.engine.dwarf import extract_layout

    known = load_known_layout()
    try:
        found = extract_layout(path)
    except (RuntimeError, OSError, ValueError, subprocess.SubprocessError):
        return False
    return found["classes"] == known.classes and found["games"] == known.games


def _layout_for(lib: LibraryInfo, layout: Optional[Layout]) -> Tuple[Layout, bool]:
    """(layout, headless allowed) for this library, or EngineUnavailable."""
    try:
        known = layout if layout is not None else load_known_layout()
    except (LayoutError, OSError, ValueError) as exc:
        raise EngineUnavailable(f"no usable layout table: {exc}") from None
    if lib.elf.build_id in known.build_ids:
        return known, True
    if shutil.which("gdb") and _dwarf_layout_matches(lib.path):
        return known, False
    raise EngineUnavailable(
        f"unknown procgen build {lib.elf.build_id or '(no build id)'} at {lib.path} "
        "(and its DWARF could not be checked against the known layout: is gdb installed?)"
    )


def _function_address(lib: LibraryInfo, key: str) -> int:
    found = lib.elf.functions.get(FUNCTIONS[key])
    if found is None or found[1] == 0:
        raise EngineUnavailable(f"procgen's {FUNCTIONS[key]} is not in {lib.path}'s symbol table")
    return lib.base + found[0]


def _check_vtable(lib: LibraryInfo, game_address: int) -> None:
    """The game's virtual game_step/observe slots must hold functions of those names."""
    vtable = ctypes.c_void_p.from_address(game_address).value or 0
    for name, slot in VTABLE_SLOTS.items():
        target = ctypes.c_void_p.from_address(vtable + 8 * slot).value or 0
        symbol = lib.elf.function_at(target - lib.base) or ""
        if not symbol.endswith(f"{len(name)}{name}Ev"):
            raise EngineUnavailable(
                f"vtable slot {slot} of the game object is {symbol or hex(target)}, not {name}"
            )


def without_rng_texts(state: bytes) -> bytes:
    """A get_state blob with its three RNG texts emptied (is_seeded kept): what a direct read
    writes. Offsets from docs/state-format.md; the blob must be a valid state."""
    (name_len,) = struct.unpack_from("<i", state, 4)
    r1_at = 80 + name_len
    (r1,) = struct.unpack_from("<i", state, r1_at)
    r2_at = r1_at + 4 + r1 + 4
    (r2,) = struct.unpack_from("<i", state, r2_at)
    base = r2_at + 4 + r2 + 60
    (n_entities,) = struct.unpack_from("<i", state, base + 4)
    r3_at = base + 8 + 124 * n_entities + 80
    (r3,) = struct.unpack_from("<i", state, r3_at)
    empty = struct.pack("<i", 0)
    return b"".join(
        (
            state[:r1_at], empty, state[r1_at + 4 + r1 : r2_at], empty,
            state[r2_at + 4 + r2 : r3_at], empty, state[r3_at + 4 + r3 :],
        )
    )  # fmt: skip


@dataclass
class EngineBinding:
    """What a vec env needs to run an engine: the native LiveGames (None for get_state)."""

    name: str
    live: Any
    reason: str = ""


def _make_live(game: Game, lib: LibraryInfo, layout: Layout, sizes: Sequence[int]) -> Any:
    from procgen_entities._collector import LiveGames

    try:
        program = state_program(layout, game)
        entities = entity_program(layout)
        offsets = step_offsets(layout)
    except LayoutError as exc:
        raise EngineUnavailable(str(exc)) from None
    return LiveGames(
        program, entities, game.name.encode(), offsets, VTABLE_SLOTS["game_step"],
        VTABLE_SLOTS["observe"], _function_address(lib, "reset"),
        _function_address(lib, "prepare_for_drawing"), RENDER_HEIGHT, [int(s) for s in sizes],
    )  # fmt: skip


def attach_and_verify(
    live: Any, envs: Sequence[Any], sizes: Sequence[int], lib: LibraryInfo
) -> None:
    """Point ``live`` at the game objects of each env and check one direct read per game against
    procgen's own get_state (byte for byte, RNG texts aside). procgen's threads must be idle:
    get_state waits for them, so it is called first."""
    for group, env in enumerate(envs):
        states: List[bytes] = env.callmethod("get_state")
        if len(states) != sizes[group]:
            raise EngineUnavailable(f"group {group} has {len(states)} envs, not {sizes[group]}")
        live.attach(group, int(env._ffi.cast("uintptr_t", env._c_env)))
        addresses = live.game_addresses(group)
        _check_vtable(lib, addresses[0])
        for k, state in enumerate(states):
            if live.write_state(group, k) != without_rng_texts(state):
                live.detach()
                raise EngineUnavailable(
                    f"a direct read of env {k} differs from procgen's get_state: the layout "
                    "does not describe this build"
                )


def bind_engine(
    requested: str,
    game: Game,
    envs: Sequence[Any],
    sizes: Sequence[int],
    procgen_options: dict,
    layout: Optional[Layout] = None,
) -> EngineBinding:
    """Choose and attach the engine for ``envs`` (see the module docstring)."""
    if requested not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {requested!r}")
    if requested == "get_state":
        return EngineBinding("get_state", None)
    try:
        lib = library_info(envs[0])
        chosen_layout, headless_ok = _layout_for(lib, layout)
        if procgen_options.get("render_mode") is not None:
            headless_ok = False  # procgen's hi-res render moves the camera fields
        if requested == "headless" and not headless_ok:
            raise EngineUnavailable(
                "headless stepping needs a procgen build known by its build id and no render_mode"
            )
        live = _make_live(game, lib, chosen_layout, sizes)
        attach_and_verify(live, envs, sizes, lib)
    except (EngineUnavailable, ElfError, OSError) as exc:
        if requested != "auto":
            raise EngineUnavailable(f"engine {requested!r} unavailable: {exc}") from None
        warnings.warn(
            f"procgen_entities: falling back to the get_state engine ({exc})",
            EngineFallbackWarning,
            stacklevel=3,
        )
        return EngineBinding("get_state", None, str(exc))
    name = "headless" if requested in ("auto", "headless") and headless_ok else "direct"
    if requested == "auto" and name == "direct":
        warnings.warn(
            "procgen_entities: this procgen build is not known by its build id; using the "
            "direct engine (procgen steps and renders) instead of headless",
            EngineFallbackWarning,
            stacklevel=3,
        )
    return EngineBinding(name, live)
