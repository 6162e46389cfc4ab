"""The engine: read procgen's live games, and step them without rendering.

Three engines produce the same observations (tests/test_engine.py holds them to it):

- ``get_state``: procgen steps and renders, then its serializer writes each state and the C
  parser reads it (the reference path; works on any procgen 0.10.7 build).
- ``direct``: procgen steps and renders; the states are read straight from procgen's game
  objects (no serializer).
- ``headless``: procgen's ``Game::step`` without its render, on this package's thread pool,
  calling each game's own game_step/reset through the live object; the states are read directly.
  The terminal state of every episode is captured before its reset.

``bind_engine`` decides which one a vec env gets. The layout comes from the committed table when
it lists the loaded libenv.so's build id, else from that library's own DWARF (engine/dwarf.py,
cached per build id); procgen's local functions and virtual slots must be where the symbol table
says, and a direct read of every env must equal procgen's get_state exactly (RNG texts aside).
A build not known by its id steps headlessly only after a self-check at construction: fresh
envs stepped headlessly and by procgen from the same states, across episode ends, give
identical get_state bytes. ``auto`` takes the best that passes and warns once when it falls
back; an explicit engine that cannot be used raises EngineUnavailable.
"""

from __future__ import annotations

import ctypes
import functools
import struct
import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from procgen_entities.engine.elf import ElfError, ElfInfo, read_elf
from procgen_entities.engine.layout import (
    FUNCTIONS,
    VTABLE_SLOTS,
    Layout,
    LayoutError,
    entity_program,
    live_read_map,
    load_known_layout,
    state_program,
    step_offsets,
)
from procgen_entities.errors import ProcgenEntitiesError, UsageError
from procgen_entities.games import NUM_ACTIONS, Game

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


class EngineUnavailable(ProcgenEntitiesError, RuntimeError):
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
    address = env.get_state_address
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
def _derived_layout(path: str, build_id: Optional[str]) -> Layout:
    """The layout of this build's own DWARF (engine/dwarf.py; cached on disk by build id)."""
    from procgen_entities.engine.dwarf import DwarfError, cached_layout, extract_layout

    try:
        table = cached_layout(path, build_id) if build_id else extract_layout(path)
    except DwarfError as exc:
        raise EngineUnavailable(
            f"unknown procgen build {build_id or '(no build id)'} at {path}, and no layout "
            f"from its DWARF: {exc}"
        ) from None
    return Layout((build_id,) if build_id else (), table["classes"])


def _layout_for(lib: LibraryInfo, layout: Optional[Layout]) -> Tuple[Layout, bool]:
    """(layout, trusted by build id) for this library, or EngineUnavailable. A build the
    committed table lists is trusted; any other runs on its own DWARF's layout, which must pass
    the construction-time self-check (_self_check) before it steps headlessly."""
    if layout is not None:
        return layout, lib.elf.build_id in layout.build_ids
    try:
        known: Optional[Layout] = load_known_layout()
    except (LayoutError, OSError, ValueError):
        known = None  # the build's own DWARF may still describe it
    if known is not None and lib.elf.build_id in known.build_ids:
        return known, True
    return _derived_layout(lib.path, lib.elf.build_id), False


#: (build id, game, procgen options) -> None (passed) or why the self-check failed
_SELF_CHECKS: Dict[Tuple[Any, ...], Optional[str]] = {}
SELF_CHECK_ENVS, SELF_CHECK_STEPS = 4, 40


def _second_rng_text(state: bytes) -> Tuple[int, int]:
    """(offset, length) of a state's second RNG text (docs/state-format.md: after the game
    name and the first RNG text)."""
    (name_len,) = struct.unpack_from("<i", state, 4)
    r1_at = 80 + name_len
    (r1,) = struct.unpack_from("<i", state, r1_at)
    r2_at = r1_at + 4 + r1 + 4
    (r2,) = struct.unpack_from("<i", state, r2_at)
    return r2_at, r2


def _with_timeouts(state: bytes, timeout: int) -> bytes:
    """``state`` with its episode step limit set to ``timeout`` (docs/state-format.md: the step
    block after the two RNG texts, timeout at +16), so the check crosses episode ends."""
    r2_at, r2 = _second_rng_text(state)
    at = r2_at + 4 + r2 + 16
    return state[:at] + struct.pack("<i", timeout) + state[at + 4 :]


def _self_check(
    game: Game, lib: LibraryInfo, layout: Layout, procgen_options: Dict[str, Any]
) -> None:
    """Step fresh envs of a build not known by its id both ways (headless, and procgen's own
    step) from the same states, with episode ends (short step limits), and require identical
    get_state bytes after every step; EngineUnavailable otherwise. Once per build, game and
    options in a process."""
    key = (lib.elf.build_id, lib.path, game.name, tuple(sorted(procgen_options.items())))
    if key not in _SELF_CHECKS:
        try:
            _run_self_check(game, lib, layout, procgen_options)
            _SELF_CHECKS[key] = None
        except EngineUnavailable as exc:
            _SELF_CHECKS[key] = str(exc)
        except (RuntimeError, ValueError, OSError) as exc:  # e.g. a native step error
            _SELF_CHECKS[key] = f"the self-check of this build's headless stepping failed: {exc}"
    if _SELF_CHECKS[key] is not None:
        raise EngineUnavailable(str(_SELF_CHECKS[key]))


def _run_self_check(
    game: Game,
    lib: LibraryInfo,
    layout: Layout,
    procgen_options: Dict[str, Any],
    n: int = SELF_CHECK_ENVS,
    steps: int = SELF_CHECK_STEPS,
) -> int:
    """The self-check's run (tests call it longer); returns the number of episode ends seen."""
    import numpy as np

    from procgen_entities._native import _collector
    from procgen_entities.parse import game_spec
    from procgen_entities.procgen_envs import make_procgen_env

    options = {**procgen_options, "rand_seed": 12345}
    ends = 0
    ref = make_procgen_env(game.name, n, **options)
    fast = make_procgen_env(game.name, n, **options)
    live = None
    try:
        # each env's episode ends within the check, at a different step
        start = [_with_timeouts(s, 6 + 9 * k) for k, s in enumerate(ref.get_state())]
        ref.set_state(start)
        fast.set_state(start)
        live = _make_live(game, lib, layout, [n])
        attach_and_verify(live, [fast], [n], lib)
        collector = _collector.StateCollector(game_spec(game.name), n, 1)
        flags = [np.zeros(n, dtype=np.uint8) for _ in range(3)]
        rng = np.random.default_rng(7)
        actions = rng.integers(0, NUM_ACTIONS, size=(steps, n)).astype(np.int32)
        try:
            for t, chosen in enumerate(actions):
                ref.act(chosen)
                collector.step_live(live, 0, chosen, 0, None, 0, *flags)
                ends += int(ref.observe()[2].sum())
                if fast.get_state() != ref.get_state():
                    raise EngineUnavailable(
                        f"the self-check of this build's headless stepping differs from "
                        f"procgen's own at step {t}"
                    )
        finally:
            collector.close()
    finally:
        if live is not None:
            live.detach()
        ref.close()
        fast.close()
    return ends


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
    r2_at, r2 = _second_rng_text(state)
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
    from procgen_entities._native._collector import LiveGames

    try:
        program = state_program(layout, game)
        entities = entity_program(layout)
        offsets = step_offsets(layout)
        read_map = live_read_map(layout, game)
    except LayoutError as exc:
        raise EngineUnavailable(str(exc)) from None
    return LiveGames(
        program, entities, game.name.encode(), offsets, VTABLE_SLOTS["game_step"],
        VTABLE_SLOTS["observe"], _function_address(lib, "reset"),
        _function_address(lib, "prepare_for_drawing"), RENDER_HEIGHT, [int(s) for s in sizes],
        read_map,
    )  # fmt: skip


def attach_and_verify(
    live: Any, envs: Sequence[Any], sizes: Sequence[int], lib: LibraryInfo
) -> None:
    """Point ``live`` at the game objects of each env and check one direct read per game against
    procgen's own get_state (byte for byte, RNG texts aside). procgen's threads must be idle:
    get_state waits for them, so it is called first."""
    for group, env in enumerate(envs):
        states: List[bytes] = env.get_state()
        if len(states) != sizes[group]:
            raise EngineUnavailable(f"group {group} has {len(states)} envs, not {sizes[group]}")
        live.attach(group, env.handle)
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
    procgen_options: Dict[str, Any],
    layout: Optional[Layout] = None,
) -> EngineBinding:
    """Choose and attach the engine for ``envs`` (see the module docstring)."""
    if requested not in ENGINES:
        raise UsageError(f"engine must be one of {', '.join(ENGINES)}, got {requested!r}")
    if requested == "get_state":
        return EngineBinding("get_state", None)
    headless_ok, why = False, ""
    try:
        lib = library_info(envs[0])
        chosen_layout, trusted = _layout_for(lib, layout)
        if procgen_options.get("render_mode") is not None:
            if requested == "headless":  # procgen's hi-res render moves the camera fields
                raise EngineUnavailable("headless stepping needs no render_mode")
            headless_ok = False
        live = _make_live(game, lib, chosen_layout, sizes)
        attach_and_verify(live, envs, sizes, lib)
        if procgen_options.get("render_mode") is None:
            headless_ok = True
            if not trusted and requested in ("auto", "headless"):
                try:
                    _self_check(game, lib, chosen_layout, procgen_options)
                except EngineUnavailable as exc:
                    if requested == "headless":
                        live.detach()
                        raise
                    headless_ok, why = False, str(exc)
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
            f"procgen_entities: using the direct engine (procgen steps and renders) instead of "
            f"headless: {why or 'render_mode is set'}",
            EngineFallbackWarning,
            stacklevel=3,
        )
    return EngineBinding(name, live)
