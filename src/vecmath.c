/* vecmath.c — see vecmath.h: the scalar statements and their AVX-512 and AVX2 loops. */
#include "vecmath.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/types.h"
#include "util.h"

static inline float pow2i(int32_t k) { /* 2^k for -126 <= k <= 127 */
    uint32_t b = (uint32_t)(k + 127) << 23;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

float tokd_exp(float x) {
    const float n = fmaf(x, EXP_LOG2E, EXP_SHIFT) - EXP_SHIFT;
    const float b = fmaf(-n, EXP_LN2_LO, fmaf(-n, EXP_LN2_HI, x));
    const float u = b * b;
    const float hi = fmaf(fmaf(EXP_C5, b, EXP_C4), u, fmaf(EXP_C3, b, EXP_C2));
    const float j = fmaf(hi, u, fmaf(EXP_C1, b, 1.0f));
    if (fabsf(n) > EXP_N_MAX) return n > 0.0f ? INFINITY : 0.0f;
    if (isnan(n)) return j;
    const int32_t k = (int32_t)n, a = k < -126 ? -126 : k > 127 ? 127 : k;
    return (j * pow2i(k - a)) * pow2i(a); /* the first product exact: one rounding */
}

float tokd_silu(float g) { return g / (1.0f + tokd_exp(-g)); }

TOKD_VECMATH_TGT static void exp_512(const float *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, tokd_exp16(_mm512_loadu_ps(x + i)));
    for (; i < n; i++) y[i] = tokd_exp(x[i]);
}

/* 0 - x, as ggml negates (the sign of a zero does not reach the result). */
TOKD_VECMATH_TGT static void swiglu_512(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(g + i);
        const __m512 s = _mm512_div_ps(x, _mm512_add_ps(one, tokd_exp16(_mm512_sub_ps(zero, x))));
        _mm512_storeu_ps(g + i, _mm512_mul_ps(s, _mm512_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = tokd_silu(g[i]) * u[i];
}

TOKD_VECMATH_TGT256 static void exp_256(const float *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, tokd_exp8(_mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] = tokd_exp(x[i]);
}

TOKD_VECMATH_TGT256 static void swiglu_256(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, tokd_exp8(_mm256_sub_ps(zero, x))));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = tokd_silu(g[i]) * u[i];
}

/* ---- RMSNorm ---- */

static float rms_scale(double sum, int32_t n, float eps) {
    float mean = (float)(sum / n);
    return 1.0f / sqrtf(mean + eps);
}

void tokd_rmsnorm_ref(float *y, const float *x, const float *w, int32_t n, float eps) {
    double acc[32] = {0};
    for (int32_t i = 0; i < n; i++) acc[i % 32] += (double)(x[i] * x[i]);
    double b[8], c[4], d[2];
    for (int l = 0; l < 8; l++) b[l] = (acc[l] + acc[l + 8]) + (acc[l + 16] + acc[l + 24]);
    for (int l = 0; l < 4; l++) c[l] = b[l] + b[l + 4];
    for (int l = 0; l < 2; l++) d[l] = c[l] + c[l + 2];
    float s = rms_scale(d[0] + d[1], n, eps);
    for (int32_t i = 0; i < n; i++) y[i] = (x[i] * s) * w[i];
}

/* s0..s3 hold lanes 0-7, 8-15, 16-23, 24-31; the tail is loaded masked (zeros add
 * nothing: every partial sum is +0 or positive). */
TOKD_VECMATH_TGT static void rmsnorm_512(float *y, const float *x, const float *w, int32_t n, float eps) {
    __m512d s0 = _mm512_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    for (int32_t i = 0; i < n; i += 32) {
        int32_t left = n - i;
        __mmask16 ma = left >= 16 ? 0xFFFF : (__mmask16)((1u << left) - 1);
        __mmask16 mb = left >= 32 ? 0xFFFF : left <= 16 ? 0 : (__mmask16)((1u << (left - 16)) - 1);
        __m512 a = _mm512_maskz_loadu_ps(ma, x + i), b = _mm512_maskz_loadu_ps(mb, x + i + 16);
        a = _mm512_mul_ps(a, a);
        b = _mm512_mul_ps(b, b);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(a)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1))));
        s2 = _mm512_add_pd(s2, _mm512_cvtps_pd(_mm512_castps512_ps256(b)));
        s3 = _mm512_add_pd(s3, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(b), 1))));
    }
    __m512d t = _mm512_add_pd(_mm512_add_pd(s0, s1), _mm512_add_pd(s2, s3));
    __m256d u = _mm256_add_pd(_mm512_castpd512_pd256(t), _mm512_extractf64x4_pd(t, 1));
    __m128d v = _mm_add_pd(_mm256_castpd256_pd128(u), _mm256_extractf128_pd(u, 1));
    const __m512 vs = _mm512_set1_ps(rms_scale(_mm_cvtsd_f64(_mm_add_sd(v, _mm_unpackhi_pd(v, v))), n, eps));
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vs), _mm512_loadu_ps(w + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vs), _mm512_maskz_loadu_ps(m, w + i)));
    }
}

/* s[j] holds lanes 4j..4j+3; the fold (l + l+8) + (l+16 + l+24) for lanes 0-3 is
 * (s0 + s2) + (s4 + s6), for lanes 4-7 (s1 + s3) + (s5 + s7). */
TOKD_VECMATH_TGT256 static void rmsnorm_256(float *y, const float *x, const float *w, int32_t n, float eps) {
    __m256d s[8];
    for (int j = 0; j < 8; j++) s[j] = _mm256_setzero_pd();
    int32_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int j = 0; j < 4; j++) {
            __m256 a = _mm256_loadu_ps(x + i + 8 * j);
            a = _mm256_mul_ps(a, a);
            s[2 * j] = _mm256_add_pd(s[2 * j], _mm256_cvtps_pd(_mm256_castps256_ps128(a)));
            s[2 * j + 1] = _mm256_add_pd(s[2 * j + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));
        }
    double acc[32];
    for (int j = 0; j < 8; j++) _mm256_storeu_pd(acc + 4 * j, s[j]);
    for (; i < n; i++) acc[i % 32] += (double)(x[i] * x[i]);
    for (int j = 0; j < 8; j++) s[j] = _mm256_loadu_pd(acc + 4 * j);
    __m256d b0 = _mm256_add_pd(_mm256_add_pd(s[0], s[2]), _mm256_add_pd(s[4], s[6]));
    __m256d b1 = _mm256_add_pd(_mm256_add_pd(s[1], s[3]), _mm256_add_pd(s[5], s[7]));
    __m256d c = _mm256_add_pd(b0, b1);
    __m128d d = _mm_add_pd(_mm256_castpd256_pd128(c), _mm256_extractf128_pd(c, 1));
    const __m256 vs = _mm256_set1_ps(rms_scale(_mm_cvtsd_f64(_mm_add_sd(d, _mm_unpackhi_pd(d, d))), n, eps));
    const float sc = _mm256_cvtss_f32(vs);
    i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
    for (; i < n; i++) y[i] = (x[i] * sc) * w[i];
}

void tokd_rmsnorm(float *y, const float *x, const float *w, int32_t n, float eps) {
    if (tokd_use_f32_avx512()) {
        rmsnorm_512(y, x, w, n, eps);
        return;
    }
    if (tokd_use_f32_avx2()) {
        rmsnorm_256(y, x, w, n, eps);
        return;
    }
    tokd_rmsnorm_ref(y, x, w, n, eps);
}

int tokd_rmsnorm_avx2(float *y, const float *x, const float *w, int32_t n, float eps) {
    if (!tokd_cpu_avx2()) return -1;
    rmsnorm_256(y, x, w, n, eps);
    return 0;
}

void tokd_exp_n(const float *x, float *y, int64_t n) {
    if (tokd_use_f32_avx512()) {
        exp_512(x, y, n);
        return;
    }
    if (tokd_use_f32_avx2()) {
        exp_256(x, y, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] = tokd_exp(x[i]);
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

void tokd_swiglu_cols(float *g, const float *u, int64_t n, int64_t col0, int64_t width) {
    const int64_t body = width - width % 16, split = body - col0 < 0 ? 0 : body - col0 < n ? body - col0 : n;
    tokd_swiglu_n(g, u, split);
    for (int64_t i = split; i < n; i++) {
        const float s = g[i] / (1.0f + expf(-g[i]));
        g[i] = s * u[i];
    }
}

int tokd_exp_n_avx2(const float *x, float *y, int64_t n) {
    if (!tokd_cpu_avx2()) return -1;
    exp_256(x, y, n);
    return 0;
}

int tokd_swiglu_n_avx2(float *g, const float *u, int64_t n) {
    if (!tokd_cpu_avx2()) return -1;
    swiglu_256(g, u, n);
    return 0;
}

/* ---- element-wise moves ---- */

TOKD_VECMATH_TGT static void add_512(float *a, const float *b, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(a + i, _mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
    for (; i < n; i++) a[i] += b[i];
}
TOKD_VECMATH_TGT256 static void add_256(float *a, const float *b, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(a + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    for (; i < n; i++) a[i] += b[i];
}
TOKD_VECMATH_TGT static void to_f16_512(uint16_t *dst, const float *src, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) dst[i] = tokd_f32_to_f16(src[i]);
}
TOKD_VECMATH_TGT256 static void to_f16_256(uint16_t *dst, const float *src, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) dst[i] = tokd_f32_to_f16(src[i]);
}

void tokd_add_n(float *a, const float *b, int64_t n) {
    if (tokd_use_f32_avx512()) add_512(a, b, n);
    else if (tokd_use_f32_avx2()) add_256(a, b, n);
    else
        for (int64_t i = 0; i < n; i++) a[i] += b[i];
}

void tokd_f32_to_f16_n(uint16_t *dst, const float *src, int64_t n) {
    if (tokd_use_f32_avx512()) to_f16_512(dst, src, n);
    else if (tokd_use_f32_avx2()) to_f16_256(dst, src, n);
    else
        for (int64_t i = 0; i < n; i++) dst[i] = tokd_f32_to_f16(src[i]);
}

int tokd_add_n_avx2(float *a, const float *b, int64_t n) {
    if (!tokd_cpu_avx2()) return -1;
    add_256(a, b, n);
    return 0;
}

int tokd_f32_to_f16_n_avx2(uint16_t *dst, const float *src, int64_t n) {
    if (!tokd_cpu_avx2()) return -1;
    to_f16_256(dst, src, n);
    return 0;
}
