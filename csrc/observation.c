/* Padded observations of many states; see observation.h. */
#include "observation.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "le_read.h"
#include "live_read.h"

/* Per-state scratch, grown as needed (a state runs on one thread at a time). */
typedef struct {
    float *rows;
    size_t rows_cap;
    pe_ranked *order;
    size_t order_cap;
    int8_t *cls;
    size_t cls_cap;
    float *tile_rows;
    size_t tile_cap;
    int32_t *grid;
    size_t grid_cap;
    const uint8_t **records;
    size_t records_cap;
    int64_t kept[PE_OBS_MAX_TYPES];             /* ragged: rows of each type, in the scratch */
    const float *kept_rows[PE_OBS_MAX_TYPES];
    pe_status status;
    pe_error err;
} work;

/* The scalars the builder reads by name. */
typedef struct {
    int reward, done, level_complete, cur_time, timeout, level_seed, prev_level_seed, center_x,
        center_y, view_dim, edge, mode;
} scalar_ids;

struct pe_obs_builder {
    pe_obs_spec spec;
    const pe_game_spec *game;
    int64_t n;
    scalar_ids id;
    int32_t n_trailer_scalars, n_vectors;
    int32_t scalar_item[PE_MAX_TRAILER_ITEMS];  /* trailer scalar -> trailer item */
    int32_t vector_item[PE_MAX_TRAILER_VECTORS];
    int32_t n_tile_types;
    int32_t tile_nf[TM_MAX_CLASSES + 1];
    int32_t slot_start[PE_MAX_SLOTS + 1];       /* floats before slot s in a state's rows */
    int32_t bytes_field_at[PE_ENTITY_FIELDS];   /* get_state records (PE_ENTITY_RECORD), in the */
    uint8_t bytes_field_kind[PE_ENTITY_FIELDS]; /* live map's form: one reader for both */
    int64_t call_count;                         /* states of the call in flight */
    int64_t ragged_count;                       /* states the last ragged call kept, or -1 */
    int64_t *starts;                            /* [n_types, n]: pe_obs_ragged_rows' first rows */
    work *work;
};

/* ---- reading one state: measured bytes or a live game ---- */

typedef struct {
    const pe_obs_builder *b;
    const uint8_t *base;          /* the state buffer, or the game object */
    const pe_layout *layout;      /* bytes */
    const pe_live_map *map;       /* live (NULL: bytes) */
    int32_t n_entities;
    const uint8_t **records;
    const int32_t *field_at;
    const uint8_t *field_kind;
    int32_t width, height;
    const uint8_t *cells;
    int bad;                      /* a live container did not look valid */
} reader;

static inline double live_value(const uint8_t *p, uint8_t kind) {
    if (kind == PE_T_F32) return (double)read_f32(p);
    if (kind == PE_T_BOOL) return *p != 0;
    return (double)read_i32(p);
}

static inline double scalar(const reader *r, int i) {
    if (r->map) return live_value(r->base + r->map->scalar_at[i], r->map->scalar_kind[i]);
    return pe_scalar_value(r->base, r->layout, i);
}

static inline double trailer_scalar(const reader *r, int32_t s) {
    int32_t item = r->b->scalar_item[s];
    if (r->map) return live_value(r->base + r->map->trailer_at[item], r->map->trailer_kind[item]);
    return pe_trailer_item_value(r->base, r->layout, r->b->game, item);
}

static double live_vector_item(reader *r, int32_t item, uint8_t kind, int64_t k) {
    const uint8_t *at = r->base + r->map->trailer_at[item], *items = NULL;
    if (kind == PE_T_VEC_BOOL) {
        const uint64_t *words = NULL;
        int64_t n = bitvector_count(at, &words);
        if (n < 0) r->bad = 1;
        return k < n ? (double)((words[k / 64] >> (k % 64)) & 1u) : 0.0;
    }
    int64_t n = vector_span(at, kind == PE_T_VEC_ENTITY ? 16 : 4, &items);
    if (n < 0) r->bad = 1;
    if (k >= n) return 0.0;
    if (kind == PE_T_VEC_F32) return (double)read_f32(items + 4 * k);
    if (kind == PE_T_VEC_I32) return (double)read_i32(items + 4 * k);
    const uint8_t *entity = read_ptr(items + 16 * k);
    if (entity == NULL || !aligned(entity, 4)) {
        r->bad = 1;
        return 0.0;
    }
    return (double)read_i32(entity + r->map->entity_at[PE_F_TYPE]);
}

/* Item k of trailer vector v (an entity's type field), 0 past its end. */
static double vector_item(reader *r, int32_t v, int64_t k) {
    int32_t item = r->b->vector_item[v];
    uint8_t kind = r->b->game->trailer_kinds[item];
    if (r->map) return live_vector_item(r, item, kind, k);
    if (k < 0 || k >= r->layout->vector_counts[v]) return 0.0;
    const uint8_t *at = r->base + r->layout->trailer_item_at[item] + 4 + k * pe_trailer_item_bytes(kind);
    if (kind == PE_T_VEC_F32) return (double)pe_load_f32(at);
    if (kind == PE_T_VEC_ENTITY) return (double)pe_load_i32(at + PE_ENTITY_RECORD[PE_F_TYPE].at);
    return (double)pe_load_i32(at);
}

static inline float field_value(const reader *r, const uint8_t *record, int32_t f) {
    const uint8_t *p = record + r->field_at[f];
    switch (r->field_kind[f]) {
    case PE_T_F32: return r->map ? read_f32(p) : pe_load_f32(p);
    case PE_T_BOOL: return (float)(*p != 0);
    default: return (float)(r->map ? read_i32(p) : pe_load_i32(p));
    }
}

static inline int32_t grid_cell(const reader *r, int64_t index) {
    const uint8_t *p = r->cells + 4 * index;
    return r->map ? read_i32(p) : pe_load_i32(p);
}

static int grow(void **p, size_t *cap, size_t need, size_t item) {
    if (need <= *cap) return 1;
    size_t n = need < 2 * *cap ? 2 * *cap : need;
    void *q = realloc(*p, (n < 16 ? 16 : n) * item);
    if (q == NULL) return 0;
    *p = q;
    *cap = n < 16 ? 16 : n;
    return 1;
}

static pe_status fail(work *w, pe_status status, const char *field) {
    w->status = status;
    w->err.status = status;
    w->err.offset = 0;
    w->err.field = field;
    return status;
}

static pe_status read_bytes(const pe_obs_builder *b, const pe_state_set *set, int64_t i, work *w,
                            reader *r) {
    if (set->status[i] != PE_OK) {
        w->status = set->status[i];
        w->err = set->errors[i];
        return w->status;
    }
    const pe_layout *l = &set->layouts[i];
    r->base = set->buffers[i];
    r->layout = l;
    r->map = NULL;
    r->n_entities = l->n_entities;
    if (!grow((void **)&w->records, &w->records_cap, (size_t)l->n_entities + 1, sizeof(void *)))
        return fail(w, PE_ERR_MEMORY, "records");
    for (int32_t e = 0; e < l->n_entities; e++)
        w->records[e] = r->base + l->entities_at + (int64_t)e * PE_ENTITY_BYTES;
    r->field_at = b->bytes_field_at;
    r->field_kind = b->bytes_field_kind;
    r->width = l->width;
    r->height = l->height;
    r->cells = r->base + l->grid_at;
    return PE_OK;
}

static pe_status read_live(const pe_live_spec *spec, const uint8_t *game, work *w, reader *r) {
    const pe_live_map *map = &spec->map;
    const uint8_t *items;
    r->base = game;
    r->layout = NULL;
    r->map = map;
    int64_t n = vector_span(game + map->entities_at, 16, &items);
    if (n < 0) return fail(w, PE_ERR_TRUNCATED, "live entities");
    if (!grow((void **)&w->records, &w->records_cap, (size_t)n + 1, sizeof(void *)))
        return fail(w, PE_ERR_MEMORY, "records");
    /* the player that left the world is put back first (live_game.h) */
    const uint8_t *erased = erased_agent(game + map->agent_at, game + map->entities_at);
    int64_t first = erased != NULL;
    if (erased != NULL) w->records[0] = erased;
    for (int64_t e = 0; e < n; e++) {
        const uint8_t *entity = read_ptr(items + 16 * e);
        if (entity == NULL || !aligned(entity, 4)) return fail(w, PE_ERR_TRUNCATED, "live entity");
        w->records[first + e] = entity;
    }
    n += first;
    r->n_entities = (int32_t)n;
    r->field_at = map->entity_at;
    r->field_kind = map->entity_kind;
    if (n < 1 || read_i32(w->records[0] + map->entity_at[PE_F_TYPE]) != 0)
        return fail(w, PE_ERR_PLAYER, "entities[0].type");
    const uint8_t *grid = game + map->grid_at, *cells;
    int32_t gw = read_i32(grid), gh = read_i32(grid + 4);
    int64_t cells_n = vector_span(grid + spec->grid_data_at, 4, &cells);
    if (gw < 0 || gh < 0 || cells_n != (int64_t)gw * gh) return fail(w, PE_ERR_GRID, "live grid");
    r->width = gw;
    r->height = gh;
    r->cells = cells;
    return PE_OK;
}

/* ---- building one state's observation ---- */

typedef struct {
    float cx, cy, half;
    uint8_t mode_bit; /* the state's distribution mode in pe_entity_plan.windowed */
} square;

static inline int in_square(const reader *r, const uint8_t *record, const square *sq) {
    float x = field_value(r, record, PE_F_X), y = field_value(r, record, PE_F_Y);
    float rx = field_value(r, record, PE_F_RX), ry = field_value(r, record, PE_F_RY);
    return fabsf(x - sq->cx) < sq->half + fabsf(rx) && fabsf(y - sq->cy) < sq->half + fabsf(ry);
}

static inline float feature(const reader *r, const uint8_t *record, const uint8_t *player,
                            int32_t code) {
    if (code == PE_FEATURE_REL_X)
        return field_value(r, record, PE_F_X) - field_value(r, player, PE_F_X);
    if (code == PE_FEATURE_REL_Y)
        return field_value(r, record, PE_F_Y) - field_value(r, player, PE_F_Y);
    return field_value(r, record, code);
}

/* Which slots are on in this state (their trailer condition), and the camera square. */
static void slot_filter(const pe_obs_builder *b, const reader *r, uint8_t *enabled, square *sq) {
    const pe_entity_plan *plan = b->spec.plan;
    for (int32_t s = 0; s < plan->n_slots; s++)
        enabled[s] = plan->condition[s] < 0 || trailer_scalar(r, plan->condition[s]) != 0.0;
    sq->cx = (float)scalar(r, b->id.center_x);
    sq->cy = (float)scalar(r, b->id.center_y);
    sq->half = (float)scalar(r, b->id.view_dim) / 2;
    sq->mode_bit = pe_mode_bit_of(scalar(r, b->id.mode));
}

/* The slot an entity record is gathered into, or -1 (not a slot type, slot off, outside the
 * window of a slot windowed in the state's mode): the one rule the rows and the image's marks
 * share. */
static inline int32_t slot_of(const pe_obs_builder *b, const reader *r, const uint8_t *record,
                              const uint8_t *enabled, const square *sq) {
    const pe_entity_plan *plan = b->spec.plan;
    int32_t type = (int32_t)field_value(r, record, PE_F_TYPE);
    int32_t s = (type >= 0 && type < plan->lut_size) ? plan->type_to_slot[type] : -1;
    if (s < 0 || !enabled[s]) return -1;
    int windowed = plan->windowed != NULL && (plan->windowed[s] & sq->mode_bit);
    if (windowed && !in_square(r, record, sq)) return -1;
    return s;
}

/* The entities of every slot into the state's scratch rows (slot s from slot_start[s]). */
static void gather(const pe_obs_builder *b, reader *r, float *rows, int64_t *counts) {
    const pe_entity_plan *plan = b->spec.plan;
    uint8_t enabled[PE_MAX_SLOTS];
    square sq;
    slot_filter(b, r, enabled, &sq);
    for (int32_t s = 0; s < plan->n_slots; s++) counts[s] = 0;
    const uint8_t *player = r->records[0];
    for (int32_t e = 0; e < r->n_entities; e++) {
        const uint8_t *record = r->records[e];
        int32_t s = slot_of(b, r, record, enabled, &sq);
        if (s < 0) continue;
        int32_t f0 = plan->feature_start[s], nf = plan->feature_start[s + 1] - f0;
        float *row = rows + (int64_t)b->slot_start[s] * r->n_entities + counts[s]++ * nf;
        for (int32_t f = 0; f < nf; f++) {
            row[f] = feature(r, record, player, plan->features[f0 + f]);
            if (b->spec.derived != NULL && b->spec.derived[f0 + f] == PE_D_IS_TARGET) {
                int64_t theme = (int64_t)row[f];
                theme = theme < 0 ? 0 : theme > PE_OBS_VECTOR_ITEMS - 1 ? PE_OBS_VECTOR_ITEMS - 1 : theme;
                row[f] = (float)vector_item(r, b->spec.target_vector, theme);
            }
        }
    }
}

/* The cells [*from, *to] of the span [lo, hi] that lie in [a, b] (0: none). Clipped as doubles
 * first, so a huge box (a hostile rx) costs no more than the image it covers. */
static int cell_span(double lo, double hi, double a, double b, int64_t *from, int64_t *to) {
    lo = fmax(lo, a);
    hi = fmin(hi, b);
    if (!(lo <= hi)) return 0;
    *from = (int64_t)lo;
    *to = (int64_t)hi;
    return 1;
}

/* An entity's half extent along one axis for its box mark: rx or ry where finite and
 * positive, else 0 (the cell of its position alone). */
static double half_extent(const reader *r, const uint8_t *record, int field) {
    double h = field_value(r, record, field);
    return (isfinite(h) && h > 0) ? h : 0;
}

/* The marked slots' entities drawn into the class image of `crop` (placed as tm_class_image
 * places it): the cell holding the entity's (x, y), or with image_boxes every cell its box
 * overlaps (the open span (x - rx, x + rx), at least x's cell), its slot's mark where that is
 * larger than what the cell holds, so the order of the records does not matter. */
static void mark_entities(const pe_obs_builder *b, const reader *r, const int32_t *crop,
                          uint8_t *img) {
    const pe_obs_spec *s = &b->spec;
    const int64_t size = s->image_size;
    const int64_t ox = (size - crop[2]) / 2, oy = (size - crop[3]) / 2;
    /* the crop's cells that land in the image (as tm_class_image places the crop) */
    const double xa = fmax(0, (double)-ox), xb = fmin(crop[2] - 1, (double)(size - 1 - ox));
    const double ya = fmax(0, (double)-oy), yb = fmin(crop[3] - 1, (double)(size - 1 - oy));
    uint8_t enabled[PE_MAX_SLOTS];
    square sq;
    slot_filter(b, r, enabled, &sq);
    for (int32_t e = 0; e < r->n_entities; e++) {
        const uint8_t *record = r->records[e];
        int32_t slot = slot_of(b, r, record, enabled, &sq);
        if (slot < 0 || s->image_marks[slot] == 0) continue;
        /* in the crop, as tm_class_image reads it (in double: exact, as floor(x) - crop was) */
        double x = (double)field_value(r, record, PE_F_X) - crop[0];
        double y = (double)field_value(r, record, PE_F_Y) - crop[1];
        if (!isfinite(x) || !isfinite(y)) continue;  /* a NaN position has no cell */
        double rx = s->image_boxes ? half_extent(r, record, PE_F_RX) : 0;
        double ry = s->image_boxes ? half_extent(r, record, PE_F_RY) : 0;
        double x0 = floor(x - rx), y0 = floor(y - ry);
        int64_t c0, c1, y_0, y_1;
        if (!cell_span(x0, fmax(ceil(x + rx) - 1, x0), xa, xb, &c0, &c1) ||
            !cell_span(y0, fmax(ceil(y + ry) - 1, y0), ya, yb, &y_0, &y_1))
            continue;
        for (int64_t cy = y_0; cy <= y_1; cy++) {
            uint8_t *line = img + (size - 1 - oy - cy) * size;  /* in the image: cy in [ya, yb] */
            for (int64_t c = c0 + ox; c <= c1 + ox; c++)
                if (line[c] < s->image_marks[slot]) line[c] = s->image_marks[slot];
        }
    }
}

/* Pad output type t of state k from `count` rows. */
static pe_status pad_type(const pe_obs_builder *b, work *w, int32_t t, const float *rows,
                          int64_t count, const pe_obs_out *out, int64_t k, int64_t *dropped) {
    const pe_obs_spec *s = &b->spec;
    const pe_obs_type *ty = &s->types[t];
    if (!grow((void **)&w->order, &w->order_cap, (size_t)count + 1, sizeof(pe_ranked)))
        return fail(w, PE_ERR_MEMORY, "padding");
    float player[2];
    const float *from = NULL;
    if (ty->from_player) {
        const pe_obs_type *pt = &s->types[s->player_type];
        const float *row0 = out->values[s->player_type] + k * (int64_t)pt->cap * pt->width;
        player[0] = row0[s->player_cx];
        player[1] = row0[s->player_cy];
        from = player;
    }
    *dropped += pe_pad_env(rows, count, ty->width, ty->cap, ty->cx, ty->cy, from, w->order,
                           out->values[t] + k * (int64_t)ty->cap * ty->width,
                           out->masks[t] + k * (int64_t)ty->cap);
    return PE_OK;
}

/* Output type t of state k from `count` rows: padded into out's arrays, or (ragged) kept in
 * the scratch they are in, only counted. */
static pe_status emit_type(const pe_obs_builder *b, work *w, int32_t t, const float *rows,
                           int64_t count, const pe_obs_out *out, int64_t k, int64_t *dropped) {
    if (out->counts == NULL) return pad_type(b, w, t, rows, count, out, k, dropped);
    w->kept[t] = count;
    w->kept_rows[t] = rows;
    out->counts[(int64_t)t * b->call_count + k] = count;
    return PE_OK;
}

/* The camera square as a crop, as tilemap.camera_crops places it (float64 arithmetic). */
static pe_status camera_crop(const pe_obs_builder *b, const reader *r, work *w, int32_t *crop,
                             float *ref) {
    double cx = scalar(r, b->id.center_x), cy = scalar(r, b->id.center_y);
    double dim = scalar(r, b->id.view_dim);
    if (!isfinite(cx) || !isfinite(cy) || !isfinite(dim) || !(dim > 0))
        return fail(w, PE_ERR_VALUE, "camera");
    double size = rint(dim);
    if (size < 1) size = 1;
    double x0 = floor(cx - size / 2 + 0.5), y0 = floor(cy - size / 2 + 0.5);
    if (size > TM_MAX_CROP || fabs(x0) > 1073741824.0 || fabs(y0) > 1073741824.0)
        return fail(w, PE_ERR_VALUE, "camera");
    crop[0] = (int32_t)x0;
    crop[1] = (int32_t)y0;
    crop[2] = crop[3] = (int32_t)size;
    ref[0] = (float)cx;
    ref[1] = (float)cy;
    return PE_OK;
}

/* The class image's crop: the camera square, or (PE_IMAGE_PLAYER) image_size cells around the
 * player's cell (entity record 0, procgen's agent), placed so that cell is the image's
 * middle one. */
static pe_status image_crop(const pe_obs_builder *b, const reader *r, work *w,
                            const int32_t *camera, int32_t *crop) {
    if (b->spec.image_centre != PE_IMAGE_PLAYER) {
        memcpy(crop, camera, 4 * sizeof(int32_t));
        return PE_OK;
    }
    if (r->n_entities < 1) return fail(w, PE_ERR_VALUE, "player");
    double x = floor(field_value(r, r->records[0], PE_F_X));
    double y = floor(field_value(r, r->records[0], PE_F_Y));
    if (!isfinite(x) || !isfinite(y) || fabs(x) > 1073741824.0 || fabs(y) > 1073741824.0)
        return fail(w, PE_ERR_VALUE, "player");
    int32_t size = b->spec.image_size;
    /* tm_class_image writes crop column c to image column c and crop row c to image row
     * size - 1 - c, so the player's cell lands on column (size - 1) / 2 and row size / 2 */
    crop[0] = (int32_t)x - (size - 1) / 2;
    crop[1] = (int32_t)y - (size - 1) / 2;
    crop[2] = crop[3] = size;
    return PE_OK;
}

/* The grid as aligned int32 cells with at least the crop's rows: a live grid as it is, a
 * state's grid rows copied (they need not be aligned). */
static const int32_t *window_grid(const reader *r, work *w, const int32_t *crop) {
    if (r->map) return (const int32_t *)(const void *)r->cells;
    if (!grow((void **)&w->grid, &w->grid_cap, (size_t)r->width * r->height + 1, sizeof(int32_t)))
        return NULL;
    int64_t lo = crop[1] < 0 ? 0 : crop[1], hi = (int64_t)crop[1] + crop[3];
    if (hi > r->height) hi = r->height;
    if (hi > lo)
        memcpy(w->grid + lo * r->width, r->cells + 4 * lo * r->width, (size_t)(4 * (hi - lo) * r->width));
    return w->grid;
}

static pe_status tiles(const pe_obs_builder *b, reader *r, work *w, const int32_t *crop,
                       const float *ref, const int32_t *grid, const pe_obs_out *out, int64_t k,
                       int64_t *dropped) {
    const pe_obs_spec *s = &b->spec;
    int64_t counts[TM_MAX_CLASSES + 1];
    if (!grow((void **)&w->cls, &w->cls_cap, (size_t)crop[2] * crop[3] + 1, 1))
        return fail(w, PE_ERR_MEMORY, "tilemap");
    tm_count_state(grid, r->height, r->width, s->tiles, (tm_mode)s->tile_mode, s->chunk, crop,
                   w->cls, counts);
    size_t total = 0;
    for (int32_t t = 0; t < b->n_tile_types; t++) total += (size_t)counts[t] * b->tile_nf[t];
    if (!grow((void **)&w->tile_rows, &w->tile_cap, total + 1, sizeof(float)))
        return fail(w, PE_ERR_MEMORY, "tilemap");
    float *outs[TM_MAX_CLASSES + 1];
    size_t at = 0;
    for (int32_t t = 0; t < b->n_tile_types; t++) {
        outs[t] = w->tile_rows + at;
        at += (size_t)counts[t] * b->tile_nf[t];
    }
    if (tm_fill_state(s->tiles, (tm_mode)s->tile_mode, s->chunk, crop, ref, w->cls, counts, outs,
                      b->tile_nf) != TM_OK)
        return fail(w, PE_ERR_SPEC, "tilemap");
    int32_t first = s->plan->n_slots;
    for (int32_t t = 0; t < b->n_tile_types; t++)
        if (emit_type(b, w, first + t, outs[t], counts[t], out, k, dropped) != PE_OK)
            return w->status;
    return PE_OK;
}

/* procgen's get_obj_from_floats (basic-abstract-game.cpp:167-185): negative coordinates and
 * cells off the grid are outside (features.batch_footing's _cell_at in numpy). */
static double cell_at(const reader *r, float x, float y) {
    if (x < 0 || y < 0) return PE_CELL_OUTSIDE;
    float fx = floorf(x), fy = floorf(y);
    if (fx >= (float)r->width || fy >= (float)r->height) return PE_CELL_OUTSIDE;
    return (double)grid_cell(r, (int64_t)fx + (int64_t)fy * r->width);
}

/* features.on_ground for one state: what the player stands on, probed where procgen's
 * platformers do before each step (x -+ (rx - .01), y - (ry + .01); coinrun.cpp:458-461). */
static double on_ground(const pe_obs_builder *b, reader *r) {
    const pe_obs_support *sup = &b->spec.support;
    const uint8_t *p = r->records[0];
    float x = field_value(r, p, PE_F_X), y = field_value(r, p, PE_F_Y);
    float vy = field_value(r, p, PE_F_VY);
    float rx = field_value(r, p, PE_F_RX), ry = field_value(r, p, PE_F_RY);
    float below = (float)((double)y - ((double)ry + .01));
    double cells[2] = {cell_at(r, (float)((double)x - ((double)rx - .01)), below),
                       cell_at(r, (float)((double)x + ((double)rx - .01)), below)};
    double edge = scalar(r, b->id.edge);
    int supported = 0;
    for (int c = 0; c < 2; c++) {
        double cell = cells[c] == PE_CELL_OUTSIDE ? edge : cells[c];
        supported |= cell == edge;
        for (int32_t k = 0; k < sup->n_tiles; k++) supported |= cell == (double)sup->tiles[k];
    }
    if (sup->flag >= 0) supported |= trailer_scalar(r, sup->flag) != 0;
    if (sup->at_rest) supported &= (double)vy == 0;
    return supported;
}

static double eat_time_left(reader *r, const pe_obs_builder *b, int32_t a, int32_t c) {
    double since = scalar(r, b->id.cur_time) - trailer_scalar(r, a);
    double timeout = trailer_scalar(r, c);
    timeout = timeout < 1 ? 1 : timeout;
    double left = timeout - since;
    return (left < 0 ? 0 : left) / timeout;
}

static double global_value(const pe_obs_builder *b, reader *r, const int32_t *op) {
    switch (op[0]) {
    case PE_G_SCALAR: return scalar(r, op[1]);
    case PE_G_TRAILER: return trailer_scalar(r, op[1]);
    case PE_G_STEP_FRACTION: {
        double timeout = scalar(r, b->id.timeout);
        return scalar(r, b->id.cur_time) / (timeout < 1 ? 1 : timeout);
    }
    case PE_G_EAT_TIME_LEFT: return eat_time_left(r, b, op[1], op[2]);
    case PE_G_EDIBLE: return eat_time_left(r, b, op[1], op[2]) > 0;
    case PE_G_DIFFERENCE: return trailer_scalar(r, op[1]) - trailer_scalar(r, op[2]);
    case PE_G_IS_ZERO: return trailer_scalar(r, op[1]) == 0;
    case PE_G_VECTOR_ITEM: return vector_item(r, op[1], op[2]);
    case PE_G_ON_GROUND: return on_ground(b, r);
    }
    return 0.0;
}

static void step_values(const pe_obs_builder *b, const reader *r, const pe_obs_out *out,
                        int64_t k) {
    if (out->reward) out->reward[k] = (float)scalar(r, b->id.reward);
    if (out->done) out->done[k] = scalar(r, b->id.done) != 0;
    if (out->level_complete) out->level_complete[k] = scalar(r, b->id.level_complete) != 0;
    if (out->level_seed) out->level_seed[k] = (int64_t)scalar(r, b->id.level_seed);
    if (out->prev_level_seed) out->prev_level_seed[k] = (int64_t)scalar(r, b->id.prev_level_seed);
}

/* The window's tiles and (padded output) the class image of state k. */
static pe_status window(pe_obs_builder *b, work *w, reader *r, const pe_obs_out *out, int64_t k,
                        int64_t *dropped) {
    const pe_obs_spec *s = &b->spec;
    int image = s->image != NULL && out->counts == NULL;
    if (s->tiles == NULL && !image) return PE_OK;
    int32_t crop[4];
    float ref[2];
    if (camera_crop(b, r, w, crop, ref) != PE_OK) return w->status;
    const int32_t *grid = window_grid(r, w, crop);
    if (grid == NULL) return fail(w, PE_ERR_MEMORY, "grid");
    if (s->tiles != NULL && tiles(b, r, w, crop, ref, grid, out, k, dropped) != PE_OK)
        return w->status;
    if (image) {
        int32_t at[4];
        if (image_crop(b, r, w, crop, at) != PE_OK) return w->status;
        if ((at[1] != crop[1] || at[3] != crop[3]) && (grid = window_grid(r, w, at)) == NULL)
            return fail(w, PE_ERR_MEMORY, "grid");
        uint8_t *img = out->image + k * (int64_t)s->image_size * s->image_size;
        tm_class_image(grid, r->height, r->width, s->image, at, s->image_size, img);
        if (s->image_marks != NULL) mark_entities(b, r, at, img);
    }
    return PE_OK;
}

static pe_status build(pe_obs_builder *b, work *w, reader *r, const pe_obs_out *out, int64_t k) {
    const pe_obs_spec *s = &b->spec;
    int64_t counts[PE_MAX_SLOTS], dropped = 0;
    r->b = b;
    r->records = w->records;
    r->bad = 0;
    size_t floats = (size_t)b->slot_start[s->plan->n_slots] * (size_t)r->n_entities;
    if (!grow((void **)&w->rows, &w->rows_cap, floats + 1, sizeof(float)))
        return fail(w, PE_ERR_MEMORY, "entity rows");
    gather(b, r, w->rows, counts);
    for (int32_t t = 0; t < s->plan->n_slots; t++) {
        const float *rows = w->rows + (int64_t)b->slot_start[t] * r->n_entities;
        if (emit_type(b, w, t, rows, counts[t], out, k, &dropped) != PE_OK) return w->status;
    }
    if (window(b, w, r, out, k, &dropped) != PE_OK) return w->status;
    for (int32_t j = 0; j < s->n_globals; j++)
        out->globals[k * s->n_globals + j] = (float)global_value(b, r, s->global_ops + 3 * j);
    if (out->counts == NULL) out->dropped[k] = dropped;
    step_values(b, r, out, k);
    if (r->bad) return fail(w, PE_ERR_TRUNCATED, "live trailer vector");
    w->status = PE_OK;
    return PE_OK;
}

/* ---- creating ---- */

static int valid_op(const pe_obs_builder *b, const int32_t *op) {
    int32_t a = op[1], c = op[2];
    switch (op[0]) {
    case PE_G_SCALAR: return a >= 0 && a < pe_scalar_count();
    case PE_G_TRAILER:
    case PE_G_IS_ZERO: return a >= 0 && a < b->n_trailer_scalars;
    case PE_G_STEP_FRACTION: return 1;
    case PE_G_EAT_TIME_LEFT:
    case PE_G_EDIBLE:
    case PE_G_DIFFERENCE:
        return a >= 0 && a < b->n_trailer_scalars && c >= 0 && c < b->n_trailer_scalars;
    case PE_G_VECTOR_ITEM: return a >= 0 && a < b->n_vectors && c >= 0 && c < PE_OBS_VECTOR_ITEMS;
    case PE_G_ON_GROUND: return b->id.edge >= 0;
    }
    return 0;
}

static int valid_type(const pe_obs_type *t) {
    return t->cap >= 0 && t->width >= 0 && t->cx < t->width && t->cy < t->width &&
           (t->cx >= 0) == (t->cy >= 0);
}

static int check_spec(pe_obs_builder *b) {
    const pe_obs_spec *s = &b->spec;
    const pe_entity_plan *plan = s->plan;
    if (plan == NULL || pe_plan_check(plan, b->game) != PE_OK) return 0;
    b->n_tile_types = 0;
    if (s->tiles != NULL) {
        if (tm_check_spec(s->tiles) != TM_OK || (s->tile_mode == TM_CHUNKS && s->chunk < 1) ||
            (s->tile_mode == TM_COLUMNS && s->tiles->base_class == TM_EMPTY))
            return 0;
        b->n_tile_types = tm_n_types((tm_mode)s->tile_mode, s->tiles->n_classes);
        if (b->n_tile_types < 0) return 0;
        for (int32_t t = 0; t < b->n_tile_types; t++)
            b->tile_nf[t] = tm_n_features((tm_mode)s->tile_mode, t, s->tiles->n_classes, 1);
    }
    if (s->image != NULL &&
        (tm_check_spec(s->image) != TM_OK || s->image_size < 1 || s->image_size > TM_MAX_IMAGE ||
         (s->image_centre != PE_IMAGE_CAMERA && s->image_centre != PE_IMAGE_PLAYER)))
        return 0;
    if (s->n_types != plan->n_slots + b->n_tile_types || s->n_types > PE_OBS_MAX_TYPES) return 0;
    for (int32_t t = 0; t < s->n_types; t++) {
        const pe_obs_type *ty = &s->types[t];
        int32_t width = t < plan->n_slots ? plan->feature_start[t + 1] - plan->feature_start[t]
                                          : b->tile_nf[t - plan->n_slots];
        if (!valid_type(ty) || ty->width != width) return 0;
        if (ty->from_player) {
            if (s->player_type < 0 || s->player_type >= t) return 0;
            const pe_obs_type *pt = &s->types[s->player_type];
            if (pt->cap < 1 || s->player_cx < 0 || s->player_cx >= pt->width ||
                s->player_cy < 0 || s->player_cy >= pt->width)
                return 0;
        }
    }
    if (s->n_globals < 0 || s->n_globals > PE_OBS_MAX_GLOBALS) return 0;
    for (int32_t j = 0; j < s->n_globals; j++)
        if (!valid_op(b, s->global_ops + 3 * j)) return 0;
    if (s->support.n_tiles < 0 || s->support.n_tiles > PE_OBS_MAX_SUPPORT ||
        s->support.flag >= b->n_trailer_scalars)
        return 0;
    if (s->derived != NULL)
        for (int32_t f = 0; f < plan->feature_start[plan->n_slots]; f++)
            if (s->derived[f] == PE_D_IS_TARGET &&
                (s->target_vector < 0 || s->target_vector >= b->n_vectors))
                return 0;
    return 1;
}

static void index_trailer(pe_obs_builder *b) {
    const pe_game_spec *g = b->game;
    b->n_trailer_scalars = b->n_vectors = 0;
    for (int32_t i = 0; i < g->n_trailer && i < PE_MAX_TRAILER_ITEMS; i++) {
        if (g->trailer_kinds[i] >= PE_T_VEC_I32) {
            if (b->n_vectors < PE_MAX_TRAILER_VECTORS) b->vector_item[b->n_vectors++] = i;
        } else {
            b->scalar_item[b->n_trailer_scalars++] = i;
        }
    }
    for (int f = 0; f < PE_ENTITY_FIELDS; f++) {
        b->bytes_field_at[f] = PE_ENTITY_RECORD[f].at;
        b->bytes_field_kind[f] = PE_ENTITY_RECORD[f].kind == 'f' ? PE_T_F32 : PE_T_I32;
    }
}

static scalar_ids find_scalars(void) {
    scalar_ids id = {pe_scalar_index("reward"), pe_scalar_index("done"),
                     pe_scalar_index("level_complete"), pe_scalar_index("cur_time"),
                     pe_scalar_index("timeout"), pe_scalar_index("current_level_seed"),
                     pe_scalar_index("prev_level_seed"), pe_scalar_index("center_x"),
                     pe_scalar_index("center_y"), pe_scalar_index("view_dim"),
                     pe_scalar_index("out_of_bounds_object"),
                     pe_scalar_index("distribution_mode")};
    return id;
}

pe_obs_builder *pe_obs_create(const pe_obs_spec *spec, const pe_game_spec *game, int64_t n,
                              pe_status *status) {
    *status = PE_ERR_SPEC;
    if (spec == NULL || game == NULL || n < 1 || pe_check_spec(game) != PE_OK) return NULL;
    pe_obs_builder *b = (pe_obs_builder *)calloc(1, sizeof(pe_obs_builder));
    if (b == NULL) {
        *status = PE_ERR_MEMORY;
        return NULL;
    }
    b->spec = *spec;
    b->game = game;
    b->n = n;
    b->id = find_scalars();
    index_trailer(b);
    if (!check_spec(b)) {
        free(b);
        return NULL;
    }
    const pe_entity_plan *plan = spec->plan;
    for (int32_t s = 0; s <= plan->n_slots; s++) b->slot_start[s] = plan->feature_start[s];
    b->ragged_count = -1;
    b->work = (work *)calloc((size_t)n, sizeof(work));
    b->starts = (int64_t *)calloc((size_t)n * (size_t)(spec->n_types + 1), sizeof(int64_t));
    if (b->work == NULL || b->starts == NULL) {
        free(b->work);
        free(b->starts);
        free(b);
        *status = PE_ERR_MEMORY;
        return NULL;
    }
    *status = PE_OK;
    return b;
}

void pe_obs_destroy(pe_obs_builder *b) {
    if (b == NULL) return;
    for (int64_t i = 0; i < b->n; i++) {
        work *w = &b->work[i];
        free(w->rows);
        free(w->order);
        free(w->cls);
        free(w->tile_rows);
        free(w->grid);
        free(w->records);
    }
    free(b->work);
    free(b->starts);
    free(b);
}

/* ---- running ---- */

typedef struct {
    pe_obs_builder *b;
    const pe_state_set *set;
    const int64_t *indices;
    const pe_live_source *source;
    const int32_t *actions;
    pe_state_set *terminal_set;
    const pe_game_spec *game_spec;
    int flags;
    pe_live_outputs *outputs;
    const pe_obs_out *out;
} obs_job;

static void from_states_one(void *raw, int64_t k) {
    obs_job *job = (obs_job *)raw;
    work *w = &job->b->work[k];
    reader r;
    int64_t i = job->indices ? job->indices[k] : k;
    if (read_bytes(job->b, job->set, i, w, &r) == PE_OK) build(job->b, w, &r, job->out, k);
}

static void live_one(obs_job *job, int64_t k) {
    work *w = &job->b->work[k];
    reader r;
    if (read_live(job->source->spec, (const uint8_t *)job->source->games[k], w, &r) == PE_OK)
        build(job->b, w, &r, job->out, k);
}

static void from_live_one(void *raw, int64_t k) { live_one((obs_job *)raw, k); }

static void step_one(void *raw, int64_t k) {
    obs_job *job = (obs_job *)raw;
    pe_live_step_game(job->source->spec, job->source->games[k], job->actions[k], job->flags, k,
                      job->terminal_set, job->game_spec, job->outputs);
    live_one(job, k);
}

static pe_status first_failure(const pe_obs_builder *b, int64_t count, int64_t *bad_index,
                               pe_error *err) {
    for (int64_t k = 0; k < count; k++)
        if (b->work[k].status != PE_OK) {
            *bad_index = k;
            *err = b->work[k].err;
            return b->work[k].status;
        }
    return PE_OK;
}

static pe_status refuse(pe_error *err, const char *field) {
    err->status = PE_ERR_SPEC;
    err->offset = 0;
    err->field = field;
    return PE_ERR_SPEC;
}

/* One pool run of `count` states; a ragged one's rows are then there to copy. */
static pe_status run(pe_pool *pool, int64_t count, pe_task_fn fn, obs_job *job,
                     int64_t *bad_index, pe_error *err) {
    pe_obs_builder *b = job->b;
    b->call_count = count;
    b->ragged_count = -1;
    pe_pool_run(pool, count, fn, job);
    pe_status status = first_failure(b, count, bad_index, err);
    if (status == PE_OK && job->out->counts != NULL) b->ragged_count = count;
    return status;
}

pe_status pe_obs_from_states(pe_pool *pool, pe_obs_builder *b, const pe_state_set *set,
                             const int64_t *indices, int64_t count, const pe_obs_out *out,
                             int64_t *bad_index, pe_error *err) {
    *bad_index = -1;
    if (count < 0 || count > b->n || (indices == NULL && count > set->n)) return refuse(err, "count");
    for (int64_t k = 0; indices != NULL && k < count; k++)
        if (indices[k] < 0 || indices[k] >= set->n) return refuse(err, "indices");
    obs_job job = {b, set, indices, NULL, NULL, NULL, NULL, 0, NULL, out};
    return run(pool, count, from_states_one, &job, bad_index, err);
}

pe_status pe_obs_from_live(pe_pool *pool, pe_obs_builder *b, const pe_live_source *source,
                           const pe_obs_out *out, int64_t *bad_index, pe_error *err) {
    *bad_index = -1;
    if (source->n_games != b->n) return refuse(err, "live games");
    obs_job job = {b, NULL, NULL, source, NULL, NULL, NULL, 0, NULL, out};
    return run(pool, source->n_games, from_live_one, &job, bad_index, err);
}

pe_status pe_obs_step_live(pe_pool *pool, pe_obs_builder *b, const pe_live_source *source,
                           const int32_t *actions, pe_state_set *terminal_set,
                           const pe_game_spec *game_spec, int flags, pe_live_outputs *outputs,
                           const pe_obs_out *out, int64_t *bad_index, pe_error *err) {
    *bad_index = -1;
    if (source->n_games != b->n || (terminal_set != NULL && terminal_set->n < b->n))
        return refuse(err, "live games");
    obs_job job = {b, NULL, NULL, source, actions, terminal_set, game_spec, flags, outputs, out};
    pe_status status = run(pool, source->n_games, step_one, &job, bad_index, err);
    if (status != PE_OK || terminal_set == NULL) return status;
    for (int64_t i = 0; i < source->n_games; i++)
        if (outputs->terminal[i] && terminal_set->status[i] != PE_OK) {
            *bad_index = i;
            *err = terminal_set->errors[i];
            return terminal_set->status[i];
        }
    return PE_OK;
}

/* ---- copying a ragged call's rows ---- */

typedef struct {
    const pe_obs_builder *b;
    const pe_obs_rows *out;
    int64_t count;
} copy_job;

static void copy_one(void *raw, int64_t k) {
    const copy_job *job = (const copy_job *)raw;
    const pe_obs_builder *b = job->b;
    const work *w = &b->work[k];
    for (int32_t t = 0; t < b->spec.n_types; t++) {
        const pe_obs_rows *o = &job->out[t];
        int64_t m = w->kept[t];
        if (o->rows == NULL || m == 0) continue;
        int32_t nf = b->spec.types[t].width;
        const float *src = w->kept_rows[t];
        float *dst = o->rows + b->starts[(int64_t)t * job->count + k] * o->width;
        if (o->columns == NULL) {
            memcpy(dst, src, (size_t)m * (size_t)nf * sizeof(float));
            continue;
        }
        for (int64_t e = 0; e < m; e++, src += nf, dst += o->width)
            for (int32_t j = 0; j < o->width; j++) dst[j] = src[o->columns[j]];
    }
}

/* Output t's first row of each state (b->starts), or 0 when out[t] cannot hold them all. */
static int place_rows(pe_obs_builder *b, int32_t t, int64_t count, const pe_obs_rows *o) {
    int32_t nf = b->spec.types[t].width;
    if (o->width < 0 || (o->columns == NULL && o->width != nf)) return 0;
    for (int32_t j = 0; o->columns != NULL && j < o->width; j++)
        if (o->columns[j] < 0 || o->columns[j] >= nf) return 0;
    int64_t rows = 0;
    for (int64_t k = 0; k < count; k++) {
        b->starts[(int64_t)t * count + k] = rows;
        rows += b->work[k].kept[t];
    }
    return rows * o->width <= o->capacity;
}

static pe_status bad_rows(pe_error *err) {
    refuse(err, "ragged rows");
    err->status = PE_ERR_ARG;
    return PE_ERR_ARG;
}

pe_status pe_obs_ragged_rows(pe_pool *pool, pe_obs_builder *b, int64_t count,
                             const pe_obs_rows *out, int64_t *totals, pe_error *err) {
    if (count < 0 || count != b->ragged_count) return bad_rows(err);
    for (int32_t t = 0; t < b->spec.n_types; t++)
        if (out[t].rows != NULL && !place_rows(b, t, count, &out[t])) return bad_rows(err);
    for (int64_t k = 0; totals != NULL && k < count; k++) {
        totals[k] = 0;
        for (int32_t t = 0; t < b->spec.n_types; t++)
            if (out[t].rows != NULL) totals[k] += b->work[k].kept[t];
    }
    copy_job job = {b, out, count};
    pe_pool_run(pool, count, copy_one, &job);
    return PE_OK;
}
