/* iq_decode_avx2.h — the grid types' sub-block decoders (AVX2), shared by their dot
 * products and gemm forms in dot_iq_avx2.c and the VNNI gemm in gemm_iq_avx512.c.
 *
 * T##_sub(x, ib, ls16) decodes sub-block ib (32 weights) of a super-block: the four
 * (IQ3: eight) grid rows as coordinate magnitudes, a vector of +-1 from the sign bits,
 * and the two halves' scale multipliers in 16-bit lanes (IQ1: see iq1_sub). ls16 is
 * what T##_scales(x) made once for the super-block. quants_iq.c has the layouts and
 * the reference arithmetic. Everything here is static inline: each kernel file gets
 * its own copy, compiled for its own target. */
#ifndef TOKD_IQ_DECODE_AVX2_H
#define TOKD_IQ_DECODE_AVX2_H

#include <immintrin.h>
#include <string.h>

#include "kernels/iq_grids.h"
#include "kernels/quants.h"
#include "kernels/unaligned.h"

#define A2 __attribute__((target("avx2,fma,f16c")))
#define INLINE static inline __attribute__((always_inline))

/* fp16 to float inline (F16C: exact, as tokd_f16_to_f32; a call per super-block cost
 * a vzeroupper and reloaded constants) */
A2 INLINE float h2f(uint16_t h) { return _cvtsh_ss(h); }


/* Four 8-byte values (grid rows, sign tables) as 32 bytes, the first lowest. */
A2 INLINE __m256i four64(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
    return _mm256_set_epi64x((long long)d, (long long)c, (long long)b, (long long)a);
}
/* Eight 4-byte grid rows by index, one vpgatherdd. */
A2 INLINE __m256i rows4(const uint8_t (*grid)[4], __m256i idx) { return _mm256_i32gather_epi32((const int *)grid, idx, 4); }

/* Byte k of the result is -1 where bit k of `bits` is set, else +1. */
A2 INLINE __m256i sign_vector(uint32_t bits) {
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL, 0x0101010101010101LL, 0);
    const __m256i mask = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread), mask);
    return _mm256_or_si256(_mm256_cmpeq_epi8(b, mask), _mm256_set1_epi8(1));
}
/* Two halves' scale multipliers in 16-bit lanes, the first half low, from a
 * super-block's 16 half multipliers (bytes, both 128-bit lanes: made
 * once a super-block): one vpshufb with a constant for each sub-block (with scalar
 * fields and vpbroadcastw per sub-block, IQ2_S ran at 25 ns a super-block). */
A2 INLINE __m256i pick_halves(__m256i ls16, int ib) {
    return _mm256_shuffle_epi8(ls16, _mm256_set_m128i(_mm_set1_epi16((short)(0x8000 | (2 * ib + 1))), _mm_set1_epi16((short)(0x8000 | (2 * ib)))));
}
/* 2n + 1 for the 16 nibbles of 8 bytes, low nibble first: IQ2_XS's and IQ2_S's halves */
A2 INLINE __m256i nibble_scales(const uint8_t *p) {
    const __m128i v = _mm_loadl_epi64((const __m128i *)p), m = _mm_set1_epi8(15);
    const __m128i n = _mm_unpacklo_epi8(_mm_and_si128(v, m), _mm_and_si128(_mm_srli_epi16(v, 4), m));
    return _mm256_broadcastsi128_si256(_mm_add_epi8(_mm_add_epi8(n, n), _mm_set1_epi8(1)));
}

A2 INLINE int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* ---- the decoders: sub-block ib of a block ---- */

typedef struct {
    __m256i mag; /* coordinate magnitudes (IQ1: the signed coordinates) */
    __m256i sv;  /* +-1: the coordinates' signs */
    __m256i sc;  /* the halves' scale multipliers */
} iq_sub;

A2 INLINE iq_sub iq2_xxs_sub(const tokd_block_iq2_xxs *x, int ib, __m256i ls16) {
    const uint8_t *q = x->qs + 8 * ib;
    const uint32_t a = tokd_ld_u32(q + 4);
    return (iq_sub){four64(tokd_ld_u64(tokd_iq2xxs_grid[q[0]]), tokd_ld_u64(tokd_iq2xxs_grid[q[1]]), tokd_ld_u64(tokd_iq2xxs_grid[q[2]]),
                           tokd_ld_u64(tokd_iq2xxs_grid[q[3]])),
                    four64(tokd_iq_sign8_7[a & 127], tokd_iq_sign8_7[(a >> 7) & 127], tokd_iq_sign8_7[(a >> 14) & 127],
                           tokd_iq_sign8_7[(a >> 21) & 127]),
                    _mm256_set1_epi16((short)(2 * (a >> 28) + 1))};
}
A2 INLINE iq_sub iq2_xs_sub(const tokd_block_iq2_xs *x, int ib, __m256i ls16) {
    uint16_t q[4];
    memcpy(q, x->qs + 8 * ib, 8);
    return (iq_sub){four64(tokd_ld_u64(tokd_iq2xs_grid[q[0] & 511]), tokd_ld_u64(tokd_iq2xs_grid[q[1] & 511]), tokd_ld_u64(tokd_iq2xs_grid[q[2] & 511]),
                           tokd_ld_u64(tokd_iq2xs_grid[q[3] & 511])),
                    four64(tokd_iq_sign8_7[q[0] >> 9], tokd_iq_sign8_7[q[1] >> 9], tokd_iq_sign8_7[q[2] >> 9], tokd_iq_sign8_7[q[3] >> 9]),
                    pick_halves(ls16, ib)};
}
A2 INLINE iq_sub iq2_s_sub(const tokd_block_iq2_s *x, int ib, __m256i ls16) {
    /* bits 2k, 2k+1 of qh[ib] are bits 8, 9 of index k: one shift and one mask each (gcc
       compiled (h >> 2k & 3) << 8 as three: IQ2_S 18.4 -> 17.1 ns a super-block) */
    const uint8_t *q = x->qs + 4 * ib;
    const int h = x->qh[ib];
    return (iq_sub){four64(tokd_ld_u64(tokd_iq2s_grid[q[0] | ((h << 8) & 0x300)]), tokd_ld_u64(tokd_iq2s_grid[q[1] | ((h << 6) & 0x300)]),
                           tokd_ld_u64(tokd_iq2s_grid[q[2] | ((h << 4) & 0x300)]), tokd_ld_u64(tokd_iq2s_grid[q[3] | ((h << 2) & 0x300)])),
                    sign_vector(tokd_ld_u32(x->qs + 32 + 4 * ib)), pick_halves(ls16, ib)};
}
A2 INLINE iq_sub iq3_xxs_sub(const tokd_block_iq3_xxs *x, int ib, __m256i ls16) {
    const uint32_t a = tokd_ld_u32(x->qs + 64 + 4 * ib);
    const uint8_t *q = x->qs + 8 * ib;
    const __m256i mag = _mm256_set_epi32((int)tokd_ld_u32(tokd_iq3xxs_grid[q[7]]), (int)tokd_ld_u32(tokd_iq3xxs_grid[q[6]]), (int)tokd_ld_u32(tokd_iq3xxs_grid[q[5]]),
                                         (int)tokd_ld_u32(tokd_iq3xxs_grid[q[4]]), (int)tokd_ld_u32(tokd_iq3xxs_grid[q[3]]), (int)tokd_ld_u32(tokd_iq3xxs_grid[q[2]]),
                                         (int)tokd_ld_u32(tokd_iq3xxs_grid[q[1]]), (int)tokd_ld_u32(tokd_iq3xxs_grid[q[0]]));
    return (iq_sub){mag,
                    four64(tokd_iq_sign8_7[a & 127], tokd_iq_sign8_7[(a >> 7) & 127], tokd_iq_sign8_7[(a >> 14) & 127],
                           tokd_iq_sign8_7[(a >> 21) & 127]),
                    _mm256_set1_epi16((short)(2 * (a >> 28) + 1))};
}
A2 INLINE iq_sub iq3_s_sub(const tokd_block_iq3_s *x, int ib, __m256i ls16) {
    /* index i: qs[8ib + i], with bit i of qh[ib] as bit 8 */
    const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(x->qs + 8 * ib)));
    const __m256i hi = _mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32(x->qh[ib]), _mm256_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1)),
                                        _mm256_set1_epi32(256));
    return (iq_sub){rows4(tokd_iq3s_grid, _mm256_or_si256(lo, hi)), sign_vector(tokd_ld_u32(x->signs + 4 * ib)), pick_halves(ls16, ib)};
}

/* IQ1: coordinates -1, 0, 1, each group of 8 shifted by +-1/8. The decoders give
 * w = 8c + shift sign (never 0) as magnitude and sign, so that one integer sum
 * S = 8P + Q holds both of the reference's terms: P + 0.125 Q = S * 0.125 exactly while
 * |S| < 2^23, as it is (|S| <= 9 * 15 * 128 * 256). One vpmaddubsw a sub-block, where
 * a separate sum of the shift terms cost IQ1_M 37 ns a super-block against 27. */
A2 INLINE iq_sub iq1_sub(__m256i c, __m256i shift_bytes, __m256i sc) {
    const __m256i c2 = _mm256_add_epi8(c, c), c4 = _mm256_add_epi8(c2, c2);
    const __m256i w = _mm256_add_epi8(_mm256_add_epi8(c4, c4), shift_bytes);
    return (iq_sub){_mm256_abs_epi8(w), w, sc};
}
A2 INLINE __m256i iq1_rows(int i0, int i1, int i2, int i3) {
    return four64(tokd_ld_u64(tokd_iq1s_grid[i0]), tokd_ld_u64(tokd_iq1s_grid[i1]), tokd_ld_u64(tokd_iq1s_grid[i2]), tokd_ld_u64(tokd_iq1s_grid[i3]));
}
A2 INLINE iq_sub iq1_s_sub(const tokd_block_iq1_s *x, int ib, __m256i ls16) {
    const uint8_t *q = x->qs + 4 * ib;
    const int h = x->qh[2 * ib] | x->qh[2 * ib + 1] << 8;
    return iq1_sub(iq1_rows(q[0] | (h & 7) << 8, q[1] | ((h >> 3) & 7) << 8, q[2] | ((h >> 6) & 7) << 8, q[3] | ((h >> 9) & 7) << 8),
                   _mm256_set1_epi8(h & 0x8000 ? -1 : 1), _mm256_set1_epi16((short)(2 * ((h >> 12) & 7) + 1)));
}
A2 INLINE iq_sub iq1_m_sub(const tokd_block_iq1_m *x, int ib, __m256i ls16) {
    const uint8_t *q = x->qs + 4 * ib, h0 = x->qh[2 * ib], h1 = x->qh[2 * ib + 1];
    const int neg = (h0 >> 3 & 1) | (h0 >> 7 & 1) << 1 | (h1 >> 3 & 1) << 2 | (h1 >> 7 & 1) << 3;
    return iq1_sub(iq1_rows(q[0] | (h0 & 7) << 8, q[1] | ((h0 >> 4) & 7) << 8, q[2] | (h1 & 7) << 8, q[3] | ((h1 >> 4) & 7) << 8),
                   _mm256_loadu_si256((const __m256i *)tokd_iq1m_shift8[neg]), pick_halves(ls16, ib));
}
/* The fp16 super-block scale: IQ1_M's is the top nibbles of its four scale words. */
A2 INLINE float iq1_m_d(const tokd_block_iq1_m *x) {
    uint16_t sc[4];
    memcpy(sc, x->scales, 8);
    return h2f((uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0xF0) | ((sc[2] >> 4) & 0xF00) | (sc[3] & 0xF000)));
}

/* Each super-block's 16 half multipliers for pick_halves (unused where a sub-block's
 * scale comes with its sign bits). */
A2 INLINE __m256i iq2_xxs_scales(const tokd_block_iq2_xxs *x) { (void)x; return _mm256_setzero_si256(); }
A2 INLINE __m256i iq3_xxs_scales(const tokd_block_iq3_xxs *x) { (void)x; return _mm256_setzero_si256(); }
A2 INLINE __m256i iq1_s_scales(const tokd_block_iq1_s *x) { (void)x; return _mm256_setzero_si256(); }
A2 INLINE __m256i iq1_m_scales(const tokd_block_iq1_m *x) { /* half h: bits 3(h%4).. of word h/4 */
    const uint64_t w = tokd_ld_u64(x->scales);
    uint8_t ls[16];
    for (int h = 0; h < 16; h++) ls[h] = (uint8_t)(2 * ((w >> (16 * (h / 4) + 3 * (h % 4))) & 7) + 1);
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ls));
}
A2 INLINE __m256i iq2_xs_scales(const tokd_block_iq2_xs *x) { return nibble_scales(x->scales); }
A2 INLINE __m256i iq2_s_scales(const tokd_block_iq2_s *x) { return nibble_scales(x->scales); }
A2 INLINE __m256i iq3_s_scales(const tokd_block_iq3_s *x) { /* one nibble a sub-block, for both its halves */
    const __m128i v = _mm_cvtsi32_si128((int)tokd_ld_u32(x->scales)), m = _mm_set1_epi8(15);
    const __m128i n = _mm_unpacklo_epi8(_mm_and_si128(v, m), _mm_and_si128(_mm_srli_epi16(v, 4), m));
    const __m128i d = _mm_unpacklo_epi8(n, n);
    return _mm256_broadcastsi128_si256(_mm_add_epi8(_mm_add_epi8(d, d), _mm_set1_epi8(1)));
}

#endif
