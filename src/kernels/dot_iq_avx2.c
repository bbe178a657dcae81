/* dot_iq_avx2.c — the grid types' dot products with Q8_K activations, AVX2 (see
 * quants_iq.c for the layouts and the arithmetic). AVX-512 hosts use these too.
 *
 * A sub-block of 32 weights at a time: its four (IQ3: eight) grid rows are gathered
 * into one vector of coordinate magnitudes, its 32 sign bits turned into a vector of
 * +-1 that is applied to the activations (vpsignb), then vpmaddubsw makes 16 pair
 * sums and vpmaddwd multiplies each half's by its scale multiplier. The super-block's
 * integer sum is exact, so the result equals the scalar reference bit for bit: the
 * float steps after it are the same. */
#include <immintrin.h>
#include <pthread.h>
#include <string.h>

#include "kernels/iq_grids.h"
#include "kernels/quants.h"
#include "util.h"

#define A2 __attribute__((target("avx2,fma,f16c")))
#define INLINE static inline __attribute__((always_inline))

static inline uint64_t rd64(const void *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static inline uint32_t rd32(const void *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Four 8-wide grid rows as 32 bytes. */
A2 INLINE __m256i rows8(const uint8_t *r0, const uint8_t *r1, const uint8_t *r2, const uint8_t *r3) {
    return _mm256_set_epi64x((long long)rd64(r3), (long long)rd64(r2), (long long)rd64(r1), (long long)rd64(r0));
}

/* Byte k of the result is -1 where bit k of `bits` is set, else +1. */
A2 INLINE __m256i sign_vector(uint32_t bits) {
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL, 0x0101010101010101LL, 0);
    const __m256i mask = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread), mask);
    return _mm256_or_si256(_mm256_cmpeq_epi8(b, mask), _mm256_set1_epi8(1));
}

/* acc += each half's scale (sc: 16-bit, low half first) * (pair sums of magnitude *
 * activation signed by sv). */
A2 INLINE __m256i sub_block_sv(__m256i acc, __m256i mag, __m256i sv, const int8_t *q8, __m256i sc) {
    const __m256i q = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)q8), sv);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(mag, q), sc));
}

A2 INLINE int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* Each type's super-block loop: the body (the macro's last argument) sets `acc` from block x[b] and activations y[b].qs. */
#define IQ_DOT(T, K, ...)                                                                       \
    A2 void tokd_##T##_dot_avx2(int64_t n, float *out, const void *w, const void *act) {         \
        tokd_iq_grids_init();                                                                    \
        const tokd_block_##T *xs = w;                                                            \
        const tokd_block_q8_K *y = act;                                                          \
        float sum = 0;                                                                           \
        for (int64_t b = 0; b < n / TOKD_QK_K; b++) {                                            \
            const tokd_block_##T *x = &xs[b];                                                    \
            const int8_t *q8 = y[b].qs;                                                          \
            __m256i acc = _mm256_setzero_si256();                                                \
            __VA_ARGS__                                                                          \
            sum += (tokd_f16_to_f32(x->d) * y[b].d) * (float)hsum_i32(acc);                      \
        }                                                                                        \
        *out = (K) * sum;                                                                        \
    }

/* Four groups' +-1 bytes from a sign table (loads beat the sign_vector expansion here,
 * whose input would first be assembled from four parity lookups). */
A2 INLINE __m256i signs4(uint64_t s0, uint64_t s1, uint64_t s2, uint64_t s3) {
    return _mm256_set_epi64x((long long)s3, (long long)s2, (long long)s1, (long long)s0);
}

IQ_DOT(iq2_xxs, 0.125f, {
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = x->qs + 8 * ib;
        const uint32_t a = rd32(q + 4);
        const __m256i mag = rows8(tokd_iq2xxs_grid[q[0]], tokd_iq2xxs_grid[q[1]], tokd_iq2xxs_grid[q[2]], tokd_iq2xxs_grid[q[3]]);
        const __m256i sv = signs4(tokd_iq_sign8_7[a & 127], tokd_iq_sign8_7[(a >> 7) & 127], tokd_iq_sign8_7[(a >> 14) & 127],
                                  tokd_iq_sign8_7[(a >> 21) & 127]);
        acc = sub_block_sv(acc, mag, sv, q8 + 32 * ib, _mm256_set1_epi16((short)(2 * (a >> 28) + 1)));
    }
})

IQ_DOT(iq2_xs, 0.125f, {
    for (int ib = 0; ib < 8; ib++) {
        uint16_t q[4];
        memcpy(q, x->qs + 8 * ib, 8);
        const __m256i mag = rows8(tokd_iq2xs_grid[q[0] & 511], tokd_iq2xs_grid[q[1] & 511], tokd_iq2xs_grid[q[2] & 511],
                                  tokd_iq2xs_grid[q[3] & 511]);
        const __m256i sv = signs4(tokd_iq_sign8_7[q[0] >> 9], tokd_iq_sign8_7[q[1] >> 9], tokd_iq_sign8_7[q[2] >> 9], tokd_iq_sign8_7[q[3] >> 9]);
        const __m256i sc = _mm256_set_m128i(_mm_set1_epi16((short)(2 * (x->scales[ib] >> 4) + 1)),
                                            _mm_set1_epi16((short)(2 * (x->scales[ib] & 15) + 1)));
        acc = sub_block_sv(acc, mag, sv, q8 + 32 * ib, sc);
    }
})

IQ_DOT(iq2_s, 0.125f, {
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = x->qs + 4 * ib, h = x->qh[ib];
        const __m256i mag = rows8(tokd_iq2s_grid[q[0] | (h & 3) << 8], tokd_iq2s_grid[q[1] | ((h >> 2) & 3) << 8],
                                  tokd_iq2s_grid[q[2] | ((h >> 4) & 3) << 8], tokd_iq2s_grid[q[3] | ((h >> 6) & 3) << 8]);
        const __m256i sc = _mm256_set_m128i(_mm_set1_epi16((short)(2 * (x->scales[ib] >> 4) + 1)),
                                            _mm_set1_epi16((short)(2 * (x->scales[ib] & 15) + 1)));
        acc = sub_block_sv(acc, mag, sign_vector(rd32(x->qs + 32 + 4 * ib)), q8 + 32 * ib, sc);
    }
})

/* Eight 4-wide grid rows as 32 bytes: one vpgatherdd (measured against eight scalar
 * loads and inserts: 40 against 47 ns a super-block of IQ3_S). */
A2 INLINE __m256i rows4(const uint8_t (*grid)[4], __m256i idx) { return _mm256_i32gather_epi32((const int *)grid, idx, 4); }

IQ_DOT(iq3_xxs, 0.25f, {
    for (int ib = 0; ib < 8; ib++) {
        const uint32_t a = rd32(x->qs + 64 + 4 * ib);
        const __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(x->qs + 8 * ib)));
        const __m256i sv = signs4(tokd_iq_sign8_7[a & 127], tokd_iq_sign8_7[(a >> 7) & 127], tokd_iq_sign8_7[(a >> 14) & 127],
                                  tokd_iq_sign8_7[(a >> 21) & 127]);
        acc = sub_block_sv(acc, rows4(tokd_iq3xxs_grid, idx), sv, q8 + 32 * ib, _mm256_set1_epi16((short)(2 * (a >> 28) + 1)));
    }
})

IQ_DOT(iq3_s, 1.0f, {
    const __m256i hshift = _mm256_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1), bit8 = _mm256_set1_epi32(256);
    for (int ib = 0; ib < 8; ib++) { /* index i: qs[8ib + i], and bit i of qh[ib] as bit 8 */
        const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(x->qs + 8 * ib)));
        const __m256i hi = _mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32(x->qh[ib]), hshift), bit8);
        const int ls = 2 * ((x->scales[ib / 2] >> 4 * (ib % 2)) & 15) + 1;
        acc = sub_block_sv(acc, rows4(tokd_iq3s_grid, _mm256_or_si256(lo, hi)), sign_vector(rd32(x->signs + 4 * ib)), q8 + 32 * ib,
                           _mm256_set1_epi16((short)ls));
    }
})

/* IQ1: the coordinates (-1, 0, 1) signed onto the activations give P's terms. Q's: for
 * IQ1_S one shift sign a sub-block, so its Q8_K 16-element sums serve; IQ1_M's signs
 * change every 8 elements, so each pair sum of the activations is multiplied by its
 * half's scale signed by its group's shift (iq1m_shift16: +-1 in 16-bit lanes, four
 * lanes a group, for each pattern of four shift bits). */
A2 INLINE __m256i iq1_coords(const int8_t *r0, const int8_t *r1, const int8_t *r2, const int8_t *r3) {
    return rows8((const uint8_t *)r0, (const uint8_t *)r1, (const uint8_t *)r2, (const uint8_t *)r3);
}

A2 void tokd_iq1_s_dot_avx2(int64_t n, float *out, const void *w, const void *act) {
    tokd_iq_grids_init();
    const tokd_block_iq1_s *xs = w;
    const tokd_block_q8_K *y = act;
    const __m256i ones = _mm256_set1_epi8(1);
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        const tokd_block_iq1_s *x = &xs[b];
        __m256i acc = _mm256_setzero_si256();
        int32_t q = 0;
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *qs = x->qs + 4 * ib;
            const int h = x->qh[2 * ib] | x->qh[2 * ib + 1] << 8, ls = 2 * ((h >> 12) & 7) + 1;
            const __m256i c = iq1_coords(tokd_iq1s_grid[qs[0] | (h & 7) << 8], tokd_iq1s_grid[qs[1] | ((h >> 3) & 7) << 8],
                                         tokd_iq1s_grid[qs[2] | ((h >> 6) & 7) << 8], tokd_iq1s_grid[qs[3] | ((h >> 9) & 7) << 8]);
            const __m256i a = _mm256_loadu_si256((const __m256i *)(y[b].qs + 32 * ib));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(ones, _mm256_sign_epi8(a, c)), _mm256_set1_epi16((short)ls)));
            q += (h & 0x8000 ? -ls : ls) * (y[b].bsums[2 * ib] + y[b].bsums[2 * ib + 1]);
        }
        sum += (tokd_f16_to_f32(x->d) * y[b].d) * ((float)hsum_i32(acc) + 0.125f * (float)q);
    }
    *out = sum;
}

static int16_t iq1m_shift16[16][16];
static void iq1m_shift16_init(void) {
    for (int m = 0; m < 16; m++)
        for (int l = 0; l < 16; l++) iq1m_shift16[m][l] = (m >> (l / 4) & 1) ? -1 : 1;
}

A2 void tokd_iq1_m_dot_avx2(int64_t n, float *out, const void *w, const void *act) {
    tokd_iq_grids_init();
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, iq1m_shift16_init);
    const tokd_block_iq1_m *xs = w;
    const tokd_block_q8_K *y = act;
    const __m256i ones = _mm256_set1_epi8(1);
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        const tokd_block_iq1_m *x = &xs[b];
        uint16_t sc[4];
        memcpy(sc, x->scales, 8);
        const uint16_t d16 = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0xF0) | ((sc[2] >> 4) & 0xF00) | (sc[3] & 0xF000));
        __m256i acc = _mm256_setzero_si256(), acc_shift = acc;
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *qs = x->qs + 4 * ib, h0 = x->qh[2 * ib], h1 = x->qh[2 * ib + 1];
            const __m256i c = iq1_coords(tokd_iq1s_grid[qs[0] | (h0 & 7) << 8], tokd_iq1s_grid[qs[1] | ((h0 >> 4) & 7) << 8],
                                         tokd_iq1s_grid[qs[2] | (h1 & 7) << 8], tokd_iq1s_grid[qs[3] | ((h1 >> 4) & 7) << 8]);
            const int neg = (h0 >> 3 & 1) | (h0 >> 7 & 1) << 1 | (h1 >> 3 & 1) << 2 | (h1 >> 7 & 1) << 3;
            const int s = sc[ib / 2] >> 6 * (ib % 2);
            const __m256i scv = _mm256_set_m128i(_mm_set1_epi16((short)(2 * ((s >> 3) & 7) + 1)), _mm_set1_epi16((short)(2 * (s & 7) + 1)));
            const __m256i a = _mm256_loadu_si256((const __m256i *)(y[b].qs + 32 * ib));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(ones, _mm256_sign_epi8(a, c)), scv));
            const __m256i shift_sc = _mm256_sign_epi16(scv, _mm256_loadu_si256((const __m256i *)iq1m_shift16[neg]));
            acc_shift = _mm256_add_epi32(acc_shift, _mm256_madd_epi16(_mm256_maddubs_epi16(ones, a), shift_sc));
        }
        sum += (tokd_f16_to_f32(d16) * y[b].d) * ((float)hsum_i32(acc) + 0.125f * (float)hsum_i32(acc_shift));
    }
    *out = sum;
}
