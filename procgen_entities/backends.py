"""The procgen builds this package runs on, behind one small interface.

- ``mirror``: procgen-mirror (import ``procgen``, gym3's ProcgenGym3Env; Python 3.11 and 3.12),
  or the original procgen where it installs (the same module name and API).
- ``gym``: procgen-gym (import ``procgen_gym``, a Gymnasium port of procgen 0.10.7 whose
  ctypes ``CLibenv`` exposes get_state/set_state; Python 3.13+, numpy 2, no gym).

Both run procgen 0.10.7's C++ games in a libenv.so; the engine reads each build's own layout
(engine/dwarf.py). The backend is the first of mirror, gym that imports, or the one named by
the environment variable ``PROCGEN_ENTITIES_BACKEND`` (``mirror`` or ``gym``).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import io
import os
import sys
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from procgen_entities.errors import UsageError

__all__ = [
    "BACKENDS",
    "BACKEND_VARIABLE",
    "ProcgenEnvs",
    "backend_name",
    "import_backend",
    "make_envs",
]

BACKEND_VARIABLE = "PROCGEN_ENTITIES_BACKEND"
#: backend name -> the module it needs
BACKENDS = {"mirror": "procgen", "gym": "procgen_gym"}

#: procgen's state buffer bound (procgen_gym.env.MAX_STATE_SIZE, gym3's 2**20).
_STATE_CAPACITY = 2**20


class ProcgenEnvs:
    """``num`` procgen envs of one game in one libenv handle: the calls this package makes.

    ``callmethod("get_state")``/``callmethod("set_state", states)`` and ``observe()`` returning
    ``(reward, {"rgb": frames}, first)`` keep gym3's spelling for callers written against it.
    """

    backend = ""
    num: int

    # ---- what each backend provides ----

    @property
    def handle(self) -> int:
        """The libenv_env pointer (procgen's VecGame)."""
        raise NotImplementedError

    @property
    def get_state_address(self) -> int:
        """Address of libenv.so's ``int get_state(libenv_env *, int, char *, int)``."""
        raise NotImplementedError

    def act(self, actions: npt.NDArray[np.int32]) -> None:
        """Start one step of every env (procgen's threads run it; observe() waits)."""
        raise NotImplementedError

    def observe(self) -> Tuple[npt.NDArray[np.float32], Dict[str, Any], npt.NDArray[np.bool_]]:
        raise NotImplementedError

    def wait(self) -> None:
        """Wait for procgen's stepping threads (libenv_observe)."""
        raise NotImplementedError

    def get_state(self) -> List[bytes]:
        raise NotImplementedError

    def set_state(self, states: Sequence[bytes]) -> None:
        raise NotImplementedError

    def render(self) -> npt.NDArray[np.uint8]:
        """The hi-res frames of render_mode="rgb_array" (else the 64x64 observations)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def abandon(self) -> None:
        """In a forked child: procgen's threads stayed in the parent, so neither ``close`` nor
        the backend's finaliser may join them; the envs are left as they are (the memory is the
        parent's copy)."""
        self._abandoned = True

    # ---- shared ----

    def callmethod(self, name: str, *args: Any) -> Any:
        if name == "get_state":
            return self.get_state()
        if name == "set_state":
            return self.set_state(*args)
        raise AttributeError(f"procgen envs have no method {name!r}")


class _MirrorEnvs(ProcgenEnvs):
    backend = "mirror"

    def __init__(self, game: str, num: int, options: Dict[str, Any]) -> None:
        _quiet_import("procgen")
        from procgen import ProcgenGym3Env

        self._env = ProcgenGym3Env(num=num, env_name=game, **options)
        self.num = num

    @property
    def handle(self) -> int:
        return int(self._env._ffi.cast("uintptr_t", self._env._c_env))

    @property
    def get_state_address(self) -> int:
        return int(self._env._ffi.cast("uintptr_t", self._env._c_lib.get_state))

    def act(self, actions: npt.NDArray[np.int32]) -> None:
        self._env.act(actions)

    def observe(self) -> Tuple[npt.NDArray[np.float32], Dict[str, Any], npt.NDArray[np.bool_]]:
        reward, obs, first = self._env.observe()
        return reward, obs, first

    def wait(self) -> None:
        self._env._c_lib.libenv_observe(self._env._c_env)

    def get_state(self) -> List[bytes]:
        return list(self._env.callmethod("get_state"))

    def set_state(self, states: Sequence[bytes]) -> None:
        self._env.callmethod("set_state", list(states))

    def render(self) -> npt.NDArray[np.uint8]:
        info = self._env.get_info()
        if info and "rgb" in info[0]:
            return np.stack([i["rgb"] for i in info])
        return np.asarray(self._env.observe()[1]["rgb"])

    def close(self) -> None:
        if not getattr(self, "_abandoned", False):
            ffi, lib = self._env._ffi, self._env._c_lib  # gym3's close drops both
            self._env.close()
            _release_library(ffi, lib)

    def abandon(self) -> None:
        super().abandon()
        self._env.closed = True  # gym3's finaliser closes (joins) only envs not marked closed


#: One library object kept for the process: libenv.so is never unloaded (procgen's static
#: state, its asset cache and Qt's, would be torn down and built again).
_PINNED_LIBRARY: List[Any] = []


def _release_library(ffi: Any, lib: Any) -> None:
    """gym3 dlopens libenv.so once per env through one cached cffi FFI, which keeps every
    library object and its function cache in lists for good (cffi's FFI.dlopen): each env made
    and closed left about 7 KiB of Python objects and a dlopen handle behind (tracemalloc over
    200 envs). The closed env's entries are dropped, and with them its library object."""
    libraries = getattr(ffi, "_libraries", None)
    caches = getattr(ffi, "_function_caches", None)
    if lib is None or not isinstance(libraries, list) or not isinstance(caches, list):
        return
    with ffi._lock:
        if len(libraries) != len(caches):  # not the layout dlopen alone appends: leave it
            return
        if not _PINNED_LIBRARY:
            _PINNED_LIBRARY.append(lib)
        for k in range(len(libraries) - 1, -1, -1):
            if libraries[k] is lib and lib is not _PINNED_LIBRARY[0]:
                del libraries[k]
                del caches[k]


class _GymEnvs(ProcgenEnvs):
    backend = "gym"

    def __init__(self, game: str, num: int, options: Dict[str, Any]) -> None:
        from procgen_gym.env import ProcgenVecEnv

        self._env = ProcgenVecEnv(num_envs=num, env_name=game, **options)
        self._clib = self._env._clib
        self.num = num
        lib = self._clib._lib
        lib.get_state.restype = ctypes.c_int
        lib.get_state.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.set_state.restype = None
        lib.set_state.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        self._buffer = ctypes.create_string_buffer(_STATE_CAPACITY)

    @property
    def handle(self) -> int:
        return int(self._clib._handle)

    @property
    def get_state_address(self) -> int:
        return int(ctypes.cast(self._clib._lib.get_state, ctypes.c_void_p).value or 0)

    def act(self, actions: npt.NDArray[np.int32]) -> None:
        self._clib.act(np.asarray(actions, dtype=np.int32))

    def observe(self) -> Tuple[npt.NDArray[np.float32], Dict[str, Any], npt.NDArray[np.bool_]]:
        first, obs, reward, _info = self._clib.observe()
        return reward, obs, first.astype(bool)

    def wait(self) -> None:
        self._clib._lib.libenv_observe(ctypes.c_void_p(self._clib._handle))

    def get_state(self) -> List[bytes]:
        self.wait()  # gym3's callmethod waits for procgen's threads too
        get = self._clib._lib.get_state
        handle = ctypes.c_void_p(self._clib._handle)
        states = []
        for k in range(self.num):
            n = get(handle, k, self._buffer, _STATE_CAPACITY)
            states.append(self._buffer.raw[:n])
        return states

    def set_state(self, states: Sequence[bytes]) -> None:
        if len(states) != self.num:
            raise UsageError(f"expected {self.num} states, got {len(states)}")
        self.wait()
        put = self._clib._lib.set_state
        handle = ctypes.c_void_p(self._clib._handle)
        for k, state in enumerate(states):
            put(handle, k, bytes(state), len(state))

    def render(self) -> npt.NDArray[np.uint8]:
        self.wait()
        info = self._clib.get_info_bufs()
        frames = info["rgb"] if "rgb" in info else self._clib.get_ob_bufs()["rgb"]
        return np.array(frames)

    def close(self) -> None:
        if not getattr(self, "_abandoned", False):
            self._env.close()


_CLASSES = {"mirror": _MirrorEnvs, "gym": _GymEnvs}


@functools.lru_cache(maxsize=None)
def _installed(name: str) -> bool:
    return importlib.util.find_spec(BACKENDS[name]) is not None


def backend_name() -> str:
    """The backend in use: $PROCGEN_ENTITIES_BACKEND, else the first installed."""
    forced = os.environ.get(BACKEND_VARIABLE, "").strip()
    if forced:
        if forced not in BACKENDS:
            raise UsageError(
                f"{BACKEND_VARIABLE}={forced!r}: expected one of {', '.join(BACKENDS)}"
            )
        if not _installed(forced):
            raise ImportError(
                f"{BACKEND_VARIABLE}={forced}, but its module {BACKENDS[forced]!r} is not installed"
            )
        return forced
    for name in BACKENDS:
        if _installed(name):
            return name
    raise ImportError(
        "no procgen build is installed: pip install procgen-mirror (Python 3.11, 3.12) or "
        "procgen-gym (Python 3.13+)"
    )


def _quiet_import(name: str) -> Any:
    """Import ``name`` without old gym's "unmaintained since 2022" notice, which procgen-mirror's
    gym3 triggers (gym prints it to stderr on import; this package never uses gym); anything
    else the import prints goes through."""
    if name in sys.modules:
        return sys.modules[name]
    captured = io.StringIO()
    with contextlib.redirect_stderr(captured):
        module = importlib.import_module(name)
    text = captured.getvalue()
    try:
        from gym_notices.notices import notices

        for notice in notices.values():
            text = text.replace(notice + "\n", "")
    except Exception:  # noqa: S110  (no gym_notices: nothing to drop)
        pass
    sys.stderr.write(text)
    return module


def import_backend() -> Any:
    """Import the backend's module now (without gym's notice, see _quiet_import)."""
    return _quiet_import(BACKENDS[backend_name()])


def make_envs(game: str, num: int, **options: Any) -> ProcgenEnvs:
    """``num`` envs of ``game`` on the current backend (options as procgen's)."""
    return _CLASSES[backend_name()](game, num, options)
