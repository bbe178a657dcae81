/* vecmath.h — the transcendental functions and row reductions of the forward pass, in one
 * fixed form.
 *
 * libm's expf is scalar and its last bit is the library's business. These are stated
 * once as a sequence of float operations (scalar code in vecmath.c) and computed again
 * 16 lanes wide with AVX-512 and 8 lanes wide with AVX2 + FMA by the same operations, so
 * every path gives the same bits and batch invariance never depends on which ran. */
#ifndef TOKD_VECMATH_H
#define TOKD_VECMATH_H

#include <immintrin.h>
#include <stdint.h>

/* exp(x) for x <= 0 (larger x is clamped to 0): Cody–Waite reduction by ln 2, a degree-7
 * polynomial, scaling by 2^n in two exact steps. Within 2 ulp of exp; 0 below -104. */
float tokd_exp_neg(float x);
/* y[i] = tokd_exp_neg(x[i]) (16 at a time where the CPU has AVX-512, 8 with AVX2; the
 * same bits). */
void tokd_exp_neg_n(const float *x, float *y, int64_t n);

/* SwiGLU in place: g[i] = silu(g[i]) * u[i], silu(g) = g / (1 + E) for g >= 0 and
 * (g * E) / (1 + E) below, E = tokd_exp_neg(-|g|) (never overflows). */
float tokd_silu(float g);
void tokd_swiglu_n(float *g, const float *u, int64_t n);

/* RMSNorm of one row: y[i] = (x[i] * s) * w[i], s = 1 / sqrtf(mean + eps), mean =
 * (float)(S / n). S, the sum of the squares (each x[i] * x[i] rounded to float), is taken
 * in double over 32 lanes: lane i % 32 accumulates in index order, then the lanes fold
 * l + 8 and l + 24 into l + 16 and l ((l + l+8) + (l+16 + l+24)), then l + 4, l + 2,
 * l + 1. The reference implementation sums in index order; 32 independent chains cost
 * ~0.2 us per 2048-wide row instead of ~2.9 us (a decode step has 2 per layer), and the
 * result differs from index order only in the double's last bits. */
void tokd_rmsnorm(float *y, const float *x, const float *w, int32_t n, float eps);
/* The scalar statement of the same. */
void tokd_rmsnorm_ref(float *y, const float *x, const float *w, int32_t n, float eps);

/* The forward pass's element-wise moves. a[i] += b[i]: one rounding per element, the same
 * on every path. dst[i] = src[i] as F16 bits (the KV cache's writes), rounded to nearest
 * even as tokd_f32_to_f16 (util.h) rounds: F16C's vcvtps2ph gives its bits for every
 * value but a NaN, which stays a NaN of the same sign (the payload F16C keeps may differ).
 * GCC 12 at -O2 leaves the plain loops scalar: ~1 us per 2048-wide residual add. */
void tokd_add_n(float *a, const float *b, int64_t n);
void tokd_f32_to_f16_n(uint16_t *dst, const float *src, int64_t n);

/* The AVX2 loops of the five, whatever path TOKD_KERNELS selected (for tests): 0, or -1
 * (nothing written) where the CPU lacks AVX2, FMA or F16C. */
int tokd_exp_neg_n_avx2(const float *x, float *y, int64_t n);
int tokd_swiglu_n_avx2(float *g, const float *u, int64_t n);
int tokd_rmsnorm_avx2(float *y, const float *x, const float *w, int32_t n, float eps);
int tokd_add_n_avx2(float *a, const float *b, int64_t n);
int tokd_f32_to_f16_n_avx2(uint16_t *dst, const float *src, int64_t n);

/* ---- for the SIMD code of other modules ---- */
#define EXP_LOG2E 1.44269504088896341f
#define EXP_LN2_HI 0.693359375f     /* 9 significant bits: n * LN2_HI is exact for |n| <= 2^15 */
#define EXP_LN2_LO -2.12194440e-4f  /* ln 2 - LN2_HI */
#define EXP_MAGIC 12582912.0f       /* 1.5 * 2^23: adding it rounds to an integer, ties to even */
#define EXP_C7 (1.0f / 5040.0f)
#define EXP_C6 (1.0f / 720.0f)
#define EXP_C5 (1.0f / 120.0f)
#define EXP_C4 (1.0f / 24.0f)
#define EXP_C3 (1.0f / 6.0f)
#define EXP_C2 0.5f


#define TOKD_VECMATH_TGT __attribute__((target("avx2,fma,f16c,avx512f,avx512vl")))
TOKD_VECMATH_TGT static inline __attribute__((always_inline)) __m512 tokd_exp_neg16(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x); /* second operand returned when it is NaN */
    x = _mm512_min_ps(_mm512_setzero_ps(), x);
    __m512 y = _mm512_mul_ps(x, _mm512_set1_ps(EXP_LOG2E));
    __m512 t = _mm512_add_ps(y, _mm512_set1_ps(EXP_MAGIC));
    __m512 n = _mm512_sub_ps(t, _mm512_set1_ps(EXP_MAGIC));
    __m512i ni = _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(t), _mm512_set1_epi32(0x007fffff)),
                                  _mm512_set1_epi32(0x00400000));
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-EXP_LN2_HI), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(EXP_C7);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_C6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512i n1 = _mm512_srai_epi32(ni, 1), n2 = _mm512_sub_epi32(ni, n1);
    const __m512i bias = _mm512_set1_epi32(127);
    p = _mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23)));
    return _mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23)));
}

/* The same operations 8 lanes wide (AVX2 + FMA; _mm256_max_ps / _mm256_min_ps, like the
 * 512-bit ones, return the second operand when either is NaN). */
#define TOKD_VECMATH_TGT256 __attribute__((target("avx2,fma,f16c")))
TOKD_VECMATH_TGT256 static inline __attribute__((always_inline)) __m256 tokd_exp_neg8(__m256 x) {
    x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x);
    x = _mm256_min_ps(_mm256_setzero_ps(), x);
    __m256 y = _mm256_mul_ps(x, _mm256_set1_ps(EXP_LOG2E));
    __m256 t = _mm256_add_ps(y, _mm256_set1_ps(EXP_MAGIC));
    __m256 n = _mm256_sub_ps(t, _mm256_set1_ps(EXP_MAGIC));
    __m256i ni = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(t), _mm256_set1_epi32(0x007fffff)),
                                  _mm256_set1_epi32(0x00400000));
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-EXP_LN2_HI), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(EXP_C7);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_C6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    p = _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23)));
    return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23)));
}

#endif
