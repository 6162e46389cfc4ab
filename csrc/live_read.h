/* Reads of procgen's live objects (host byte order: they are this process's memory), validated
 * as far as a read can be: pointer alignment, begin <= end, item counts within limits. Internal to
 * the C core (live_game.c writes states from them, observation.c reads observations). */
#ifndef PE_LIVE_READ_H
#define PE_LIVE_READ_H

#include <stdint.h>
#include <string.h>

#include "live_game.h"

static inline const uint8_t *read_ptr(const uint8_t *at) {
    const uint8_t *p;
    memcpy(&p, at, sizeof p);
    return p;
}
static inline int32_t read_i32(const uint8_t *at) {
    int32_t v;
    memcpy(&v, at, 4);
    return v;
}
static inline float read_f32(const uint8_t *at) {
    float v;
    memcpy(&v, at, 4);
    return v;
}
static inline void write_i32_at(uint8_t *at, int32_t v) { memcpy(at, &v, 4); }
static inline void write_f32_at(uint8_t *at, float v) { memcpy(at, &v, 4); }

static inline int aligned(const uint8_t *p, uintptr_t a) { return ((uintptr_t)p % a) == 0; }

/* A std::vector's [begin, end) with items of item_bytes; -1 if it does not look like one. */
static inline int64_t vector_span(const uint8_t *vec, int64_t item_bytes, const uint8_t **begin) {
    const uint8_t *b = read_ptr(vec), *e = read_ptr(vec + 8), *cap = read_ptr(vec + 16);
    if (b == NULL) {
        *begin = NULL;
        return (e == NULL && cap == NULL) ? 0 : -1;
    }
    if (!aligned(b, 4) || e < b || cap < e || (e - b) % item_bytes != 0) return -1;
    int64_t n = (int64_t)(e - b) / item_bytes;
    if (n > PE_LIVE_MAX_ITEMS) return -1;
    *begin = b;
    return n;
}

/* BasicAbstractGame::agent (the shared_ptr at agent_member) where the entities vector at
 * entities_vec no longer holds it (the player left the world: see live_game.h), else NULL. The
 * player is entities[0] in every other state, so the scan stops at once. */
static inline const uint8_t *erased_agent(const uint8_t *agent_member,
                                          const uint8_t *entities_vec) {
    const uint8_t *agent = read_ptr(agent_member), *items;
    int64_t n = vector_span(entities_vec, 16, &items);
    if (agent == NULL || !aligned(agent, 4) || n < 0) return NULL;
    for (int64_t k = 0; k < n; k++)
        if (read_ptr(items + 16 * k) == agent) return NULL;
    return agent;
}

/* std::vector<bool> (libstdc++): start {word *p; unsigned offset}, finish {p; offset}, eos. */
static inline int64_t bitvector_count(const uint8_t *vec, const uint64_t **words) {
    const uint8_t *p0 = read_ptr(vec), *p1 = read_ptr(vec + 16);
    uint32_t off0, off1;
    memcpy(&off0, vec + 8, 4);
    memcpy(&off1, vec + 24, 4);
    if (p0 == NULL) {
        *words = NULL;
        return (p1 == NULL && off1 == 0) ? 0 : -1;
    }
    if (!aligned(p0, 8) || p1 < p0 || off0 != 0 || off1 >= 64 || (p1 - p0) % 8 != 0) return -1;
    int64_t n = (int64_t)(p1 - p0) / 8 * 64 + off1;
    if (n > PE_LIVE_MAX_ITEMS) return -1;
    *words = (const uint64_t *)(const void *)p0;
    return n;
}

#endif
