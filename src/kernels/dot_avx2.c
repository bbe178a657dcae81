/* dot_avx2.c — AVX2 + FMA + F16C dot products (selected at run time in types.c).
 *
 * Every function here is bit-equal to its scalar reference in quants.c: the integer
 * parts are exact, and the float parts perform the same operations in the same order
 * (see the reduction rules at the top of quants.c). That lets the tests compare
 * exactly, and makes the choice of path invisible in the results.
 *
 * 32-element formats: eight blocks per step. Each block's bytes become one vector of
 * eight int32 partial sums (maddubs: u8 x s8 -> pairs of int16; madd with ones ->
 * int32), eight such vectors are reduced to one vector of the eight block sums, which
 * is converted to float and scaled by the eight blocks' dx*dy at once.
 * K-quants: one super-block per step, its integer sums kept exact in int32 lanes
 * (sub-block scales applied with madd on int16), reduced once per super-block.
 *
 * Functions carry target attributes instead of the whole file being built with -mavx2,
 * so nothing here runs unless types.c has checked cpuid. */
#include <immintrin.h>
#include <string.h>

#include "kernels/packed.h"
#include "kernels/quants.h"
#include "kernels/unaligned.h"

#define A2 __attribute__((target("avx2,fma,f16c")))

/* ---- helpers ---------------------------------------------------------------------- */

static inline uint16_t ld16(const void *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
}

/* Eight fp16 values at p, p+stride, ..., p+7*stride, as floats. */
A2 static inline __m256 halves8(const void *p, size_t stride) {
    const uint8_t *b = p;
    __m128i v = _mm_cvtsi32_si128(ld16(b));
    v = _mm_insert_epi16(v, ld16(b + 1 * stride), 1);
    v = _mm_insert_epi16(v, ld16(b + 2 * stride), 2);
    v = _mm_insert_epi16(v, ld16(b + 3 * stride), 3);
    v = _mm_insert_epi16(v, ld16(b + 4 * stride), 4);
    v = _mm_insert_epi16(v, ld16(b + 5 * stride), 5);
    v = _mm_insert_epi16(v, ld16(b + 6 * stride), 6);
    v = _mm_insert_epi16(v, ld16(b + 7 * stride), 7);
    return _mm256_cvtph_ps(v);
}
A2 static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

A2 static inline __m256i loadu(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* Sum of the eight int32 lanes of each of p0..p7, as one vector (lane k = sum of pk). */
A2 static inline __m256i hsum8x8(__m256i p0, __m256i p1, __m256i p2, __m256i p3, __m256i p4, __m256i p5, __m256i p6,
                                 __m256i p7) {
    __m256i a = _mm256_hadd_epi32(p0, p1), b = _mm256_hadd_epi32(p2, p3);
    __m256i c = _mm256_hadd_epi32(p4, p5), d = _mm256_hadd_epi32(p6, p7);
    __m256i ab = _mm256_hadd_epi32(a, b), cd = _mm256_hadd_epi32(c, d);
    return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20), _mm256_permute2x128_si256(ab, cd, 0x31));
}
A2 static inline int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}
A2 static inline int32_t hsum_i32_128(__m128i s) {
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}
/* Sum of u8 x s8 products, as eight int32 lanes. */
A2 static inline __m256i dot_us(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
/* The 32 nibbles of a 16-byte Q4 block: byte j = element j (low nibbles, then high). */
A2 static inline __m256i nibbles32(const uint8_t *qs) {
    __m128i v = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0F));
}
/* The fifth bits of a Q5 block: byte j = 0x10 if bit j of qh is set, else 0. */
A2 static inline __m256i fifth_bits32(const uint8_t *qh) {
    __m256i v = _mm256_set1_epi32((int)tokd_ld_u32(qh));
    const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                          3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(v, pick), bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* ---- activation rows of F16 weights, rounded to F16 (tokd_type_traits.act_convert) -- */

/* F16C's conversion rounds to nearest even (imm 0), as tokd_f32_to_f16 does, subnormal
 * halves included. */
A2 void tokd_f16_round_row_avx2(const float *src, void *dst, int64_t n) {
    float *y = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(src + i), 0)));
    tokd_f16_round_row(src + i, y + i, n - i);
}
/* ---- F16 rows: lane i%32, four vectors of eight (F32 rows: f32_rows.c) ------------
 * The _stream forms are decode's (dot_avx512.c says why): each step of 32 weights primes
 * the page TOKD_PRIME_DIST ahead and prefetches its lines TOKD_PK_AVX2_DECODE_LINE_PF
 * ahead with prefetcht0, as packed_avx2_gemm.h's decode does; the same bits as the plain
 * forms. */

#define FLOAT_DOT_AVX2(NAME, LOAD8, LOAD1, ESZ, STREAM)                                               \
    A2 void NAME(int64_t n, float *out, const void *w, const void *act) {                            \
        const float *x = act;                                                                         \
        const char *wb = w;                                                                           \
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                   \
        int64_t i = 0;                                                                                \
        for (; i + 32 <= n; i += 32) {                                                                \
            if (STREAM) {                                                                             \
                tokd_page_prime(wb + (ESZ) * i, 32 * (ESZ));                                          \
                for (int l = 0; l < 32 * (ESZ); l += 64)                                              \
                    _mm_prefetch(wb + (ESZ) * i + TOKD_PK_AVX2_DECODE_LINE_PF + l, _MM_HINT_T0);      \
            }                                                                                         \
            a0 = _mm256_add_ps(a0, _mm256_mul_ps(LOAD8(i), _mm256_loadu_ps(x + i)));                 \
            a1 = _mm256_add_ps(a1, _mm256_mul_ps(LOAD8(i + 8), _mm256_loadu_ps(x + i + 8)));         \
            a2 = _mm256_add_ps(a2, _mm256_mul_ps(LOAD8(i + 16), _mm256_loadu_ps(x + i + 16)));       \
            a3 = _mm256_add_ps(a3, _mm256_mul_ps(LOAD8(i + 24), _mm256_loadu_ps(x + i + 24)));       \
        }                                                                                             \
        float s[32];                                                                                  \
        _mm256_storeu_ps(s, a0);                                                                      \
        _mm256_storeu_ps(s + 8, a1);                                                                  \
        _mm256_storeu_ps(s + 16, a2);                                                                 \
        _mm256_storeu_ps(s + 24, a3);                                                                 \
        for (; i < n; i++) s[i & 31] += LOAD1(i) * x[i];                                              \
        *out = tokd_reduce32(s);                                                                      \
    }

#define F16_LOAD8(i) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + (i))))
#define F16_LOAD1(i) h2f(ld16((const uint16_t *)w + (i)))
FLOAT_DOT_AVX2(tokd_f16_dot_avx2, F16_LOAD8, F16_LOAD1, 2, 0)
/* Four activation rows (tokd_vec_dot4_fn), two at a time: a pair's eight sums and the
 * weight vectors fill the sixteen registers (four rows' sixteen sums would spill), each
 * weight vector loaded and converted once for the pair, and eight independent sums
 * instead of four. Row r's lanes take FLOAT_DOT_AVX2's operations in order: its bits. */
#define FLOAT_DOT4_AVX2(NAME, LOAD8, LOAD1)                                                           \
    A2 void NAME(int64_t n, float out[4], const void *w, const void *act, size_t act_stride) {       \
        for (int p = 0; p < 2; p++) {                                                                 \
            const float *x0 = (const float *)((const char *)act + (size_t)(2 * p) * act_stride);     \
            const float *x1 = (const float *)((const char *)act + (size_t)(2 * p + 1) * act_stride); \
            __m256 a[2][4];                                                                           \
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) a[0][k] = a[1][k] = _mm256_setzero_ps(); \
            int64_t i = 0;                                                                            \
            for (; i + 32 <= n; i += 32) {                                                            \
                _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {                                 \
                    const __m256 wk = LOAD8(i + 8 * k);                                               \
                    a[0][k] = _mm256_add_ps(a[0][k], _mm256_mul_ps(wk, _mm256_loadu_ps(x0 + i + 8 * k))); \
                    a[1][k] = _mm256_add_ps(a[1][k], _mm256_mul_ps(wk, _mm256_loadu_ps(x1 + i + 8 * k))); \
                }                                                                                     \
            }                                                                                         \
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {                                     \
                const float *x = h ? x1 : x0;                                                         \
                float s[32];                                                                          \
                _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) _mm256_storeu_ps(s + 8 * k, a[h][k]); \
                for (int64_t k = i; k < n; k++) s[k & 31] += LOAD1(k) * x[k];                         \
                out[2 * p + h] = tokd_reduce32(s);                                                    \
            }                                                                                         \
        }                                                                                             \
    }
FLOAT_DOT4_AVX2(tokd_f16_dot4_avx2, F16_LOAD8, F16_LOAD1)
FLOAT_DOT_AVX2(tokd_f16_stream_dot_avx2, F16_LOAD8, F16_LOAD1, 2, 1)
/* Weights [0, n) of one row against one or a pair of activation rows (R), added into
 * their lane sums at acc (tokd_vec_dot_rows_part_fn), FLOAT_DOT4_AVX2's pass: with
 * stream set, the stream form's prefetches (pf NULL) or each line of pf's stream. */
#define FLOAT_DOT_PART_AVX2(NAME, LOAD8, ESZ, R)                                                      \
    A2 static void NAME##_##R(int64_t n, const float *acc_in, float *acc, const void *w, const float *x0, \
                              const float *x1, int stream, const void *pf) {                          \
        const char *wb = w, *pb = pf;                                                                 \
        const float *x[2] = {x0, x1};                                                                 \
        __m256 a[R][4];                                                                               \
        _Pragma("GCC unroll 2") for (int h = 0; h < (R); h++)                                         \
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)                                       \
                a[h][k] = acc_in ? _mm256_loadu_ps(acc_in + 32 * h + 8 * k) : _mm256_setzero_ps();   \
        for (int64_t i = 0; i < n; i += 32) {                                                         \
            if (stream && pb) {                                                                       \
                for (int l = 0; l < 32 * (ESZ); l += 64) _mm_prefetch(pb + (ESZ) * i + l, _MM_HINT_T0); \
            } else if (stream) {                                                                      \
                tokd_page_prime(wb + (ESZ) * i, 32 * (ESZ));                                          \
                for (int l = 0; l < 32 * (ESZ); l += 64)                                              \
                    _mm_prefetch(wb + (ESZ) * i + TOKD_PK_AVX2_DECODE_LINE_PF + l, _MM_HINT_T0);      \
            }                                                                                         \
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {                                     \
                const __m256 wk = LOAD8(i + 8 * k);                                                   \
                _Pragma("GCC unroll 2") for (int h = 0; h < (R); h++)                                 \
                    a[h][k] = _mm256_add_ps(a[h][k], _mm256_mul_ps(wk, _mm256_loadu_ps(x[h] + i + 8 * k))); \
            }                                                                                         \
        }                                                                                             \
        _Pragma("GCC unroll 2") for (int h = 0; h < (R); h++)                                         \
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) _mm256_storeu_ps(acc + 32 * h + 8 * k, a[h][k]); \
    }
/* One to four rows: the first pair (or row) with the prefetches, a third row or a
 * second pair from cache (sixteen registers hold one pair's sums). */
#define FLOAT_DOT_PART_AVX2_ALL(NAME, LOAD8, ESZ)                                                     \
    FLOAT_DOT_PART_AVX2(NAME, LOAD8, ESZ, 1)                                                          \
    FLOAT_DOT_PART_AVX2(NAME, LOAD8, ESZ, 2)                                                          \
    A2 void NAME(int64_t n, const float *acc_in, float *acc, const void *w, const void *act,           \
                 size_t act_stride, int rows, const void *pf) {                                       \
        const char *a = act;                                                                          \
        const float *x0 = (const float *)a;                                                           \
        if (rows <= 1) {                                                                              \
            NAME##_1(n, acc_in, acc, w, x0, x0, 1, pf);                                               \
            return;                                                                                   \
        }                                                                                             \
        NAME##_2(n, acc_in, acc, w, x0, (const float *)(a + act_stride), 1, pf);                      \
        const float *x2 = (const float *)(a + 2 * act_stride);                                        \
        const float *in2 = acc_in ? acc_in + 64 : NULL;                                               \
        if (rows == 3) NAME##_1(n, in2, acc + 64, w, x2, x2, 0, NULL);                                \
        if (rows >= 4) NAME##_2(n, in2, acc + 64, w, x2, (const float *)(a + 3 * act_stride), 0, NULL); \
    }
FLOAT_DOT_PART_AVX2_ALL(tokd_f16_rows_part_avx2, F16_LOAD8, 2)

/* ---- 32-element formats ------------------------------------------------------------ */

A2 static inline __m256i blk_q4_0(const tokd_block_q4_0 *x, const tokd_block_q8_0 *y) {
    __m256i a = loadu(y->qs);
    __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(nibbles32(x->qs), a), _mm256_maddubs_epi16(_mm256_set1_epi8(8), a));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}
A2 static inline __m256i blk_q4_1(const tokd_block_q4_1 *x, const tokd_block_q8_1 *y) {
    return dot_us(nibbles32(x->qs), loadu(y->qs));
}
A2 static inline __m256i blk_q5_0(const tokd_block_q5_0 *x, const tokd_block_q8_0 *y) {
    __m256i a = loadu(y->qs);
    __m256i q = _mm256_or_si256(nibbles32(x->qs), fifth_bits32(x->qh));
    __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, a), _mm256_maddubs_epi16(_mm256_set1_epi8(16), a));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}
A2 static inline __m256i blk_q5_1(const tokd_block_q5_1 *x, const tokd_block_q8_1 *y) {
    return dot_us(_mm256_or_si256(nibbles32(x->qs), fifth_bits32(x->qh)), loadu(y->qs));
}
A2 static inline __m256i blk_q8_0(const tokd_block_q8_0 *x, const tokd_block_q8_0 *y) {
    __m256i q = loadu(x->qs);
    return dot_us(_mm256_abs_epi8(q), _mm256_sign_epi8(loadu(y->qs), q));
}
/* IQ4_NL/IQ4_XS: the nibbles looked up in the table (both 128-bit lanes), then as Q8_0. */
A2 static inline __m256i iq4_values32(const uint8_t *qs) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tokd_iq4_values));
    return _mm256_shuffle_epi8(table, nibbles32(qs));
}
A2 static inline __m256i blk_iq4_nl(const tokd_block_iq4_nl *x, const tokd_block_q8_0 *y) {
    __m256i q = iq4_values32(x->qs);
    return dot_us(_mm256_abs_epi8(q), _mm256_sign_epi8(loadu(y->qs), q));
}

/* MIN: whether the term has + mx*sy (x->m and y->s). */
#define DOT32_AVX2(T, XT, YT, MIN)                                                                   \
    A2 void tokd_##T##_dot_avx2(int64_t n, float *out, const void *w, const void *act) {            \
        const XT *x = w;                                                                             \
        const YT *y = act;                                                                           \
        const int64_t nb = n / TOKD_QK;                                                              \
        __m256 acc = _mm256_setzero_ps();                                                            \
        int64_t b = 0;                                                                               \
        for (; b + 8 <= nb; b += 8) {                                                                \
            const XT *xb = x + b;                                                                    \
            const YT *yb = y + b;                                                                    \
            __m256i P = hsum8x8(blk_##T(xb, yb), blk_##T(xb + 1, yb + 1), blk_##T(xb + 2, yb + 2),   \
                                blk_##T(xb + 3, yb + 3), blk_##T(xb + 4, yb + 4), blk_##T(xb + 5, yb + 5), \
                                blk_##T(xb + 6, yb + 6), blk_##T(xb + 7, yb + 7));                   \
            __m256 dd = _mm256_mul_ps(halves8(&xb->d, sizeof(XT)), halves8(&yb->d, sizeof(YT)));     \
            __m256 t = _mm256_mul_ps(dd, _mm256_cvtepi32_ps(P));                                     \
            DOT32_MIN_##MIN                                                                          \
            acc = _mm256_add_ps(acc, t);                                                             \
        }                                                                                            \
        float s[8];                                                                                  \
        _mm256_storeu_ps(s, acc);                                                                    \
        for (; b < nb; b++) s[b & 7] += tokd_##T##_term(x + b, y + b);                               \
        *out = tokd_reduce8(s);                                                                      \
    }
#define DOT32_MIN_0
#define DOT32_MIN_1 t = _mm256_add_ps(t, _mm256_mul_ps(halves8(&xb->m, sizeof *xb), halves8(&yb->s, sizeof *yb)));

DOT32_AVX2(q4_0, tokd_block_q4_0, tokd_block_q8_0, 0)
DOT32_AVX2(q4_1, tokd_block_q4_1, tokd_block_q8_1, 1)
DOT32_AVX2(q5_0, tokd_block_q5_0, tokd_block_q8_0, 0)
DOT32_AVX2(q5_1, tokd_block_q5_1, tokd_block_q8_1, 1)
DOT32_AVX2(q8_0, tokd_block_q8_0, tokd_block_q8_0, 0)
DOT32_AVX2(iq4_nl, tokd_block_iq4_nl, tokd_block_q8_0, 0)

/* IQ4_XS: per super-block, each block's products (|q| x sign(a, q) pairs, exact in int16)
 * times its scale with madd, summed exactly in int32 lanes. */
A2 void tokd_iq4_xs_dot_avx2(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_iq4_xs *x = w;
    const tokd_block_q8_K *y = act;
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        __m256i acc = _mm256_setzero_si256();
        for (int j = 0; j < 8; j++) {
            const __m256i q = iq4_values32(x[b].qs + 16 * j);
            const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(loadu(y[b].qs + 32 * j), q));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16((short)tokd_iq4_xs_scale(&x[b], j))));
        }
        sum += tokd_k_term1(h2f(x[b].d), y[b].d, hsum_i32(acc));
    }
    *out = sum;
}

/* ---- K-quants ---------------------------------------------------------------------- */

/* For the 16-element-group formats (Q2_K, Q3_K, Q6_K) a 32-element step s of half h
 * covers groups j = 8h+2s (low 128 bits of the maddubs result) and j+1 (high 128):
 * scale_pair(S, s) with S = that half's eight int16 scales in both 128-bit lanes gives
 * [sc_j x8 | sc_j+1 x8]. */
A2 static inline __m256i scale_pair(__m256i S, int s) {
    const __m256i idx[4] = {
        _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3),
        _mm256_setr_epi8(4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7),
        _mm256_setr_epi8(8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11,
                         10, 11, 10, 11),
        _mm256_setr_epi8(12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 14, 15, 14, 15, 14, 15, 14, 15,
                         14, 15, 14, 15, 14, 15, 14, 15)};
    return _mm256_shuffle_epi8(S, idx[s]);
}
/* 128-bit lane h of v in both lanes. */
A2 static inline __m256i lane_bcast(__m256i v, int h) {
    return h ? _mm256_permute2x128_si256(v, v, 0x11) : _mm256_permute2x128_si256(v, v, 0x00);
}
/* Broadcast int16 element k (0..7) of S (both 128-bit lanes equal) to all lanes. */
A2 static inline __m256i bcast16(__m256i S, int k) {
    return _mm256_shuffle_epi8(S, _mm256_set1_epi16((short)(2 * k | (2 * k + 1) << 8)));
}

/* The 16 six-bit scales of a Q3_K block, minus 32, as 16 bytes. */
static inline __m128i q3k_scales(const uint8_t *s) {
    uint32_t a = tokd_ld_u32(s), b = tokd_ld_u32(s + 4), c = tokd_ld_u32(s + 8);
    const uint32_t m4 = 0x0f0f0f0f, m2 = 0x03030303;
    uint32_t w0 = (a & m4) | ((c & m2) << 4);
    uint32_t w1 = (b & m4) | (((c >> 2) & m2) << 4);
    uint32_t w2 = ((a >> 4) & m4) | (((c >> 4) & m2) << 4);
    uint32_t w3 = ((b >> 4) & m4) | (((c >> 6) & m2) << 4);
    return _mm_setr_epi32((int)w0, (int)w1, (int)w2, (int)w3);
}
/* The eight 6-bit scales (bytes 0..7) and mins (bytes 8..15) of a Q4_K/Q5_K block. */
static inline __m128i k4_scales_mins(const uint8_t *s) {
    uint32_t a = tokd_ld_u32(s), b = tokd_ld_u32(s + 4), c = tokd_ld_u32(s + 8);
    const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    uint32_t sc_lo = a & m6, m_lo = b & m6;
    uint32_t sc_hi = (c & m4) | (((a >> 6) & m2) << 4);
    uint32_t m_hi = ((c >> 4) & m4) | (((b >> 6) & m2) << 4);
    return _mm_setr_epi32((int)sc_lo, (int)sc_hi, (int)m_lo, (int)m_hi);
}

A2 void tokd_q2_K_dot_avx2(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_q2_K *x = w;
    const tokd_block_q8_K *y = act;
    const __m256i m3 = _mm256_set1_epi8(3);
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        __m128i raw = _mm_loadu_si128((const __m128i *)x[b].scales);
        __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(raw, _mm_set1_epi8(0x0F)));
        __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F)));
        int32_t summ = hsum_i32(_mm256_madd_epi16(mn16, loadu(y[b].bsums)));
        __m256i acc = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i S = lane_bcast(sc16, h);
            __m256i q = loadu(x[b].qs + 32 * h);
            const int8_t *a = y[b].qs + 128 * h;
            for (int s = 0; s < 4; s++) {
                __m256i u = _mm256_and_si256(q, m3);
                q = _mm256_srli_epi16(q, 2);
                __m256i p = _mm256_maddubs_epi16(u, loadu(a + 32 * s));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, scale_pair(S, s)));
            }
        }
        sum += tokd_k_term2(h2f(x[b].d), h2f(x[b].dmin), y[b].d, hsum_i32(acc), summ);
    }
    *out = sum;
}

A2 void tokd_q3_K_dot_avx2(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_q3_K *x = w;
    const tokd_block_q8_K *y = act;
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_sub_epi8(q3k_scales(x[b].scales), _mm_set1_epi8(32)));
        /* values are stored as u = q + 4 in [0, 8): subtract 4 * sum_j sc_j * bsum_j */
        int32_t bias = hsum_i32(_mm256_madd_epi16(sc16, loadu(y[b].bsums)));
        __m256i hm = loadu(x[b].hmask);
        __m256i acc = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i S = lane_bcast(sc16, h);
            __m256i q = loadu(x[b].qs + 32 * h);
            const int8_t *a = y[b].qs + 128 * h;
            for (int s = 0; s < 4; s++) {
                __m256i u = _mm256_or_si256(_mm256_and_si256(q, m3), _mm256_slli_epi16(_mm256_and_si256(hm, one), 2));
                q = _mm256_srli_epi16(q, 2);
                hm = _mm256_srli_epi16(hm, 1);
                __m256i p = _mm256_maddubs_epi16(u, loadu(a + 32 * s));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, scale_pair(S, s)));
            }
        }
        sum += tokd_k_term1(h2f(x[b].d), y[b].d, hsum_i32(acc) - 4 * bias);
    }
    *out = sum;
}

A2 void tokd_q4_K_dot_avx2(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_q4_K *x = w;
    const tokd_block_q8_K *y = act;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        __m128i scm = k4_scales_mins(x[b].scales);
        __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scm));
        __m128i mn16 = _mm_cvtepu8_epi16(_mm_srli_si128(scm, 8));
        const __m128i *bs = (const __m128i *)y[b].bsums;
        __m128i pairs = _mm_hadd_epi16(_mm_loadu_si128(bs), _mm_loadu_si128(bs + 1));
        int32_t summ = hsum_i32_128(_mm_madd_epi16(pairs, mn16));
        __m256i acc = _mm256_setzero_si256();
        for (int p = 0; p < 4; p++) {
            __m256i q = loadu(x[b].qs + 32 * p);
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            __m256i p0 = _mm256_maddubs_epi16(lo, loadu(y[b].qs + 64 * p));
            __m256i p1 = _mm256_maddubs_epi16(hi, loadu(y[b].qs + 64 * p + 32));
            p0 = _mm256_madd_epi16(p0, bcast16(sc16, 2 * p));
            p1 = _mm256_madd_epi16(p1, bcast16(sc16, 2 * p + 1));
            acc = _mm256_add_epi32(acc, _mm256_add_epi32(p0, p1));
        }
        sum += tokd_k_term2(h2f(x[b].d), h2f(x[b].dmin), y[b].d, hsum_i32(acc), summ);
    }
    *out = sum;
}

A2 void tokd_q5_K_dot_avx2(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_q5_K *x = w;
    const tokd_block_q8_K *y = act;
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        __m128i scm = k4_scales_mins(x[b].scales);
        __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scm));
        __m128i mn16 = _mm_cvtepu8_epi16(_mm_srli_si128(scm, 8));
        const __m128i *bs = (const __m128i *)y[b].bsums;
        __m128i pairs = _mm_hadd_epi16(_mm_loadu_si128(bs), _mm_loadu_si128(bs + 1));
        int32_t summ = hsum_i32_128(_mm_madd_epi16(pairs, mn16));
        __m256i hb = loadu(x[b].qh);
        __m256i acc = _mm256_setzero_si256();
        for (int p = 0; p < 4; p++) {
            __m256i q = loadu(x[b].qs + 32 * p);
            __m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_slli_epi16(_mm256_and_si256(hb, one), 4));
            __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 1), one), 4));
            hb = _mm256_srli_epi16(hb, 2);
            __m256i p0 = _mm256_maddubs_epi16(lo, loadu(y[b].qs + 64 * p));
            __m256i p1 = _mm256_maddubs_epi16(hi, loadu(y[b].qs + 64 * p + 32));
            p0 = _mm256_madd_epi16(p0, bcast16(sc16, 2 * p));
            p1 = _mm256_madd_epi16(p1, bcast16(sc16, 2 * p + 1));
            acc = _mm256_add_epi32(acc, _mm256_add_epi32(p0, p1));
        }
        sum += tokd_k_term2(h2f(x[b].d), h2f(x[b].dmin), y[b].d, hsum_i32(acc), summ);
    }
    *out = sum;
}

A2 void tokd_q6_K_dot_avx2(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_q6_K *x = w;
    const tokd_block_q8_K *y = act;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[b].scales));
        /* values are stored as u = q + 32 in [0, 64): subtract 32 * sum_j sc_j * bsum_j */
        int32_t bias = hsum_i32(_mm256_madd_epi16(sc16, loadu(y[b].bsums)));
        __m256i acc = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i S = lane_bcast(sc16, h);
            __m256i qa = loadu(x[b].ql + 64 * h), qb = loadu(x[b].ql + 64 * h + 32), qh = loadu(x[b].qh + 32 * h);
            const int8_t *a = y[b].qs + 128 * h;
            __m256i u0 = _mm256_or_si256(_mm256_and_si256(qa, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
            __m256i u1 = _mm256_or_si256(_mm256_and_si256(qb, m4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
            __m256i u2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), m4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
            __m256i u3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), m4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
            __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(u0, loadu(a)), scale_pair(S, 0));
            __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(u1, loadu(a + 32)), scale_pair(S, 1));
            __m256i p2 = _mm256_madd_epi16(_mm256_maddubs_epi16(u2, loadu(a + 64)), scale_pair(S, 2));
            __m256i p3 = _mm256_madd_epi16(_mm256_maddubs_epi16(u3, loadu(a + 96)), scale_pair(S, 3));
            acc = _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_add_epi32(p0, p1), _mm256_add_epi32(p2, p3)));
        }
        sum += tokd_k_term1(h2f(x[b].d), y[b].d, hsum_i32(acc) - 32 * bias);
    }
    *out = sum;
}
