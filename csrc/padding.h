/* Variable-length entity rows into fixed [cap] slots per env, with a mask: what padded
 * observations (procgen_entities/gymnasium) are made of. Rows go to the slots nearest the player
 * first (ties: the earlier row), so slot 0 always holds the nearest entity of its type: a fixed
 * meaning per slot is what an MLP over the flat observation needs. When an env has more rows
 * than slots, the nearest are kept.
 */
#ifndef PE_PADDING_H
#define PE_PADDING_H

#include <stdint.h>

#include "state_parser.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A row and its distance, for the ranking (scratch of pe_pad_env). */
typedef struct {
    float distance;
    int64_t row;
} pe_ranked;

/* rows: [sum(counts), width] float32, env after env; counts[n] rows per env.
 * Distance of a row (compared squared, the same order): hypot(row[cx] - px, row[cy] - py) with
 * (px, py) = player[2 * env ...] when player is not NULL, else hypot(row[cx], row[cy]) (relative columns); cx < 0: no distance
 * (the first cap rows are kept).
 * out: [n, cap, width] and mask [n, cap] are written entirely (zeros past each env's rows);
 * dropped[n]: rows beyond cap per env. PE_ERR_ARG on bad arguments, PE_ERR_MEMORY. */
pe_status pe_pad_rows(const float *rows, const int64_t *counts, int64_t n, int32_t width, int32_t cap,
                int32_t cx, int32_t cy, const float *player, float *out, uint8_t *mask,
                int64_t *dropped);

/* One env of pe_pad_rows: its `count` rows into out [cap, width] and mask [cap]; player is this
 * env's (x, y) or NULL; order holds at least `count` items when cx >= 0. Returns the rows
 * dropped. Arguments as checked by pe_pad_rows. */
int64_t pe_pad_env(const float *rows, int64_t count, int32_t width, int32_t cap, int32_t cx,
                   int32_t cy, const float *player, pe_ranked *order, float *out, uint8_t *mask);

#ifdef __cplusplus
}
#endif
#endif
