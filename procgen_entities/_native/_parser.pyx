# cython: language_level=3
"""Marshalling between Python objects and the C state parser (csrc/state_parser.c).

No decisions live here: buffers are collected, arrays allocated from what the C side measured,
the GIL is released around the C work, and C statuses become exceptions (_status.check_status).
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport calloc, free, malloc

from procgen_entities._native._status cimport check_status
from procgen_entities._native.state_parser cimport *

import numpy as np

from procgen_entities.errors import UsageError

#: The trailer kind codes of the game declarations (games.py) -> pe_trailer_kind.
TRAILER_KINDS_BY_CODE = {
    "i": PE_T_I32, "f": PE_T_F32, "b": PE_T_BOOL, "vi": PE_T_VEC_I32, "vf": PE_T_VEC_F32,
    "vb": PE_T_VEC_BOOL, "ve": PE_T_VEC_ENTITY,
}
#: The invariant term kinds of games.Game.invariant_terms -> pe_value_kind.
VALUE_KINDS_BY_TERM = {
    "const": PE_V_CONST, "scalar": PE_V_SCALAR, "length": PE_V_LENGTH, "grid_w": PE_V_GRID_W,
    "grid_h": PE_V_GRID_H, "grid_cells": PE_V_GRID_CELLS,
}
SCALAR_NAMES = tuple(pe_scalar_name(i).decode() for i in range(pe_scalar_count()))
SCALAR_KINDS = tuple(chr(pe_scalar_kind(i)) for i in range(pe_scalar_count()))


def _scalar_position(int i):
    cdef int section = -1, at = -1
    check_status(pe_scalar_position(i, &section, &at))
    return (section, at)


#: Per scalar: (section, byte offset in it); sections in byte order: options, step, base, camera.
SCALAR_POSITIONS = tuple(_scalar_position(i) for i in range(pe_scalar_count()))


cdef tuple _record(const pe_record_field *fields, int n):
    """(name, byte offset, kind) of each field of a fixed record of state_parser.h, in order."""
    cdef int i
    rows = []
    for i in range(n):
        rows.append((fields[i].name.decode(), fields[i].at, chr(fields[i].kind)))
    return tuple(rows)


#: The entity record (games.ENTITY_FIELDS and ENTITY_INT_FIELDS are read from it).
ENTITY_RECORD = _record(PE_ENTITY_RECORD, PE_ENTITY_FIELDS)
#: The camera section: its scalars (the last of SCALAR_NAMES), then the grid's w, h and count.
CAMERA_RECORD = _record(PE_CAMERA_RECORD, PE_CAMERA_FIELDS)


cdef class GameSpec:
    """A game's name and trailer layout in the form the C parser reads."""

    def __cinit__(self, str game, tuple trailer, tuple invariants=(), bint check_invariants=True):
        """invariants: (text, (kind, index), (kind, index)) as Game.invariant_terms() gives."""
        cdef Py_ssize_t i
        self.game = game
        self._name = game.encode("ascii")
        self._kinds = bytes([TRAILER_KINDS_BY_CODE[kind] for _, kind in trailer])
        self._names = [name.encode("ascii") for name, _ in trailer]
        self._name_ptrs = <const char **>calloc(max(1, len(trailer)), sizeof(char *))
        if self._name_ptrs == NULL:
            raise MemoryError()
        for i in range(len(trailer)):
            self._name_ptrs[i] = <bytes>self._names[i]
        self.spec.name = self._name
        self.spec.name_len = len(self._name)
        self.spec.n_trailer = len(trailer)
        self.spec.trailer_kinds = <const uint8_t *><const char *>self._kinds
        self.spec.trailer_names = self._name_ptrs
        if len(invariants) > PE_MAX_INVARIANTS:
            raise UsageError(f"{game}: more than {PE_MAX_INVARIANTS} invariants")
        self._invariant_names = [text.encode("ascii") for text, _, _ in invariants]
        self._invariants = <pe_invariant *>calloc(max(1, len(invariants)), sizeof(pe_invariant))
        if self._invariants == NULL:
            raise MemoryError()
        for i, (_, lhs, rhs) in enumerate(invariants):
            self._invariants[i].lhs.kind = VALUE_KINDS_BY_TERM[lhs[0]]
            self._invariants[i].lhs.index = lhs[1]
            self._invariants[i].rhs.kind = VALUE_KINDS_BY_TERM[rhs[0]]
            self._invariants[i].rhs.index = rhs[1]
            self._invariants[i].name = <bytes>self._invariant_names[i]
        self.spec.n_invariants = len(invariants) if check_invariants else 0
        self.spec.invariants = self._invariants
        self.n_trailer_vectors = sum(1 for _, kind in trailer if kind.startswith("v"))
        self.n_trailer_scalars = len(trailer) - self.n_trailer_vectors
        if pe_check_spec(&self.spec) != PE_OK:
            raise UsageError(f"invalid trailer spec for {game!r}")

    def __dealloc__(self):
        free(self._name_ptrs)
        free(self._invariants)


cdef class _Buffers:
    """Pointers and lengths of a sequence of bytes-like objects, held for the call."""
    cdef Py_ssize_t n
    cdef const uint8_t **ptrs
    cdef int64_t *lens
    cdef Py_buffer *views
    cdef char *held
    cdef list objects

    def __cinit__(self, states):
        cdef Py_ssize_t i
        self.objects = list(states)
        self.n = len(self.objects)
        cdef Py_ssize_t m = max(1, self.n)
        self.ptrs = <const uint8_t **>malloc(m * sizeof(uint8_t *))
        self.lens = <int64_t *>malloc(m * sizeof(int64_t))
        self.views = <Py_buffer *>malloc(m * sizeof(Py_buffer))
        self.held = <char *>calloc(m, 1)
        if not (self.ptrs and self.lens and self.views and self.held):
            raise MemoryError()
        for i in range(self.n):
            obj = self.objects[i]
            if type(obj) is bytes:
                self.ptrs[i] = <const uint8_t *>PyBytes_AS_STRING(obj)
                self.lens[i] = PyBytes_GET_SIZE(obj)
                continue
            try:
                PyObject_GetBuffer(obj, &self.views[i], PyBUF_SIMPLE)
            except (TypeError, BufferError, ValueError) as exc:  # numpy: ValueError
                raise TypeError(
                    f"state {i}: expected a contiguous bytes-like object, got "
                    f"{type(obj).__name__} ({exc})") from None
            self.held[i] = 1
            self.ptrs[i] = <const uint8_t *>self.views[i].buf
            self.lens[i] = self.views[i].len

    def __dealloc__(self):
        cdef Py_ssize_t i
        if self.held != NULL:
            for i in range(self.n):
                if self.held[i]:
                    PyBuffer_Release(&self.views[i])
        free(self.ptrs)
        free(self.lens)
        free(self.views)
        free(self.held)


def read_game_name(state):
    """The game name written in a state's header (raises StateDecodeError if unreadable)."""
    cdef _Buffers bufs = _Buffers((state,))
    cdef const uint8_t *name
    cdef int32_t name_len = 0
    cdef pe_error err
    cdef pe_status status = pe_read_game_name(bufs.ptrs[0], bufs.lens[0], &name, &name_len, &err)
    check_status(status, &err, 0)
    return bytes(name[:name_len]).decode("ascii", errors="replace")


def parse_batch(states, GameSpec spec, const int32_t[::1] entity_fields, bint want_grid):
    """Measure then fill. Returns a dict of numpy arrays (see parse.py for their meaning)."""
    cdef _Buffers bufs = _Buffers(states)
    cdef Py_ssize_t n = bufs.n, i
    cdef int64_t bad_index = -1
    cdef pe_error err
    cdef pe_status status
    cdef pe_layout *layouts = <pe_layout *>malloc(max(1, n) * sizeof(pe_layout))
    if layouts == NULL:
        raise MemoryError()
    try:
        with nogil:
            status = pe_measure_many(n, bufs.ptrs, bufs.lens, &spec.spec, layouts, &bad_index,
                                     &err)
        check_status(status, &err, bad_index)

        n_fields = entity_fields.shape[0]
        for i in range(n_fields):
            if entity_fields[i] < 0 or entity_fields[i] >= PE_ENTITY_FIELDS:
                raise UsageError(f"entity field index {entity_fields[i]} out of range")
        n_vec = spec.n_trailer_vectors
        entity_counts = np.empty(n, dtype=np.int64)
        vector_counts = np.zeros((n, n_vec), dtype=np.int64)
        vector_offsets = np.zeros(n + 1, dtype=np.int64)
        entity_offsets = np.zeros(n + 1, dtype=np.int64)
        sizes = np.empty(n, dtype=np.int64)
        _count(layouts, &spec.spec, n, entity_counts, vector_counts, entity_offsets,
               vector_offsets, sizes)
        height = layouts[0].height if n else 0
        width = layouts[0].width if n else 0

        scalars = np.empty((n, pe_scalar_count()), dtype=np.float64)
        entities = np.empty((entity_offsets[n], n_fields), dtype=np.float32)
        grid = np.empty((n, height, width), dtype=np.int32) if want_grid else None
        trailer_scalars = np.empty((n, spec.n_trailer_scalars), dtype=np.float64)
        vector_values = np.empty(vector_offsets[n], dtype=np.float64)
        _fill(bufs, layouts, spec, scalars, entity_fields, entities, entity_offsets, grid,
              trailer_scalars, vector_values, vector_offsets)
        return dict(
            game=spec.game, sizes=sizes, scalars=scalars, entities=entities,
            entity_counts=entity_counts, grid=grid, trailer_scalars=trailer_scalars,
            vector_values=vector_values, vector_counts=vector_counts,
        )
    finally:
        free(layouts)


cdef void _count(pe_layout *layouts, pe_game_spec *spec, Py_ssize_t n,
                 int64_t[::1] entity_counts, int64_t[:, ::1] vector_counts,
                 int64_t[::1] entity_offsets, int64_t[::1] vector_offsets,
                 int64_t[::1] sizes) noexcept:
    cdef Py_ssize_t i, v
    for i in range(n):
        entity_counts[i] = layouts[i].n_entities
        sizes[i] = layouts[i].size
        entity_offsets[i + 1] = entity_offsets[i] + layouts[i].n_entities
        vector_offsets[i + 1] = vector_offsets[i] + pe_vector_value_count(&layouts[i], spec)
        for v in range(layouts[i].n_vectors):
            vector_counts[i, v] = layouts[i].vector_counts[v]


cdef void _fill(_Buffers bufs, pe_layout *layouts, GameSpec spec, double[:, ::1] scalars,
                const int32_t[::1] entity_fields, float[:, ::1] entities,
                int64_t[::1] entity_offsets, int32_t[:, :, ::1] grid,
                double[:, ::1] trailer_scalars, double[::1] vector_values,
                int64_t[::1] vector_offsets):
    # Empty dimensions give memoryviews whose data pointer must not be used.
    cdef Py_ssize_t n = bufs.n
    cdef float *entities_ptr = &entities[0, 0] if entities.shape[0] * entities.shape[1] else NULL
    cdef int32_t *grid_ptr = NULL
    if grid is not None and grid.shape[1] * grid.shape[2] and n:
        grid_ptr = &grid[0, 0, 0]
    cdef double *trailer_ptr = &trailer_scalars[0, 0] if trailer_scalars.shape[0] * trailer_scalars.shape[1] else NULL
    cdef double *values_ptr = &vector_values[0] if vector_values.shape[0] else NULL
    cdef double *scalars_ptr = &scalars[0, 0] if n else NULL
    cdef const int32_t *fields_ptr = &entity_fields[0] if entity_fields.shape[0] else NULL
    with nogil:
        pe_fill_many(n, bufs.ptrs, layouts, &spec.spec, scalars_ptr, fields_ptr,
                     <int32_t>entity_fields.shape[0], entities_ptr, &entity_offsets[0], grid_ptr,
                     trailer_ptr, values_ptr, &vector_offsets[0])
