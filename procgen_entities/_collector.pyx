# cython: language_level=3
"""Marshalling for csrc/state_set.c: procgen get_state on a thread pool, parsed in place.

Only collect (get_state + validation, ~40-80 µs per env) uses the pool; filling and gathering
cost a few µs per state and run on the calling thread, where they are cheaper than a wake-up.

The Python side (vec_env.py) decides what to gather; this class holds the C objects, checks
shapes and releases the GIL around every C call.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uintptr_t

from procgen_entities._parser cimport GameSpec, raise_status
from procgen_entities.state_parser cimport PE_OK, pe_error, pe_scalar_count, pe_status
from procgen_entities.state_set cimport *
from procgen_entities.thread_pool cimport pe_pool, pe_pool_create, pe_pool_destroy

import numpy as np

#: procgen's own get_state buffer size; a smaller buffer makes procgen abort the process.
DEFAULT_CAPACITY = 1 << 20
FEATURE_REL_X = PE_FEATURE_REL_X
FEATURE_REL_Y = PE_FEATURE_REL_Y
MAX_SLOTS = PE_MAX_SLOTS


cdef class StateCollector:
    """Per-env state buffers, a thread pool, and one entity plan."""
    cdef pe_pool *pool
    cdef pe_state_set *set
    cdef GameSpec spec
    cdef pe_entity_plan plan
    cdef object _plan_arrays
    cdef readonly int num_threads
    cdef readonly Py_ssize_t num_states
    cdef readonly bint has_plan

    def __cinit__(self, GameSpec spec, Py_ssize_t num_states, int num_threads,
                  Py_ssize_t capacity=DEFAULT_CAPACITY):
        if num_threads < 1:
            raise ValueError(f"num_threads must be >= 1, got {num_threads}")
        if num_states < 1:
            raise ValueError(f"num_states must be >= 1, got {num_states}")
        self.spec = spec
        self.num_threads = num_threads
        self.num_states = num_states
        self.set = pe_state_set_create(num_states, capacity)
        self.pool = pe_pool_create(num_threads)
        if self.set == NULL or self.pool == NULL:
            self.close()
            raise MemoryError("could not create the state buffers or the thread pool")

    def __dealloc__(self):
        self.close()

    def close(self):
        """Join the pool and free the buffers; safe to call more than once."""
        if self.pool != NULL:
            with nogil:
                pe_pool_destroy(self.pool)
            self.pool = NULL
        if self.set != NULL:
            pe_state_set_destroy(self.set)
            self.set = NULL

    cdef int _check_open(self) except -1:
        if self.pool == NULL:
            raise RuntimeError("the state collector is closed")
        return 0

    def set_plan(self, const int32_t[::1] type_to_slot, const int32_t[::1] feature_start,
                 const int32_t[::1] features, const int32_t[::1] condition):
        n_slots = condition.shape[0]
        if feature_start.shape[0] != n_slots + 1 or features.shape[0] < feature_start[n_slots]:
            raise ValueError("entity plan arrays have inconsistent lengths")
        self._plan_arrays = (type_to_slot, feature_start, features, condition)
        self.plan.n_slots = <int32_t>n_slots
        self.plan.lut_size = <int32_t>type_to_slot.shape[0]
        self.plan.type_to_slot = &type_to_slot[0] if type_to_slot.shape[0] else NULL
        self.plan.feature_start = &feature_start[0]
        self.plan.features = &features[0] if features.shape[0] else NULL
        self.plan.condition = &condition[0] if n_slots else NULL
        if pe_plan_check(&self.plan, &self.spec.spec) != 0:
            self.has_plan = False
            raise ValueError("invalid entity plan")
        self.has_plan = True

    def collect(self, uintptr_t get_state, uintptr_t env, int count, Py_ssize_t first):
        """procgen get_state for envs [0, count) of `env` into slots [first, first + count)."""
        self._check_open()
        cdef int64_t bad_index = -1
        cdef pe_error err
        cdef pe_status status
        with nogil:
            status = pe_collect(self.pool, <pe_get_state_fn>get_state, <void *>env, count, first,
                                self.set, &self.spec.spec, &bad_index, &err)
        raise_status(status, &err, bad_index)

    def fill(self, double[:, ::1] scalars, double[:, ::1] trailer_scalars,
             int32_t[:, :, ::1] grid=None):
        """Header/base scalars [n, S], trailer scalars [n, T] and optionally grids [n, H, W]."""
        self._check_open()
        cdef Py_ssize_t n = self.num_states
        if scalars.shape[0] != n or scalars.shape[1] != pe_scalar_count():
            raise ValueError("scalars has the wrong shape")
        if trailer_scalars.shape[0] != n or trailer_scalars.shape[1] != self.spec.n_trailer_scalars:
            raise ValueError("trailer_scalars has the wrong shape")
        cdef int32_t *grid_ptr = NULL
        cdef Py_ssize_t i
        if grid is not None:
            for i in range(n):
                if (self.set.layouts[i].height != grid.shape[1]
                        or self.set.layouts[i].width != grid.shape[2]):
                    raise ValueError("grid has the wrong shape for the collected states")
            if grid.shape[0] != n:
                raise ValueError("grid has the wrong number of states")
            if grid.shape[1] * grid.shape[2]:
                grid_ptr = &grid[0, 0, 0]
        cdef double *trailer_ptr = &trailer_scalars[0, 0] if trailer_scalars.shape[1] else NULL
        with nogil:
            pe_fill_states(NULL, self.set, &self.spec.spec, &scalars[0, 0], trailer_ptr,
                           grid_ptr)

    def vector_heads(self, double[:, :, ::1] heads, int64_t[:, ::1] lengths):
        """The first heads.shape[2] items of each trailer vector, zero-padded, and the lengths."""
        self._check_open()
        cdef Py_ssize_t n_vec = self.spec.n_trailer_vectors
        if (heads.shape[0] != self.num_states or heads.shape[1] != n_vec
                or lengths.shape[0] != self.num_states or lengths.shape[1] != n_vec):
            raise ValueError("heads/lengths have the wrong shape")
        if n_vec == 0 or heads.shape[2] == 0:
            return
        with nogil:
            pe_fill_vector_heads(NULL, self.set, &self.spec.spec, <int32_t>heads.shape[2],
                                 &heads[0, 0, 0], &lengths[0, 0])

    def grid_shape(self):
        self._check_open()
        return (self.set.layouts[0].height, self.set.layouts[0].width)

    def count(self, int64_t[:, ::1] counts):
        """counts[s, i]: entities of state i gathered into slot s."""
        self._check_open()
        if not self.has_plan:
            raise RuntimeError("set_plan first")
        if counts.shape[0] != self.plan.n_slots or counts.shape[1] != self.num_states:
            raise ValueError("counts has the wrong shape")
        if self.plan.n_slots == 0:
            return
        with nogil:
            pe_plan_count(NULL, &self.plan, self.set, &self.spec.spec, &counts[0, 0])

    def gather(self, const int64_t[:, ::1] counts, const int64_t[::1] slot_offsets,
               float[::1] out):
        """Entity features of every slot into `out` (slot s from slot_offsets[s])."""
        self._check_open()
        cdef Py_ssize_t s, i, rows, end
        cdef int rc = 0
        if counts.shape[0] != self.plan.n_slots or counts.shape[1] != self.num_states:
            raise ValueError("counts has the wrong shape")
        if slot_offsets.shape[0] < self.plan.n_slots:
            raise ValueError("slot_offsets is too short")
        for s in range(self.plan.n_slots):
            rows = 0
            for i in range(self.num_states):
                rows += counts[s, i]
            end = slot_offsets[s] + rows * (self.plan.feature_start[s + 1] - self.plan.feature_start[s])
            if slot_offsets[s] < 0 or end > out.shape[0]:
                raise ValueError("out is too small for the gathered entities")
        if self.plan.n_slots == 0 or out.shape[0] == 0:
            return
        with nogil:
            rc = pe_plan_fill(NULL, &self.plan, self.set, &self.spec.spec, &counts[0, 0],
                              &slot_offsets[0], &out[0])
        if rc != 0:
            raise MemoryError()

    def state_bytes(self, Py_ssize_t i):
        """A copy of the raw get_state bytes of state i from the last collect."""
        self._check_open()
        if i < 0 or i >= self.num_states:
            raise IndexError(i)
        return <bytes>(<char *>self.set.buffers[i])[:self.set.lengths[i]]
