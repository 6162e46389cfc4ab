# Mirrors csrc/episodes.h line for line: same order, every struct and function
# (tests/test_native.py checks the names and their order against the header).
from libc.stdint cimport int32_t, int64_t, uint8_t


cdef extern from "episodes.h" nogil:
    int64_t pe_episode_step(int64_t n, const uint8_t *resetting, float *reward,
                            const uint8_t *done, uint8_t *terminated, uint8_t *truncated,
                            double *returns, int64_t *lengths, float *final_return,
                            int32_t *final_length) noexcept
