/* imatrix.h — importance matrices for `tokd quantize --imatrix`: for each weight matrix
 * of a model, one weight per input column (the mean square of that column's activation
 * over a calibration text, as llama.cpp's llama-imatrix measures it). The quantisers
 * weigh each column's rounding error by it (kernels/quants.h, from_float_w), so the
 * columns that carry large activations keep more of their precision.
 *
 * Both of llama-imatrix's file formats are read, and each yields what llama-quantize
 * would use, so that a file quantized with an importance matrix is the file
 * llama-quantize --imatrix writes:
 *   - the legacy binary file (imatrix.dat; llama.cpp until mid 2025), little-endian:
 *     int32 entry count; per entry int32 name length, the name, int32 ncall, int32
 *     nval, nval float32 sums; then optionally int32 chunk count, int32 length and the
 *     dataset's name. A value is sum / ncall (the sum itself where ncall <= 0).
 *   - GGUF (imatrix.gguf; later llama.cpp): per matrix a tensor "<name>.in_sum2" (F32,
 *     ne0 columns by ne1 experts) and "<name>.counts" (F32, ne1 values); a value is
 *     sum / count, and 1 for an expert whose count is 0 (never reached in calibration).
 *     "imatrix.datasets" (strings), "imatrix.chunk_count" and "imatrix.chunk_size" give
 *     the provenance.
 *
 * Bad files are refused with a message: truncated or trailing bytes, an empty file,
 * counts or lengths out of range, a sum without its count, a non-finite value. The
 * parser takes any bytes (fuzz/fuzz_gguf.c feeds it the GGUF corpus and its own).
 *
 * Each entry keeps the sums and counts its values came from, so that matrices can be
 * combined (`tokd imatrix --in-file`) and written in either format (`tokd imatrix`,
 * GGUF by default as llama-imatrix since July 2025, or `--output-format dat`). */
#ifndef TOKD_IMATRIX_H
#define TOKD_IMATRIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

typedef struct {
    char *name;     /* the weight tensor's name, e.g. "blk.0.attn_q.weight" */
    float *values;  /* n weights: ne0 per row, times the experts of a 3-D tensor */
    int64_t n;
    /* What the values were made from, for writing the matrix out and combining it with
     * others: the sums of squares (n of them) and, per matrix (n_mat: 1, or the experts
     * of a 3-D tensor, each owning n / n_mat sums), the count they were summed over.
     * values[i] = (float)sums[i] / (float)count, or 1 where the count is 0. */
    double *sums;
    double *counts;
    int64_t n_mat;
} tokd_imatrix_entry;

typedef struct {
    tokd_imatrix_entry *entries; /* in the file's order; a repeated name: the last wins */
    size_t n_entries;
    char *dataset;  /* the calibration text's name(s), comma-separated; "" when none */
    char **datasets; /* the same one by one (n_datasets) */
    size_t n_datasets;
    int chunks;     /* chunks of calibration text it was computed on; 0 when not given */
    int32_t chunk_size; /* tokens a chunk (a GGUF file's imatrix.chunk_size); 0 when not given */
    /* A legacy file's counts are its calls (ncall: chunks, or batches), not tokens, and
     * its sums are the mean times ncall; tokd_imatrix_combine scales both by the chunk
     * size, as llama-imatrix does when it reads such a file. */
    bool counts_are_calls;
} tokd_imatrix;

/* NULL with err set when the file cannot be read or is not a valid importance matrix. */
tokd_imatrix *tokd_imatrix_load(const char *path, tokd_err *err);
/* The same from bytes in memory (either format). */
tokd_imatrix *tokd_imatrix_parse(const uint8_t *data, size_t size, tokd_err *err);
void tokd_imatrix_free(tokd_imatrix *im);
/* The entry for a tensor name, or NULL. */
const tokd_imatrix_entry *tokd_imatrix_find(const tokd_imatrix *im, const char *name);

/* ---- making, combining and writing matrices (tokd imatrix) ---- */

/* An empty matrix to combine others into. */
tokd_imatrix *tokd_imatrix_new(void);
/* Adds an entry (copies name, sums and counts; a name already present is replaced) and
 * computes its values. */
void tokd_imatrix_add(tokd_imatrix *im, const char *name, const double *sums, int64_t n, const double *counts,
                      int64_t n_mat);
/* Appends a calibration text's name to datasets (and dataset); "" adds nothing. */
void tokd_imatrix_add_dataset(tokd_imatrix *im, const char *name);
/* Adds src into dst, as llama-imatrix's --in-file does: per name, the sums and counts
 * add up (a legacy file's scaled by chunk_size first; a single count meets per-expert
 * counts by broadcasting) and new names are appended; src's datasets
 * follow dst's, the chunk counts add, and dst takes src's chunk size if it has none. -1 with err set when a name's sizes differ
 * (dst is then unchanged). */
int tokd_imatrix_combine(tokd_imatrix *dst, const tokd_imatrix *src, int32_t chunk_size, tokd_err *err);

typedef enum { TOKD_IMATRIX_GGUF, TOKD_IMATRIX_DAT } tokd_imatrix_format;
/* Writes im (counts in tokens: a legacy file's matrix is refused until combined into a
 * new one) in either of llama-imatrix's formats:
 *   - GGUF: general.type "imatrix", imatrix.datasets, imatrix.chunk_count and
 *     imatrix.chunk_size (chunk_size), then per entry, sorted by name, "<name>.in_sum2"
 *     (F32, n / n_mat by n_mat) and "<name>.counts" (F32, 1 by n_mat);
 *   - the legacy file: per entry ncall = ceil(largest count / chunk_size) and each value
 *     (sum / count) * ncall (1 * ncall where the count is 0), then the chunk count and the
 *     last dataset's name.
 * Nothing is left behind on failure (-1 with err set). */
int tokd_imatrix_write(const tokd_imatrix *im, const char *path, tokd_imatrix_format fmt, int32_t chunk_size,
                       tokd_err *err);

#endif
