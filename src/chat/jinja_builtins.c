/* jinja_builtins.c — jinja2's filters and tests, Python's str/dict/list methods, the
 * template globals (range, namespace, dict, raise_exception, strftime_now) and Python's
 * arithmetic rules.
 *
 * Each builtin is a small C function over values, registered in a name table; the parser
 * resolves filter and test names once. Semantics copy the Python behaviour a template can
 * observe: generators from map/select/... (true even when empty, no len(), not JSON),
 * case-insensitive sort/dictsort/unique by default, Python's int/float arithmetic with
 * floor division and modulo signs, str methods over code points with Unicode whitespace.
 * Letter case beyond ASCII uses the C library's C.UTF-8 tables through a private locale
 * object (never the process locale). */

#include <ctype.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <wctype.h>

#include "chat/jinja_int.h"

/* ---- helpers ------------------------------------------------------------------------ */

jv *jx_arg(jargs *a, size_t pos, const char *name) {
    if (pos < a->npos) return a->pos[pos];
    if (name)
        for (size_t i = 0; i < a->nkw; i++)
            if (!strcmp(a->kwn[i], name)) return a->kwv[i];
    return NULL;
}

void jx_check_args(jctx *c, const jnode *at, const char *what, jargs *a, size_t maxpos, const char *const *names) {
    if (a->npos > maxpos) jx_fail(c, at, "%s takes at most %zu positional arguments (%zu given)", what, maxpos, a->npos);
    for (size_t i = 0; i < a->nkw; i++) {
        bool ok = false;
        for (size_t k = 0; names && names[k]; k++)
            if (!strcmp(names[k], a->kwn[i])) ok = true;
        if (!ok) jx_fail(c, at, "%s got an unexpected keyword argument '%s'", what, a->kwn[i]);
    }
}

static _Noreturn void undef_fail(jctx *c, const jnode *at, jv *u) {
    jx_fail(c, at, "%s", u->u.msg ? u->u.msg : "value is undefined");
}

static jv *need_str(jctx *c, const jnode *at, jv *v, const char *what) {
    if (v->kind == JV_STR) return v;
    if (v->kind == JV_UNDEF) undef_fail(c, at, v);
    jx_fail(c, at, "%s must be str, not %s", what, jv_typename(v));
}

static int64_t need_int(jctx *c, const jnode *at, jv *v, const char *what) {
    if (v->kind == JV_INT) return v->i;
    if (v->kind == JV_BOOL) return v->b;
    if (v->kind == JV_UNDEF) undef_fail(c, at, v);
    jx_fail(c, at, "%s must be an integer, not %s", what, jv_typename(v));
}

static jv *S(jctx *c, const char *p, size_t n) { return jv_str(c, p, n); }
static jv *B(jctx *c, jbuf *b) { return jv_str_nocopy(c, b->p ? b->p : "", b->n); }
static jbuf newbuf(jctx *c) { return (jbuf){.limit = c->lim.max_output}; }

/* Python's str.isspace() set */
static bool cp_space(int cp) {
    return (cp >= 9 && cp <= 13) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

static locale_t utf8_loc;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;
static void utf8_init(void) {
    utf8_loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    if (!utf8_loc) utf8_loc = newlocale(LC_CTYPE_MASK, "en_US.UTF-8", (locale_t)0);
}
static int cp_upper(int cp) {
    if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
    pthread_once(&utf8_once, utf8_init);
    return utf8_loc ? (int)towupper_l((wint_t)cp, utf8_loc) : cp;
}
static int cp_lower(int cp) {
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    pthread_once(&utf8_once, utf8_init);
    return utf8_loc ? (int)towlower_l((wint_t)cp, utf8_loc) : cp;
}
static bool cp_alpha(int cp) {
    if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
    pthread_once(&utf8_once, utf8_init);
    return utf8_loc ? iswalpha_l((wint_t)cp, utf8_loc) != 0 : false;
}
static bool cp_alnum(int cp) {
    if (cp < 0x80) return isalnum(cp) != 0;
    pthread_once(&utf8_once, utf8_init);
    return utf8_loc ? iswalnum_l((wint_t)cp, utf8_loc) != 0 : true;
}
static bool cp_cased(int cp) { return cp_upper(cp) != cp || cp_lower(cp) != cp; }

static void put_cp(jctx *c, jbuf *b, int cp, size_t raw_len, const char *raw) {
    if (raw_len == 1 && (unsigned char)raw[0] >= 0x80) { /* undecodable byte: keep it */
        jb_put(c, b, raw, 1);
        return;
    }
    char enc[4];
    jb_put(c, b, enc, tokd_utf8_encode((uint32_t)cp, enc));
}

enum { CASE_UPPER, CASE_LOWER, CASE_CAPITALIZE, CASE_PYTITLE };
static jv *str_case(jctx *c, jv *s, int mode) {
    jbuf b = newbuf(c);
    size_t i = 0;
    bool first = true, prev_cased = false;
    while (i < s->s.n) {
        size_t st = i;
        int cp = utf8_decode(s->s.p, s->s.n, &i);
        int o = cp;
        switch (mode) {
        case CASE_UPPER: o = cp_upper(cp); break;
        case CASE_LOWER: o = cp_lower(cp); break;
        case CASE_CAPITALIZE: o = first ? cp_upper(cp) : cp_lower(cp); break;
        case CASE_PYTITLE:
            o = prev_cased ? cp_lower(cp) : cp_upper(cp);
            prev_cased = cp_cased(cp);
            break;
        }
        first = false;
        put_cp(c, &b, o, i - st, s->s.p + st);
    }
    return B(c, &b);
}

/* jinja2's title filter: capitalise each word, words split at runs of [-\s({[<] */
static jv *jinja_title(jctx *c, jv *s) {
    jbuf b = newbuf(c);
    size_t i = 0;
    bool at_start = true;
    while (i < s->s.n) {
        size_t st = i;
        int cp = utf8_decode(s->s.p, s->s.n, &i);
        bool sep = cp == '-' || cp_space(cp) || cp == '(' || cp == '{' || cp == '[' || cp == '<';
        int o = sep ? cp : at_start ? cp_upper(cp) : cp_lower(cp);
        at_start = sep;
        put_cp(c, &b, o, i - st, s->s.p + st);
    }
    return B(c, &b);
}

/* strip: which 1 = left, 2 = right, 3 = both; chars NULL = whitespace */
static jv *str_strip(jctx *c, jv *s, jv *chars, int which) {
    size_t b = 0, e = s->s.n;
    if (chars && chars->kind == JV_NONE) chars = NULL;
    for (;;) { /* left */
        if (!(which & 1) || b >= e) break;
        size_t i = b;
        int cp = utf8_decode(s->s.p, e, &i);
        bool strip;
        if (chars) {
            char enc[4];
            size_t k = tokd_utf8_encode((uint32_t)cp, enc);
            strip = memmem(chars->s.p, chars->s.n, s->s.p + b, i - b) != NULL && (k == i - b);
        } else {
            strip = cp_space(cp);
        }
        if (!strip) break;
        b = i;
    }
    while ((which & 2) && e > b) {
        size_t st = e - 1;
        while (st > b && ((unsigned char)s->s.p[st] & 0xC0) == 0x80 && e - st < 4) st--;
        size_t i = st;
        int cp = utf8_decode(s->s.p, e, &i);
        if (i != e) { /* not a clean code point: treat the last byte alone */
            st = e - 1;
            i = st;
            cp = utf8_decode(s->s.p, e, &i);
        }
        bool strip = chars ? memmem(chars->s.p, chars->s.n, s->s.p + st, e - st) != NULL : cp_space(cp);
        if (!strip) break;
        e = st;
    }
    if (b == 0 && e == s->s.n) return s;
    return S(c, s->s.p + b, e - b);
}

static jv *str_replace(jctx *c, jv *s, jv *old, jv *new_, int64_t count) {
    jbuf b = newbuf(c);
    if (old->s.n == 0) { /* Python inserts new between every code point */
        size_t i = 0;
        int64_t done = 0;
        if (count != 0) {
            jb_put(c, &b, new_->s.p, new_->s.n);
            done++;
        }
        while (i < s->s.n) {
            size_t st = i;
            utf8_decode(s->s.p, s->s.n, &i);
            jb_put(c, &b, s->s.p + st, i - st);
            if (count < 0 || done < count) {
                jb_put(c, &b, new_->s.p, new_->s.n);
                done++;
            }
        }
        return B(c, &b);
    }
    size_t i = 0;
    int64_t done = 0;
    while (i <= s->s.n) {
        const char *f = (count < 0 || done < count) ? memmem(s->s.p + i, s->s.n - i, old->s.p, old->s.n) : NULL;
        if (!f) {
            jb_put(c, &b, s->s.p + i, s->s.n - i);
            break;
        }
        size_t at = (size_t)(f - s->s.p);
        jb_put(c, &b, s->s.p + i, at - i);
        jb_put(c, &b, new_->s.p, new_->s.n);
        i = at + old->s.n;
        done++;
    }
    return B(c, &b);
}

/* str.split / rsplit (rsplit only matters with maxsplit) */
static jv *str_split(jctx *c, const jnode *at, jv *s, jv *sep, int64_t maxsplit) {
    jv *r = jv_list(c, JL_LIST, 0);
    if (sep && sep->kind == JV_NONE) sep = NULL;
    if (sep) {
        need_str(c, at, sep, "separator");
        if (sep->s.n == 0) jx_fail(c, at, "empty separator");
        size_t i = 0;
        int64_t n = 0;
        for (;;) {
            const char *f = (maxsplit < 0 || n < maxsplit) ? memmem(s->s.p + i, s->s.n - i, sep->s.p, sep->s.n) : NULL;
            if (!f) {
                jv_list_push(c, r, S(c, s->s.p + i, s->s.n - i));
                break;
            }
            size_t p = (size_t)(f - s->s.p);
            jv_list_push(c, r, S(c, s->s.p + i, p - i));
            i = p + sep->s.n;
            n++;
        }
        return r;
    }
    size_t i = 0;
    int64_t n = 0;
    while (i < s->s.n) {
        size_t st = i, nx = i;
        int cp = utf8_decode(s->s.p, s->s.n, &nx);
        if (cp_space(cp)) {
            i = nx;
            continue;
        }
        if (maxsplit >= 0 && n >= maxsplit) {
            /* the rest, with trailing whitespace stripped */
            jv *rest = str_strip(c, S(c, s->s.p + st, s->s.n - st), NULL, 2);
            jv_list_push(c, r, rest);
            return r;
        }
        while (i < s->s.n) {
            size_t k = i;
            int cp2 = utf8_decode(s->s.p, s->s.n, &k);
            if (cp_space(cp2)) break;
            i = k;
        }
        jv_list_push(c, r, S(c, s->s.p + st, i - st));
        n++;
    }
    return r;
}

static bool str_starts(jv *s, jv *p) { return p->s.n <= s->s.n && memcmp(s->s.p, p->s.p, p->s.n) == 0; }
static bool str_ends(jv *s, jv *p) { return p->s.n <= s->s.n && memcmp(s->s.p + s->s.n - p->s.n, p->s.p, p->s.n) == 0; }

/* code point index of a byte offset */
static int64_t cp_index(jv *s, size_t byte) {
    int64_t n = 0;
    size_t i = 0;
    while (i < byte) {
        utf8_decode(s->s.p, s->s.n, &i);
        n++;
    }
    return n;
}

/* Python's str.splitlines() */
static jv *str_splitlines(jctx *c, jv *s, bool keepends) {
    jv *r = jv_list(c, JL_LIST, 0);
    size_t i = 0, st = 0;
    while (i < s->s.n) {
        size_t k = i;
        int cp = utf8_decode(s->s.p, s->s.n, &k);
        bool nl = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || (cp >= 0x1c && cp <= 0x1e) || cp == 0x85 ||
                  cp == 0x2028 || cp == 0x2029;
        if (!nl) {
            i = k;
            continue;
        }
        size_t e = k;
        if (cp == '\r' && e < s->s.n && s->s.p[e] == '\n') e++;
        jv_list_push(c, r, S(c, s->s.p + st, (keepends ? e : i) - st));
        i = st = e;
    }
    if (st < s->s.n) jv_list_push(c, r, S(c, s->s.p + st, s->s.n - st));
    return r;
}

/* ---- arithmetic --------------------------------------------------------------------- */

static const char *op_sym(int op) {
    static const char *const s[] = {"+", "-", "*", "/", "//", "%", "**"};
    return op >= 0 && op <= OP_POW ? s[op] : "?";
}

static jv *repeat(jctx *c, const jnode *at, jv *seq, int64_t n) {
    if (n < 0) n = 0;
    if (seq->kind == JV_STR) {
        if (n && seq->s.n && (uint64_t)n > (c->lim.max_output ? c->lim.max_output : SIZE_MAX) / seq->s.n)
            jx_fail(c, at, "string repetition result too large");
        jbuf b = newbuf(c);
        for (int64_t i = 0; i < n; i++) jb_put(c, &b, seq->s.p, seq->s.n);
        return B(c, &b);
    }
    if (n && seq->l.n && (uint64_t)n > 10000000 / seq->l.n) jx_fail(c, at, "list repetition result too large");
    jv *r = jv_list(c, seq->sub, 0);
    for (int64_t i = 0; i < n; i++)
        for (size_t k = 0; k < seq->l.n; k++) jv_list_push(c, r, seq->l.a[k]);
    jx_charge(c, (uint64_t)n * seq->l.n);
    return r;
}

static jv *str_percent(jctx *c, const jnode *at, jv *fmt, jv *args);

jv *jx_binop(jctx *c, const jnode *at, int op, jv *a, jv *b) {
    if (a->kind == JV_UNDEF) undef_fail(c, at, a);
    if (b->kind == JV_UNDEF) undef_fail(c, at, b);
    if (jv_is_num(a) && jv_is_num(b)) {
        bool fl = a->kind == JV_FLOAT || b->kind == JV_FLOAT;
        if (!fl) {
            int64_t x = a->kind == JV_BOOL ? a->b : a->i, y = b->kind == JV_BOOL ? b->b : b->i, r;
            switch (op) {
            case OP_ADD:
                if (__builtin_add_overflow(x, y, &r)) jx_fail(c, at, "integer overflow");
                return jv_int(c, r);
            case OP_SUB:
                if (__builtin_sub_overflow(x, y, &r)) jx_fail(c, at, "integer overflow");
                return jv_int(c, r);
            case OP_MUL:
                if (__builtin_mul_overflow(x, y, &r)) jx_fail(c, at, "integer overflow");
                return jv_int(c, r);
            case OP_DIV:
                if (y == 0) jx_fail(c, at, "division by zero");
                return jv_float(c, (double)x / (double)y);
            case OP_FLOORDIV:
            case OP_MOD: {
                if (y == 0) jx_fail(c, at, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) {
                    if (op == OP_MOD) return jv_int(c, 0);
                    jx_fail(c, at, "integer overflow");
                }
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q--;
                    m += y;
                }
                return jv_int(c, op == OP_MOD ? m : q);
            }
            case OP_POW: {
                if (y < 0) {
                    if (x == 0) jx_fail(c, at, "0.0 cannot be raised to a negative power");
                    return jv_float(c, pow((double)x, (double)y));
                }
                int64_t res = 1, base = x;
                int64_t e = y;
                while (e) {
                    jx_charge(c, 1);
                    if (e & 1)
                        if (__builtin_mul_overflow(res, base, &res)) jx_fail(c, at, "integer overflow");
                    e >>= 1;
                    if (e && __builtin_mul_overflow(base, base, &base)) jx_fail(c, at, "integer overflow");
                }
                return jv_int(c, res);
            }
            }
        } else {
            double x = jv_num(a), y = jv_num(b);
            switch (op) {
            case OP_ADD: return jv_float(c, x + y);
            case OP_SUB: return jv_float(c, x - y);
            case OP_MUL: return jv_float(c, x * y);
            case OP_DIV:
                if (y == 0) jx_fail(c, at, "float division by zero");
                return jv_float(c, x / y);
            case OP_FLOORDIV:
            case OP_MOD: {
                if (y == 0) jx_fail(c, at, "float modulo");
                /* CPython's float_divmod */
                double m = fmod(x, y), d = (x - m) / y;
                if (m != 0) {
                    if ((y < 0) != (m < 0)) {
                        m += y;
                        d -= 1.0;
                    }
                } else {
                    m = copysign(0.0, y);
                }
                double fd;
                if (d != 0) {
                    fd = floor(d);
                    if (d - fd > 0.5) fd += 1.0;
                } else {
                    fd = copysign(0.0, x / y);
                }
                return jv_float(c, op == OP_MOD ? m : fd);
            }
            case OP_POW:
                if (x == 0 && y < 0) jx_fail(c, at, "0.0 cannot be raised to a negative power");
                return jv_float(c, pow(x, y));
            }
        }
    }
    if (op == OP_ADD) {
        if (a->kind == JV_STR && b->kind == JV_STR) {
            jbuf buf = newbuf(c);
            jb_put(c, &buf, a->s.p, a->s.n);
            jb_put(c, &buf, b->s.p, b->s.n);
            return B(c, &buf);
        }
        if (a->kind == JV_LIST && b->kind == JV_LIST && a->sub == b->sub && (a->sub == JL_LIST || a->sub == JL_TUPLE)) {
            jv *r = jv_list(c, a->sub, a->l.n + b->l.n);
            for (size_t i = 0; i < a->l.n; i++) jv_list_push(c, r, a->l.a[i]);
            for (size_t i = 0; i < b->l.n; i++) jv_list_push(c, r, b->l.a[i]);
            jx_charge(c, r->l.n);
            return r;
        }
        if (a->kind == JV_STR) jx_fail(c, at, "can only concatenate str (not \"%s\") to str", jv_typename(b));
        if (a->kind == JV_LIST && (a->sub == JL_LIST || a->sub == JL_TUPLE))
            jx_fail(c, at, "can only concatenate %s (not \"%s\") to %s", jv_typename(a), jv_typename(b), jv_typename(a));
    }
    if (op == OP_MUL) {
        if ((a->kind == JV_STR || (a->kind == JV_LIST && (a->sub == JL_LIST || a->sub == JL_TUPLE))) &&
            (b->kind == JV_INT || b->kind == JV_BOOL))
            return repeat(c, at, a, b->kind == JV_INT ? b->i : b->b);
        if ((b->kind == JV_STR || (b->kind == JV_LIST && (b->sub == JL_LIST || b->sub == JL_TUPLE))) &&
            (a->kind == JV_INT || a->kind == JV_BOOL))
            return repeat(c, at, b, a->kind == JV_INT ? a->i : a->b);
    }
    if (op == OP_MOD && a->kind == JV_STR) return str_percent(c, at, a, b);
    jx_fail(c, at, "unsupported operand type(s) for %s: '%s' and '%s'", op_sym(op), jv_typename(a), jv_typename(b));
}

/* printf-style "%s" % args: s, r, d, i, x, X, o, f, e, g, with flags, width and
 * precision. Strings are padded and cut by code points, as Python does (printf would
 * count bytes, and a precision could cut a character in half); numbers go through
 * snprintf. A width or precision above FORMAT_MAX_WIDTH is refused: a template must not
 * be able to ask for gigabytes of padding. */
#define FORMAT_MAX_WIDTH 4096

typedef struct {
    bool left;         /* '-' flag */
    long width, prec;  /* -1 where absent */
} pct_spec;

/* The digits at *p as a number (0 where there are none), *p moved past them. */
static long spec_number(jctx *c, const jnode *at, const char **p) {
    long v = 0;
    for (; **p >= '0' && **p <= '9'; (*p)++) {
        v = v * 10 + (**p - '0');
        if (v > FORMAT_MAX_WIDTH) jx_fail(c, at, "format width or precision above %d", FORMAT_MAX_WIDTH);
    }
    return v;
}

/* The flags, width and precision of a %-spec (the characters after '%', before the
 * conversion: only "-+ #0123456789." ones, as collected), checked to be in that order. */
static pct_spec parse_pct_spec(jctx *c, const jnode *at, const char *p) {
    pct_spec ps = {false, -1, -1};
    while (*p && strchr("-+ #0", *p)) ps.left |= *p++ == '-';
    if (*p >= '1' && *p <= '9') ps.width = spec_number(c, at, &p);
    if (*p == '.') {
        p++;
        ps.prec = spec_number(c, at, &p);
    }
    if (*p) jx_fail(c, at, "unsupported format character '%c'", *p);
    return ps;
}

/* s (n bytes) cut to prec code points and padded with spaces to width code points. */
static void put_padded(jctx *c, jbuf *b, const char *s, size_t n, pct_spec ps) {
    size_t cut = 0, cps = 0;
    while (cut < n && (ps.prec < 0 || cps < (size_t)ps.prec)) {
        utf8_decode(s, n, &cut);
        cps++;
    }
    const size_t pad = ps.width > 0 && (size_t)ps.width > cps ? (size_t)ps.width - cps : 0;
    if (!ps.left)
        for (size_t k = 0; k < pad; k++) jb_putc(c, b, ' ');
    jb_put(c, b, s, cut);
    if (ps.left)
        for (size_t k = 0; k < pad; k++) jb_putc(c, b, ' ');
}

static jv *str_percent(jctx *c, const jnode *at, jv *fmt, jv *args) {
    jbuf b = newbuf(c);
    size_t ai = 0;
    bool tuple = args->kind == JV_LIST && args->sub == JL_TUPLE;
    for (size_t i = 0; i < fmt->s.n; i++) {
        char ch = fmt->s.p[i];
        if (ch != '%') {
            jb_putc(c, &b, ch);
            continue;
        }
        if (++i >= fmt->s.n) jx_fail(c, at, "incomplete format");
        char spec[32] = "%";
        size_t sn = 1;
        /* (a NUL byte is not a flag: strchr would find the string's own terminator) */
        while (i < fmt->s.n && fmt->s.p[i] && strchr("-+ #0123456789.", fmt->s.p[i]) && sn < 20) spec[sn++] = fmt->s.p[i++];
        if (i >= fmt->s.n) jx_fail(c, at, "incomplete format");
        char conv = fmt->s.p[i];
        if (conv == '%' && sn == 1) {
            jb_putc(c, &b, '%');
            continue;
        }
        const pct_spec ps = parse_pct_spec(c, at, spec + 1);
        jv *v;
        if (tuple) {
            if (ai >= args->l.n) jx_fail(c, at, "not enough arguments for format string");
            v = args->l.a[ai++];
        } else {
            if (ai++) jx_fail(c, at, "not enough arguments for format string");
            v = args;
        }
        char tmp[FORMAT_MAX_WIDTH + 400]; /* width or precision, and up to 309 digits of a double */
        switch (conv) {
        case 's':
        case 'r': {
            jbuf t = newbuf(c);
            if (conv == 's')
                py_str(c, &t, v);
            else
                py_repr(c, &t, v, 0);
            put_padded(c, &b, t.p ? t.p : "", t.n, ps);
            break;
        }
        case 'd':
        case 'i':
        case 'x':
        case 'X':
        case 'o': {
            if (!jv_is_num(v)) jx_fail(c, at, "%%%c format: a number is required, not %s", conv, jv_typename(v));
            long long n;
            if (v->kind == JV_FLOAT) { /* %d and %i truncate toward zero; Python refuses the others */
                if (conv != 'd' && conv != 'i') jx_fail(c, at, "%%%c format: an integer is required, not float", conv);
                if (!isfinite(v->f)) jx_fail(c, at, "cannot convert float %s to integer", isnan(v->f) ? "NaN" : "infinity");
                const double t = trunc(v->f);
                if (!(fabs(t) < 9.2e18)) { /* past long long: the double's own digits */
                    spec[sn++] = '.';
                    spec[sn++] = '0';
                    spec[sn++] = 'f';
                    spec[sn] = 0;
                    snprintf(tmp, sizeof tmp, spec, t);
                    jb_puts(c, &b, tmp);
                    break;
                }
                n = (long long)t;
            } else {
                n = v->kind == JV_BOOL ? v->b : v->i;
            }
            spec[sn++] = 'l';
            spec[sn++] = 'l';
            spec[sn++] = conv == 'i' ? 'd' : conv;
            spec[sn] = 0;
            snprintf(tmp, sizeof tmp, spec, n);
            jb_puts(c, &b, tmp);
            break;
        }
        case 'f':
        case 'F':
        case 'e':
        case 'E':
        case 'g':
        case 'G':
            if (!jv_is_num(v)) jx_fail(c, at, "must be real number, not %s", jv_typename(v));
            spec[sn++] = conv;
            spec[sn] = 0;
            snprintf(tmp, sizeof tmp, spec, jv_num(v));
            jb_puts(c, &b, tmp);
            break;
        default:
            if (conv > ' ' && conv < 127) jx_fail(c, at, "unsupported format character '%c'", conv);
            jx_fail(c, at, "unsupported format character (0x%02x)", (unsigned char)conv);
        }
    }
    bool mapping_like = !tuple && (args->kind == JV_LIST || args->kind == JV_DICT); /* Python skips the check */
    if (tuple ? ai < args->l.n : (ai == 0 && !mapping_like))
        jx_fail(c, at, "not all arguments converted during string formatting");
    return B(c, &b);
}

/* str.format with {}, {0}, {name}, {{ }}, !r/!s; format specs are not supported */
static jv *str_format(jctx *c, const jnode *at, jv *fmt, jargs *a) {
    jbuf b = newbuf(c);
    size_t auto_i = 0;
    for (size_t i = 0; i < fmt->s.n; i++) {
        char ch = fmt->s.p[i];
        if (ch == '{' && i + 1 < fmt->s.n && fmt->s.p[i + 1] == '{') {
            jb_putc(c, &b, '{');
            i++;
            continue;
        }
        if (ch == '}' && i + 1 < fmt->s.n && fmt->s.p[i + 1] == '}') {
            jb_putc(c, &b, '}');
            i++;
            continue;
        }
        if (ch != '{') {
            jb_putc(c, &b, ch);
            continue;
        }
        size_t e = i + 1;
        while (e < fmt->s.n && fmt->s.p[e] != '}') e++;
        if (e >= fmt->s.n) jx_fail(c, at, "Single '{' encountered in format string");
        char field[128];
        size_t fl = e - i - 1 < sizeof field - 1 ? e - i - 1 : sizeof field - 1;
        memcpy(field, fmt->s.p + i + 1, fl);
        field[fl] = 0;
        char conv = 's';
        char *bang = strchr(field, '!');
        if (strchr(field, ':')) jx_fail(c, at, "format specifications are not supported");
        if (bang) {
            conv = bang[1];
            *bang = 0;
        }
        jv *v;
        if (!field[0])
            v = auto_i < a->npos ? a->pos[auto_i++] : NULL;
        else if (field[0] >= '0' && field[0] <= '9')
            v = (size_t)atoi(field) < a->npos ? a->pos[atoi(field)] : NULL;
        else
            v = jx_arg(a, SIZE_MAX, field);
        if (!v) jx_fail(c, at, "format: missing argument '%s'", field);
        if (conv == 'r')
            py_repr(c, &b, v, 0);
        else
            py_str(c, &b, v);
        i = e;
    }
    return B(c, &b);
}

/* ---- sorting ------------------------------------------------------------------------ */

typedef struct {
    jctx *c;
    const jnode *at;
    bool ci;        /* case-insensitive: compare lowercased strings */
    bool reverse;
} sortcfg;

static jv *sort_key(jctx *c, jv *v, bool ci) {
    if (ci && v->kind == JV_STR) return str_case(c, v, CASE_LOWER);
    return v;
}

static void msort(sortcfg *cfg, jv **keys, size_t *idx, size_t *tmp, size_t n) {
    if (n < 2) return;
    size_t h = n / 2;
    msort(cfg, keys, idx, tmp, h);
    msort(cfg, keys, idx + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        int r = jv_compare(cfg->c, cfg->at, keys[idx[j]], keys[idx[i]]);
        if (cfg->reverse) r = -r;
        if (r < 0)
            tmp[k++] = idx[j++];
        else
            tmp[k++] = idx[i++];
    }
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, n * sizeof *idx);
}

/* stable sort of items by keys (both n long); returns a new list */
static jv *sort_by(jctx *c, const jnode *at, jv *items, jv **keys, bool reverse) {
    size_t n = items->l.n;
    size_t *idx = ja_alloc(&c->arena, (n + 1) * sizeof(size_t) * 2);
    for (size_t i = 0; i < n; i++) idx[i] = i;
    jx_charge(c, n * 8);
    sortcfg cfg = {c, at, false, reverse};
    msort(&cfg, keys, idx, idx + n, n);
    jv *r = jv_list(c, JL_LIST, n);
    for (size_t i = 0; i < n; i++) jv_list_push(c, r, items->l.a[idx[i]]);
    return r;
}

/* jinja2's attribute paths: "a.b.0" via item lookup */
static jv *attr_path(jctx *c, const jnode *at, jv *v, jv *path) {
    if (path->kind == JV_INT) return jx_getitem(c, at, v, path);
    need_str(c, at, path, "attribute");
    const char *p = path->s.p;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        bool digits = n > 0;
        for (size_t i = 0; i < n; i++)
            if (p[i] < '0' || p[i] > '9') digits = false;
        jv *key = digits ? jv_int(c, strtoll(p, NULL, 10)) : S(c, p, n);
        v = jx_getitem(c, at, v, key);
        if (!dot) return v;
        p = dot + 1;
    }
}

/* ---- filters ------------------------------------------------------------------------ */

#define FILTER(name) static jv *f_##name(jctx *c, const jnode *at, jv *x, jargs *a)

static const char *const no_kw[] = {NULL};

static jv *length_of(jctx *c, const jnode *at, jv *x) {
    switch (x->kind) {
    case JV_UNDEF: return jv_int(c, 0);
    case JV_STR: return jv_int(c, (int64_t)jv_str_ncp(x));
    case JV_LIST:
        if (x->sub == JL_GEN) jx_fail(c, at, "object of type 'generator' has no len()");
        return jv_int(c, (int64_t)x->l.n);
    case JV_DICT:
        if (x->sub == JD_DICT) return jv_int(c, (int64_t)x->d.n);
        break;
    default: break;
    }
    jx_fail(c, at, "object of type '%s' has no len()", jv_typename(x));
}

FILTER(length) {
    jx_check_args(c, at, "length", a, 0, no_kw);
    return length_of(c, at, x);
}

FILTER(string) {
    jx_check_args(c, at, "string", a, 0, no_kw);
    return py_to_str(c, x);
}

FILTER(safe) {
    (void)at;
    (void)a;
    if (x->kind == JV_STR) return x;
    return py_to_str(c, x);
}

FILTER(upper) { return str_case(c, py_to_str(c, x), CASE_UPPER); }
FILTER(lower) { return str_case(c, py_to_str(c, x), CASE_LOWER); }
FILTER(capitalize) { return str_case(c, py_to_str(c, x), CASE_CAPITALIZE); }
FILTER(title) { return jinja_title(c, py_to_str(c, x)); }

FILTER(trim) {
    static const char *const kw[] = {"chars", NULL};
    jx_check_args(c, at, "trim", a, 1, kw);
    jv *chars = jx_arg(a, 0, "chars");
    if (chars && chars->kind != JV_NONE) need_str(c, at, chars, "trim() chars");
    return str_strip(c, py_to_str(c, x), chars, 3);
}

FILTER(default) {
    static const char *const kw[] = {"default_value", "boolean", NULL};
    jx_check_args(c, at, "default", a, 2, kw);
    jv *dv = jx_arg(a, 0, "default_value");
    jv *boolean = jx_arg(a, 1, "boolean");
    if (!dv) dv = S(c, "", 0);
    if (x->kind == JV_UNDEF || (boolean && jv_truthy(c, boolean) && !jv_truthy(c, x))) return dv;
    return x;
}

FILTER(tojson) {
    static const char *const kw[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    jx_check_args(c, at, "tojson", a, 4, kw);
    jv *ea = jx_arg(a, 0, "ensure_ascii"), *ind = jx_arg(a, 1, "indent"), *sep = jx_arg(a, 2, "separators"),
       *sk = jx_arg(a, 3, "sort_keys");
    pyjson_opts o = {0};
    o.ensure_ascii = ea && jv_truthy(c, ea);
    o.sort_keys = sk && jv_truthy(c, sk);
    if (ind && ind->kind != JV_NONE) {
        o.indent_set = true;
        if (ind->kind == JV_STR) {
            o.indent = ind->s.p;
            o.indent_len = ind->s.n;
        } else {
            int64_t n = need_int(c, at, ind, "indent");
            if (n > 1000) jx_fail(c, at, "indent too large");
            char *sp = ja_alloc(&c->arena, (size_t)(n > 0 ? n : 0) + 1);
            memset(sp, ' ', (size_t)(n > 0 ? n : 0));
            o.indent = sp;
            o.indent_len = (size_t)(n > 0 ? n : 0);
        }
    }
    o.item_sep = o.indent_set ? "," : ", ";
    o.key_sep = ": ";
    if (sep && sep->kind != JV_NONE) {
        if (sep->kind != JV_LIST || sep->l.n != 2 || sep->l.a[0]->kind != JV_STR || sep->l.a[1]->kind != JV_STR)
            jx_fail(c, at, "tojson separators must be a pair of strings");
        o.item_sep = sep->l.a[0]->s.p;
        o.key_sep = sep->l.a[1]->s.p;
    }
    o.item_sep_len = strlen(o.item_sep);
    o.key_sep_len = strlen(o.key_sep);
    if (sep && sep->kind == JV_LIST) {
        o.item_sep_len = sep->l.a[0]->s.n;
        o.key_sep_len = sep->l.a[1]->s.n;
    }
    jbuf b = newbuf(c);
    pyjson_dump(c, &b, x, &o);
    return B(c, &b);
}

FILTER(first) {
    jx_check_args(c, at, "first", a, 0, no_kw);
    jv *l = jx_iter_list(c, at, x);
    return l->l.n ? l->l.a[0] : jv_undef(c, "No first item, sequence was empty.");
}

FILTER(last) {
    jx_check_args(c, at, "last", a, 0, no_kw);
    if (x->kind == JV_LIST && x->sub == JL_GEN) jx_fail(c, at, "'generator' object is not reversible");
    jv *l = jx_iter_list(c, at, x);
    return l->l.n ? l->l.a[l->l.n - 1] : jv_undef(c, "No last item, sequence was empty.");
}

FILTER(join) {
    static const char *const kw[] = {"d", "attribute", NULL};
    jx_check_args(c, at, "join", a, 2, kw);
    jv *d = jx_arg(a, 0, "d"), *attr = jx_arg(a, 1, "attribute");
    if (d) d = py_to_str(c, d);
    jv *l = jx_iter_list(c, at, x);
    jbuf b = newbuf(c);
    for (size_t i = 0; i < l->l.n; i++) {
        if (i && d) jb_put(c, &b, d->s.p, d->s.n);
        jv *v = attr ? attr_path(c, at, l->l.a[i], attr) : l->l.a[i];
        py_str(c, &b, v);
    }
    return B(c, &b);
}

FILTER(list) {
    jx_check_args(c, at, "list", a, 0, no_kw);
    jv *l = jx_iter_list(c, at, x);
    jv *r = jv_list(c, JL_LIST, l->l.n);
    for (size_t i = 0; i < l->l.n; i++) jv_list_push(c, r, l->l.a[i]);
    jx_charge(c, l->l.n);
    return r;
}

FILTER(items) {
    jx_check_args(c, at, "items", a, 0, no_kw);
    if (x->kind == JV_UNDEF) return jv_list(c, JL_GEN, 0);
    if (x->kind != JV_DICT || x->sub != JD_DICT) jx_fail(c, at, "Can only get item pairs from a mapping.");
    jv *r = jv_list(c, JL_GEN, x->d.n);
    for (size_t i = 0; i < x->d.n; i++) {
        jv *t = jv_list(c, JL_TUPLE, 2);
        jv_list_push(c, t, x->d.k[i]);
        jv_list_push(c, t, x->d.v[i]);
        jv_list_push(c, r, t);
    }
    jx_charge(c, x->d.n);
    return r;
}

FILTER(dictsort) {
    static const char *const kw[] = {"case_sensitive", "by", "reverse", NULL};
    jx_check_args(c, at, "dictsort", a, 3, kw);
    jv *cs = jx_arg(a, 0, "case_sensitive"), *by = jx_arg(a, 1, "by"), *rev = jx_arg(a, 2, "reverse");
    if (x->kind != JV_DICT || x->sub != JD_DICT) jx_fail(c, at, "dictsort expects a mapping, got %s", jv_typename(x));
    int pos = 0;
    if (by) {
        need_str(c, at, by, "by");
        if (!strcmp(by->s.p, "value"))
            pos = 1;
        else if (strcmp(by->s.p, "key"))
            jx_fail(c, at, "You can only sort by either \"key\" or \"value\"");
    }
    bool ci = !(cs && jv_truthy(c, cs));
    jv *items = jv_list(c, JL_LIST, x->d.n);
    jv **keys = ja_alloc(&c->arena, (x->d.n + 1) * sizeof(jv *));
    for (size_t i = 0; i < x->d.n; i++) {
        jv *t = jv_list(c, JL_TUPLE, 2);
        jv_list_push(c, t, x->d.k[i]);
        jv_list_push(c, t, x->d.v[i]);
        jv_list_push(c, items, t);
        keys[i] = sort_key(c, pos ? x->d.v[i] : x->d.k[i], ci);
    }
    return sort_by(c, at, items, keys, rev && jv_truthy(c, rev));
}

FILTER(sort) {
    static const char *const kw[] = {"reverse", "case_sensitive", "attribute", NULL};
    jx_check_args(c, at, "sort", a, 3, kw);
    jv *rev = jx_arg(a, 0, "reverse"), *cs = jx_arg(a, 1, "case_sensitive"), *attr = jx_arg(a, 2, "attribute");
    jv *l = jx_iter_list(c, at, x);
    bool ci = !(cs && jv_truthy(c, cs));
    jv **keys = ja_alloc(&c->arena, (l->l.n + 1) * sizeof(jv *));
    for (size_t i = 0; i < l->l.n; i++) keys[i] = sort_key(c, attr ? attr_path(c, at, l->l.a[i], attr) : l->l.a[i], ci);
    return sort_by(c, at, l, keys, rev && jv_truthy(c, rev));
}

FILTER(unique) {
    static const char *const kw[] = {"case_sensitive", "attribute", NULL};
    jx_check_args(c, at, "unique", a, 2, kw);
    jv *cs = jx_arg(a, 0, "case_sensitive"), *attr = jx_arg(a, 1, "attribute");
    bool ci = !(cs && jv_truthy(c, cs));
    jv *l = jx_iter_list(c, at, x);
    jv *r = jv_list(c, JL_GEN, 0);
    jv *seen = jv_list(c, JL_LIST, 0);
    for (size_t i = 0; i < l->l.n; i++) {
        jv *k = sort_key(c, attr ? attr_path(c, at, l->l.a[i], attr) : l->l.a[i], ci);
        bool dup = false;
        jx_charge(c, seen->l.n);
        for (size_t j = 0; j < seen->l.n && !dup; j++) dup = jv_equal(c, seen->l.a[j], k);
        if (dup) continue;
        jv_list_push(c, seen, k);
        jv_list_push(c, r, l->l.a[i]);
    }
    return r;
}

static jv *minmax(jctx *c, const jnode *at, jv *x, jargs *a, int sign) {
    static const char *const kw[] = {"case_sensitive", "attribute", NULL};
    jx_check_args(c, at, sign > 0 ? "max" : "min", a, 2, kw);
    jv *cs = jx_arg(a, 0, "case_sensitive"), *attr = jx_arg(a, 1, "attribute");
    bool ci = !(cs && jv_truthy(c, cs));
    jv *l = jx_iter_list(c, at, x);
    if (!l->l.n) return jv_undef(c, "No aggregated item, sequence was empty.");
    jv *best = l->l.a[0], *bk = sort_key(c, attr ? attr_path(c, at, best, attr) : best, ci);
    for (size_t i = 1; i < l->l.n; i++) {
        jv *k = sort_key(c, attr ? attr_path(c, at, l->l.a[i], attr) : l->l.a[i], ci);
        if (jv_compare(c, at, k, bk) * sign > 0) {
            best = l->l.a[i];
            bk = k;
        }
    }
    return best;
}
FILTER(max) { return minmax(c, at, x, a, 1); }
FILTER(min) { return minmax(c, at, x, a, -1); }

FILTER(sum) {
    static const char *const kw[] = {"attribute", "start", NULL};
    jx_check_args(c, at, "sum", a, 2, kw);
    jv *attr = jx_arg(a, 0, "attribute"), *start = jx_arg(a, 1, "start");
    jv *acc = start ? start : jv_int(c, 0);
    jv *l = jx_iter_list(c, at, x);
    for (size_t i = 0; i < l->l.n; i++) acc = jx_binop(c, at, OP_ADD, acc, attr ? attr_path(c, at, l->l.a[i], attr) : l->l.a[i]);
    return acc;
}

FILTER(reverse) {
    jx_check_args(c, at, "reverse", a, 0, no_kw);
    if (x->kind == JV_STR) {
        jv *l = jx_iter_list(c, at, x);
        jbuf b = newbuf(c);
        for (size_t i = l->l.n; i-- > 0;) jb_put(c, &b, l->l.a[i]->s.p, l->l.a[i]->s.n);
        return B(c, &b);
    }
    jv *l = jx_iter_list(c, at, x);
    /* reversed() of a sequence is an iterator; a generator is listed and reversed instead */
    jv *r = jv_list(c, x->kind == JV_LIST && x->sub == JL_GEN ? JL_LIST : JL_GEN, l->l.n);
    for (size_t i = l->l.n; i-- > 0;) jv_list_push(c, r, l->l.a[i]);
    jx_charge(c, l->l.n);
    return r;
}

FILTER(replace) {
    static const char *const kw[] = {"old", "new", "count", NULL};
    jx_check_args(c, at, "replace", a, 3, kw);
    jv *old = jx_arg(a, 0, "old"), *nw = jx_arg(a, 1, "new"), *cnt = jx_arg(a, 2, "count");
    if (!old || !nw) jx_fail(c, at, "replace() needs old and new");
    int64_t n = cnt && cnt->kind != JV_NONE ? need_int(c, at, cnt, "count") : -1;
    return str_replace(c, py_to_str(c, x), py_to_str(c, old), py_to_str(c, nw), n);
}

/* Python's int() from a string: optional sign, digits with single underscores, whitespace around */
static bool parse_pyint(const char *s, size_t n, int64_t base, int64_t *out) {
    size_t i = 0;
    while (i < n && isspace((unsigned char)s[i])) i++;
    while (n > i && isspace((unsigned char)s[n - 1])) n--;
    bool neg = false;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (base == 16 && n - i > 2 && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X')) i += 2;
    if (i >= n) return false;
    uint64_t v = 0;
    bool prev_us = true;
    for (; i < n; i++) {
        char ch = s[i];
        if (ch == '_') {
            if (prev_us) return false;
            prev_us = true;
            continue;
        }
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'z' ? ch - 'a' + 10 : ch >= 'A' && ch <= 'Z' ? ch - 'A' + 10 : 99;
        if (d >= base) return false;
        prev_us = false;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) return false;
        v = v * (uint64_t)base + (uint64_t)d;
    }
    if (prev_us) return false;
    if (v > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) return false;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static bool parse_pyfloat(const char *s, size_t n, double *out) {
    char tmp[128];
    size_t k = 0;
    size_t i = 0;
    while (i < n && isspace((unsigned char)s[i])) i++;
    while (n > i && isspace((unsigned char)s[n - 1])) n--;
    if (i >= n || n - i >= sizeof tmp) return false;
    for (; i < n; i++)
        if (s[i] != '_') tmp[k++] = s[i];
    tmp[k] = 0;
    if (strpbrk(tmp, "xXpP")) return false;
    char *end;
    double v = strtod(tmp, &end);
    if (*end || end == tmp) return false;
    *out = v;
    return true;
}

FILTER(int) {
    static const char *const kw[] = {"default", "base", NULL};
    jx_check_args(c, at, "int", a, 2, kw);
    jv *def = jx_arg(a, 0, "default"), *basev = jx_arg(a, 1, "base");
    int64_t base = basev ? need_int(c, at, basev, "base") : 10;
    if (x->kind == JV_UNDEF) undef_fail(c, at, x);
    if (base < 2 || base > 36) base = 10;
    switch (x->kind) {
    case JV_INT: return x;
    case JV_BOOL: return jv_int(c, x->b);
    case JV_FLOAT:
        if (isfinite(x->f) && fabs(x->f) < 9.2e18) return jv_int(c, (int64_t)x->f);
        break;
    case JV_STR: {
        int64_t v;
        if (parse_pyint(x->s.p, x->s.n, base, &v)) return jv_int(c, v);
        double d;
        if (parse_pyfloat(x->s.p, x->s.n, &d) && isfinite(d) && fabs(d) < 9.2e18) return jv_int(c, (int64_t)d);
        break;
    }
    default: break;
    }
    return def ? def : jv_int(c, 0);
}

FILTER(float) {
    static const char *const kw[] = {"default", NULL};
    jx_check_args(c, at, "float", a, 1, kw);
    jv *def = jx_arg(a, 0, "default");
    if (x->kind == JV_UNDEF) undef_fail(c, at, x);
    if (jv_is_num(x)) return jv_float(c, jv_num(x));
    double d;
    if (x->kind == JV_STR && parse_pyfloat(x->s.p, x->s.n, &d)) return jv_float(c, d);
    return def ? def : jv_float(c, 0.0);
}

FILTER(abs) {
    jx_check_args(c, at, "abs", a, 0, no_kw);
    if (x->kind == JV_INT) {
        if (x->i == INT64_MIN) jx_fail(c, at, "integer overflow");
        return jv_int(c, x->i < 0 ? -x->i : x->i);
    }
    if (x->kind == JV_BOOL) return jv_int(c, x->b);
    if (x->kind == JV_FLOAT) return jv_float(c, fabs(x->f));
    jx_fail(c, at, "bad operand type for abs(): '%s'", jv_typename(x));
}

static double py_round(double v, int64_t nd) {
    if (!isfinite(v) || nd > 300) return v;
    if (nd < -308) return 0.0 * v;
    if (nd >= 0) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%.*f", (int)nd, v);
        return strtod(tmp, NULL);
    }
    double p = pow(10.0, (double)-nd);
    return nearbyint(v / p) * p;
}

FILTER(round) {
    static const char *const kw[] = {"precision", "method", NULL};
    jx_check_args(c, at, "round", a, 2, kw);
    jv *pv = jx_arg(a, 0, "precision"), *mv = jx_arg(a, 1, "method");
    int64_t prec = pv ? need_int(c, at, pv, "precision") : 0;
    const char *m = mv ? need_str(c, at, mv, "method")->s.p : "common";
    if (strcmp(m, "common") && strcmp(m, "ceil") && strcmp(m, "floor"))
        jx_fail(c, at, "method must be common, ceil or floor");
    if (!jv_is_num(x)) jx_fail(c, at, "type %s doesn't define __round__ method", jv_typename(x));
    if (!strcmp(m, "common")) {
        if (x->kind != JV_FLOAT) { /* round(int, n) stays an int */
            int64_t v = x->kind == JV_BOOL ? x->b : x->i;
            if (prec >= 0) return jv_int(c, v);
            return jv_int(c, (int64_t)py_round((double)v, prec));
        }
        return jv_float(c, py_round(x->f, prec));
    }
    if (prec > 300) prec = 300;
    double p = pow(10.0, (double)prec);
    double v = jv_num(x) * p;
    v = m[0] == 'c' ? ceil(v) : floor(v);
    return jv_float(c, v / p);
}

FILTER(indent) {
    static const char *const kw[] = {"width", "first", "blank", NULL};
    jx_check_args(c, at, "indent", a, 3, kw);
    jv *w = jx_arg(a, 0, "width"), *first = jx_arg(a, 1, "first"), *blank = jx_arg(a, 2, "blank");
    jv *ind;
    if (w && w->kind == JV_STR)
        ind = w;
    else {
        int64_t n = w ? need_int(c, at, w, "width") : 4;
        if (n < 0) n = 0;
        if (n > 10000) jx_fail(c, at, "indent width too large");
        char *sp = ja_alloc(&c->arena, (size_t)n + 1);
        memset(sp, ' ', (size_t)n);
        ind = jv_str_nocopy(c, sp, (size_t)n);
    }
    if (x->kind == JV_UNDEF) undef_fail(c, at, x);
    if (x->kind != JV_STR) jx_fail(c, at, "unsupported operand type(s) for +=: '%s' and 'str'", jv_typename(x));
    jv *s = x;
    jbuf t = newbuf(c);
    jb_put(c, &t, s->s.p, s->s.n);
    jb_putc(c, &t, '\n');
    jv *lines = str_splitlines(c, B(c, &t), false);
    jbuf b = newbuf(c);
    if (first && jv_truthy(c, first)) jb_put(c, &b, ind->s.p, ind->s.n);
    bool bl = blank && jv_truthy(c, blank);
    for (size_t i = 0; i < lines->l.n; i++) {
        jv *ln = lines->l.a[i];
        if (i) {
            jb_putc(c, &b, '\n');
            if (bl || ln->s.n) jb_put(c, &b, ind->s.p, ind->s.n);
        }
        jb_put(c, &b, ln->s.p, ln->s.n);
    }
    return B(c, &b);
}

FILTER(wordcount) {
    jx_check_args(c, at, "wordcount", a, 0, no_kw);
    jv *s = py_to_str(c, x);
    int64_t n = 0;
    bool in = false;
    size_t i = 0;
    while (i < s->s.n) {
        int cp = utf8_decode(s->s.p, s->s.n, &i);
        bool w = cp == '_' || cp_alnum(cp);
        if (w && !in) n++;
        in = w;
    }
    return jv_int(c, n);
}

FILTER(escape) {
    jx_check_args(c, at, "escape", a, 0, no_kw);
    jv *s = py_to_str(c, x);
    jbuf b = newbuf(c);
    for (size_t i = 0; i < s->s.n; i++) {
        char ch = s->s.p[i];
        switch (ch) {
        case '&': jb_puts(c, &b, "&amp;"); break;
        case '<': jb_puts(c, &b, "&lt;"); break;
        case '>': jb_puts(c, &b, "&gt;"); break;
        case '"': jb_puts(c, &b, "&#34;"); break;
        case '\'': jb_puts(c, &b, "&#39;"); break;
        default: jb_putc(c, &b, ch);
        }
    }
    return B(c, &b);
}

FILTER(center) {
    static const char *const kw[] = {"width", NULL};
    jx_check_args(c, at, "center", a, 1, kw);
    jv *w = jx_arg(a, 0, "width");
    int64_t width = w ? need_int(c, at, w, "width") : 80;
    jv *s = py_to_str(c, x);
    int64_t n = (int64_t)jv_str_ncp(s);
    if (width > 100000) jx_fail(c, at, "width too large");
    if (width <= n) return s;
    int64_t marg = width - n, left = marg / 2 + (marg & width & 1);
    jbuf b = newbuf(c);
    for (int64_t i = 0; i < left; i++) jb_putc(c, &b, ' ');
    jb_put(c, &b, s->s.p, s->s.n);
    for (int64_t i = 0; i < marg - left; i++) jb_putc(c, &b, ' ');
    return B(c, &b);
}

FILTER(format) {
    jv *s = py_to_str(c, x);
    if (a->nkw) jx_fail(c, at, "format filter with keyword arguments is not supported");
    jv *t = jv_list(c, JL_TUPLE, a->npos);
    for (size_t i = 0; i < a->npos; i++) jv_list_push(c, t, a->pos[i]);
    return str_percent(c, at, s, t);
}

FILTER(batch) {
    static const char *const kw[] = {"linecount", "fill_with", NULL};
    jx_check_args(c, at, "batch", a, 2, kw);
    jv *lc = jx_arg(a, 0, "linecount"), *fill = jx_arg(a, 1, "fill_with");
    int64_t n = lc ? need_int(c, at, lc, "linecount") : 0;
    if (n <= 0) jx_fail(c, at, "batch size must be positive");
    jv *l = jx_iter_list(c, at, x);
    jv *r = jv_list(c, JL_GEN, 0), *cur = NULL;
    for (size_t i = 0; i < l->l.n; i++) {
        if (!cur || (int64_t)cur->l.n == n) {
            cur = jv_list(c, JL_LIST, 0);
            jv_list_push(c, r, cur);
        }
        jv_list_push(c, cur, l->l.a[i]);
    }
    if (cur && fill && fill->kind != JV_NONE)
        while ((int64_t)cur->l.n < n) jv_list_push(c, cur, fill);
    return r;
}

FILTER(attr) {
    static const char *const kw[] = {"name", NULL};
    jx_check_args(c, at, "attr", a, 1, kw);
    jv *nm = jx_arg(a, 0, "name");
    if (!nm) jx_fail(c, at, "attr() needs a name");
    need_str(c, at, nm, "attribute name");
    if (x->kind == JV_UNDEF) undef_fail(c, at, x);
    jv *m = jx_method(c, at, x, nm->s.p);
    if (m) return m;
    if (x->kind == JV_DICT && x->sub != JD_DICT) {
        jv *v = jv_dict_gets(x, nm->s.p);
        if (v) return v;
    }
    return jv_undef(c, "'%s' object has no attribute '%s'", jv_typename(x), nm->s.p);
}

/* map / select / reject / selectattr / rejectattr */
static jargs sub_args(jctx *c, jargs *a, size_t skip) {
    jargs s = *a;
    s.npos = a->npos > skip ? a->npos - skip : 0;
    s.pos = a->pos + (a->npos > skip ? skip : a->npos);
    (void)c;
    return s;
}

FILTER(map) {
    if (!jv_truthy(c, x)) return jv_list(c, JL_GEN, 0); /* jinja2 guards with "if seq:" */
    jv *l = jx_iter_list(c, at, x);
    jv *r = jv_list(c, JL_GEN, l->l.n);
    jv *attr = NULL, *def = NULL;
    for (size_t i = 0; i < a->nkw; i++) {
        if (!strcmp(a->kwn[i], "attribute"))
            attr = a->kwv[i];
        else if (!strcmp(a->kwn[i], "default"))
            def = a->kwv[i];
    }
    if (attr) {
        for (size_t i = 0; i < l->l.n; i++) {
            jv *v = attr_path(c, at, l->l.a[i], attr);
            if (v->kind == JV_UNDEF && def) v = def;
            jv_list_push(c, r, v);
        }
        return r;
    }
    if (a->npos < 1) jx_fail(c, at, "map requires a filter argument");
    jv *name = need_str(c, at, a->pos[0], "filter name");
    jfilter_fn fn = jx_find_filter(name->s.p);
    if (!fn) jx_fail(c, at, "no filter named '%s'", name->s.p);
    jargs rest = sub_args(c, a, 1);
    for (size_t i = 0; i < l->l.n; i++) jv_list_push(c, r, fn(c, at, l->l.a[i], &rest));
    return r;
}

static jv *select_impl(jctx *c, const jnode *at, jv *x, jargs *a, bool attr_mode, bool want) {
    jv *r = jv_list(c, JL_GEN, 0);
    if (!jv_truthy(c, x)) return r; /* jinja2 guards with "if seq:" */
    jv *l = jx_iter_list(c, at, x);
    size_t k = 0;
    jv *attr = NULL;
    if (attr_mode) {
        if (a->npos < 1) jx_fail(c, at, "missing attribute argument");
        attr = a->pos[k++];
    }
    jtest_fn tf = NULL;
    if (a->npos > k) {
        jv *tn = need_str(c, at, a->pos[k++], "test name");
        tf = jx_find_test(tn->s.p);
        if (!tf) jx_fail(c, at, "no test named '%s'", tn->s.p);
    }
    jargs rest = sub_args(c, a, k);
    for (size_t i = 0; i < l->l.n; i++) {
        jv *v = attr ? attr_path(c, at, l->l.a[i], attr) : l->l.a[i];
        bool t = tf ? tf(c, at, v, &rest) : jv_truthy(c, v);
        if (t == want) jv_list_push(c, r, l->l.a[i]);
    }
    return r;
}
FILTER(select) { return select_impl(c, at, x, a, false, true); }
FILTER(reject) { return select_impl(c, at, x, a, false, false); }
FILTER(selectattr) { return select_impl(c, at, x, a, true, true); }
FILTER(rejectattr) { return select_impl(c, at, x, a, true, false); }

FILTER(groupby) {
    static const char *const kw[] = {"attribute", "default", "case_sensitive", NULL};
    jx_check_args(c, at, "groupby", a, 3, kw);
    jv *attr = jx_arg(a, 0, "attribute"), *def = jx_arg(a, 1, "default"), *cs = jx_arg(a, 2, "case_sensitive");
    if (!attr) jx_fail(c, at, "groupby needs an attribute");
    bool ci = !(cs && jv_truthy(c, cs));
    jv *l = jx_iter_list(c, at, x);
    jv **keys = ja_alloc(&c->arena, (l->l.n + 1) * sizeof(jv *));
    jv **raw = ja_alloc(&c->arena, (l->l.n + 1) * sizeof(jv *));
    for (size_t i = 0; i < l->l.n; i++) {
        jv *v = attr_path(c, at, l->l.a[i], attr);
        if (v->kind == JV_UNDEF && def) v = def;
        raw[i] = v;
        keys[i] = sort_key(c, v, ci);
    }
    size_t n = l->l.n;
    size_t *idx = ja_alloc(&c->arena, (n + 1) * sizeof(size_t) * 2);
    for (size_t i = 0; i < n; i++) idx[i] = i;
    sortcfg cfg = {c, at, false, false};
    msort(&cfg, keys, idx, idx + n, n);
    jv *r = jv_list(c, JL_LIST, 0);
    jv *grp = NULL, *gk = NULL;
    for (size_t j = 0; j < n; j++) {
        size_t i = idx[j];
        if (!grp || !jv_equal(c, gk, keys[i])) {
            gk = keys[i];
            grp = jv_list(c, JL_LIST, 0);
            jv *t = jv_list(c, JL_TUPLE, 2);
            jv_list_push(c, t, ci ? raw[i] : keys[i]);
            jv_list_push(c, t, grp);
            jv_list_push(c, r, t);
        }
        jv_list_push(c, grp, l->l.a[i]);
    }
    return r;
}

/* ---- tests -------------------------------------------------------------------------- */

#define TEST(name) static bool t_##name(jctx *c, const jnode *at, jv *x, jargs *a)

static jv *test_arg(jctx *c, const jnode *at, jargs *a, const char *test) {
    if (a->npos < 1 && a->nkw < 1) jx_fail(c, at, "test '%s' needs an argument", test);
    return a->npos ? a->pos[0] : a->kwv[0];
}

TEST(defined) { return x->kind != JV_UNDEF; }
TEST(undefined) { return x->kind == JV_UNDEF; }
TEST(none) { return x->kind == JV_NONE; }
TEST(string) { return x->kind == JV_STR; }
TEST(number) { return jv_is_num(x); }
TEST(integer) { return x->kind == JV_INT; }
TEST(float) { return x->kind == JV_FLOAT; }
TEST(boolean) { return x->kind == JV_BOOL; }
TEST(true) { return x->kind == JV_BOOL && x->b; }
TEST(false) { return x->kind == JV_BOOL && !x->b; }
TEST(mapping) { return x->kind == JV_DICT && x->sub == JD_DICT; }
TEST(iterable) { return x->kind == JV_UNDEF || x->kind == JV_STR || x->kind == JV_LIST || (x->kind == JV_DICT && x->sub == JD_DICT); }
TEST(sequence) {
    return x->kind == JV_UNDEF || x->kind == JV_STR || (x->kind == JV_LIST && (x->sub == JL_LIST || x->sub == JL_TUPLE)) ||
           (x->kind == JV_DICT && x->sub == JD_DICT);
}
TEST(callable) { return x->kind == JV_FUNC || (x->kind == JV_DICT && x->sub == JD_LOOP); }
/* jinja2: value % 2 == 1 / == 0, so 2.5 is neither */
TEST(odd) { return jv_equal(c, jx_binop(c, at, OP_MOD, x, jv_int(c, 2)), jv_int(c, 1)); }
TEST(even) { return jv_equal(c, jx_binop(c, at, OP_MOD, x, jv_int(c, 2)), jv_int(c, 0)); }
TEST(divisibleby) {
    jv *n = test_arg(c, at, a, "divisibleby");
    jv *m = jx_binop(c, at, OP_MOD, x, n);
    return jv_num(m) == 0;
}
TEST(eq) { return jv_equal(c, x, test_arg(c, at, a, "eq")); }
TEST(ne) { return !jv_equal(c, x, test_arg(c, at, a, "ne")); }
TEST(lt) { return jv_compare(c, at, x, test_arg(c, at, a, "lt")) < 0; }
TEST(le) { return jv_compare(c, at, x, test_arg(c, at, a, "le")) <= 0; }
TEST(gt) { return jv_compare(c, at, x, test_arg(c, at, a, "gt")) > 0; }
TEST(ge) { return jv_compare(c, at, x, test_arg(c, at, a, "ge")) >= 0; }
TEST(in) {
    jv *seq = test_arg(c, at, a, "in");
    switch (seq->kind) {
    case JV_STR:
        if (x->kind != JV_STR) jx_fail(c, at, "'in <string>' requires string as left operand, not %s", jv_typename(x));
        return memmem(seq->s.p, seq->s.n, x->s.p, x->s.n) != NULL || x->s.n == 0;
    case JV_LIST:
        for (size_t i = 0; i < seq->l.n; i++)
            if (jv_equal(c, seq->l.a[i], x)) return true;
        return false;
    case JV_DICT:
        if ((x->kind == JV_LIST && x->sub != JL_TUPLE) || x->kind == JV_DICT) jx_fail(c, at, "unhashable type: '%s'", jv_typename(x));
        return seq->sub == JD_DICT && jv_dict_get(seq, x) != NULL;
    case JV_UNDEF: return false;
    default: jx_fail(c, at, "argument of type '%s' is not iterable", jv_typename(seq));
    }
}
TEST(sameas) {
    jv *o = test_arg(c, at, a, "sameas");
    if (x == o) return true;
    if ((x->kind == JV_NONE || x->kind == JV_BOOL) && x->kind == o->kind) return x->kind == JV_NONE || x->b == o->b;
    return false;
}
TEST(lower) {
    x = py_to_str(c, x); /* jinja2: str(value).islower() */
    jv *l = str_case(c, x, CASE_LOWER);
    bool cased = false;
    size_t i = 0;
    while (i < x->s.n)
        if (cp_cased(utf8_decode(x->s.p, x->s.n, &i))) cased = true;
    return cased && l->s.n == x->s.n && !memcmp(l->s.p, x->s.p, x->s.n);
}
TEST(upper) {
    x = py_to_str(c, x);
    jv *u = str_case(c, x, CASE_UPPER);
    bool cased = false;
    size_t i = 0;
    while (i < x->s.n)
        if (cp_cased(utf8_decode(x->s.p, x->s.n, &i))) cased = true;
    return cased && u->s.n == x->s.n && !memcmp(u->s.p, x->s.p, x->s.n);
}
TEST(escaped) { return false; }
TEST(filter) { return x->kind == JV_STR && jx_find_filter(x->s.p) != NULL; }
TEST(test) { return x->kind == JV_STR && jx_find_test(x->s.p) != NULL; }

/* ---- methods ------------------------------------------------------------------------ */

#define METHOD(name) static jv *m_##name(jctx *c, jv *self, jargs *a)
#define AT (c->cur)

METHOD(str_strip) { jv *ch = jx_arg(a, 0, "chars"); if (ch && ch->kind != JV_NONE) need_str(c, AT, ch, "strip arg"); return str_strip(c, self, ch, 3); }
METHOD(str_lstrip) { jv *ch = jx_arg(a, 0, "chars"); if (ch && ch->kind != JV_NONE) need_str(c, AT, ch, "strip arg"); return str_strip(c, self, ch, 1); }
METHOD(str_rstrip) { jv *ch = jx_arg(a, 0, "chars"); if (ch && ch->kind != JV_NONE) need_str(c, AT, ch, "strip arg"); return str_strip(c, self, ch, 2); }
METHOD(str_upper) { (void)a; return str_case(c, self, CASE_UPPER); }
METHOD(str_lower) { (void)a; return str_case(c, self, CASE_LOWER); }
METHOD(str_title) { (void)a; return str_case(c, self, CASE_PYTITLE); }
METHOD(str_capitalize) { (void)a; return str_case(c, self, CASE_CAPITALIZE); }
METHOD(str_split) {
    jv *sep = jx_arg(a, 0, "sep"), *mx = jx_arg(a, 1, "maxsplit");
    return str_split(c, AT, self, sep, mx ? need_int(c, AT, mx, "maxsplit") : -1);
}
METHOD(str_rsplit) {
    jv *sep = jx_arg(a, 0, "sep"), *mx = jx_arg(a, 1, "maxsplit");
    int64_t m = mx ? need_int(c, AT, mx, "maxsplit") : -1;
    if (m < 0) return str_split(c, AT, self, sep, -1);
    /* split everything, then rejoin the leading pieces */
    jv *all = str_split(c, AT, self, sep, -1);
    if ((int64_t)all->l.n <= m + 1) return all;
    if (!sep || sep->kind == JV_NONE) jx_fail(c, AT, "rsplit with maxsplit and no separator is not supported");
    size_t keep = all->l.n - (size_t)m;
    jbuf b = newbuf(c);
    for (size_t i = 0; i < keep; i++) {
        if (i) jb_put(c, &b, sep->s.p, sep->s.n);
        jb_put(c, &b, all->l.a[i]->s.p, all->l.a[i]->s.n);
    }
    jv *r = jv_list(c, JL_LIST, 0);
    jv_list_push(c, r, B(c, &b));
    for (size_t i = keep; i < all->l.n; i++) jv_list_push(c, r, all->l.a[i]);
    return r;
}
METHOD(str_splitlines) { jv *k = jx_arg(a, 0, "keepends"); return str_splitlines(c, self, k && jv_truthy(c, k)); }

static jv *affix_test(jctx *c, jv *self, jargs *a, bool ends) {
    jv *p = jx_arg(a, 0, "prefix");
    if (!p) jx_fail(c, AT, "%s() takes at least 1 argument", ends ? "endswith" : "startswith");
    jv *st = jx_arg(a, 1, "start"), *en = jx_arg(a, 2, "end");
    jv *s = self;
    if ((st && st->kind != JV_NONE) || (en && en->kind != JV_NONE)) {
        jv *sl = jv_list(c, JL_LIST, 0);
        (void)sl;
        jv *l = jx_iter_list(c, AT, self);
        int64_t n = (int64_t)l->l.n, b = st && st->kind != JV_NONE ? need_int(c, AT, st, "start") : 0,
                e = en && en->kind != JV_NONE ? need_int(c, AT, en, "end") : n;
        if (b < 0) b = b + n < 0 ? 0 : b + n;
        if (e < 0) e = e + n < 0 ? 0 : e + n;
        if (e > n) e = n;
        if (b > n) return JV_FALSE;
        jbuf buf = newbuf(c);
        for (int64_t i = b; i < e; i++) jb_put(c, &buf, l->l.a[i]->s.p, l->l.a[i]->s.n);
        s = B(c, &buf);
    }
    if (p->kind == JV_LIST && p->sub == JL_TUPLE) {
        for (size_t i = 0; i < p->l.n; i++) {
            jv *q = need_str(c, AT, p->l.a[i], "tuple item");
            if (ends ? str_ends(s, q) : str_starts(s, q)) return JV_TRUE;
        }
        return JV_FALSE;
    }
    if (p->kind != JV_STR)
        jx_fail(c, AT, "%s first arg must be str or a tuple of str, not %s", ends ? "endswith" : "startswith", jv_typename(p));
    return JV_BOOLV(ends ? str_ends(s, p) : str_starts(s, p));
}
METHOD(str_startswith) { return affix_test(c, self, a, false); }
METHOD(str_endswith) { return affix_test(c, self, a, true); }
METHOD(str_replace) {
    jv *o = jx_arg(a, 0, "old"), *n = jx_arg(a, 1, "new"), *cnt = jx_arg(a, 2, "count");
    if (!o || !n) jx_fail(c, AT, "replace() takes at least 2 arguments");
    return str_replace(c, self, need_str(c, AT, o, "replace() argument 1"), need_str(c, AT, n, "replace() argument 2"),
                       cnt ? need_int(c, AT, cnt, "count") : -1);
}
static jv *find_impl(jctx *c, jv *self, jargs *a, bool rev, bool raise) {
    jv *sub = jx_arg(a, 0, "sub");
    if (!sub) jx_fail(c, AT, "find() takes at least 1 argument");
    need_str(c, AT, sub, "find() argument");
    const char *best = NULL;
    if (!rev)
        best = memmem(self->s.p, self->s.n, sub->s.p, sub->s.n);
    else
        for (size_t i = self->s.n + 1; i-- > 0;)
            if (i + sub->s.n <= self->s.n && !memcmp(self->s.p + i, sub->s.p, sub->s.n)) {
                best = self->s.p + i;
                break;
            }
    if (!best) {
        if (raise) jx_fail(c, AT, "substring not found");
        return jv_int(c, -1);
    }
    return jv_int(c, cp_index(self, (size_t)(best - self->s.p)));
}
METHOD(str_find) { return find_impl(c, self, a, false, false); }
METHOD(str_rfind) { return find_impl(c, self, a, true, false); }
METHOD(str_index) { return find_impl(c, self, a, false, true); }
METHOD(str_rindex) { return find_impl(c, self, a, true, true); }
METHOD(str_count) {
    jv *sub = jx_arg(a, 0, "sub");
    if (!sub) jx_fail(c, AT, "count() takes at least 1 argument");
    need_str(c, AT, sub, "count() argument");
    if (sub->s.n == 0) return jv_int(c, (int64_t)jv_str_ncp(self) + 1);
    int64_t n = 0;
    size_t i = 0;
    const char *f;
    while ((f = memmem(self->s.p + i, self->s.n - i, sub->s.p, sub->s.n))) {
        n++;
        i = (size_t)(f - self->s.p) + sub->s.n;
    }
    return jv_int(c, n);
}
METHOD(str_format) { return str_format(c, AT, self, a); }
METHOD(str_join) {
    jv *it = jx_arg(a, 0, "iterable");
    if (!it) jx_fail(c, AT, "join() takes exactly one argument");
    jv *l = jx_iter_list(c, AT, it);
    jbuf b = newbuf(c);
    for (size_t i = 0; i < l->l.n; i++) {
        if (i) jb_put(c, &b, self->s.p, self->s.n);
        jv *v = l->l.a[i];
        if (v->kind != JV_STR) jx_fail(c, AT, "sequence item %zu: expected str instance, %s found", i, jv_typename(v));
        jb_put(c, &b, v->s.p, v->s.n);
    }
    return B(c, &b);
}
static jv *str_class(jctx *c, jv *self, int which) {
    if (self->s.n == 0) return JV_FALSE;
    size_t i = 0;
    while (i < self->s.n) {
        int cp = utf8_decode(self->s.p, self->s.n, &i);
        bool ok = which == 0 ? (cp >= '0' && cp <= '9') : which == 1 ? cp_alpha(cp) : which == 2 ? cp_alnum(cp) : cp_space(cp);
        if (!ok) return JV_FALSE;
    }
    (void)c;
    return JV_TRUE;
}
METHOD(str_isdigit) { (void)a; return str_class(c, self, 0); }
METHOD(str_isalpha) { (void)a; return str_class(c, self, 1); }
METHOD(str_isalnum) { (void)a; return str_class(c, self, 2); }
METHOD(str_isspace) { (void)a; return str_class(c, self, 3); }
METHOD(str_islower) { jargs none = {0}; return JV_BOOLV(t_lower(c, AT, self, &none)); (void)a; }
METHOD(str_isupper) { jargs none = {0}; return JV_BOOLV(t_upper(c, AT, self, &none)); (void)a; }
METHOD(str_removeprefix) {
    jv *p = need_str(c, AT, jx_arg(a, 0, "prefix") ? jx_arg(a, 0, "prefix") : JV_NONEP, "prefix");
    return str_starts(self, p) ? S(c, self->s.p + p->s.n, self->s.n - p->s.n) : self;
}
METHOD(str_removesuffix) {
    jv *p = need_str(c, AT, jx_arg(a, 0, "suffix") ? jx_arg(a, 0, "suffix") : JV_NONEP, "suffix");
    return str_ends(self, p) && p->s.n ? S(c, self->s.p, self->s.n - p->s.n) : self;
}
static jv *pad(jctx *c, jv *self, jargs *a, int mode) {
    jv *w = jx_arg(a, 0, "width"), *f = jx_arg(a, 1, "fillchar");
    int64_t width = w ? need_int(c, AT, w, "width") : 0;
    if (width > 100000) jx_fail(c, AT, "width too large");
    jv *fill = f ? need_str(c, AT, f, "fillchar") : S(c, " ", 1);
    int64_t n = (int64_t)jv_str_ncp(self);
    if (width <= n) return self;
    int64_t marg = width - n, left = mode == 0 ? 0 : mode == 1 ? marg : marg / 2 + (marg & width & 1);
    if (mode == 3) left = marg;
    jbuf b = newbuf(c);
    for (int64_t i = 0; i < left; i++) jb_put(c, &b, fill->s.p, fill->s.n);
    jb_put(c, &b, self->s.p, self->s.n);
    for (int64_t i = 0; i < marg - left; i++) jb_put(c, &b, fill->s.p, fill->s.n);
    return B(c, &b);
}
METHOD(str_ljust) { return pad(c, self, a, 0); }
METHOD(str_rjust) { return pad(c, self, a, 1); }
METHOD(str_center) { return pad(c, self, a, 2); }
METHOD(str_zfill) {
    jv *w = jx_arg(a, 0, "width");
    int64_t width = w ? need_int(c, AT, w, "width") : 0;
    if (width > 100000) jx_fail(c, AT, "width too large");
    int64_t n = (int64_t)jv_str_ncp(self);
    if (width <= n) return self;
    jbuf b = newbuf(c);
    size_t st = 0;
    if (self->s.n && (self->s.p[0] == '-' || self->s.p[0] == '+')) {
        jb_putc(c, &b, self->s.p[0]);
        st = 1;
    }
    for (int64_t i = 0; i < width - n; i++) jb_putc(c, &b, '0');
    jb_put(c, &b, self->s.p + st, self->s.n - st);
    return B(c, &b);
}

METHOD(dict_keys) {
    (void)a;
    jv *r = jv_list(c, JL_LIST, self->d.n);
    for (size_t i = 0; i < self->d.n; i++) jv_list_push(c, r, self->d.k[i]);
    return r;
}
METHOD(dict_values) {
    (void)a;
    jv *r = jv_list(c, JL_LIST, self->d.n);
    for (size_t i = 0; i < self->d.n; i++) jv_list_push(c, r, self->d.v[i]);
    return r;
}
METHOD(dict_items) {
    (void)a;
    jv *r = jv_list(c, JL_VIEW, self->d.n);
    for (size_t i = 0; i < self->d.n; i++) {
        jv *t = jv_list(c, JL_TUPLE, 2);
        jv_list_push(c, t, self->d.k[i]);
        jv_list_push(c, t, self->d.v[i]);
        jv_list_push(c, r, t);
    }
    jx_charge(c, self->d.n);
    return r;
}
METHOD(dict_get) {
    jv *k = jx_arg(a, 0, "key"), *d = jx_arg(a, 1, "default");
    if (!k) jx_fail(c, AT, "get expected at least 1 argument, got 0");
    jx_charge(c, self->d.n / 16);
    jv *v = jv_dict_get(self, k);
    return v ? v : d ? d : JV_NONEP;
}
METHOD(dict_pop) {
    jv *k = jx_arg(a, 0, "key"), *d = jx_arg(a, 1, "default");
    if (!k) jx_fail(c, AT, "pop expected at least 1 argument, got 0");
    jv *v = jv_dict_get(self, k);
    if (v) {
        jv_dict_del(self, k);
        return v;
    }
    if (d) return d;
    jbuf b = newbuf(c);
    py_repr(c, &b, k, 0);
    jx_fail(c, AT, "KeyError: %s", b.p ? b.p : "");
}
METHOD(dict_setdefault) {
    jv *k = jx_arg(a, 0, "key"), *d = jx_arg(a, 1, "default");
    if (!k) jx_fail(c, AT, "setdefault expected at least 1 argument, got 0");
    jv *v = jv_dict_get(self, k);
    if (v) return v;
    jv_dict_set(c, self, k, d ? d : JV_NONEP);
    return d ? d : JV_NONEP;
}
METHOD(dict_update) {
    jv *o = jx_arg(a, 0, NULL);
    if (o) {
        if (o->kind == JV_DICT && o->sub == JD_DICT) {
            for (size_t i = 0; i < o->d.n; i++) jv_dict_set(c, self, o->d.k[i], o->d.v[i]);
        } else {
            jv *l = jx_iter_list(c, AT, o);
            for (size_t i = 0; i < l->l.n; i++) {
                jv *p = jx_iter_list(c, AT, l->l.a[i]);
                if (p->l.n != 2) jx_fail(c, AT, "dictionary update sequence element has wrong length");
                jv_dict_set(c, self, p->l.a[0], p->l.a[1]);
            }
        }
    }
    for (size_t i = 0; i < a->nkw; i++) jv_dict_sets(c, self, a->kwn[i], a->kwv[i]);
    return JV_NONEP;
}
METHOD(dict_copy) {
    (void)a;
    jv *r = jv_dict(c, JD_DICT);
    for (size_t i = 0; i < self->d.n; i++) jv_dict_set(c, r, self->d.k[i], self->d.v[i]);
    return r;
}
METHOD(dict_clear) {
    (void)a;
    (void)c;
    self->d.n = 0;
    return JV_NONEP;
}

METHOD(list_append) {
    jv *x = jx_arg(a, 0, NULL);
    if (!x || a->npos != 1) jx_fail(c, AT, "append() takes exactly one argument");
    jv_list_push(c, self, x);
    return JV_NONEP;
}
METHOD(list_extend) {
    jv *x = jx_arg(a, 0, NULL);
    if (!x) jx_fail(c, AT, "extend() takes exactly one argument");
    jv *l = jx_iter_list(c, AT, x);
    size_t n = l->l.n;
    for (size_t i = 0; i < n; i++) jv_list_push(c, self, l->l.a[i]);
    jx_charge(c, n);
    return JV_NONEP;
}
METHOD(list_insert) {
    jv *iv = jx_arg(a, 0, NULL), *x = jx_arg(a, 1, NULL);
    if (!iv || !x) jx_fail(c, AT, "insert expected 2 arguments");
    int64_t i = need_int(c, AT, iv, "index"), n = (int64_t)self->l.n;
    if (i < 0) i = i + n < 0 ? 0 : i + n;
    if (i > n) i = n;
    jv_list_push(c, self, x);
    memmove(self->l.a + i + 1, self->l.a + i, (size_t)(n - i) * sizeof(jv *));
    self->l.a[i] = x;
    jx_charge(c, (uint64_t)n);
    return JV_NONEP;
}
METHOD(list_pop) {
    jv *iv = jx_arg(a, 0, NULL);
    int64_t n = (int64_t)self->l.n, i = iv ? need_int(c, AT, iv, "index") : -1;
    if (n == 0) jx_fail(c, AT, "pop from empty list");
    if (i < 0) i += n;
    if (i < 0 || i >= n) jx_fail(c, AT, "pop index out of range");
    jv *r = self->l.a[i];
    memmove(self->l.a + i, self->l.a + i + 1, (size_t)(n - i - 1) * sizeof(jv *));
    self->l.n--;
    jx_charge(c, (uint64_t)n);
    return r;
}
METHOD(list_remove) {
    jv *x = jx_arg(a, 0, NULL);
    if (!x) jx_fail(c, AT, "remove() takes exactly one argument");
    for (size_t i = 0; i < self->l.n; i++)
        if (jv_equal(c, self->l.a[i], x)) {
            memmove(self->l.a + i, self->l.a + i + 1, (self->l.n - i - 1) * sizeof(jv *));
            self->l.n--;
            return JV_NONEP;
        }
    jx_fail(c, AT, "list.remove(x): x not in list");
}
METHOD(list_index) {
    jv *x = jx_arg(a, 0, NULL);
    if (!x) jx_fail(c, AT, "index() takes at least 1 argument");
    for (size_t i = 0; i < self->l.n; i++)
        if (jv_equal(c, self->l.a[i], x)) return jv_int(c, (int64_t)i);
    jx_fail(c, AT, "x not in list");
}
METHOD(list_count) {
    jv *x = jx_arg(a, 0, NULL);
    if (!x) jx_fail(c, AT, "count() takes exactly one argument");
    int64_t n = 0;
    for (size_t i = 0; i < self->l.n; i++) n += jv_equal(c, self->l.a[i], x);
    return jv_int(c, n);
}
METHOD(list_reverse) {
    (void)a;
    (void)c;
    for (size_t i = 0, j = self->l.n; i + 1 < j; i++, j--) {
        jv *t = self->l.a[i];
        self->l.a[i] = self->l.a[j - 1];
        self->l.a[j - 1] = t;
    }
    return JV_NONEP;
}
METHOD(list_copy) {
    (void)a;
    jv *r = jv_list(c, JL_LIST, self->l.n);
    for (size_t i = 0; i < self->l.n; i++) jv_list_push(c, r, self->l.a[i]);
    return r;
}
METHOD(list_clear) {
    (void)a;
    (void)c;
    self->l.n = 0;
    return JV_NONEP;
}

typedef struct {
    const char *name;
    jbuiltin_fn fn;
} method_entry;

static const method_entry str_methods[] = {
    {"strip", m_str_strip}, {"lstrip", m_str_lstrip}, {"rstrip", m_str_rstrip}, {"upper", m_str_upper},
    {"lower", m_str_lower}, {"title", m_str_title}, {"capitalize", m_str_capitalize}, {"split", m_str_split},
    {"rsplit", m_str_rsplit}, {"splitlines", m_str_splitlines}, {"startswith", m_str_startswith},
    {"endswith", m_str_endswith}, {"replace", m_str_replace}, {"find", m_str_find}, {"rfind", m_str_rfind},
    {"index", m_str_index}, {"rindex", m_str_rindex}, {"count", m_str_count}, {"format", m_str_format},
    {"join", m_str_join}, {"isdigit", m_str_isdigit}, {"isalpha", m_str_isalpha}, {"isalnum", m_str_isalnum},
    {"isspace", m_str_isspace}, {"islower", m_str_islower}, {"isupper", m_str_isupper},
    {"removeprefix", m_str_removeprefix}, {"removesuffix", m_str_removesuffix}, {"ljust", m_str_ljust},
    {"rjust", m_str_rjust}, {"center", m_str_center}, {"zfill", m_str_zfill}, {NULL, NULL}};

static const method_entry dict_methods[] = {
    {"keys", m_dict_keys}, {"values", m_dict_values}, {"items", m_dict_items}, {"get", m_dict_get},
    {"pop", m_dict_pop}, {"setdefault", m_dict_setdefault}, {"update", m_dict_update}, {"copy", m_dict_copy},
    {"clear", m_dict_clear}, {NULL, NULL}};

static const method_entry list_methods[] = {
    {"append", m_list_append}, {"extend", m_list_extend}, {"insert", m_list_insert}, {"pop", m_list_pop},
    {"remove", m_list_remove}, {"index", m_list_index}, {"count", m_list_count}, {"reverse", m_list_reverse},
    {"copy", m_list_copy}, {"clear", m_list_clear}, {NULL, NULL}};

static const method_entry tuple_methods[] = {{"index", m_list_index}, {"count", m_list_count}, {NULL, NULL}};

jv *jx_method(jctx *c, const jnode *at, jv *obj, const char *name) {
    (void)at;
    const method_entry *t = NULL;
    if (obj->kind == JV_STR)
        t = str_methods;
    else if (obj->kind == JV_DICT && obj->sub == JD_DICT)
        t = dict_methods;
    else if (obj->kind == JV_LIST && obj->sub == JL_LIST)
        t = list_methods;
    else if (obj->kind == JV_LIST && obj->sub == JL_TUPLE)
        t = tuple_methods;
    if (!t) return NULL;
    for (; t->name; t++)
        if (!strcmp(t->name, name)) return jv_builtin(c, t->name, t->fn, obj);
    return NULL;
}

/* ---- globals ------------------------------------------------------------------------ */

static jv *g_range(jctx *c, jv *self, jargs *a) {
    (void)self;
    if (a->nkw) jx_fail(c, AT, "range() takes no keyword arguments");
    int64_t start = 0, stop, step = 1;
    if (a->npos == 1)
        stop = need_int(c, AT, a->pos[0], "range() argument");
    else if (a->npos == 2 || a->npos == 3) {
        start = need_int(c, AT, a->pos[0], "range() argument");
        stop = need_int(c, AT, a->pos[1], "range() argument");
        if (a->npos == 3) step = need_int(c, AT, a->pos[2], "range() argument");
    } else
        jx_fail(c, AT, "range expected 1 to 3 arguments, got %zu", a->npos);
    if (step == 0) jx_fail(c, AT, "range() arg 3 must not be zero");
    jv *r = jv_list(c, JL_LIST, 0);
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
        jx_charge(c, 8); /* Python's range is lazy; ours is a list, so charge its memory too */
        jv_list_push(c, r, jv_int(c, i));
        if (__builtin_add_overflow(i, step, &i)) break;
    }
    return r;
}

static jv *g_dict(jctx *c, jv *self, jargs *a) {
    (void)self;
    jv *r = jv_dict(c, JD_DICT);
    if (a->npos > 1) jx_fail(c, AT, "dict expected at most 1 argument, got %zu", a->npos);
    if (a->npos) {
        jargs one = {.pos = a->pos, .npos = 1};
        m_dict_update(c, r, &one);
    }
    for (size_t i = 0; i < a->nkw; i++) jv_dict_sets(c, r, a->kwn[i], a->kwv[i]);
    return r;
}

static jv *g_namespace(jctx *c, jv *self, jargs *a) {
    jv *r = g_dict(c, self, a);
    r->sub = JD_NS;
    return r;
}

static jv *g_raise_exception(jctx *c, jv *self, jargs *a) {
    (void)self;
    jv *m = jx_arg(a, 0, "message");
    jv *s = m ? py_to_str(c, m) : S(c, "", 0);
    /* the template's text becomes an error line: its line breaks and other control
       characters become spaces (what does not fit an error is cut at a character) */
    char line[sizeof ((tokd_err *)0)->msg];
    size_t n = s->s.n < sizeof line - 1 ? s->s.n : sizeof line - 1;
    while (n < s->s.n && n > 0 && ((unsigned char)s->s.p[n] & 0xC0) == 0x80) n--;
    for (size_t i = 0; i < n; i++) line[i] = (unsigned char)s->s.p[i] < 0x20 ? ' ' : s->s.p[i];
    line[n] = 0;
    jx_fail(c, AT, "%s", line);
}

static jv *g_strftime_now(jctx *c, jv *self, jargs *a) {
    (void)self;
    jv *f = jx_arg(a, 0, "format");
    if (!f) jx_fail(c, AT, "strftime_now() needs a format");
    need_str(c, AT, f, "format");
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    bool pinned = false;
    if (c->now && *c->now) {
        const char *e = strptime(c->now, "%Y-%m-%dT%H:%M:%S", &tm);
        if (!e || *e) jx_fail(c, AT, "TOKD_NOW must look like 2026-01-15T09:30:00, got '%s'", c->now);
        pinned = true;
    }
    if (!pinned) {
        time_t t = time(NULL);
        localtime_r(&t, &tm);
    } else {
        tm.tm_isdst = -1;
        struct tm tmp = tm;
        time_t t = mktime(&tmp); /* fills in the weekday and day of year */
        if (t != (time_t)-1) {
            tm.tm_wday = tmp.tm_wday;
            tm.tm_yday = tmp.tm_yday;
        }
    }
    if (f->s.n > 256) jx_fail(c, AT, "strftime format too long");
    char out[4096];
    size_t n = strftime(out, sizeof out, f->s.p, &tm);
    return S(c, out, n);
}

void jx_install_globals(jctx *c, jv *d) {
    jv_dict_sets(c, d, "range", jv_builtin(c, "range", g_range, NULL));
    jv_dict_sets(c, d, "dict", jv_builtin(c, "dict", g_dict, NULL));
    jv_dict_sets(c, d, "namespace", jv_builtin(c, "namespace", g_namespace, NULL));
    jv_dict_sets(c, d, "raise_exception", jv_builtin(c, "raise_exception", g_raise_exception, NULL));
    jv_dict_sets(c, d, "strftime_now", jv_builtin(c, "strftime_now", g_strftime_now, NULL));
}

/* ---- name tables -------------------------------------------------------------------- */

static const struct {
    const char *name;
    jfilter_fn fn;
} filters[] = {
    {"abs", f_abs}, {"attr", f_attr}, {"batch", f_batch}, {"capitalize", f_capitalize}, {"center", f_center},
    {"count", f_length}, {"d", f_default}, {"default", f_default}, {"dictsort", f_dictsort}, {"e", f_escape},
    {"escape", f_escape}, {"first", f_first}, {"float", f_float}, {"forceescape", f_escape}, {"format", f_format},
    {"groupby", f_groupby}, {"indent", f_indent}, {"int", f_int}, {"items", f_items}, {"join", f_join},
    {"last", f_last}, {"length", f_length}, {"list", f_list}, {"lower", f_lower}, {"map", f_map}, {"max", f_max},
    {"min", f_min}, {"reject", f_reject}, {"rejectattr", f_rejectattr}, {"replace", f_replace},
    {"reverse", f_reverse}, {"round", f_round}, {"safe", f_safe}, {"select", f_select},
    {"selectattr", f_selectattr}, {"sort", f_sort}, {"string", f_string}, {"sum", f_sum}, {"title", f_title},
    {"tojson", f_tojson}, {"trim", f_trim}, {"unique", f_unique}, {"upper", f_upper}, {"wordcount", f_wordcount},
};

static const struct {
    const char *name;
    jtest_fn fn;
} tests[] = {
    {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined}, {"divisibleby", t_divisibleby},
    {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq}, {"escaped", t_escaped}, {"even", t_even}, {"false", t_false},
    {"filter", t_filter}, {"float", t_float}, {"ge", t_ge}, {">=", t_ge}, {"gt", t_gt}, {"greaterthan", t_gt},
    {">", t_gt}, {"in", t_in}, {"integer", t_integer}, {"iterable", t_iterable}, {"le", t_le}, {"<=", t_le},
    {"lower", t_lower}, {"lt", t_lt}, {"lessthan", t_lt}, {"<", t_lt}, {"mapping", t_mapping}, {"ne", t_ne},
    {"!=", t_ne}, {"none", t_none}, {"number", t_number}, {"odd", t_odd}, {"sameas", t_sameas},
    {"sequence", t_sequence}, {"string", t_string}, {"test", t_test}, {"true", t_true}, {"undefined", t_undefined},
    {"upper", t_upper},
};

jfilter_fn jx_find_filter(const char *name) {
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
        if (!strcmp(filters[i].name, name)) return filters[i].fn;
    return NULL;
}

jtest_fn jx_find_test(const char *name) {
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        if (!strcmp(tests[i].name, name)) return tests[i].fn;
    return NULL;
}
