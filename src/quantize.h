/* quantize.h — converting weights to the types of the type table, tensor by tensor, and
 * the choice of each tensor's type (llama.cpp's rules), shared by `tokd quantize` and
 * `tokd synth`.
 *
 * Targets (tokd_qtarget): F32, F16, BF16, the single types Q8_0 Q4_0 Q4_1 Q5_0 Q5_1
 * Q2_K Q3_K Q4_K Q5_K Q6_K, and the mixes Q4_K_M and Q5_K_M. The rules, as llama.cpp's
 * quantizer applies them without an importance matrix:
 *   - only 2-D (or more) tensors whose name ends in "weight" and is not a norm are
 *     converted; everything else (norms, biases) is copied in its own type;
 *   - the output matrix (output.weight, or token_embd.weight when the output is tied to
 *     it) becomes Q6_K for every quantized target except Q8_0 (which keeps Q8_0), or
 *     Q8_0 when its rows are not a multiple of 256;
 *   - Q4_K_M / Q5_K_M: attn_v and ffn_down get Q6_K in the layers where llama.cpp's
 *     use_more_bits holds: i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2, with i counted
 *     over those tensors in file order and n the number of them (attn_v) or of layers
 *     (ffn_down); everything else is the base type (Q4_K / Q5_K);
 *   - a row length that is not a multiple of the chosen type's block falls back:
 *     Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K -> Q4_0 (llama.cpp picks
 *     IQ4_NL, which tokd does not have), and to F16 when that still does not fit.
 * Differences from llama-quantize: its names "Q3_K", "Q4_K", "Q5_K" are aliases of the
 * _M mixes; here they are the plain types (general.file_type is then the matching _S
 * file type, or MOSTLY_Q2_K for Q2_K). A quantized source tensor is not requantised
 * (error), as llama-quantize without --allow-requantize.
 *
 * The quantisers are the table's from_float rows, which reproduce llama.cpp's reference
 * quantisers byte for byte (for Q8_0 the file quantiser tokd_q8_0_from_float_ref, not
 * the activation one). Rows are converted in parallel on the thread pool; the result
 * does not depend on the thread count. */
#ifndef TOKD_QUANTIZE_H
#define TOKD_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gguf_stream.h"
#include "kernels/threadpool.h"
#include "util.h"

typedef enum { TOKD_QMIX_NONE, TOKD_QMIX_K_M } tokd_qmix;

typedef struct {
    const char *name;     /* as given on the command line */
    uint32_t base;        /* GGML_TYPE_* of most weight matrices */
    uint32_t file_type;   /* llama.cpp's general.file_type (LLAMA_FTYPE_*) */
    tokd_qmix mix;
} tokd_qtarget;

/* NULL when unknown (case-insensitive). */
const tokd_qtarget *tokd_qtarget_find(const char *name);
/* "F32 F16 BF16 Q8_0 ..." — for error messages. */
const char *tokd_qtarget_list(void);
bool tokd_qtarget_is_quantized(const tokd_qtarget *t);

/* Per-file state of the type choice. */
typedef struct {
    const tokd_qtarget *t;
    int n_attn_v, i_attn_v, n_ffn_down, i_ffn_down;
    bool has_output;
} tokd_qplan;

/* n_layer: the model's block count; names: every tensor name of the file in order (to
 * count attn_v tensors and see whether output.weight exists). */
void tokd_qplan_init(tokd_qplan *p, const tokd_qtarget *t, int n_layer, const char *const *names, uint64_t n_names);
/* Whether a tensor is converted at all (else copied as is). */
bool tokd_qplan_converts(const char *name, uint32_t n_dims);
/* The type of a converted tensor with rows of ne0 elements. Call once per converted
 * tensor, in file order (advances the layer counters). */
uint32_t tokd_qplan_type(tokd_qplan *p, const char *name, uint64_t ne0);

/* Fills `out` with the n floats of row `row` of the tensor being converted. Called from
 * pool threads, rows in any order. */
typedef void (*tokd_row_fill_fn)(void *ctx, int64_t row, float *out, int64_t n);

/* Convert a tensor of n_rows x n_per_row to `type` row by row in parallel and append its
 * bytes to the stream, a bounded chunk of rows at a time. */
int tokd_quant_stream_tensor(tokd_pool *pool, gguf_stream *s, uint32_t type, int64_t n_rows, int64_t n_per_row,
                             tokd_row_fill_fn fill, void *ctx, tokd_err *err);

/* Quantise one row with the file quantiser of `type` (F32/F16/BF16 too). */
void tokd_quant_row(uint32_t type, const float *src, void *dst, int64_t n);

/* `tokd quantize`: in -> out with target type_name. log: per-tensor lines (or NULL). */
int tokd_quantize_file(const char *in, const char *out, const char *type_name, int n_threads, FILE *log, tokd_err *err);

#endif
