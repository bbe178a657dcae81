/* test_attention.c — attention.c: the selected path (AVX-512, AVX2 or scalar) and the
 * AVX2 path on any CPU with AVX2, FMA and F16C give the scalar statement's bits
 * (tokd_attention_ref) for head sizes 32, 64 and 128, GQA groups 1..8 and 20, pages of 16, 8
 * and 24 positions, key counts that fill and that end inside a page or a group of 8,
 * scattered page tables, values spanning many magnitudes, and NaN or huge keys stored
 * past the last key (which must stay out of the result). Also the cache's page layout
 * that the kernels' streams rely on (check_layout). */
#include <math.h>
#include <string.h>

#include "attention.h"
#include "kernels/types.h"
#include "t.h"
#include "t_rand.h"
#include "util.h"

static uint64_t rng = 88172645463325252ull; /* t_rand.h state */
static float f16r(float x) { return tokd_f16_to_f32(tokd_f32_to_f16(x)); }

/* Element i of the key at position t (kvcache.h's transposed K tiles). */
static uint16_t *k_at(const tokd_kv *kv, const int32_t *blocks, int32_t layer, int32_t h, int32_t t, int32_t i) {
    return tokd_kv_k_page(kv, blocks[t / kv->block_size], layer, h) +
           tokd_kv_k_offset(kv->block_size, kv->head_dim, t % kv->block_size, i);
}

static int has_avx2(void) {
    const tokd_cpu_features *c = tokd_cpu();
    return c->avx2 && c->fma && c->f16c;
}

/* The AVX2 path's bits, or 0 where this CPU has no AVX2 (the hook refused, checked in
 * check_avx2_refusals). A supported shape the hook refuses counts as a difference. */
static int avx2_differs(const tokd_kv *kv, const int32_t *blocks, int32_t layer, int32_t kvh, int32_t n,
                        const float *q, int32_t group, int32_t hd, const float *ref, float *scratch) {
    if (!has_avx2()) return 0;
    float out[20 * 128];
    memset(out, 0xA5, sizeof out);
    if (tokd_attention_avx2(kv, blocks, layer, kvh, n, q, group, hd, out, scratch) != 0) return hd % 32 != 0 ? 0 : 1;
    return memcmp(out, ref, sizeof(float) * (size_t)group * hd) != 0;
}

/* Keys n .. (the end of n's page) of every layer and KV head set to `val` (K only: V
 * past the last key is never read by either path), for the poisoned-tail cases; the
 * old values saved in / restored from keep. */
static void poison_tail(tokd_kv *kv, const int32_t *blocks, int32_t n, float val, uint16_t *keep, int restore) {
    const int32_t bs = kv->block_size, hd = kv->head_dim;
    const uint16_t hval = tokd_f32_to_f16(val);
    size_t w = 0;
    for (int32_t layer = 0; layer < kv->n_layer; layer++)
        for (int32_t h = 0; h < kv->n_head_kv; h++)
            for (int32_t t = n; t % bs != 0; t++)
                for (int32_t i = 0; i < hd; i++, w++) {
                    uint16_t *k = k_at(kv, blocks, layer, h, t, i);
                    if (restore) *k = keep[w];
                    else keep[w] = *k, *k = hval;
                }
}

static void check_avx2_refusals(void) {
    tokd_kv kv;
    tokd_err err;
    const int32_t hd = 64;
    CHECK(tokd_kv_init(&kv, 12, 4, 1, 1, hd, &err) == 0, "kv init: %s", err.msg);
    memset(kv.k, 0, sizeof(uint16_t) * 4 * 12 * hd);
    memset(kv.v, 0, sizeof(uint16_t) * 4 * 12 * hd);
    int32_t blocks[4] = {0, 1, 2, 3};
    float q[64] = {0}, out[64], scratch[64];
    if (!has_avx2()) {
        CHECK(tokd_attention_avx2(&kv, blocks, 0, 0, 8, q, 1, hd, out, scratch) == -1, "no AVX2: the hook refuses");
    } else {
        CHECK(tokd_attention_avx2(&kv, blocks, 0, 0, 8, q, 1, hd, out, scratch) == -1, "a page of 12: refused");
        kv.block_size = 8; /* 48 positions in 6 pages of 8: the same memory */
        CHECK(tokd_attention_avx2(&kv, blocks, 0, 0, 8, q, 1, hd, out, scratch) == 0, "a page of 8: taken");
        CHECK(tokd_attention_avx2(&kv, blocks, 0, 0, 0, q, 1, hd, out, scratch) == -1, "no keys: refused");
        CHECK(tokd_attention_avx2(&kv, blocks, 0, 0, 8, q, 1, 48, out, scratch) == -1, "hd 48: refused");
        kv.block_size = 12;
    }
    tokd_kv_free(&kv);
}

/* The statement's summation orders, on rows where another order gives another result
 * (every path, against values worked out by hand):
 *  - a score is 16 lanes (element i in lane i % 16, lanes folded by tokd_reduce16):
 *    products 2^24, 1, -2^24 at elements 0, 16, 32 share lane 0, where 2^24 + 1 rounds
 *    to 2^24, so the score is 0 (32 lanes would pair elements 0 and 32 and give 1);
 *  - P x V sums key t in lane t % 16: products 10920.1, 0.333, -10920.1 of keys 0, 1, 2
 *    sit in three lanes and the tree adds the two large ones first (in key order the
 *    0.333 would be rounded to 2^-10 inside 10920.1). */
static void check_orders(void) {
    enum { HD = 64, BS = 16 };
    tokd_kv kv;
    tokd_err err;
    CHECK(tokd_kv_init(&kv, BS, 1, 1, 1, HD, &err) == 0, "kv init: %s", err.msg);
    const int32_t blocks[1] = {0};
    float q[HD], out[HD], scratch[64];
    /* scores: key 0 crafted, key 1 zero; V rows 1 and 3: equal scores give 2 */
    memset(kv.k, 0, sizeof(uint16_t) * BS * HD);
    memset(kv.v, 0, sizeof(uint16_t) * BS * HD);
    for (int i = 0; i < HD; i++) q[i] = 0.0f;
    q[0] = q[16] = q[32] = 4096.0f;
    q[16] = 1.0f;
    *k_at(&kv, blocks, 0, 0, 0, 0) = tokd_f32_to_f16(4096.0f);
    *k_at(&kv, blocks, 0, 0, 0, 16) = tokd_f32_to_f16(1.0f);
    *k_at(&kv, blocks, 0, 0, 0, 32) = tokd_f32_to_f16(-4096.0f);
    for (int i = 0; i < HD; i++) kv.v[i] = tokd_f32_to_f16(1.0f), kv.v[HD + i] = tokd_f32_to_f16(3.0f);
    int bad = 0;
    for (int path = 0; path < 3; path++) {
        memset(out, 0, sizeof out);
        if (path == 0) tokd_attention_ref(&kv, blocks, 0, 0, 2, q, 1, HD, out, scratch);
        else if (path == 1) tokd_attention(&kv, blocks, 0, 0, 2, q, 1, HD, out, scratch);
        else if (!has_avx2() || tokd_attention_avx2(&kv, blocks, 0, 0, 2, q, 1, HD, out, scratch)) continue;
        for (int i = 0; i < HD; i++) bad += out[i] != 2.0f;
    }
    CHECK(bad == 0, "scores in 16 lanes: %d outputs not 2", bad);
    /* P x V: three keys of equal score, p = 1/3 rounded to F16 */
    memset(kv.k, 0, sizeof(uint16_t) * BS * HD);
    for (int i = 0; i < HD; i++) {
        kv.v[i] = tokd_f32_to_f16(32768.0f), kv.v[HD + i] = tokd_f32_to_f16(1.0f);
        kv.v[2 * HD + i] = tokd_f32_to_f16(-32768.0f);
    }
    const float p = f16r((float)(1.0 / 3.0));
    bad = 0;
    for (int path = 0; path < 3; path++) {
        memset(out, 0, sizeof out);
        if (path == 0) tokd_attention_ref(&kv, blocks, 0, 0, 3, q, 1, HD, out, scratch);
        else if (path == 1) tokd_attention(&kv, blocks, 0, 0, 3, q, 1, HD, out, scratch);
        else if (!has_avx2() || tokd_attention_avx2(&kv, blocks, 0, 0, 3, q, 1, HD, out, scratch)) continue;
        for (int i = 0; i < HD; i++) bad += out[i] != p;
    }
    CHECK(bad == 0, "P x V in 16 lanes: %d outputs not %.9g", bad, p);
    tokd_kv_free(&kv);
}

/* kvcache.h's layout: every page of the cache once, and the pages of one layer and KV
 * head in block order end to end, so that a sequence holding blocks 0, 1, 2, ... reads
 * one stream per attention task (a block-major layout fails the second check). */
static void check_layout(void) {
    enum { BS = 16, HD = 32, NL = 3, NH = 2, NB = 5 };
    tokd_kv kv;
    tokd_err err;
    CHECK(tokd_kv_init(&kv, BS, NB, NL, NH, HD, &err) == 0, "kv init: %s", err.msg);
    static unsigned char seen_k[NB * NL * NH], seen_v[NB * NL * NH];
    int bad_cover = 0, bad_stream = 0;
    for (int l = 0; l < NL; l++)
        for (int h = 0; h < NH; h++)
            for (int b = 0; b < NB; b++) {
                const ptrdiff_t ok = tokd_kv_k_page(&kv, b, l, h) - kv.k, ov = tokd_kv_v_rows(&kv, b, l, h) - kv.v;
                bad_cover += ok % (BS * HD) != 0 || ok < 0 || ok / (BS * HD) >= NB * NL * NH || seen_k[ok / (BS * HD)]++;
                bad_cover += ov % (BS * HD) != 0 || ov < 0 || ov / (BS * HD) >= NB * NL * NH || seen_v[ov / (BS * HD)]++;
                if (b + 1 < NB) {
                    bad_stream += tokd_kv_k_page(&kv, b + 1, l, h) != tokd_kv_k_page(&kv, b, l, h) + BS * HD;
                    bad_stream += tokd_kv_v_rows(&kv, b + 1, l, h) != tokd_kv_v_rows(&kv, b, l, h) + BS * HD;
                }
            }
    CHECK(bad_cover == 0, "%d pages outside the cache or taken twice", bad_cover);
    CHECK(bad_stream == 0, "%d page pairs of one layer and head not end to end", bad_stream);
    tokd_kv_free(&kv);
}

/* The K tiles (kvcache.h): every (slot, element) of a page at its own offset within the
 * page; element i of a tile's keys side by side, tiles of 16 starting where their first
 * key's row would, the last of a page narrower; and tokd_kv_store writing K there and V
 * as rows, both rounded to F16. */
static void check_k_tiles(void) {
    static const int32_t sizes[] = {16, 32, 24, 8, 12, 5, 1};
    int bad_map = 0, bad_tile = 0, bad_store = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int32_t hd = 1; hd <= 64; hd += 21) {
            const int32_t bs = sizes[si];
            static unsigned char seen[32 * 64];
            memset(seen, 0, sizeof seen);
            for (int32_t slot = 0; slot < bs; slot++) {
                const int32_t t0 = slot - slot % 16, w = bs - t0 < 16 ? bs - t0 : 16;
                bad_tile += tokd_kv_k_offset(bs, hd, t0, 0) != (int64_t)t0 * hd;
                for (int32_t i = 0; i < hd; i++) {
                    const int64_t o = tokd_kv_k_offset(bs, hd, slot, i);
                    bad_map += o < 0 || o >= (int64_t)bs * hd || seen[o]++;
                    bad_tile += o != (int64_t)t0 * hd + (int64_t)i * w + (slot - t0);
                }
            }
        }
    CHECK(bad_map == 0, "K tiles: %d offsets outside the page or taken twice", bad_map);
    CHECK(bad_tile == 0, "K tiles: %d offsets not in transposed tiles of 16", bad_tile);
    tokd_kv kv;
    tokd_err err;
    enum { HD = 32, BS = 24 };
    CHECK(tokd_kv_init(&kv, BS, 3, 2, 2, HD, &err) == 0, "kv init: %s", err.msg);
    const int32_t blocks[3] = {2, 0, 1};
    float k[HD], v[HD];
    for (int32_t t = 0; t < 3 * BS; t++) {
        for (int32_t i = 0; i < HD; i++) k[i] = (float)(t * HD + i) + 0.3f, v[i] = -(float)(t * HD + i) - 0.7f;
        tokd_kv_store(&kv, blocks[t / BS], 1, 1, t % BS, k, v);
    }
    for (int32_t t = 0; t < 3 * BS; t++)
        for (int32_t i = 0; i < HD; i++) {
            const uint16_t ke = tokd_f32_to_f16((float)(t * HD + i) + 0.3f), ve = tokd_f32_to_f16(-(float)(t * HD + i) - 0.7f);
            bad_store += *k_at(&kv, blocks, 1, 1, t, i) != ke;
            bad_store += tokd_kv_v_rows(&kv, blocks[t / BS], 1, 1)[(t % BS) * HD + i] != ve;
        }
    CHECK(bad_store == 0, "tokd_kv_store: %d values not where tokd_kv_k_offset and the V rows say", bad_store);
    tokd_kv_free(&kv);
}

int main(void) {
    tokd_kernels_init();
    check_layout();
    check_k_tiles();
    check_avx2_refusals();
    check_orders();
    const int32_t hds[] = {32, 64, 128, 48};
    const int32_t groups[] = {1, 3, 8, 20}; /* 20: more heads than the AVX2 path scores at once */
    const int32_t bss[] = {16, 8, 24};
    const int32_t n_layer = 2, n_head_kv = 2;
    int avx2_cases = 0;
    for (size_t bi = 0; bi < sizeof bss / sizeof bss[0]; bi++)
    for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++) {
        const int32_t bs = bss[bi], hd = hds[hi], kv_dim = n_head_kv * hd;
        tokd_kv kv;
        tokd_err err;
        const int64_t n_blocks = 384 / bs; /* 24, 48, 16: each prime to 7 */
        CHECK(tokd_kv_init(&kv, bs, n_blocks, n_layer, n_head_kv, hd, &err) == 0, "kv init: %s", err.msg);
        /* F16 values as the cache holds them, magnitudes from 1e-3 to 30 */
        size_t n_vals = (size_t)n_blocks * n_layer * bs * kv_dim;
        for (size_t i = 0; i < n_vals; i++) {
            kv.k[i] = tokd_f32_to_f16(t_rand_half(&rng) * (i % 97 == 0 ? 30.0f : i % 13 == 0 ? 0.001f : 3.0f));
            kv.v[i] = tokd_f32_to_f16(t_rand_half(&rng) * (i % 89 == 0 ? 20.0f : 1.0f));
        }
        int32_t blocks[48];
        for (int i = 0; i < n_blocks; i++) blocks[i] = (int32_t)((i * 7 + 5) % n_blocks); /* scattered pages */
        for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++) {
            const int32_t group = groups[gi];
            float q[20 * 128], out[20 * 128], ref[20 * 128];
            float *scratch = tokd_aligned_alloc(sizeof(float) * (size_t)group * 400);
            int bad = 0, bad_avx2 = 0, cases = 0;
            const int32_t ns[] = {1, 2, 7, 8, 9, 15, 16, 17, 23, 100, 255, 256, 383, 384};
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                for (int32_t kvh = 0; kvh < n_head_kv; kvh++)
                    for (int32_t layer = 0; layer < n_layer; layer++) {
                        for (int32_t i = 0; i < group * hd; i++) q[i] = t_rand_half(&rng) * (ni % 2 ? 8.0f : 1.0f);
                        tokd_attention(&kv, blocks, layer, kvh, ns[ni], q, group, hd, out, scratch);
                        tokd_attention_ref(&kv, blocks, layer, kvh, ns[ni], q, group, hd, ref, scratch);
                        bad += memcmp(out, ref, sizeof(float) * (size_t)group * hd) != 0;
                        bad_avx2 += avx2_differs(&kv, blocks, layer, kvh, ns[ni], q, group, hd, ref, scratch);
                        cases++;
                    }
            /* what lies past the last key in its page must not matter: NaN, or keys
             * that would win the max */
            static uint16_t keep[24 * 2 * 2 * 128];
            const int32_t tails[] = {1, 9, 17, 100, 255, 383};
            const float poison[] = {NAN, 30000.0f, -30000.0f};
            for (size_t ti = 0; ti < sizeof tails / sizeof tails[0]; ti++)
                for (size_t pi = 0; pi < sizeof poison / sizeof poison[0]; pi++) {
                    poison_tail(&kv, blocks, tails[ti], poison[pi], keep, 0);
                    for (int32_t i = 0; i < group * hd; i++) q[i] = t_rand_half(&rng) * 2.0f;
                    tokd_attention(&kv, blocks, 1, 1, tails[ti], q, group, hd, out, scratch);
                    tokd_attention_ref(&kv, blocks, 1, 1, tails[ti], q, group, hd, ref, scratch);
                    bad += memcmp(out, ref, sizeof(float) * (size_t)group * hd) != 0;
                    bad_avx2 += avx2_differs(&kv, blocks, 1, 1, tails[ti], q, group, hd, ref, scratch);
                    cases++;
                    poison_tail(&kv, blocks, tails[ti], 0.0f, keep, 1);
                }
            CHECK(bad == 0, "page %d hd %d group %d: %d of %d cases of the %s path differ from the scalar statement",
                  bs, hd, group, bad, cases, tokd_kernels_path());
            CHECK(bad_avx2 == 0, "page %d hd %d group %d: %d of %d cases of the AVX2 path differ from the scalar statement",
                  bs, hd, group, bad_avx2, cases);
            if (has_avx2() && hd % 32 == 0) avx2_cases += cases;
            /* the statement against a plain double-precision softmax attention */
            double worst = 0.0;
            for (int32_t g = 0; g < group; g++) {
                const int32_t n = 100;
                double s[100], mx = -1e300, sum = 0.0;
                for (int32_t t = 0; t < n; t++) {
                    double d = 0.0;
                    for (int32_t i = 0; i < hd; i++)
                        d += (double)tokd_f16_to_f32(*k_at(&kv, blocks, 1, 1, t, i)) * f16r(q[g * hd + i]);
                    s[t] = d / sqrt((double)hd);
                    if (s[t] > mx) mx = s[t];
                }
                for (int32_t t = 0; t < n; t++) sum += (s[t] = exp(s[t] - mx));
                tokd_attention_ref(&kv, blocks, 1, 1, n, q, group, hd, ref, scratch);
                for (int32_t i = 0; i < hd; i++) {
                    double o = 0.0, mag = 0.0;
                    for (int32_t t = 0; t < n; t++) {
                        const uint16_t *v = tokd_kv_v_rows(&kv, blocks[t / bs], 1, 1) + (size_t)(t % bs) * hd;
                        const double vi = tokd_f16_to_f32(v[i]);
                        o += s[t] / sum * vi;
                        mag += s[t] / sum * fabs(vi);
                    }
                    double e = fabs(ref[g * hd + i] - o) / (mag + 1e-6);
                    if (e > worst) worst = e;
                }
            }
            CHECK(worst < 2e-3, "hd %d group %d: attention %.2g from the exact value (F16 probabilities)", hd, group, worst);
            free(scratch);
        }
        tokd_kv_free(&kv);
    }
    CHECK(!has_avx2() || avx2_cases == 3 * 3 * 4 * (14 * 4 + 18), "the AVX2 path ran on every case (%d)", avx2_cases);
    T_DONE();
}
