/* jinja_parse.c — recursive-descent parser from tokens to the template tree.
 *
 * The expression grammar and its precedence follow jinja2's parser exactly (condexpr >
 * or > and > not > compare > +,- > ~ > *,/,//,% > ** > unary > primary+postfix, with
 * filters, tests and calls binding tightest after a unary operand), because precedence
 * differences change what a template prints. Statements nest by parsing a body until one
 * of the tags that may end it. Nesting depth is bounded so hostile input cannot exhaust
 * the stack; unknown filters and tests are reported when evaluated, as jinja2 does for
 * code that never runs. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "chat/jinja_int.h"

#define MAX_PARSE_DEPTH 200

typedef struct {
    jarena *a;
    jmp_buf *fail;
    tokd_err *err;
    jtok *tk;
    size_t i, n;
    int depth;
    int loops; /* enclosing for-loop bodies (reset inside macros), for break/continue */
} parser;

typedef struct {
    jnode **v;
    size_t n, cap;
    const char **names; /* parallel, optional */
} nvec;

static _Noreturn void pfail(parser *P, const jtok *t, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tokd_seterr(P->err, "%d:%d: %s", t->line, t->col, msg);
    longjmp(*P->fail, 1);
}

static jtok *cur(parser *P) { return &P->tk[P->i]; }
static jtok *look(parser *P, size_t k) { return &P->tk[P->i + k < P->n ? P->i + k : P->n - 1]; }
static jtok *advance(parser *P) {
    jtok *t = &P->tk[P->i];
    if (P->i + 1 < P->n) P->i++;
    return t;
}
static bool tok_op(const jtok *t, const char *op) { return t->kind == TK_OP && strcmp(t->s, op) == 0; }
static bool tok_name(const jtok *t, const char *nm) { return t->kind == TK_NAME && strcmp(t->s, nm) == 0; }
static bool skip_op(parser *P, const char *op) {
    if (tok_op(cur(P), op)) {
        advance(P);
        return true;
    }
    return false;
}
static bool skip_name(parser *P, const char *nm) {
    if (tok_name(cur(P), nm)) {
        advance(P);
        return true;
    }
    return false;
}

static const char *tok_desc(const jtok *t) {
    switch (t->kind) {
    case TK_EOF: return "end of template";
    case TK_TEXT: return "template data";
    case TK_VAR_BEGIN: return "'{{'";
    case TK_VAR_END: return "end of print statement";
    case TK_BLOCK_BEGIN: return "'{%'";
    case TK_BLOCK_END: return "end of statement block";
    case TK_NAME: return t->s;
    case TK_STRING: return "string";
    case TK_INT: return "integer";
    case TK_FLOAT: return "float";
    case TK_OP: return t->s;
    }
    return "?";
}

static void expect_op(parser *P, const char *op) {
    if (!skip_op(P, op)) pfail(P, cur(P), "expected '%s', got '%s'", op, tok_desc(cur(P)));
}
static const char *expect_name(parser *P) {
    jtok *t = cur(P);
    if (t->kind != TK_NAME) pfail(P, t, "expected a name, got '%s'", tok_desc(t));
    advance(P);
    return t->s;
}
static void expect_block_end(parser *P) {
    if (cur(P)->kind != TK_BLOCK_END) pfail(P, cur(P), "expected end of statement block, got '%s'", tok_desc(cur(P)));
    advance(P);
}

static jnode *mk(parser *P, jnode_kind k, const jtok *t) {
    jnode *n = ja_alloc(P->a, sizeof(jnode));
    n->kind = k;
    n->line = t->line;
    n->col = t->col;
    return n;
}

/* a node placed where the expression it extends begins (x.y, x[0], f(...)) */
static jnode *mk_at(parser *P, jnode_kind k, const jnode *start) {
    jnode *n = ja_alloc(P->a, sizeof(jnode));
    n->kind = k;
    n->line = start->line;
    n->col = start->col;
    return n;
}

static void nv_push(parser *P, nvec *v, jnode *x, const char *name) {
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 4;
        v->v = ja_grow(P->a, v->v, v->cap * sizeof(jnode *), nc * sizeof(jnode *));
        v->names = ja_grow(P->a, v->names, v->cap * sizeof(char *), nc * sizeof(char *));
        v->cap = nc;
    }
    v->v[v->n] = x;
    v->names[v->n] = name;
    v->n++;
}
static jlist nv_list(nvec *v) { return (jlist){v->v, v->n}; }

static jv *const_new(parser *P, int kind) {
    jv *v = ja_alloc(P->a, sizeof(jv));
    v->kind = (uint8_t)kind;
    return v;
}

static void enter(parser *P) {
    if (++P->depth > MAX_PARSE_DEPTH) pfail(P, cur(P), "template nested too deeply");
}

static jnode *parse_expr(parser *P, bool with_condexpr);
static jnode *parse_tuple(parser *P, bool with_condexpr, bool explicit_parens);
static jnode *parse_unary(parser *P, bool with_filter);
static jnode *parse_or(parser *P);

/* ---- expressions ---------------------------------------------------------------------- */

static void parse_call_args(parser *P, nvec *pos, nvec *kw) {
    /* after '(' */
    while (!tok_op(cur(P), ")")) {
        if (pos->n + kw->n) expect_op(P, ",");
        if (tok_op(cur(P), ")")) break;
        if (tok_op(cur(P), "*") || tok_op(cur(P), "**")) pfail(P, cur(P), "*args and **kwargs in calls are not supported");
        if (cur(P)->kind == TK_NAME && tok_op(look(P, 1), "=")) {
            const char *nm = advance(P)->s;
            advance(P);
            nv_push(P, kw, parse_expr(P, true), nm);
        } else {
            if (kw->n) pfail(P, cur(P), "positional argument follows keyword argument");
            nv_push(P, pos, parse_expr(P, true), NULL);
        }
    }
    advance(P);
}

static jnode *parse_call(parser *P, jnode *callee) {
    advance(P); /* ( */
    jnode *n = mk_at(P, E_CALL, callee);
    n->a = callee;
    nvec pos = {0}, kw = {0};
    parse_call_args(P, &pos, &kw);
    n->args = nv_list(&pos);
    n->args2 = nv_list(&kw);
    n->names = kw.names;
    n->nnames = kw.n;
    return n;
}

static jnode *parse_subscript(parser *P, jnode *obj, const jtok *t) {
    /* after '[' */
    jnode *start = NULL;
    if (!tok_op(cur(P), ":")) {
        start = parse_expr(P, true);
        if (!tok_op(cur(P), ":")) {
            expect_op(P, "]");
            jnode *n = mk_at(P, E_GETITEM, obj);
            n->a = obj;
            n->b = start;
            return n;
        }
    }
    jnode *n = mk_at(P, E_SLICE, obj);
    n->a = obj;
    n->b = start;
    expect_op(P, ":");
    if (!tok_op(cur(P), "]") && !tok_op(cur(P), ":")) n->c = parse_expr(P, true);
    if (skip_op(P, ":"))
        if (!tok_op(cur(P), "]")) n->d = parse_expr(P, true);
    expect_op(P, "]");
    return n;
}

static jnode *parse_postfix(parser *P, jnode *node) {
    for (;;) {
        jtok *t = cur(P);
        if (tok_op(t, ".")) {
            advance(P);
            jtok *a = cur(P);
            if (a->kind == TK_NAME) {
                advance(P);
                jnode *n = mk_at(P, E_GETATTR, node);
                n->a = node;
                n->s = a->s;
                node = n;
            } else if (a->kind == TK_INT) {
                advance(P);
                jnode *n = mk_at(P, E_GETITEM, node);
                n->a = node;
                n->b = mk(P, E_CONST, a);
                n->b->v = const_new(P, JV_INT);
                n->b->v->i = a->i;
                node = n;
            } else {
                pfail(P, a, "expected a name after '.'");
            }
        } else if (tok_op(t, "[")) {
            advance(P);
            node = parse_subscript(P, node, t);
        } else if (tok_op(t, "(")) {
            node = parse_call(P, node);
        } else {
            return node;
        }
    }
}

static jnode *parse_filter(parser *P, jnode *node, bool first_inline) {
    while (first_inline || tok_op(cur(P), "|")) {
        if (!first_inline) advance(P);
        first_inline = false;
        jtok *t = cur(P);
        const char *name = expect_name(P);
        jnode *n = mk(P, E_FILTER, t);
        n->a = node;
        n->s = name;
        n->ffn = jx_find_filter(name);
        if (tok_op(cur(P), "(")) {
            advance(P);
            nvec pos = {0}, kw = {0};
            parse_call_args(P, &pos, &kw);
            n->args = nv_list(&pos);
            n->args2 = nv_list(&kw);
            n->names = kw.names;
            n->nnames = kw.n;
        }
        node = n;
    }
    return node;
}

static jnode *parse_test(parser *P, jnode *node) {
    jtok *t = advance(P); /* is */
    bool neg = skip_name(P, "not");
    jtok *nt = cur(P);
    const char *name = expect_name(P);
    jnode *n = mk(P, E_TEST, t);
    n->a = node;
    n->s = name;
    n->negate = neg;
    n->tfn = jx_find_test(name);
    (void)nt;
    jtok *c = cur(P);
    if (tok_op(c, "(")) {
        advance(P);
        nvec pos = {0}, kw = {0};
        parse_call_args(P, &pos, &kw);
        n->args = nv_list(&pos);
        n->args2 = nv_list(&kw);
        n->names = kw.names;
        n->nnames = kw.n;
    } else if ((c->kind == TK_NAME || c->kind == TK_STRING || c->kind == TK_INT || c->kind == TK_FLOAT ||
                tok_op(c, "(") || tok_op(c, "[") || tok_op(c, "{")) &&
               !tok_name(c, "else") && !tok_name(c, "or") && !tok_name(c, "and")) {
        if (tok_name(c, "is")) pfail(P, c, "you cannot chain multiple tests with 'is'");
        nvec pos = {0};
        nv_push(P, &pos, parse_unary(P, false), NULL);
        n->args = nv_list(&pos);
    }
    return n;
}

static jnode *parse_filter_expr(parser *P, jnode *node) {
    for (;;) {
        if (tok_op(cur(P), "|"))
            node = parse_filter(P, node, false);
        else if (tok_name(cur(P), "is"))
            node = parse_test(P, node);
        else if (tok_op(cur(P), "("))
            node = parse_call(P, node);
        else
            return node;
    }
}

static jnode *parse_primary(parser *P) {
    jtok *t = cur(P);
    jnode *n;
    switch (t->kind) {
    case TK_NAME:
        advance(P);
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True") || !strcmp(t->s, "false") || !strcmp(t->s, "False")) {
            n = mk(P, E_CONST, t);
            n->v = (t->s[0] == 't' || t->s[0] == 'T') ? JV_TRUE : JV_FALSE;
        } else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) {
            n = mk(P, E_CONST, t);
            n->v = JV_NONEP;
        } else {
            n = mk(P, E_NAME, t);
            n->s = t->s;
        }
        return n;
    case TK_STRING: {
        advance(P);
        const char *s = t->s;
        size_t len = t->n;
        while (cur(P)->kind == TK_STRING) { /* adjacent literals concatenate */
            jtok *u = advance(P);
            char *cat = ja_alloc(P->a, len + u->n + 1);
            memcpy(cat, s, len);
            memcpy(cat + len, u->s, u->n);
            s = cat;
            len += u->n;
        }
        n = mk(P, E_CONST, t);
        n->v = const_new(P, JV_STR);
        n->v->s.p = s;
        n->v->s.n = len;
        n->v->s.ncp = -1;
        jv_str_ncp(n->v); /* cache now: constants are shared by concurrent renders */
        return n;
    }
    case TK_INT:
    case TK_FLOAT:
        advance(P);
        n = mk(P, E_CONST, t);
        n->v = const_new(P, t->kind == TK_INT ? JV_INT : JV_FLOAT);
        if (t->kind == TK_INT)
            n->v->i = t->i;
        else
            n->v->f = t->f;
        return n;
    case TK_OP:
        if (tok_op(t, "(")) {
            advance(P);
            enter(P);
            n = parse_tuple(P, true, true);
            P->depth--;
            expect_op(P, ")");
            return n;
        }
        if (tok_op(t, "[")) {
            advance(P);
            enter(P);
            nvec items = {0};
            while (!tok_op(cur(P), "]")) {
                if (items.n) expect_op(P, ",");
                if (tok_op(cur(P), "]")) break;
                nv_push(P, &items, parse_expr(P, true), NULL);
            }
            advance(P);
            P->depth--;
            n = mk(P, E_LIST, t);
            n->args = nv_list(&items);
            return n;
        }
        if (tok_op(t, "{")) {
            advance(P);
            enter(P);
            nvec keys = {0}, vals = {0};
            while (!tok_op(cur(P), "}")) {
                if (keys.n) expect_op(P, ",");
                if (tok_op(cur(P), "}")) break;
                nv_push(P, &keys, parse_expr(P, true), NULL);
                expect_op(P, ":");
                nv_push(P, &vals, parse_expr(P, true), NULL);
            }
            advance(P);
            P->depth--;
            n = mk(P, E_DICT, t);
            n->args = nv_list(&keys);
            n->args2 = nv_list(&vals);
            return n;
        }
        break;
    default: break;
    }
    pfail(P, t, "unexpected '%s'", tok_desc(t));
}

static jnode *parse_unary(parser *P, bool with_filter) {
    jtok *t = cur(P);
    jnode *node;
    enter(P);
    if (tok_op(t, "-") || tok_op(t, "+")) {
        advance(P);
        node = mk(P, tok_op(t, "-") ? E_NEG : E_POS, t);
        node->a = parse_unary(P, false);
    } else {
        node = parse_postfix(P, parse_primary(P));
    }
    if (with_filter) node = parse_filter_expr(P, node);
    P->depth--;
    return node;
}

static jnode *parse_pow(parser *P) {
    jnode *l = parse_unary(P, true);
    while (tok_op(cur(P), "**")) {
        jtok *t = advance(P);
        jnode *n = mk(P, E_BINOP, t);
        n->op = OP_POW;
        n->a = l;
        n->b = parse_unary(P, true);
        l = n;
    }
    return l;
}

static jnode *parse_math2(parser *P) {
    jnode *l = parse_pow(P);
    for (;;) {
        jtok *t = cur(P);
        int op = tok_op(t, "*") ? OP_MUL : tok_op(t, "/") ? OP_DIV : tok_op(t, "//") ? OP_FLOORDIV : tok_op(t, "%") ? OP_MOD : -1;
        if (op < 0) return l;
        advance(P);
        jnode *n = mk(P, E_BINOP, t);
        n->op = op;
        n->a = l;
        n->b = parse_pow(P);
        l = n;
    }
}

static jnode *parse_concat(parser *P) {
    jnode *first = parse_math2(P);
    if (!tok_op(cur(P), "~")) return first;
    jnode *n = mk(P, E_CONCAT, cur(P));
    nvec items = {0};
    nv_push(P, &items, first, NULL);
    while (skip_op(P, "~")) nv_push(P, &items, parse_math2(P), NULL);
    n->args = nv_list(&items);
    return n;
}

static jnode *parse_math1(parser *P) {
    jnode *l = parse_concat(P);
    for (;;) {
        jtok *t = cur(P);
        int op = tok_op(t, "+") ? OP_ADD : tok_op(t, "-") ? OP_SUB : -1;
        if (op < 0) return l;
        advance(P);
        jnode *n = mk(P, E_BINOP, t);
        n->op = op;
        n->a = l;
        n->b = parse_concat(P);
        l = n;
    }
}

static jnode *parse_compare(parser *P) {
    jtok *t0 = cur(P);
    jnode *first = parse_math1(P);
    nvec operands = {0};
    int ops[64];
    size_t nops = 0;
    for (;;) {
        jtok *t = cur(P);
        int op = -1;
        if (tok_op(t, "=="))
            op = OP_EQ;
        else if (tok_op(t, "!="))
            op = OP_NE;
        else if (tok_op(t, "<"))
            op = OP_LT;
        else if (tok_op(t, "<="))
            op = OP_LE;
        else if (tok_op(t, ">"))
            op = OP_GT;
        else if (tok_op(t, ">="))
            op = OP_GE;
        else if (tok_name(t, "in"))
            op = OP_IN;
        else if (tok_name(t, "not") && tok_name(look(P, 1), "in")) {
            advance(P);
            op = OP_NOTIN;
        }
        if (op < 0) break;
        advance(P);
        if (nops == 64) pfail(P, t, "too many chained comparisons");
        ops[nops++] = op;
        nv_push(P, &operands, parse_math1(P), NULL);
    }
    if (!nops) return first;
    jnode *n = mk(P, E_COMPARE, t0);
    n->a = first;
    n->args = nv_list(&operands);
    n->ops = ja_alloc(P->a, nops * sizeof(int));
    memcpy(n->ops, ops, nops * sizeof(int));
    return n;
}

static jnode *parse_not(parser *P) {
    if (tok_name(cur(P), "not")) {
        jtok *t = advance(P);
        enter(P);
        jnode *n = mk(P, E_NOT, t);
        n->a = parse_not(P);
        P->depth--;
        return n;
    }
    return parse_compare(P);
}

static jnode *parse_and(parser *P) {
    jnode *l = parse_not(P);
    while (tok_name(cur(P), "and")) {
        jtok *t = advance(P);
        jnode *n = mk(P, E_AND, t);
        n->a = l;
        n->b = parse_not(P);
        l = n;
    }
    return l;
}

static jnode *parse_or(parser *P) {
    jnode *l = parse_and(P);
    while (tok_name(cur(P), "or")) {
        jtok *t = advance(P);
        jnode *n = mk(P, E_OR, t);
        n->a = l;
        n->b = parse_and(P);
        l = n;
    }
    return l;
}

static jnode *parse_condexpr(parser *P) {
    jnode *e1 = parse_or(P);
    while (tok_name(cur(P), "if")) {
        jtok *t = advance(P);
        jnode *n = mk(P, E_COND, t);
        n->b = e1;
        n->a = parse_or(P);
        if (skip_name(P, "else")) n->c = parse_condexpr(P);
        e1 = n;
    }
    return e1;
}

static jnode *parse_expr(parser *P, bool with_condexpr) {
    enter(P);
    jnode *n = with_condexpr ? parse_condexpr(P) : parse_or(P);
    P->depth--;
    return n;
}

static bool tuple_end(parser *P) {
    jtok *t = cur(P);
    return t->kind == TK_VAR_END || t->kind == TK_BLOCK_END || t->kind == TK_EOF || tok_op(t, ")") ||
           tok_op(t, "]") || tok_op(t, "}") || tok_name(t, "in") || tok_op(t, "=") || tok_name(t, "if") ||
           tok_name(t, "recursive");
}

static jnode *parse_tuple(parser *P, bool with_condexpr, bool explicit_parens) {
    jtok *t = cur(P);
    nvec items = {0};
    bool comma = false;
    for (;;) {
        if (items.n) {
            if (!skip_op(P, ",")) break;
            comma = true;
        }
        if (tuple_end(P)) break;
        nv_push(P, &items, parse_expr(P, with_condexpr), NULL);
    }
    if (!comma) {
        if (items.n == 1) return items.v[0];
        if (!explicit_parens) pfail(P, t, "expected an expression, got '%s'", tok_desc(cur(P)));
    }
    jnode *n = mk(P, E_TUPLE, t);
    n->args = nv_list(&items);
    return n;
}

/* Assignment targets: NAME, NAME.attr (when allow_attr), or a tuple of names. */
static jnode *parse_target(parser *P, bool allow_attr) {
    jtok *t = cur(P);
    nvec items = {0};
    bool paren = skip_op(P, "(");
    bool comma = false;
    for (;;) {
        jtok *nt = cur(P);
        const char *nm = expect_name(P);
        jnode *n = mk(P, E_NAME, nt);
        n->s = nm;
        if (allow_attr && !paren && items.n == 0 && tok_op(cur(P), ".")) {
            advance(P);
            jnode *g = mk(P, E_GETATTR, nt);
            g->a = n;
            g->s = expect_name(P);
            return g;
        }
        nv_push(P, &items, n, NULL);
        if (!skip_op(P, ",")) break;
        comma = true;
        if (paren ? tok_op(cur(P), ")") : cur(P)->kind != TK_NAME) break;
    }
    if (paren) expect_op(P, ")");
    if (items.n == 1 && !comma) return items.v[0];
    jnode *n = mk(P, E_TUPLE, t);
    n->args = nv_list(&items);
    return n;
}

/* ---- statements ----------------------------------------------------------------------- */

/* Parse statements until a {% NAME %} with NAME in ends; returns that NAME with the parser
 * placed just after it (NULL at end of template when ends is empty). */
static const char *parse_body(parser *P, const char *const *ends, nvec *out, const jtok *opener);

static jnode *parse_statement(parser *P);

static jlist body_until(parser *P, const char *const *ends, const char **which, const jtok *opener) {
    nvec v = {0};
    *which = parse_body(P, ends, &v, opener);
    return nv_list(&v);
}

static jnode *parse_if(parser *P, jtok *t) {
    jnode *n = mk(P, N_IF, t);
    n->a = parse_tuple(P, true, false);
    expect_block_end(P);
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    const char *w;
    n->body = body_until(P, ends, &w, t);
    if (!strcmp(w, "elif")) {
        jnode *e = parse_if(P, &P->tk[P->i - 1]);
        jnode **arr = ja_alloc(P->a, sizeof(jnode *));
        arr[0] = e;
        n->else_ = (jlist){arr, 1};
        return n; /* the nested if consumed endif */
    }
    if (!strcmp(w, "else")) {
        expect_block_end(P);
        static const char *const ends2[] = {"endif", NULL};
        n->else_ = body_until(P, ends2, &w, t);
    }
    expect_block_end(P);
    return n;
}

static jnode *parse_for(parser *P, jtok *t) {
    jnode *n = mk(P, N_FOR, t);
    n->a = parse_target(P, false);
    if (!skip_name(P, "in")) pfail(P, cur(P), "expected 'in' in for loop, got '%s'", tok_desc(cur(P)));
    n->b = parse_tuple(P, false, false);
    if (skip_name(P, "if")) n->c = parse_expr(P, true);
    if (skip_name(P, "recursive")) n->recursive = true;
    expect_block_end(P);
    static const char *const ends[] = {"endfor", "else", NULL};
    const char *w;
    P->loops++;
    n->body = body_until(P, ends, &w, t);
    P->loops--;
    if (!strcmp(w, "else")) {
        expect_block_end(P);
        static const char *const ends2[] = {"endfor", NULL};
        n->else_ = body_until(P, ends2, &w, t);
    }
    expect_block_end(P);
    return n;
}

static jnode *parse_set(parser *P, jtok *t) {
    jnode *target = parse_target(P, true);
    if (skip_op(P, "=")) {
        jnode *n = mk(P, N_SET, t);
        n->a = target;
        n->b = parse_tuple(P, true, false);
        expect_block_end(P);
        return n;
    }
    if (target->kind != E_NAME) pfail(P, cur(P), "expected '=' in set statement");
    jnode *n = mk(P, N_SETBLOCK, t);
    n->a = target;
    if (tok_op(cur(P), "|")) n->c = parse_filter(P, mk(P, E_BODYVAL, cur(P)), false);
    expect_block_end(P);
    static const char *const ends[] = {"endset", NULL};
    const char *w;
    n->body = body_until(P, ends, &w, t);
    expect_block_end(P);
    return n;
}

static void parse_params(parser *P, jnode *n) {
    nvec names = {0};
    nvec defs = {0};
    expect_op(P, "(");
    while (!tok_op(cur(P), ")")) {
        if (names.n) expect_op(P, ",");
        if (tok_op(cur(P), ")")) break;
        jtok *nt = cur(P);
        const char *nm = expect_name(P);
        jnode *d = NULL;
        if (skip_op(P, "="))
            d = parse_expr(P, true);
        else if (defs.n && defs.v[defs.n - 1])
            pfail(P, nt, "non-default argument follows default argument");
        nv_push(P, &names, NULL, nm);
        nv_push(P, &defs, d, NULL);
    }
    advance(P);
    n->names = names.names;
    n->nnames = names.n;
    n->args = nv_list(&defs);
}

static jnode *parse_macro(parser *P, jtok *t) {
    jnode *n = mk(P, N_MACRO, t);
    n->s = expect_name(P);
    parse_params(P, n);
    expect_block_end(P);
    static const char *const ends[] = {"endmacro", NULL};
    const char *w;
    int loops = P->loops;
    P->loops = 0;
    n->body = body_until(P, ends, &w, t);
    P->loops = loops;
    if (cur(P)->kind == TK_NAME) advance(P); /* {% endmacro name %} */
    expect_block_end(P);
    return n;
}

static jnode *parse_callblock(parser *P, jtok *t) {
    jnode *n = mk(P, N_CALLBLOCK, t);
    if (tok_op(cur(P), "("))
        parse_params(P, n);
    n->a = parse_expr(P, true);
    if (n->a->kind != E_CALL) pfail(P, t, "expected a call in {%% call %%}");
    expect_block_end(P);
    static const char *const ends[] = {"endcall", NULL};
    const char *w;
    int loops = P->loops;
    P->loops = 0;
    n->body = body_until(P, ends, &w, t);
    P->loops = loops;
    expect_block_end(P);
    return n;
}

static jnode *parse_filterblock(parser *P, jtok *t) {
    jnode *n = mk(P, N_FILTERBLOCK, t);
    n->c = parse_filter(P, mk(P, E_BODYVAL, t), true);
    expect_block_end(P);
    static const char *const ends[] = {"endfilter", NULL};
    const char *w;
    n->body = body_until(P, ends, &w, t);
    expect_block_end(P);
    return n;
}

static jnode *parse_with(parser *P, jtok *t) {
    jnode *n = mk(P, N_WITH, t);
    nvec v = {0};
    while (cur(P)->kind != TK_BLOCK_END) {
        if (v.n) expect_op(P, ",");
        const char *nm = expect_name(P);
        expect_op(P, "=");
        nv_push(P, &v, parse_expr(P, true), nm);
    }
    n->args = nv_list(&v);
    n->names = v.names;
    n->nnames = v.n;
    expect_block_end(P);
    static const char *const ends[] = {"endwith", NULL};
    const char *w;
    n->body = body_until(P, ends, &w, t);
    expect_block_end(P);
    return n;
}

/* After "{%": one statement. */
static jnode *parse_statement(parser *P) {
    jtok *t = cur(P);
    if (t->kind != TK_NAME) pfail(P, t, "expected a statement name, got '%s'", tok_desc(t));
    const char *kw = t->s;
    advance(P);
    if (!strcmp(kw, "if")) return parse_if(P, t);
    if (!strcmp(kw, "for")) return parse_for(P, t);
    if (!strcmp(kw, "set")) return parse_set(P, t);
    if (!strcmp(kw, "macro")) return parse_macro(P, t);
    if (!strcmp(kw, "call")) return parse_callblock(P, t);
    if (!strcmp(kw, "filter")) return parse_filterblock(P, t);
    if (!strcmp(kw, "with")) return parse_with(P, t);
    if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
        if (!P->loops) pfail(P, t, "'%s' outside of a for loop", kw);
        jnode *n = mk(P, kw[0] == 'b' ? N_BREAK : N_CONTINUE, t);
        expect_block_end(P);
        return n;
    }
    if (!strcmp(kw, "generation")) { /* transformers' AssistantTracker: renders its body as is */
        expect_block_end(P);
        jnode *n = mk(P, N_WITH, t);
        static const char *const ends[] = {"endgeneration", NULL};
        const char *w;
        n->body = body_until(P, ends, &w, t);
        expect_block_end(P);
        return n;
    }
    pfail(P, t, "unknown or unsupported tag '%s'", kw);
}

static const char *parse_body(parser *P, const char *const *ends, nvec *out, const jtok *opener) {
    enter(P);
    for (;;) {
        jtok *t = cur(P);
        switch (t->kind) {
        case TK_EOF:
            if (ends[0]) pfail(P, opener, "unexpected end of template: '%s' was never closed", opener->s);
            P->depth--;
            return NULL;
        case TK_TEXT: {
            advance(P);
            jnode *n = mk(P, N_TEXT, t);
            n->s = t->s;
            n->n = t->n;
            nv_push(P, out, n, NULL);
            break;
        }
        case TK_VAR_BEGIN: {
            advance(P);
            jnode *n = mk(P, N_OUTPUT, t);
            n->a = parse_tuple(P, true, false);
            if (cur(P)->kind != TK_VAR_END) pfail(P, cur(P), "expected end of print statement, got '%s'", tok_desc(cur(P)));
            advance(P);
            nv_push(P, out, n, NULL);
            break;
        }
        case TK_BLOCK_BEGIN: {
            jtok *nt = look(P, 1);
            if (nt->kind == TK_NAME)
                for (int k = 0; ends[k]; k++)
                    if (!strcmp(nt->s, ends[k])) {
                        advance(P);
                        advance(P);
                        P->depth--;
                        return ends[k];
                    }
            if (nt->kind == TK_NAME && (!strncmp(nt->s, "end", 3) || !strcmp(nt->s, "elif") || !strcmp(nt->s, "else")))
                pfail(P, nt, "unexpected '%s'%s%s%s", nt->s, ends[0] ? " (expected '" : "", ends[0] ? ends[0] : "",
                      ends[0] ? "')" : "");
            advance(P);
            nv_push(P, out, parse_statement(P), NULL);
            break;
        }
        default: pfail(P, t, "unexpected '%s'", tok_desc(t));
        }
    }
}

void jinja_parse_tokens(jinja_template *t, jmp_buf *fail, tokd_err *err, jtoks *toks) {
    parser P = {.a = &t->arena, .fail = fail, .err = err, .tk = toks->v, .n = toks->n};
    static const char *const none[] = {NULL};
    nvec v = {0};
    parse_body(&P, none, &v, &toks->v[0]);
    t->body = nv_list(&v);
}
