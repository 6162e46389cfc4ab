# Mirrors csrc/state_parser.h.
from libc.stdint cimport int32_t, int64_t, uint8_t


cdef extern from "state_parser.h" nogil:
    enum:
        PE_ENTITY_BYTES
        PE_ENTITY_FIELDS
        PE_MAX_TRAILER_ITEMS
        PE_MAX_TRAILER_VECTORS
        PE_MAX_GAME_NAME
        PE_MAX_INVARIANTS
        PE_OPTIONS_AT
        PE_OPTIONS_BYTES
        PE_STEP_BYTES
        PE_BASE_BYTES
        PE_CAMERA_BYTES
        PE_TERMINATOR
        PE_S_N_SCALARS_MAX

    ctypedef enum pe_status:
        PE_OK
        PE_ERR_TRUNCATED
        PE_ERR_VERSION
        PE_ERR_GAME
        PE_ERR_NEGATIVE
        PE_ERR_GRID
        PE_ERR_PLAYER
        PE_ERR_BOOL
        PE_ERR_TERMINATOR
        PE_ERR_TRAILING
        PE_ERR_SHAPE
        PE_ERR_SPEC
        PE_ERR_INVARIANT
        PE_ERR_VALUE
        PE_ERR_SPACE
        PE_ERR_MEMORY

    ctypedef struct pe_error:
        pe_status status
        int64_t offset
        const char *field

    ctypedef enum pe_trailer_kind:
        PE_T_I32
        PE_T_F32
        PE_T_BOOL
        PE_T_VEC_I32
        PE_T_VEC_F32
        PE_T_VEC_BOOL
        PE_T_VEC_ENTITY

    ctypedef struct pe_value:
        int32_t kind
        int32_t index

    ctypedef struct pe_invariant:
        pe_value lhs
        pe_value rhs
        const char *name

    ctypedef struct pe_game_spec:
        const char *name
        int32_t name_len
        int32_t n_trailer
        const uint8_t *trailer_kinds
        const char *const *trailer_names
        int32_t n_invariants
        const pe_invariant *invariants

    ctypedef struct pe_layout:
        int64_t size
        int64_t step_at
        int64_t entities_at
        int64_t base_at
        int64_t camera_at
        int64_t grid_at
        int64_t trailer_at
        int32_t name_len
        int32_t n_entities
        int32_t width
        int32_t height
        int32_t n_vectors
        int32_t vector_counts[8]
        int32_t n_trailer_scalars
        int32_t trailer_item_at[48]

    int pe_scalar_count() noexcept
    double pe_scalar_value(const uint8_t *buf, const pe_layout *layout, int i) noexcept
    int pe_scalar_index(const char *name) noexcept
    const char *pe_scalar_name(int i) noexcept
    char pe_scalar_kind(int i) noexcept
    int pe_scalar_position(int i, int *section, int *at) noexcept
    int pe_entity_field_is_int(int i) noexcept
    const char *pe_status_text(pe_status status) noexcept
    int64_t pe_trailer_item_bytes(uint8_t kind) noexcept
    pe_status pe_check_spec(const pe_game_spec *spec) noexcept
    pe_status pe_read_game_name(const uint8_t *buf, int64_t len, const uint8_t **name,
                                int32_t *name_len, pe_error *err) noexcept
    pe_status pe_measure(const uint8_t *buf, int64_t len, const pe_game_spec *spec,
                         pe_layout *layout, pe_error *err) noexcept
    void pe_fill(const uint8_t *buf, const pe_layout *layout, const pe_game_spec *spec,
                 double *scalars, const int32_t *entity_fields, int32_t n_fields,
                 float *entities, int32_t *grid, double *trailer_scalars,
                 double *vector_values) noexcept
    int64_t pe_vector_value_count(const pe_layout *layout, const pe_game_spec *spec) noexcept
    pe_status pe_measure_many(int64_t n, const uint8_t *const *bufs, const int64_t *lens,
                              const pe_game_spec *spec, pe_layout *layouts, int64_t *bad_index,
                              pe_error *err) noexcept
    void pe_fill_many(int64_t n, const uint8_t *const *bufs, const pe_layout *layouts,
                      const pe_game_spec *spec, double *scalars, const int32_t *entity_fields,
                      int32_t n_fields, float *entities, const int64_t *entity_offsets,
                      int32_t *grid, double *trailer_scalars, double *vector_values,
                      const int64_t *vector_offsets) noexcept
