/* test_stop.c — stop strings over streamed text: holdback, earliest match, UTF-8, every split. */
#include <stdint.h>
#include <string.h>

#include "stop.h"
#include "t.h"

typedef struct {
    const char *s[6];
    int n;
} stopset;

/* Reference: the earliest position where a stop string matches completely, or -1; *which: the
 * shortest string matching there, then the first given. */
static long ref_stop(const char *text, size_t len, const stopset *st, int *which) {
    for (size_t p = 0; p < len; p++) {
        int best = -1;
        for (int i = 0; i < st->n; i++) {
            size_t l = strlen(st->s[i]);
            if (l && l <= len - p && memcmp(text + p, st->s[i], l) == 0 && (best < 0 || l < strlen(st->s[best]))) best = i;
        }
        if (best >= 0) {
            if (which) *which = best;
            return (long)p;
        }
    }
    return -1;
}

/* Reference: longest suffix of t[0..n) that is a proper prefix of a stop string. */
static size_t ref_held(const char *t, size_t n, const stopset *st) {
    for (size_t p = 0; p < n; p++)
        for (int i = 0; i < st->n; i++) {
            size_t l = strlen(st->s[i]);
            if (n - p < l && memcmp(t + p, st->s[i], n - p) == 0) return n - p;
        }
    return 0;
}

/* Feed text in the pieces given by cut points (ascending, within (0,len)), flush, and compare the
 * result with the reference; after every push check the holdback invariant. Returns failures. */
static int run_split(const char *text, size_t len, const stopset *st, const size_t *cuts, int ncuts, const char *what) {
    int fails = t_failed;
    tokd_stop *s = tokd_stop_new(st->s, NULL, st->n);
    tokd_buf out = {0};
    int stopped = 0;
    size_t start = 0;
    for (int c = 0; c <= ncuts && !stopped; c++) {
        size_t end = c < ncuts ? cuts[c] : len;
        stopped = tokd_stop_push(s, text + start, end - start, &out);
        if (!stopped) {
            /* emitted + held == fed so far, and held is exactly the reference holdback */
            size_t held = tokd_stop_held(s);
            CHECK(out.len + held == end, "%s: emitted %zu + held %zu != fed %zu", what, out.len, held, end);
            CHECK(memcmp(out.data ? out.data : "", text, out.len) == 0, "%s: emitted text differs from input", what);
            size_t want = ref_held(text, end, st); /* over everything fed so far */
            CHECK(held == want, "%s: after %zu bytes held %zu, want %zu", what, end, held, want);
        }
        start = end;
    }
    if (!stopped) stopped = tokd_stop_flush(s, &out);
    int which = -1;
    long p = ref_stop(text, len, st, &which);
    size_t want_len = p >= 0 ? (size_t)p : len;
    CHECK(stopped == (p >= 0), "%s: stopped %d, want %d", what, stopped, p >= 0);
    CHECK(out.len == want_len && memcmp(out.data ? out.data : "", text, want_len) == 0,
          "%s: emitted %zu bytes '%.*s', want %zu", what, out.len, (int)out.len, out.data ? out.data : "", want_len);
    if (p >= 0) CHECK(tokd_stop_which(s) == which, "%s: which %d want %d", what, tokd_stop_which(s), which);
    tokd_buf_free(&out);
    tokd_stop_free(s);
    return t_failed - fails;
}

static void every_split(const char *text, const stopset *st) {
    size_t len = strlen(text);
    char what[256];
    snprintf(what, sizeof what, "'%s' at once", text);
    run_split(text, len, st, NULL, 0, what);
    for (size_t c = 1; c < len; c++) {
        snprintf(what, sizeof what, "'%s' split at %zu", text, c);
        run_split(text, len, st, &c, 1, what);
        for (size_t d = c + 1; d < len; d++) {
            size_t cuts[2] = {c, d};
            snprintf(what, sizeof what, "'%s' split at %zu,%zu", text, c, d);
            run_split(text, len, st, cuts, 2, what);
        }
    }
    /* byte by byte */
    size_t cuts[256];
    int n = 0;
    for (size_t c = 1; c < len && n < 256; c++) cuts[n++] = c;
    snprintf(what, sizeof what, "'%s' byte by byte", text);
    run_split(text, len, st, cuts, n, what);
}

/* push one piece, check the return value and exactly what was emitted by it */
#define PUSH(s, piece, want_ret, want_emit)                                                                \
    do {                                                                                                   \
        tokd_buf e_ = {0};                                                                                 \
        int r_ = tokd_stop_push((s), (piece), strlen(piece), &e_);                                         \
        CHECK(r_ == (want_ret), "push '%s' returned %d", (piece), r_);                                     \
        CHECK(e_.len == strlen(want_emit) && memcmp(e_.data ? e_.data : "", (want_emit), e_.len) == 0,     \
              "push '%s' emitted '%.*s', want '%s'", (piece), (int)e_.len, e_.data ? e_.data : "", (want_emit)); \
        tokd_buf_free(&e_);                                                                                \
    } while (0)

#define FLUSH(s, want_ret, want_emit)                                                                      \
    do {                                                                                                   \
        tokd_buf e_ = {0};                                                                                 \
        int r_ = tokd_stop_flush((s), &e_);                                                                \
        CHECK(r_ == (want_ret), "flush returned %d", r_);                                                  \
        CHECK(e_.len == strlen(want_emit) && memcmp(e_.data ? e_.data : "", (want_emit), e_.len) == 0,     \
              "flush emitted '%.*s', want '%s'", (int)e_.len, e_.data ? e_.data : "", (want_emit));       \
        tokd_buf_free(&e_);                                                                                \
    } while (0)

static void test_overlapping(void) {
    const char *abc3[] = {"ab", "abc", "b"};
    tokd_stop *s = tokd_stop_new(abc3, NULL, 3);
    PUSH(s, "xa", 0, "x");
    CHECK(tokd_stop_held(s) == 1, "held %zu", tokd_stop_held(s));
    PUSH(s, "b", 1, ""); /* "ab" starts at the held 'a': earliest */
    CHECK(tokd_stop_which(s) == 0, "which %d", tokd_stop_which(s));
    PUSH(s, "more", 1, "");
    FLUSH(s, 1, "");
    tokd_stop_reset(s);
    PUSH(s, "xyzb", 1, "xyz");
    CHECK(tokd_stop_which(s) == 2, "which %d", tokd_stop_which(s));
    tokd_stop_reset(s);
    PUSH(s, "aa", 0, "a");
    FLUSH(s, 0, "a");
    tokd_stop_free(s);

    /* "abc" and "b": a complete "b" waits while the earlier "abc" may still complete */
    const char *two[] = {"abc", "b"};
    s = tokd_stop_new(two, NULL, 2);
    PUSH(s, "ab", 0, "");
    CHECK(tokd_stop_held(s) == 2, "held %zu", tokd_stop_held(s));
    PUSH(s, "c", 1, "");
    CHECK(tokd_stop_which(s) == 0, "which %d", tokd_stop_which(s));
    tokd_stop_reset(s);
    PUSH(s, "ab", 0, "");
    PUSH(s, "x", 1, "a");
    CHECK(tokd_stop_which(s) == 1, "which %d", tokd_stop_which(s));
    tokd_stop_reset(s);
    PUSH(s, "ab", 0, "");
    FLUSH(s, 1, "a"); /* ended: the "b" is the earliest complete match */
    tokd_stop_reset(s);
    PUSH(s, "a", 0, "");
    FLUSH(s, 0, "a");
    tokd_stop_free(s);

    /* the holdback is the *longest* suffix that is a proper prefix */
    const char *aab[] = {"aab"};
    s = tokd_stop_new(aab, NULL, 1);
    PUSH(s, "a", 0, "");
    PUSH(s, "a", 0, "");
    PUSH(s, "a", 0, "a"); /* "aaa": suffix "aa" kept */
    CHECK(tokd_stop_held(s) == 2, "held %zu", tokd_stop_held(s));
    PUSH(s, "b", 1, "");
    tokd_stop_free(s);
}

static void test_utf8(void) {
    const char *st[] = {"\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac", "\xf0\x9f\x98\x80!"}; /* é, 日本, 😀! */
    tokd_stop *s = tokd_stop_new(st, NULL, 3);
    PUSH(s, "caf\xc3", 0, "caf");
    PUSH(s, "\xa8", 0, "\xc3\xa8"); /* è is not é: released whole */
    PUSH(s, "\xe6\x97\xa5", 0, "");   /* 日 may start 日本 */
    PUSH(s, "\xe6\x9c", 0, "");
    PUSH(s, "\xac tail", 1, "");
    tokd_stop_reset(s);
    PUSH(s, "\xe6\x97\xa5\xe6\x9c\xab", 0, "\xe6\x97\xa5\xe6\x9c\xab"); /* 日末 */
    PUSH(s, "\xf0\x9f\x98\x80", 0, "");
    PUSH(s, "?", 0, "\xf0\x9f\x98\x80?");
    PUSH(s, "x\xf0\x9f\x98\x80!", 1, "x");
    tokd_stop_free(s);

    /* whole characters in, whole characters out: every emitted piece ends on a boundary */
    const char *text = "na\xc3\xafve \xe6\x97\xa5\xe6\x9c\x88 \xf0\x9f\x98\x80\xf0\x9f\x98\x80! end";
    s = tokd_stop_new(st, NULL, 3);
    tokd_buf all = {0};
    size_t i = 0, len = strlen(text);
    int stopped = 0;
    while (i < len && !stopped) {
        size_t cl = ((unsigned char)text[i] < 0x80) ? 1 : ((unsigned char)text[i] < 0xe0) ? 2 : ((unsigned char)text[i] < 0xf0) ? 3 : 4;
        tokd_buf e = {0};
        stopped = tokd_stop_push(s, text + i, cl, &e);
        if (e.len) {
            unsigned char last = (unsigned char)e.data[e.len - 1], first = (unsigned char)e.data[0];
            CHECK((first & 0xc0) != 0x80, "emitted piece starts inside a character at %zu", i);
            /* the piece ends at a boundary iff the byte after it in the text is not a continuation */
            size_t endpos = all.len + e.len;
            CHECK(endpos >= len || ((unsigned char)text[endpos] & 0xc0) != 0x80, "emitted piece ends inside a character (last %02x)", last);
        }
        tokd_buf_append(&all, e.data, e.len);
        tokd_buf_free(&e);
        i += cl;
    }
    CHECK(stopped == 1, "😀! not found");
    const char *want = "na\xc3\xafve \xe6\x97\xa5\xe6\x9c\x88 \xf0\x9f\x98\x80";
    CHECK(all.len == strlen(want) && memcmp(all.data, want, all.len) == 0, "utf8 emitted '%.*s'", (int)all.len, all.data);
    tokd_buf_free(&all);
    tokd_stop_free(s);
}

static void test_misc(void) {
    /* no stop strings / only empty ones: pass-through, nothing held */
    const char *empty[] = {"", ""};
    tokd_stop *s = tokd_stop_new(empty, NULL, 2);
    PUSH(s, "abc", 0, "abc");
    FLUSH(s, 0, "");
    tokd_stop_free(s);
    s = tokd_stop_new(NULL, NULL, 0);
    PUSH(s, "abc", 0, "abc");
    tokd_stop_free(s);

    /* empty strings are skipped, the others keep their caller index */
    const char *mixed[] = {"", "zz", ""};
    s = tokd_stop_new(mixed, NULL, 3);
    PUSH(s, "az", 0, "a");
    PUSH(s, "z", 1, "");
    CHECK(tokd_stop_which(s) == 1, "which %d", tokd_stop_which(s));
    tokd_stop_free(s);

    /* explicit lengths, with a NUL byte inside a stop string */
    const char nul_stop[] = {'x', 0, 'y'};
    const char *ns[] = {nul_stop};
    size_t nl[] = {3};
    s = tokd_stop_new(ns, nl, 1);
    tokd_buf e = {0};
    const char t1[] = {'a', 'x', 0};
    CHECK(tokd_stop_push(s, t1, 3, &e) == 0 && e.len == 1 && tokd_stop_held(s) == 2, "nul: len %zu held %zu", e.len, tokd_stop_held(s));
    CHECK(tokd_stop_push(s, "y", 1, &e) == 1 && e.len == 1, "nul: stop");
    tokd_buf_free(&e);
    tokd_stop_free(s);

    /* empty pushes are harmless */
    const char *ab[] = {"ab"};
    s = tokd_stop_new(ab, NULL, 1);
    PUSH(s, "", 0, "");
    PUSH(s, "a", 0, "");
    PUSH(s, "", 0, "");
    FLUSH(s, 0, "a");
    FLUSH(s, 0, "");
    tokd_stop_free(s);
    tokd_stop_free(NULL);
}

static uint64_t rng_state = 0x1234567;
static uint32_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

/* Random texts over a small alphabet against random stop sets, random splits. */
static void test_random(void) {
    int fails = 0;
    char bufs[6][8];
    for (int iter = 0; iter < 3000 && fails < 5; iter++) {
        stopset st = {.n = 1 + (int)(rnd() % 4)};
        for (int i = 0; i < st.n; i++) {
            int l = (int)(rnd() % 5); /* empty allowed */
            for (int j = 0; j < l; j++) bufs[i][j] = (char)('a' + rnd() % 3);
            bufs[i][l] = 0;
            st.s[i] = bufs[i];
        }
        char text[64];
        size_t len = rnd() % 40;
        for (size_t j = 0; j < len; j++) text[j] = (char)('a' + rnd() % 3);
        text[len] = 0;
        size_t cuts[64];
        int nc = 0;
        for (size_t c = 1; c < len; c++)
            if (rnd() % 3 == 0) cuts[nc++] = c;
        fails += run_split(text, len, &st, cuts, nc, "random") != 0;
    }
    CHECK(fails == 0, "%d random cases failed", fails);
}

int main(void) {
    stopset s1 = {{"ab", "abc", "b"}, 3};
    const char *texts1[] = {"xxabcx", "aab", "cab", "abab", "aaaa", "xbx", "ac", "zzzabzzz", "ba", ""};
    for (size_t i = 0; i < sizeof texts1 / sizeof *texts1; i++) every_split(texts1[i], &s1);
    stopset s2 = {{"abc", "b"}, 2};
    const char *texts2[] = {"abc", "abx", "ab", "aabcb", "xab", "a", "cccab", "abab"};
    for (size_t i = 0; i < sizeof texts2 / sizeof *texts2; i++) every_split(texts2[i], &s2);
    stopset s3 = {{"</s>", "\n\nUser:", "\xe6\x97\xa5\xe6\x9c\xac"}, 3};
    const char *texts3[] = {"Hello</s>", "Hi <</s", "a\n\nUse", "x\n\nUser: y", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", "\xe6\x97\xa5\xe6\x9c\x88 </", "</b></s>"};
    for (size_t i = 0; i < sizeof texts3 / sizeof *texts3; i++) every_split(texts3[i], &s3);
    test_overlapping();
    test_utf8();
    test_misc();
    test_random();
    T_DONE();
}
