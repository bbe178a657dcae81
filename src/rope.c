/* rope.c — see rope.h. */
#include "rope.h"

#include <immintrin.h>
#include <math.h>

#include "kernels/types.h"

#define MAX_ROT 1024 /* the SIMD loop's expanded table; wider rotations take the scalar one */

void tokd_rope_table(float *cs, int32_t pos, int32_t n_rot, float freq_base, float freq_scale, const float *freq_factors) {
    float theta_scale = powf(freq_base, -2.0f / (float)n_rot);
    float theta = (float)pos;
    for (int32_t i = 0; i < n_rot / 2; i++) {
        float t = (freq_factors ? theta / freq_factors[i] : theta) * freq_scale;
        cs[2 * i] = cosf(t);
        cs[2 * i + 1] = sinf(t);
        theta *= theta_scale;
    }
}

void tokd_rope_apply_ref(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot, bool neox, const float *cs) {
    int32_t half = n_rot / 2;
    for (int32_t h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        for (int32_t i = 0; i < half; i++) {
            int32_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            float c = cs[2 * i], s = cs[2 * i + 1];
            float x0 = v[a], x1 = v[b];
            v[a] = fmaf(x0, c, -(x1 * s));
            v[b] = fmaf(x0, s, x1 * c);
        }
    }
}

/* Normal style: with x0 and x1 each duplicated into both lanes of its pair, lane 2i is
 * x0 * c - (x1 * s) and lane 2i+1 x0 * s + (x1 * c), one fmaddsub over the tables
 * c2 = [c, s] and s2 = [s, c]; NEOX style: the two halves as two vectors, c2 = c and
 * s2 = s. The table is expanded to those lanes first. */
static void expand_table(const float *cs, int32_t half, bool neox, float *c2, float *s2) {
    for (int32_t i = 0; i < half; i++) {
        if (neox) {
            c2[i] = cs[2 * i], s2[i] = cs[2 * i + 1];
        } else {
            c2[2 * i] = s2[2 * i + 1] = cs[2 * i];
            c2[2 * i + 1] = s2[2 * i] = cs[2 * i + 1];
        }
    }
}

__attribute__((target("avx2,fma,f16c,avx512f,avx512vl"))) static void rope_apply_512(float *x, int32_t n_heads,
                                                                                     int32_t head_dim, int32_t n_rot,
                                                                                     bool neox, const float *cs) {
    const int32_t half = n_rot / 2;
    float c2[MAX_ROT], s2[MAX_ROT];
    expand_table(cs, half, neox, c2, s2);
    for (int32_t h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        if (neox) {
            for (int32_t i = 0; i < half; i += 16) {
                __m512 lo = _mm512_loadu_ps(v + i), hi = _mm512_loadu_ps(v + half + i);
                __m512 c = _mm512_loadu_ps(c2 + i), s = _mm512_loadu_ps(s2 + i);
                _mm512_storeu_ps(v + i, _mm512_fmsub_ps(lo, c, _mm512_mul_ps(hi, s)));
                _mm512_storeu_ps(v + half + i, _mm512_fmadd_ps(lo, s, _mm512_mul_ps(hi, c)));
            }
        } else {
            for (int32_t i = 0; i < n_rot; i += 16) {
                const __m512 a = _mm512_loadu_ps(v + i);
                const __m512 x1s = _mm512_mul_ps(_mm512_movehdup_ps(a), _mm512_loadu_ps(s2 + i));
                _mm512_storeu_ps(v + i, _mm512_fmaddsub_ps(_mm512_moveldup_ps(a), _mm512_loadu_ps(c2 + i), x1s));
            }
        }
    }
}

__attribute__((target("avx2,fma"))) static void rope_apply_256(float *x, int32_t n_heads, int32_t head_dim,
                                                               int32_t n_rot, bool neox, const float *cs) {
    const int32_t half = n_rot / 2;
    float c2[MAX_ROT], s2[MAX_ROT];
    expand_table(cs, half, neox, c2, s2);
    for (int32_t h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        if (neox) {
            for (int32_t i = 0; i < half; i += 8) {
                __m256 lo = _mm256_loadu_ps(v + i), hi = _mm256_loadu_ps(v + half + i);
                __m256 c = _mm256_loadu_ps(c2 + i), s = _mm256_loadu_ps(s2 + i);
                _mm256_storeu_ps(v + i, _mm256_fmsub_ps(lo, c, _mm256_mul_ps(hi, s)));
                _mm256_storeu_ps(v + half + i, _mm256_fmadd_ps(lo, s, _mm256_mul_ps(hi, c)));
            }
        } else {
            for (int32_t i = 0; i < n_rot; i += 8) {
                const __m256 a = _mm256_loadu_ps(v + i);
                const __m256 x1s = _mm256_mul_ps(_mm256_movehdup_ps(a), _mm256_loadu_ps(s2 + i));
                _mm256_storeu_ps(v + i, _mm256_fmaddsub_ps(_mm256_moveldup_ps(a), _mm256_loadu_ps(c2 + i), x1s));
            }
        }
    }
}

int tokd_rope_apply_avx2(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot, bool neox, const float *cs) {
    if (!tokd_cpu_avx2() || n_rot % 16 || n_rot <= 0 || n_rot > MAX_ROT) return -1;
    rope_apply_256(x, n_heads, head_dim, n_rot, neox, cs);
    return 0;
}

void tokd_rope_apply(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot, bool neox, const float *cs) {
    if (tokd_use_f32_avx512() && n_rot % 32 == 0 && n_rot <= MAX_ROT) {
        rope_apply_512(x, n_heads, head_dim, n_rot, neox, cs);
        return;
    }
    if (tokd_use_f32_avx2() && n_rot % 16 == 0 && n_rot <= MAX_ROT) {
        rope_apply_256(x, n_heads, head_dim, n_rot, neox, cs);
        return;
    }
    tokd_rope_apply_ref(x, n_heads, head_dim, n_rot, neox, cs);
}
