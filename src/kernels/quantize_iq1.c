/* quantize_iq1.c — the quantisers of IQ1_S and IQ1_M (quantize_iq1.h), byte for byte
 * llama.cpp's quantize_iq1_s and quantize_iq1_m (c392e5094), which both need an
 * importance matrix.
 *
 * Both formats code each group of 8 weights as a point of the 2048-point grid whose
 * coordinates are -1, 0, 1 (iq_grids.h), moved by +-1/8 (the group's shift), times a
 * sub-block scale: IQ1_S has sub-blocks of 32 with one shift each, IQ1_M sub-blocks of
 * 16 with a shift for each of its two groups. The search tables of that grid (each code
 * of 8 levels: its point, or the candidate points llama.cpp tries instead) are
 * quantize_iq2.c's, tokd_iq2_qtables_get(2048); this file owns only the fitting.
 *
 * A sub-block is fitted as llama.cpp fits it, and since the files llama-quantize writes
 * are what tokd must reproduce, every float expression is evaluated in llama.cpp's
 * order and types, without fused multiply-add, with tokd_nearest_int for ggml's
 * nearest_int. Error weights w = qw sqrt(sigma2 + x^2), sigma2 twice the super-block's
 * mean square. With three levels, the best weighted least-squares split of the values
 * sorted ascending into levels 0 | 1 | 2 is found exhaustively over both cut points
 * (i1 <= i2) and the shift(s), keeping a candidate whose sumqx^2/sumq2 beats the best so
 * far; a negative scale flips the levels and shifts. Groups whose levels are not a grid
 * point take the nearest of their code's candidates at that scale, and the scale is then
 * refitted. The super-block stores d from the largest sub-block scale and each
 * sub-block's scale in 3 bits (IQ1_S: d = max/15 * 1.125; IQ1_M: d refitted by least
 * squares to the coded values, times 1.1125).
 *
 * What differs from llama.cpp's code, not its bytes:
 *  - The sort: llama.cpp qsorts (value, position) pairs comparing values only, so the
 *    order of equal values is the libc qsort's. Where a sub-block's values are distinct
 *    the sorted order is unique and an insertion sort gives it; otherwise the same
 *    qsort is called on the same 8-byte pairs with an equivalent comparator.
 *  - The split search computes the same sums more cheaply: IQ1_S four cut points i2
 *    at a time in vector lanes (each lane's arithmetic is the scalar arithmetic), IQ1_M
 *    continuing each (i1, i2)'s sums from shared prefixes where llama.cpp re-adds all 16
 *    terms (the same terms added in the same order). A candidate beats the best only if
 *    it beats the best the lanes started from, so lanes are examined one by one, in
 *    llama.cpp's order, only where the vector test finds one that does.
 *  - A candidate's distance is summed from the 24 possible terms, formed once.
 *
 * Where llama.cpp's output is not defined, this file chooses:
 *  - A sub-block skipped for being ~0 (max |x| under 1e-12, IQ1_M 1e-7) keeps point 0
 *    and scale code 0, but llama.cpp also reads its shift from a stack array that only
 *    fitted sub-blocks write: within a row that is the shift of the same position in
 *    an earlier super-block, which this file carries too; before any, llama.cpp reads
 *    uninitialised memory (IQ1_M indexes a table with it), and this file takes shift
 *    +1 (IQ1_S: bit 15 clear; IQ1_M: no shift bits), which puts point 0 (all -1) at the
 *    smaller magnitude 7/8 d.
 *  - A sub-block that no split fits (all its weights zero, or sums that underflow)
 *    makes llama.cpp abort; here it is fitted with the weights of qw = 1 (IQ1_M's
 *    d refit uses those weights for it too), and if that fails as well it is written
 *    as a skipped sub-block. The same for a NaN scale (overflowing sums), where
 *    llama.cpp's assertion fails.
 *  - A candidate search in which no distance is below FLT_MAX (infinite or NaN, from
 *    huge values) makes llama.cpp search the whole grid reading past the group's 8
 *    values; here the code's first candidate is taken.
 *
 * The grid tables are built once under pthread_once (quantize_iq2.c) and then only read;
 * everything else is on the caller's stack, so any number of threads may quantise at
 * once. */
#include "kernels/quantize_iq1.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "kernels/quantize_iq2.h"
#include "kernels/quants.h"
#include "util.h"

#define NGRID 2048

/* Four floats (or ints) a lane each: GCC/clang vector extensions, lane-wise IEEE
 * arithmetic (SSE on x86-64), so each lane computes what the scalar code would. */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

/* The values of levels 0, 1, 2 with the group's shift up (P) or down (M) by 1/8 */
static const float XP[3] = {-1 + 0.125f, 0.125f, 1 + 0.125f};
static const float XM[3] = {-1 - 0.125f, -0.125f, 1 - 0.125f};

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }
/* ggml's MAX for floats: the second when they are unordered */
static inline float gmax(float a, float b) { return a > b ? a : b; }

static inline v4f load4(const float *p) {
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}
#if defined(__SSE__)
static inline bool any4(v4i m) { return _mm_movemask_ps((__m128)m) != 0; }
#else
static inline bool any4(v4i m) { return (m[0] | m[1] | m[2] | m[3]) != 0; }
#endif

/* ===== pieces shared by both types ==================================================== */

/* A value and its position: the 8-byte elements llama.cpp sorts (a float, then an int) */
typedef struct {
    float v;
    int32_t i;
} vpair;
_Static_assert(sizeof(vpair) == 8, "vpair layout");

static int vpair_cmp(const void *a, const void *b) {
    const float l = ((const vpair *)a)->v, r = ((const vpair *)b)->v;
    return l < r ? -1 : l > r ? 1 : 0;
}

/* The positions of xb[0..n) by ascending value, in the order libc's qsort gives them
 * with llama.cpp's comparator on llama.cpp's array. Where the values are distinct (no
 * two equal, -0 and 0 counting as equal, and no NaN) that order is the only sorted one,
 * so a plain insertion sort finds it; otherwise the order of equals is qsort's to
 * choose, and qsort is asked. */
static void sort_positions(const float *xb, int n, vpair *p) {
    for (int j = 0; j < n; j++) p[j].v = xb[j], p[j].i = j;
    for (int j = 1; j < n; j++) {
        const vpair e = p[j];
        int k = j;
        for (; k > 0 && p[k - 1].v > e.v; k--) p[k] = p[k - 1];
        p[k] = e;
    }
    for (int j = 1; j < n; j++) {
        if (!(p[j - 1].v < p[j].v)) {
            for (int k = 0; k < n; k++) p[k].v = xb[k], p[k].i = k;
            qsort(p, (size_t)n, sizeof *p, vpair_cmp);
            return;
        }
    }
}

static float sum_squares_256(const float *x) {
    float s = 0;
    for (int i = 0; i < TOKD_QK_K; i++) s += x[i] * x[i];
    return s;
}

static float abs_max(const float *x, int n) {
    float m = fabsf(x[0]);
    for (int i = 1; i < n; i++) m = gmax(m, fabsf(x[i]));
    return m;
}

/* Error weights of n values: q[i] sqrt(sigma2 + x^2), or with q NULL as if q were 1 */
static void error_weights(const float *x, const float *q, int n, float sigma2, float *w) {
    for (int i = 0; i < n; i++) w[i] = (q ? q[i] : 1.0f) * sqrtf(sigma2 + x[i] * x[i]);
}

static inline uint16_t code_of(const int8_t *L) {
    unsigned u = 0;
    for (int j = 0; j < 8; j++) u |= (unsigned)L[j] << 2 * j;
    return (uint16_t)u;
}

/* Of the candidates of a code that is not a point (m = its map entry), the one whose
 * values scale*xg[level] are nearest to xval by weights w, the first of equals; its
 * index. Each candidate's distance is summed in llama.cpp's order from the 24 possible
 * terms, four candidates at a time. (llama.cpp asserts that one beats FLT_MAX; where
 * none does, from infinite or NaN errors, the first is taken.) */
static int nearest_candidate(const tokd_iq2_qtables *t, int32_t m, const float *xval, const float *w, float scale,
                             const float *xg) {
    const uint16_t *nb = t->neighbours + (-1 - m);
    const int count = nb[0];
    nb++;
    float e[8][3];
    for (int i = 0; i < 8; i++)
        for (int l = 0; l < 3; l++) {
            const float diff = scale * xg[l] - xval[i];
            e[i][l] = w[i] * diff * diff;
        }
    const int8_t(*P)[8] = t->point;
    int best = -1, j = 0;
    float best_d2 = FLT_MAX;
    for (; j + 4 <= count; j += 4) {
        const int8_t *p0 = P[nb[j]], *p1 = P[nb[j + 1]], *p2 = P[nb[j + 2]], *p3 = P[nb[j + 3]];
        float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
        for (int i = 0; i < 8; i++) {
            d0 += e[i][p0[i] >> 1];
            d1 += e[i][p1[i] >> 1];
            d2 += e[i][p2[i] >> 1];
            d3 += e[i][p3[i] >> 1];
        }
        if (d0 < best_d2) best_d2 = d0, best = nb[j];
        if (d1 < best_d2) best_d2 = d1, best = nb[j + 1];
        if (d2 < best_d2) best_d2 = d2, best = nb[j + 2];
        if (d3 < best_d2) best_d2 = d3, best = nb[j + 3];
    }
    for (; j < count; j++) {
        float d = 0;
        for (int i = 0; i < 8; i++) d += e[i][P[nb[j]][i] >> 1];
        if (d < best_d2) best_d2 = d, best = nb[j];
    }
    if (best < 0) best = count ? nb[0] : 0;
    return best;
}

/* The least-squares scale of n values at their levels L (vals[g]: the level values of
 * group g of 8), or `scale` unchanged where the fit is not positive: IQ1_S's and IQ1_M's
 * refit when a group's grid point moved off the levels (the sums in llama.cpp's order). */
static float refit_scale(int n, const float *xb, const float *w, const float *const *vals, const int8_t *L,
                         float scale) {
    float sqx = 0, sq2 = 0;
    for (int i = 0; i < n; i++) {
        const float q = vals[i / 8][L[i]];
        sqx += w[i] * q * xb[i];
        sq2 += w[i] * q * q;
    }
    return sqx > 0 && sq2 > 0 ? sqx / sq2 : scale;
}

/* Group k of a sub-block: its point, its levels L replaced by the point's where they
 * were not one (the nearest candidate at `scale`, values xx); *on cleared then. */
static uint16_t place_group(const tokd_iq2_qtables *t, const float *xb, const float *w, float scale, const float *xx,
                            int8_t *L, bool *on) {
    int32_t m = t->map[code_of(L)];
    if (m < 0) {
        *on = false;
        m = nearest_candidate(t, m, xb, w, scale, xx);
        for (int j = 0; j < 8; j++) L[j] = (int8_t)(t->point[m][j] >> 1);
    }
    return (uint16_t)m;
}

/* ===== IQ1_S: sub-blocks of 32, one shift each ======================================== */

/* The best split of a sub-block sorted by value into levels 0 | 1 | 2 at sorted
 * positions i1 <= i2, and its shift (+1: values XP, -1: XM), by the weighted
 * least-squares score sumqx^2/sumq2 from the prefix sums sumx (of w x) and sumw (of w),
 * each padded to 36 entries. llama.cpp tries (i1, i2) in order, i2 inner, the + shift
 * before the -, keeping a candidate that beats the best so far. Here four i2 at a
 * time: each lane's sums are the scalar ones; a lane can only be kept where it beats
 * the best the four start from (the best changes only when one is kept), so the four
 * are looked at one by one only where one of them does. False where none is kept. */
static bool split_s(const float *sumx, const float *sumw, int *b1, int *b2, int *shift, float *scale) {
    float cxp[36], cxm[36], cwp[36], cwm[36];
    for (int i = 0; i < 36; i++) {
        const float dx = i <= 32 ? sumx[32] - sumx[i] : 0, dw = i <= 32 ? sumw[32] - sumw[i] : 0;
        cxp[i] = dx * XP[2], cxm[i] = dx * XM[2];
        cwp[i] = dw * XP[2] * XP[2], cwm[i] = dw * XM[2] * XM[2];
    }
    float best = -FLT_MIN;
    bool found = false;
    for (int i1 = 0; i1 <= 32; i1++) {
        const float dx1 = sumx[i1] - sumx[0], dw1 = sumw[i1] - sumw[0];
        const float axp = dx1 * XP[0], axm = dx1 * XM[0];
        const float awp = dw1 * XP[0] * XP[0], awm = dw1 * XM[0] * XM[0];
        const v4f vx1 = {sumx[i1], sumx[i1], sumx[i1], sumx[i1]};
        const v4f vw1 = {sumw[i1], sumw[i1], sumw[i1], sumw[i1]};
        for (int i2 = i1; i2 <= 32; i2 += 4) {
            const v4f bx = load4(sumx + i2) - vx1, bw = load4(sumw + i2) - vw1;
            const v4f sxp = (axp + bx * XP[1]) + load4(cxp + i2);
            const v4f sqp = (awp + bw * XP[1] * XP[1]) + load4(cwp + i2);
            const v4f sxm = (axm + bx * XM[1]) + load4(cxm + i2);
            const v4f sqm = (awm + bw * XM[1] * XM[1]) + load4(cwm + i2);
            const v4i lanes = (v4i){i2, i2 + 1, i2 + 2, i2 + 3} <= 32;
            const v4i hit = ((sqp > 0) & (sxp * sxp > best * sqp)) | ((sqm > 0) & (sxm * sxm > best * sqm));
            if (!any4(hit & lanes)) continue;
            for (int l = 0; l < 4 && i2 + l <= 32; l++) {
                if (sqp[l] > 0 && sxp[l] * sxp[l] > best * sqp[l]) {
                    *scale = sxp[l] / sqp[l], best = *scale * sxp[l];
                    *b1 = i1, *b2 = i2 + l, *shift = 1, found = true;
                }
                if (sqm[l] > 0 && sxm[l] * sxm[l] > best * sqm[l]) {
                    *scale = sxm[l] / sqm[l], best = *scale * sxm[l];
                    *b1 = i1, *b2 = i2 + l, *shift = -1, found = true;
                }
            }
        }
    }
    return found;
}

/* One sub-block of 32: values xb, error weights w; its scale (>= 0), shift and the
 * points of its 4 groups. False where llama.cpp would abort (no split fits, or a NaN
 * scale). */
static bool iq1_s_sub(const tokd_iq2_qtables *t, const float *xb, const float *w, float *scale_out, int *shift_out,
                      uint16_t idx[4]) {
    vpair p[32];
    sort_positions(xb, 32, p);
    float sumx[36] = {0}, sumw[36] = {0};
    for (int j = 0; j < 32; j++) {
        const int i = p[j].i;
        sumx[j + 1] = sumx[j] + w[i] * xb[i];
        sumw[j + 1] = sumw[j] + w[i];
    }
    int b1 = 0, b2 = 0, shift = 1;
    float scale = 0;
    if (!split_s(sumx, sumw, &b1, &b2, &shift, &scale)) return false;
    int8_t L[32];
    for (int j = 0; j < 32; j++) L[p[j].i] = (int8_t)(j < b1 ? 0 : j < b2 ? 1 : 2);
    if (scale < 0) {
        for (int j = 0; j < 32; j++) L[j] = (int8_t)(2 - L[j]);
        scale = -scale, shift = -shift;
    }
    const float *xx = shift == 1 ? XP : XM;
    bool on = true;
    for (int k = 0; k < 4; k++) idx[k] = place_group(t, xb + 8 * k, w + 8 * k, scale, xx, L + 8 * k, &on);
    if (!on) {
        const float *vals[4] = {xx, xx, xx, xx};
        scale = refit_scale(32, xb, w, vals, L, scale);
    }
    if (!(scale >= 0)) return false;
    *scale_out = scale, *shift_out = shift;
    return true;
}

void tokd_iq1_s_from_float_w(const float *src, void *dst, int64_t n, const float *qw) {
    const tokd_iq2_qtables *t = tokd_iq2_qtables_get(NGRID);
    tokd_block_iq1_s *y = dst;
    int shifts[8]; /* carried from super-block to super-block, as llama.cpp's */
    for (int ib = 0; ib < 8; ib++) shifts[ib] = 1;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        const float *xbl = src + TOKD_QK_K * b, *qbl = qw + TOKD_QK_K * b;
        uint8_t qs[32] = {0};
        uint16_t qh[8] = {0};
        float scales[8], w[32], max_scale = 0;
        const float sigma2 = 2 * sum_squares_256(xbl) / TOKD_QK_K;
        for (int ib = 0; ib < 8; ib++) {
            const float *xb = xbl + 32 * ib;
            scales[ib] = 0;
            if (abs_max(xb, 32) < 1e-12f) continue;
            float scale;
            int shift;
            uint16_t idx[4];
            error_weights(xb, qbl + 32 * ib, 32, sigma2, w);
            if (!iq1_s_sub(t, xb, w, &scale, &shift, idx)) {
                error_weights(xb, NULL, 32, sigma2, w);
                if (!iq1_s_sub(t, xb, w, &scale, &shift, idx)) continue;
            }
            for (int k = 0; k < 4; k++) {
                qs[4 * ib + k] = (uint8_t)(idx[k] & 255);
                qh[ib] |= (uint16_t)((idx[k] >> 8) << 3 * k);
            }
            scales[ib] = scale, shifts[ib] = shift;
            max_scale = gmax(max_scale, scale);
        }
        y[b].d = tokd_f32_to_f16(0);
        if (max_scale != 0) {
            const float d = max_scale / 15;
            y[b].d = tokd_f32_to_f16(d * 1.125f);
            const float id = 1 / d;
            for (int ib = 0; ib < 8; ib++) {
                int l = imax(0, imin(7, tokd_nearest_int(0.5f * (id * scales[ib] - 1))));
                if (shifts[ib] == -1) l |= 8;
                qh[ib] |= (uint16_t)(l << 12);
            }
        }
        memcpy(y[b].qs, qs, sizeof qs);
        for (int ib = 0; ib < 8; ib++) y[b].qh[2 * ib] = (uint8_t)qh[ib], y[b].qh[2 * ib + 1] = (uint8_t)(qh[ib] >> 8);
    }
}

/* ===== IQ1_M: sub-blocks of 16, a shift for each group of 8 =========================== */

/* The best split of a sub-block of 16 sorted by value (positions p) and its pair of
 * shifts k (0: +,+  1: +,-  2: -,+  3: -,-, the first for positions 0..7), by the same
 * score as split_s. llama.cpp sums each (i1, i2, k) afresh over the 16 values in sorted
 * order; those sums share their beginnings, so here the terms are formed once (each
 * lane k of TX/TQ the term its sum adds) and each sum is continued from the shared
 * prefix, adding the same terms in the same order. Lanes are checked k = 0..3 after
 * a test against the best so far, as in split_s. False where none is kept. */
static bool split_m(const float *xb, const float *w, const vpair *p, int *b1, int *b2, int *best_k, float *scale) {
    v4f TX[16][3], TQ[16][3];
    for (int j = 0; j < 16; j++) {
        const int i = p[j].i;
        for (int r = 0; r < 3; r++) {
            const float a = w[i] * XP[r], c = w[i] * XM[r];
            const float xp = a * xb[i], xm = c * xb[i], qp = a * XP[r], qm = c * XM[r];
            TX[j][r] = i < 8 ? (v4f){xp, xp, xm, xm} : (v4f){xp, xm, xp, xm};
            TQ[j][r] = i < 8 ? (v4f){qp, qp, qm, qm} : (v4f){qp, qm, qp, qm};
        }
    }
    float best = -FLT_MIN;
    bool found = false;
    v4f x0 = {0, 0, 0, 0}, q0 = {0, 0, 0, 0}; /* sums over sorted positions < i1 */
    for (int i1 = 0; i1 <= 16; i1++) {
        v4f x1 = x0, q1 = q0; /* ... and i1 .. i2-1 */
        for (int i2 = i1; i2 <= 16; i2++) {
            v4f sx = x1, sq = q1;
            for (int j = i2; j < 16; j++) sx += TX[j][2], sq += TQ[j][2];
            const v4i hit = (sq > 0) & (sx * sx > best * sq);
            if (any4(hit)) {
                for (int k = 0; k < 4; k++) {
                    if (sq[k] > 0 && sx[k] * sx[k] > best * sq[k]) {
                        *scale = sx[k] / sq[k], best = *scale * sx[k];
                        *b1 = i1, *b2 = i2, *best_k = k, found = true;
                    }
                }
            }
            if (i2 < 16) x1 += TX[i2][1], q1 += TQ[i2][1];
        }
        if (i1 < 16) x0 += TX[i1][0], q0 += TQ[i1][0];
    }
    return found;
}

/* The values of group g (0, 1) of a sub-block with shifts k */
static inline const float *group_values(int k, int g) {
    return (g == 0 ? k < 2 : k % 2 == 0) ? XP : XM;
}

/* One sub-block of 16: values xb, error weights w; its scale (>= 0), shifts and the
 * points of its 2 groups. False where llama.cpp would abort. */
static bool iq1_m_sub(const tokd_iq2_qtables *t, const float *xb, const float *w, float *scale_out, int *k_out,
                      uint16_t idx[2]) {
    vpair p[16];
    sort_positions(xb, 16, p);
    int b1 = 0, b2 = 0, k = 0;
    float scale = 0;
    if (!split_m(xb, w, p, &b1, &b2, &k, &scale)) return false;
    int8_t L[16];
    for (int j = 0; j < 16; j++) L[p[j].i] = (int8_t)(j < b1 ? 0 : j < b2 ? 1 : 2);
    if (scale < 0) {
        for (int j = 0; j < 16; j++) L[j] = (int8_t)(2 - L[j]);
        scale = -scale, k = 3 - k;
    }
    bool on = true;
    for (int g = 0; g < 2; g++)
        idx[g] = place_group(t, xb + 8 * g, w + 8 * g, scale, group_values(k, g), L + 8 * g, &on);
    if (!on) {
        const float *vals[2] = {group_values(k, 0), group_values(k, 1)};
        scale = refit_scale(16, xb, w, vals, L, scale);
    }
    if (!(scale >= 0)) return false;
    *scale_out = scale, *k_out = k;
    return true;
}

void tokd_iq1_m_from_float_w(const float *src, void *dst, int64_t n, const float *qw) {
    static const uint8_t MASKS[4] = {0x00, 0x80, 0x08, 0x88};
    const tokd_iq2_qtables *t = tokd_iq2_qtables_get(NGRID);
    tokd_block_iq1_m *y = dst;
    int shifts[16]; /* carried from super-block to super-block, as llama.cpp's */
    for (int ib = 0; ib < 16; ib++) shifts[ib] = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        const float *xbl = src + TOKD_QK_K * b, *qbl = qw + TOKD_QK_K * b;
        uint8_t qs[32] = {0}, qh[16] = {0};
        uint16_t sc[4] = {0};
        float scales[16], w[16], max_scale = 0;
        bool unit[16]; /* fitted with the weights of qw = 1 */
        const float sigma2 = 2 * sum_squares_256(xbl) / TOKD_QK_K;
        for (int ib = 0; ib < 16; ib++) {
            const float *xb = xbl + 16 * ib;
            scales[ib] = 0, unit[ib] = false;
            if (abs_max(xb, 16) < 1e-7f) continue;
            float scale;
            int k;
            uint16_t idx[2];
            error_weights(xb, qbl + 16 * ib, 16, sigma2, w);
            if (!iq1_m_sub(t, xb, w, &scale, &k, idx)) {
                error_weights(xb, NULL, 16, sigma2, w);
                if (!iq1_m_sub(t, xb, w, &scale, &k, idx)) continue;
                unit[ib] = true;
            }
            qs[2 * ib] = (uint8_t)(idx[0] & 255), qs[2 * ib + 1] = (uint8_t)(idx[1] & 255);
            qh[ib] = (uint8_t)((idx[0] >> 8) | (idx[1] >> 8) << 4);
            scales[ib] = scale, shifts[ib] = k;
            max_scale = gmax(max_scale, scale);
        }
        if (max_scale != 0) {
            /* the sub-block scales in 3 bits against max/15, then d refitted to the
               coded values */
            float d = max_scale / 15;
            const float id = 1 / d;
            float sqx = 0, sq2 = 0;
            for (int ib = 0; ib < 16; ib++) {
                const int l = imax(0, imin(7, tokd_nearest_int(0.5f * (id * scales[ib] - 1))));
                sc[ib / 4] |= (uint16_t)(l << 3 * (ib % 4));
                qh[ib] |= MASKS[shifts[ib]];
                const float *xb = xbl + 16 * ib;
                error_weights(xb, unit[ib] ? NULL : qbl + 16 * ib, 16, sigma2, w);
                for (int g = 0; g < 2; g++) {
                    const float *xx = group_values(shifts[ib], g);
                    const int8_t *pt = t->point[qs[2 * ib + g] | ((qh[ib] >> 4 * g) & 7) << 8];
                    for (int j = 0; j < 8; j++) {
                        const float q = xx[pt[j] >> 1] * (float)(2 * l + 1);
                        sqx += w[8 * g + j] * q * xb[8 * g + j];
                        sq2 += w[8 * g + j] * q * q;
                    }
                }
            }
            if (sq2 > 0) d = sqx / sq2;
            const uint16_t h = tokd_f32_to_f16(d * 1.1125f);
            sc[0] |= (uint16_t)((h & 0x000f) << 12);
            sc[1] |= (uint16_t)((h & 0x00f0) << 8);
            sc[2] |= (uint16_t)((h & 0x0f00) << 4);
            sc[3] |= (uint16_t)(h & 0xf000);
        }
        memcpy(y[b].qs, qs, sizeof qs);
        memcpy(y[b].qh, qh, sizeof qh);
        for (int i = 0; i < 4; i++) y[b].scales[2 * i] = (uint8_t)sc[i], y[b].scales[2 * i + 1] = (uint8_t)(sc[i] >> 8);
    }
}
