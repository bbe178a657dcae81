/* vecmath.h — the transcendental functions and row reductions of the forward pass, in one
 * fixed form.
 *
 * libm's expf is scalar and its last bit is the library's business. These are stated
 * once as a sequence of float operations (scalar code in vecmath.c) and computed again
 * 16 lanes wide with AVX-512 and 8 lanes wide with AVX2 + FMA by the same operations, so
 * every path gives the same bits and batch invariance never depends on which ran. The
 * exponential is the one ggml's CPU backend computes 16 lanes wide on AVX-512 (its
 * softmax and SiLU), so that attention and SwiGLU give llama.cpp's bits. The one place
 * libm's expf is used is where ggml itself uses it, SiLU at the tail of a row whose width
 * is not a multiple of 16 (tokd_swiglu_cols); there tokd and llama.cpp agree where they
 * run on the same C library (the golden files and CI: Debian 12's glibc). */
#ifndef TOKD_VECMATH_H
#define TOKD_VECMATH_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

/* exp(x), as ggml's AVX-512 expf computes it (the constants are its own):
 *   n = (x * log2 e + 1.5 * 2^23, one fused rounding) - 1.5 * 2^23   (x / ln 2 rounded to
 *       an integer, ties to even);
 *   b = x - n * LN2_HI - n * LN2_LO   (two fused steps; LN2_HI is short, n * LN2_HI exact);
 *   j = ((C5 b + C4) b^2 + (C3 b + C2)) b^2 + (C1 b + 1)   (each bracket fused);
 *   exp = j * 2^n rounded once (AVX-512's vscalefps; elsewhere two multiplications by
 *         powers of two of which only the second can round), but 0 where n < -192 and
 *         +inf where n > 192. NaN in, NaN out.
 * Within 2.5 ulp of exp over the normal range (2.2 measured, test_vecmath). */
float tokd_exp(float x);
/* y[i] = tokd_exp(x[i]) (16 at a time where the CPU has AVX-512, 8 with AVX2; the same
 * bits). */
void tokd_exp_n(const float *x, float *y, int64_t n);

/* SwiGLU in place: g[i] = silu(g[i]) * u[i], silu(g) = g / (1 + tokd_exp(-g)) (ggml's
 * form: below about -88 the exponential is +inf and silu -0). */
float tokd_silu(float g);
void tokd_swiglu_n(float *g, const float *u, int64_t n);
/* The FFN's SwiGLU over columns [col0, col0 + n) of a row `width` wide (g, u at column
 * col0): tokd_swiglu_n, except for the last width % 16 columns of the row, where ggml
 * computes silu with libm's expf (its vector loop takes 16 at a time): there
 * silu(g) = g / (1 + expf(-g)). A tokd_pair_epilogue_fn (kernels/matmul.h). */
void tokd_swiglu_cols(float *g, const float *u, int64_t n, int64_t col0, int64_t width);

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
int tokd_exp_n_avx2(const float *x, float *y, int64_t n);
int tokd_swiglu_n_avx2(float *g, const float *u, int64_t n);
int tokd_rmsnorm_avx2(float *y, const float *x, const float *w, int32_t n, float eps);
int tokd_add_n_avx2(float *a, const float *b, int64_t n);
int tokd_f32_to_f16_n_avx2(uint16_t *dst, const float *src, int64_t n);

/* ---- for the SIMD code of other modules ---- */
#define EXP_LOG2E 0x1.715476p+0f
#define EXP_SHIFT 0x1.8p23f /* 1.5 * 2^23: adding it rounds to an integer, ties to even */
#define EXP_LN2_HI 0x1.62e4p-1f
#define EXP_LN2_LO 0x1.7f7d1cp-20f
#define EXP_C5 0x1.0e4020p-7f
#define EXP_C4 0x1.573e2ep-5f
#define EXP_C3 0x1.555e66p-3f
#define EXP_C2 0x1.fffdb6p-2f
#define EXP_C1 0x1.ffffecp-1f
#define EXP_N_MAX 192.0f /* beyond, the result is 0 or +inf without scaling */

#define TOKD_VECMATH_TGT __attribute__((target("avx2,fma,f16c,avx512f,avx512vl")))
TOKD_VECMATH_TGT static inline __attribute__((always_inline)) __m512 tokd_exp16(__m512 x) {
    const __m512 shift = _mm512_set1_ps(EXP_SHIFT);
    const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(EXP_LOG2E), shift), shift);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_LO), _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_HI), x));
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 hi = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(EXP_C5), b, _mm512_set1_ps(EXP_C4)), u,
                                      _mm512_fmadd_ps(_mm512_set1_ps(EXP_C3), b, _mm512_set1_ps(EXP_C2)));
    const __m512 j = _mm512_fmadd_ps(hi, u, _mm512_fmadd_ps(_mm512_set1_ps(EXP_C1), b, _mm512_set1_ps(1.0f)));
    const __m512 r = _mm512_scalef_ps(j, n);
    const __m512 absn = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(n), _mm512_set1_epi32(0x7fffffff)));
    const __mmask16 big = _mm512_cmp_ps_mask(absn, _mm512_set1_ps(EXP_N_MAX), _CMP_GT_OQ);
    if (!big) return r;
    const __mmask16 pos = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_GT_OQ);
    const __m512 edge = _mm512_mask_blend_ps(pos, _mm512_setzero_ps(), _mm512_set1_ps(INFINITY));
    return _mm512_mask_blend_ps(big, r, edge);
}

/* The same operations 8 lanes wide (AVX2 + FMA). j * 2^n is (j * 2^(n - a)) * 2^a with a
 * = n clamped to [-126, 127]: both factors normal floats, the first product exact (j is
 * near 1 and |n - a| <= 66), so the one rounding is the second product's, as vscalefps
 * rounds. NaN lanes give NaN through j whatever the integer conversion made of n. */
#define TOKD_VECMATH_TGT256 __attribute__((target("avx2,fma,f16c")))
TOKD_VECMATH_TGT256 static inline __attribute__((always_inline)) __m256 tokd_exp8(__m256 x) {
    const __m256 shift = _mm256_set1_ps(EXP_SHIFT);
    const __m256 n = _mm256_sub_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(EXP_LOG2E), shift), shift);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_LO), _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_HI), x));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 hi = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(EXP_C5), b, _mm256_set1_ps(EXP_C4)), u,
                                      _mm256_fmadd_ps(_mm256_set1_ps(EXP_C3), b, _mm256_set1_ps(EXP_C2)));
    const __m256 j = _mm256_fmadd_ps(hi, u, _mm256_fmadd_ps(_mm256_set1_ps(EXP_C1), b, _mm256_set1_ps(1.0f)));
    const __m256 nc = _mm256_min_ps(_mm256_max_ps(n, _mm256_set1_ps(-EXP_N_MAX)), _mm256_set1_ps(EXP_N_MAX));
    const __m256i k = _mm256_cvtps_epi32(nc);
    const __m256i a = _mm256_min_epi32(_mm256_max_epi32(k, _mm256_set1_epi32(-126)), _mm256_set1_epi32(127));
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 pa = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(a, bias), 23));
    const __m256 pb = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(k, a), bias), 23));
    const __m256 r = _mm256_mul_ps(_mm256_mul_ps(j, pb), pa);
    const __m256 absn = _mm256_and_ps(n, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
    const __m256 big = _mm256_cmp_ps(absn, _mm256_set1_ps(EXP_N_MAX), _CMP_GT_OQ);
    if (_mm256_testz_ps(big, big)) return r;
    const __m256 edge = _mm256_and_ps(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_GT_OQ), _mm256_set1_ps(INFINITY));
    return _mm256_blendv_ps(r, edge, big);
}

#endif
