/* jinja.c — the public entry points of the Jinja interpreter (see jinja.h).
 *
 * Parsing and rendering each own an arena and a jmp_buf: any error deep inside the lexer,
 * parser or evaluator longjmps back here, where the arena is released in one call. The
 * parsed template is never written during a render, so renders can run concurrently. */
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_int.h"

void jinja_default_limits(jinja_limits *lim) {
    lim->max_steps = 20u * 1000 * 1000;
    lim->max_output = 16u << 20;
    lim->max_memory = 256u << 20;
    lim->max_depth = 500;
}

typedef struct {
    jmp_buf *fail;
    tokd_err *err;
    size_t limit;
} parse_oom_ctx;

static void parse_oom(void *ud) {
    parse_oom_ctx *p = ud;
    tokd_seterr(p->err, "1:1: template too large (parsing needs more than %zu bytes)", p->limit);
    longjmp(*p->fail, 1);
}

static void render_oom(void *ud) {
    jctx *c = ud;
    c->arena.oom = NULL; /* formatting the error must not recurse here */
    c->arena.limit = 0;
    jx_fail(c, c->cur, "memory limit exceeded (%zu bytes)", c->lim.max_memory);
}

jinja_template *jinja_parse(const char *src, size_t len, tokd_err *err) {
    jinja_template *t = tokd_xcalloc(1, sizeof *t);
    jmp_buf fail;
    parse_oom_ctx oc = {&fail, err, (size_t)64 << 20 > len * 64 ? (size_t)64 << 20 : len * 64};
    t->arena.limit = oc.limit;
    t->arena.oom = parse_oom;
    t->arena.oom_ud = &oc;
    if (setjmp(fail)) {
        ja_free_all(&t->arena);
        free(t);
        return NULL;
    }
    jtoks toks = {0};
    jinja_lex(&t->arena, &fail, err, src, len, &toks);
    jinja_parse_tokens(t, &fail, err, &toks);
    t->arena.oom = NULL;
    t->arena.oom_ud = NULL;
    t->arena.limit = 0;
    return t;
}

void jinja_free(jinja_template *t) {
    if (!t) return;
    ja_free_all(&t->arena);
    free(t);
}

/* Kept out of jinja_render_json so that nothing the setjmp frame owns changes after setjmp. */
static int render(jctx *c, const jinja_template *t, const char *json, size_t len, char **out, size_t *out_len) {
    char msg[256];
    jv *vars = pyjson_parse(c, json, len, msg, sizeof msg);
    if (!vars) {
        tokd_seterr(c->err, "context is not valid JSON: %s", msg);
        return JINJA_ERR_CONTEXT;
    }
    if (vars->kind != JV_DICT) {
        tokd_seterr(c->err, "context must be a JSON object");
        return JINJA_ERR_CONTEXT;
    }
    jscope *builtins = ja_alloc(&c->arena, sizeof(jscope));
    builtins->vars = jv_dict(c, JD_DICT);
    jx_install_globals(c, builtins->vars);
    jscope *globals = ja_alloc(&c->arena, sizeof(jscope));
    globals->parent = builtins;
    globals->vars = vars;
    jscope *top = ja_alloc(&c->arena, sizeof(jscope));
    top->parent = globals;
    top->vars = jv_dict(c, JD_DICT);
    c->globals = globals;
    jbuf b = {.limit = c->lim.max_output};
    c->out = &b;
    jx_run(c, t, top);
    *out = tokd_xmalloc(b.n + 1);
    if (b.n) memcpy(*out, b.p, b.n);
    (*out)[b.n] = 0;
    *out_len = b.n;
    return 0;
}

int jinja_render_json(const jinja_template *t, const char *context_json, size_t len, const jinja_limits *lim,
                      char **out, size_t *out_len, tokd_err *err) {
    jctx *c = tokd_xcalloc(1, sizeof *c);
    if (lim)
        c->lim = *lim;
    else
        jinja_default_limits(&c->lim);
    if (c->lim.max_depth <= 0) c->lim.max_depth = 1;
    c->err = err;
    c->now = getenv("TOKD_NOW");
    c->arena.limit = c->lim.max_memory;
    c->arena.oom = render_oom;
    c->arena.oom_ud = c;
    *out = NULL;
    *out_len = 0;
    int rc;
    if (setjmp(c->fail)) {
        rc = JINJA_ERR_TEMPLATE;
    } else {
        rc = render(c, t, context_json, len, out, out_len);
    }
    ja_free_all(&c->arena);
    free(c);
    return rc;
}
