/* jinja_eval.c — walks the template tree: statements write output, expressions make values.
 *
 * Scoping follows jinja2: the template has one top-level scope; every for-loop iteration,
 * macro call and with-block gets a fresh child scope (so {% set %} inside a loop is not seen
 * after it, or by the next iteration), while if-blocks share their parent's scope. A macro
 * keeps a live reference to the scope it was defined in, so it sees later top-level
 * assignments, as jinja2's macros do. Attribute access tries Python attributes (methods)
 * before dict keys, subscripts try keys first: that is jinja2's environment.getattr/getitem.
 * Every node evaluated costs a step, nested evaluation is depth-limited, and failures
 * longjmp to the render entry point with the node's line and column. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_int.h"

enum { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE };

/* the hidden loop entry that makes loop(...) work in recursive loops */
#define LOOP_RECURSE_KEY "\x01recurse"

static jv *call_loop(jctx *c, const jnode *at, jv *loop, jargs *a);

_Noreturn void jx_fail(jctx *c, const jnode *at, const char *fmt, ...) {
    if (!at) at = c->cur;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (at)
        tokd_seterr(c->err, "%d:%d: %s", at->line, at->col, msg);
    else
        tokd_seterr(c->err, "1:1: %s", msg);
    longjmp(c->fail, 1);
}

void jx_charge(jctx *c, uint64_t work) {
    c->steps += work;
    if (c->steps > c->lim.max_steps) {
        c->steps = 0; /* let the error path run */
        jx_fail(c, c->cur, "evaluation step limit exceeded (%llu steps)", (unsigned long long)c->lim.max_steps);
    }
}

void jx_enter(jctx *c, const jnode *at) {
    if (++c->depth > c->lim.max_depth) jx_fail(c, at, "recursion limit exceeded (depth %d)", c->lim.max_depth);
}

static _Noreturn void undef_fail(jctx *c, const jnode *at, jv *u) {
    jx_fail(c, at, "%s", u->u.msg ? u->u.msg : "value is undefined");
}

static jscope *new_scope(jctx *c, jscope *parent) {
    jscope *s = ja_alloc(&c->arena, sizeof(jscope));
    s->parent = parent;
    s->vars = jv_dict(c, JD_DICT);
    return s;
}

jv *jx_lookup(jctx *c, jscope *s, const char *name) {
    for (; s; s = s->parent) {
        jv *v = jv_dict_gets(s->vars, name);
        if (v) return v;
    }
    return NULL;
}

/* ---- attribute and item access ---------------------------------------------------------- */

static const char *obj_desc(jv *v) {
    switch (v->kind) {
    case JV_DICT: return v->sub == JD_DICT ? "dict object" : v->sub == JD_NS ? "Namespace object" : "LoopContext object";
    case JV_LIST: return v->sub == JL_TUPLE ? "tuple object" : v->sub == JL_LIST ? "list object" : "generator object";
    case JV_STR: return "str object";
    case JV_INT: return "int object";
    case JV_FLOAT: return "float object";
    case JV_BOOL: return "bool object";
    case JV_NONE: return "None";
    default: return "object";
    }
}

jv *jx_getattr(jctx *c, const jnode *at, jv *obj, const char *name) {
    if (obj->kind == JV_UNDEF) undef_fail(c, at, obj);
    jv *m = jx_method(c, at, obj, name);
    if (m) return m;
    if (obj->kind == JV_DICT) {
        jx_charge(c, obj->d.n / 16);
        jv *v = jv_dict_gets(obj, name);
        if (v) return v;
    }
    return jv_undef(c, "'%s' has no attribute '%s'", obj_desc(obj), name);
}

static int64_t norm_index(jctx *c, const jnode *at, jv *k, size_t n, bool *ok) {
    int64_t i = k->kind == JV_BOOL ? (int64_t)k->b : k->i;
    (void)c;
    (void)at;
    if (i < 0) i += (int64_t)n;
    *ok = i >= 0 && (uint64_t)i < n;
    return i;
}

/* byte offsets of each code point of s (n+1 entries), or NULL when s is ASCII */
static size_t *cp_offsets(jctx *c, jv *s, size_t *ncp) {
    size_t n = jv_str_ncp(s);
    *ncp = n;
    if (n == s->s.n) return NULL;
    size_t *off = ja_alloc(&c->arena, (n + 1) * sizeof(size_t));
    size_t i = 0, k = 0;
    while (i < s->s.n) {
        off[k++] = i;
        utf8_decode(s->s.p, s->s.n, &i);
    }
    off[k] = s->s.n;
    jx_charge(c, n / 16);
    return off;
}

jv *jx_getitem(jctx *c, const jnode *at, jv *obj, jv *key) {
    if (obj->kind == JV_UNDEF) undef_fail(c, at, obj);
    if (obj->kind == JV_DICT) {
        jx_charge(c, obj->d.n / 16);
        jv *v = jv_dict_get(obj, key);
        if (v) return v;
    } else if (obj->kind == JV_LIST && (obj->sub == JL_LIST || obj->sub == JL_TUPLE) &&
               (key->kind == JV_INT || key->kind == JV_BOOL)) {
        bool ok;
        int64_t i = norm_index(c, at, key, obj->l.n, &ok);
        if (ok) return obj->l.a[i];
        return jv_undef(c, "%s has no element %lld", obj_desc(obj), (long long)(key->kind == JV_INT ? key->i : key->b));
    } else if (obj->kind == JV_STR && (key->kind == JV_INT || key->kind == JV_BOOL)) {
        size_t ncp;
        size_t *off = cp_offsets(c, obj, &ncp);
        bool ok;
        int64_t i = norm_index(c, at, key, ncp, &ok);
        if (ok) {
            size_t b = off ? off[i] : (size_t)i, e = off ? off[i + 1] : (size_t)i + 1;
            return jv_str(c, obj->s.p + b, e - b);
        }
        return jv_undef(c, "str object has no element %lld", (long long)key->i);
    }
    if (key->kind == JV_STR) {
        jv *m = jx_method(c, at, obj, key->s.p);
        if (m) return m;
        return jv_undef(c, "'%s' has no attribute '%s'", obj_desc(obj), key->s.p);
    }
    jbuf b = {0};
    py_repr(c, &b, key, 0);
    return jv_undef(c, "'%s' has no attribute %s", obj_desc(obj), b.p ? b.p : "");
}

static int64_t slice_arg(jctx *c, const jnode *at, jv *v, bool *given) {
    *given = false;
    if (!v || v->kind == JV_NONE) return 0;
    if (v->kind == JV_INT || v->kind == JV_BOOL) {
        *given = true;
        return v->kind == JV_INT ? v->i : v->b;
    }
    if (v->kind == JV_UNDEF) undef_fail(c, at, v);
    jx_fail(c, at, "slice indices must be integers or None");
}

static jv *do_slice(jctx *c, const jnode *at, jv *obj, jv *vs, jv *ve, jv *vst) {
    bool gs, ge, gst;
    int64_t start = slice_arg(c, at, vs, &gs), stop = slice_arg(c, at, ve, &ge), step = slice_arg(c, at, vst, &gst);
    if (!gst) step = 1;
    if (step == 0) jx_fail(c, at, "slice step cannot be zero");
    size_t *off = NULL;
    int64_t n;
    if (obj->kind == JV_STR) {
        size_t ncp;
        off = cp_offsets(c, obj, &ncp);
        n = (int64_t)ncp;
    } else if (obj->kind == JV_LIST && obj->sub != JL_GEN) {
        n = (int64_t)obj->l.n;
    } else if (obj->kind == JV_UNDEF) {
        undef_fail(c, at, obj);
    } else {
        jx_fail(c, at, "'%s' object is not subscriptable", jv_typename(obj));
    }
    /* Python's PySlice_AdjustIndices */
    if (!gs) start = step < 0 ? n - 1 : 0;
    else {
        if (start < 0) start += n;
        if (start < 0) start = step < 0 ? -1 : 0;
        if (start >= n) start = step < 0 ? n - 1 : n;
    }
    if (!ge) stop = step < 0 ? -1 : n;
    else {
        if (stop < 0 && stop > INT64_MIN + n) stop += n;
        else if (stop < 0) stop = -1;
        if (stop < 0) stop = step < 0 ? -1 : 0;
        if (stop >= n) stop = step < 0 ? n - 1 : n;
    }
    if (obj->kind == JV_STR) {
        jbuf b = {0};
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            size_t bs = off ? off[i] : (size_t)i, be = off ? off[i + 1] : (size_t)i + 1;
            jb_put(c, &b, obj->s.p + bs, be - bs);
            jx_charge(c, 1);
        }
        return jv_str_nocopy(c, b.p ? b.p : "", b.n);
    }
    jv *r = jv_list(c, obj->sub == JL_TUPLE ? JL_TUPLE : JL_LIST, 0);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        jv_list_push(c, r, obj->l.a[i]);
        jx_charge(c, 1);
    }
    return r;
}

jv *jx_iter_list(jctx *c, const jnode *at, jv *v) {
    switch (v->kind) {
    case JV_UNDEF: return jv_list(c, JL_LIST, 0);
    case JV_LIST: return v;
    case JV_DICT: {
        if (v->sub != JD_DICT) break;
        jv *r = jv_list(c, JL_LIST, v->d.n);
        for (size_t i = 0; i < v->d.n; i++) jv_list_push(c, r, v->d.k[i]);
        jx_charge(c, v->d.n);
        return r;
    }
    case JV_STR: {
        jv *r = jv_list(c, JL_LIST, 0);
        size_t i = 0;
        while (i < v->s.n) {
            size_t st = i;
            utf8_decode(v->s.p, v->s.n, &i);
            jv_list_push(c, r, jv_str(c, v->s.p + st, i - st));
        }
        jx_charge(c, v->s.n);
        return r;
    }
    default: break;
    }
    jx_fail(c, at, "'%s' object is not iterable", jv_typename(v));
}

/* ---- calls ------------------------------------------------------------------------------ */

static int exec_body(jctx *c, jscope *s, const jlist *body);

static jv *render_into_string(jctx *c, jscope *s, const jlist *body) {
    jbuf b = {.limit = c->lim.max_output};
    jbuf *saved = c->out;
    c->out = &b;
    exec_body(c, s, body);
    c->out = saved;
    return jv_str_nocopy(c, b.p ? b.p : "", b.n);
}

static jv *call_macro(jctx *c, const jnode *at, jv *fn, jargs *a) {
    const jnode *m = fn->fu.macro;
    jx_enter(c, at);
    jscope *s = new_scope(c, fn->fu.closure);
    size_t np = m->nnames;
    jv *varargs = jv_list(c, JL_TUPLE, 0);
    jv *kwargs = jv_dict(c, JD_DICT);
    bool *set = ja_alloc(&c->arena, np + 1);
    for (size_t i = 0; i < a->npos; i++) {
        if (i < np) {
            jv_dict_sets(c, s->vars, m->names[i], a->pos[i]);
            set[i] = true;
        } else {
            jv_list_push(c, varargs, a->pos[i]);
        }
    }
    jv *caller = NULL;
    for (size_t k = 0; k < a->nkw; k++) {
        size_t i;
        for (i = 0; i < np; i++)
            if (!strcmp(m->names[i], a->kwn[k])) break;
        if (i < np) {
            if (set[i]) jx_fail(c, at, "macro '%s' got multiple values for argument '%s'", fn->fu.name, a->kwn[k]);
            jv_dict_sets(c, s->vars, m->names[i], a->kwv[k]);
            set[i] = true;
        } else if (!strcmp(a->kwn[k], "caller")) {
            caller = a->kwv[k];
        } else {
            jv_dict_sets(c, kwargs, a->kwn[k], a->kwv[k]);
        }
    }
    for (size_t i = 0; i < np; i++) {
        if (set[i]) continue;
        const jnode *d = i < m->args.n ? m->args.v[i] : NULL;
        jv_dict_sets(c, s->vars, m->names[i],
                     d ? jx_eval(c, s, d) : jv_undef(c, "parameter '%s' was not provided", m->names[i]));
    }
    jv_dict_sets(c, s->vars, "varargs", varargs);
    jv_dict_sets(c, s->vars, "kwargs", kwargs);
    if (caller) jv_dict_sets(c, s->vars, "caller", caller);
    jv *r = render_into_string(c, s, &m->body);
    jx_leave(c);
    return r;
}

jv *jx_call(jctx *c, const jnode *at, jv *fn, jargs *a) {
    if (fn->kind == JV_FUNC) {
        if (fn->sub == JF_MACRO) return call_macro(c, at, fn, a);
        if (!fn->fu.fn) jx_fail(c, at, "object is not callable");
        const jnode *saved = c->cur;
        c->cur = at;
        jv *r = fn->fu.fn(c, fn->fu.self, a);
        c->cur = saved;
        return r;
    }
    if (fn->kind == JV_DICT && fn->sub == JD_LOOP) return call_loop(c, at, fn, a);
    if (fn->kind == JV_UNDEF) undef_fail(c, at, fn);
    jx_fail(c, at, "'%s' object is not callable", jv_typename(fn));
}

static void eval_args(jctx *c, jscope *s, const jnode *e, jargs *a, size_t extra_kw) {
    a->npos = e->args.n;
    a->pos = ja_alloc(&c->arena, (a->npos + 1) * sizeof(jv *));
    for (size_t i = 0; i < a->npos; i++) a->pos[i] = jx_eval(c, s, e->args.v[i]);
    a->nkw = e->args2.n;
    a->kwn = ja_alloc(&c->arena, (a->nkw + extra_kw + 1) * sizeof(char *));
    a->kwv = ja_alloc(&c->arena, (a->nkw + extra_kw + 1) * sizeof(jv *));
    for (size_t i = 0; i < a->nkw; i++) {
        a->kwn[i] = e->names[i];
        a->kwv[i] = jx_eval(c, s, e->args2.v[i]);
    }
}

/* ---- operators -------------------------------------------------------------------------- */

static bool contains(jctx *c, const jnode *at, jv *container, jv *item) {
    switch (container->kind) {
    case JV_STR:
        if (item->kind != JV_STR) {
            if (item->kind == JV_UNDEF) undef_fail(c, at, item);
            jx_fail(c, at, "'in <string>' requires string as left operand, not %s", jv_typename(item));
        }
        jx_charge(c, container->s.n / 32);
        return item->s.n == 0 || memmem(container->s.p, container->s.n, item->s.p, item->s.n) != NULL;
    case JV_LIST:
        jx_charge(c, container->l.n);
        for (size_t i = 0; i < container->l.n; i++)
            if (jv_equal(c, container->l.a[i], item)) return true;
        return false;
    case JV_DICT:
        if (container->sub != JD_DICT) break;
        if ((item->kind == JV_LIST && item->sub != JL_TUPLE) || item->kind == JV_DICT)
            jx_fail(c, at, "unhashable type: '%s'", jv_typename(item));
        jx_charge(c, container->d.n / 8);
        return jv_dict_get(container, item) != NULL;
    case JV_UNDEF: return false;
    default: break;
    }
    jx_fail(c, at, "argument of type '%s' is not iterable", jv_typename(container));
}

static bool compare_op(jctx *c, const jnode *at, int op, jv *a, jv *b) {
    switch (op) {
    case OP_EQ: return jv_equal(c, a, b);
    case OP_NE: return !jv_equal(c, a, b);
    case OP_IN: return contains(c, at, b, a);
    case OP_NOTIN: return !contains(c, at, b, a);
    default: break;
    }
    int r = jv_compare(c, at, a, b);
    switch (op) {
    case OP_LT: return r < 0;
    case OP_LE: return r <= 0;
    case OP_GT: return r > 0;
    default: return r >= 0;
    }
}

/* ---- expressions ------------------------------------------------------------------------ */

static void assign(jctx *c, jscope *s, const jnode *target, jv *v);

jv *jx_eval(jctx *c, jscope *s, const jnode *e) {
    jx_charge(c, 1);
    jx_enter(c, e); /* left-deep chains like 1+1+...+1 recurse here, not in the parser */
    const jnode *saved = c->cur;
    c->cur = e;
    jv *r = NULL;
    switch (e->kind) {
    case E_CONST: r = e->v; break;
    case E_NAME:
        r = jx_lookup(c, s, e->s);
        if (!r) r = jv_undef(c, "'%s' is undefined", e->s);
        break;
    case E_TUPLE:
    case E_LIST:
        r = jv_list(c, e->kind == E_TUPLE ? JL_TUPLE : JL_LIST, e->args.n);
        for (size_t i = 0; i < e->args.n; i++) jv_list_push(c, r, jx_eval(c, s, e->args.v[i]));
        break;
    case E_DICT:
        r = jv_dict(c, JD_DICT);
        for (size_t i = 0; i < e->args.n; i++) {
            jv *k = jx_eval(c, s, e->args.v[i]);
            if (k->kind == JV_LIST && k->sub != JL_TUPLE) jx_fail(c, e->args.v[i], "unhashable type: 'list'");
            if (k->kind == JV_DICT) jx_fail(c, e->args.v[i], "unhashable type: 'dict'");
            jv_dict_set(c, r, k, jx_eval(c, s, e->args2.v[i]));
        }
        break;
    case E_GETATTR: r = jx_getattr(c, e, jx_eval(c, s, e->a), e->s); break;
    case E_GETITEM: {
        jv *o = jx_eval(c, s, e->a);
        r = jx_getitem(c, e, o, jx_eval(c, s, e->b));
        break;
    }
    case E_SLICE: {
        jv *o = jx_eval(c, s, e->a);
        jv *b = e->b ? jx_eval(c, s, e->b) : NULL;
        jv *cc = e->c ? jx_eval(c, s, e->c) : NULL;
        jv *d = e->d ? jx_eval(c, s, e->d) : NULL;
        r = do_slice(c, e, o, b, cc, d);
        break;
    }
    case E_CALL: {
        jv *fn = jx_eval(c, s, e->a);
        jargs a;
        eval_args(c, s, e, &a, 0);
        r = jx_call(c, e, fn, &a);
        break;
    }
    case E_FILTER: {
        if (!e->ffn) jx_fail(c, e, "no filter named '%s'", e->s);
        jv *x = e->a ? jx_eval(c, s, e->a) : c->bodyval;
        jargs a;
        eval_args(c, s, e, &a, 0);
        c->cur = e;
        r = e->ffn(c, e, x, &a);
        break;
    }
    case E_TEST: {
        if (!e->tfn) jx_fail(c, e, "no test named '%s'", e->s);
        jv *x = jx_eval(c, s, e->a);
        jargs a;
        eval_args(c, s, e, &a, 0);
        c->cur = e;
        bool t = e->tfn(c, e, x, &a);
        r = JV_BOOLV(t != e->negate);
        break;
    }
    case E_NOT: r = JV_BOOLV(!jv_truthy(c, jx_eval(c, s, e->a))); break;
    case E_NEG:
    case E_POS: {
        jv *x = jx_eval(c, s, e->a);
        if (x->kind == JV_UNDEF) undef_fail(c, e, x);
        if (!jv_is_num(x)) jx_fail(c, e, "bad operand type for unary %c: '%s'", e->kind == E_NEG ? '-' : '+', jv_typename(x));
        if (e->kind == E_POS) {
            r = x->kind == JV_BOOL ? jv_int(c, x->b) : x;
        } else if (x->kind == JV_FLOAT) {
            r = jv_float(c, -x->f);
        } else {
            int64_t v = x->kind == JV_BOOL ? x->b : x->i;
            if (v == INT64_MIN) jx_fail(c, e, "integer overflow");
            r = jv_int(c, -v);
        }
        break;
    }
    case E_BINOP: {
        jv *a = jx_eval(c, s, e->a);
        jv *b = jx_eval(c, s, e->b);
        r = jx_binop(c, e, e->op, a, b);
        break;
    }
    case E_COMPARE: {
        jv *l = jx_eval(c, s, e->a);
        r = JV_TRUE;
        for (size_t i = 0; i < e->args.n; i++) {
            jv *rv = jx_eval(c, s, e->args.v[i]);
            if (!compare_op(c, e, e->ops[i], l, rv)) {
                r = JV_FALSE;
                break;
            }
            l = rv;
        }
        break;
    }
    case E_AND: {
        jv *a = jx_eval(c, s, e->a);
        r = jv_truthy(c, a) ? jx_eval(c, s, e->b) : a;
        break;
    }
    case E_OR: {
        jv *a = jx_eval(c, s, e->a);
        r = jv_truthy(c, a) ? a : jx_eval(c, s, e->b);
        break;
    }
    case E_CONCAT: {
        jbuf b = {.limit = c->lim.max_output};
        for (size_t i = 0; i < e->args.n; i++) py_str(c, &b, jx_eval(c, s, e->args.v[i]));
        r = jv_str_nocopy(c, b.p ? b.p : "", b.n);
        break;
    }
    case E_COND:
        if (jv_truthy(c, jx_eval(c, s, e->a)))
            r = jx_eval(c, s, e->b);
        else if (e->c)
            r = jx_eval(c, s, e->c);
        else
            r = jv_undef(c, "the inline if-expression evaluated to false and no else section was defined");
        break;
    case E_BODYVAL: r = c->bodyval ? c->bodyval : jv_str(c, "", 0); break;
    default: jx_fail(c, e, "internal error: statement in expression position");
    }
    c->cur = saved;
    jx_leave(c);
    return r;
}

/* ---- statements ------------------------------------------------------------------------- */

static void assign(jctx *c, jscope *s, const jnode *target, jv *v) {
    if (target->kind == E_NAME) {
        jv_dict_sets(c, s->vars, target->s, v);
        return;
    }
    if (target->kind == E_GETATTR) {
        jv *ns = jx_lookup(c, s, target->a->s);
        if (!ns || ns->kind != JV_DICT || ns->sub != JD_NS)
            jx_fail(c, target, "cannot assign attribute on non-namespace object");
        jv_dict_sets(c, ns, target->s, v);
        return;
    }
    /* tuple unpacking */
    jv *items = jx_iter_list(c, target, v);
    if (items->l.n != target->args.n)
        jx_fail(c, target, "%s values to unpack (expected %zu, got %zu)", items->l.n > target->args.n ? "too many" : "not enough",
                target->args.n, items->l.n);
    for (size_t i = 0; i < target->args.n; i++) assign(c, s, target->args.v[i], items->l.a[i]);
}

static jv *loop_cycle(jctx *c, jv *self, jargs *a) {
    if (a->npos == 0) jx_fail(c, c->cur, "no items for cycling given");
    jv *idx = jv_dict_gets(self, "index0");
    return a->pos[(size_t)idx->i % a->npos];
}

/* Run a for loop's body over items (depth > 1 for {{ loop(...) }} in recursive loops). */
static void run_loop(jctx *c, jscope *s, const jnode *n, jv *items, int64_t depth) {
    if (n->c) { /* {% for x in y if cond %}: filter first, so loop.length counts the kept items */
        jv *kept = jv_list(c, JL_LIST, 0);
        for (size_t i = 0; i < items->l.n; i++) {
            jscope *fs = new_scope(c, s);
            assign(c, fs, n->a, items->l.a[i]);
            if (jv_truthy(c, jx_eval(c, fs, n->c))) jv_list_push(c, kept, items->l.a[i]);
        }
        items = kept;
    }
    size_t len = items->l.n;
    jv *recurse = NULL;
    if (n->recursive) {
        recurse = jv_builtin(c, "loop", NULL, NULL);
        recurse->fu.macro = n;
        recurse->fu.closure = s;
    }
    for (size_t i = 0; i < len; i++) {
        jx_charge(c, 1);
        jscope *ls = new_scope(c, s);
        jv *loop = jv_dict(c, JD_LOOP);
        jv_dict_sets(c, loop, "index0", jv_int(c, (int64_t)i));
        jv_dict_sets(c, loop, "index", jv_int(c, (int64_t)i + 1));
        jv_dict_sets(c, loop, "revindex", jv_int(c, (int64_t)(len - i)));
        jv_dict_sets(c, loop, "revindex0", jv_int(c, (int64_t)(len - i - 1)));
        jv_dict_sets(c, loop, "first", JV_BOOLV(i == 0));
        jv_dict_sets(c, loop, "last", JV_BOOLV(i + 1 == len));
        jv_dict_sets(c, loop, "length", jv_int(c, (int64_t)len));
        jv_dict_sets(c, loop, "depth", jv_int(c, depth));
        jv_dict_sets(c, loop, "depth0", jv_int(c, depth - 1));
        if (i > 0) jv_dict_sets(c, loop, "previtem", items->l.a[i - 1]);
        if (i + 1 < len) jv_dict_sets(c, loop, "nextitem", items->l.a[i + 1]);
        jv_dict_sets(c, loop, "cycle", jv_builtin(c, "cycle", loop_cycle, loop));
        if (recurse) jv_dict_sets(c, loop, LOOP_RECURSE_KEY, recurse);
        jv_dict_sets(c, ls->vars, "loop", loop);
        assign(c, ls, n->a, items->l.a[i]);
        if (exec_body(c, ls, &n->body) == FLOW_BREAK) break;
    }
    if (len == 0 && n->else_.n) exec_body(c, new_scope(c, s), &n->else_);
}

static void exec_for(jctx *c, jscope *s, const jnode *n) {
    run_loop(c, s, n, jx_iter_list(c, n->b, jx_eval(c, s, n->b)), 1);
}

/* loop(items) inside a recursive for loop: the body over the new items, as a string */
static jv *call_loop(jctx *c, const jnode *at, jv *loop, jargs *a) {
    jv *r = jv_dict_gets(loop, LOOP_RECURSE_KEY);
    if (!r) jx_fail(c, at, "'LoopContext' object is not callable (the loop is not recursive)");
    if (a->npos != 1 || a->nkw) jx_fail(c, at, "loop() takes exactly one argument");
    jx_enter(c, at);
    jv *depth = jv_dict_gets(loop, "depth");
    jbuf b = {.limit = c->lim.max_output};
    jbuf *saved = c->out;
    c->out = &b;
    run_loop(c, r->fu.closure, r->fu.macro, jx_iter_list(c, at, a->pos[0]), depth->i + 1);
    c->out = saved;
    jx_leave(c);
    return jv_str_nocopy(c, b.p ? b.p : "", b.n);
}

static jv *make_macro(jctx *c, jscope *s, const jnode *n, const char *name) {
    jv *fn = jv_builtin(c, name, NULL, NULL);
    fn->sub = JF_MACRO;
    fn->fu.macro = n;
    fn->fu.closure = s;
    return fn;
}

static jv *apply_bodyfilter(jctx *c, jscope *s, const jnode *chain, jv *body) {
    jv *saved = c->bodyval;
    c->bodyval = body;
    jv *r = jx_eval(c, s, chain);
    c->bodyval = saved;
    return r;
}

static int exec_stmt(jctx *c, jscope *s, const jnode *n) {
    jx_charge(c, 1);
    c->cur = n;
    switch (n->kind) {
    case N_TEXT: jb_put(c, c->out, n->s, n->n); break;
    case N_OUTPUT: py_str(c, c->out, jx_eval(c, s, n->a)); break;
    case N_IF:
        if (jv_truthy(c, jx_eval(c, s, n->a))) return exec_body(c, s, &n->body);
        return exec_body(c, s, &n->else_);
    case N_FOR: exec_for(c, s, n); break;
    case N_SET: assign(c, s, n->a, jx_eval(c, s, n->b)); break;
    case N_SETBLOCK: { /* the body has its own scope, as in jinja2 */
        jv *v = render_into_string(c, new_scope(c, s), &n->body);
        if (n->c) v = apply_bodyfilter(c, s, n->c, v);
        assign(c, s, n->a, v);
        break;
    }
    case N_MACRO: jv_dict_sets(c, s->vars, n->s, make_macro(c, s, n, n->s)); break;
    case N_CALLBLOCK: {
        const jnode *call = n->a;
        jv *fn = jx_eval(c, s, call->a);
        jargs a;
        eval_args(c, s, call, &a, 1);
        a.kwn[a.nkw] = "caller";
        a.kwv[a.nkw] = make_macro(c, s, n, "caller");
        a.nkw++;
        py_str(c, c->out, jx_call(c, call, fn, &a));
        break;
    }
    case N_FILTERBLOCK: {
        jv *v = render_into_string(c, new_scope(c, s), &n->body);
        py_str(c, c->out, apply_bodyfilter(c, s, n->c, v));
        break;
    }
    case N_WITH: {
        jscope *ws = new_scope(c, s);
        for (size_t i = 0; i < n->args.n; i++) jv_dict_sets(c, ws->vars, n->names[i], jx_eval(c, s, n->args.v[i]));
        return exec_body(c, ws, &n->body);
    }
    case N_BREAK: return FLOW_BREAK;
    case N_CONTINUE: return FLOW_CONTINUE;
    default: jx_fail(c, n, "internal error: expression in statement position");
    }
    return FLOW_NORMAL;
}

static int exec_body(jctx *c, jscope *s, const jlist *body) {
    jx_enter(c, NULL);
    for (size_t i = 0; i < body->n; i++) {
        int r = exec_stmt(c, s, body->v[i]);
        if (r != FLOW_NORMAL) {
            jx_leave(c);
            return r;
        }
    }
    jx_leave(c);
    return FLOW_NORMAL;
}

void jx_run(jctx *c, const jinja_template *t, jscope *top) { exec_body(c, top, &t->body); }
