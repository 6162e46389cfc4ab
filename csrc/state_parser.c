/* Bounds-checked parser for procgen get_state() bytes; see state_parser.h. */
#include "state_parser.h"

#include <string.h>

#include "le_read.h"

/* ---- the header and base scalars, as data ---- */

typedef enum { ANCHOR_STEP, ANCHOR_OPTIONS, ANCHOR_BASE, ANCHOR_CAMERA } anchor;
typedef struct {
    const char *name;
    anchor from;
    int16_t at;   /* byte offset from the anchor */
    char kind;    /* 'i', 'f' or 'b' */
} scalar_field;

/* The camera centre, named: the table lists it and pe_camera reads it without a lookup (the view's
 * size is the camera record's, state_parser.h). */
#define CENTER_X_FIELD {"center_x", ANCHOR_BASE, 56, 'f'}
#define CENTER_Y_FIELD {"center_y", ANCHOR_BASE, 60, 'f'}

/* The scalars of the options, step and base sections; the camera section's follow them
 * (PE_CAMERA_RECORD's first PE_CAMERA_SCALARS fields), see scalar_row. */
static const scalar_field SCALARS[] = {
    {"reward", ANCHOR_STEP, 0, 'f'},
    {"done", ANCHOR_STEP, 4, 'b'},
    {"level_complete", ANCHOR_STEP, 8, 'b'},
    {"action", ANCHOR_STEP, 12, 'i'},
    {"timeout", ANCHOR_STEP, 16, 'i'},
    {"current_level_seed", ANCHOR_STEP, 20, 'i'},
    {"prev_level_seed", ANCHOR_STEP, 24, 'i'},
    {"episodes_remaining", ANCHOR_STEP, 28, 'i'},
    {"episode_done", ANCHOR_STEP, 32, 'b'},
    {"last_reward_timer", ANCHOR_STEP, 36, 'i'},
    {"last_reward", ANCHOR_STEP, 40, 'f'},
    {"default_action", ANCHOR_STEP, 44, 'i'},
    {"fixed_asset_seed", ANCHOR_STEP, 48, 'i'},
    {"cur_time", ANCHOR_STEP, 52, 'i'},
    {"is_waiting_for_step", ANCHOR_STEP, 56, 'b'},
    {"paint_vel_info", ANCHOR_OPTIONS, 0, 'b'},
    {"use_generated_assets", ANCHOR_OPTIONS, 4, 'b'},
    {"use_monochrome_assets", ANCHOR_OPTIONS, 8, 'b'},
    {"restrict_themes", ANCHOR_OPTIONS, 12, 'b'},
    {"use_backgrounds", ANCHOR_OPTIONS, 16, 'b'},
    {"center_agent", ANCHOR_OPTIONS, 20, 'b'},
    {"debug_mode", ANCHOR_OPTIONS, 24, 'i'},
    {"distribution_mode", ANCHOR_OPTIONS, 28, 'i'},
    {"use_sequential_levels", ANCHOR_OPTIONS, 32, 'b'},
    {"use_easy_jump", ANCHOR_OPTIONS, 36, 'b'},
    {"plain_assets", ANCHOR_OPTIONS, 40, 'i'},
    {"physics_mode", ANCHOR_OPTIONS, 44, 'i'},
    {"grid_step", ANCHOR_OPTIONS, 48, 'b'},
    {"level_seed_low", ANCHOR_OPTIONS, 52, 'i'},
    {"level_seed_high", ANCHOR_OPTIONS, 56, 'i'},
    {"game_type", ANCHOR_OPTIONS, 60, 'i'},
    {"game_n", ANCHOR_OPTIONS, 64, 'i'},
    {"use_procgen_background", ANCHOR_BASE, 0, 'b'},
    {"background_index", ANCHOR_BASE, 4, 'i'},
    {"bg_tile_ratio", ANCHOR_BASE, 8, 'f'},
    {"bg_pct_x", ANCHOR_BASE, 12, 'f'},
    {"char_dim", ANCHOR_BASE, 16, 'f'},
    {"last_move_action", ANCHOR_BASE, 20, 'i'},
    {"move_action", ANCHOR_BASE, 24, 'i'},
    {"special_action", ANCHOR_BASE, 28, 'i'},
    {"mixrate", ANCHOR_BASE, 32, 'f'},
    {"maxspeed", ANCHOR_BASE, 36, 'f'},
    {"max_jump", ANCHOR_BASE, 40, 'f'},
    {"action_vx", ANCHOR_BASE, 44, 'f'},
    {"action_vy", ANCHOR_BASE, 48, 'f'},
    {"action_vrot", ANCHOR_BASE, 52, 'f'},
    CENTER_X_FIELD,
    CENTER_Y_FIELD,
    {"random_agent_start", ANCHOR_BASE, 64, 'b'},
    {"has_useful_vel_info", ANCHOR_BASE, 68, 'b'},
    {"step_rand_int", ANCHOR_BASE, 72, 'i'},
};
#define N_SECTION_SCALARS ((int)(sizeof(SCALARS) / sizeof(SCALARS[0])))
#define N_SCALARS (N_SECTION_SCALARS + PE_CAMERA_SCALARS)

/* Scalar i (0 <= i < N_SCALARS): a row of SCALARS, or a camera scalar of PE_CAMERA_RECORD. */
static inline scalar_field scalar_row(int i) {
    if (i < N_SECTION_SCALARS) return SCALARS[i];
    const pe_record_field *f = &PE_CAMERA_RECORD[i - N_SECTION_SCALARS];
    scalar_field row = {f->name, ANCHOR_CAMERA, (int16_t)f->at, f->kind};
    return row;
}

int pe_scalar_count(void) { return N_SCALARS; }

const char *pe_scalar_name(int i) { return (i >= 0 && i < N_SCALARS) ? scalar_row(i).name : NULL; }

char pe_scalar_kind(int i) { return (i >= 0 && i < N_SCALARS) ? scalar_row(i).kind : 0; }

pe_status pe_scalar_position(int i, int *section, int *at) {
    if (i < 0 || i >= N_SCALARS) return PE_ERR_ARG;
    /* sections in byte order: options, step, base, camera */
    static const int SECTION_OF_ANCHOR[] = {1, 0, 2, 3};
    scalar_field row = scalar_row(i);
    *section = SECTION_OF_ANCHOR[row.from];
    *at = row.at;
    return PE_OK;
}

const char *pe_status_text(pe_status status) {
    switch (status) {
    case PE_OK: return "ok";
    case PE_ERR_TRUNCATED: return "state is truncated";
    case PE_ERR_VERSION: return "unsupported serialisation version (expected 0)";
    case PE_ERR_GAME: return "game name differs from the batch's game";
    case PE_ERR_NEGATIVE: return "negative length or count";
    case PE_ERR_GRID: return "inconsistent grid dimensions";
    case PE_ERR_PLAYER: return "entity 0 is not the player";
    case PE_ERR_BOOL: return "bool field is neither 0 nor 1";
    case PE_ERR_TERMINATOR: return "missing 0xCAFECAFE terminator";
    case PE_ERR_TRAILING: return "bytes after the terminator";
    case PE_ERR_SHAPE: return "grid size differs from the first state of the batch";
    case PE_ERR_SPEC: return "invalid game spec";
    case PE_ERR_INVARIANT: return "a game invariant does not hold";
    case PE_ERR_VALUE: return "value does not fit its field's type";
    case PE_ERR_SPACE: return "output buffer is too small for the state";
    case PE_ERR_MEMORY: return "out of memory";
    case PE_ERR_ARG: return "argument out of range";
    case PE_ERR_LAYOUT: return "a live game's container does not look valid (layout)";
    }
    return "unknown status";
}

/* Indexed by code; the Python binding names every exception class by these. */
static const char *const STATUS_NAMES[] = {
    "PE_OK", "PE_ERR_TRUNCATED", "PE_ERR_VERSION", "PE_ERR_GAME", "PE_ERR_NEGATIVE",
    "PE_ERR_GRID", "PE_ERR_PLAYER", "PE_ERR_BOOL", "PE_ERR_TERMINATOR", "PE_ERR_TRAILING",
    "PE_ERR_SHAPE", "PE_ERR_SPEC", "PE_ERR_INVARIANT", "PE_ERR_VALUE", "PE_ERR_SPACE",
    "PE_ERR_MEMORY", "PE_ERR_ARG", "PE_ERR_LAYOUT",
};

const char *pe_status_name(int status) {
    int n = (int)(sizeof(STATUS_NAMES) / sizeof(STATUS_NAMES[0]));
    return (status >= 0 && status < n) ? STATUS_NAMES[status] : NULL;
}

int64_t pe_trailer_item_bytes(uint8_t kind) {
    return kind == PE_T_VEC_ENTITY ? PE_ENTITY_BYTES : 4;
}

pe_status pe_check_spec(const pe_game_spec *spec) {
    int vectors = 0;
    if (spec == NULL || spec->name == NULL || spec->name_len < 0 ||
        spec->name_len > PE_MAX_GAME_NAME || spec->n_trailer < 0 ||
        spec->n_trailer > PE_MAX_TRAILER_ITEMS ||
        (spec->n_trailer > 0 && (spec->trailer_kinds == NULL || spec->trailer_names == NULL)))
        return PE_ERR_SPEC;
    for (int i = 0; i < spec->n_trailer; i++) {
        if (spec->trailer_kinds[i] > PE_T_VEC_ENTITY) return PE_ERR_SPEC;
        if (spec->trailer_kinds[i] >= PE_T_VEC_I32) vectors++;
    }
    if (spec->n_invariants < 0 || spec->n_invariants > PE_MAX_INVARIANTS ||
        (spec->n_invariants > 0 && spec->invariants == NULL))
        return PE_ERR_SPEC;
    for (int i = 0; i < spec->n_invariants; i++) {
        const pe_value *sides[2] = {&spec->invariants[i].lhs, &spec->invariants[i].rhs};
        for (int k = 0; k < 2; k++) {
            const pe_value *v = sides[k];
            if (v->kind < PE_V_CONST || v->kind > PE_V_GRID_CELLS) return PE_ERR_SPEC;
            if (v->kind == PE_V_SCALAR || v->kind == PE_V_LENGTH) {
                if (v->index < 0 || v->index >= spec->n_trailer) return PE_ERR_SPEC;
                int is_vector = spec->trailer_kinds[v->index] >= PE_T_VEC_I32;
                if (is_vector != (v->kind == PE_V_LENGTH)) return PE_ERR_SPEC;
            }
        }
    }
    return vectors <= PE_MAX_TRAILER_VECTORS ? PE_OK : PE_ERR_SPEC;
}

/* ---- the walk ---- */

typedef struct {
    const uint8_t *buf;
    int64_t len;
    int64_t at;
    pe_error *err;
} cursor;

static pe_status fail(cursor *c, pe_status status, int64_t offset, const char *field) {
    if (c->err) {
        c->err->status = status;
        c->err->offset = offset;
        c->err->field = field;
    }
    return status;
}

/* Are `n` more bytes available at the cursor? n is never negative here. */
static inline int has(const cursor *c, int64_t n) { return n <= c->len - c->at; }

static pe_status take_i32(cursor *c, const char *field, int32_t *out) {
    if (!has(c, 4)) return fail(c, PE_ERR_TRUNCATED, c->at, field);
    *out = pe_load_i32(c->buf + c->at);
    c->at += 4;
    return PE_OK;
}

static pe_status take_bool(cursor *c, const char *field) {
    int32_t v;
    pe_status s = take_i32(c, field, &v);
    if (s != PE_OK) return s;
    if (v != 0 && v != 1) return fail(c, PE_ERR_BOOL, c->at - 4, field);
    return PE_OK;
}

/* A count followed by count * item_bytes bytes; the count is checked before it is used. */
static pe_status take_vector(cursor *c, const char *field, int64_t item_bytes, int32_t *count) {
    int64_t count_at = c->at;
    pe_status s = take_i32(c, field, count);
    if (s != PE_OK) return s;
    if (*count < 0) return fail(c, PE_ERR_NEGATIVE, count_at, field);
    if (!has(c, (int64_t)*count * item_bytes)) return fail(c, PE_ERR_TRUNCATED, count_at, field);
    c->at += (int64_t)*count * item_bytes;
    return PE_OK;
}

/* An RNG: is_seeded bool + length-prefixed text, skipped by its length. */
static pe_status skip_rng(cursor *c, const char *seeded_field, const char *text_field) {
    int32_t text_len;
    pe_status s = take_bool(c, seeded_field);
    if (s != PE_OK) return s;
    return take_vector(c, text_field, 1, &text_len);
}

/* Validate bool scalars of a fixed block that starts at `block_at`. */
static pe_status check_block_bools(cursor *c, anchor from, int64_t block_at) {
    for (int i = 0; i < N_SCALARS; i++) {
        scalar_field row = scalar_row(i);
        if (row.from != from || row.kind != 'b') continue;
        int64_t at = block_at + row.at;
        int32_t v = pe_load_i32(c->buf + at);
        if (v != 0 && v != 1) return fail(c, PE_ERR_BOOL, at, row.name);
    }
    return PE_OK;
}

static pe_status take_block(cursor *c, anchor from, int64_t bytes, const char *field,
                            int64_t *block_at) {
    if (!has(c, bytes)) return fail(c, PE_ERR_TRUNCATED, c->at, field);
    *block_at = c->at;
    c->at += bytes;
    return check_block_bools(c, from, *block_at);
}

pe_status pe_read_game_name(const uint8_t *buf, int64_t len, const uint8_t **name,
                            int32_t *name_len, pe_error *err) {
    cursor c = {buf, len, 0, err};
    int32_t version;
    pe_status s = take_i32(&c, "version", &version);
    if (s != PE_OK) return s;
    if (version != 0) return fail(&c, PE_ERR_VERSION, 0, "version");
    s = take_vector(&c, "game_name", 1, name_len);
    if (s != PE_OK) return s;
    if (*name_len > PE_MAX_GAME_NAME) return fail(&c, PE_ERR_GAME, 4, "game_name");
    *name = buf + 8;
    return PE_OK;
}

static pe_status walk_trailer(cursor *c, const pe_game_spec *spec, pe_layout *layout) {
    layout->n_vectors = 0;
    layout->n_trailer_scalars = 0;
    for (int i = 0; i < spec->n_trailer; i++) {
        const char *field = spec->trailer_names[i];
        uint8_t kind = spec->trailer_kinds[i];
        pe_status s;
        layout->trailer_item_at[i] = (int32_t)c->at;
        if (kind < PE_T_VEC_I32) {
            int32_t ignored;
            s = kind == PE_T_BOOL ? take_bool(c, field) : take_i32(c, field, &ignored);
            layout->n_trailer_scalars++;
        } else {
            int32_t count = 0;
            int64_t items_at = c->at + 4;
            s = take_vector(c, field, pe_trailer_item_bytes(kind), &count);
            if (s == PE_OK && kind == PE_T_VEC_BOOL) {
                for (int32_t k = 0; k < count; k++) {
                    int32_t v = pe_load_i32(c->buf + items_at + 4 * (int64_t)k);
                    if (v != 0 && v != 1)
                        return fail(c, PE_ERR_BOOL, items_at + 4 * (int64_t)k, field);
                }
            }
            layout->vector_counts[layout->n_vectors++] = count;
        }
        if (s != PE_OK) return s;
    }
    return PE_OK;
}

/* Which trailer vector item `item` is (its index into layout->vector_counts). */
static int vector_index(const pe_game_spec *spec, int32_t item) {
    int v = 0;
    for (int32_t i = 0; i < item; i++) v += spec->trailer_kinds[i] >= PE_T_VEC_I32;
    return v;
}

double pe_trailer_item_value(const uint8_t *buf, const pe_layout *layout, const pe_game_spec *spec,
                             int32_t item) {
    if (item < 0 || item >= spec->n_trailer) return 0.0;
    uint8_t kind = spec->trailer_kinds[item];
    /* A vector's length as measured, not re-read: the buffer may have changed since. */
    if (kind >= PE_T_VEC_I32) return (double)layout->vector_counts[vector_index(spec, item)];
    const uint8_t *p = buf + layout->trailer_item_at[item];
    return kind == PE_T_F32 ? (double)pe_load_f32(p) : (double)pe_load_i32(p);
}

static int64_t invariant_value(const uint8_t *buf, const pe_layout *layout,
                               const pe_game_spec *spec, const pe_value *v) {
    switch (v->kind) {
    case PE_V_CONST: return v->index;
    case PE_V_SCALAR:
    case PE_V_LENGTH: return (int64_t)pe_trailer_item_value(buf, layout, spec, v->index);
    case PE_V_GRID_W: return layout->width;
    case PE_V_GRID_H: return layout->height;
    case PE_V_GRID_CELLS: return (int64_t)layout->width * layout->height;
    }
    return 0;
}

static pe_status check_invariants(const uint8_t *buf, const pe_game_spec *spec,
                                  const pe_layout *layout, pe_error *err) {
    for (int i = 0; i < spec->n_invariants; i++) {
        const pe_invariant *inv = &spec->invariants[i];
        if (invariant_value(buf, layout, spec, &inv->lhs) !=
            invariant_value(buf, layout, spec, &inv->rhs)) {
            const pe_value *at = inv->lhs.kind == PE_V_SCALAR || inv->lhs.kind == PE_V_LENGTH
                                     ? &inv->lhs : &inv->rhs;
            err->status = PE_ERR_INVARIANT;
            err->offset = (at->kind == PE_V_SCALAR || at->kind == PE_V_LENGTH)
                              ? layout->trailer_item_at[at->index] : layout->trailer_at;
            err->field = inv->name;
            return PE_ERR_INVARIANT;
        }
    }
    return PE_OK;
}

static pe_status measure_structure(const uint8_t *buf, int64_t len, const pe_game_spec *spec,
                                   pe_layout *layout, pe_error *err);

pe_status pe_measure(const uint8_t *buf, int64_t len, const pe_game_spec *spec,
                     pe_layout *layout, pe_error *err) {
    pe_status s = measure_structure(buf, len, spec, layout, err);
    if (s != PE_OK) return s;
    return check_invariants(buf, spec, layout, err);
}

static inline int32_t camera_i32(const cursor *c, const pe_layout *layout, pe_camera_field f) {
    return pe_load_i32(c->buf + layout->camera_at + PE_CAMERA_RECORD[f].at);
}

/* A failure at camera field f, named and placed by the camera record. */
static pe_status camera_fail(cursor *c, pe_status status, const pe_layout *layout,
                             pe_camera_field f) {
    return fail(c, status, layout->camera_at + PE_CAMERA_RECORD[f].at, PE_CAMERA_RECORD[f].name);
}

/* The grid after the camera block: its w, h and cell count agree with each other, with the
 * grid_size read before the entities and with main_width/main_height, and its cells are there. */
static pe_status take_grid(cursor *c, pe_layout *layout, int32_t grid_size, int64_t grid_size_at) {
    int32_t w = camera_i32(c, layout, PE_CAM_GRID_W), h = camera_i32(c, layout, PE_CAM_GRID_H);
    int32_t count = camera_i32(c, layout, PE_CAM_GRID_COUNT);
    if (w < 0) return camera_fail(c, PE_ERR_NEGATIVE, layout, PE_CAM_GRID_W);
    if (h < 0) return camera_fail(c, PE_ERR_NEGATIVE, layout, PE_CAM_GRID_H);
    if ((int64_t)w * h != count) return camera_fail(c, PE_ERR_GRID, layout, PE_CAM_GRID_COUNT);
    if (grid_size != count) return fail(c, PE_ERR_GRID, grid_size_at, "grid_size");
    if (camera_i32(c, layout, PE_CAM_MAIN_WIDTH) != w)
        return camera_fail(c, PE_ERR_GRID, layout, PE_CAM_MAIN_WIDTH);
    if (camera_i32(c, layout, PE_CAM_MAIN_HEIGHT) != h)
        return camera_fail(c, PE_ERR_GRID, layout, PE_CAM_MAIN_HEIGHT);
    if (!has(c, 4 * (int64_t)count))  /* reported at the count, which promised the cells */
        return fail(c, PE_ERR_TRUNCATED, layout->camera_at + PE_CAMERA_RECORD[PE_CAM_GRID_COUNT].at,
                    "grid.data");
    layout->grid_at = c->at;
    layout->width = w;
    layout->height = h;
    c->at += 4 * (int64_t)count;
    return PE_OK;
}

/* The walk and its structural checks; the invariants come after. */
static pe_status measure_structure(const uint8_t *buf, int64_t len, const pe_game_spec *spec,
                                   pe_layout *layout, pe_error *err) {
    cursor c = {buf, len, 0, err};
    const uint8_t *name;
    int32_t name_len, grid_size, n_entities;
    int64_t block_at;
    pe_status s;

    if (buf == NULL || len < 0) return fail(&c, PE_ERR_TRUNCATED, 0, "version");
    memset(layout, 0, sizeof(*layout));
    if ((s = pe_read_game_name(buf, len, &name, &name_len, err)) != PE_OK) return s;
    if (name_len != spec->name_len || memcmp(name, spec->name, (size_t)name_len) != 0)
        return fail(&c, PE_ERR_GAME, 4, "game_name");
    layout->name_len = name_len;
    c.at = PE_OPTIONS_AT + (int64_t)name_len;

    if ((s = take_block(&c, ANCHOR_OPTIONS, PE_OPTIONS_BYTES, "options", &block_at)) != PE_OK)
        return s;
    if ((s = skip_rng(&c, "level_seed_rand_gen.is_seeded", "level_seed_rand_gen")) != PE_OK)
        return s;
    if ((s = skip_rng(&c, "rand_gen.is_seeded", "rand_gen")) != PE_OK) return s;
    if ((s = take_block(&c, ANCHOR_STEP, PE_STEP_BYTES, "reward", &layout->step_at)) != PE_OK)
        return s;

    int64_t grid_size_at = c.at;
    if ((s = take_i32(&c, "grid_size", &grid_size)) != PE_OK) return s;
    int64_t entities_count_at = c.at;
    if ((s = take_vector(&c, "entities", PE_ENTITY_BYTES, &n_entities)) != PE_OK) return s;
    layout->entities_at = entities_count_at + 4;
    layout->n_entities = n_entities;
    if (n_entities < 1) return fail(&c, PE_ERR_PLAYER, entities_count_at, "entities");
    int64_t player_type_at = layout->entities_at + PE_ENTITY_RECORD[PE_F_TYPE].at;
    if (pe_load_i32(buf + player_type_at) != 0)
        return fail(&c, PE_ERR_PLAYER, player_type_at, "entities[0].type");

    if ((s = take_block(&c, ANCHOR_BASE, PE_BASE_BYTES, "use_procgen_background",
                        &layout->base_at)) != PE_OK)
        return s;
    if ((s = skip_rng(&c, "asset_rand_gen.is_seeded", "asset_rand_gen")) != PE_OK) return s;
    if ((s = take_block(&c, ANCHOR_CAMERA, PE_CAMERA_BYTES, "main_width", &layout->camera_at)) !=
        PE_OK)
        return s;

    if ((s = take_grid(&c, layout, grid_size, grid_size_at)) != PE_OK) return s;

    layout->trailer_at = c.at;
    if ((s = walk_trailer(&c, spec, layout)) != PE_OK) return s;

    int32_t terminator;
    int64_t terminator_at = c.at;
    if ((s = take_i32(&c, "terminator", &terminator)) != PE_OK) return s;
    if (terminator != PE_TERMINATOR)
        return fail(&c, PE_ERR_TERMINATOR, terminator_at, "terminator");
    if (c.at != len) return fail(&c, PE_ERR_TRAILING, c.at, "terminator");
    layout->size = len;
    return PE_OK;
}

/* ---- copying out ---- */

static int64_t anchor_offset(const pe_layout *layout, anchor from) {
    switch (from) {
    case ANCHOR_STEP: return layout->step_at;
    case ANCHOR_OPTIONS: return PE_OPTIONS_AT + (int64_t)layout->name_len;
    case ANCHOR_BASE: return layout->base_at;
    case ANCHOR_CAMERA: return layout->camera_at;
    }
    return 0;
}

static inline double read_value(const uint8_t *p, int is_float) {
    return is_float ? (double)pe_load_f32(p) : (double)pe_load_i32(p);
}

static inline float read_entity_field(const uint8_t *record, int32_t field) {
    const pe_record_field *f = &PE_ENTITY_RECORD[field];
    return f->kind == 'f' ? pe_load_f32(record + f->at) : (float)pe_load_i32(record + f->at);
}

static float camera_field(const uint8_t *buf, const pe_layout *layout, scalar_field field) {
    return pe_load_f32(buf + anchor_offset(layout, field.from) + field.at);
}

void pe_camera(const uint8_t *buf, const pe_layout *layout, float *center_x, float *center_y,
               float *view_dim) {
    static const scalar_field cx = CENTER_X_FIELD, cy = CENTER_Y_FIELD;
    *center_x = camera_field(buf, layout, cx);
    *center_y = camera_field(buf, layout, cy);
    *view_dim = pe_load_f32(buf + layout->camera_at + PE_CAMERA_RECORD[PE_CAM_VIEW_DIM].at);
}

int64_t pe_vector_value_count(const pe_layout *layout, const pe_game_spec *spec) {
    int64_t total = 0;
    int v = 0;
    for (int i = 0; i < spec->n_trailer; i++) {
        uint8_t kind = spec->trailer_kinds[i];
        if (kind < PE_T_VEC_I32) continue;
        total += (int64_t)layout->vector_counts[v++] * (kind == PE_T_VEC_ENTITY ? PE_ENTITY_FIELDS : 1);
    }
    return total;
}

/* Every size comes from the layout pe_measure recorded, never from the buffer again: a
 * caller's bytearray or mmap may change while the GIL is released (another thread), and a count
 * re-read here once wrote past the arrays sized from the measured one. */
static void fill_trailer(const uint8_t *buf, const pe_layout *layout, const pe_game_spec *spec,
                         double *scalars, double *values) {
    int v = 0;
    for (int i = 0; i < spec->n_trailer; i++) {
        uint8_t kind = spec->trailer_kinds[i];
        const uint8_t *p = buf + layout->trailer_item_at[i];
        if (kind < PE_T_VEC_I32) {
            if (scalars) *scalars++ = read_value(p, kind == PE_T_F32);
            continue;
        }
        int32_t count = layout->vector_counts[v++];
        if (values == NULL) continue;
        p += 4;
        if (kind == PE_T_VEC_ENTITY) {
            for (int32_t k = 0; k < count; k++, p += PE_ENTITY_BYTES)
                for (int32_t f = 0; f < PE_ENTITY_FIELDS; f++)
                    *values++ = (double)read_entity_field(p, f);
        } else {
            for (int32_t k = 0; k < count; k++, p += 4)
                *values++ = read_value(p, kind == PE_T_VEC_F32);
        }
    }
}

double pe_scalar_value(const uint8_t *buf, const pe_layout *layout, int i) {
    if (i < 0 || i >= N_SCALARS) return 0.0;
    scalar_field row = scalar_row(i);
    return read_value(buf + anchor_offset(layout, row.from) + row.at, row.kind == 'f');
}

int pe_scalar_index(const char *name) {
    for (int i = 0; i < N_SCALARS; i++)
        if (strcmp(scalar_row(i).name, name) == 0) return i;
    return -1;
}

void pe_fill(const uint8_t *buf, const pe_layout *layout, const pe_game_spec *spec,
             double *scalars, const int32_t *entity_fields, int32_t n_fields, float *entities,
             int32_t *grid, double *trailer_scalars, double *vector_values) {
    if (scalars) {
        for (int i = 0; i < N_SCALARS; i++) scalars[i] = pe_scalar_value(buf, layout, i);
    }
    if (entities && n_fields > 0) {
        const uint8_t *record = buf + layout->entities_at;
        for (int32_t e = 0; e < layout->n_entities; e++, record += PE_ENTITY_BYTES)
            for (int32_t f = 0; f < n_fields; f++)
                *entities++ = read_entity_field(record, entity_fields[f]);
    }
    if (grid) {
        int64_t cells = (int64_t)layout->width * layout->height;
        const uint8_t *p = buf + layout->grid_at;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        memcpy(grid, p, (size_t)cells * 4);
#else
        for (int64_t i = 0; i < cells; i++) grid[i] = pe_load_i32(p + 4 * i);
#endif
    }
    if (trailer_scalars || vector_values)
        fill_trailer(buf, layout, spec, trailer_scalars, vector_values);
}

pe_status pe_measure_many(int64_t n, const uint8_t *const *bufs, const int64_t *lens,
                          const pe_game_spec *spec, pe_layout *layouts, int64_t *bad_index,
                          pe_error *err) {
    pe_status s = pe_check_spec(spec);
    *bad_index = -1;
    if (s != PE_OK) {
        err->status = s;
        err->offset = 0;
        err->field = "spec";
        return s;
    }
    for (int64_t i = 0; i < n; i++) {
        s = pe_measure(bufs[i], lens[i], spec, &layouts[i], err);
        if (s == PE_OK && i > 0 &&
            (layouts[i].width != layouts[0].width || layouts[i].height != layouts[0].height)) {
            err->status = s = PE_ERR_SHAPE;
            err->offset = layouts[i].camera_at + PE_CAMERA_RECORD[PE_CAM_GRID_W].at;
            err->field = PE_CAMERA_RECORD[PE_CAM_GRID_W].name;
        }
        if (s != PE_OK) {
            *bad_index = i;
            return s;
        }
    }
    return PE_OK;
}

void pe_fill_many(int64_t n, const uint8_t *const *bufs, const pe_layout *layouts,
                  const pe_game_spec *spec, double *scalars, const int32_t *entity_fields,
                  int32_t n_fields, float *entities, const int64_t *entity_offsets,
                  int32_t *grid, double *trailer_scalars, double *vector_values,
                  const int64_t *vector_offsets) {
    int n_scalars = N_SCALARS;
    for (int64_t i = 0; i < n; i++) {
        const pe_layout *l = &layouts[i];
        int64_t cells = (int64_t)l->width * l->height;
        pe_fill(bufs[i], l, spec, scalars ? scalars + i * n_scalars : NULL, entity_fields,
                n_fields, entities ? entities + entity_offsets[i] * n_fields : NULL,
                grid ? grid + i * cells : NULL,
                trailer_scalars ? trailer_scalars + i * l->n_trailer_scalars : NULL,
                vector_values ? vector_values + vector_offsets[i] : NULL);
    }
}
