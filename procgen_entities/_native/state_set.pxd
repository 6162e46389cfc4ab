# Mirrors csrc/state_set.h line for line: same order, every macro, struct and function
# (tests/test_native.py checks the names and their order against the header).
from libc.stdint cimport int32_t, int64_t, uint8_t

from procgen_entities._native.state_parser cimport pe_error, pe_game_spec, pe_layout, pe_status
from procgen_entities._native.thread_pool cimport pe_pool


cdef extern from "state_set.h" nogil:
    ctypedef int (*pe_get_state_fn)(void *env, int index, char *buffer, int length) noexcept nogil

    ctypedef struct pe_state_set:
        int64_t n
        int64_t capacity
        uint8_t **buffers
        int64_t *lengths
        pe_layout *layouts
        pe_status *status
        pe_error *errors

    pe_state_set *pe_state_set_create(int64_t n, int64_t capacity) noexcept
    void pe_state_set_destroy(pe_state_set *set) noexcept

    void pe_state_set_accept(pe_state_set *set, int64_t i, int64_t written,
                             const pe_game_spec *spec, const char *source) noexcept

    pe_status pe_collect(pe_pool *pool, pe_get_state_fn get_state, void *env, int32_t count,
                         int64_t first, pe_state_set *set, const pe_game_spec *spec,
                         int64_t *bad_index, pe_error *err) noexcept

    void pe_fill_states(pe_pool *pool, const pe_state_set *set, const pe_game_spec *spec,
                        double *scalars, double *trailer_scalars, int32_t *grid) noexcept

    double PE_CELL_OUTSIDE

    void pe_fill_vector_heads(pe_pool *pool, const pe_state_set *set, const pe_game_spec *spec,
                              int32_t max_items, double *heads, int64_t *lengths) noexcept

    double pe_trailer_scalar(const uint8_t *buf, const pe_layout *layout,
                             const pe_game_spec *spec, int32_t index) noexcept

    enum:
        PE_FEATURE_REL_X
        PE_FEATURE_REL_Y
        PE_MAX_SLOTS

    ctypedef struct pe_entity_plan:
        int32_t n_slots
        int32_t lut_size
        const int32_t *type_to_slot
        const int32_t *feature_start
        const int32_t *features
        const int32_t *condition
        const uint8_t *windowed

    ctypedef enum pe_mode_bit:
        PE_MODE_EASY_BIT
        PE_MODE_HARD_BIT
        PE_MODE_EXTREME_BIT
        PE_MODE_MEMORY_BIT
        PE_MODE_OTHER_BIT

    uint8_t pe_mode_bit_of(double mode) noexcept

    pe_status pe_plan_check(const pe_entity_plan *plan, const pe_game_spec *spec) noexcept
