/* t_grammar_gen.h — a random-weight model writing under a grammar, for the tests of
 * grammars and JSON schemas: the model, a 1024-token context on one thread, the token trie
 * and the prompt "Answer in JSON:", then one sampled answer a call (temperature 1, no
 * truncation of the distribution). */
#ifndef TOKD_T_GRAMMAR_GEN_H
#define TOKD_T_GRAMMAR_GEN_H
#include <string.h>

#include "generate.h"
#include "grammar.h"
#include "t.h"

typedef struct {
    tokd_model *m;
    tokd_ctx *c;
    tokd_grammar_vocab *v;
    int32_t *prompt;
    size_t n_prompt;
} t_gen;

/* false (a failed CHECK counted) when the model does not load */
static inline bool t_gen_open(t_gen *g, const char *model_name) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/%s", t_shared(), model_name);
    tokd_err e = {{0}};
    *g = (t_gen){.m = tokd_model_load(path, &e)};
    CHECK(g->m != NULL, "load %s: %s", path, e.msg);
    if (!g->m) return false;
    tokd_ctx_params cp;
    tokd_ctx_params_default(&cp);
    cp.n_ctx = 1024;
    cp.n_threads = 1;
    g->c = tokd_ctx_new(g->m, &cp, &e);
    g->v = tokd_grammar_vocab_new(g->m->tok);
    tokd_tokenize(g->m->tok, "Answer in JSON:", 15, true, false, &g->prompt, &g->n_prompt, &e);
    return true;
}

static inline void t_gen_close(t_gen *g) {
    free(g->prompt);
    tokd_grammar_vocab_free(g->v);
    tokd_ctx_free(g->c);
    tokd_model_free(g->m);
}

static inline void t_gen_collect(void *ud, const char *text, size_t len) { tokd_buf_append(ud, text, len); }

/* One answer under the grammar state s (reset first) into out; tokd_generate's return. */
static inline int t_gen_run(t_gen *g, tokd_grammar_state *s, uint64_t seed, const tokd_logit_bias *bias, int32_t n_bias,
                            int n_predict, tokd_buf *out, tokd_gen_stats *st) {
    tokd_grammar_state_reset(s);
    tokd_gen_params gp;
    tokd_gen_params_default(&gp);
    gp.sampling.temperature = 1.0f;
    gp.sampling.top_k = 0;
    gp.sampling.top_p = 1.0f;
    gp.sampling.min_p = 0.0f;
    gp.sampling.seed = seed;
    gp.sampling.logit_bias = bias;
    gp.sampling.n_logit_bias = n_bias;
    gp.n_predict = n_predict;
    gp.grammar = s;
    gp.on_text = t_gen_collect;
    gp.ud = out;
    tokd_err e = {{0}};
    return tokd_generate(g->c, g->m, g->prompt, (int32_t)g->n_prompt, &gp, st, &e);
}

#endif
