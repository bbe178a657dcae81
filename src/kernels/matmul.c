/* matmul.c — see matmul.h.
 *
 * Tiling: outputs are split into contiguous ranges, one per thread; inside a range the
 * loop walks a tile of weight rows against every activation row, so that in prefill a
 * weight row is read from memory once and reused from cache for all the rows of the
 * batch. Decode (one row) streams the weights once. */
#include "kernels/matmul.h"

#include <string.h>

#include "util.h"

#define ROW_TILE 16

size_t tokd_matmul_scratch_bytes(const tokd_type_traits *tt, int64_t K, int64_t n_rows) {
    if (tt->vec_dot_type == 0 /* F32: used as is */) return 0;
    const tokd_type_traits *at = tokd_type_get(tt->vec_dot_type);
    size_t row = tokd_row_bytes(at, K);
    row = (row + 63) & ~(size_t)63;
    return row * (size_t)n_rows;
}

typedef struct {
    const tokd_matrix *W;
    const uint8_t *act;  /* activation rows in vec_dot format */
    size_t act_stride;   /* bytes between activation rows */
    int64_t n_rows;
    float *Y;
    int64_t ldy;
    /* conversion stage */
    const float *X;
    int64_t ldx;
    const tokd_type_traits *at;
} matmul_job;

static void convert_rows(void *arg, int ith, int nth) {
    matmul_job *j = arg;
    for (int64_t r = ith; r < j->n_rows; r += nth)
        j->at->from_float(j->X + r * j->ldx, (uint8_t *)j->act + r * j->act_stride, j->W->K);
}

static void matmul_range(void *arg, int ith, int nth) {
    matmul_job *j = arg;
    const tokd_matrix *W = j->W;
    int64_t per = (W->n_out + nth - 1) / nth;
    int64_t o0 = per * ith, o1 = o0 + per;
    if (o1 > W->n_out) o1 = W->n_out;
    tokd_vec_dot_fn dot = W->tt->vec_dot;
    const uint8_t *wbase = W->data;
    for (int64_t ot = o0; ot < o1; ot += ROW_TILE) {
        int64_t oe = ot + ROW_TILE < o1 ? ot + ROW_TILE : o1;
        for (int64_t r = 0; r < j->n_rows; r++) {
            const void *a = j->act + r * j->act_stride;
            float *y = j->Y + r * j->ldy;
            for (int64_t o = ot; o < oe; o++) dot(W->K, &y[o], wbase + (size_t)o * W->row_bytes, a);
        }
    }
}

void tokd_matmul(tokd_pool *pool, const tokd_matrix *W, const float *X, int64_t ldx, int64_t n_rows, float *Y,
                 int64_t ldy, void *scratch) {
    matmul_job j = {.W = W, .n_rows = n_rows, .Y = Y, .ldy = ldy, .X = X, .ldx = ldx};
    if (W->tt->vec_dot_type == 0) {
        j.act = (const uint8_t *)X;
        j.act_stride = (size_t)ldx * sizeof(float);
    } else {
        j.at = tokd_type_get(W->tt->vec_dot_type);
        j.act = scratch;
        j.act_stride = (tokd_row_bytes(j.at, W->K) + 63) & ~(size_t)63;
        tokd_pool_run(n_rows > 1 ? pool : NULL, convert_rows, &j);
    }
    tokd_pool_run(pool, matmul_range, &j);
}
