/* json_schema.c — JSON Schema (a cJSON tree) -> grammar text -> tokd_grammar.
 *
 * The promise: every output the grammar admits is valid under the schema. A keyword that
 * constrains values is either enforced exactly or refused by name ("json schema: 'not' is
 * not supported"); it is never ignored. The grammar may admit fewer values than the
 * schema (fixed key order, bounded digits, no escapes in extra keys), never more.
 *
 * Output is compact JSON: between structural tokens at most one space, or one newline
 * followed by up to 20 spaces or tabs (rule `ws`), so a model cannot spend its budget in
 * whitespace, and nothing before or after the value. Unbounded numbers have at most 16
 * integer digits, 16 fraction digits and 3 exponent digits (bounded ones: see below), so
 * every rule can be closed in bounded steps.
 *
 * Supported:
 *   type (a name or a list of names): object, array, string, number, integer, boolean, null.
 *     Without `type`, the keywords present pick the types: object keywords -> object, array
 *     keywords -> array, string keywords -> string, number keywords -> number (several:
 *     their union); none -> any value.
 *   object: properties (emitted in the order given), required, additionalProperties,
 *     minProperties / maxProperties (only when every output satisfies them: minProperties at
 *     most the number of required keys, maxProperties at least the number of keys that can
 *     be written). additionalProperties defaults to FALSE when `properties` is given (the
 *     listed keys only, as OpenAI's strict structured output does); true or a schema allows
 *     further keys after the listed ones, written without escapes and never equal to a
 *     listed or required key. Required keys missing from `properties` are written after the
 *     listed ones, their value under the additionalProperties schema (any value when it is
 *     true or absent); with additionalProperties false they are an error. An object with no
 *     properties, no required keys and additionalProperties absent or true is any object.
 *     propertyNames (a string schema for the keys) only where no key is listed (properties
 *     and required absent): a map whose keys follow it.
 *   array: prefixItems (or `items` as a list, with additionalItems), items (a schema, true
 *     or false), minItems, maxItems (counts up to 10000) over prefix and rest together;
 *     uniqueItems true with maxItems <= 1, or without prefixItems for items of listed values
 *     (const / enum): then each value at most once, in the listed order (gen_unique_array).
 *   string: minLength, maxLength (code points; an escape counts as one, so such strings
 *     hold no \u escapes of UTF-16 surrogates, a pair of which is one code point); format
 *     date (YYYY-MM-DD, real calendar dates, years 0001-9999), time (HH:MM:SS[.f{1,9}] then
 *     Z or +HH:MM / -HH:MM, RFC 3339), date-time (date "T" time), uuid (8-4-4-4-12 hex),
 *     ipv4 (dotted quad, no leading zeros), a format with minLength/maxLength only when the
 *     format's lengths lie within them; hostname, email, uri, ipv6, duration as patterns
 *     (subsets of their RFCs: see PATTERN_FORMATS), with any minLength/maxLength. Other
 *     formats are refused by name. pattern (an ECMA-262 regular expression: its supported
 *     subset and how minLength/maxLength combine with it are in json_schema_pattern.c), not
 *     beside format.
 *   integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers, or draft-4
 *     booleans), exact; output has at most 15 digits when bounded, so a bound beyond 15
 *     digits narrows the range to them, or is refused when it leaves nothing (minimum 1e20);
 *     multipleOf 1.
 *   number: with any bound, output is written without exponent, at most 9 integer digits and
 *     6 fraction digits (15 significant digits, so decimal and binary comparisons agree) and
 *     the bounds are exact; a bound with more than 6 decimals, or a lower bound >= 1e9 (an
 *     upper bound <= -1e9), is refused; multipleOf 1 makes it an integer.
 *   enum, const (any JSON values, emitted as compact JSON text): only the values that the
 *     schema's other keywords admit are kept (checked with the grammar those keywords
 *     give, so its narrowing applies: an object value with keys outside `properties` is
 *     dropped); none left is an error.
 *   anyOf; oneOf only when its alternatives are provably exclusive (pairwise: no JSON type
 *     in common, disjoint const/enum values, or both objects (type object, or object
 *     keywords only) with a common required property whose const/enum values are
 *     disjoint), else refused; allOf; $ref to "#", "#/$defs/..." or "#/definitions/..."
 *     (recursion allowed); true / {} (any value). Keywords beside $ref / anyOf / oneOf, and
 *     the schemas of allOf, are merged into one schema (into each alternative, into the
 *     $ref target): a keyword on both sides must be equal, except `type` (the types in
 *     both; an alternative left with none is dropped), `required` (the union), the min/max
 *     bounds and counts (the tighter) and `properties` (the union, a key in both under
 *     both schemas, and then no additionalProperties); additionalProperties must come with
 *     its properties, items with its prefixItems, additionalItems with its items; otherwise
 *     refused. (const/enum beside them: the values are checked against them, as above.)
 *   Annotations are ignored: title, description, default, examples, $schema, $id, $comment,
 *     deprecated, readOnly, writeOnly, contentMediaType, contentEncoding, contentSchema,
 *     $defs, definitions, $anchor, nullable (only widens); so are unknown keywords (x-...).
 * Refused by name: not, patternProperties, dependentRequired,
 * dependentSchemas, dependencies, if, then, else, contains, minContains, maxContains,
 * unevaluatedProperties, unevaluatedItems, $dynamicRef, $recursiveRef, and the limited
 * keywords above outside their supported cases. Errors: false schemas, unknown types,
 * unresolvable $ref, nesting deeper than 64, bounds or counts that contradict each other,
 * required keys that additionalProperties false forbids, enum/const with no value left,
 * merged types with none in common.
 *
 * Any JSON value (json_object mode, untyped schemas) nests at most 12 levels deep: deeper
 * output is not valid under the grammar. The digit grammars of bounded integers and
 * numbers are built in json_schema_ranges.c. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "json_schema_pattern.h"
#include "json_schema_ranges.h"

#define MAX_SCHEMA_DEPTH 64
#define MAX_PATTERN_TEXT (8u << 20) /* grammar text the schema's patterns may bring it to: a small
                                       schema must not cost seconds and hundreds of MB */
#define MAX_ANY_DEPTH 12
#define MAX_COUNT 10000
#define INT_LIMIT 999999999999999LL /* 15 digits */

typedef struct {
    const char *ref;
    int id;
} ref_entry;

enum { FMT_DATE = 1, FMT_TIME = 2, FMT_DATE_TIME = 4, FMT_UUID = 8, FMT_IPV4 = 16, FMT_XKEY = 32 };

typedef struct {
    const cJSON *root;
    tokd_buf out;
    int n_rules;
    ref_entry *refs;
    int n_refs, cap_refs;
    bool any_emitted;
    unsigned fmt_emitted;
    char msg[300];
    bool failed;
    cJSON **owned; /* merged copies of subschemas, freed with the context */
    int n_owned, cap_owned;
} jctx;

/* Keep v (a schema built here) until the context is freed; returns it. */
static cJSON *own(jctx *c, cJSON *v) {
    if (c->n_owned == c->cap_owned) {
        c->cap_owned = c->cap_owned ? c->cap_owned * 2 : 8;
        c->owned = tokd_xrealloc(c->owned, (size_t)c->cap_owned * sizeof *c->owned);
    }
    c->owned[c->n_owned++] = v;
    return v;
}

static void jctx_free(jctx *c) {
    free(c->refs);
    for (int i = 0; i < c->n_owned; i++) cJSON_Delete(c->owned[i]);
    free(c->owned);
}

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

/* ---- keywords ------------------------------------------------------------------------------ */

static bool in_list(const char *k, const char *const *list) {
    for (; *list; list++)
        if (!strcmp(k, *list)) return true;
    return false;
}

/* Keywords that constrain values and are handled (some only in part: see the header). */
static const char *const HANDLED[] = {
    "type", "properties", "required", "additionalProperties", "minProperties", "maxProperties", "items",
    "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "minLength", "maxLength", "format", "pattern",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "enum", "const", "anyOf", "oneOf",
    "allOf", "$ref", "propertyNames", NULL};
/* Keywords that constrain values and are not supported at all. */
static const char *const REFUSED[] = {
    "not", "patternProperties", "dependentRequired", "dependentSchemas", "dependencies",
    "if", "then", "else", "contains", "minContains", "maxContains", "unevaluatedProperties", "unevaluatedItems",
    "$dynamicRef", "$recursiveRef", NULL};
/* The keywords that select a type when `type` is absent. */
static const char *const OBJECT_KW[] = {"properties", "required", "additionalProperties", "minProperties", "maxProperties",
                                        "propertyNames", NULL};
static const char *const ARRAY_KW[] = {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", NULL};
static const char *const STRING_KW[] = {"minLength", "maxLength", "format", "pattern", NULL};
static const char *const NUMBER_KW[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", NULL};

static bool is_constraint(const char *k) { return in_list(k, HANDLED) || in_list(k, REFUSED); }

static int check_keywords(jctx *c, const cJSON *s) {
    for (const cJSON *k = s->child; k; k = k->next)
        if (in_list(k->string, REFUSED)) return jfail(c, "json schema: '%s' is not supported", k->string);
    return 0;
}

/* The first constraining keyword of s other than `except` (NULL: none). */
static const char *other_constraint(const cJSON *s, const char *except1, const char *except2) {
    for (const cJSON *k = s->child; k; k = k->next)
        if (strcmp(k->string, except1) && (!except2 || strcmp(k->string, except2)) && is_constraint(k->string))
            return k->string;
    return NULL;
}

static bool has_any(const cJSON *s, const char *const *list) {
    for (const cJSON *k = s->child; k; k = k->next)
        if (in_list(k->string, list)) return true;
    return false;
}

static const char *const BASE_RULES_TEXT =
    "ws ::= ( \" \" | \"\\n\" [ \\t]{0,20} )?\n"
    "char ::= [^\"\\\\\\x00-\\x1F\\x7F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"
    /* a counted character: \u escapes of UTF-16 surrogates (two escapes, one code point) excluded */
    "char1 ::= [^\"\\\\\\x00-\\x1F\\x7F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) )\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n"
    "unsigned-number ::= ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?\n"
    "number ::= \"-\"? unsigned-number\n";

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

/* Bounds of a number or integer schema: minimum/maximum, exclusiveMinimum/Maximum as numbers
 * (draft 6+) or as booleans qualifying minimum/maximum (draft 4); the tighter one wins. */
typedef struct {
    bool has, strict;
    double v;
    const char *name;
} bound;

static int get_bounds(jctx *c, const cJSON *s, bound *lo, bound *hi) {
    *lo = (bound){0}, *hi = (bound){0};
    const char *names[2][2] = {{"minimum", "exclusiveMinimum"}, {"maximum", "exclusiveMaximum"}};
    for (int side = 0; side < 2; side++) {
        bound *b = side ? hi : lo;
        const cJSON *inc = cJSON_GetObjectItemCaseSensitive(s, names[side][0]);
        const cJSON *exc = cJSON_GetObjectItemCaseSensitive(s, names[side][1]);
        if (inc && (!cJSON_IsNumber(inc) || !isfinite(inc->valuedouble)))
            return jfail(c, "json schema: %s must be a number", names[side][0]);
        if (exc && !cJSON_IsNumber(exc) && !cJSON_IsBool(exc))
            return jfail(c, "json schema: %s must be a number or a boolean", names[side][1]);
        if (inc) *b = (bound){true, cJSON_IsTrue(exc), inc->valuedouble, names[side][cJSON_IsTrue(exc)]};
        if (cJSON_IsNumber(exc)) {
            double v = exc->valuedouble;
            if (!isfinite(v)) return jfail(c, "json schema: %s must be a number", names[side][1]);
            bool tighter = !b->has || (side ? v <= b->v : v >= b->v);
            if (tighter) *b = (bound){true, true, v, names[side][1]};
        }
    }
    return 0;
}

/* multipleOf: only 1 is supported (every integer is a multiple of it). */
static int check_multiple_of(jctx *c, const cJSON *s, bool *integral) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(s, "multipleOf");
    *integral = false;
    if (!m) return 0;
    if (!cJSON_IsNumber(m) || m->valuedouble != 1)
        return jfail(c, "json schema: 'multipleOf' is not supported (except multipleOf 1)");
    *integral = true;
    return 0;
}

static int gen_integer(jctx *c, const cJSON *s, tokd_buf *b) {
    bound lo, hi;
    bool integral;
    if (get_bounds(c, s, &lo, &hi) || check_multiple_of(c, s, &integral)) return -1;
    int64_t L = INT64_MIN, H = INT64_MAX;
    if (lo.has) {
        double v = lo.strict ? floor(lo.v) + 1 : ceil(lo.v);
        if (v > INT_LIMIT) return jfail(c, "json schema: integer %s above 15 digits is not supported", lo.name);
        L = v < -INT_LIMIT ? -INT_LIMIT : (int64_t)v; /* the output stays within 15 digits */
    }
    if (hi.has) {
        double v = hi.strict ? ceil(hi.v) - 1 : floor(hi.v);
        if (v < -INT_LIMIT) return jfail(c, "json schema: integer %s below -15 digits is not supported", hi.name);
        H = v > INT_LIMIT ? INT_LIMIT : (int64_t)v;
    }
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
        tokd_range_int(b, nlo, nhi);
        tokd_buf_appendf(b, ")");
        any = true;
    }
    if (H >= 0) {
        if (any) tokd_buf_appendf(b, " | ");
        tokd_range_int(b, L < 0 ? 0 : L, H == INT64_MAX ? -1 : H);
    }
    tokd_buf_appendf(b, ")");
    return 0;
}

static int gen_number(jctx *c, const cJSON *s, tokd_buf *b) {
    bound lo, hi;
    bool integral;
    if (get_bounds(c, s, &lo, &hi) || check_multiple_of(c, s, &integral)) return -1;
    if (integral) return gen_integer(c, s, b);
    if (!lo.has && !hi.has) {
        tokd_buf_appendf(b, "number");
        return 0;
    }
    tokd_range_decimal L = {0}, H = {0}, zero = {0};
    bound *bs[2] = {&lo, &hi};
    tokd_range_decimal *ds[2] = {&L, &H};
    for (int i = 0; i < 2; i++) {
        bound *x = bs[i];
        if (!x->has) continue;
        if (fabs(x->v) >= 1e9) {
            /* outputs stay below 1e9 in magnitude: such a bound holds, or cannot be met */
            if (i == 0 ? x->v > 0 : x->v < 0)
                return jfail(c, "json schema: number %s beyond 9 integer digits is not supported", x->name);
            x->has = false;
        } else if (!tokd_range_to_dec(x->v, ds[i])) {
            return jfail(c, "json schema: number %s %.17g has more than %d decimals; not supported", x->name, x->v,
                         TOKD_RANGE_FRAC_DIGITS);
        }
    }
    bool lneg = lo.has && lo.v < 0, hneg = hi.has && hi.v < 0;
    if (lo.has && hi.has) {
        int cmp = lneg != hneg ? (lneg ? -1 : 1) : lneg ? -tokd_range_dec_cmp(&L, &H) : tokd_range_dec_cmp(&L, &H);
        if (cmp > 0 || (cmp == 0 && (lo.strict || hi.strict))) return jfail(c, "json schema: number range is empty");
    }
    tokd_buf_appendf(b, "( ");
    int n = 0;
    tokd_buf t = {0};
    if (!lo.has || lneg) { /* negative values -y: y above max(-hi, 0), up to -lo */
        if (tokd_range_dec(&t, hneg ? &H : &zero, hneg ? hi.strict : true, lo.has ? &L : NULL, lo.has && lo.strict)) {
            if (n++) tokd_buf_appendf(b, " | ");
            tokd_buf_appendf(b, "\"-\" ( %s )", t.data);
        }
        tokd_buf_clear(&t);
    }
    if (!hi.has || hi.v > 0 || (hi.v == 0 && !hi.strict)) {
        bool from_lo = lo.has && !lneg;
        if (tokd_range_dec(&t, from_lo ? &L : &zero, from_lo && lo.strict, hi.has ? &H : NULL, hi.has && hi.strict)) {
            if (n++) tokd_buf_appendf(b, " | ");
            tokd_buf_appendf(b, "%s", t.data);
        }
    }
    tokd_buf_free(&t);
    tokd_buf_appendf(b, " )");
    if (!n) return jfail(c, "json schema: no number with at most %d decimals in the range", TOKD_RANGE_FRAC_DIGITS);
    return 0;
}

/* ---- strings and formats ------------------------------------------------------------------- */

static const struct {
    const char *name;
    unsigned flag;
    int min_len, max_len;
} FORMATS[] = {
    {"date", FMT_DATE, 10, 10},       {"time", FMT_TIME, 9, 24}, {"date-time", FMT_DATE_TIME, 20, 35},
    {"uuid", FMT_UUID, 36, 36},       {"ipv4", FMT_IPV4, 7, 15},
};

/* Formats written as patterns (json_schema_pattern.c, so minLength/maxLength combine with
 * them exactly), narrower than their RFCs so that the grammars stay small and that the
 * common validators accept every string (ajv-formats, zod's email regex and WHATWG URL
 * parsing, Python's ipaddress): host names of 1-4 labels of 1-16 letters, digits and inner
 * hyphens, the last starting with a letter (a numeric last label makes WHATWG parse an IPv4
 * address); email: dot-separated runs of letters, digits and _+- before the @, then one or
 * two labels and a top-level domain of 2-16 letters; uri: http or https, a host name, a
 * port 0-65535, path segments, query and fragment of unreserved and sub-delimiter
 * characters with : and @ (no percent escapes); ipv6: the full eight groups; duration: RFC
 * 3339's appendix A exactly. */
#define FMT_LABEL "[A-Za-z0-9](?:[A-Za-z0-9-]{0,14}[A-Za-z0-9])?"
#define FMT_HOST "(?:" FMT_LABEL "\\.){0,3}[A-Za-z](?:[A-Za-z0-9-]{0,14}[A-Za-z0-9])?"
#define FMT_PORT "(?:[0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
#define FMT_PCHARS "A-Za-z0-9._~!$&'()*+,;=:@" /* and '-', last in each class */
#define FMT_DUR_TIME "T(?:\\d+H(?:\\d+M(?:\\d+S)?)?|\\d+M(?:\\d+S)?|\\d+S)"
static const struct {
    const char *name, *pattern;
} PATTERN_FORMATS[] = {
    {"hostname", "^" FMT_HOST "$"},
    {"email", "^[A-Za-z0-9_+-]+(?:\\.[A-Za-z0-9_+-]+)*@(?:" FMT_LABEL "\\.){1,2}[A-Za-z]{2,16}$"},
    {"uri", "^https?://" FMT_HOST "(?::" FMT_PORT ")?(?:/[" FMT_PCHARS "-]*)*(?:\\?[" FMT_PCHARS "/?-]*)?(?:#[" FMT_PCHARS
            "/?-]*)?$"},
    {"ipv6", "^[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{1,4}){7}$"},
    {"duration", "^P(?:(?:\\d+D|\\d+M(?:\\d+D)?|\\d+Y(?:\\d+M(?:\\d+D)?)?)(?:" FMT_DUR_TIME ")?|" FMT_DUR_TIME "|\\d+W)$"},
};

static void emit_format(jctx *c, unsigned f) {
    tokd_buf *o = &c->out;
    if (f == FMT_DATE_TIME) {
        emit_format(c, FMT_DATE);
        emit_format(c, FMT_TIME);
    }
    if (c->fmt_emitted & f) return;
    c->fmt_emitted |= f;
    switch (f) {
    case FMT_DATE: /* days per month; February 29th in leap years only; years 0001-9999 */
        tokd_buf_appendf(o, "fmt-year ::= [1-9] [0-9]{3} | \"0\" [1-9] [0-9]{2} | \"00\" [1-9] [0-9] | \"000\" [1-9]\n"
                            "fmt-leap ::= [0-9] [0-9] ( \"0\" [48] | [2468] [048] | [13579] [26] )"
                            " | ( \"0\" [48] | [2468] [048] | [13579] [26] ) \"00\"\n"
                            "fmt-date ::= fmt-year \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )"
                            " | ( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" )"
                            " | \"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) ) | fmt-leap \"-02-29\"\n");
        break;
    case FMT_TIME:
        tokd_buf_appendf(o, "fmt-time ::= ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} )?"
                            " ( \"Z\" | [+\\-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )\n");
        break;
    case FMT_DATE_TIME: tokd_buf_appendf(o, "fmt-date-time ::= fmt-date \"T\" fmt-time\n"); break;
    case FMT_UUID:
        tokd_buf_appendf(o, "fmt-hex ::= [0-9a-fA-F]\nfmt-uuid ::= fmt-hex{8} \"-\" fmt-hex{4} \"-\" fmt-hex{4} \"-\" fmt-hex{4} \"-\" fmt-hex{12}\n");
        break;
    case FMT_IPV4:
        tokd_buf_appendf(o, "fmt-octet ::= ");
        tokd_range_int(o, 0, 255);
        tokd_buf_appendf(o, "\nfmt-ipv4 ::= fmt-octet \".\" fmt-octet \".\" fmt-octet \".\" fmt-octet\n");
        break;
    case FMT_XKEY: tokd_buf_appendf(o, "xk-char ::= [^\\x22\\x5C\\x00-\\x1F\\x7F]\n"); break;
    default: break;
    }
}

/* The grammar text a pattern may still add (MAX_PATTERN_TEXT in all, b the body being built). */
static size_t pattern_room(const jctx *c, const tokd_buf *b) {
    size_t used = c->out.len + b->len;
    return used < MAX_PATTERN_TEXT ? MAX_PATTERN_TEXT - used : 0;
}

static int gen_string(jctx *c, const cJSON *s, tokd_buf *b) {
    long mn, mx;
    if (count_field(c, s, "minLength", 0, &mn) || count_field(c, s, "maxLength", -1, &mx)) return -1;
    if (mx >= 0 && mx < mn) return jfail(c, "json schema: maxLength below minLength");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    if (pat) {
        if (!cJSON_IsString(pat)) return jfail(c, "json schema: pattern must be a string");
        if (fmt) return jfail(c, "json schema: 'pattern' with 'format' is not supported");
        char why[sizeof c->msg];
        if (tokd_pattern_to_grammar(pat->valuestring, NULL, mn, mx, new_rule_id(c), pattern_room(c, b), b, &c->out, why,
                                    sizeof why))
            return jfail(c, "%s", why);
        return 0;
    }
    if (fmt) {
        if (!cJSON_IsString(fmt)) return jfail(c, "json schema: format must be a string");
        for (size_t i = 0; i < sizeof FORMATS / sizeof *FORMATS; i++) {
            if (strcmp(fmt->valuestring, FORMATS[i].name)) continue;
            if (mn > FORMATS[i].min_len || (mx >= 0 && mx < FORMATS[i].max_len))
                return jfail(c, "json schema: minLength/maxLength with format '%s' is not supported", FORMATS[i].name);
            emit_format(c, FORMATS[i].flag);
            tokd_buf_appendf(b, "\"\\\"\" fmt-%s \"\\\"\"", FORMATS[i].name);
            return 0;
        }
        for (size_t i = 0; i < sizeof PATTERN_FORMATS / sizeof *PATTERN_FORMATS; i++) {
            if (strcmp(fmt->valuestring, PATTERN_FORMATS[i].name)) continue;
            char why[sizeof c->msg];
            if (!tokd_pattern_to_grammar(PATTERN_FORMATS[i].pattern, PATTERN_FORMATS[i].name, mn, mx, new_rule_id(c),
                                         pattern_room(c, b), b, &c->out, why, sizeof why))
                return 0;
            return jfail(c, "%s", why);
        }
        return jfail(c, "json schema: format '%.60s' is not supported", fmt->valuestring);
    }
    if (mn == 0 && mx < 0) tokd_buf_appendf(b, "string");
    else if (mx < 0) tokd_buf_appendf(b, "\"\\\"\" char1{%ld,} \"\\\"\"", mn);
    else tokd_buf_appendf(b, "\"\\\"\" char1{%ld,%ld} \"\\\"\"", mn, mx);
    return 0;
}

/* ---- objects --------------------------------------------------------------------------------- */

/* Code points of a key that a string without escapes could spell; -1 if none could (invalid
 * UTF-8, or a character that needs an escape). */
static int key_cps(const char *s, uint32_t **out) {
    size_t n = strlen(s);
    uint32_t *cp = tokd_xmalloc((n + 1) * sizeof *cp);
    int k = 0;
    for (size_t i = 0; i < n;) {
        unsigned char ch = (unsigned char)s[i];
        int len = ch < 0x80 ? 1 : ch >= 0xC2 && ch < 0xE0 ? 2 : ch >= 0xE0 && ch < 0xF0 ? 3 : ch >= 0xF0 && ch < 0xF5 ? 4 : 0;
        uint32_t v = len == 1 ? ch : len == 2 ? ch & 0x1Fu : len == 3 ? ch & 0x0Fu : ch & 0x07u;
        if (!len || i + (size_t)len > n) goto bad;
        for (int j = 1; j < len; j++) {
            unsigned char cc = (unsigned char)s[i + (size_t)j];
            if ((cc & 0xC0) != 0x80) goto bad;
            v = v << 6 | (cc & 0x3Fu);
        }
        if (v < 0x20 || v == '"' || v == '\\' || v == 0x7F || (len == 3 && v < 0x800) || (len == 4 && v < 0x10000) ||
            v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
            goto bad;
        cp[k++] = v;
        i += (size_t)len;
    }
    *out = cp;
    return k;
bad:
    free(cp);
    return -1;
}

/* Rule for the rest of an extra key (after its opening quote) whose first d code points
 * equal those of names[idx[0..n)]: any string without escapes that is not one of them. */
static int xkey_node(jctx *c, uint32_t **names, const int *lens, const int *idx, int n, int d) {
    tokd_buf body = {0};
    bool ends = false;
    uint32_t *kids = tokd_xmalloc(((size_t)n + 1) * sizeof *kids);
    int *sub = tokd_xmalloc(((size_t)n + 1) * sizeof *sub);
    int n_kids = 0;
    for (int i = 0; i < n; i++) {
        if (lens[idx[i]] == d) {
            ends = true;
            continue;
        }
        uint32_t cp = names[idx[i]][d];
        bool seen = false;
        for (int j = 0; j < n_kids; j++) seen |= kids[j] == cp;
        if (!seen) kids[n_kids++] = cp;
    }
    if (!ends) tokd_buf_appendf(&body, "\"\\\"\" | ");
    tokd_buf_appendf(&body, "[^\\x22\\x5C\\x00-\\x1F\\x7F");
    for (int j = 0; j < n_kids; j++) tokd_buf_appendf(&body, "\\U%08" PRIX32, kids[j]);
    tokd_buf_appendf(&body, "] xk-char* \"\\\"\"");
    for (int j = 0; j < n_kids; j++) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if (lens[idx[i]] > d && names[idx[i]][d] == kids[j]) sub[m++] = idx[i];
        int r = xkey_node(c, names, lens, sub, m, d + 1);
        tokd_buf_appendf(&body, " | \"\\U%08" PRIX32 "\" r%d", kids[j], r);
    }
    int id = new_rule_id(c);
    rule(c, id, body.data);
    tokd_buf_free(&body);
    free(kids);
    free(sub);
    return id;
}

/* Rule for an extra key: a JSON string written without escapes, none of names[0..n). */
static int gen_xkey(jctx *c, const char *const *names, int n) {
    emit_format(c, FMT_XKEY);
    uint32_t **cps = tokd_xcalloc((size_t)n + 1, sizeof *cps);
    int *lens = tokd_xmalloc(((size_t)n + 1) * sizeof *lens), *idx = tokd_xmalloc(((size_t)n + 1) * sizeof *idx);
    int m = 0;
    for (int i = 0; i < n; i++) {
        int len = key_cps(names[i], &cps[i]);
        if (len < 0) continue; /* no escape-free string spells it */
        lens[i] = len;
        idx[m++] = i;
    }
    int node = xkey_node(c, cps, lens, idx, m, 0);
    for (int i = 0; i < n; i++) free(cps[i]);
    free(cps);
    free(lens);
    free(idx);
    int id = new_rule_id(c);
    char bb[64];
    snprintf(bb, sizeof bb, "\"\\\"\" r%d", node);
    rule(c, id, bb);
    return id;
}

static int gen_object(jctx *c, const cJSON *s, int depth, tokd_buf *b) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (props && !cJSON_IsObject(props)) return jfail(c, "json schema: properties must be an object");
    if (req && !cJSON_IsArray(req)) return jfail(c, "json schema: required must be an array of strings");
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
        if (!cJSON_IsString(r)) return jfail(c, "json schema: required must be an array of strings");
    if (addl && !cJSON_IsBool(addl) && !cJSON_IsObject(addl))
        return jfail(c, "json schema: additionalProperties must be a schema");
    bool addl_false = cJSON_IsFalse(addl);
    bool extra_ok = addl ? !addl_false : !props; /* further keys after the written ones */
    int n_props = props ? cJSON_GetArraySize(props) : 0, n_req = req ? cJSON_GetArraySize(req) : 0;
    /* the keys written in order: the properties, then required keys missing from them */
    const char **names = tokd_xmalloc(((size_t)n_props + (size_t)n_req + 1) * sizeof *names);
    bool *required = tokd_xcalloc((size_t)n_props + (size_t)n_req + 1, 1);
    int *kv = tokd_xmalloc(((size_t)n_props + (size_t)n_req + 1) * sizeof *kv);
    int n = 0, n_required = 0, rc = -1;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next) names[n++] = p->string;
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        int i = 0;
        while (i < n && strcmp(names[i], r->valuestring)) i++;
        if (i == n) {
            if (addl_false) {
                jfail(c, "json schema: required property '%.100s' is not among the properties and additionalProperties is false",
                      r->valuestring);
                goto out;
            }
            names[n++] = r->valuestring;
        }
        n_required += !required[i];
        required[i] = true;
    }
    long mnp, mxp;
    if (count_field(c, s, "minProperties", 0, &mnp) || count_field(c, s, "maxProperties", -1, &mxp)) goto out;
    if (mxp >= 0 && mxp < mnp) {
        jfail(c, "json schema: maxProperties below minProperties");
        goto out;
    }
    if (mnp > n_required) {
        jfail(c, "json schema: 'minProperties' is not supported above the number of required properties (%d)", n_required);
        goto out;
    }
    if (mxp >= 0 && (extra_ok || mxp < n)) {
        jfail(c, "json schema: 'maxProperties' is not supported below the number of keys allowed");
        goto out;
    }
    /* propertyNames: the extra keys' schema (a string schema), only where no key is listed */
    const cJSON *pnames = cJSON_GetObjectItemCaseSensitive(s, "propertyNames");
    if (cJSON_IsTrue(pnames)) pnames = NULL;
    int key_rule = -1;
    if (pnames) {
        if (!cJSON_IsObject(pnames)) {
            jfail(c, "json schema: propertyNames must be a schema (false is not supported)");
            goto out;
        }
        if (n) {
            jfail(c, "json schema: 'propertyNames' beside properties or required is not supported");
            goto out;
        }
        if (extra_ok) {
            cJSON *all = own(c, cJSON_CreateObject()), *list = cJSON_AddArrayToObject(all, "allOf");
            cJSON *str = cJSON_CreateObject();
            cJSON_AddStringToObject(str, "type", "string");
            cJSON_AddItemToArray(list, str);
            cJSON_AddItemReferenceToArray(list, (cJSON *)pnames);
            if ((key_rule = gen_rule(c, all, depth + 1)) < 0) goto out;
        }
    }
    if (n == 0 && extra_ok && !cJSON_IsObject(addl) && key_rule < 0) {
        emit_any(c);
        tokd_buf_appendf(b, "any-object");
        rc = 0;
        goto out;
    }
    /* value of extra keys and of required keys outside properties */
    char extra_v[32] = "";
    if (cJSON_IsObject(addl) && (extra_ok || n > n_props)) {
        int r = gen_rule(c, addl, depth + 1);
        if (r < 0) goto out;
        snprintf(extra_v, sizeof extra_v, "r%d", r);
    } else if (extra_ok || n > n_props) {
        emit_any(c);
        snprintf(extra_v, sizeof extra_v, "any1");
    }
    int i = 0;
    for (const cJSON *p = props ? props->child : NULL; i < n; i++, p = p ? p->next : NULL) {
        char v[32];
        if (i < n_props) {
            int r = gen_rule(c, p, depth + 1);
            if (r < 0) goto out;
            snprintf(v, sizeof v, "r%d", r);
        } else {
            snprintf(v, sizeof v, "%s", extra_v);
        }
        tokd_buf kb = {0};
        cJSON *key = cJSON_CreateString(names[i]);
        lit_json(c, &kb, key);
        cJSON_Delete(key);
        tokd_buf_appendf(&kb, " ws \":\" ws %s", v);
        kv[i] = new_rule_id(c);
        rule(c, kv[i], kb.data);
        tokd_buf_free(&kb);
    }
    char xkey[32] = "string";
    if (extra_ok && n) snprintf(xkey, sizeof xkey, "r%d", gen_xkey(c, names, n));
    else if (key_rule >= 0) snprintf(xkey, sizeof xkey, "r%d", key_rule);
    /* A[k]: properties k.. after one was written; F[k]: the first present one from k on */
    char bb[200];
    int next_a = new_rule_id(c);
    if (!extra_ok) rule(c, next_a, "\"\"");
    else {
        snprintf(bb, sizeof bb, "( \",\" ws %s ws \":\" ws %s ws )*", xkey, extra_v);
        rule(c, next_a, bb);
    }
    int next_f = new_rule_id(c);
    if (!extra_ok) rule(c, next_f, "\"\"");
    else {
        snprintf(bb, sizeof bb, "( %s ws \":\" ws %s ws r%d )?", xkey, extra_v, next_a);
        rule(c, next_f, bb);
    }
    for (int k = n - 1; k >= 0; k--) {
        int a = new_rule_id(c), f = new_rule_id(c);
        snprintf(bb, sizeof bb, required[k] ? "\",\" ws r%d ws r%d" : "( \",\" ws r%d ws )? r%d", kv[k], next_a);
        rule(c, a, bb);
        if (required[k]) snprintf(bb, sizeof bb, "r%d ws r%d", kv[k], next_a);
        else snprintf(bb, sizeof bb, "r%d ws r%d | r%d", kv[k], next_a, next_f);
        rule(c, f, bb);
        next_a = a, next_f = f;
    }
    tokd_buf_appendf(b, "\"{\" ws r%d \"}\"", next_f);
    rc = 0;
out:
    free(names);
    free(required);
    free(kv);
    return rc;
}

/* ---- arrays ---------------------------------------------------------------------------------- */

/* ( body ){lo,hi} (hi < 0: unbounded; hi 0: nothing). */
static void rep(tokd_buf *b, const char *body, long lo, long hi) {
    if (hi == 0) return;
    if (hi < 0) tokd_buf_appendf(b, "( %s ){%ld,} ", body, lo);
    else tokd_buf_appendf(b, "( %s ){%ld,%ld} ", body, lo, hi);
}

static const cJSON *deref(jctx *c, const cJSON *s);
static int kept_values(jctx *c, const cJSON *s, int depth, const cJSON ***out, int *n_out);

/* uniqueItems where the items are listed values (const / enum, after $ref): the values their
 * other keywords admit, in the listed order, each at most once, between minItems and the
 * most allowed (M, -1: any). Rule (i, k): "values i.. remain, k are written"; only those
 * from which minItems can still be reached. */
static int gen_unique_array(jctx *c, const cJSON *items, long mn, long M, int depth, tokd_buf *b) {
    const cJSON *it = items ? deref(c, items) : NULL;
    if (!cJSON_IsObject(it) || (!cJSON_GetObjectItemCaseSensitive(it, "enum") && !cJSON_GetObjectItemCaseSensitive(it, "const")))
        return jfail(c, "json schema: 'uniqueItems' is supported only with maxItems 1 or for items of listed values (enum, const)");
    const cJSON **vals;
    int n;
    if (kept_values(c, it, depth + 1, &vals, &n)) return -1;
    int rc = 0;
    long top = M < 0 || M > n ? n : M;
    if (n > 256) rc = jfail(c, "json schema: 'uniqueItems' over more than 256 values is not supported");
    else if (mn > top) rc = jfail(c, "json schema: minItems above the %d distinct values allowed", n);
    int lits = c->n_rules, base = lits + n; /* rules: each value's text, then (i, k) */
    if (!rc) c->n_rules += n + (n + 1) * (int)(top + 1);
    for (int i = 0; i < n && !rc; i++) {
        tokd_buf t = {0};
        rc = lit_json(c, &t, vals[i]);
        if (!rc) rule(c, lits + i, t.data);
        tokd_buf_free(&t);
    }
#define ALIVE(i, k) ((k) <= top && (k) + (n - (i)) >= mn)
#define ID(i, k) (base + (i) * (int)(top + 1) + (int)(k))
    for (int i = n; i >= 0 && !rc; i--)
        for (long k = 0; k <= top; k++) {
            if (!ALIVE(i, k)) continue;
            char body[128];
            int len = 0;
            if (i == n) len = snprintf(body, sizeof body, "\"\"");
            if (i < n && k < top && ALIVE(i + 1, k + 1))
                len += snprintf(body + len, sizeof body - (size_t)len, "%sr%d ws r%d", k ? "\",\" ws " : "", lits + i, ID(i + 1, k + 1));
            if (i < n && ALIVE(i + 1, k)) len += snprintf(body + len, sizeof body - (size_t)len, "%sr%d", len ? " | " : "", ID(i + 1, k));
            rule(c, ID(i, k), body);
        }
    if (!rc) tokd_buf_appendf(b, "\"[\" ws r%d \"]\"", ID(0, 0));
#undef ALIVE
#undef ID
    free(vals);
    return rc;
}

static int gen_array(jctx *c, const cJSON *s, int depth, tokd_buf *b) {
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    if (prefix && !cJSON_IsArray(prefix)) return jfail(c, "json schema: prefixItems must be an array");
    if (cJSON_IsArray(items)) { /* the draft 4-2019 tuple form */
        if (prefix) return jfail(c, "json schema: items as a list next to prefixItems");
        prefix = items;
        items = cJSON_GetObjectItemCaseSensitive(s, "additionalItems");
    }
    long mn, mx;
    if (count_field(c, s, "minItems", 0, &mn) || count_field(c, s, "maxItems", -1, &mx)) return -1;
    if (mx >= 0 && mx < mn) return jfail(c, "json schema: maxItems below minItems");
    long n_prefix = prefix ? cJSON_GetArraySize(prefix) : 0;
    long M = mx; /* the most items allowed (-1: no limit) */
    if (cJSON_IsFalse(items) && (M < 0 || M > n_prefix)) M = n_prefix;
    if (M >= 0 && mn > M) return jfail(c, "json schema: minItems above the items allowed");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "uniqueItems")) && (M < 0 || M > 1)) {
        if (n_prefix) return jfail(c, "json schema: 'uniqueItems' with prefixItems is not supported");
        return gen_unique_array(c, items, mn, M, depth, b);
    }
    long K = M >= 0 && M < n_prefix ? M : n_prefix; /* prefix items that can be written */
    bool rest = M < 0 || M > n_prefix;
    char item[32] = "";
    if (rest) {
        if (!items || cJSON_IsTrue(items)) {
            emit_any(c);
            snprintf(item, sizeof item, "any1");
        } else {
            int r = gen_rule(c, items, depth + 1);
            if (r < 0) return -1;
            snprintf(item, sizeof item, "r%d", r);
        }
    }
    tokd_buf_appendf(b, "\"[\" ws ");
    long opened = 0, i = 0;
    for (const cJSON *p = prefix ? prefix->child : NULL; p && i < K; p = p->next, i++) {
        int r = gen_rule(c, p, depth + 1);
        if (r < 0) return -1;
        if (i >= mn) tokd_buf_appendf(b, "( "), opened++;
        tokd_buf_appendf(b, "%sr%d ws ", i ? "\",\" ws " : "", r);
    }
    if (rest) {
        long rmin = mn > n_prefix ? mn - n_prefix : 0, rmax = M < 0 ? -1 : M - n_prefix;
        char body[64];
        snprintf(body, sizeof body, "\",\" ws %s ws", item);
        if (n_prefix) rep(b, body, rmin, rmax);
        else if (rmin > 0) {
            tokd_buf_appendf(b, "%s ws ", item);
            rep(b, body, rmin - 1, rmax < 0 ? -1 : rmax - 1);
        } else {
            tokd_buf_appendf(b, "( %s ws ", item);
            rep(b, body, 0, rmax < 0 ? -1 : rmax - 1);
            tokd_buf_appendf(b, ")? ");
        }
    }
    for (i = 0; i < opened; i++) tokd_buf_appendf(b, ")? ");
    tokd_buf_appendf(b, "\"]\"");
    return 0;
}

static int gen_type(jctx *c, const cJSON *s, const char *t, int depth, tokd_buf *b) {
    if (!strcmp(t, "object")) return gen_object(c, s, depth, b);
    if (!strcmp(t, "array")) return gen_array(c, s, depth, b);
    if (!strcmp(t, "string")) return gen_string(c, s, b);
    if (!strcmp(t, "integer")) return gen_integer(c, s, b);
    if (!strcmp(t, "number")) return gen_number(c, s, b);
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

/* ---- oneOf: proving alternatives exclusive ---------------------------------------------------- */

enum { T_NULL = 1, T_BOOL = 2, T_NUM = 4, T_STR = 8, T_ARR = 16, T_OBJ = 32, T_ALL = 63 };

static int value_type(const cJSON *v) {
    return cJSON_IsNull(v) ? T_NULL : cJSON_IsBool(v) ? T_BOOL : cJSON_IsNumber(v) ? T_NUM : cJSON_IsString(v) ? T_STR
         : cJSON_IsArray(v) ? T_ARR : T_OBJ;
}

static int type_bit(const cJSON *t) {
    static const char *names[] = {"null", "boolean", "number", "string", "array", "object", "integer"};
    static const int bits[] = {T_NULL, T_BOOL, T_NUM, T_STR, T_ARR, T_OBJ, T_NUM};
    for (int i = 0; cJSON_IsString(t) && i < 7; i++)
        if (!strcmp(t->valuestring, names[i])) return bits[i];
    return T_ALL;
}

static const cJSON *deref(jctx *c, const cJSON *s) {
    for (int i = 0; i < MAX_SCHEMA_DEPTH && cJSON_IsObject(s); i++) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "$ref");
        const cJSON *t = cJSON_IsString(r) ? resolve(c, r->valuestring) : NULL;
        if (!t) break;
        s = t;
    }
    return s;
}

/* The JSON types some value valid under s may have (a superset). */
static int vtypes(jctx *c, const cJSON *s, int depth) {
    s = deref(c, s);
    if (cJSON_IsFalse(s)) return 0;
    if (!cJSON_IsObject(s) || depth > 8) return T_ALL;
    int m = T_ALL, u;
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "const"))) m &= value_type(v);
    if (cJSON_IsArray(v = cJSON_GetObjectItemCaseSensitive(s, "enum"))) {
        u = 0;
        for (const cJSON *e = v->child; e; e = e->next) u |= value_type(e);
        m &= u;
    }
    v = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (cJSON_IsString(v)) m &= type_bit(v);
    else if (cJSON_IsArray(v)) {
        u = 0;
        for (const cJSON *e = v->child; e; e = e->next) u |= type_bit(e);
        m &= u;
    }
    const char *alts[] = {"anyOf", "oneOf"};
    for (int k = 0; k < 2; k++)
        if (cJSON_IsArray(v = cJSON_GetObjectItemCaseSensitive(s, alts[k]))) {
            u = 0;
            for (const cJSON *e = v->child; e; e = e->next) u |= vtypes(c, e, depth + 1);
            m &= u;
        }
    if (cJSON_IsArray(v = cJSON_GetObjectItemCaseSensitive(s, "allOf")))
        for (const cJSON *e = v->child; e; e = e->next) m &= vtypes(c, e, depth + 1);
    return m;
}

/* The values s admits when it lists them (const, else enum, else the shortest list of an
 * allOf member): the array's first element, or the const itself as a one-element list;
 * NULL when s does not list them. */
static const cJSON *listed(jctx *c, const cJSON *s, bool *single, int depth) {
    const cJSON *v;
    *single = false;
    s = deref(c, s);
    if (!cJSON_IsObject(s) || depth > 8) return NULL;
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "const"))) {
        *single = true;
        return v;
    }
    v = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (cJSON_IsArray(v)) return v->child;
    const cJSON *best = NULL;
    int best_n = 0;
    v = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    for (const cJSON *e = cJSON_IsArray(v) ? v->child : NULL; e; e = e->next) {
        bool one;
        const cJSON *l = listed(c, e, &one, depth + 1);
        int n = 0;
        for (const cJSON *x = l; x; x = one ? NULL : x->next) n++;
        if (l && (!best || n < best_n)) best = l, best_n = n, *single = one;
    }
    return best;
}

static bool values_disjoint(jctx *c, const cJSON *a, const cJSON *b) {
    bool sa, sb;
    const cJSON *la = listed(c, a, &sa, 0), *lb = listed(c, b, &sb, 0);
    if (!la || !lb) return false;
    for (const cJSON *x = la; x; x = sa ? NULL : x->next)
        for (const cJSON *y = lb; y; y = sb ? NULL : y->next)
            if (cJSON_Compare(x, y, true)) return false;
    return true;
}

/* Objects only: type object (or no type and object keywords only, as gen makes it). */
static bool objects_only(jctx *c, const cJSON *s) {
    if (vtypes(c, s, 0) == T_OBJ) return true;
    return cJSON_IsObject(s) && !cJSON_GetObjectItemCaseSensitive(s, "type") && has_any(s, OBJECT_KW) &&
           !has_any(s, ARRAY_KW) && !has_any(s, STRING_KW) && !has_any(s, NUMBER_KW);
}

/* No value is valid under both a and b (a sufficient test); ta, tb: their vtypes. */
static bool exclusive(jctx *c, const cJSON *a, const cJSON *b, int ta, int tb) {
    a = deref(c, a), b = deref(c, b);
    if (!(ta & tb)) return true;
    if (values_disjoint(c, a, b)) return true;
    if (!objects_only(c, a) || !objects_only(c, b)) return false;
    /* a discriminator: a property both require, with disjoint listed values */
    const cJSON *ra = cJSON_GetObjectItemCaseSensitive(a, "required"), *rb = cJSON_GetObjectItemCaseSensitive(b, "required");
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(a, "properties"), *pb = cJSON_GetObjectItemCaseSensitive(b, "properties");
    for (const cJSON *x = cJSON_IsArray(ra) ? ra->child : NULL; x; x = x->next)
        for (const cJSON *y = cJSON_IsArray(rb) ? rb->child : NULL; y; y = y->next) {
            if (!cJSON_IsString(x) || !cJSON_IsString(y) || strcmp(x->valuestring, y->valuestring)) continue;
            const cJSON *xa = cJSON_GetObjectItemCaseSensitive(pa, x->valuestring);
            const cJSON *xb = cJSON_GetObjectItemCaseSensitive(pb, x->valuestring);
            if (xa && xb && values_disjoint(c, xa, xb)) return true;
        }
    return false;
}

/* ---- keywords beside $ref, anyOf, oneOf, allOf ----------------------------------------------- */

static const char *const LOWER_KW[] = {"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", NULL};
static const char *const UPPER_KW[] = {"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", NULL};

/* m's type := the types in both m's and k's (integer within number); 1 when none is. */
static int intersect_types(jctx *c, cJSON *m, const cJSON *k) {
    const cJSON *have = cJSON_GetObjectItemCaseSensitive(m, "type");
    const cJSON *sides[2] = {have, k};
    for (int i = 0; i < 2; i++) {
        if (cJSON_IsString(sides[i])) continue;
        if (!cJSON_IsArray(sides[i])) return jfail(c, "json schema: type must be a string or a list");
        for (const cJSON *t = sides[i]->child; t; t = t->next)
            if (!cJSON_IsString(t)) return jfail(c, "json schema: type names must be strings");
    }
    cJSON *out = cJSON_CreateArray();
    const cJSON *ha = cJSON_IsString(have) ? have : have->child;
    for (const cJSON *x = ha; x; x = cJSON_IsString(have) ? NULL : x->next) {
        const cJSON *ka = cJSON_IsString(k) ? k : k->child;
        for (const cJSON *y = ka; y; y = cJSON_IsString(k) ? NULL : y->next) {
            const char *a = x->valuestring, *b = y->valuestring, *t = NULL;
            if (!strcmp(a, b)) t = a;
            else if ((!strcmp(a, "integer") && !strcmp(b, "number")) || (!strcmp(a, "number") && !strcmp(b, "integer")))
                t = "integer";
            bool dup = false;
            for (const cJSON *z = out->child; t && z; z = z->next) dup |= !strcmp(z->valuestring, t);
            if (t && !dup) cJSON_AddItemToArray(out, cJSON_CreateString(t));
        }
    }
    if (!out->child) {
        cJSON_Delete(out);
        return 1;
    }
    cJSON_ReplaceItemInObjectCaseSensitive(m, "type", out);
    return 0;
}

static const cJSON NOTHING; /* merge_into: an alternative that matches nothing */

/* The constraining keywords of s (but `skip`) added to a copy of a: the schema of values
 * valid under both (NULL on error). A keyword on both sides must be equal, except
 * `required` (the union) and `properties` (a key on both sides: allOf of its schemas; then
 * no additionalProperties); additionalProperties must sit with properties, items with
 * prefixItems and additionalItems with items (each qualifies the other), else refused;
 * `type`: the types in both (none: NOTHING when s is an anyOf/oneOf beside a, else an
 * error); bounds on both sides: the tighter. */
static const cJSON *merge_into(jctx *c, const cJSON *s, const char *skip, const cJSON *a) {
    if (!cJSON_IsObject(a) && !cJSON_IsTrue(a)) return a; /* gen says what is wrong with it */
    cJSON *m = cJSON_IsObject(a) ? cJSON_Duplicate(a, true) : cJSON_CreateObject();
    if (!m) {
        jfail(c, "json schema: out of memory");
        return NULL;
    }
    own(c, m);
    const char *where = skip ? skip : "allOf";
    bool props_merged = false;
    for (const cJSON *k = s->child; k; k = k->next) {
        if ((skip && !strcmp(k->string, skip)) || !is_constraint(k->string)) continue;
        cJSON *have = cJSON_GetObjectItemCaseSensitive(m, k->string);
        if (have && cJSON_Compare(have, k, true)) continue;
        if (have && !strcmp(k->string, "required") && cJSON_IsArray(have) && cJSON_IsArray(k)) {
            for (const cJSON *r = k->child; r; r = r->next) {
                bool dup = false;
                for (const cJSON *q = have->child; q; q = q->next) dup |= cJSON_Compare(q, r, true);
                if (!dup) cJSON_AddItemToArray(have, cJSON_Duplicate(r, true));
            }
            continue;
        }
        if (have && !strcmp(k->string, "type")) {
            int r = intersect_types(c, m, k);
            if (r < 0) return NULL;
            if (r > 0) { /* matches nothing: an alternative to drop, else an error */
                if (skip && (!strcmp(skip, "anyOf") || !strcmp(skip, "oneOf"))) return &NOTHING;
                jfail(c, "json schema: the types beside and inside '%s' have none in common", where);
                return NULL;
            }
            continue;
        }
        if (have && !strcmp(k->string, "properties") && cJSON_IsObject(have) && cJSON_IsObject(k)) {
            /* both: every key under both schemas (allOf), new keys after the others */
            for (const cJSON *p = k->child; p; p = p->next) {
                cJSON *hp = cJSON_GetObjectItemCaseSensitive(have, p->string);
                if (!hp) cJSON_AddItemToObject(have, p->string, cJSON_Duplicate(p, true));
                else if (!cJSON_Compare(hp, p, true)) {
                    cJSON *all = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(all, "allOf");
                    cJSON_AddItemToArray(arr, cJSON_Duplicate(hp, true));
                    cJSON_AddItemToArray(arr, cJSON_Duplicate(p, true));
                    cJSON_ReplaceItemInObjectCaseSensitive(have, p->string, all);
                }
            }
            props_merged = true;
            continue;
        }
        bool lower = in_list(k->string, LOWER_KW), upper = in_list(k->string, UPPER_KW);
        if (have && (lower || upper) && cJSON_IsNumber(have) && cJSON_IsNumber(k)) {
            if (lower ? k->valuedouble > have->valuedouble : k->valuedouble < have->valuedouble)
                cJSON_SetNumberValue(have, k->valuedouble); /* the tighter bound */
            continue;
        }
        if (have) {
            jfail(c, "json schema: '%s' both beside and inside '%s' is not supported", k->string, where);
            return NULL;
        }
        cJSON_AddItemToObject(m, k->string, cJSON_Duplicate(k, true));
    }
    if (props_merged && cJSON_GetObjectItemCaseSensitive(m, "additionalProperties")) {
        jfail(c, "json schema: 'properties' on both sides of '%s' with 'additionalProperties' is not supported", where);
        return NULL;
    }
    static const char *pairs[][2] = {{"additionalProperties", "properties"}, {"items", "prefixItems"}, {"additionalItems", "items"}};
    bool in_a = cJSON_IsObject(a);
    for (int i = 0; i < 3; i++) {
        const char *dep = pairs[i][0], *base = pairs[i][1];
        if (!cJSON_GetObjectItemCaseSensitive(m, dep) || !cJSON_GetObjectItemCaseSensitive(m, base)) continue;
        bool dep_a = in_a && cJSON_GetObjectItemCaseSensitive(a, dep), base_a = in_a && cJSON_GetObjectItemCaseSensitive(a, base);
        if (dep_a != base_a) {
            jfail(c, "json schema: '%s' and '%s' in different schemas combined by '%s' is not supported", dep, base, where);
            return NULL;
        }
    }
    return m;
}

/* ---- const and enum -------------------------------------------------------------------------- */

/* keep[i]: whether vals[i] is valid under s without its const and enum (matched against the
 * grammar s's other keywords give). */
static int filter_values(jctx *c, const cJSON *s, int depth, const cJSON *const *vals, int n, bool *keep) {
    cJSON *rest = cJSON_Duplicate(s, true);
    if (!rest) return jfail(c, "json schema: out of memory");
    cJSON_DeleteItemFromObjectCaseSensitive(rest, "const");
    cJSON_DeleteItemFromObjectCaseSensitive(rest, "enum");
    jctx sub = {.root = c->root};
    tokd_buf_appendf(&sub.out, "%s", BASE_RULES_TEXT);
    tokd_buf body = {0};
    if (!gen(&sub, rest, depth + 1, &body)) tokd_buf_appendf(&sub.out, "root ::= %s\n", body.data ? body.data : "\"\"");
    tokd_buf_free(&body);
    jctx_free(&sub);
    cJSON_Delete(rest);
    int rc = 0;
    if (sub.failed) rc = jfail(c, "%s", sub.msg);
    tokd_grammar *g = NULL;
    if (!rc) {
        tokd_err e = {{0}};
        g = tokd_grammar_parse(sub.out.data, sub.out.len, &e);
        if (!g) rc = jfail(c, "json schema: internal error: %s", e.msg);
    }
    for (int i = 0; !rc && i < n; i++) {
        char *t = cJSON_PrintUnformatted(vals[i]);
        keep[i] = t && tokd_grammar_match(g, t, strlen(t));
        free(t);
    }
    tokd_grammar_free(g);
    tokd_buf_free(&sub.out);
    return rc;
}

/* The values of s's const or enum that its other keywords admit: *vals (malloc'd, n of
 * them, with the same const/enum value kept once); 0, or -1 when none is left. */
static int kept_values(jctx *c, const cJSON *s, int depth, const cJSON ***out, int *n_out) {
    const cJSON *cv = cJSON_GetObjectItemCaseSensitive(s, "const"), *ev = cJSON_GetObjectItemCaseSensitive(s, "enum");
    *out = NULL, *n_out = 0;
    if (ev && (!cJSON_IsArray(ev) || !ev->child)) return jfail(c, "json schema: enum must be a non-empty array");
    int n = cv ? 1 : cJSON_GetArraySize(ev), i = 0, kept = 0, rc = 0;
    const cJSON **vals = tokd_xmalloc((size_t)n * sizeof *vals);
    bool *keep = tokd_xmalloc((size_t)n);
    if (cv) vals[0] = cv;
    else
        for (const cJSON *e = ev->child; e; e = e->next) vals[i++] = e;
    for (i = 0; i < n; i++) keep[i] = true;
    if (cv && ev) {
        keep[0] = false;
        for (const cJSON *e = ev->child; e; e = e->next) keep[0] |= cJSON_Compare(cv, e, true);
    }
    if (other_constraint(s, "const", "enum")) rc = filter_values(c, s, depth, vals, n, keep);
    for (i = 0; i < n && !rc; i++) {
        for (int j = 0; j < kept && keep[i]; j++) keep[i] = !cJSON_Compare(vals[j], vals[i], true);
        if (keep[i]) vals[kept++] = vals[i];
    }
    free(keep);
    if (!rc && !kept)
        rc = jfail(c, cv ? "json schema: the const value does not satisfy the schema's other keywords"
                         : "json schema: no enum value satisfies the schema's other keywords");
    if (rc) {
        free(vals);
        return -1;
    }
    *out = vals, *n_out = kept;
    return 0;
}

static int gen_values(jctx *c, const cJSON *s, int depth, tokd_buf *b) {
    const cJSON **vals;
    int n, rc = 0;
    if (kept_values(c, s, depth, &vals, &n)) return -1;
    tokd_buf_appendf(b, "( ");
    for (int i = 0; i < n && !rc; i++) {
        if (i) tokd_buf_appendf(b, " | ");
        rc = lit_json(c, b, vals[i]);
    }
    tokd_buf_appendf(b, " )");
    free(vals);
    return rc;
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
    if (check_keywords(c, s)) return -1;
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "$ref"))) {
        if (!cJSON_IsString(v)) return jfail(c, "json schema: $ref must be a string");
        if (other_constraint(s, "$ref", NULL)) { /* both: the target with these keywords added */
            const cJSON *t = resolve(c, v->valuestring);
            if (!t) return jfail(c, "json schema: cannot resolve $ref '%.100s'", v->valuestring);
            const cJSON *m = merge_into(c, s, "$ref", t);
            return m ? gen(c, m, depth + 1, b) : -1;
        }
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
    if (cJSON_GetObjectItemCaseSensitive(s, "const") || cJSON_GetObjectItemCaseSensitive(s, "enum"))
        return gen_values(c, s, depth, b);
    const char *alts[] = {"anyOf", "oneOf"};
    for (int k = 0; k < 2; k++)
        if ((v = cJSON_GetObjectItemCaseSensitive(s, alts[k]))) {
            if (!cJSON_IsArray(v) || !v->child) return jfail(c, "json schema: %s must be a non-empty array", alts[k]);
            /* keywords beside it hold for every alternative: merged into each */
            bool beside = other_constraint(s, alts[k], NULL) != NULL;
            int n = 0, rc = 0;
            const cJSON **alt = tokd_xmalloc((size_t)cJSON_GetArraySize(v) * sizeof *alt);
            int *ty = tokd_xmalloc((size_t)cJSON_GetArraySize(v) * sizeof *ty), i;
            for (const cJSON *x = v->child; x && !rc; x = x->next) {
                const cJSON *a = beside ? merge_into(c, s, alts[k], x) : x;
                if (!a) rc = -1;
                else if (a != &NOTHING) alt[n++] = a;
            }
            if (!rc && !n) rc = jfail(c, "json schema: no alternative of '%s' has a type allowed beside it", alts[k]);
            bool ok = true;
            for (i = 0; !rc && k == 1 && i < n; i++) ty[i] = vtypes(c, alt[i], 0);
            for (i = 0; !rc && k == 1 && ok && i < n; i++)
                for (int j = i + 1; ok && j < n; j++) ok = exclusive(c, alt[i], alt[j], ty[i], ty[j]);
            if (!ok)
                rc = jfail(c, "json schema: 'oneOf' is supported only when its alternatives are provably exclusive (no "
                              "common type, disjoint const/enum values, or a required property with disjoint const/enum "
                              "values); use anyOf");
            if (!rc) tokd_buf_appendf(b, "( ");
            for (i = 0; !rc && i < n; i++) {
                int r = gen_rule(c, alt[i], depth + 1);
                if (r < 0) rc = -1;
                else tokd_buf_appendf(b, "%sr%d", i ? " | " : "", r);
            }
            if (!rc) tokd_buf_appendf(b, " )");
            free(alt);
            free(ty);
            return rc;
        }
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "allOf"))) {
        if (!cJSON_IsArray(v) || !v->child) return jfail(c, "json schema: allOf must be a non-empty array");
        /* one schema: the members' keywords and those beside allOf together */
        const cJSON *m = v->child;
        if (other_constraint(s, "allOf", NULL) && !(m = merge_into(c, s, "allOf", m))) return -1;
        for (const cJSON *e = v->child->next; e; e = e->next) {
            if (cJSON_IsTrue(e)) continue;
            if (!cJSON_IsObject(e)) return gen(c, e, depth + 1, b); /* false, or not a schema: its error */
            if (!(m = merge_into(c, e, NULL, m))) return -1;
        }
        return gen(c, m, depth + 1, b);
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
    /* no type: the keywords present pick the types */
    const char *const *fam[] = {OBJECT_KW, ARRAY_KW, STRING_KW, NUMBER_KW};
    const char *fam_type[] = {"object", "array", "string", "number"};
    int n = 0;
    for (int f = 0; f < 4; f++) n += has_any(s, fam[f]);
    if (!n) {
        emit_any(c);
        tokd_buf_appendf(b, "any1");
        return 0;
    }
    if (n > 1) tokd_buf_appendf(b, "( ");
    for (int f = 0, k = 0; f < 4; f++) {
        if (!has_any(s, fam[f])) continue;
        if (k++) tokd_buf_appendf(b, " | ");
        tokd_buf_appendf(b, "( ");
        if (gen_type(c, s, fam_type[f], depth, b)) return -1;
        tokd_buf_appendf(b, " )");
    }
    if (n > 1) tokd_buf_appendf(b, " )");
    return 0;
}

char *tokd_json_schema_to_gbnf(const cJSON *schema, bool any_object, tokd_err *err) {
    jctx c = {.root = schema};
    tokd_buf_appendf(&c.out, "%s", BASE_RULES_TEXT);
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
    jctx_free(&c);
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
