/* tokd.h — the public C API of tokd.
 *
 * A library first: the CLI and the server are its users. Handles are opaque:
 *   tokd_model  — a loaded GGUF model (weights mmapped, the matrices copied into huge
 *                 pages, tokenizer, hyperparameters);
 *   tokd_ctx    — an evaluation context: a paged KV cache shared by up to n_seq
 *                 sequences, scratch buffers sized once, and a thread pool.
 * tokd_forward evaluates a batch of entries (token, position, sequence) from any number
 * of sequences in one pass and returns logits for the entries that ask for them. A
 * sequence's logits are bit-identical however the batch around it is composed.
 *
 * Errors are values: functions that can fail fill a tokd_err with one line naming the
 * problem. */
#ifndef TOKD_H
#define TOKD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tokd_err {
    char msg[512];
} tokd_err;

typedef struct tokd_model tokd_model;
typedef struct tokd_ctx tokd_ctx;

tokd_model *tokd_model_load(const char *path, tokd_err *err);
/* The same checks and description, without copying the matrices into the model's own
 * memory: they stay in the file's mapping and layout, as with TOKD_REPACK=0 (slower
 * products). For reading what a model is (tokd info): milliseconds, where a 1.1B model's
 * copy takes seconds. */
tokd_model *tokd_model_load_uncopied(const char *path, tokd_err *err);
void tokd_model_free(tokd_model *m);

typedef struct {
    const char *arch;       /* "llama", "qwen2" */
    const char *name;       /* general.name or "" */
    int32_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_rot;
    float rope_freq_base, rope_freq_scale, norm_eps;
    bool rope_neox, tied_output;
    bool rope_freq_factors; /* per-pair frequency divisors (rope_freqs.weight) */
    uint64_t weight_bytes;  /* bytes of all tensors */
    uint64_t copied_bytes;  /* of those, the matrices tokd_model_load copies into the model's own
                               memory (huge pages, packed or as the file has them); the rest
                               stays mmapped. Loaded uncopied, what it would copy. */
} tokd_model_info;
void tokd_model_get_info(const tokd_model *m, tokd_model_info *info);

typedef struct {
    int32_t n_ctx;        /* max positions per sequence (0: the model's training context, capped at 4096) */
    int32_t n_seq;        /* max concurrent sequences (default 1) */
    int32_t n_batch;      /* max entries per tokd_forward call (default 512) */
    int32_t n_threads;    /* <= 0: physical cores */
    int32_t block_size;   /* KV positions per block (default 16) */
    int64_t n_blocks;     /* KV blocks in the pool (0: enough for n_seq full sequences) */
} tokd_ctx_params;
void tokd_ctx_params_default(tokd_ctx_params *p);

tokd_ctx *tokd_ctx_new(const tokd_model *m, const tokd_ctx_params *p, tokd_err *err);
void tokd_ctx_free(tokd_ctx *c);

/* Bytes of scratch buffers a context with these parameters allocates (besides the KV cache). */
uint64_t tokd_scratch_bytes(const tokd_model *m, const tokd_ctx_params *p);

/* Bytes of KV cache per token position (all layers, K and V). */
uint64_t tokd_kv_bytes_per_token(const tokd_model *m);

typedef struct {
    int32_t token;
    int32_t pos;      /* absolute position in its sequence */
    int32_t seq;      /* 0 .. n_seq-1 */
    bool logits;      /* return this entry's logits */
} tokd_batch_entry;

/* Evaluate n entries. For each sequence, its entries must continue it exactly: positions
 * len, len+1, ... in batch order, where len is the number of positions the sequence
 * already holds. Logits of the entries with .logits set are written to `logits`, one row
 * of n_vocab floats each, in batch order. */
int tokd_forward(tokd_ctx *c, const tokd_batch_entry *entries, int32_t n, float *logits, tokd_err *err);

/* Number of positions sequence seq holds; drop positions >= new_len (frees blocks). */
int32_t tokd_seq_len(const tokd_ctx *c, int32_t seq);
void tokd_seq_truncate(tokd_ctx *c, int32_t seq, int32_t new_len);

#ifdef __cplusplus
}
#endif
#endif
