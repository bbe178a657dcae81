/* act_quant.c — the K-quant activation quantiser (Q8_K) with AVX-512 and AVX2 loops.
 *
 * Every product with a K-quant weight matrix first quantises its activation row to Q8_K
 * (kernels/packed.c's preparations). quants.c's tokd_q8_K_from_float states it in scalar
 * code: a compare chain over 256 values for the largest magnitude, then a rounding per
 * value; it took ~9 us per 2048-wide row, ~9 % of a Q4_K_M decode step. The loops here
 * give its bytes exactly:
 *   - amax is the vector max of |x| (NaN lanes skipped: max returns its second operand,
 *     the running maximum, when the first is NaN; the statement's `>` skips NaN too);
 *   - the signed value kept is the first x (in index order) whose |x| equals amax, as the
 *     statement's strict `>` keeps the first;
 *   - q = clamp(round-to-nearest-even(iscale * x), -127, 127): cvtps2dq rounds to nearest
 *     even under the default MXCSR, NaN converts to INT_MIN and clamps to -127, as the
 *     statement's round_even clamps NaN low;
 *   - the sums of 16 are exact integers;
 *   - a block whose amax is so small that -127 / max overflows to infinity (below
 *     ~1e-39: the statement then clamps +-inf and NaN products) goes to the statement. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/quants.h"
#include "kernels/types.h"

#define TGT512 __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw")))
#define TGT256 __attribute__((target("avx2,fma,f16c")))

TGT512 static void q8_K_block_512(const float *x, tokd_block_q8_K *y) {
    __m512 v[16];
    __m512 m = _mm512_setzero_ps();
    for (int i = 0; i < 16; i++) {
        v[i] = _mm512_loadu_ps(x + 16 * i);
        m = _mm512_max_ps(_mm512_abs_ps(v[i]), m);
    }
    const float amax = _mm512_reduce_max_ps(m);
    if (amax == 0 || !isfinite(amax)) {
        memset(y, 0, sizeof *y);
        return;
    }
    const __m512 va = _mm512_set1_ps(amax);
    float max = amax;
    for (int i = 0; i < 16; i++) {
        __mmask16 k = _mm512_cmp_ps_mask(_mm512_abs_ps(v[i]), va, _CMP_EQ_OQ);
        if (k) {
            max = x[16 * i + __builtin_ctz(k)];
            break;
        }
    }
    const float iscale = -127.f / max;
    if (isinf(iscale)) { /* amax below ~1e-38: the statement's clamps of +-inf products */
        tokd_q8_K_from_float(x, y, TOKD_QK_K);
        return;
    }
    const __m512 vs = _mm512_set1_ps(iscale);
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    for (int i = 0; i < 16; i++) {
        __m512i q = _mm512_min_epi32(hi, _mm512_max_epi32(lo, _mm512_cvtps_epi32(_mm512_mul_ps(v[i], vs))));
        _mm_storeu_si128((__m128i *)(y->qs + 16 * i), _mm512_cvtepi32_epi8(q));
        y->bsums[i] = (int16_t)_mm512_reduce_add_epi32(q);
    }
    y->d = 1 / iscale;
}

TGT256 static inline __m256 abs256(__m256 a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }

TGT256 static void q8_K_block_256(const float *x, tokd_block_q8_K *y) {
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 32; i++) m = _mm256_max_ps(abs256(_mm256_loadu_ps(x + 8 * i)), m);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    if (amax == 0 || !isfinite(amax)) {
        memset(y, 0, sizeof *y);
        return;
    }
    const __m256 va = _mm256_set1_ps(amax);
    float max = amax;
    for (int i = 0; i < 32; i++) {
        int k = _mm256_movemask_ps(_mm256_cmp_ps(abs256(_mm256_loadu_ps(x + 8 * i)), va, _CMP_EQ_OQ));
        if (k) {
            max = x[8 * i + __builtin_ctz((unsigned)k)];
            break;
        }
    }
    const float iscale = -127.f / max;
    if (isinf(iscale)) {
        tokd_q8_K_from_float(x, y, TOKD_QK_K);
        return;
    }
    const __m256 vs = _mm256_set1_ps(iscale);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    for (int i = 0; i < 16; i++) {
        __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * i), vs));
        __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * i + 8), vs));
        a = _mm256_min_epi32(hi, _mm256_max_epi32(lo, a));
        b = _mm256_min_epi32(hi, _mm256_max_epi32(lo, b));
        /* packs works within 128-bit lanes: [a0-3 b0-3 | a4-7 b4-7] -> index order */
        __m256i p16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), _MM_SHUFFLE(3, 1, 2, 0));
        _mm_storeu_si128((__m128i *)(y->qs + 16 * i),
                         _mm_packs_epi16(_mm256_castsi256_si128(p16), _mm256_extracti128_si256(p16, 1)));
        __m256i s = _mm256_add_epi32(a, b);
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
        y->bsums[i] = (int16_t)_mm_cvtsi128_si32(s4);
    }
    y->d = 1 / iscale;
}

void tokd_q8_K_quantize(const float *src, void *dst, int64_t n) {
    tokd_block_q8_K *y = dst;
    if (tokd_use_f32_avx512()) {
        for (int64_t b = 0; b < n / TOKD_QK_K; b++) q8_K_block_512(src + b * TOKD_QK_K, &y[b]);
        return;
    }
    if (tokd_use_f32_avx2()) {
        for (int64_t b = 0; b < n / TOKD_QK_K; b++) q8_K_block_256(src + b * TOKD_QK_K, &y[b]);
        return;
    }
    tokd_q8_K_from_float(src, dst, n);
}

int tokd_q8_K_quantize_avx2(const float *src, void *dst, int64_t n) {
    if (!tokd_cpu_avx2()) return -1;
    tokd_block_q8_K *y = dst;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) q8_K_block_256(src + b * TOKD_QK_K, &y[b]);
    return 0;
}
