/* kvcache.h — the paged KV cache: a pool of fixed-size blocks and per-sequence block
 * tables, like an OS page pool.
 *
 * Memory is allocated once at start: n_blocks blocks of block_size positions, each block
 * holding K and V for every layer. A sequence owns a table of block indices; position p
 * lives in block table[p / block_size], slot p % block_size. Blocks are reference
 * counted so that a later prefix cache can share a block between sequences without
 * copying; a block returns to the free list when its count drops to zero.
 *
 * Layout: K and V are separate arrays, block-major then layer then slot:
 *   k[((block * n_layer + layer) * block_size + slot) * kv_dim + i]
 * so one layer's positions of one block are contiguous for the attention loop. */
#ifndef TOKD_KVCACHE_H
#define TOKD_KVCACHE_H

#include <stdint.h>

#include "util.h"

typedef struct {
    int32_t block_size, n_layer, kv_dim;
    int64_t n_blocks;
    float *k, *v;
    int32_t *ref;       /* reference count per block */
    int32_t *free_list; /* stack of free block indices */
    int64_t n_free;
} tokd_kv;

typedef struct {
    int32_t *blocks;
    int32_t n_blocks, cap;
    int32_t len; /* positions held */
} tokd_seq_table;

int tokd_kv_init(tokd_kv *kv, int32_t block_size, int64_t n_blocks, int32_t n_layer, int32_t kv_dim, tokd_err *err);
void tokd_kv_free(tokd_kv *kv);

/* Take a free block (ref = 1); -1 when the pool is empty. */
int32_t tokd_kv_block_alloc(tokd_kv *kv);
void tokd_kv_block_ref(tokd_kv *kv, int32_t b);
void tokd_kv_block_unref(tokd_kv *kv, int32_t b);

/* Make the table cover positions [0, n_pos): allocate missing blocks. On exhaustion
 * returns -1 and leaves the table as it was. */
int tokd_seq_reserve(tokd_kv *kv, tokd_seq_table *s, int32_t n_pos);
/* Drop positions >= new_len, releasing blocks no longer covered. */
void tokd_seq_shrink(tokd_kv *kv, tokd_seq_table *s, int32_t new_len);
void tokd_seq_table_free(tokd_kv *kv, tokd_seq_table *s);

static inline float *tokd_kv_k_at(const tokd_kv *kv, int32_t block, int32_t layer) {
    return kv->k + (((int64_t)block * kv->n_layer + layer) * kv->block_size) * kv->kv_dim;
}
static inline float *tokd_kv_v_at(const tokd_kv *kv, int32_t block, int32_t layer) {
    return kv->v + (((int64_t)block * kv->n_layer + layer) * kv->block_size) * kv->kv_dim;
}

#endif
