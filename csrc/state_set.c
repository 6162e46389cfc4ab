/* Many states at once; see state_set.h. */
#include "state_set.h"

#include <stdlib.h>

#include "le_read.h"

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
            err->offset = set->layouts[i].camera_at + PE_CAMERA_RECORD[PE_CAM_GRID_W].at;
            err->field = PE_CAMERA_RECORD[PE_CAM_GRID_W].name;
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
            else if (kind == PE_T_VEC_ENTITY)
                head[k] = (double)pe_load_i32(at + PE_ENTITY_RECORD[PE_F_TYPE].at);
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

uint8_t pe_mode_bit_of(double mode) {
    return mode == 0    ? PE_MODE_EASY_BIT
           : mode == 1  ? PE_MODE_HARD_BIT
           : mode == 2  ? PE_MODE_EXTREME_BIT
           : mode == 10 ? PE_MODE_MEMORY_BIT
                        : PE_MODE_OTHER_BIT;
}

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
