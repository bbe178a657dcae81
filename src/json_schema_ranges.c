/* json_schema_ranges.c — see json_schema_ranges.h. */
#include "json_schema_ranges.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Equal-length digit strings a <= b: the decimal strings of that length between them. */
static void digits_between(tokd_buf *b, const char *a, const char *z, int n) {
    if (n == 0) return;
    if (n == 1) {
        tokd_buf_appendf(b, "[%c-%c]", a[0], z[0]);
        return;
    }
    if (a[0] == z[0]) {
        tokd_buf_appendf(b, "\"%c\" ", a[0]);
        digits_between(b, a + 1, z + 1, n - 1);
        return;
    }
    char nines[20], zeros[20];
    memset(nines, '9', (size_t)n), memset(zeros, '0', (size_t)n);
    tokd_buf_appendf(b, "( \"%c\" (", a[0]);
    digits_between(b, a + 1, nines, n - 1);
    tokd_buf_appendf(b, ") | ");
    if (z[0] - a[0] > 1) tokd_buf_appendf(b, "[%c-%c] [0-9]{%d} | ", a[0] + 1, z[0] - 1, n - 1);
    tokd_buf_appendf(b, "\"%c\" (", z[0]);
    digits_between(b, zeros, z + 1, n - 1);
    tokd_buf_appendf(b, ") )");
}

void tokd_range_int(tokd_buf *b, int64_t lo, int64_t hi) {
    char a[24], z[24];
    int la = snprintf(a, sizeof a, "%" PRId64, lo);
    int lz = hi < 0 ? 16 : snprintf(z, sizeof z, "%" PRId64, hi);
    bool first = true;
    for (int len = la; len <= lz; len++) {
        char from[24], to[24];
        if (len == la) memcpy(from, a, (size_t)len + 1);
        else {
            memset(from, '0', (size_t)len), from[0] = '1', from[len] = 0;
        }
        if (hi >= 0 && len == lz) memcpy(to, z, (size_t)len + 1);
        else memset(to, '9', (size_t)len), to[len] = 0;
        if (!first) tokd_buf_appendf(b, " | ");
        first = false;
        if (hi < 0 && len > la) { /* every longer number: one alternative */
            tokd_buf_appendf(b, "[1-9] [0-9]{%d,15}", len - 1);
            break;
        }
        tokd_buf_appendf(b, "(");
        digits_between(b, from, to, len);
        tokd_buf_appendf(b, ")");
    }
}

bool tokd_range_to_dec(double v, tokd_range_decimal *d) {
    double m = fabs(v);
    if (m >= 1e9) return false;
    char t[64];
    snprintf(t, sizeof t, "%.*f", TOKD_RANGE_FRAC_DIGITS, m);
    if (strtod(t, NULL) != m) return false;
    char *dot = strchr(t, '.');
    if (!dot) return false;
    *dot = 0;
    d->ip = strtoll(t, NULL, 10);
    snprintf(d->fr, sizeof d->fr, "%s", dot + 1);
    for (size_t n = strlen(d->fr); n && d->fr[n - 1] == '0';) d->fr[--n] = 0;
    return d->ip <= TOKD_RANGE_INT_MAX;
}

int tokd_range_dec_cmp(const tokd_range_decimal *a, const tokd_range_decimal *b) {
    if (a->ip != b->ip) return a->ip < b->ip ? -1 : 1;
    char x[TOKD_RANGE_FRAC_DIGITS + 1], y[TOKD_RANGE_FRAC_DIGITS + 1];
    snprintf(x, sizeof x, "%-*s", TOKD_RANGE_FRAC_DIGITS, a->fr);
    snprintf(y, sizeof y, "%-*s", TOKD_RANGE_FRAC_DIGITS, b->fr);
    for (int i = 0; i < TOKD_RANGE_FRAC_DIGITS; i++) {
        char p = x[i] == ' ' ? '0' : x[i], q = y[i] == ' ' ? '0' : y[i];
        if (p != q) return p < q ? -1 : 1;
    }
    return 0;
}

static void alt_sep(tokd_buf *b, int *n) {
    if ((*n)++) tokd_buf_appendf(b, " | ");
}

/* The fraction digits f (at most k more) after an integer part, as a grammar: 0.f at least
 * 0.A while la ("lower tight": the digits so far equal the bound's), above it if ls; at most
 * 0.B while ha, below it if hs. A and B are the bound's remaining digits (no trailing zeros).
 * top: the digits are preceded by "." (no digits: no "."). False when nothing is allowed. */
static bool frac(tokd_buf *b, const char *A, bool la, bool ls, const char *B, bool ha, bool hs, int k, bool top) {
    if (la && !*A && !ls) la = false; /* the rest is >= 0 = A */
    bool end = !la && (!ha || !hs || *B);
    const char *dot = top ? "\".\" " : "";
    tokd_buf alts = {0}, sub = {0};
    int n = 0;
    if (k > 0) {
        if (!la && !ha) {
            alt_sep(&alts, &n);
            tokd_buf_appendf(&alts, "%s[0-9]{1,%d}", dot, k);
        } else {
            char lo_d = la ? (*A ? *A : '0') : '0', hi_d = ha ? (*B ? *B : '0') : '9';
            char f_lo = (char)(la ? lo_d + 1 : lo_d), f_hi = (char)(ha ? hi_d - 1 : hi_d);
            if (f_lo <= f_hi) { /* digits strictly inside: anything may follow */
                alt_sep(&alts, &n);
                tokd_buf_appendf(&alts, "%s[%c-%c]", dot, f_lo, f_hi);
                if (k > 1) tokd_buf_appendf(&alts, " [0-9]{0,%d}", k - 1);
            }
            if (la) {
                bool both = ha && lo_d == hi_d;
                if (frac(&sub, *A ? A + 1 : A, true, ls, both ? (*B ? B + 1 : B) : "", both, hs, k - 1, false)) {
                    alt_sep(&alts, &n);
                    tokd_buf_appendf(&alts, "%s\"%c\" %s", dot, lo_d, sub.data);
                }
                tokd_buf_clear(&sub);
            }
            if (ha && !(la && lo_d == hi_d) &&
                frac(&sub, "", false, false, *B ? B + 1 : B, true, hs, k - 1, false)) {
                alt_sep(&alts, &n);
                tokd_buf_appendf(&alts, "%s\"%c\" %s", dot, hi_d, sub.data);
            }
        }
    }
    bool ok = n || end;
    if (!n && end) tokd_buf_appendf(b, "\"\"");
    else if (n) tokd_buf_appendf(b, end ? "( %s )?" : "( %s )", alts.data);
    tokd_buf_free(&alts);
    tokd_buf_free(&sub);
    return ok;
}

int tokd_range_dec(tokd_buf *b, const tokd_range_decimal *lo, bool ls, const tokd_range_decimal *hi, bool hs) {
    int n = 0;
    tokd_buf f = {0};
    if (hi && lo->ip == hi->ip) {
        if (frac(&f, lo->fr, true, ls, hi->fr, true, hs, TOKD_RANGE_FRAC_DIGITS, true)) {
            alt_sep(b, &n);
            tokd_buf_appendf(b, "\"%" PRId64 "\" %s", lo->ip, f.data);
        }
    } else {
        if (frac(&f, lo->fr, true, ls, "", false, false, TOKD_RANGE_FRAC_DIGITS, true)) {
            alt_sep(b, &n);
            tokd_buf_appendf(b, "\"%" PRId64 "\" %s", lo->ip, f.data);
        }
        tokd_buf_clear(&f);
        int64_t a = lo->ip + 1, z = hi ? hi->ip - 1 : TOKD_RANGE_INT_MAX;
        if (a <= z) {
            alt_sep(b, &n);
            tokd_buf_appendf(b, "( ");
            tokd_range_int(b, a, z);
            tokd_buf_appendf(b, " ) ( \".\" [0-9]{1,%d} )?", TOKD_RANGE_FRAC_DIGITS);
        }
        if (hi && frac(&f, "", false, false, hi->fr, true, hs, TOKD_RANGE_FRAC_DIGITS, true)) {
            alt_sep(b, &n);
            tokd_buf_appendf(b, "\"%" PRId64 "\" %s", hi->ip, f.data);
        }
    }
    tokd_buf_free(&f);
    return n;
}

