/* bench_grammar.c — cost of the grammar token mask on a 32,000-token vocabulary.
 *
 *   make build/libtokd.a && cc -std=c17 -D_GNU_SOURCE -O2 -Iinclude -Isrc bench/bench_grammar.c \
 *       build/libtokd.a -lpcre2-8 -lcjson -lm -lpthread -o build/bench_grammar && build/bench_grammar [VOCAB.gguf]
 *
 * A JSON document valid under a schema (object with strings, numbers, arrays, nesting) is
 * tokenized with the vocabulary; the benchmark then replays it token by token: mask (timed),
 * then accept. It prints the mean, p50, p99 and max mask time per token, and the time to build
 * the vocabulary trie (once per tokenizer); times are thread CPU time. Each replay starts from a
 * fresh state (cold memo); p50 is the warm, typical step. Compare with a decode step. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf.h"
#include "grammar.h"

/* Thread CPU time: on a shared machine, wall time also counts other processes' turns. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const char *SCHEMA =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\"},"
    "\"description\":{\"type\":\"string\"},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
    "\"scores\":{\"type\":\"array\",\"items\":{\"type\":\"number\"}},"
    "\"address\":{\"type\":\"object\",\"properties\":{\"street\":{\"type\":\"string\"},\"city\":{\"type\":\"string\"},"
    "\"zip\":{\"type\":\"string\",\"maxLength\":10}},\"required\":[\"street\",\"city\"]},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"alpha\",\"beta\",\"gamma\"]}},"
    "\"active\":{\"type\":\"boolean\"}},"
    "\"required\":[\"name\",\"description\",\"age\",\"scores\",\"address\",\"tags\",\"active\"]}";

static const char *DOC =
    "{\"name\": \"Ada Lovelace\", \"description\": \"An English mathematician and writer, chiefly known for her "
    "work on Charles Babbage's proposed mechanical general-purpose computer, the Analytical Engine. She was the "
    "first to recognise that the machine had applications beyond pure calculation \\\"and\\\" published the first "
    "algorithm intended to be carried out by such a machine. Caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac.\", "
    "\"age\": 36, \"scores\": [98.5, 87.25, 100, -3.5e2, 0.001], "
    "\"address\": {\"street\": \"12 St James's Square\", \"city\": \"London\", \"zip\": \"SW1Y 4JH\"}, "
    "\"tags\": [\"alpha\", \"gamma\"], \"active\": true}";

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "../shared/vocab/ggml-vocab-llama-spm.gguf";
    int reps = argc > 2 ? atoi(argv[2]) : 20;
    if (reps < 1) reps = 1;
    tokd_err e;
    gguf_file *f = gguf_open(path, &e);
    if (!f) {
        fprintf(stderr, "bench_grammar: %s\n", e.msg);
        return 1;
    }
    tokd_tokenizer *tok = tokd_tokenizer_load(f, &e);
    gguf_close(f);
    if (!tok) {
        fprintf(stderr, "bench_grammar: %s\n", e.msg);
        return 1;
    }
    int32_t V = tokd_tokenizer_n_vocab(tok);
    double t0 = tokd_now();
    tokd_grammar_vocab *v = tokd_grammar_vocab_new(tok);
    double t_trie = tokd_now() - t0;
    cJSON *schema = cJSON_Parse(SCHEMA);
    /* SentencePiece vocabularies put a space before the first word: allow one */
    char *text = tokd_json_schema_to_gbnf(schema, false, &e);
    tokd_grammar *g = NULL;
    if (text) {
        char *r = strstr(text, "\nroot ::= ");
        tokd_buf b = {0};
        tokd_buf_append(&b, text, (size_t)(r - text));
        tokd_buf_appendf(&b, "\nroot ::= \" \"? %s", r + 10);
        g = tokd_grammar_parse(b.data, b.len, &e);
        tokd_buf_free(&b);
        free(text);
    }
    if (!g) {
        fprintf(stderr, "bench_grammar: %s\n", e.msg);
        return 1;
    }
    if (!tokd_grammar_match(g, DOC, strlen(DOC))) {
        fprintf(stderr, "bench_grammar: the document does not match the schema\n");
        return 1;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    tokd_tokenize(tok, DOC, strlen(DOC), false, false, &ids, &n, &e);
    tokd_grammar_state *s = tokd_grammar_state_new(g, v);
    float *logits = malloc(sizeof(float) * (size_t)V);
    double *t = malloc(sizeof(double) * n * (size_t)reps);
    size_t nt = 0;
    long allowed_sum = 0;
    for (int r = 0; r < reps; r++) {
        tokd_grammar_state_reset(s);
        for (size_t i = 0; i < n; i++) {
            for (int32_t k = 0; k < V; k++) logits[k] = 0.0f;
            double a = cpu_now();
            tokd_grammar_mask(s, logits, V);
            t[nt++] = (cpu_now() - a) * 1e6;
            if (getenv("BENCH_TRACE") && r == 0) {
                char pc[64];
                size_t pn = tokd_token_piece(tok, ids[i], false, pc, 63);
                pc[pn] = 0;
                fprintf(stderr, "%4zu %8.1f us  next '%s'\n", i, t[nt - 1], pc);
            }
            if (r == 0)
                for (int32_t k = 0; k < V; k++) allowed_sum += logits[k] == 0.0f;
            if (logits[ids[i]] != 0.0f || tokd_grammar_accept(s, ids[i])) {
                fprintf(stderr, "bench_grammar: token %zu (%d) refused\n", i, ids[i]);
                return 1;
            }
        }
        if (!tokd_grammar_done(s)) {
            fprintf(stderr, "bench_grammar: document incomplete\n");
            return 1;
        }
    }
    double sum = 0;
    for (size_t i = 0; i < nt; i++) sum += t[i];
    qsort(t, nt, sizeof *t, cmp_d);
    printf("vocabulary %s: %d tokens, trie built in %.1f ms\n", path, V, t_trie * 1e3);
    printf("document: %zu tokens, %zu bytes; mean %.0f tokens allowed per step\n", n, strlen(DOC), (double)allowed_sum / (double)n);
    printf("mask per token: mean %.1f us, p50 %.1f us, p99 %.1f us, max %.1f us (%zu masks)\n", sum / (double)nt,
           t[nt / 2], t[(size_t)(0.99 * (double)nt)], t[nt - 1], nt);
    free(t);
    free(logits);
    free(ids);
    tokd_grammar_state_free(s);
    tokd_grammar_free(g);
    cJSON_Delete(schema);
    tokd_grammar_vocab_free(v);
    tokd_tokenizer_free(tok);
    return 0;
}
