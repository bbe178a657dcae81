/* dot_iq_avx2.c — the grid types' dot products with Q8_K activations, AVX2 (see
 * quants_iq.c for the layouts and the arithmetic). AVX-512 hosts use these too.
 *
 * A sub-block of 32 weights at a time. Each type's decoder (*_sub, in iq_decode_avx2.h)
 * gathers its four (IQ3: eight) grid rows into one vector of coordinate magnitudes,
 * makes a vector of +-1 from its sign bits, and a vector of the two halves' scale
 * multipliers (IQ1: see iq1_sub). Then, for each activation row: vpsignb puts the signs on the activations, vpmaddubsw makes
 * 16 pair sums and vpmaddwd multiplies each half's by its scale. The one-row kernel
 * (decode) and the four-row kernel (prefill) share the decoders, so the four-row one
 * pays for the lookups once per four rows. Each super-block's integer sum is exact,
 * so every result equals the scalar reference bit for bit: the float steps after it
 * are the same.
 *
 * Prefill with many activation rows goes through the gemm forms at the end, which
 * decode each super-block of a weight row once for up to IQ_GEMM_ROWS activation rows
 * (on CPUs without AVX-512 VNNI; with it, gemm_iq_avx512.c's, 3.4-4.4x faster).
 *
 * Measured choices (one thread on cached rows, ns a super-block, alternated in one
 * process): the sign bytes of IQ2_XXS, IQ2_XS and IQ3_XXS groups come from a table of
 * their 7 stored bits (tokd_iq_sign8_7: IQ2_XXS 24 -> 16.5 against parity lookups and
 * a bit expansion); IQ3_S's eight 4-byte rows from one vpgatherdd (29 against 34 with
 * scalar loads and inserts), IQ3_XXS's from scalar loads (21 against 27 gathered),
 * IQ2's four 8-byte rows likewise (a vpgatherdq: 40 against 25); the halves' scales
 * from a per-super-block vector and one vpshufb (IQ2_S 25 -> 17, IQ2_XS 19 -> 15); the
 * fp16 scale by F16C inline (a call cost ~10 %); IQ1's one-row sums reduced eight
 * super-blocks at a time (IQ_DOT1_EIGHT). Against llama.cpp's kernels (c392e5094,
 * libggml-cpu, the same rows): IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S equal, IQ1_M 1.04x, IQ3_S
 * 1.1x, IQ2_S 1.2x its time (BENCHMARKS.md, forty-fourth and forty-sixth sessions). */
#include <immintrin.h>
#include <string.h>

#include "kernels/iq_decode_avx2.h"
#include "kernels/iq_grids.h"
#include "kernels/quants.h"
#include "util.h"

/* Eight accumulators' sums at once: lane j of the result is the sum of a[j]'s lanes. */
A2 INLINE __m256i hsum8(const __m256i a[8]) {
    const __m256i t0 = _mm256_hadd_epi32(a[0], a[1]), t1 = _mm256_hadd_epi32(a[2], a[3]);
    const __m256i t2 = _mm256_hadd_epi32(a[4], a[5]), t3 = _mm256_hadd_epi32(a[6], a[7]);
    const __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
    /* u0 holds a[0..3]'s low-lane sums, then their high-lane sums; u1 a[4..7]'s */
    return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
}

/* acc += the halves' scales * (pair sums of magnitude * signed activation). */
A2 INLINE __m256i sub_dot(__m256i acc, iq_sub s, const int8_t *q8) {
    const __m256i q = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)q8), s.sv);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(s.mag, q), s.sc));
}

/* One row and four rows of each type. DX: block x[b]'s scale; TERM: a super-block's
 * float term from d = DX * y.d and its integer sum S; K: the final factor (quants_iq.c). */
#define IQ_DOT1_EACH(T, DX, TERM, K)                                                                          \
    A2 void tokd_##T##_dot_avx2(int64_t n, float *out, const void *w, const void *act) {                      \
        const tokd_block_##T *x = w;                                                                          \
        const tokd_block_q8_K *y = act;                                                                       \
        float sum = 0;                                                                                        \
        for (int64_t b = 0; b < n / TOKD_QK_K; b++) {                                                         \
            __m256i acc = _mm256_setzero_si256();                                                             \
            const __m256i ls16 = T##_scales(&x[b]);                                                           \
            _Pragma("GCC unroll 8") for (int ib = 0; ib < 8; ib++)                                            \
                acc = sub_dot(acc, T##_sub(&x[b], ib, ls16), y[b].qs + 32 * ib);                              \
            const float d = (DX) * y[b].d;                                                                    \
            const int32_t S = hsum_i32(acc);                                                                  \
            sum += TERM;                                                                                      \
        }                                                                                                     \
        *out = (K) * sum;                                                                                     \
    }
/* The same sums with the horizontal adds of eight super-blocks done together (hsum8),
 * then their float terms in order: the same result, bit for bit. Faster for IQ1 (IQ1_S
 * 25 -> 21, IQ1_M 33 -> 29 ns a super-block), slower for the others (IQ2_XXS 14 -> 16). */
#define IQ_DOT1_EIGHT(T, DX, TERM, K)                                                                         \
    A2 void tokd_##T##_dot_avx2(int64_t n, float *out, const void *w, const void *act) {                      \
        const tokd_block_##T *x = w;                                                                          \
        const tokd_block_q8_K *y = act;                                                                       \
        const int64_t nb = n / TOKD_QK_K;                                                                     \
        float sum = 0;                                                                                        \
        for (int64_t b0 = 0; b0 < nb; b0 += 8) {                                                              \
            const int m = nb - b0 < 8 ? (int)(nb - b0) : 8;                                                   \
            __m256i accs[8];                                                                                  \
            for (int j = 0; j < 8; j++) accs[j] = _mm256_setzero_si256();                                     \
            for (int j = 0; j < m; j++) {                                                                     \
                const tokd_block_##T *xb = &x[b0 + j];                                                        \
                __m256i acc = _mm256_setzero_si256();                                                         \
                const __m256i ls16 = T##_scales(xb);                                                          \
                _Pragma("GCC unroll 8") for (int ib = 0; ib < 8; ib++)                                        \
                    acc = sub_dot(acc, T##_sub(xb, ib, ls16), y[b0 + j].qs + 32 * ib);                        \
                accs[j] = acc;                                                                                \
            }                                                                                                 \
            int32_t sums[8];                                                                                  \
            _mm256_storeu_si256((__m256i *)sums, hsum8(accs));                                                \
            for (int j = 0; j < m; j++) {                                                                     \
                const int64_t b = b0 + j;                                                                     \
                const float d = (DX) * y[b].d;                                                                \
                const int32_t S = sums[j];                                                                    \
                sum += TERM;                                                                                  \
            }                                                                                                 \
        }                                                                                                     \
        *out = (K) * sum;                                                                                     \
    }
#define IQ_DOT4(T, DX, TERM, K)                                                                               \
    A2 void tokd_##T##_dot4_avx2(int64_t n, float out[4], const void *w, const void *act, size_t act_stride) { \
        const tokd_block_##T *x = w;                                                                          \
        const tokd_block_q8_K *y[4];                                                                          \
        for (int r = 0; r < 4; r++) y[r] = (const tokd_block_q8_K *)((const uint8_t *)act + (size_t)r * act_stride); \
        float sum[4] = {0, 0, 0, 0};                                                                          \
        for (int64_t b = 0; b < n / TOKD_QK_K; b++) {                                                         \
            __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),          \
                              _mm256_setzero_si256()};                                                        \
            const __m256i ls16 = T##_scales(&x[b]);                                                           \
            _Pragma("GCC unroll 8") for (int ib = 0; ib < 8; ib++) {                                          \
                const iq_sub s = T##_sub(&x[b], ib, ls16);                                                    \
                for (int r = 0; r < 4; r++) acc[r] = sub_dot(acc[r], s, y[r][b].qs + 32 * ib);                 \
            }                                                                                                 \
            const float dx = DX;                                                                              \
            for (int r = 0; r < 4; r++) {                                                                     \
                const float d = dx * y[r][b].d;                                                               \
                const int32_t S = hsum_i32(acc[r]);                                                           \
                sum[r] += TERM;                                                                               \
            }                                                                                                 \
        }                                                                                                     \
        for (int r = 0; r < 4; r++) out[r] = (K) * sum[r];                                                    \
    }
#define IQ_DOTS(T, ONE_ROW, DX, TERM, K) IQ_DOT1_##ONE_ROW(T, DX, TERM, K) IQ_DOT4(T, DX, TERM, K)
/* The seven types with their one-row form (EACH super-block's sum alone, or EIGHT
 * together), DX, TERM and K, for IQ_DOTS and IQ_GEMMS below. */
#define IQ_TYPES(X)                                                       \
    X(iq2_xxs, EACH, h2f(x[b].d), d * (float)S, 0.125f)                   \
    X(iq2_xs, EACH, h2f(x[b].d), d * (float)S, 0.125f)                    \
    X(iq2_s, EACH, h2f(x[b].d), d * (float)S, 0.125f)                     \
    X(iq3_xxs, EACH, h2f(x[b].d), d * (float)S, 0.25f)                    \
    X(iq3_s, EACH, h2f(x[b].d), d * (float)S, 1.0f)                       \
    X(iq1_s, EIGHT, h2f(x[b].d), d * ((float)S * 0.125f), 1.0f)           \
    X(iq1_m, EIGHT, iq1_m_d(&x[b]), d * ((float)S * 0.125f), 1.0f)
IQ_TYPES(IQ_DOTS)

/* ---- gemm: many activation rows (tokd_gemm_fn) ----
 * Each weight super-block is decoded once into signed bytes w (the coordinates with
 * their signs; IQ1: 8c plus the shift sign, so that one integer sum S = 8P + Q holds
 * both of its terms, and P + 0.125 Q = S * 0.125 exactly while |S| < 2^23, as it is:
 * |S| <= 9 * 15 * 128 * 256) and the halves' scales, then multiplied with every
 * activation row of the chunk. The activation rows come prepared as Q8_K with 128 added
 * to each quant (tokd_iq_gemm_prep), so vpmaddubsw takes them as its unsigned operand
 * and the weights as its signed one; the block's 128 * sum(ls * w), computed with the
 * decoding, is subtracted once a super-block. On AVX-512 the row loop runs two
 * sub-blocks an instruction (tokd_*_gemm_avx512) and four rows at a time, each decoded
 * vector loaded once for the four (pp512 IQ2_XXS 79-80 -> 86-89 tok/s, IQ3_XXS 75-76 ->
 * 78-81; BENCHMARKS.md, fifty-fourth session). The integer sums are the reference's, so
 * the outputs are bit-equal to the one-row kernels. */
#define IQ_GEMM_ROWS 64

typedef struct {
    _Alignas(64) int8_t w[256];
    int16_t sc[256 / 2]; /* each pair's scale multiplier (vpmaddwd's operand) */
    int32_t corr;        /* 128 * sum over halves of ls * (sum of w) */
} iq_decoded;

/* keep one sub-block: signed bytes, scales, and its part of the correction */
A2 INLINE void keep_w(iq_decoded *d, int ib, __m256i w, __m256i sc) {
    _mm256_store_si256((__m256i *)(d->w + 32 * ib), w);
    _mm256_storeu_si256((__m256i *)(d->sc + 16 * ib), sc);
    /* sum(ls * w) over the sub-block: pair sums of w (times 1), times the pairs' scales */
    const __m256i pw = _mm256_maddubs_epi16(_mm256_set1_epi8(1), w);
    d->corr += 128 * hsum_i32(_mm256_madd_epi16(pw, sc));
}
A2 INLINE void iq_keep(iq_decoded *d, int ib, iq_sub s) { keep_w(d, ib, _mm256_sign_epi8(s.mag, s.sv), s.sc); }

#define DECODE(T)                                                                                               \
    A2 INLINE void decode_##T(const tokd_block_##T *x, iq_decoded *d) {                                        \
        const __m256i ls16 = T##_scales(x);                                                                     \
        d->corr = 0;                                                                                            \
        _Pragma("GCC unroll 8") for (int ib = 0; ib < 8; ib++) iq_keep(d, ib, T##_sub(x, ib, ls16));            \
    }
DECODE(iq2_xxs)
DECODE(iq2_xs)
DECODE(iq2_s)
DECODE(iq3_xxs)
DECODE(iq3_s)
DECODE(iq1_s)
DECODE(iq1_m)

/* the super-block's integer sum for one prepared activation row (quants + 128) */
A2 INLINE int32_t decoded_dot_avx2(const iq_decoded *d, const uint8_t *a) {
    __m256i acc = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        const __m256i p = _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(a + 32 * ib)),
                                               _mm256_load_si256((const __m256i *)(d->w + 32 * ib)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_loadu_si256((const __m256i *)(d->sc + 16 * ib))));
    }
    return hsum_i32(acc) - d->corr;
}
#define A512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
A512 INLINE int32_t decoded_dot_avx512(const iq_decoded *d, const uint8_t *a) {
    __m512i acc = _mm512_setzero_si512();
    for (int ib = 0; ib < 8; ib += 2) {
        const __m512i p = _mm512_maddubs_epi16(_mm512_loadu_si512(a + 32 * ib), _mm512_load_si512(d->w + 32 * ib));
        acc = _mm512_add_epi32(acc, _mm512_madd_epi16(p, _mm512_loadu_si512(d->sc + 16 * ib)));
    }
    return _mm512_reduce_add_epi32(acc) - d->corr;
}

/* Four activation rows' integer sums at once: each decoded weight and scale vector loaded
 * once for the four rows, and the four sums reduced together (AVX2: one row at a time).
 * The accumulators are named, not an array: in an array GCC kept them on the stack and
 * pp512 fell to 0.64-0.71x. */
A2 INLINE void decoded_dot4_avx2(const iq_decoded *d, const uint8_t *const a[4], int32_t S[4]) {
    for (int r = 0; r < 4; r++) S[r] = decoded_dot_avx2(d, a[r]);
}
A512 INLINE void decoded_dot4_avx512(const iq_decoded *d, const uint8_t *const a[4], int32_t S[4]) {
    __m512i acc0 = _mm512_setzero_si512(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    _Pragma("GCC unroll 4") for (int ib = 0; ib < 8; ib += 2) {
        const __m512i w = _mm512_load_si512(d->w + 32 * ib), sc = _mm512_loadu_si512(d->sc + 16 * ib);
        acc0 = _mm512_add_epi32(acc0, _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_loadu_si512(a[0] + 32 * ib), w), sc));
        acc1 = _mm512_add_epi32(acc1, _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_loadu_si512(a[1] + 32 * ib), w), sc));
        acc2 = _mm512_add_epi32(acc2, _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_loadu_si512(a[2] + 32 * ib), w), sc));
        acc3 = _mm512_add_epi32(acc3, _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_loadu_si512(a[3] + 32 * ib), w), sc));
    }
    const __m512i t01 = _mm512_add_epi32(_mm512_unpacklo_epi32(acc0, acc1), _mm512_unpackhi_epi32(acc0, acc1));
    const __m512i t23 = _mm512_add_epi32(_mm512_unpacklo_epi32(acc2, acc3), _mm512_unpackhi_epi32(acc2, acc3));
    const __m512i t = _mm512_add_epi32(_mm512_unpacklo_epi64(t01, t23), _mm512_unpackhi_epi64(t01, t23));
    const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
    _mm_storeu_si128((__m128i *)S, _mm_sub_epi32(_mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)),
                                                 _mm_set1_epi32(d->corr)));
}

/* DX: the block's scale; TERM(d, S): the super-block's float term; K: the final factor */
#define IQ_GEMM(T, ISA, TGT, DX, TERM, K)                                                                       \
    TGT void tokd_##T##_gemm_##ISA(int64_t n, int64_t nw, const void *w, size_t ws, int64_t na, const void *act, size_t as, \
                                   float *y, int64_t ldy) {                                                     \
        const int64_t nb = n / TOKD_QK_K;                                                                       \
        iq_decoded dec;                                                                                         \
        float sum[IQ_GEMM_ROWS];                                                                                \
        for (int64_t o = 0; o < nw; o++) {                                                                      \
            const tokd_block_##T *x = (const tokd_block_##T *)((const uint8_t *)w + (size_t)o * ws);           \
            for (int64_t r0 = 0; r0 < na; r0 += IQ_GEMM_ROWS) {                                                 \
                const int64_t nr = na - r0 < IQ_GEMM_ROWS ? na - r0 : IQ_GEMM_ROWS;                             \
                for (int64_t r = 0; r < nr; r++) sum[r] = 0;                                                    \
                for (int64_t b = 0; b < nb; b++) {                                                              \
                    decode_##T(&x[b], &dec);                                                                    \
                    const float dx = DX;                                                                        \
                    int64_t r = 0;                                                                              \
                    for (; r + 4 <= nr; r += 4) { /* four rows a weight load */                                 \
                        const tokd_block_q8_K *yb[4];                                                           \
                        const uint8_t *qs[4];                                                                   \
                        int32_t S4[4];                                                                          \
                        for (int k = 0; k < 4; k++) {                                                           \
                            yb[k] = (const tokd_block_q8_K *)((const uint8_t *)act + (size_t)(r0 + r + k) * as) + b; \
                            qs[k] = (const uint8_t *)yb[k]->qs;                                                 \
                        }                                                                                       \
                        decoded_dot4_##ISA(&dec, qs, S4);                                                       \
                        for (int k = 0; k < 4; k++) {                                                           \
                            const float d = dx * yb[k]->d;                                                      \
                            const int32_t S = S4[k];                                                            \
                            sum[r + k] += TERM;                                                                 \
                        }                                                                                       \
                    }                                                                                           \
                    for (; r < nr; r++) {                                                                       \
                        const tokd_block_q8_K *yb = (const tokd_block_q8_K *)((const uint8_t *)act + (size_t)(r0 + r) * as) + b; \
                        const float d = dx * yb->d;                                                             \
                        const int32_t S = decoded_dot_##ISA(&dec, (const uint8_t *)yb->qs);                     \
                        sum[r] += TERM;                                                                         \
                    }                                                                                           \
                }                                                                                               \
                for (int64_t r = 0; r < nr; r++) y[(r0 + r) * ldy + o] = (K) * sum[r];                          \
            }                                                                                                   \
        }                                                                                                       \
    }
#define IQ_GEMMS(T, ONE_ROW, DX, TERM, K) IQ_GEMM(T, avx2, A2, DX, TERM, K) IQ_GEMM(T, avx512, A512, DX, TERM, K)
IQ_TYPES(IQ_GEMMS)

size_t tokd_iq_gemm_act_bytes(int64_t n) { return ((size_t)(n / TOKD_QK_K) * sizeof(tokd_block_q8_K) + 63) & ~(size_t)63; }
/* Q8_K with 128 added to every quant (the bytes read as unsigned); d and bsums kept */
void tokd_iq_gemm_prep(const float *x, void *dst, int64_t n) {
    tokd_q8_K_quantize(x, dst, n);
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        tokd_block_q8_K *y = (tokd_block_q8_K *)dst + b;
        for (int i = 0; i < TOKD_QK_K; i++) y->qs[i] = (int8_t)((uint8_t)y->qs[i] ^ 0x80);
    }
}
