/* fuzz_tokenizer.c — libFuzzer target for the tokenizer. Vocabularies are loaded once
 * (TOKD_SHARED, default ../shared): llama-spm (SentencePiece), gpt-2 (single regex),
 * deepseek-llm (multi-regex, non-ASCII classes), phi-3 (SPM with whitespace-stripping
 * special tokens). The first input byte picks the vocabulary and the flags, the rest is
 * the text (bits 0x10 add_special, 0x20 parse_special, 0x40 render special). Checks: tokenization succeeds, every id is in range, the incremental
 * detokenizer agrees with whole detokenization and is lossless for byte-level BPE, and
 * never emits a split sequence when the text is valid UTF-8 (byte-level BPE). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "unicode_utf8.h"

#define N_VOCABS 4
static const char *names[N_VOCABS] = {"llama-spm", "gpt-2", "deepseek-llm", "phi-3"};
static gguf_file *files[N_VOCABS];
static tokd_tokenizer *toks[N_VOCABS];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *dir = getenv("TOKD_SHARED");
    if (!dir) dir = "../shared";
    for (int i = 0; i < N_VOCABS; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", dir, names[i]);
        tokd_err err;
        files[i] = gguf_open(path, &err);
        if (!files[i]) {
            fprintf(stderr, "fuzz_tokenizer: %s (set TOKD_SHARED)\n", err.msg);
            exit(1);
        }
        toks[i] = tokd_tokenizer_load(files[i], &err);
        if (!toks[i]) {
            fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, err.msg);
            exit(1);
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    uint8_t sel = data[0];
    const tokd_tokenizer *t = toks[sel % N_VOCABS];
    bool bpe = (sel % N_VOCABS) == 1 || (sel % N_VOCABS) == 2;
    bool add_special = sel & 0x10, parse_special = sel & 0x20;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    int32_t *ids = NULL;
    size_t n = 0;
    tokd_err err;
    if (tokd_tokenize(t, text, len, add_special, parse_special, &ids, &n, &err) != 0) abort();
    int32_t nv = tokd_tokenizer_n_vocab(t);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= nv) abort();
    unsigned flags = (sel & 0x40) ? TOKD_DETOK_RENDER_SPECIAL : 0;
    tokd_buf whole = {0}, inc = {0}, chunk = {0};
    tokd_detokenize(t, ids, n, flags, &whole);
    tokd_detok *d = tokd_detok_new_ex(t, flags);
    bool valid = tokd_utf8_valid(text, len);
    for (size_t i = 0; i < n; i++) {
        tokd_buf_clear(&chunk);
        tokd_detok_push(d, ids[i], &chunk);
        if (bpe && valid && !tokd_utf8_valid(chunk.data, chunk.len)) abort();
        if (chunk.len) tokd_buf_append(&inc, chunk.data, chunk.len);
        char piece[8];
        (void)tokd_token_piece(t, ids[i], true, piece, sizeof piece);
        (void)tokd_token_is_eog(t, ids[i]);
    }
    tokd_detok_flush(d, &inc);
    tokd_detok_free(d);
    if (whole.len != inc.len || (whole.len && memcmp(whole.data, inc.data, whole.len) != 0)) abort();
    /* byte-level BPE without special parsing is lossless (for deepseek-llm only on valid
     * UTF-8: bytes F5..FF have no byte-level token there, they reach user-defined tokens
     * spelled as the Latin-1 letter, which render as that letter, as in llama.cpp) */
    bool exact = whole.len == len && (len == 0 || memcmp(whole.data, text, len) == 0);
    if (bpe && !parse_special && !flags && (valid || (sel % N_VOCABS) == 1) && !exact) abort();
    tokd_buf_free(&whole);
    tokd_buf_free(&inc);
    tokd_buf_free(&chunk);
    free(ids);
    return 0;
}
