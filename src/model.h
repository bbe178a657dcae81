/* model.h — a loaded model: hyperparameters, weights bound to the mmapped GGUF tensors,
 * and the tokenizer. The forward pass lives in forward.c. */
#ifndef TOKD_MODEL_H
#define TOKD_MODEL_H

#include "gguf.h"
#include "kernels/matmul.h"
#include "tokenizer.h"
#include "util.h"

typedef enum { TOKD_ARCH_LLAMA, TOKD_ARCH_QWEN2 } tokd_arch;

typedef struct {
    tokd_arch arch;
    int32_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_rot;
    float rope_freq_base, rope_freq_scale, norm_eps;
    bool rope_neox;
} tokd_hparams;

typedef struct {
    float *attn_norm, *ffn_norm;   /* n_embd, dequantized at load */
    float *bq, *bk, *bv;           /* optional biases, dequantized; NULL when absent */
    tokd_matrix wq, wk, wv, wo, w_gate, w_up, w_down;
} tokd_layer;

struct tokd_model {
    gguf_file *gguf;
    tokd_tokenizer *tok;
    tokd_hparams hp;
    char arch_name[32];
    char name[128];
    tokd_matrix tok_embd;          /* n_vocab rows of n_embd */
    float *output_norm;
    tokd_matrix output;            /* tied: tok_embd's rows, packed for products as any matrix (model.c) */
    bool tied_output;
    tokd_layer *layers;
    float *rope_freqs;   /* n_rot/2 RoPE frequency divisors (rope_freqs.weight), or NULL */
    uint64_t weight_bytes;
    void *packed;        /* the matrices copied into huge pages, packed or as the file has them
                            (model.c: pack_weights), and the embedding table; or NULL */
    size_t packed_bytes; /* its length, for tokd_huge_free */
    size_t copy_bytes;   /* what tokd_model_load copies there (also when uncopied) */
};

/* Internal access to a context's paged KV cache, for the engine's prefix cache and
 * scheduler (forward.c). A sequence's table may be edited between tokd_forward calls:
 * blocks shared from the prefix cache are attached with tokd_kv_block_ref, and len set
 * to the number of positions they hold. */
#include "kvcache.h"
tokd_kv *tokd_ctx_kv(tokd_ctx *c);
tokd_seq_table *tokd_ctx_seq(tokd_ctx *c, int32_t seq);
int32_t tokd_ctx_n_seq(const tokd_ctx *c);
int32_t tokd_ctx_n_ctx(const tokd_ctx *c);
int32_t tokd_ctx_n_batch(const tokd_ctx *c);
tokd_pool *tokd_ctx_pool(tokd_ctx *c); /* the context's thread pool */

/* The inputs of a layer's matrix products, for an observer (importance matrices,
 * imatrix_collect.h): the normed attention input (attn_q, attn_k, attn_v read it), the
 * attention output (attn_output), the normed FFN input (ffn_gate, ffn_up), the SwiGLU
 * product (ffn_down), and the final normed rows (output; layer -1). */
typedef enum {
    TOKD_MM_ATTN_IN,
    TOKD_MM_ATTN_OUT,
    TOKD_MM_FFN_IN,
    TOKD_MM_FFN_DOWN_IN,
    TOKD_MM_OUTPUT_IN,
} tokd_mm_input;
/* Called on the calling thread before each product with its n rows of K activations
 * (row i at x + i*K), in the order the forward pass runs them. */
typedef void (*tokd_mm_observer)(void *ud, int32_t layer, tokd_mm_input which, const float *x, int32_t n, int64_t K);
/* Whether a decode step of one sequence runs as one parallel region (decode_step.h;
 * default on): the same bits either way, for tests and benchmarks. */
void tokd_ctx_set_decode_region(tokd_ctx *c, bool on);
/* Set (or, with NULL, remove) the context's observer. */
void tokd_ctx_set_observer(tokd_ctx *c, tokd_mm_observer fn, void *ud);

#endif
