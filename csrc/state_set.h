/* Many states at once: procgen's get_state into reused per-env buffers, measured and gathered
 * on a thread pool with no Python involved.
 *
 * A pe_state_set owns one buffer per env (1 MiB by default: procgen aborts the process if its
 * buffer is too small; untouched pages are never committed, so the cost is the state's size).
 * pe_collect fills a contiguous range of the set from one procgen vec env; pe_fill_states and
 * pe_fill_vector_heads read all of it. A pe_entity_plan says which procgen types go to which
 * output slot (entity-gym entity type), with which features, in what order: the observation
 * builder (observation.h) gathers by it.
 * Every function that takes a pool also accepts NULL (run on the calling thread): filling costs
 * a few µs per state, so for a few dozen states waking the pool costs more than it saves.
 */
#ifndef PE_STATE_SET_H
#define PE_STATE_SET_H

#include <stdint.h>

#include "state_parser.h"
#include "thread_pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* procgen's libenv extension: int get_state(libenv_env *, int, char *, int). */
typedef int (*pe_get_state_fn)(void *env, int index, char *buffer, int length);

typedef struct {
    int64_t n;
    int64_t capacity;     /* bytes per buffer */
    uint8_t **buffers;
    int64_t *lengths;
    pe_layout *layouts;
    pe_status *status;
    pe_error *errors;
} pe_state_set;

pe_state_set *pe_state_set_create(int64_t n, int64_t capacity);
void pe_state_set_destroy(pe_state_set *set);

/* Record that `written` bytes of a state were written into slot i (negative or more than the
 * capacity: the writer `source` failed), and measure them: the slot's status says whether
 * anything may read it. */
void pe_state_set_accept(pe_state_set *set, int64_t i, int64_t written, const pe_game_spec *spec,
                         const char *source);

/* get_state(env, k) for k in [0, count) into set slot first + k, then pe_measure, in parallel.
 * Returns PE_OK, or the status of the lowest failing slot (its index in *bad_index). */
pe_status pe_collect(pe_pool *pool, pe_get_state_fn get_state, void *env, int32_t count,
                     int64_t first, pe_state_set *set, const pe_game_spec *spec,
                     int64_t *bad_index, pe_error *err);

/* pe_fill for every state of the set, in parallel; outputs as in pe_fill_many (grid may be NULL;
 * vector values are not gathered here). */
void pe_fill_states(pe_pool *pool, const pe_state_set *set, const pe_game_spec *spec,
                    double *scalars, double *trailer_scalars, int32_t *grid);

/* The cell value of a point off the grid where the platformers' support is probed (procgen's
 * get_obj_from_floats; observation.h's on_ground, features.batch_footing). */
#define PE_CELL_OUTSIDE (-1.0)

/* The first max_items items of every trailer vector, zero-padded: heads[(i * V + v) * max_items
 * + k] for state i, vector v; lengths[i * V + v] the vector's full length. For the small
 * fixed vectors that become global features (heist has_keys, plunder target_bools). Entity
 * vectors give their items' type field. */
void pe_fill_vector_heads(pe_pool *pool, const pe_state_set *set, const pe_game_spec *spec,
                          int32_t max_items, double *heads, int64_t *lengths);

/* Value of the index-th scalar trailer field of a measured state. */
double pe_trailer_scalar(const uint8_t *buf, const pe_layout *layout, const pe_game_spec *spec,
                         int32_t index);

#define PE_FEATURE_REL_X 31  /* x minus the player's x */
#define PE_FEATURE_REL_Y 32  /* y minus the player's y */
#define PE_MAX_SLOTS 64

typedef struct {
    int32_t n_slots;
    int32_t lut_size;
    const int32_t *type_to_slot;   /* lut_size entries: procgen type -> slot, -1 = not gathered */
    const int32_t *feature_start;  /* n_slots + 1 offsets into features */
    const int32_t *features;       /* entity field index 0..30, or PE_FEATURE_REL_X / _Y */
    const int32_t *condition;      /* per slot: trailer scalar that must be non-zero, or -1 */
    const uint8_t *windowed;       /* per slot: the pe_mode_bit of each distribution mode in
                                    * which the slot keeps only the entities that overlap the
                                    * camera's square (what procgen shows); 0 = every entity in
                                    * every mode, NULL = every entity of every slot */
} pe_entity_plan;

/* The bits of pe_entity_plan.windowed: one per procgen distribution mode (src/game.h: EasyMode 0,
 * HardMode 1, ExtremeMode 2, MemoryMode 10), and one for any other code a state may hold. */
typedef enum {
    PE_MODE_EASY_BIT = 1,
    PE_MODE_HARD_BIT = 2,
    PE_MODE_EXTREME_BIT = 4,
    PE_MODE_MEMORY_BIT = 8,
    PE_MODE_OTHER_BIT = 128
} pe_mode_bit;

/* The windowed bit of a state's distribution_mode code. */
uint8_t pe_mode_bit_of(double mode);

/* PE_OK if the plan is usable with this spec, PE_ERR_SPEC otherwise. */
pe_status pe_plan_check(const pe_entity_plan *plan, const pe_game_spec *spec);

#ifdef __cplusplus
}
#endif
#endif
