/* procgen's live games: read them into get_state-format bytes without procgen's serializer, and
 * step them headlessly (procgen's Game::step without its render).
 *
 * Nothing here knows procgen's layout: the caller (procgen_entities/engine) passes a pe_live_spec
 * built from the layout table of a known libenv build (checked against that library's DWARF and
 * build id). The bytes written follow get_state's format exactly, except that the three RNG texts
 * are empty (is_seeded is kept): those 20 KB of decimal text are most of get_state's cost and no
 * observation uses them. pe_measure and everything downstream read such states unchanged.
 *
 * Safety: call only while procgen's own stepping threads hold no game (after gym3's observe or
 * get_state, before its next act) and never on a vec env that gym3 may step concurrently.
 * Reads of procgen's containers are validated (pointer alignment, begin <= end, item counts
 * within limits) and every write is bounds-checked against the output buffer.
 *
 * The step logic reproduces procgen 0.10.7's Game::step (src/game.cpp:120-155, MIT, Copyright (c)
 * 2019 OpenAI) minus observe(); the game's own game_step/reset/prepare_for_drawing do the work.
 */
#ifndef PE_LIVE_GAME_H
#define PE_LIVE_GAME_H

#include <stdint.h>

#include "state_parser.h"
#include "state_set.h"
#include "thread_pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Program ops: (op, arg) pairs executed in order to write one state. */
typedef enum {
    PE_OP_CONST = 0,     /* write the i32 arg */
    PE_OP_NAME = 1,      /* write the game name as i32 length + bytes */
    PE_OP_W4 = 2,        /* copy the 4-byte member at arg (int, float, enum) */
    PE_OP_B1 = 3,        /* the 1-byte bool member at arg, written as i32 0/1 */
    PE_OP_RNG = 4,       /* RandGen: arg = offset of its is_seeded; written as is_seeded + empty text */
    PE_OP_ENTITIES = 5,  /* std::vector<std::shared_ptr<Entity>> at arg: count + records */
    PE_OP_GRID = 6,      /* Grid<int> at arg: w, h, then its std::vector<int> data (count + items) */
    PE_OP_VEC4 = 7,      /* std::vector<int> or std::vector<float> at arg: count + items */
    PE_OP_VECBOOL = 8,   /* std::vector<bool> at arg: count + one i32 0/1 per item */
    PE_OP_END = 9        /* the terminator 0xCAFECAFE */
} pe_live_op;

#define PE_LIVE_MAX_ITEMS (1 << 22)  /* refuse containers larger than this (a bad layout) */

/* Where a live game keeps what an observation reads, from the layout table (member byte offsets in
 * the game object; kinds are pe_trailer_kind codes, where PE_T_BOOL is a 1-byte C++ bool). */
typedef struct {
    int32_t scalar_at[PE_S_N_SCALARS_MAX];     /* header/base scalar i (pe_scalar_name order) */
    uint8_t scalar_kind[PE_S_N_SCALARS_MAX];
    int32_t trailer_at[PE_MAX_TRAILER_ITEMS];  /* trailer item i of the game spec */
    uint8_t trailer_kind[PE_MAX_TRAILER_ITEMS];
    int32_t entity_at[PE_ENTITY_FIELDS];       /* entity field f within an Entity */
    uint8_t entity_kind[PE_ENTITY_FIELDS];
    int32_t entities_at;                       /* BasicAbstractGame::entities */
    int32_t agent_at;                          /* BasicAbstractGame::agent (shared_ptr<Entity>) */
    int32_t grid_at;                           /* BasicAbstractGame::grid (w, h, then data) */
} pe_live_map;

typedef void (*pe_game_fn)(void *game);
typedef void (*pe_draw_prep_fn)(void *game, float rect_height);

typedef struct {
    const int32_t *program;         /* n_program (op, arg) pairs */
    int32_t n_program;
    const int32_t *entity_program;  /* (op, arg) pairs for one entity: PE_OP_W4 / PE_OP_B1 */
    int32_t n_entity_program;
    const char *name;
    int32_t name_len;
    int32_t games_at;               /* VecGame::games (std::vector<std::shared_ptr<Game>>) */
    int32_t grid_data_at;           /* Grid<int>::data within the grid */
    /* Game members used by the step (byte offsets in the game object). */
    int32_t action_at, cur_time_at, reward_at, done_at, level_complete_at, timeout_at,
        total_reward_at, last_reward_timer_at, last_reward_at, prev_level_seed_at,
        current_level_seed_at, use_sequential_levels_at, episode_done_at, default_action_at;
    int32_t game_step_slot;         /* vtable slot of Game::game_step */
    int32_t observe_slot;           /* vtable slot of Game::observe */
    pe_game_fn game_reset;          /* Game::reset (non-virtual) */
    pe_draw_prep_fn prepare_for_drawing;  /* BasicAbstractGame::prepare_for_drawing */
    float render_height;            /* the height procgen renders observations at (64) */
    pe_live_map map;                /* what observation.c reads without writing a state */
} pe_live_spec;

/* The game objects of a VecGame: up to max pointers into out, their number in *count.
 * PE_ERR_LAYOUT if the games vector does not look valid, PE_ERR_SPACE if it holds more than max. */
pe_status pe_live_games(const pe_live_spec *spec, const void *vecgame, void **out, int64_t max,
                        int64_t *count);

/* Write one game's state into buf (capacity bytes), its length in *written. PE_ERR_SPACE if it
 * does not fit, PE_ERR_LAYOUT if a container looks invalid, PE_ERR_SPEC for a bad program. */
pe_status pe_live_write(const pe_live_spec *spec, const void *game, uint8_t *buf,
                        int64_t capacity, int64_t *written);

/* Context for pe_live_get_state, which has pe_get_state_fn's signature so that pe_collect reads
 * live games exactly as it reads procgen's get_state (and keeps its convention: the length, or
 * -1 when the state could not be written, which pe_state_set_accept records). */
typedef struct {
    const pe_live_spec *spec;
    void *const *games;
    int64_t n_games;
} pe_live_source;
int pe_live_get_state(void *source, int index, char *buffer, int length);

/* The player that left the world. procgen's entities hold the player (BasicAbstractGame::agent)
 * first, but a player out of bounds (auto_erase, as every entity) is erased by the step that ends
 * the episode (basic-abstract-game.cpp game_step: erase_if_needed, then done). procgen resets at
 * once, so only the headless engine shows that terminal state; every state this package writes or
 * reads of it (pe_live_write, the observation's live read, pe_live_full_get_state) has the agent
 * put back first, where it left. */

/* Context for pe_live_full_get_state: procgen's own get_state of one vec env and its live games. */
typedef struct {
    pe_get_state_fn get_state;
    void *env;
    const pe_live_source *source;
} pe_live_full_source;
/* procgen's get_state of game `index` (the full state, RNG texts included), with the player put
 * back first where procgen erased it (the record grows the state by 124 bytes; -1 where that does
 * not fit). pe_get_state_fn's signature, for pe_collect. */
int pe_live_full_get_state(void *source, int index, char *buffer, int length);

/* Step outputs per env (indexes are global set slots). */
typedef struct {
    uint8_t *truncated;     /* the episode ended by the time limit (or a forced reset) only */
    uint8_t *terminal;      /* a terminal state was written to the terminal set */
    uint8_t *pending;       /* in/out: the episode ended and its reset waits for the next step */
} pe_live_outputs;

#define PE_LIVE_DEFER_RESET 1
#define PE_LIVE_RESET_ONLY 2

/* Step envs [0, count) of `source` with actions[k] into set slots first + k, then write and
 * measure their states. An env whose episode ends also gets its terminal state (camera
 * recomputed) written to terminal_set (may be NULL). With PE_LIVE_DEFER_RESET the reset waits:
 * the step returns the terminal state and marks pending; the next step of that env only resets.
 * With PE_LIVE_RESET_ONLY nothing steps: the envs marked pending reset (their actions are
 * ignored) and the others keep their state and slot untouched (Gymnasium's reset_mask).
 * With set NULL nothing is written but the terminal states: the game logic alone (the outputs
 * index slots first + k as before). Returns PE_OK or the status of the lowest failing slot
 * (*bad_index, *err). */
pe_status pe_live_step(pe_pool *pool, const pe_live_source *source, const int32_t *actions,
                       int32_t count, int64_t first, pe_state_set *set, pe_state_set *terminal_set,
                       const pe_game_spec *game_spec, int flags, pe_live_outputs *outputs,
                       int64_t *bad_index, pe_error *err);

/* One env's part of pe_live_step without writing its state: game k of the source, set slot i.
 * Returns 0 when the env was left alone (PE_LIVE_RESET_ONLY and not pending), else 1: the game
 * is ready to be read (stepped, reset, or holding its terminal state under DEFER_RESET). */
int pe_live_step_game(const pe_live_spec *spec, void *game, int32_t action, int flags, int64_t i,
                      pe_state_set *terminal_set, const pe_game_spec *game_spec,
                      pe_live_outputs *outputs);

/* Recompute one game's camera fields as its next render would (prepare_for_drawing). */
void pe_live_prepare(const pe_live_spec *spec, void *game);

/* The game's own observe(): render into gym3's buffers and set its reward/first/info. */
void pe_live_observe(const pe_live_spec *spec, void *game);

#ifdef __cplusplus
}
#endif
#endif
