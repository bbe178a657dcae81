/* quantize.h — converting weights to the types of the type table, tensor by tensor:
 * `tokd quantize` (a GGUF file in, another out, streamed so memory stays bounded) and
 * the row converter `tokd synth` shares. Which type each tensor gets is quant_plan.h's.
 *
 * The quantisers are the table's from_float rows, which reproduce llama.cpp's reference
 * quantisers byte for byte (for Q8_0 the file quantiser tokd_q8_0_from_float_ref, not
 * the activation one), and with an importance matrix (--imatrix, imatrix.h) its
 * from_float_w rows, llama-quantize --imatrix's; the grid types IQ1-IQ3 only have the
 * latter (IQ2_S, IQ3_XXS, IQ3_S both). Rows are converted in parallel on the thread pool; the result
 * does not depend on the thread count. Tensors are written in llama.cpp's order, so a
 * file for one of llama.cpp's file types is byte-identical to llama-quantize's. A
 * quantized source tensor is not requantised (error), as llama-quantize without
 * --allow-requantize. */
#ifndef TOKD_QUANTIZE_H
#define TOKD_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gguf_stream.h"
#include "quant_plan.h"
#include "kernels/threadpool.h"
#include "util.h"

/* Fills `out` with the n floats of row `row` of the tensor being converted. Called from
 * pool threads, rows in any order. */
typedef void (*tokd_row_fill_fn)(void *ctx, int64_t row, float *out, int64_t n);

/* A tensor's importance weights (imatrix.h): n_per_row values for each of n_slices
 * slices (the experts of a 3-D tensor) of rows_per_slice rows each; row r uses slice
 * (r / rows_per_slice) % n_slices. */
typedef struct {
    const float *values;
    int64_t rows_per_slice, n_slices;
} tokd_quant_weights;

/* Convert a tensor of n_rows x n_per_row to `type` row by row in parallel and append its
 * bytes to the stream, a bounded chunk of rows at a time. qw: importance weights, or
 * NULL (types whose quantiser takes none ignore them). */
int tokd_quant_stream_tensor(tokd_pool *pool, gguf_stream *s, uint32_t type, int64_t n_rows, int64_t n_per_row,
                             const tokd_quant_weights *qw, tokd_row_fill_fn fill, void *ctx, tokd_err *err);

/* Quantise one row with the file quantiser of `type` (F32/F16/BF16 too), weighting each
 * column's error by qw[i] where qw is not NULL and the type's quantiser takes weights
 * (from_float_w: llama-quantize --imatrix), else as llama-quantize without. One
 * difference from llama-quantize: a block whose weights are all 0 is quantised as
 * without weights, where llama.cpp writes a NaN scale or zeros. */
void tokd_quant_row(uint32_t type, const float *src, void *dst, int64_t n, const float *qw);
/* Whether tokd_quant_row can write `type`: F32/F16/BF16 and the quantized types with a
 * quantiser; with_weights: also those that need importance weights (IQ2_XXS ...). */
bool tokd_quant_writable(uint32_t type, bool with_weights);

/* llama-quantize's options (see tokd_qplan for the first three). Type names as
 * ggml_type_name gives them (case-insensitive); NULL: none. */
typedef struct {
    bool pure;
    const char *output_type, *embd_type;
    bool allow_requantize; /* quantized tensors are dequantised and converted, not refused */
    const char *imatrix;   /* --imatrix FILE: an importance matrix (imatrix.h), or NULL */
} tokd_quantize_opts;

/* `tokd quantize`: in -> out with target type_name. log: per-tensor lines (or NULL). */
int tokd_quantize_file(const char *in, const char *out, const char *type_name, int n_threads, FILE *log, tokd_err *err);
/* The same with options (NULL: all off). */
int tokd_quantize_file_opts(const char *in, const char *out, const char *type_name, const tokd_quantize_opts *opts,
                            int n_threads, FILE *log, tokd_err *err);

#endif
