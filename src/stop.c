/* stop.c — see stop.h.
 *
 * State: `pend` holds the bytes held back from earlier pushes. A push appends the new bytes and
 * scans positions left to right. At each position, a stop string that matches completely there
 * ends the text (every earlier position was found unable to start a match, so this is the
 * earliest-starting match of the final text); otherwise, if the rest of the text is a proper
 * prefix of some stop string, everything from here on is held back, everything before emitted.
 * A position that is neither can never start a match whatever follows, so it is safe to emit. */
#include "stop.h"

#include <stdlib.h>

typedef struct {
    char *s;
    size_t len;
    int index; /* position in the caller's list */
} stop_str;

struct tokd_stop {
    stop_str *strs;
    int n;
    int stopped; /* 0, or 1 + the caller's index of the stop string that ended the text */
    tokd_buf pend;
};

static int cmp_len(const void *pa, const void *pb) {
    const stop_str *a = pa, *b = pb;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

tokd_stop *tokd_stop_new(const char *const *strs, const size_t *lens, int n) {
    tokd_stop *s = tokd_xcalloc(1, sizeof *s);
    if (n > 0) s->strs = tokd_xcalloc((size_t)n, sizeof *s->strs);
    for (int i = 0; i < n; i++) {
        if (!strs || !strs[i]) continue;
        size_t len = lens ? lens[i] : strlen(strs[i]);
        if (len == 0) continue;
        stop_str *t = &s->strs[s->n++];
        t->s = tokd_xmalloc(len);
        memcpy(t->s, strs[i], len);
        t->len = len;
        t->index = i;
    }
    /* shortest first (ties: caller order), so complete_at finds the shortest match at a position:
     * the one that completes first when streaming, which keeps tokd_stop_which split-invariant */
    if (s->n > 1) qsort(s->strs, (size_t)s->n, sizeof *s->strs, cmp_len);
    return s;
}

void tokd_stop_free(tokd_stop *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) free(s->strs[i].s);
    free(s->strs);
    tokd_buf_free(&s->pend);
    free(s);
}

void tokd_stop_reset(tokd_stop *s) {
    s->stopped = 0;
    tokd_buf_clear(&s->pend);
}

size_t tokd_stop_held(const tokd_stop *s) { return s->stopped ? 0 : s->pend.len; }

int tokd_stop_which(const tokd_stop *s) { return s->stopped ? s->stopped - 1 : -1; }

/* Index into s->strs of a stop string that matches completely at t[0..n), or -1. */
static int complete_at(const tokd_stop *s, const char *t, size_t n) {
    for (int i = 0; i < s->n; i++) {
        const stop_str *x = &s->strs[i];
        if (x->len <= n && x->s[0] == t[0] && memcmp(x->s, t, x->len) == 0) return i;
    }
    return -1;
}

/* Whether t[0..n) is a proper prefix of some stop string. */
static int prefix_at(const tokd_stop *s, const char *t, size_t n) {
    for (int i = 0; i < s->n; i++) {
        const stop_str *x = &s->strs[i];
        if (n < x->len && x->s[0] == t[0] && memcmp(x->s, t, n) == 0) return 1;
    }
    return 0;
}

/* Drop the first `k` bytes of pend. */
static void pend_consume(tokd_stop *s, size_t k) {
    size_t rest = s->pend.len - k;
    if (rest) memmove(s->pend.data, s->pend.data + k, rest);
    s->pend.len = rest;
    if (s->pend.data) s->pend.data[rest] = 0;
}

int tokd_stop_push(tokd_stop *s, const char *text, size_t len, tokd_buf *emit) {
    if (s->stopped) return 1;
    if (s->n == 0) {
        tokd_buf_append(emit, text, len);
        return 0;
    }
    if (len) tokd_buf_append(&s->pend, text, len);
    const char *t = s->pend.data;
    size_t n = s->pend.len;
    size_t p = 0;
    for (; p < n; p++) {
        int k = complete_at(s, t + p, n - p);
        if (k >= 0) {
            tokd_buf_append(emit, t, p);
            s->stopped = 1 + s->strs[k].index;
            tokd_buf_clear(&s->pend);
            return 1;
        }
        if (prefix_at(s, t + p, n - p)) break;
    }
    tokd_buf_append(emit, t, p);
    pend_consume(s, p);
    return 0;
}

int tokd_stop_flush(tokd_stop *s, tokd_buf *emit) {
    if (s->stopped) return 1;
    const char *t = s->pend.data;
    size_t n = s->pend.len;
    for (size_t p = 0; p < n; p++) {
        int k = complete_at(s, t + p, n - p);
        if (k >= 0) {
            tokd_buf_append(emit, t, p);
            s->stopped = 1 + s->strs[k].index;
            tokd_buf_clear(&s->pend);
            return 1;
        }
    }
    tokd_buf_append(emit, t, n);
    tokd_buf_clear(&s->pend);
    return 0;
}
