# cython: language_level=3
"""Marshalling between Python objects and the C tilemap kernels (csrc/tilemap.c).

No decisions live here: tilemap.py builds the class LUT and the crops; this module runs the
count pass, allocates the outputs from its counts, runs the fill pass (both with the GIL
released) and turns C statuses into exceptions (_status.check_status).
"""
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t
from libc.stdlib cimport malloc, free

from procgen_entities._native._status cimport check_status
from procgen_entities._native.tilemap cimport *

import numpy as np

from procgen_entities.errors import UsageError

MODES = {"tiles": TM_TILES, "runs": TM_RUNS, "columns": TM_COLUMNS, "chunks": TM_CHUNKS}
MAX_CLASSES = TM_MAX_CLASSES
MAX_CROP = TM_MAX_CROP
MAX_IMAGE = TM_MAX_IMAGE


def n_types(int mode, int n_classes):
    return tm_n_types(<tm_mode>mode, n_classes)


def n_features(int mode, int t, int n_classes, bint with_rel):
    return tm_n_features(<tm_mode>mode, t, n_classes, with_rel)


cdef class TileSpec:
    """A game's tile classes in the form the C kernels read (the LUT is copied and held)."""
    cdef tm_spec spec
    cdef bytes _lut

    def __cinit__(self, bytes lut, int n_classes, int oob_class, int base_class, int top_class):
        self._lut = lut
        self.spec.lut = <const int8_t *><const char *>self._lut
        self.spec.lut_size = len(lut)
        self.spec.n_classes = n_classes
        self.spec.oob_class = oob_class
        self.spec.base_class = base_class
        self.spec.top_class = top_class
        check_status(tm_check_spec(&self.spec))


def convert(const int32_t[:, :, ::1] grids, TileSpec spec, int mode, int chunk,
            const int32_t[:, ::1] crops, const float[:, ::1] refs):
    """Count, allocate, fill. Returns (list of float32 [rows, F] per entity type, int64 [n, T]).

    grids [n, H, W]; crops [n, 4] = (x0, y0, w, h); refs [n, 2] or None (no rel_x/rel_y)."""
    cdef int64_t n = grids.shape[0]
    cdef int32_t height = <int32_t>grids.shape[1], width = <int32_t>grids.shape[2]
    cdef int32_t nc = spec.spec.n_classes
    cdef int32_t nt = tm_n_types(<tm_mode>mode, nc)
    cdef int with_rel = refs is not None
    cdef tm_status status
    if nt < 0:
        raise UsageError(f"unknown tilemap mode code {mode}")
    if crops.shape[0] != n or crops.shape[1] != 4:
        raise UsageError(f"crops must have shape ({n}, 4), got ({crops.shape[0]}, {crops.shape[1]})")
    if with_rel and (refs.shape[0] != n or refs.shape[1] != 2):
        raise UsageError(f"refs must have shape ({n}, 2), got ({refs.shape[0]}, {refs.shape[1]})")
    cdef const int32_t *crops_ptr = &crops[0, 0] if n else NULL
    cdef float no_refs[2]  # with_rel and n == 0: a valid pointer that is never read
    cdef const float *refs_ptr = NULL
    if with_rel:
        refs_ptr = &refs[0, 0] if n else no_refs
    cdef const int32_t *grids_ptr = &grids[0, 0, 0] if (n and height and width) else NULL
    cdef int64_t scratch_size = 0
    with nogil:
        status = tm_scratch_size(n, crops_ptr, &scratch_size)
    if status != TM_OK:
        raise UsageError(f"invalid crop: widths and heights must be in [0, {TM_MAX_CROP}]")
    scratch_arr = np.empty(max(1, scratch_size), dtype=np.int8)
    cdef int8_t[::1] scratch = scratch_arr
    counts_arr = np.empty((n, nt), dtype=np.int64)
    cdef int64_t[:, ::1] counts = counts_arr
    cdef int64_t *counts_ptr = &counts[0, 0] if n else NULL
    if n and not (height and width):
        grids_ptr = <const int32_t *>&scratch[0]  # never read: every crop cell is out of bounds
    with nogil:
        status = tm_count_many(n, grids_ptr, height, width, &spec.spec, <tm_mode>mode, chunk,
                               crops_ptr, &scratch[0], scratch_size, counts_ptr)
    check_status(status)

    totals = counts_arr.sum(axis=0) if n else np.zeros(nt, dtype=np.int64)
    outs = _fill(n, spec, mode, chunk, nt, with_rel, crops_ptr, refs_ptr, &scratch[0],
                 scratch_size, counts_ptr, totals)
    return outs, counts_arr


cdef list _fill(int64_t n, TileSpec spec, int mode, int chunk, int32_t nt, int with_rel,
                const int32_t *crops_ptr, const float *refs_ptr, int8_t *scratch,
                int64_t scratch_size, int64_t *counts_ptr, totals):
    """convert's second pass: each type's float32 [totals[t], features] rows, allocated here and
    filled by tm_fill_many (the counts of the first pass say where each state's rows go)."""
    outs = []
    cdef int32_t t, nc = spec.spec.n_classes
    cdef tm_status status
    cdef float **out_ptrs = <float **>malloc(nt * sizeof(float *))
    cdef int64_t *caps = <int64_t *>malloc(nt * sizeof(int64_t))
    cdef int32_t *nf = <int32_t *>malloc(nt * sizeof(int32_t))
    cdef float[:, ::1] view
    if out_ptrs == NULL or caps == NULL or nf == NULL:
        free(out_ptrs); free(caps); free(nf)
        raise MemoryError()
    try:
        for t in range(nt):
            nf[t] = tm_n_features(<tm_mode>mode, t, nc, with_rel)
            caps[t] = totals[t]
            arr = np.empty((caps[t], nf[t]), dtype=np.float32)
            outs.append(arr)
            view = arr
            out_ptrs[t] = &view[0, 0] if caps[t] else NULL
        with nogil:
            status = tm_fill_many(n, &spec.spec, <tm_mode>mode, chunk, crops_ptr, refs_ptr,
                                  scratch, scratch_size, counts_ptr, out_ptrs, caps, nf)
        check_status(status)
    finally:
        free(out_ptrs)
        free(caps)
        free(nf)
    return outs


def class_images(const int32_t[:, :, ::1] grids, TileSpec spec, const int32_t[:, ::1] crops,
                 uint8_t[:, :, ::1] out):
    """grids int32 [n, H, W], crops int32 [n, 4] -> out uint8 [n, S, S] (class + 1, row 0 =
    top), written in place with the GIL released."""
    cdef int64_t n = grids.shape[0]
    cdef int32_t height = <int32_t>grids.shape[1], width = <int32_t>grids.shape[2]
    cdef int32_t size = <int32_t>out.shape[1]
    if crops.shape[0] != n or crops.shape[1] != 4 or out.shape[0] != n or out.shape[2] != size:
        raise UsageError(f"class_images: {n} grids need crops [{n}, 4] and out [{n}, S, S]")
    if n == 0:
        return
    cdef const int32_t *grids_ptr = &grids[0, 0, 0] if (height and width) else NULL
    cdef tm_status status
    with nogil:
        status = tm_class_image_many(n, grids_ptr, height, width, &spec.spec, &crops[0, 0],
                                     size, &out[0, 0, 0])
    check_status(status)
