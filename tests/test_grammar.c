/* test_grammar.c — grammar parser errors, matcher cases, JSON Schema translation (valid and
 * violating texts per schema, refusals by name, number bounds against exact arithmetic), the token
 * mask against brute force on real vocabularies, and the acceptance test: random-weight
 * models generating under JSON schemas always produce valid JSON. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "generate.h"
#include "gguf.h"
#include "grammar.h"
#include "t.h"
#include "t_grammar_gen.h"

static tokd_grammar *parse(const char *src) {
    tokd_err e = {{0}};
    tokd_grammar *g = tokd_grammar_parse(src, strlen(src), &e);
    CHECK(g != NULL, "grammar should parse: %s: %s", src, e.msg);
    return g;
}

static void expect_error(const char *src, const char *want) {
    tokd_err e = {{0}};
    tokd_grammar *g = tokd_grammar_parse(src, strlen(src), &e);
    CHECK(g == NULL, "grammar should fail: %s", src);
    CHECK(strstr(e.msg, want) != NULL, "error for %s: got '%s', want '%s'", src, e.msg, want);
    tokd_grammar_free(g);
}

static void test_errors(void) {
    expect_error("", "line 1, column 1: empty grammar");
    expect_error("root ::= \"a\" [", "line 1, column 14: unterminated character class");
    expect_error("root ::= \"a\nb\"", "line 1, column 12: newline in string literal");
    expect_error("root ::= \"abc", "line 1, column 10: unterminated string literal");
    expect_error("root ::= x", "line 1, column 10: undefined rule 'x'");
    expect_error("a ::= \"x\"", "no 'root' rule");
    expect_error("root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' defined twice");
    expect_error("root ::= ( \"a\"", "line 1, column 10: unclosed '('");
    expect_error("root ::= \"a\" )", "line 1, column 14: unmatched ')'");
    expect_error("root ::= \"a\"{3,2}", "maximum below minimum");
    expect_error("root ::= \"a\"{1,99999}", "repetition count above");
    expect_error("root ::= \"a\"**", "repetition of a repetition");
    expect_error("root ::= [b-a]", "range end below its start");
    expect_error("root ::= []", "empty character class");
    expect_error("root ::= \"\\q\"", "line 1, column 11: unknown escape");
    expect_error("root ::= \"\\x4\"", "needs 2 hex digits");
    expect_error("root ::= \"\\U00110000\"", "out of range");
    expect_error("root ::= \"\xff\"", "invalid UTF-8");
    expect_error("root = \"a\"", "expected '::=' after rule name 'root'");
    expect_error("root ::= @", "unexpected '@'");
    expect_error("root ::= a\na ::= a \"x\" | \"y\"", "line 2, column 1: left recursion through rule 'a'");
    expect_error("root ::= b \"x\"\nb ::= c\nc ::= \"\" | root", "left recursion");
    expect_error("root ::= (\"a\"?)*", "can repeat without consuming input");
    char deep[600] = "root ::= ";
    for (int i = 0; i < 200; i++) strcat(deep, "(");
    expect_error(deep, "nested too deeply");
}

typedef struct {
    const char *grammar, *input;
    bool ok;
} mcase;

static void test_matcher(void) {
    static const mcase cases[] = {
        {"root ::= \"ab\" [c-e]+", "abcde", true},
        {"root ::= \"ab\" [c-e]+", "ab", false},
        {"root ::= \"ab\" [c-e]+", "abf", false},
        {"root ::= (\"a\" | \"b\"){2,3}", "ab", true},
        {"root ::= (\"a\" | \"b\"){2,3}", "aba", true},
        {"root ::= (\"a\" | \"b\"){2,3}", "a", false},
        {"root ::= (\"a\" | \"b\"){2,3}", "abab", false},
        {"root ::= \"x\"{3}", "xxx", true},
        {"root ::= \"x\"{3}", "xx", false},
        {"root ::= \"xy\"{2,}", "xyxyxy", true},
        {"root ::= \"xy\"{2,}", "xy", false},
        {"root ::= \"a\"? \"b\"", "b", true},
        {"root ::= \"a\"? \"b\"", "ab", true},
        {"root ::= \"a\"* \"b\"", "aaaab", true},
        {"root ::= [^\"\\\\]*", "h\xc3\xa9llo", true},
        {"root ::= [^\"\\\\]*", "a\"", false},
        {"root ::= [\xce\xb1-\xcf\x89]+", "\xce\xb1\xce\xb2\xce\xb3", true},
        {"root ::= [\xce\xb1-\xcf\x89]+", "\xce\xb1" "a", false},
        {"root ::= . . .", "a\xe2\x82\xac\xf0\x9f\x98\x80", true},
        {"root ::= .", "\xff", false},          /* invalid UTF-8 never matches */
        {"root ::= .", "\xc0\x80", false},      /* overlong */
        {"root ::= .", "\xed\xa0\x80", false},  /* surrogate */
        {"root ::= \"\\x41\\u00e9\\U0001F600\"", "A\xc3\xa9\xf0\x9f\x98\x80", true},
        {"root ::= x\nx ::= \"(\" x \")\" | \"\"", "((()))", true},
        {"root ::= x\nx ::= \"(\" x \")\" | \"\"", "(()", false},
        {"root ::= \"a\" # comment\n  | \"b\" # another\n", "b", true},
        {"root ::= item (\",\" item)*\nitem ::= [0-9]+", "1,22,333", true},
        {"root ::= item (\",\" item)*\nitem ::= [0-9]+", "1,,2", false},
        {"root ::= \"\"", "", true},
        {"root ::= \"a\" | ", "", true},
        {"root ::= [a-c0-2_-]+", "a0_-c2", true},
        {"root ::= [^a-z]", "q", false},
        {"root ::= [^a-z]", "Q", true},
        {"root ::= (\"a\" | \"a\" | \"aa\")*", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", true}, /* ambiguous: no blow-up */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tokd_grammar *g = parse(cases[i].grammar);
        if (!g) continue;
        bool ok = tokd_grammar_match(g, cases[i].input, strlen(cases[i].input));
        CHECK(ok == cases[i].ok, "case %zu: %s on '%s': got %d", i, cases[i].grammar, cases[i].input, ok);
        /* byte by byte gives the same verdict, and a failing byte leaves the state unchanged */
        tokd_grammar_state *s = tokd_grammar_state_new(g, NULL);
        bool alive = true;
        for (size_t k = 0; k < strlen(cases[i].input) && alive; k++) {
            alive = tokd_grammar_accept_bytes(s, cases[i].input + k, 1) == 0;
            if (!alive) CHECK(tokd_grammar_accept_bytes(s, "", 0) == 0, "state still usable");
        }
        CHECK((alive && tokd_grammar_done(s)) == cases[i].ok, "case %zu incrementally", i);
        tokd_grammar_state_free(s);
        tokd_grammar_free(g);
    }
    /* done / can_continue */
    tokd_grammar *g = parse("root ::= \"ab\" \"c\"?");
    tokd_grammar_state *s = tokd_grammar_state_new(g, NULL);
    CHECK(!tokd_grammar_done(s) && tokd_grammar_can_continue(s), "start");
    CHECK(tokd_grammar_accept_bytes(s, "ab", 2) == 0 && tokd_grammar_done(s) && tokd_grammar_can_continue(s), "ab");
    CHECK(tokd_grammar_accept_bytes(s, "x", 1) == -1 && tokd_grammar_done(s), "x refused, state kept");
    CHECK(tokd_grammar_accept_bytes(s, "c", 1) == 0 && tokd_grammar_done(s) && !tokd_grammar_can_continue(s), "abc");
    tokd_grammar_state_reset(s);
    CHECK(!tokd_grammar_done(s) && tokd_grammar_accept_bytes(s, "abc", 3) == 0, "reset");
    tokd_grammar_state_free(s);
    tokd_grammar_free(g);
    /* a long repetition does not deepen the stacks (tail calls) and stays fast */
    g = parse("root ::= (\"ab\" | [0-9])* \"!\"");
    s = tokd_grammar_state_new(g, NULL);
    for (int i = 0; i < 20000; i++) tokd_grammar_accept_bytes(s, i & 1 ? "ab" : "7", i & 1 ? 2 : 1);
    CHECK(tokd_grammar_accept_bytes(s, "!", 1) == 0 && tokd_grammar_done(s), "long repetition");
    tokd_grammar_state_free(s);
    tokd_grammar_free(g);
    /* exponential ambiguity is bounded: the state fails instead of blowing up */
    g = parse("root ::= x*\nx ::= \"a\" | \"a\" x | \"a\" x x");
    s = tokd_grammar_state_new(g, NULL);
    for (int i = 0; i < 200 && !tokd_grammar_failed(s); i++) tokd_grammar_accept_bytes(s, "a", 1);
    CHECK(tokd_grammar_accept_bytes(s, "b", 1) == -1, "bounded state");
    tokd_grammar_state_free(s);
    tokd_grammar_free(g);
}

/* ---- JSON Schema translation --------------------------------------------------------------- */

typedef struct {
    const char *schema;
    const char *valid[6];
    const char *invalid[6];
} scase;

static void test_schema(void) {
    static const scase cases[] = {
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"a\"]}",
         {"{\"a\":1}", "{\"a\": -20, \"b\": \"x\\\"y\\u00e9\"}", "{ \"a\":0,\"b\":\"\"}", "{\"a\":1,\n  \"b\":\"q\"}"},
         {"{}", "{\"b\":\"x\"}", "{\"a\":1.5}", "{\"a\":01}", "{\"a\":1,\"c\":2}", "{\"b\":\"x\",\"a\":1}"}},
        {"{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"boolean\"},\"y\":{\"type\":\"null\"}}}",
         {"{}", "{\"x\":true}", "{\"y\":null}", "{\"x\":false,\"y\":null}"},
         {"{\"x\":1}", "{,}", "{\"y\":null,}", " {}", "{}  "}},
        {"{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":1,\"maxItems\":3}",
         {"[1]", "[1.5,-2e10,0]", "[ 3 , 4 ]", "[0.25E-3]"},
         {"[]", "[1,2,3,4]", "[1,]", "[.5]", "[1e]", "[-]"}},
        {"{\"enum\":[\"red\",\"green\",42,null,{\"k\":[1]}]}",
         {"\"red\"", "42", "null", "{\"k\":[1]}"},
         {"\"blue\"", "43", "\"Red\""}},
        {"{\"const\":\"a\\\"b\"}", {"\"a\\\"b\""}, {"\"ab\"", "\"a\"b\""}},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}",
         {"\"ab\"", "\"abc\"", "\"\\n\\t\"", "\"\xc3\xa9\xc3\xa9\"", "\"\\u00e9x\""},
         {"\"a\"", "\"abcd\"", "\"a\nb\"", "\"\\x\"", "\"\\ud83d\\ude00\""}}, /* a surrogate pair is one code point */
        {"{\"type\":\"integer\",\"minimum\":-12,\"maximum\":305}",
         {"-12", "0", "9", "305", "299", "-1"},
         {"-13", "306", "400", "-0", "1000", "01"}},
        {"{\"type\":\"integer\",\"exclusiveMinimum\":99}", {"100", "12345"}, {"99", "5", "-100"}},
        {"{\"type\":\"integer\",\"maximum\":-10}", {"-10", "-12345"}, {"-9", "0", "10"}},
        {"{\"anyOf\":[{\"type\":\"string\",\"maxLength\":1},{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/n\"}}],"
         "\"$defs\":{\"n\":{\"type\":[\"integer\",\"null\"]}}}",
         {"\"x\"", "[]", "[1,null,3]"},
         {"\"xy\"", "[1.5]", "[\"a\"]"}},
        {"{\"$ref\":\"#/definitions/node\",\"definitions\":{\"node\":{\"type\":\"object\",\"properties\":"
         "{\"v\":{\"type\":\"integer\"},\"next\":{\"anyOf\":[{\"$ref\":\"#/definitions/node\"},{\"type\":\"null\"}]}},"
         "\"required\":[\"v\",\"next\"]}}}",
         {"{\"v\":1,\"next\":null}", "{\"v\":1,\"next\":{\"v\":2,\"next\":null}}"},
         {"{\"v\":1}", "{\"v\":1,\"next\":{\"v\":2}}"}},
        /* extra keys come after the listed ones, never repeat one (not even spelt with escapes) */
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":true}",
         {"{\"a\":1,\"zz\":[1,{\"q\":null}]}", "{}", "{\"b\":2}", "{\"ab\":\"x\",\"\":1}"},
         {"{\"a\":1,\"b\":}", "{\"b\":1,\"a\":}", "{\"a\":1,\"a\":\"x\"}", "{\"a\":\"x\"}", "{\"\\u0061\":\"x\"}"}},
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}",
         {"{}", "{\"p\":1,\"q\":2}"},
         {"{\"p\":\"s\"}"}},
        {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":false}",
         {"[]", "[1]", "[1,\"a\"]"},
         {"[\"a\"]", "[1,\"a\",2]"}},
        {"{}", {"1", "{\"a\":[true,false,null]}", "\"s\""}, {"", "tru"}},
        /* required keys outside properties are written, under additionalProperties */
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"const\":1}},\"required\":[\"a\",\"k\"],"
         "\"additionalProperties\":{\"type\":\"null\"}}",
         {"{\"a\":1,\"k\":null}", "{\"a\":1,\"k\":null,\"z\":null}"},
         {"{\"a\":1}", "{\"a\":1,\"k\":1}", "{\"a\":1,\"z\":null}", "{\"a\":1,\"k\":null,\"a\":2}",
          "{\"a\":1,\"k\":null,\"z\":2}"}},
        /* keys outside the BMP or needing escapes are excluded from the extra keys too */
        {"{\"type\":\"object\",\"properties\":{\"\\udbff\\udfff\":{\"const\":1},\"a\\u0001\":{\"const\":2}},"
         "\"additionalProperties\":{\"type\":\"null\"}}",
         {"{\"\xf4\x8f\xbf\xbf\":1}", "{\"b\":null}", "{\"a\\u0001\":2,\"a\":null}"},
         {"{\"\xf4\x8f\xbf\xbf\":null}", "{\"b\":1}"}},
        {"{\"type\":\"object\",\"required\":[\"x\"]}", {"{\"x\":[1]}", "{\"x\":1,\"y\":2}"}, {"{}", "{\"y\":2}", "[]"}},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"k\"]}",
         {"{\"k\":\"v\"}", "{\"a\":2,\"k\":{}}"}, {"{\"a\":2}", "{\"a\":2,\"k\":1,\"q\":1}"}},
        /* prefixItems under maxItems / minItems; the tuple form of items */
        {"{\"type\":\"array\",\"prefixItems\":[{\"const\":1},{\"const\":2},{\"const\":3}],\"maxItems\":1}",
         {"[]", "[1]"}, {"[1,2]", "[1,2,3]", "[2]"}},
        {"{\"type\":\"array\",\"prefixItems\":[{\"const\":1},{\"const\":2}],\"items\":{\"type\":\"null\"},"
         "\"minItems\":3,\"maxItems\":4}",
         {"[1,2,null]", "[1,2,null,null]"}, {"[1,2]", "[1]", "[1,2,null,null,null]", "[1,2,3]"}},
        {"{\"type\":\"array\",\"items\":[{\"type\":\"string\"},{\"type\":\"null\"}],\"additionalItems\":false,\"minItems\":1}",
         {"[\"a\"]", "[\"a\",null]"}, {"[]", "[null]", "[\"a\",null,null]"}},
        /* enum and const keep only the values the other keywords admit */
        {"{\"type\":\"integer\",\"enum\":[1,\"x\",2.5,7],\"maximum\":5}", {"1"}, {"\"x\"", "2.5", "7"}},
        {"{\"type\":[\"string\",\"null\"],\"enum\":[\"ab\",\"abcd\",null,3],\"maxLength\":3}",
         {"\"ab\"", "null"}, {"\"abcd\"", "3"}},
        /* number bounds are exact */
        {"{\"type\":\"number\",\"minimum\":-1.5,\"maximum\":2.25}",
         {"-1.5", "2.25", "0", "2.2499", "-1.499999", "1.250000"},
         {"-1.51", "2.2500001", "2.26", "-50.6e-000", "3", "-2"}},
        {"{\"type\":\"number\",\"minimum\":0.5,\"maximum\":0.75}", {"0.5", "0.75", "0.6", "0.500"},
         {"5.5e-300", "0.4999", "0.7501", "1", "0", "0.05"}},
        {"{\"type\":\"number\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":1}", {"0.5", "0.000001", "0.999999"},
         {"0", "1", "-0.1", "1.0", "0.0", "0.000"}},
        {"{\"type\":\"number\",\"minimum\":2,\"exclusiveMinimum\":true}", {"2.01", "3000"}, {"2", "2.0", "1.99", "-3"}},
        /* formats */
        {"{\"type\":\"string\",\"format\":\"date\"}", {"\"2024-02-29\"", "\"2000-02-29\"", "\"1999-12-31\"", "\"0001-04-30\""},
         {"\"2023-02-29\"", "\"1900-02-29\"", "\"2023-04-31\"", "\"0000-01-01\"", "\"2023-1-01\"", "\"2023-13-01\""}},
        {"{\"type\":\"string\",\"format\":\"date-time\"}", {"\"2024-01-02T23:59:59Z\"", "\"2024-01-02T12:00:00.123+05:30\""},
         {"\"2024-01-02T24:00:00Z\"", "\"2024-01-02T12:00:00\"", "\"2024-01-02 12:00:00Z\"", "\"2024-01-02T12:60:00Z\""}},
        {"{\"type\":\"string\",\"format\":\"time\"}", {"\"00:00:00-08:00\""}, {"\"00:00:00\"", "\"0:00:00Z\""}},
        {"{\"type\":\"string\",\"format\":\"uuid\"}", {"\"123e4567-e89b-12d3-a456-426614174000\""},
         {"\"123e4567e89b12d3a456426614174000\"", "\"123e4567-e89b-12d3-a456-42661417400g\""}},
        {"{\"type\":\"string\",\"format\":\"ipv4\"}", {"\"192.168.0.1\"", "\"0.0.0.0\""},
         {"\"256.1.1.1\"", "\"01.1.1.1\"", "\"1.1.1\""}},
        /* oneOf with exclusive alternatives: a discriminator property */
        {"{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"a\"},\"x\":{\"type\":\"integer\"}},"
         "\"required\":[\"kind\"]},{\"$ref\":\"#/$defs/b\"}],\"$defs\":{\"b\":{\"type\":\"object\",\"properties\":"
         "{\"kind\":{\"enum\":[\"b\",\"c\"]}},\"required\":[\"kind\"]}}}",
         {"{\"kind\":\"a\",\"x\":1}", "{\"kind\":\"c\"}"}, {"{\"kind\":\"d\"}", "{\"kind\":\"b\",\"x\":1}"}},
        /* keywords beside anyOf / $ref, and allOf's schemas, hold together */
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{}},\"anyOf\":[{\"required\":[\"a\"]},"
         "{\"required\":[\"b\"]}]}",
         {"{\"a\":1}", "{\"b\":\"x\"}", "{\"a\":1,\"b\":2}"}, {"{}", "{\"a\":\"x\"}", "[]"}},
        {"{\"$ref\":\"#/$defs/s\",\"maxLength\":3,\"$defs\":{\"s\":{\"type\":\"string\",\"minLength\":1}}}",
         {"\"abc\"", "\"a\""}, {"\"\"", "\"abcd\"", "1"}},
        {"{\"allOf\":[{\"type\":\"integer\",\"minimum\":0},{\"maximum\":5},{\"exclusiveMaximum\":3}],\"title\":\"t\"}",
         {"0", "2"}, {"-1", "3", "5"}},
        {"{\"allOf\":[{\"type\":\"string\",\"maxLength\":4,\"minLength\":1},{\"type\":[\"string\",\"null\"],\"maxLength\":2}]}",
         {"\"ab\"", "\"a\""}, {"\"abc\"", "\"\"", "null"}}, /* types intersected, the tighter bounds */
        {"{\"type\":[\"number\",\"null\"],\"oneOf\":[{\"type\":\"integer\",\"minimum\":1},{\"type\":\"string\"}]}",
         {"1", "7"}, {"1.5", "null", "\"s\"", "0"}},
        /* a discriminated oneOf whose alternatives narrow properties given beside it */
        {"{\"type\":\"object\",\"properties\":{\"kind\":{\"enum\":[\"a\",\"b\"]},\"x\":{\"type\":\"integer\"}},"
         "\"required\":[\"kind\"],\"oneOf\":[{\"properties\":{\"kind\":{\"const\":\"a\"}},\"required\":[\"x\"]},"
         "{\"properties\":{\"kind\":{\"const\":\"b\"}}}]}",
         {"{\"kind\":\"a\",\"x\":1}", "{\"kind\":\"b\"}", "{\"kind\":\"b\",\"x\":2}"},
         {"{\"kind\":\"a\"}", "{\"kind\":\"c\"}", "{\"x\":1}", "{\"kind\":\"b\",\"x\":\"s\"}"}},
        /* uniqueItems over listed values: each at most once, in the listed order */
        {"{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",\"c\"]},\"uniqueItems\":true}",
         {"[]", "[\"a\"]", "[\"a\", \"c\"]", "[\"a\",\"b\",\"c\"]"}, {"[\"a\",\"a\"]", "[\"b\",\"a\"]", "[\"d\"]", "[\"a\",]"}},
        {"{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",\"c\"]},\"uniqueItems\":true,\"minItems\":2,\"maxItems\":2}",
         {"[\"a\",\"b\"]", "[\"b\",\"c\"]", "[\"a\",\"c\"]"}, {"[\"a\"]", "[\"a\",\"b\",\"c\"]", "[]"}},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"enum\":[1,\"x\",1.0,2]},\"uniqueItems\":true,\"minItems\":1}",
         {"[1]", "[1,2]", "[2]"}, {"[]", "[1,1]", "[\"x\"]", "[1.0]"}},
        {"{\"$defs\":{\"c\":{\"enum\":[\"r\",\"g\"]}},\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/c\"},\"uniqueItems\":true}",
         {"[\"r\",\"g\"]", "[\"g\"]"}, {"[\"g\",\"g\"]", "[\"g\",\"r\"]"}},
        /* propertyNames: maps whose keys follow a string schema */
        {"{\"type\":\"object\",\"propertyNames\":{\"pattern\":\"^[a-z]+$\"},\"additionalProperties\":{\"type\":\"integer\"}}",
         {"{}", "{\"ab\":1}", "{\"a\":1,\"b\":-2}"}, {"{\"A\":1}", "{\"a\":\"x\"}", "{\"a1\":1}", "{\"\":1}"}},
        {"{\"propertyNames\":{\"maxLength\":2,\"enum\":[\"x\",\"yz\",\"long\",3]}}", {"{\"x\":null,\"yz\":[1]}", "{}"},
         {"{\"long\":1}", "{\"q\":1}", "[]"}},
        {"{\"propertyNames\":{\"format\":\"email\"},\"additionalProperties\":{\"type\":\"boolean\"}}",
         {"{\"a@b.cd\":true}"}, {"{\"ab.cd\":true}", "{\"a@b.cd\":1}"}},
        /* without type, the keywords pick it; annotations and unknown keywords are ignored */
        {"{\"minLength\":2,\"title\":\"t\",\"x-vendor\":{\"pattern\":1}}", {"\"ab\""}, {"\"a\"", "\"\""}},
        {"{\"maximum\":5,\"maxItems\":1}", {"5", "-1.5", "[]", "[{}]"}, {"6", "[1,2]", "5.000001"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cJSON *js = cJSON_Parse(cases[i].schema);
        CHECK(js != NULL, "test schema %zu parses", i);
        tokd_err e = {{0}};
        tokd_grammar *g = tokd_grammar_from_json_schema(js, false, &e);
        CHECK(g != NULL, "schema %zu: %s", i, e.msg);
        for (int k = 0; g && k < 6 && cases[i].valid[k]; k++)
            CHECK(tokd_grammar_match(g, cases[i].valid[k], strlen(cases[i].valid[k])), "schema %zu accepts %s", i,
                  cases[i].valid[k]);
        for (int k = 0; g && k < 6 && cases[i].invalid[k]; k++)
            CHECK(!tokd_grammar_match(g, cases[i].invalid[k], strlen(cases[i].invalid[k])), "schema %zu rejects %s", i,
                  cases[i].invalid[k]);
        tokd_grammar_free(g);
        cJSON_Delete(js);
    }
    /* json_object mode */
    tokd_err e = {{0}};
    tokd_grammar *g = tokd_grammar_from_json_schema(NULL, true, &e);
    CHECK(g != NULL, "json_object grammar: %s", e.msg);
    const char *ok[] = {"{}", "{\"a\":[1,{\"b\":\"\\u1234\"}],\"c\":-0.5e+3}", "{ \"k\" : true }"};
    const char *bad[] = {"[]", "1", "{\"a\":}", "{'a':1}", "{\"a\":1}x"};
    for (int k = 0; k < 3; k++) CHECK(tokd_grammar_match(g, ok[k], strlen(ok[k])), "json_object accepts %s", ok[k]);
    for (int k = 0; k < 5; k++) CHECK(!tokd_grammar_match(g, bad[k], strlen(bad[k])), "json_object rejects %s", bad[k]);
    tokd_grammar_free(g);
    /* errors */
    const char *errs[][2] = {
        {"false", "matches nothing"},
        {"{\"type\":\"thing\"}", "unknown type 'thing'"},
        {"{\"$ref\":\"#/$defs/missing\"}", "cannot resolve $ref"},
        {"{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "maxItems below minItems"},
        {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "integer range is empty"},
        {"{\"type\":\"string\",\"maxLength\":-1}", "non-negative integer"},
        {"{\"enum\":[]}", "enum must be a non-empty array"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"k\"],\"additionalProperties\":false}",
         "required property 'k' is not among the properties"},
        {"{\"type\":\"array\",\"prefixItems\":[{},{}],\"items\":false,\"minItems\":3}", "minItems above the items allowed"},
        {"{\"type\":\"integer\",\"enum\":[\"x\",2.5]}", "no enum value satisfies"},
        {"{\"type\":\"string\",\"const\":\"abcd\",\"maxLength\":3}", "const value does not satisfy"},
        {"{\"const\":1,\"enum\":[2]}", "const value does not satisfy"},
        {"{\"type\":\"number\",\"minimum\":5,\"maximum\":1}", "number range is empty"},
        {"{\"type\":\"number\",\"minimum\":1,\"exclusiveMaximum\":1}", "number range is empty"},
        {"{\"type\":\"number\",\"minimum\":0.1234567}", "more than 6 decimals"},
        {"{\"type\":\"number\",\"exclusiveMinimum\":1e12}", "beyond 9 integer digits"},
        {"{\"type\":\"integer\",\"minimum\":1e20}", "above 15 digits"},
        {"{\"type\":\"string\",\"format\":\"idn-email\"}", "format 'idn-email' is not supported"},
        {"{\"type\":\"string\",\"format\":\"date\",\"maxLength\":5}", "minLength/maxLength with format 'date'"},
        {"{\"type\":\"integer\",\"multipleOf\":3}", "'multipleOf' is not supported"},
        {"{\"type\":\"array\",\"uniqueItems\":true}", "'uniqueItems' is supported only with maxItems 1 or for items of listed"},
        {"{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"uniqueItems\":true}", "items of listed values"},
        {"{\"items\":{\"enum\":[1,2,1.0]},\"uniqueItems\":true,\"minItems\":3}", "minItems above the 2 distinct values"},
        {"{\"prefixItems\":[{}],\"items\":{\"enum\":[1]},\"uniqueItems\":true}", "'uniqueItems' with prefixItems"},
        {"{\"type\":\"object\",\"minProperties\":1}", "'minProperties' is not supported"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{}},\"maxProperties\":0}", "'maxProperties' is not supported"},
        {"{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}", "'oneOf' is supported only"},
        {"{\"oneOf\":[{\"type\":\"object\"},{\"type\":\"object\",\"required\":[\"a\"]}]}", "'oneOf' is supported only"},
        {"{\"type\":\"string\",\"anyOf\":[{\"type\":\"integer\"}]}", "no alternative of 'anyOf' has a type allowed beside it"},
        {"{\"allOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "types beside and inside 'allOf' have none in common"},
        {"{\"type\":\"string\",\"anyOf\":[{\"format\":\"date\"}],\"format\":\"uuid\"}", "'format' both beside and inside 'anyOf'"},
        {"{\"properties\":{\"a\":{}},\"additionalProperties\":false,\"anyOf\":[{\"properties\":{\"b\":{}}}]}",
         "'properties' on both sides of 'anyOf' with 'additionalProperties'"},
        {"{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{}}},{\"additionalProperties\":false}]}",
         "'additionalProperties' and 'properties' in different schemas combined by 'allOf'"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"(?!x)\"}}}", "'pattern': groups '(?'"},
        {"{\"properties\":{\"a\":{}},\"propertyNames\":{\"pattern\":\"a\"}}", "'propertyNames' beside properties"},
        {"{\"type\":\"object\",\"propertyNames\":false}", "propertyNames must be a schema"},
    };
    for (size_t i = 0; i < sizeof errs / sizeof *errs; i++) {
        cJSON *js = cJSON_Parse(errs[i][0]);
        g = tokd_grammar_from_json_schema(js, false, &e);
        CHECK(g == NULL && strstr(e.msg, errs[i][1]), "schema %s: got '%s'", errs[i][0], g ? "(ok)" : e.msg);
        tokd_grammar_free(g);
        cJSON_Delete(js);
    }
    /* every keyword that constrains values and is not supported is refused by name */
    static const char *refused[] = {"not", "patternProperties", "dependentRequired",
                                    "dependentSchemas", "dependencies", "if", "then", "else", "contains", "minContains",
                                    "maxContains", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef",
                                    "$recursiveRef"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        char src[200], want[100];
        snprintf(src, sizeof src, "{\"type\":\"object\",\"properties\":{\"v\":{\"%s\":{}}}}", refused[i]);
        snprintf(want, sizeof want, "json schema: '%s' is not supported", refused[i]);
        cJSON *js = cJSON_Parse(src);
        g = tokd_grammar_from_json_schema(js, false, &e);
        CHECK(g == NULL && strstr(e.msg, want), "schema %s: got '%s'", src, g ? "(ok)" : e.msg);
        tokd_grammar_free(g);
        cJSON_Delete(js);
    }
    /* annotations are accepted */
    cJSON *js = cJSON_Parse("{\"$schema\":\"x\",\"$id\":\"y\",\"$comment\":\"c\",\"title\":\"t\",\"description\":\"d\","
                            "\"default\":1,\"examples\":[1],\"deprecated\":false,\"readOnly\":true,\"writeOnly\":false,"
                            "\"contentMediaType\":\"text/plain\",\"contentEncoding\":\"base64\",\"type\":\"integer\"}");
    g = tokd_grammar_from_json_schema(js, false, &e);
    CHECK(g && tokd_grammar_match(g, "12", 2), "annotations are ignored: %s", g ? "" : e.msg);
    tokd_grammar_free(g);
    cJSON_Delete(js);
}

/* Number bounds against exact arithmetic: every x = k/1000 in [-3, 3], written with 3
 * decimals and in its shortest form, is accepted exactly when it lies in the range. */
/* Under AddressSanitizer each grammar match and each generated token costs several times
 * more, and these two tests took a minute of CI's sanitised stage (number bounds 22 s,
 * 120,000 matches; acceptance 38 s). There the bounds test tries every 16th value and
 * every value within 3 of a bound or of 0, and acceptance runs 25 generations a schema;
 * the plain build tries every value and runs 100. The sanitised run looks for memory
 * errors, which show on the first paths through the code as much as on the thousandth. */
#if defined(__SANITIZE_ADDRESS__)
#define BOUNDS_STRIDE 16
#define ACCEPT_RUNS 25
#else
#define BOUNDS_STRIDE 1
#define ACCEPT_RUNS 100
#endif

/* |k - bound| <= 3 for a bound that is set (INT32_MIN/MAX: none) */
static bool near_bound(int k, int bound) {
    return bound != INT32_MIN && bound != INT32_MAX && abs(k - bound) <= 3;
}

static void test_number_bounds(void) {
    static const struct {
        int lo, hi; /* thousandths; INT32_MIN/MAX: none */
        bool lo_x, hi_x;
    } cases[] = {
        {-1500, 2250, false, false}, {500, 750, false, false}, {0, 1000, true, true},     {-2001, -1999, false, true},
        {-125, 0, true, false},      {-3, 7, true, true},      {1250, INT32_MAX, true, false}, {INT32_MIN, -2500, false, true},
        {0, 0, false, false},        {999, 1001, true, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char src[200] = "{\"type\":\"number\"";
        if (cases[i].lo != INT32_MIN)
            snprintf(src + strlen(src), sizeof src - strlen(src), ",\"%s\":%g", cases[i].lo_x ? "exclusiveMinimum" : "minimum",
                     cases[i].lo / 1000.0);
        if (cases[i].hi != INT32_MAX)
            snprintf(src + strlen(src), sizeof src - strlen(src), ",\"%s\":%g", cases[i].hi_x ? "exclusiveMaximum" : "maximum",
                     cases[i].hi / 1000.0);
        strcat(src, "}");
        cJSON *js = cJSON_Parse(src);
        tokd_err e = {{0}};
        tokd_grammar *g = tokd_grammar_from_json_schema(js, false, &e);
        CHECK(g != NULL, "%s: %s", src, e.msg);
        int wrong = 0;
        for (int k = -3000; g && k <= 3000; k++) {
            if (k % BOUNDS_STRIDE && abs(k) > 3 && !near_bound(k, cases[i].lo) && !near_bound(k, cases[i].hi)) continue;
            bool in = (cases[i].lo == INT32_MIN || (cases[i].lo_x ? k > cases[i].lo : k >= cases[i].lo)) &&
                      (cases[i].hi == INT32_MAX || (cases[i].hi_x ? k < cases[i].hi : k <= cases[i].hi));
            char t[2][32];
            snprintf(t[0], sizeof t[0], "%s%d.%03d", k < 0 ? "-" : "", abs(k) / 1000, abs(k) % 1000);
            snprintf(t[1], sizeof t[1], "%g", k / 1000.0);
            for (int f = 0; f < 2; f++)
                if (tokd_grammar_match(g, t[f], strlen(t[f])) != in && wrong++ < 3)
                    CHECK(0, "%s on %s: want %d", src, t[f], in);
        }
        CHECK(wrong == 0, "%s: %d texts judged wrongly", src, wrong);
        tokd_grammar_free(g);
        cJSON_Delete(js);
    }
}

/* ---- the mask against brute force ----------------------------------------------------------- */

static tokd_tokenizer *load_tok(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", t_shared(), name);
    tokd_err e;
    gguf_file *f = gguf_open(path, &e);
    if (!f) return NULL;
    tokd_tokenizer *t = tokd_tokenizer_load(f, &e);
    gguf_close(f);
    return t;
}

static void test_mask(const char *vocab, const char *grammar, const char *const *prefixes, int n_prefixes) {
    tokd_tokenizer *tok = load_tok(vocab);
    CHECK(tok != NULL, "load %s", vocab);
    if (!tok) return;
    tokd_grammar *g = parse(grammar);
    tokd_grammar_vocab *v = tokd_grammar_vocab_new(tok);
    tokd_grammar_state *s = tokd_grammar_state_new(g, v), *b = tokd_grammar_state_new(g, v);
    int32_t V = tokd_tokenizer_n_vocab(tok);
    float *logits = malloc(sizeof(float) * (size_t)V);
    for (int p = 0; p < n_prefixes; p++) {
        tokd_grammar_state_reset(s);
        CHECK(tokd_grammar_accept_bytes(s, prefixes[p], strlen(prefixes[p])) == 0, "prefix %s", prefixes[p]);
        for (int32_t i = 0; i < V; i++) logits[i] = 0;
        tokd_grammar_mask(s, logits, V);
        int mismatches = 0, n_allowed = 0;
        for (int32_t i = 0; i < V; i++) {
            tokd_grammar_state_reset(b);
            tokd_grammar_accept_bytes(b, prefixes[p], strlen(prefixes[p]));
            bool want = tokd_grammar_accept(b, i) == 0;
            bool got = logits[i] == 0;
            n_allowed += got;
            if (want != got && mismatches++ < 5) {
                char piece[64];
                size_t n = tokd_token_piece(tok, i, false, piece, sizeof piece - 1);
                piece[n < sizeof piece ? n : sizeof piece - 1] = 0;
                CHECK(0, "%s prefix '%s' token %d '%s': mask %d, accept %d", vocab, prefixes[p], i, piece, got, want);
            }
        }
        CHECK(mismatches == 0, "%s prefix '%s': %d mismatches", vocab, prefixes[p], mismatches);
        CHECK(n_allowed > 0, "%s prefix '%s': something allowed", vocab, prefixes[p]);
    }
    free(logits);
    tokd_grammar_state_free(s);
    tokd_grammar_state_free(b);
    tokd_grammar_vocab_free(v);
    tokd_grammar_free(g);
    tokd_tokenizer_free(tok);
}

/* ---- a small validator for the features the acceptance schemas use ----------------------- */

static size_t utf8_len(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static bool validate(const cJSON *v, const cJSON *sc, const cJSON *root) {
    const cJSON *k;
    if ((k = cJSON_GetObjectItem(sc, "$ref"))) {
        const char *name = strrchr(k->valuestring, '/') + 1;
        return validate(v, cJSON_GetObjectItem(cJSON_GetObjectItem(root, "$defs"), name), root);
    }
    if ((k = cJSON_GetObjectItem(sc, "enum"))) { /* then the other keywords too */
        bool found = false;
        for (const cJSON *e = k->child; e; e = e->next) found |= cJSON_Compare(v, e, true);
        if (!found) return false;
    }
    if ((k = cJSON_GetObjectItem(sc, "anyOf"))) {
        for (const cJSON *e = k->child; e; e = e->next)
            if (validate(v, e, root)) return true;
        return false;
    }
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(sc, "type"));
    if (!type) return true;
    if (!strcmp(type, "null")) return cJSON_IsNull(v);
    if (!strcmp(type, "boolean")) return cJSON_IsBool(v);
    if (!strcmp(type, "number") || !strcmp(type, "integer")) {
        if (!cJSON_IsNumber(v)) return false;
        double d = v->valuedouble;
        if (!strcmp(type, "integer") && d != floor(d)) return false;
        if ((k = cJSON_GetObjectItem(sc, "minimum")) && d < k->valuedouble) return false;
        if ((k = cJSON_GetObjectItem(sc, "maximum")) && d > k->valuedouble) return false;
        if ((k = cJSON_GetObjectItem(sc, "exclusiveMaximum")) && d >= k->valuedouble) return false;
        return true;
    }
    if (!strcmp(type, "string")) {
        if (!cJSON_IsString(v)) return false;
        size_t n = utf8_len(v->valuestring);
        if ((k = cJSON_GetObjectItem(sc, "minLength")) && n < (size_t)k->valuedouble) return false;
        if ((k = cJSON_GetObjectItem(sc, "maxLength")) && n > (size_t)k->valuedouble) return false;
        return true;
    }
    if (!strcmp(type, "array")) {
        if (!cJSON_IsArray(v)) return false;
        int n = cJSON_GetArraySize(v);
        if ((k = cJSON_GetObjectItem(sc, "minItems")) && n < k->valuedouble) return false;
        if ((k = cJSON_GetObjectItem(sc, "maxItems")) && n > k->valuedouble) return false;
        const cJSON *items = cJSON_GetObjectItem(sc, "items"), *prefix = cJSON_GetObjectItem(sc, "prefixItems");
        const cJSON *p = prefix ? prefix->child : NULL;
        for (const cJSON *e = v->child; e; e = e->next, p = p ? p->next : NULL)
            if ((p || items) && !validate(e, p ? p : items, root)) return false;
        return true;
    }
    if (!strcmp(type, "object")) {
        if (!cJSON_IsObject(v)) return false;
        const cJSON *props = cJSON_GetObjectItem(sc, "properties");
        for (const cJSON *r = cJSON_GetObjectItem(sc, "required") ? cJSON_GetObjectItem(sc, "required")->child : NULL; r;
             r = r->next)
            if (!cJSON_GetObjectItemCaseSensitive(v, r->valuestring)) return false;
        for (const cJSON *e = v->child; e; e = e->next) {
            const cJSON *ps = cJSON_GetObjectItemCaseSensitive(props, e->string);
            if (!ps) ps = cJSON_GetObjectItem(sc, "additionalProperties"); /* a schema, or absent: false */
            if (!ps) return false;
            if (!validate(e, ps, root)) return false;
        }
        return true;
    }
    return false;
}

/* ---- acceptance: random-weight models under schemas --------------------------------------- */

static const char *SCHEMAS[] = {
    /* 1: object with required fields, strings with escapes, integers with bounds, booleans */
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"maxLength\":12},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
    "\"admin\":{\"type\":\"boolean\"},"
    "\"note\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":6}},"
    "\"required\":[\"name\",\"age\",\"admin\"]}",
    /* 2: arrays, numbers, null */
    "{\"type\":\"object\",\"properties\":{"
    "\"values\":{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":1,\"maxItems\":4},"
    "\"empty\":{\"type\":\"null\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":5},\"maxItems\":3}},"
    "\"required\":[\"values\",\"empty\"]}",
    /* 3: enums and anyOf at the top level */
    "{\"anyOf\":[{\"enum\":[\"red\",\"green\",\"blue\",7,null,true]},"
    "{\"type\":\"object\",\"properties\":{\"color\":{\"enum\":[\"cyan\",\"magenta\"]},"
    "\"level\":{\"type\":\"integer\",\"minimum\":-3,\"maximum\":3}},\"required\":[\"color\",\"level\"]}]}",
    /* 4: nesting with $ref */
    "{\"type\":\"object\",\"$defs\":{\"point\":{\"type\":\"object\",\"properties\":"
    "{\"x\":{\"type\":\"integer\",\"minimum\":-100,\"maximum\":100},\"y\":{\"type\":\"integer\",\"minimum\":-100,\"maximum\":100}},"
    "\"required\":[\"x\",\"y\"]}},\"properties\":{"
    "\"start\":{\"$ref\":\"#/$defs/point\"},"
    "\"path\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/point\"},\"maxItems\":3},"
    "\"meta\":{\"type\":\"object\",\"properties\":{\"label\":{\"type\":\"string\",\"maxLength\":8},"
    "\"ok\":{\"type\":\"boolean\"}},\"required\":[\"ok\"]}},"
    "\"required\":[\"start\",\"path\",\"meta\"]}",
    /* 5: a top-level array of small records */
    "{\"type\":\"array\",\"minItems\":2,\"maxItems\":3,\"items\":{\"type\":\"object\",\"properties\":{"
    "\"id\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":999},"
    "\"kind\":{\"enum\":[\"a\",\"b\"]},"
    "\"score\":{\"type\":\"number\"},"
    "\"text\":{\"type\":[\"string\",\"null\"],\"maxLength\":4}},"
    "\"required\":[\"id\",\"kind\"]}}",
    /* 6: a required key outside properties, exact number bounds, enum under a type, prefixItems
     * under maxItems */
    "{\"type\":\"object\",\"properties\":{"
    "\"t\":{\"type\":\"number\",\"minimum\":-1.5,\"exclusiveMaximum\":2.25},"
    "\"k\":{\"type\":\"integer\",\"enum\":[1,\"x\",2.5,3]},"
    "\"p\":{\"type\":\"array\",\"prefixItems\":[{\"type\":\"boolean\"},{\"type\":\"null\"}],\"maxItems\":1}},"
    "\"required\":[\"t\",\"k\",\"extra\"],\"additionalProperties\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9}}",
};


static void test_acceptance(const char *model_name, int n_runs, int n_object_runs) {
    t_gen gen;
    if (!t_gen_open(&gen, model_name)) return;
    tokd_err e = {{0}};
    const tokd_model *m = gen.m;
    int n_schemas = (int)(sizeof SCHEMAS / sizeof *SCHEMAS);
    long total_tokens = 0;
    for (int si = 0; si <= n_schemas; si++) {
        bool any = si == n_schemas;
        cJSON *schema = any ? NULL : cJSON_Parse(SCHEMAS[si]);
        tokd_grammar *g = tokd_grammar_from_json_schema(schema, any, &e);
        CHECK(g != NULL, "schema %d: %s", si, e.msg);
        if (!g) continue;
        tokd_grammar_state *s = tokd_grammar_state_new(g, gen.v);
        int fails = 0, runs = any ? n_object_runs : n_runs;
        /* json_object mode (and schema 6's extra keys) bound no string: a random model closes
         * one with a chance of about 1 in 400 per token. A bias towards tokens with '"', '}' or
         * ']' shortens the outputs (a real model closes its strings); validity still rests on
         * the grammar alone. */
        bool biased = any || si == 5;
        tokd_logit_bias *bias = malloc(sizeof *bias * (size_t)m->hp.n_vocab);
        int32_t n_bias = 0;
        for (int32_t t = 0; biased && t < m->hp.n_vocab; t++) {
            char piece[64];
            size_t n = tokd_token_piece(m->tok, t, false, piece, sizeof piece);
            if (n && n <= sizeof piece && (memchr(piece, '"', n) || memchr(piece, '}', n) || memchr(piece, ']', n)))
                bias[n_bias++] = (tokd_logit_bias){t, 5.0f};
        }
        for (int run = 0; run < runs; run++) {
            tokd_buf out = {0};
            tokd_gen_stats st;
            int rc = t_gen_run(&gen, s, 1000u + (uint64_t)run, bias, n_bias, 900, &out, &st);
            total_tokens += st.n_gen;
            const char *text = out.data ? out.data : "";
            cJSON *doc = rc ? NULL : cJSON_ParseWithOpts(text, NULL, true);
            bool ok = doc && st.finish == TOKD_FINISH_EOG && (any ? cJSON_IsObject(doc) : validate(doc, schema, schema));
            if (!ok && fails++ < 3)
                CHECK(0, "%s schema %d seed %d: rc %d finish %s, invalid output (%zu bytes): %.300s", model_name, si, run, rc,
                      tokd_finish_name(st.finish), out.len, text);
            cJSON_Delete(doc);
            tokd_buf_free(&out);
        }
        CHECK(fails == 0, "%s schema %d: %d of %d outputs invalid", model_name, si, fails, runs);
        free(bias);
        tokd_grammar_state_free(s);
        tokd_grammar_free(g);
        cJSON_Delete(schema);
    }
    fprintf(stderr, "%s: %ld tokens generated under grammars\n", model_name, total_tokens);
    t_gen_close(&gen);
}

/* A mask call's work budget (tokd_grammar_state_set_work_budget): with any-JSON on the
 * llama-spm vocabulary, a budget one item below a mask's work fails the state (only
 * end-of-generation tokens allowed, as at the other bounds) and one at it does not (the
 * generations of test_acceptance run under the default); and the ambiguous grammar
 * libFuzzer found, whose masks' work grows with every space read, stays within the
 * default budget, failing past it. */
static int n_allowed(const float *logits, int32_t V) {
    int n = 0;
    for (int32_t i = 0; i < V; i++) n += logits[i] == 0;
    return n;
}

static void test_mask_budget(void) {
    tokd_tokenizer *tok = load_tok("vocab/ggml-vocab-llama-spm.gguf");
    CHECK(tok != NULL, "load llama-spm");
    if (!tok) return;
    char *any = tokd_json_schema_to_gbnf(NULL, true, NULL);
    tokd_grammar *g = parse(any);
    tokd_grammar_vocab *v = tokd_grammar_vocab_new(tok);
    tokd_grammar_state *s = tokd_grammar_state_new(g, v);
    const int32_t V = tokd_tokenizer_n_vocab(tok);
    float *logits = calloc((size_t)V, sizeof *logits);
    tokd_grammar_state_reset(s);
    tokd_grammar_accept_bytes(s, "{\"", 2);
    tokd_grammar_mask(s, logits, V);
    const int64_t work = tokd_grammar_mask_work(s);
    const int allowed = n_allowed(logits, V);
    CHECK(!tokd_grammar_failed(s) && work > 100 && work < TOKD_GRAMMAR_MASK_WORK / 100 && allowed > 100,
          "a mask within the default budget: work %lld, %d allowed", (long long)work, allowed);
    for (int below = 0; below < 2; below++) {
        tokd_grammar_state_set_work_budget(s, work - below);
        tokd_grammar_state_reset(s);
        tokd_grammar_accept_bytes(s, "{\"", 2);
        for (int32_t i = 0; i < V; i++) logits[i] = 0;
        tokd_grammar_mask(s, logits, V);
        bool only_eog = true;
        for (int32_t i = 0; i < V; i++)
            if (logits[i] == 0) only_eog &= tokd_token_is_eog(tok, i);
        if (below)
            CHECK(tokd_grammar_failed(s) && only_eog && tokd_grammar_accept(s, 300) != 0,
                  "a budget one below its work fails the state: only end-of-generation allowed");
        else
            CHECK(!tokd_grammar_failed(s) && n_allowed(logits, V) == allowed && tokd_grammar_mask_work(s) == work,
                  "a budget equal to its work: the same mask");
    }
    tokd_grammar_state_free(s);
    tokd_grammar_free(g);
    free(any);
    /* the grammar libFuzzer found: each space read widens what a mask must explore */
    const char *amb = "root ::= ([a-zrOot ::(-az= []+ | \" \" root \"0\"){1,4} .? [^\\x001]*";
    g = parse(amb);
    s = tokd_grammar_state_new(g, v);
    int64_t last = 0;
    bool grew = true;
    for (int n = 0; n <= 6; n++) {
        tokd_grammar_state_reset(s);
        CHECK(tokd_grammar_accept_bytes(s, "      ", (size_t)n) == 0, "%d spaces accepted", n);
        tokd_grammar_mask(s, logits, V);
        if (n >= 3) grew &= tokd_grammar_mask_work(s) > last;
        last = tokd_grammar_mask_work(s);
    }
    CHECK(grew && last > 100000 && last <= TOKD_GRAMMAR_MASK_WORK + 4096,
          "the ambiguous grammar's masks grow with each space (%lld at 6) and stay within the budget", (long long)last);
    tokd_grammar_state_free(s);
    tokd_grammar_free(g);
    free(logits);
    tokd_grammar_vocab_free(v);
    tokd_tokenizer_free(tok);
}

int main(void) {
    test_errors();
    test_matcher();
    test_schema();
    test_number_bounds();
    const char *json_prefixes[] = {"", "{", "{\"name\": \"Al", "{\"name\":\"x\\", "{\"name\":\"\xc3", "{\"name\":\"a\",\"age\":1",
                                   "{\"name\":\"a\",\"age\":12,\"admin\":true"};
    cJSON *js = cJSON_Parse(SCHEMAS[0]);
    char *gbnf = tokd_json_schema_to_gbnf(js, false, NULL);
    cJSON_Delete(js);
    test_mask("models/tiny-llama-f32.gguf", gbnf, json_prefixes, 7);
    test_mask("vocab/ggml-vocab-llama-spm.gguf", gbnf, json_prefixes, 4);
    const char *any_prefixes[] = {"", "{\"", "{\"k\": [1, {\"a\": \"\xe4\xb8", "{\"k\": 1.5e"};
    char *any = tokd_json_schema_to_gbnf(NULL, true, NULL);
    test_mask("vocab/ggml-vocab-gpt-2.gguf", any, any_prefixes, 4);
    const char *uni_prefixes[] = {"", "\xce", "\xce\xb1"};
    test_mask("vocab/ggml-vocab-llama-spm.gguf", "root ::= [\xce\xb1-\xcf\x89 ]+", uni_prefixes, 3);
    free(gbnf);
    free(any);
    test_mask_budget();
    test_acceptance("tiny-llama-f32.gguf", ACCEPT_RUNS, ACCEPT_RUNS);
    T_DONE();
}
