"""One error hierarchy and one class per C status: every exception class the package defines
derives from ProcgenEntitiesError, and each status of the C core becomes the same class whichever
binding or caller raised it."""

from __future__ import annotations

import importlib
import pickle
import pkgutil
import re
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest
from conftest import load_golden

import procgen_entities
from procgen_entities import MixedBatchError, StateDecodeError, parse_states
from procgen_entities._native import _collector, _status
from procgen_entities.errors import (
    EXCEPTION_OF_STATUS,
    LayoutError,
    ProcgenEntitiesError,
    TilemapError,
    UsageError,
    error_from_status,
)
from procgen_entities.parse import game_spec

CSRC = Path(__file__).resolve().parent.parent / "csrc"
#: Optional dependencies a module of the package may need (its import is skipped without them).
OPTIONAL = (
    "ray", "gymnasium", "entity_gym", "ragged_buffer", "stable_baselines3", "torch", "pufferlib",
)  # fmt: skip


def package_modules() -> Dict[str, object]:
    modules = {}
    for info in pkgutil.walk_packages(procgen_entities.__path__, "procgen_entities."):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue  # runs a tool
        try:
            modules[info.name] = importlib.import_module(info.name)
        except ImportError as exc:
            if exc.name is None or exc.name.split(".")[0] not in OPTIONAL:
                raise
    return modules


def test_every_exception_class_of_the_package_is_a_procgen_entities_error() -> None:
    modules = package_modules()
    assert "procgen_entities.tools.dump" in modules and "procgen_entities.engine.elf" in modules
    found: List[str] = []
    for name, module in modules.items():
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == name
                and not issubclass(value, Warning)
            ):
                found.append(value.__qualname__)
                assert issubclass(value, ProcgenEntitiesError), f"{name}.{value.__qualname__}"
    for expected in (
        "EngineUnavailable",
        "EngineMismatch",
        "LayoutError",
        "ElfError",
        "DwarfError",
        "CheckpointError",
        "NotACheckpoint",
        "LevelError",
        "VideoError",
        "UsageError",
    ):
        assert expected in found
    assert found.count("UsageError") == 1  # tools/dump.py uses errors.UsageError


def test_builtin_bases_are_kept() -> None:
    """`except ValueError` / `except RuntimeError` code keeps catching what it caught."""
    from procgen_entities.agents.checkpoint import CheckpointError, NotACheckpoint
    from procgen_entities.engine import EngineUnavailable
    from procgen_entities.engine.dwarf import DwarfError
    from procgen_entities.engine.elf import ElfError
    from procgen_entities.level_files import LevelError
    from procgen_entities.stepper import EngineMismatch

    for cls in (ElfError, CheckpointError, LevelError, UsageError, StateDecodeError):
        assert issubclass(cls, ValueError)
    for cls in (EngineUnavailable, LayoutError, DwarfError, TilemapError):
        assert issubclass(cls, RuntimeError)
    assert issubclass(EngineMismatch, EngineUnavailable) and issubclass(EngineMismatch, ValueError)
    assert issubclass(NotACheckpoint, FileNotFoundError)


def c_statuses() -> Dict[str, int]:
    """Every error member of pe_status and tm_status, read from the headers."""
    found = {}
    for header, enum in (("state_parser.h", "pe_status"), ("tilemap.h", "tm_status")):
        text = re.sub(r"/\*.*?\*/", "", (CSRC / header).read_text(), flags=re.S)
        body = re.search(rf"typedef enum {{([^}}]*)}} {enum};", text)
        assert body is not None
        for m in re.finditer(r"(\w+) = (\d+)", body.group(1)):
            if not m.group(1).endswith("_OK"):
                found[m.group(1)] = int(m.group(2))
    return found


def test_every_c_status_has_exactly_one_class() -> None:
    statuses = c_statuses()
    assert set(EXCEPTION_OF_STATUS) == set(statuses)
    for name, code in statuses.items():
        exc = error_from_status(name, code, "reason", 2, 8, "field")
        assert type(exc) is EXCEPTION_OF_STATUS[name], name
        if name == "PE_ERR_MEMORY":  # out of memory is Python's own MemoryError
            continue
        assert isinstance(exc, ProcgenEntitiesError), name
        if isinstance(exc, StateDecodeError):  # carries where the state failed
            assert (exc.index, exc.offset, exc.field, exc.status) == (2, 8, "field", name)
    assert type(error_from_status("PE_ERR_NOPE", 99, "x")) is ProcgenEntitiesError


def test_decode_errors_pickle_as_their_own_class() -> None:
    exc = MixedBatchError("grid", index=3, offset=40, field="grid.w", status="PE_ERR_SHAPE")
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is MixedBatchError
    assert (back.index, back.offset, back.field, back.status) == (3, 40, "grid.w", "PE_ERR_SHAPE")


def test_one_grid_size_mismatch_is_one_class_from_every_caller() -> None:
    """PE_ERR_SHAPE is a MixedBatchError straight from the C parser's batch check (so from the
    collector's too: both raise through check_status), not one parse_states narrows."""
    easy = load_golden("caveflyer-easy").states[0]
    hard = load_golden("caveflyer-hard").states[0]
    with pytest.raises(MixedBatchError) as parsed:
        parse_states([easy, hard])
    assert (parsed.value.status, parsed.value.index, parsed.value.field) == (
        "PE_ERR_SHAPE",
        1,
        "grid.w",
    )
    from procgen_entities._native import _parser

    with pytest.raises(MixedBatchError) as raw:
        _parser.parse_batch([easy, hard], game_spec("caveflyer"), np.arange(31, dtype=np.int32), 0)
    assert (raw.value.status, raw.value.offset) == ("PE_ERR_SHAPE", parsed.value.offset)


def test_padding_misuse_is_a_usage_error() -> None:
    """pe_pad_rows's bad arguments come back as PE_ERR_ARG (a status, not a bare -1)."""
    rows = np.zeros((2, 3), np.float32)
    counts = np.array([2], np.int64)
    out = np.zeros((1, 4, 3), np.float32)
    mask = np.zeros((1, 4), np.uint8)
    dropped = np.zeros(1, np.int64)
    with pytest.raises(UsageError, match="argument out of range"):
        _collector.pad_rows(rows, counts, out, mask, dropped, 5, 1)  # distance column past F
    _collector.pad_rows(rows, counts, out, mask, dropped, 0, 1)
    assert mask.tolist() == [[1, 1, 0, 0]]


def test_status_codes_name_one_member_each() -> None:
    for name, code in c_statuses().items():
        assert _status.status_name(code) == name
