# Mirrors csrc/live_game.h line for line: same order, every macro, enum member, struct and
# function (tests/test_native.py checks the names and their order against the header).
from libc.stdint cimport int32_t, int64_t, uint8_t

from procgen_entities._native.state_parser cimport (PE_ENTITY_FIELDS, PE_MAX_TRAILER_ITEMS,
                                                    PE_S_N_SCALARS_MAX, pe_error, pe_game_spec,
                                                    pe_status)
from procgen_entities._native.state_set cimport pe_get_state_fn, pe_state_set
from procgen_entities._native.thread_pool cimport pe_pool


cdef extern from "live_game.h" nogil:
    ctypedef enum pe_live_op:
        PE_OP_CONST
        PE_OP_NAME
        PE_OP_W4
        PE_OP_B1
        PE_OP_RNG
        PE_OP_ENTITIES
        PE_OP_GRID
        PE_OP_VEC4
        PE_OP_VECBOOL
        PE_OP_END

    enum:
        PE_LIVE_MAX_ITEMS

    ctypedef struct pe_live_map:
        int32_t scalar_at[PE_S_N_SCALARS_MAX]
        uint8_t scalar_kind[PE_S_N_SCALARS_MAX]
        int32_t trailer_at[PE_MAX_TRAILER_ITEMS]
        uint8_t trailer_kind[PE_MAX_TRAILER_ITEMS]
        int32_t entity_at[PE_ENTITY_FIELDS]
        uint8_t entity_kind[PE_ENTITY_FIELDS]
        int32_t entities_at
        int32_t agent_at
        int32_t grid_at

    ctypedef void (*pe_game_fn)(void *game) noexcept nogil
    ctypedef void (*pe_draw_prep_fn)(void *game, float rect_height) noexcept nogil

    ctypedef struct pe_live_spec:
        const int32_t *program
        int32_t n_program
        const int32_t *entity_program
        int32_t n_entity_program
        const char *name
        int32_t name_len
        int32_t games_at
        int32_t grid_data_at
        int32_t action_at, cur_time_at, reward_at, done_at, level_complete_at, timeout_at, \
            total_reward_at, last_reward_timer_at, last_reward_at, prev_level_seed_at, \
            current_level_seed_at, use_sequential_levels_at, episode_done_at, default_action_at
        int32_t game_step_slot
        int32_t observe_slot
        pe_game_fn game_reset
        pe_draw_prep_fn prepare_for_drawing
        float render_height
        pe_live_map map

    pe_status pe_live_games(const pe_live_spec *spec, const void *vecgame, void **out,
                            int64_t max, int64_t *count) noexcept

    pe_status pe_live_write(const pe_live_spec *spec, const void *game, uint8_t *buf,
                            int64_t capacity, int64_t *written) noexcept

    ctypedef struct pe_live_source:
        const pe_live_spec *spec
        void *const *games
        int64_t n_games
    int pe_live_get_state(void *source, int index, char *buffer, int length) noexcept

    ctypedef struct pe_live_full_source:
        pe_get_state_fn get_state
        void *env
        const pe_live_source *source
    int pe_live_full_get_state(void *source, int index, char *buffer, int length) noexcept

    ctypedef struct pe_live_outputs:
        uint8_t *truncated
        uint8_t *terminal
        uint8_t *pending

    enum:
        PE_LIVE_DEFER_RESET
        PE_LIVE_RESET_ONLY

    pe_status pe_live_step(pe_pool *pool, const pe_live_source *source, const int32_t *actions,
                           int32_t count, int64_t first, pe_state_set *set,
                           pe_state_set *terminal_set, const pe_game_spec *game_spec, int flags,
                           pe_live_outputs *outputs, int64_t *bad_index, pe_error *err) noexcept

    int pe_live_step_game(const pe_live_spec *spec, void *game, int32_t action, int flags,
                          int64_t i, pe_state_set *terminal_set, const pe_game_spec *game_spec,
                          pe_live_outputs *outputs) noexcept

    void pe_live_prepare(const pe_live_spec *spec, void *game) noexcept

    void pe_live_observe(const pe_live_spec *spec, void *game) noexcept
