/* bf16_rows.c — BF16 weight rows against BF16 activation rows, on every path in the order
 * of ggml's AVX512-BF16 products.
 *
 * Why this order. llama.cpp converts the activations of BF16 weights to BF16 (its
 * vec_dot_type for the row is BF16) and, built for a CPU with AVX512-BF16, sums each
 * output as one chain of vdpbf16ps (llamafile's tinyBLAS, 32 elements a step), then
 * folds the 16 lanes with _mm512_reduce_add_ps. ../shared/golden was made that way: with
 * this order tokd's BF16 logits equal the golden ones bit for bit (test_golden), where
 * F32 activations and tokd's 32-lane float order left a mean KL of 2e-6.
 *
 * The order. Lane l (of 16) takes, from every step of 32 elements, the product of
 * element 2l+1 and then that of element 2l, each added to the lane with one rounding to
 * nearest even (the product of two BF16 values is exact in F32). That is what vdpbf16ps
 * does on the hosts measured: 32 M random lanes against the instruction on AMD Zen 5
 * gave 0 differences for odd-then-even with one rounding per add, 3.4 M for even-then-
 * odd, 2.6 M for one rounding of the pair's sum. A row whose length is not a multiple of
 * 32 goes on with zero elements. The lane sums fold as GCC's _mm512_reduce_add_ps does
 * (tokd_reduce16, quants.h): lanes l and l+8, then l and l+4, then (0+2) + (1+3).
 *
 * The paths. The instruction where the CPU has it (avx512bf16); elsewhere each add is one
 * FMA of the two BF16 values widened to F32 (avx512, avx2: odd elements are the high
 * halves of the 32-bit lanes, even ones the low halves shifted up), which rounds once as
 * the instruction does; and the scalar statement. They give the same bits, except where a
 * value falls below 2^-126: the instruction reads such inputs as zero and flushes such
 * sums to zero (measured), the FMA forms and the statement do not. Activations come from
 * tokd_f32_to_bf16, which keeps them; weights and sums that small do not occur in models.
 *
 * Decode. Each output is one chain of dependent adds, a step of 32 elements each (about
 * 1.7 ns a vdpbf16ps on the Zen 5 host), so a core reading one row at a time streams at
 * most ~38 GB/s; that was enough here (TinyLlama shape, 2 threads: tg 84-92 % of the
 * bandwidth limit against 83-99 % for the F32-activation kernels before, alternated).
 * Four rows at once, four chains in flight, read as four streams 4 KB apart, were slower
 * (64-88 %), as decode's other streams found (matmul.c): the rows would need a layout
 * that interleaves them. Batched decode takes one to four activation rows per weight
 * row read (stream_rows), whose chains run side by side.
 *
 * The kernels are written once (BF16_KERNELS) over four operations each path supplies:
 * acc_T / zero (a row's 16 lane sums), wv_T / wload (32 weights ready for the steps),
 * step (the 32 elements' two adds into the lane sums, loading the activations), store. */
#include "kernels/bf16_rows.h"

#include <immintrin.h>
#include <string.h>

#include "kernels/packed.h"
#include "kernels/page_prime.h"
#include "kernels/quants.h"
#include "kernels/row_forms.h"
#include "util.h"

static inline float bf16_at(const uint8_t *p, int64_t i) {
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return tokd_bf16_to_f32(h);
}

void tokd_bf16_dot_ref(int64_t n, float *out, const void *w, const void *act) {
    const uint8_t *wp = w, *xp = act;
    float s[16] = {0};
    for (int64_t c = 0; c < n; c += 32)
        for (int l = 0; l < 16; l++)
            for (int h = 1; h >= 0; h--) { /* element 2l+1, then 2l */
                const int64_t i = c + 2 * l + h;
                s[l] += i < n ? bf16_at(wp, i) * bf16_at(xp, i) : 0.0f;
            }
    *out = tokd_reduce16(s);
}

/* ---- the paths' operations -------------------------------------------------------- */

#define TGT_avx2 __attribute__((target("avx2,fma,f16c")))
#define TGT_avx512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
#define TGT_avx512bf16 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512bf16")))

/* AVX-512 BF16: the instruction. */
typedef __m512 acc_avx512bf16;
typedef __m512i wv_avx512bf16;
TGT_avx512bf16 static inline __m512 zero_avx512bf16(void) { return _mm512_setzero_ps(); }
TGT_avx512bf16 static inline __m512i wload_avx512bf16(const uint16_t *w) { return _mm512_loadu_si512(w); }
TGT_avx512bf16 static inline __m512 step_avx512bf16(__m512 a, __m512i w, const uint16_t *x) {
    return _mm512_dpbf16_ps(a, (__m512bh)w, (__m512bh)_mm512_loadu_si512(x));
}
TGT_avx512bf16 static inline void store_avx512bf16(float s[16], __m512 a) { _mm512_storeu_ps(s, a); }

/* AVX-512 F: the same adds with FMA. */
typedef __m512 acc_avx512;
typedef struct {
    __m512 odd, even;
} wv_avx512;
TGT_avx512 static inline __m512 odd_avx512(__m512i v) {
    return _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)));
}
TGT_avx512 static inline __m512 even_avx512(__m512i v) { return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)); }
TGT_avx512 static inline __m512 zero_avx512(void) { return _mm512_setzero_ps(); }
TGT_avx512 static inline wv_avx512 wload_avx512(const uint16_t *w) {
    const __m512i v = _mm512_loadu_si512(w);
    return (wv_avx512){odd_avx512(v), even_avx512(v)};
}
TGT_avx512 static inline __m512 step_avx512(__m512 a, wv_avx512 w, const uint16_t *x) {
    const __m512i v = _mm512_loadu_si512(x);
    a = _mm512_fmadd_ps(w.odd, odd_avx512(v), a);
    return _mm512_fmadd_ps(w.even, even_avx512(v), a);
}
TGT_avx512 static inline void store_avx512(float s[16], __m512 a) { _mm512_storeu_ps(s, a); }

/* AVX2: lanes 0-7 and 8-15 in two vectors. */
typedef struct {
    __m256 lo, hi;
} acc_avx2;
typedef struct {
    __m256 odd_lo, even_lo, odd_hi, even_hi;
} wv_avx2;
TGT_avx2 static inline __m256 odd_avx2(__m256i v) {
    return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u)));
}
TGT_avx2 static inline __m256 even_avx2(__m256i v) { return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)); }
TGT_avx2 static inline acc_avx2 zero_avx2(void) { return (acc_avx2){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
TGT_avx2 static inline wv_avx2 wload_avx2(const uint16_t *w) {
    const __m256i lo = _mm256_loadu_si256((const __m256i *)w), hi = _mm256_loadu_si256((const __m256i *)(w + 16));
    return (wv_avx2){odd_avx2(lo), even_avx2(lo), odd_avx2(hi), even_avx2(hi)};
}
TGT_avx2 static inline acc_avx2 step_avx2(acc_avx2 a, wv_avx2 w, const uint16_t *x) {
    const __m256i lo = _mm256_loadu_si256((const __m256i *)x), hi = _mm256_loadu_si256((const __m256i *)(x + 16));
    a.lo = _mm256_fmadd_ps(w.odd_lo, odd_avx2(lo), a.lo);
    a.lo = _mm256_fmadd_ps(w.even_lo, even_avx2(lo), a.lo);
    a.hi = _mm256_fmadd_ps(w.odd_hi, odd_avx2(hi), a.hi);
    a.hi = _mm256_fmadd_ps(w.even_hi, even_avx2(hi), a.hi);
    return a;
}
TGT_avx2 static inline void store_avx2(float s[16], acc_avx2 a) {
    _mm256_storeu_ps(s, a.lo);
    _mm256_storeu_ps(s + 8, a.hi);
}

/* Decode's prefetches for the 64 weight bytes at p (the float rows' stream forms in
 * dot_avx512.c and dot_avx2.c, whose distances these are). */
static inline __attribute__((always_inline)) void ahead_avx512(const uint16_t *p) {
    tokd_page_prime((const char *)p + TOKD_PK_DECODE_PRIME_SKIP, 64);
    tokd_pk_prefetchnta_here((const char *)p + TOKD_PK_DECODE_LINE_PF);
}
#define ahead_avx512bf16 ahead_avx512
static inline __attribute__((always_inline)) void ahead_avx2(const uint16_t *p) {
    tokd_page_prime(p, 64);
    tokd_pk_prefetch_here((const char *)p + TOKD_PK_AVX2_DECODE_LINE_PF);
}

/* The last n < 32 elements at p, padded with zeros. */
static inline const uint16_t *padded(const void *p, int64_t n, uint16_t buf[32]) {
    memset(buf, 0, 64);
    memcpy(buf, p, (size_t)n * 2);
    return buf;
}

/* ---- the kernels, once for every path --------------------------------------------- */

#define ROW(act, r, as) ((const uint16_t *)((const char *)(act) + (size_t)(r) * (as)))

/* One weight row against R = 1..4 activation rows (as bytes apart), each weight step loaded
 * and widened once for the R; with stream set, decode's prefetches ahead of w. Every
 * form below is this with constants, unrolled, so the lane sums stay in registers. */
#define BF16_KERNELS(ISA)                                                                                \
    TGT_##ISA static inline __attribute__((always_inline)) void rows_##ISA(                              \
        int64_t n, float *out, const uint16_t *w, const void *act, size_t as, const int R, const int stream) { \
        acc_##ISA a[4];                                                                                  \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) a[r] = zero_##ISA();                         \
        int64_t i = 0;                                                                                   \
        for (; i + 32 <= n; i += 32) {                                                                   \
            if (stream) ahead_##ISA(w + i);                                                              \
            const wv_##ISA wv = wload_##ISA(w + i);                                                      \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) a[r] = step_##ISA(a[r], wv, ROW(act, r, as) + i); \
        }                                                                                                \
        if (i < n) {                                                                                     \
            uint16_t wt[32], xt[32];                                                                     \
            const wv_##ISA wv = wload_##ISA(padded(w + i, n - i, wt));                                   \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                          \
                a[r] = step_##ISA(a[r], wv, padded(ROW(act, r, as) + i, n - i, xt));                     \
        }                                                                                                \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                            \
            float s[16];                                                                                 \
            store_##ISA(s, a[r]);                                                                        \
            out[r] = tokd_reduce16(s);                                                              \
        }                                                                                                \
    }                                                                                                    \
    TOKD_ROW_FORMS(bf16, ISA, TGT_##ISA)

BF16_KERNELS(avx2)
BF16_KERNELS(avx512)
BF16_KERNELS(avx512bf16)

/* Two weight rows against four activation rows (prefill): each activation step loaded
 * once for both weight rows, eight chains of sums in flight. */
#define BF16_DOT2X4(ISA)                                                                                 \
    TGT_##ISA void tokd_bf16_dot2x4_##ISA(int64_t n, float out[8], const void *w, size_t ws, const void *act, \
                                          size_t as) {                                                   \
        const uint16_t *w0 = w, *w1 = (const uint16_t *)((const char *)w + ws);                          \
        acc_##ISA a0[4], a1[4];                                                                          \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) a0[r] = a1[r] = zero_##ISA();                \
        int64_t i = 0;                                                                                   \
        for (; i + 32 <= n; i += 32) {                                                                   \
            const wv_##ISA u = wload_##ISA(w0 + i), v = wload_##ISA(w1 + i);                             \
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                                        \
                a0[r] = step_##ISA(a0[r], u, ROW(act, r, as) + i);                                       \
                a1[r] = step_##ISA(a1[r], v, ROW(act, r, as) + i);                                       \
            }                                                                                            \
        }                                                                                                \
        if (i < n) {                                                                                     \
            uint16_t ut[32], vt[32], xt[32];                                                             \
            const wv_##ISA u = wload_##ISA(padded(w0 + i, n - i, ut)), v = wload_##ISA(padded(w1 + i, n - i, vt)); \
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                                        \
                const uint16_t *x = padded(ROW(act, r, as) + i, n - i, xt);                              \
                a0[r] = step_##ISA(a0[r], u, x);                                                         \
                a1[r] = step_##ISA(a1[r], v, x);                                                         \
            }                                                                                            \
        }                                                                                                \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                                            \
            float s[16];                                                                                 \
            store_##ISA(s, a0[r]);                                                                       \
            out[r] = tokd_reduce16(s);                                                              \
            store_##ISA(s, a1[r]);                                                                       \
            out[4 + r] = tokd_reduce16(s);                                                          \
        }                                                                                                \
    }
BF16_DOT2X4(avx512)
BF16_DOT2X4(avx512bf16)

/* ---- activations ------------------------------------------------------------------- */

/* tokd_f32_to_bf16 on eight lanes: u + 0x7fff + (bit 16 of u), the high half; NaNs keep
 * their high half with the quiet bit set. */
TGT_avx2 static inline __m256i to_bf16_avx2(__m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    const __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(r, q, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
}
TGT_avx2 void tokd_bf16_act_avx2(const float *x, void *dst, int64_t n) {
    uint16_t *y = dst;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i a = to_bf16_avx2(_mm256_loadu_ps(x + i)), b = to_bf16_avx2(_mm256_loadu_ps(x + i + 8));
        /* packus works within 128-bit halves: a0 b0 a1 b1 -> a0 a1 b0 b1 */
        const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
        _mm256_storeu_si256((__m256i *)(y + i), p);
    }
    for (; i < n; i++) y[i] = tokd_f32_to_bf16(x[i]);
}

/* ---- selection --------------------------------------------------------------------- */

typedef struct {
    tokd_vec_dot_fn dot, stream;
    tokd_vec_dot4_fn dot4;
    tokd_vec_dot2x4_fn dot2x4;
    tokd_vec_dot_stream_rows_fn rows;
} bf16_path;
#define PATH(ISA, DOT2X4) \
    {tokd_bf16_dot_##ISA, tokd_bf16_stream_dot_##ISA, tokd_bf16_dot4_##ISA, DOT2X4, tokd_bf16_stream_rows_##ISA}
static const bf16_path PATHS[] = {PATH(avx2, NULL), PATH(avx512, tokd_bf16_dot2x4_avx512),
                                  PATH(avx512bf16, tokd_bf16_dot2x4_avx512bf16)};
#undef PATH

/* types.c has reset t's kernels: the scalar statement stays where there is no path. */
void tokd_bf16_select(tokd_type_traits *t, bool avx2, bool avx512, bool bf16) {
    const bf16_path *p = avx512 && bf16 ? &PATHS[2] : avx512 ? &PATHS[1] : avx2 ? &PATHS[0] : NULL;
    if (!p) return;
    t->vec_dot = p->dot;
    t->vec_dot_stream = p->stream;
    t->vec_dot4 = p->dot4;
    t->vec_dot2x4 = p->dot2x4;
    t->vec_dot_stream_rows = p->rows;
    t->act_convert = tokd_bf16_act_avx2;
}
