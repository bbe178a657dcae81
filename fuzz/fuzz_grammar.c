/* fuzz_grammar.c — libFuzzer target for the grammar parser, the JSON Schema translation and
 * the matcher. Input: grammar text (or, when it starts with '{', a JSON schema; with '/', a
 * JSON Schema `pattern`, the string schema {"type":"string","pattern":REST}; with '%', two
 * bytes of minLength and maxLength, then the pattern), then a NUL byte, then bytes that drive
 * the matcher: the first half is fed as raw bytes; the rest picks tokens among those the mask
 * allows (tiny-llama vocabulary, 512 tokens), each of which must then be accepted. Checks: no
 * crash, no hang, mask and accept agree, EOG only when done; for a pattern, an output the
 * grammar completes is a JSON string whose value PCRE2 (in ECMA's readings: \u escapes, $ at
 * the very end, ASCII classes) finds the pattern in, with a length within the bounds. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <cjson/cJSON.h>
#include <pcre2.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "../tests/t_json_string.h"

#define OUT_CAP 8192 /* 32 raw bytes and 32 tokens */

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

static void check_pattern(const char *pattern, const char *out, size_t n, long min_len, long max_len) {
    if (n < 2 || out[0] != '"' || out[n - 1] != '"') abort();
    char value[OUT_CAP];
    long cps;
    size_t v_len = t_json_string_value(out, n, value, &cps);
    if (cps < min_len || (max_len >= 0 && cps > max_len)) abort();
    int code;
    PCRE2_SIZE at;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_ALT_BSUX,
                                   &code, &at, NULL);
    if (!re) return; /* a pattern PCRE2 reads otherwise (a surrogate escape, say) */
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = pcre2_match(re, (PCRE2_SPTR)value, v_len, 0, PCRE2_NO_UTF_CHECK, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    if (rc < 0 && rc != PCRE2_ERROR_MATCHLIMIT && rc != PCRE2_ERROR_DEPTHLIMIT) {
        fprintf(stderr, "pattern %s: output %.*s does not match\n", pattern, (int)n, out);
        abort();
    }
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
    char *pattern = NULL;
    long min_len = 0, max_len = -1;
    if (glen && (data[0] == '/' || (data[0] == '%' && glen >= 3))) {
        size_t skip = data[0] == '/' ? 1 : 3;
        if (data[0] == '%') min_len = data[1] % 8, max_len = data[2] % 24 < 20 ? min_len + data[2] % 24 : -1;
        pattern = strndup((const char *)data + skip, glen - skip);
        cJSON *js = cJSON_CreateObject();
        cJSON_AddStringToObject(js, "type", "string");
        cJSON_AddStringToObject(js, "pattern", pattern);
        if (min_len) cJSON_AddNumberToObject(js, "minLength", (double)min_len);
        if (max_len >= 0) cJSON_AddNumberToObject(js, "maxLength", (double)max_len);
        g = tokd_grammar_from_json_schema(js, false, &err);
        cJSON_Delete(js);
    } else if (glen && data[0] == '{') {
        cJSON *js = cJSON_ParseWithLength((const char *)data, glen);
        if (js) g = tokd_grammar_from_json_schema(js, false, &err);
        cJSON_Delete(js);
    } else {
        g = tokd_grammar_parse((const char *)data, glen, &err);
    }
    if (!g) {
        free(pattern);
        return 0;
    }
    tokd_grammar_state *s = tokd_grammar_state_new(g, vocab);
    char out[OUT_CAP];
    size_t n_out = 0;
    /* 1/32 of the default work a mask: an ambiguous grammar then fails within the 10 s an
       input may take instrumented (one found took 2.3 s alone, over 10 beside another fuzzer) */
    tokd_grammar_state_set_work_budget(s, TOKD_GRAMMAR_MASK_WORK / 32);
    size_t half = dlen / 2;
    if (!tokd_grammar_accept_bytes(s, (const char *)drive, half)) memcpy(out, drive, half), n_out = half;
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
        if (tokd_grammar_accept(s, t) != 0) {
            if (!tokd_grammar_failed(s)) abort();
            break;
        }
        n_out += tokd_token_piece(tok, t, false, out + n_out, sizeof out - n_out);
    }
    if (pattern && tokd_grammar_done(s) && !tokd_grammar_failed(s)) check_pattern(pattern, out, n_out, min_len, max_len);
    free(pattern);
    tokd_grammar_state_free(s);
    tokd_grammar_free(g);
    return 0;
}
