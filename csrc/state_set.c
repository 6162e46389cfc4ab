/* Many states at once; see state_set.h. */
#include "state_set.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "le_read.h"

/* The float fields of procgen's entity record read here (indices in games.ENTITY_FIELDS). */
enum { FIELD_X = 0, FIELD_Y = 1, FIELD_VY = 3, FIELD_RX = 4, FIELD_RY = 5 };

static inline float entity_f32(const uint8_t *record, int field) {
    return pe_load_f32(record + 4 * field);
}

pe_state_set *pe_state_set_create(int64_t n, int64_t capacity) {
    if (n < 0 || capacity < 16 || capacity > INT32_MAX) return NULL;
    pe_state_set *set = (pe_state_set *)calloc(1, sizeof(pe_state_set));
    if (set == NULL) return NULL;
    size_t m = (size_t)(n > 0 ? n : 1);
    set->n = n;
    set->capacity = capacity;
    set->buffers = (uint8_t **)calloc(m, sizeof(uint8_t *));
    set->lengths = (int64_t *)calloc(m, sizeof(int64_t));
    set->layouts = (pe_layout *)calloc(m, sizeof(pe_layout));
    set->status = (pe_status *)calloc(m, sizeof(pe_status));
    set->errors = (pe_error *)calloc(m, sizeof(pe_error));
    if (!set->buffers || !set->lengths || !set->layouts || !set->status || !set->errors) {
        pe_state_set_destroy(set);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        set->status[i] = PE_ERR_TRUNCATED;  /* nothing collected yet */
        set->errors[i].status = PE_ERR_TRUNCATED;
        set->errors[i].field = "not collected";
        set->buffers[i] = (uint8_t *)malloc((size_t)capacity);
        if (set->buffers[i] == NULL) {
            pe_state_set_destroy(set);
            return NULL;
        }
    }
    return set;
}

void pe_state_set_destroy(pe_state_set *set) {
    if (set == NULL) return;
    if (set->buffers)
        for (int64_t i = 0; i < set->n; i++) free(set->buffers[i]);
    free(set->buffers);
    free(set->lengths);
    free(set->layouts);
    free(set->status);
    free(set->errors);
    free(set);
}

/* ---- collecting ---- */

typedef struct {
    pe_get_state_fn get_state;
    void *env;
    int64_t first;
    pe_state_set *set;
    const pe_game_spec *spec;
} collect_job;

void pe_state_set_accept(pe_state_set *set, int64_t i, int64_t written, const pe_game_spec *spec,
                         const char *source) {
    if (written < 0 || written > set->capacity) {
        set->lengths[i] = 0;
        set->status[i] = PE_ERR_TRUNCATED;
        set->errors[i].status = PE_ERR_TRUNCATED;
        set->errors[i].offset = 0;
        set->errors[i].field = source;
        return;
    }
    set->lengths[i] = written;
    set->status[i] = pe_measure(set->buffers[i], written, spec, &set->layouts[i], &set->errors[i]);
}

static void collect_one(void *raw, int64_t k) {
    collect_job *job = (collect_job *)raw;
    pe_state_set *set = job->set;
    int64_t i = job->first + k;
    int written = job->get_state(job->env, (int)k, (char *)set->buffers[i], (int)set->capacity);
    pe_state_set_accept(set, i, written, job->spec, "get_state");
}

pe_status pe_collect(pe_pool *pool, pe_get_state_fn get_state, void *env, int32_t count,
                     int64_t first, pe_state_set *set, const pe_game_spec *spec,
                     int64_t *bad_index, pe_error *err) {
    *bad_index = -1;
    if (first < 0 || count < 0 || first + count > set->n || get_state == NULL) {
        err->status = PE_ERR_ARG;
        err->offset = 0;
        err->field = "collect range";
        return PE_ERR_ARG;
    }
    collect_job job = {get_state, env, first, set, spec};
    pe_pool_run(pool, count, collect_one, &job);
    for (int64_t i = first; i < first + count; i++) {
        if (set->status[i] != PE_OK) {
            *bad_index = i;
            *err = set->errors[i];
            return set->status[i];
        }
        if (set->layouts[i].width != set->layouts[first].width ||
            set->layouts[i].height != set->layouts[first].height) {
            *bad_index = i;
            err->status = PE_ERR_SHAPE;
            err->offset = set->layouts[i].camera_at + 36;
            err->field = "grid.w";
            return PE_ERR_SHAPE;
        }
    }
    return PE_OK;
}

/* ---- filling ---- */

typedef struct {
    const pe_state_set *set;
    const pe_game_spec *spec;
    double *scalars;
    double *trailer_scalars;
    int32_t *grid;
    int64_t n_scalars;
    int32_t n_trailer_scalars;
} fill_job;

static void fill_one(void *raw, int64_t i) {
    fill_job *job = (fill_job *)raw;
    const pe_layout *l = &job->set->layouts[i];
    int64_t cells = (int64_t)l->width * l->height;
    if (job->set->status[i] != PE_OK) {  /* never follow the layout of a failed collect */
        if (job->scalars)
            for (int64_t k = 0; k < job->n_scalars; k++) job->scalars[i * job->n_scalars + k] = 0.0;
        if (job->trailer_scalars)
            for (int32_t k = 0; k < job->n_trailer_scalars; k++)
                job->trailer_scalars[i * job->n_trailer_scalars + k] = 0.0;
        return;
    }
    pe_fill(job->set->buffers[i], l, job->spec, job->scalars ? job->scalars + i * job->n_scalars : NULL,
            NULL, 0, NULL, job->grid ? job->grid + i * cells : NULL,
            job->trailer_scalars ? job->trailer_scalars + i * job->n_trailer_scalars : NULL, NULL);
}

void pe_fill_states(pe_pool *pool, const pe_state_set *set, const pe_game_spec *spec,
                    double *scalars, double *trailer_scalars, int32_t *grid) {
    int32_t n_trailer_scalars = 0;
    for (int t = 0; t < spec->n_trailer; t++) n_trailer_scalars += spec->trailer_kinds[t] < PE_T_VEC_I32;
    fill_job job = {set, spec, scalars, trailer_scalars, grid, pe_scalar_count(), n_trailer_scalars};
    pe_pool_run(pool, set->n, fill_one, &job);
}

typedef struct {
    const pe_state_set *set;
    const int32_t *first_row;
    const int32_t *n_rows;
    int32_t *grid;
    int64_t stride;
} rows_job;

static void fill_rows_one(void *raw, int64_t i) {
    rows_job *job = (rows_job *)raw;
    const pe_layout *l = &job->set->layouts[i];
    int64_t lo = job->first_row[i], hi = lo + (int64_t)job->n_rows[i];
    if (lo < 0) lo = 0;
    if (hi > l->height) hi = l->height;
    if (job->set->status[i] != PE_OK) return;
    if (hi <= lo || (int64_t)l->width * l->height > job->stride) return;
    memcpy(job->grid + i * job->stride + lo * l->width,
           job->set->buffers[i] + l->grid_at + 4 * lo * l->width, (size_t)(4 * (hi - lo) * l->width));
}

void pe_fill_grid_rows(pe_pool *pool, const pe_state_set *set, const int32_t *first_row,
                       const int32_t *n_rows, int32_t *grid) {
    if (set->n == 0) return;
    rows_job job = {set, first_row, n_rows, grid,
                    (int64_t)set->layouts[0].width * set->layouts[0].height};
    pe_pool_run(pool, set->n, fill_rows_one, &job);
}

/* procgen's get_obj_from_floats (basic-abstract-game.cpp:167-185): negative coordinates and
 * cells off the grid are outside. */
static double cell_at(const uint8_t *buf, const pe_layout *l, float x, float y) {
    if (x < 0 || y < 0) return PE_CELL_OUTSIDE;
    float fx = floorf(x), fy = floorf(y);
    if (fx >= (float)l->width || fy >= (float)l->height) return PE_CELL_OUTSIDE;
    int64_t index = (int64_t)fx + (int64_t)fy * l->width;
    return (double)pe_load_i32(buf + l->grid_at + 4 * index);
}

typedef struct {
    const pe_state_set *set;
    double *footing;
} footing_job;

static void footing_one(void *raw, int64_t i) {
    footing_job *job = (footing_job *)raw;
    const pe_layout *l = &job->set->layouts[i];
    const uint8_t *buf = job->set->buffers[i];
    double *out = job->footing + 3 * i;
    if (job->set->status[i] != PE_OK || l->n_entities < 1) {
        out[0] = out[1] = out[2] = NAN;
        return;
    }
    const uint8_t *player = buf + l->entities_at;
    float x = entity_f32(player, FIELD_X), y = entity_f32(player, FIELD_Y);
    float vy = entity_f32(player, FIELD_VY);
    float rx = entity_f32(player, FIELD_RX), ry = entity_f32(player, FIELD_RY);
    /* the same arithmetic as procgen: double offsets, then float arguments */
    float below = (float)((double)y - ((double)ry + .01));
    out[0] = cell_at(buf, l, (float)((double)x - ((double)rx - .01)), below);
    out[1] = cell_at(buf, l, (float)((double)x + ((double)rx - .01)), below);
    out[2] = (double)vy;
}

void pe_fill_player_footing(pe_pool *pool, const pe_state_set *set, double *footing) {
    footing_job job = {set, footing};
    pe_pool_run(pool, set->n, footing_one, &job);
}

/* The trailer item of the index-th scalar (or vector) of a spec, -1 if there is none. */
static int32_t trailer_item(const pe_game_spec *spec, int32_t index, int vectors) {
    for (int32_t i = 0, seen = 0; i < spec->n_trailer; i++) {
        if ((spec->trailer_kinds[i] >= PE_T_VEC_I32) != vectors) continue;
        if (seen++ == index) return i;
    }
    return -1;
}

double pe_trailer_scalar(const uint8_t *buf, const pe_layout *layout, const pe_game_spec *spec,
                         int32_t index) {
    int32_t item = trailer_item(spec, index, 0);
    return item < 0 ? 0.0 : pe_trailer_item_value(buf, layout, spec, item);
}

typedef struct {
    const pe_state_set *set;
    const pe_game_spec *spec;
    int32_t max_items;
    int32_t n_vectors;
    double *heads;
    int64_t *lengths;
} heads_job;

static void heads_one(void *raw, int64_t i) {
    heads_job *job = (heads_job *)raw;
    const pe_layout *l = &job->set->layouts[i];
    int failed = job->set->status[i] != PE_OK;
    for (int32_t v = 0; v < job->n_vectors; v++) {
        int32_t item = trailer_item(job->spec, v, 1);
        uint8_t kind = job->spec->trailer_kinds[item];
        const uint8_t *p = job->set->buffers[i] + l->trailer_item_at[item];
        int32_t count = failed ? 0 : l->vector_counts[v];  /* as measured */
        double *head = job->heads + (i * job->n_vectors + v) * job->max_items;
        job->lengths[i * job->n_vectors + v] = count;
        for (int32_t k = 0; k < job->max_items; k++) {
            const uint8_t *at = p + 4 + k * pe_trailer_item_bytes(kind);
            if (k >= count) head[k] = 0.0;
            else if (kind == PE_T_VEC_F32) head[k] = (double)pe_load_f32(at);
            else if (kind == PE_T_VEC_ENTITY) head[k] = (double)pe_load_i32(at + 24);
            else head[k] = (double)pe_load_i32(at);
        }
    }
}

void pe_fill_vector_heads(pe_pool *pool, const pe_state_set *set, const pe_game_spec *spec,
                          int32_t max_items, double *heads, int64_t *lengths) {
    int32_t n_vectors = 0;
    for (int t = 0; t < spec->n_trailer; t++) n_vectors += spec->trailer_kinds[t] >= PE_T_VEC_I32;
    if (n_vectors == 0 || max_items < 0) return;
    heads_job job = {set, spec, max_items, n_vectors, heads, lengths};
    pe_pool_run(pool, set->n, heads_one, &job);
}

/* ---- entity plans ---- */

pe_status pe_plan_check(const pe_entity_plan *plan, const pe_game_spec *spec) {
    int32_t n_scalars = 0;
    for (int i = 0; i < spec->n_trailer; i++) n_scalars += spec->trailer_kinds[i] < PE_T_VEC_I32;
    if (plan->n_slots < 0 || plan->n_slots > PE_MAX_SLOTS || plan->lut_size < 0) return PE_ERR_SPEC;
    for (int32_t t = 0; t < plan->lut_size; t++)
        if (plan->type_to_slot[t] < -1 || plan->type_to_slot[t] >= plan->n_slots) return PE_ERR_SPEC;
    if (plan->feature_start[0] != 0) return PE_ERR_SPEC;
    for (int32_t s = 0; s < plan->n_slots; s++) {
        if (plan->feature_start[s + 1] < plan->feature_start[s]) return PE_ERR_SPEC;
        if (plan->condition[s] < -1 || plan->condition[s] >= n_scalars) return PE_ERR_SPEC;
        for (int32_t f = plan->feature_start[s]; f < plan->feature_start[s + 1]; f++)
            if (plan->features[f] < 0 || plan->features[f] > PE_FEATURE_REL_Y) return PE_ERR_SPEC;
    }
    return PE_OK;
}

static inline int32_t slot_of(const pe_entity_plan *plan, const uint8_t *record) {
    int32_t type = pe_load_i32(record + 24);
    return (type >= 0 && type < plan->lut_size) ? plan->type_to_slot[type] : -1;
}

/* Which slots are enabled for this state (their condition holds). */
static void enabled_slots(const pe_entity_plan *plan, const uint8_t *buf, const pe_layout *l,
                          const pe_game_spec *spec, uint8_t *enabled) {
    for (int32_t s = 0; s < plan->n_slots; s++)
        enabled[s] = plan->condition[s] < 0 ||
                     pe_trailer_scalar(buf, l, spec, plan->condition[s]) != 0.0;
}

/* The camera's square, for windowed slots. */
typedef struct {
    float cx, cy, half;
} camera_square;

static camera_square square_of(const uint8_t *buf, const pe_layout *l) {
    camera_square sq;
    float dim;
    pe_camera(buf, l, &sq.cx, &sq.cy, &dim);
    sq.half = dim / 2;
    return sq;
}

/* An entity is shown when its box overlaps the square (NaN fields: never). */
static inline int in_square(const uint8_t *record, const camera_square *sq) {
    float x = entity_f32(record, FIELD_X), y = entity_f32(record, FIELD_Y);
    float rx = entity_f32(record, FIELD_RX), ry = entity_f32(record, FIELD_RY);
    return fabsf(x - sq->cx) < sq->half + fabsf(rx) && fabsf(y - sq->cy) < sq->half + fabsf(ry);
}

static inline int visible(const pe_entity_plan *plan, int32_t s, const uint8_t *record,
                          const camera_square *sq) {
    return plan->windowed == NULL || !plan->windowed[s] || in_square(record, sq);
}

/* What count and fill both see of a state: its slots' conditions and its camera square. */
typedef struct {
    uint8_t enabled[PE_MAX_SLOTS];
    camera_square sq;
} state_view;

static void view_state(const pe_entity_plan *plan, const uint8_t *buf, const pe_layout *l,
                       const pe_game_spec *spec, state_view *view) {
    enabled_slots(plan, buf, l, spec, view->enabled);
    view->sq = square_of(buf, l);
}

/* The slot an entity record goes to in this state, or -1. */
static inline int32_t gathered_slot(const pe_entity_plan *plan, const uint8_t *record,
                                    const state_view *view) {
    int32_t s = slot_of(plan, record);
    return (s >= 0 && view->enabled[s] && visible(plan, s, record, &view->sq)) ? s : -1;
}

typedef struct {
    const pe_entity_plan *plan;
    const pe_state_set *set;
    const pe_game_spec *spec;
    int64_t *counts;             /* pe_plan_count's output */
    const int64_t *row_counts;   /* pe_plan_fill's input: rows of state i in slot s */
    const int64_t *row_starts;   /* [n_slots][n]: first row of state i in slot s */
    float *out;
    const int64_t *slot_offsets;
} plan_job;

static void count_one(void *raw, int64_t i) {
    plan_job *job = (plan_job *)raw;
    const pe_entity_plan *plan = job->plan;
    const pe_layout *l = &job->set->layouts[i];
    const uint8_t *buf = job->set->buffers[i];
    int64_t n = job->set->n;
    state_view view;
    for (int32_t s = 0; s < plan->n_slots; s++) job->counts[s * n + i] = 0;
    if (job->set->status[i] != PE_OK) return;  /* a failed collect has no entities */
    view_state(plan, buf, l, job->spec, &view);
    const uint8_t *record = buf + l->entities_at;
    for (int32_t e = 0; e < l->n_entities; e++, record += PE_ENTITY_BYTES) {
        int32_t s = gathered_slot(plan, record, &view);
        if (s >= 0) job->counts[s * n + i]++;
    }
}

void pe_plan_count(pe_pool *pool, const pe_entity_plan *plan, const pe_state_set *set,
                   const pe_game_spec *spec, int64_t *counts) {
    plan_job job = {plan, set, spec, counts, NULL, NULL, NULL, NULL};
    pe_pool_run(pool, set->n, count_one, &job);
}

static inline float feature_value(const uint8_t *record, const uint8_t *player, int32_t code) {
    if (code == PE_FEATURE_REL_X) return entity_f32(record, FIELD_X) - entity_f32(player, FIELD_X);
    if (code == PE_FEATURE_REL_Y) return entity_f32(record, FIELD_Y) - entity_f32(player, FIELD_Y);
    const uint8_t *p = record + 4 * code;
    return pe_entity_field_is_int(code) ? (float)pe_load_i32(p) : pe_load_f32(p);
}

static void fill_entities_one(void *raw, int64_t i) {
    plan_job *job = (plan_job *)raw;
    const pe_entity_plan *plan = job->plan;
    const pe_layout *l = &job->set->layouts[i];
    const uint8_t *buf = job->set->buffers[i];
    int64_t n = job->set->n;
    int64_t next_row[PE_MAX_SLOTS];
    state_view view;
    if (job->set->status[i] != PE_OK) return;
    view_state(plan, buf, l, job->spec, &view);
    for (int32_t s = 0; s < plan->n_slots; s++) next_row[s] = job->row_starts[s * n + i];
    const uint8_t *player = buf + l->entities_at;
    const uint8_t *record = player;
    for (int32_t e = 0; e < l->n_entities; e++, record += PE_ENTITY_BYTES) {
        int32_t s = gathered_slot(plan, record, &view);
        if (s < 0) continue;
        /* Never write past the rows counted for this state (counts from another collect). */
        if (next_row[s] >= job->row_starts[s * n + i] + job->row_counts[s * n + i]) continue;
        int32_t f0 = plan->feature_start[s], nf = plan->feature_start[s + 1] - f0;
        float *row = job->out + job->slot_offsets[s] + next_row[s]++ * nf;
        for (int32_t f = 0; f < nf; f++) row[f] = feature_value(record, player, plan->features[f0 + f]);
    }
}

pe_status pe_plan_fill(pe_pool *pool, const pe_entity_plan *plan, const pe_state_set *set,
                       const pe_game_spec *spec, const int64_t *counts,
                       const int64_t *slot_offsets, float *out) {
    int64_t n = set->n;
    int64_t *row_starts = (int64_t *)malloc(sizeof(int64_t) * (size_t)(plan->n_slots * n + 1));
    if (row_starts == NULL) return PE_ERR_MEMORY;
    for (int32_t s = 0; s < plan->n_slots; s++) {
        int64_t row = 0;
        for (int64_t i = 0; i < n; i++) {
            row_starts[s * n + i] = row;
            row += counts[s * n + i];
        }
    }
    plan_job job = {plan, set, spec, NULL, counts, row_starts, out, slot_offsets};
    pe_pool_run(pool, n, fill_entities_one, &job);
    free(row_starts);
    return PE_OK;
}
