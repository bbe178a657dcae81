/* test_toolcall.c — the tool-call parser (src/chat/toolcall.c).
 *
 * Every case is checked three ways: all at once against the expected content and calls
 * (arguments compared as parsed JSON), then streamed split in two at every byte position and
 * byte by byte (and in seeded random pieces), which must give exactly the one-shot result.
 * Also: holdback of partial markers, ids, detection from the shared templates, the OpenAI
 * JSON shapes. */
#include <stdint.h>
#include <string.h>

#include "chat/toolcall.h"
#include "t.h"

typedef struct want {
    const char *name, *args; /* args: JSON text, compared parsed */
} want;

static bool json_equal(const char *a, const char *b) {
    cJSON *x = cJSON_Parse(a), *y = cJSON_Parse(b);
    bool eq = x && y && cJSON_Compare(x, y, 1);
    cJSON_Delete(x);
    cJSON_Delete(y);
    return eq;
}

static bool id_ok(const char *id, tokd_toolcall_format fmt) {
    size_t pre = fmt == TOKD_TOOLCALL_MISTRAL ? 0 : 5, n = fmt == TOKD_TOOLCALL_MISTRAL ? 9 : 24;
    if (strlen(id) != pre + n || (pre && strncmp(id, "call_", 5) != 0)) return false;
    for (size_t i = pre; i < pre + n; i++)
        if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') || (id[i] >= '0' && id[i] <= '9')))
            return false;
    return true;
}

/* Streamed result, accumulated from the events. */
typedef struct streamed {
    tokd_buf content;
    tokd_toolcall_call calls[16];
    char *owned[32];
    size_t n_calls, n_owned;
    bool order_ok, finish_said;
} streamed;

static void collect(streamed *s, const tokd_toolcall_events *ev) {
    if (ev->content.len) tokd_buf_append(&s->content, ev->content.data, ev->content.len);
    if (ev->n_calls && ev->first_index != s->n_calls) s->order_ok = false;
    for (size_t i = 0; i < ev->n_calls && s->n_calls < 16; i++) {
        tokd_toolcall_call *c = &s->calls[s->n_calls++];
        memcpy(c->id, ev->calls[i].id, sizeof c->id);
        c->name = s->owned[s->n_owned++] = tokd_xstrdup(ev->calls[i].name);
        c->arguments = s->owned[s->n_owned++] = tokd_xstrdup(ev->calls[i].arguments);
    }
}

static void streamed_free(streamed *s) {
    for (size_t i = 0; i < s->n_owned; i++) free(s->owned[i]);
    tokd_buf_free(&s->content);
}

/* Feed text in pieces ending at cuts[0..n_cuts) (increasing), then the rest. */
static void stream(tokd_toolcall_format fmt, const char *text, const size_t *cuts, size_t n_cuts, streamed *s) {
    memset(s, 0, sizeof *s);
    s->order_ok = true;
    tokd_toolcall_parser *p = tokd_toolcall_parser_new(fmt, 42);
    tokd_toolcall_events ev = {0};
    size_t at = 0, len = strlen(text);
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : len;
        tokd_toolcall_push(p, text + at, end - at, &ev);
        collect(s, &ev);
        at = end;
    }
    s->finish_said = tokd_toolcall_finish(p, &ev);
    collect(s, &ev);
    tokd_toolcall_events_free(&ev);
    tokd_toolcall_parser_free(p);
}

static bool same_as(const streamed *s, const tokd_toolcall_result *r) {
    if (s->content.len != r->content.len || memcmp(s->content.data ? s->content.data : "", r->content.data ? r->content.data : "", r->content.len))
        return false;
    if (s->n_calls != r->n_calls || !s->order_ok || s->finish_said != (r->n_calls > 0)) return false;
    for (size_t i = 0; i < r->n_calls; i++)
        if (strcmp(s->calls[i].id, r->calls[i].id) || strcmp(s->calls[i].name, r->calls[i].name) ||
            strcmp(s->calls[i].arguments, r->calls[i].arguments))
            return false;
    return true;
}

/* Streaming at every split must equal the one-shot result; returns the number of mismatches. */
static int check_splits(tokd_toolcall_format fmt, const char *text, const tokd_toolcall_result *r) {
    size_t len = strlen(text);
    int bad = 0;
    streamed s;
    for (size_t k = 0; k <= len; k++) {
        stream(fmt, text, &k, 1, &s);
        if (!same_as(&s, r)) {
            if (!bad) fprintf(stderr, "  split at %zu gives content [%s], %zu calls\n", k, s.content.data ? s.content.data : "", s.n_calls);
            bad++;
        }
        streamed_free(&s);
    }
    size_t *cuts = tokd_xmalloc((len + 1) * sizeof *cuts);
    for (size_t k = 0; k < len; k++) cuts[k] = k + 1;
    stream(fmt, text, cuts, len, &s);
    if (!same_as(&s, r)) {
        fprintf(stderr, "  byte by byte gives content [%s], %zu calls\n", s.content.data ? s.content.data : "", s.n_calls);
        bad++;
    }
    streamed_free(&s);
    uint64_t x = 12345;
    for (int round = 0; round < 20; round++) {
        size_t n = 0;
        for (size_t k = 1; k < len; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            if ((x >> 60) < 4) cuts[n++] = k;
        }
        stream(fmt, text, cuts, n, &s);
        if (!same_as(&s, r)) bad++;
        streamed_free(&s);
    }
    free(cuts);
    return bad;
}

static void check_case(const char *label, tokd_toolcall_format fmt, const char *text, const char *content,
                       const want *calls, size_t n_calls) {
    tokd_toolcall_result r;
    tokd_toolcall_parse(fmt, 42, text, strlen(text), &r);
    const char *got = r.content.data ? r.content.data : "";
    CHECK(strcmp(got, content) == 0, "%s: content [%s], want [%s]", label, got, content);
    CHECK(r.n_calls == n_calls, "%s: %zu calls, want %zu", label, r.n_calls, n_calls);
    for (size_t i = 0; i < r.n_calls && i < n_calls; i++) {
        CHECK(strcmp(r.calls[i].name, calls[i].name) == 0, "%s: call %zu name %s", label, i, r.calls[i].name);
        CHECK(json_equal(r.calls[i].arguments, calls[i].args), "%s: call %zu arguments %s, want %s", label, i,
              r.calls[i].arguments, calls[i].args);
        CHECK(id_ok(r.calls[i].id, fmt), "%s: call %zu id %s", label, i, r.calls[i].id);
        for (size_t j = 0; j < i; j++) CHECK(strcmp(r.calls[i].id, r.calls[j].id) != 0, "%s: ids repeat", label);
    }
    int bad = check_splits(fmt, text, &r);
    CHECK(bad == 0, "%s: %d streamed splits differ from one-shot", label, bad);
    tokd_toolcall_result_free(&r);
}

#define CASE(label, fmt, text, content, ...)                                                   \
    do {                                                                                       \
        const want w_[] = {__VA_ARGS__};                                                       \
        check_case(label, fmt, text, content, w_, sizeof w_ / sizeof w_[0] - 1);               \
    } while (0)
#define END {NULL, NULL}

/* Arguments with nesting, unicode and escaped quotes, as the models would write them. */
#define HARD_ARGS "{\"q\": \"say \\\"hi\\\" \\\\ }{ ][ <tool_call> [TOOL_CALLS] <|python_tag|>\", \"u\": \"caf\xc3\xa9 \xf0\x9f\xa6\x99 \\u00e9\", \"n\": {\"a\": [1, 2.5, {\"b\": null}], \"t\": true}}"
#define HARD_ARGS_WANT "{\"q\":\"say \\\"hi\\\" \\\\ }{ ][ <tool_call> [TOOL_CALLS] <|python_tag|>\",\"u\":\"caf\xc3\xa9 \xf0\x9f\xa6\x99 \xc3\xa9\",\"n\":{\"a\":[1,2.5,{\"b\":null}],\"t\":true}}"

static void test_hermes(void) {
    tokd_toolcall_format F = TOKD_TOOLCALL_HERMES;
    CASE("hermes single", F, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "",
         {"get_weather", "{\"city\":\"Paris\"}"}, END);
    CASE("hermes several", F,
         "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", "
         "\"arguments\": {}}\n</tool_call>",
         "", {"a", "{\"x\":1}"}, {"b", "{}"}, END);
    CASE("hermes content around", F,
         "Let me check.\n<tool_call>{\"name\": \"f\", \"arguments\": {\"k\": \"v\"}}</tool_call>\nDone.",
         "Let me check.\nDone.", {"f", "{\"k\":\"v\"}"}, END);
    CASE("hermes trailing ws", F, "  Hi\n\n<tool_call>{\"name\": \"f\"}</tool_call>\n\n", "  Hi", {"f", "{}"}, END);
    CASE("hermes hard args", F, "<tool_call>{\"name\": \"s\", \"arguments\": " HARD_ARGS "}</tool_call>", "",
         {"s", HARD_ARGS_WANT}, END);
    CASE("hermes parameters + string args", F,
         "<tool_call>{\"name\": \"p\", \"parameters\": {\"z\": [1]}}</tool_call><tool_call>{\"name\": \"q\", "
         "\"arguments\": \"{\\\"y\\\": 2}\"}</tool_call>",
         "", {"p", "{\"z\":[1]}"}, {"q", "{\"y\": 2}"}, END);
    CASE("hermes array in block", F, "<tool_call>[{\"name\": \"a\"}, {\"name\": \"b\", \"arguments\": {\"c\": 1}}]</tool_call>",
         "", {"a", "{}"}, {"b", "{\"c\":1}"}, END);
    CASE("hermes malformed json", F, "x <tool_call>{\"name\": \"f\", \"arguments\": {</tool_call> y",
         "x <tool_call>{\"name\": \"f\", \"arguments\": {</tool_call> y", END);
    CASE("hermes no name", F, "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>", END);
    CASE("hermes bad then good", F,
         "<tool_call>nope</tool_call>\n<tool_call>{\"name\": \"g\"}</tool_call>", "<tool_call>nope</tool_call>",
         {"g", "{}"}, END);
    CASE("hermes unterminated valid", F, "ok <tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}", "ok",
         {"f", "{\"a\":1}"}, END);
    CASE("hermes unterminated invalid", F, "ok <tool_call>{\"name\": \"f\", \"argu", "ok <tool_call>{\"name\": \"f\", \"argu", END);
    CASE("hermes lone partial marker", F, "a <tool_ca", "a <tool_ca", END);
    CASE("hermes similar tag", F, "<tool_response>x</tool_response> <tool", "<tool_response>x</tool_response> <tool", END);
    CASE("hermes plain", F, "Just text, no calls.\n", "Just text, no calls.\n", END);
    CASE("hermes empty", F, "", "", END);
}

static void test_phi4_nemotron(void) {
    CASE("phi4", TOKD_TOOLCALL_PHI4, "Sure.<|tool_call|>{\"name\": \"foo\", \"arguments\": {\"a\": 1}}<|/tool_call|>",
         "Sure.", {"foo", "{\"a\":1}"}, END);
    CASE("nemotron", TOKD_TOOLCALL_NEMOTRON,
         "<TOOLCALL>[{\"name\": \"a\", \"arguments\": {\"x\": \"\xc3\xbc\"}}, {\"name\": \"b\", \"arguments\": {}}]</TOOLCALL>",
         "", {"a", "{\"x\":\"\xc3\xbc\"}"}, {"b", "{}"}, END);
    CASE("nemotron malformed", TOKD_TOOLCALL_NEMOTRON, "<TOOLCALL>[{\"name\": 3}]</TOOLCALL>", "<TOOLCALL>[{\"name\": 3}]</TOOLCALL>", END);
}

static void test_llama3(void) {
    tokd_toolcall_format F = TOKD_TOOLCALL_LLAMA3;
    CASE("llama single", F, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "",
         {"get_weather", "{\"city\":\"Paris\"}"}, END);
    CASE("llama leading ws", F, "\n\n {\"name\": \"f\", \"parameters\": {}}", "", {"f", "{}"}, END);
    CASE("llama python_tag", F, "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": \"b\"}}", "", {"f", "{\"a\":\"b\"}"}, END);
    CASE("llama several", F,
         "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"x\": 1}}; {\"name\": \"b\", \"parameters\": {\"y\": [2]}};{\"name\": \"c\", \"parameters\": {}}",
         "", {"a", "{\"x\":1}"}, {"b", "{\"y\":[2]}"}, {"c", "{}"}, END);
    CASE("llama content before tag", F, "Checking.<|python_tag|>{\"name\": \"a\", \"parameters\": {}}", "Checking.", {"a", "{}"}, END);
    CASE("llama content after", F, "{\"name\": \"a\", \"parameters\": {}} then text", "then text", {"a", "{}"}, END);
    CASE("llama hard args", F, "{\"name\": \"s\", \"parameters\": " HARD_ARGS "}", "", {"s", HARD_ARGS_WANT}, END);
    CASE("llama json answer", F, "{\"answer\": 42}", "{\"answer\": 42}", END);
    CASE("llama brace in text", F, "The set {1, 2} is small.", "The set {1, 2} is small.", END);
    CASE("llama brace later", F, "Text {\"name\": \"a\", \"parameters\": {}}", "Text {\"name\": \"a\", \"parameters\": {}}", END);
    CASE("llama unterminated", F, "{\"name\": \"a\", \"parameters\": {\"x\": 1}", "{\"name\": \"a\", \"parameters\": {\"x\": 1}", END);
    CASE("llama tag then text", F, "<|python_tag|>print(1)", "<|python_tag|>print(1)", END);
    CASE("llama malformed", F, "{\"name\": \"a\", \"parameters\": {\"x\": tru}}", "{\"name\": \"a\", \"parameters\": {\"x\": tru}}", END);
}

static void test_mistral(void) {
    tokd_toolcall_format F = TOKD_TOOLCALL_MISTRAL;
    CASE("mistral array", F, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]", "",
         {"get_weather", "{\"city\":\"Paris\"}"}, END);
    CASE("mistral several + space", F,
         "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"x\": 1}, \"id\": \"abcdefghi\"}, {\"name\": \"b\", \"arguments\": " HARD_ARGS "}]",
         "", {"a", "{\"x\":1}"}, {"b", HARD_ARGS_WANT}, END);
    CASE("mistral content before", F, "Let me see. [TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}]", "Let me see.", {"a", "{}"}, END);
    CASE("mistral args form", F, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}", "", {"get_weather", "{\"city\":\"Paris\"}"}, END);
    CASE("mistral args form several", F,
         "[TOOL_CALLS]a[ARGS]{\"x\": {\"y\": \"}\"}}[TOOL_CALLS]b_2[CALL_ID]abc123XYZ[ARGS]{}", "",
         {"a", "{\"x\":{\"y\":\"}\"}}"}, {"b_2", "{}"}, END);
    CASE("mistral malformed array", F, "[TOOL_CALLS][{\"name\": }] tail", "[TOOL_CALLS][{\"name\": }] tail", END);
    CASE("mistral bad head", F, "[TOOL_CALLS] what? [ARGS]", "[TOOL_CALLS] what? [ARGS]", END);
    CASE("mistral args not object", F, "[TOOL_CALLS]f[ARGS][1]x", "[TOOL_CALLS]f[ARGS][1]x", END);
    CASE("mistral unterminated", F, "[TOOL_CALLS]f[ARGS]{\"a\": ", "[TOOL_CALLS]f[ARGS]{\"a\": ", END);
}

static void test_others(void) {
    CASE("functionary", TOKD_TOOLCALL_FUNCTIONARY,
         "Ok <function=get_weather>{\"city\": \"Paris\"}</function><function=b>{}</function>", "Ok",
         {"get_weather", "{\"city\":\"Paris\"}"}, {"b", "{}"}, END);
    CASE("functionary bad name", TOKD_TOOLCALL_FUNCTIONARY, "<function=a b>{}</function>", "<function=a b>{}</function>", END);
#define B "<\xef\xbd\x9ctool\xe2\x96\x81"
    CASE("deepseek r1", TOKD_TOOLCALL_DEEPSEEK,
         "Sure." B "calls\xe2\x96\x81" "begin\xef\xbd\x9c>" B "call\xe2\x96\x81" "begin\xef\xbd\x9c>function" B "sep\xef\xbd\x9c>get_weather\n```json\n{\"city\": \"Paris\"}\n```" B "call\xe2\x96\x81" "end\xef\xbd\x9c>\n"
         B "call\xe2\x96\x81" "begin\xef\xbd\x9c>function" B "sep\xef\xbd\x9c>b\n```json\n{}\n```" B "call\xe2\x96\x81" "end\xef\xbd\x9c>" B "calls\xe2\x96\x81" "end\xef\xbd\x9c>",
         "Sure.", {"get_weather", "{\"city\":\"Paris\"}"}, {"b", "{}"}, END);
    CASE("deepseek v3.1", TOKD_TOOLCALL_DEEPSEEK,
         B "calls\xe2\x96\x81" "begin\xef\xbd\x9c>" B "call\xe2\x96\x81" "begin\xef\xbd\x9c>f" B "sep\xef\xbd\x9c>{\"a\": [1]}" B "call\xe2\x96\x81" "end\xef\xbd\x9c>" B "calls\xe2\x96\x81" "end\xef\xbd\x9c>",
         "", {"f", "{\"a\":[1]}"}, END);
    CASE("deepseek malformed", TOKD_TOOLCALL_DEEPSEEK, B "call\xe2\x96\x81" "begin\xef\xbd\x9c>f{}" B "call\xe2\x96\x81" "end\xef\xbd\x9c>",
         B "call\xe2\x96\x81" "begin\xef\xbd\x9c>f{}" B "call\xe2\x96\x81" "end\xef\xbd\x9c>", END);
#undef B
    CASE("command-r7b", TOKD_TOOLCALL_COMMAND_R7B,
         "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"search\", \"parameters\": {\"q\": \"x\"}}\n]<|END_ACTION|>", "",
         {"search", "{\"q\":\"x\"}"}, END);
    CASE("command-r7b response", TOKD_TOOLCALL_COMMAND_R7B, "<|START_RESPONSE|>Hello!<|END_RESPONSE|>", "Hello!", END);
    CASE("glm", TOKD_TOOLCALL_GLM45,
         "Let me look.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n<arg_key>opts</arg_key>\n<arg_value>{\"u\": \"c\"}</arg_value>\n</tool_call>",
         "Let me look.", {"get_weather", "{\"city\":\"Paris\",\"days\":3,\"opts\":{\"u\":\"c\"}}"}, END);
    CASE("glm no args", TOKD_TOOLCALL_GLM45, "<tool_call>now\n</tool_call>", "", {"now", "{}"}, END);
    CASE("glm malformed", TOKD_TOOLCALL_GLM45, "<tool_call>f\n<arg_key>a</arg_key>junk</tool_call>", "<tool_call>f\n<arg_key>a</arg_key>junk</tool_call>", END);
    CASE("none", TOKD_TOOLCALL_NONE, "<tool_call>{\"name\": \"f\"}</tool_call>", "<tool_call>{\"name\": \"f\"}</tool_call>", END);
}

/* Content is released as soon as it cannot start a marker, and a partial marker never is. */
#define PUSH(p, str, ev) tokd_toolcall_push(p, str, strlen(str), ev)
#define IS(ev, str) ((ev).content.len == strlen(str) && memcmp((ev).content.data ? (ev).content.data : "", str, strlen(str)) == 0)

/* Content is released as soon as it cannot start a marker, and a partial marker never is. */
static void test_holdback(void) {
    tokd_toolcall_parser *p = tokd_toolcall_parser_new(TOKD_TOOLCALL_HERMES, 1);
    tokd_toolcall_events ev = {0};
    PUSH(p, "Hello <tool", &ev);
    CHECK(IS(ev, "Hello"), "released [%.*s]", (int)ev.content.len, ev.content.data);
    PUSH(p, "kit> more", &ev);
    CHECK(IS(ev, " <toolkit> more"), "released [%.*s]", (int)ev.content.len, ev.content.data);
    PUSH(p, " <tool_call>{\"name\": \"f\"}", &ev);
    CHECK(ev.content.len == 0 && ev.n_calls == 0, "nothing before the call closes");
    PUSH(p, "</tool_call", &ev);
    CHECK(ev.content.len == 0 && ev.n_calls == 0, "nothing before the end marker is whole");
    PUSH(p, ">", &ev);
    CHECK(ev.n_calls == 1 && ev.first_index == 0 && strcmp(ev.calls[0].name, "f") == 0, "call at close");
    PUSH(p, "\n<tool_call>{\"name\": \"g\"}</tool_call>", &ev);
    CHECK(ev.n_calls == 1 && ev.first_index == 1 && strcmp(ev.calls[0].name, "g") == 0, "second call, index 1");
    CHECK(tokd_toolcall_finish(p, &ev), "finish reports a call");
    PUSH(p, "ignored", &ev);
    CHECK(ev.content.len == 0, "push after finish ignored");
    size_t n;
    tokd_toolcall_calls(p, &n);
    CHECK(n == 2, "all calls kept");
    tokd_toolcall_events_free(&ev);
    tokd_toolcall_parser_free(p);

    p = tokd_toolcall_parser_new(TOKD_TOOLCALL_HERMES, 1);
    PUSH(p, "plain", &ev);
    CHECK(IS(ev, "plain"), "plain text released at once");
    PUSH(p, " text\n", &ev);
    CHECK(IS(ev, " text"), "trailing whitespace held");
    CHECK(!tokd_toolcall_finish(p, &ev), "no call");
    CHECK(IS(ev, "\n"), "and released at the end");
    tokd_toolcall_events_free(&ev);
    tokd_toolcall_parser_free(p);

    p = tokd_toolcall_parser_new(TOKD_TOOLCALL_LLAMA3, 1);
    PUSH(p, " {\"name\"", &ev);
    CHECK(ev.content.len == 0, "llama: a leading brace is held");
    tokd_toolcall_finish(p, &ev);
    CHECK(IS(ev, " {\"name\""), "llama: and released when it never closes");
    tokd_toolcall_events_free(&ev);
    tokd_toolcall_parser_free(p);
}

static void test_ids(void) {
    tokd_toolcall_result a, b, c;
    const char *t = "<tool_call>{\"name\": \"f\"}</tool_call><tool_call>{\"name\": \"f\"}</tool_call>";
    tokd_toolcall_parse(TOKD_TOOLCALL_HERMES, 7, t, strlen(t), &a);
    tokd_toolcall_parse(TOKD_TOOLCALL_HERMES, 7, t, strlen(t), &b);
    tokd_toolcall_parse(TOKD_TOOLCALL_HERMES, 8, t, strlen(t), &c);
    CHECK(a.n_calls == 2 && b.n_calls == 2 && c.n_calls == 2, "calls");
    if (a.n_calls == 2 && b.n_calls == 2 && c.n_calls == 2) {
        CHECK(strcmp(a.calls[0].id, b.calls[0].id) == 0 && strcmp(a.calls[1].id, b.calls[1].id) == 0, "same seed, same ids");
        CHECK(strcmp(a.calls[0].id, c.calls[0].id) != 0, "other seed, other ids");
        CHECK(strcmp(a.calls[0].id, a.calls[1].id) != 0, "ids differ within a message");
    }
    tokd_toolcall_result_free(&a);
    tokd_toolcall_result_free(&b);
    tokd_toolcall_result_free(&c);
}

static void test_detect(void) {
    static const struct { const char *file; tokd_toolcall_format fmt; } T[] = {
        {"Qwen-Qwen2.5-7B-Instruct.jinja", TOKD_TOOLCALL_HERMES},
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", TOKD_TOOLCALL_HERMES},
        {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", TOKD_TOOLCALL_HERMES},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", TOKD_TOOLCALL_LLAMA3},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", TOKD_TOOLCALL_LLAMA3},
        {"meta-llama-Llama-3.3-70B-Instruct.jinja", TOKD_TOOLCALL_LLAMA3},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", TOKD_TOOLCALL_MISTRAL},
        {"mistralai-Mistral-Small-3.1-24B-Instruct-2503.jinja", TOKD_TOOLCALL_MISTRAL},
        {"meetkai-functionary-medium-v3.1.jinja", TOKD_TOOLCALL_FUNCTIONARY},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", TOKD_TOOLCALL_DEEPSEEK},
        {"deepseek-ai-DeepSeek-V3.1.jinja", TOKD_TOOLCALL_DEEPSEEK},
        {"llama-cpp-microsoft-Phi-4-mini-instruct.jinja", TOKD_TOOLCALL_PHI4},
        {"NVIDIA-Nemotron-Nano-v2.jinja", TOKD_TOOLCALL_NEMOTRON},
        {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", TOKD_TOOLCALL_COMMAND_R7B},
        {"GLM-4.6.jinja", TOKD_TOOLCALL_GLM45},
        {"google-gemma-2-2b-it.jinja", TOKD_TOOLCALL_NONE},
        {"microsoft-Phi-3.5-mini-instruct.jinja", TOKD_TOOLCALL_NONE},
    };
    char path[1024];
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        snprintf(path, sizeof path, "%s/templates/%s", t_shared(), T[i].file);
        char *src = tokd_read_file(path, NULL);
        CHECK(src != NULL, "read %s", path);
        if (!src) continue;
        tokd_toolcall_format got = tokd_toolcall_detect(src);
        CHECK(got == T[i].fmt, "%s: detected %s, want %s", T[i].file, tokd_toolcall_format_name(got),
              tokd_toolcall_format_name(T[i].fmt));
        free(src);
    }
    CHECK(tokd_toolcall_detect(NULL) == TOKD_TOOLCALL_NONE, "NULL template");
    for (int f = 0; f < TOKD_TOOLCALL_N_FORMATS; f++)
        CHECK(tokd_toolcall_format_from_name(tokd_toolcall_format_name(f)) == f, "name round trip %d", f);
    CHECK(tokd_toolcall_format_from_name("nope") == -1, "unknown name");
}

static void test_json(void) {
    tokd_toolcall_result r;
    const char *t = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"\\\"x\\\"\"}}</tool_call>";
    tokd_toolcall_parse(TOKD_TOOLCALL_HERMES, 3, t, strlen(t), &r);
    CHECK(r.n_calls == 1, "one call");
    if (r.n_calls != 1) return;
    cJSON *arr = tokd_toolcall_calls_json(r.calls, r.n_calls);
    char *s = cJSON_PrintUnformatted(arr);
    char want[512];
    snprintf(want, sizeof want,
             "[{\"id\":\"%s\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":\\\"\\\\\\\"x\\\\\\\"\\\"}\"}}]",
             r.calls[0].id);
    CHECK(strcmp(s, want) == 0, "message json %s\nwant %s", s, want);
    cJSON_free(s);
    cJSON_Delete(arr);
    cJSON *d = tokd_toolcall_delta_json(&r.calls[0], 3);
    s = cJSON_PrintUnformatted(d);
    CHECK(strncmp(s, "{\"index\":3,\"id\":\"call_", 22) == 0, "delta json %s", s);
    cJSON_free(s);
    cJSON_Delete(d);
    tokd_toolcall_result_free(&r);
}

/* Output cut short (max_tokens): text fed in two pieces, then finish_cut; content and calls. */
static void check_cut(const char *label, tokd_toolcall_format fmt, const char *text, const char *content, size_t n_calls,
                      bool open_parses) {
    tokd_toolcall_parser *p = tokd_toolcall_parser_new(fmt, 7);
    tokd_toolcall_events ev = {0};
    tokd_buf got = {0};
    size_t half = strlen(text) / 2;
    tokd_toolcall_push(p, text, half, &ev);
    tokd_buf_append(&got, ev.content.data, ev.content.len);
    tokd_toolcall_push(p, text + half, strlen(text) - half, &ev);
    tokd_buf_append(&got, ev.content.data, ev.content.len);
    bool any = tokd_toolcall_finish_cut(p, &ev);
    tokd_buf_append(&got, ev.content.data, ev.content.len);
    size_t n = 0;
    tokd_toolcall_calls(p, &n);
    const char *g = got.data ? got.data : "";
    CHECK(!strcmp(g, content), "%s: content [%s], want [%s]", label, g, content);
    CHECK(n == n_calls && any == (n_calls > 0), "%s: %zu calls, want %zu", label, n, n_calls);
    tokd_toolcall_events_free(&ev);
    tokd_toolcall_parser_free(p);
    tokd_buf_free(&got);
    /* the same text ended normally: an open block that parses counts, one that does not is content */
    tokd_toolcall_result r;
    tokd_toolcall_parse(fmt, 7, text, strlen(text), &r);
    CHECK(r.n_calls == n_calls + open_parses, "%s, not cut: %zu calls", label, r.n_calls);
    tokd_toolcall_result_free(&r);
}

/* A call still open when max_tokens cuts the output is neither a call nor content. */
static void test_cut(void) {
    const char *done = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\n";
    char text[256];
    snprintf(text, sizeof text, "Sure.\n%s<tool_call>\n{\"name\": \"f\", \"argum", done);
    check_cut("hermes, cut in the 2nd call", TOKD_TOOLCALL_HERMES, text, "Sure.", 1, false);
    snprintf(text, sizeof text, "%s<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 2}}", done);
    check_cut("hermes, cut before the end marker", TOKD_TOOLCALL_HERMES, text, "", 1, true);
    check_cut("hermes, cut in the first", TOKD_TOOLCALL_HERMES, "Hi <tool_call>{\"na", "Hi", 0, false);
    check_cut("hermes, no call", TOKD_TOOLCALL_HERMES, "just text, cut", "just text, cut", 0, false);
    check_cut("functionary, cut in a call", TOKD_TOOLCALL_FUNCTIONARY, "<function=f>{\"a\": ", "", 0, false);
    /* a bare '{' cannot be told from content: it stays content */
    check_cut("llama3, bare JSON cut", TOKD_TOOLCALL_LLAMA3, "{\"name\": \"f\", \"par", "{\"name\": \"f\", \"par", 0, false);
}

int main(void) {
    test_cut();
    test_hermes();
    test_phi4_nemotron();
    test_llama3();
    test_mistral();
    test_others();
    test_holdback();
    test_ids();
    test_detect();
    test_json();
    T_DONE();
}
