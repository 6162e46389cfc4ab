/* Padded entity observations of many procgen states, built in C in one pass per state.
 *
 * One builder (pe_obs_create) holds what an observation is made of: the entity plan
 * (state_set.h), per output type its cap, width and how its rows are ranked (padding.h), the
 * tilemap types of the camera window (tilemap.h) and the class image, and a small program of
 * global features. It reads either measured get_state bytes (a pe_state_set: the reference
 * path, the procgen-stepped engines, terminal states) or procgen's live game objects through a
 * pe_live_map, and writes every output straight into the caller's final arrays in their final
 * dtypes. Both reads give the same observation bit for bit (tests/test_observation.py).
 *
 * Per state: the camera square and the slots' conditions once; the entities of each slot
 * gathered into per-state scratch (derived features filled), ranked nearest first and padded;
 * the tiles of the window counted, written and padded; the image; the globals; the step's
 * reward, done, level_complete and seeds. States are independent, so they run on the pool.
 *
 * Ragged output (entity-gym's ragged buffers, pe_obs_out.counts): no caps, no ranking. Each
 * state's rows stay in its scratch, in the order gathered (entities in the state's order, tiles
 * in the tilemap's), and only their counts are written; pe_obs_ragged_rows then copies every
 * row, state after state, into flat [rows, width] arrays the caller sized from the counts.
 */
#ifndef PE_OBSERVATION_H
#define PE_OBSERVATION_H

#include <stdint.h>

#include "live_game.h"
#include "padding.h"
#include "state_parser.h"
#include "state_set.h"
#include "thread_pool.h"
#include "tilemap.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PE_OBS_MAX_TYPES (PE_MAX_SLOTS + TM_MAX_CLASSES + 1)
#define PE_OBS_MAX_GLOBALS 64
#define PE_OBS_MAX_SUPPORT 16
#define PE_OBS_VECTOR_ITEMS 6  /* vector items a global or derived feature may read (0..5) */

/* Global feature ops: (op, a, b) triples, evaluated in double and stored as float32. The
 * derived ones reproduce features.DERIVED_GLOBALS / GAME_DERIVED_GLOBALS. */
typedef enum {
    PE_G_SCALAR = 0,         /* header/base scalar a */
    PE_G_TRAILER = 1,        /* trailer scalar a */
    PE_G_STEP_FRACTION = 2,  /* cur_time / max(timeout, 1) */
    PE_G_EAT_TIME_LEFT = 3,  /* trailer a = eat_time, b = eat_timeout: max(t - since, 0) / t */
    PE_G_EDIBLE = 4,         /* the same > 0, as 0/1 */
    PE_G_DIFFERENCE = 5,     /* trailer a - trailer b */
    PE_G_IS_ZERO = 6,        /* trailer a == 0, as 0/1 */
    PE_G_VECTOR_ITEM = 7,    /* item b of trailer vector a, 0 past its end */
    PE_G_ON_GROUND = 8,      /* the platformers' support test (pe_obs_support) */
    PE_G_N_OPS = 9
} pe_global_op;

/* Derived entity features (per plan feature; the gathered raw column is replaced). */
typedef enum {
    PE_D_NONE = 0,
    PE_D_IS_TARGET = 1       /* plunder: item image_theme (clipped to 0..5) of target_vector */
} pe_derived_feature;

/* Where the class image is centred. */
typedef enum {
    PE_IMAGE_CAMERA = 0,     /* procgen's camera square, what the pixels show */
    PE_IMAGE_PLAYER = 1      /* image_size cells around the player's cell (entity record 0): the
                              * player's cell is the middle one (odd sizes; even: the one
                              * right of and below the middle) wherever the camera is */
} pe_image_centre;

/* How an output type's rows are ranked for padding. */
typedef struct {
    int32_t cap;          /* rows kept per state */
    int32_t width;        /* floats per row */
    int32_t cx, cy;       /* distance columns; cx < 0: keep the first rows */
    int32_t from_player;  /* 1: distance to the player type's padded row 0 (columns player_cx/cy) */
} pe_obs_type;

/* on_ground: a supporting tile or the world's edge under a bottom corner, or the flag, and
 * (at_rest) vy == 0. */
typedef struct {
    int32_t n_tiles;
    int32_t tiles[PE_OBS_MAX_SUPPORT];
    int32_t flag;         /* trailer scalar, or -1 */
    int32_t at_rest;
} pe_obs_support;

typedef struct {
    const pe_entity_plan *plan;    /* slots = output types 0 .. n_slots - 1 */
    const int32_t *derived;        /* per plan feature: pe_derived_feature (NULL: none) */
    int32_t target_vector;         /* trailer vector of PE_D_IS_TARGET, or -1 */
    const tm_spec *tiles;          /* NULL: no tilemap types */
    int32_t tile_mode, chunk;      /* tm_mode; tile types follow the slots */
    const tm_spec *image;          /* NULL: no class image */
    int32_t image_size;
    int32_t image_centre;          /* pe_image_centre */
    const uint8_t *image_marks;    /* per slot: the value its entities' cells take in the image
                                    * over the tiles, the largest where several meet; 0: not
                                    * drawn (NULL: entities are not drawn) */
    int32_t image_boxes;           /* 1: a marked entity covers every cell its box (x +- rx,
                                    * y +- ry) overlaps; 0: the cell of its (x, y) */
    int32_t n_types;               /* n_slots + tile types */
    pe_obs_type types[PE_OBS_MAX_TYPES];
    int32_t player_type, player_cx, player_cy;  /* -1 when no type ranks from the player */
    int32_t n_globals;
    int32_t global_ops[3 * PE_OBS_MAX_GLOBALS];
    pe_obs_support support;
} pe_obs_spec;

/* Where one call writes, for `count` states (row k of every array is output state k). */
typedef struct {
    float *values[PE_OBS_MAX_TYPES];     /* [count, cap, width] */
    uint8_t *masks[PE_OBS_MAX_TYPES];    /* [count, cap] */
    int64_t *counts;                     /* NULL: padded. Else ragged: [n_types, count] rows of
                                          * each type and state (values, masks, image and
                                          * dropped are not written; pe_obs_ragged_rows copies
                                          * the rows) */
    float *globals;                      /* [count, n_globals] */
    uint8_t *image;                      /* [count, size, size] or NULL */
    int64_t *dropped;                    /* [count] rows beyond the caps */
    float *reward;                       /* the step's values, [count] each; any may be NULL */
    uint8_t *done;
    uint8_t *level_complete;
    int64_t *level_seed;
    int64_t *prev_level_seed;
} pe_obs_out;

typedef struct pe_obs_builder pe_obs_builder;

/* A builder for `n` states (its scratch is per state, so states run on any thread). The spec
 * and what it points to must outlive it. NULL with *status set when the spec is invalid
 * (PE_ERR_SPEC) or memory runs out (PE_ERR_MEMORY). */
pe_obs_builder *pe_obs_create(const pe_obs_spec *spec, const pe_game_spec *game, int64_t n,
                              pe_status *status);
void pe_obs_destroy(pe_obs_builder *builder);

/* Output state k from set slot indices[k] (indices NULL: slot k), k < count <= n. A slot that
 * holds no valid state is an error. */
pe_status pe_obs_from_states(pe_pool *pool, pe_obs_builder *builder, const pe_state_set *set,
                             const int64_t *indices, int64_t count, const pe_obs_out *out,
                             int64_t *bad_index, pe_error *err);

/* Output state k from the source's game k, as it is now. */
pe_status pe_obs_from_live(pe_pool *pool, pe_obs_builder *builder, const pe_live_source *source,
                           const pe_obs_out *out, int64_t *bad_index, pe_error *err);

/* pe_live_step without writing the states: every game is stepped (pe_live_step_game, terminal
 * states still written to terminal_set) and then read into output state k, in one pool run. */
pe_status pe_obs_step_live(pe_pool *pool, pe_obs_builder *builder, const pe_live_source *source,
                           const int32_t *actions, pe_state_set *terminal_set,
                           const pe_game_spec *game_spec, int flags, pe_live_outputs *outputs,
                           const pe_obs_out *out, int64_t *bad_index, pe_error *err);

/* One output type of pe_obs_ragged_rows. */
typedef struct {
    float *rows;             /* [the type's rows over all states, width]; NULL: not copied */
    int64_t capacity;        /* floats at rows */
    int32_t width;           /* floats per output row */
    const int32_t *columns;  /* per output column, the type's column it holds; NULL: all of
                              * them in order (width = the type's width) */
} pe_obs_rows;

/* The rows the last call kept, when it was ragged and for `count` states: type t's rows of
 * states 0 .. count - 1, state after state, into out[t] (n_types entries); totals[k] (NULL:
 * not written) = the rows of state k over the types copied. PE_ERR_ARG when the last call was
 * not a ragged one of `count` states, or an output is too small or names a column the type
 * lacks. */
pe_status pe_obs_ragged_rows(pe_pool *pool, pe_obs_builder *builder, int64_t count,
                             const pe_obs_rows *out, int64_t *totals, pe_error *err);

#ifdef __cplusplus
}
#endif
#endif
