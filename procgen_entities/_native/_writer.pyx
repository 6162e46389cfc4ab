# cython: language_level=3
"""Marshalling between Python objects and the C state writer (csrc/state_writer.c).

No decisions live here: a state's parts are copied out of the bytes the C side measured and
located, parts are handed back as pointers into buffers held for the call, the GIL is released
around the C work, and C statuses become exceptions (_status.check_status).
"""
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport calloc, free

from procgen_entities._native._parser cimport GameSpec
from procgen_entities._native._status cimport check_status
from procgen_entities._native.state_parser cimport *
from procgen_entities._native.state_writer cimport *

import numpy as np

from procgen_entities.errors import UsageError


cdef inline const uint8_t *_bytes_ptr(const uint8_t[::1] view) noexcept:
    return &view[0] if view.shape[0] else NULL


def split_state(state, GameSpec spec):
    """One state's parts: what pe_fill copies (scalars, grid, trailer scalars as float64 / int32
    arrays) and, as bytes, what it does not (raw entity records, the RNGs, trailer vector items).
    Raises StateDecodeError as parse_states does."""
    data = state if type(state) is bytes else bytes(state)
    cdef const uint8_t[::1] view = data
    cdef const uint8_t *buf = _bytes_ptr(view)
    cdef int64_t n = view.shape[0]
    cdef pe_layout layout
    cdef pe_error err
    cdef pe_spans spans
    cdef pe_status status
    with nogil:
        status = pe_measure(buf, n, &spec.spec, &layout, &err)
    check_status(status, &err, 0)
    scalars = np.empty(pe_scalar_count(), dtype=np.float64)
    grid = np.empty((layout.height, layout.width), dtype=np.int32)
    trailer = np.empty(max(1, spec.n_trailer_scalars), dtype=np.float64)
    cdef double[::1] scalars_view = scalars
    cdef int32_t[:, ::1] grid_view = grid
    cdef double[::1] trailer_view = trailer
    cdef int32_t *grid_ptr = &grid_view[0, 0] if layout.width * layout.height else NULL
    pe_fill(buf, &layout, &spec.spec, &scalars_view[0], NULL, 0, NULL, grid_ptr,
            &trailer_view[0], NULL)
    pe_locate(buf, &layout, &spec.spec, &spans)
    cdef int r, v
    rngs = []
    for r in range(PE_N_RNGS):
        at = spans.rngs[r].text - buf
        rngs.append((spans.rngs[r].is_seeded, data[at : at + spans.rngs[r].text_len]))
    kinds = [k for k in spec._kinds if k >= PE_T_VEC_I32]
    vectors = []
    for v in range(layout.n_vectors):
        at = spans.vector_items_at[v]
        size = layout.vector_counts[v] * pe_trailer_item_bytes(kinds[v])
        vectors.append(data[at : at + size])
    start = layout.entities_at
    return dict(
        scalars=scalars,
        grid=grid,
        trailer_scalars=trailer[:spec.n_trailer_scalars],
        entities=data[start : start + layout.n_entities * PE_ENTITY_BYTES],
        rngs=tuple(rngs),
        vectors=tuple(vectors),
    )


def _raw(obj):
    """obj's bytes as a contiguous uint8 array (a numpy array's items, in its dtype)."""
    if isinstance(obj, np.ndarray):
        return np.ascontiguousarray(obj).reshape(-1).view(np.uint8)
    return np.frombuffer(obj, dtype=np.uint8)


cdef class _Parts:
    """A pe_state_parts per state, pointing into the buffers it holds."""
    cdef Py_ssize_t n
    cdef pe_state_parts *parts
    cdef list held

    def __cinit__(self, items, GameSpec spec):
        self.n = len(items)
        self.held = []
        self.parts = <pe_state_parts *>calloc(max(1, self.n), sizeof(pe_state_parts))
        if self.parts == NULL:
            raise MemoryError()
        cdef Py_ssize_t i
        for i in range(self.n):
            self._set(i, items[i], spec)

    cdef const uint8_t *_hold(self, raw) except? NULL:
        """A pointer to the bytes of _raw(...) (NULL when empty), kept alive for the call."""
        cdef const uint8_t[::1] view = raw
        self.held.append(raw)
        return _bytes_ptr(view)

    cdef int _set(self, Py_ssize_t i, item, GameSpec spec) except -1:
        cdef pe_state_parts *p = &self.parts[i]
        scalars, rngs, entities, grid, trailer, vectors = item
        if len(scalars) != pe_scalar_count():
            raise UsageError(f"state {i}: expected {pe_scalar_count()} scalars")
        if len(trailer) != spec.n_trailer_scalars or len(vectors) != spec.n_trailer_vectors:
            raise UsageError(f"state {i}: trailer parts do not match {spec.game}'s trailer")
        if len(rngs) != PE_N_RNGS:
            raise UsageError(f"state {i}: expected {PE_N_RNGS} RNGs")
        p.scalars = <const double *>self._hold(_raw(np.asarray(scalars, dtype=np.float64)))
        cdef int r
        for r in range(PE_N_RNGS):
            seeded, text = rngs[r]
            p.rngs[r].is_seeded = seeded
            p.rngs[r].text_len = len(text)
            p.rngs[r].text = self._hold(_raw(text))
        entities = _raw(entities)
        if len(entities) % PE_ENTITY_BYTES:
            raise UsageError(f"state {i}: entity bytes are not whole {PE_ENTITY_BYTES}-byte records")
        p.n_entities = len(entities) // PE_ENTITY_BYTES
        p.entities = self._hold(entities)
        p.height, p.width = grid.shape
        p.grid = <const int32_t *>self._hold(_raw(np.asarray(grid, dtype="<i4")))
        p.trailer_scalars = <const double *>self._hold(_raw(np.asarray(trailer, dtype=np.float64)))
        kinds = [k for k in spec._kinds if k >= PE_T_VEC_I32]
        cdef int v
        for v in range(len(vectors)):
            raw = _raw(vectors[v])
            item_bytes = pe_trailer_item_bytes(kinds[v])
            if len(raw) % item_bytes:
                raise UsageError(f"state {i}: trailer vector {v} is not whole items")
            p.vector_counts[v] = len(raw) // item_bytes
            p.vector_items[v] = self._hold(raw)
        return 0

    def __dealloc__(self):
        free(self.parts)


def write_states(items, GameSpec spec):
    """Bytes of each state from its parts: (scalars float64[S], ((is_seeded, text) * 3),
    entity records (bytes-like, 124 per entity), grid int32[H, W], trailer scalars float64[k],
    trailer vectors (bytes-like raw items, one per vector)). A size pass over all, one buffer,
    a write pass; raises StateDecodeError naming the first bad state's field."""
    cdef _Parts parts = _Parts(items, spec)
    cdef Py_ssize_t n = parts.n, i
    cdef int64_t bad_index = -1
    cdef pe_error err
    cdef pe_status status
    sizes = np.zeros(max(1, n), dtype=np.int64)
    cdef int64_t[::1] sizes_view = sizes
    with nogil:
        status = pe_write_size_many(n, parts.parts, &spec.spec, &sizes_view[0], &bad_index, &err)
    check_status(status, &err, bad_index)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes[:n], out=offsets[1:])
    out = bytearray(int(offsets[n]))
    cdef uint8_t[::1] out_view = out
    cdef int64_t[::1] offsets_view = offsets
    cdef uint8_t *out_ptr = &out_view[0] if out_view.shape[0] else NULL
    with nogil:
        status = pe_write_many(n, parts.parts, &spec.spec, out_ptr, &offsets_view[0],
                               &bad_index, &err)
    check_status(status, &err, bad_index)
    view = memoryview(out)
    return [bytes(view[offsets[i] : offsets[i + 1]]) for i in range(n)]
