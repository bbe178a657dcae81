/* tokenizer_map.c — open-addressing string -> int32 map (see tokenizer_map.h). */
#include "tokenizer_map.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

static uint32_t tk_hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a, folded */
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return (uint32_t)(h ^ (h >> 32));
}

void tk_map_init(tk_map *m, size_t expected) {
    size_t cap = 16;
    while (cap < expected * 2 + 2) cap <<= 1;
    m->slots = tokd_xcalloc(cap, sizeof *m->slots);
    m->mask = cap - 1;
    m->n = 0;
}

void tk_map_free(tk_map *m) {
    free(m->slots);
    m->slots = NULL;
    m->mask = 0;
    m->n = 0;
}

static void tk_map_grow(tk_map *m) {
    tk_map old = *m;
    size_t cap = (old.mask + 1) * 2;
    m->slots = tokd_xcalloc(cap, sizeof *m->slots);
    m->mask = cap - 1;
    for (size_t i = 0; i <= old.mask; i++) {
        if (!old.slots[i].used) continue;
        size_t j = old.slots[i].hash & m->mask;
        while (m->slots[j].used) j = (j + 1) & m->mask;
        m->slots[j] = old.slots[i];
    }
    free(old.slots);
}

int32_t tk_map_put(tk_map *m, const char *key, size_t klen, int32_t val) {
    if ((m->n + 1) * 2 > m->mask + 1) tk_map_grow(m);
    uint32_t h = tk_hash(key, klen);
    size_t j = h & m->mask;
    while (m->slots[j].used) {
        tk_map_slot *s = &m->slots[j];
        if (s->hash == h && s->klen == klen && memcmp(s->key, key, klen) == 0) return s->val;
        j = (j + 1) & m->mask;
    }
    m->slots[j] = (tk_map_slot){key, (uint32_t)klen, h, val, 1};
    m->n++;
    return val;
}

int32_t tk_map_get(const tk_map *m, const char *key, size_t klen) {
    if (!m->slots) return -1;
    uint32_t h = tk_hash(key, klen);
    size_t j = h & m->mask;
    while (m->slots[j].used) {
        const tk_map_slot *s = &m->slots[j];
        if (s->hash == h && s->klen == klen && memcmp(s->key, key, klen) == 0) return s->val;
        j = (j + 1) & m->mask;
    }
    return -1;
}
