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

/* acc += each half's scale * (pair sums of magnitude * signed activation). */
A2 INLINE __m256i sub_block(__m256i acc, __m256i mag, uint32_t signs, const int8_t *q8, int ls0, int ls1) {
    const __m256i q = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)q8), sign_vector(signs));
    const __m256i p = _mm256_maddubs_epi16(mag, q);
    const __m256i sc = _mm256_set_m128i(_mm_set1_epi16((short)ls1), _mm_set1_epi16((short)ls0));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc));
}

A2 INLINE int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* The four sign bytes of a sub-block from four 7-bit fields of a (bits 7l..7l+6). */
INLINE uint32_t signs_from7(uint32_t a) {
    return (uint32_t)tokd_iq_signs[a & 127] | (uint32_t)tokd_iq_signs[(a >> 7) & 127] << 8 |
           (uint32_t)tokd_iq_signs[(a >> 14) & 127] << 16 | (uint32_t)tokd_iq_signs[(a >> 21) & 127] << 24;
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

IQ_DOT(iq2_xxs, 0.125f, {
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = x->qs + 8 * ib;
        const uint32_t a = rd32(q + 4);
        const __m256i mag = rows8(tokd_iq2xxs_grid[q[0]], tokd_iq2xxs_grid[q[1]], tokd_iq2xxs_grid[q[2]], tokd_iq2xxs_grid[q[3]]);
        acc = sub_block(acc, mag, signs_from7(a), q8 + 32 * ib, 2 * (int)(a >> 28) + 1, 2 * (int)(a >> 28) + 1);
    }
})

IQ_DOT(iq2_xs, 0.125f, {
    for (int ib = 0; ib < 8; ib++) {
        uint16_t q[4];
        memcpy(q, x->qs + 8 * ib, 8);
        const __m256i mag = rows8(tokd_iq2xs_grid[q[0] & 511], tokd_iq2xs_grid[q[1] & 511], tokd_iq2xs_grid[q[2] & 511],
                                  tokd_iq2xs_grid[q[3] & 511]);
        const uint32_t signs = (uint32_t)tokd_iq_signs[q[0] >> 9] | (uint32_t)tokd_iq_signs[q[1] >> 9] << 8 |
                               (uint32_t)tokd_iq_signs[q[2] >> 9] << 16 | (uint32_t)tokd_iq_signs[q[3] >> 9] << 24;
        acc = sub_block(acc, mag, signs, q8 + 32 * ib, 2 * (x->scales[ib] & 15) + 1, 2 * (x->scales[ib] >> 4) + 1);
    }
})

IQ_DOT(iq2_s, 0.125f, {
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = x->qs + 4 * ib, h = x->qh[ib];
        const __m256i mag = rows8(tokd_iq2s_grid[q[0] | (h & 3) << 8], tokd_iq2s_grid[q[1] | ((h >> 2) & 3) << 8],
                                  tokd_iq2s_grid[q[2] | ((h >> 4) & 3) << 8], tokd_iq2s_grid[q[3] | ((h >> 6) & 3) << 8]);
        acc = sub_block(acc, mag, rd32(x->qs + 32 + 4 * ib), q8 + 32 * ib, 2 * (x->scales[ib] & 15) + 1,
                        2 * (x->scales[ib] >> 4) + 1);
    }
})

/* Eight 4-wide grid rows as 32 bytes. */
A2 INLINE __m256i rows4(const uint8_t (*grid)[4], const int *idx) {
    return _mm256_set_epi32((int)rd32(grid[idx[7]]), (int)rd32(grid[idx[6]]), (int)rd32(grid[idx[5]]), (int)rd32(grid[idx[4]]),
                            (int)rd32(grid[idx[3]]), (int)rd32(grid[idx[2]]), (int)rd32(grid[idx[1]]), (int)rd32(grid[idx[0]]));
}

IQ_DOT(iq3_xxs, 0.25f, {
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = x->qs + 8 * ib;
        const uint32_t a = rd32(x->qs + 64 + 4 * ib);
        const int idx[8] = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]};
        acc = sub_block(acc, rows4(tokd_iq3xxs_grid, idx), signs_from7(a), q8 + 32 * ib, 2 * (int)(a >> 28) + 1,
                        2 * (int)(a >> 28) + 1);
    }
})

IQ_DOT(iq3_s, 1.0f, {
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = x->qs + 8 * ib;
        const int h = x->qh[ib];
        int idx[8];
        for (int i = 0; i < 8; i++) idx[i] = q[i] | ((h >> i) & 1) << 8;
        const int ls = 2 * ((x->scales[ib / 2] >> 4 * (ib % 2)) & 15) + 1;
        acc = sub_block(acc, rows4(tokd_iq3s_grid, idx), rd32(x->signs + 4 * ib), q8 + 32 * ib, ls, ls);
    }
})

/* IQ1: the coordinates (-1, 0, 1) signed onto the activations, and the groups' shift
 * signs likewise onto a second copy: acc gets P's terms, acc_shift Q's (quants_iq.c). */
A2 INLINE void iq1_sub_block(__m256i *acc, __m256i *acc_shift, __m256i coords, uint32_t shift_neg, const int8_t *q8,
                             int ls0, int ls1) {
    const __m256i ones = _mm256_set1_epi8(1);
    const __m256i a = _mm256_loadu_si256((const __m256i *)q8);
    const __m256i sc = _mm256_set_m128i(_mm_set1_epi16((short)ls1), _mm_set1_epi16((short)ls0));
    const __m256i p = _mm256_maddubs_epi16(ones, _mm256_sign_epi8(a, coords));
    const __m256i group_sign = _mm256_set_epi64x(shift_neg & 8 ? -1LL : 0x0101010101010101LL, shift_neg & 4 ? -1LL : 0x0101010101010101LL,
                                                 shift_neg & 2 ? -1LL : 0x0101010101010101LL, shift_neg & 1 ? -1LL : 0x0101010101010101LL);
    const __m256i s = _mm256_maddubs_epi16(ones, _mm256_sign_epi8(a, group_sign));
    *acc = _mm256_add_epi32(*acc, _mm256_madd_epi16(p, sc));
    *acc_shift = _mm256_add_epi32(*acc_shift, _mm256_madd_epi16(s, sc));
}

A2 INLINE float iq1_term(float d, float dy, __m256i acc, __m256i acc_shift) {
    return (d * dy) * ((float)hsum_i32(acc) + 0.125f * (float)hsum_i32(acc_shift));
}

A2 void tokd_iq1_s_dot_avx2(int64_t n, float *out, const void *w, const void *act) {
    tokd_iq_grids_init();
    const tokd_block_iq1_s *xs = w;
    const tokd_block_q8_K *y = act;
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        const tokd_block_iq1_s *x = &xs[b];
        __m256i acc = _mm256_setzero_si256(), acc_shift = acc;
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x->qs + 4 * ib;
            const int h = x->qh[2 * ib] | x->qh[2 * ib + 1] << 8, ls = 2 * ((h >> 12) & 7) + 1;
            const __m256i c = rows8((const uint8_t *)tokd_iq1s_grid[q[0] | (h & 7) << 8], (const uint8_t *)tokd_iq1s_grid[q[1] | ((h >> 3) & 7) << 8],
                                    (const uint8_t *)tokd_iq1s_grid[q[2] | ((h >> 6) & 7) << 8], (const uint8_t *)tokd_iq1s_grid[q[3] | ((h >> 9) & 7) << 8]);
            iq1_sub_block(&acc, &acc_shift, c, h & 0x8000 ? 15u : 0u, y[b].qs + 32 * ib, ls, ls);
        }
        sum += iq1_term(tokd_f16_to_f32(x->d), y[b].d, acc, acc_shift);
    }
    *out = sum;
}

A2 void tokd_iq1_m_dot_avx2(int64_t n, float *out, const void *w, const void *act) {
    tokd_iq_grids_init();
    const tokd_block_iq1_m *xs = w;
    const tokd_block_q8_K *y = act;
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        const tokd_block_iq1_m *x = &xs[b];
        uint16_t sc[4];
        memcpy(sc, x->scales, 8);
        const uint16_t d16 = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0xF0) | ((sc[2] >> 4) & 0xF00) | (sc[3] & 0xF000));
        __m256i acc = _mm256_setzero_si256(), acc_shift = acc;
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x->qs + 4 * ib, h0 = x->qh[2 * ib], h1 = x->qh[2 * ib + 1];
            const __m256i c = rows8((const uint8_t *)tokd_iq1s_grid[q[0] | (h0 & 7) << 8], (const uint8_t *)tokd_iq1s_grid[q[1] | ((h0 >> 4) & 7) << 8],
                                    (const uint8_t *)tokd_iq1s_grid[q[2] | (h1 & 7) << 8], (const uint8_t *)tokd_iq1s_grid[q[3] | ((h1 >> 4) & 7) << 8]);
            const uint32_t neg = (h0 >> 3 & 1) | (h0 >> 7 & 1) << 1 | (h1 >> 3 & 1) << 2 | (h1 >> 7 & 1) << 3;
            const int s = sc[ib / 2] >> 6 * (ib % 2);
            iq1_sub_block(&acc, &acc_shift, c, neg, y[b].qs + 32 * ib, 2 * (s & 7) + 1, 2 * ((s >> 3) & 7) + 1);
        }
        sum += iq1_term(tokd_f16_to_f32(d16), y[b].d, acc, acc_shift);
    }
    *out = sum;
}
