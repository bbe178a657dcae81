/* pyjson.c — Python's text forms of values: str(), repr(), json.dumps() and json.loads().
 *
 * Chat templates print values ({{ x }} is str(x), which is repr() inside containers) and
 * serialise them with tojson (json.dumps). Models see these bytes, so they must match
 * CPython exactly: float repr is the shortest round-tripping form with Python's switch to
 * exponent notation, str repr picks its quote like CPython and escapes non-printables,
 * json.dumps uses ", " / ": " separators (", " becomes "," with indent) and keeps UTF-8
 * unless ensure_ascii. json.loads is ours rather than cJSON because Python keeps 1 and 1.0
 * apart (int vs float), which cJSON does not, and the difference shows when printed. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_int.h"

/* ---- buffers -------------------------------------------------------------------------- */

void jb_put(jctx *c, jbuf *b, const char *s, size_t n) {
    if (n == 0) return;
    if (b->limit && (n > b->limit || b->n > b->limit - n))
        jx_fail(c, c->cur, "output too large (limit %zu bytes)", b->limit);
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        while (nc < b->n + n + 1) nc *= 2;
        b->p = ja_grow(&c->arena, b->p, b->cap, nc);
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    jx_charge(c, n / 64);
}

void jb_puts(jctx *c, jbuf *b, const char *s) { jb_put(c, b, s, strlen(s)); }
void jb_putc(jctx *c, jbuf *b, char ch) { jb_put(c, b, &ch, 1); }

void jb_printf(jctx *c, jbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    jb_put(c, b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* ---- UTF-8 ---------------------------------------------------------------------------- */

int utf8_decode(const char *s, size_t n, size_t *pos) {
    const unsigned char *p = (const unsigned char *)s + *pos;
    size_t left = n - *pos;
    unsigned c0 = p[0];
    if (c0 < 0x80) {
        (*pos)++;
        return (int)c0;
    }
    int len = c0 >= 0xF0 && c0 <= 0xF4 ? 4 : c0 >= 0xE0 ? 3 : c0 >= 0xC2 && c0 < 0xE0 ? 2 : 0;
    if (c0 > 0xF4) len = 0;
    if (len == 0 || (size_t)len > left) {
        (*pos)++;
        return (int)c0;
    }
    uint32_t cp = c0 & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) {
            (*pos)++;
            return (int)c0;
        }
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
        (*pos)++;
        return (int)c0;
    }
    *pos += (size_t)len;
    return (int)cp;
}

/* ---- numbers -------------------------------------------------------------------------- */

void py_float_repr(double f, char out[32]) {
    if (isnan(f)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(f)) {
        strcpy(out, f < 0 ? "-inf" : "inf");
        return;
    }
    if (f == 0) {
        strcpy(out, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    char e[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    /* e = [-]d[.ddd]e[+-]XX */
    char digits[24];
    size_t nd = 0;
    const char *p = e;
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    char *o = out;
    if (neg) *o++ = '-';
    if (exp >= -5 + 1 && exp < 16) {
        if (exp >= 0) {
            for (int i = 0; i <= exp; i++) *o++ = (size_t)i < nd ? digits[i] : '0';
            *o++ = '.';
            if ((size_t)exp + 1 < nd)
                for (size_t i = (size_t)exp + 1; i < nd; i++) *o++ = digits[i];
            else
                *o++ = '0';
        } else {
            *o++ = '0';
            *o++ = '.';
            for (int i = -1; i > exp; i--) *o++ = '0';
            for (size_t i = 0; i < nd; i++) *o++ = digits[i];
        }
        *o = 0;
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (size_t i = 1; i < nd; i++) *o++ = digits[i];
        }
        int ae = exp < 0 ? -exp : exp;
        *o++ = 'e';
        *o++ = exp < 0 ? '-' : '+';
        if (ae >= 100) *o++ = (char)('0' + ae / 100);
        *o++ = (char)('0' + ae / 10 % 10);
        *o++ = (char)('0' + ae % 10);
        *o = 0;
    }
}

/* ---- str() and repr() ----------------------------------------------------------------- */

/* Code points Python's str.isprintable() rejects, beyond the C0/C1 controls: separators
 * other than ' ', format characters, surrogates, private use (a close approximation of
 * the Unicode tables, enough for repr() of chat text). */
static bool cp_printable(uint32_t cp) {
    if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) return false;
    if (cp == 0xA0 || cp == 0xAD || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) ||
        (cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x2064) || (cp >= 0x2066 && cp <= 0x206F) ||
        cp == 0x3000 || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB) || (cp >= 0xD800 && cp <= 0xDFFF) ||
        (cp >= 0xE000 && cp <= 0xF8FF) || (cp >= 0x600 && cp <= 0x605) || cp == 0x61C || cp == 0x6DD ||
        cp == 0x70F || cp == 0x180E || cp >= 0xF0000 || (cp >= 0xE0000 && cp <= 0xE0FFF) || cp == 0xFFFE ||
        cp == 0xFFFF)
        return false;
    return true;
}

static void repr_str(jctx *c, jbuf *b, const char *s, size_t n) {
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jb_putc(c, b, q);
    size_t i = 0, run = 0;
    while (i < n) {
        size_t st = i;
        int cp = utf8_decode(s, n, &i);
        bool plain = cp != '\\' && cp != q && cp_printable((uint32_t)cp) && !(cp >= 0x80 && i - st == 1);
        if (plain) {
            run += i - st;
            continue;
        }
        jb_put(c, b, s + st - run, run);
        run = 0;
        switch (cp) {
        case '\\': jb_puts(c, b, "\\\\"); break;
        case '\n': jb_puts(c, b, "\\n"); break;
        case '\r': jb_puts(c, b, "\\r"); break;
        case '\t': jb_puts(c, b, "\\t"); break;
        default:
            if (cp == q)
                jb_printf(c, b, "\\%c", q);
            else if (i - st == 1 && cp >= 0x80) /* undecodable byte: Python would show a surrogate escape */
                jb_printf(c, b, "\\udc%02x", (unsigned)cp);
            else if (cp < 0x100)
                jb_printf(c, b, "\\x%02x", (unsigned)cp);
            else if (cp < 0x10000)
                jb_printf(c, b, "\\u%04x", (unsigned)cp);
            else
                jb_printf(c, b, "\\U%08x", (unsigned)cp);
        }
    }
    jb_put(c, b, s + n - run, run);
    jb_putc(c, b, q);
}

void py_repr(jctx *c, jbuf *b, jv *v, int depth) {
    if (depth > c->lim.max_depth) jx_fail(c, c->cur, "value nested too deeply to print");
    jx_charge(c, 1);
    switch (v->kind) {
    case JV_STR: repr_str(c, b, v->s.p, v->s.n); return;
    case JV_UNDEF: jb_puts(c, b, "Undefined"); return;
    case JV_LIST:
        if (v->sub == JL_GEN) {
            jb_puts(c, b, "<generator object>");
            return;
        }
        if (v->sub == JL_VIEW) jb_puts(c, b, "dict_items(");
        jb_putc(c, b, v->sub == JL_TUPLE ? '(' : '[');
        for (size_t i = 0; i < v->l.n; i++) {
            if (i) jb_puts(c, b, ", ");
            py_repr(c, b, v->l.a[i], depth + 1);
        }
        if (v->sub == JL_TUPLE && v->l.n == 1) jb_putc(c, b, ',');
        jb_putc(c, b, v->sub == JL_TUPLE ? ')' : ']');
        if (v->sub == JL_VIEW) jb_putc(c, b, ')');
        return;
    case JV_DICT:
        if (v->sub == JD_LOOP) {
            jb_puts(c, b, "<LoopContext>");
            return;
        }
        if (v->sub == JD_NS) jb_puts(c, b, "<Namespace ");
        jb_putc(c, b, '{');
        for (size_t i = 0; i < v->d.n; i++) {
            if (i) jb_puts(c, b, ", ");
            py_repr(c, b, v->d.k[i], depth + 1);
            jb_puts(c, b, ": ");
            py_repr(c, b, v->d.v[i], depth + 1);
        }
        jb_putc(c, b, '}');
        if (v->sub == JD_NS) jb_putc(c, b, '>');
        return;
    default: py_str(c, b, v); return;
    }
}

void py_str(jctx *c, jbuf *b, jv *v) {
    char tmp[40];
    switch (v->kind) {
    case JV_UNDEF: return;
    case JV_NONE: jb_puts(c, b, "None"); return;
    case JV_BOOL: jb_puts(c, b, v->b ? "True" : "False"); return;
    case JV_INT: jb_printf(c, b, "%lld", (long long)v->i); return;
    case JV_FLOAT: py_float_repr(v->f, tmp); jb_puts(c, b, tmp); return;
    case JV_STR: jb_put(c, b, v->s.p, v->s.n); return;
    case JV_FUNC:
        if (v->sub == JF_MACRO)
            jb_printf(c, b, "<Macro '%s'>", v->fu.name ? v->fu.name : "caller");
        else
            jb_printf(c, b, "<built-in function %s>", v->fu.name ? v->fu.name : "?");
        return;
    default: py_repr(c, b, v, 0); return;
    }
}

jv *py_to_str(jctx *c, jv *v) {
    if (v->kind == JV_STR) return v;
    jbuf b = {0};
    py_str(c, &b, v);
    return jv_str_nocopy(c, b.p ? b.p : "", b.n);
}

/* ---- json.dumps ----------------------------------------------------------------------- */

static void json_str(jctx *c, jbuf *b, const char *s, size_t n, bool ascii) {
    jb_putc(c, b, '"');
    size_t i = 0, run = 0;
    while (i < n) {
        size_t st = i;
        int cp = utf8_decode(s, n, &i);
        bool plain = cp >= 0x20 && cp != '"' && cp != '\\' && !(ascii && cp >= 0x7F) && !(cp >= 0x80 && i - st == 1);
        if (plain) {
            run += i - st;
            continue;
        }
        jb_put(c, b, s + st - run, run);
        run = 0;
        switch (cp) {
        case '"': jb_puts(c, b, "\\\""); break;
        case '\\': jb_puts(c, b, "\\\\"); break;
        case '\n': jb_puts(c, b, "\\n"); break;
        case '\r': jb_puts(c, b, "\\r"); break;
        case '\t': jb_puts(c, b, "\\t"); break;
        case '\b': jb_puts(c, b, "\\b"); break;
        case '\f': jb_puts(c, b, "\\f"); break;
        default:
            if (i - st == 1 && cp >= 0x80)
                jb_printf(c, b, "\\udc%02x", (unsigned)cp);
            else if (cp < 0x10000)
                jb_printf(c, b, "\\u%04x", (unsigned)cp);
            else {
                unsigned v = (unsigned)cp - 0x10000;
                jb_printf(c, b, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
            }
        }
    }
    jb_put(c, b, s + n - run, run);
    jb_putc(c, b, '"');
}

static void json_float(jctx *c, jbuf *b, double f) {
    char tmp[40];
    if (isnan(f))
        jb_puts(c, b, "NaN");
    else if (isinf(f))
        jb_puts(c, b, f < 0 ? "-Infinity" : "Infinity");
    else {
        py_float_repr(f, tmp);
        jb_puts(c, b, tmp);
    }
}

static void json_newline(jctx *c, jbuf *b, const pyjson_opts *o, int level) {
    jb_putc(c, b, '\n');
    for (int i = 0; i < level; i++) jb_put(c, b, o->indent, o->indent_len);
}

/* Stable merge sort of dict indices by key (Python's sorted(d.items())). */
static void sort_idx(jctx *c, size_t *idx, size_t *tmp, size_t n, jv **keys) {
    if (n < 2) return;
    size_t h = n / 2;
    sort_idx(c, idx, tmp, h, keys);
    sort_idx(c, idx + h, tmp, n - h, keys);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        if (jv_compare(c, c->cur, keys[idx[j]], keys[idx[i]]) < 0)
            tmp[k++] = idx[j++];
        else
            tmp[k++] = idx[i++];
    }
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, n * sizeof *idx);
}

static void json_value(jctx *c, jbuf *b, jv *v, const pyjson_opts *o, int level) {
    if (level > c->lim.max_depth) jx_fail(c, c->cur, "value nested too deeply for tojson (circular reference?)");
    jx_charge(c, 1);
    switch (v->kind) {
    case JV_NONE: jb_puts(c, b, "null"); return;
    case JV_BOOL: jb_puts(c, b, v->b ? "true" : "false"); return;
    case JV_INT: jb_printf(c, b, "%lld", (long long)v->i); return;
    case JV_FLOAT: json_float(c, b, v->f); return;
    case JV_STR: json_str(c, b, v->s.p, v->s.n, o->ensure_ascii); return;
    case JV_LIST:
        if (v->sub != JL_LIST && v->sub != JL_TUPLE) break;
        if (v->l.n == 0) {
            jb_puts(c, b, "[]");
            return;
        }
        jb_putc(c, b, '[');
        for (size_t i = 0; i < v->l.n; i++) {
            if (i) jb_put(c, b, o->item_sep, o->item_sep_len);
            if (o->indent_set) json_newline(c, b, o, level + 1);
            json_value(c, b, v->l.a[i], o, level + 1);
        }
        if (o->indent_set) json_newline(c, b, o, level);
        jb_putc(c, b, ']');
        return;
    case JV_DICT: {
        if (v->sub != JD_DICT) break;
        if (v->d.n == 0) {
            jb_puts(c, b, "{}");
            return;
        }
        size_t *idx = ja_alloc(&c->arena, v->d.n * sizeof(size_t) * 2);
        for (size_t i = 0; i < v->d.n; i++) idx[i] = i;
        if (o->sort_keys) {
            jx_charge(c, v->d.n * 4);
            sort_idx(c, idx, idx + v->d.n, v->d.n, v->d.k);
        }
        jb_putc(c, b, '{');
        for (size_t j = 0; j < v->d.n; j++) {
            size_t i = idx[j];
            if (j) jb_put(c, b, o->item_sep, o->item_sep_len);
            if (o->indent_set) json_newline(c, b, o, level + 1);
            jv *k = v->d.k[i];
            char tmp[40];
            switch (k->kind) {
            case JV_STR: json_str(c, b, k->s.p, k->s.n, o->ensure_ascii); break;
            case JV_INT: jb_printf(c, b, "\"%lld\"", (long long)k->i); break;
            case JV_BOOL: jb_puts(c, b, k->b ? "\"true\"" : "\"false\""); break;
            case JV_NONE: jb_puts(c, b, "\"null\""); break;
            case JV_FLOAT:
                if (isnan(k->f) || isinf(k->f))
                    json_float(c, b, k->f);
                else {
                    py_float_repr(k->f, tmp);
                    jb_printf(c, b, "\"%s\"", tmp);
                }
                break;
            default: jx_fail(c, c->cur, "keys must be str, int, float, bool or None, not %s", jv_typename(k));
            }
            jb_put(c, b, o->key_sep, o->key_sep_len);
            json_value(c, b, v->d.v[i], o, level + 1);
        }
        if (o->indent_set) json_newline(c, b, o, level);
        jb_putc(c, b, '}');
        return;
    }
    default: break;
    }
    jx_fail(c, c->cur, "Object of type %s is not JSON serializable", jv_typename(v));
}

void pyjson_dump(jctx *c, jbuf *b, jv *v, const pyjson_opts *o) { json_value(c, b, v, o, 0); }

/* ---- json.loads ----------------------------------------------------------------------- */

typedef struct {
    jctx *c;
    const char *s;
    size_t n, i;
    char *msg;
    size_t msgsz;
    int depth;
} jp;

static void jp_ws(jp *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}

static jv *jp_err(jp *p, const char *what) {
    if (p->msg[0] == 0) snprintf(p->msg, p->msgsz, "%s at byte %zu", what, p->i);
    return NULL;
}

static int jp_hex4(jp *p) {
    if (p->n - p->i < 4) return -1;
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char ch = p->s[p->i + (size_t)k];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    p->i += 4;
    return v;
}

static jv *jp_string(jp *p) {
    p->i++; /* opening quote */
    jbuf b = {0};
    for (;;) {
        if (p->i >= p->n) return jp_err(p, "unterminated string");
        unsigned char ch = (unsigned char)p->s[p->i];
        if (ch == '"') {
            p->i++;
            break;
        }
        if (ch < 0x20) return jp_err(p, "invalid control character in string");
        if (ch != '\\') {
            size_t st = p->i;
            while (p->i < p->n && p->s[p->i] != '"' && p->s[p->i] != '\\' && (unsigned char)p->s[p->i] >= 0x20) p->i++;
            jb_put(p->c, &b, p->s + st, p->i - st);
            continue;
        }
        p->i++;
        if (p->i >= p->n) return jp_err(p, "unterminated string");
        char e = p->s[p->i++];
        switch (e) {
        case '"': jb_putc(p->c, &b, '"'); break;
        case '\\': jb_putc(p->c, &b, '\\'); break;
        case '/': jb_putc(p->c, &b, '/'); break;
        case 'b': jb_putc(p->c, &b, '\b'); break;
        case 'f': jb_putc(p->c, &b, '\f'); break;
        case 'n': jb_putc(p->c, &b, '\n'); break;
        case 'r': jb_putc(p->c, &b, '\r'); break;
        case 't': jb_putc(p->c, &b, '\t'); break;
        case 'u': {
            int u = jp_hex4(p);
            if (u < 0) return jp_err(p, "invalid \\u escape");
            uint32_t cp = (uint32_t)u;
            if (cp >= 0xD800 && cp < 0xDC00 && p->n - p->i >= 6 && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
                size_t save = p->i;
                p->i += 2;
                int lo = jp_hex4(p);
                if (lo >= 0xDC00 && lo < 0xE000)
                    cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                else
                    p->i = save;
            }
            char enc[4];
            jb_put(p->c, &b, enc, tokd_utf8_encode(cp, enc));
            break;
        }
        default: return jp_err(p, "invalid escape");
        }
    }
    return jv_str_nocopy(p->c, b.p ? b.p : "", b.n);
}

static bool jp_lit(jp *p, const char *w) {
    size_t n = strlen(w);
    if (p->n - p->i >= n && memcmp(p->s + p->i, w, n) == 0) {
        p->i += n;
        return true;
    }
    return false;
}

static jv *jp_value(jp *p) {
    jp_ws(p);
    if (p->i >= p->n) return jp_err(p, "unexpected end of JSON");
    if (++p->depth > 512) return jp_err(p, "JSON nested too deeply");
    jv *r = NULL;
    char ch = p->s[p->i];
    if (ch == '{') {
        p->i++;
        r = jv_dict(p->c, JD_DICT);
        jp_ws(p);
        if (p->i < p->n && p->s[p->i] == '}') {
            p->i++;
        } else {
            for (;;) {
                jp_ws(p);
                if (p->i >= p->n || p->s[p->i] != '"') return jp_err(p, "expected a string key");
                jv *k = jp_string(p);
                if (!k) return NULL;
                jp_ws(p);
                if (p->i >= p->n || p->s[p->i] != ':') return jp_err(p, "expected ':'");
                p->i++;
                jv *v = jp_value(p);
                if (!v) return NULL;
                jv_dict_set(p->c, r, k, v);
                jp_ws(p);
                if (p->i < p->n && p->s[p->i] == ',') {
                    p->i++;
                    continue;
                }
                if (p->i < p->n && p->s[p->i] == '}') {
                    p->i++;
                    break;
                }
                return jp_err(p, "expected ',' or '}'");
            }
        }
    } else if (ch == '[') {
        p->i++;
        r = jv_list(p->c, JL_LIST, 0);
        jp_ws(p);
        if (p->i < p->n && p->s[p->i] == ']') {
            p->i++;
        } else {
            for (;;) {
                jv *v = jp_value(p);
                if (!v) return NULL;
                jv_list_push(p->c, r, v);
                jp_ws(p);
                if (p->i < p->n && p->s[p->i] == ',') {
                    p->i++;
                    continue;
                }
                if (p->i < p->n && p->s[p->i] == ']') {
                    p->i++;
                    break;
                }
                return jp_err(p, "expected ',' or ']'");
            }
        }
    } else if (ch == '"') {
        r = jp_string(p);
    } else if (jp_lit(p, "true")) {
        r = JV_TRUE;
    } else if (jp_lit(p, "false")) {
        r = JV_FALSE;
    } else if (jp_lit(p, "null")) {
        r = JV_NONEP;
    } else if (jp_lit(p, "NaN")) {
        r = jv_float(p->c, NAN);
    } else if (jp_lit(p, "Infinity")) {
        r = jv_float(p->c, INFINITY);
    } else if (jp_lit(p, "-Infinity")) {
        r = jv_float(p->c, -INFINITY);
    } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
        size_t st = p->i;
        if (p->s[p->i] == '-') p->i++;
        if (p->i >= p->n || !(p->s[p->i] >= '0' && p->s[p->i] <= '9')) return jp_err(p, "invalid number");
        if (p->s[p->i] == '0')
            p->i++;
        else
            while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
        bool isf = false;
        if (p->i + 1 < p->n && p->s[p->i] == '.' && p->s[p->i + 1] >= '0' && p->s[p->i + 1] <= '9') {
            isf = true;
            p->i++;
            while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
        }
        if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
            size_t save = p->i++;
            if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
            if (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
                isf = true;
                while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
            } else {
                p->i = save;
            }
        }
        char tmp[64];
        size_t len = p->i - st;
        char *num = len < sizeof tmp ? tmp : ja_alloc(&p->c->arena, len + 1);
        memcpy(num, p->s + st, len);
        num[len] = 0;
        if (!isf) {
            errno = 0;
            long long v = strtoll(num, NULL, 10);
            if (errno == 0) {
                r = jv_int(p->c, v);
            } else {
                r = jv_float(p->c, strtod(num, NULL)); /* beyond int64: Python would keep a bigint */
            }
        } else {
            r = jv_float(p->c, strtod(num, NULL));
        }
    } else {
        return jp_err(p, "unexpected character");
    }
    p->depth--;
    return r;
}

jv *pyjson_parse(jctx *c, const char *s, size_t n, char *msg, size_t msgsz) {
    jp p = {.c = c, .s = s, .n = n, .msg = msg, .msgsz = msgsz};
    msg[0] = 0;
    jv *v = jp_value(&p);
    if (!v) return NULL;
    jp_ws(&p);
    if (p.i != p.n) return jp_err(&p, "extra data after JSON value");
    return v;
}
