/* vecmath.c — see vecmath.h: the scalar statements and their AVX-512 and AVX2 loops. */
#include "vecmath.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/types.h"

static inline float pow2i(int32_t k) { /* 2^k for -126 <= k <= 127 */
    uint32_t b = (uint32_t)(k + 127) << 23;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

float tokd_exp_neg(float x) {
    x = x < -104.0f ? -104.0f : x; /* NaN stays NaN, as in the vector code */
    x = x > 0.0f ? 0.0f : x;
    float y = x * EXP_LOG2E;
    float t = y + EXP_MAGIC;
    float n = t - EXP_MAGIC;
    uint32_t tb;
    memcpy(&tb, &t, 4);
    int32_t ni = (int32_t)(tb & 0x007fffff) - 0x00400000;
    float r = fmaf(n, -EXP_LN2_HI, x);
    r = fmaf(n, -EXP_LN2_LO, r);
    float p = EXP_C7;
    p = fmaf(p, r, EXP_C6);
    p = fmaf(p, r, EXP_C5);
    p = fmaf(p, r, EXP_C4);
    p = fmaf(p, r, EXP_C3);
    p = fmaf(p, r, EXP_C2);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    int32_t n1 = ni >> 1, n2 = ni - n1; /* both in [-75, 0]: 2^n1, 2^n2 are normal */
    p = p * pow2i(n1);
    return p * pow2i(n2);
}

float tokd_silu(float g) {
    float e = tokd_exp_neg(g < 0.0f ? g : -g);
    float den = 1.0f + e;
    if (g >= 0.0f) return g / den;
    float num = g * e;
    return num / den;
}

TOKD_VECMATH_TGT static void exp_neg_512(const float *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, tokd_exp_neg16(_mm512_loadu_ps(x + i)));
    for (; i < n; i++) y[i] = tokd_exp_neg(x[i]);
}

TOKD_VECMATH_TGT static void swiglu_512(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    const __m512 one = _mm512_set1_ps(1.0f);
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(g + i);
        __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
        __m512 e = tokd_exp_neg16(_mm512_mask_sub_ps(x, (__mmask16)~neg, _mm512_setzero_ps(), x)); /* -|x| */
        __m512 den = _mm512_add_ps(one, e);
        __m512 num = _mm512_mask_mul_ps(x, neg, x, e);
        __m512 s = _mm512_div_ps(num, den);
        _mm512_storeu_ps(g + i, _mm512_mul_ps(s, _mm512_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = tokd_silu(g[i]) * u[i];
}

TOKD_VECMATH_TGT256 static void exp_neg_256(const float *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, tokd_exp_neg8(_mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] = tokd_exp_neg(x[i]);
}

/* swiglu_512 with the masks as blends: -|x| is 0 - x where x is not below 0 (0 - 0 gives
 * +0 where the statement has -0; tokd_exp_neg(+0) and tokd_exp_neg(-0) are both 1), and
 * the numerator is x * E below 0, x elsewhere (NaN included, as in the statement). */
TOKD_VECMATH_TGT256 static void swiglu_256(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256 neg = _mm256_cmp_ps(x, zero, _CMP_LT_OQ);
        __m256 e = tokd_exp_neg8(_mm256_blendv_ps(_mm256_sub_ps(zero, x), x, neg));
        __m256 den = _mm256_add_ps(one, e);
        __m256 num = _mm256_blendv_ps(x, _mm256_mul_ps(x, e), neg);
        __m256 s = _mm256_div_ps(num, den);
        _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = tokd_silu(g[i]) * u[i];
}


void tokd_exp_neg_n(const float *x, float *y, int64_t n) {
    if (tokd_use_f32_avx512()) {
        exp_neg_512(x, y, n);
        return;
    }
    if (tokd_use_f32_avx2()) {
        exp_neg_256(x, y, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] = tokd_exp_neg(x[i]);
}

void tokd_swiglu_n(float *g, const float *u, int64_t n) {
    if (tokd_use_f32_avx512()) {
        swiglu_512(g, u, n);
        return;
    }
    if (tokd_use_f32_avx2()) {
        swiglu_256(g, u, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) g[i] = tokd_silu(g[i]) * u[i];
}

int tokd_exp_neg_n_avx2(const float *x, float *y, int64_t n) {
    if (!tokd_cpu_avx2()) return -1;
    exp_neg_256(x, y, n);
    return 0;
}

int tokd_swiglu_n_avx2(float *g, const float *u, int64_t n) {
    if (!tokd_cpu_avx2()) return -1;
    swiglu_256(g, u, n);
    return 0;
}
