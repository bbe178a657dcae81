/* quantize_iq3.c — the quantisers of IQ3_XXS and IQ3_S (quantize_iq3.h), byte for byte
 * llama.cpp's quantize_iq3_xxs and quantize_iq3_s (c392e5094), with and without an
 * importance matrix.
 *
 * Both formats cut a super-block of 256 weights into 8 sub-blocks of 32 and each of
 * those into 8 groups of 4, and store for each group the index of a point of a fixed
 * lattice (iq_grids.h: 256 points for IQ3_XXS, 512 for IQ3_S), each point 4 levels
 * l = 0..7 standing for the odd values 2l + 1, plus the groups' signs and one scale per
 * sub-block. Most of the 8^4 = 4096 level codes are not lattice points, so fitting a
 * sub-block needs, for a code off the lattice, the points to try instead. This file owns
 * those tables (struct lattice): for each code its point's index, or its candidate list:
 * every point at one of the 2 (IQ3_XXS) or 3 (IQ3_S) smallest squared distances from
 * the code's own values, nearest first and by index within a distance. llama.cpp builds
 * the same lists by sorting (distance, index) pairs with qsort; that order is total (no
 * two pairs equal), so any way of producing it gives the same lists, and here it is
 * read off shell by shell. The tables are built once, from tokd_iq_grids_init's rows,
 * under pthread_once on the first quantiser call; after that they are only read, so any
 * number of threads may quantise at once (all other state is on the caller's stack).
 *
 * A sub-block of 32 (fit_sub_block) is fitted as llama.cpp does it: signs taken off
 * (IQ3_XXS keeps 7 sign bits per 8 weights, so where an odd count is negative the one
 * with the least weighted square keeps its sign and enters the fit negative); then for
 * each of 31 (IQ3_S: 19) trial inverse scales (15 + 0.2 is)/max every group is rounded to
 * levels, replaced by its best candidate point when off the lattice, and the trial with
 * the best weighted least-squares fit kept; then, with that fit's scale, the groups that
 * were off the lattice (IQ3_S: all groups) are placed again, and the scale refitted. The
 * sub-block scales are finally coded as 4-bit odd multiples of the super-block's
 * fp16 d = max/31 (times 1.0125, IQ3_S 1.033). Error weights: without an importance
 * matrix x^2, with one qw * sqrt(sigma2 + x^2), sigma2 twice the super-block's mean
 * square; the candidate search weighs by their square roots. Every float expression is
 * evaluated in llama.cpp's order and types, without fused multiply-add; rounding is
 * tokd_nearest_int (ggml's nearest_int).
 *
 * llama.cpp's behaviour is kept where it is odd, since the bytes must be its bytes:
 *  - IQ3_S: a sub-block whose values are all zero writes no indices and signs, and the
 *    sub-blocks after it are written from that position on (their grid-index high bits
 *    and scales stay in place): the block then decodes wrongly, in llama.cpp as here.
 *  - When no trial scale gives a fit (a sub-block whose weights are all zero, or whose
 *    values are so small that the weighted sums vanish), the levels and on-lattice flags
 *    left from the sub-block before are reused (fit_state, carried along the row):
 *    IQ3_XXS keeps the groups that were on the lattice there, with the levels of the
 *    last fitted sub-block, or zeros if a skipped one came since; IQ3_S re-places every
 *    group, unless max/15 underflows to zero. Before a row's first fitted sub-block
 *    llama.cpp reads uninitialised stack memory there, so its bytes are not defined;
 *    this file starts a row from levels 0 and every group off the lattice (every group
 *    placed from the data), which is what llama.cpp does when that stack is zero.
 *  - A candidate search whose distances are all NaN (non-finite input) aborts in
 *    llama.cpp; here it takes the first candidate. */
#include "kernels/quantize_iq3.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/iq_grids.h"
#include "kernels/quants.h"
#include "util.h"

#define N_CODES 4096 /* four 3-bit levels: code = l0 | l1 << 3 | l2 << 6 | l3 << 9 */

typedef struct {
    float value[512][4];       /* point i's coordinates 2l + 1, as the fits multiply them */
    int8_t level[512][4];      /* and its levels */
    int16_t index[N_CODES];    /* the point a code is, or -1 */
    uint32_t near_at[N_CODES]; /* a code off the lattice: its candidates are */
    uint16_t near_n[N_CODES];  /*   near[near_at .. near_at + near_n) */
    uint16_t *near;
} lattice;

static lattice lat_xxs, lat_s;

static inline int code_of(const int8_t l[4]) { return l[0] | l[1] << 3 | l[2] << 6 | l[3] << 9; }

/* The tables of a lattice of npoints points given as levels; candidates from the
 * nshells smallest distances. */
static void lattice_build(lattice *g, const int8_t (*levels)[4], int npoints, int nshells) {
    memset(g->index, 0xff, sizeof g->index);
    for (int i = 0; i < npoints; i++) {
        memcpy(g->level[i], levels[i], 4);
        for (int k = 0; k < 4; k++) g->value[i][k] = (float)(2 * levels[i][k] + 1);
        g->index[code_of(levels[i])] = (int16_t)i;
    }
    size_t len = 0, cap = 0;
    uint16_t *near = NULL;
    int d2[512];
    for (int code = 0; code < N_CODES; code++) {
        if (g->index[code] >= 0) continue;
        for (int i = 0; i < npoints; i++) {
            d2[i] = 0;
            for (int k = 0; k < 4; k++) {
                const int diff = 2 * ((code >> 3 * k) & 7) - 2 * levels[i][k];
                d2[i] += diff * diff;
            }
        }
        g->near_at[code] = (uint32_t)len;
        int shell = -1;
        for (int s = 0; s < nshells; s++) {
            int next = -1;
            for (int i = 0; i < npoints; i++)
                if (d2[i] > shell && (next < 0 || d2[i] < next)) next = d2[i];
            if (next < 0) break;
            shell = next;
            for (int i = 0; i < npoints; i++) {
                if (d2[i] != shell) continue;
                if (len == cap) near = tokd_xrealloc(near, (cap = cap ? 2 * cap : 4096) * sizeof *near);
                near[len++] = (uint16_t)i;
            }
        }
        g->near_n[code] = (uint16_t)(len - g->near_at[code]);
    }
    g->near = near;
}

static void tables_init(void) {
    tokd_iq_grids_init();
    int8_t lv[512][4];
    /* IQ3_XXS's rows hold the dequantised values {4, 12, ..., 52, 62}, level l at 8l + 4
       (but 62 for 7); IQ3_S's hold 2l + 1. */
    for (int i = 0; i < 256; i++)
        for (int k = 0; k < 4; k++) lv[i][k] = (int8_t)(tokd_iq3xxs_grid[i][k] >= 60 ? 7 : (tokd_iq3xxs_grid[i][k] - 4) / 8);
    lattice_build(&lat_xxs, (const int8_t (*)[4])lv, 256, 2);
    for (int i = 0; i < 512; i++)
        for (int k = 0; k < 4; k++) lv[i][k] = (int8_t)((tokd_iq3s_grid[i][k] - 1) / 2);
    lattice_build(&lat_s, (const int8_t (*)[4])lv, 512, 3);
}

static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

/* ---- fitting one sub-block of 32 ------------------------------------------------- */

typedef struct {
    const lattice *g;
    bool xxs;  /* IQ3_XXS (even sign counts, a floor on max, second pass off-lattice only) */
    int nstep; /* trial inverse scales (15 + 0.2 is) / max for |is| <= nstep */
} variant;

/* What carries from one sub-block to the next within a row (see the top). */
typedef struct {
    int8_t L[32];      /* the chosen levels */
    bool on_grid[8];   /* whether each group's rounding at the chosen scale was a point */
} fit_state;

static inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The candidate point of an off-lattice code that is nearest to x at scale, distances
 * weighted by sw: its levels into L. The first strictly smallest wins. */
static void nearest_point(const lattice *g, int code, const float *x, const float *sw, float scale, int8_t *L) {
    const uint16_t *cand = g->near + g->near_at[code];
    float best = FLT_MAX;
    int pick = cand[0];
    for (int j = 0; j < g->near_n[code]; j++) {
        const float *p = g->value[cand[j]];
        float d2 = 0;
        for (int i = 0; i < 4; i++) {
            const float diff = scale * p[i] - x[i];
            d2 += sw[i] * diff * diff;
        }
        if (d2 < best) {
            best = d2;
            pick = cand[j];
        }
    }
    memcpy(L, g->level[pick], 4);
}

/* A group of 4 at inverse scale id (scale its inverse): rounded levels into L, replaced by
 * the nearest candidate when they are not a point. Returns whether they were. */
static bool place_group(const lattice *g, const float *x, const float *sw, float id, float scale, int8_t *L) {
    for (int i = 0; i < 4; i++) L[i] = (int8_t)clamp_int(tokd_nearest_int(0.5f * (id * x[i] - 1)), 0, 7);
    const int code = code_of(L);
    if (g->index[code] >= 0) return true;
    nearest_point(g, code, x, sw, scale, L);
    return false;
}

/* sum w x q and sum w q^2 over the 32, q = 2L + 1 */
static void fit_sums(const float *w, const float *x, const int8_t *L, float *sumqx, float *sumq2) {
    float sx = 0, s2 = 0;
    for (int i = 0; i < 32; i++) {
        const float q = (float)(2 * L[i] + 1);
        sx += w[i] * x[i] * q;
        s2 += w[i] * q * q;
    }
    *sumqx = sx, *sumq2 = s2;
}

/* Sub-block x (32 values, error weights w): levels into st->L, the 4 sign bytes of its
 * groups of 8 (IQ3_XXS: 7 bits each) and its scale (>= 0). Returns false, and sets
 * nothing but what llama.cpp sets, for a sub-block it skips (all zero; IQ3_XXS: largest
 * magnitude below 1e-8). */
static bool fit_sub_block(const variant *v, const float *x, const float *w, fit_state *st, uint8_t signs[4],
                          float *scale_out) {
    const lattice *g = v->g;
    float sw[32], xv[32];
    for (int i = 0; i < 32; i++) sw[i] = sqrtf(w[i]);
    for (int k = 0; k < 4; k++) {
        const float *xk = x + 8 * k;
        float *vk = xv + 8 * k;
        uint8_t s = 0;
        int nneg = 0;
        for (int i = 0; i < 8; i++) {
            if (xk[i] >= 0) {
                vk[i] = xk[i];
            } else {
                vk[i] = -xk[i];
                nneg++;
                s |= (uint8_t)(1 << i);
            }
        }
        if (v->xxs && nneg % 2) {
            /* an odd count: the least important weight keeps its sign */
            const float *wk = w + 8 * k;
            int least = 0;
            float min = wk[0] * xk[0] * xk[0];
            for (int i = 1; i < 8; i++) {
                const float e = wk[i] * xk[i] * xk[i];
                if (e < min) min = e, least = i;
            }
            vk[least] = -vk[least];
            s ^= (uint8_t)(1 << least);
        }
        signs[k] = v->xxs ? s & 127 : s;
    }
    float max = xv[0];
    for (int i = 1; i < 32; i++) max = max > xv[i] ? max : xv[i];
    if (v->xxs ? max < 1e-8f : max == 0) {
        if (v->xxs) memset(st->L, 0, sizeof st->L);
        return false;
    }

    float best = 0, scale = max / 15;
    if (!v->xxs) memset(st->on_grid, 0, sizeof st->on_grid);
    int8_t Lt[32];
    bool on_t[8];
    for (int is = -v->nstep; is <= v->nstep; is++) {
        const float id = (15 + is * 0.2f) / max, trial_scale = 1 / id;
        for (int k = 0; k < 8; k++) on_t[k] = place_group(g, xv + 4 * k, sw + 4 * k, id, trial_scale, Lt + 4 * k);
        float sumqx, sumq2;
        fit_sums(w, xv, Lt, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(st->L, Lt, sizeof Lt);
            memcpy(st->on_grid, on_t, sizeof on_t);
        }
    }

    int off = 0;
    for (int k = 0; k < 8; k++) off += !st->on_grid[k];
    if (off > 0 && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 8; k++) {
            if (v->xxs && st->on_grid[k]) continue;
            place_group(g, xv + 4 * k, sw + 4 * k, id, scale, st->L + 4 * k);
        }
        float sumqx, sumq2;
        fit_sums(w, xv, st->L, &sumqx, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    if (scale < 0) {
        /* only IQ3_XXS's kept negative can get here: flip the signs instead */
        scale = -scale;
        for (int k = 0; k < 4; k++) signs[k] = v->xxs ? (uint8_t)~signs[k] & 127 : (uint8_t)~signs[k];
    }
    *scale_out = scale;
    return true;
}

/* The 8 groups' point indices of the chosen levels (always points: every level set comes
 * from place_group, or is the initial zeros, point 0 of both lattices). */
static void point_indices(const lattice *g, const int8_t *L, int idx[8]) {
    for (int k = 0; k < 8; k++) idx[k] = g->index[code_of(L + 4 * k)];
}

/* The error weights of sub-block x: x^2, or with an importance matrix qw * sqrt(sigma2 + x^2). */
static void sub_block_weights(const float *x, const float *qw, float sigma2, float *w) {
    if (qw)
        for (int i = 0; i < 32; i++) w[i] = qw[i] * sqrtf(sigma2 + x[i] * x[i]);
    else
        for (int i = 0; i < 32; i++) w[i] = x[i] * x[i];
}

/* twice the mean square of a super-block */
static float super_sigma2(const float *x) {
    float s = 0;
    for (int i = 0; i < TOKD_QK_K; i++) s += x[i] * x[i];
    return 2 * s / TOKD_QK_K;
}

static inline int scale_code(float id, float s) { return clamp_int(tokd_nearest_int(0.5f * (id * s - 1)), 0, 15); }

/* ---- the rows -------------------------------------------------------------------- */

static void quantize_iq3_xxs_row(const float *x, void *dst, int64_t n, const float *qw) {
    pthread_once(&tables_once, tables_init);
    static const variant V = {&lat_xxs, true, 15};
    tokd_block_iq3_xxs *y = dst;
    fit_state st = {{0}, {false}};
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        const float *xb = x + TOKD_QK_K * b;
        const float sigma2 = super_sigma2(xb);
        uint8_t qs[96] = {0};   /* 64 point indices, then 8 words of signs and scale */
        uint32_t words[8] = {0};
        float scales[8], max_scale = 0, w[32];
        for (int ib = 0; ib < 8; ib++) {
            sub_block_weights(xb + 32 * ib, qw ? qw + TOKD_QK_K * b + 32 * ib : NULL, sigma2, w);
            uint8_t signs[4];
            float scale;
            if (!fit_sub_block(&V, xb + 32 * ib, w, &st, signs, &scale)) {
                scales[ib] = 0;
                continue;
            }
            int idx[8];
            point_indices(V.g, st.L, idx);
            for (int k = 0; k < 8; k++) qs[8 * ib + k] = (uint8_t)idx[k];
            words[ib] = signs[0] | (uint32_t)signs[1] << 7 | (uint32_t)signs[2] << 14 | (uint32_t)signs[3] << 21;
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (max_scale == 0) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        const float d = max_scale / 31;
        y[b].d = tokd_f32_to_f16(d * 1.0125f);
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ib++) {
            const uint32_t a = words[ib] | (uint32_t)scale_code(id, scales[ib]) << 28;
            for (int j = 0; j < 4; j++) qs[64 + 4 * ib + j] = (uint8_t)(a >> 8 * j);
        }
        memcpy(y[b].qs, qs, sizeof qs);
    }
}

static void quantize_iq3_s_row(const float *x, void *dst, int64_t n, const float *qw) {
    pthread_once(&tables_once, tables_init);
    static const variant V = {&lat_s, false, 9};
    tokd_block_iq3_s *y = dst;
    fit_state st = {{0}, {false}};
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        const float *xb = x + TOKD_QK_K * b;
        tokd_block_iq3_s *yb = &y[b];
        memset(yb, 0, sizeof *yb);
        const float sigma2 = super_sigma2(xb);
        float scales[8], max_scale = 0, w[32];
        int slot = 0; /* where the next sub-block's indices and signs go (see the top) */
        for (int ib = 0; ib < 8; ib++) {
            sub_block_weights(xb + 32 * ib, qw ? qw + TOKD_QK_K * b + 32 * ib : NULL, sigma2, w);
            uint8_t signs[4];
            float scale;
            if (!fit_sub_block(&V, xb + 32 * ib, w, &st, signs, &scale)) {
                scales[ib] = 0;
                continue;
            }
            int idx[8];
            point_indices(V.g, st.L, idx);
            for (int k = 0; k < 8; k++) {
                yb->qs[8 * slot + k] = (uint8_t)(idx[k] & 255);
                yb->qh[ib] |= (uint8_t)((idx[k] >> 8) << k);
            }
            memcpy(yb->signs + 4 * slot, signs, 4);
            slot++;
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (max_scale == 0) continue;
        const float d = max_scale / 31;
        yb->d = tokd_f32_to_f16(d * 1.033f);
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ib += 2)
            yb->scales[ib / 2] = (uint8_t)(scale_code(id, scales[ib]) | scale_code(id, scales[ib + 1]) << 4);
    }
}

void tokd_iq3_xxs_from_float_w(const float *src, void *dst, int64_t n, const float *qw) {
    quantize_iq3_xxs_row(src, dst, n, qw);
}
void tokd_iq3_s_from_float_w(const float *src, void *dst, int64_t n, const float *qw) {
    quantize_iq3_s_row(src, dst, n, qw);
}
void tokd_iq3_xxs_from_float(const float *src, void *dst, int64_t n) { quantize_iq3_xxs_row(src, dst, n, NULL); }
void tokd_iq3_s_from_float(const float *src, void *dst, int64_t n) { quantize_iq3_s_row(src, dst, n, NULL); }
