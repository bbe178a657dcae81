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
 *     "imatrix.datasets" (strings) and "imatrix.chunk_count" give the provenance.
 *
 * Bad files are refused with a message: truncated or trailing bytes, an empty file,
 * counts or lengths out of range, a sum without its count, a non-finite value. The
 * parser takes any bytes (fuzz/fuzz_gguf.c feeds it the GGUF corpus and its own). */
#ifndef TOKD_IMATRIX_H
#define TOKD_IMATRIX_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

typedef struct {
    char *name;     /* the weight tensor's name, e.g. "blk.0.attn_q.weight" */
    float *values;  /* n weights: ne0 per row, times the experts of a 3-D tensor */
    int64_t n;
} tokd_imatrix_entry;

typedef struct {
    tokd_imatrix_entry *entries; /* in the file's order; a repeated name: the last wins */
    size_t n_entries;
    char *dataset;  /* the calibration text's name(s), comma-separated; "" when none */
    int chunks;     /* chunks of calibration text it was computed on; 0 when not given */
} tokd_imatrix;

/* NULL with err set when the file cannot be read or is not a valid importance matrix. */
tokd_imatrix *tokd_imatrix_load(const char *path, tokd_err *err);
/* The same from bytes in memory (either format). */
tokd_imatrix *tokd_imatrix_parse(const uint8_t *data, size_t size, tokd_err *err);
void tokd_imatrix_free(tokd_imatrix *im);
/* The entry for a tensor name, or NULL. */
const tokd_imatrix_entry *tokd_imatrix_find(const tokd_imatrix *im, const char *name);

#endif
