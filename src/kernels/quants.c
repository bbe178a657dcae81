/* quants.c — portable scalar kernels of the quantized types (see quants.h).
 *
 * For each type: to_float (dequantize), from_float (the reference quantiser, the same
 * algorithm as llama.cpp's reference quantiser so that `tokd quantize` writes what
 * llama-quantize writes), and the scalar dot product that the SIMD paths are tested
 * against.
 *
 * Reduction order (shared with the SIMD paths, which are bit-equal to these):
 *   32-element formats: the exact integer sum P of each block, then the block's float
 *     term t = (dx*dy)*P (+ mx*sy for Q4_1/Q5_1), added into lane b%8 of eight float
 *     lanes, then tokd_reduce8.
 *   K-quants: exact integer sums per 256-element super-block, the super-block's term
 *     t = d*sumi (- dmin*summ), added in super-block order into one float.
 * No fused multiply-add is used anywhere, so every path rounds the same way. */
#include "kernels/quants.h"
#include "kernels/unaligned.h"

#include <math.h>
#include <string.h>

#include "util.h"

static inline float h2f(uint16_t h) { return tokd_f16_to_f32(h); }
static inline uint16_t f2h(float f) { return tokd_f32_to_f16(f); }

/* Round to nearest, ties to even (quants.h: ggml's nearest_int, unclamped): the file
 * quantisers', which must give ggml's bytes even on degenerate blocks. */
static inline int round_even(float v) { return tokd_nearest_int(v); }
/* The same with out-of-range and NaN inputs clamped first: the activation quantisers'
 * statement (Q8_0, Q8_K), which their SIMD forms reproduce for every input. */
static inline int round_even_clamped(float v) {
    if (!(v >= -4194303.f)) v = -4194303.f; /* also NaN */
    if (v > 4194303.f) v = 4194303.f;
    return tokd_nearest_int(v);
}
/* Round half away from zero (C's roundf), clamped to [-2^22, 2^22]. */
static inline int round_away(float v) {
    if (!(v >= -4194303.f)) v = -4194303.f;
    if (v > 4194303.f) v = 4194303.f;
    return (int)roundf(v);
}
/* Truncation toward zero, clamped to [lo, hi] (C's cast, made total). */
static inline int trunc_clamp(float v, int lo, int hi) {
    if (!(v >= (float)lo)) return lo; /* also NaN */
    if (v >= (float)hi) return hi;
    return (int)v;
}
static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

/* ===== float rows ================================================================= */

#define FLOAT_DOT_REF(LOAD)                                          \
    float s[32] = {0};                                               \
    for (int64_t i = 0; i < n; i++) s[i & 31] += (LOAD) * x[i];      \
    *out = tokd_reduce32(s);

static inline uint16_t load_u16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
}
void tokd_f16_dot_ref(int64_t n, float *out, const void *w, const void *act) {
    const uint8_t *wp = w;
    const float *x = act;
    FLOAT_DOT_REF(h2f(load_u16(wp + 2 * i)))
}
void tokd_f16_round_row(const float *src, void *dst, int64_t n) {
    float *y = dst;
    for (int64_t i = 0; i < n; i++) y[i] = h2f(f2h(src[i]));
}

/* ===== 32-element formats ========================================================= */

/* ---- Q4_0: x = d * (q - 8) ---- */
void tokd_q4_0_to_float(const void *src, float *dst, int64_t n) {
    const tokd_block_q4_0 *x = src;
    for (int64_t b = 0; b < n / TOKD_QK; b++, dst += TOKD_QK) {
        float d = h2f(x[b].d);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)((x[b].qs[j] & 0xF) - 8) * d;
            dst[j + 16] = (float)((x[b].qs[j] >> 4) - 8) * d;
        }
    }
}
void tokd_q4_0_from_float(const float *src, void *dst, int64_t n) {
    tokd_block_q4_0 *y = dst;
    for (int64_t b = 0; b < n / TOKD_QK; b++, src += TOKD_QK) {
        float amax = 0, max = 0; /* the value of largest magnitude, with its sign */
        for (int j = 0; j < TOKD_QK; j++)
            if (fabsf(src[j]) > amax) amax = fabsf(src[j]), max = src[j];
        float d = max / -8, id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = f2h(d);
        for (int j = 0; j < 16; j++) {
            int lo = trunc_clamp(src[j] * id + 8.5f, 0, 15);
            int hi = trunc_clamp(src[j + 16] * id + 8.5f, 0, 15);
            y[b].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

/* ---- Q4_1: x = d * q + m ---- */
void tokd_q4_1_to_float(const void *src, float *dst, int64_t n) {
    const tokd_block_q4_1 *x = src;
    for (int64_t b = 0; b < n / TOKD_QK; b++, dst += TOKD_QK) {
        float d = h2f(x[b].d), m = h2f(x[b].m);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)(x[b].qs[j] & 0xF) * d + m;
            dst[j + 16] = (float)(x[b].qs[j] >> 4) * d + m;
        }
    }
}
static void minmax(const float *x, int n, float *mn, float *mx) {
    float lo = INFINITY, hi = -INFINITY;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    if (lo > hi) lo = hi = 0; /* all NaN */
    *mn = lo, *mx = hi;
}
void tokd_q4_1_from_float(const float *src, void *dst, int64_t n) {
    tokd_block_q4_1 *y = dst;
    for (int64_t b = 0; b < n / TOKD_QK; b++, src += TOKD_QK) {
        float mn, mx;
        minmax(src, TOKD_QK, &mn, &mx);
        float d = (mx - mn) / 15, id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = f2h(d);
        y[b].m = f2h(mn);
        for (int j = 0; j < 16; j++) {
            int lo = trunc_clamp((src[j] - mn) * id + 0.5f, 0, 15);
            int hi = trunc_clamp((src[j + 16] - mn) * id + 0.5f, 0, 15);
            y[b].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

/* ---- Q5_0: x = d * (q - 16), q 5 bits ---- */
void tokd_q5_0_to_float(const void *src, float *dst, int64_t n) {
    const tokd_block_q5_0 *x = src;
    for (int64_t b = 0; b < n / TOKD_QK; b++, dst += TOKD_QK) {
        float d = h2f(x[b].d);
        uint32_t qh = tokd_ld_u32(x[b].qh);
        for (int j = 0; j < 16; j++) {
            int lo = (x[b].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (x[b].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            dst[j] = (float)(lo - 16) * d;
            dst[j + 16] = (float)(hi - 16) * d;
        }
    }
}
void tokd_q5_0_from_float(const float *src, void *dst, int64_t n) {
    tokd_block_q5_0 *y = dst;
    for (int64_t b = 0; b < n / TOKD_QK; b++, src += TOKD_QK) {
        float amax = 0, max = 0;
        for (int j = 0; j < TOKD_QK; j++)
            if (fabsf(src[j]) > amax) amax = fabsf(src[j]), max = src[j];
        float d = max / -16, id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = f2h(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            int lo = trunc_clamp(src[j] * id + 16.5f, 0, 31);
            int hi = trunc_clamp(src[j + 16] * id + 16.5f, 0, 31);
            y[b].qs[j] = (uint8_t)((lo & 0xF) | ((hi & 0xF) << 4));
            qh |= (uint32_t)(lo >> 4) << j;
            qh |= (uint32_t)(hi >> 4) << (j + 16);
        }
        memcpy(y[b].qh, &qh, 4);
    }
}

/* ---- Q5_1: x = d * q + m, q 5 bits ---- */
void tokd_q5_1_to_float(const void *src, float *dst, int64_t n) {
    const tokd_block_q5_1 *x = src;
    for (int64_t b = 0; b < n / TOKD_QK; b++, dst += TOKD_QK) {
        float d = h2f(x[b].d), m = h2f(x[b].m);
        uint32_t qh = tokd_ld_u32(x[b].qh);
        for (int j = 0; j < 16; j++) {
            int lo = (x[b].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (x[b].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            dst[j] = (float)lo * d + m;
            dst[j + 16] = (float)hi * d + m;
        }
    }
}
void tokd_q5_1_from_float(const float *src, void *dst, int64_t n) {
    tokd_block_q5_1 *y = dst;
    for (int64_t b = 0; b < n / TOKD_QK; b++, src += TOKD_QK) {
        float mn, mx;
        minmax(src, TOKD_QK, &mn, &mx);
        float d = (mx - mn) / 31, id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = f2h(d);
        y[b].m = f2h(mn);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            int lo = trunc_clamp((src[j] - mn) * id + 0.5f, 0, 31);
            int hi = trunc_clamp((src[j + 16] - mn) * id + 0.5f, 0, 31);
            y[b].qs[j] = (uint8_t)((lo & 0xF) | ((hi & 0xF) << 4));
            qh |= (uint32_t)(lo >> 4) << j;
            qh |= (uint32_t)(hi >> 4) << (j + 16);
        }
        memcpy(y[b].qh, &qh, 4);
    }
}

/* ---- Q8_0 / Q8_1: x = d * q ---- */
void tokd_q8_0_to_float(const void *src, float *dst, int64_t n) {
    const tokd_block_q8_0 *x = src;
    for (int64_t b = 0; b < n / TOKD_QK; b++, dst += TOKD_QK) {
        float d = h2f(x[b].d);
        for (int j = 0; j < TOKD_QK; j++) dst[j] = (float)x[b].qs[j] * d;
    }
}
void tokd_q8_1_to_float(const void *src, float *dst, int64_t n) {
    const tokd_block_q8_1 *x = src;
    for (int64_t b = 0; b < n / TOKD_QK; b++, dst += TOKD_QK) {
        float d = h2f(x[b].d);
        for (int j = 0; j < TOKD_QK; j++) dst[j] = (float)x[b].qs[j] * d;
    }
}
static float absmax(const float *x, int n) {
    float amax = 0;
    for (int j = 0; j < n; j++) amax = fmaxf(amax, fabsf(x[j]));
    return amax;
}
/* File quantiser (llama.cpp's reference): q = round_away(x / d), d = amax/127. */
void tokd_q8_0_from_float_ref(const float *src, void *dst, int64_t n) {
    tokd_block_q8_0 *y = dst;
    for (int64_t b = 0; b < n / TOKD_QK; b++, src += TOKD_QK) {
        float d = absmax(src, TOKD_QK) / 127, id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = f2h(d);
        for (int j = 0; j < TOKD_QK; j++) y[b].qs[j] = (int8_t)imax(-127, imin(127, round_away(src[j] * id)));
    }
}
/* Activation quantiser, as ggml's x86 CPU backend: q = round_even(x * (127/amax)). */
static void q8_block(const float *x, int8_t *q, float *d_out) {
    float amax = absmax(x, TOKD_QK);
    float id = amax != 0 ? 127.f / amax : 0.0f;
    *d_out = amax / 127.f;
    for (int j = 0; j < TOKD_QK; j++) q[j] = (int8_t)imax(-127, imin(127, round_even_clamped(x[j] * id)));
}
void tokd_q8_0_from_float(const float *src, void *dst, int64_t n) {
    tokd_block_q8_0 *y = dst;
    for (int64_t b = 0; b < n / TOKD_QK; b++, src += TOKD_QK) {
        float d;
        q8_block(src, y[b].qs, &d);
        y[b].d = f2h(d);
    }
}
void tokd_q8_1_from_float(const float *src, void *dst, int64_t n) {
    tokd_block_q8_1 *y = dst;
    for (int64_t b = 0; b < n / TOKD_QK; b++, src += TOKD_QK) {
        float d;
        q8_block(src, y[b].qs, &d);
        int sum = 0;
        for (int j = 0; j < TOKD_QK; j++) sum += y[b].qs[j];
        y[b].d = f2h(d);
        y[b].s = f2h(d * (float)sum);
    }
}

/* ---- dot products of the 32-element formats ---- */

/* Block terms into lane b%8 of eight float lanes, then tokd_reduce8. */
#define DOT32_REF(T, XT, YT)                                                                          \
    void tokd_##T##_dot_ref(int64_t n, float *out, const void *w, const void *act) {                 \
        const XT *x = w;                                                                              \
        const YT *y = act;                                                                            \
        float acc[8] = {0};                                                                           \
        for (int64_t b = 0; b < n / TOKD_QK; b++) acc[b & 7] += tokd_##T##_term(&x[b], &y[b]);       \
        *out = tokd_reduce8(acc);                                                                     \
    }
DOT32_REF(q4_0, tokd_block_q4_0, tokd_block_q8_0)
DOT32_REF(q4_1, tokd_block_q4_1, tokd_block_q8_1)
DOT32_REF(q5_0, tokd_block_q5_0, tokd_block_q8_0)
DOT32_REF(q5_1, tokd_block_q5_1, tokd_block_q8_1)
DOT32_REF(q8_0, tokd_block_q8_0, tokd_block_q8_0)

/* ===== Q8_K: the K-quants' activation format ====================================== */

void tokd_q8_K_to_float(const void *src, float *dst, int64_t n) {
    const tokd_block_q8_K *x = src;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, dst += TOKD_QK_K)
        for (int j = 0; j < TOKD_QK_K; j++) dst[j] = x[b].d * (float)x[b].qs[j];
}
/* As ggml: the value of largest magnitude maps to -127 exactly (its sign kept in d). */
void tokd_q8_K_from_float(const float *src, void *dst, int64_t n) {
    tokd_block_q8_K *y = dst;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, src += TOKD_QK_K) {
        float amax = 0, max = 0;
        for (int j = 0; j < TOKD_QK_K; j++)
            if (fabsf(src[j]) > amax) amax = fabsf(src[j]), max = src[j];
        if (amax == 0 || !isfinite(amax)) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        float iscale = -127.f / max;
        for (int j = 0; j < TOKD_QK_K; j++) y[b].qs[j] = (int8_t)imax(-127, imin(127, round_even_clamped(iscale * src[j])));
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += y[b].qs[16 * g + l];
            y[b].bsums[g] = (int16_t)s;
        }
        y[b].d = 1 / iscale;
    }
}

/* ===== K-quant scale searches (the algorithms of ggml's reference quantisers) ====== */

/* Symmetric with weights w (quants.h): L[i] in [0, 2*nmax) for x ~ scale*(L[i]-nmax);
 * tries 19 scales around nmax/max and keeps the best weighted fit (ggml's make_qx_quants,
 * weighted). Without an importance matrix llama.cpp weighs by x^2. */
/* Never specialised: gcc's clone of it for the Q6_K quantiser's constant n and nmax ran
 * 1.3x slower than this generic body (37 against 28 ns a weight, /tmp/s46/q6x.c). */
#if defined(__GNUC__) && !defined(__clang__)
#define NOT_SPECIALISED __attribute__((noinline, noclone))
#else
#define NOT_SPECIALISED __attribute__((noinline))
#endif
NOT_SPECIALISED float tokd_fit_symmetric(int n, int nmax, const float *x, const float *w, int8_t *L) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), max = x[i];
    if (amax < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imax(-nmax, imin(nmax - 1, round_even(iscale * x[i])));
        L[i] = (int8_t)(l + nmax);
        sumlx += w[i] * x[i] * l;
        suml2 += w[i] * l * l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(-nmax, imin(nmax - 1, round_even(iscale * x[i])));
            sumlx += w[i] * x[i] * l;
            suml2 += w[i] * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, round_even(iscale * x[i]))));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Symmetric 3-bit fit with coordinate-descent refinement of each L[i] (Q3_K). Returns
 * the scale; L[i] in [0, 2*nmax). */
static float fit_symmetric_q3(int n, int nmax, const float *x, int8_t *L) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), max = x[i];
    if (amax < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imax(-nmax, imin(nmax - 1, round_even(iscale * x[i])));
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int nl = imax(-nmax, imin(nmax - 1, round_even(x[i] * sl2 / slx)));
                if (nl != L[i]) {
                    slx += w * x[i] * nl;
                    sl2 += w * nl * nl;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0 ? sumlx / suml2 : 0.0f;
}

/* Asymmetric: x ~ scale*L[i] - min with L[i] in [0, nmax], min >= 0, minimising the
 * weighted squared (or absolute, if use_mad) error over nstep+1 trial scales followed
 * by a least-squares solve for (scale, min) at each. Returns scale, *min_out = min. */
float tokd_fit_affine(int n, int nmax, const float *x, const float *wt, uint8_t *L, float *min_out, float rmin,
                      float rdelta, int nstep, int use_mad) {
    uint8_t Laux[32];
    float mn = x[0], mx = x[0];
    float sum_w = wt[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < mn) mn = x[i];
        if (x[i] > mx) mx = x[i];
        sum_w += wt[i];
        sum_x += wt[i] * x[i];
    }
    if (mn > 0) mn = 0;
    if (mx == mn || !(mx > mn)) {
        memset(L, 0, (size_t)n);
        *min_out = -mn;
        return 0;
    }
    float iscale = nmax / (mx - mn);
    float scale = 1 / iscale;
    float best_err = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)imax(0, imin(nmax, round_even(iscale * (x[i] - mn))));
        float diff = scale * L[i] + mn - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_err += wt[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (mx - mn);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(0, imin(nmax, round_even(iscale * (x[i] - mn))));
            Laux[i] = (uint8_t)l;
            float w = wt[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float err = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                err += wt[i] * diff;
            }
            if (err < best_err) {
                memcpy(L, Laux, (size_t)n);
                best_err = err;
                scale = this_scale;
                mn = this_min;
            }
        }
    }
    *min_out = -mn;
    return scale;
}

/* Pack Q2_K/Q3_K 2-bit values: element 128h + 32s + l at bits 2s of qs[32h + l]. */
void tokd_pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *p = L + 128 * h + l;
            qs[32 * h + l] = (uint8_t)(p[0] | (p[32] << 2) | (p[64] << 4) | (p[96] << 6));
        }
}

/* ===== Q2_K: x = d*sc*q - dmin*m, 16 groups of 16, 4-bit sc and m ================ */

void tokd_q2_K_to_float(const void *src, float *dst, int64_t n) {
    const tokd_block_q2_K *x = src;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, dst += TOKD_QK_K) {
        float d = h2f(x[b].d), dmin = h2f(x[b].dmin);
        for (int e = 0; e < TOKD_QK_K; e++) {
            int h = e >> 7, s = (e >> 5) & 3, l = e & 31;
            int q = (x[b].qs[32 * h + l] >> (2 * s)) & 3;
            uint8_t sc = x[b].scales[e >> 4];
            dst[e] = (d * (float)(sc & 0xF)) * (float)q - dmin * (float)(sc >> 4);
        }
    }
}
void tokd_q2_K_from_float(const float *src, void *dst, int64_t n) {
    tokd_block_q2_K *y = dst;
    uint8_t L[TOKD_QK_K];
    float wt[16], mins[16], scales[16];
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, src += TOKD_QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) wt[l] = fabsf(src[16 * j + l]);
            scales[j] = tokd_fit_affine(16, 3, src + 16 * j, wt, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            float iscale = 15.f / max_scale;
            for (int j = 0; j < 16; j++) y[b].scales[j] = (uint8_t)round_even(iscale * scales[j]); /* unclamped, as ggml */
            y[b].d = f2h(max_scale / 15.f);
        } else {
            memset(y[b].scales, 0, 16);
            y[b].d = f2h(0);
        }
        if (max_min > 0) {
            float iscale = 15.f / max_min;
            for (int j = 0; j < 16; j++)
                y[b].scales[j] |= (uint8_t)((unsigned)round_even(iscale * mins[j]) << 4);
            y[b].dmin = f2h(max_min / 15.f);
        } else {
            y[b].dmin = f2h(0);
        }
        for (int j = 0; j < 16; j++) {
            float d = h2f(y[b].d) * (float)(y[b].scales[j] & 0xF);
            if (d == 0) continue;
            float dm = h2f(y[b].dmin) * (float)(y[b].scales[j] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (uint8_t)imax(0, imin(3, round_even((src[16 * j + l] + dm) / d)));
        }
        tokd_pack_2bit(L, y[b].qs);
    }
}
void tokd_q2_K_dot_ref(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_q2_K *x = w;
    const tokd_block_q8_K *y = act;
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        int32_t sumi = 0, summ = 0;
        for (int j = 0; j < 16; j++) {
            int sub = 0;
            for (int l = 0; l < 16; l++) {
                int e = 16 * j + l;
                int q = (x[b].qs[32 * (e >> 7) + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3;
                sub += q * y[b].qs[e];
            }
            sumi += (x[b].scales[j] & 0xF) * sub;
            summ += (x[b].scales[j] >> 4) * y[b].bsums[j];
        }
        sum += tokd_k_term2(h2f(x[b].d), h2f(x[b].dmin), y[b].d, sumi, summ);
    }
    *out = sum;
}

/* ===== Q3_K: x = d*sc*(q - 4), 16 groups of 16, 6-bit signed sc ================== */

static inline int q3_value(const tokd_block_q3_K *x, int e) {
    int h = e >> 7, s = (e >> 5) & 3, l = e & 31;
    int q = (x->qs[32 * h + l] >> (2 * s)) & 3;
    return q - ((x->hmask[l] >> (e >> 5)) & 1 ? 0 : 4);
}
void tokd_q3_K_to_float(const void *src, float *dst, int64_t n) {
    const tokd_block_q3_K *x = src;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, dst += TOKD_QK_K) {
        float d = h2f(x[b].d);
        for (int e = 0; e < TOKD_QK_K; e++)
            dst[e] = (d * (float)tokd_q3k_scale(x[b].scales, e >> 4)) * (float)q3_value(&x[b], e);
    }
}
void tokd_q3_K_from_float(const float *src, void *dst, int64_t n) {
    tokd_block_q3_K *y = dst;
    int8_t L[TOKD_QK_K];
    float scales[16];
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, src += TOKD_QK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < 16; j++) {
            scales[j] = fit_symmetric_q3(16, 4, src + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) amax = fabsf(scales[j]), max_scale = scales[j];
        }
        memset(y[b].scales, 0, 12);
        if (max_scale != 0) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < 16; j++) {
                int l = imax(-32, imin(31, (int8_t)round_even(iscale * scales[j]))) + 32; /* ggml keeps it in an int8 first */
                if (j < 8)
                    y[b].scales[j] = (uint8_t)(l & 0xF);
                else
                    y[b].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
                y[b].scales[8 + (j & 3)] |= (uint8_t)((l >> 4) << (2 * (j >> 2)));
            }
            y[b].d = f2h(1 / iscale);
        } else {
            y[b].d = f2h(0);
        }
        for (int j = 0; j < 16; j++) {
            float d = h2f(y[b].d) * (float)tokd_q3k_scale(y[b].scales, j);
            if (d == 0) continue;
            for (int l = 0; l < 16; l++) L[16 * j + l] = (int8_t)(imax(-4, imin(3, round_even(src[16 * j + l] / d))) + 4);
        }
        memset(y[b].hmask, 0, 32);
        uint8_t L2[TOKD_QK_K];
        for (int e = 0; e < TOKD_QK_K; e++) {
            int v = L[e];
            if (v > 3) {
                y[b].hmask[e & 31] |= (uint8_t)(1 << (e >> 5));
                v -= 4;
            }
            L2[e] = (uint8_t)v;
        }
        tokd_pack_2bit(L2, y[b].qs);
    }
}
void tokd_q3_K_dot_ref(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_q3_K *x = w;
    const tokd_block_q8_K *y = act;
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        int32_t sumi = 0;
        for (int j = 0; j < 16; j++) {
            int sub = 0;
            for (int l = 0; l < 16; l++) sub += q3_value(&x[b], 16 * j + l) * y[b].qs[16 * j + l];
            sumi += tokd_q3k_scale(x[b].scales, j) * sub;
        }
        sum += tokd_k_term1(h2f(x[b].d), y[b].d, sumi);
    }
    *out = sum;
}

/* ===== Q4_K / Q5_K: x = d*sc*q - dmin*m, 8 groups of 32, 6-bit sc and m =========== */

static void pack_k4_scales(const float *scales, const float *mins, float max_scale, float max_min, uint8_t *s) {
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; j++) {
        /* ggml keeps them in a uint8 before taking the minimum with 63 */
        int ls = imin(63, (uint8_t)round_even(inv_scale * scales[j]));
        int lm = imin(63, (uint8_t)round_even(inv_min * mins[j]));
        if (j < 4) {
            s[j] = (uint8_t)ls;
            s[j + 4] = (uint8_t)lm;
        } else {
            s[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            s[j - 4] |= (uint8_t)((ls >> 4) << 6);
            s[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
}
/* Shared by Q4_K (nmax 15) and Q5_K (nmax 31): fills scales/d/dmin and L. */
static void quantize_k4(const float *x, int nmax, float rmin, int nstep, uint8_t *scales12, uint16_t *d_out,
                        uint16_t *dmin_out, uint8_t *L) {
    float wt[32], mins[8], scales[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) wt[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = tokd_fit_affine(32, nmax, x + 32 * j, wt, L + 32 * j, &mins[j], rmin, 0.1f, nstep, 0);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    memset(scales12, 0, 12);
    pack_k4_scales(scales, mins, max_scale, max_min, scales12);
    *d_out = f2h(max_scale / 63.f);
    *dmin_out = f2h(max_min / 63.f);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        tokd_k4_scale_min(scales12, j, &sc, &m);
        float d = h2f(*d_out) * (float)sc;
        if (d == 0) continue;
        float dm = h2f(*dmin_out) * (float)m;
        for (int l = 0; l < 32; l++) L[32 * j + l] = (uint8_t)imax(0, imin(nmax, round_even((x[32 * j + l] + dm) / d)));
    }
}

void tokd_q4_K_to_float(const void *src, float *dst, int64_t n) {
    const tokd_block_q4_K *x = src;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        float d = h2f(x[b].d), dmin = h2f(x[b].dmin);
        for (int p = 0; p < 4; p++) {
            int sc0, m0, sc1, m1;
            tokd_k4_scale_min(x[b].scales, 2 * p, &sc0, &m0);
            tokd_k4_scale_min(x[b].scales, 2 * p + 1, &sc1, &m1);
            float d0 = d * (float)sc0, mm0 = dmin * (float)m0, d1 = d * (float)sc1, mm1 = dmin * (float)m1;
            const uint8_t *q = x[b].qs + 32 * p;
            for (int l = 0; l < 32; l++) dst[l] = d0 * (float)(q[l] & 0xF) - mm0;
            for (int l = 0; l < 32; l++) dst[32 + l] = d1 * (float)(q[l] >> 4) - mm1;
            dst += 64;
        }
    }
}
void tokd_q4_K_from_float(const float *src, void *dst, int64_t n) {
    tokd_block_q4_K *y = dst;
    uint8_t L[TOKD_QK_K];
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, src += TOKD_QK_K) {
        quantize_k4(src, 15, -1.f, 20, y[b].scales, &y[b].d, &y[b].dmin, L);
        for (int p = 0; p < 4; p++)
            for (int l = 0; l < 32; l++) y[b].qs[32 * p + l] = (uint8_t)(L[64 * p + l] | (L[64 * p + 32 + l] << 4));
    }
}
void tokd_q4_K_dot_ref(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_q4_K *x = w;
    const tokd_block_q8_K *y = act;
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        int32_t sumi = 0, summ = 0;
        for (int j = 0; j < 8; j++) {
            int sc, m;
            tokd_k4_scale_min(x[b].scales, j, &sc, &m);
            const uint8_t *q = x[b].qs + 32 * (j >> 1);
            const int8_t *a = y[b].qs + 32 * j;
            int sub = 0;
            for (int l = 0; l < 32; l++) sub += ((j & 1) ? (q[l] >> 4) : (q[l] & 0xF)) * a[l];
            sumi += sc * sub;
            summ += m * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
        }
        sum += tokd_k_term2(h2f(x[b].d), h2f(x[b].dmin), y[b].d, sumi, summ);
    }
    *out = sum;
}

void tokd_q5_K_to_float(const void *src, float *dst, int64_t n) {
    const tokd_block_q5_K *x = src;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        float d = h2f(x[b].d), dmin = h2f(x[b].dmin);
        for (int p = 0; p < 4; p++) {
            int sc0, m0, sc1, m1;
            tokd_k4_scale_min(x[b].scales, 2 * p, &sc0, &m0);
            tokd_k4_scale_min(x[b].scales, 2 * p + 1, &sc1, &m1);
            float d0 = d * (float)sc0, mm0 = dmin * (float)m0, d1 = d * (float)sc1, mm1 = dmin * (float)m1;
            const uint8_t *q = x[b].qs + 32 * p, *qh = x[b].qh;
            for (int l = 0; l < 32; l++) dst[l] = d0 * (float)((q[l] & 0xF) | (((qh[l] >> (2 * p)) & 1) << 4)) - mm0;
            for (int l = 0; l < 32; l++)
                dst[32 + l] = d1 * (float)((q[l] >> 4) | (((qh[l] >> (2 * p + 1)) & 1) << 4)) - mm1;
            dst += 64;
        }
    }
}
void tokd_q5_K_from_float(const float *src, void *dst, int64_t n) {
    tokd_block_q5_K *y = dst;
    uint8_t L[TOKD_QK_K];
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, src += TOKD_QK_K) {
        quantize_k4(src, 31, -0.5f, 15, y[b].scales, &y[b].d, &y[b].dmin, L);
        memset(y[b].qh, 0, 32);
        for (int p = 0; p < 4; p++)
            for (int l = 0; l < 32; l++) {
                int l1 = L[64 * p + l], l2 = L[64 * p + 32 + l];
                y[b].qh[l] |= (uint8_t)(((l1 >> 4) << (2 * p)) | ((l2 >> 4) << (2 * p + 1)));
                y[b].qs[32 * p + l] = (uint8_t)((l1 & 0xF) | ((l2 & 0xF) << 4));
            }
    }
}
void tokd_q5_K_dot_ref(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_q5_K *x = w;
    const tokd_block_q8_K *y = act;
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        int32_t sumi = 0, summ = 0;
        for (int j = 0; j < 8; j++) {
            int sc, m;
            tokd_k4_scale_min(x[b].scales, j, &sc, &m);
            const uint8_t *q = x[b].qs + 32 * (j >> 1);
            const int8_t *a = y[b].qs + 32 * j;
            int sub = 0;
            for (int l = 0; l < 32; l++) {
                int v = ((j & 1) ? (q[l] >> 4) : (q[l] & 0xF)) | (((x[b].qh[l] >> j) & 1) << 4);
                sub += v * a[l];
            }
            sumi += sc * sub;
            summ += m * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
        }
        sum += tokd_k_term2(h2f(x[b].d), h2f(x[b].dmin), y[b].d, sumi, summ);
    }
    *out = sum;
}

/* ===== Q6_K: x = d*sc*(q - 32), 16 groups of 16, int8 sc ========================== */

static inline int q6_value(const tokd_block_q6_K *x, int e) {
    int h = e >> 7, s = (e >> 5) & 3, l = e & 31;
    int lo = x->ql[64 * h + l + 32 * (s & 1)];
    lo = (s & 2) ? (lo >> 4) : (lo & 0xF);
    int hi = (x->qh[32 * h + l] >> (2 * s)) & 3;
    return (lo | (hi << 4)) - 32;
}
void tokd_q6_K_to_float(const void *src, float *dst, int64_t n) {
    const tokd_block_q6_K *x = src;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, dst += TOKD_QK_K) {
        float d = h2f(x[b].d);
        for (int e = 0; e < TOKD_QK_K; e++) dst[e] = (d * (float)x[b].scales[e >> 4]) * (float)q6_value(&x[b], e);
    }
}
/* Q6_K's tail, shared with tokd_q6_K_from_float_w: the 16 group scales on an int8 grid
 * against the one of largest magnitude (a block whose scales are all ~0 is zeros), each
 * value refitted with its group's stored scale (a group whose stored scale is 0 keeps the
 * fit's L), then the low nibbles in ql and the high 2 bits in qh. */
void tokd_q6_K_pack(const float *src, const float scales[16], int8_t L[TOKD_QK_K], tokd_block_q6_K *y) {
    float max_scale = 0, max_abs = 0;
    for (int j = 0; j < 16; j++)
        if (fabsf(scales[j]) > max_abs) max_abs = fabsf(scales[j]), max_scale = scales[j];
    if (max_abs < 1e-15f) {
        memset(y, 0, sizeof *y);
        return;
    }
    const float iscale = -128.f / max_scale;
    y->d = f2h(1 / iscale);
    /* in [-128, 128]: 128 kept modulo 256, as ggml's int8 store */
    for (int j = 0; j < 16; j++) y->scales[j] = (int8_t)(uint8_t)imin(127, round_even(iscale * scales[j]));
    for (int j = 0; j < 16; j++) {
        const float d = h2f(y->d) * (float)y->scales[j];
        if (d == 0) continue;
        for (int l = 0; l < 16; l++)
            L[16 * j + l] = (int8_t)(imax(-32, imin(31, round_even(src[16 * j + l] / d))) + 32);
    }
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const int8_t *p = L + 128 * h + l;
            y->ql[64 * h + l] = (uint8_t)((p[0] & 0xF) | ((p[64] & 0xF) << 4));
            y->ql[64 * h + 32 + l] = (uint8_t)((p[32] & 0xF) | ((p[96] & 0xF) << 4));
            y->qh[32 * h + l] =
                (uint8_t)((p[0] >> 4) | ((p[32] >> 4) << 2) | ((p[64] >> 4) << 4) | ((p[96] >> 4) << 6));
        }
}
void tokd_q6_K_from_float(const float *src, void *dst, int64_t n) {
    tokd_block_q6_K *y = dst;
    int8_t L[TOKD_QK_K];
    float scales[16], w[TOKD_QK_K];
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, src += TOKD_QK_K) {
        for (int i = 0; i < TOKD_QK_K; i++) w[i] = src[i] * src[i];
        for (int j = 0; j < 16; j++) scales[j] = tokd_fit_symmetric(16, 32, src + 16 * j, w + 16 * j, L + 16 * j);
        tokd_q6_K_pack(src, scales, L, &y[b]);
    }
}
void tokd_q6_K_dot_ref(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_q6_K *x = w;
    const tokd_block_q8_K *y = act;
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        int32_t sumi = 0;
        for (int j = 0; j < 16; j++) {
            int sub = 0;
            for (int l = 0; l < 16; l++) sub += q6_value(&x[b], 16 * j + l) * y[b].qs[16 * j + l];
            sumi += x[b].scales[j] * sub;
        }
        sum += tokd_k_term1(h2f(x[b].d), y[b].d, sumi);
    }
    *out = sum;
}

/* ===== IQ4_NL / IQ4_XS: x = d * kv[q], 4-bit indices into a non-linear table ======= */

const int8_t tokd_iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* The entry of tokd_iq4_values nearest to v (ties to the upper one; NaN: 15), by
 * bisection. */
int tokd_iq4_index(float v) {
    const int8_t *kv = tokd_iq4_values;
    if (v <= kv[0]) return 0;
    if (v >= kv[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < kv[mid]) hi = mid;
        else lo = mid;
    }
    return v - kv[hi - 1] < kv[hi] - v ? hi - 1 : hi;
}

/* The scale of one block of 32 for the table (quants.h): start from the scale that maps
 * the value of largest magnitude to the table's end, then try the 15 scales that map it
 * to -134..-120 and keep the w-weighted least-squares fit that explains most. 0 for a
 * block below 1e-15; NaN (0/0) when every weight is 0, as in ggml. */
float tokd_iq4_block_scale(const float *x, const float *w) {
    const int8_t *kv = tokd_iq4_values;
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
    if (amax < 1e-15f) return 0;
    float d = -max / kv[0], id = 1 / d, sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; j++) {
        float q = kv[tokd_iq4_index(id * x[j])];
        sumqx += w[j] * q * x[j];
        sumq2 += w[j] * q * q;
    }
    d = sumqx / sumq2;
    float best = d * sumqx;
    for (int t = -7; t <= 7; t++) {
        id = (t + kv[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            float q = kv[tokd_iq4_index(id * x[j])];
            sumqx += w[j] * q * x[j];
            sumq2 += w[j] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) d = sumqx / sumq2, best = d * sumqx;
    }
    return d;
}
/* Without an importance matrix llama.cpp weighs by x^2. */
static float iq4_block_scale(const float *x) {
    float w[32];
    for (int j = 0; j < 32; j++) w[j] = x[j] * x[j];
    return tokd_iq4_block_scale(x, w);
}
/* 32 values as table indices for scale d (0: index of 0), packed as Q4_0's nibbles. */
void tokd_iq4_pack(const float *x, float d, uint8_t qs[16]) {
    const float id = d != 0 ? 1 / d : 0;
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(tokd_iq4_index(id * x[j]) | tokd_iq4_index(id * x[j + 16]) << 4);
}

void tokd_iq4_nl_to_float(const void *src, float *dst, int64_t n) {
    const tokd_block_iq4_nl *x = src;
    for (int64_t b = 0; b < n / TOKD_QK; b++, dst += TOKD_QK) {
        float d = h2f(x[b].d);
        for (int j = 0; j < 16; j++) {
            dst[j] = d * tokd_iq4_values[x[b].qs[j] & 0xF];
            dst[j + 16] = d * tokd_iq4_values[x[b].qs[j] >> 4];
        }
    }
}
void tokd_iq4_nl_from_float(const float *src, void *dst, int64_t n) {
    tokd_block_iq4_nl *y = dst;
    for (int64_t b = 0; b < n / TOKD_QK; b++, src += TOKD_QK) {
        float d = iq4_block_scale(src);
        y[b].d = f2h(d);
        tokd_iq4_pack(src, d, y[b].qs);
    }
}
DOT32_REF(iq4_nl, tokd_block_iq4_nl, tokd_block_q8_0)

/* IQ4_XS: eight blocks of 32 with IQ4_NL's indices; block j's scale is d * (ls_j - 32)
 * (tokd_iq4_xs_scale). */
void tokd_iq4_xs_to_float(const void *src, float *dst, int64_t n) {
    const tokd_block_iq4_xs *x = src;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < 8; j++, dst += 32) {
            const float dl = d * tokd_iq4_xs_scale(&x[b], j);
            const uint8_t *q = x[b].qs + 16 * j;
            for (int l = 0; l < 16; l++) {
                dst[l] = dl * tokd_iq4_values[q[l] & 0xF];
                dst[l + 16] = dl * tokd_iq4_values[q[l] >> 4];
            }
        }
    }
}
/* IQ4_XS's super-block from its eight block scales (quants.h): the eight on a six-bit
 * grid of the super-block scale d = -s/32 (s the block scale of largest magnitude), and
 * each block's indices again at its stored scale. Shared with the weighted quantiser. */
void tokd_iq4_xs_pack(const float *src, const float sc[8], tokd_block_iq4_xs *y) {
    float amax = 0, max = 0;
    for (int j = 0; j < 8; j++)
        if (fabsf(sc[j]) > amax) amax = fabsf(sc[j]), max = sc[j];
    const float d = -max / 32, id = d != 0 ? 1 / d : 0;
    y->d = f2h(d);
    y->scales_h = 0;
    memset(y->scales_l, 0, sizeof y->scales_l);
    for (int j = 0; j < 8; j++) {
        const int l = imax(-32, imin(31, round_even(id * sc[j])));
        tokd_iq4_pack(src + 32 * j, d * l, y->qs + 16 * j);
        y->scales_l[j / 2] |= (uint8_t)(((l + 32) & 0xF) << 4 * (j % 2));
        y->scales_h |= (uint16_t)(((l + 32) >> 4) << 2 * j);
    }
}
/* Each block's scale as IQ4_NL's, then tokd_iq4_xs_pack. */
void tokd_iq4_xs_from_float(const float *src, void *dst, int64_t n) {
    tokd_block_iq4_xs *y = dst;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, src += TOKD_QK_K) {
        float sc[8];
        for (int j = 0; j < 8; j++) sc[j] = iq4_block_scale(src + 32 * j);
        tokd_iq4_xs_pack(src, sc, &y[b]);
    }
}
void tokd_iq4_xs_dot_ref(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_iq4_xs *x = w;
    const tokd_block_q8_K *y = act;
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        int32_t sumi = 0;
        for (int j = 0; j < 8; j++) {
            const uint8_t *q = x[b].qs + 16 * j;
            const int8_t *a = y[b].qs + 32 * j;
            int32_t sub = 0;
            for (int l = 0; l < 16; l++) sub += tokd_iq4_values[q[l] & 0xF] * a[l] + tokd_iq4_values[q[l] >> 4] * a[l + 16];
            sumi += tokd_iq4_xs_scale(&x[b], j) * sub;
        }
        sum += tokd_k_term1(h2f(x[b].d), y[b].d, sumi);
    }
    *out = sum;
}

/* ===== activation formats used as weights (rare; scalar only) ===================== */

void tokd_q8_1_dot_ref(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_q8_1 *x = w;
    const tokd_block_q8_1 *y = act;
    float acc[8] = {0};
    for (int64_t b = 0; b < n / TOKD_QK; b++) {
        int32_t s = 0;
        for (int j = 0; j < TOKD_QK; j++) s += x[b].qs[j] * y[b].qs[j];
        acc[b & 7] += (h2f(x[b].d) * h2f(y[b].d)) * (float)s;
    }
    *out = tokd_reduce8(acc);
}
void tokd_q8_K_dot_ref(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_q8_K *x = w;
    const tokd_block_q8_K *y = act;
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        int32_t s = 0;
        for (int j = 0; j < TOKD_QK_K; j++) s += x[b].qs[j] * y[b].qs[j];
        sum += tokd_k_term1(x[b].d, y[b].d, s);
    }
    *out = sum;
}
