/* matmul.h — products of a weight matrix with rows of activations.
 *
 * Y[r][o] = dot(W[o, :], X[r, :]) for every activation row r and output o. W has n_out
 * rows of K elements in any type of the type table. X rows are F32; they are converted
 * once to the weight type's activation format, then each output is one vec_dot call —
 * so every output value is reduced in the same order whether the batch holds 1 row or
 * 500, and whichever thread computes it (threads split the outputs, not the sums). */
#ifndef TOKD_MATMUL_H
#define TOKD_MATMUL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/packed.h"
#include "kernels/step_profile.h"
#include "kernels/threadpool.h"
#include "kernels/types.h"

/* Products of up to this many activation rows (one sequence's decode step, or a few
 * sequences' batched) are split and streamed as decode's; more rows, as prefill's tiles
 * (matmul.c says how and why). */
#define TOKD_DECODE_MAX_ROWS 16

typedef struct {
    const void *data;               /* n_out rows, row_bytes apart */
    const tokd_type_traits *tt;
    int64_t K, n_out;
    size_t row_bytes;
    /* when set, every product uses this packed copy (packed.h) instead of data */
    const tokd_packed_traits *pk;
    void *packed;                   /* n_out / 16 groups, group_bytes apart (owned by the model) */
    size_t group_bytes;
} tokd_matrix;

/* Bytes of W's packed copy in form pk, or 0 if W cannot be packed in it (pk is NULL or
 * of another type, n_out is not a multiple of 16, or K of the type's block). */
size_t tokd_matrix_packed_bytes(const tokd_matrix *W, const tokd_packed_traits *pk);
/* Pack W into dst (64-byte aligned, tokd_matrix_packed_bytes long; the caller owns it),
 * filled by the pool's threads, and point W->packed at it. Returns 0, or -1 if W cannot
 * be packed. */
int tokd_matrix_pack_into(tokd_pool *pool, tokd_matrix *W, const tokd_packed_traits *pk, void *dst);
/* The same into a buffer of its own, which the caller frees with free(). */
int tokd_matrix_pack(tokd_pool *pool, tokd_matrix *W, const tokd_packed_traits *pk);

/* Scratch needed for n_rows activation rows of length K converted for matrix type tt
 * (packed or not). */
size_t tokd_matmul_scratch_bytes(const tokd_type_traits *tt, int64_t K, int64_t n_rows);

/* Hands each pool thread the first bytes (at most max_bytes) that it will stream in the
 * next product of these matrices with n_rows activation rows, split as tokd_matmul_n
 * (or tokd_matmul_pair, the same in decode) splits it, to prefetch while it waits
 * after the next region (tokd_pool_prefetch_after_next). Call it just before that
 * region: the serial stages between products then overlap the weight stream. Decode
 * only (up to TOKD_DECODE_MAX_ROWS rows); prefill, bound by arithmetic, gets no windows. */
void tokd_matmul_prefetch_next(tokd_pool *pool, int n_mats, const tokd_matrix *const *Ws, int64_t n_rows,
                               size_t max_bytes);

/* Y is n_rows x W->n_out (row stride ldy floats); X is n_rows x K (stride ldx).
 * scratch must hold tokd_matmul_scratch_bytes bytes (64-byte aligned). */
void tokd_matmul(tokd_pool *pool, const tokd_matrix *W, const float *X, int64_t ldx, int64_t n_rows, float *Y,
                 int64_t ldy, void *scratch);

/* The products of several matrices with the same X (n_mats <= 4, e.g. Q, K, V): the
 * matrices that share K and activation format share one conversion of the activation
 * rows and one parallel region (all of them when they can; Q4_K_M's Q4_K Q and K with
 * its Q6_K V make two regions, not three, and in decode, where packed matrices of two
 * activation forms may share one, a single region). Same results as separate calls.
 * scratch must hold the largest tokd_matmul_scratch_bytes of the matrices. */
void tokd_matmul_n(tokd_pool *pool, int n_mats, const tokd_matrix *const *Ws, const float *X, int64_t ldx,
                   int64_t n_rows, float *const *Ys, const int64_t *ldys, void *scratch);

/* One activation row with the split left to the caller (decode_step.c runs a whole decode
 * step as one region and gives each thread its own rows of every product). The row is
 * prepared for W's form into act (tokd_matmul_scratch_bytes(W->tt, W->K, 1) bytes,
 * 64-byte aligned), as tokd_matmul prepares a one-row product, and tokd_matmul_rows
 * computes outputs [o0, o1) from it, each with the bits tokd_matmul gives it. o0 and o1
 * must be multiples of tokd_matmul_rows_align(W) (o1 may be n_out). */
const void *tokd_matmul_row_prepare(const tokd_matrix *W, const float *x, void *act);
int64_t tokd_matmul_rows_align(const tokd_matrix *W);
void tokd_matmul_rows(const tokd_matrix *W, const void *act, int64_t o0, int64_t o1, float *y);
/* Whether a row prepared for a serves b (the same bytes). */
int tokd_matmul_row_shared(const tokd_matrix *a, const tokd_matrix *b);
/* A row prepared in parts by several threads, each its own columns, into one act: the
 * column multiple at which W's preparation splits, or 0 where it does not (W not packed,
 * or a packed form whose preparation does not split: packed.h). Columns [c0, c1) of x
 * (c0 and c1 multiples of it, or c1 = K) then go into their places in act, the bytes
 * tokd_matmul_row_prepare writes there. */
int64_t tokd_matmul_row_cols_align(const tokd_matrix *W);
void tokd_matmul_row_prepare_cols(const tokd_matrix *W, const float *x, void *act, int64_t c0, int64_t c1);
/* Before that, while no thread reads act: takes back from other cores the cache lines of
 * act that columns [c0, c1) alone fill, one store to each (packed.h,
 * tokd_packed_prep_cols_claim), so that preparing them later need not wait for other
 * cores' copies to be invalidated. Their bytes are undefined until the columns are
 * prepared. */
void tokd_matmul_row_claim_cols(const tokd_matrix *W, void *act, int64_t c0, int64_t c1);
/* The weight bytes outputs [o0, o1) of W read, from *start on (one run). */
size_t tokd_matmul_rows_span(const tokd_matrix *W, int64_t o0, int64_t o1, const void **start);

/* Ya = epi(Wa X, Wb X), row by row, for two matrices of the same height (the FFN's gate
 * and up projections with SwiGLU). Prefill computes each chunk of rows in both matrices
 * and then passes it through epi(ya, yb, n) (which writes ya) while the weights stream;
 * decode (up to TOKD_DECODE_MAX_ROWS rows) runs tokd_matmul_n and then epi in a region of its own,
 * which streams the weights faster (matmul.c). epi(ya, yb, n, col0, width) gets columns
 * [col0, col0 + n) of a row `width` wide (ya and yb at column col0), and must compute
 * each element from its own inputs and column only, so the chunking changes no bit. Yb
 * holds Wb X afterwards. */
typedef void (*tokd_pair_epilogue_fn)(float *ya, const float *yb, int64_t n, int64_t col0, int64_t width);
void tokd_matmul_pair(tokd_pool *pool, const tokd_matrix *Wa, const tokd_matrix *Wb, const float *X, int64_t ldx,
                      int64_t n_rows, float *Ya, float *Yb, int64_t ldy, tokd_pair_epilogue_fn epi, void *scratch);

/* A decode product of one activation row with the rows claimed and stolen as
 * tokd_matmul's decode (matmul.c), by threads that the caller runs (decode_step.c): each
 * thread owns an equal share, claims it from the front, and then takes the back half of
 * the fullest other share. The product may be of n_mats matrices (at most 4) of one K,
 * units counted across them as tokd_matmul_n counts them, matrix m's rows from its own
 * prepared row acts[m] into ys[m]; two matrices may be one such product where
 * tokd_matmul_rows_together says so. shares (tokd_matmul_shares_bytes, 64-byte aligned)
 * is shared by the threads; before the product each thread resets its own share
 * (tokd_matmul_shares_reset), and the threads meet at a barrier between that and
 * tokd_matmul_rows_shared, to which each passes its own prepared rows. Counted in the
 * profile's stage `stage` as a decode product's shares. */
size_t tokd_matmul_shares_bytes(int nth);
int tokd_matmul_rows_together(const tokd_matrix *a, const tokd_matrix *b);
void tokd_matmul_shares_reset(void *shares, int n_mats, const tokd_matrix *const *Ws, int ith, int nth);
void tokd_matmul_rows_shared(void *shares, int n_mats, const tokd_matrix *const *Ws, const void *const *acts,
                             float *const *ys, int ith, int nth, tokd_stage stage);
/* Whether every row of such a product has been computed, by whichever thread: each
 * thread's count of what it ran, stored as it leaves tokd_matmul_rows_shared (release;
 * read here with acquire, so its outputs are visible once this says true). A thread that
 * needs rows another thread may have stolen from its share waits on this instead of a
 * barrier. Each thread's count starts at zero in tokd_matmul_shares_reset. */
bool tokd_matmul_shares_done(const void *shares, int n_mats, const tokd_matrix *const *Ws, int nth);
/* The first bytes (at most max_bytes) thread ith streams in such a product. */
tokd_pool_window tokd_matmul_shares_window(int n_mats, const tokd_matrix *const *Ws, int ith, int nth,
                                           size_t max_bytes);

#endif
