/* imatrix_stats.h — what an importance matrix says about a model's layers, as
 * llama-imatrix --show-statistics reports it (`tokd imatrix --show-statistics F`).
 *
 * An entry's statistics are over its per-column mean squared activations E[x²] (the sums
 * over their counts; a matrix of a 3-D tensor whose count is 0, an expert never reached,
 * is left out), which is what both of llama-imatrix's files hold and what its report
 * shows when a file has no plain activation sums:
 *   sum, min, max, mean, std   of the E[x²] (std with n - 1; Welford's running mean);
 *   entropy                     -sum p log2 p of p = E[x²] / sum (negative E[x²] as 0),
 *                               reported beside its share of log2 n, the most it can be;
 *   zd                          the fraction of columns whose z-score exceeds 1 in size;
 *   cossim                      the cosine similarity of the E[x²] vector with the same
 *                               tensor's in the layer before (0 without one; 1 when both
 *                               are all zero).
 * Per layer: the sum of its entries' sums, their zd weighted by columns, and the cosine
 * similarity of all its entries' vectors end to end against the layer before's (the
 * entries present in both, in the same order).
 *
 * Large E[x²] sums mark the layers that carry the most signal, a low cosine similarity
 * the layers whose inputs change the most, and near-zero columns the features a
 * quantizer can spend the fewest bits on. */
#ifndef TOKD_IMATRIX_STATS_H
#define TOKD_IMATRIX_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "imatrix.h"

typedef struct {
    const tokd_imatrix_entry *entry;
    int layer;          /* N of "blk.N.", or -1 */
    const char *tensor; /* the name part before ".weight" after "blk.N." (e.g. "attn_q"), or the whole name */
    int tensor_len;
    double sum, min, max, mean, std, entropy, zd, cossim;
    int64_t n;          /* columns counted */
    bool paired;        /* whether the layer before has the tensor (of the same size) */
    double cos_sums[3]; /* then a·b, |a|², |b|² of the two E[x²] vectors (cossim's terms) */
} tokd_imatrix_stat;

typedef struct {
    int layer;
    double sum, zd, cossim;
    int64_t n;
} tokd_imatrix_layer_stat;

typedef struct {
    tokd_imatrix_stat *entries;     /* sorted by tensor name, then by sum, largest first */
    size_t n_entries;               /* entries with at least one column counted */
    tokd_imatrix_layer_stat *layers; /* in layer order */
    size_t n_layers;
} tokd_imatrix_report;

/* The statistics of im's entries and layers (the report points into im). */
void tokd_imatrix_report_make(const tokd_imatrix *im, tokd_imatrix_report *r);
void tokd_imatrix_report_free(tokd_imatrix_report *r);

#endif
