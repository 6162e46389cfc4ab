# Mirrors csrc/state_writer.h line for line: same order, every macro, enum member, struct and
# function (tests/test_native.py checks the names and their order against the header).
from libc.stdint cimport int32_t, int64_t, uint8_t

from procgen_entities._native.state_parser cimport (PE_MAX_TRAILER_VECTORS, pe_error,
                                                    pe_game_spec, pe_layout, pe_status)


cdef extern from "state_writer.h" nogil:
    enum:
        PE_RNG_LEVEL_SEED
        PE_RNG_STEP
        PE_RNG_ASSET
        PE_N_RNGS

    ctypedef struct pe_rng_text:
        int32_t is_seeded
        int32_t text_len
        const uint8_t *text

    ctypedef struct pe_state_parts:
        const double *scalars
        pe_rng_text rngs[PE_N_RNGS]
        int32_t n_entities
        const uint8_t *entities
        int32_t width
        int32_t height
        const int32_t *grid
        const double *trailer_scalars
        int32_t vector_counts[PE_MAX_TRAILER_VECTORS]
        const uint8_t *vector_items[PE_MAX_TRAILER_VECTORS]

    ctypedef struct pe_spans:
        pe_rng_text rngs[PE_N_RNGS]
        int64_t vector_items_at[PE_MAX_TRAILER_VECTORS]

    void pe_locate(const uint8_t *buf, const pe_layout *layout, const pe_game_spec *spec,
                   pe_spans *spans) noexcept

    pe_status pe_write_size(const pe_state_parts *parts, const pe_game_spec *spec, int64_t *size,
                            pe_error *err) noexcept

    pe_status pe_write(const pe_state_parts *parts, const pe_game_spec *spec, uint8_t *out,
                       int64_t capacity, int64_t *written, pe_error *err) noexcept

    pe_status pe_write_size_many(int64_t n, const pe_state_parts *parts,
                                 const pe_game_spec *spec, int64_t *sizes, int64_t *bad_index,
                                 pe_error *err) noexcept
    pe_status pe_write_many(int64_t n, const pe_state_parts *parts, const pe_game_spec *spec,
                            uint8_t *out, const int64_t *offsets, int64_t *bad_index,
                            pe_error *err) noexcept
