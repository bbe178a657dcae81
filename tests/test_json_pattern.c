/* test_json_pattern.c — JSON Schema `pattern` (json_schema_pattern.c): strings a pattern must
 * admit and must not, patterns refused by name, random walks through each grammar whose
 * completed strings PCRE2 checks (in ECMA's readings: \u escapes, $ only at the very end,
 * ASCII classes), the formats written as patterns (hostname, email, uri, ipv6, duration)
 * walked the same way and checked by validators written here, and a random-weight model
 * generating under pattern schemas (and propertyNames, and uniqueItems over an enum). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <pcre2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "t.h"
#include "t_grammar_gen.h"
#include "t_json_string.h"

/* A string schema with a pattern and optional bounds (-1: absent). */
static cJSON *pattern_schema(const char *pattern, int min_len, int max_len) {
    cJSON *js = cJSON_CreateObject();
    cJSON_AddStringToObject(js, "type", "string");
    cJSON_AddStringToObject(js, "pattern", pattern);
    if (min_len >= 0) cJSON_AddNumberToObject(js, "minLength", min_len);
    if (max_len >= 0) cJSON_AddNumberToObject(js, "maxLength", max_len);
    return js;
}

static tokd_grammar *pattern_grammar(const char *pattern, int min_len, int max_len, tokd_err *e) {
    cJSON *js = pattern_schema(pattern, min_len, max_len);
    tokd_grammar *g = tokd_grammar_from_json_schema(js, false, e);
    cJSON_Delete(js);
    return g;
}

/* Does the grammar admit the JSON text of value (as cJSON writes it: the canonical escapes)? */
static bool admits(const tokd_grammar *g, const char *value) {
    cJSON *s = cJSON_CreateString(value);
    char *text = cJSON_PrintUnformatted(s);
    bool ok = tokd_grammar_match(g, text, strlen(text));
    free(text);
    cJSON_Delete(s);
    return ok;
}

typedef struct {
    const char *pattern;
    int min_len, max_len;
    const char *yes[6], *no[8];
} pcase;

static tokd_grammar *format_grammar(const char *name, int min_len, int max_len, tokd_err *e);

/* Each case's grammar (made by build from the case's pattern or format name and bounds)
 * admits its yes strings and none of its no strings. */
static void check_cases(const pcase *cases, size_t n, const char *what,
                        tokd_grammar *(*build)(const char *, int, int, tokd_err *)) {
    for (size_t i = 0; i < n; i++) {
        const pcase *c = &cases[i];
        tokd_err e = {{0}};
        tokd_grammar *g = build(c->pattern, c->min_len, c->max_len, &e);
        CHECK(g != NULL, "%s %s: %s", what, c->pattern, e.msg);
        if (!g) continue;
        for (int k = 0; k < 6 && c->yes[k]; k++) CHECK(admits(g, c->yes[k]), "%s %s should admit \"%s\"", what, c->pattern, c->yes[k]);
        for (int k = 0; k < 8 && c->no[k]; k++) CHECK(!admits(g, c->no[k]), "%s %s should not admit \"%s\"", what, c->pattern, c->no[k]);
        tokd_grammar_free(g);
    }
}

static void test_cases(void) {
    static const pcase cases[] = {
        {"^[a-z]+@[a-z]+\\.com$", -1, -1, {"a@b.com", "xyz@example.com"}, {"a@b.org", "@b.com", "a@.com", "A@b.com", "a@b.com "}},
        {"abc", -1, -1, {"abc", "xxabcyy", "ab abc", "\"abc\n"}, {"ab", "acb", "", "ABC"}}, /* a search */
        {"^ab", -1, -1, {"ab", "abc\n"}, {"xab", "a"}},
        {"cd$", -1, -1, {"cd", "\t\"cd"}, {"cdx", "c"}},
        {"x|^y|z$", -1, -1, {"-x-", "yes", "az"}, {"ay", "za", ""}},
        {"^\\d{3}-\\d{4}$", -1, -1, {"555-1234"}, {"55-1234", "5555-123", "abc-defg", "555-12345"}},
        {"^(a|bc)*d?$", -1, -1, {"", "abca", "bcd", "d"}, {"b", "dd", "ad a"}},
        {"^(a?)*$", -1, -1, {"", "aaaa"}, {"b"}},
        {"^((a?b?)*c?)*d$", -1, -1, {"d", "abcbad", "cccd"}, {"", "dd", "abc"}},
        {"^[^a-z]+$", -1, -1, {"ABC", "12\"3", "\xc3\x89T\xc3\x89", "\\"}, {"", "aB", "Ab"}},
        {"^.{2,3}$", -1, -1, {"ab", "\"\\x", "\xe4\xb8\xad\xe6\x96\x87"}, {"a", "abcd", "a\n", "\r\n"}},
        {"^\\S+\\s\\S+$", -1, -1, {"a b", "x\ty", "\"q\" \\"}, {"ab", "a  b", "a\xc2\xa0" "b"}},
        {"^\\w\\W\\D$", -1, -1, {"_!x", "a b"}, {"a_1", "!!x", "ab1"}},
        {"^[\\s\\S]{3}$", -1, -1, {"a\nb", "\" \\"}, {"ab", "abcd"}},
        {"^[\\x41-\\x43\\u00e9]+$", -1, -1, {"ABC", "\xc3\xa9" "A"}, {"D", "abc"}},
        {"^\\u00e9+\\x41$", -1, -1, {"\xc3\xa9\xc3\xa9" "A"}, {"A", "eA"}},
        {"^\\uD83D\\uDE00\\t\xf0\x9f\x98\x81$", -1, -1, {"\xf0\x9f\x98\x80\t\xf0\x9f\x98\x81"}, {"\xf0\x9f\x98\x80\t"}},
        {"^[\\]\\-\\\\]\\.\\*\\(\\)\\/$", -1, -1, {"].*()/", "-.*()/", "\\.*()/"}, {"a.*()/"}},
        {"^a{2}b{1,}c{0,2}$", -1, -1, {"aab", "aabbbcc"}, {"ab", "aa", "aabccc"}},
        {"^(?:[A-Z][a-z]*\\s?)+$", -1, -1, {"Hello World", "A"}, {"hello", " A"}},
        {"^[\\b]\\cA$", -1, -1, {"\b\x01"}, {"b\x01"}},
        {"^{x}]$", -1, -1, {"{x}]"}, {"x"}}, /* braces and ] that cannot be syntax are literals */
        /* lengths pushed into the pattern */
        {"^[a-z]+$", 2, 4, {"ab", "abcd"}, {"a", "abcde", ""}},
        {"^ab", -1, 5, {"ab", "abxyz"}, {"abxyzw", "a"}},
        {"^x[a-z]*y$", 5, 5, {"xabcy"}, {"xaby", "xabcdy"}},
        {"^(a|bb)c*$", 3, 4, {"acc", "bbc", "bbcc", "accc"}, {"ac", "bbccc", "acccc"}},
        {"^[a-z]+@[a-z]+$", -1, 6, {"a@b", "abc@de"}, {"abcd@ef", "a@bcdef"}},
        {"^[a-z]+@[a-z]+$", 5, -1, {"ab@cd", "a@bcdefgh"}, {"a@b", "ab@c"}},
        {"x", 2, 3, {"xy", "axb", "aax"}, {"x", "aaxb", "ab"}},
        {"^\\d+$", 3, -1, {"123", "12345678"}, {"12"}},
        {"^(a{5})?b(c{4}|d)*$", -1, 3, {"b", "bd", "bdd"}, {"aaaaab", "bcccc", "bdddd"}},
        {"^(ab|cde)+$", 4, 6, {"abab", "cdeab", "abcde", "cdecde", "ababab"}, {"ab", "cde", "abababab", "cdeabab"}},
    };
    check_cases(cases, sizeof cases / sizeof *cases, "pattern", pattern_grammar);
    /* one spelling of each character: the canonical escapes only */
    tokd_err e = {{0}};
    tokd_grammar *g = pattern_grammar("^.+$", -1, -1, &e);
    CHECK(g && tokd_grammar_match(g, "\"a\\\"\\\\\\t\"", 9), "canonical escapes admitted");
    CHECK(g && !tokd_grammar_match(g, "\"\\u0061\"", 8) && !tokd_grammar_match(g, "\"\\/\"", 4), "other spellings not");
    tokd_grammar_free(g);
    g = pattern_grammar("^\\0$", -1, -1, &e); /* NUL: no C string holds it */
    CHECK(g && tokd_grammar_match(g, "\"\\u0000\"", 8), "\\0 is \\u0000");
    tokd_grammar_free(g);
}

static void test_refusals(void) {
    /* refused, with the reason in one line that names the pattern: syntax outside the
       subset (at its offset), then bounds it cannot meet or grammars past the limits */
    static const struct {
        const char *pattern;
        int min_len, max_len;
        const char *want;
    } refused[] = {
        {"(?=a)", -1, -1, "look-around"},
        {"(?<n>a)", -1, -1, "look-around, named groups"},
        {"\\bx", -1, -1, "word boundaries"},
        {"x\\B", -1, -1, "word boundaries"},
        {"(a)\\1", -1, -1, "back-references"},
        {"\\k<n>", -1, -1, "back-references"},
        {"^a$b", -1, -1, "'$' is supported only at the end"},
        {"a^b", -1, -1, "'^' is supported only at the start"},
        {"(^a)", -1, -1, "'^' is supported only at the start"},
        {"a{,3}", -1, -1, "'{,n}'"},
        {"a**", -1, -1, "nothing to repeat"},
        {"*a", -1, -1, "nothing to repeat"},
        {"a{2}{3}", -1, -1, "nothing to repeat"},
        {"[]", -1, -1, "empty classes"},
        {"[^]", -1, -1, "empty classes"},
        {"[z-a]", -1, -1, "out of order"},
        {"[\\d-z]", -1, -1, "class escape"},
        {"[[:alpha:]]", -1, -1, "POSIX"},
        {"\\p{L}", -1, -1, "property escapes"},
        {"\\q", -1, -1, "unknown escape \\q"},
        {"\\012", -1, -1, "octal"},
        {"\\x4", -1, -1, "malformed \\x"},
        {"\\u12", -1, -1, "malformed \\u"},
        {"\\u{1F600}", -1, -1, "u flag"},
        {"\\uD800", -1, -1, "lone surrogate"},
        {"\xf0\x9f\x98\x80+", -1, -1, "before a quantifier"},
        {"[\xf0\x9f\x98\x80]", -1, -1, "inside [...]"},
        {"a{10001}", -1, -1, "above 10000"},
        {"a{3,2}", -1, -1, "out of order"},
        {"(a", -1, -1, "missing ')'"},
        {"a)", -1, -1, "unmatched ')'"},
        {"[ab", -1, -1, "missing ']'"},
        {"a\\", -1, -1, "ends with a backslash"},
        {"[^\\s\\S]", -1, -1, "matches no character"},
        {"\xff", -1, -1, "invalid UTF-8"},
        {"^(.{0,50}){0,50}$", -1, 2000, "more than 2048 character sets"},
        {"^[a-z]{0,900}[0-9]{0,900}$", 10, 5000, "is too large"},
        {"^ab$", 3, 4, "no string of 3 to 4 code points"},
        {"^.{5}$", 6, -1, "no string of 6 or more"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        tokd_err e = {{0}};
        tokd_grammar *g = pattern_grammar(refused[i].pattern, refused[i].min_len, refused[i].max_len, &e);
        CHECK(g == NULL && strstr(e.msg, refused[i].want) && strstr(e.msg, "json schema: 'pattern'") && !strchr(e.msg, '\n'),
              "pattern %s %d..%d: want '%s', got '%s'", refused[i].pattern, refused[i].min_len, refused[i].max_len, refused[i].want,
              g ? "(ok)" : e.msg);
        tokd_grammar_free(g);
    }
    /* beside format, or not a string */
    const char *schemas[][2] = {
        {"{\"type\":\"string\",\"pattern\":\"^a\",\"format\":\"date\"}", "'pattern' with 'format'"},
        {"{\"type\":\"string\",\"pattern\":5}", "pattern must be a string"},
        {"{\"allOf\":[{\"pattern\":\"^a\"},{\"pattern\":\"b$\"}]}", "'pattern' both beside and inside"},
        {"{\"type\":\"string\",\"format\":\"ipv6\",\"minLength\":50}", "json schema: format 'ipv6': no string of 50 or more"},
        {"{\"type\":\"string\",\"format\":\"uri\",\"maxLength\":10000}", "json schema: format 'uri': with minLength/maxLength"},
    };
    for (size_t i = 0; i < sizeof schemas / sizeof *schemas; i++) {
        tokd_err e = {{0}};
        cJSON *js = cJSON_Parse(schemas[i][0]);
        tokd_grammar *g = tokd_grammar_from_json_schema(js, false, &e);
        CHECK(g == NULL && strstr(e.msg, schemas[i][1]), "schema %s: got '%s'", schemas[i][0], g ? "(ok)" : e.msg);
        tokd_grammar_free(g);
        cJSON_Delete(js);
    }
    /* a grammar too large is refused, not built */
    tokd_err e = {{0}};
    tokd_grammar *g = pattern_grammar("^[a-z]*[0-9]*[a-z]*[0-9]*[a-z]*[0-9]*$", -1, 10000, &e);
    CHECK(g == NULL && strstr(e.msg, "grows past"), "a counted grammar too large: got '%s'", g ? "(ok)" : e.msg);
    tokd_grammar_free(g);
    /* a small schema whose patterns together would write hundreds of MB is refused early:
       10 uri properties of maxLength 4096 (1.9 MB of grammar each) against 8 MB in all */
    cJSON *js = cJSON_CreateObject(), *props = cJSON_AddObjectToObject(js, "properties");
    for (int i = 0; i < 10; i++) {
        char key[16];
        snprintf(key, sizeof key, "u%d", i);
        cJSON *u = cJSON_AddObjectToObject(props, key);
        cJSON_AddStringToObject(u, "format", "uri");
        cJSON_AddNumberToObject(u, "maxLength", 4096);
    }
    g = tokd_grammar_from_json_schema(js, false, &e);
    CHECK(g == NULL && strstr(e.msg, "format 'uri': the schema's grammar grows past its"), "ten heavy formats: got '%s'",
          g ? "(ok)" : e.msg);
    tokd_grammar_free(g);
    cJSON_Delete(js);
}

/* ---- random walks, checked by PCRE2 ------------------------------------------------------------ */

/* The value of the JSON string text j (n bytes, quotes included); (size_t)-1 if it is not
 * one. */
static size_t json_value(const char *j, size_t n, char *v, long *cps) {
    cJSON *s = cJSON_ParseWithLength(j, n);
    bool ok = cJSON_IsString(s);
    cJSON_Delete(s);
    return ok ? t_json_string_value(j, n, v, cps) : (size_t)-1;
}

/* Pieces a walk appends: printable ASCII, some multi-byte characters, and JSON escapes. */
static const char *const PIECES[] = {
    "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "\xc2\xa0", "\xe2\x80\xa8", "\xd9\xa3", "\\\"", "\\\\", "\\n", "\\t", "\\r",
    "\\u0001", "\\u00e9", "\\/", "\\b", "\\f", "\\u000b", "\\u0000", "\\ud83d\\ude00", "\\u007f"};

static uint64_t rng_state = 88172645463325252ull;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

/* What a walk's completed string must satisfy: the value (v_len bytes, cps code points). */
typedef bool (*value_check)(const char *v, size_t v_len, long cps, const void *ud);

/* n_walks random walks through the grammar g; every completed string must be valid JSON and
 * pass ok. Returns the number completed. */
static int walk_grammar(const tokd_grammar *g, const char *what, value_check ok, const void *ud, int n_walks) {
    tokd_grammar_state *s = tokd_grammar_state_new(g, NULL);
    int n_pieces = 95 + (int)(sizeof PIECES / sizeof *PIECES), done = 0, bad = 0;
    char text[4096], value[4096];
    for (int w = 0; w < n_walks; w++) {
        tokd_grammar_state_reset(s);
        size_t n = 1;
        text[0] = '"';
        CHECK(tokd_grammar_accept_bytes(s, "\"", 1) == 0, "opening quote");
        int want_len = (int)rnd(40);
        for (int step = 0; step < 300 && !tokd_grammar_done(s); step++) {
            bool took = false;
            int start = (int)rnd((uint32_t)n_pieces);
            bool close_first = step >= want_len;
            if (close_first && !tokd_grammar_accept_bytes(s, "\"", 1)) text[n++] = '"', took = true;
            for (int k = 0; k < n_pieces && !took; k++) { /* every piece from a random start */
                int pi = (start + k) % n_pieces;
                char one[2] = {(char)(' ' + pi), 0};
                const char *piece = pi < 95 ? one : PIECES[pi - 95];
                if (pi == '"' - ' ' && !close_first && k + 1 < n_pieces) continue; /* closing comes last */
                size_t len = strlen(piece);
                if (n + len + 1 < sizeof text && !tokd_grammar_accept_bytes(s, piece, len)) memcpy(text + n, piece, len), n += len, took = true;
            }
            if (!took && !tokd_grammar_accept_bytes(s, "\"", 1)) text[n++] = '"', took = true;
            if (!took) break;
        }
        if (!tokd_grammar_done(s)) continue;
        long cps = 0;
        size_t v_len = json_value(text, n, value, &cps);
        bool good = v_len != (size_t)-1 && ok(value, v_len, cps, ud);
        if (!good && bad++ < 3) CHECK(0, "%s: the grammar wrote %.*s", what, (int)n, text);
        done++;
    }
    CHECK(bad == 0, "%s: %d of %d outputs invalid", what, bad, done);
    tokd_grammar_state_free(s);
    return done;
}

typedef struct {
    pcre2_code *re;
    pcre2_match_data *md;
    int min_len, max_len;
} pattern_check;

static bool matches_pattern(const char *v, size_t v_len, long cps, const void *ud) {
    const pattern_check *pc = ud;
    return cps >= (pc->min_len < 0 ? 0 : pc->min_len) && (pc->max_len < 0 || cps <= pc->max_len) &&
           pcre2_match(pc->re, (PCRE2_SPTR)v, v_len, 0, 0, pc->md, NULL) >= 0;
}

/* Walks through the grammar of (pattern, bounds), the strings checked by PCRE2. */
static int walk(const char *pattern, int min_len, int max_len, int n_walks) {
    tokd_err e = {{0}};
    tokd_grammar *g = pattern_grammar(pattern, min_len, max_len, &e);
    CHECK(g != NULL, "pattern %s: %s", pattern, e.msg);
    int code;
    PCRE2_SIZE at;
    pattern_check pc = {.min_len = min_len, .max_len = max_len};
    pc.re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_ALT_BSUX, &code, &at, NULL);
    CHECK(pc.re != NULL, "PCRE2 compiles %s", pattern);
    int done = 0;
    if (g && pc.re) {
        char what[300];
        snprintf(what, sizeof what, "pattern %s (%d..%d)", pattern, min_len, max_len);
        pc.md = pcre2_match_data_create_from_pattern(pc.re, NULL);
        done = walk_grammar(g, what, matches_pattern, &pc, n_walks);
    }
    pcre2_match_data_free(pc.md);
    pcre2_code_free(pc.re);
    tokd_grammar_free(g);
    return done;
}

static void test_walks(void) {
    static const struct {
        const char *pattern;
        int min_len, max_len;
    } walks[] = {
        {"^[a-z]+@[a-z]+\\.com$", -1, -1}, {"b\\d", -1, -1}, {"x|^y|z$", -1, -1}, {"^\\d{3}-\\d{4}$", -1, -1},
        {"^(a|bc)*d?$", -1, -1}, {"^(a?)*$", -1, -1}, {"^((a?b?)*c?)*d$", -1, -1}, {"^[^a-z]+$", -1, -1},
        {"^.{2,5}$", -1, -1}, {"^\\S+$", -1, -1}, {"^\\W\\D\\s$", -1, -1}, {"^[\\s\\S]{3}$", -1, -1},
        {"^[^\\s]{2}[^\\S]$", -1, -1}, {"^[^\\W\\d]+$", -1, -1}, {"^\"\\\\", -1, -1}, {"^(?:[A-Z][a-z]*\\s?)+$", -1, -1},
        {"^\\u00e9+\\x41$", -1, -1}, {"^$", -1, -1}, {"", -1, -1}, {"^[\\x00-\\x1f]*$", -1, -1}, {"^[^\"]*$", -1, -1},
        {"^(|a)+$", -1, -1}, {"^a{2,}?b{0,3}$", -1, -1}, {"^\xf0\x9f\x98\x80.$", -1, -1}, {"^[^\\x20-\\x7e]*$", -1, -1},
        {"^(https?|ftp)://[^\\s/$.?#].[^\\s]*$", -1, -1}, {"^#[0-9a-fA-F]{6}$", -1, -1}, {"^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$", -1, -1},
        {"^(\\d+(\\.\\d+)?|\\.\\d+)$", -1, -1}, {"^[\\b\\cJ\\v\\f]+$", -1, -1}, {"^[\\-\\]]+\\{\\}$", -1, -1},
        {"^[a-z]+$", 2, 4}, {"^ab", 0, 5}, {"^x[a-z]*y$", 5, 5}, {"^(a|bb)c*$", 3, 4}, {"^[a-z]+@[a-z]+$", 0, 10},
        {"^[a-z]+@[a-z]+$", 8, -1}, {"x", 0, 5}, {"x", 3, -1}, {"^.*$", 3, 7}, {"^(a|b|cd)?e*$", 2, 2}, {"(ab)+", 0, 6}, {"^(ab|cde)+$", 4, 6}, {"^(ab|cde){2,}x?$", 0, 9},
        {"^(a?){2}x*$", 1, 2}, {"^(ab|cde)+$", 4, -1}, {"^(ab|cde)+$", 0, 2000}, {"x", 0, 400}, {"^(?:[A-Z][a-z]*\\s?)+$", 0, 60},
        {"^(?:[A-Z][a-z]*\\s?)+$", 12, -1}, {"^[^@\\s]+@[^@\\s]+\\.[a-z]{2,}$", 6, 30}, {"^.{0,5}(ab)?$", 3, 4}, {"^(a{5})?b(c{4}|d)*$", 0, 3},
    };
    for (size_t i = 0; i < sizeof walks / sizeof *walks; i++) {
        int done = walk(walks[i].pattern, walks[i].min_len, walks[i].max_len, 150);
        CHECK(done > 0, "pattern %s (%d..%d): no walk completed", walks[i].pattern, walks[i].min_len, walks[i].max_len);
    }
}

/* ---- the formats written as patterns, checked by hand-written validators ----------------------- */

static bool alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

/* RFC 1123 host name: dot-separated labels of 1-63 letters, digits and hyphens, no label
 * starting or ending with a hyphen, 253 characters at most; at least min_labels labels; and
 * the last label starting with a letter, so that a WHATWG URL parser does not read an IPv4
 * address. */
static bool host_ok(const char *v, size_t n, int min_labels) {
    if (!n || n > 253) return false;
    int labels = 0;
    size_t start = 0, last = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] == '.') last = i + 1;
    if (last >= n || !((v[last] >= 'a' && v[last] <= 'z') || (v[last] >= 'A' && v[last] <= 'Z'))) return false;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && v[i] != '.') {
            if (!alnum(v[i]) && v[i] != '-') return false;
            continue;
        }
        if (i == start || i - start > 63 || v[start] == '-' || v[i - 1] == '-') return false;
        labels++, start = i + 1;
    }
    return labels >= min_labels;
}

typedef struct {
    const char *name;
    int min_len, max_len;
} fmt_check;

/* RFC 3339 appendix A duration, read field by field: P, then weeks alone, or date fields in
 * the order Y M D with no gap (Y then D needs M), then T and time fields H M S with no gap. */
static bool duration_ok(const char *v, size_t n) {
    if (n < 3 || v[0] != 'P') return false;
    const char *order = "YMD";
    int last = -1, fields = 0;
    bool in_time = false;
    for (size_t i = 1; i < n;) {
        if (v[i] == 'T') {
            if (in_time || i + 1 == n) return false;
            in_time = true, order = "HMS", last = -1, i++;
            continue;
        }
        size_t d = i;
        while (i < n && v[i] >= '0' && v[i] <= '9') i++;
        if (i == d || i == n) return false;
        if (v[i] == 'W') return !in_time && !fields && i + 1 == n;
        const char *at = strchr(order, v[i]);
        if (!at) return false;
        int k = (int)(at - order);
        if (last >= 0 && k != last + 1) return false;
        last = k, fields++, i++;
    }
    return fields > 0;
}

static bool format_ok(const char *v, size_t n, long cps, const void *ud) {
    const fmt_check *fc = ud;
    if (cps < (fc->min_len < 0 ? 0 : fc->min_len) || (fc->max_len >= 0 && cps > fc->max_len) || memchr(v, 0, n)) return false;
    if (!strcmp(fc->name, "hostname")) return host_ok(v, n, 1);
    if (!strcmp(fc->name, "email")) { /* dot-separated atoms of atext, '@', a host name of two labels or more */
        const char *at = memchr(v, '@', n);
        if (!at || at == v || memchr(at + 1, '@', n - (size_t)(at - v) - 1)) return false;
        for (const char *c = v; c < at; c++) {
            bool dot = *c == '.';
            if (dot && (c == v || c + 1 == at || c[1] == '.')) return false;
            if (!dot && !alnum(*c) && !strchr("!#$%&'*+-/=?^_`{|}~", *c)) return false;
        }
        const char *tld = v + n; /* the top-level domain: two letters or more (zod's rule) */
        while (tld > at && tld[-1] != '.') tld--;
        for (const char *c = tld; c < v + n; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z'))) return false;
        return v + n - tld >= 2 && host_ok(at + 1, n - (size_t)(at - v) - 1, 2);
    }
    if (!strcmp(fc->name, "uri")) { /* http(s)://host[:port] then path, query, fragment characters */
        size_t i = !strncmp(v, "https://", 8) ? 8 : !strncmp(v, "http://", 7) ? 7 : 0, h = i;
        if (!i) return false;
        while (i < n && !strchr(":/?#", v[i])) i++;
        if (!host_ok(v + h, i - h, 1)) return false;
        if (i < n && v[i] == ':') { /* a port WHATWG accepts: 0-65535 */
            size_t d = ++i;
            long port = 0;
            while (i < n && v[i] >= '0' && v[i] <= '9') port = port * 10 + (v[i++] - '0');
            if (i == d || i - d > 5 || port > 65535) return false;
        }
        if (i < n && v[i] != '/' && v[i] != '?' && v[i] != '#') return false;
        int hashes = 0;
        for (; i < n; i++) {
            hashes += v[i] == '#';
            if (!alnum(v[i]) && !strchr("-._~!$&'()*+,;=:@/?#", v[i])) return false;
        }
        return hashes <= 1;
    }
    if (!strcmp(fc->name, "duration")) return duration_ok(v, n);
    if (!strcmp(fc->name, "ipv6")) {
        char buf[64];
        unsigned char addr[16];
        if (n >= sizeof buf) return false;
        memcpy(buf, v, n), buf[n] = 0;
        return inet_pton(AF_INET6, buf, addr) == 1;
    }
    return false;
}

static tokd_grammar *format_grammar(const char *name, int min_len, int max_len, tokd_err *e) {
    cJSON *js = cJSON_CreateObject();
    cJSON_AddStringToObject(js, "type", "string");
    cJSON_AddStringToObject(js, "format", name);
    if (min_len >= 0) cJSON_AddNumberToObject(js, "minLength", min_len);
    if (max_len >= 0) cJSON_AddNumberToObject(js, "maxLength", max_len);
    tokd_grammar *g = tokd_grammar_from_json_schema(js, false, e);
    cJSON_Delete(js);
    return g;
}

static void test_formats(void) {
    static const pcase cases[] = { /* (pattern: the format's name) */
        {"hostname", -1, -1, {"example", "a-b.c9.io", "x.y.z.w"}, {"-a", "a-", "a..b", "a_b", "", "a.b.c.d.e", "a.b.9"}},
        {"email", -1, -1, {"a.b+c@ex-ample.com", "x_1-y@a.b.cd"}, {"a@b", "a..b@c.d", ".a@b.cd", "a@b..cd", "a b@c.de", "a@b@c.de", "a@b.c", "a@b.c9"}},
        {"uri", -1, -1, {"https://example.com/a/b?x=1#f", "http://h:65535", "http://a.b/c;d=e/@:f"},
         {"ftp://x.y", "https://", "https://a b", "http://x/%20", "http://x#a#b", "example.com", "http://h:65536", "http://a.99"}},
        {"ipv6", -1, -1, {"2001:db8:0:0:0:0:0:1", "FFFF:0:0:0:0:0:0:a"}, {"1:2:3:4:5:6:7", "g:0:0:0:0:0:0:0", "1:2:3:4:5:6:7:8:9"}},
        {"email", -1, 12, {"a@b.co", "abcd@efg.hi"}, {"abcde@fghi.jk", "abcdef@ghij.kl"}},
        {"duration", -1, -1, {"P1Y2M3DT4H5M6S", "PT5M", "P2W", "P3D", "PT1H", "P1M2D"},
         {"P", "PT", "P1H", "PT1H2S", "P1W2D", "1D", "P1.5D", "P1DT"}},
    };
    check_cases(cases, sizeof cases / sizeof *cases, "format", format_grammar);
    static const fmt_check walks[] = {{"hostname", -1, -1}, {"email", -1, -1}, {"uri", -1, -1}, {"ipv6", -1, -1},
                                      {"hostname", 12, 20}, {"email", 8, 24}, {"uri", -1, 30}, {"email", 40, -1},
                                      {"duration", -1, -1}, {"duration", 6, 9}};
    for (size_t i = 0; i < sizeof walks / sizeof *walks; i++) {
        tokd_err e = {{0}};
        tokd_grammar *g = format_grammar(walks[i].name, walks[i].min_len, walks[i].max_len, &e);
        CHECK(g != NULL, "format %s (%d..%d): %s", walks[i].name, walks[i].min_len, walks[i].max_len, e.msg);
        if (!g) continue;
        char what[100];
        snprintf(what, sizeof what, "format %s (%d..%d)", walks[i].name, walks[i].min_len, walks[i].max_len);
        CHECK(walk_grammar(g, what, format_ok, &walks[i], 200) > 0, "%s: no walk completed", what);
        tokd_grammar_free(g);
    }
}

/* ---- a model writing under pattern schemas -------------------------------------------------- */


static bool field_matches(const cJSON *doc, const char *key, const char *pattern, int max_len) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, key);
    if (!cJSON_IsString(v)) return false;
    int code;
    PCRE2_SIZE at;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_ALT_BSUX,
                                   &code, &at, NULL);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    bool ok = pcre2_match(re, (PCRE2_SPTR)v->valuestring, strlen(v->valuestring), 0, 0, md, NULL) >= 0;
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    long cps = 0;
    for (const char *c = v->valuestring; *c; c++) cps += ((unsigned char)*c & 0xC0) != 0x80;
    return ok && (max_len < 0 || cps <= max_len);
}

/* keys of one to six lowercase letters (propertyNames), values 0-9 */
static bool tally_ok(const cJSON *t) {
    if (!cJSON_IsObject(t)) return false;
    for (const cJSON *e = t->child; e; e = e->next) {
        size_t n = strlen(e->string);
        bool key = n >= 1 && n <= 6;
        for (size_t i = 0; i < n; i++) key = key && e->string[i] >= 'a' && e->string[i] <= 'z';
        if (!key || !cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 9 || e->valuedouble != (int)e->valuedouble)
            return false;
    }
    return true;
}

/* one to four of the listed colours, none twice (uniqueItems) */
static bool colors_ok(const cJSON *a) {
    static const char *const names[] = {"red", "green", "blue", "cyan"};
    bool seen[4] = {0};
    int n = 0;
    for (const cJSON *e = cJSON_IsArray(a) ? a->child : NULL; e; e = e->next, n++) {
        int k = 0;
        while (k < 4 && !(cJSON_IsString(e) && !strcmp(e->valuestring, names[k]))) k++;
        if (k == 4 || seen[k]) return false;
        seen[k] = true;
    }
    return cJSON_IsArray(a) && n >= 1;
}

static void test_model(int n_runs) {
    t_gen gen;
    if (!t_gen_open(&gen, "tiny-llama-f32.gguf")) return;
    static const char *SCHEMA =
        "{\"type\":\"object\",\"properties\":{"
        "\"id\":{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3,5}$\"},"
        "\"mail\":{\"type\":\"string\",\"pattern\":\"^[a-z.]+@[a-z]+\\\\.(com|org)$\",\"maxLength\":24},"
        "\"note\":{\"type\":\"string\",\"pattern\":\"ok|fine\",\"maxLength\":12},"
        "\"free\":{\"type\":\"string\",\"pattern\":\"^[^\\\\s\\\"]*$\",\"maxLength\":8},"
        "\"tally\":{\"type\":\"object\",\"propertyNames\":{\"pattern\":\"^[a-z]{1,6}$\"},"
        "\"additionalProperties\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9}},"
        "\"colors\":{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\",\"blue\",\"cyan\"]},\"uniqueItems\":true,\"minItems\":1}},"
        "\"required\":[\"id\",\"mail\",\"note\",\"free\",\"tally\",\"colors\"]}";
    tokd_err e = {{0}};
    cJSON *schema = cJSON_Parse(SCHEMA);
    tokd_grammar *g = tokd_grammar_from_json_schema(schema, false, &e);
    CHECK(g != NULL, "schema: %s", e.msg);
    tokd_grammar_state *s = g ? tokd_grammar_state_new(g, gen.v) : NULL;
    int fails = 0;
    long tokens = 0;
    for (int run = 0; s && run < n_runs; run++) {
        tokd_buf out = {0};
        tokd_gen_stats st;
        int rc = t_gen_run(&gen, s, 2000u + (uint64_t)run, NULL, 0, 600, &out, &st);
        const char *text = out.data ? out.data : "";
        tokens += st.n_gen;
        if (!run) fprintf(stderr, "tiny-llama-f32 under pattern schemas, first output: %s\n", text);
        cJSON *doc = rc ? NULL : cJSON_ParseWithOpts(text, NULL, true);
        bool ok = doc && st.finish == TOKD_FINISH_EOG && field_matches(doc, "id", "^[A-Z]{2}-\\d{3,5}$", -1) &&
                  field_matches(doc, "mail", "^[a-z.]+@[a-z]+\\.(com|org)$", 24) && field_matches(doc, "note", "ok|fine", 12) &&
                  field_matches(doc, "free", "^[^\\s\"]*$", 8) && tally_ok(cJSON_GetObjectItemCaseSensitive(doc, "tally")) &&
                  colors_ok(cJSON_GetObjectItemCaseSensitive(doc, "colors"));
        if (!ok && fails++ < 3)
            CHECK(0, "seed %d: rc %d finish %s, output (%zu bytes): %.300s", run, rc, tokd_finish_name(st.finish), out.len, text);
        cJSON_Delete(doc);
        tokd_buf_free(&out);
    }
    CHECK(fails == 0, "%d of %d outputs invalid", fails, n_runs);
    fprintf(stderr, "%ld tokens generated in %d runs\n", tokens, n_runs);
    tokd_grammar_state_free(s);
    tokd_grammar_free(g);
    cJSON_Delete(schema);
    t_gen_close(&gen);
}

int main(void) {
    test_cases();
    test_refusals();
    test_walks();
    test_formats();
    test_model(30);
    T_DONE();
}
