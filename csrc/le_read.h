/* Little-endian loads that never assume alignment (procgen states have no padding, so no field
 * after the game name is aligned). Internal to the C core. */
#ifndef PE_LE_READ_H
#define PE_LE_READ_H

#include <stdint.h>
#include <string.h>

static inline uint32_t pe_load_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline int32_t pe_load_i32(const uint8_t *p) {
    uint32_t u = pe_load_u32(p);
    int32_t v;
    memcpy(&v, &u, 4);
    return v;
}
static inline float pe_load_f32(const uint8_t *p) {
    uint32_t u = pe_load_u32(p);
    float v;
    memcpy(&v, &u, 4);
    return v;
}

#endif
