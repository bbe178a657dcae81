/* t_hash.h — FNV-1a (64-bit) of a byte range: the known-answer tests compare their
 * output bytes with hashes of llama.cpp's output on the same inputs. */
#ifndef TOKD_T_HASH_H
#define TOKD_T_HASH_H
#include <stddef.h>
#include <stdint.h>

static inline uint64_t t_fnv1a(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#endif
