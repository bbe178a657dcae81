/* grammar.c — GBNF-style grammar parser and compiler (see grammar.h for the syntax and the
 * compiled form).
 *
 * The parser is recursive descent over the text, lowering as it goes: each rule collects
 * its elements in its own growable array, alternatives separated by END elements, which is
 * already the compiled layout; groups and repetitions create generated rules. Names are
 * resolved at the end (references may precede definitions). Then two checks: every
 * referenced rule is defined, and no rule is left-recursive (computed from which rules can
 * derive the empty string). Limits keep hostile text cheap: nesting depth, repetition
 * counts and the total number of elements. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_internal.h"

#define MAX_DEPTH 128
#define MAX_REPEAT 10000
#define MAX_ELEMS (1 << 22)
#define MAX_CLASS_RANGES 4096

typedef struct {
    uint8_t type;
    int32_t a; /* CHAR: class index; REF: rule index */
} bel;

typedef struct {
    char *name;
    bel *el;
    int32_t n, cap;
    bool defined;
    size_t where; /* offset of the definition or first reference */
} brule;

typedef struct {
    uint32_t *r; /* lo,hi pairs */
    int32_t n;
} bclass;

typedef struct {
    const char *s;
    size_t len, pos;
    brule *rules;
    int32_t n_rules, cap_rules;
    bclass *classes;
    int32_t n_classes, cap_classes;
    int64_t n_elems;
    int32_t *names;   /* open-addressing table of user rule indices (-1 empty) */
    uint32_t names_mask;
    int32_t n_named;
    int depth;
    char msg[400];
    bool failed;
} parser;

static int fail_at(parser *p, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail_at(parser *p, size_t at, const char *fmt, ...) {
    if (p->failed) return -1;
    p->failed = true;
    int line = 1, col = 1;
    for (size_t i = 0; i < at && i < p->len; i++) {
        if (p->s[i] == '\n') line++, col = 1;
        else if (((unsigned char)p->s[i] & 0xC0) != 0x80) col++;
    }
    char m[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    snprintf(p->msg, sizeof p->msg, "grammar: line %d, column %d: %s", line, col, m);
    return -1;
}

static int32_t new_rule(parser *p, const char *name, size_t nlen, size_t where) {
    if (p->n_rules == p->cap_rules) {
        p->cap_rules = p->cap_rules ? p->cap_rules * 2 : 32;
        p->rules = tokd_xrealloc(p->rules, (size_t)p->cap_rules * sizeof *p->rules);
    }
    brule *r = &p->rules[p->n_rules];
    memset(r, 0, sizeof *r);
    r->name = tokd_xmalloc(nlen + 1);
    memcpy(r->name, name, nlen);
    r->name[nlen] = 0;
    r->where = where;
    return p->n_rules++;
}

/* A generated rule, named after its parent and position. */
static int32_t anon_rule(parser *p, int32_t parent, size_t where) {
    char buf[160];
    int n = snprintf(buf, sizeof buf, "%.100s/%d", p->rules[parent].name, p->n_rules);
    int32_t r = new_rule(p, buf, (size_t)n, where);
    p->rules[r].defined = true;
    return r;
}

static uint32_t name_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* User-named rules only (generated ones are not in the table). */
static int32_t find_rule(parser *p, const char *name, size_t nlen) {
    if (!p->names) return -1;
    for (uint32_t h = name_hash(name, nlen) & p->names_mask;; h = (h + 1) & p->names_mask) {
        int32_t r = p->names[h];
        if (r < 0) return -1;
        if (strlen(p->rules[r].name) == nlen && !memcmp(p->rules[r].name, name, nlen)) return r;
    }
}

static int32_t named_rule(parser *p, const char *name, size_t nlen, size_t where) {
    if ((uint32_t)(p->n_named + 1) * 2 > p->names_mask) {
        uint32_t cap = p->names_mask ? (p->names_mask + 1) * 2 : 64;
        int32_t *old = p->names;
        uint32_t old_cap = p->names ? p->names_mask + 1 : 0;
        p->names = tokd_xmalloc(cap * sizeof *p->names);
        memset(p->names, 0xff, cap * sizeof *p->names);
        p->names_mask = cap - 1;
        for (uint32_t i = 0; i < old_cap; i++) {
            if (old[i] < 0) continue;
            const char *nm = p->rules[old[i]].name;
            uint32_t h = name_hash(nm, strlen(nm)) & p->names_mask;
            while (p->names[h] >= 0) h = (h + 1) & p->names_mask;
            p->names[h] = old[i];
        }
        free(old);
    }
    int32_t r = new_rule(p, name, nlen, where);
    uint32_t h = name_hash(name, nlen) & p->names_mask;
    while (p->names[h] >= 0) h = (h + 1) & p->names_mask;
    p->names[h] = r;
    p->n_named++;
    return r;
}

static int emit(parser *p, int32_t rule, uint8_t type, int32_t a) {
    if (++p->n_elems > MAX_ELEMS) return fail_at(p, p->pos, "grammar too large (more than %d elements)", MAX_ELEMS);
    brule *r = &p->rules[rule];
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 8;
        r->el = tokd_xrealloc(r->el, (size_t)r->cap * sizeof *r->el);
    }
    r->el[r->n++] = (bel){type, a};
    return 0;
}

static int cmp_u32pair(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sort and merge ranges; negate if asked. Takes ownership of r. */
static int32_t add_class(parser *p, uint32_t *r, int32_t n, bool negate) {
    qsort(r, (size_t)n, 2 * sizeof(uint32_t), cmp_u32pair);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (m && r[2 * i] <= r[2 * (m - 1) + 1] + 1) {
            if (r[2 * i + 1] > r[2 * (m - 1) + 1]) r[2 * (m - 1) + 1] = r[2 * i + 1];
        } else {
            r[2 * m] = r[2 * i];
            r[2 * m + 1] = r[2 * i + 1];
            m++;
        }
    }
    if (negate) {
        uint32_t *q = tokd_xmalloc((size_t)(m + 1) * 2 * sizeof *q);
        int32_t k = 0;
        uint32_t next = 0;
        for (int32_t i = 0; i < m; i++) {
            if (r[2 * i] > next) q[2 * k] = next, q[2 * k + 1] = r[2 * i] - 1, k++;
            next = r[2 * i + 1] + 1;
        }
        if (next <= 0x10FFFF) q[2 * k] = next, q[2 * k + 1] = 0x10FFFF, k++;
        free(r);
        r = q;
        m = k;
    }
    /* surrogates are not characters: no class holds them, so no UTF-8 prefix of one survives */
    uint32_t *q = tokd_xmalloc((size_t)(2 * m + 2) * 2 * sizeof *q);
    int32_t k = 0;
    for (int32_t i = 0; i < m; i++) {
        uint32_t lo = r[2 * i], hi = r[2 * i + 1];
        if (hi < 0xD800 || lo > 0xDFFF) {
            q[2 * k] = lo, q[2 * k + 1] = hi, k++;
            continue;
        }
        if (lo < 0xD800) q[2 * k] = lo, q[2 * k + 1] = 0xD7FF, k++;
        if (hi > 0xDFFF) q[2 * k] = 0xE000, q[2 * k + 1] = hi, k++;
    }
    free(r);
    r = q;
    m = k;
    if (p->n_classes == p->cap_classes) {
        p->cap_classes = p->cap_classes ? p->cap_classes * 2 : 32;
        p->classes = tokd_xrealloc(p->classes, (size_t)p->cap_classes * sizeof *p->classes);
    }
    p->classes[p->n_classes] = (bclass){r, m};
    return p->n_classes++;
}

static int32_t single_class(parser *p, uint32_t cp) {
    uint32_t *r = tokd_xmalloc(2 * sizeof *r);
    r[0] = r[1] = cp;
    return add_class(p, r, 1, false);
}

/* ---- lexing ---------------------------------------------------------------------------- */

static void skip_ws(parser *p) {
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') p->pos++;
        else if (c == '#') {
            while (p->pos < p->len && p->s[p->pos] != '\n') p->pos++;
        } else break;
    }
}

static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static size_t name_len(const parser *p, size_t at) {
    size_t n = 0;
    while (at + n < p->len && is_name_char(p->s[at + n])) n++;
    return n;
}

/* Is there `name ::=` at the current position? */
static bool at_definition(parser *p) {
    size_t n = name_len(p, p->pos);
    if (!n) return false;
    size_t save = p->pos;
    p->pos += n;
    skip_ws(p);
    bool r = p->len - p->pos >= 3 && !memcmp(p->s + p->pos, "::=", 3);
    p->pos = save;
    return r;
}

/* One UTF-8 code point from the text; -1 (error set) if invalid. */
static int64_t read_utf8(parser *p) {
    const unsigned char *s = (const unsigned char *)p->s;
    size_t at = p->pos;
    unsigned c = s[at];
    int n;
    uint32_t cp;
    if (c < 0x80) n = 0, cp = c;
    else if (c >= 0xC2 && c <= 0xDF) n = 1, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) n = 2, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) n = 3, cp = c & 0x07;
    else return fail_at(p, at, "invalid UTF-8");
    if (p->len - at < (size_t)n + 1) return fail_at(p, at, "invalid UTF-8");
    for (int i = 1; i <= n; i++) {
        if ((s[at + i] & 0xC0) != 0x80) return fail_at(p, at, "invalid UTF-8");
        cp = (cp << 6) | (s[at + i] & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
        return fail_at(p, at, "invalid UTF-8");
    p->pos += (size_t)n + 1;
    return cp;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A character of a literal or class, escapes decoded; -1 on error. */
static int64_t read_char(parser *p) {
    size_t at = p->pos;
    if (p->pos >= p->len) return fail_at(p, at, "unexpected end of grammar");
    if (p->s[p->pos] != '\\') return read_utf8(p);
    if (++p->pos >= p->len) return fail_at(p, at, "unexpected end of grammar after '\\'");
    char c = p->s[p->pos++];
    int nhex = 0;
    switch (c) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case '0': return 0;
    case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/': case '.': return c;
    case 'x': nhex = 2; break;
    case 'u': nhex = 4; break;
    case 'U': nhex = 8; break;
    default:
        if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7F) return fail_at(p, at, "unknown escape");
        return fail_at(p, at, "unknown escape '\\%c'", c);
    }
    uint32_t v = 0;
    for (int i = 0; i < nhex; i++) {
        int h = p->pos < p->len ? hexval(p->s[p->pos]) : -1;
        if (h < 0) return fail_at(p, at, "escape '\\%c' needs %d hex digits", c, nhex);
        v = v * 16 + (uint32_t)h;
        p->pos++;
    }
    if (v > 0x10FFFF) return fail_at(p, at, "code point U+%X out of range", v);
    return v;
}

/* ---- items ------------------------------------------------------------------------------ */

/* What one item parsed to: a sequence of classes (a literal; one class for [..] and .) or
 * one rule reference. */
typedef struct {
    bool is_ref;
    int32_t ref;
    int32_t *cls;
    int32_t n, cap;
} atom;

static void atom_push(atom *a, int32_t c) {
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 8;
        a->cls = tokd_xrealloc(a->cls, (size_t)a->cap * sizeof *a->cls);
    }
    a->cls[a->n++] = c;
}

static int parse_alternatives(parser *p, int32_t rule);

static int parse_class(parser *p, atom *a) {
    size_t at = p->pos++; /* '[' */
    bool neg = false;
    if (p->pos < p->len && p->s[p->pos] == '^') neg = true, p->pos++;
    uint32_t *r = NULL;
    int32_t n = 0, cap = 0;
    for (;;) {
        if (p->pos >= p->len) {
            free(r);
            return fail_at(p, at, "unterminated character class");
        }
        if (p->s[p->pos] == ']') {
            p->pos++;
            break;
        }
        int64_t lo = read_char(p), hi;
        if (lo < 0) goto bad;
        hi = lo;
        if (p->pos + 1 < p->len && p->s[p->pos] == '-' && p->s[p->pos + 1] != ']') {
            size_t rat = p->pos++;
            hi = read_char(p);
            if (hi < 0) goto bad;
            if (hi < lo) {
                fail_at(p, rat, "range end below its start");
                goto bad;
            }
        }
        if (n == MAX_CLASS_RANGES) {
            fail_at(p, at, "character class too long");
            goto bad;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            r = tokd_xrealloc(r, (size_t)cap * 2 * sizeof *r);
        }
        r[2 * n] = (uint32_t)lo;
        r[2 * n + 1] = (uint32_t)hi;
        n++;
    }
    if (!n) {
        free(r);
        return fail_at(p, at, "empty character class");
    }
    atom_push(a, add_class(p, r, n, neg));
    return 0;
bad:
    free(r);
    return -1;
}

static int parse_atom(parser *p, int32_t rule, atom *a) {
    size_t at = p->pos;
    char c = p->s[p->pos];
    if (c == '"') {
        p->pos++;
        for (;;) {
            if (p->pos >= p->len) return fail_at(p, at, "unterminated string literal");
            if (p->s[p->pos] == '"') {
                p->pos++;
                return 0;
            }
            if (p->s[p->pos] == '\n') return fail_at(p, p->pos, "newline in string literal (use \\n)");
            int64_t cp = read_char(p);
            if (cp < 0) return -1;
            atom_push(a, single_class(p, (uint32_t)cp));
        }
    }
    if (c == '[') return parse_class(p, a);
    if (c == '.') {
        p->pos++;
        uint32_t *r = tokd_xmalloc(2 * sizeof *r);
        r[0] = 0, r[1] = 0x10FFFF;
        atom_push(a, add_class(p, r, 1, false));
        return 0;
    }
    if (c == '(') {
        if (p->depth >= MAX_DEPTH) return fail_at(p, at, "groups nested too deeply");
        p->pos++;
        int32_t g = anon_rule(p, rule, at);
        p->depth++;
        if (parse_alternatives(p, g)) return -1;
        p->depth--;
        skip_ws(p);
        if (p->pos >= p->len || p->s[p->pos] != ')') return fail_at(p, at, "unclosed '('");
        p->pos++;
        a->is_ref = true;
        a->ref = g;
        return 0;
    }
    size_t n = name_len(p, p->pos);
    if (n) {
        int32_t r = find_rule(p, p->s + p->pos, n);
        if (r < 0) r = named_rule(p, p->s + p->pos, n, at);
        p->pos += n;
        a->is_ref = true;
        a->ref = r;
        return 0;
    }
    if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7F) return fail_at(p, at, "unexpected character");
    return fail_at(p, at, "unexpected '%c'", c);
}

static int read_count(parser *p, long *out) {
    size_t at = p->pos;
    long v = 0;
    if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9') return fail_at(p, at, "expected a number");
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        v = v * 10 + (p->s[p->pos++] - '0');
        if (v > MAX_REPEAT) return fail_at(p, at, "repetition count above %d", MAX_REPEAT);
    }
    *out = v;
    return 0;
}

/* Postfix after an atom: min/max (-1 = unbounded); 1,1 when none. */
static int parse_postfix(parser *p, long *mn, long *mx) {
    *mn = *mx = 1;
    if (p->pos >= p->len) return 0;
    char c = p->s[p->pos];
    if (c == '*') *mn = 0, *mx = -1, p->pos++;
    else if (c == '+') *mn = 1, *mx = -1, p->pos++;
    else if (c == '?') *mn = 0, *mx = 1, p->pos++;
    else if (c == '{') {
        size_t at = p->pos++;
        skip_ws(p);
        if (read_count(p, mn)) return -1;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            skip_ws(p);
            if (p->pos < p->len && p->s[p->pos] == '}') *mx = -1;
            else {
                if (read_count(p, mx)) return -1;
                if (*mx < *mn) return fail_at(p, at, "repetition maximum below minimum");
            }
            skip_ws(p);
        } else *mx = *mn;
        if (p->pos >= p->len || p->s[p->pos] != '}') return fail_at(p, at, "expected '}' to close the repetition");
        p->pos++;
    }
    if (p->pos < p->len && (p->s[p->pos] == '*' || p->s[p->pos] == '+' || p->s[p->pos] == '?'))
        return fail_at(p, p->pos, "repetition of a repetition: use parentheses");
    return 0;
}

static int emit_one(parser *p, int32_t rule, const atom *a) {
    if (a->is_ref) return emit(p, rule, TG_REF, a->ref);
    return emit(p, rule, TG_CHAR, a->cls[0]);
}

static int parse_sequence(parser *p, int32_t rule) {
    for (;;) {
        skip_ws(p);
        if (p->pos >= p->len) return 0;
        char c = p->s[p->pos];
        if (c == '|' || c == ')') return 0;
        if (at_definition(p)) return 0;
        size_t at = p->pos;
        atom a = {0};
        long mn, mx;
        if (parse_atom(p, rule, &a) || parse_postfix(p, &mn, &mx)) {
            free(a.cls);
            return -1;
        }
        int rc = 0;
        if (mn == 1 && mx == 1) {
            if (a.is_ref) rc = emit(p, rule, TG_REF, a.ref);
            else
                for (int32_t i = 0; i < a.n && !rc; i++) rc = emit(p, rule, TG_CHAR, a.cls[i]);
            free(a.cls);
            if (rc) return -1;
            continue;
        }
        if (!a.is_ref && a.n == 0) { /* "" repeated is "" */
            free(a.cls);
            continue;
        }
        if (!a.is_ref && a.n > 1) { /* a literal repeated: wrap it */
            int32_t w = anon_rule(p, rule, at);
            for (int32_t i = 0; i < a.n && !rc; i++) rc = emit(p, w, TG_CHAR, a.cls[i]);
            rc = rc ? rc : emit(p, w, TG_END, 0);
            free(a.cls);
            a = (atom){.is_ref = true, .ref = w};
            if (rc) return -1;
        }
        for (long i = 0; i < mn && !rc; i++) rc = emit_one(p, rule, &a);
        if (!rc && mx < 0) { /* S ::= x S | "" */
            int32_t s = anon_rule(p, rule, at);
            rc = emit_one(p, s, &a);
            rc = rc ? rc : emit(p, s, TG_REF, s);
            rc = rc ? rc : emit(p, s, TG_END, 0);
            rc = rc ? rc : emit(p, s, TG_END, 0);
            rc = rc ? rc : emit(p, rule, TG_REF, s);
        } else if (!rc && mx > mn) { /* O_k ::= x O_{k-1} | "" */
            int32_t prev = -1;
            for (long k = 0; k < mx - mn && !rc; k++) {
                int32_t o = anon_rule(p, rule, at);
                rc = emit_one(p, o, &a);
                if (prev >= 0) rc = rc ? rc : emit(p, o, TG_REF, prev);
                rc = rc ? rc : emit(p, o, TG_END, 0);
                rc = rc ? rc : emit(p, o, TG_END, 0);
                prev = o;
            }
            rc = rc ? rc : emit(p, rule, TG_REF, prev);
        }
        free(a.cls);
        if (rc) return -1;
    }
}

static int parse_alternatives(parser *p, int32_t rule) {
    for (;;) {
        if (parse_sequence(p, rule) || emit(p, rule, TG_END, 0)) return -1;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == '|') {
            p->pos++;
            continue;
        }
        return 0;
    }
}

/* ---- checks and compilation ----------------------------------------------------------- */

/* Left recursion: a cycle in the graph "rule A may begin with rule B". */
static int check_left_recursion(parser *p) {
    int32_t R = p->n_rules;
    bool *nullable = tokd_xcalloc((size_t)R, 1);
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t r = 0; r < R; r++) {
            if (nullable[r]) continue;
            brule *b = &p->rules[r];
            bool alt_null = true;
            for (int32_t i = 0; i < b->n; i++) {
                bel e = b->el[i];
                if (e.type == TG_END) {
                    if (alt_null) {
                        nullable[r] = changed = true;
                        break;
                    }
                    alt_null = true;
                } else if (e.type == TG_CHAR || !nullable[e.a]) alt_null = false;
            }
        }
    }
    /* edges r -> s ("r may begin with s"), in CSR form */
    int32_t *deg = tokd_xcalloc((size_t)R + 1, sizeof *deg), *adj = NULL, *fill = NULL;
    for (int pass = 0; pass < 2; pass++) {
        if (pass) {
            for (int32_t r = 0; r < R; r++) deg[r + 1] += deg[r];
            adj = tokd_xmalloc((size_t)(deg[R] + 1) * sizeof *adj);
            fill = tokd_xcalloc((size_t)R + 1, sizeof *fill);
        }
        for (int32_t r = 0; r < R; r++) {
            brule *b = &p->rules[r];
            bool open = true;
            for (int32_t i = 0; i < b->n; i++) {
                bel e = b->el[i];
                if (e.type == TG_END) open = true;
                else if (!open) continue;
                else if (e.type == TG_CHAR) open = false;
                else {
                    if (pass) adj[deg[r] + fill[r]++] = e.a;
                    else deg[r + 1]++;
                    if (!nullable[e.a]) open = false;
                }
            }
        }
    }
    free(fill);
    /* iterative DFS with colours: a grey successor closes a cycle */
    uint8_t *col = tokd_xcalloc((size_t)R, 1);
    int32_t *st = tokd_xmalloc((size_t)(R ? R : 1) * 2 * sizeof *st);
    int rc = 0;
    for (int32_t s0 = 0; s0 < R && !rc; s0++) {
        if (col[s0]) continue;
        int32_t sp = 1;
        st[0] = s0, st[1] = deg[s0], col[s0] = 1;
        while (sp && !rc) {
            int32_t u = st[2 * (sp - 1)], *it = &st[2 * (sp - 1) + 1];
            if (*it == deg[u + 1]) {
                col[u] = 2;
                sp--;
                continue;
            }
            int32_t v = adj[(*it)++];
            if (col[v] == 1) {
                const char *nm = p->rules[v].name, *slash = strchr(nm, '/');
                if (slash)
                    rc = fail_at(p, p->rules[v].where, "left recursion: this group or repetition in rule '%.*s' can repeat without consuming input",
                                 (int)(slash - nm), nm);
                else rc = fail_at(p, p->rules[v].where, "left recursion through rule '%s'", nm);
            }
            else if (!col[v]) {
                col[v] = 1;
                st[2 * sp] = v, st[2 * sp + 1] = deg[v], sp++;
            }
        }
    }
    free(col);
    free(st);
    free(adj);
    free(deg);
    free(nullable);
    return rc;
}

static void parser_free(parser *p) {
    for (int32_t i = 0; i < p->n_rules; i++) {
        free(p->rules[i].name);
        free(p->rules[i].el);
    }
    free(p->rules);
    for (int32_t i = 0; i < p->n_classes; i++) free(p->classes[i].r);
    free(p->classes);
    free(p->names);
}

tokd_grammar *tokd_grammar_parse(const char *src, size_t len, tokd_err *err) {
    parser p = {.s = src ? src : "", .len = src ? len : 0};
    skip_ws(&p);
    if (p.pos >= p.len) fail_at(&p, p.pos, "empty grammar (no rules)");
    while (!p.failed && p.pos < p.len) {
        size_t at = p.pos, n = name_len(&p, p.pos);
        if (!n) {
            fail_at(&p, at, "expected a rule name");
            break;
        }
        p.pos += n;
        skip_ws(&p);
        if (p.len - p.pos < 3 || memcmp(p.s + p.pos, "::=", 3)) {
            fail_at(&p, p.pos, "expected '::=' after rule name '%.*s'", (int)(n > 64 ? 64 : n), src + at);
            break;
        }
        p.pos += 3;
        int32_t r = find_rule(&p, src + at, n);
        if (r >= 0 && p.rules[r].defined) {
            fail_at(&p, at, "rule '%.*s' defined twice", (int)(n > 64 ? 64 : n), src + at);
            break;
        }
        if (r < 0) r = named_rule(&p, src + at, n, at);
        p.rules[r].defined = true;
        p.rules[r].where = at;
        if (parse_alternatives(&p, r)) break;
        skip_ws(&p);
        if (p.pos < p.len && p.s[p.pos] == ')') fail_at(&p, p.pos, "unmatched ')'");
    }
    int32_t root = -1;
    if (!p.failed) {
        for (int32_t i = 0; i < p.n_rules; i++)
            if (!p.rules[i].defined) {
                fail_at(&p, p.rules[i].where, "undefined rule '%.64s'", p.rules[i].name);
                break;
            }
    }
    if (!p.failed) {
        root = find_rule(&p, "root", 4);
        if (root < 0) fail_at(&p, 0, "no 'root' rule");
    }
    if (!p.failed) check_left_recursion(&p);
    if (p.failed) {
        tokd_seterr(err, "%s", p.msg);
        parser_free(&p);
        return NULL;
    }

    tokd_grammar *g = tokd_xcalloc(1, sizeof *g);
    int64_t n_r = 0;
    for (int32_t i = 0; i < p.n_classes; i++) n_r += p.classes[i].n;
    g->ranges = tokd_xmalloc((size_t)(n_r ? n_r : 1) * 2 * sizeof *g->ranges);
    int32_t *class_off = tokd_xmalloc((size_t)(p.n_classes ? p.n_classes : 1) * sizeof *class_off);
    for (int32_t i = 0; i < p.n_classes; i++) {
        class_off[i] = g->n_ranges;
        memcpy(g->ranges + 2 * (size_t)g->n_ranges, p.classes[i].r, (size_t)p.classes[i].n * 2 * sizeof *g->ranges);
        g->n_ranges += p.classes[i].n;
    }
    g->n_rules = p.n_rules;
    g->root = root;
    g->elems = tokd_xmalloc((size_t)p.n_elems * sizeof *g->elems);
    g->alt_off = tokd_xmalloc(((size_t)p.n_rules + 1) * sizeof *g->alt_off);
    int64_t n_alts = 0;
    for (int32_t r = 0; r < p.n_rules; r++)
        for (int32_t i = 0; i < p.rules[r].n; i++) n_alts += p.rules[r].el[i].type == TG_END;
    g->alt_start = tokd_xmalloc((size_t)(n_alts ? n_alts : 1) * sizeof *g->alt_start);
    g->names = tokd_xmalloc((size_t)p.n_rules * sizeof *g->names);
    int32_t na = 0;
    for (int32_t r = 0; r < p.n_rules; r++) {
        brule *b = &p.rules[r];
        g->alt_off[r] = na;
        g->names[r] = b->name;
        b->name = NULL;
        bool start = true;
        for (int32_t i = 0; i < b->n; i++) {
            if (start) g->alt_start[na++] = g->n_elems;
            tg_elem *e = &g->elems[g->n_elems++];
            memset(e, 0, sizeof *e);
            e->type = b->el[i].type;
            start = e->type == TG_END;
            if (e->type == TG_REF) e->a = b->el[i].a;
            else if (e->type == TG_CHAR) {
                bclass *c = &p.classes[b->el[i].a];
                e->a = class_off[b->el[i].a];
                e->b = c->n;
                for (int32_t k = 0; k < c->n; k++)
                    for (uint32_t cp = c->r[2 * k]; cp <= c->r[2 * k + 1] && cp < 128; cp++)
                        e->ascii[cp >> 6] |= 1ull << (cp & 63);
            }
        }
    }
    g->alt_off[p.n_rules] = na;
    free(class_off);
    parser_free(&p);
    return g;
}

void tokd_grammar_free(tokd_grammar *g) {
    if (!g) return;
    for (int32_t i = 0; i < g->n_rules; i++) free(g->names[i]);
    free(g->names);
    free(g->elems);
    free(g->ranges);
    free(g->alt_off);
    free(g->alt_start);
    free(g);
}

int32_t tokd_grammar_n_rules(const tokd_grammar *g) { return g->n_rules; }
