/* generate.c — see generate.h. */
#include "generate.h"

#include <math.h>
#include <stdlib.h>

const char *tokd_finish_name(tokd_finish f) {
    switch (f) {
    case TOKD_FINISH_EOG: return "eog";
    case TOKD_FINISH_STOP: return "stop";
    case TOKD_FINISH_LENGTH: return "length";
    case TOKD_FINISH_CONTEXT: return "context";
    case TOKD_FINISH_TIME: return "time";
    case TOKD_FINISH_INTERRUPT: return "interrupted";
    default: return "none";
    }
}

const char *tokd_finish_openai(tokd_finish f) {
    return (f == TOKD_FINISH_EOG || f == TOKD_FINISH_STOP) ? "stop" : "length";
}

void tokd_gen_params_default(tokd_gen_params *p) {
    memset(p, 0, sizeof *p);
    tokd_sampler_params_default(&p->sampling);
    p->n_predict = 128;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double percentile(double *v, int32_t n, double q) {
    if (n <= 0) return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int32_t i = (int32_t)ceil(q * n) - 1;
    if (i < 0) i = 0;
    if (i >= n) i = n - 1;
    return v[i];
}

static void emit(const tokd_gen_params *p, tokd_buf *b) {
    if (b->len && p->on_text) p->on_text(p->ud, b->data, b->len);
    tokd_buf_clear(b);
}

int tokd_generate(tokd_ctx *c, const tokd_model *m, const int32_t *prompt, int32_t n_prompt,
                  const tokd_gen_params *p, tokd_gen_stats *st, tokd_err *err) {
    memset(st, 0, sizeof *st);
    st->n_prompt = n_prompt;
    const int32_t n_ctx = tokd_ctx_n_ctx(c), n_batch = tokd_ctx_n_batch(c), V = m->hp.n_vocab;
    if (n_prompt <= 0) return tokd_seterr(err, "empty prompt");
    if (n_prompt >= n_ctx)
        return tokd_seterr(err, "prompt of %d tokens does not fit the context of %d tokens", n_prompt, n_ctx);
    tokd_sampler *smp = tokd_sampler_new(&p->sampling, V, err);
    if (!smp) return -1;
    if (p->grammar) tokd_sampler_set_mask(smp, tokd_grammar_mask_hook, p->grammar);
    tokd_stop *stop = NULL;
    size_t *lens = NULL;
    if (p->n_stop > 0) {
        lens = tokd_xmalloc((size_t)p->n_stop * sizeof *lens);
        for (int32_t i = 0; i < p->n_stop; i++) lens[i] = strlen(p->stop[i]);
        stop = tokd_stop_new(p->stop, lens, p->n_stop);
    }
    tokd_detok *dt = tokd_detok_new(m->tok);
    float *logits = tokd_xmalloc((size_t)V * sizeof(float));
    tokd_batch_entry *batch = tokd_xmalloc((size_t)n_batch * sizeof *batch);
    int32_t cap_itl = 256, n_itl = 0;
    double *itl = tokd_xmalloc((size_t)cap_itl * sizeof *itl);
    tokd_buf piece = {0}, out = {0};
    int rc = 0;

    int32_t keep = p->n_keep < 0 ? 0 : p->n_keep;
    if (keep > n_prompt - 1) keep = n_prompt - 1;
    if (keep > tokd_seq_len(c, p->seq)) keep = tokd_seq_len(c, p->seq);
    tokd_seq_truncate(c, p->seq, keep);
    tokd_sampler_accept_prompt(smp, prompt, n_prompt);
    double t0 = tokd_now();
    for (int32_t i = keep; i < n_prompt; i += n_batch) {
        const bool interrupted = p->interrupted && p->interrupted(p->ud);
        if (interrupted || (p->time_limit_s > 0 && tokd_now() - t0 >= p->time_limit_s)) {
            st->finish = interrupted ? TOKD_FINISH_INTERRUPT : TOKD_FINISH_TIME;
            st->t_prefill_s = st->t_total_s = tokd_now() - t0;
            goto done;
        }
        int32_t n = n_prompt - i < n_batch ? n_prompt - i : n_batch;
        for (int32_t k = 0; k < n; k++)
            batch[k] = (tokd_batch_entry){prompt[i + k], i + k, p->seq, i + k == n_prompt - 1};
        if (tokd_forward(c, batch, n, logits, err)) {
            rc = -1;
            goto done;
        }
    }
    st->t_prefill_s = tokd_now() - t0;
    double t_prev = 0.0;
    int32_t pos = n_prompt;
    if (p->n_predict == 0) st->finish = TOKD_FINISH_LENGTH; /* the prompt only: no token sampled */
    while (p->n_predict != 0) {
        tokd_sample_result res;
        int32_t tok = tokd_sampler_sample(smp, logits, &res);
        double t = tokd_now() - t0;
        if (st->n_gen == 0) st->t_first_token_s = t;
        else {
            if (n_itl == cap_itl) itl = tokd_xrealloc(itl, (size_t)(cap_itl *= 2) * sizeof *itl);
            itl[n_itl++] = (t - t_prev) * 1e3;
        }
        t_prev = t;
        st->n_gen++;
        if (p->on_token) p->on_token(p->ud, tok);
        if (p->grammar && (res.all_banned || tokd_grammar_accept(p->grammar, tok))) {
            rc = tokd_seterr(err, "grammar: no token can continue the output");
            goto done;
        }
        if (tokd_token_is_eog(m->tok, tok)) {
            st->finish = TOKD_FINISH_EOG;
            break;
        }
        tokd_sampler_accept(smp, tok);
        tokd_buf_clear(&piece);
        tokd_detok_push(dt, tok, &piece);
        if (stop) {
            if (tokd_stop_push(stop, piece.data ? piece.data : "", piece.len, &out)) {
                emit(p, &out);
                st->finish = TOKD_FINISH_STOP;
                break;
            }
        } else if (piece.len) {
            tokd_buf_append(&out, piece.data, piece.len);
        }
        emit(p, &out);
        if (p->grammar && !tokd_grammar_can_continue(p->grammar)) {
            st->finish = TOKD_FINISH_EOG;
            break;
        }
        if (p->n_predict >= 0 && st->n_gen >= p->n_predict) {
            st->finish = TOKD_FINISH_LENGTH;
            break;
        }
        if (pos >= n_ctx) {
            st->finish = TOKD_FINISH_CONTEXT;
            break;
        }
        if (p->time_limit_s > 0 && t >= p->time_limit_s) {
            st->finish = TOKD_FINISH_TIME;
            break;
        }
        if (p->interrupted && p->interrupted(p->ud)) {
            st->finish = TOKD_FINISH_INTERRUPT;
            break;
        }
        tokd_batch_entry d = {tok, pos++, p->seq, true};
        if (tokd_forward(c, &d, 1, logits, err)) {
            rc = -1;
            goto done;
        }
    }
    if (st->finish != TOKD_FINISH_STOP) {
        tokd_buf_clear(&piece);
        tokd_detok_flush(dt, &piece);
        if (stop) {
            /* flush may still complete a stop string ("ab" held for "abc" and "b") */
            if ((piece.len && tokd_stop_push(stop, piece.data, piece.len, &out)) || tokd_stop_flush(stop, &out))
                st->finish = TOKD_FINISH_STOP;
        } else if (piece.len) {
            tokd_buf_append(&out, piece.data, piece.len);
        }
        emit(p, &out);
    }
    st->t_total_s = tokd_now() - t0;
    st->prompt_tps = st->t_prefill_s > 0 ? n_prompt / st->t_prefill_s : 0;
    if (st->n_gen > 1 && st->t_total_s > st->t_first_token_s)
        st->gen_tps = (st->n_gen - 1) / (st->t_total_s - st->t_first_token_s);
    st->itl_p50_ms = percentile(itl, n_itl, 0.50);
    st->itl_p99_ms = percentile(itl, n_itl, 0.99);
done:
    free(itl);
    free(batch);
    free(logits);
    free(lens);
    tokd_buf_free(&piece);
    tokd_buf_free(&out);
    tokd_detok_free(dt);
    tokd_stop_free(stop);
    tokd_sampler_free(smp);
    return rc;
}
