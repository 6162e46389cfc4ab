/* Rows into padded slots; see padding.h. */
#include "padding.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int by_distance(const void *a, const void *b) {
    const pe_ranked *x = (const pe_ranked *)a, *y = (const pe_ranked *)b;
    if (x->distance != y->distance) return x->distance < y->distance ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);  /* stable: the earlier row first */
}

/* Squared distance: the same order as the distance, without a square root per row. */
static float row_distance(const float *row, int32_t cx, int32_t cy, const float *player) {
    float dx = row[cx] - (player ? player[0] : 0.0f);
    float dy = row[cy] - (player ? player[1] : 0.0f);
    float d = dx * dx + dy * dy;
    return isnan(d) ? INFINITY : d;
}

/* A few dozen rows per env and type: insertion sort beats qsort's calls through a pointer. */
static void sort_ranked(pe_ranked *order, int64_t count) {
    if (count > 64) {
        qsort(order, (size_t)count, sizeof(pe_ranked), by_distance);
        return;
    }
    for (int64_t k = 1; k < count; k++) {
        pe_ranked item = order[k];
        int64_t j = k;
        for (; j > 0 && by_distance(&order[j - 1], &item) > 0; j--) order[j] = order[j - 1];
        order[j] = item;
    }
}

int64_t pe_pad_env(const float *rows, int64_t count, int32_t width, int32_t cap, int32_t cx,
                   int32_t cy, const float *player, pe_ranked *order, float *out, uint8_t *mask) {
    size_t slot_bytes = (size_t)width * sizeof(float);
    int64_t kept = count < cap ? count : cap;
    if (count <= 1 || cx < 0 || cap == 0) {
        if (kept) memcpy(out, rows, (size_t)kept * slot_bytes);
    } else {
        for (int64_t k = 0; k < count; k++) {
            order[k].distance = row_distance(rows + k * width, cx, cy, player);
            order[k].row = k;
        }
        sort_ranked(order, count);
        for (int64_t k = 0; k < kept; k++)
            memcpy(out + k * width, rows + order[k].row * width, slot_bytes);
    }
    if (cap > kept) memset(out + kept * width, 0, (size_t)(cap - kept) * slot_bytes);
    memset(mask, 1, (size_t)kept);
    memset(mask + kept, 0, (size_t)(cap - kept));
    return count - kept;
}

pe_status pe_pad_rows(const float *rows, const int64_t *counts, int64_t n, int32_t width,
                      int32_t cap, int32_t cx, int32_t cy, const float *player, float *out,
                      uint8_t *mask, int64_t *dropped) {
    if (n < 0 || width < 0 || cap < 0 || cx >= width || cy >= width || (cx >= 0) != (cy >= 0))
        return PE_ERR_ARG;
    int64_t first = 0, most = 0;
    for (int64_t i = 0; i < n; i++) {
        if (counts[i] < 0) return PE_ERR_ARG;
        if (counts[i] > most) most = counts[i];
    }
    pe_ranked *order = NULL;
    if (most > 1 && cap > 0 && cx >= 0) {
        order = (pe_ranked *)malloc((size_t)most * sizeof(pe_ranked));
        if (order == NULL) return PE_ERR_MEMORY;
    }
    for (int64_t i = 0; i < n; first += counts[i], i++)
        dropped[i] = pe_pad_env(rows + first * width, counts[i], width, cap, order ? cx : -1, cy,
                                player ? player + 2 * i : NULL, order, out + i * (int64_t)cap * width,
                                mask + i * (int64_t)cap);
    free(order);
    return PE_OK;
}
