/* Lossless writer of procgen get_state() bytes; see state_writer.h. */
#include "state_writer.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "le_read.h"

/* ---- finding what pe_fill does not copy ---- */

static pe_rng_text rng_at(const uint8_t *buf, int64_t at) {
    pe_rng_text rng;
    rng.is_seeded = pe_load_i32(buf + at);
    rng.text_len = pe_load_i32(buf + at + 4);
    rng.text = buf + at + 8;
    return rng;
}

void pe_locate(const uint8_t *buf, const pe_layout *layout, const pe_game_spec *spec,
               pe_spans *spans) {
    int64_t first = PE_OPTIONS_AT + (int64_t)layout->name_len + PE_OPTIONS_BYTES;
    memset(spans, 0, sizeof(*spans));
    spans->rngs[PE_RNG_LEVEL_SEED] = rng_at(buf, first);
    spans->rngs[PE_RNG_STEP] = rng_at(buf, first + 8 + spans->rngs[PE_RNG_LEVEL_SEED].text_len);
    spans->rngs[PE_RNG_ASSET] = rng_at(buf, layout->base_at + PE_BASE_BYTES);
    int v = 0;
    for (int i = 0; i < spec->n_trailer; i++)
        if (spec->trailer_kinds[i] >= PE_T_VEC_I32)
            spans->vector_items_at[v++] = (int64_t)layout->trailer_item_at[i] + 4;
}

/* ---- the emitter: one walk for both passes ---- */

/* Where the bytes go: nowhere in the size pass (out == NULL), only the position advances. */
typedef struct {
    uint8_t *out;
    int64_t at;
    pe_error *err;
} sink;

static pe_status refuse(sink *k, pe_status status, int64_t offset, const char *field) {
    if (k->err) {
        k->err->status = status;
        k->err->offset = offset;
        k->err->field = field;
    }
    return status;
}

static inline void store_u32(uint8_t *p, uint32_t u) {
    p[0] = (uint8_t)u;
    p[1] = (uint8_t)(u >> 8);
    p[2] = (uint8_t)(u >> 16);
    p[3] = (uint8_t)(u >> 24);
}

static inline void store_i32(uint8_t *p, int32_t v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    store_u32(p, u);
}

static void put_i32(sink *k, int32_t v) {
    if (k->out) store_i32(k->out + k->at, v);
    k->at += 4;
}

static void put_bytes(sink *k, const uint8_t *p, int64_t n) {
    if (k->out && n > 0) memcpy(k->out + k->at, p, (size_t)n);
    k->at += n;
}

/* A double as the 4-byte word of a field of kind 'i', 'f' or 'b'. Floats round to the nearest
 * f32 (exact for values read from a state); beyond f32's range is refused rather than made inf. */
static pe_status encode(double v, char kind, uint8_t *word) {
    if (kind == 'f') {
        if (isfinite(v) && fabs(v) > FLT_MAX) return PE_ERR_VALUE;
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        store_u32(word, u);
        return PE_OK;
    }
    if (kind == 'b' && v != 0.0 && v != 1.0) return PE_ERR_BOOL;
    if (!(v >= (double)INT32_MIN && v <= (double)INT32_MAX) || v != floor(v)) return PE_ERR_VALUE;
    store_i32(word, (int32_t)v);
    return PE_OK;
}

/* The header/base scalars of one section (0 options, 1 step, 2 base, 3 camera), as a block. */
static pe_status put_section(sink *k, const double *scalars, int section, int64_t bytes) {
    uint8_t block[PE_BASE_BYTES];   /* the largest section */
    memset(block, 0, sizeof(block));
    for (int i = 0; i < pe_scalar_count(); i++) {
        int in, at;
        pe_scalar_position(i, &in, &at);
        if (in != section) continue;
        pe_status s = encode(scalars[i], pe_scalar_kind(i), block + at);
        if (s != PE_OK) return refuse(k, s, k->at + at, pe_scalar_name(i));
    }
    put_bytes(k, block, bytes);
    return PE_OK;
}

static pe_status put_rng(sink *k, const pe_rng_text *rng, const char *seeded, const char *text) {
    if (rng->is_seeded != 0 && rng->is_seeded != 1) return refuse(k, PE_ERR_BOOL, k->at, seeded);
    if (rng->text_len < 0) return refuse(k, PE_ERR_NEGATIVE, k->at + 4, text);
    if (rng->text_len > 0 && rng->text == NULL) return refuse(k, PE_ERR_SPEC, k->at + 4, text);
    put_i32(k, rng->is_seeded);
    put_i32(k, rng->text_len);
    put_bytes(k, rng->text, rng->text_len);
    return PE_OK;
}

static pe_status put_entities(sink *k, const pe_state_parts *p) {
    if (p->n_entities < 1) return refuse(k, PE_ERR_PLAYER, k->at, "entities");
    if (p->entities == NULL) return refuse(k, PE_ERR_SPEC, k->at, "entities");
    int32_t type_at = PE_ENTITY_RECORD[PE_F_TYPE].at;
    if (pe_load_i32(p->entities + type_at) != 0)
        return refuse(k, PE_ERR_PLAYER, k->at + 4 + type_at, "entities[0].type");
    put_i32(k, p->n_entities);
    put_bytes(k, p->entities, (int64_t)p->n_entities * PE_ENTITY_BYTES);
    return PE_OK;
}

/* The camera section, whose main_width / main_height must be the grid's, then the grid. */
static pe_status put_camera_and_grid(sink *k, const pe_state_parts *p, int64_t cells) {
    int64_t camera_at = k->at;
    uint8_t dims[8] = {0};   /* main_width, main_height: the section's first two words */
    pe_status s = put_section(k, p->scalars, 3, PE_CAMERA_BYTES - 12);
    if (s != PE_OK) return s;
    for (int i = 0; i < pe_scalar_count(); i++) {
        int in, at;
        pe_scalar_position(i, &in, &at);
        if (in == 3 && at < 8) encode(p->scalars[i], pe_scalar_kind(i), dims + at);
    }
    if (pe_load_i32(dims) != p->width) return refuse(k, PE_ERR_GRID, camera_at, "main_width");
    if (pe_load_i32(dims + 4) != p->height)
        return refuse(k, PE_ERR_GRID, camera_at + 4, "main_height");
    put_i32(k, p->width);
    put_i32(k, p->height);
    put_i32(k, (int32_t)cells);
    if (cells > 0 && p->grid == NULL) return refuse(k, PE_ERR_SPEC, k->at, "grid.data");
    if (k->out) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if (cells > 0) memcpy(k->out + k->at, p->grid, (size_t)cells * 4);
#else
        for (int64_t i = 0; i < cells; i++) store_i32(k->out + k->at + 4 * i, p->grid[i]);
#endif
    }
    k->at += 4 * cells;
    return PE_OK;
}

static char scalar_kind_char(uint8_t kind) {
    return kind == PE_T_F32 ? 'f' : kind == PE_T_BOOL ? 'b' : 'i';
}

static pe_status put_trailer(sink *k, const pe_state_parts *p, const pe_game_spec *spec) {
    int scalar = 0, vector = 0;
    for (int i = 0; i < spec->n_trailer; i++) {
        uint8_t kind = spec->trailer_kinds[i];
        const char *field = spec->trailer_names[i];
        if (kind < PE_T_VEC_I32) {
            uint8_t word[4];
            if (p->trailer_scalars == NULL) return refuse(k, PE_ERR_SPEC, k->at, field);
            pe_status s = encode(p->trailer_scalars[scalar++], scalar_kind_char(kind), word);
            if (s != PE_OK) return refuse(k, s, k->at, field);
            put_bytes(k, word, 4);
            continue;
        }
        int32_t count = p->vector_counts[vector];
        const uint8_t *items = p->vector_items[vector++];
        if (count < 0) return refuse(k, PE_ERR_NEGATIVE, k->at, field);
        if (count > 0 && items == NULL) return refuse(k, PE_ERR_SPEC, k->at, field);
        put_i32(k, count);
        put_bytes(k, items, (int64_t)count * pe_trailer_item_bytes(kind));
    }
    return PE_OK;
}

/* Both passes: checks the parts and advances k->at by exactly the state's size; writes only when
 * k->out is set. The order is the format's (docs/state-format.md §0-§3). */
static pe_status emit(sink *k, const pe_state_parts *p, const pe_game_spec *spec) {
    pe_status s;
    if (pe_check_spec(spec) != PE_OK) return refuse(k, PE_ERR_SPEC, 0, "spec");
    if (p->scalars == NULL) return refuse(k, PE_ERR_SPEC, 0, "scalars");
    if (p->width < 0) return refuse(k, PE_ERR_NEGATIVE, 0, "grid.w");
    if (p->height < 0) return refuse(k, PE_ERR_NEGATIVE, 0, "grid.h");
    int64_t cells = (int64_t)p->width * p->height;
    if (cells > INT32_MAX / 4) return refuse(k, PE_ERR_GRID, 0, "grid.count");

    put_i32(k, 0);   /* version */
    put_i32(k, spec->name_len);
    put_bytes(k, (const uint8_t *)spec->name, spec->name_len);
    if ((s = put_section(k, p->scalars, 0, PE_OPTIONS_BYTES)) != PE_OK) return s;
    if ((s = put_rng(k, &p->rngs[PE_RNG_LEVEL_SEED], "level_seed_rand_gen.is_seeded",
                     "level_seed_rand_gen")) != PE_OK)
        return s;
    if ((s = put_rng(k, &p->rngs[PE_RNG_STEP], "rand_gen.is_seeded", "rand_gen")) != PE_OK)
        return s;
    if ((s = put_section(k, p->scalars, 1, PE_STEP_BYTES)) != PE_OK) return s;
    put_i32(k, (int32_t)cells);   /* grid_size */
    if ((s = put_entities(k, p)) != PE_OK) return s;
    if ((s = put_section(k, p->scalars, 2, PE_BASE_BYTES)) != PE_OK) return s;
    if ((s = put_rng(k, &p->rngs[PE_RNG_ASSET], "asset_rand_gen.is_seeded", "asset_rand_gen")) !=
        PE_OK)
        return s;
    if ((s = put_camera_and_grid(k, p, cells)) != PE_OK) return s;
    if ((s = put_trailer(k, p, spec)) != PE_OK) return s;
    put_i32(k, PE_TERMINATOR);
    /* procgen's buffers and the parser's item offsets are int-sized */
    if (k->at > INT32_MAX) return refuse(k, PE_ERR_VALUE, 0, "size");
    return PE_OK;
}

pe_status pe_write_size(const pe_state_parts *parts, const pe_game_spec *spec, int64_t *size,
                        pe_error *err) {
    sink k = {NULL, 0, err};
    pe_status s = emit(&k, parts, spec);
    *size = s == PE_OK ? k.at : 0;
    return s;
}

pe_status pe_write(const pe_state_parts *parts, const pe_game_spec *spec, uint8_t *out,
                   int64_t capacity, int64_t *written, pe_error *err) {
    int64_t size;
    pe_layout layout;
    *written = 0;
    pe_status s = pe_write_size(parts, spec, &size, err);
    if (s != PE_OK) return s;
    if (out == NULL || capacity < size) {
        sink k = {NULL, 0, err};
        return refuse(&k, PE_ERR_SPACE, capacity < 0 ? 0 : capacity, "size");
    }
    sink k = {out, 0, err};
    if ((s = emit(&k, parts, spec)) != PE_OK) return s;
    /* The parser's own walk over what was written: its invariants hold, nothing else is off. */
    if ((s = pe_measure(out, size, spec, &layout, err)) != PE_OK) return s;
    *written = size;
    return PE_OK;
}

pe_status pe_write_size_many(int64_t n, const pe_state_parts *parts, const pe_game_spec *spec,
                             int64_t *sizes, int64_t *bad_index, pe_error *err) {
    *bad_index = -1;
    for (int64_t i = 0; i < n; i++) {
        pe_status s = pe_write_size(&parts[i], spec, &sizes[i], err);
        if (s != PE_OK) {
            *bad_index = i;
            return s;
        }
    }
    return PE_OK;
}

pe_status pe_write_many(int64_t n, const pe_state_parts *parts, const pe_game_spec *spec,
                        uint8_t *out, const int64_t *offsets, int64_t *bad_index,
                        pe_error *err) {
    *bad_index = -1;
    for (int64_t i = 0; i < n; i++) {
        int64_t written;
        pe_status s = pe_write(&parts[i], spec, out + offsets[i], offsets[i + 1] - offsets[i],
                               &written, err);
        if (s != PE_OK) {
            *bad_index = i;
            return s;
        }
    }
    return PE_OK;
}
