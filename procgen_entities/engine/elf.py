"""The two facts the engine needs from a loaded libenv.so's ELF file: its GNU build id and the
addresses of a few local (non-exported) functions, from its .symtab. Pure Python, read-only."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Dict, Iterable, Optional, Tuple

__all__ = ["ElfError", "ElfInfo", "read_elf"]

_NT_GNU_BUILD_ID = 3
_SHT_SYMTAB = 2
_SHT_NOTE = 7
_STT_FUNC = 2


class ElfError(ValueError):
    """Not a 64-bit little-endian ELF file, or one without what the engine needs."""


@dataclass(frozen=True)
class ElfInfo:
    build_id: Optional[str]
    #: symbol name -> (value, size) for the requested local functions that were found
    functions: Dict[str, Tuple[int, int]]
    #: (value, size, name) of every function symbol, sorted by value (for naming an address)
    function_table: Tuple[Tuple[int, int, str], ...]

    def function_at(self, address: int) -> Optional[str]:
        """The name of the function whose first byte is ``address`` (file-relative), if any."""
        lo, hi = 0, len(self.function_table)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.function_table[mid][0] < address:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self.function_table) and self.function_table[lo][0] == address:
            return self.function_table[lo][2]
        return None


def _sections(data: bytes) -> Iterable[Tuple[int, int, int, int, int]]:
    """(name offset, type, file offset, size, link) of every section."""
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    if shentsize < 64 or shoff + shnum * shentsize > len(data):
        raise ElfError("bad section header table")
    for k in range(shnum):
        name, kind, _flags, _addr, offset, size, link = struct.unpack_from(
            "<IIQQQQI", data, shoff + k * shentsize
        )
        if offset + size > len(data) and kind != 8:  # 8: SHT_NOBITS
            raise ElfError("section past the end of the file")
        yield name, kind, offset, size, link


def _build_id(data: bytes, offset: int, size: int) -> Optional[str]:
    at, end = offset, offset + size
    while at + 12 <= end:
        namesz, descsz, kind = struct.unpack_from("<III", data, at)
        name_at = at + 12
        desc_at = name_at + (namesz + 3) // 4 * 4
        if kind == _NT_GNU_BUILD_ID and data[name_at : name_at + namesz] == b"GNU\0":
            return data[desc_at : desc_at + descsz].hex()
        at = desc_at + (descsz + 3) // 4 * 4
    return None


def read_elf(path: str, wanted: Iterable[str] = ()) -> ElfInfo:
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ElfError(f"{path}: not a 64-bit little-endian ELF file")
    sections = list(_sections(data))
    build_id: Optional[str] = None
    table = []
    for _name, kind, offset, size, link in sections:
        if kind == _SHT_NOTE and build_id is None:
            build_id = _build_id(data, offset, size)
        if kind == _SHT_SYMTAB:
            _n, _k, str_off, str_size, _l = sections[link]
            for at in range(offset, offset + size, 24):
                name_off, info, _other, _shndx, value, sym_size = struct.unpack_from(
                    "<IBBHQQ", data, at
                )
                if info & 0xF != _STT_FUNC or value == 0:
                    continue
                end = data.index(b"\0", str_off + name_off)
                table.append((value, sym_size, data[str_off + name_off : end].decode()))
    table.sort()
    names = set(wanted)
    functions = {name: (value, size) for value, size, name in table if name in names}
    return ElfInfo(build_id, functions, tuple(table))
