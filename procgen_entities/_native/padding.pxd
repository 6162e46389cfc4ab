# Mirrors csrc/padding.h line for line: same order, every struct and function
# (tests/test_native.py checks the names and their order against the header).
from libc.stdint cimport int32_t, int64_t, uint8_t

from procgen_entities._native.state_parser cimport pe_status


cdef extern from "padding.h" nogil:
    ctypedef struct pe_ranked:
        float distance
        int64_t row

    pe_status pe_pad_rows(const float *rows, const int64_t *counts, int64_t n, int32_t width,
                          int32_t cap, int32_t cx, int32_t cy, const float *player, float *out,
                          uint8_t *mask, int64_t *dropped) noexcept

    int64_t pe_pad_env(const float *rows, int64_t count, int32_t width, int32_t cap, int32_t cx,
                       int32_t cy, const float *player, pe_ranked *order, float *out,
                       uint8_t *mask) noexcept
