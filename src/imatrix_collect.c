/* imatrix_collect.c — see imatrix_collect.h. */
#include "imatrix_collect.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "util.h"

/* One product input: the sums of squares of its K columns over every row seen. */
typedef struct {
    double *sum;
    int64_t K, rows;
} input_stat;

/* An entry of the file: a weight name and the input it reads. */
typedef struct {
    char name[64];
    const input_stat *in;
} named_entry;

#define N_INPUTS 4 /* per layer: TOKD_MM_ATTN_IN .. TOKD_MM_FFN_DOWN_IN */

struct tokd_imatrix_collector {
    int32_t n_layer;
    input_stat *inputs; /* n_layer x N_INPUTS, then the output's */
    bool process_output;
};

tokd_imatrix_collector *tokd_imatrix_collector_new(const tokd_model *m, bool process_output) {
    tokd_imatrix_collector *c = tokd_xcalloc(1, sizeof *c);
    c->n_layer = m->hp.n_layer;
    c->process_output = process_output && !m->tied_output;
    c->inputs = tokd_xcalloc((size_t)c->n_layer * N_INPUTS + 1, sizeof *c->inputs);
    return c;
}

void tokd_imatrix_collector_free(tokd_imatrix_collector *c) {
    if (!c) return;
    for (int32_t i = 0; i < c->n_layer * N_INPUTS + 1; i++) free(c->inputs[i].sum);
    free(c->inputs);
    free(c);
}

static input_stat *stat_of(tokd_imatrix_collector *c, int32_t layer, tokd_mm_input which) {
    if (which == TOKD_MM_OUTPUT_IN) return c->process_output ? &c->inputs[c->n_layer * N_INPUTS] : NULL;
    if (layer < 0 || layer >= c->n_layer || (int)which >= N_INPUTS) return NULL;
    return &c->inputs[layer * N_INPUTS + (int)which];
}

void tokd_imatrix_observe(void *collector, int32_t layer, tokd_mm_input which, const float *x, int32_t n, int64_t K) {
    input_stat *s = stat_of(collector, layer, which);
    if (!s || n <= 0) return;
    if (!s->sum) {
        s->sum = tokd_xcalloc((size_t)K, sizeof(double));
        s->K = K;
    }
    if (s->K != K) return; /* cannot happen: one model, fixed shapes */
    for (int32_t i = 0; i < n; i++) {
        const float *r = x + (size_t)i * (size_t)K;
        for (int64_t j = 0; j < K; j++) s->sum[j] += (double)r[j] * (double)r[j];
    }
    s->rows += n;
}

int64_t tokd_imatrix_collector_tokens(const tokd_imatrix_collector *c) {
    return c->n_layer > 0 ? c->inputs[0].rows : 0;
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const named_entry *)a)->name, ((const named_entry *)b)->name);
}

/* The file's entries, sorted by name; *n_out of them (inputs never seen are left out). */
static named_entry *entries_of(const tokd_imatrix_collector *c, size_t *n_out) {
    static const char *const names[N_INPUTS][3] = {
        {"attn_q", "attn_k", "attn_v"}, {"attn_output", NULL, NULL}, {"ffn_gate", "ffn_up", NULL}, {"ffn_down", NULL, NULL}};
    named_entry *e = tokd_xcalloc((size_t)c->n_layer * 7 + 1, sizeof *e); /* 7 weights a layer */
    size_t n = 0;
    for (int32_t l = 0; l < c->n_layer; l++)
        for (int w = 0; w < N_INPUTS; w++) {
            const input_stat *s = &c->inputs[l * N_INPUTS + w];
            if (!s->rows) continue;
            for (int k = 0; k < 3 && names[w][k]; k++) {
                snprintf(e[n].name, sizeof e[n].name, "blk.%d.%s.weight", (int)l, names[w][k]);
                e[n++].in = s;
            }
        }
    const input_stat *o = &c->inputs[c->n_layer * N_INPUTS];
    if (o->rows) {
        snprintf(e[n].name, sizeof e[n].name, "output.weight");
        e[n++].in = o;
    }
    qsort(e, n, sizeof *e, cmp_entry);
    *n_out = n;
    return e;
}

tokd_imatrix *tokd_imatrix_collector_result(const tokd_imatrix_collector *c, const char *dataset, int chunks) {
    size_t n;
    named_entry *e = entries_of(c, &n);
    tokd_imatrix *im = tokd_imatrix_new();
    for (size_t i = 0; i < n; i++) {
        const double rows = (double)e[i].in->rows;
        tokd_imatrix_add(im, e[i].name, e[i].in->sum, e[i].in->K, &rows, 1);
    }
    if (dataset) tokd_imatrix_add_dataset(im, dataset);
    im->chunks = chunks;
    free(e);
    return im;
}

/* -log softmax(row)[next]: the row's maximum taken out, the exponentials summed in
 * double (as llama-imatrix's log_softmax). */
static double neg_log_prob(const float *row, int32_t n_vocab, int32_t next) {
    float mx = row[0];
    for (int32_t i = 1; i < n_vocab; i++)
        if (row[i] > mx) mx = row[i];
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++) sum += expf(row[i] - mx);
    return -((double)(row[next] - mx) - log(sum));
}

bool tokd_imatrix_ppl_estimate(const tokd_imatrix_ppl *ppl, double *estimate, double *std_error) {
    if (ppl->n < 2) return false;
    const double mean = ppl->nll / (double)ppl->n, var = ppl->nll2 / (double)ppl->n - mean * mean;
    *estimate = exp(mean);
    *std_error = var > 0 ? sqrt(var / (double)(ppl->n - 1)) * *estimate : 0;
    return true;
}

int tokd_imatrix_compute(const tokd_model *m, const char *text, size_t len, const tokd_imatrix_params *p,
                         tokd_imatrix_collector *c, tokd_imatrix_ppl *ppl, FILE *log, tokd_err *err) {
    if (p->n_ctx < 16) return tokd_seterr(err, "chunks of %d tokens: at least 16 are needed", (int)p->n_ctx);
    int32_t *toks = NULL;
    size_t n_toks = 0;
    if (tokd_tokenize(m->tok, text, len, true, p->parse_special, &toks, &n_toks, err)) return -1;
    const int64_t skip = p->first_chunk > 0 ? p->first_chunk : 0;
    int64_t n_chunks = (int64_t)n_toks / p->n_ctx - skip;
    if (p->n_chunks > 0 && p->n_chunks < n_chunks) n_chunks = p->n_chunks;
    if (n_chunks < 1) {
        free(toks);
        if (skip)
            return tokd_seterr(err, "the text has %zu tokens: after %lld chunks of %d skipped, not one is left", n_toks,
                               (long long)skip, (int)p->n_ctx);
        return tokd_seterr(err, "the text has %zu tokens, fewer than one chunk of %d", n_toks, (int)p->n_ctx);
    }
    const int32_t bos = tokd_token_bos(m->tok);
    const bool add_bos = bos >= 0 && n_toks > 0 && toks[0] == bos;
    tokd_ctx_params cp;
    tokd_ctx_params_default(&cp);
    cp.n_ctx = p->n_ctx;
    cp.n_batch = p->n_batch > 0 && p->n_batch < p->n_ctx ? p->n_batch : p->n_ctx;
    cp.n_threads = p->n_threads;
    tokd_ctx *ctx = tokd_ctx_new(m, &cp, err);
    tokd_batch_entry *batch = tokd_xmalloc((size_t)cp.n_batch * sizeof *batch);
    /* logits: for the output's input, seen only for rows whose logits are computed (every
       row), and for the perplexity (the second half's rows) */
    const int32_t first = p->n_ctx / 2, n_vocab = m->hp.n_vocab;
    const bool all_rows = c && c->process_output;
    float *logits = all_rows || ppl ? tokd_xmalloc((size_t)cp.n_batch * (size_t)n_vocab * sizeof(float)) : NULL;
    if (ppl) *ppl = (tokd_imatrix_ppl){0};
    int rc = ctx ? 0 : -1;
    if (ctx && c) tokd_ctx_set_observer(ctx, tokd_imatrix_observe, c);
    for (int64_t k = 0; k < n_chunks && !rc; k++) {
        const int32_t *chunk = toks + (skip + k) * p->n_ctx;
        tokd_seq_truncate(ctx, 0, 0);
        for (int32_t b0 = 0; b0 < p->n_ctx && !rc; b0 += cp.n_batch) {
            const int32_t nb = p->n_ctx - b0 < cp.n_batch ? p->n_ctx - b0 : cp.n_batch;
            int32_t n_out = 0; /* logits rows come back in batch order, for the rows asked */
            for (int32_t i = 0; i < nb; i++) {
                const int32_t pos = b0 + i;
                const bool want = all_rows || (ppl && pos >= first && pos < p->n_ctx - 1);
                batch[i] = (tokd_batch_entry){pos == 0 && add_bos ? bos : chunk[pos], pos, 0, want};
                n_out += want;
            }
            rc = tokd_forward(ctx, batch, nb, n_out ? logits : NULL, err);
            if (!rc && p->on_batch) rc = p->on_batch(p->user, batch, nb, logits, err);
            if (rc || !ppl) continue;
            for (int32_t i = 0, row = 0; i < nb; i++) {
                if (!batch[i].logits) continue;
                const int32_t pos = b0 + i;
                if (pos >= first && pos < p->n_ctx - 1) {
                    const double v = neg_log_prob(logits + (size_t)row * (size_t)n_vocab, n_vocab, chunk[pos + 1]);
                    ppl->nll += v;
                    ppl->nll2 += v * v;
                    ppl->n++;
                }
                row++;
            }
        }
        if (log && !rc) {
            fprintf(log, "%s: chunk %lld of %lld", p->log_name ? p->log_name : "tokd imatrix", (long long)k + 1,
                    (long long)n_chunks);
            if (ppl && ppl->n) fprintf(log, ", PPL %.4f", exp(ppl->nll / (double)ppl->n));
            fputc('\n', log);
        }
        if (p->chunk_done && !rc) p->chunk_done(p->user, c, (int)k + 1);
    }
    free(batch);
    free(logits);
    tokd_ctx_free(ctx);
    free(toks);
    return rc ? -1 : (int)n_chunks;
}
