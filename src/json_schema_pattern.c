/* json_schema_pattern.c — a JSON Schema `pattern` -> a grammar expression for the string.
 *
 * A pattern is an ECMA-262 regular expression searched in the string's value. The grammar
 * describes the string's JSON text, so the work is two steps: parse the pattern into a small
 * tree (character sets, concatenation, alternation, repetition), then write the tree as
 * grammar text in which every character set becomes the raw characters JSON allows plus the
 * escapes of the others (" as \", a newline as \n, other controls as \u00XX).
 *
 * The promise is json_schema.c's: every string the grammar admits matches the pattern; the
 * grammar may admit fewer. It writes one spelling of each character, takes no characters
 * outside the Basic Multilingual Plane from sets, and leaves out of every set (unless that
 * empties it) the characters on which regex engines disagree or which a model has no
 * business writing: controls other than tab, newline and carriage return, the C1 controls,
 * and the Unicode spaces beyond ASCII. Sets are computed exactly (ECMA's \s, `.`, [^...])
 * before that filter, so a complement never grows by it.
 *
 * Supported: literals (any UTF-8), `.`, [...] and [^...] with ranges and escapes, \d \D \w
 * \W \s \S, \t \n \r \v \f \0 \cX \xHH \uHHHH (surrogate pairs combined), escaped
 * punctuation, (...) and (?:...), |, * + ? {m} {m,} {m,n} (m, n <= 10000; a lazy `?` after
 * them changes nothing here), ^ at the start and $ at the end of a top-level alternative
 * (without them the match may sit anywhere: `char1*` around it, any character but the \u
 * escapes of surrogates, which alone are not characters), and { } ] as literals where they
 * cannot be syntax. Refused by name: look-around and other (?...) groups, back-references,
 * \b \B, \p{...}, octal and unknown letter escapes, the empty classes [] and [^], [: [= [.
 * inside a class (POSIX syntax elsewhere), {,n}, ^ or $ elsewhere, characters outside the
 * BMP inside [...] or before a quantifier (ECMA without the u flag sees two UTF-16 units
 * there; other engines one).
 *
 * minLength/maxLength (code points, as JSON Schema counts): when every string of the pattern
 * already has a length within them, nothing changes; else the pattern is written as an
 * automaton that counts characters (emit_counted, below), as rules of their own.
 *
 * A repetition of something that can match the empty string is written as a repetition of
 * its non-empty strings, since the grammar refuses rules that recur without consuming. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_schema_pattern.h"
#include "unicode_utf8.h"

#define MAX_REPEAT 10000
#define MAX_DEPTH 64
#define MAX_NODES 20000
#define MAX_OUT (4u << 20)
#define INF (-1L)
#define LEN_CAP (1L << 40) /* lengths saturate here: a longer maximum is no maximum */

typedef struct {
    uint32_t lo, hi;
} cp_range;

typedef struct {
    cp_range *r;
    int n, cap;
} cp_set;

enum { P_SET, P_ANY, P_CAT, P_ALT, P_REP };

typedef struct {
    int type;
    cp_set set;   /* P_SET */
    bool astral;  /* P_SET: one literal beyond U+FFFF */
    int *kids;    /* P_CAT, P_ALT */
    int n_kids, cap_kids;
    int kid;      /* P_REP: kid{min,max}, max INF = unbounded */
    long min, max;
    long len_min, len_max; /* code points matched; len_max INF = unbounded */
} pnode;

typedef struct {
    const char *s;
    size_t pos, len;
    pnode *nodes;
    int n_nodes, cap_nodes;
    int depth;
    bool parsing; /* errors name the offset */
    const char *what; /* errors name it: "'pattern'", or the format the pattern stands for */
    const char *hint; /* ends the errors about size: where the pattern is the user's, the way out */
    tokd_buf *out;
    size_t written, max_written; /* bytes written for this pattern, expression and rules; the most allowed */
    char *msg;
    size_t msg_size;
    bool failed;
} pctx;

static int pfail(pctx *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int pfail(pctx *p, const char *fmt, ...) {
    if (p->failed) return -1;
    p->failed = true;
    char why[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (p->parsing) snprintf(p->msg, p->msg_size, "json schema: %s: %s (at offset %zu)", p->what, why, p->pos);
    else snprintf(p->msg, p->msg_size, "json schema: %s: %s", p->what, why);
    return -1;
}

/* ---- code-point sets: sorted, merged ranges ------------------------------------------------ */

static void set_add(cp_set *s, uint32_t lo, uint32_t hi) {
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 8;
        s->r = tokd_xrealloc(s->r, (size_t)s->cap * sizeof *s->r);
    }
    s->r[s->n++] = (cp_range){lo, hi};
}

static int range_cmp(const void *a, const void *b) {
    const cp_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void set_norm(cp_set *s) {
    if (s->n < 2) return;
    qsort(s->r, (size_t)s->n, sizeof *s->r, range_cmp);
    int k = 0;
    for (int i = 1; i < s->n; i++) {
        if (s->r[i].lo <= s->r[k].hi + 1) {
            if (s->r[i].hi > s->r[k].hi) s->r[k].hi = s->r[i].hi;
        } else {
            s->r[++k] = s->r[i];
        }
    }
    s->n = k + 1;
}

static void set_free(cp_set *s) {
    free(s->r);
    *s = (cp_set){0};
}

/* Every code point up to U+10FFFF not in s (s normalised). */
static void set_complement(cp_set *s) {
    cp_set c = {0};
    uint32_t next = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->r[i].lo > next) set_add(&c, next, s->r[i].lo - 1);
        next = s->r[i].hi + 1;
    }
    if (next <= 0x10FFFF) set_add(&c, next, 0x10FFFF);
    set_free(s);
    *s = c;
}

/* s ∩ t, both normalised. */
static cp_set set_intersect(const cp_set *s, const cp_set *t) {
    cp_set r = {0};
    for (int i = 0, j = 0; i < s->n && j < t->n;) {
        uint32_t lo = s->r[i].lo > t->r[j].lo ? s->r[i].lo : t->r[j].lo;
        uint32_t hi = s->r[i].hi < t->r[j].hi ? s->r[i].hi : t->r[j].hi;
        if (lo <= hi) set_add(&r, lo, hi);
        if (s->r[i].hi < t->r[j].hi) i++;
        else j++;
    }
    return r;
}

static cp_set set_of(const uint32_t (*ranges)[2], int n) {
    cp_set s = {0};
    for (int i = 0; i < n; i++) set_add(&s, ranges[i][0], ranges[i][1]);
    set_norm(&s);
    return s;
}

static const uint32_t DIGIT[][2] = {{'0', '9'}};
static const uint32_t WORD[][2] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
/* ECMA-262 WhiteSpace and LineTerminator: what \s matches */
static const uint32_t SPACE[][2] = {{0x09, 0x0D}, {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
                                    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
static const uint32_t LINE_END[][2] = {{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}};
/* What sets may hold: the BMP without surrogates (ECMA without the u flag matches UTF-16 units) */
static const uint32_t DOMAIN[][2] = {{0, 0xD7FF}, {0xE000, 0xFFFF}};
/* ... and what they keep when anything else is left (see the header) */
static const uint32_t PREFERRED[][2] = {{0x09, 0x0A}, {0x0D, 0x0D}, {0x20, 0x7E},     {0xA1, 0x167F}, {0x1681, 0x1FFF},
                                        {0x200B, 0x2027}, {0x202A, 0x202E}, {0x2030, 0x205E}, {0x2060, 0x2FFF},
                                        {0x3001, 0xD7FF}, {0xE000, 0xFEFE}, {0xFF00, 0xFFFF}};

#define SET_OF(a) set_of(a, (int)(sizeof a / sizeof *a))

/* ---- the tree -------------------------------------------------------------------------------- */

static int new_node(pctx *p, int type) {
    if (p->n_nodes >= MAX_NODES) return pfail(p, "more than %d parts", MAX_NODES);
    if (p->n_nodes == p->cap_nodes) {
        p->cap_nodes = p->cap_nodes ? p->cap_nodes * 2 : 32;
        p->nodes = tokd_xrealloc(p->nodes, (size_t)p->cap_nodes * sizeof *p->nodes);
    }
    p->nodes[p->n_nodes] = (pnode){.type = type};
    return p->n_nodes++;
}

static void add_kid(pctx *p, int parent, int kid) {
    pnode *n = &p->nodes[parent];
    if (n->n_kids == n->cap_kids) {
        n->cap_kids = n->cap_kids ? n->cap_kids * 2 : 4;
        n->kids = tokd_xrealloc(n->kids, (size_t)n->cap_kids * sizeof *n->kids);
    }
    n->kids[n->n_kids++] = kid;
}

static long len_add(long a, long b) { return a == INF || b == INF || a + b >= LEN_CAP ? INF : a + b; }
static long len_mul(long a, long k) {
    if (a == 0 || k == 0) return 0;
    return a == INF || k == INF || a >= LEN_CAP / k ? INF : a * k;
}
static long len_min_sat(long v) { return v == INF || v > LEN_CAP ? LEN_CAP : v; }

/* Fill in a node's length range from its kids. */
static void finish(pctx *p, int i) {
    pnode *n = &p->nodes[i];
    switch (n->type) {
    case P_SET: n->len_min = n->len_max = 1; break;
    case P_ANY: n->len_min = 0, n->len_max = INF; break;
    case P_CAT:
        n->len_min = n->len_max = 0;
        for (int k = 0; k < n->n_kids; k++) {
            const pnode *c = &p->nodes[n->kids[k]];
            n->len_min = len_min_sat(len_add(n->len_min, c->len_min));
            n->len_max = len_add(n->len_max, c->len_max);
        }
        break;
    case P_ALT:
        n->len_min = p->nodes[n->kids[0]].len_min;
        n->len_max = p->nodes[n->kids[0]].len_max;
        for (int k = 1; k < n->n_kids; k++) {
            const pnode *c = &p->nodes[n->kids[k]];
            if (c->len_min < n->len_min) n->len_min = c->len_min;
            if (n->len_max != INF) n->len_max = c->len_max == INF || c->len_max > n->len_max ? c->len_max : n->len_max;
        }
        break;
    case P_REP: {
        const pnode *c = &p->nodes[n->kid];
        n->len_min = len_min_sat(len_mul(c->len_min, n->min));
        n->len_max = c->len_max == 0 || n->max == 0 ? 0 : len_mul(c->len_max, n->max);
        break;
    }
    }
}

/* A set node from s (taken): within DOMAIN, then PREFERRED where that leaves anything. */
static int set_node(pctx *p, cp_set *s, bool astral) {
    cp_set r = *s;
    *s = (cp_set){0};
    if (!astral) {
        cp_set dom = SET_OF(DOMAIN), pref = SET_OF(PREFERRED);
        cp_set in = set_intersect(&r, &dom), kept = set_intersect(&in, &pref);
        set_free(&r);
        if (kept.n) {
            set_free(&in);
            r = kept;
        } else {
            set_free(&kept);
            r = in;
        }
        set_free(&dom);
        set_free(&pref);
    }
    if (!r.n) {
        set_free(&r);
        return pfail(p, "a character class that matches no character");
    }
    int i = new_node(p, P_SET);
    if (i < 0) {
        set_free(&r);
        return -1;
    }
    p->nodes[i].set = r;
    p->nodes[i].astral = astral;
    finish(p, i);
    return i;
}

static int char_node(pctx *p, uint32_t cp) {
    cp_set s = {0};
    set_add(&s, cp, cp);
    return set_node(p, &s, cp > 0xFFFF);
}

/* ---- the parser ------------------------------------------------------------------------------ */

static int parse_alt(pctx *p, bool top);

static char peek(const pctx *p, size_t ahead) { return p->pos + ahead < p->len ? p->s[p->pos + ahead] : 0; }

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* n hex digits at the cursor; -1 if there are not n. */
static long read_hex(pctx *p, int n) {
    long v = 0;
    for (int i = 0; i < n; i++) {
        int d = hex_digit(peek(p, (size_t)i));
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    p->pos += (size_t)n;
    return v;
}

/* One UTF-8 character at the cursor. */
static int read_utf8(pctx *p, uint32_t *cp) {
    int n = tokd_utf8_decode((const uint8_t *)p->s + p->pos, p->len - p->pos, cp);
    if (n <= 0) return pfail(p, "invalid UTF-8");
    p->pos += (size_t)n;
    return 0;
}

/* After a backslash: a class escape (sets *set, returns 1) or one character (sets *cp,
 * returns 0); -1 on error. */
static int parse_escape(pctx *p, bool in_class, uint32_t *cp, cp_set *set) {
    char e = peek(p, 0);
    if (!e) return pfail(p, "the pattern ends with a backslash");
    p->pos++;
    switch (e) {
    case 'd': case 'D': *set = SET_OF(DIGIT); break;
    case 'w': case 'W': *set = SET_OF(WORD); break;
    case 's': case 'S': *set = SET_OF(SPACE); break;
    case 'n': *cp = '\n'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'v': *cp = '\v'; return 0;
    case 'f': *cp = '\f'; return 0;
    case '0':
        if (peek(p, 0) >= '0' && peek(p, 0) <= '9') return pfail(p, "octal escapes are not supported");
        *cp = 0;
        return 0;
    case 'b':
        if (!in_class) return pfail(p, "word boundaries (\\b) are not supported");
        *cp = '\b';
        return 0;
    case 'B': return pfail(p, "word boundaries (\\B) are not supported");
    case 'c': {
        char l = peek(p, 0);
        if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z'))) return pfail(p, "malformed \\c escape");
        p->pos++;
        *cp = (uint32_t)l % 32;
        return 0;
    }
    case 'x': {
        long v = read_hex(p, 2);
        if (v < 0) return pfail(p, "malformed \\x escape (two hex digits)");
        *cp = (uint32_t)v;
        return 0;
    }
    case 'u': {
        if (peek(p, 0) == '{') return pfail(p, "\\u{...} needs the u flag, which JSON Schema patterns do not have");
        long v = read_hex(p, 4);
        if (v < 0) return pfail(p, "malformed \\u escape (four hex digits)");
        if (v >= 0xD800 && v <= 0xDBFF && peek(p, 0) == '\\' && peek(p, 1) == 'u') {
            size_t at = p->pos;
            p->pos += 2;
            long lo = read_hex(p, 4);
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                *cp = 0x10000 + (((uint32_t)v - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                return 0;
            }
            p->pos = at;
        }
        if (v >= 0xD800 && v <= 0xDFFF) return pfail(p, "a lone surrogate \\u%04lX", v);
        *cp = (uint32_t)v;
        return 0;
    }
    case 'k': return pfail(p, "back-references are not supported");
    case 'p': case 'P': return pfail(p, "Unicode property escapes (\\p) are not supported");
    default:
        if (e >= '1' && e <= '9') return pfail(p, "back-references are not supported");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) return pfail(p, "unknown escape \\%c", e);
        p->pos--;
        return read_utf8(p, cp) ? -1 : 0; /* an escaped punctuation or other character: itself */
    }
    set_norm(set);
    if (e == 'D' || e == 'W' || e == 'S') set_complement(set);
    return 1;
}

/* One member of a class: 1 (a class escape, in *set), 0 (a character, in *cp), -1. */
static int class_atom(pctx *p, uint32_t *cp, cp_set *set) {
    int r;
    if (peek(p, 0) == '\\') {
        p->pos++;
        r = parse_escape(p, true, cp, set);
    } else {
        r = read_utf8(p, cp) ? -1 : 0;
    }
    if (r == 0 && *cp > 0xFFFF) return pfail(p, "characters beyond U+FFFF inside [...] are not supported");
    return r;
}

static int parse_class(pctx *p) {
    p->pos++; /* [ */
    bool neg = peek(p, 0) == '^';
    if (neg) p->pos++;
    if (peek(p, 0) == ']') return pfail(p, "the empty classes [] and [^] are not supported (regex engines read them differently)");
    cp_set acc = {0};
    while (peek(p, 0) != ']') {
        if (p->pos >= p->len) {
            set_free(&acc);
            return pfail(p, "missing ']'");
        }
        if (peek(p, 0) == '[' && (peek(p, 1) == ':' || peek(p, 1) == '=' || peek(p, 1) == '.')) {
            set_free(&acc);
            return pfail(p, "'[%c' inside a class (POSIX classes are not ECMA syntax; escape the '[')", peek(p, 1));
        }
        uint32_t a = 0, b = 0;
        cp_set as = {0}, bs = {0};
        int ka = class_atom(p, &a, &as), kb = 0;
        bool range = ka >= 0 && peek(p, 0) == '-' && peek(p, 1) && peek(p, 1) != ']';
        if (range) {
            p->pos++;
            kb = class_atom(p, &b, &bs);
        }
        if (ka < 0 || kb < 0 || (range && (ka || kb)) || (range && a > b)) {
            if (ka >= 0 && kb >= 0) pfail(p, range && (ka || kb) ? "a range bounded by a class escape such as \\d" : "a range out of order");
            set_free(&as), set_free(&bs), set_free(&acc);
            return -1;
        }
        if (ka) {
            for (int i = 0; i < as.n; i++) set_add(&acc, as.r[i].lo, as.r[i].hi);
        } else {
            set_add(&acc, a, range ? b : a);
        }
        set_free(&as), set_free(&bs);
    }
    p->pos++; /* ] */
    set_norm(&acc);
    if (neg) set_complement(&acc);
    return set_node(p, &acc, false);
}

/* At a '{': the length of a quantifier {m}, {m,} or {m,n} there (0: none), its counts (above
 * MAX_REPEAT: MAX_REPEAT + 1). */
static size_t quantifier_at(const pctx *p, long *m, long *n) {
    size_t i = 1;
    long v[2] = {0, 0};
    int have[2] = {0, 0};
    for (int part = 0; part < 2; part++) {
        while (peek(p, i) >= '0' && peek(p, i) <= '9') {
            if (v[part] <= MAX_REPEAT) v[part] = v[part] * 10 + (peek(p, i) - '0');
            have[part]++, i++;
        }
        if (!part) {
            if (!have[0]) return 0;
            if (peek(p, i) == '}') {
                *m = *n = v[0];
                return i + 1;
            }
            if (peek(p, i) != ',') return 0;
            i++;
        }
    }
    if (peek(p, i) != '}') return 0;
    *m = v[0];
    *n = have[1] ? v[1] : INF;
    return i + 1;
}

static int parse_atom(pctx *p) {
    char ch = peek(p, 0);
    long m, n;
    switch (ch) {
    case '(': {
        p->pos++;
        if (peek(p, 0) == '?') {
            if (peek(p, 1) != ':') return pfail(p, "groups '(?' other than '(?:' (look-around, named groups) are not supported");
            p->pos += 2;
        }
        if (++p->depth > MAX_DEPTH) return pfail(p, "groups nested deeper than %d", MAX_DEPTH);
        int g = parse_alt(p, false);
        p->depth--;
        if (g < 0) return -1;
        if (peek(p, 0) != ')') return pfail(p, "missing ')'");
        p->pos++;
        return g;
    }
    case '[': return parse_class(p);
    case '.': {
        p->pos++;
        cp_set s = SET_OF(LINE_END);
        set_complement(&s);
        return set_node(p, &s, false);
    }
    case '\\': {
        p->pos++;
        uint32_t cp = 0;
        cp_set s = {0};
        int k = parse_escape(p, false, &cp, &s);
        if (k < 0) return -1;
        return k ? set_node(p, &s, false) : char_node(p, cp);
    }
    case '*': case '+': case '?': return pfail(p, "nothing to repeat before '%c'", ch);
    case '{':
        if (quantifier_at(p, &m, &n)) return pfail(p, "nothing to repeat before '{'");
        if (peek(p, 1) == ',') return pfail(p, "'{,n}' is read differently by regex engines; write {0,n}");
        p->pos++;
        return char_node(p, '{');
    default: {
        uint32_t cp;
        if (read_utf8(p, &cp)) return -1;
        return char_node(p, cp);
    }
    }
}

/* An optional quantifier after the atom; returns the atom or its repetition. */
static int parse_quantifier(pctx *p, int atom) {
    long m = 0, n = INF;
    size_t len = 1;
    switch (peek(p, 0)) {
    case '*': break;
    case '+': m = 1; break;
    case '?': n = 1; break;
    case '{':
        len = quantifier_at(p, &m, &n);
        if (!len) return atom;
        break;
    default: return atom;
    }
    if (p->nodes[atom].astral)
        return pfail(p, "a character beyond U+FFFF before a quantifier (ECMA repeats only its second UTF-16 unit)");
    p->pos += len;
    if (m > MAX_REPEAT || n > MAX_REPEAT) return pfail(p, "a repetition count above %d", MAX_REPEAT);
    if (n != INF && n < m) return pfail(p, "numbers out of order in a {m,n} quantifier");
    if (peek(p, 0) == '?') p->pos++; /* lazy: the same strings */
    long m2, n2;
    char c = peek(p, 0);
    if (c == '*' || c == '+' || c == '?' || (c == '{' && quantifier_at(p, &m2, &n2)))
        return pfail(p, "nothing to repeat before '%c'", c);
    int r = new_node(p, P_REP);
    if (r < 0) return -1;
    p->nodes[r].kid = atom;
    p->nodes[r].min = m;
    p->nodes[r].max = n;
    finish(p, r);
    return r;
}

/* A sequence up to '|', ')' or the end; at the top level with its anchors. */
static int parse_cat(pctx *p, bool top, bool *start, bool *end) {
    int cat = new_node(p, P_CAT);
    if (cat < 0) return -1;
    if (top && peek(p, 0) == '^') {
        p->pos++;
        *start = true;
    }
    for (;;) {
        char ch = peek(p, 0);
        if (p->pos >= p->len || ch == '|' || ch == ')') break;
        if (ch == '$') {
            char next = peek(p, 1);
            if (top && (p->pos + 1 >= p->len || next == '|')) {
                p->pos++;
                *end = true;
                break;
            }
            return pfail(p, "'$' is supported only at the end of the pattern or of a top-level alternative");
        }
        if (ch == '^') return pfail(p, "'^' is supported only at the start of the pattern or of a top-level alternative");
        int atom = parse_atom(p);
        if (atom >= 0) atom = parse_quantifier(p, atom);
        if (atom < 0) return -1;
        add_kid(p, cat, atom);
    }
    finish(p, cat);
    return cat;
}

static int parse_alt(pctx *p, bool top) {
    int alt = new_node(p, P_ALT);
    if (alt < 0) return -1;
    for (;;) {
        bool start = false, end = false;
        int cat = parse_cat(p, top, &start, &end);
        if (cat < 0) return -1;
        if (top && (!start || !end)) { /* a search: anything before and after */
            int w = new_node(p, P_CAT), a = -1, z = -1;
            if (w < 0 || (!start && (a = new_node(p, P_ANY)) < 0) || (!end && (z = new_node(p, P_ANY)) < 0)) return -1;
            if (a >= 0) finish(p, a), add_kid(p, w, a);
            add_kid(p, w, cat);
            if (z >= 0) finish(p, z), add_kid(p, w, z);
            finish(p, w);
            cat = w;
        }
        add_kid(p, alt, cat);
        if (peek(p, 0) != '|') break;
        p->pos++;
    }
    finish(p, alt);
    return alt;
}

/* ---- grammar text ---------------------------------------------------------------------------- */

static void put(pctx *p, const char *s) {
    size_t n = strlen(s);
    tokd_buf_append(p->out, s, n);
    p->written += n;
    if (p->written > p->max_written)
        pfail(p, p->max_written < MAX_OUT ? "the schema's grammar grows past its %zu bytes left%s" : "its grammar grows past %zu bytes%s",
              p->max_written, p->hint);
}

static void putf(pctx *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(pctx *p, const char *fmt, ...) {
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    put(p, tmp);
}

static void put_quant(pctx *p, long m, long n) {
    if (n == INF) {
        if (m == 0) put(p, "*");
        else if (m == 1) put(p, "+");
        else putf(p, "{%ld,}", m);
    } else if (m == 0 && n == 1) {
        put(p, "?");
    } else if (m == n) {
        if (m != 1) putf(p, "{%ld}", m);
    } else {
        putf(p, "{%ld,%ld}", m, n);
    }
}

static void put_cp(pctx *p, uint32_t cp) {
    if (cp <= 0xFFFF) putf(p, "\\u%04X", cp);
    else putf(p, "\\U%08X", cp);
}

/* The JSON text of a set's characters: raw where JSON allows (and tokd's `char` writes them),
 * else their escapes. */
static int emit_set(pctx *p, const cp_set *s) {
    static const uint32_t RAW[][2] = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x7E}, {0x80, 0x10FFFF}};
    cp_set raw_all = SET_OF(RAW), raw = set_intersect(s, &raw_all);
    set_free(&raw_all);
    uint32_t esc[40];
    int n_esc = 0;
    for (int i = 0; i < s->n; i++)
        for (uint32_t c = s->r[i].lo; c <= s->r[i].hi && c < 0x80; c++)
            if (c < 0x20 || c == '"' || c == '\\' || c == 0x7F) esc[n_esc++] = c;
    bool group = (raw.n > 0) + n_esc > 1;
    if (group) put(p, "( ");
    if (raw.n == 1 && raw.r[0].lo == raw.r[0].hi) {
        put(p, "\"");
        put_cp(p, raw.r[0].lo);
        put(p, "\"");
    } else if (raw.n) {
        put(p, "[");
        for (int i = 0; i < raw.n; i++) {
            put_cp(p, raw.r[i].lo);
            if (raw.r[i].hi != raw.r[i].lo) put(p, "-"), put_cp(p, raw.r[i].hi);
        }
        put(p, "]");
    }
    for (int i = 0; i < n_esc; i++) {
        if (raw.n || i) put(p, " | ");
        const char *tail = esc[i] == '"' ? "\\\"" : esc[i] == '\\' ? "\\\\" : esc[i] == '\b' ? "b" : esc[i] == '\f' ? "f"
                         : esc[i] == '\n' ? "n" : esc[i] == '\r' ? "r" : esc[i] == '\t' ? "t" : NULL;
        if (tail) putf(p, "\"\\\\%s\"", tail);
        else putf(p, "\"\\\\u%04x\"", esc[i]);
    }
    if (group) put(p, " )");
    set_free(&raw);
    return p->failed ? -1 : 0;
}

static int emit(pctx *p, int i);

/* L(node) without the empty string; the node must match something non-empty. */
static int emit_nonempty(pctx *p, int i) {
    if (p->failed) return -1;
    const pnode *n = &p->nodes[i];
    if (n->len_min > 0) return emit(p, i);
    int rc = 0;
    bool first = true;
    switch (n->type) {
    case P_ANY: put(p, "char1+"); return 0;
    case P_ALT: /* each alternative's non-empty strings */
    case P_CAT: /* (every kid can be empty) the first non-empty kid's, then the others as they are */
        put(p, "( ");
        for (int k = 0; k < n->n_kids && !rc; k++) {
            if (!p->nodes[n->kids[k]].len_max) continue;
            if (!first) put(p, " | ");
            first = false;
            rc = emit_nonempty(p, n->kids[k]);
            for (int j = k + 1; n->type == P_CAT && j < n->n_kids && !rc; j++) put(p, " "), rc = emit(p, n->kids[j]);
        }
        put(p, " )");
        return rc;
    case P_REP: { /* a first non-empty copy, then up to max - 1 more (n is optional) */
        const pnode *k = &p->nodes[n->kid];
        put(p, "( ");
        rc = emit_nonempty(p, n->kid);
        if (!rc && n->max == INF) {
            put(p, " ( ");
            rc = k->len_min ? emit(p, n->kid) : emit_nonempty(p, n->kid);
            put(p, " )*");
        } else if (!rc && n->max > 1) {
            put(p, " ( ");
            rc = emit(p, n->kid);
            put(p, " )");
            put_quant(p, 0, n->max - 1);
        }
        put(p, " )");
        return rc;
    }
    default: return emit(p, i);
    }
}

static int emit(pctx *p, int i) {
    if (p->failed) return -1;
    const pnode *n = &p->nodes[i];
    int rc = 0;
    switch (n->type) {
    case P_SET: return emit_set(p, &n->set);
    case P_ANY: put(p, "char1*"); return 0;
    case P_CAT:
    case P_ALT:
        if (!n->n_kids) {
            put(p, "\"\"");
            return 0;
        }
        put(p, "( ");
        for (int k = 0; k < n->n_kids && !rc; k++) {
            if (k) put(p, n->type == P_ALT ? " | " : " ");
            rc = emit(p, n->kids[k]);
        }
        put(p, " )");
        return rc;
    case P_REP: {
        const pnode *k = &p->nodes[n->kid];
        if (!n->len_max) {
            put(p, "\"\"");
            return 0;
        }
        put(p, "( ");
        if (n->max == INF && !k->len_min) { /* x{m,} with x optional is x*: its non-empty strings, starred */
            rc = emit_nonempty(p, n->kid);
            put(p, " )*");
            return rc;
        }
        rc = emit(p, n->kid);
        put(p, " )");
        put_quant(p, n->min, n->max);
        return rc;
    }
    }
    return 0;
}

/* ---- length bounds: the pattern's positions times a character count --------------------------
 *
 * When minLength/maxLength do not already hold for every string of the pattern, the pattern
 * becomes a Glushkov automaton (a state per character set of the pattern, "position", plus
 * the start; an edge p -> q when q's set may follow p's; no empty moves), and the grammar
 * its product with a count of the characters read: rule (s, n) is "in state s after n
 * characters". Counted repetitions are unrolled into copies (no more than maxLength leaves
 * room for); with no maxLength the count stops at minLength ("n or more"). Only the states
 * that can still reach an accepting one within the bounds get rules, so no rule is empty.
 * Every string has one count, so the matcher holds at most one stack per state. */

#define MAX_POS 2048
#define MAX_PRODUCT 1000000 /* states x counts */

typedef struct {
    bool nullable, empty;
    uint64_t *first, *last;
} ginfo;

typedef struct {
    pctx *p;
    int n_pos, words;
    long hi;
    int *leaf;        /* position -> its P_SET or P_ANY node */
    uint64_t *follow; /* MAX_POS + 1 bitsets of `words` words; position 0 is the start */
} glushkov;

static bool bit(const uint64_t *b, int i) { return b[i >> 6] >> (i & 63) & 1; }
static void bits_or(const glushkov *g, uint64_t *to, const uint64_t *from) {
    for (int w = 0; w < g->words; w++) to[w] |= from[w];
}

static ginfo gi_epsilon(const glushkov *g) {
    return (ginfo){.nullable = true, .first = tokd_xcalloc((size_t)g->words, 8), .last = tokd_xcalloc((size_t)g->words, 8)};
}
static void gi_free(ginfo *x) { free(x->first), free(x->last); }

/* a := a b (b freed) */
static void gi_cat(glushkov *g, ginfo *a, ginfo *b) {
    for (int x = 1; x <= g->n_pos; x++)
        if (bit(a->last, x)) bits_or(g, g->follow + (size_t)x * g->words, b->first);
    if (a->nullable) bits_or(g, a->first, b->first);
    if (b->nullable) bits_or(g, b->last, a->last);
    free(a->last);
    a->last = b->last;
    a->nullable = a->nullable && b->nullable;
    a->empty = a->empty || b->empty;
    free(b->first);
}

static ginfo gi_build(glushkov *g, int i);

/* x{m,n} over copies of x; n INF: m copies then a loop */
static ginfo gi_repeat(glushkov *g, int x, long m, long n) {
    const pnode *k = &g->p->nodes[x];
    ginfo cur = gi_epsilon(g);
    if (k->len_max == 0) return cur; /* only "" */
    if (k->len_min == 0) m = 0;      /* copies may be empty: x{m,n} is x{0,n} */
    if (g->hi >= 0) {                /* no more copies than characters allow */
        long most = k->len_min ? g->hi / k->len_min : g->hi;
        if (m > most) {
            cur.empty = true, cur.nullable = false;
            return cur;
        }
        if (n != INF && n > most) n = most; /* (a loop stays a loop: the count bounds it) */
    }
    for (long c = 0; c < m && !g->p->failed; c++) {
        ginfo one = gi_build(g, x);
        gi_cat(g, &cur, &one);
    }
    if (n == INF) {
        ginfo loop = gi_build(g, x);
        for (int y = 1; y <= g->n_pos; y++)
            if (bit(loop.last, y)) bits_or(g, g->follow + (size_t)y * g->words, loop.first);
        if (loop.empty) gi_free(&loop); /* no copy fits: x* is "" */
        else loop.nullable = true, gi_cat(g, &cur, &loop);
    } else {
        ginfo tail = gi_epsilon(g); /* (x (x ...)?)? from the inside out */
        for (long c = m; c < n && !g->p->failed; c++) {
            ginfo one = gi_build(g, x);
            if (one.empty) { /* no copy fits: the optional copies are "" */
                gi_free(&one);
                break;
            }
            gi_cat(g, &one, &tail);
            one.nullable = true;
            tail = one;
        }
        gi_cat(g, &cur, &tail);
    }
    return cur;
}

static ginfo gi_build(glushkov *g, int i) {
    const pnode *n = &g->p->nodes[i];
    ginfo r = gi_epsilon(g);
    if (g->p->failed) return r;
    switch (n->type) {
    case P_SET:
    case P_ANY:
        if (g->n_pos == MAX_POS) {
            pfail(g->p, "with minLength/maxLength, more than %d character sets once repetitions are unrolled%s", MAX_POS,
                  g->p->hint);
            return r;
        }
        g->leaf[++g->n_pos] = i;
        r.first[g->n_pos >> 6] |= 1ull << (g->n_pos & 63);
        r.last[g->n_pos >> 6] |= 1ull << (g->n_pos & 63);
        r.nullable = false;
        if (n->type == P_ANY) { /* any number of characters: a looping position */
            uint64_t *f = g->follow + (size_t)g->n_pos * g->words;
            f[g->n_pos >> 6] |= 1ull << (g->n_pos & 63);
            r.nullable = true;
        }
        return r;
    case P_CAT:
        for (int k = 0; k < n->n_kids; k++) {
            ginfo kid = gi_build(g, n->kids[k]);
            gi_cat(g, &r, &kid);
        }
        return r;
    case P_ALT: /* (an alternative with no string that fits is left out) */
        r.nullable = false;
        r.empty = true;
        for (int k = 0; k < n->n_kids; k++) {
            ginfo kid = gi_build(g, n->kids[k]);
            if (!kid.empty) {
                bits_or(g, r.first, kid.first);
                bits_or(g, r.last, kid.last);
                r.nullable |= kid.nullable;
                r.empty = false;
            }
            gi_free(&kid);
        }
        return r;
    case P_REP:
        gi_free(&r);
        return gi_repeat(g, n->kid, n->min, n->max);
    }
    return r;
}

/* Rules p<id>-<state>-<count> into p->out (the rules buffer) and the reference to the start
 * into expr: 0, or -1 (no string fits: message set). */
static int emit_counted(pctx *p, int root, long lo, long hi, int id, tokd_buf *expr) {
    glushkov g = {.p = p, .hi = hi, .words = (MAX_POS + 1 + 63) / 64};
    g.leaf = tokd_xcalloc(MAX_POS + 1, sizeof *g.leaf);
    g.follow = tokd_xcalloc((size_t)(MAX_POS + 1) * (size_t)g.words, 8);
    ginfo r = gi_build(&g, root);
    int rc = p->failed ? -1 : 0;
    long top = hi >= 0 ? hi : lo; /* counts 0..top; without hi, top means "lo or more" */
    int n_states = g.n_pos + 1, wn = (n_states + 63) / 64; /* the words of a bitset in use */
    if (!rc && (double)n_states * (double)(top + 1) > MAX_PRODUCT)
        rc = pfail(p, "with minLength/maxLength, %d character sets times %ld counts is too large%s", g.n_pos, top + 1, p->hint);
    bits_or(&g, g.follow, r.first);
    uint8_t *alive = NULL, *seen = NULL;
    if (!rc && !r.empty) {
        size_t cells = (size_t)n_states * (size_t)(top + 1);
        alive = tokd_xcalloc(cells, 1);
        seen = tokd_xcalloc(cells, 1);
#define CELL(s, c) ((size_t)(s) * (size_t)(top + 1) + (size_t)(c))
        /* alive (s, c): from state s after c characters an accepting state (a last position,
           or the start when the pattern can be empty) with lo reached is still reachable. A
           character adds one to the count, except at the saturated top (no maxLength), where
           aliveness is a search backwards along the edges. */
        int *queue = tokd_xcalloc((size_t)n_states, sizeof *queue);
        for (long c = top; c >= 0; c--) {
            bool saturated = hi < 0 && c == top;
            int nq = 0;
            for (int s = 0; s < n_states; s++) {
                bool ok = c >= lo && (s ? bit(r.last, s) : r.nullable);
                const uint64_t *f = g.follow + (size_t)s * (size_t)g.words;
                for (int w = 0; w < wn && !ok && !saturated && c < top; w++)
                    for (uint64_t m = f[w]; m && !ok; m &= m - 1) ok = alive[CELL(w * 64 + __builtin_ctzll(m), c + 1)];
                if (ok) alive[CELL(s, c)] = 1, queue[nq++] = s;
            }
            while (saturated && nq) {
                int q = queue[--nq];
                for (int s = 0; s < n_states; s++)
                    if (!alive[CELL(s, c)] && bit(g.follow + (size_t)s * (size_t)g.words, q)) alive[CELL(s, c)] = 1, queue[nq++] = s;
            }
        }
        free(queue);
    }
    if (!rc && (r.empty || !alive[CELL(0, 0)])) {
        rc = hi < 0 ? pfail(p, "no string of %ld or more code points matches it", lo)
                    : pfail(p, "no string of %ld to %ld code points matches it", lo, hi);
    }
    if (!rc) {
        /* a rule per position for its characters, then the (state, count) rules reachable from (0, 0) */
        bool *used = tokd_xcalloc((size_t)n_states, 1);
        int *stack = tokd_xcalloc((size_t)n_states * (size_t)(top + 1), sizeof *stack);
        int sp = 0;
        stack[sp++] = 0;
        seen[0] = 1;
        while (sp && !p->failed) {
            int cell = stack[--sp], s = cell / (int)(top + 1);
            long c = cell % (top + 1), next = hi < 0 && c == top ? c : c + 1;
            putf(p, "p%d-%d-%ld ::=", id, s, c);
            bool any = false;
            const uint64_t *f = g.follow + (size_t)s * (size_t)g.words;
            for (int w = 0; w < wn && next <= top; w++) {
                for (uint64_t m = f[w]; m; m &= m - 1) {
                    int q = w * 64 + __builtin_ctzll(m);
                    if (!alive[CELL(q, next)]) continue;
                    putf(p, "%s p%d-c%d p%d-%d-%ld", any ? " |" : "", id, q, id, q, next);
                    any = true;
                    used[q] = true;
                    if (!seen[CELL(q, next)]) seen[CELL(q, next)] = 1, stack[sp++] = (int)CELL(q, next);
                }
            }
            if (c >= lo && (s ? bit(r.last, s) : r.nullable)) put(p, any ? " | \"\"" : " \"\"");
            put(p, "\n");
        }
        for (int q = 1; q < n_states && !p->failed; q++) {
            if (!used[q]) continue;
            putf(p, "p%d-c%d ::= ", id, q);
            if (p->nodes[g.leaf[q]].type == P_ANY) put(p, "char1");
            else emit_set(p, &p->nodes[g.leaf[q]].set);
            put(p, "\n");
        }
        free(used);
        free(stack);
        tokd_buf_appendf(expr, "p%d-0-0", id);
        rc = p->failed ? -1 : 0;
    }
#undef CELL
    free(alive);
    free(seen);
    gi_free(&r);
    free(g.leaf);
    free(g.follow);
    return rc;
}

int tokd_pattern_to_grammar(const char *pattern, const char *format, long min_len, long max_len, int id, size_t max_bytes,
                            tokd_buf *out, tokd_buf *rules, char *msg, size_t msg_size) {
    char what[80];
    snprintf(what, sizeof what, format ? "format '%s'" : "'pattern'", format);
    pctx p = {.s = pattern, .len = strlen(pattern), .out = out, .msg = msg, .msg_size = msg_size, .parsing = true,
              .what = what, .hint = format ? "" : "; put the length in the pattern", .max_written = max_bytes < MAX_OUT ? max_bytes : MAX_OUT};
    int root = parse_alt(&p, true);
    if (root >= 0 && p.pos < p.len) root = pfail(&p, "unmatched ')'");
    p.parsing = false;
    int rc = -1;
    if (root >= 0) {
        const pnode *r = &p.nodes[root];
        put(&p, "\"\\\"\" ");
        if (r->len_min >= min_len && (max_len < 0 || (r->len_max != INF && r->len_max <= max_len))) {
            rc = emit(&p, root);
        } else { /* the bounds cut into the pattern: the counted automaton, as rules */
            p.out = rules;
            rc = emit_counted(&p, root, min_len, max_len, id, out);
            p.out = out;
        }
        put(&p, " \"\\\"\"");
    }
    for (int i = 0; i < p.n_nodes; i++) {
        set_free(&p.nodes[i].set);
        free(p.nodes[i].kids);
    }
    free(p.nodes);
    return p.failed ? -1 : rc;
}
