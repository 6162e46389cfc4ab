# Mirrors csrc/thread_pool.h line for line: same order, every struct and function
# (tests/test_native.py checks the names and their order against the header).
from libc.stdint cimport int64_t


cdef extern from "thread_pool.h" nogil:
    ctypedef struct pe_pool:
        pass
    ctypedef void (*pe_task_fn)(void *ctx, int64_t i) noexcept nogil

    pe_pool *pe_pool_create(int num_threads) noexcept
    int pe_pool_threads(const pe_pool *pool) noexcept
    void pe_pool_run(pe_pool *pool, int64_t n, pe_task_fn fn, void *ctx) noexcept
    void pe_pool_destroy(pe_pool *pool) noexcept
