# Mirrors csrc/state_parser.h line for line: same order, every macro, enum member, struct and
# function (tests/test_native.py checks the names and their order against the header).
from libc.stdint cimport int32_t, int64_t, uint8_t


cdef extern from "state_parser.h" nogil:
    enum:
        PE_ENTITY_BYTES
        PE_ENTITY_FIELDS
        PE_MAX_TRAILER_ITEMS
        PE_MAX_TRAILER_VECTORS
        PE_MAX_GAME_NAME

    enum:
        PE_OPTIONS_AT
        PE_OPTIONS_BYTES
        PE_STEP_BYTES
        PE_BASE_BYTES
        PE_CAMERA_BYTES
        PE_TERMINATOR

    ctypedef struct pe_record_field:
        const char *name
        int32_t at
        char kind

    ctypedef enum pe_entity_field:
        PE_F_X
        PE_F_Y
        PE_F_VX
        PE_F_VY
        PE_F_RX
        PE_F_RY
        PE_F_TYPE
        PE_F_IMAGE_TYPE
        PE_F_IMAGE_THEME
        PE_F_RENDER_Z
        PE_F_WILL_ERASE
        PE_F_COLLIDES_WITH_ENTITIES
        PE_F_COLLISION_MARGIN
        PE_F_ROTATION
        PE_F_VROT
        PE_F_IS_REFLECTED
        PE_F_FIRE_TIME
        PE_F_SPAWN_TIME
        PE_F_LIFE_TIME
        PE_F_EXPIRE_TIME
        PE_F_USE_ABS_COORDS
        PE_F_FRICTION
        PE_F_SMART_STEP
        PE_F_AVOIDS_COLLISIONS
        PE_F_AUTO_ERASE
        PE_F_ALPHA
        PE_F_HEALTH
        PE_F_THETA
        PE_F_GROW_RATE
        PE_F_ALPHA_DECAY
        PE_F_CLIMBER_SPAWN_X

    const pe_record_field PE_ENTITY_RECORD[PE_ENTITY_FIELDS]

    ctypedef enum pe_camera_field:
        PE_CAM_MAIN_WIDTH
        PE_CAM_MAIN_HEIGHT
        PE_CAM_OUT_OF_BOUNDS_OBJECT
        PE_CAM_UNIT
        PE_CAM_VIEW_DIM
        PE_CAM_X_OFF
        PE_CAM_Y_OFF
        PE_CAM_VISIBILITY
        PE_CAM_MIN_VISIBILITY
        PE_CAM_GRID_W
        PE_CAM_GRID_H
        PE_CAM_GRID_COUNT
    enum:
        PE_CAMERA_FIELDS
        PE_CAMERA_SCALARS

    const pe_record_field PE_CAMERA_RECORD[PE_CAMERA_FIELDS]

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
        PE_ERR_ARG
        PE_ERR_LAYOUT
    enum:
        PE_STATUS_END

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

    ctypedef enum pe_value_kind:
        PE_V_CONST
        PE_V_SCALAR
        PE_V_LENGTH
        PE_V_GRID_W
        PE_V_GRID_H
        PE_V_GRID_CELLS

    ctypedef struct pe_value:
        int32_t kind
        int32_t index

    ctypedef struct pe_invariant:
        pe_value lhs
        pe_value rhs
        const char *name

    enum:
        PE_MAX_INVARIANTS

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
        int32_t vector_counts[PE_MAX_TRAILER_VECTORS]
        int32_t n_trailer_scalars
        int32_t trailer_item_at[PE_MAX_TRAILER_ITEMS]

    enum:
        PE_S_N_SCALARS_MAX

    int pe_scalar_count() noexcept
    const char *pe_scalar_name(int i) noexcept
    char pe_scalar_kind(int i) noexcept
    pe_status pe_scalar_position(int i, int *section, int *at) noexcept
    double pe_scalar_value(const uint8_t *buf, const pe_layout *layout, int i) noexcept
    int pe_scalar_index(const char *name) noexcept
    const char *pe_status_text(pe_status status) noexcept
    const char *pe_status_name(int status) noexcept

    int64_t pe_trailer_item_bytes(uint8_t kind) noexcept

    pe_status pe_check_spec(const pe_game_spec *spec) noexcept

    pe_status pe_read_game_name(const uint8_t *buf, int64_t len, const uint8_t **name,
                                int32_t *name_len, pe_error *err) noexcept

    pe_status pe_measure(const uint8_t *buf, int64_t len, const pe_game_spec *spec,
                         pe_layout *layout, pe_error *err) noexcept

    double pe_trailer_item_value(const uint8_t *buf, const pe_layout *layout,
                                 const pe_game_spec *spec, int32_t item) noexcept

    void pe_camera(const uint8_t *buf, const pe_layout *layout, float *center_x, float *center_y,
                   float *view_dim) noexcept

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
