/* kvcache.h — the paged KV cache: a pool of fixed-size blocks, per-sequence block
 * tables, and an automatic prefix cache over full blocks, like an OS page pool with a
 * page cache.
 *
 * Memory is allocated once at start: n_blocks blocks of block_size positions, each block
 * holding K and V for every layer. A sequence owns a table of block indices; position p
 * lives in block table[p / block_size], slot p % block_size. Blocks are reference
 * counted so that sequences can share a block without copying.
 *
 * Prefix cache. A FULL block can be published under a 64-bit key that is chained over
 * the token ids of the whole prefix up to and including the block (and a seed naming
 * whatever else changes KV content, e.g. the model): key_i = H(key_{i-1}, tokens of
 * block i). A full block is immutable, so any sequence whose prompt starts with the same
 * tokens can attach it (tokd_kv_block_ref) instead of recomputing it. A published block
 * also records its tokens and its parent key, and a lookup checks both, so a 64-bit hash
 * collision cannot hand one request another's content.
 *
 * Block states: free (ref 0, not published: on the free list), in use (ref > 0,
 * published or not), evictable (ref 0 but published: kept in an LRU list, its content
 * still reusable). Allocation takes a free block first, then evicts the least recently
 * used evictable block (unpublishing it); a lookup hit on an evictable block revives it.
 *
 * Layout: values are F16 (as llama.cpp's default cache: the forward pass rounds K and V
 * to F16 before writing them, so storing the bits loses nothing), half the bytes of F32
 * for every decode step's attention reads. K and V are separate arrays, layer-major, then
 * KV head, then block, then slot:
 *   v[(((layer * n_head_kv + head) * n_blocks + block) * block_size + slot) * head_dim + i]
 * and K the same pages, each holding its keys in transposed tiles of 16
 * (tokd_kv_k_offset, below). So what one attention task reads (one KV head of one layer)
 * is contiguous within a page, and the pages of a sequence whose blocks came from the free list in order (0, 1, 2, ...
 * for a context of its own) follow one another in memory: one stream through the whole
 * context. Block-major (block, then layer, then head), as before the forty-third session,
 * put a head's pages n_layer * n_head_kv pages apart (176 KB in the TinyLlama shape), each
 * a new stream for the prefetchers: one attention call at 2048 keys with its cache cold
 * took 81-88 us against 76, and decode at 2048 positions ran 3-8 % slower (BENCHMARKS.md).
 *
 * Not thread-safe: one owner (the forward pass / the engine's scheduler thread). */
#ifndef TOKD_KVCACHE_H
#define TOKD_KVCACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "util.h"

typedef struct {
    int32_t block_size, n_layer, n_head_kv, head_dim;
    int64_t n_blocks;
    uint16_t *k, *v; /* F16 bits, in huge pages (tokd_huge_alloc) */
    size_t kv_bytes; /* each of k and v */
    int32_t *ref;       /* reference count per block */
    int32_t *free_list; /* stack of free block indices */
    int64_t n_free;
    /* prefix cache */
    uint64_t *key, *parent;  /* per block: published key and its parent's key */
    bool *published;
    int32_t *toks;           /* per block: block_size token ids of a published block */
    int32_t *lru_prev, *lru_next; /* evictable list, head = least recently used */
    int32_t lru_head, lru_tail;
    int64_t n_evictable, n_published;
    int32_t *ht;             /* open addressing: block index or -1 (empty) or -2 (deleted) */
    int64_t ht_cap;
    uint64_t n_evictions;
} tokd_kv;

typedef struct {
    int32_t *blocks;
    int32_t n_blocks, cap;
    int32_t len; /* positions held */
} tokd_seq_table;

int tokd_kv_init(tokd_kv *kv, int32_t block_size, int64_t n_blocks, int32_t n_layer, int32_t n_head_kv, int32_t head_dim,
                 tokd_err *err);
void tokd_kv_free(tokd_kv *kv);

/* Take a block (ref = 1): a free one, else the least recently used evictable one;
 * -1 when every block is in use. */
int32_t tokd_kv_block_alloc(tokd_kv *kv);
/* Count one more user; reviving an evictable block takes it off the LRU list. */
void tokd_kv_block_ref(tokd_kv *kv, int32_t b);
/* One user fewer; at zero a published block becomes evictable, another one free. */
void tokd_kv_block_unref(tokd_kv *kv, int32_t b);
/* Blocks an allocation can still get: free + evictable. */
static inline int64_t tokd_kv_available(const tokd_kv *kv) { return kv->n_free + kv->n_evictable; }
/* Blocks referenced by at least one sequence. */
static inline int64_t tokd_kv_in_use(const tokd_kv *kv) { return kv->n_blocks - kv->n_free - kv->n_evictable; }

/* Chained key of a full block: parent (0 seed for the first block, or the model seed)
 * and its block_size tokens. */
uint64_t tokd_kv_block_key(uint64_t parent, const int32_t *toks, int32_t n);
/* Publish full block b (held by the caller) under key; its tokens and parent key are
 * recorded. If another block is already published under the same key, nothing happens
 * (returns 0); returns 1 when b was published. */
int tokd_kv_publish(tokd_kv *kv, int32_t b, uint64_t key, uint64_t parent, const int32_t *toks);
/* Block published under key with this parent and these tokens, or -1. Does not ref. */
int32_t tokd_kv_lookup(const tokd_kv *kv, uint64_t key, uint64_t parent, const int32_t *toks);

/* Make the table cover positions [0, n_pos): allocate missing blocks. On exhaustion
 * returns -1 and leaves the table as it was. */
int tokd_seq_reserve(tokd_kv *kv, tokd_seq_table *s, int32_t n_pos);
/* Append block b (already referenced by the caller) to the table. */
void tokd_seq_push_block(tokd_seq_table *s, int32_t b);
/* Drop positions >= new_len, releasing blocks no longer covered. */
void tokd_seq_shrink(tokd_kv *kv, tokd_seq_table *s, int32_t new_len);
void tokd_seq_table_free(tokd_kv *kv, tokd_seq_table *s);

/* Where page `block` of layer `layer` and KV head `head` starts, in values from the start
 * of k (and of v: both arrays have the same layout). */
static inline int64_t tokd_kv_page(const tokd_kv *kv, int32_t block, int32_t layer, int32_t head) {
    return (((int64_t)layer * kv->n_head_kv + head) * kv->n_blocks + block) * kv->block_size * kv->head_dim;
}
/* That page of K: its keys in tiles of TOKD_KV_K_TILE slots, each tile transposed
 * (tokd_kv_k_offset). */
static inline uint16_t *tokd_kv_k_page(const tokd_kv *kv, int32_t block, int32_t layer, int32_t head) {
    return kv->k + tokd_kv_page(kv, block, layer, head);
}
/* That page of V: block_size rows of head_dim values, slot order. */
static inline uint16_t *tokd_kv_v_rows(const tokd_kv *kv, int32_t block, int32_t layer, int32_t head) {
    return kv->v + tokd_kv_page(kv, block, layer, head);
}

/* Where element i of the key in slot `slot` lies in its K page, in values. A K page
 * holds its keys in tiles of TOKD_KV_K_TILE consecutive slots, each tile transposed:
 * element i of the tile's keys side by side, i = 0, 1, ..., head_dim - 1. A tile is
 * TOKD_KV_K_TILE * head_dim values (the last of a page narrower when block_size is not a
 * multiple of TOKD_KV_K_TILE), so a tile starts where its first key's row would.
 * Attention's SIMD score pass then loads element i of 16 keys as one vector and keeps
 * the statement's 16 lane sums of each key in vector lanes, with no transposes
 * (attention.c). V keeps rows: P x V reads a key's whole row. */
#define TOKD_KV_K_TILE 16
static inline int64_t tokd_kv_k_offset(int32_t block_size, int32_t head_dim, int32_t slot, int32_t i) {
    const int32_t t0 = slot - slot % TOKD_KV_K_TILE;
    const int32_t w = block_size - t0 < TOKD_KV_K_TILE ? block_size - t0 : TOKD_KV_K_TILE;
    return (int64_t)t0 * head_dim + (int64_t)i * w + (slot - t0);
}

/* Writes one position's K and V (head_dim F32 values each, rounded to F16) into slot
 * `slot` of the pages of block `block`, layer `layer`, KV head `head`. */
void tokd_kv_store(tokd_kv *kv, int32_t block, int32_t layer, int32_t head, int32_t slot, const float *k,
                   const float *v);

#endif
