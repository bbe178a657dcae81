/* jinja_int.h — internals shared by the Jinja modules (not for users of jinja.h).
 *
 * Memory: everything lives in arenas. A template's tokens and tree live in the template's
 * arena; every value made while rendering lives in the render's arena, freed in one go at
 * the end. So values need no reference counts, cyclic structures are harmless, and an error
 * can unwind with longjmp from any depth without leaking: the arena owns it all.
 *
 * Errors: the lexer, parser and evaluator report failure with jx_fail*(), which formats
 * "LINE:COL: message" and longjmps to the entry point (jinja_parse / jinja_render_json). */
#ifndef TOKD_JINJA_INT_H
#define TOKD_JINJA_INT_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat/jinja.h"
#include "unicode_utf8.h"
#include "util.h"

/* ---- arena -------------------------------------------------------------------------- */

typedef struct jarena_chunk jarena_chunk;
typedef struct jarena {
    jarena_chunk *head;
    size_t used;  /* bytes handed out in total */
    size_t limit; /* 0 = none */
    void (*oom)(void *ud); /* called when the limit is hit; must not return */
    void *oom_ud;
} jarena;

void *ja_alloc(jarena *a, size_t n);                 /* zeroed, 16-byte aligned */
void *ja_grow(jarena *a, void *p, size_t old, size_t n); /* like realloc; old contents kept */
char *ja_strndup(jarena *a, const char *s, size_t n);
void ja_free_all(jarena *a);

/* ---- values ------------------------------------------------------------------------- */

typedef enum {
    JV_UNDEF, /* jinja2's Undefined: prints empty, iterates empty, fails on most uses */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST, /* sub: JL_* */
    JV_DICT, /* insertion-ordered; sub JD_NS for namespace(), JD_LOOP for loop */
    JV_FUNC, /* builtin, bound method, or macro */
} jv_kind;

enum { JL_LIST, JL_TUPLE, JL_GEN, JL_VIEW };   /* GEN: generator (no len, always true); VIEW: dict view */
enum { JD_DICT, JD_NS, JD_LOOP };
enum { JF_BUILTIN, JF_MACRO };

typedef struct jv jv;
typedef struct jctx jctx;
typedef struct jnode jnode;
typedef struct jscope jscope;

typedef struct jargs {
    jv **pos;
    size_t npos;
    const char **kwn;
    jv **kwv;
    size_t nkw;
} jargs;

typedef jv *(*jbuiltin_fn)(jctx *c, jv *self, jargs *a);

struct jv {
    uint8_t kind, sub;
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *p; /* UTF-8, NUL-terminated */
            size_t n;
            int32_t ncp; /* code points, -1 if not yet counted */
        } s;
        struct {
            jv **a;
            size_t n, cap;
        } l;
        struct {
            jv **k, **v;
            size_t n, cap;
        } d;
        struct {
            jbuiltin_fn fn; /* JF_BUILTIN */
            jv *self;
            const char *name;
            const jnode *macro; /* JF_MACRO */
            jscope *closure;
            jv *caller;         /* JF_MACRO used as a {% call %} body */
        } fu;
        struct {
            const char *msg; /* why it is undefined, for errors */
        } u;
    };
};

extern jv jv_undef_plain, jv_none_v, jv_true_v, jv_false_v;
#define JV_NONEP (&jv_none_v)
#define JV_TRUE (&jv_true_v)
#define JV_FALSE (&jv_false_v)
#define JV_BOOLV(x) ((x) ? JV_TRUE : JV_FALSE)

jv *jv_undef(jctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
jv *jv_int(jctx *c, int64_t i);
jv *jv_float(jctx *c, double f);
jv *jv_str(jctx *c, const char *p, size_t n);     /* copies */
jv *jv_str_nocopy(jctx *c, const char *p, size_t n); /* p must live in the arena, NUL-terminated */
jv *jv_cstr(jctx *c, const char *s);
jv *jv_list(jctx *c, int sub, size_t cap);
void jv_list_push(jctx *c, jv *l, jv *x);
jv *jv_dict(jctx *c, int sub);
jv *jv_dict_get(jv *d, jv *key);                  /* NULL if absent */
jv *jv_dict_gets(jv *d, const char *key);          /* NULL if absent */
void jv_dict_set(jctx *c, jv *d, jv *key, jv *val);
void jv_dict_sets(jctx *c, jv *d, const char *key, jv *val);
bool jv_dict_del(jv *d, jv *key);
jv *jv_builtin(jctx *c, const char *name, jbuiltin_fn fn, jv *self);

bool jv_truthy(jctx *c, jv *v);
bool jv_equal(jctx *c, jv *a, jv *b);
/* Python ordering; fails (TypeError) for unorderable types. <0, 0, >0. */
int jv_compare(jctx *c, const jnode *at, jv *a, jv *b);
bool jv_is_num(const jv *v); /* bool, int, float */
double jv_num(const jv *v);
const char *jv_typename(const jv *v); /* Python's type name: 'str', 'dict', ... */
size_t jv_str_ncp(jv *s);             /* code points of a string */

/* ---- text (pyjson.c) ---------------------------------------------------------------- */

typedef struct jbuf {
    char *p;
    size_t n, cap;
    size_t limit; /* 0 = none */
} jbuf;
void jb_put(jctx *c, jbuf *b, const char *s, size_t n);
void jb_puts(jctx *c, jbuf *b, const char *s);
void jb_putc(jctx *c, jbuf *b, char ch);
void jb_printf(jctx *c, jbuf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

void py_float_repr(double f, char out[32]); /* Python repr(float) */
void py_str(jctx *c, jbuf *b, jv *v);        /* str(v): what {{ v }} prints */
void py_repr(jctx *c, jbuf *b, jv *v, int depth);
jv *py_to_str(jctx *c, jv *v);               /* str(v) as a string value */
typedef struct pyjson_opts {
    bool ensure_ascii, sort_keys;
    bool indent_set;
    const char *indent; /* NULL or the indent string */
    size_t indent_len;
    const char *item_sep, *key_sep;
    size_t item_sep_len, key_sep_len;
} pyjson_opts;
void pyjson_dump(jctx *c, jbuf *b, jv *v, const pyjson_opts *o); /* json.dumps */
/* json.loads; NULL with msg set on a syntax error. */
jv *pyjson_parse(jctx *c, const char *s, size_t n, char *msg, size_t msgsz);

/* UTF-8 helpers */
int utf8_decode(const char *s, size_t n, size_t *pos); /* next code point (or the byte, if invalid) */
/* UTF-8 encoding: tokd_utf8_encode from unicode_utf8.h. */

/* ---- tokens and tree ---------------------------------------------------------------- */

typedef enum {
    TK_EOF,
    TK_TEXT,
    TK_VAR_BEGIN,
    TK_VAR_END,
    TK_BLOCK_BEGIN,
    TK_BLOCK_END,
    TK_NAME,
    TK_STRING,
    TK_INT,
    TK_FLOAT,
    TK_OP,
} jtok_kind;

typedef struct jtok {
    jtok_kind kind;
    int line, col;
    const char *s; /* TEXT, NAME, STRING (decoded), OP (the operator) */
    size_t n;
    int64_t i;
    double f;
} jtok;

typedef struct jtoks {
    jtok *v;
    size_t n, cap;
} jtoks;

/* Lex src (already NUL-free or not; len bytes) into tokens, allocated in a. */
void jinja_lex(jarena *a, jmp_buf *fail, tokd_err *err, const char *src, size_t len, jtoks *out);

typedef enum {
    /* statements */
    N_TEXT,
    N_OUTPUT,
    N_IF,
    N_FOR,
    N_SET,
    N_SETBLOCK,
    N_MACRO,
    N_CALLBLOCK,
    N_FILTERBLOCK,
    N_WITH,
    N_BREAK,
    N_CONTINUE,
    /* expressions */
    E_CONST,
    E_NAME,
    E_TUPLE,
    E_LIST,
    E_DICT,
    E_GETATTR,
    E_GETITEM,
    E_SLICE,
    E_CALL,
    E_FILTER,
    E_TEST,
    E_NOT,
    E_NEG,
    E_POS,
    E_BINOP,
    E_COMPARE,
    E_AND,
    E_OR,
    E_CONCAT,
    E_COND,
    E_BODYVAL, /* the rendered body of a filter block / block set */
} jnode_kind;

typedef enum {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN,
} jop;

typedef struct jlist {
    jnode **v;
    size_t n;
} jlist;

typedef jv *(*jfilter_fn)(jctx *c, const jnode *at, jv *x, jargs *a);
typedef bool (*jtest_fn)(jctx *c, const jnode *at, jv *x, jargs *a);

/* One node type for the whole tree; which fields mean what is listed per kind:
 *   N_TEXT s/n | N_OUTPUT a | N_IF a=cond body else_=else (elif is a nested N_IF)
 *   N_FOR a=target b=iter c=cond body else_ recursive=flag
 *   N_SET a=target b=value | N_SETBLOCK a=target c=filter chain or NULL, body
 *   N_MACRO s=name args=defaults (NULL = none) names=params body
 *   N_CALLBLOCK a=call, args/names=caller params, body | N_FILTERBLOCK c=filter chain, body
 *   N_WITH names+args=assignments body
 *   E_CONST v | E_NAME s | E_TUPLE/E_LIST args | E_DICT args=keys args2=values
 *   E_GETATTR a s | E_GETITEM a b | E_SLICE a b c d (each may be NULL)
 *   E_CALL a args, names+args2 = keyword args
 *   E_FILTER a s args names+args2 ffn | E_TEST a s args names+args2 tfn negate
 *   E_NOT/E_NEG/E_POS a | E_BINOP op a b | E_AND/E_OR a b | E_CONCAT args
 *   E_COMPARE a, args=operands ops | E_COND a=cond b=then c=else or NULL */
struct jnode {
    jnode_kind kind;
    int line, col;
    int op;
    bool negate, recursive;
    const char *s;
    size_t n;
    jnode *a, *b, *c, *d;
    jlist body, else_, args, args2;
    const char **names;
    size_t nnames;
    int *ops;
    jv *v;
    jfilter_fn ffn;
    jtest_fn tfn;
};

struct jinja_template {
    jarena arena;
    jlist body;
};

/* ---- render context ----------------------------------------------------------------- */

struct jscope {
    jscope *parent;
    jv *vars; /* dict */
};

struct jctx {
    jarena arena;
    jmp_buf fail;
    tokd_err *err;
    jinja_limits lim;
    uint64_t steps;
    int depth;
    jscope *globals;
    jbuf *out;
    const jnode *cur; /* the node being evaluated, for error positions */
    jv *bodyval;      /* the rendered body of the filter block / block set being finished */
    const char *now;  /* TOKD_NOW, read once per render */
};

_Noreturn void jx_fail(jctx *c, const jnode *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void jx_charge(jctx *c, uint64_t work); /* count bulk work against the step limit */
void jx_enter(jctx *c, const jnode *at); /* depth +1, failing past the limit */
static inline void jx_leave(jctx *c) { c->depth--; }

/* parser (jinja_parse.c) */
void jinja_parse_tokens(jinja_template *t, jmp_buf *fail, tokd_err *err, jtoks *toks);

/* evaluator (jinja_eval.c) */
jv *jx_eval(jctx *c, jscope *s, const jnode *e);
jv *jx_call(jctx *c, const jnode *at, jv *fn, jargs *a);
jv *jx_getattr(jctx *c, const jnode *at, jv *obj, const char *name);
jv *jx_getitem(jctx *c, const jnode *at, jv *obj, jv *key);
/* Materialise an iterable as a list of items (dict -> keys, str -> chars, undefined -> empty). */
jv *jx_iter_list(jctx *c, const jnode *at, jv *v);
jv *jx_lookup(jctx *c, jscope *s, const char *name);
void jx_run(jctx *c, const jinja_template *t, jscope *top);

/* builtins (jinja_builtins.c) */
jfilter_fn jx_find_filter(const char *name);
jtest_fn jx_find_test(const char *name);
jv *jx_method(jctx *c, const jnode *at, jv *obj, const char *name); /* bound method or NULL */
void jx_install_globals(jctx *c, jv *dict);
/* Python-style binary arithmetic shared by operators and filters */
jv *jx_binop(jctx *c, const jnode *at, int op, jv *a, jv *b);
/* argument helpers */
jv *jx_arg(jargs *a, size_t pos, const char *name); /* NULL if not given */
void jx_check_args(jctx *c, const jnode *at, const char *what, jargs *a, size_t maxpos, const char *const *names);

#endif
