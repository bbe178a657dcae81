/* kvcache.c — see kvcache.h. */
#include "kvcache.h"

#include <stdlib.h>

int tokd_kv_init(tokd_kv *kv, int32_t block_size, int64_t n_blocks, int32_t n_layer, int32_t kv_dim, tokd_err *err) {
    memset(kv, 0, sizeof *kv);
    uint64_t per_block, total;
    if (block_size <= 0 || n_blocks <= 0 || n_blocks > INT32_MAX ||
        tokd_mul_u64((uint64_t)block_size * (uint64_t)n_layer, (uint64_t)kv_dim, &per_block) ||
        tokd_mul_u64(per_block, (uint64_t)n_blocks * sizeof(float), &total) || total > ((uint64_t)1 << 40))
        return tokd_seterr(err, "KV cache of %lld blocks x %d positions is too large", (long long)n_blocks, block_size);
    kv->block_size = block_size;
    kv->n_layer = n_layer;
    kv->kv_dim = kv_dim;
    kv->n_blocks = n_blocks;
    kv->k = calloc(1, (size_t)total);
    kv->v = calloc(1, (size_t)total);
    if (!kv->k || !kv->v) {
        free(kv->k);
        free(kv->v);
        kv->k = kv->v = NULL;
        return tokd_seterr(err, "cannot allocate the KV cache (%llu MiB)", (unsigned long long)(2 * total >> 20));
    }
    kv->ref = tokd_xcalloc((size_t)n_blocks, sizeof(int32_t));
    kv->free_list = tokd_xmalloc((size_t)n_blocks * sizeof(int32_t));
    for (int64_t i = 0; i < n_blocks; i++) kv->free_list[i] = (int32_t)(n_blocks - 1 - i); /* pop 0 first */
    kv->n_free = n_blocks;
    return 0;
}

void tokd_kv_free(tokd_kv *kv) {
    free(kv->k);
    free(kv->v);
    free(kv->ref);
    free(kv->free_list);
    memset(kv, 0, sizeof *kv);
}

int32_t tokd_kv_block_alloc(tokd_kv *kv) {
    if (kv->n_free == 0) return -1;
    int32_t b = kv->free_list[--kv->n_free];
    kv->ref[b] = 1;
    return b;
}

void tokd_kv_block_ref(tokd_kv *kv, int32_t b) { kv->ref[b]++; }

void tokd_kv_block_unref(tokd_kv *kv, int32_t b) {
    if (--kv->ref[b] == 0) kv->free_list[kv->n_free++] = b;
}

int tokd_seq_reserve(tokd_kv *kv, tokd_seq_table *s, int32_t n_pos) {
    int32_t need = (n_pos + kv->block_size - 1) / kv->block_size;
    if (need <= s->n_blocks) return 0;
    if (need - s->n_blocks > kv->n_free) return -1;
    if (need > s->cap) {
        int32_t cap = s->cap ? s->cap : 8;
        while (cap < need) cap *= 2;
        s->blocks = tokd_xrealloc(s->blocks, (size_t)cap * sizeof(int32_t));
        s->cap = cap;
    }
    while (s->n_blocks < need) s->blocks[s->n_blocks++] = tokd_kv_block_alloc(kv);
    return 0;
}

void tokd_seq_shrink(tokd_kv *kv, tokd_seq_table *s, int32_t new_len) {
    if (new_len < 0) new_len = 0;
    if (new_len > s->len) return;
    s->len = new_len;
    int32_t keep = (new_len + kv->block_size - 1) / kv->block_size;
    while (s->n_blocks > keep) tokd_kv_block_unref(kv, s->blocks[--s->n_blocks]);
}

void tokd_seq_table_free(tokd_kv *kv, tokd_seq_table *s) {
    tokd_seq_shrink(kv, s, 0);
    free(s->blocks);
    memset(s, 0, sizeof *s);
}
