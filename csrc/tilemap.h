/* Tile grids -> entities: C99 kernels for procgen tilemaps.
 *
 * Plain C99, no Python. Input: a batch of n tile grids, int32 [n, height, width], row-major,
 * row 0 = the BOTTOM of the world (as in get_state; y grows upward). Each state is read through
 * an integer crop [x0, x0+w) x [y0, y0+h) in grid cells (the whole grid, or an agent window);
 * cells outside the grid take the spec's out-of-bounds class.
 *
 * Two passes over caller-owned memory, no allocation:
 *   tm_count_many  classifies every crop cell through the tile id -> class LUT into `scratch`
 *                  (int8, one byte per crop cell) and counts the entities of each type per state;
 *   tm_fill_many   writes the entities' features from `scratch` into per-type float32 tables
 *                  sized by the caller from those counts. It checks every row against the counts
 *                  and the capacities it is given and never writes past them.
 *
 * Entity types per mode (slot t of counts/outs):
 *   TM_TILES    t = class c              one entity per non-empty cell
 *   TM_RUNS     t = class c              maximal horizontal runs of one class within a row
 *   TM_COLUMNS  t = 0: Column, one per crop column; t = 1 + c: runs of class c not in a stack
 *   TM_CHUNKS   t = 0: Chunk, one per k x k chunk holding any non-empty cell
 * Features (row layout of outs[t]; with refs != NULL every row ends with rel_x, rel_y =
 * entity centre minus the reference point, for Column rel_y = height - ref_y):
 *   tile   x, y                      (cell centre, world units)
 *   run    x, y, width               (x = centre of the run)
 *   Column x, height, is_lava, lava_depth, is_gap
 *          height = world y of the top of the column's terrain stack, which rises from the
 *          crop's bottom row: base-class cells, then top-class cells (coinrun: Wall then Lava);
 *          is_lava = the stack's surface is the top class; lava_depth = its top-class cells;
 *          is_gap = the stack is empty.
 *   Chunk  x, y, count of class 0, ..., count of class n_classes-1  (x, y = centre of the
 *          chunk's area, clipped to the crop; chunks are aligned to the crop's bottom-left)
 *
 * tm_class_image_many writes the crops as images instead: one uint8 per cell, the cell's class
 * plus one (0 = empty), for a CNN that sees the terrain's geometry (gaps, ledges) directly.
 */
#ifndef PE_TILEMAP_H
#define PE_TILEMAP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TM_MAX_CLASSES 32
#define TM_MAX_CROP 32768        /* crop width / height limit (cells) */
#define TM_EMPTY (-1)            /* scratch: no known class */
#define TM_STACK_BASE (-2)       /* scratch (columns mode): base-class cell of a column stack */
#define TM_STACK_TOP (-3)        /* scratch (columns mode): top-class cell of a column stack */

typedef enum {
    TM_TILES = 0,
    TM_RUNS = 1,
    TM_COLUMNS = 2,
    TM_CHUNKS = 3
} tm_mode;

/* The error codes follow pe_status's (PE_STATUS_END, state_parser.h), so that one code names one
 * status across the C core; this header stays independent of the parser. */
typedef enum {
    TM_OK = 0,
    TM_ERR_ARG = 32,       /* bad mode, sizes, crop, chunk size or feature widths */
    TM_ERR_SPEC = 33,      /* invalid spec (LUT entry or class index out of range) */
    TM_ERR_SCRATCH = 34,   /* scratch buffer smaller than the crops need */
    TM_ERR_OVERFLOW = 35,  /* the counts need more rows than the capacity passed */
    TM_ERR_MISMATCH = 36   /* fill found a different number of entities than the counts */
} tm_status;

/* A game's tile classes. Owned by the caller. */
typedef struct {
    const int8_t *lut;     /* lut_size entries: tile id -> class index, TM_EMPTY for none */
    int32_t lut_size;      /* ids < 0 or >= lut_size are TM_EMPTY */
    int32_t n_classes;     /* 1..TM_MAX_CLASSES */
    int32_t oob_class;     /* class of cells outside the grid, TM_EMPTY for none */
    int32_t base_class;    /* columns mode: class of the stack body, TM_EMPTY if no columns */
    int32_t top_class;     /* columns mode: class that may cap the stack (lava), or TM_EMPTY */
} tm_spec;

const char *tm_status_text(tm_status status);
/* The enum member's name of a tm_status code ("TM_ERR_ARG"), NULL for another code. */
const char *tm_status_name(int status);
tm_status tm_check_spec(const tm_spec *spec);

/* Number of entity types of a mode (see above), or -1 for an unknown mode (a lookup, which the
 * entries below use to validate the mode). */
int32_t tm_n_types(tm_mode mode, int32_t n_classes);
/* Features per row of entity type t, or -1 when mode or t is invalid (a lookup). */
int32_t tm_n_features(tm_mode mode, int32_t t, int32_t n_classes, int with_rel);

/* *size = the scratch bytes n crops need (sum of w*h); TM_ERR_ARG if a crop is invalid.
 * crops: n * 4 int32 (x0, y0, w, h), 0 <= w, h <= TM_MAX_CROP. */
tm_status tm_scratch_size(int64_t n, const int32_t *crops, int64_t *size);

/* Pass 1. grids: n * height * width int32. counts: n * tm_n_types int64 (written).
 * scratch: scratch_size bytes (written; read by pass 2). */
tm_status tm_count_many(int64_t n, const int32_t *grids, int32_t height, int32_t width,
                        const tm_spec *spec, tm_mode mode, int32_t chunk, const int32_t *crops,
                        int8_t *scratch, int64_t scratch_size, int64_t *counts);

/* Pass 2. refs: n * 2 floats (reference x, y per state) or NULL for no rel_x/rel_y.
 * outs[t]: caps[t] rows of n_features[t] floats, state after state; n_features[t] must equal
 * tm_n_features(mode, t, spec->n_classes, refs != NULL). */
tm_status tm_fill_many(int64_t n, const tm_spec *spec, tm_mode mode, int32_t chunk,
                       const int32_t *crops, const float *refs, const int8_t *scratch,
                       int64_t scratch_size, const int64_t *counts, float *const *outs,
                       const int64_t *caps, const int32_t *n_features);

/* The crops as square class images. out: n * size * size bytes, image after image, row 0 =
 * the crop's TOP row (up is up, as procgen draws the frame), value = class + 1, 0 = empty;
 * cells outside the grid take the spec's oob class. A crop of another size than `size` is
 * centred on the image: a smaller one is padded with 0, a larger one keeps its middle cells.
 * 1 <= size <= TM_MAX_IMAGE. Reads each grid only inside its crop's rows. */
#define TM_MAX_IMAGE 256

/* One state of the passes above, for callers that checked the spec (tm_check_spec), the mode,
 * chunk and crop once: tm_count_state classifies the crop of `grid` into cls (w*h bytes) and
 * writes the state's counts[tm_n_types]; tm_fill_state writes its rows, outs[t] = where type
 * t's first row of this state goes (room for counts[t] rows), ref = (x, y) or NULL for no
 * rel_x/rel_y. tm_class_image is one image of tm_class_image_many. */
void tm_count_state(const int32_t *grid, int32_t height, int32_t width, const tm_spec *spec,
                    tm_mode mode, int32_t chunk, const int32_t *crop, int8_t *cls, int64_t *counts);
tm_status tm_fill_state(const tm_spec *spec, tm_mode mode, int32_t chunk, const int32_t *crop,
                        const float *ref, const int8_t *cls, const int64_t *counts,
                        float *const *outs, const int32_t *n_features);
void tm_class_image(const int32_t *grid, int32_t height, int32_t width, const tm_spec *spec,
                    const int32_t *crop, int32_t size, uint8_t *img);
tm_status tm_class_image_many(int64_t n, const int32_t *grids, int32_t height, int32_t width,
                              const tm_spec *spec, const int32_t *crops, int32_t size,
                              uint8_t *out);

#ifdef __cplusplus
}
#endif
#endif
