/* Lossless writer of procgen 0.10.7 get_state() bytes: the parser's inverse.
 *
 * Plain C99, no Python. A state is given as its parts (pe_state_parts), all caller-owned: the
 * values pe_fill copies out (header/base scalars, grid, trailer scalars) plus what it does not
 * keep (the three RNG texts, the raw entity records, the trailer vectors' raw items), which
 * pe_locate finds in a measured state. pe_write_size checks the parts and gives the exact byte
 * count; pe_write writes into a caller-owned buffer of at least that size, then walks its own
 * output with pe_measure, so it never returns bytes the parser (invariants included) refuses.
 * Writing the parts of a parsed state gives back its bytes exactly.
 * Format and the writing rules: docs/state-format.md.
 */
#ifndef PE_STATE_WRITER_H
#define PE_STATE_WRITER_H

#include <stdint.h>

#include "state_parser.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The three RNGs, in byte order. */
enum { PE_RNG_LEVEL_SEED = 0, PE_RNG_STEP = 1, PE_RNG_ASSET = 2, PE_N_RNGS = 3 };

/* One RNG as stored: is_seeded (a bool) and its mt19937 text, kept verbatim. */
typedef struct {
    int32_t is_seeded;
    int32_t text_len;
    const uint8_t *text;    /* text_len bytes; may be NULL when text_len is 0 */
} pe_rng_text;

/* What a state is made of. Every pointer is read only; counts say how much. */
typedef struct {
    const double *scalars;              /* pe_scalar_count() values in pe_fill's columns */
    pe_rng_text rngs[PE_N_RNGS];
    int32_t n_entities;
    const uint8_t *entities;            /* n_entities records of PE_ENTITY_BYTES, little-endian */
    int32_t width;
    int32_t height;
    const int32_t *grid;                /* width * height tile ids, row 0 the bottom */
    const double *trailer_scalars;      /* one per scalar trailer item, in trailer order */
    int32_t vector_counts[PE_MAX_TRAILER_VECTORS];             /* one per trailer vector */
    const uint8_t *vector_items[PE_MAX_TRAILER_VECTORS];       /* count * item bytes, LE */
} pe_state_parts;

/* Where a measured state keeps what pe_fill does not copy. */
typedef struct {
    pe_rng_text rngs[PE_N_RNGS];        /* text points into the state */
    int64_t vector_items_at[PE_MAX_TRAILER_VECTORS];   /* first item of each trailer vector */
} pe_spans;

/* The RNG texts and trailer vector items of a state measured by pe_measure. */
void pe_locate(const uint8_t *buf, const pe_layout *layout, const pe_game_spec *spec,
               pe_spans *spans);

/* Check the parts and give the state's exact size in bytes. Refused: an integer scalar that is
 * not an integral i32 or a float beyond f32 (PE_ERR_VALUE), a bool neither 0 nor 1 (PE_ERR_BOOL),
 * a negative count or size (PE_ERR_NEGATIVE), main_width / main_height that differ from the
 * grid (PE_ERR_GRID), no entity or entity 0 not of type 0 (PE_ERR_PLAYER). err->offset is where
 * the field would be in the written state. */
pe_status pe_write_size(const pe_state_parts *parts, const pe_game_spec *spec, int64_t *size,
                        pe_error *err);

/* Write the state into out (capacity bytes; PE_ERR_SPACE if smaller than pe_write_size says),
 * *written its size; then measure it (pe_measure's statuses, e.g. PE_ERR_INVARIANT). */
pe_status pe_write(const pe_state_parts *parts, const pe_game_spec *spec, uint8_t *out,
                   int64_t capacity, int64_t *written, pe_error *err);

/* Batch versions; both stop at the first bad state: its status, *bad_index and *err.
 * pe_write_many writes state i at out + offsets[i] with capacity offsets[i + 1] - offsets[i]. */
pe_status pe_write_size_many(int64_t n, const pe_state_parts *parts, const pe_game_spec *spec,
                             int64_t *sizes, int64_t *bad_index, pe_error *err);
pe_status pe_write_many(int64_t n, const pe_state_parts *parts, const pe_game_spec *spec,
                        uint8_t *out, const int64_t *offsets, int64_t *bad_index,
                        pe_error *err);

#ifdef __cplusplus
}
#endif
#endif
