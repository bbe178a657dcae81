/* fuzz_grammar.c — libFuzzer target for the grammar parser, the JSON Schema translation and
 * the matcher. Input: grammar text (or, when it starts with '{', a JSON schema), then a NUL
 * byte, then bytes that drive the matcher: the first half is fed as raw bytes; the rest picks
 * tokens among those the mask allows (tiny-llama vocabulary, 512 tokens), each of which must
 * then be accepted. Checks: no crash, no hang, mask and accept agree, EOG only when done. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

static tokd_tokenizer *tok;
static tokd_grammar_vocab *vocab;
static float *logits;
static int32_t n_vocab;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *dir = getenv("TOKD_SHARED");
    char path[1024];
    snprintf(path, sizeof path, "%s/models/tiny-llama-f32.gguf", dir ? dir : "../shared");
    tokd_err err;
    gguf_file *f = gguf_open(path, &err);
    if (!f || !(tok = tokd_tokenizer_load(f, &err))) {
        fprintf(stderr, "fuzz_grammar: %s (set TOKD_SHARED)\n", err.msg);
        exit(1);
    }
    gguf_close(f);
    vocab = tokd_grammar_vocab_new(tok);
    n_vocab = tokd_tokenizer_n_vocab(tok);
    logits = malloc(sizeof(float) * (size_t)n_vocab);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    const uint8_t *drive = nul ? nul + 1 : data + size;
    size_t dlen = nul ? size - glen - 1 : 0;
    if (dlen > 64) dlen = 64;
    tokd_err err;
    tokd_grammar *g = NULL;
    if (glen && data[0] == '{') {
        cJSON *js = cJSON_ParseWithLength((const char *)data, glen);
        if (js) g = tokd_grammar_from_json_schema(js, false, &err);
        cJSON_Delete(js);
    } else {
        g = tokd_grammar_parse((const char *)data, glen, &err);
    }
    if (!g) return 0;
    tokd_grammar_state *s = tokd_grammar_state_new(g, vocab);
    /* 1/32 of the default work a mask: an ambiguous grammar then fails within the 10 s an
       input may take instrumented (one found took 2.3 s alone, over 10 beside another fuzzer) */
    tokd_grammar_state_set_work_budget(s, TOKD_GRAMMAR_MASK_WORK / 32);
    size_t half = dlen / 2;
    (void)tokd_grammar_accept_bytes(s, (const char *)drive, half);
    for (size_t i = half; i < dlen && !tokd_grammar_failed(s); i++) {
        for (int32_t k = 0; k < n_vocab; k++) logits[k] = 0.0f;
        tokd_grammar_mask(s, logits, n_vocab);
        int32_t n_ok = 0;
        for (int32_t k = 0; k < n_vocab; k++) n_ok += logits[k] == 0.0f;
        if (!n_ok) break;
        int32_t pick = drive[i] % n_ok, t = -1;
        for (int32_t k = 0; k < n_vocab; k++)
            if (logits[k] == 0.0f && pick-- == 0) {
                t = k;
                break;
            }
        if (tokd_token_is_eog(tok, t)) {
            if (!tokd_grammar_done(s) && !tokd_grammar_failed(s)) abort(); /* a mask past its budget fails the state */
            break;
        }
        if (tokd_grammar_accept(s, t) != 0 && !tokd_grammar_failed(s)) abort();
    }
    tokd_grammar_state_free(s);
    tokd_grammar_free(g);
    return 0;
}
