/* test_engine.c — the serving engine without HTTP: continuous batching gives the same
 * text as running each request alone (tokd_generate, an independent path), prefix-cache
 * hits and preemption change nothing, cancellation returns every block (also when it
 * comes from another thread while the scheduler admits, preempts and finishes requests),
 * and requests that can never fit are refused. Also tokd_generate's interrupted() hook
 * (Ctrl-C in tokd run and chat). */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine.h"
#include "generate.h"
#include "t.h"

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    tokd_buf text;
    int n_tokens, done;
    tokd_req_status status;
    tokd_finish finish;
    tokd_usage usage;
    bool bad_request;
    size_t pos[64]; /* text_pos of the first 64 tokens */
    tokd_engine *cancel_engine; /* cancel after cancel_after tokens */
    int cancel_after;
} collector;

static void on_event(void *ud, const tokd_event *ev) {
    collector *c = ud;
    pthread_mutex_lock(&c->mu);
    tokd_buf_append(&c->text, ev->text, ev->len);
    if (ev->kind == TOKD_EV_TOKEN) {
        if (c->n_tokens < 64) c->pos[c->n_tokens] = ev->text_pos;
        c->n_tokens++;
        if (c->cancel_engine && c->n_tokens == c->cancel_after) tokd_engine_cancel(c->cancel_engine, ev->id);
    } else {
        c->done = 1;
        c->status = ev->status;
        c->finish = ev->finish;
        c->usage = *ev->usage;
        c->bad_request = ev->bad_request;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
}

static void coll_init(collector *c) {
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
}
static void coll_wait(collector *c) {
    pthread_mutex_lock(&c->mu);
    while (!c->done) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}
static void coll_free(collector *c) {
    tokd_buf_free(&c->text);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

#define N_REQ 16
#define N_GEN 24

typedef struct {
    int32_t *toks;
    int32_t n;
} prompt;

static void on_text_ref(void *ud, const char *t, size_t n) { tokd_buf_append(ud, t, n); }

/* Reference: each prompt alone through tokd_generate on a fresh single-sequence context. */
static void reference(const tokd_model *m, prompt *ps, int n, tokd_buf *out) {
    tokd_ctx_params cp;
    tokd_ctx_params_default(&cp);
    cp.n_ctx = 1024;
    cp.n_threads = 2;
    tokd_err err;
    tokd_ctx *c = tokd_ctx_new(m, &cp, &err);
    for (int i = 0; i < n; i++) {
        tokd_gen_params gp;
        tokd_gen_params_default(&gp);
        gp.sampling.temperature = 0;
        gp.n_predict = N_GEN;
        gp.on_text = on_text_ref;
        gp.ud = &out[i];
        tokd_gen_stats st;
        CHECK(tokd_generate(c, m, ps[i].toks, ps[i].n, &gp, &st, &err) == 0, "generate: %s", err.msg);
    }
    tokd_ctx_free(c);
}

/* Submit all prompts at once (optionally one at a time) and collect. */
static void run_engine(tokd_engine *e, prompt *ps, int n, collector *cs, bool one_by_one) {
    for (int i = 0; i < n; i++) {
        coll_init(&cs[i]);
        tokd_request_params rp;
        tokd_request_params_default(&rp);
        rp.prompt = ps[i].toks;
        rp.n_prompt = ps[i].n;
        rp.sampling.temperature = 0;
        rp.max_tokens = N_GEN;
        rp.on_event = on_event;
        rp.ud = &cs[i];
        uint64_t id;
        tokd_err err;
        int rc = tokd_engine_submit(e, &rp, &id, &err);
        CHECK(rc == 0, "submit %d: %s", i, err.msg);
        if (rc) cs[i].done = 1;
        if (one_by_one) coll_wait(&cs[i]);
    }
    for (int i = 0; i < n; i++) coll_wait(&cs[i]);
}

static void wait_idle(tokd_engine *e) {
    for (int i = 0; i < 2000 && tokd_engine_active(e) > 0; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    struct timespec ts = {0, 20000000}; /* one more step publishes the gauges */
    nanosleep(&ts, NULL);
}

static void compare(const char *what, collector *cs, tokd_buf *ref, int n) {
    int same = 0;
    for (int i = 0; i < n; i++) {
        bool eq = cs[i].text.len == ref[i].len && (!ref[i].len || !memcmp(cs[i].text.data, ref[i].data, ref[i].len));
        same += eq;
        if (!eq)
            fprintf(stderr, "%s: request %d differs:\n  engine: %.*s\n  alone:  %.*s\n", what, i, (int)cs[i].text.len,
                    cs[i].text.data ? cs[i].text.data : "", (int)ref[i].len, ref[i].data ? ref[i].data : "");
        CHECK(cs[i].status == TOKD_REQ_OK, "%s: request %d status %d", what, i, cs[i].status);
    }
    CHECK(same == n, "%s: %d of %d identical", what, same, n);
    printf("%s: %d/%d identical to running alone\n", what, same, n);
}

static void build_prompts(const tokd_model *m, prompt *ps) {
    static const char *story =
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
        "friend Tom. One day, they saw a big red ball under a tree. Lily wanted to kick the ball, but Tom said it "
        "was not their ball. They looked around and saw a sad boy who had lost his ball. Lily and Tom gave the ball "
        "back to the boy and he was very happy. They all played together until the sun went down and their moms "
        "called them home for dinner. The next day the boy came back with a cake to say thank you, and they ate it "
        "under the big tree.";
    static const char *tails[N_REQ] = {
        " Then the dog",     " The cat was",       " Tom said",        " Lily smiled and",  " The bird flew",
        " They went to",     " Mom was happy",     " The sun was",     "Sam had a toy",     "The little fish",
        "A big bear lived",  "There was a car",   "Ben and Mia",      "One morning, a",    "The tree was tall",
        "In a small house"};
    int32_t *pre = NULL;
    size_t n_pre = 0;
    tokd_err err;
    tokd_tokenize(m->tok, story, strlen(story), true, false, &pre, &n_pre, &err);
    CHECK(n_pre >= 200, "shared prefix has only %zu tokens", n_pre);
    if (n_pre > 200) n_pre = 200;
    for (int i = 0; i < N_REQ; i++) {
        int32_t *t = NULL;
        size_t nt = 0;
        bool shared = i < 8;
        tokd_tokenize(m->tok, tails[i], strlen(tails[i]), !shared, false, &t, &nt, &err);
        ps[i].n = (int32_t)((shared ? n_pre : 0) + nt);
        ps[i].toks = malloc((size_t)ps[i].n * sizeof(int32_t));
        if (shared) memcpy(ps[i].toks, pre, n_pre * sizeof(int32_t));
        memcpy(ps[i].toks + (shared ? n_pre : 0), t, nt * sizeof(int32_t));
        free(t);
    }
    free(pre);
}

/* A model from ../shared/models, or NULL (a failed check). */
static tokd_model *load_shared_model(const char *file) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/%s", t_shared(), file);
    tokd_err err;
    tokd_model *m = tokd_model_load(path, &err);
    CHECK(m != NULL, "load %s: %s", path, err.msg);
    return m;
}

static void test_model(const char *file, bool full) {
    tokd_err err;
    tokd_model *m = load_shared_model(file);
    if (!m) return;
    printf("== %s\n", file);
    prompt ps[N_REQ];
    build_prompts(m, ps);
    tokd_buf ref[N_REQ] = {0};
    reference(m, ps, N_REQ, ref);
    collector cs[N_REQ];

    /* 16 concurrent requests, then the same again with prefix-cache hits */
    tokd_engine_params ep;
    tokd_engine_params_default(&ep);
    ep.max_seqs = 16;
    ep.n_ctx = 1024;
    ep.n_threads = 2;
    ep.step_tokens = 128; /* forces chunked prefill of the 200-token prompts */
    tokd_engine *e = tokd_engine_new(m, &ep, &err);
    CHECK(e != NULL, "engine: %s", err.msg);
    if (!e) return;
    run_engine(e, ps, N_REQ, cs, false);
    compare("concurrent", cs, ref, N_REQ);
    int32_t first_cached = 0;
    for (int i = 0; i < 8; i++) first_cached += cs[i].usage.n_cached;
    for (int i = 0; i < N_REQ; i++) coll_free(&cs[i]);
    run_engine(e, ps, N_REQ, cs, false);
    compare("concurrent, prefix cache warm", cs, ref, N_REQ);
    for (int i = 0; i < N_REQ; i++) {
        int32_t want = (ps[i].n - 1) / 16 * 16; /* every full block but the one holding the last token */
        CHECK(cs[i].usage.n_cached == want, "request %d: %d cached tokens, expected %d of %d", i, cs[i].usage.n_cached,
              want, ps[i].n);
        CHECK(cs[i].usage.n_cached >= (i < 8 ? 200 - 16 : 0), "request %d: cached %d", i, cs[i].usage.n_cached);
    }
    printf("cached tokens, shared-prefix requests: first wave %d, second wave %d (prefix 200)\n", first_cached,
           cs[0].usage.n_cached);
    for (int i = 0; i < N_REQ; i++) coll_free(&cs[i]);
    /* one at a time through the engine, cache warm */
    run_engine(e, ps, N_REQ, cs, true);
    compare("sequential, prefix cache warm", cs, ref, N_REQ);
    for (int i = 0; i < N_REQ; i++) coll_free(&cs[i]);
    wait_idle(e);
    tokd_engine_stats st;
    tokd_engine_get_stats(e, &st);
    CHECK(st.kv_used == 0 && st.kv_free + st.kv_cached == st.kv_blocks, "blocks: used %lld free %lld cached %lld of %lld",
          (long long)st.kv_used, (long long)st.kv_free, (long long)st.kv_cached, (long long)st.kv_blocks);
    CHECK(st.cached_tokens > 0, "no cache hits recorded");
    tokd_buf met = {0};
    tokd_engine_metrics(e, &met);
    CHECK(met.data && strstr(met.data, "tokd_time_to_first_token_seconds_bucket"), "metrics text");
    CHECK(met.data && strstr(met.data, "tokd_kv_blocks_cached"), "metrics text");
    tokd_buf_free(&met);
    tokd_engine_free(e);

    if (full) {
        /* preemption: pools far too small for the requests at once, with and without the cache */
        for (int variant = 0; variant < 2; variant++) {
            ep.n_blocks = variant ? 40 : 20;
            ep.max_seqs = 8;
            ep.no_prefix_cache = variant == 1;
            e = tokd_engine_new(m, &ep, &err);
            run_engine(e, ps, N_REQ, cs, false);
            compare(variant ? "tiny KV pool, no prefix cache (preemption)" : "tiny KV pool, prefix cache (preemption)", cs,
                    ref, N_REQ);
            tokd_engine_get_stats(e, &st);
            printf("pool %lld blocks: preemptions %llu, evictions %llu\n", (long long)st.kv_blocks,
                   (unsigned long long)st.preemptions, (unsigned long long)st.evictions);
            CHECK(st.preemptions > 0, "expected preemptions with a tiny pool");
            for (int i = 0; i < N_REQ; i++) coll_free(&cs[i]);
            wait_idle(e);
            tokd_engine_get_stats(e, &st);
            CHECK(st.kv_used == 0, "blocks still used after preemption run: %lld", (long long)st.kv_used);
            if (variant == 0) tokd_engine_free(e);
        }
        ep.no_prefix_cache = false;

        /* refusal: a prompt past the context, a request past the pool */
        tokd_request_params rp;
        tokd_request_params_default(&rp);
        int32_t big[700];
        for (int i = 0; i < 700; i++) big[i] = ps[0].toks[i % ps[0].n];
        rp.prompt = big;
        rp.n_prompt = 700; /* the context is capped at the pool: 640 positions */
        rp.on_event = on_event;
        collector dummy;
        coll_init(&dummy);
        rp.ud = &dummy;
        uint64_t id;
        int rc = tokd_engine_submit(e, &rp, &id, &err);
        CHECK(rc == TOKD_ENGINE_ETOOBIG, "oversized prompt: rc %d", rc);
        printf("refused: %s\n", err.msg);
        CHECK(strstr(err.msg, "700") && strstr(err.msg, "640"), "message names both numbers: %s", err.msg);
        rp.n_prompt = 100;
        rp.ignore_eos = true;
        rp.max_tokens = 100000;
        rc = tokd_engine_submit(e, &rp, &id, &err);
        /* max_tokens past the pool is capped by the context (itself capped by the pool): it fits */
        CHECK(rc == 0, "max_tokens past the context: rc %d: %s", rc, err.msg);
        if (rc == 0) coll_wait(&dummy);
        CHECK(dummy.finish == TOKD_FINISH_CONTEXT || dummy.finish == TOKD_FINISH_EOG, "finish %d", dummy.finish);
        coll_free(&dummy);
        tokd_engine_free(e);

        /* cancellation: every block comes back */
        tokd_engine_params_default(&ep);
        ep.max_seqs = 8;
        ep.n_ctx = 1024;
        ep.n_threads = 2;
        e = tokd_engine_new(m, &ep, &err);
        for (int i = 0; i < N_REQ; i++) {
            coll_init(&cs[i]);
            cs[i].cancel_engine = e;
            cs[i].cancel_after = 1 + i % 5;
            tokd_request_params_default(&rp);
            rp.prompt = ps[i].toks;
            rp.n_prompt = ps[i].n;
            rp.max_tokens = 500;
            rp.ignore_eos = true;
            rp.on_event = on_event;
            rp.ud = &cs[i];
            CHECK(tokd_engine_submit(e, &rp, &id, &err) == 0, "submit: %s", err.msg);
        }
        int cancelled = 0;
        for (int i = 0; i < N_REQ; i++) {
            coll_wait(&cs[i]);
            cancelled += cs[i].status == TOKD_REQ_CANCELLED;
            CHECK(cs[i].n_tokens <= cs[i].cancel_after + 1, "request %d ran on after cancel: %d tokens", i, cs[i].n_tokens);
            coll_free(&cs[i]);
        }
        CHECK(cancelled == N_REQ, "%d of %d cancelled", cancelled, N_REQ);
        wait_idle(e);
        tokd_engine_get_stats(e, &st);
        CHECK(st.kv_used == 0 && st.kv_free + st.kv_cached == st.kv_blocks && st.running == 0 && st.waiting == 0,
              "after cancel: used %lld free %lld cached %lld of %lld, running %d waiting %d", (long long)st.kv_used,
              (long long)st.kv_free, (long long)st.kv_cached, (long long)st.kv_blocks, st.running, st.waiting);
        printf("cancelled %d: blocks used %lld, free %lld, cached %lld of %lld\n", cancelled, (long long)st.kv_used,
               (long long)st.kv_free, (long long)st.kv_cached, (long long)st.kv_blocks);
        /* a request still queued when the engine stops gets DONE(cancelled) */
        tokd_engine_free(e);
    }
    for (int i = 0; i < N_REQ; i++) {
        free(ps[i].toks);
        tokd_buf_free(&ref[i]);
    }
    tokd_model_free(m);
}

/* A one-thread engine of max_seqs sequences over n_ctx positions (checked). */
static tokd_engine *small_engine(tokd_model *m, int max_seqs, int n_ctx) {
    tokd_engine_params ep;
    tokd_engine_params_default(&ep);
    ep.max_seqs = max_seqs;
    ep.n_ctx = n_ctx;
    ep.n_threads = 1;
    tokd_err err = {{0}};
    tokd_engine *e = tokd_engine_new(m, &ep, &err);
    CHECK(e != NULL, "engine: %s", err.msg);
    return e;
}

/* Grammar-constrained requests batched together: each has its own matcher state, every output
 * matches its grammar and ends (EOG) when nothing more can follow; a grammar whose allowed
 * tokens are all banned ends the request with an error, not a crash. */
static void test_grammar(const char *file) {
    tokd_err err = {{0}};
    tokd_model *m = load_shared_model(file);
    if (!m) return;
    tokd_engine *e = small_engine(m, 4, 512);
    static const char *const grammars[] = {
        "root ::= \"<think>x</think>y\"",
        "root ::= \"{\\\"n\\\": \" [1-9] [0-9]{0,2} \"}\"",
        "root ::= ( \"yes\" | \"no\" ) \".\"",
        "root ::= [a-z ]{3,12} \"!\"",
    };
    enum { NG = 4, PER = 3 };
    tokd_grammar *g[NG];
    for (int k = 0; k < NG; k++) {
        g[k] = tokd_grammar_parse(grammars[k], strlen(grammars[k]), &err);
        CHECK(g[k] != NULL, "grammar %d: %s", k, err.msg);
        if (!g[k]) return;
    }
    int32_t *prompt = NULL;
    size_t n_prompt = 0;
    tokd_tokenize(m->tok, "Once upon a time", 16, true, false, &prompt, &n_prompt, &err);
    collector cs[NG * PER];
    for (int i = 0; i < NG * PER; i++) {
        coll_init(&cs[i]);
        tokd_request_params rp;
        tokd_request_params_default(&rp);
        rp.prompt = prompt;
        rp.n_prompt = (int32_t)n_prompt;
        rp.sampling.temperature = 1.0f;
        rp.sampling.top_k = 0;
        rp.sampling.top_p = 1.0f;
        rp.sampling.min_p = 0.0f;
        rp.sampling.seed = 77u + (uint64_t)i;
        rp.max_tokens = 200;
        rp.grammar = g[i % NG];
        rp.on_event = on_event;
        rp.ud = &cs[i];
        uint64_t id;
        CHECK(tokd_engine_submit(e, &rp, &id, &err) == 0, "submit: %s", err.msg);
    }
    for (int i = 0; i < NG * PER; i++) {
        coll_wait(&cs[i]);
        const char *t = cs[i].text.data ? cs[i].text.data : "";
        CHECK(cs[i].status == TOKD_REQ_OK && cs[i].finish == TOKD_FINISH_EOG, "grammar %d seed %d: status %d finish %s", i % NG,
              i, cs[i].status, tokd_finish_name(cs[i].finish));
        CHECK(tokd_grammar_match(g[i % NG], t, cs[i].text.len), "grammar %d: output '%s' does not match", i % NG, t);
        coll_free(&cs[i]);
    }
    /* every token that could start the output banned: an error, and the engine serves on */
    tokd_logit_bias *bias = malloc(sizeof *bias * (size_t)m->hp.n_vocab);
    int32_t n_bias = 0;
    for (int32_t t = 0; t < m->hp.n_vocab; t++) {
        char piece[64];
        size_t n = tokd_token_piece(m->tok, t, false, piece, sizeof piece);
        if (n && n <= sizeof piece && (piece[0] == 'y' || piece[0] == 'n')) bias[n_bias++] = (tokd_logit_bias){t, -INFINITY};
    }
    collector c;
    coll_init(&c);
    tokd_request_params rp;
    tokd_request_params_default(&rp);
    rp.prompt = prompt;
    rp.n_prompt = (int32_t)n_prompt;
    rp.sampling.logit_bias = bias;
    rp.sampling.n_logit_bias = n_bias;
    rp.grammar = g[2];
    rp.max_tokens = 20;
    rp.on_event = on_event;
    rp.ud = &c;
    uint64_t id;
    CHECK(tokd_engine_submit(e, &rp, &id, &err) == 0, "submit: %s", err.msg);
    coll_wait(&c);
    CHECK(c.status == TOKD_REQ_ERROR && c.bad_request, "all allowed tokens banned: status %d, the request's fault %d", c.status,
          c.bad_request);
    coll_free(&c);
    free(bias);
    tokd_engine_free(e);
    for (int k = 0; k < NG; k++) tokd_grammar_free(g[k]);
    free(prompt);
    tokd_model_free(m);
}

/* Cancellation from another thread, as the server's connection threads send it, racing
 * with the scheduler as it admits, preempts and finishes requests. The canceller walks
 * the ids (live, finished and never issued) until every request is done. Before the
 * engine's live list, cancel walked the scheduler's own arrays: ThreadSanitizer saw the
 * race in the server's e2e tests, and a cancel could write into a request just freed. */
typedef struct {
    tokd_engine *e;
    const uint64_t *ids;
    int n;
    atomic_bool stop;
    int n_calls;
} canceller;

static void *cancel_main(void *arg) {
    canceller *k = arg;
    for (int j = 0; !atomic_load(&k->stop); j++) {
        int i = (j * 7) % k->n;
        if (i % 2 == 0) tokd_engine_cancel(k->e, k->ids[i]); /* even requests: cancelled or done first */
        tokd_engine_cancel(k->e, k->ids[k->n - 1] + 1000 + (uint64_t)j); /* an id never issued */
        k->n_calls++;
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* tokd_generate's interrupted hook: asked before each prefill chunk and decode step. */
typedef struct {
    tokd_buf text;
    int tokens, stop_after; /* interrupted once this many tokens were sampled (0: at once) */
    int asked;
} interrupt_state;
static void interrupt_text(void *ud, const char *t, size_t n) { tokd_buf_append(&((interrupt_state *)ud)->text, t, n); }
static void interrupt_token(void *ud, int32_t tok) {
    (void)tok;
    ((interrupt_state *)ud)->tokens++;
}
static bool interrupt_now(void *ud) {
    interrupt_state *s = ud;
    s->asked++;
    return s->tokens >= s->stop_after;
}

/* Interrupted after 5 tokens, a generation stops there with finish "interrupted", its
 * text a prefix of the whole run's; interrupted from the start (a prompt of several
 * prefill chunks), it evaluates nothing and generates nothing, and the context serves
 * the next generation as before. */
static void test_interrupt(const char *file) {
    tokd_model *m = load_shared_model(file);
    if (!m) return;
    tokd_ctx_params cp;
    tokd_ctx_params_default(&cp);
    cp.n_ctx = 512;
    cp.n_batch = 8; /* several prefill chunks */
    cp.n_threads = 2;
    tokd_err err;
    tokd_ctx *c = tokd_ctx_new(m, &cp, &err);
    int32_t *prompt = NULL;
    size_t n_prompt = 0;
    tokd_tokenize(m->tok, "Once upon a time, in a land far away, there lived a", 51, true, false, &prompt, &n_prompt, &err);
    interrupt_state full = {.stop_after = 1 << 30}, part = {.stop_after = 5}, none = {.stop_after = 0};
    interrupt_state *runs[] = {&full, &part, &none, &full};
    tokd_gen_stats st[4];
    tokd_buf first = {0};
    for (int r = 0; r < 4; r++) {
        if (r == 3) { /* the first run's text kept, to compare */
            tokd_buf_append(&first, full.text.data, full.text.len);
            tokd_buf_append(&first, "", 0);
            tokd_buf_clear(&full.text);
            full.tokens = 0;
        }
        tokd_gen_params gp;
        tokd_gen_params_default(&gp);
        gp.sampling.temperature = 0;
        gp.n_predict = 24;
        gp.on_text = interrupt_text;
        gp.on_token = interrupt_token;
        gp.interrupted = interrupt_now;
        gp.ud = runs[r];
        CHECK(tokd_generate(c, m, prompt, (int32_t)n_prompt, &gp, &st[r], &err) == 0, "generate %d: %s", r, err.msg);
    }
    CHECK(st[0].finish == TOKD_FINISH_LENGTH && st[0].n_gen == 24 && first.len > 0, "uninterrupted: finish %s, %d tokens",
          tokd_finish_name(st[0].finish), st[0].n_gen);
    CHECK(st[1].finish == TOKD_FINISH_INTERRUPT && st[1].n_gen == 5 && !strcmp(tokd_finish_name(st[1].finish), "interrupted"),
          "interrupted after 5: finish %s, %d tokens", tokd_finish_name(st[1].finish), st[1].n_gen);
    CHECK(part.text.len > 0 && part.text.len < first.len && !memcmp(part.text.data, first.data, part.text.len),
          "the interrupted text '%.*s' begins the whole one '%s'", (int)part.text.len, part.text.data ? part.text.data : "",
          first.data);
    CHECK(st[2].finish == TOKD_FINISH_INTERRUPT && st[2].n_gen == 0 && none.text.len == 0 && none.asked == 1,
          "interrupted at once: finish %s, %d tokens, %zu bytes, asked %d times", tokd_finish_name(st[2].finish), st[2].n_gen,
          none.text.len, none.asked);
    CHECK(st[3].n_gen == 24 && st[3].finish == TOKD_FINISH_LENGTH && full.text.len == first.len &&
              !memcmp(full.text.data, first.data, full.text.len),
          "after the interruptions the context generates the same text as before");
    tokd_buf_free(&first);
    tokd_buf_free(&full.text);
    tokd_buf_free(&part.text);
    tokd_buf_free(&none.text);
    free(prompt);
    tokd_ctx_free(c);
    tokd_model_free(m);
}

static void test_cancel_threads(const char *file) {
    tokd_err err;
    tokd_model *m = load_shared_model(file);
    if (!m) return;
    prompt ps[N_REQ];
    build_prompts(m, ps);
    tokd_engine_params ep;
    tokd_engine_params_default(&ep);
    ep.max_seqs = 4; /* most requests wait, so cancels meet the waiting list too */
    ep.n_ctx = 1024;
    ep.n_threads = 2;
    ep.n_blocks = 20; /* few blocks: running sequences are preempted */
    tokd_engine *e = tokd_engine_new(m, &ep, &err);
    CHECK(e != NULL, "engine: %s", err.msg);
    if (!e) {
        tokd_model_free(m);
        return;
    }
    for (int round = 0; round < 3; round++) {
        collector cs[N_REQ];
        uint64_t ids[N_REQ];
        for (int i = 0; i < N_REQ; i++) {
            coll_init(&cs[i]);
            tokd_request_params rp;
            tokd_request_params_default(&rp);
            rp.prompt = ps[i].toks;
            rp.n_prompt = ps[i].n;
            rp.max_tokens = 4 + (i * 5 + round * 3) % 40;
            rp.ignore_eos = true;
            rp.on_event = on_event;
            rp.ud = &cs[i];
            CHECK(tokd_engine_submit(e, &rp, &ids[i], &err) == 0, "submit: %s", err.msg);
        }
        canceller k = {.e = e, .ids = ids, .n = N_REQ};
        atomic_init(&k.stop, false);
        pthread_t th;
        pthread_create(&th, NULL, cancel_main, &k);
        int n_ok = 0, n_cancelled = 0, bad = 0;
        for (int i = 0; i < N_REQ; i++) {
            coll_wait(&cs[i]);
            int want = 4 + (i * 5 + round * 3) % 40;
            if (cs[i].status == TOKD_REQ_OK && cs[i].n_tokens == want) n_ok++;
            else if (cs[i].status == TOKD_REQ_CANCELLED && i % 2 == 0 && cs[i].n_tokens < want) n_cancelled++;
            else bad++, fprintf(stderr, "request %d: status %d after %d of %d tokens\n", i, cs[i].status, cs[i].n_tokens, want);
        }
        atomic_store(&k.stop, true);
        pthread_join(th, NULL);
        CHECK(bad == 0, "round %d: %d requests neither done nor cancelled as asked", round, bad);
        CHECK(n_ok >= N_REQ / 2, "round %d: only %d requests ran to their length (the odd ones must)", round, n_ok);
        wait_idle(e);
        tokd_engine_stats st;
        tokd_engine_get_stats(e, &st);
        CHECK(st.kv_used == 0 && st.running == 0 && st.waiting == 0, "round %d: used %lld, running %d, waiting %d", round,
              (long long)st.kv_used, st.running, st.waiting);
        printf("cancel from another thread, round %d: %d done, %d cancelled, %d cancel calls, preemptions %llu\n", round,
               n_ok, n_cancelled, k.n_calls, (unsigned long long)st.preemptions);
        for (int i = 0; i < N_REQ; i++) coll_free(&cs[i]);
    }
    tokd_engine_free(e);
    for (int i = 0; i < N_REQ; i++) free(ps[i].toks);
    tokd_model_free(m);
}

/* Under ThreadSanitizer (make test-tsan) this program is run for the scheduler's threads
 * beside its callers, which do the same on every model: the second model's pass (22 of
 * its 50 s there) runs in the plain and ASan builds only. */
#ifdef __SANITIZE_THREAD__
enum { SECOND_MODEL = 0 };
#else
enum { SECOND_MODEL = 1 };
#endif

/* One greedy request of 16 tokens, with a stop string or none. */
static void run_one(tokd_engine *e, const int32_t *prompt, size_t n_prompt, const char *stop, collector *c) {
    coll_init(c);
    tokd_request_params rp;
    tokd_request_params_default(&rp);
    rp.prompt = prompt;
    rp.n_prompt = (int32_t)n_prompt;
    rp.sampling.temperature = 0;
    rp.max_tokens = 16;
    rp.stop = &stop;
    rp.n_stop = stop ? 1 : 0;
    rp.on_event = on_event;
    rp.ud = c;
    uint64_t id;
    tokd_err err;
    CHECK(tokd_engine_submit(e, &rp, &id, &err) == 0, "submit: %s", err.msg);
    coll_wait(c);
}

/* A token's text_pos is where its text starts in the output, whatever a stop string holds
 * back: the same as without the stop string, up to the token that completes it. (It used to
 * be read off the text released so far, which lags while a stop string may match.) */
static void test_text_pos(const char *file) {
    tokd_err err = {{0}};
    tokd_model *m = load_shared_model(file);
    if (!m) return;
    tokd_engine *e = small_engine(m, 2, 256);
    int32_t *prompt = NULL;
    size_t n_prompt = 0;
    tokd_tokenize(m->tok, "Once upon a time", 16, true, false, &prompt, &n_prompt, &err);
    collector free_run, stopped;
    run_one(e, prompt, n_prompt, NULL, &free_run);
    CHECK(free_run.n_tokens == 16 && free_run.text.len > 30, "free run: %d tokens", free_run.n_tokens);
    char stop[8] = {0};
    memcpy(stop, free_run.text.data + free_run.text.len - 12, 7); /* late, so several tokens are held */
    run_one(e, prompt, n_prompt, stop, &stopped);
    CHECK(stopped.finish == TOKD_FINISH_STOP && stopped.n_tokens > 2, "stop '%s': finish %s after %d tokens", stop,
          tokd_finish_name(stopped.finish), stopped.n_tokens);
    for (int i = 0; i < stopped.n_tokens && i < 16; i++)
        CHECK(stopped.pos[i] == free_run.pos[i], "token %d: text_pos %zu with the stop string, %zu without", i, stopped.pos[i],
              free_run.pos[i]);
    CHECK(free_run.pos[0] == 0 && free_run.pos[15] > free_run.pos[1], "positions grow: %zu %zu", free_run.pos[1], free_run.pos[15]);
    coll_free(&free_run);
    coll_free(&stopped);
    free(prompt);
    tokd_engine_free(e);
    tokd_model_free(m);
}

int main(void) {
    test_text_pos("stories260K.gguf");
    test_grammar("stories260K.gguf");
    test_model("stories260K.gguf", true);
    if (SECOND_MODEL) test_model("tiny-llama-f32.gguf", true);
    test_cancel_threads("stories260K.gguf");
    test_interrupt("stories260K.gguf");
    T_DONE();
}
