/* packed_avx2.c — the packed Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q2_K to Q6_K products (packed.h) with
 * AVX2, for CPUs without AVX-512 VNNI, and their 32-weight types' activation row
 * preparation.
 *
 * A 64-byte vector of the packed layout holds four weights for each of 16 rows; here it
 * is two 32-byte halves, rows 0-7 and rows 8-15, walked one after the other. vpdpbusd's
 * step (sum of four u8 x s8 products added to an int32 lane) becomes vpmaddubsw (pairs
 * of products as int16: |2 * 15 * 128| fits, |2 * 31 * 128| for Q5_0 too, so it never
 * saturates) and vpmaddwd with ones (the two pairs as int32), which is the same integer;
 * a block sum starts at the correction, so the result is packed.h's contract bit for
 * bit, as in packed_avx512.c: out = fmaf(dx * dy, (float)isum, out) per block, in block
 * order.
 *
 * Q4_1 and Q5_1 (q4_1_5_1_tile) sum their unsigned values as Q4_0 and Q5_0 with no
 * correction, then add each block's min term, fmaf(mx, sy, out), after the scale term.
 *
 * CPUs with AVX-VNNI (VEX-encoded vpdpbusd on 256-bit vectors: Intel since Alder Lake,
 * AMD since Zen 5) get the same kernel with that one instruction for the two, the same
 * integer again.
 *
 * Q2_K's 2-bit, Q3_K's 3-bit (q + 4 <= 7), Q4_K's nibbles, Q5_K's 5-bit and Q6_K's
 * 6-bit weights times Q8_K's quants (-128..127) never saturate vpmaddubsw either
 * (|2 * 63 * 128| < 2^15); their kernels keep packed_avx512.c's arithmetic (the bit
 * merges with a shift, an and and an or in place of vpternlogd; Q2_K and Q3_K through
 * Q6_K's tile, as there), so they give the same bits.
 *
 * Q8_0's VNNI layout (unsigned bytes plus 128) would saturate vpmaddubsw, so the AVX2
 * form packs its quants as they are, signed, and each step multiplies |w| by the
 * activation with w's sign (packed_avx2_gemm.h). tokd_packed_prep_avx2 is tokd_packed_prep_avx512 eight lanes wide. */
#include <immintrin.h>
#include <string.h>

#include "kernels/packed.h"
#include "util.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define TGT_VNNI __attribute__((target("avx2,fma,f16c,avxvnni")))
#define INLINE static inline __attribute__((always_inline))
#define MAX_R 4
#define BLOCK_BYTES (16 * 18) /* one block of a 16-row group: 16 fp16 scales, 4 x 64 quant bytes */
#define Q5_0_BLOCK_BYTES (16 * 22) /* Q5_0: Q4_0's block plus 64 bytes of fifth bits */
#define Q4_1_BLOCK_BYTES (16 * 20) /* Q4_1: 16 d, 16 m, Q4_0's 4 vectors (packed.h) */
#define Q5_1_BLOCK_BYTES (16 * 24) /* Q5_1: Q4_1's block plus 64 bytes of fifth bits */
#define Q4K_SB 2304           /* Q4_K: packed bytes of one super-block of 16 rows (packed.c) */
#define Q5K_SB (Q4K_SB + 512) /* Q5_K: Q4_K's super-block plus 8 vectors of fifth bits */
#define Q4K_ACT 276           /* Q4_K, Q5_K: prepared activation bytes per super-block */
#define Q6K_SB (16 * 210)     /* Q6_K: packed bytes of one super-block of 16 rows */
#define Q8_0_BLOCK_BYTES (16 * 34) /* Q8_0: one block of a 16-row group: 16 fp16 scales, 8 x 64 quant bytes */
#define Q3K_SB (32 + 256 + 1024 + 512) /* Q3_K: d, int8 scales, 16 two-bit and 8 high-bit vectors */
#define Q2K_SB (16 * 84)      /* Q2_K: packed bytes of one super-block of 16 rows */
#define Q6K_ACT 324           /* Q6_K, Q3_K, Q2_K: prepared activation bytes per super-block */
enum { K16_Q6, K16_Q3, K16_Q2 }; /* packed_avx2_gemm.h's k16_tile: the three layouts of 16-weight sub-blocks */
/* How a tile prefetches its group's lines (packed_avx2_gemm.h, PK_GEMM says when each):
 * PK_PF_TILE, prefill's tile by tile (each tile's own scheme); PK_PF_STREAM, the first
 * row tile of a batched decode, which streams the group from memory; PK_PF_NONE, the
 * later tiles, which find it in cache. One-row decode prefetches its own way. */
enum { PK_PF_NONE, PK_PF_STREAM, PK_PF_TILE };
#define PK_STREAM_MAX_ROWS 16 /* activation rows up to which PK_GEMM streams group by group (matmul.h's TOKD_DECODE_MAX_ROWS) */
/* PK_PF_STREAM's distance. On the AVX2-only Zen 3, two sequences (`tokd bench -s 2`,
 * alternated, four runs each): Q8_0 50.6-52.6 tok/s at 4 KB, 49.1-55.3 at 6 KB,
 * 46.6-55.7 at 8 KB (medians 50.8, 54.6, 54.3); Q4_0 and Q4_K_M alike at 4 and 6 KB. */
#define TOKD_PK_STREAM_PF TOKD_PK_PF_DIST


/* The kernel, written once (packed_avx2_gemm.h) and compiled per instruction set: the
 * functions of one form must share its target attribute to inline into each other. */
#define PK_NAME(x) x##_avx2
#define PK_TARGET TGT
#define PK_VNNI 0
#include "kernels/packed_avx2_gemm.h"
#undef PK_NAME
#undef PK_TARGET
#undef PK_VNNI

#define PK_NAME(x) x##_avxvnni
#define PK_TARGET TGT_VNNI
#define PK_VNNI 1
#include "kernels/packed_avx2_gemm.h"
#undef PK_NAME
#undef PK_TARGET
#undef PK_VNNI

/* Activation row preparation (packed.h), the bytes of tokd_packed_prep_ref: amax with
 * vmaxps's operand order so that a NaN |x| is passed over as fmaxf does, q = vcvtps2dq
 * (round to even; NaN becomes INT_MIN, clamped to -127 as the scalar quantiser does),
 * d = amax/127 through fp16. */
TGT void tokd_packed_prep_blocks_avx2(const float *x, void *dst, int64_t K, int64_t b0, int64_t b1, int32_t bias) {
    const int64_t nb = K / 32;
    uint8_t *qs = dst;
    float *dy = (float *)(qs + nb * 32);
    int32_t *corr = (int32_t *)(dy + nb);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    x += b0 * 32;
    for (int64_t b = b0; b < b1; b++, x += 32) {
        __m256 v[4], m = _mm256_setzero_ps();
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(x + 8 * i);
            m = _mm256_max_ps(_mm256_andnot_ps(sign, v[i]), m);
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
        const __m256 id = _mm256_set1_ps(amax != 0 ? 127.f / amax : 0.0f);
        __m256i q[4], sum = _mm256_setzero_si256();
        for (int i = 0; i < 4; i++) {
            q[i] = _mm256_min_epi32(hi, _mm256_max_epi32(lo, _mm256_cvtps_epi32(_mm256_mul_ps(v[i], id))));
            sum = _mm256_add_epi32(sum, q[i]);
        }
        /* int32 -> int8 in order: the packs work within 128-bit lanes, a permute undoes it */
        const __m256i w01 = _mm256_packs_epi32(q[0], q[1]), w23 = _mm256_packs_epi32(q[2], q[3]);
        const __m256i b8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(qs + b * 32), b8);
        dy[b] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(amax / 127.f), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))); /* F16C: IEEE, as tokd_f32_to_f16 */
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
        const int32_t qsum = _mm_cvtsi128_si32(s4);
        if (bias == TOKD_PK_BIAS_S) { /* Q4_1: Q8_1's s, from d before its rounding */
            const float sy = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(amax / 127.f * (float)qsum),
                                                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
            memcpy(&corr[b], &sy, 4);
        } else {
            corr[b] = -bias * qsum;
        }
    }
}
void tokd_packed_prep_avx2(const float *x, void *dst, int64_t K, int32_t bias) {
    tokd_packed_prep_blocks_avx2(x, dst, K, 0, K / 32, bias);
}
