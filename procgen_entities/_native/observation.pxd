# Mirrors csrc/observation.h line for line: same order, every macro, enum member, struct and
# function (tests/test_native.py checks the names and their order against the header).
from libc.stdint cimport int32_t, int64_t, uint8_t

from procgen_entities._native.live_game cimport pe_live_outputs, pe_live_source
from procgen_entities._native.state_parser cimport pe_error, pe_game_spec, pe_status
from procgen_entities._native.state_set cimport pe_entity_plan, pe_state_set
from procgen_entities._native.thread_pool cimport pe_pool
from procgen_entities._native.tilemap cimport tm_spec


cdef extern from "observation.h" nogil:
    enum:
        PE_OBS_MAX_TYPES
        PE_OBS_MAX_GLOBALS
        PE_OBS_MAX_SUPPORT
        PE_OBS_VECTOR_ITEMS

    ctypedef enum pe_global_op:
        PE_G_SCALAR
        PE_G_TRAILER
        PE_G_STEP_FRACTION
        PE_G_EAT_TIME_LEFT
        PE_G_EDIBLE
        PE_G_DIFFERENCE
        PE_G_IS_ZERO
        PE_G_VECTOR_ITEM
        PE_G_ON_GROUND
        PE_G_N_OPS

    ctypedef enum pe_derived_feature:
        PE_D_NONE
        PE_D_IS_TARGET

    ctypedef enum pe_image_centre:
        PE_IMAGE_CAMERA
        PE_IMAGE_PLAYER

    ctypedef struct pe_obs_type:
        int32_t cap
        int32_t width
        int32_t cx, cy
        int32_t from_player

    ctypedef struct pe_obs_support:
        int32_t n_tiles
        int32_t tiles[PE_OBS_MAX_SUPPORT]
        int32_t flag
        int32_t at_rest

    ctypedef struct pe_obs_spec:
        const pe_entity_plan *plan
        const int32_t *derived
        int32_t target_vector
        const tm_spec *tiles
        int32_t tile_mode, chunk
        const tm_spec *image
        int32_t image_size
        int32_t image_centre
        const uint8_t *image_marks
        int32_t image_boxes
        int32_t n_types
        pe_obs_type types[PE_OBS_MAX_TYPES]
        int32_t player_type, player_cx, player_cy
        int32_t n_globals
        int32_t global_ops[3 * PE_OBS_MAX_GLOBALS]
        pe_obs_support support

    ctypedef struct pe_obs_out:
        float *values[PE_OBS_MAX_TYPES]
        uint8_t *masks[PE_OBS_MAX_TYPES]
        int64_t *counts
        float *globals
        uint8_t *image
        int64_t *dropped
        float *reward
        uint8_t *done
        uint8_t *level_complete
        int64_t *level_seed
        int64_t *prev_level_seed

    ctypedef struct pe_obs_builder:
        pass

    pe_obs_builder *pe_obs_create(const pe_obs_spec *spec, const pe_game_spec *game, int64_t n,
                                  pe_status *status) noexcept
    void pe_obs_destroy(pe_obs_builder *builder) noexcept

    pe_status pe_obs_from_states(pe_pool *pool, pe_obs_builder *builder, const pe_state_set *set,
                                 const int64_t *indices, int64_t count, const pe_obs_out *out,
                                 int64_t *bad_index, pe_error *err) noexcept

    pe_status pe_obs_from_live(pe_pool *pool, pe_obs_builder *builder,
                               const pe_live_source *source, const pe_obs_out *out,
                               int64_t *bad_index, pe_error *err) noexcept

    pe_status pe_obs_step_live(pe_pool *pool, pe_obs_builder *builder,
                               const pe_live_source *source, const int32_t *actions,
                               pe_state_set *terminal_set, const pe_game_spec *game_spec,
                               int flags, pe_live_outputs *outputs, const pe_obs_out *out,
                               int64_t *bad_index, pe_error *err) noexcept

    ctypedef struct pe_obs_rows:
        float *rows
        int64_t capacity
        int32_t width
        const int32_t *columns

    pe_status pe_obs_ragged_rows(pe_pool *pool, pe_obs_builder *builder, int64_t count,
                                 const pe_obs_rows *out, int64_t *totals, pe_error *err) noexcept
