/* attention.c — see attention.h.
 *
 * The SIMD path takes all the query heads of one KV head at once, a tile of 16 keys at a
 * time (a KV page is 16 positions, or a multiple): each key is read once for every head.
 * The cache stores K transposed in such tiles (kvcache.h), so one vector holds element i
 * of 16 keys. Each lane sum of the statement's 16-lane score is then a vector over the
 * 16 keys, and tokd_reduce16's tree (lane l + lane l+8, then l+4, l+2, l+1) is 15 vector
 * additions that leave the 16 scores in key order (QK_TILE). The exponentials and the F16
 * rounding of probabilities run 16 lanes wide; P x V sums each lane's keys in registers
 * for several heads at once (pv_NV, below).
 *
 * Until the forty-eighth session K was stored as rows: a key's 16 lanes were one vector,
 * and sixteen keys' vectors were folded into one by a butterfly of shuffles (45
 * operations a head and tile beside its 64 FMAs, and each tile converted to F32 and
 * stored first). One call of 8 heads (hd 64) with its cache cold, as in a decode step,
 * medians of 3 runs of 30 sweeps over 22 layers x 4 KV heads (/tmp/s48/ab/attbench.c):
 * 2.96 / 12.3 / 56.9 / 116 us at 128 / 512 / 2048 / 4096 keys before, 2.69 / 11.1 / 46.1
 * / 102 now; warm at 4096 keys 89.5-92.0 us before, 82.8-87.5 now. In TinyLlama Q4_0
 * decode steps at 4096 positions (`tokd bench --profile`, three alternated pairs) the
 * attention stage took 264-311 us a layer before and 226-278 now.
 *
 * CPUs with AVX2, FMA and F16C but no AVX-512 take the same path in 8-lane vectors
 * (attn_256_NV: the same lane sums and tree, and P x V in tiles of heads x columns that
 * fit 16 registers): again the statement's bits. Each tile of 16 keys is converted to F32
 * once for up to QK_HEADS query heads, as two vectors of 8 keys, which then read it as
 * floats. Its scores take four heads a pass (QK16_TILE): each broadcast query value goes
 * into both halves' sums, and the lane sums are folded after all 16 lanes. Until the
 * sixty-ninth session they took two heads and 8 keys a pass, the tree folded depth first
 * in registers (QK8_TILE, still used by pages of 8 x odd slots); GCC 12 then parked lane
 * sums and key vectors on the stack, 1.6 loads an FMA. On the AVX2-only Zen 3, one call
 * of 8 heads (hd 64) at 2048 keys, warm, medians of 40 (/tmp/s69/attb2.c): the scores
 * 38.6-39.8 us against 59.3, the call 89.8-90.0 against 109.8. Against the row layout's
 * folds, through TOKD_KERNELS=avx2 on the AVX-512 host: 45.3-46.1 us against 46.9-48.1
 * at 1024 keys warm, 193.7-196.7 against 198.1-217.8 at 4096 cold (8-key passes).
 *
 * Until the forty-second session the scores took 32 lanes, the softmax sum 16 double
 * lanes, P x V key order and the exponential tokd's own polynomial: within 1e-6 of
 * llama.cpp, and BF16 models drifted from it at widths above 512 (BENCHMARKS.md). The
 * 16-lane P x V costs passes and a fold: one call of 8 heads (hd 64) took 1.4 / 4.3 /
 * 16.0 / 61.7 us at 32 / 128 / 512 / 2048 keys against 1.1 / 3.8 / 14.6 / 53.7 before
 * (/tmp/s42/attbench.c, best of 7; the host is noisy to ~10 %). The forty-third session
 * took out a division per key (v_rows) and per query head and block (the F16 rounding
 * of the queries), and added the prefetching below: warm 0.8 / 2.7 / 10.4 / 39.8 us, and
 * with the cache cold, as in a decode step, 53 us at 2048 keys against 79-88.
 *
 * Both products, k * qh and p * v, multiply two F16 values (11 significant bits each),
 * so they are exact in F32: a fused multiply-add gives the same bits as the statement's
 * multiply, then add, and the vector code uses it. */
#include "attention.h"

#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/quants.h"
#include "kernels/types.h"
#include "util.h"
#include "vecmath.h"

#define MAX_HD 4096

static inline float f16_round(float x) { return tokd_f16_to_f32(tokd_f32_to_f16(x)); }

/* ---- the scalar statement ---- */

/* dot(k, qh), k's element i at k[i * ks]: 16 lanes where hd is a multiple of 16; else as
 * ggml_vec_dot_f16 (its fallback when tinyBLAS refuses such a length): the first
 * hd & ~63 elements in 64 lanes, folded l + l+32 and l+16 + l+48, then l + l+16, then
 * tokd_reduce16, and the rest added to that in double, in order. (Each product of two F16
 * values is exact.) */
static float score_dot(const uint16_t *k, int64_t ks, const float *qh, int32_t hd) {
    if (hd % 16 == 0) {
        float lane[16] = {0};
        for (int32_t i = 0; i < hd; i++) {
            float prod = tokd_f16_to_f32(k[i * ks]) * qh[i];
            lane[i % 16] = lane[i % 16] + prod;
        }
        return tokd_reduce16(lane);
    }
    const int32_t body = hd & ~63;
    double sum = 0.0; /* an empty body's 64 lanes fold to +0 */
    if (body) {
        float s[64] = {0};
        for (int32_t i = 0; i < body; i++) {
            float prod = tokd_f16_to_f32(k[i * ks]) * qh[i];
            s[i % 64] = s[i % 64] + prod;
        }
        for (int l = 0; l < 16; l++) {
            s[l] = s[l] + s[l + 32];
            s[l + 16] = s[l + 16] + s[l + 48];
        }
        for (int l = 0; l < 16; l++) s[l] = s[l] + s[l + 16];
        sum = (double)tokd_reduce16(s);
    }
    for (int32_t i = body; i < hd; i++) sum += (double)(tokd_f16_to_f32(k[i * ks]) * qh[i]);
    return (float)sum;
}

/* The statement's P x V for PV_REF_COLS columns at a time: key by key, each V row found
 * once, every column's 16 lane sums carried side by side (each sum's additions in the
 * statement's order). Element by element, a row lookup for each key and column made the
 * tiny models' tests (head size 8, the statement's path) spend most of their time here
 * under the sanitizers. */
#define PV_REF_COLS 64

void tokd_attention_ref(const tokd_kv *kv, const int32_t *blocks, int32_t layer, int32_t kvh, int32_t n_keys,
                        const float *q, int32_t group, int32_t hd, float *out, float *scratch) {
    const int32_t bs = kv->block_size;
    const float scale = 1.0f / sqrtf((float)hd);
    float qh[MAX_HD];
    for (int32_t g = 0; g < group; g++) {
        float *s = scratch;
        for (int32_t i = 0; i < hd; i++) qh[i] = f16_round(q[(size_t)g * hd + i]);
        float m = -INFINITY;
        for (int32_t t = 0; t < n_keys; t++) {
            const uint16_t *kp = tokd_kv_k_page(kv, blocks[t / bs], layer, kvh);
            const int64_t k0 = tokd_kv_k_offset(bs, hd, t % bs, 0), ks = tokd_kv_k_offset(bs, hd, t % bs, 1) - k0;
            float sc = score_dot(kp + k0, ks, qh, hd) * scale;
            s[t] = sc;
            if (sc > m) m = sc;
        }
        double sum = 0.0;
        for (int32_t t0 = 0; t0 < n_keys; t0 += 16) {
            float e[16] = {0};
            for (int32_t j = 0; j < 16 && t0 + j < n_keys; j++) e[j] = s[t0 + j] = tokd_exp(s[t0 + j] - m);
            sum += (double)tokd_reduce16(e);
        }
        const float inv = (float)(1.0 / sum);
        for (int32_t t = 0; t < n_keys; t++) s[t] = f16_round(s[t] * inv);
        float *o = out + (size_t)g * hd;
        for (int32_t i0 = 0; i0 < hd; i0 += PV_REF_COLS) {
            const int32_t nc = hd - i0 < PV_REF_COLS ? hd - i0 : PV_REF_COLS;
            float lane[PV_REF_COLS][16];
            memset(lane, 0, sizeof lane);
            for (int32_t t = 0; t < n_keys; t++) {
                const uint16_t *v = tokd_kv_v_rows(kv, blocks[t / bs], layer, kvh) + (size_t)(t % bs) * hd + i0;
                for (int32_t c = 0; c < nc; c++) {
                    float prod = s[t] * tokd_f16_to_f32(v[c]);
                    lane[c][t % 16] = lane[c][t % 16] + prod;
                }
            }
            for (int32_t c = 0; c < nc; c++) o[i0 + c] = tokd_reduce16(lane[c]);
        }
    }
}

/* P x V runs one pass per lane over a chunk of PV_CHUNK keys whose V rows stay in L1
 * (16-32 KB at head sizes 64-128), then the next chunk, each lane's sum carried on from
 * where the chunk before left it (the same additions in the same order). The chunk's row
 * addresses are found once (v_rows, a chunk ahead, so that the passes can ask for the
 * next chunk's rows), not per key and lane, and page by page: with a
 * t % bs for each key (4096 divisions in a call of 8 heads at 2048 keys) the warm call
 * took 43.4 us against 39.6. */
#define PV_CHUNK 128
static inline void v_rows(const tokd_kv *kv, const int32_t *blocks, int32_t layer, int32_t kvh, int32_t hd, int32_t k0,
                          int32_t k1, const uint16_t **rows) {
    const int32_t bs = kv->block_size;
    for (int32_t t = k0; t < k1;) { /* page by page: one division a page, not a key */
        const int32_t slot = t % bs, n = k1 - t < bs - slot ? k1 - t : bs - slot;
        const uint16_t *v = tokd_kv_v_rows(kv, blocks[t / bs], layer, kvh) + (size_t)slot * hd;
        for (int32_t j = 0; j < n; j++) rows[t - k0 + j] = v + (size_t)j * hd;
        t += n;
    }
}

/* ---- prefetching ----
 * A decode step calls attention once a layer per KV head, between products that stream
 * tens of megabytes through the caches, so each call starts cold: its code and its K and
 * V rows come from memory. So each call first asks for its kernel's code and the rows of
 * its first PREFETCH_KEYS keys at once (prefetch_call, at the end of the file); then the
 * score pass asks for the K rows PREFETCH_KEYS keys ahead of each block it scores
 * (prefetch_k_block), and each pass of P x V for its share of the next chunk's V rows
 * (prefetch_lane_rows). One call of 8 heads (hd 64) at 2048 keys, cold, medians of 8-12
 * (/tmp/s43/attbench2.c, BENCHMARKS.md forty-third session): 79 us with the first burst
 * alone, 69-70 with each next chunk asked for at once, 64-68 with the K blocks as well,
 * 53 with the next chunk spread over the passes; warm, within 0-5 %. */
#define PREFETCH_KEYS 512

/* The K values of the `n` keys from t (16 or 8, from a multiple of n: they never cross a
 * page, which holds a multiple of them): the n * hd values from where key t's tile starts
 * plus (t % 16) * hd, into L2. That is the key's tile (16) or its first or second half
 * (8; a tile of 16 keys holds them interleaved, so two calls cover it). Inlined with n a constant, the loop unrolls
 * (as a loop, or as a general page-walking form, it gained the cold call nothing). */
static inline __attribute__((always_inline)) void prefetch_k_block(const tokd_kv *kv, const int32_t *blocks, int32_t layer,
                                                                   int32_t kvh, int32_t hd, int32_t t, int32_t n) {
    const int32_t bs = kv->block_size;
    const char *rows = (const char *)(tokd_kv_k_page(kv, blocks[t / bs], layer, kvh) + (size_t)(t % bs) * hd);
    _Pragma("GCC unroll 64") for (int32_t o = 0; o < n * hd * (int32_t)sizeof(uint16_t); o += 64)
        __builtin_prefetch(rows + o, 0, 2);
}

/* Lane `lane`'s share of the next chunk's V rows (next[0 .. n_next - 1], found by v_rows
 * a chunk ahead): PV_CHUNK / 16 rows, `bytes` of each from value `off`, asked for into L2
 * as this chunk's pass of that lane begins. The passes touch each row's lines one lane at
 * a time, rows 16 apart, an order no hardware prefetcher follows; spread over the 16
 * passes the requests keep a steady stream (the whole next chunk asked for at once, 256
 * lines at hd 64: cold calls 69-70 us at 2048 keys against 57). */
static inline void prefetch_lane_rows(const uint16_t *const *next, int32_t n_next, int lane, size_t off, size_t bytes) {
    const int32_t j1 = (lane + 1) * (PV_CHUNK / 16) < n_next ? (lane + 1) * (PV_CHUNK / 16) : n_next;
    for (int32_t j = lane * (PV_CHUNK / 16); j < j1; j++)
        for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch((const char *)(next[j] + off) + o, 0, 2);
}

/* The chunks that P x V walks: this chunk's row addresses (rows, nk of them, from key
 * k0) and the next chunk's (next, n_next), found a chunk ahead so that the passes can
 * ask for them (prefetch_lane_rows). The same walk serves both ISAs' kernels. */
typedef struct {
    const uint16_t *buf[2][PV_CHUNK], **rows, **next;
    int32_t k0, nk, n_next;
} pv_walk;

static inline void pv_walk_fill(pv_walk *w, const tokd_kv *kv, const int32_t *blocks, int32_t layer, int32_t kvh,
                                int32_t hd, int32_t n_keys) {
    w->nk = n_keys - w->k0 < PV_CHUNK ? n_keys - w->k0 : PV_CHUNK;
    w->n_next = n_keys - w->k0 - w->nk < PV_CHUNK ? n_keys - w->k0 - w->nk : PV_CHUNK;
    if (w->n_next > 0) v_rows(kv, blocks, layer, kvh, hd, w->k0 + w->nk, w->k0 + w->nk + w->n_next, w->next);
}
static inline void pv_walk_start(pv_walk *w, const tokd_kv *kv, const int32_t *blocks, int32_t layer, int32_t kvh,
                                 int32_t hd, int32_t n_keys) {
    w->rows = w->buf[0], w->next = w->buf[1], w->k0 = 0;
    v_rows(kv, blocks, layer, kvh, hd, 0, n_keys < PV_CHUNK ? n_keys : PV_CHUNK, w->rows);
    pv_walk_fill(w, kv, blocks, layer, kvh, hd, n_keys);
}
static inline void pv_walk_next(pv_walk *w, const tokd_kv *kv, const int32_t *blocks, int32_t layer, int32_t kvh,
                                int32_t hd, int32_t n_keys) {
    const uint16_t **t = w->rows;
    w->rows = w->next, w->next = t, w->k0 += PV_CHUNK;
    if (w->k0 < n_keys) pv_walk_fill(w, kv, blocks, layer, kvh, hd, n_keys);
}

/* ---- the score tree, for either ISA ----
 * Given P##_lane(k, qh, r, s), which sets s[h] (h < HT) to lane r's sum of HT heads' score
 * chains (elements i = r, r + 16, ... in order) over a few keys at once, one per vector
 * lane, these fold the 16 lanes as tokd_reduce16 does: lanes r and r + 8 (P##_pair), then
 * r and r + 4 (P##_quad), r and r + 2 (P##_half), 0 and 1 (P##_tile, which also scales
 * the scores and stores head h's at out + h * stride). Each lane sum is a vector over the
 * keys, so the fold is plain vector additions, evaluated depth first to keep at most a few
 * sums a head live. VT is the vector type, KT the keys' type for P##_lane. */
#define LANE_FOLD(ATTR, VT, ADD, KT, P, HT, NAME, SUB, D)                                              \
    ATTR INLINE void P##_##NAME(KT k, const float *qh, int r, VT *t) { /* lanes r and r + D */         \
        VT a[HT], b[HT];                                                                               \
        P##_##SUB(k, qh, r, a);                                                                        \
        P##_##SUB(k, qh, r + D, b);                                                                    \
        _Pragma("GCC unroll 8") for (int h = 0; h < HT; h++) t[h] = ADD(a[h], b[h]);                   \
    }
#define LANE_TREE(ATTR, VT, ADD, MUL, STOREU, KT, P, HT)                                               \
    LANE_FOLD(ATTR, VT, ADD, KT, P, HT, pair, lane, 8)                                                 \
    LANE_FOLD(ATTR, VT, ADD, KT, P, HT, quad, pair, 4)                                                 \
    LANE_FOLD(ATTR, VT, ADD, KT, P, HT, half, quad, 2)                                                 \
    ATTR INLINE void P##_tile(KT k, const float *qh, VT scale, float *out, int32_t stride) {           \
        VT a[HT], b[HT];                                                                               \
        P##_half(k, qh, 0, a);                                                                         \
        P##_half(k, qh, 1, b);                                                                         \
        _Pragma("GCC unroll 8") for (int h = 0; h < HT; h++)                                           \
            STOREU(out + (size_t)h * stride, MUL(ADD(a[h], b[h]), scale));                             \
    }

/* ---- AVX-512 ---- */

/* Query heads whose queries the AVX-512 path rounds to F16 together, once per call (their
 * scores then go four heads at a time, QK_TILES). */
#define QK_HEADS_512 16

#define TGT __attribute__((target("avx2,fma,f16c,avx512f,avx512vl")))
#define INLINE static inline __attribute__((always_inline))

/* 16 F16 values of the cache as floats (exact). */
TGT INLINE __m512 load_h16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

/* Scores of HT query heads against the 16 keys of one K tile (kvcache.h: element i of the
 * 16 keys is the vector at kt + 16 * i), all 16 keys at once, one per vector lane, folded
 * by LANE_TREE. qh: the heads' queries rounded to F16 (HD floats each). Against the row
 * layout, which summed each key's 16 lanes in one vector and then folded sixteen keys'
 * vectors into one by shuffles (45 operations a head and tile, beside 64 FMAs), the fold
 * takes 15 additions; BENCHMARKS.md, forty-eighth session. */
#define QK_TILE(NV, HT)                                                                                \
    TGT INLINE void qk##NV##_##HT##_lane(const uint16_t *kt, const float *qh, int r, __m512 *s) {      \
        _Pragma("GCC unroll 8") for (int h = 0; h < HT; h++) s[h] = _mm512_setzero_ps();               \
        _Pragma("GCC unroll 8") for (int c = 0; c < NV; c++) {                                         \
            const __m512 kv = load_h16(kt + 16 * (16 * c + r));                                        \
            _Pragma("GCC unroll 8") for (int h = 0; h < HT; h++)                                       \
                s[h] = _mm512_fmadd_ps(_mm512_set1_ps(qh[h * 16 * NV + 16 * c + r]), kv, s[h]);        \
        }                                                                                              \
    }                                                                                                  \
    LANE_TREE(TGT, __m512, _mm512_add_ps, _mm512_mul_ps, _mm512_storeu_ps, const uint16_t *, qk##NV##_##HT, HT)

/* The scores of heads hn heads (qh, F16-rounded) against one K tile: four heads a call
 * (each key vector converted once for them), then two, then one. */
#define QK_TILES(NV)                                                                                   \
    QK_TILE(NV, 4)                                                                                     \
    QK_TILE(NV, 2)                                                                                     \
    QK_TILE(NV, 1)                                                                                     \
    TGT INLINE void qk_heads_##NV(const uint16_t *kt, const float *qh, int32_t hn, __m512 scale, float *out, \
                                  int32_t stride) {                                                    \
        int32_t g = 0;                                                                                 \
        for (; g + 4 <= hn; g += 4) qk##NV##_4_tile(kt, qh + (size_t)g * 16 * NV, scale, out + (size_t)g * stride, stride); \
        if (g + 2 <= hn) qk##NV##_2_tile(kt, qh + (size_t)g * 16 * NV, scale, out + (size_t)g * stride, stride), g += 2; \
        if (g < hn) qk##NV##_1_tile(kt, qh + (size_t)g * 16 * NV, scale, out + (size_t)g * stride, stride); \
    }

/* out rows h < hc (HD floats each) = sum over keys t of p[h * n_pad + t] * V row t in the
 * statement's order: lane t % 16 sums its keys in order, then tokd_reduce16's tree. One
 * pass per lane keeps a head tile's accumulators in registers (hc is the constant HC in
 * every call: with a run-time count they lived on the stack); the 16 lane sums go to
 * `part` and fold at the end. Every V row is still read once. */
#define PV(NV)                                                                                         \
    TGT INLINE void pv_##NV(const tokd_kv *kv, const int32_t *blocks, int32_t layer, int32_t kvh,      \
                            int32_t n_keys, const float *p, int32_t n_pad, const int hc, float *out) { \
        enum { HD = 16 * NV, HC = 16 / NV };                                                           \
        _Alignas(64) float part[16][HC * HD];                                                          \
        pv_walk w;                                                                                     \
        for (pv_walk_start(&w, kv, blocks, layer, kvh, HD, n_keys); w.k0 < n_keys;                     \
             pv_walk_next(&w, kv, blocks, layer, kvh, HD, n_keys)) {                                   \
        const int32_t k0 = w.k0, nk = w.nk, n_next = w.n_next;                                         \
        const uint16_t *const *rows = w.rows, *const *next = w.next;                                   \
        for (int lane = 0; lane < 16; lane++) {                                                        \
            prefetch_lane_rows(next, n_next, lane, 0, HD * sizeof(uint16_t));                          \
            __m512 acc[HC][NV];                                                                        \
            _Pragma("GCC unroll 16") for (int h = 0; h < HC; h++)                                      \
                _Pragma("GCC unroll 8") for (int c = 0; c < NV; c++)                                   \
                    acc[h][c] = k0 && h < hc ? _mm512_load_ps(&part[lane][h * HD + 16 * c]) : _mm512_setzero_ps(); \
            for (int32_t i = lane; i < nk; i += 16) {                                                  \
                __m512 vv[NV];                                                                         \
                _Pragma("GCC unroll 8") for (int c = 0; c < NV; c++) vv[c] = load_h16(rows[i] + 16 * c); \
                _Pragma("GCC unroll 16") for (int h = 0; h < hc; h++) {                                \
                    const __m512 pb = _mm512_set1_ps(p[(size_t)h * n_pad + k0 + i]);                   \
                    _Pragma("GCC unroll 8") for (int c = 0; c < NV; c++) acc[h][c] = _mm512_fmadd_ps(pb, vv[c], acc[h][c]); \
                }                                                                                      \
            }                                                                                          \
            _Pragma("GCC unroll 16") for (int h = 0; h < hc; h++)                                      \
                _Pragma("GCC unroll 8") for (int c = 0; c < NV; c++) _mm512_store_ps(&part[lane][h * HD + 16 * c], acc[h][c]); \
        }                                                                                              \
        }                                                                                              \
        for (int i = 0; i < hc * HD; i += 16) {                                                        \
            __m512 r8[8], r4[4];                                                                       \
            _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++)                                        \
                r8[l] = _mm512_add_ps(_mm512_load_ps(&part[l][i]), _mm512_load_ps(&part[l + 8][i]));  \
            _Pragma("GCC unroll 4") for (int l = 0; l < 4; l++) r4[l] = _mm512_add_ps(r8[l], r8[l + 4]); \
            _mm512_storeu_ps(out + i, _mm512_add_ps(_mm512_add_ps(r4[0], r4[2]), _mm512_add_ps(r4[1], r4[3]))); \
        }                                                                                              \
    }

/* The 16 lanes of v folded as tokd_reduce16. */
TGT INLINE float reduce16_512(__m512 v) {
    const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

#define ATTN_512(NV)                                                                                   \
    QK_TILES(NV)                                                                                       \
    PV(NV)                                                                                             \
    TGT static void attn_512_##NV(const tokd_kv *kv, const int32_t *blocks, int32_t layer, int32_t kvh,  \
                                  int32_t n_keys, const float *q, int32_t group, float *out, float *scratch) { \
        enum { HD = 16 * NV, HC = 16 / NV };                                                           \
        const int32_t bs = kv->block_size;                                                             \
        const int32_t n_pad = (n_keys + 15) & ~15;                                                     \
        const __m512 scale = _mm512_set1_ps(1.0f / sqrtf((float)HD));                                  \
        _Alignas(64) float qh[QK_HEADS_512 * HD];                                                      \
        for (int32_t g0 = 0; g0 < group; g0 += QK_HEADS_512) { /* the queries as F16 once */           \
            const int32_t hn = group - g0 < QK_HEADS_512 ? group - g0 : QK_HEADS_512;                  \
            for (int32_t i = 0; i < hn * HD; i += 16)                                                  \
                _mm512_store_ps(qh + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(q + (size_t)g0 * HD + i), \
                                                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))); \
            int32_t page = 0, slot = 0; /* t0's, walked: no division per block */                      \
            for (int32_t t0 = 0; t0 < n_keys; t0 += 16) { /* scores, a K tile of 16 keys at a time */   \
                const uint16_t *kt = tokd_kv_k_page(kv, blocks[page], layer, kvh) + (size_t)slot * HD; \
                if (t0 + PREFETCH_KEYS < n_keys) prefetch_k_block(kv, blocks, layer, kvh, HD, t0 + PREFETCH_KEYS, 16); \
                if ((slot += 16) == bs) slot = 0, page++;                                              \
                qk_heads_##NV(kt, qh, hn, scale, scratch + (size_t)g0 * n_pad + t0, n_pad);            \
            }                                                                                          \
        }                                                                                              \
        for (int32_t g = 0; g < group; g++) {                                                          \
            float *s = scratch + (size_t)g * n_pad;                                                    \
            __m512 mv = _mm512_set1_ps(-INFINITY);                                                     \
            for (int32_t t0 = 0; t0 < n_keys; t0 += 16) {                                              \
                __mmask16 valid = n_keys - t0 >= 16 ? 0xFFFF : (__mmask16)((1u << (n_keys - t0)) - 1);  \
                mv = _mm512_mask_max_ps(mv, valid, mv, _mm512_loadu_ps(s + t0));                       \
            }                                                                                          \
            const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mv));                                 \
            double sum = 0.0;                                                                          \
            for (int32_t t0 = 0; t0 < n_keys; t0 += 16) {                                              \
                __mmask16 valid = n_keys - t0 >= 16 ? 0xFFFF : (__mmask16)((1u << (n_keys - t0)) - 1);  \
                __m512 e = _mm512_maskz_mov_ps(valid, tokd_exp16(_mm512_sub_ps(_mm512_loadu_ps(s + t0), m))); \
                _mm512_storeu_ps(s + t0, e);                                                           \
                sum += (double)reduce16_512(e);                                                        \
            }                                                                                          \
            const __m512 iv = _mm512_set1_ps((float)(1.0 / sum));                                      \
            for (int32_t t0 = 0; t0 < n_keys; t0 += 16) {                                              \
                __m512 pr = _mm512_mul_ps(_mm512_loadu_ps(s + t0), iv);                                \
                _mm512_storeu_ps(s + t0, _mm512_cvtph_ps(_mm512_cvtps_ph(pr, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))); \
            }                                                                                          \
        }                                                                                              \
        for (int32_t g0 = 0; g0 < group; g0 += HC) {                                                   \
            const int hc = group - g0 < HC ? group - g0 : HC;                                          \
            const float *p = scratch + (size_t)g0 * n_pad;                                             \
            float *o = out + (size_t)g0 * HD;                                                          \
            if (hc == HC) pv_##NV(kv, blocks, layer, kvh, n_keys, p, n_pad, HC, o);                    \
            else pv_##NV(kv, blocks, layer, kvh, n_keys, p, n_pad, hc, o);                             \
        }                                                                                              \
    }

ATTN_512(2)
ATTN_512(4)
ATTN_512(8)

/* ---- AVX2 + FMA + F16C: the same arithmetic 8 lanes wide ---- */

#define TGT256 __attribute__((target("avx2,fma,f16c")))

/* 8 F16 values of the cache as floats (exact). */
TGT256 INLINE __m256 load_h8(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

/* Scores of HT query heads against 8 keys, as QK_TILE's 16 (same lane sums, same tree),
 * from the 8 keys' elements converted to F32 beforehand: kf + 8 * i holds element i of the
 * 8 keys. Two heads a call share each loaded vector (with 16 registers, two heads' live
 * sums of the depth-first tree fit; four do not). NV counts 8-float vectors of a head. */
#define QK8_TILE(NV, HT)                                                                               \
    TGT256 INLINE void qk8_##NV##_##HT##_lane(const float *kf, const float *qh, int r, __m256 *s) {    \
        _Pragma("GCC unroll 8") for (int h = 0; h < HT; h++) s[h] = _mm256_setzero_ps();               \
        _Pragma("GCC unroll 8") for (int c = 0; c < NV / 2; c++) {                                     \
            const __m256 kv = _mm256_load_ps(kf + 8 * (16 * c + r));                                   \
            _Pragma("GCC unroll 8") for (int h = 0; h < HT; h++)                                       \
                s[h] = _mm256_fmadd_ps(_mm256_broadcast_ss(qh + h * 8 * NV + 16 * c + r), kv, s[h]);   \
        }                                                                                              \
    }                                                                                                  \
    LANE_TREE(TGT256, __m256, _mm256_add_ps, _mm256_mul_ps, _mm256_storeu_ps, const float *, qk8_##NV##_##HT, HT)

#define QK8_TILES(NV)                                                                                  \
    QK8_TILE(NV, 2)                                                                                    \
    QK8_TILE(NV, 1)                                                                                    \
    TGT256 INLINE void qk8_heads_##NV(const float *kf, const float *qh, int32_t hn, __m256 scale, float *out, \
                                      int32_t stride) {                                                \
        int32_t g = 0;                                                                                 \
        for (; g + 2 <= hn; g += 2) qk8_##NV##_2_tile(kf, qh + (size_t)g * 8 * NV, scale, out + (size_t)g * stride, stride); \
        if (g < hn) qk8_##NV##_1_tile(kf, qh + (size_t)g * 8 * NV, scale, out + (size_t)g * stride, stride); \
    }

/* Scores of HT query heads against the 16 keys of a K tile, as QK_TILE's (the same lane
 * sums, the same tree), from the tile's two halves converted to F32 beforehand (k0 the
 * keys 0-7, k1 the keys 8-15; kX + 8 * i holds element i of its 8 keys). Each broadcast
 * query value goes into both halves' sums, and each lane's 2 * HT sums are stored and
 * folded after all 16 lanes (tokd_reduce16's tree): 2 + HT loads for 2 * HT FMAs, where
 * QK8_TILE's depth-first tree takes 1 + HT for HT. */
#define QK16_TILE(NV, HT)                                                                              \
    TGT256 INLINE void qk16_##NV##_##HT(const float *k0, const float *k1, const float *qh, __m256 scale, \
                                        float *out, int32_t stride) {                                  \
        _Alignas(32) float lanes[16][2 * HT][8];                                                       \
        for (int r = 0; r < 16; r++) {                                                                 \
            __m256 s[2 * HT];                                                                          \
            _Pragma("GCC unroll 8") for (int j = 0; j < 2 * HT; j++) s[j] = _mm256_setzero_ps();       \
            _Pragma("GCC unroll 8") for (int c = 0; c < NV / 2; c++) {                                 \
                const __m256 a = _mm256_load_ps(k0 + 8 * (16 * c + r)), b = _mm256_load_ps(k1 + 8 * (16 * c + r)); \
                _Pragma("GCC unroll 8") for (int h = 0; h < HT; h++) {                                 \
                    const __m256 qv = _mm256_broadcast_ss(qh + h * 8 * NV + 16 * c + r);              \
                    s[2 * h] = _mm256_fmadd_ps(qv, a, s[2 * h]);                                       \
                    s[2 * h + 1] = _mm256_fmadd_ps(qv, b, s[2 * h + 1]);                               \
                }                                                                                      \
            }                                                                                          \
            _Pragma("GCC unroll 8") for (int j = 0; j < 2 * HT; j++) _mm256_store_ps(lanes[r][j], s[j]); \
        }                                                                                              \
        for (int j = 0; j < 2 * HT; j++) {                                                             \
            __m256 p8[8], p4[4];                                                                       \
            _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++)                                        \
                p8[l] = _mm256_add_ps(_mm256_load_ps(lanes[l][j]), _mm256_load_ps(lanes[l + 8][j]));   \
            _Pragma("GCC unroll 4") for (int l = 0; l < 4; l++) p4[l] = _mm256_add_ps(p8[l], p8[l + 4]); \
            const __m256 t = _mm256_add_ps(_mm256_add_ps(p4[0], p4[2]), _mm256_add_ps(p4[1], p4[3])); \
            _mm256_storeu_ps(out + (size_t)(j / 2) * stride + 8 * (j % 2), _mm256_mul_ps(t, scale));   \
        }                                                                                              \
    }
#define QK16_TILES(NV)                                                                                 \
    QK16_TILE(NV, 4)                                                                                   \
    QK16_TILE(NV, 2)                                                                                   \
    QK16_TILE(NV, 1)                                                                                   \
    TGT256 INLINE void qk16_heads_##NV(const float *k0, const float *k1, const float *qh, int32_t hn,   \
                                       __m256 scale, float *out, int32_t stride) {                     \
        int32_t g = 0;                                                                                 \
        for (; g + 4 <= hn; g += 4) qk16_##NV##_4(k0, k1, qh + (size_t)g * 8 * NV, scale, out + (size_t)g * stride, stride); \
        if (g + 2 <= hn) qk16_##NV##_2(k0, k1, qh + (size_t)g * 8 * NV, scale, out + (size_t)g * stride, stride), g += 2; \
        if (g < hn) qk16_##NV##_1(k0, k1, qh + (size_t)g * 8 * NV, scale, out + (size_t)g * stride, stride); \
    }

/* Columns [8 * c0, 8 * (c0 + NVC)) of out rows h < hc (HD floats each) = sum over keys t
 * of p[h * n_pad + t] * V row t in the statement's order, as pv_NV: one pass per lane
 * t % 16, the lane sums folded at the end. With 16 vector registers a tile of HC heads
 * by NVC vectors keeps its accumulators in registers (hc a constant in every call, as in
 * pv_NV); wider heads take several column tiles. A key's HC probabilities are broadcast
 * first and its V vectors converted one at a time: 12 sums, 3 broadcasts and 1 vector
 * fill the 16 registers. Converting the 4 vectors first (17 live) left one sum on the
 * stack, a store and a reload every key; the change (sixty-seventh session) took one
 * call of 8 heads at 2048 keys, cold, from 138-143 to 124-126 us (/tmp/s67/attb.c,
 * medians of 15 sweeps over 22 layers x 4 KV heads, two alternated runs each). */
#define PV256(NV, NVC, HC)                                                                             \
    TGT256 INLINE void pv256_##NV(const tokd_kv *kv, const int32_t *blocks, int32_t layer, int32_t kvh, \
                                  int32_t n_keys, const float *p, int32_t n_pad, const int hc, int c0, \
                                  float *out) {                                                        \
        enum { HD = 8 * NV, W = 8 * NVC };                                                             \
        _Alignas(32) float part[16][HC * W];                                                           \
        pv_walk w;                                                                                     \
        for (pv_walk_start(&w, kv, blocks, layer, kvh, HD, n_keys); w.k0 < n_keys;                     \
             pv_walk_next(&w, kv, blocks, layer, kvh, HD, n_keys)) {                                   \
        const int32_t k0 = w.k0, nk = w.nk, n_next = w.n_next;                                         \
        const uint16_t *const *rows = w.rows, *const *next = w.next;                                   \
        for (int lane = 0; lane < 16; lane++) {                                                        \
            prefetch_lane_rows(next, n_next, lane, 8 * (size_t)c0, W * sizeof(uint16_t));              \
            __m256 acc[HC][NVC];                                                                       \
            _Pragma("GCC unroll 8") for (int h = 0; h < HC; h++)                                       \
                _Pragma("GCC unroll 8") for (int c = 0; c < NVC; c++)                                  \
                    acc[h][c] = k0 && h < hc ? _mm256_load_ps(&part[lane][h * W + 8 * c]) : _mm256_setzero_ps(); \
            for (int32_t i = lane; i < nk; i += 16) {                                                  \
                const uint16_t *v = rows[i] + 8 * c0;                                                  \
                __m256 pb[HC];                                                                         \
                _Pragma("GCC unroll 8") for (int h = 0; h < hc; h++) pb[h] = _mm256_broadcast_ss(p + (size_t)h * n_pad + k0 + i); \
                _Pragma("GCC unroll 8") for (int c = 0; c < NVC; c++) {                                \
                    const __m256 vc = load_h8(v + 8 * c);                                              \
                    _Pragma("GCC unroll 8") for (int h = 0; h < hc; h++) acc[h][c] = _mm256_fmadd_ps(pb[h], vc, acc[h][c]); \
                }                                                                                      \
            }                                                                                          \
            _Pragma("GCC unroll 8") for (int h = 0; h < hc; h++)                                       \
                _Pragma("GCC unroll 8") for (int c = 0; c < NVC; c++) _mm256_store_ps(&part[lane][h * W + 8 * c], acc[h][c]); \
        }                                                                                              \
        }                                                                                              \
        for (int h = 0; h < hc; h++)                                                                   \
            for (int i = 0; i < W; i += 8) {                                                           \
                __m256 r8[8], r4[4];                                                                   \
                _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++)                                    \
                    r8[l] = _mm256_add_ps(_mm256_load_ps(&part[l][h * W + i]), _mm256_load_ps(&part[l + 8][h * W + i])); \
                _Pragma("GCC unroll 4") for (int l = 0; l < 4; l++) r4[l] = _mm256_add_ps(r8[l], r8[l + 4]); \
                _mm256_storeu_ps(out + (size_t)h * HD + 8 * c0 + i,                                    \
                                 _mm256_add_ps(_mm256_add_ps(r4[0], r4[2]), _mm256_add_ps(r4[1], r4[3]))); \
            }                                                                                          \
    }

/* Keys t0 .. t0+15 as two vectors (lanes 0-7, 8-15) folded as tokd_reduce16. */
TGT256 INLINE float reduce16_256(__m256 lo, __m256 hi) {
    const __m256 a = _mm256_add_ps(lo, hi);
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

/* Keys t0 .. t0+7 that exist (t < n_keys): all-ones lanes. */
TGT256 INLINE __m256 valid8(int32_t n_keys, int32_t t0) {
    const int32_t n = n_keys - t0 < 8 ? n_keys - t0 : 8;
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

/* The running maxima mvs of hn heads after each head's 8 scores at sc + g * stride (keys
 * t0 .. t0+7; those past n_keys left out). max(sc, m) is sc > m ? sc : m, the statement's
 * update (NaN scores skipped). */
TGT256 INLINE void max8_update(__m256 *mvs, int32_t hn, const float *sc, int32_t stride, int32_t n_keys, int32_t t0) {
    const __m256 valid = valid8(n_keys, t0);
    for (int32_t g = 0; g < hn; g++)
        mvs[g] = _mm256_blendv_ps(mvs[g], _mm256_max_ps(_mm256_loadu_ps(sc + (size_t)g * stride), mvs[g]), valid);
}

/* Query head q (nv vectors) rounded to F16, as the statement multiplies it, into qh. */
TGT256 INLINE void qk_query_256(const float *q, int nv, float *qh) {
    for (int c = 0; c < nv; c++)
        _mm256_store_ps(qh + 8 * c, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(q + 8 * c), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
}
/* Query heads whose scores the AVX2 path computes together (a larger group goes in batches). */
#define QK_HEADS 16

/* attn_512_NV 8 keys at a time (a page is a multiple of 8 positions). Keys past n_keys
 * in the last group of 8 are computed from whatever the page holds there and then left
 * out: of the max by a blend, of the sum by zeroing their exponentials (adding +0 to a
 * lane the statement never touches changes nothing), of P x V by its loop bound. The
 * double sum keeps the statement's 16 lanes as four vectors: keys t % 16 in 0-3, 4-7
 * (a group of 8 starting at a multiple of 16), 8-11, 12-15 (the next group). */
#define ATTN_256(NV, NVC, HC)                                                                          \
    QK8_TILES(NV)                                                                                      \
    QK16_TILES(NV)                                                                                     \
    PV256(NV, NVC, HC)                                                                                 \
    TGT256 static void attn_256_##NV(const tokd_kv *kv, const int32_t *blocks, int32_t layer, int32_t kvh, \
                                     int32_t n_keys, const float *q, int32_t group, float *out, float *scratch) { \
        enum { HD = 8 * NV };                                                                          \
        const int32_t bs = kv->block_size;                                                             \
        const int32_t n_pad = (n_keys + 15) & ~15, n_pad8 = (n_keys + 7) & ~7;                         \
        const __m256 scale = _mm256_set1_ps(1.0f / sqrtf((float)HD));                                  \
        /* QK_HEADS heads at a time: each group of 8 keys converted to F32 once for all of them */   \
        for (int32_t g0 = 0; g0 < group; g0 += QK_HEADS) {                                             \
            const int32_t hn = group - g0 < QK_HEADS ? group - g0 : QK_HEADS;                          \
            __m256 mvs[QK_HEADS];                                                                      \
            _Alignas(32) float kf[8 * HD], qh[QK_HEADS * HD];                                          \
            for (int32_t g = 0; g < hn; g++) {                                                         \
                qk_query_256(q + (size_t)(g0 + g) * HD, NV, qh + (size_t)g * HD);                      \
                mvs[g] = _mm256_set1_ps(-INFINITY);                                                    \
            }                                                                                          \
            int32_t page = 0, slot = 0; /* t0's, walked: no division per block */                      \
            if (bs % 16 == 0) { /* every K tile 16 keys wide: both halves a pass (QK16_TILE) */        \
                _Alignas(32) float kf1[8 * HD];                                                        \
                for (int32_t t0 = 0; t0 < n_keys; t0 += 16) {                                          \
                    const uint16_t *k = tokd_kv_k_page(kv, blocks[page], layer, kvh) + (size_t)slot * HD; \
                    if (t0 + PREFETCH_KEYS < n_keys) prefetch_k_block(kv, blocks, layer, kvh, HD, t0 + PREFETCH_KEYS, 16); \
                    if ((slot += 16) == bs) slot = 0, page++;                                          \
                    _Pragma("GCC unroll 8") for (int i = 0; i < HD; i++) {                             \
                        _mm256_store_ps(kf + 8 * i, load_h8(k + (size_t)i * 16));                      \
                        _mm256_store_ps(kf1 + 8 * i, load_h8(k + (size_t)i * 16 + 8));                 \
                    }                                                                                  \
                    float *sc0 = scratch + (size_t)g0 * n_pad + t0;                                    \
                    qk16_heads_##NV(kf, kf1, qh, hn, scale, sc0, n_pad);                               \
                    max8_update(mvs, hn, sc0, n_pad, n_keys, t0);                                      \
                    max8_update(mvs, hn, sc0 + 8, n_pad, n_keys, t0 + 8);                              \
                }                                                                                      \
            } else /* a page of 8 * odd slots: 8 keys a pass (QK8_TILE) */                             \
            for (int32_t t0 = 0; t0 < n_keys; t0 += 8) {                                               \
                /* the 8 keys' K tile (the last of a page of 8 * odd slots is 8 wide) */                \
                const int32_t tile = slot & ~15, w = bs - tile < 16 ? bs - tile : 16;                  \
                const uint16_t *k = tokd_kv_k_page(kv, blocks[page], layer, kvh) + (size_t)tile * HD + (slot - tile); \
                if (t0 + PREFETCH_KEYS < n_keys) prefetch_k_block(kv, blocks, layer, kvh, HD, t0 + PREFETCH_KEYS, 8); \
                if ((slot += 8) == bs) slot = 0, page++;                                               \
                _Pragma("GCC unroll 8") for (int i = 0; i < HD; i++) _mm256_store_ps(kf + 8 * i, load_h8(k + (size_t)i * w)); \
                float *sc0 = scratch + (size_t)g0 * n_pad + t0;                                        \
                qk8_heads_##NV(kf, qh, hn, scale, sc0, n_pad);                                         \
                max8_update(mvs, hn, sc0, n_pad, n_keys, t0);                                          \
            }                                                                                          \
            for (int32_t g = 0; g < hn; g++) {                                                         \
                float *s = scratch + (size_t)(g0 + g) * n_pad;                                         \
                const __m256 mv = mvs[g];                                                              \
                if (n_pad8 < n_pad) _mm256_storeu_ps(s + n_pad8, _mm256_setzero_ps());                 \
                __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));      \
                m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));                                            \
                m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));                                              \
                const __m256 m = _mm256_broadcastss_ps(m4);                                            \
                double sum = 0.0;                                                                      \
                for (int32_t t0 = 0; t0 < n_keys; t0 += 16) {                                          \
                    __m256 e0 = _mm256_and_ps(valid8(n_keys, t0),                                      \
                                              tokd_exp8(_mm256_sub_ps(_mm256_loadu_ps(s + t0), m)));   \
                    __m256 e1 = _mm256_and_ps(valid8(n_keys, t0 + 8),                                  \
                                              tokd_exp8(_mm256_sub_ps(_mm256_loadu_ps(s + t0 + 8), m))); \
                    _mm256_storeu_ps(s + t0, e0);                                                      \
                    _mm256_storeu_ps(s + t0 + 8, e1);                                                  \
                    sum += (double)reduce16_256(e0, e1);                                               \
                }                                                                                      \
                const __m256 iv = _mm256_set1_ps((float)(1.0 / sum));                                  \
                for (int32_t t0 = 0; t0 < n_keys; t0 += 8) {                                           \
                    __m256 pr = _mm256_mul_ps(_mm256_loadu_ps(s + t0), iv);                            \
                    _mm256_storeu_ps(s + t0, _mm256_cvtph_ps(_mm256_cvtps_ph(pr, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))); \
                }                                                                                      \
            }                                                                                          \
        }                                                                                              \
        for (int32_t g0 = 0; g0 < group; g0 += HC) {                                                   \
            const int hc = group - g0 < HC ? group - g0 : HC;                                          \
            const float *p = scratch + (size_t)g0 * n_pad;                                             \
            float *o = out + (size_t)g0 * HD;                                                          \
            for (int c0 = 0; c0 < NV; c0 += NVC) { /* the head count a constant in every call */       \
                if (hc == HC) pv256_##NV(kv, blocks, layer, kvh, n_keys, p, n_pad, HC, c0, o);         \
                else if (hc == 1) pv256_##NV(kv, blocks, layer, kvh, n_keys, p, n_pad, 1, c0, o);      \
                else if (hc == 2) pv256_##NV(kv, blocks, layer, kvh, n_keys, p, n_pad, 2, c0, o);      \
                else pv256_##NV(kv, blocks, layer, kvh, n_keys, p, n_pad, hc, c0, o);                  \
            }                                                                                          \
        }                                                                                              \
    }

ATTN_256(4, 4, 3)
ATTN_256(8, 4, 3)
ATTN_256(16, 4, 3)

/* A kernel for one head size; each SIMD path has one for 32, 64 and 128. */
typedef void attn_kernel(const tokd_kv *kv, const int32_t *blocks, int32_t layer, int32_t kvh, int32_t n_keys,
                         const float *q, int32_t group, float *out, float *scratch);
static attn_kernel *for_head_dim(int32_t hd, attn_kernel *hd32, attn_kernel *hd64, attn_kernel *hd128) {
    return hd == 32 ? hd32 : hd == 64 ? hd64 : hd == 128 ? hd128 : NULL;
}

/* 0 when the AVX2 path took the shape, -1 when it does not (the caller checked the CPU). */
static int attn_256(const tokd_kv *kv, const int32_t *blocks, int32_t layer, int32_t kvh, int32_t n_keys,
                    const float *q, int32_t group, int32_t hd, float *out, float *scratch) {
    attn_kernel *kernel = for_head_dim(hd, attn_256_4, attn_256_8, attn_256_16);
    if (kv->block_size % 8 != 0 || group > 256 || n_keys <= 0 || !kernel) return -1;
    kernel(kv, blocks, layer, kvh, n_keys, q, group, out, scratch);
    return 0;
}

int tokd_attention_avx2(const tokd_kv *kv, const int32_t *blocks, int32_t layer, int32_t kvh, int32_t n_keys,
                        const float *q, int32_t group, int32_t hd, float *out, float *scratch) {
    if (!tokd_cpu_avx2()) return -1;
    return attn_256(kv, blocks, layer, kvh, n_keys, q, group, hd, out, scratch);
}

/* The first burst (see "prefetching" above): the kernel's code and the K and V lines of
 * the first PREFETCH_KEYS keys at once, into L2, so that their misses overlap. One KV
 * head with 8 query heads at 112 keys, caches flushed, took 13-17 us against 3 us warm;
 * with the burst 10.4 and 12.0; in TinyLlama Q4_0 decode steps, alternated with steps
 * without it in one process, the attention stage ran faster in 8 of 9 runs (by 0.2-2.4
 * us a layer, of 8-13 us). */
#define PREFETCH_CODE 8192 /* bytes from the kernel's entry: attn_512_8, the largest, is 7.4 KB */
static void prefetch_call(attn_kernel *kernel, const tokd_kv *kv, const int32_t *blocks, int32_t layer, int32_t kvh,
                          int32_t n_keys, int32_t hd) {
    const char *code = (const char *)(uintptr_t)kernel;
    for (int o = 0; o < PREFETCH_CODE; o += 64) __builtin_prefetch(code + o, 0, 2);
    const int32_t bs = kv->block_size, n = n_keys < PREFETCH_KEYS ? n_keys : PREFETCH_KEYS;
    for (int32_t t0 = 0; t0 < n; t0 += bs) {
        const size_t bytes = (size_t)(n - t0 < bs ? n - t0 : bs) * (size_t)hd * sizeof(uint16_t);
        const char *k = (const char *)tokd_kv_k_page(kv, blocks[t0 / bs], layer, kvh);
        const char *v = (const char *)tokd_kv_v_rows(kv, blocks[t0 / bs], layer, kvh);
        for (size_t o = 0; o < bytes; o += 64) {
            __builtin_prefetch(k + o, 0, 2);
            __builtin_prefetch(v + o, 0, 2);
        }
    }
}

void tokd_attention(const tokd_kv *kv, const int32_t *blocks, int32_t layer, int32_t kvh, int32_t n_keys,
                    const float *q, int32_t group, int32_t hd, float *out, float *scratch) {
    attn_kernel *k512 = for_head_dim(hd, attn_512_2, attn_512_4, attn_512_8);
    if (tokd_use_f32_avx512() && kv->block_size % 16 == 0 && group <= 256 && n_keys > 0 && k512) {
        prefetch_call(k512, kv, blocks, layer, kvh, n_keys, hd);
        k512(kv, blocks, layer, kvh, n_keys, q, group, out, scratch);
        return;
    }
    if (tokd_use_f32_avx2() && attn_256(kv, blocks, layer, kvh, n_keys, q, group, hd, out, scratch) == 0) return;
    tokd_attention_ref(kv, blocks, layer, kvh, n_keys, q, group, hd, out, scratch);
}
