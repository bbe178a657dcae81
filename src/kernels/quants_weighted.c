/* quants_weighted.c — the quantisers that take an importance matrix (quants.h,
 * tokd_<type>_from_float_w): llama-quantize's --imatrix path, byte for byte.
 *
 * An importance matrix gives each column of a weight matrix a weight qw >= 0 (llama-imatrix:
 * the mean square of the activations that column meets), and llama.cpp's quantisers then
 * choose scales that minimise the error weighted by qw (most types by qw*sqrt(sigma2 + x^2),
 * sigma2 a mean square of the row or block) rather than by a weight computed from x alone;
 * the K-quants also fit their sub-block scales and mins to a weighted grid instead of
 * rounding them against the largest. The algorithms are those of ggml-quants.c
 * (llama.cpp c392e5094, quantize_<type> with quant_weights != NULL), kept to the
 * operation: every float expression is evaluated in the same order and with the same
 * types, without fused multiply-add, so that the output is the same bytes. Its rounding
 * to an integer is tokd_nearest_int (quants.h), llama.cpp's, also where that is not a
 * rounding (a NaN, or a value beyond 2^22), which degenerate blocks reach: weights spanning many
 * orders of magnitude, where the affine fit's range can shrink to almost nothing, and
 * weights all zero, where llama.cpp writes a NaN scale (Q2_K, Q4_K, Q5_K: a whole
 * super-block of zero weights; IQ4_NL: a block of 32) and so does this file. */
#include <math.h>
#include <string.h>

#include "kernels/quants.h"
#include "util.h"

static inline float h2f(uint16_t h) { return tokd_f16_to_f32(h); }
static inline uint16_t f2h(float f) { return tokd_f32_to_f16(f); }
static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }


static float sum_squares(const float *x, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i] * x[i];
    return s;
}
static float sum_of(const float *x, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    return s;
}
/* The error weights of most types: the column's importance times the element's size
 * against the typical size sigma2 of its row (or block). */
static void element_weights(int n, const float *x, const float *qw, float sigma2, float *w) {
    for (int i = 0; i < n; i++) w[i] = qw[i] * sqrtf(sigma2 + x[i] * x[i]);
}


/* Non-negative values (the K-quants' sub-block scales and mins) on the grid
 * scale*L[i], L[i] <= nmax, with weights w (ggml's make_qp_quants): the best of nine
 * inverse scales (nmax + 0.1*is)/max by weighted squared error, then up to five passes
 * that move single L[i] while the least-squares fit improves; returns that fit's scale.
 * L is bytes as ggml keeps it: a negative value (a negative x) wraps. 0/0 = NaN when no
 * weight falls on a non-zero L, as in ggml. */
float tokd_fit_positive(int n, int nmax, const float *x, uint8_t *L, const float *w) {
    float max = 0;
    for (int i = 0; i < n; i++) max = max > x[i] ? max : x[i];
    if (max == 0) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)tokd_nearest_int(iscale * x[i]);
    float scale = 1 / iscale;
    float best = 0;
    for (int i = 0; i < n; i++) {
        float diff = x[i] - scale * L[i];
        best += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0) continue;
        float iscale_is = (0.1f * is + nmax) / max;
        float scale_is = 1 / iscale_is;
        float err = 0;
        for (int i = 0; i < n; i++) {
            int l = imin(nmax, tokd_nearest_int(iscale_is * x[i]));
            float diff = x[i] - scale_is * l;
            err += w[i] * diff * diff;
        }
        if (err < best) {
            best = err;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imin(nmax, tokd_nearest_int(iscale * x[i]));
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * l;
        suml2 += w[i] * l * l;
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float slx = sumlx - w[i] * x[i] * L[i];
            float sl2 = suml2 - w[i] * L[i] * L[i];
            if (slx > 0 && sl2 > 0) {
                int nl = imin(nmax, tokd_nearest_int(x[i] * sl2 / slx));
                if (nl != L[i]) {
                    slx += w[i] * x[i] * nl;
                    sl2 += w[i] * nl * nl;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    return sumlx / suml2;
}

/* Affine with weights w (ggml's make_qkx3_quants as the weighted quantisers call it):
 * quants.c's fit over the 37 inverse scales (nmax - 0.9 + 0.05*is) / (max - min),
 * squared errors. n <= 32. */
static float fit_affine_w(int n, int nmax, const float *x, const float *w, uint8_t *L, float *min_out) {
    return tokd_fit_affine(n, nmax, x, w, L, min_out, -0.9f, 0.05f, 36, 0);
}

/* ===== 32-element formats: one scale per block, sigma2 over the whole row =========== */

void tokd_q4_0_from_float_w(const float *src, void *dst, int64_t n, const float *qw) {
    tokd_block_q4_0 *y = dst;
    const float sigma2 = sum_squares(src, n) / (float)n;
    float w[TOKD_QK];
    int8_t L[TOKD_QK];
    for (int64_t b = 0; b < n / TOKD_QK; b++, src += TOKD_QK, qw += TOKD_QK) {
        element_weights(TOKD_QK, src, qw, sigma2, w);
        y[b].d = f2h(tokd_fit_symmetric(TOKD_QK, 8, src, w, L));
        for (int j = 0; j < 16; j++) y[b].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

/* Q5_0/Q5_1's packing of 32 five-bit values. */
static void pack_5bit(const uint8_t *L, uint8_t qs[16], uint8_t qh_bytes[4]) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((L[j] & 0xF) | ((L[j + 16] & 0xF) << 4));
        qh |= (uint32_t)(L[j] >> 4) << j;
        qh |= (uint32_t)(L[j + 16] >> 4) << (j + 16);
    }
    memcpy(qh_bytes, &qh, 4);
}

void tokd_q5_0_from_float_w(const float *src, void *dst, int64_t n, const float *qw) {
    tokd_block_q5_0 *y = dst;
    const float sigma2 = sum_squares(src, n) / (float)n;
    float w[TOKD_QK];
    int8_t L[TOKD_QK];
    uint8_t U[TOKD_QK];
    for (int64_t b = 0; b < n / TOKD_QK; b++, src += TOKD_QK, qw += TOKD_QK) {
        element_weights(TOKD_QK, src, qw, sigma2, w);
        y[b].d = f2h(tokd_fit_symmetric(TOKD_QK, 16, src, w, L));
        for (int j = 0; j < TOKD_QK; j++) U[j] = (uint8_t)L[j];
        pack_5bit(U, y[b].qs, y[b].qh);
    }
}

/* Q4_1 and Q5_1: an affine fit of each block of 32 on [0, nmax]; store() writes the
 * block's FP16 scale d, its m = -min and the 32 levels L. */
typedef void (*store_affine32_fn)(void *block, uint16_t d, uint16_t m, const uint8_t *L);
static void affine32_from_float_w(const float *src, uint8_t *dst, size_t block_bytes, int64_t n, const float *qw,
                                  int nmax, store_affine32_fn store) {
    const float sigma2 = sum_squares(src, n) / (float)n;
    float w[TOKD_QK];
    uint8_t L[TOKD_QK];
    for (int64_t b = 0; b < n / TOKD_QK; b++, src += TOKD_QK, qw += TOKD_QK, dst += block_bytes) {
        element_weights(TOKD_QK, src, qw, sigma2, w);
        float mn;
        const float d = fit_affine_w(TOKD_QK, nmax, src, w, L, &mn);
        store(dst, f2h(d), f2h(-mn), L);
    }
}
static void store_q4_1(void *block, uint16_t d, uint16_t m, const uint8_t *L) {
    tokd_block_q4_1 *y = block;
    y->d = d, y->m = m;
    for (int j = 0; j < 16; j++) y->qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
}
static void store_q5_1(void *block, uint16_t d, uint16_t m, const uint8_t *L) {
    tokd_block_q5_1 *y = block;
    y->d = d, y->m = m;
    pack_5bit(L, y->qs, y->qh);
}
void tokd_q4_1_from_float_w(const float *src, void *dst, int64_t n, const float *qw) {
    affine32_from_float_w(src, dst, sizeof(tokd_block_q4_1), n, qw, 15, store_q4_1);
}
void tokd_q5_1_from_float_w(const float *src, void *dst, int64_t n, const float *qw) {
    affine32_from_float_w(src, dst, sizeof(tokd_block_q5_1), n, qw, 31, store_q5_1);
}

/* ===== K-quants: super-blocks of 256, sigma2 per super-block ======================== */

/* Q2_K: 16 affine groups of 16 (weights with sigma2 = mean square, not twice it); the
 * 4-bit scales and mins are fitted to the groups' weight sums, then the values
 * requantised with the stored scales. */
void tokd_q2_K_from_float_w(const float *src, void *dst, int64_t n, const float *qw) {
    tokd_block_q2_K *y = dst;
    uint8_t L[TOKD_QK_K], Ls[16], Lm[16];
    float w[16], sw[16], scales[16], mins[16];
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, src += TOKD_QK_K, qw += TOKD_QK_K) {
        const float sigma2 = sum_squares(src, TOKD_QK_K) / TOKD_QK_K;
        for (int j = 0; j < 16; j++) {
            element_weights(16, src + 16 * j, qw + 16 * j, sigma2, w);
            sw[j] = sum_of(w, 16);
            scales[j] = fit_affine_w(16, 3, src + 16 * j, w, L + 16 * j, &mins[j]);
        }
        float dm = tokd_fit_positive(16, 15, scales, Ls, sw);
        float mm = tokd_fit_positive(16, 15, mins, Lm, sw);
        y[b].d = f2h(dm);
        y[b].dmin = f2h(mm);
        dm = h2f(y[b].d);
        mm = h2f(y[b].dmin);
        for (int j = 0; j < 16; j++) y[b].scales[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
        for (int j = 0; j < 16; j++) {
            const float d = dm * (y[b].scales[j] & 0xF);
            if (d == 0) continue;
            const float m = mm * (y[b].scales[j] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (uint8_t)imax(0, imin(3, tokd_nearest_int((src[16 * j + l] + m) / d)));
        }
        tokd_pack_2bit(L, y[b].qs);
    }
}

/* Q3_K: 16 symmetric groups of 16, their scales fitted symmetrically (6 bits) with the
 * groups' weight sums as weights. */
void tokd_q3_K_from_float_w(const float *src, void *dst, int64_t n, const float *qw) {
    tokd_block_q3_K *y = dst;
    int8_t L[TOKD_QK_K], Ls[16];
    uint8_t L2[TOKD_QK_K];
    float w[16], sw[16], scales[16];
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, src += TOKD_QK_K, qw += TOKD_QK_K) {
        const float sigma2 = 2 * sum_squares(src, TOKD_QK_K) / TOKD_QK_K;
        for (int j = 0; j < 16; j++) {
            element_weights(16, src + 16 * j, qw + 16 * j, sigma2, w);
            sw[j] = sum_of(w, 16);
            scales[j] = tokd_fit_symmetric(16, 4, src + 16 * j, w, L + 16 * j);
        }
        memset(y[b].scales, 0, 12);
        const float d_block = tokd_fit_symmetric(16, 32, scales, sw, Ls);
        for (int j = 0; j < 16; j++) {
            int l = Ls[j];
            if (j < 8)
                y[b].scales[j] = (uint8_t)(l & 0xF);
            else
                y[b].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
            y[b].scales[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
        }
        y[b].d = f2h(d_block);
        for (int j = 0; j < 16; j++) {
            const float d = h2f(y[b].d) * tokd_q3k_scale(y[b].scales, j);
            if (d == 0) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (int8_t)(imax(-4, imin(3, tokd_nearest_int(src[16 * j + l] / d))) + 4);
        }
        memset(y[b].hmask, 0, 32);
        for (int e = 0; e < TOKD_QK_K; e++) {
            int v = L[e];
            if (v > 3) {
                y[b].hmask[e % 32] |= (uint8_t)(1 << (e / 32));
                v -= 4;
            }
            L2[e] = (uint8_t)v;
        }
        tokd_pack_2bit(L2, y[b].qs);
    }
}

/* Q4_K/Q5_K (nmax 15/31): 8 affine groups of 32; their 6-bit scales and mins fitted to
 * the groups' weight sums (Q5_K caps each at 63, Q4_K stores them as they come), the
 * values requantised with the stored ones. */
static void quantize_k4_w(const float *x, const float *qw, int nmax, int cap, uint8_t *s, uint16_t *d_out,
                          uint16_t *dmin_out, uint8_t *L) {
    float w[32], sw[8], scales[8], mins[8];
    uint8_t Ls[8], Lm[8];
    const float sigma2 = 2 * sum_squares(x, TOKD_QK_K) / TOKD_QK_K;
    for (int j = 0; j < 8; j++) {
        element_weights(32, x + 32 * j, qw + 32 * j, sigma2, w);
        sw[j] = sum_of(w, 32);
        scales[j] = fit_affine_w(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j]);
    }
    const float d_block = tokd_fit_positive(8, 63, scales, Ls, sw);
    const float m_block = tokd_fit_positive(8, 63, mins, Lm, sw);
    for (int j = 0; j < 8; j++) {
        uint8_t ls = Ls[j], lm = Lm[j];
        if (cap) {
            if (ls > 63) ls = 63;
            if (lm > 63) lm = 63;
        }
        if (j < 4) {
            s[j] = ls;
            s[j + 4] = lm;
        } else {
            s[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            s[j - 4] |= (uint8_t)((ls >> 4) << 6);
            s[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d_out = f2h(d_block);
    *dmin_out = f2h(m_block);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        tokd_k4_scale_min(s, j, &sc, &m);
        const float d = h2f(*d_out) * sc;
        if (d == 0) continue;
        const float dm = h2f(*dmin_out) * m;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = (uint8_t)imax(0, imin(nmax, tokd_nearest_int((x[32 * j + l] + dm) / d)));
    }
}

void tokd_q4_K_from_float_w(const float *src, void *dst, int64_t n, const float *qw) {
    tokd_block_q4_K *y = dst;
    uint8_t L[TOKD_QK_K];
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, src += TOKD_QK_K, qw += TOKD_QK_K) {
        quantize_k4_w(src, qw, 15, 0, y[b].scales, &y[b].d, &y[b].dmin, L);
        for (int p = 0; p < 4; p++)
            for (int l = 0; l < 32; l++) y[b].qs[32 * p + l] = (uint8_t)(L[64 * p + l] | (L[64 * p + 32 + l] << 4));
    }
}

void tokd_q5_K_from_float_w(const float *src, void *dst, int64_t n, const float *qw) {
    tokd_block_q5_K *y = dst;
    uint8_t L[TOKD_QK_K];
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, src += TOKD_QK_K, qw += TOKD_QK_K) {
        quantize_k4_w(src, qw, 31, 1, y[b].scales, &y[b].d, &y[b].dmin, L);
        memset(y[b].qh, 0, 32);
        for (int p = 0; p < 4; p++)
            for (int l = 0; l < 32; l++) {
                int l1 = L[64 * p + l], l2 = L[64 * p + 32 + l];
                y[b].qh[l] |= (uint8_t)(((l1 >> 4) << (2 * p)) | ((l2 >> 4) << (2 * p + 1)));
                y[b].qs[32 * p + l] = (uint8_t)((l1 & 0xF) | ((l2 & 0xF) << 4));
            }
    }
}

/* Q6_K: 16 symmetric groups of 16 weighted by qw itself (no sigma2 term), the int8
 * scales rounded against the largest as without an importance matrix. */
void tokd_q6_K_from_float_w(const float *src, void *dst, int64_t n, const float *qw) {
    tokd_block_q6_K *y = dst;
    int8_t L[TOKD_QK_K];
    float scales[16];
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, src += TOKD_QK_K, qw += TOKD_QK_K) {
        for (int j = 0; j < 16; j++) scales[j] = tokd_fit_symmetric(16, 32, src + 16 * j, qw + 16 * j, L + 16 * j);
        tokd_q6_K_pack(src, scales, L, &y[b]);
    }
}

/* ===== IQ4_NL / IQ4_XS: blocks of 32 on tokd_iq4_values ============================== */

/* Each block of 32 on its own: sigma2 = twice the block's mean square. */
void tokd_iq4_nl_from_float_w(const float *src, void *dst, int64_t n, const float *qw) {
    tokd_block_iq4_nl *y = dst;
    float w[32];
    for (int64_t b = 0; b < n / TOKD_QK; b++, src += TOKD_QK, qw += TOKD_QK) {
        const float sigma2 = sum_squares(src, 32) * (2.f / 32);
        element_weights(32, src, qw, sigma2, w);
        const float d = tokd_iq4_block_scale(src, w);
        y[b].d = f2h(d);
        tokd_iq4_pack(src, d, y[b].qs);
    }
}

/* Eight blocks' scales as IQ4_NL's (sigma2 over the super-block), then on the six-bit
 * grid of d = -s/32, s the block scale of largest magnitude, and the indices again. */
void tokd_iq4_xs_from_float_w(const float *src, void *dst, int64_t n, const float *qw) {
    tokd_block_iq4_xs *y = dst;
    float w[32], sc[8];
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, src += TOKD_QK_K, qw += TOKD_QK_K) {
        const float sigma2 = sum_squares(src, TOKD_QK_K) * (2.f / TOKD_QK_K);
        for (int j = 0; j < 8; j++) {
            element_weights(32, src + 32 * j, qw + 32 * j, sigma2, w);
            sc[j] = tokd_iq4_block_scale(src + 32 * j, w);
        }
        tokd_iq4_xs_pack(src, sc, &y[b]);
    }
}
