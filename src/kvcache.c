/* kvcache.c — see kvcache.h. */
#include "kvcache.h"

#include <stdlib.h>

#include "vecmath.h"

#define HT_EMPTY (-1)
#define HT_DELETED (-2)

int tokd_kv_init(tokd_kv *kv, int32_t block_size, int64_t n_blocks, int32_t n_layer, int32_t n_head_kv, int32_t head_dim,
                 tokd_err *err) {
    memset(kv, 0, sizeof *kv);
    uint64_t per_block, total;
    if (block_size <= 0 || n_blocks <= 0 || n_blocks > INT32_MAX / 4 || n_layer <= 0 || n_head_kv <= 0 || head_dim <= 0 ||
        tokd_mul_u64((uint64_t)block_size * (uint64_t)n_layer, (uint64_t)n_head_kv * (uint64_t)head_dim, &per_block) ||
        tokd_mul_u64(per_block, (uint64_t)n_blocks * sizeof(uint16_t), &total) || total > ((uint64_t)1 << 40))
        return tokd_seterr(err, "KV cache of %lld blocks x %d positions is too large", (long long)n_blocks, block_size);
    kv->block_size = block_size;
    kv->n_layer = n_layer;
    kv->n_head_kv = n_head_kv;
    kv->head_dim = head_dim;
    kv->n_blocks = n_blocks;
    /* attention reads a head's 2 KB of each block (TinyLlama shape) from wherever the
       sequence's blocks lie: with 4 KiB pages, when the layout was block-major and those
       blocks ~180 KB apart, nearly every one was a TLB miss. Decode at 2048 and 3072
       positions, one context of each kind in one process, alternated: huge pages
       1.10-1.16 times as fast (BENCHMARKS.md, fourteenth session) */
    kv->kv_bytes = (size_t)total;
    kv->k = tokd_huge_alloc(kv->kv_bytes);
    kv->v = tokd_huge_alloc(kv->kv_bytes);
    if (!kv->k || !kv->v) {
        tokd_huge_free(kv->k, kv->kv_bytes);
        tokd_huge_free(kv->v, kv->kv_bytes);
        kv->k = kv->v = NULL;
        return tokd_seterr(err, "cannot allocate the KV cache (%llu MiB)", (unsigned long long)(2 * total >> 20));
    }
    size_t nb = (size_t)n_blocks;
    kv->ref = tokd_xcalloc(nb, sizeof(int32_t));
    kv->free_list = tokd_xmalloc(nb * sizeof(int32_t));
    for (int64_t i = 0; i < n_blocks; i++) kv->free_list[i] = (int32_t)(n_blocks - 1 - i); /* pop 0 first */
    kv->n_free = n_blocks;
    kv->key = tokd_xcalloc(nb, sizeof(uint64_t));
    kv->parent = tokd_xcalloc(nb, sizeof(uint64_t));
    kv->published = tokd_xcalloc(nb, sizeof(bool));
    kv->toks = tokd_xcalloc(nb * (size_t)block_size, sizeof(int32_t));
    kv->lru_prev = tokd_xmalloc(nb * sizeof(int32_t));
    kv->lru_next = tokd_xmalloc(nb * sizeof(int32_t));
    kv->lru_head = kv->lru_tail = -1;
    int64_t cap = 16;
    while (cap < 2 * n_blocks) cap *= 2;
    kv->ht_cap = cap;
    kv->ht = tokd_xmalloc((size_t)cap * sizeof(int32_t));
    for (int64_t i = 0; i < cap; i++) kv->ht[i] = HT_EMPTY;
    return 0;
}

void tokd_kv_free(tokd_kv *kv) {
    tokd_huge_free(kv->k, kv->kv_bytes);
    tokd_huge_free(kv->v, kv->kv_bytes);
    free(kv->ref);
    free(kv->free_list);
    free(kv->key);
    free(kv->parent);
    free(kv->published);
    free(kv->toks);
    free(kv->lru_prev);
    free(kv->lru_next);
    free(kv->ht);
    memset(kv, 0, sizeof *kv);
}

/* ---- hashing --------------------------------------------------------------------- */

static uint64_t mix64(uint64_t x) { /* splitmix64 finaliser */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

uint64_t tokd_kv_block_key(uint64_t parent, const int32_t *toks, int32_t n) {
    uint64_t h = mix64(parent ^ 0x9e3779b97f4a7c15ULL);
    for (int32_t i = 0; i < n; i++) h = mix64(h ^ ((uint64_t)(uint32_t)toks[i] + 0x632be59bd9b4e019ULL * (uint64_t)(i + 1)));
    return h ? h : 1;
}

static int64_t ht_slot(const tokd_kv *kv, uint64_t key) { return (int64_t)(key & (uint64_t)(kv->ht_cap - 1)); }

static bool block_matches(const tokd_kv *kv, int32_t b, uint64_t key, uint64_t parent, const int32_t *toks) {
    return kv->key[b] == key && kv->parent[b] == parent &&
           !memcmp(kv->toks + (size_t)b * kv->block_size, toks, (size_t)kv->block_size * sizeof(int32_t));
}

int32_t tokd_kv_lookup(const tokd_kv *kv, uint64_t key, uint64_t parent, const int32_t *toks) {
    if (!kv->ht) return -1;
    for (int64_t i = ht_slot(kv, key), n = 0; n < kv->ht_cap; i = (i + 1) & (kv->ht_cap - 1), n++) {
        int32_t b = kv->ht[i];
        if (b == HT_EMPTY) return -1;
        if (b >= 0 && block_matches(kv, b, key, parent, toks)) return b;
    }
    return -1;
}

static void ht_remove(tokd_kv *kv, int32_t b) {
    for (int64_t i = ht_slot(kv, kv->key[b]), n = 0; n < kv->ht_cap; i = (i + 1) & (kv->ht_cap - 1), n++) {
        if (kv->ht[i] == HT_EMPTY) return;
        if (kv->ht[i] == b) {
            kv->ht[i] = HT_DELETED;
            return;
        }
    }
}

static void ht_rebuild(tokd_kv *kv) { /* drop tombstones */
    for (int64_t i = 0; i < kv->ht_cap; i++) kv->ht[i] = HT_EMPTY;
    for (int64_t b = 0; b < kv->n_blocks; b++) {
        if (!kv->published[b]) continue;
        int64_t i = ht_slot(kv, kv->key[b]);
        while (kv->ht[i] != HT_EMPTY) i = (i + 1) & (kv->ht_cap - 1);
        kv->ht[i] = (int32_t)b;
    }
}

int tokd_kv_publish(tokd_kv *kv, int32_t b, uint64_t key, uint64_t parent, const int32_t *toks) {
    if (kv->published[b]) return 0;
    int64_t first_free = -1, i = ht_slot(kv, key);
    for (int64_t n = 0; n < kv->ht_cap; i = (i + 1) & (kv->ht_cap - 1), n++) {
        int32_t o = kv->ht[i];
        if (o == HT_EMPTY) {
            if (first_free < 0) first_free = i;
            break;
        }
        if (o == HT_DELETED) {
            if (first_free < 0) first_free = i;
            continue;
        }
        if (kv->key[o] == key && kv->parent[o] == parent) return 0; /* same content already cached */
    }
    if (first_free < 0) { /* full of tombstones: cannot happen with cap >= 2 n_blocks after a rebuild */
        ht_rebuild(kv);
        return tokd_kv_publish(kv, b, key, parent, toks);
    }
    kv->ht[first_free] = b;
    kv->key[b] = key;
    kv->parent[b] = parent;
    memcpy(kv->toks + (size_t)b * kv->block_size, toks, (size_t)kv->block_size * sizeof(int32_t));
    kv->published[b] = true;
    kv->n_published++;
    return 1;
}

/* ---- LRU of evictable blocks ---------------------------------------------------------- */

static void lru_push_tail(tokd_kv *kv, int32_t b) {
    kv->lru_prev[b] = kv->lru_tail;
    kv->lru_next[b] = -1;
    if (kv->lru_tail >= 0) kv->lru_next[kv->lru_tail] = b;
    else kv->lru_head = b;
    kv->lru_tail = b;
    kv->n_evictable++;
}

static void lru_remove(tokd_kv *kv, int32_t b) {
    int32_t p = kv->lru_prev[b], n = kv->lru_next[b];
    if (p >= 0) kv->lru_next[p] = n;
    else kv->lru_head = n;
    if (n >= 0) kv->lru_prev[n] = p;
    else kv->lru_tail = p;
    kv->n_evictable--;
}

int32_t tokd_kv_block_alloc(tokd_kv *kv) {
    int32_t b;
    if (kv->n_free > 0) {
        b = kv->free_list[--kv->n_free];
    } else if (kv->lru_head >= 0) {
        b = kv->lru_head;
        lru_remove(kv, b);
        ht_remove(kv, b);
        kv->published[b] = false;
        kv->n_published--;
        kv->n_evictions++;
    } else {
        return -1;
    }
    kv->ref[b] = 1;
    return b;
}

void tokd_kv_block_ref(tokd_kv *kv, int32_t b) {
    if (kv->ref[b]++ == 0 && kv->published[b]) lru_remove(kv, b);
}

void tokd_kv_block_unref(tokd_kv *kv, int32_t b) {
    if (--kv->ref[b] != 0) return;
    if (kv->published[b]) lru_push_tail(kv, b);
    else kv->free_list[kv->n_free++] = b;
}

/* ---- sequence tables ------------------------------------------------------------------ */

static void table_grow(tokd_seq_table *s, int32_t need) {
    if (need <= s->cap) return;
    int32_t cap = s->cap ? s->cap : 8;
    while (cap < need) cap *= 2;
    s->blocks = tokd_xrealloc(s->blocks, (size_t)cap * sizeof(int32_t));
    s->cap = cap;
}

int tokd_seq_reserve(tokd_kv *kv, tokd_seq_table *s, int32_t n_pos) {
    int32_t need = (int32_t)(((int64_t)n_pos + kv->block_size - 1) / kv->block_size);
    if (need <= s->n_blocks) return 0;
    if (need - s->n_blocks > tokd_kv_available(kv)) return -1;
    table_grow(s, need);
    while (s->n_blocks < need) s->blocks[s->n_blocks++] = tokd_kv_block_alloc(kv);
    return 0;
}

void tokd_seq_push_block(tokd_seq_table *s, int32_t b) {
    table_grow(s, s->n_blocks + 1);
    s->blocks[s->n_blocks++] = b;
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

void tokd_kv_store(tokd_kv *kv, int32_t block, int32_t layer, int32_t head, int32_t slot, const float *k,
                   const float *v) {
    const int32_t hd = kv->head_dim;
    uint16_t *kp = tokd_kv_k_page(kv, block, layer, head);
    const int64_t k0 = tokd_kv_k_offset(kv->block_size, hd, slot, 0), stride = tokd_kv_k_offset(kv->block_size, hd, slot, 1) - k0;
    uint16_t h[256]; /* converted a chunk at a time by the vector routine, then scattered */
    for (int32_t i0 = 0; i0 < hd; i0 += 256) {
        const int32_t n = hd - i0 < 256 ? hd - i0 : 256;
        tokd_f32_to_f16_n(h, k + i0, n);
        for (int32_t i = 0; i < n; i++) kp[k0 + (int64_t)(i0 + i) * stride] = h[i];
    }
    tokd_f32_to_f16_n(tokd_kv_v_rows(kv, block, layer, head) + (size_t)slot * hd, v, hd);
}
