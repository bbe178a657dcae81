/* packed_avx2.c — the packed Q4_0 product (packed.h) with AVX2 alone, for CPUs without
 * AVX-512 VNNI.
 *
 * A 64-byte vector of the packed layout holds four weights for each of 16 rows; here it
 * is two 32-byte halves, rows 0-7 and rows 8-15, walked one after the other. vpdpbusd's
 * step (sum of four u8 x s8 products added to an int32 lane) becomes vpmaddubsw (pairs
 * of products as int16: |2 * 15 * 128| fits, so it never saturates) and vpmaddwd with
 * ones (the two pairs as int32), which is the same integer; a block sum starts at the
 * correction, so the result is packed.h's contract bit for bit, as in packed_avx512.c:
 * out = fmaf(dx * dy, (float)isum, out) per block, in block order.
 *
 * Q8_0 is not offered: its weights, stored as unsigned bytes plus 128, would saturate
 * vpmaddubsw. Activation rows use the scalar preparation (tokd_packed_prep_ref). */
#include <immintrin.h>
#include <string.h>

#include "kernels/packed.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define INLINE static inline __attribute__((always_inline))
#define MAX_R 4
#define BLOCK_BYTES (16 * 18) /* one block of a 16-row group: 16 fp16 scales, 4 x 64 quant bytes */
#define PF_DIST 6144          /* as packed_avx512.c: for several activation rows only */


/* vpdpbusd's step: s + (sum of four u8 x s8 products per int32 lane). */
TGT INLINE __m256i dp4(__m256i s, __m256i u, __m256i a) {
    return _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1)));
}

/* R activation rows (as bytes apart) against one group of nb blocks: outputs
 * y[r * ldy + 0..15]. */
TGT INLINE void group_tile(int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R, float *y, int64_t ldy) {
    __m256 acc[MAX_R][2];
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    const size_t dy_off = (size_t)nb * 32, corr_off = (size_t)nb * 36;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < nb; b++, w += BLOCK_BYTES) {
        if (R > 1)
            for (size_t l = 0; l < BLOCK_BYTES; l += 64) _mm_prefetch((const char *)w + PF_DIST + l, _MM_HINT_T0);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i lo[4], hi[4];
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(w + 32 + 64 * c + 32 * h));
                lo[c] = _mm256_and_si256(v, m4);
                hi[c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            }
            const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 16 * h)));
            for (int r = 0; r < R; r++) {
                const uint8_t *a = act + (size_t)r * as, *q = a + b * 32;
                __m256i s = _mm256_set1_epi32(tokd_pk_ld_i32(a + corr_off + 4 * b)), t = _mm256_setzero_si256();
#pragma GCC unroll 4
                for (int g = 0; g < 4; g++) {
                    s = dp4(s, lo[g], _mm256_set1_epi32(tokd_pk_ld_i32(q + 4 * g)));
                    t = dp4(t, hi[g], _mm256_set1_epi32(tokd_pk_ld_i32(q + 4 * g + 16)));
                }
                const __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(tokd_pk_ld_f32(a + dy_off + 4 * b)));
                acc[r][h] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_add_epi32(s, t)), acc[r][h]);
            }
        }
    }
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(y + r * ldy, acc[r][0]);
        _mm256_storeu_ps(y + r * ldy + 8, acc[r][1]);
    }
}

#define TILE_CASE(RR)                                                                                       \
    case RR:                                                                                                \
        for (int64_t G = 0; G < n_groups; G++)                                                              \
            group_tile(nb, (const uint8_t *)w + (size_t)G * group_bytes, a, as, RR, y + r0 * ldy + 16 * G, ldy); \
        break;

TGT void tokd_packed_q4_0_gemm_avx2(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                    const void *act, size_t as, float *y, int64_t ldy) {
    const int64_t nb = K / 32;
    for (int64_t r0 = 0; r0 < na; r0 += MAX_R) {
        const uint8_t *a = (const uint8_t *)act + (size_t)r0 * as;
        switch (na - r0 >= MAX_R ? MAX_R : (int)(na - r0)) {
            TILE_CASE(4)
            TILE_CASE(3)
            TILE_CASE(2)
            TILE_CASE(1)
        }
    }
}
