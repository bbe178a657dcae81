/* synth.h — random-weight models of real shapes, for benchmarks and tests.
 *
 * A shape fixes the architecture and hyperparameters (tinyllama-1.1b, llama-3.2-1b,
 * qwen2.5-0.5b, and small `tiny` / `tiny-qwen2` / `tiny-llama3` ones for tests), and
 * for the Llama 3 shapes the RoPE frequency factors (rope_freqs.weight). Weights are seeded
 * pseudo-random: every row of every tensor has its own generator state derived from
 * (seed, tensor name, row), so the file is a function of (shape, type, seed, vocab) only
 * — not of the thread count. Matrices are near-normal (sum of four uniforms) with
 * std 0.02, biases the same, norm weights 1. Each tensor is generated a chunk of rows at
 * a time, converted to its type (quantize.h's rules, the same as `tokd quantize`) and
 * streamed into the file, so memory stays bounded whatever the model's size.
 *
 * The tokenizer (every tokenizer.* key) is copied from a vocabulary GGUF file. When it
 * has fewer tokens than the shape's vocabulary, the vocabulary is padded with unused
 * tokens "[PAD<id>]" (token type 5, score 0) so that the output matrix keeps the real
 * model's size; when it has more, the shape's vocabulary grows to the file's count
 * (reported in the log). */
#ifndef TOKD_SYNTH_H
#define TOKD_SYNTH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"

typedef struct {
    const char *name, *arch;
    int32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    float rope_base, norm_eps;
    bool qkv_bias, tied_output;
    const char *default_vocab; /* relative to the shared data directory */
    /* Llama 3.1-style RoPE scaling, written as rope_freqs.weight (one divisor per rotated
       pair, as llama.cpp's converter computes them): factor (0: none), the low and high
       frequency factors, and the original context */
    float rope_factor, rope_low_freq, rope_high_freq;
    int32_t rope_orig_ctx;
} tokd_synth_shape;

const tokd_synth_shape *tokd_synth_shape_find(const char *name);
/* "tiny tiny-qwen2 tinyllama-1.1b ..." */
const char *tokd_synth_shape_list(void);

typedef struct {
    const char *out_path;
    const char *shape;
    const char *type;        /* a quantize.h target: F32 ... Q4_K_M */
    const char *vocab_path;  /* NULL: the shape's default under $TOKD_SHARED (../shared) */
    uint64_t seed;
    int32_t n_vocab;         /* 0: the shape's; else overrides it (tests) */
    int n_threads;           /* <= 0: physical cores */
    FILE *log;               /* progress lines, or NULL */
} tokd_synth_params;

int tokd_synth(const tokd_synth_params *p, tokd_err *err);

#endif
