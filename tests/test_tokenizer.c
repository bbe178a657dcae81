/* test_tokenizer.c — tokenizer against reference data and hostile input.
 *  - every string of every ../shared/vocab/NAME.gguf.inp tokenizes to its .out line
 *    (no BOS, no special parsing); per-vocabulary pass counts are printed;
 *  - golden prompts: each golden JSON prompt (../shared/golden), with the model's default BOS
 *    handling, gives prompt_tokens (llama.cpp's);
 *  - round trip: ids -> text reproduces the string (byte-level BPE exactly, SPM after
 *    dropping the added leading space), also pushed token by token through the
 *    incremental detokenizer, every emitted chunk valid UTF-8;
 *  - special tokens only with parse_special; add_bos/eos; pieces; EOG;
 *  - invalid UTF-8, NUL bytes, long runs of one character, empty input: no crash, and
 *    for byte-level BPE still lossless. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "tokenizer.h"
#include "unicode_utf8.h"

typedef struct {
    gguf_file *f;
    tokd_tokenizer *t;
} vocab;

static vocab open_vocab(const char *path) {
    vocab v = {0};
    tokd_err e;
    v.f = gguf_open(path, &e);
    CHECK(v.f != NULL, "open %s: %s", path, e.msg);
    if (!v.f) return v;
    v.t = tokd_tokenizer_load(v.f, &e);
    CHECK(v.t != NULL, "load %s: %s", path, e.msg);
    return v;
}

static void close_vocab(vocab *v) {
    tokd_tokenizer_free(v->t);
    if (v->f) gguf_close(v->f);
}

static bool tok(const tokd_tokenizer *t, const char *s, size_t n, bool add_special, bool parse_special, int32_t **ids,
                size_t *nids) {
    tokd_err e;
    int rc = tokd_tokenize(t, s, n, add_special, parse_special, ids, nids, &e);
    CHECK(rc == 0, "tokenize failed: %s", e.msg);
    return rc == 0;
}

/* Round trip of one string; returns true if exact. Also checks the incremental
 * detokenizer emits only valid UTF-8 chunks for valid input. */
static bool round_trip(const tokd_tokenizer *t, bool spm, const char *s, size_t n, const int32_t *ids, size_t nids) {
    unsigned flags = spm ? TOKD_DETOK_STRIP_SPACE_PREFIX : 0;
    tokd_buf whole = {0}, inc = {0}, chunk = {0};
    tokd_detokenize(t, ids, nids, flags, &whole);
    tokd_detok *d = tokd_detok_new_ex(t, flags);
    bool valid_in = tokd_utf8_valid(s, n), chunks_ok = true;
    for (size_t i = 0; i < nids; i++) {
        tokd_buf_clear(&chunk);
        tokd_detok_push(d, ids[i], &chunk);
        if (valid_in && !tokd_utf8_valid(chunk.data, chunk.len)) chunks_ok = false;
        tokd_buf_append(&inc, chunk.data ? chunk.data : "", chunk.len);
    }
    tokd_buf_clear(&chunk);
    tokd_detok_flush(d, &chunk);
    if (valid_in && !tokd_utf8_valid(chunk.data, chunk.len)) chunks_ok = false;
    tokd_buf_append(&inc, chunk.data ? chunk.data : "", chunk.len);
    tokd_detok_free(d);
    CHECK(chunks_ok, "detokenizer emitted a split UTF-8 sequence for '%.*s'", (int)n, s);
    CHECK(whole.len == inc.len && (whole.len == 0 || memcmp(whole.data, inc.data, whole.len) == 0), "incremental != whole for '%.*s'", (int)n, s);
    bool ok = whole.len == n && (n == 0 || memcmp(whole.data, s, n) == 0);
    tokd_buf_free(&whole);
    tokd_buf_free(&inc);
    tokd_buf_free(&chunk);
    return ok;
}

/* byte-by-byte: push each byte token of the text's bytes individually (SPM byte tokens)
 * and check the chunks are valid UTF-8 and reassemble to the text */
static void byte_push_check(const tokd_tokenizer *t, const char *s, size_t n) {
    tokd_detok *d = tokd_detok_new(t);
    tokd_buf all = {0}, chunk = {0};
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", (uint8_t)s[i]);
        int32_t id = tokd_token_lookup(t, name, 6);
        if (id < 0) return;
        tokd_buf_clear(&chunk);
        tokd_detok_push(d, id, &chunk);
        if (!tokd_utf8_valid(chunk.data, chunk.len)) ok = false;
        tokd_buf_append(&all, chunk.data ? chunk.data : "", chunk.len);
    }
    tokd_detok_flush(d, &all);
    CHECK(ok, "byte pushes emitted a split sequence");
    CHECK(all.len == n && (n == 0 || memcmp(all.data, s, n) == 0), "byte pushes do not reassemble");
    tokd_detok_free(d);
    tokd_buf_free(&all);
    tokd_buf_free(&chunk);
}

static void test_vocab_file(const char *dir, const char *name, int *files) {
    char path[1024], ip[1100], op[1100];
    snprintf(path, sizeof path, "%s/vocab/%s", dir, name);
    snprintf(ip, sizeof ip, "%s.inp", path);
    snprintf(op, sizeof op, "%s.out", path);
    size_t ni, no;
    char *inp = tokd_read_file(ip, &ni), *out = tokd_read_file(op, &no);
    vocab v = open_vocab(path);
    if (!v.t) goto done;
    tokd_tokenizer_info info;
    tokd_tokenizer_get_info(v.t, &info);
    bool spm = strcmp(info.model, "llama") == 0;
    if (!inp || !out) { /* vocabulary without vectors: load + smoke test */
        int32_t *ids;
        size_t nids;
        if (tok(v.t, "Hello world \xff\xfe\x00 ok", 17, true, true, &ids, &nids)) free(ids);
        printf("  %-36s loaded (%d tokens, %s/%s), no test vectors\n", name, info.n_vocab, info.model, info.pre);
        goto done;
    }
    (*files)++;
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t sl = strlen(sep);
    char *p = inp, *line = out;
    int pass = 0, total = 0, rt_ok = 0, rt_total = 0;
    while (p < inp + ni) {
        char *q = memmem(p, (size_t)(inp + ni - p), sep, sl);
        size_t len = q ? (size_t)(q - p) : (size_t)(inp + ni - p);
        if (!q && len == 0) break;
        char *eol = line ? strchr(line, '\n') : NULL;
        if (!eol) {
            CHECK(0, "%s: more strings than .out lines", name);
            break;
        }
        *eol = 0;
        int32_t *ids = NULL;
        size_t nids = 0;
        total++;
        if (tok(v.t, p, len, false, false, &ids, &nids)) {
            /* compare with expected */
            bool same = true;
            size_t k = 0;
            char *s = line, *end;
            for (;;) {
                while (*s == ' ') s++;
                if (!*s) break;
                long x = strtol(s, &end, 10);
                if (end == s) break;
                if (k >= nids || ids[k] != x) same = false;
                k++;
                s = end;
            }
            if (k != nids) same = false;
            if (same) pass++;
            else {
                fprintf(stderr, "  %s: '%.*s'\n    want:%s\n    got: ", name, (int)len, p, line);
                for (size_t i = 0; i < nids; i++) fprintf(stderr, " %d", ids[i]);
                fprintf(stderr, "\n");
            }
            CHECK(same, "%s: string %d", name, total);
            /* round trip: SPM loses only the added leading space */
            rt_total++;
            if (round_trip(v.t, spm, p, len, ids, nids)) rt_ok++;
            else if (!spm) CHECK(0, "%s: round trip of string %d", name, total);
            if (spm) byte_push_check(v.t, p, len);
            free(ids);
        }
        line = eol + 1;
        if (!q) break;
        p = q + sl;
    }
    printf("  %-36s %d/%d strings, round trip exact %d/%d\n", name, pass, total, rt_ok, rt_total);
done:
    close_vocab(&v);
    free(inp);
    free(out);
}

static void test_vocab_vectors(const char *dir) {
    char vd[1024];
    snprintf(vd, sizeof vd, "%s/vocab", dir);
    DIR *d = opendir(vd);
    CHECK(d != NULL, "no %s", vd);
    if (!d) return;
    char *names[64];
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 64) {
        size_t l = strlen(de->d_name);
        if (l > 5 && !strcmp(de->d_name + l - 5, ".gguf")) names[n++] = strdup(de->d_name);
    }
    closedir(d);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(names[i], names[j]) > 0) {
                char *x = names[i];
                names[i] = names[j];
                names[j] = x;
            }
    int files = 0;
    printf("vocab vectors:\n");
    for (int i = 0; i < n; i++) {
        test_vocab_file(dir, names[i], &files);
        free(names[i]);
    }
    CHECK(files >= 9, "only %d vocabularies with vectors", files);
}

static void test_golden(const char *dir) {
    char gd[1024];
    snprintf(gd, sizeof gd, "%s/golden", dir);
    DIR *d = opendir(gd);
    CHECK(d != NULL, "no %s", gd);
    if (!d) return;
    struct dirent *de;
    int cases = 0, ok = 0;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 6 || strcmp(de->d_name + l - 5, ".json") != 0) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", gd, de->d_name);
        size_t n;
        char *js = tokd_read_file(path, &n);
        cJSON *root = js ? cJSON_Parse(js) : NULL;
        free(js);
        CHECK(root != NULL, "parse %s", path);
        if (!root) continue;
        const cJSON *model = cJSON_GetObjectItem(root, "model"), *prompt = cJSON_GetObjectItem(root, "prompt"),
                    *want = cJSON_GetObjectItem(root, "prompt_tokens");
        if (cJSON_IsString(model) && cJSON_IsString(prompt) && cJSON_IsArray(want)) {
            char mp[2048];
            const char *m = model->valuestring;
            size_t ml = strlen(m);
            snprintf(mp, sizeof mp, "%s/models/%s%s", dir, m, ml > 5 && !strcmp(m + ml - 5, ".gguf") ? "" : ".gguf");
            vocab v = open_vocab(mp);
            if (v.t) {
                int32_t *ids;
                size_t nids;
                if (tok(v.t, prompt->valuestring, strlen(prompt->valuestring), true, false, &ids, &nids)) {
                    bool same = (size_t)cJSON_GetArraySize(want) == nids;
                    for (size_t i = 0; same && i < nids; i++)
                        same = cJSON_GetArrayItem(want, (int)i)->valueint == ids[i];
                    CHECK(same, "golden %s: prompt tokens differ (%zu vs %d)", de->d_name, nids, cJSON_GetArraySize(want));
                    ok += same;
                    free(ids);
                }
            }
            close_vocab(&v);
            cases++;
        }
        cJSON_Delete(root);
    }
    closedir(d);
    printf("golden prompts: %d/%d\n", ok, cases);
    CHECK(cases > 0, "no golden cases");
}

static void test_special(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-gpt-2.gguf", dir);
    vocab v = open_vocab(path);
    if (!v.t) return close_vocab(&v);
    int32_t eot = tokd_token_lookup(v.t, "<|endoftext|>", 13);
    CHECK(eot == 50256, "<|endoftext|> id %d", eot);
    CHECK(tokd_token_is_eog(v.t, eot) && tokd_token_is_control(v.t, eot), "endoftext is EOG control");
    const char *s = "a<|endoftext|>b";
    int32_t *ids;
    size_t n;
    if (tok(v.t, s, strlen(s), false, true, &ids, &n)) {
        CHECK(n == 3 && ids[1] == eot, "parse_special finds the token (n=%zu)", n);
        free(ids);
    }
    if (tok(v.t, s, strlen(s), false, false, &ids, &n)) {
        bool has = false;
        for (size_t i = 0; i < n; i++) has |= ids[i] == eot;
        CHECK(!has && n > 3, "without parse_special the text is ordinary");
        free(ids);
    }
    char buf[64];
    CHECK(tokd_token_piece(v.t, eot, false, buf, sizeof buf) == 0, "control renders empty");
    CHECK(tokd_token_piece(v.t, eot, true, buf, sizeof buf) == 13 && !memcmp(buf, "<|endoftext|>", 13), "rendered special");
    CHECK(tokd_token_piece(v.t, -1, true, buf, sizeof buf) == 0 && tokd_token_piece(v.t, 1 << 30, true, buf, 8) == 0,
          "out of range piece");
    CHECK(tokd_token_text(v.t, -5, NULL) == NULL, "out of range text");
    /* byte-level decode of "Ġhello" */
    int32_t id = tokd_token_lookup(v.t, "\xc4\xa0hello", 7);
    CHECK(id >= 0 && tokd_token_piece(v.t, id, false, buf, sizeof buf) == 6 && !memcmp(buf, " hello", 6), "Ġ -> space");
    /* invalid UTF-8, NUL, long runs: lossless for byte-level BPE */
    const char bad[] = "\xff\xfe\xc3(\xe2\x82\x00\x80" "abc\xf0\x9f\x98\x80\xed\xa0\x80 \xc0\xaf";
    size_t bl = sizeof bad - 1;
    if (tok(v.t, bad, bl, false, true, &ids, &n)) {
        CHECK(round_trip(v.t, false, bad, bl, ids, n), "invalid UTF-8 round trip");
        free(ids);
    }
    size_t big = 200000;
    char *run = malloc(big);
    const char runs[] = {' ', 'a', '\n', '1', '!', '\xff'};
    for (size_t r = 0; r < sizeof runs; r++) {
        memset(run, runs[r], big);
        double t0 = tokd_now();
        if (tok(v.t, run, big, false, false, &ids, &n)) {
            CHECK(round_trip(v.t, false, run, big, ids, n), "run of 0x%02x round trip", (uint8_t)runs[r]);
            free(ids);
        }
        double dt = tokd_now() - t0;
        CHECK(dt < 5.0, "run of 0x%02x took %.2fs", (uint8_t)runs[r], dt);
    }
    free(run);
    if (tok(v.t, "", 0, true, true, &ids, &n)) {
        CHECK(n == 0, "empty input, gpt-2 adds no BOS (n=%zu)", n);
        free(ids);
    }
    close_vocab(&v);
}

static void test_spm(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf", dir);
    vocab v = open_vocab(path);
    if (!v.t) return close_vocab(&v);
    tokd_tokenizer_info info;
    tokd_tokenizer_get_info(v.t, &info);
    CHECK(info.add_bos && !info.add_eos && info.add_space_prefix && info.bos == 1 && info.eos == 2, "spm info");
    int32_t *ids;
    size_t n;
    if (tok(v.t, "", 0, true, false, &ids, &n)) {
        CHECK(n == 1 && ids[0] == 1, "empty + add_special = [BOS]");
        free(ids);
    }
    if (tok(v.t, "<s>x</s>", 8, false, true, &ids, &n)) {
        CHECK(n >= 3 && ids[0] == 1, "parse_special <s>");
        free(ids);
    }
    if (tok(v.t, "<s>x", 4, false, false, &ids, &n)) {
        CHECK(n >= 1 && ids[0] != 1, "no parse_special: <s> is text");
        free(ids);
    }
    /* invalid bytes map to byte tokens; NUL too */
    const char bad[] = "a\xff\x00\xc3";
    if (tok(v.t, bad, 4, false, false, &ids, &n)) {
        CHECK(n >= 4, "bytes");
        CHECK(round_trip(v.t, true, bad, 4, ids, n), "spm invalid bytes round trip");
        free(ids);
    }
    /* byte tokens detokenize to bytes; partial sequences held back */
    tokd_detok *d = tokd_detok_new(v.t);
    tokd_buf out = {0};
    tokd_detok_push(d, tokd_token_lookup(v.t, "<0xE2>", 6), &out);
    CHECK(out.len == 0, "held first byte of €");
    tokd_detok_push(d, tokd_token_lookup(v.t, "<0x82>", 6), &out);
    CHECK(out.len == 0, "held 2 bytes of €");
    tokd_detok_push(d, tokd_token_lookup(v.t, "<0xAC>", 6), &out);
    CHECK(out.len == 3 && !memcmp(out.data, "\xe2\x82\xac", 3), "€ released");
    tokd_buf_clear(&out);
    tokd_detok_push(d, tokd_token_lookup(v.t, "<0xE2>", 6), &out);
    tokd_detok_push(d, tokd_token_lookup(v.t, "<0x41>", 6), &out);
    CHECK(out.len == 2 && !memcmp(out.data, "\xe2" "A", 2), "invalid prefix released as is");
    tokd_buf_clear(&out);
    tokd_detok_push(d, tokd_token_lookup(v.t, "<0xF0>", 6), &out);
    tokd_detok_flush(d, &out);
    CHECK(out.len == 1 && (uint8_t)out.data[0] == 0xF0, "flush releases held bytes");
    tokd_detok_free(d);
    tokd_buf_free(&out);
    size_t big = 100000;
    char *run = malloc(big);
    memset(run, ' ', big);
    double t0 = tokd_now();
    if (tok(v.t, run, big, true, false, &ids, &n)) free(ids);
    memset(run, 'a', big);
    if (tok(v.t, run, big, true, false, &ids, &n)) free(ids);
    CHECK(tokd_now() - t0 < 5.0, "long runs are fast");
    free(run);
    close_vocab(&v);
}

/* Crafted metadata: bad ids / types are errors or ignored, never crashes. */
static void test_bad_metadata(void) {
    tokd_err e;
    gguf_str toks[4] = {{"a", 1}, {"b", 1}, {"ab", 2}, {"", 0}};
    float scores[4] = {0, 0, 1, 0};
    int32_t types[4] = {1, 1, 1, 99};
    struct {
        const char *what;
        int variant;
    } cases[] = {{"ok", 0}, {"no model", 1}, {"unknown model", 2}, {"short scores", 3}, {"wrong tokens type", 4},
                 {"bad add_bos", 5}, {"gpt2 without merges", 6}, {"unknown pre", 7}, {"huge bos id", 8}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gguf_writer *w = gguf_writer_new();
        int v = cases[c].variant;
        if (v != 1) gguf_writer_set_str(w, "tokenizer.ggml.model", v == 2 ? "wordpiece" : v == 6 || v == 7 ? "gpt2" : "llama");
        if (v == 7) gguf_writer_set_str(w, "tokenizer.ggml.pre", "no-such-pre");
        if (v == 4) gguf_writer_set_arr(w, "tokenizer.ggml.tokens", GGUF_TYPE_FLOAT32, scores, 4);
        else gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", toks, 4);
        gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, v == 3 ? 2 : 4);
        gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 4);
        if (v == 5) gguf_writer_set_str(w, "tokenizer.ggml.add_bos_token", "yes");
        if (v == 8) gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 4000000000u);
        if (v == 7) {
            gguf_str m[1] = {{"a b", 3}};
            gguf_writer_set_str_arr(w, "tokenizer.ggml.merges", m, 1);
        }
        uint8_t *buf;
        uint64_t size;
        int rc = gguf_writer_to_buffer(w, &buf, &size, &e);
        gguf_writer_free(w);
        CHECK(rc == 0, "writer: %s", e.msg);
        if (rc) continue;
        gguf_file *f = gguf_open_buffer(buf, size, &e);
        CHECK(f != NULL, "open crafted: %s", e.msg);
        if (f) {
            tokd_tokenizer *t = tokd_tokenizer_load(f, &e);
            bool want_ok = v == 0 || v == 8;
            CHECK((t != NULL) == want_ok, "%s: load %s (%s)", cases[c].what, t ? "succeeded" : "failed", t ? "" : e.msg);
            if (t) {
                int32_t *ids;
                size_t n;
                if (tok(t, "ab ba\xff", 6, true, true, &ids, &n)) {
                    CHECK(n >= 2 && ids[0] == 1, "crafted tokenizes with BOS (n=%zu)", n);
                    free(ids);
                }
                tokd_tokenizer_free(t);
            }
            gguf_close(f);
        }
        free(buf);
    }
}

/* Every supported pre-tokenizer compiles and splits arbitrary text losslessly: a
 * crafted byte-level vocabulary (the 256 byte symbols plus a few merges) per name. */
static void test_pretokenizers(void) {
    static const char *pres[] = {"default", "gpt-2", "gpt-neox", "mpt", "olmo", "phi-2", "llama-bpe", "llama3", "dbrx",
                                 "smaug-bpe", "qwen2", "stablelm2", "deepseek-llm", "deepseek-coder", "deepseek-v3",
                                 "falcon", "starcoder", "refact", "command-r", "smollm", "codeshell", "exaone",
                                 "poro-chat", "bloom", "gpt3-finnish", "viking", "tekken", "gpt-4o", "llama4",
                                 "chatglm-bpe", "chameleon", "jais", "megrez"};
    gguf_str toks[260];
    char store[256][4];
    for (int b = 0; b < 256; b++) {
        size_t k = tokd_utf8_encode(tokd_bytelevel_cp((uint8_t)b), store[b]);
        toks[b] = (gguf_str){store[b], k};
    }
    toks[256] = (gguf_str){"he", 2};
    toks[257] = (gguf_str){"ll", 2};
    toks[258] = (gguf_str){"hell", 4};
    toks[259] = (gguf_str){"<|im_end|>", 10};
    int32_t types[260];
    for (int i = 0; i < 260; i++) types[i] = i == 259 ? 3 : 1;
    gguf_str merges[3] = {{"h e", 3}, {"l l", 3}, {"he ll", 5}};
    const char text[] = "Hello hell, I'm 12345 dogs!\n\n  \t x\xff\xc3 \xe4\xbd\xa0\xe5\xa5\xbd \xce\xa9mega ABCdef <|im_end|>";
    size_t tl = sizeof text - 1;
    for (size_t p = 0; p < sizeof pres / sizeof pres[0]; p++) {
        gguf_writer *w = gguf_writer_new();
        gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
        gguf_writer_set_str(w, "tokenizer.ggml.pre", pres[p]);
        gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", toks, 260);
        gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 260);
        gguf_writer_set_str_arr(w, "tokenizer.ggml.merges", merges, 3);
        gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 259);
        gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 259);
        uint8_t *buf;
        uint64_t size;
        tokd_err e;
        int rc = gguf_writer_to_buffer(w, &buf, &size, &e);
        gguf_writer_free(w);
        if (rc) continue;
        gguf_file *f = gguf_open_buffer(buf, size, &e);
        tokd_tokenizer *t = f ? tokd_tokenizer_load(f, &e) : NULL;
        CHECK(t != NULL, "pre-tokenizer %s: %s", pres[p], e.msg);
        if (t) {
            int32_t *ids;
            size_t n;
            if (tok(t, text, tl, false, false, &ids, &n)) {
                CHECK(round_trip(t, false, text, tl, ids, n), "pre-tokenizer %s round trip", pres[p]);
                bool merged = false;
                for (size_t i = 0; i < n; i++) merged |= ids[i] == 258;
                CHECK(merged, "pre-tokenizer %s: 'hell' merged", pres[p]);
                free(ids);
            }
            if (tok(t, text, tl, false, true, &ids, &n)) {
                CHECK(n > 0 && ids[n - 1] == 259, "pre-tokenizer %s: special at the end", pres[p]);
                free(ids);
            }
            tokd_tokenizer_free(t);
        }
        if (f) gguf_close(f);
        free(buf);
    }
}

int main(void) {
    const char *dir = t_shared();
    test_vocab_vectors(dir);
    test_golden(dir);
    test_special(dir);
    test_spm(dir);
    test_bad_metadata();
    test_pretokenizers();
    T_DONE();
}
