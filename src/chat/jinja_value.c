/* jinja_value.c — the arena allocator and the value model of the Jinja interpreter.
 *
 * Values mirror the Python objects jinja2 works with (None, bool, int, float, str, list,
 * tuple, dict, generators, namespace, loop, callables) closely enough that truthiness,
 * equality and ordering follow Python. Values are arena-allocated and never freed one by
 * one (see jinja_int.h). Dicts keep insertion order with a linear key scan: chat contexts
 * hold small dicts, and the scan is charged to the step budget so big ones stay bounded. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_int.h"

/* ---- arena ---------------------------------------------------------------------------- */

struct jarena_chunk {
    jarena_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

#define JA_CHUNK (64 * 1024)

static void ja_oom(jarena *a) {
    if (a->oom) a->oom(a->oom_ud);
    fprintf(stderr, "tokd: out of memory\n");
    abort();
}

void *ja_alloc(jarena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    jarena_chunk *h = a->head;
    if (!h || h->size - h->used < n) {
        size_t sz = n > JA_CHUNK / 2 ? n : JA_CHUNK;
        if (a->limit && (sz > a->limit || a->used > a->limit - sz)) ja_oom(a);
        h = malloc(sizeof(jarena_chunk) + sz);
        if (!h) ja_oom(a);
        h->size = sz;
        h->used = 0;
        a->used += sz;
        if (a->head && sz > JA_CHUNK / 2 && a->head->size - a->head->used > 1024) {
            /* a big block: keep the current chunk in front for small allocations */
            h->next = a->head->next;
            a->head->next = h;
            h->used = sz;
            memset(h->data, 0, n);
            return h->data;
        }
        h->next = a->head;
        a->head = h;
    }
    void *p = h->data + h->used;
    h->used += n;
    memset(p, 0, n);
    return p;
}

void *ja_grow(jarena *a, void *p, size_t old, size_t n) {
    if (n <= old) return p;
    jarena_chunk *h = a->head;
    size_t old_r = (old + 15) & ~(size_t)15, n_r = (n + 15) & ~(size_t)15;
    if (p && h && (unsigned char *)p + old_r == h->data + h->used && (unsigned char *)p >= h->data &&
        h->size - h->used >= n_r - old_r) {
        memset(h->data + h->used, 0, n_r - old_r);
        h->used += n_r - old_r;
        return p;
    }
    void *q = ja_alloc(a, n);
    if (old) memcpy(q, p, old);
    return q;
}

char *ja_strndup(jarena *a, const char *s, size_t n) {
    char *p = ja_alloc(a, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void ja_free_all(jarena *a) {
    jarena_chunk *h = a->head;
    while (h) {
        jarena_chunk *nx = h->next;
        free(h);
        h = nx;
    }
    a->head = NULL;
    a->used = 0;
}

/* ---- constructors --------------------------------------------------------------------- */

jv jv_undef_plain = {.kind = JV_UNDEF};
jv jv_none_v = {.kind = JV_NONE};
jv jv_true_v = {.kind = JV_BOOL, .b = true};
jv jv_false_v = {.kind = JV_BOOL, .b = false};

static jv *jv_new(jctx *c, int kind) {
    jv *v = ja_alloc(&c->arena, sizeof(jv));
    v->kind = (uint8_t)kind;
    return v;
}

jv *jv_undef(jctx *c, const char *fmt, ...) {
    jv *v = jv_new(c, JV_UNDEF);
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    v->u.msg = ja_strndup(&c->arena, buf, strlen(buf));
    return v;
}

jv *jv_int(jctx *c, int64_t i) {
    jv *v = jv_new(c, JV_INT);
    v->i = i;
    return v;
}

jv *jv_float(jctx *c, double f) {
    jv *v = jv_new(c, JV_FLOAT);
    v->f = f;
    return v;
}

jv *jv_str_nocopy(jctx *c, const char *p, size_t n) {
    jv *v = jv_new(c, JV_STR);
    v->s.p = p;
    v->s.n = n;
    v->s.ncp = -1;
    return v;
}

jv *jv_str(jctx *c, const char *p, size_t n) {
    jx_charge(c, n / 64);
    return jv_str_nocopy(c, ja_strndup(&c->arena, p, n), n);
}

jv *jv_cstr(jctx *c, const char *s) { return jv_str(c, s, strlen(s)); }

jv *jv_list(jctx *c, int sub, size_t cap) {
    jv *v = jv_new(c, JV_LIST);
    v->sub = (uint8_t)sub;
    if (cap) {
        v->l.a = ja_alloc(&c->arena, cap * sizeof(jv *));
        v->l.cap = cap;
    }
    return v;
}

void jv_list_push(jctx *c, jv *l, jv *x) {
    if (l->l.n == l->l.cap) {
        size_t nc = l->l.cap ? l->l.cap * 2 : 4;
        l->l.a = ja_grow(&c->arena, l->l.a, l->l.cap * sizeof(jv *), nc * sizeof(jv *));
        l->l.cap = nc;
    }
    l->l.a[l->l.n++] = x;
}

jv *jv_dict(jctx *c, int sub) {
    jv *v = jv_new(c, JV_DICT);
    v->sub = (uint8_t)sub;
    return v;
}

static bool key_eq(jv *a, jv *b) {
    if (a->kind == JV_STR && b->kind == JV_STR) return a->s.n == b->s.n && memcmp(a->s.p, b->s.p, a->s.n) == 0;
    if (a->kind == JV_STR || b->kind == JV_STR) return false;
    return jv_equal(NULL, a, b);
}

static long dict_find(jv *d, jv *key) {
    for (size_t i = 0; i < d->d.n; i++)
        if (key_eq(d->d.k[i], key)) return (long)i;
    return -1;
}

jv *jv_dict_get(jv *d, jv *key) {
    long i = dict_find(d, key);
    return i < 0 ? NULL : d->d.v[i];
}

jv *jv_dict_gets(jv *d, const char *key) {
    size_t n = strlen(key);
    for (size_t i = 0; i < d->d.n; i++) {
        jv *k = d->d.k[i];
        if (k->kind == JV_STR && k->s.n == n && memcmp(k->s.p, key, n) == 0) return d->d.v[i];
    }
    return NULL;
}

void jv_dict_set(jctx *c, jv *d, jv *key, jv *val) {
    jx_charge(c, d->d.n / 16);
    long i = dict_find(d, key);
    if (i >= 0) {
        d->d.v[i] = val;
        return;
    }
    if (d->d.n == d->d.cap) {
        size_t nc = d->d.cap ? d->d.cap * 2 : 4;
        d->d.k = ja_grow(&c->arena, d->d.k, d->d.cap * sizeof(jv *), nc * sizeof(jv *));
        d->d.v = ja_grow(&c->arena, d->d.v, d->d.cap * sizeof(jv *), nc * sizeof(jv *));
        d->d.cap = nc;
    }
    d->d.k[d->d.n] = key;
    d->d.v[d->d.n] = val;
    d->d.n++;
}

void jv_dict_sets(jctx *c, jv *d, const char *key, jv *val) { jv_dict_set(c, d, jv_cstr(c, key), val); }

bool jv_dict_del(jv *d, jv *key) {
    long i = dict_find(d, key);
    if (i < 0) return false;
    memmove(d->d.k + i, d->d.k + i + 1, (d->d.n - (size_t)i - 1) * sizeof(jv *));
    memmove(d->d.v + i, d->d.v + i + 1, (d->d.n - (size_t)i - 1) * sizeof(jv *));
    d->d.n--;
    return true;
}

jv *jv_builtin(jctx *c, const char *name, jbuiltin_fn fn, jv *self) {
    jv *v = jv_new(c, JV_FUNC);
    v->sub = JF_BUILTIN;
    v->fu.fn = fn;
    v->fu.self = self;
    v->fu.name = name;
    return v;
}

/* ---- Python semantics ----------------------------------------------------------------- */

bool jv_is_num(const jv *v) { return v->kind == JV_BOOL || v->kind == JV_INT || v->kind == JV_FLOAT; }

double jv_num(const jv *v) {
    switch (v->kind) {
    case JV_BOOL: return v->b ? 1.0 : 0.0;
    case JV_INT: return (double)v->i;
    case JV_FLOAT: return v->f;
    default: return 0.0;
    }
}

static int64_t jv_intval(const jv *v) { return v->kind == JV_BOOL ? (int64_t)v->b : v->i; }

bool jv_truthy(jctx *c, jv *v) {
    (void)c;
    switch (v->kind) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return v->b;
    case JV_INT: return v->i != 0;
    case JV_FLOAT: return v->f != 0.0;
    case JV_STR: return v->s.n > 0;
    case JV_LIST: return v->sub == JL_GEN || v->l.n > 0;
    case JV_DICT: return v->sub != JD_DICT || v->d.n > 0;
    default: return true;
    }
}

static bool equal_depth(jctx *c, jv *a, jv *b, int depth);
bool jv_equal(jctx *c, jv *a, jv *b) { return equal_depth(c, a, b, 0); }

static bool equal_depth(jctx *c, jv *a, jv *b, int depth) {
    if (a == b) return true;
    if (depth > (c ? c->lim.max_depth : 256)) {
        if (c) jx_fail(c, c->cur, "values nested too deeply to compare");
        return false;
    }
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a->kind != JV_FLOAT && b->kind != JV_FLOAT) return jv_intval(a) == jv_intval(b);
        return jv_num(a) == jv_num(b);
    }
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case JV_UNDEF:
    case JV_NONE: return true;
    case JV_STR: return a->s.n == b->s.n && memcmp(a->s.p, b->s.p, a->s.n) == 0;
    case JV_LIST:
        if (a->sub != b->sub || a->sub == JL_GEN || a->l.n != b->l.n) return false;
        if (c) jx_charge(c, a->l.n);
        for (size_t i = 0; i < a->l.n; i++)
            if (!equal_depth(c, a->l.a[i], b->l.a[i], depth + 1)) return false;
        return true;
    case JV_DICT:
        if (a->sub != JD_DICT || b->sub != JD_DICT || a->d.n != b->d.n) return false;
        if (c) jx_charge(c, a->d.n * a->d.n / 8);
        for (size_t i = 0; i < a->d.n; i++) {
            jv *o = jv_dict_get(b, a->d.k[i]);
            if (!o || !equal_depth(c, a->d.v[i], o, depth + 1)) return false;
        }
        return true;
    default: return false;
    }
}

const char *jv_typename(const jv *v) {
    switch (v->kind) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST:
        return v->sub == JL_TUPLE ? "tuple" : v->sub == JL_GEN ? "generator" : v->sub == JL_VIEW ? "dict_items" : "list";
    case JV_DICT: return v->sub == JD_NS ? "Namespace" : v->sub == JD_LOOP ? "LoopContext" : "dict";
    case JV_FUNC: return v->sub == JF_MACRO ? "Macro" : "builtin_function_or_method";
    }
    return "object";
}

int jv_compare(jctx *c, const jnode *at, jv *a, jv *b) {
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a->kind != JV_FLOAT && b->kind != JV_FLOAT) {
            int64_t x = jv_intval(a), y = jv_intval(b);
            return x < y ? -1 : x > y;
        }
        double x = jv_num(a), y = jv_num(b);
        return x < y ? -1 : x > y;
    }
    if (a->kind == JV_STR && b->kind == JV_STR) {
        size_t n = a->s.n < b->s.n ? a->s.n : b->s.n;
        int r = memcmp(a->s.p, b->s.p, n);
        if (r) return r < 0 ? -1 : 1;
        return a->s.n < b->s.n ? -1 : a->s.n > b->s.n;
    }
    if (a->kind == JV_LIST && b->kind == JV_LIST && a->sub == b->sub && (a->sub == JL_LIST || a->sub == JL_TUPLE)) {
        jx_enter(c, at);
        size_t n = a->l.n < b->l.n ? a->l.n : b->l.n;
        for (size_t i = 0; i < n; i++) {
            jx_charge(c, 1);
            if (jv_equal(c, a->l.a[i], b->l.a[i])) continue;
            int r = jv_compare(c, at, a->l.a[i], b->l.a[i]);
            jx_leave(c);
            return r;
        }
        jx_leave(c);
        return a->l.n < b->l.n ? -1 : a->l.n > b->l.n;
    }
    if (a->kind == JV_UNDEF || b->kind == JV_UNDEF) {
        jv *u = a->kind == JV_UNDEF ? a : b;
        jx_fail(c, at, "%s", u->u.msg ? u->u.msg : "undefined value");
    }
    jx_fail(c, at, "'<' not supported between instances of '%s' and '%s'", jv_typename(a), jv_typename(b));
}

size_t jv_str_ncp(jv *s) {
    if (s->s.ncp >= 0) return (size_t)s->s.ncp;
    size_t n = 0, i = 0;
    while (i < s->s.n) {
        if ((unsigned char)s->s.p[i] < 0x80)
            i++;
        else
            utf8_decode(s->s.p, s->s.n, &i);
        n++;
    }
    if (n <= INT32_MAX) s->s.ncp = (int32_t)n;
    return n;
}
