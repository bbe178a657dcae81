/* jinja_lex.c — turns template source into tokens, applying whitespace control.
 *
 * The source is scanned for "{{", "{%" and "{#". Text between tags becomes TEXT tokens;
 * inside a tag, expression tokens are produced until the matching end delimiter, which
 * is only recognised when brackets are balanced (so "{{ {'a': {}} }}" works). Whitespace
 * control follows jinja2 with Hugging Face's settings: newlines are normalised to "\n"
 * and one trailing newline is dropped; "-" on either side of a tag strips all adjacent
 * whitespace; lstrip_blocks removes spaces/tabs between a line start and a block or
 * comment tag (unless "{%+"); trim_blocks removes the first newline after a block or
 * comment tag (unless "+%}"). {% raw %} bodies are passed through as text. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_int.h"

typedef struct {
    jarena *a;
    jmp_buf *fail;
    tokd_err *err;
    const char *s;
    size_t n, i;
    int line;
    size_t line_start;
    jtoks *out;
} lexer;

static _Noreturn void lfail(lexer *L, size_t at, const char *fmt, ...) {
    int line = 1;
    size_t ls = 0;
    for (size_t k = 0; k < at && k < L->n; k++)
        if (L->s[k] == '\n') {
            line++;
            ls = k + 1;
        }
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tokd_seterr(L->err, "%d:%zu: %s", line, at - ls + 1, msg);
    longjmp(*L->fail, 1);
}

static jtok *emit(lexer *L, jtok_kind k, size_t at) {
    if (L->out->n == L->out->cap) {
        size_t nc = L->out->cap ? L->out->cap * 2 : 256;
        L->out->v = ja_grow(L->a, L->out->v, L->out->cap * sizeof(jtok), nc * sizeof(jtok));
        L->out->cap = nc;
    }
    jtok *t = &L->out->v[L->out->n++];
    memset(t, 0, sizeof *t);
    t->kind = k;
    /* positions are tracked incrementally: tokens are emitted in source order */
    t->line = L->line;
    t->col = (int)(at - L->line_start + 1);
    return t;
}

/* advance the line counter over [from, to) */
static void count_lines(lexer *L, size_t from, size_t to) {
    for (size_t k = from; k < to; k++)
        if (L->s[k] == '\n') {
            L->line++;
            L->line_start = k + 1;
        }
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
static bool is_name0(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static void emit_text(lexer *L, size_t st, size_t en) {
    if (en > st) {
        jtok *t = emit(L, TK_TEXT, st);
        t->s = L->s + st;
        t->n = en - st;
    }
    count_lines(L, st, en);
}

/* Python string literal escapes, as jinja2 decodes them ("unicode-escape"). */
static void lex_string(lexer *L, size_t st) {
    char q = L->s[L->i++];
    char *buf = ja_alloc(L->a, 1);
    size_t bn = 0, bcap = 1;
#define PUTB(ch)                                                 \
    do {                                                         \
        if (bn + 1 >= bcap) {                                    \
            buf = ja_grow(L->a, buf, bcap, bcap * 2 + 8);        \
            bcap = bcap * 2 + 8;                                 \
        }                                                        \
        buf[bn++] = (char)(ch);                                  \
    } while (0)
    for (;;) {
        if (L->i >= L->n) lfail(L, st, "unexpected end of template inside a string literal");
        char ch = L->s[L->i++];
        if (ch == q) break;
        if (ch != '\\') {
            PUTB(ch);
            continue;
        }
        if (L->i >= L->n) lfail(L, st, "unexpected end of template inside a string literal");
        char e = L->s[L->i++];
        uint32_t cp = 0;
        int hex = 0;
        switch (e) {
        case '\n': break;
        case '\\': PUTB('\\'); break;
        case '\'': PUTB('\''); break;
        case '"': PUTB('"'); break;
        case 'a': PUTB('\a'); break;
        case 'b': PUTB('\b'); break;
        case 'f': PUTB('\f'); break;
        case 'n': PUTB('\n'); break;
        case 'r': PUTB('\r'); break;
        case 't': PUTB('\t'); break;
        case 'v': PUTB('\v'); break;
        case 'x': hex = 2; break;
        case 'u': hex = 4; break;
        case 'U': hex = 8; break;
        default:
            if (e >= '0' && e <= '7') {
                cp = (uint32_t)(e - '0');
                for (int k = 0; k < 2 && L->i < L->n && L->s[L->i] >= '0' && L->s[L->i] <= '7'; k++)
                    cp = cp * 8 + (uint32_t)(L->s[L->i++] - '0');
                hex = -1;
            } else {
                PUTB('\\');
                PUTB(e);
            }
        }
        if (hex > 0) {
            for (int k = 0; k < hex; k++) {
                if (L->i >= L->n) lfail(L, L->i, "truncated \\%c escape in string literal", e);
                char h = L->s[L->i++];
                int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
                if (d < 0) lfail(L, L->i - 1, "truncated \\%c escape in string literal", e);
                cp = cp * 16 + (uint32_t)d;
            }
            if (cp > 0x10FFFF) lfail(L, st, "illegal Unicode character in string literal");
        }
        if (hex) {
            char enc[4];
            size_t k = tokd_utf8_encode(cp, enc);
            for (size_t j = 0; j < k; j++) PUTB(enc[j]);
        }
    }
#undef PUTB
    buf[bn] = 0;
    jtok *t = emit(L, TK_STRING, st);
    t->s = buf;
    t->n = bn;
}

static void lex_number(lexer *L, size_t st) {
    const char *s = L->s;
    size_t i = L->i;
    char tmp[128];
    size_t tn = 0;
    if (s[i] == '0' && i + 1 < L->n && strchr("xXoObB", s[i + 1]) && s[i + 1]) {
        int base = (s[i + 1] == 'x' || s[i + 1] == 'X') ? 16 : (s[i + 1] == 'o' || s[i + 1] == 'O') ? 8 : 2;
        i += 2;
        uint64_t v = 0;
        size_t nd = 0;
        for (; i < L->n; i++) {
            char ch = s[i];
            if (ch == '_') continue;
            int d = is_digit(ch) ? ch - '0' : (ch >= 'a' && ch <= 'f') ? ch - 'a' + 10 : (ch >= 'A' && ch <= 'F') ? ch - 'A' + 10 : 99;
            if (d >= base) break;
            if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base || v * (uint64_t)base + (uint64_t)d > INT64_MAX)
                lfail(L, st, "integer literal too large");
            v = v * (uint64_t)base + (uint64_t)d;
            nd++;
        }
        if (!nd) lfail(L, st, "invalid integer literal");
        L->i = i;
        jtok *t = emit(L, TK_INT, st);
        t->i = (int64_t)v;
        return;
    }
    bool isf = false;
    while (i < L->n && (is_digit(s[i]) || (s[i] == '_' && i + 1 < L->n && is_digit(s[i + 1])))) {
        if (s[i] != '_' && tn < sizeof tmp - 1) tmp[tn++] = s[i];
        i++;
    }
    if (i + 1 < L->n && s[i] == '.' && is_digit(s[i + 1])) {
        isf = true;
        tmp[tn < sizeof tmp - 1 ? tn++ : tn] = '.';
        i++;
        while (i < L->n && (is_digit(s[i]) || (s[i] == '_' && i + 1 < L->n && is_digit(s[i + 1])))) {
            if (s[i] != '_' && tn < sizeof tmp - 1) tmp[tn++] = s[i];
            i++;
        }
    }
    if (i < L->n && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < L->n && (s[j] == '+' || s[j] == '-')) j++;
        if (j < L->n && is_digit(s[j])) {
            isf = true;
            if (tn < sizeof tmp - 1) tmp[tn++] = 'e';
            for (size_t k = i + 1; k < j; k++)
                if (tn < sizeof tmp - 1) tmp[tn++] = s[k];
            i = j;
            while (i < L->n && (is_digit(s[i]) || (s[i] == '_' && i + 1 < L->n && is_digit(s[i + 1])))) {
                if (s[i] != '_' && tn < sizeof tmp - 1) tmp[tn++] = s[i];
                i++;
            }
        }
    }
    if (tn >= sizeof tmp - 1) lfail(L, st, "number literal too long");
    tmp[tn] = 0;
    L->i = i;
    if (isf) {
        jtok *t = emit(L, TK_FLOAT, st);
        t->f = strtod(tmp, NULL);
    } else {
        errno = 0;
        long long v = strtoll(tmp, NULL, 10);
        if (errno) lfail(L, st, "integer literal too large");
        jtok *t = emit(L, TK_INT, st);
        t->i = v;
    }
}

static const char *const ops2[] = {"//", "**", "==", "!=", ">=", "<=", NULL};
static const char ops1[] = "+-/*%~[](){}><=.:|,;";

/* Lex the inside of a tag until its end delimiter. Returns the position after the end
 * delimiter; *strip is set when the end carried "-", *plus when it carried "+". */
static void lex_tag(lexer *L, bool is_block, size_t tag_at, bool *strip, bool *plus) {
    int depth = 0;
    for (;;) {
        while (L->i < L->n && is_ws(L->s[L->i])) {
            if (L->s[L->i] == '\n') {
                L->line++;
                L->line_start = L->i + 1;
            }
            L->i++;
        }
        if (L->i >= L->n)
            lfail(L, tag_at, "unexpected end of template: missing '%s'", is_block ? "%}" : "}}");
        const char *p = L->s + L->i;
        size_t left = L->n - L->i;
        const char *end = is_block ? "%}" : "}}";
        if (depth == 0) {
            if (left >= 3 && (p[0] == '-' || p[0] == '+') && p[1] == end[0] && p[2] == end[1] &&
                (p[0] == '-' || is_block)) {
                *strip = p[0] == '-';
                *plus = p[0] == '+';
                emit(L, is_block ? TK_BLOCK_END : TK_VAR_END, L->i);
                L->i += 3;
                return;
            }
            if (left >= 2 && p[0] == end[0] && p[1] == end[1]) {
                *strip = *plus = false;
                emit(L, is_block ? TK_BLOCK_END : TK_VAR_END, L->i);
                L->i += 2;
                return;
            }
        }
        size_t st = L->i;
        char ch = p[0];
        if (is_name0(ch)) {
            size_t j = L->i;
            while (j < L->n && (is_name0(L->s[j]) || is_digit(L->s[j]))) j++;
            jtok *t = emit(L, TK_NAME, st);
            t->s = ja_strndup(L->a, p, j - L->i);
            t->n = j - L->i;
            L->i = j;
        } else if (is_digit(ch)) {
            lex_number(L, st);
        } else if (ch == '\'' || ch == '"') {
            lex_string(L, st);
            count_lines(L, st, L->i);
        } else {
            const char *op = NULL;
            for (int k = 0; ops2[k]; k++)
                if (left >= 2 && p[0] == ops2[k][0] && p[1] == ops2[k][1]) op = ops2[k];
            size_t olen = 2;
            if (!op && ch && strchr(ops1, ch)) {
                op = ja_strndup(L->a, p, 1);
                olen = 1;
            }
            if (!op) lfail(L, st, "unexpected character '%c' in tag", ch);
            if (olen == 1 && (ch == '(' || ch == '[' || ch == '{')) depth++;
            if (olen == 1 && (ch == ')' || ch == ']' || ch == '}')) {
                if (depth == 0) lfail(L, st, "unexpected '%c'", ch);
                depth--;
            }
            jtok *t = emit(L, TK_OP, st);
            t->s = op;
            t->n = olen;
            L->i += olen;
        }
    }
}

/* Does "{%[-+]? *NAME *[-+]?%}" start at i? Returns the index after it, else 0. */
static size_t match_simple_block(lexer *L, size_t i, const char *name, char *lctl, char *rctl) {
    const char *s = L->s;
    size_t n = L->n;
    if (i + 2 > n || s[i] != '{' || s[i + 1] != '%') return 0;
    i += 2;
    *lctl = 0;
    if (i < n && (s[i] == '-' || s[i] == '+')) *lctl = s[i++];
    while (i < n && is_ws(s[i])) i++;
    size_t k = strlen(name);
    if (n - i < k || memcmp(s + i, name, k) != 0) return 0;
    i += k;
    if (i < n && (is_name0(s[i]) || is_digit(s[i]))) return 0;
    while (i < n && is_ws(s[i])) i++;
    *rctl = 0;
    if (i < n && (s[i] == '-' || s[i] == '+')) *rctl = s[i++];
    if (i + 2 > n || s[i] != '%' || s[i + 1] != '}') return 0;
    return i + 2;
}

void jinja_lex(jarena *a, jmp_buf *fail, tokd_err *err, const char *src, size_t len, jtoks *out) {
    /* normalise newlines like jinja2 (\r\n and \r become \n) and drop one trailing newline */
    char *s = ja_alloc(a, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = 0;

    lexer L = {.a = a, .fail = fail, .err = err, .s = s, .n = n, .line = 1, .out = out};
    bool line_starting = true;
    size_t pos = 0;
    while (pos < n) {
        /* find the next tag start */
        size_t t = pos;
        while (t + 1 < n && !(s[t] == '{' && (s[t + 1] == '{' || s[t + 1] == '%' || s[t + 1] == '#'))) t++;
        if (t + 1 >= n) {
            emit_text(&L, pos, n);
            break;
        }
        char kind = s[t + 1];
        char ctl = t + 2 < n && (s[t + 2] == '-' || s[t + 2] == '+') ? s[t + 2] : 0;
        size_t text_end = t;
        if (ctl == '-') {
            while (text_end > pos && is_ws(s[text_end - 1])) text_end--;
        } else if (ctl != '+' && kind != '{') {
            size_t l = t;
            while (l > pos && (s[l - 1] == ' ' || s[l - 1] == '\t' || s[l - 1] == '\v' || s[l - 1] == '\f' || s[l - 1] == '\r')) l--;
            if ((l > pos && s[l - 1] == '\n') || (l == pos && line_starting)) text_end = l;
        }
        emit_text(&L, pos, text_end);
        count_lines(&L, text_end, t);
        L.i = t + 2 + (ctl ? 1 : 0);
        bool strip = false, plus = false;
        if (kind == '#') {
            size_t e = L.i;
            while (e + 1 < n && !(s[e] == '#' && s[e + 1] == '}')) e++;
            if (e + 1 >= n) lfail(&L, t, "missing end of comment tag");
            strip = e > L.i && s[e - 1] == '-';
            plus = e > L.i && s[e - 1] == '+';
            count_lines(&L, t, e + 2);
            L.i = e + 2;
        } else if (kind == '%') {
            char lc, rc;
            size_t after = match_simple_block(&L, t, "raw", &lc, &rc);
            if (after && rc != '+') { /* jinja2 knows no "raw +%}": that falls through to an unknown tag */
                /* raw block: find {% endraw %}; no trim_blocks after the opening tag, as in jinja2 */
                size_t body = after;
                if (rc == '-')
                    while (body < n && is_ws(s[body])) body++;
                size_t e = body, eafter = 0;
                char elc = 0, erc = 0;
                for (; e + 1 < n; e++)
                    if (s[e] == '{' && s[e + 1] == '%' && (eafter = match_simple_block(&L, e, "endraw", &elc, &erc))) break;
                if (!eafter) lfail(&L, t, "missing end of raw directive");
                size_t bend = e;
                if (elc == '-') {
                    while (bend > body && is_ws(s[bend - 1])) bend--;
                } else if (elc != '+') {
                    size_t l = e;
                    while (l > body && (s[l - 1] == ' ' || s[l - 1] == '\t')) l--;
                    if (l > body && s[l - 1] == '\n') bend = l;
                }
                count_lines(&L, t, body);
                emit_text(&L, body, bend);
                count_lines(&L, bend, eafter);
                L.i = eafter;
                strip = erc == '-';
                plus = erc == '+';
            } else {
                emit(&L, TK_BLOCK_BEGIN, t);
                lex_tag(&L, true, t, &strip, &plus);
            }
        } else {
            emit(&L, TK_VAR_BEGIN, t);
            lex_tag(&L, false, t, &strip, &plus);
        }
        pos = L.i;
        if (strip) {
            while (pos < n && is_ws(s[pos])) pos++;
        } else if (kind != '{' && !plus && pos < n && s[pos] == '\n') {
            pos++; /* trim_blocks */
        }
        count_lines(&L, L.i, pos);
        line_starting = pos > 0 && s[pos - 1] == '\n';
    }
    jtok *e = emit(&L, TK_EOF, n);
    (void)e;
}
