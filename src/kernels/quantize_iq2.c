/* quantize_iq2.c — the quantisers of IQ2_XXS, IQ2_XS and IQ2_S (quantize_iq2.h), and the
 * search tables of the grids of points with coordinates 1, 3, 5 that they (and llama.cpp's
 * IQ1 quantisers, on the 2048-point grid) search.
 *
 * These formats code each group of 8 weights as a point of a fixed grid (iq_grids.h)
 * times a sign byte and a scale; finding the point is the quantiser's work, and the
 * files llama-quantize writes are what tokd must reproduce, so this file follows
 * llama.cpp c392e5094 (quantize_row_iq2_xxs_impl, quantize_row_iq2_xs_impl,
 * quantize_row_iq2_s_impl) to the operation: every float expression in the same order
 * and types, without fused multiply-add, rounding with tokd_nearest_int, so that the
 * bytes are the same. In outline, for each sub-block (IQ2_XXS: 32 weights, the others:
 * 16): error weights w from the importance matrix (or, IQ2_S without one, from x); the
 * magnitudes |x| with the signs kept apart (IQ2_XXS/XS store 7 sign bits a group, so
 * the group's smallest w*x^2 element keeps its sign there, an even number being
 * negated); then a few trial scales, each rounding the magnitudes to levels 0..2 and
 * replacing a group whose levels are not a grid point by the best of that code's
 * neighbours (below), keeping the trial with the best least-squares fit; then a final
 * re-rounding at the fitted scale. The sub-block scales are then coded in 4 bits
 * against the block's largest.
 *
 * The tables (tokd_iq2_qtables): every code of 8 levels that is not a grid point gets a
 * list of candidate points, those at the nearest few squared distances (llama.cpp's
 * iq2xs_init_impl: it sorts all points by (distance, index) with qsort, a total order,
 * so any method giving the same order gives the same lists; here a pass for each
 * distance). The point coordinates come from iq_grids.h's byte rows, which hold
 * llama.cpp's points in its order. Each grid's tables are built on first use under a
 * pthread_once, so threads quantising at once share one copy; they are never freed.
 *
 * Where llama.cpp aborts (an assertion) this file writes something defined instead: a
 * sub-block whose weights are all zero leaves IQ2_XXS's scale fit 0/0 = NaN, and the
 * sub-block is then written as a sub-block of zeros (llama.cpp: "GGML_ASSERT(scale >=
 * 0)" or its "point not on grid" abort); the same for any sub-block whose final levels
 * are not a grid point. IQ2_XS and IQ2_S keep, for a sub-block whose weights are all
 * zero, the levels of the row's previous sub-block, as llama.cpp does; for the row's
 * first sub-block llama.cpp reads uninitialised memory there, tokd the point of index 0. */
#include "kernels/quantize_iq2.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/iq_grids.h"
#include "kernels/quants.h"
#include "util.h"

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }
/* ggml's MAX for floats: the second when they are unordered */
static inline float gmax(float a, float b) { return a > b ? a : b; }

/* ===== the tables ===================================================================== */

typedef struct {
    uint16_t *v;
    size_t n, cap;
} u16_list;

static void push(u16_list *l, uint16_t x) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 4096;
        l->v = tokd_xrealloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = x;
}

static bool has_level3(int u) {
    for (int j = 0; j < 8; j++)
        if (((u >> 2 * j) & 3) == 3) return true;
    return false;
}

/* The tables of a grid given as byte rows (8 a point) whose coordinate bytes are
 * values[0], values[1], values[2] for levels 0, 1, 2. */
static void build_tables(tokd_iq2_qtables *t, int grid_size, int shells, const uint8_t *rows,
                         const uint8_t values[3]) {
    int8_t(*point)[8] = tokd_xmalloc((size_t)grid_size * sizeof *point);
    float(*fpoint)[8] = tokd_xmalloc((size_t)grid_size * sizeof *fpoint);
    int32_t *map = tokd_xmalloc(TOKD_IQ2_NCODES * sizeof *map);
    int *d2 = tokd_xmalloc((size_t)grid_size * sizeof *d2);
    for (int u = 0; u < TOKD_IQ2_NCODES; u++) map[u] = -1; /* the empty list at 0 */
    for (int i = 0; i < grid_size; i++) {
        int code = 0;
        for (int j = 0; j < 8; j++) {
            const uint8_t v = rows[8 * i + j];
            const int l = v == values[0] ? 0 : v == values[1] ? 1 : 2;
            point[i][j] = (int8_t)(2 * l + 1);
            fpoint[i][j] = (float)(2 * l + 1);
            code |= l << 2 * j;
        }
        map[code] = i;
    }
    u16_list nb = {0};
    push(&nb, 0);
    for (int u = 0; u < TOKD_IQ2_NCODES; u++) {
        if (map[u] >= 0 || has_level3(u)) continue;
        int c[8];
        for (int j = 0; j < 8; j++) c[j] = 2 * ((u >> 2 * j) & 3) + 1;
        for (int i = 0; i < grid_size; i++) {
            int s = 0;
            for (int j = 0; j < 8; j++) s += (point[i][j] - c[j]) * (point[i][j] - c[j]);
            d2[i] = s;
        }
        /* the `shells` smallest distances, then their points by distance and index */
        int dist[3], found = 0, last = -1;
        for (int s = 0; s < shells; s++) {
            int next = INT_MAX;
            for (int i = 0; i < grid_size; i++)
                if (d2[i] > last && d2[i] < next) next = d2[i];
            if (next == INT_MAX) break;
            dist[found++] = last = next;
        }
        const size_t o = nb.n;
        push(&nb, 0);
        for (int s = 0; s < found; s++)
            for (int i = 0; i < grid_size; i++)
                if (d2[i] == dist[s]) push(&nb, (uint16_t)i);
        nb.v[o] = (uint16_t)(nb.n - o - 1);
        map[u] = -1 - (int32_t)o;
    }
    free(d2);
    t->grid_size = grid_size;
    t->shells = shells;
    t->point = (const int8_t(*)[8])point;
    t->fpoint = (const float(*)[8])fpoint;
    t->map = map;
    t->neighbours = nb.v;
}

static tokd_iq2_qtables tables[4];
static pthread_once_t tables_once[4] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT,
                                        PTHREAD_ONCE_INIT};
static const uint8_t IQ2_VALUES[3] = {8, 25, 43};
static const uint8_t IQ1_VALUES[3] = {0xFF, 0x00, 0x01}; /* -1, 0, 1 */

static void build_256(void) {
    tokd_iq_grids_init();
    build_tables(&tables[0], 256, 2, &tokd_iq2xxs_grid[0][0], IQ2_VALUES);
}
static void build_512(void) {
    tokd_iq_grids_init();
    build_tables(&tables[1], 512, 2, &tokd_iq2xs_grid[0][0], IQ2_VALUES);
}
static void build_1024(void) {
    tokd_iq_grids_init();
    build_tables(&tables[2], 1024, 1, &tokd_iq2s_grid[0][0], IQ2_VALUES);
}
static void build_2048(void) {
    tokd_iq_grids_init();
    build_tables(&tables[3], 2048, 3, (const uint8_t *)&tokd_iq1s_grid[0][0], IQ1_VALUES);
}

const tokd_iq2_qtables *tokd_iq2_qtables_get(int grid_size) {
    switch (grid_size) {
    case 256: pthread_once(&tables_once[0], build_256); return &tables[0];
    case 512: pthread_once(&tables_once[1], build_512); return &tables[1];
    case 1024: pthread_once(&tables_once[2], build_1024); return &tables[2];
    case 2048: pthread_once(&tables_once[3], build_2048); return &tables[3];
    default: return NULL;
    }
}

/* ===== pieces of the quantisers ======================================================= */

static inline void wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static inline void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i);
}

static float sum_squares_256(const float *x) {
    float s = 0;
    for (int i = 0; i < TOKD_QK_K; i++) s += x[i] * x[i];
    return s;
}

/* The code of 8 levels as ggml forms it in a uint16 (bits beyond a level's two spill
 * into the next, and out of the top), and the point it names: >= 0 a grid point,
 * otherwise not one (including codes past the map, which only levels outside 0..2
 * give). */
static inline uint16_t code_of(const int8_t *L) {
    uint32_t u = 0;
    for (int j = 0; j < 8; j++) u |= (uint32_t)(int32_t)L[j] << 2 * j;
    return (uint16_t)u;
}
static inline int32_t point_of(const tokd_iq2_qtables *t, uint16_t u) {
    return u < TOKD_IQ2_NCODES ? t->map[u] : -1;
}

/* The magnitudes of 8 values into xval and their signs (bit j: x[j] < 0). With `even`,
 * an odd count of negatives has the element of least w*x^2 flipped (its bit toggled, its
 * xval negated), so that the bits set are even and 7 of them carry all 8. */
static inline uint8_t split_signs(const float *x, const float *w, float *xval, bool even) {
    unsigned s = 0;
    int neg = 0;
    for (int i = 0; i < 8; i++) {
        if (x[i] >= 0) {
            xval[i] = x[i];
        } else {
            xval[i] = -x[i];
            neg++;
            s |= 1u << i;
        }
    }
    if (even && (neg & 1)) {
        int at = 0;
        float least = w[0] * x[0] * x[0];
        for (int i = 1; i < 8; i++) {
            const float a = w[i] * x[i] * x[i];
            if (a < least) least = a, at = i;
        }
        xval[at] = -xval[at];
        s ^= 1u << at;
    }
    return (uint8_t)s;
}

/* The levels of 8 magnitudes at inverse scale id (coordinate 2l + 1, l clamped to
 * 0..2) into L; returns their code. */
static inline uint16_t round_levels(const float *xval, float id, int8_t *L) {
    unsigned u = 0;
    for (int i = 0; i < 8; i++) {
        const int l = imax(0, imin(2, tokd_nearest_int(0.5f * (id * xval[i] - 1))));
        L[i] = (int8_t)l;
        u |= (unsigned)l << 2 * i;
    }
    return (uint16_t)u;
}

/* The weighted squared distance of scale*p from xval, in ggml's order */
static inline float dist2(const float *p, const float *xval, const float *w, float scale) {
    float d2 = 0;
    for (int i = 0; i < 8; i++) {
        const float diff = scale * p[i] - xval[i];
        d2 += w[i] * diff * diff;
    }
    return d2;
}

/* Of the candidates of a code that is not a point (m = its map entry), the one nearest to
 * xval at `scale` by error weights w (the first of equals); its levels into L, its index
 * returned. Four candidates at a time, each summed in ggml's order (the four sums are
 * independent, which is what makes it faster), compared in the list's order. (ggml
 * asserts a candidate beats FLT_MAX; where none does, from infinite errors, the first is
 * taken.) */
static int nearest_neighbour(const tokd_iq2_qtables *t, int32_t m, const float *xval, const float *w, float scale,
                             int8_t *L) {
    const uint16_t *nb = t->neighbours + (-1 - m);
    const int count = nb[0];
    nb++;
    const float(*P)[8] = t->fpoint;
    int best = count ? nb[0] : 0, j = 0;
    float best_d2 = FLT_MAX;
    for (; j + 4 <= count; j += 4) {
        const float *p0 = P[nb[j]], *p1 = P[nb[j + 1]], *p2 = P[nb[j + 2]], *p3 = P[nb[j + 3]];
        float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
        for (int i = 0; i < 8; i++) {
            const float e0 = scale * p0[i] - xval[i], e1 = scale * p1[i] - xval[i];
            const float e2 = scale * p2[i] - xval[i], e3 = scale * p3[i] - xval[i];
            d0 += w[i] * e0 * e0;
            d1 += w[i] * e1 * e1;
            d2 += w[i] * e2 * e2;
            d3 += w[i] * e3 * e3;
        }
        if (d0 < best_d2) best_d2 = d0, best = nb[j];
        if (d1 < best_d2) best_d2 = d1, best = nb[j + 1];
        if (d2 < best_d2) best_d2 = d2, best = nb[j + 2];
        if (d3 < best_d2) best_d2 = d3, best = nb[j + 3];
    }
    for (; j < count; j++) {
        const float d = dist2(P[nb[j]], xval, w, scale);
        if (d < best_d2) best_d2 = d, best = nb[j];
    }
    for (int i = 0; i < 8; i++) L[i] = (int8_t)((t->point[best][i] - 1) / 2);
    return best;
}

/* The levels of n/8 groups at inverse scale id, each group not a point replaced by its
 * nearest candidate at `scale`; on[k] (if not NULL) whether group k was a point. */
static void groups_to_points(const tokd_iq2_qtables *t, int n, const float *xval, const float *waux, float id,
                             float scale, int8_t *L, bool *on) {
    for (int k = 0; k < n / 8; k++) {
        const int32_t m = t->map[round_levels(xval + 8 * k, id, L + 8 * k)];
        if (on) on[k] = m >= 0;
        if (m < 0) nearest_neighbour(t, m, xval + 8 * k, waux + 8 * k, scale, L + 8 * k);
    }
}

/* sum w*x*q and sum w*q^2 over n values with q = 2L + 1 */
static inline void fit_sums(int n, const float *w, const float *xval, const int8_t *L, float *sqx, float *sq2) {
    float a = 0, b = 0;
    for (int i = 0; i < n; i++) {
        const float q = 2 * L[i] + 1;
        a += w[i] * xval[i] * q;
        b += w[i] * q * q;
    }
    *sqx = a, *sq2 = b;
}


/* The 4-bit code of a sub-block scale against the block's d = max_scale/31 (id = 1/d) */
static inline int scale_code(float id, float scale) {
    return imax(0, imin(15, tokd_nearest_int(0.5f * (id * scale - 1))));
}

/* ===== IQ2_XXS: sub-blocks of 32, one scale each, 256 points ========================= */

/* One sub-block: xb, its error weights w and sqrt(w) waux; fills xval, L (levels of the 4
 * groups) and signs (7 bits a group); returns the scale, or -1 where the sub-block is to
 * be written as zeros. */
static float iq2_xxs_sub(const tokd_iq2_qtables *t, const float *xb, const float *w, const float *waux, float *xval,
                         int8_t *L, uint8_t *signs) {
    for (int k = 0; k < 4; k++) signs[k] = split_signs(xb + 8 * k, w + 8 * k, xval + 8 * k, true) & 127;
    float max = xval[0];
    for (int i = 1; i < 32; i++) max = gmax(max, xval[i]);
    if (max < 1e-15f) {
        memset(L, 0, 32);
        return -1;
    }
    float scale = tokd_fit_positive(32, 4, xval, (uint8_t *)L, w);
    const float eff_max = scale * 3;
    float best = 0;
    int8_t Laux[32];
    for (int is = -6; is <= 6; is++) {
        const float id = (5 + is * 0.1f) / eff_max;
        groups_to_points(t, 32, xval, waux, id, 1 / id, Laux, NULL);
        float sqx, sq2;
        fit_sums(32, w, xval, Laux, &sqx, &sq2);
        if (sq2 > 0 && sqx * sqx > best * sq2) {
            scale = sqx / sq2;
            best = scale * sqx;
            memcpy(L, Laux, 32);
        }
    }
    if (scale > 0) {
        groups_to_points(t, 32, xval, waux, 1 / scale, scale, L, NULL);
        float sqx, sq2;
        fit_sums(32, w, xval, L, &sqx, &sq2);
        if (sq2 > 0) scale = sqx / sq2;
    }
    if (scale < 0) {
        scale = -scale;
        for (int k = 0; k < 4; k++) signs[k] = (uint8_t)~signs[k] & 127;
    }
    if (!(scale >= 0)) return -1; /* NaN: ggml aborts */
    return scale;
}

void tokd_iq2_xxs_from_float_w(const float *src, void *dst, int64_t n, const float *qw) {
    const tokd_iq2_qtables *t = tokd_iq2_qtables_get(256);
    tokd_block_iq2_xxs *y = dst;
    float scales[8], w[32], waux[32], xval[32];
    int8_t L[32] = {0};
    uint8_t signs[4];
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, src += TOKD_QK_K, qw += TOKD_QK_K) {
        uint32_t q2[16] = {0};
        float max_scale = 0;
        const float sigma2 = sum_squares_256(src) / TOKD_QK_K;
        for (int ib = 0; ib < 8; ib++) {
            const float *xb = src + 32 * ib;
            for (int i = 0; i < 32; i++) w[i] = qw[32 * ib + i] * sqrtf(sigma2 + xb[i] * xb[i]);
            for (int i = 0; i < 32; i++) waux[i] = sqrtf(w[i]);
            float scale = iq2_xxs_sub(t, xb, w, waux, xval, L, signs);
            int32_t idx[4];
            for (int k = 0; k < 4 && scale >= 0; k++)
                if ((idx[k] = point_of(t, code_of(L + 8 * k))) < 0) scale = -1; /* ggml aborts */
            if (scale < 0) {
                scales[ib] = 0;
                continue;
            }
            for (int k = 0; k < 4; k++) {
                q2[2 * ib] |= (uint32_t)idx[k] << 8 * k;
                q2[2 * ib + 1] |= (uint32_t)signs[k] << 7 * k;
            }
            scales[ib] = scale;
            max_scale = gmax(max_scale, scale);
        }
        y[b].d = tokd_f32_to_f16(0);
        if (max_scale == 0) {
            memset(y[b].qs, 0, sizeof y[b].qs);
            continue;
        }
        const float d = max_scale / 31;
        y[b].d = tokd_f32_to_f16(d);
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ib++) q2[2 * ib + 1] |= (uint32_t)scale_code(id, scales[ib]) << 28;
        for (int i = 0; i < 16; i++) wr32(y[b].qs + 4 * i, q2[i]);
    }
}

/* ===== IQ2_XS and IQ2_S: sub-blocks of 16, 512 and 1024 points ====================== */

/* The scale search of one sub-block of 16 (magnitudes xval, largest max), shared by
 * IQ2_XS and IQ2_S: 19 trial scales; then the groups that were not points at the best
 * trial rounded again at its fitted scale. L keeps its levels where no trial fits (all
 * weights zero): the previous sub-block's, as in ggml. */
static float fit16(const tokd_iq2_qtables *t, const float *xval, const float *w, const float *waux, float max,
                   int8_t *L) {
    int8_t Laux[16];
    bool on[2] = {true, true}, on_aux[2];
    float best = 0, scale = max / 5;
    for (int is = -9; is <= 9; is++) {
        const float id = (5 + is * 0.1f) / max;
        groups_to_points(t, 16, xval, waux, id, 1 / id, Laux, on_aux);
        float sqx, sq2;
        fit_sums(16, w, xval, Laux, &sqx, &sq2);
        if (sq2 > 0 && sqx * sqx > best * sq2) {
            scale = sqx / sq2;
            best = scale * sqx;
            memcpy(L, Laux, 16);
            on[0] = on_aux[0], on[1] = on_aux[1];
        }
    }
    if ((!on[0] || !on[1]) && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 2; k++) {
            if (on[k]) continue;
            const int32_t m = t->map[round_levels(xval + 8 * k, id, L + 8 * k)];
            if (m < 0) nearest_neighbour(t, m, xval + 8 * k, waux + 8 * k, scale, L + 8 * k);
        }
        float sqx, sq2;
        fit_sums(16, w, xval, L, &sqx, &sq2);
        if (sq2 > 0) scale = sqx / sq2;
    }
    return scale;
}

/* The two groups' points of a sub-block's final levels; false where one is not a point
 * (ggml aborts) or the scale is NaN. */
static bool final_points(const tokd_iq2_qtables *t, const int8_t *L, float scale, int32_t idx[2]) {
    if (!(scale >= 0)) return false;
    for (int k = 0; k < 2; k++)
        if ((idx[k] = point_of(t, code_of(L + 8 * k))) < 0) return false;
    return true;
}

void tokd_iq2_xs_from_float_w(const float *src, void *dst, int64_t n, const float *qw) {
    const tokd_iq2_qtables *t = tokd_iq2_qtables_get(512);
    tokd_block_iq2_xs *y = dst;
    float scales[16], w[16], waux[16], xval[16];
    int8_t L[16] = {0};
    uint8_t signs[2];
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, src += TOKD_QK_K, qw += TOKD_QK_K) {
        uint16_t q2[32] = {0};
        float max_scale = 0;
        const float sigma2 = sum_squares_256(src) / TOKD_QK_K;
        for (int ib = 0; ib < 16; ib++) {
            const float *xb = src + 16 * ib;
            for (int i = 0; i < 16; i++) w[i] = qw[16 * ib + i] * sqrtf(sigma2 + xb[i] * xb[i]);
            for (int i = 0; i < 16; i++) waux[i] = sqrtf(w[i]);
            for (int k = 0; k < 2; k++) signs[k] = split_signs(xb + 8 * k, w + 8 * k, xval + 8 * k, true) & 127;
            float max = xval[0];
            for (int i = 1; i < 16; i++) max = gmax(max, xval[i]);
            if (max < 1e-15f) {
                scales[ib] = 0;
                memset(L, 0, 16);
                continue;
            }
            float scale = fit16(t, xval, w, waux, max, L);
            if (scale < 0) {
                scale = -scale;
                for (int k = 0; k < 2; k++) signs[k] = (uint8_t)~signs[k] & 127;
            }
            int32_t idx[2];
            if (!final_points(t, L, scale, idx)) {
                scales[ib] = 0;
                continue;
            }
            for (int k = 0; k < 2; k++) q2[2 * ib + k] = (uint16_t)(idx[k] | signs[k] << 9);
            scales[ib] = scale;
            max_scale = gmax(max_scale, scale);
        }
        y[b].d = tokd_f32_to_f16(0);
        memset(y[b].scales, 0, sizeof y[b].scales);
        if (max_scale == 0) {
            memset(y[b].qs, 0, sizeof y[b].qs);
            continue;
        }
        const float d = max_scale / 31;
        y[b].d = tokd_f32_to_f16(d);
        const float id = 1 / d;
        for (int ib = 0; ib < 16; ib++) y[b].scales[ib / 2] |= (uint8_t)(scale_code(id, scales[ib]) << 4 * (ib % 2));
        for (int i = 0; i < 32; i++) wr16(y[b].qs + 2 * i, q2[i]);
    }
}

void tokd_iq2_s_from_float_w(const float *src, void *dst, int64_t n, const float *qw) {
    const tokd_iq2_qtables *t = tokd_iq2_qtables_get(1024);
    tokd_block_iq2_s *y = dst;
    float scales[16], w[16], waux[16], xval[16];
    int8_t L[16] = {0};
    uint8_t signs[2];
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, src += TOKD_QK_K) {
        tokd_block_iq2_s *yb = &y[b];
        memset(yb, 0, sizeof *yb);
        float max_scale = 0;
        const float sigma2 = 2 * sum_squares_256(src) / TOKD_QK_K;
        for (int ib = 0; ib < 16; ib++) {
            const float *xb = src + 16 * ib;
            if (qw) {
                const float *q = qw + TOKD_QK_K * b + 16 * ib;
                for (int i = 0; i < 16; i++) w[i] = q[i] * sqrtf(sigma2 + xb[i] * xb[i]);
            } else {
                for (int i = 0; i < 16; i++) w[i] = 0.25f * sigma2 + xb[i] * xb[i];
            }
            for (int i = 0; i < 16; i++) waux[i] = sqrtf(w[i]);
            for (int k = 0; k < 2; k++) signs[k] = split_signs(xb + 8 * k, w + 8 * k, xval + 8 * k, false);
            float max = xval[0];
            for (int i = 1; i < 16; i++) max = gmax(max, xval[i]);
            if (max < 1e-8f) {
                scales[ib] = 0;
                continue;
            }
            float scale = fit16(t, xval, w, waux, max, L);
            if (scale < 0) {
                scale = -scale;
                for (int k = 0; k < 2; k++) signs[k] = (uint8_t)~signs[k];
            }
            int32_t idx[2];
            if (!final_points(t, L, scale, idx)) {
                scales[ib] = 0;
                continue;
            }
            for (int k = 0; k < 2; k++) {
                const int g = 2 * ib + k;
                yb->qs[g] = (uint8_t)(idx[k] & 255);
                yb->qh[g / 4] |= (uint8_t)((idx[k] >> 8) << 2 * (g % 4));
                yb->qs[32 + g] = signs[k];
            }
            scales[ib] = scale;
            max_scale = gmax(max_scale, scale);
        }
        if (max_scale == 0) continue;
        const float d = max_scale / 31;
        yb->d = tokd_f32_to_f16(d * 0.9875f);
        const float id = 1 / d;
        for (int ib = 0; ib < 16; ib++) yb->scales[ib / 2] |= (uint8_t)(scale_code(id, scales[ib]) << 4 * (ib % 2));
    }
}

void tokd_iq2_s_from_float(const float *src, void *dst, int64_t n) { tokd_iq2_s_from_float_w(src, dst, n, NULL); }
