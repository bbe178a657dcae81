/* tokenizer_map.h — a small open-addressing hash table from byte strings to int32.
 *
 * Used for token text -> id and for BPE merge pair -> rank. Keys are not copied: they
 * must outlive the map (the tokenizer keeps them in its own arenas). Linear probing on
 * a power-of-two table kept at most half full; the stored 32-bit hash makes most probe
 * misses a single integer compare. Inserts only, no deletion: vocabularies are built
 * once at load and then read concurrently. */
#ifndef TOKD_TOKENIZER_MAP_H
#define TOKD_TOKENIZER_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *key;
    uint32_t klen;
    uint32_t hash;
    int32_t val;
    uint32_t used;
} tk_map_slot;

typedef struct {
    tk_map_slot *slots;
    size_t mask;
    size_t n;
} tk_map;

void tk_map_init(tk_map *m, size_t expected);
void tk_map_free(tk_map *m);
/* Insert key -> val unless the key is present. Returns the value now stored. */
int32_t tk_map_put(tk_map *m, const char *key, size_t klen, int32_t val);
/* Value for key, or -1. */
int32_t tk_map_get(const tk_map *m, const char *key, size_t klen);

#endif
