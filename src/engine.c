/* engine.c — see engine.h.
 *
 * Data: every request is a `req`. New ones sit in the inbox (guarded by the engine
 * lock) until the scheduler thread takes them into `waiting` (sorted by arrival id);
 * admitted ones hold a sequence slot of the context and live in `running` (sorted by
 * arrival id, so the last one is the newest: the preemption victim). Every request from
 * submit to its DONE event is also on the `live` list, which the engine lock guards, so
 * that tokd_engine_cancel can find it by id from any thread without touching `running`
 * or `waiting` (the scheduler reallocates and reorders those without the lock; walking
 * them from a server thread was a data race, found by ThreadSanitizer). Everything
 * except the inbox, the live list, the cancel flags and the metrics is touched by the
 * scheduler thread only.
 *
 * A request's token list holds its prompt then its generated tokens; n_computed of them
 * are in the KV cache. The next batch feeds toks[n_computed .. n_tok) (all of a prompt
 * in chunks, then one token per step) and asks for logits when it reaches n_tok: one
 * rule covers prefill, decode and recomputation after preemption. */
#include "engine.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "kvcache.h"
#include "stop.h"
#include "tokenizer.h"

typedef struct req {
    uint64_t id;
    struct req *next;                 /* inbox */
    struct req *live_prev, *live_next; /* the engine's live list (engine lock) */
    int32_t *toks;
    int32_t n_tok, cap, n_prompt, n_computed, n_hashed;
    uint64_t last_key;
    int32_t slot, max_tokens, n_gen, n_cached, n_preempted;
    bool admitted_once, ignore_eos;
    atomic_bool cancel;
    tokd_sampler *smp;
    tokd_grammar_state *gs; /* NULL: unconstrained */
    int32_t n_logprobs;
    tokd_stop *stop;
    tokd_detok *dt;
    tokd_buf piece, out;
    size_t text_pos, tok_pos; /* bytes of output decoded so far; where the last token's start */
    bool bad_request;         /* the error is the request's own (its grammar or logit_bias) */
    double t_submit, t_admit, t_first, t_last;
    int32_t row; /* logits row in this step, -1 if none */
    void (*on_event)(void *ud, const tokd_event *ev);
    void *ud;
} req;

/* Prometheus-style histogram with fixed bucket bounds in seconds. */
#define N_BUCKETS 16
static const double bucket_le[N_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                            0.5,   1.0,    2.5,   5.0,  10.0,  30.0, 60.0, 120.0};
typedef struct {
    uint64_t counts[N_BUCKETS + 1]; /* last: +Inf */
    uint64_t n;
    double sum;
} histo;

static void histo_add(histo *h, double v) {
    int i = 0;
    while (i < N_BUCKETS && v > bucket_le[i]) i++;
    h->counts[i]++;
    h->n++;
    h->sum += v;
}

struct tokd_engine {
    const tokd_model *m;
    tokd_ctx *ctx;
    tokd_engine_params p;
    int32_t n_ctx, bs, n_vocab, budget;
    pthread_mutex_t gv_lock;
    tokd_grammar_vocab *gv; /* token trie for grammar masks, built by the first grammar request */
    uint64_t seed_key;
    /* guarded by lock */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    req *inbox, *inbox_tail;
    req *live;         /* every request from submit to DONE (for cancel by id) */
    int32_t n_inbox, n_active;
    bool stop, closed;
    uint64_t next_id;
    /* scheduler thread only */
    pthread_t thread;
    req **running, **waiting;
    int32_t n_running, n_waiting, cap_waiting;
    bool *slot_used;
    tokd_batch_entry *batch;
    float *logits;
    req **batch_req; /* per logits row */
    /* metrics, guarded by mlock */
    pthread_mutex_t mlock;
    histo h_ttft, h_itl, h_e2e, h_queue;
    tokd_engine_stats st;
};

void tokd_engine_params_default(tokd_engine_params *p) {
    memset(p, 0, sizeof *p);
    p->max_seqs = 16;
    p->block_size = 16;
    p->step_tokens = 256;
    p->max_waiting = 512;
}

void tokd_request_params_default(tokd_request_params *p) {
    memset(p, 0, sizeof *p);
    tokd_sampler_params_default(&p->sampling);
    p->max_tokens = 16;
}

static void *scheduler_main(void *arg);

tokd_engine *tokd_engine_new(const tokd_model *m, const tokd_engine_params *params, tokd_err *err) {
    tokd_engine_params p = *params;
    if (p.max_seqs <= 0) p.max_seqs = 16;
    if (p.block_size <= 0) p.block_size = 16;
    if (p.step_tokens <= 0) p.step_tokens = 256;
    if (p.max_waiting <= 0) p.max_waiting = 512;
    if (p.max_seqs > 4096) {
        tokd_seterr(err, "max_seqs %d is too large (at most 4096)", p.max_seqs);
        return NULL;
    }
    int32_t n_ctx = p.n_ctx > 0 ? p.n_ctx : (m->hp.n_ctx_train > 0 && m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096);
    int64_t n_blocks = p.n_blocks;
    if (n_blocks <= 0 && p.kv_mem_mib > 0) {
        uint64_t per_block = tokd_kv_bytes_per_token(m) * (uint64_t)p.block_size;
        n_blocks = (int64_t)(((uint64_t)p.kv_mem_mib << 20) / (per_block ? per_block : 1));
        if (n_blocks <= 0) {
            tokd_seterr(err, "--kv-mem %lld MiB is less than one KV block (%llu bytes)", (long long)p.kv_mem_mib,
                        (unsigned long long)per_block);
            return NULL;
        }
    }
    if (n_blocks <= 0) n_blocks = (int64_t)p.max_seqs * ((n_ctx + p.block_size - 1) / p.block_size);
    if ((int64_t)n_ctx > n_blocks * p.block_size) n_ctx = (int32_t)(n_blocks * p.block_size); /* one sequence can never hold more */
    tokd_engine *e = tokd_xcalloc(1, sizeof *e);
    e->m = m;
    e->p = p;
    e->n_ctx = n_ctx;
    e->bs = p.block_size;
    e->n_vocab = m->hp.n_vocab;
    e->budget = p.step_tokens > p.max_seqs ? p.step_tokens : p.max_seqs;
    tokd_ctx_params cp;
    tokd_ctx_params_default(&cp);
    cp.n_ctx = n_ctx;
    cp.n_seq = p.max_seqs;
    cp.n_batch = e->budget;
    cp.n_threads = p.n_threads;
    cp.block_size = p.block_size;
    cp.n_blocks = n_blocks;
    e->ctx = tokd_ctx_new(m, &cp, err);
    if (!e->ctx) {
        free(e);
        return NULL;
    }
    /* whatever changes KV content besides the tokens: the model's shape and identity */
    const tokd_hparams *hp = &m->hp;
    int32_t ident[] = {hp->n_vocab, hp->n_embd, hp->n_layer, hp->n_head, hp->n_head_kv, hp->n_ff, (int32_t)hp->arch};
    e->seed_key = tokd_kv_block_key((uint64_t)(uintptr_t)m ^ m->weight_bytes, ident, (int32_t)(sizeof ident / sizeof ident[0]));
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cond, NULL);
    pthread_mutex_init(&e->mlock, NULL);
    pthread_mutex_init(&e->gv_lock, NULL);
    e->next_id = 1;
    e->running = tokd_xcalloc((size_t)p.max_seqs, sizeof(req *));
    e->slot_used = tokd_xcalloc((size_t)p.max_seqs, sizeof(bool));
    e->batch = tokd_xmalloc((size_t)e->budget * sizeof *e->batch);
    e->batch_req = tokd_xmalloc((size_t)e->budget * sizeof *e->batch_req);
    e->logits = tokd_xmalloc((size_t)p.max_seqs * (size_t)e->n_vocab * sizeof(float));
    tokd_kv *kv = tokd_ctx_kv(e->ctx);
    e->st.max_seqs = p.max_seqs;
    e->st.n_ctx = n_ctx;
    e->st.block_size = e->bs;
    e->st.kv_blocks = kv->n_blocks;
    e->st.kv_free = kv->n_free;
    if (pthread_create(&e->thread, NULL, scheduler_main, e)) {
        tokd_seterr(err, "cannot start the scheduler thread");
        tokd_ctx_free(e->ctx);
        free(e->running);
        free(e->slot_used);
        free(e->batch);
        free(e->batch_req);
        free(e->logits);
        free(e);
        return NULL;
    }
    return e;
}

const tokd_model *tokd_engine_model(const tokd_engine *e) { return e->m; }

/* ---- requests ------------------------------------------------------------------------- */

static void req_free(req *r) {
    free(r->toks);
    tokd_grammar_state_free(r->gs);
    tokd_sampler_free(r->smp);
    tokd_stop_free(r->stop);
    tokd_detok_free(r->dt);
    tokd_buf_free(&r->piece);
    tokd_buf_free(&r->out);
    free(r);
}

int tokd_engine_submit(tokd_engine *e, const tokd_request_params *p, uint64_t *id, tokd_err *err) {
    if (!p->on_event) return tokd_seterr(err, "no event callback"), TOKD_ENGINE_EINVAL;
    if (p->n_prompt <= 0 || !p->prompt) return tokd_seterr(err, "the prompt is empty"), TOKD_ENGINE_EINVAL;
    for (int32_t i = 0; i < p->n_prompt; i++)
        if (p->prompt[i] < 0 || p->prompt[i] >= e->n_vocab) {
            tokd_seterr(err, "prompt token %d at index %d is out of range (0..%d)", p->prompt[i], i, e->n_vocab - 1);
            return TOKD_ENGINE_EINVAL;
        }
    if (p->n_prompt >= e->n_ctx) {
        tokd_seterr(err, "the prompt has %d tokens but the context holds %d (prompt plus at least one generated token)",
                    p->n_prompt, e->n_ctx);
        pthread_mutex_lock(&e->mlock);
        e->st.req_refused++;
        pthread_mutex_unlock(&e->mlock);
        return TOKD_ENGINE_ETOOBIG;
    }
    int64_t want = p->max_tokens < 0 ? e->n_ctx : (int64_t)p->n_prompt + p->max_tokens;
    if (want > e->n_ctx) want = e->n_ctx;
    int64_t blocks = (want + e->bs - 1) / e->bs, pool = tokd_ctx_kv(e->ctx)->n_blocks;
    if (blocks > pool) {
        tokd_seterr(err, "the request needs %lld KV blocks (%lld positions) but the pool has %lld", (long long)blocks,
                    (long long)want, (long long)pool);
        pthread_mutex_lock(&e->mlock);
        e->st.req_refused++;
        pthread_mutex_unlock(&e->mlock);
        return TOKD_ENGINE_ETOOBIG;
    }
    tokd_sampler *smp = tokd_sampler_new(&p->sampling, e->n_vocab, err);
    if (!smp) return TOKD_ENGINE_EINVAL;
    req *r = tokd_xcalloc(1, sizeof *r);
    r->smp = smp;
    r->n_logprobs = p->sampling.n_logprobs;
    r->cap = p->n_prompt + 64;
    r->toks = tokd_xmalloc((size_t)r->cap * sizeof(int32_t));
    memcpy(r->toks, p->prompt, (size_t)p->n_prompt * sizeof(int32_t));
    r->n_tok = r->n_prompt = p->n_prompt;
    tokd_sampler_accept_prompt(smp, p->prompt, p->n_prompt);
    r->max_tokens = p->max_tokens;
    r->ignore_eos = p->ignore_eos && !p->grammar;
    if (p->grammar) {
        pthread_mutex_lock(&e->gv_lock);
        if (!e->gv) e->gv = tokd_grammar_vocab_new(e->m->tok);
        pthread_mutex_unlock(&e->gv_lock);
        r->gs = tokd_grammar_state_new(p->grammar, e->gv);
        tokd_sampler_set_mask(smp, tokd_grammar_mask_hook, r->gs);
    }
    if (p->n_stop > 0) r->stop = tokd_stop_new(p->stop, NULL, p->n_stop);
    r->dt = tokd_detok_new_ex(e->m->tok, p->render_special ? TOKD_DETOK_RENDER_SPECIAL : 0);
    r->slot = -1;
    r->row = -1;
    r->on_event = p->on_event;
    r->ud = p->ud;
    r->t_submit = tokd_now();
    atomic_init(&r->cancel, false);
    pthread_mutex_lock(&e->lock);
    if (e->closed || e->stop) {
        pthread_mutex_unlock(&e->lock);
        req_free(r);
        tokd_seterr(err, "the server is shutting down");
        return TOKD_ENGINE_ESTOPPED;
    }
    if (e->n_active >= e->p.max_waiting + e->p.max_seqs) {
        pthread_mutex_unlock(&e->lock);
        req_free(r);
        tokd_seterr(err, "too many requests waiting (%d); retry later", e->p.max_waiting);
        return TOKD_ENGINE_EBUSY;
    }
    r->id = e->next_id++;
    *id = r->id; /* before unlocking: the scheduler may finish and free r at once */
    if (e->inbox_tail) e->inbox_tail->next = r;
    else e->inbox = r;
    e->inbox_tail = r;
    r->live_next = e->live;
    if (e->live) e->live->live_prev = r;
    e->live = r;
    e->n_inbox++;
    e->n_active++;
    pthread_cond_signal(&e->cond);
    pthread_mutex_unlock(&e->lock);
    return 0;
}

void tokd_engine_cancel(tokd_engine *e, uint64_t id) {
    pthread_mutex_lock(&e->lock);
    for (req *r = e->live; r; r = r->live_next)
        if (r->id == id) atomic_store(&r->cancel, true);
    pthread_cond_signal(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

void tokd_engine_close(tokd_engine *e) {
    pthread_mutex_lock(&e->lock);
    e->closed = true;
    pthread_mutex_unlock(&e->lock);
}

int32_t tokd_engine_active(tokd_engine *e) {
    pthread_mutex_lock(&e->lock);
    int32_t n = e->n_active;
    pthread_mutex_unlock(&e->lock);
    return n;
}

/* ---- scheduler -------------------------------------------------------------------------- */

static void emit_token(tokd_engine *e, req *r, int32_t tok, const tokd_sample_result *res) {
    tokd_event ev = {0};
    ev.kind = TOKD_EV_TOKEN;
    ev.id = r->id;
    ev.token = tok;
    ev.text = r->out.data ? r->out.data : "";
    ev.len = r->out.len;
    ev.text_pos = r->tok_pos;
    ev.sample = r->n_logprobs > 0 ? res : NULL;
    r->on_event(r->ud, &ev);
    tokd_buf_clear(&r->out);
}

static void release_slot(tokd_engine *e, req *r) {
    if (r->slot < 0) return;
    tokd_seq_truncate(e->ctx, r->slot, 0);
    e->slot_used[r->slot] = false;
    r->slot = -1;
    r->n_computed = 0;
    r->n_hashed = 0;
    for (int32_t i = 0; i < e->n_running; i++)
        if (e->running[i] == r) {
            memmove(&e->running[i], &e->running[i + 1], (size_t)(e->n_running - i - 1) * sizeof(req *));
            e->n_running--;
            break;
        }
}

static void remove_waiting(tokd_engine *e, req *r) {
    for (int32_t i = 0; i < e->n_waiting; i++)
        if (e->waiting[i] == r) {
            memmove(&e->waiting[i], &e->waiting[i + 1], (size_t)(e->n_waiting - i - 1) * sizeof(req *));
            e->n_waiting--;
            return;
        }
}

/* The request is done: flush held text, report, free. */
static void finish(tokd_engine *e, req *r, tokd_req_status status, tokd_finish f, const char *error) {
    double now = tokd_now();
    if (status == TOKD_REQ_OK && f != TOKD_FINISH_STOP) {
        tokd_buf_clear(&r->piece);
        tokd_detok_flush(r->dt, &r->piece);
        if (r->stop) {
            if (r->piece.len && tokd_stop_push(r->stop, r->piece.data, r->piece.len, &r->out)) f = TOKD_FINISH_STOP;
            else if (tokd_stop_flush(r->stop, &r->out)) f = TOKD_FINISH_STOP;
        } else if (r->piece.len) {
            tokd_buf_append(&r->out, r->piece.data, r->piece.len);
        }
    }
    if (status != TOKD_REQ_OK) tokd_buf_clear(&r->out);
    /* the grammar belongs to the caller, who may free it once DONE arrives */
    tokd_sampler_set_mask(r->smp, NULL, NULL);
    tokd_grammar_state_free(r->gs);
    r->gs = NULL;
    release_slot(e, r);
    remove_waiting(e, r);
    tokd_usage u = {0};
    u.n_prompt = r->n_prompt;
    u.n_cached = r->n_cached;
    u.n_gen = r->n_gen;
    u.n_preempted = r->n_preempted;
    u.queue_s = r->admitted_once ? r->t_admit - r->t_submit : now - r->t_submit;
    u.ttft_s = r->n_gen ? r->t_first - r->t_submit : 0;
    if (r->n_gen && r->t_first > r->t_admit) u.prefill_tps = (r->n_prompt - r->n_cached) / (r->t_first - r->t_admit);
    if (r->n_gen > 1 && r->t_last > r->t_first) u.decode_tps = (r->n_gen - 1) / (r->t_last - r->t_first);
    u.total_s = now - r->t_submit;
    pthread_mutex_lock(&e->mlock);
    if (status == TOKD_REQ_OK) e->st.req_ok++;
    else if (status == TOKD_REQ_CANCELLED) e->st.req_cancelled++;
    else e->st.req_error++;
    histo_add(&e->h_e2e, u.total_s);
    if (!r->admitted_once) histo_add(&e->h_queue, u.queue_s);
    pthread_mutex_unlock(&e->mlock);
    tokd_event ev = {0};
    ev.kind = TOKD_EV_DONE;
    ev.id = r->id;
    ev.text = r->out.data ? r->out.data : "";
    ev.len = r->out.len;
    ev.status = status;
    ev.finish = f;
    ev.error = error;
    ev.bad_request = status == TOKD_REQ_ERROR && r->bad_request;
    ev.usage = &u;
    r->on_event(r->ud, &ev);
    pthread_mutex_lock(&e->lock);
    if (r->live_prev) r->live_prev->live_next = r->live_next;
    else e->live = r->live_next;
    if (r->live_next) r->live_next->live_prev = r->live_prev;
    e->n_active--;
    pthread_mutex_unlock(&e->lock);
    req_free(r);
}

static void waiting_insert(tokd_engine *e, req *r) {
    if (e->n_waiting == e->cap_waiting) {
        e->cap_waiting = e->cap_waiting ? 2 * e->cap_waiting : 64;
        e->waiting = tokd_xrealloc(e->waiting, (size_t)e->cap_waiting * sizeof(req *));
    }
    int32_t i = e->n_waiting;
    while (i > 0 && e->waiting[i - 1]->id > r->id) i--;
    memmove(&e->waiting[i + 1], &e->waiting[i], (size_t)(e->n_waiting - i) * sizeof(req *));
    e->waiting[i] = r;
    e->n_waiting++;
}

static void preempt(tokd_engine *e, req *r) {
    release_slot(e, r);
    r->n_preempted++;
    waiting_insert(e, r);
    pthread_mutex_lock(&e->mlock);
    e->st.preemptions++;
    pthread_mutex_unlock(&e->mlock);
}

/* Attach the cached blocks of the longest matching prefix (at most n_tok - 1 positions). */
static int32_t attach_prefix(tokd_engine *e, req *r) {
    tokd_kv *kv = tokd_ctx_kv(e->ctx);
    tokd_seq_table *s = tokd_ctx_seq(e->ctx, r->slot);
    r->last_key = e->seed_key;
    r->n_hashed = 0;
    if (e->p.no_prefix_cache) return 0;
    int32_t max_blocks = (r->n_tok - 1) / e->bs;
    for (int32_t i = 0; i < max_blocks; i++) {
        const int32_t *t = r->toks + (size_t)i * e->bs;
        uint64_t key = tokd_kv_block_key(r->last_key, t, e->bs);
        int32_t b = tokd_kv_lookup(kv, key, r->last_key, t);
        if (b < 0) break;
        tokd_kv_block_ref(kv, b);
        tokd_seq_push_block(s, b);
        r->last_key = key;
        r->n_hashed++;
    }
    s->len = r->n_hashed * e->bs;
    r->n_computed = s->len;
    return s->len;
}

/* Publish the request's newly completed full blocks. */
static void publish_blocks(tokd_engine *e, req *r) {
    if (e->p.no_prefix_cache || r->slot < 0) return;
    tokd_kv *kv = tokd_ctx_kv(e->ctx);
    tokd_seq_table *s = tokd_ctx_seq(e->ctx, r->slot);
    while ((r->n_hashed + 1) * e->bs <= r->n_computed) {
        const int32_t *t = r->toks + (size_t)r->n_hashed * e->bs;
        uint64_t key = tokd_kv_block_key(r->last_key, t, e->bs);
        tokd_kv_publish(kv, s->blocks[r->n_hashed], key, r->last_key, t);
        r->last_key = key;
        r->n_hashed++;
    }
}

/* Positions the sequence can be extended by with the blocks still available. */
static int32_t room(tokd_engine *e, req *r) {
    tokd_kv *kv = tokd_ctx_kv(e->ctx);
    tokd_seq_table *s = tokd_ctx_seq(e->ctx, r->slot);
    int64_t cap = ((int64_t)s->n_blocks + tokd_kv_available(kv)) * e->bs - r->n_computed;
    return cap > INT32_MAX ? INT32_MAX : (int32_t)cap;
}

/* Add toks[n_computed .. n_computed+n) of r to the batch. */
static int32_t add_chunk(tokd_engine *e, req *r, int32_t n_batch, int32_t n, int32_t *n_rows) {
    tokd_seq_reserve(tokd_ctx_kv(e->ctx), tokd_ctx_seq(e->ctx, r->slot), r->n_computed + n);
    for (int32_t k = 0; k < n; k++) {
        int32_t pos = r->n_computed + k;
        bool last = pos == r->n_tok - 1;
        e->batch[n_batch + k] = (tokd_batch_entry){r->toks[pos], pos, r->slot, last};
        if (last) {
            r->row = *n_rows;
            e->batch_req[(*n_rows)++] = r;
        }
    }
    return n_batch + n;
}

static bool admit(tokd_engine *e, req *r) {
    int32_t slot = -1;
    for (int32_t i = 0; i < e->p.max_seqs; i++)
        if (!e->slot_used[i]) {
            slot = i;
            break;
        }
    if (slot < 0) return false;
    r->slot = slot;
    e->slot_used[slot] = true;
    int32_t cached = attach_prefix(e, r);
    if (room(e, r) <= 0) { /* nothing can be computed now: give the blocks back */
        tokd_seq_truncate(e->ctx, slot, 0);
        e->slot_used[slot] = false;
        r->slot = -1;
        r->n_computed = 0;
        return false;
    }
    if (!r->admitted_once) {
        r->admitted_once = true;
        r->t_admit = tokd_now();
        r->n_cached = cached;
        pthread_mutex_lock(&e->mlock);
        histo_add(&e->h_queue, r->t_admit - r->t_submit);
        e->st.prompt_tokens += (uint64_t)r->n_prompt;
        e->st.cached_tokens += (uint64_t)cached;
        pthread_mutex_unlock(&e->mlock);
    }
    e->running[e->n_running++] = r; /* arrival order: anything running is older, or preempted-and-readmitted */
    for (int32_t i = e->n_running - 1; i > 0 && e->running[i - 1]->id > e->running[i]->id; i--) {
        req *t = e->running[i];
        e->running[i] = e->running[i - 1];
        e->running[i - 1] = t;
    }
    return true;
}

static void sample_one(tokd_engine *e, req *r, const float *logits) {
    tokd_sample_result res;
    int32_t tok = tokd_sampler_sample(r->smp, logits, r->n_logprobs > 0 ? &res : NULL);
    double now = tokd_now();
    pthread_mutex_lock(&e->mlock);
    if (r->n_gen == 0) histo_add(&e->h_ttft, now - r->t_submit);
    else histo_add(&e->h_itl, now - r->t_last);
    e->st.gen_tokens++;
    pthread_mutex_unlock(&e->mlock);
    if (r->n_gen == 0) r->t_first = now;
    r->t_last = now;
    r->n_gen++;
    r->tok_pos = r->text_pos;
    if (!r->ignore_eos && tokd_token_is_eog(e->m->tok, tok)) {
        emit_token(e, r, tok, &res);
        if (r->gs && !tokd_grammar_done(r->gs)) {
            r->bad_request = true;
            finish(e, r, TOKD_REQ_ERROR, TOKD_FINISH_NONE,
                   tokd_grammar_failed(r->gs) ? "grammar: the output became too ambiguous to match (a bound on its states or its work was exceeded)"
                                              : "grammar: no token can continue the output (every allowed token is banned)");
        } else {
            finish(e, r, TOKD_REQ_OK, TOKD_FINISH_EOG, NULL);
        }
        return;
    }
    if (r->gs && tokd_grammar_accept(r->gs, tok)) { /* only when the mask left nothing to choose */
        emit_token(e, r, tok, &res);
        r->bad_request = true;
        finish(e, r, TOKD_REQ_ERROR, TOKD_FINISH_NONE,
               "grammar: no token can continue the output (the vocabulary cannot complete the grammar here, or "
               "logit_bias banned every allowed token)");
        return;
    }
    if (r->n_tok == r->cap) r->toks = tokd_xrealloc(r->toks, (size_t)(r->cap *= 2) * sizeof(int32_t));
    r->toks[r->n_tok++] = tok;
    tokd_sampler_accept(r->smp, tok);
    tokd_buf_clear(&r->piece);
    tokd_detok_push(r->dt, tok, &r->piece);
    r->text_pos += r->piece.len;
    bool stopped = false;
    if (r->stop) stopped = tokd_stop_push(r->stop, r->piece.data ? r->piece.data : "", r->piece.len, &r->out);
    else if (r->piece.len) tokd_buf_append(&r->out, r->piece.data, r->piece.len);
    emit_token(e, r, tok, &res);
    if (stopped) finish(e, r, TOKD_REQ_OK, TOKD_FINISH_STOP, NULL);
    else if (r->gs && !tokd_grammar_can_continue(r->gs)) finish(e, r, TOKD_REQ_OK, TOKD_FINISH_EOG, NULL);
    else if (r->max_tokens >= 0 && r->n_gen >= r->max_tokens) finish(e, r, TOKD_REQ_OK, TOKD_FINISH_LENGTH, NULL);
    else if (r->n_tok - 1 >= e->n_ctx) finish(e, r, TOKD_REQ_OK, TOKD_FINISH_CONTEXT, NULL);
}

static void update_gauges(tokd_engine *e) {
    tokd_kv *kv = tokd_ctx_kv(e->ctx);
    pthread_mutex_lock(&e->mlock);
    e->st.running = e->n_running;
    e->st.waiting = e->n_waiting;
    e->st.kv_free = kv->n_free;
    e->st.kv_cached = kv->n_evictable;
    e->st.kv_used = tokd_kv_in_use(kv);
    e->st.evictions = kv->n_evictions;
    pthread_mutex_unlock(&e->mlock);
}

/* One step. Returns false when there was nothing to do. */
static bool step(tokd_engine *e) {
    pthread_mutex_lock(&e->lock);
    for (req *r = e->inbox, *n; r; r = n) {
        n = r->next;
        r->next = NULL;
        waiting_insert(e, r);
    }
    e->inbox = e->inbox_tail = NULL;
    e->n_inbox = 0;
    pthread_mutex_unlock(&e->lock);

    for (int32_t i = e->n_running - 1; i >= 0; i--)
        if (atomic_load(&e->running[i]->cancel)) finish(e, e->running[i], TOKD_REQ_CANCELLED, TOKD_FINISH_NONE, NULL);
    for (int32_t i = e->n_waiting - 1; i >= 0; i--)
        if (atomic_load(&e->waiting[i]->cancel)) finish(e, e->waiting[i], TOKD_REQ_CANCELLED, TOKD_FINISH_NONE, NULL);
    if (e->n_running == 0 && e->n_waiting == 0) {
        update_gauges(e);
        return false;
    }

    tokd_kv *kv = tokd_ctx_kv(e->ctx);
    /* 1. a KV slot for every decoding sequence's next token, preempting the newest */
    for (int32_t i = 0; i < e->n_running; i++) {
        req *r = e->running[i];
        if (r->n_tok - r->n_computed != 1) continue;
        while (tokd_seq_reserve(kv, tokd_ctx_seq(e->ctx, r->slot), r->n_computed + 1)) {
            req *victim = e->running[e->n_running - 1];
            if (victim == r && e->n_running == 1) break; /* cannot happen: refused at submit */
            preempt(e, victim);
            if (victim == r) {
                i--;
                break;
            }
        }
    }
    /* 2. the batch: decode tokens, then prefill chunks under the budget */
    int32_t n = 0, rows = 0, budget = e->budget;
    for (int32_t i = 0; i < e->n_running; i++) {
        req *r = e->running[i];
        r->row = -1;
        if (r->n_tok - r->n_computed == 1 && room(e, r) >= 1) {
            n = add_chunk(e, r, n, 1, &rows);
            budget--;
        }
    }
    for (int32_t i = 0; i < e->n_running && budget > 0; i++) {
        req *r = e->running[i];
        int32_t left = r->n_tok - r->n_computed;
        if (left <= 1) continue;
        int32_t c = left < budget ? left : budget, fit = room(e, r);
        if (c > fit) c = fit;
        if (c <= 0) continue;
        n = add_chunk(e, r, n, c, &rows);
        budget -= c;
    }
    while (budget > 0 && e->n_waiting > 0 && e->n_running < e->p.max_seqs) {
        req *r = e->waiting[0];
        if (!admit(e, r)) break;
        remove_waiting(e, r);
        r->row = -1;
        int32_t left = r->n_tok - r->n_computed;
        int32_t c = left < budget ? left : budget, fit = room(e, r);
        if (c > fit) c = fit;
        n = add_chunk(e, r, n, c, &rows);
        budget -= c;
    }
    if (n == 0) {
        /* nobody can progress: every block is held by sequences still prefilling */
        if (e->n_running > 1) {
            preempt(e, e->running[e->n_running - 1]);
        } else if (e->n_running == 1) {
            finish(e, e->running[0], TOKD_REQ_ERROR, TOKD_FINISH_NONE, "the KV cache cannot hold this sequence");
        }
        update_gauges(e);
        return true;
    }
    tokd_err err = {{0}};
    if (tokd_forward(e->ctx, e->batch, n, e->logits, &err)) {
        /* our own invariant broke: fail the requests in this batch rather than the process */
        fprintf(stderr, "tokd engine: forward failed: %s\n", err.msg);
        for (int32_t i = e->n_running - 1; i >= 0; i--) finish(e, e->running[i], TOKD_REQ_ERROR, TOKD_FINISH_NONE, err.msg);
        update_gauges(e);
        return true;
    }
    for (int32_t i = 0; i < e->n_running; i++) {
        req *r = e->running[i];
        r->n_computed = tokd_seq_len(e->ctx, r->slot);
        publish_blocks(e, r);
    }
    pthread_mutex_lock(&e->mlock);
    e->st.steps++;
    pthread_mutex_unlock(&e->mlock);
    for (int32_t k = 0; k < rows; k++) sample_one(e, e->batch_req[k], e->logits + (size_t)k * e->n_vocab);
    update_gauges(e);
    return true;
}

static void *scheduler_main(void *arg) {
    tokd_engine *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->lock);
        bool stop = e->stop;
        pthread_mutex_unlock(&e->lock);
        if (stop) break;
        if (!step(e)) {
            pthread_mutex_lock(&e->lock);
            while (!e->stop && !e->inbox) pthread_cond_wait(&e->cond, &e->lock);
            pthread_mutex_unlock(&e->lock);
        }
    }
    return NULL;
}

void tokd_engine_free(tokd_engine *e) {
    if (!e) return;
    pthread_mutex_lock(&e->lock);
    e->stop = true;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->thread, NULL);
    for (req *r = e->inbox, *n; r; r = n) {
        n = r->next;
        r->next = NULL;
        waiting_insert(e, r);
    }
    e->inbox = NULL;
    while (e->n_running > 0) finish(e, e->running[e->n_running - 1], TOKD_REQ_CANCELLED, TOKD_FINISH_NONE, NULL);
    while (e->n_waiting > 0) finish(e, e->waiting[e->n_waiting - 1], TOKD_REQ_CANCELLED, TOKD_FINISH_NONE, NULL);
    tokd_ctx_free(e->ctx);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->cond);
    pthread_mutex_destroy(&e->mlock);
    pthread_mutex_destroy(&e->gv_lock);
    tokd_grammar_vocab_free(e->gv);
    free(e->running);
    free(e->waiting);
    free(e->slot_used);
    free(e->batch);
    free(e->batch_req);
    free(e->logits);
    free(e);
}

/* ---- metrics ---------------------------------------------------------------------------- */

int32_t tokd_engine_capacity(const tokd_engine *e) { return e->p.max_seqs + e->p.max_waiting; }

void tokd_engine_get_stats(tokd_engine *e, tokd_engine_stats *s) {
    pthread_mutex_lock(&e->mlock);
    *s = e->st;
    pthread_mutex_unlock(&e->mlock);
}

static void histo_text(tokd_buf *out, const char *name, const char *help, const histo *h) {
    tokd_buf_appendf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < N_BUCKETS; i++) {
        cum += h->counts[i];
        tokd_buf_appendf(out, "%s_bucket{le=\"%g\"} %llu\n", name, bucket_le[i], (unsigned long long)cum);
    }
    cum += h->counts[N_BUCKETS];
    tokd_buf_appendf(out, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name, (unsigned long long)cum, name,
                     h->sum, name, (unsigned long long)h->n);
}

void tokd_engine_metrics(tokd_engine *e, tokd_buf *out) {
    pthread_mutex_lock(&e->mlock);
    tokd_engine_stats s = e->st;
    histo ttft = e->h_ttft, itl = e->h_itl, e2e = e->h_e2e, queue = e->h_queue;
    pthread_mutex_unlock(&e->mlock);
    histo_text(out, "tokd_time_to_first_token_seconds", "Submission to first generated token.", &ttft);
    histo_text(out, "tokd_inter_token_latency_seconds", "Time between consecutive tokens of a request.", &itl);
    histo_text(out, "tokd_request_latency_seconds", "Submission to completion (any outcome).", &e2e);
    histo_text(out, "tokd_queue_time_seconds", "Submission to first admission into a batch.", &queue);
#define COUNTER(name, help, v) \
    tokd_buf_appendf(out, "# HELP " name " " help "\n# TYPE " name " counter\n" name " %llu\n", (unsigned long long)(v))
#define GAUGE(name, help, fmt, v) tokd_buf_appendf(out, "# HELP " name " " help "\n# TYPE " name " gauge\n" name " " fmt "\n", v)
    COUNTER("tokd_prompt_tokens_total", "Prompt tokens of admitted requests.", s.prompt_tokens);
    COUNTER("tokd_prompt_tokens_cached_total", "Prompt tokens served from the prefix cache.", s.cached_tokens);
    COUNTER("tokd_generated_tokens_total", "Generated tokens.", s.gen_tokens);
    COUNTER("tokd_steps_total", "Scheduler steps (forward batches).", s.steps);
    COUNTER("tokd_preemptions_total", "Sequences preempted for lack of KV blocks.", s.preemptions);
    COUNTER("tokd_kv_evictions_total", "Cached KV blocks evicted for reuse.", s.evictions);
    tokd_buf_appendf(out,
                     "# HELP tokd_requests_total Finished requests by outcome.\n# TYPE tokd_requests_total counter\n"
                     "tokd_requests_total{outcome=\"ok\"} %llu\ntokd_requests_total{outcome=\"cancelled\"} %llu\n"
                     "tokd_requests_total{outcome=\"error\"} %llu\ntokd_requests_total{outcome=\"refused\"} %llu\n",
                     (unsigned long long)s.req_ok, (unsigned long long)s.req_cancelled, (unsigned long long)s.req_error,
                     (unsigned long long)s.req_refused);
    GAUGE("tokd_sequences_running", "Sequences in the running batch.", "%d", s.running);
    GAUGE("tokd_sequences_waiting", "Requests waiting for admission.", "%d", s.waiting);
    GAUGE("tokd_kv_blocks_total", "KV blocks in the pool.", "%lld", (long long)s.kv_blocks);
    GAUGE("tokd_kv_blocks_used", "KV blocks referenced by sequences.", "%lld", (long long)s.kv_used);
    GAUGE("tokd_kv_blocks_free", "KV blocks on the free list.", "%lld", (long long)s.kv_free);
    GAUGE("tokd_kv_blocks_cached", "Unreferenced KV blocks kept as evictable prefix cache.", "%lld", (long long)s.kv_cached);
    GAUGE("tokd_prefix_cache_hit_ratio", "Cached prompt tokens / prompt tokens.", "%.6f",
          s.prompt_tokens ? (double)s.cached_tokens / (double)s.prompt_tokens : 0.0);
#undef COUNTER
#undef GAUGE
}
