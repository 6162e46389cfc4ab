/* Tile grids -> entities; see tilemap.h. */
#include "tilemap.h"

#include <string.h>

const char *tm_status_text(tm_status status) {
    switch (status) {
    case TM_OK: return "ok";
    case TM_ERR_ARG: return "invalid argument (mode, sizes, crop, chunk size or feature widths)";
    case TM_ERR_SPEC: return "invalid tile class spec";
    case TM_ERR_SCRATCH: return "scratch buffer too small for the crops";
    case TM_ERR_OVERFLOW: return "entity counts exceed the output capacity";
    case TM_ERR_MISMATCH: return "fill pass disagrees with the count pass";
    }
    return "unknown status";
}

const char *tm_status_name(int status) {
    switch (status) {
    case TM_OK: return "TM_OK";
    case TM_ERR_ARG: return "TM_ERR_ARG";
    case TM_ERR_SPEC: return "TM_ERR_SPEC";
    case TM_ERR_SCRATCH: return "TM_ERR_SCRATCH";
    case TM_ERR_OVERFLOW: return "TM_ERR_OVERFLOW";
    case TM_ERR_MISMATCH: return "TM_ERR_MISMATCH";
    }
    return NULL;
}

static int class_ok(int32_t c, int32_t n_classes) { return c == TM_EMPTY || (c >= 0 && c < n_classes); }

tm_status tm_check_spec(const tm_spec *spec) {
    if (spec == NULL || spec->n_classes < 1 || spec->n_classes > TM_MAX_CLASSES ||
        spec->lut_size < 0 || (spec->lut_size > 0 && spec->lut == NULL))
        return TM_ERR_SPEC;
    for (int32_t i = 0; i < spec->lut_size; i++)
        if (!class_ok(spec->lut[i], spec->n_classes)) return TM_ERR_SPEC;
    if (!class_ok(spec->oob_class, spec->n_classes) || !class_ok(spec->base_class, spec->n_classes) ||
        !class_ok(spec->top_class, spec->n_classes))
        return TM_ERR_SPEC;
    if (spec->top_class != TM_EMPTY && spec->top_class == spec->base_class) return TM_ERR_SPEC;
    return TM_OK;
}

int32_t tm_n_types(tm_mode mode, int32_t n_classes) {
    switch (mode) {
    case TM_TILES:
    case TM_RUNS: return n_classes;
    case TM_COLUMNS: return 1 + n_classes;
    case TM_CHUNKS: return 1;
    }
    return -1;
}

int32_t tm_n_features(tm_mode mode, int32_t t, int32_t n_classes, int with_rel) {
    int32_t nt = tm_n_types(mode, n_classes), f;
    if (nt < 0 || t < 0 || t >= nt) return -1;
    switch (mode) {
    case TM_TILES: f = 2; break;
    case TM_RUNS: f = 3; break;
    case TM_COLUMNS: f = t == 0 ? 5 : 3; break;
    case TM_CHUNKS: f = 2 + n_classes; break;
    default: return -1;
    }
    return f + (with_rel ? 2 : 0);
}

tm_status tm_scratch_size(int64_t n, const int32_t *crops, int64_t *size) {
    int64_t total = 0;
    if (n < 0 || (n > 0 && crops == NULL)) return TM_ERR_ARG;
    for (int64_t i = 0; i < n; i++) {
        const int32_t *c = crops + 4 * i;
        if (c[2] < 0 || c[3] < 0 || c[2] > TM_MAX_CROP || c[3] > TM_MAX_CROP) return TM_ERR_ARG;
        total += (int64_t)c[2] * c[3];
    }
    *size = total;
    return TM_OK;
}

/* ---- pass 1 ---- */

static inline int8_t lut_class(const tm_spec *s, int32_t id) {
    return (id >= 0 && id < s->lut_size) ? s->lut[id] : (int8_t)TM_EMPTY;
}

/* Crop cells of one grid -> class bytes, row 0 of `out` = crop row y0. */
static void classify(const int32_t *grid, int32_t height, int32_t width, const tm_spec *s,
                     const int32_t *crop, int8_t *out) {
    const int64_t x0 = crop[0], y0 = crop[1], w = crop[2], h = crop[3];
    const int8_t oob = (int8_t)s->oob_class;
    /* Columns [lo, hi) of the crop are inside the grid horizontally. */
    int64_t lo = -x0, hi = (int64_t)width - x0;
    if (lo < 0) lo = 0;
    if (lo > w) lo = w;
    if (hi > w) hi = w;
    if (hi < lo) hi = lo;
    for (int64_t r = 0; r < h; r++) {
        int8_t *row = out + r * w;
        const int64_t y = y0 + r;
        if (y < 0 || y >= height) {
            memset(row, (unsigned char)oob, (size_t)w);
            continue;
        }
        const int32_t *src = grid + y * width;
        for (int64_t c = 0; c < lo; c++) row[c] = oob;
        for (int64_t c = lo; c < hi; c++) row[c] = lut_class(s, src[x0 + c]);
        for (int64_t c = hi; c < w; c++) row[c] = oob;
    }
}

/* Mark each column's stack (base* then top*, from the crop's bottom) in place. */
static void mark_stacks(int8_t *cls, int64_t w, int64_t h, const tm_spec *s) {
    for (int64_t c = 0; c < w; c++) {
        int64_t r = 0;
        while (r < h && cls[r * w + c] == s->base_class) cls[(r++) * w + c] = TM_STACK_BASE;
        if (s->top_class != TM_EMPTY)
            while (r < h && cls[r * w + c] == s->top_class) cls[(r++) * w + c] = TM_STACK_TOP;
    }
}

/* Runs per class (counts[c] += ...), skipping every negative cell. */
static void count_runs(const int8_t *cls, int64_t w, int64_t h, int64_t *counts) {
    for (int64_t r = 0; r < h; r++) {
        const int8_t *row = cls + r * w;
        int8_t prev = TM_EMPTY;
        for (int64_t c = 0; c < w; c++) {
            int8_t v = row[c];
            if (v >= 0 && v != prev) counts[v]++;
            prev = v;
        }
    }
}

static int chunk_nonempty(const int8_t *cls, int64_t w, int64_t r0, int64_t r1, int64_t c0,
                          int64_t c1) {
    for (int64_t r = r0; r < r1; r++)
        for (int64_t c = c0; c < c1; c++)
            if (cls[r * w + c] >= 0) return 1;
    return 0;
}

void tm_count_state(const int32_t *grid, int32_t height, int32_t width, const tm_spec *spec,
                    tm_mode mode, int32_t chunk, const int32_t *crop, int8_t *cls, int64_t *cnt) {
    const int64_t w = crop[2], h = crop[3];
    memset(cnt, 0, sizeof(int64_t) * (size_t)tm_n_types(mode, spec->n_classes));
    classify(grid, height, width, spec, crop, cls);
    switch (mode) {
    case TM_TILES:
        for (int64_t k = 0; k < w * h; k++)
            if (cls[k] >= 0) cnt[cls[k]]++;
        break;
    case TM_RUNS:
        count_runs(cls, w, h, cnt);
        break;
    case TM_COLUMNS:
        mark_stacks(cls, w, h, spec);
        cnt[0] = w;
        count_runs(cls, w, h, cnt + 1);
        break;
    case TM_CHUNKS:
        for (int64_t r0 = 0; r0 < h; r0 += chunk)
            for (int64_t c0 = 0; c0 < w; c0 += chunk) {
                int64_t r1 = r0 + chunk < h ? r0 + chunk : h;
                int64_t c1 = c0 + chunk < w ? c0 + chunk : w;
                cnt[0] += chunk_nonempty(cls, w, r0, r1, c0, c1);
            }
        break;
    }
}

tm_status tm_count_many(int64_t n, const int32_t *grids, int32_t height, int32_t width,
                        const tm_spec *spec, tm_mode mode, int32_t chunk, const int32_t *crops,
                        int8_t *scratch, int64_t scratch_size, int64_t *counts) {
    if (tm_check_spec(spec) != TM_OK) return TM_ERR_SPEC;
    const int32_t nt = tm_n_types(mode, spec->n_classes);
    if (nt < 0 || height < 0 || width < 0 || (mode == TM_CHUNKS && chunk < 1) ||
        (mode == TM_COLUMNS && spec->base_class == TM_EMPTY))
        return TM_ERR_ARG;
    if (n == 0) return TM_OK;
    if (grids == NULL || counts == NULL) return TM_ERR_ARG;
    int64_t need = 0;
    if (tm_scratch_size(n, crops, &need) != TM_OK) return TM_ERR_ARG;
    if (need > scratch_size || (need > 0 && scratch == NULL)) return TM_ERR_SCRATCH;

    const int64_t cells = (int64_t)height * width;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        const int32_t *crop = crops + 4 * i;
        tm_count_state(grids + i * cells, height, width, spec, mode, chunk, crop, scratch + at,
                       counts + i * nt);
        at += (int64_t)crop[2] * crop[3];
    }
    return TM_OK;
}

/* ---- pass 2 ---- */

typedef struct {
    float *const *outs;
    const int32_t *nf;
    int64_t next[TM_MAX_CLASSES + 1];  /* next row to write, per type */
    int64_t end[TM_MAX_CLASSES + 1];   /* this state's row limit, per type */
    int with_rel;
    int32_t n_classes;
    float ref_x, ref_y;
    int overflow;
} writer;

/* The row to write for type t, or NULL (and overflow set) when the counts are exhausted. */
static inline float *next_row(writer *wr, int32_t t) {
    if (wr->next[t] >= wr->end[t]) {
        wr->overflow = 1;
        return NULL;
    }
    return wr->outs[t] + (wr->next[t]++) * wr->nf[t];
}

static inline void put_rel(writer *wr, float *row, int32_t t, float x, float y) {
    if (wr->with_rel) {
        row[wr->nf[t] - 2] = x - wr->ref_x;
        row[wr->nf[t] - 1] = y - wr->ref_y;
    }
}

static void emit_runs(writer *wr, const int8_t *cls, int64_t w, int64_t h, int64_t x0,
                      int64_t y0, int32_t type_offset) {
    for (int64_t r = 0; r < h; r++) {
        const int8_t *row = cls + r * w;
        const float y = (float)(y0 + r) + 0.5f;
        int64_t c = 0;
        while (c < w) {
            int8_t v = row[c];
            if (v < 0) {
                c++;
                continue;
            }
            if (v >= wr->n_classes) {
                wr->overflow = 1;
                return;
            }
            int64_t start = c;
            while (c < w && row[c] == v) c++;
            const int32_t t = type_offset + v;
            float *out = next_row(wr, t);
            if (out == NULL) return;
            const float x = (float)x0 + 0.5f * (float)(start + c);
            out[0] = x;
            out[1] = y;
            out[2] = (float)(c - start);
            put_rel(wr, out, t, x, y);
        }
    }
}

static void emit_tiles(writer *wr, const int8_t *cls, int64_t w, int64_t h, int64_t x0,
                       int64_t y0) {
    for (int64_t r = 0; r < h && !wr->overflow; r++)
        for (int64_t c = 0; c < w; c++) {
            int8_t v = cls[r * w + c];
            if (v < 0) continue;
            float *out = v < wr->n_classes ? next_row(wr, v) : NULL;
            if (out == NULL) {
                wr->overflow = 1;
                break;
            }
            out[0] = (float)(x0 + c) + 0.5f;
            out[1] = (float)(y0 + r) + 0.5f;
            put_rel(wr, out, v, out[0], out[1]);
        }
}

static void emit_columns(writer *wr, const int8_t *cls, int64_t w, int64_t h, int64_t x0,
                         int64_t y0) {
    for (int64_t c = 0; c < w; c++) {
        int64_t r = 0, lava = 0;
        while (r < h && cls[r * w + c] == TM_STACK_BASE) r++;
        while (r < h && cls[r * w + c] == TM_STACK_TOP) r++, lava++;
        float *out = next_row(wr, 0);
        if (out == NULL) return;
        out[0] = (float)(x0 + c) + 0.5f;
        out[1] = (float)(y0 + r);
        out[2] = lava > 0 ? 1.0f : 0.0f;
        out[3] = (float)lava;
        out[4] = r == 0 ? 1.0f : 0.0f;
        put_rel(wr, out, 0, out[0], out[1]);
    }
    emit_runs(wr, cls, w, h, x0, y0, 1);
}

static void emit_chunks(writer *wr, const int8_t *cls, int64_t w, int64_t h, int64_t x0,
                        int64_t y0, int32_t chunk) {
    const int32_t nc = wr->n_classes;
    int64_t class_counts[TM_MAX_CLASSES];
    for (int64_t r0 = 0; r0 < h && !wr->overflow; r0 += chunk)
        for (int64_t c0 = 0; c0 < w; c0 += chunk) {
            const int64_t r1 = r0 + chunk < h ? r0 + chunk : h;
            const int64_t c1 = c0 + chunk < w ? c0 + chunk : w;
            int64_t any = 0;
            memset(class_counts, 0, sizeof(int64_t) * (size_t)nc);
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = c0; c < c1; c++) {
                    int8_t v = cls[r * w + c];
                    if (v >= nc) wr->overflow = 1;
                    else if (v >= 0) class_counts[v]++, any++;
                }
            if (wr->overflow) return;
            if (!any) continue;
            float *out = next_row(wr, 0);
            if (out == NULL) return;
            out[0] = (float)x0 + 0.5f * (float)(c0 + c1);
            out[1] = (float)y0 + 0.5f * (float)(r0 + r1);
            for (int32_t k = 0; k < nc; k++) out[2 + k] = (float)class_counts[k];
            put_rel(wr, out, 0, out[0], out[1]);
        }
}

tm_status tm_fill_state(const tm_spec *spec, tm_mode mode, int32_t chunk, const int32_t *crop,
                        const float *ref, const int8_t *cls, const int64_t *counts,
                        float *const *outs, const int32_t *n_features) {
    const int32_t nt = tm_n_types(mode, spec->n_classes);
    const int64_t x0 = crop[0], y0 = crop[1], w = crop[2], h = crop[3];
    writer wr;
    wr.outs = outs;
    wr.nf = n_features;
    wr.with_rel = ref != NULL;
    wr.n_classes = spec->n_classes;
    wr.overflow = 0;
    wr.ref_x = ref ? ref[0] : 0.0f;
    wr.ref_y = ref ? ref[1] : 0.0f;
    for (int32_t t = 0; t < nt; t++) {
        wr.next[t] = 0;
        wr.end[t] = counts[t];
    }
    switch (mode) {
    case TM_TILES: emit_tiles(&wr, cls, w, h, x0, y0); break;
    case TM_RUNS: emit_runs(&wr, cls, w, h, x0, y0, 0); break;
    case TM_COLUMNS: emit_columns(&wr, cls, w, h, x0, y0); break;
    case TM_CHUNKS: emit_chunks(&wr, cls, w, h, x0, y0, chunk); break;
    }
    if (wr.overflow) return TM_ERR_MISMATCH;
    for (int32_t t = 0; t < nt; t++)
        if (wr.next[t] != wr.end[t]) return TM_ERR_MISMATCH;
    return TM_OK;
}

tm_status tm_fill_many(int64_t n, const tm_spec *spec, tm_mode mode, int32_t chunk,
                       const int32_t *crops, const float *refs, const int8_t *scratch,
                       int64_t scratch_size, const int64_t *counts, float *const *outs,
                       const int64_t *caps, const int32_t *n_features) {
    if (tm_check_spec(spec) != TM_OK) return TM_ERR_SPEC;
    const int32_t nc = spec->n_classes;
    const int32_t nt = tm_n_types(mode, nc);
    const int with_rel = refs != NULL;
    if (nt < 0 || (mode == TM_CHUNKS && chunk < 1) || outs == NULL || caps == NULL ||
        n_features == NULL || (mode == TM_COLUMNS && spec->base_class == TM_EMPTY))
        return TM_ERR_ARG;
    for (int32_t t = 0; t < nt; t++)
        if (n_features[t] != tm_n_features(mode, t, nc, with_rel) || caps[t] < 0 ||
            (caps[t] > 0 && outs[t] == NULL))
            return TM_ERR_ARG;
    if (n == 0) return TM_OK;
    if (counts == NULL) return TM_ERR_ARG;
    int64_t need = 0;
    if (tm_scratch_size(n, crops, &need) != TM_OK) return TM_ERR_ARG;
    if (need > scratch_size || (need > 0 && scratch == NULL)) return TM_ERR_SCRATCH;
    /* Every state's rows must fit the capacity, before anything is written. */
    for (int32_t t = 0; t < nt; t++) {
        int64_t total = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t c = counts[i * nt + t];
            if (c < 0 || c > caps[t] - total) return TM_ERR_OVERFLOW;
            total += c;
        }
    }
    float *state_outs[TM_MAX_CLASSES + 1];
    int64_t rows[TM_MAX_CLASSES + 1] = {0};
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        const int32_t *crop = crops + 4 * i;
        for (int32_t t = 0; t < nt; t++)
            state_outs[t] = outs[t] ? outs[t] + rows[t] * n_features[t] : NULL;
        tm_status st = tm_fill_state(spec, mode, chunk, crop, with_rel ? refs + 2 * i : NULL,
                                     scratch + at, counts + i * nt, state_outs, n_features);
        if (st != TM_OK) return st;
        for (int32_t t = 0; t < nt; t++) rows[t] += counts[i * nt + t];
        at += (int64_t)crop[2] * crop[3];
    }
    return TM_OK;
}

/* ---- class images ---- */

/* One image: image cell (r, c) is crop cell (c - ox, size-1-r - oy), ox/oy = (size - w)/2
 * (negative when the crop is larger, which drops its outer cells evenly). */
void tm_class_image(const int32_t *grid, int32_t height, int32_t width, const tm_spec *s,
                        const int32_t *crop, int32_t size, uint8_t *img) {
    const int64_t x0 = crop[0], y0 = crop[1], w = crop[2], h = crop[3];
    const int64_t ox = ((int64_t)size - w) / 2, oy = ((int64_t)size - h) / 2;
    const uint8_t oob = (uint8_t)(s->oob_class + 1); /* TM_EMPTY + 1 == 0 */
    for (int64_t r = 0; r < size; r++) {
        uint8_t *row = img + r * size;
        const int64_t cy = (int64_t)size - 1 - r - oy; /* crop row, 0 = bottom */
        if (cy < 0 || cy >= h) {
            memset(row, 0, (size_t)size);
            continue;
        }
        const int64_t y = y0 + cy;
        for (int64_t c = 0; c < size; c++) {
            const int64_t cx = c - ox;
            if (cx < 0 || cx >= w) {
                row[c] = 0;
                continue;
            }
            const int64_t x = x0 + cx;
            if (y < 0 || y >= height || x < 0 || x >= width)
                row[c] = oob;
            else
                row[c] = (uint8_t)(lut_class(s, grid[y * width + x]) + 1);
        }
    }
}

tm_status tm_class_image_many(int64_t n, const int32_t *grids, int32_t height, int32_t width,
                              const tm_spec *spec, const int32_t *crops, int32_t size,
                              uint8_t *out) {
    if (n < 0 || height < 0 || width < 0 || size < 1 || size > TM_MAX_IMAGE) return TM_ERR_ARG;
    if (n == 0) return TM_OK;
    if (crops == NULL || out == NULL || (grids == NULL && height > 0 && width > 0))
        return TM_ERR_ARG;
    tm_status st = tm_check_spec(spec);
    if (st != TM_OK) return st;
    int64_t need = 0;
    if (tm_scratch_size(n, crops, &need) != TM_OK) return TM_ERR_ARG;
    const int64_t cells = (int64_t)height * width, pixels = (int64_t)size * size;
    for (int64_t i = 0; i < n; i++)
        tm_class_image(grids + i * cells, height, width, spec, crops + 4 * i, size, out + i * pixels);
    return TM_OK;
}
