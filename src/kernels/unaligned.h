/* unaligned.h — a 4- or 8-byte value read from any address.
 *
 * The GGUF block layouts and the prepared activation rows pack their fields at offsets
 * with no alignment (a 2-byte scale, then bytes; a float after 4n quants), so the kernels
 * read a field by memcpy: defined at any address, and one plain load once compiled. */
#ifndef TOKD_KERNELS_UNALIGNED_H
#define TOKD_KERNELS_UNALIGNED_H

#include <stdint.h>
#include <string.h>

static inline uint32_t tokd_ld_u32(const void *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline uint64_t tokd_ld_u64(const void *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static inline int32_t tokd_ld_i32(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline float tokd_ld_f32(const void *p) {
    float v;
    memcpy(&v, p, 4);
    return v;
}

#endif
