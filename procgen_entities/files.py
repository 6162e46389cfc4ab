"""The tools' file reads and writes, safe against what a path can name.

``open_regular`` opens a regular file only: a FIFO would block ``open()`` until some writer
comes (forever), a device such as /dev/zero reads without end, a folder is no file. It stats
the path first, opens it without blocking and checks the opened file again (a path swapped in
between is still refused). ``write_atomic`` writes a file under a temporary name in its folder,
then renames it over the target (``os.replace``), so a failed write (a full disk, a file size
limit, an interrupt) leaves the old file, or nothing, never half a file; a target that exists
and is not a regular file is refused rather than written into or replaced.

Both raise OSError (``strerror`` says why); the tools report it as their own error, naming the
path.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from typing import BinaryIO, Optional, Union

__all__ = ["check_target", "open_regular", "write_atomic"]

PathLike = Union[str, "os.PathLike[str]"]


def _refuse_unless_regular(mode: int, path: PathLike) -> None:
    """OSError(EINVAL) naming what ``path`` is, unless its ``st_mode`` is a regular file's."""
    if stat.S_ISREG(mode):
        return
    if stat.S_ISFIFO(mode):
        kind = "a FIFO"
    elif stat.S_ISDIR(mode):
        kind = "a folder"
    elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        kind = "a device"
    elif stat.S_ISSOCK(mode):
        kind = "a socket"
    else:
        kind = "something"
    raise OSError(errno.EINVAL, f"{kind}, not a regular file", os.fspath(path))


def open_regular(path: PathLike) -> BinaryIO:
    """``open(path, "rb")`` for a regular file (symbolic links followed); OSError for anything
    else, without blocking on a FIFO."""
    _refuse_unless_regular(os.stat(path).st_mode, path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)  # O_NONBLOCK: a FIFO swapped in after the stat opens at once
    try:
        _refuse_unless_regular(os.fstat(fd).st_mode, path)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_target(path: PathLike) -> Optional[int]:
    """The ``st_mode`` of the file ``path`` names (through a symbolic link), None if there is
    none yet; OSError if it exists and is not a regular file (what write_atomic refuses, for a
    caller that refuses it before doing the work whose result it writes)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    _refuse_unless_regular(mode, path)
    return mode


def write_atomic(path: PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` all at once: a temporary file in the same folder, synced, then
    renamed over ``path`` (through a symbolic link, its target). An existing file keeps its
    permissions; OSError if ``path`` exists and is not a regular file, or the write fails (the
    temporary file is removed)."""
    target = os.path.realpath(path)
    old_mode = check_target(target)
    folder, name = os.path.split(target)
    temporary = os.path.join(folder, f".{name[:200]}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(temporary, flags, 0o666)  # the umask applies, as for open(path, "w")
    try:
        with os.fdopen(fd, "wb") as f:
            if old_mode is not None:
                os.chmod(temporary, stat.S_IMODE(old_mode))
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
