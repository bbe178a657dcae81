/* tiny_model.h — builds a small but complete llama GGUF model in memory for tests of
 * hostile input: the stories260K tokenizer metadata (512 tokens) and random F32
 * weights of a 1-layer, dim-8 model, ~25 KB in all. */
#ifndef TOKD_TINY_MODEL_H
#define TOKD_TINY_MODEL_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

static void tiny_add_matrix(gguf_writer *w, const char *name, uint64_t k, uint64_t n, uint64_t *seed) {
    uint64_t ne[2] = {k, n};
    float *d = malloc(sizeof(float) * k * n);
    for (uint64_t i = 0; i < k * n; i++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        d[i] = ((float)(*seed >> 40) / (float)(1 << 24) - 0.5f) * 0.5f;
    }
    gguf_writer_add_tensor(w, name, 0, n > 1 ? 2 : 1, ne, d, sizeof(float) * k * n);
    free(d);
}

static void tiny_add_ones(gguf_writer *w, const char *name, uint64_t n) {
    uint64_t ne[1] = {n};
    float *d = malloc(sizeof(float) * n);
    for (uint64_t i = 0; i < n; i++) d[i] = 1.0f;
    gguf_writer_add_tensor(w, name, 0, 1, ne, d, sizeof(float) * n);
    free(d);
}

/* A complete model of ~1.6 KB: 1 layer, dim 4, and its own 32-token SentencePiece-style
 * vocabulary ("<unk>", "<s>", "</s>", "\xe2\x96\x81" and the letters a-z, "hi"). Small
 * enough to try every truncation length through the CLI. */
__attribute__((unused)) static uint8_t *tiny_model_build_minivocab(uint64_t *size) {
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_str(w, "general.architecture", "llama");
    gguf_writer_set_u32(w, "llama.context_length", 64);
    gguf_writer_set_u32(w, "llama.embedding_length", 4);
    gguf_writer_set_u32(w, "llama.block_count", 1);
    gguf_writer_set_u32(w, "llama.feed_forward_length", 4);
    gguf_writer_set_u32(w, "llama.attention.head_count", 2);
    gguf_writer_set_u32(w, "llama.attention.head_count_kv", 1);
    gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    char letters[26][2];
    gguf_str toks[32];
    float scores[32];
    int32_t types[32];
    toks[0] = (gguf_str){"<unk>", 5};
    toks[1] = (gguf_str){"<s>", 3};
    toks[2] = (gguf_str){"</s>", 4};
    toks[3] = (gguf_str){"\xe2\x96\x81", 3};
    for (int i = 0; i < 26; i++) {
        letters[i][0] = (char)('a' + i);
        letters[i][1] = 0;
        toks[4 + i] = (gguf_str){letters[i], 1};
    }
    toks[30] = (gguf_str){"hi", 2};
    toks[31] = (gguf_str){"\xe2\x96\x81hi", 5};
    for (int i = 0; i < 32; i++) {
        scores[i] = i >= 30 ? 1.0f : -(float)i;
        types[i] = i == 0 ? 2 : i < 3 ? 3 : 1;
    }
    gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", toks, 32);
    gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, 32);
    gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 32);
    gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    uint64_t seed = 11;
    tiny_add_matrix(w, "token_embd.weight", 4, 32, &seed);
    tiny_add_ones(w, "output_norm.weight", 4);
    tiny_add_ones(w, "blk.0.attn_norm.weight", 4);
    tiny_add_ones(w, "blk.0.ffn_norm.weight", 4);
    tiny_add_matrix(w, "blk.0.attn_q.weight", 4, 4, &seed);
    tiny_add_matrix(w, "blk.0.attn_k.weight", 4, 2, &seed);
    tiny_add_matrix(w, "blk.0.attn_v.weight", 4, 2, &seed);
    tiny_add_matrix(w, "blk.0.attn_output.weight", 4, 4, &seed);
    tiny_add_matrix(w, "blk.0.ffn_gate.weight", 4, 4, &seed);
    tiny_add_matrix(w, "blk.0.ffn_up.weight", 4, 4, &seed);
    tiny_add_matrix(w, "blk.0.ffn_down.weight", 4, 4, &seed);
    uint8_t *buf = NULL;
    tokd_err err;
    gguf_writer_to_buffer(w, &buf, size, &err);
    gguf_writer_free(w);
    return buf;
}

/* Returns a malloc'd GGUF image, or NULL if the shared vocabulary is missing. */
/* The 1-layer, dim-8 model (2 heads of 4: two RoPE pairs), with rope_freqs.weight when
 * rope_freqs is not NULL (n_rope values). */
__attribute__((unused)) static uint8_t *tiny_model_build_rope(const char *shared, uint64_t *size, const float *rope_freqs,
                                                             uint64_t n_rope) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
    tokd_err err;
    gguf_file *src = gguf_open(path, &err);
    if (!src) return NULL;
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_str(w, "general.architecture", "llama");
    gguf_writer_set_str(w, "general.name", "tiny-test");
    gguf_writer_set_u32(w, "llama.context_length", 64);
    gguf_writer_set_u32(w, "llama.embedding_length", 8);
    gguf_writer_set_u32(w, "llama.block_count", 1);
    gguf_writer_set_u32(w, "llama.feed_forward_length", 16);
    gguf_writer_set_u32(w, "llama.attention.head_count", 2);
    gguf_writer_set_u32(w, "llama.attention.head_count_kv", 1);
    gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    for (uint64_t i = 0; i < src->n_kv; i++)
        if (src->kv[i].key.len > 10 && memcmp(src->kv[i].key.ptr, "tokenizer.", 10) == 0) gguf_writer_copy_kv(w, &src->kv[i]);
    uint64_t seed = 7;
    tiny_add_matrix(w, "token_embd.weight", 8, 512, &seed);
    tiny_add_ones(w, "output_norm.weight", 8);
    if (rope_freqs) gguf_writer_add_tensor(w, "rope_freqs.weight", 0, 1, &n_rope, rope_freqs, sizeof(float) * n_rope);
    tiny_add_ones(w, "blk.0.attn_norm.weight", 8);
    tiny_add_ones(w, "blk.0.ffn_norm.weight", 8);
    tiny_add_matrix(w, "blk.0.attn_q.weight", 8, 8, &seed);
    tiny_add_matrix(w, "blk.0.attn_k.weight", 8, 4, &seed);
    tiny_add_matrix(w, "blk.0.attn_v.weight", 8, 4, &seed);
    tiny_add_matrix(w, "blk.0.attn_output.weight", 8, 8, &seed);
    tiny_add_matrix(w, "blk.0.ffn_gate.weight", 8, 16, &seed);
    tiny_add_matrix(w, "blk.0.ffn_up.weight", 8, 16, &seed);
    tiny_add_matrix(w, "blk.0.ffn_down.weight", 16, 8, &seed);
    uint8_t *buf = NULL;
    gguf_writer_to_buffer(w, &buf, size, &err);
    gguf_writer_free(w);
    gguf_close(src);
    return buf;
}

__attribute__((unused)) static uint8_t *tiny_model_build(const char *shared, uint64_t *size) {
    return tiny_model_build_rope(shared, size, NULL, 0);
}

static int tiny_write_file(const char *path, const uint8_t *buf, uint64_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t wrote = fwrite(buf, 1, (size_t)n, f);
    return (fclose(f) == 0 && wrote == n) ? 0 : -1;
}
#endif
