"""The two facts the engine needs from a loaded libenv.so's ELF file: its GNU build id and the
addresses of a few local (non-exported) functions, from its .symtab (read with pyelftools)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, Optional, Tuple

from procgen_entities.errors import ProcgenEntitiesError

__all__ = ["ElfError", "ElfInfo", "read_elf"]


class ElfError(ProcgenEntitiesError, ValueError):
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


def read_elf(path: str, wanted: Iterable[str] = ()) -> ElfInfo:
    try:
        from elftools.common.exceptions import ELFError
        from elftools.elf.elffile import ELFFile
        from elftools.elf.sections import NoteSection, SymbolTableSection
    except ImportError as exc:
        raise ElfError(f"pyelftools is not installed ({exc})") from None
    build_id: Optional[str] = None
    table = []
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            if elf.elfclass != 64 or not elf.little_endian:
                raise ElfError(f"{path}: not a 64-bit little-endian ELF file")
            for section in elf.iter_sections():
                if isinstance(section, NoteSection) and build_id is None:
                    for note in section.iter_notes():
                        if note["n_type"] == "NT_GNU_BUILD_ID" and note["n_name"] == "GNU":
                            build_id = str(note["n_desc"])
                            break
                if isinstance(section, SymbolTableSection) and section["sh_type"] == "SHT_SYMTAB":
                    for sym in section.iter_symbols():
                        value = int(sym["st_value"])
                        if sym["st_info"]["type"] == "STT_FUNC" and value != 0:
                            table.append((value, int(sym["st_size"]), str(sym.name)))
    except (ELFError, ValueError, KeyError) as exc:
        raise ElfError(f"{path}: {exc}") from None
    table.sort()
    names = set(wanted)
    functions = {name: (value, size) for value, size, name in table if name in names}
    return ElfInfo(build_id, functions, tuple(table))
