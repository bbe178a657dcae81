/* cmd_perplexity.c — `tokd perplexity -m MODEL -f TEXT [-c 512] [-b N] [--chunks N]
 * [--kl-model BASE] [--parse-special] [-t N]`: the model's perplexity on a text, the
 * figure people compare quantized files by. The text is cut into chunks of -c tokens,
 * each evaluated from an empty cache with BOS first, and each chunk's second half of
 * positions is scored on the token that follows: llama-perplexity's and llama-imatrix's
 * scoring, run by the same code as `tokd imatrix` (src/imatrix_collect.h) with nothing
 * collected. The running estimate goes to stderr chunk by chunk, the final one, with its
 * standard error, to stdout.
 *
 * --kl-model BASE also runs BASE (the F16 or F32 file a quantized MODEL came from) on the
 * same batches, in step, and compares the two at the scored positions: the mean
 * KL(BASE || MODEL) of the next-token distributions, its largest value, and how often
 * both pick the same likeliest token, as llama-perplexity's --kl-divergence reports them
 * (this project's golden tests hold model paths to the same two figures). Running both
 * at once holds both models in memory, where llama-perplexity writes the base's logits
 * to a file first; it needs no such file, which for a real vocabulary is tens of GB. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "imatrix_collect.h"

/* BASE beside MODEL: its context follows MODEL's batches (imatrix_collect.h, on_batch). */
typedef struct {
    const tokd_model *base;
    tokd_ctx *ctx;
    float *logits;
    double *log_probs; /* two rows of n_vocab: BASE's and MODEL's log-softmax */
    int32_t n_vocab;
    double kl, kl2, kl_max;
    int64_t n, same_top;
} kl_state;

/* log-softmax of row into out (double), its argmax returned */
static int32_t log_softmax(const float *row, int32_t n, double *out) {
    int32_t top = 0;
    for (int32_t i = 1; i < n; i++)
        if (row[i] > row[top]) top = i;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)row[i] - (double)row[top]);
    const double lse = (double)row[top] + log(sum);
    for (int32_t i = 0; i < n; i++) out[i] = (double)row[i] - lse;
    return top;
}

static int compare_batch(void *user, const tokd_batch_entry *batch, int32_t n, const float *logits, tokd_err *err) {
    kl_state *k = user;
    if (batch[0].pos == 0) tokd_seq_truncate(k->ctx, 0, 0); /* a new chunk */
    if (tokd_forward(k->ctx, batch, n, k->logits, err)) return -1;
    double *lp = k->log_probs, *lq = lp + k->n_vocab;
    for (int32_t i = 0, row = 0; i < n; i++) {
        if (!batch[i].logits) continue;
        const int32_t top_p = log_softmax(k->logits + (size_t)row * (size_t)k->n_vocab, k->n_vocab, lp);
        const int32_t top_q = log_softmax(logits + (size_t)row * (size_t)k->n_vocab, k->n_vocab, lq);
        double kl = 0;
        for (int32_t v = 0; v < k->n_vocab; v++) kl += exp(lp[v]) * (lp[v] - lq[v]);
        if (kl < 0) kl = 0; /* rounding: KL of equal distributions */
        k->kl += kl;
        k->kl2 += kl * kl;
        if (kl > k->kl_max) k->kl_max = kl;
        k->same_top += top_p == top_q;
        k->n++;
        row++;
    }
    return 0;
}

/* Whether a and b have the same tokens, text for text (logits compare only then). */
static bool same_vocabulary(const tokd_model *a, const tokd_model *b) {
    if (a->hp.n_vocab != b->hp.n_vocab || tokd_tokenizer_n_vocab(a->tok) != tokd_tokenizer_n_vocab(b->tok)) return false;
    for (int32_t id = 0; id < tokd_tokenizer_n_vocab(a->tok); id++) {
        size_t la = 0, lb = 0;
        const char *ta = tokd_token_text(a->tok, id, &la), *tb = tokd_token_text(b->tok, id, &lb);
        if (la != lb || (la && memcmp(ta, tb, la) != 0)) return false;
    }
    return true;
}

/* BASE loaded beside m, with a context like the one tokd_imatrix_compute makes for p;
 * 0, or 1 after printing why. */
static int open_base(const char *path, const tokd_model *m, tokd_imatrix_params *p, kl_state *k) {
    tokd_err err;
    tokd_model *base = tokd_model_load(path, &err);
    if (!base) {
        fprintf(stderr, "tokd perplexity: %s\n", err.msg);
        return 1;
    }
    if (!same_vocabulary(base, m)) {
        fprintf(stderr, "tokd perplexity: --kl-model's vocabulary is not the model's (%d and %d tokens)\n",
                base->hp.n_vocab, m->hp.n_vocab);
        tokd_model_free(base);
        return 1;
    }
    tokd_ctx_params cp;
    tokd_ctx_params_default(&cp);
    cp.n_ctx = p->n_ctx;
    cp.n_batch = p->n_batch > 0 && p->n_batch < p->n_ctx ? p->n_batch : p->n_ctx;
    cp.n_threads = p->n_threads;
    k->ctx = tokd_ctx_new(base, &cp, &err);
    if (!k->ctx) {
        fprintf(stderr, "tokd perplexity: --kl-model: %s\n", err.msg);
        tokd_model_free(base);
        return 1;
    }
    k->base = base;
    k->n_vocab = base->hp.n_vocab;
    k->logits = tokd_xmalloc((size_t)cp.n_batch * (size_t)k->n_vocab * sizeof(float));
    k->log_probs = tokd_xmalloc(2 * (size_t)k->n_vocab * sizeof(double));
    p->on_batch = compare_batch;
    p->user = k;
    return 0;
}

static void close_base(kl_state *k) {
    free(k->logits);
    free(k->log_probs);
    tokd_ctx_free(k->ctx);
    tokd_model_free((tokd_model *)k->base);
}

static void print_kl(const kl_state *k) {
    if (k->n < 2) return;
    const double mean = k->kl / (double)k->n, var = k->kl2 / (double)k->n - mean * mean;
    const double se = var > 0 ? sqrt(var / (double)(k->n - 1)) : 0;
    printf("KL divergence from --kl-model: mean %.6f +/- %.6f, max %.6f; same top token %.3f %% (%lld of %lld)\n", mean,
           se, k->kl_max, 100.0 * (double)k->same_top / (double)k->n, (long long)k->same_top, (long long)k->n);
}

int cmd_perplexity(int argc, char **argv) {
    const char *model_path = NULL, *text_path = NULL, *base_path = NULL;
    long n_ctx = 512, n_batch = 0, n_chunks = 0, n_threads = 0;
    bool parse_special = false;
    const cli_option opts[] = {
        CLI_MODEL(&model_path),
        CLI_STR("-f", "--file", &text_path, "TEXT", "the text file to score"),
        CLI_INT("-c", "--ctx-size", &n_ctx, 16, 1 << 20, "N", "tokens per chunk (default 512)"),
        CLI_INT("-b", "--batch-size", &n_batch, 0, 1 << 20, "N", "tokens per batch within a chunk (default: the chunk)"),
        CLI_INT("--chunks", NULL, &n_chunks, 0, 1 << 30, "N", "score at most N chunks (default 0: all)"),
        CLI_STR("--kl-model", NULL, &base_path, "BASE", "also compare with BASE: KL divergence and same top token"),
        CLI_FLAG("--parse-special", NULL, &parse_special, "read special tokens written in the text as such"),
        CLI_THREADS(&n_threads),
        CLI_END,
    };
    int parsed = cli_parse("perplexity", argc, argv, opts);
    if (parsed) return cli_exit_code(parsed);
    if (!model_path || !text_path) {
        cli_die_msg("perplexity", "need -m MODEL -f TEXT");
        return 2;
    }
    size_t len = 0;
    char *text = tokd_read_file(text_path, &len);
    if (!text) {
        fprintf(stderr, "tokd perplexity: cannot read '%s'\n", text_path);
        return 1;
    }
    tokd_err err;
    tokd_model *m = tokd_model_load(model_path, &err);
    if (!m) {
        fprintf(stderr, "tokd perplexity: %s\n", err.msg);
        free(text);
        return 1;
    }
    tokd_imatrix_params p = {.n_ctx = (int32_t)n_ctx, .n_batch = (int32_t)n_batch, .n_chunks = (int32_t)n_chunks,
                             .n_threads = (int32_t)n_threads, .parse_special = parse_special,
                             .log_name = "tokd perplexity"};
    kl_state kl = {0};
    if (base_path && open_base(base_path, m, &p, &kl)) {
        tokd_model_free(m);
        free(text);
        return 1;
    }
    tokd_imatrix_ppl ppl;
    const double t0 = tokd_now();
    int chunks = tokd_imatrix_compute(m, text, len, &p, NULL, &ppl, stderr, &err);
    int rc = 0;
    double estimate, se;
    if (chunks < 0) {
        fprintf(stderr, "tokd perplexity: %s\n", err.msg);
        rc = 1;
    } else if (!tokd_imatrix_ppl_estimate(&ppl, &estimate, &se)) {
        fprintf(stderr, "tokd perplexity: chunks of %ld tokens score fewer than two positions\n", n_ctx);
        rc = 1;
    } else {
        printf("PPL %.4f +/- %.5f over %lld positions (%d chunks of %ld tokens)\n", estimate, se, (long long)ppl.n,
               chunks, n_ctx);
        if (base_path) print_kl(&kl);
        const double secs = tokd_now() - t0;
        fprintf(stderr, "tokd perplexity: %.2f s, %.1f tokens/s\n", secs, (double)chunks * (double)n_ctx / secs);
    }
    close_base(&kl);
    tokd_model_free(m);
    free(text);
    return rc;
}
