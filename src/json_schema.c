/* json_schema.c — JSON Schema (a cJSON tree) -> grammar text -> tokd_grammar.
 *
 * Output is compact JSON: between structural tokens at most one space, or one newline
 * followed by up to 20 spaces or tabs (rule `ws`), so a model cannot spend its budget in
 * whitespace, and nothing before or after the value. Numbers have at most 16 integer digits,
 * 16 fraction digits and 3 exponent digits, so every rule can be closed in bounded steps.
 *
 * Supported:
 *   type (a name or a list of names): object, array, string, number, integer, boolean, null
 *   object: properties (emitted in the order given), required, additionalProperties.
 *     additionalProperties defaults to FALSE when `properties` is given (the listed keys
 *     only, as OpenAI's strict structured output does); true or a schema allows further
 *     keys after the listed ones. An object with neither properties nor
 *     additionalProperties: false is any JSON object.
 *   array: items, prefixItems, minItems, maxItems (counts up to 10000)
 *   string: minLength, maxLength (code points; escapes count as one); `pattern` and
 *     `format` are ignored (the value is any string)
 *   integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum (exact, up to 15 digits)
 *   number: minimum >= 0 (or exclusiveMinimum >= 0) forbids the sign; other bounds ignored
 *   enum, const (any JSON values, emitted as compact JSON text), anyOf, oneOf (as anyOf:
 *   exclusivity is not enforced), allOf with one schema, $ref to "#", "#/$defs/..." or
 *   "#/definitions/..." (recursion allowed), true / {} (any value)
 * Errors: false schemas, unknown types, unresolvable $ref, nesting deeper than 64, bounds
 * that contradict each other. Unknown keywords are ignored.
 *
 * Any JSON value (json_object mode, untyped schemas) nests at most 12 levels deep: deeper
 * output is not valid under the grammar. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

#define MAX_SCHEMA_DEPTH 64
#define MAX_ANY_DEPTH 12
#define MAX_COUNT 10000
#define INT_LIMIT 999999999999999LL /* 15 digits: larger bounds are treated as absent */

typedef struct {
    const char *ref;
    int id;
} ref_entry;

typedef struct {
    const cJSON *root;
    tokd_buf out;
    int n_rules;
    ref_entry *refs;
    int n_refs, cap_refs;
    bool any_emitted;
    char msg[300];
    bool failed;
} jctx;

static int jfail(jctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int jfail(jctx *c, const char *fmt, ...) {
    if (!c->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->msg, sizeof c->msg, fmt, ap);
        va_end(ap);
        c->failed = true;
    }
    return -1;
}

/* Append a grammar string literal of the bytes s[0..n). */
static void lit(tokd_buf *b, const char *s, size_t n) {
    tokd_buf_append(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') tokd_buf_appendf(b, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7F) tokd_buf_appendf(b, "\\x%02X", ch);
        else tokd_buf_append(b, &ch, 1);
    }
    tokd_buf_append(b, "\"", 1);
}

/* A literal matching the compact JSON text of v. */
static int lit_json(jctx *c, tokd_buf *b, const cJSON *v) {
    char *t = cJSON_PrintUnformatted(v);
    if (!t) return jfail(c, "json schema: cannot serialise a const/enum value");
    lit(b, t, strlen(t));
    free(t);
    return 0;
}

static int new_rule_id(jctx *c) { return c->n_rules++; }

static void rule(jctx *c, int id, const char *body) { tokd_buf_appendf(&c->out, "r%d ::= %s\n", id, body); }

/* The any-value rules, once. */
static void emit_any(jctx *c) {
    if (c->any_emitted) return;
    c->any_emitted = true;
    tokd_buf *o = &c->out;
    for (int d = 0; d <= MAX_ANY_DEPTH; d++) {
        if (d < MAX_ANY_DEPTH) {
            tokd_buf_appendf(o, "any%d ::= any-scalar | \"{\" ws ( string ws \":\" ws any%d ws ( \",\" ws string ws \":\" ws any%d ws )* )? \"}\""
                                " | \"[\" ws ( any%d ws ( \",\" ws any%d ws )* )? \"]\"\n", d, d + 1, d + 1, d + 1, d + 1);
        } else {
            tokd_buf_appendf(o, "any%d ::= any-scalar\n", d);
        }
    }
    tokd_buf_appendf(o, "any-scalar ::= string | number | \"true\" | \"false\" | \"null\"\n"
                        "any-object ::= \"{\" ws ( string ws \":\" ws any1 ws ( \",\" ws string ws \":\" ws any1 ws )* )? \"}\"\n");
}

static int gen(jctx *c, const cJSON *s, int depth, tokd_buf *body);

/* Rule for a subschema; returns its id, -1 on error. */
static int gen_rule(jctx *c, const cJSON *s, int depth) {
    tokd_buf b = {0};
    int rc = gen(c, s, depth, &b);
    int id = -1;
    if (!rc) {
        id = new_rule_id(c);
        rule(c, id, b.data ? b.data : "\"\"");
    }
    tokd_buf_free(&b);
    return id;
}

static double num_field(const cJSON *s, const char *k, bool *has) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, k);
    *has = cJSON_IsNumber(v) && isfinite(v->valuedouble);
    return *has ? v->valuedouble : 0;
}

static int count_field(jctx *c, const cJSON *s, const char *k, long dflt, long *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, k);
    *out = dflt;
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble))
        return jfail(c, "json schema: %s must be a non-negative integer", k);
    if (v->valuedouble > MAX_COUNT) {
        if (dflt < 0) return 0; /* a large maximum is no maximum */
        return jfail(c, "json schema: %s above %d", k, MAX_COUNT);
    }
    *out = (long)v->valuedouble;
    return 0;
}

/* ---- integers in a range ---------------------------------------------------------------- */

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

/* Non-negative integers in [lo, hi] (hi < 0: unbounded), no leading zeros. */
static void nonneg_range(tokd_buf *b, int64_t lo, int64_t hi) {
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

static int gen_integer(jctx *c, const cJSON *s, tokd_buf *b) {
    bool hlo, hhi, hxlo, hxhi;
    double lo = num_field(s, "minimum", &hlo), hi = num_field(s, "maximum", &hhi);
    double xlo = num_field(s, "exclusiveMinimum", &hxlo), xhi = num_field(s, "exclusiveMaximum", &hxhi);
    int64_t L = INT64_MIN, H = INT64_MAX;
    if (hlo && fabs(lo) <= INT_LIMIT) L = (int64_t)ceil(lo);
    if (hxlo && fabs(xlo) <= INT_LIMIT && (int64_t)floor(xlo) + 1 > L) L = (int64_t)floor(xlo) + 1;
    if (hhi && fabs(hi) <= INT_LIMIT) H = (int64_t)floor(hi);
    if (hxhi && fabs(xhi) <= INT_LIMIT && (int64_t)ceil(xhi) - 1 < H) H = (int64_t)ceil(xhi) - 1;
    if (L != INT64_MIN && H != INT64_MAX && L > H) return jfail(c, "json schema: integer range is empty");
    if (L == INT64_MIN && H == INT64_MAX) {
        tokd_buf_appendf(b, "integer");
        return 0;
    }
    tokd_buf_appendf(b, "(");
    bool any = false;
    /* negative part: -(n) with n in [max(1, -H), -L] */
    if (L < 0) {
        int64_t nlo = H == INT64_MAX || H >= 0 ? 1 : -H, nhi = L == INT64_MIN ? -1 : -L;
        tokd_buf_appendf(b, "\"-\" (");
        nonneg_range(b, nlo, nhi);
        tokd_buf_appendf(b, ")");
        any = true;
    }
    if (H >= 0) {
        if (any) tokd_buf_appendf(b, " | ");
        nonneg_range(b, L < 0 ? 0 : L, H == INT64_MAX ? -1 : H);
    }
    tokd_buf_appendf(b, ")");
    return 0;
}

/* ---- objects and arrays ------------------------------------------------------------------ */

static int gen_object(jctx *c, const cJSON *s, int depth, tokd_buf *b) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (props && !cJSON_IsObject(props)) return jfail(c, "json schema: properties must be an object");
    int n = props ? cJSON_GetArraySize(props) : 0;
    if (!props && (!addl || cJSON_IsTrue(addl))) {
        emit_any(c);
        tokd_buf_appendf(b, "any-object");
        return 0;
    }
    /* value rule for extra keys: -1 none */
    int extra = -1;
    if (addl && !cJSON_IsFalse(addl)) {
        if (cJSON_IsTrue(addl)) {
            emit_any(c);
            extra = -2;
        } else if ((extra = gen_rule(c, addl, depth + 1)) < 0) return -1;
    }
    int *kv = tokd_xmalloc(((size_t)n + 1) * sizeof *kv);
    bool *required = tokd_xcalloc((size_t)n + 1, 1);
    int i = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next, i++) {
        required[i] = false;
        for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
            if (cJSON_IsString(r) && !strcmp(r->valuestring, p->string)) required[i] = true;
        int v = gen_rule(c, p, depth + 1);
        if (v < 0) {
            free(kv);
            free(required);
            return -1;
        }
        tokd_buf kb = {0};
        cJSON *key = cJSON_CreateString(p->string);
        lit_json(c, &kb, key);
        cJSON_Delete(key);
        tokd_buf_appendf(&kb, " ws \":\" ws r%d", v);
        kv[i] = new_rule_id(c);
        rule(c, kv[i], kb.data);
        tokd_buf_free(&kb);
    }
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r)) continue;
        bool found = false;
        for (const cJSON *p = props ? props->child : NULL; p; p = p->next) found |= !strcmp(r->valuestring, p->string);
        if (!found && extra == -1) {
            free(kv);
            free(required);
            return jfail(c, "json schema: required property '%.100s' is not among the properties", r->valuestring);
        }
    }
    /* A[k]: properties k.. after one was written; F[k]: the first present one from k on */
    char extra_v[32];
    if (extra == -2) snprintf(extra_v, sizeof extra_v, "any1");
    else snprintf(extra_v, sizeof extra_v, "r%d", extra);
    int next_a = new_rule_id(c);
    if (extra == -1) rule(c, next_a, "\"\"");
    else {
        char bb[200];
        snprintf(bb, sizeof bb, "( \",\" ws string ws \":\" ws %s ws )*", extra_v);
        rule(c, next_a, bb);
    }
    int next_f = new_rule_id(c);
    if (extra == -1) rule(c, next_f, "\"\"");
    else {
        char bb[200];
        snprintf(bb, sizeof bb, "( string ws \":\" ws %s ws r%d )?", extra_v, next_a);
        rule(c, next_f, bb);
    }
    for (int k = n - 1; k >= 0; k--) {
        char bb[200];
        int a = new_rule_id(c), f = new_rule_id(c);
        snprintf(bb, sizeof bb, required[k] ? "\",\" ws r%d ws r%d" : "( \",\" ws r%d ws )? r%d", kv[k], next_a);
        rule(c, a, bb);
        if (required[k]) snprintf(bb, sizeof bb, "r%d ws r%d", kv[k], next_a);
        else snprintf(bb, sizeof bb, "r%d ws r%d | r%d", kv[k], next_a, next_f);
        rule(c, f, bb);
        next_a = a, next_f = f;
    }
    tokd_buf_appendf(b, "\"{\" ws r%d \"}\"", next_f);
    free(kv);
    free(required);
    return 0;
}

static int gen_array(jctx *c, const cJSON *s, int depth, tokd_buf *b) {
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    long mn, mx;
    if (count_field(c, s, "minItems", 0, &mn) || count_field(c, s, "maxItems", -1, &mx)) return -1;
    if (mx >= 0 && mx < mn) return jfail(c, "json schema: maxItems below minItems");
    char item[32];
    if (!items || cJSON_IsTrue(items)) {
        emit_any(c);
        snprintf(item, sizeof item, "any1");
    } else if (cJSON_IsFalse(items)) {
        item[0] = 0;
    } else {
        int r = gen_rule(c, items, depth + 1);
        if (r < 0) return -1;
        snprintf(item, sizeof item, "r%d", r);
    }
    int n_prefix = cJSON_IsArray(prefix) ? cJSON_GetArraySize(prefix) : 0;
    if (n_prefix) {
        /* prefix items in order (each may be the last present), then the rest */
        int *pr = tokd_xmalloc((size_t)n_prefix * sizeof *pr), i = 0;
        for (const cJSON *p = prefix->child; p; p = p->next, i++)
            if ((pr[i] = gen_rule(c, p, depth + 1)) < 0) {
                free(pr);
                return -1;
            }
        tokd_buf_appendf(b, "\"[\" ws ");
        int opened = 0;
        for (i = 0; i < n_prefix; i++) {
            bool opt = i >= mn;
            tokd_buf_appendf(b, "%s%sr%d ws ", opt ? "( " : "", i ? "\",\" ws " : "", pr[i]);
            opened += opt;
        }
        if (item[0] && (mx < 0 || mx > n_prefix)) {
            long rest_min = mn > n_prefix ? mn - n_prefix : 0;
            if (mx < 0) tokd_buf_appendf(b, "( \",\" ws %s ws ){%ld,} ", item, rest_min);
            else tokd_buf_appendf(b, "( \",\" ws %s ws ){%ld,%ld} ", item, rest_min, mx - n_prefix);
        }
        for (i = 0; i < opened; i++) tokd_buf_appendf(b, ")? ");
        tokd_buf_appendf(b, "\"]\"");
        free(pr);
        return 0;
    }
    if (!item[0] || mx == 0) {
        if (mn > 0) return jfail(c, "json schema: minItems above the items allowed");
        tokd_buf_appendf(b, "\"[\" ws \"]\"");
        return 0;
    }
    long rmin = mn > 0 ? mn - 1 : 0;
    tokd_buf_appendf(b, "\"[\" ws %s%s ws ( \",\" ws %s ws ){%ld,", mn > 0 ? "" : "( ", item, item, rmin);
    if (mx >= 0) tokd_buf_appendf(b, "%ld", mx - 1);
    tokd_buf_appendf(b, "} %s\"]\"", mn > 0 ? "" : ")? ");
    return 0;
}

static int gen_string(jctx *c, const cJSON *s, tokd_buf *b) {
    long mn, mx;
    if (count_field(c, s, "minLength", 0, &mn) || count_field(c, s, "maxLength", -1, &mx)) return -1;
    if (mx >= 0 && mx < mn) return jfail(c, "json schema: maxLength below minLength");
    if (mn == 0 && mx < 0) tokd_buf_appendf(b, "string");
    else if (mx < 0) tokd_buf_appendf(b, "\"\\\"\" char{%ld,} \"\\\"\"", mn);
    else tokd_buf_appendf(b, "\"\\\"\" char{%ld,%ld} \"\\\"\"", mn, mx);
    return 0;
}

static int gen_type(jctx *c, const cJSON *s, const char *t, int depth, tokd_buf *b) {
    if (!strcmp(t, "object")) return gen_object(c, s, depth, b);
    if (!strcmp(t, "array")) return gen_array(c, s, depth, b);
    if (!strcmp(t, "string")) return gen_string(c, s, b);
    if (!strcmp(t, "integer")) return gen_integer(c, s, b);
    if (!strcmp(t, "number")) {
        bool h1, h2;
        double lo = num_field(s, "minimum", &h1), xlo = num_field(s, "exclusiveMinimum", &h2);
        tokd_buf_appendf(b, (h1 && lo >= 0) || (h2 && xlo >= 0) ? "unsigned-number" : "number");
        return 0;
    }
    if (!strcmp(t, "boolean")) {
        tokd_buf_appendf(b, "( \"true\" | \"false\" )");
        return 0;
    }
    if (!strcmp(t, "null")) {
        tokd_buf_appendf(b, "\"null\"");
        return 0;
    }
    return jfail(c, "json schema: unknown type '%.60s'", t);
}

/* "#", "#/$defs/x", "#/definitions/x" (JSON pointer, ~0 ~1 decoded). */
static const cJSON *resolve(jctx *c, const char *ref) {
    if (ref[0] != '#') return NULL;
    const cJSON *cur = c->root;
    const char *p = ref + 1;
    while (*p == '/') {
        p++;
        char key[256];
        size_t k = 0;
        while (*p && *p != '/') {
            char ch = *p++;
            if (ch == '~' && *p == '0') ch = '~', p++;
            else if (ch == '~' && *p == '1') ch = '/', p++;
            if (k + 1 >= sizeof key) return NULL;
            key[k++] = ch;
        }
        key[k] = 0;
        if (!cJSON_IsObject(cur)) return NULL;
        cur = cJSON_GetObjectItemCaseSensitive(cur, key);
        if (!cur) return NULL;
    }
    return *p ? NULL : cur;
}

static int gen(jctx *c, const cJSON *s, int depth, tokd_buf *b) {
    if (depth > MAX_SCHEMA_DEPTH) return jfail(c, "json schema: nested deeper than %d", MAX_SCHEMA_DEPTH);
    if (cJSON_IsTrue(s)) {
        emit_any(c);
        tokd_buf_appendf(b, "any1");
        return 0;
    }
    if (cJSON_IsFalse(s)) return jfail(c, "json schema: a false schema matches nothing");
    if (!cJSON_IsObject(s)) return jfail(c, "json schema: a schema must be an object or a boolean");
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "$ref"))) {
        if (!cJSON_IsString(v)) return jfail(c, "json schema: $ref must be a string");
        for (int i = 0; i < c->n_refs; i++)
            if (!strcmp(c->refs[i].ref, v->valuestring)) {
                tokd_buf_appendf(b, "r%d", c->refs[i].id);
                return 0;
            }
        const cJSON *t = resolve(c, v->valuestring);
        if (!t) return jfail(c, "json schema: cannot resolve $ref '%.100s'", v->valuestring);
        int id = new_rule_id(c);
        if (c->n_refs == c->cap_refs) {
            c->cap_refs = c->cap_refs ? c->cap_refs * 2 : 8;
            c->refs = tokd_xrealloc(c->refs, (size_t)c->cap_refs * sizeof *c->refs);
        }
        c->refs[c->n_refs++] = (ref_entry){v->valuestring, id};
        tokd_buf tb = {0};
        int rc = gen(c, t, depth + 1, &tb);
        if (!rc) rule(c, id, tb.data ? tb.data : "\"\"");
        tokd_buf_free(&tb);
        if (rc) return -1;
        tokd_buf_appendf(b, "r%d", id);
        return 0;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "const"))) return lit_json(c, b, v);
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "enum"))) {
        if (!cJSON_IsArray(v) || !v->child) return jfail(c, "json schema: enum must be a non-empty array");
        tokd_buf_appendf(b, "( ");
        for (const cJSON *e = v->child; e; e = e->next) {
            if (e != v->child) tokd_buf_appendf(b, " | ");
            if (lit_json(c, b, e)) return -1;
        }
        tokd_buf_appendf(b, " )");
        return 0;
    }
    const char *alts[] = {"anyOf", "oneOf"};
    for (int k = 0; k < 2; k++)
        if ((v = cJSON_GetObjectItemCaseSensitive(s, alts[k]))) {
            if (!cJSON_IsArray(v) || !v->child) return jfail(c, "json schema: %s must be a non-empty array", alts[k]);
            tokd_buf_appendf(b, "( ");
            for (const cJSON *e = v->child; e; e = e->next) {
                int r = gen_rule(c, e, depth + 1);
                if (r < 0) return -1;
                tokd_buf_appendf(b, "%sr%d", e == v->child ? "" : " | ", r);
            }
            tokd_buf_appendf(b, " )");
            return 0;
        }
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "allOf"))) {
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 1)
            return jfail(c, "json schema: allOf is supported with exactly one schema");
        return gen(c, v->child, depth + 1, b);
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (cJSON_IsString(type)) return gen_type(c, s, type->valuestring, depth, b);
    if (cJSON_IsArray(type)) {
        if (!type->child) return jfail(c, "json schema: empty type list");
        tokd_buf_appendf(b, "( ");
        for (const cJSON *t = type->child; t; t = t->next) {
            if (!cJSON_IsString(t)) return jfail(c, "json schema: type names must be strings");
            if (t != type->child) tokd_buf_appendf(b, " | ");
            tokd_buf_appendf(b, "( ");
            if (gen_type(c, s, t->valuestring, depth, b)) return -1;
            tokd_buf_appendf(b, " )");
        }
        tokd_buf_appendf(b, " )");
        return 0;
    }
    if (type) return jfail(c, "json schema: type must be a string or a list");
    if (cJSON_GetObjectItemCaseSensitive(s, "properties")) return gen_object(c, s, depth, b);
    if (cJSON_GetObjectItemCaseSensitive(s, "items") || cJSON_GetObjectItemCaseSensitive(s, "prefixItems"))
        return gen_array(c, s, depth, b);
    emit_any(c);
    tokd_buf_appendf(b, "any1");
    return 0;
}

static const char *BASE_RULES =
    "ws ::= ( \" \" | \"\\n\" [ \\t]{0,20} )?\n"
    "char ::= [^\"\\\\\\x00-\\x1F\\x7F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n"
    "unsigned-number ::= ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?\n"
    "number ::= \"-\"? unsigned-number\n";

char *tokd_json_schema_to_gbnf(const cJSON *schema, bool any_object, tokd_err *err) {
    jctx c = {.root = schema};
    tokd_buf_appendf(&c.out, "%s", BASE_RULES);
    if (any_object) {
        emit_any(&c);
        tokd_buf_appendf(&c.out, "root ::= any-object\n");
    } else if (!schema) {
        jfail(&c, "json schema: no schema");
    } else {
        tokd_buf b = {0};
        if (!gen(&c, schema, 0, &b)) tokd_buf_appendf(&c.out, "root ::= %s\n", b.data ? b.data : "\"\"");
        tokd_buf_free(&b);
    }
    free(c.refs);
    if (c.failed) {
        tokd_seterr(err, "%s", c.msg);
        tokd_buf_free(&c.out);
        return NULL;
    }
    return c.out.data;
}

tokd_grammar *tokd_grammar_from_json_schema(const cJSON *schema, bool any_object, tokd_err *err) {
    char *text = tokd_json_schema_to_gbnf(schema, any_object, err);
    if (!text) return NULL;
    tokd_grammar *g = tokd_grammar_parse(text, strlen(text), err);
    free(text);
    return g;
}
