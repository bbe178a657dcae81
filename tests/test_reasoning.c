/* test_reasoning.c — splitting reasoning from content (src/chat/reasoning.c).
 *
 * Each case is checked all at once against the expected reasoning and content, then streamed
 * split in two at every byte position, byte by byte and in seeded random pieces: the
 * concatenated pieces must equal the one-shot result. Also holdback, detection from the
 * shared templates and prompts that open the block, and reasoning feeding the tool parser. */
#include <stdint.h>
#include <string.h>

#include "chat/reasoning.h"
#include "chat/toolcall.h"
#include "t.h"

static const char *str(const tokd_buf *b) {
    return b->data ? b->data : "";
}

static void stream(tokd_reasoning_format fmt, bool open, const char *text, const size_t *cuts, size_t n_cuts,
                   tokd_buf *reasoning, tokd_buf *content) {
    tokd_reasoning_parser *p = tokd_reasoning_parser_new(fmt, open);
    tokd_reasoning_events ev = {0};
    size_t at = 0, len = strlen(text);
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : len;
        tokd_reasoning_push(p, text + at, end - at, &ev);
        tokd_buf_append(reasoning, str(&ev.reasoning), ev.reasoning.len);
        tokd_buf_append(content, str(&ev.content), ev.content.len);
        at = end;
    }
    tokd_reasoning_finish(p, &ev);
    tokd_buf_append(reasoning, str(&ev.reasoning), ev.reasoning.len);
    tokd_buf_append(content, str(&ev.content), ev.content.len);
    tokd_reasoning_events_free(&ev);
    tokd_reasoning_parser_free(p);
}

static int stream_differs(tokd_reasoning_format fmt, bool open, const char *text, const size_t *cuts, size_t n,
                          const char *want_r, const char *want_c) {
    tokd_buf r = {0}, c = {0};
    stream(fmt, open, text, cuts, n, &r, &c);
    int bad = strcmp(str(&r), want_r) != 0 || strcmp(str(&c), want_c) != 0;
    tokd_buf_free(&r);
    tokd_buf_free(&c);
    return bad;
}

static int check_splits(tokd_reasoning_format fmt, bool open, const char *text, const char *want_r, const char *want_c) {
    size_t len = strlen(text);
    int bad = 0;
    for (size_t k = 0; k <= len; k++) bad += stream_differs(fmt, open, text, &k, 1, want_r, want_c);
    size_t *cuts = tokd_xmalloc((len + 1) * sizeof *cuts);
    for (size_t k = 0; k < len; k++) cuts[k] = k + 1;
    bad += stream_differs(fmt, open, text, cuts, len, want_r, want_c);
    uint64_t x = 99;
    for (int round = 0; round < 20; round++) {
        size_t n = 0;
        for (size_t k = 1; k < len; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            if ((x >> 60) < 4) cuts[n++] = k;
        }
        bad += stream_differs(fmt, open, text, cuts, n, want_r, want_c);
    }
    free(cuts);
    return bad;
}

static void check_case(const char *label, tokd_reasoning_format fmt, bool open, const char *text, const char *want_r,
                       const char *want_c) {
    tokd_buf r = {0}, c = {0};
    tokd_reasoning_parse(fmt, open, text, strlen(text), &r, &c);
    CHECK(strcmp(str(&r), want_r) == 0, "%s: reasoning [%s], want [%s]", label, str(&r), want_r);
    CHECK(strcmp(str(&c), want_c) == 0, "%s: content [%s], want [%s]", label, str(&c), want_c);
    tokd_buf_free(&r);
    tokd_buf_free(&c);
    int bad = check_splits(fmt, open, text, want_r, want_c);
    CHECK(bad == 0, "%s: %d streamed splits differ", label, bad);
}

static void test_think(void) {
    tokd_reasoning_format F = TOKD_REASONING_THINK;
    check_case("think", F, false, "<think>\nLet me see.\n</think>\n\nThe answer is 4.", "Let me see.", "The answer is 4.");
    check_case("think leading ws", F, false, "\n <think>a b</think>c", "a b", "c");
    check_case("think empty", F, false, "<think></think>Hi", "", "Hi");
    check_case("think none", F, false, "Just an answer.\n", "", "Just an answer.\n");
    check_case("think none, ws kept", F, false, "  Indented", "", "  Indented");
    check_case("think later is content", F, false, "Answer <think>x</think>", "", "Answer <think>x</think>");
    check_case("think close once", F, false, "<think>a</think>b</think>c", "a", "b</think>c");
    check_case("think unclosed", F, false, "<think>still thinking <", "still thinking <", "");
    check_case("think partial open", F, false, "<thin", "", "<thin");
    check_case("think not quite", F, false, "<thinking>x", "", "<thinking>x");
    check_case("think unicode", F, false, "<think>caf\xc3\xa9 \xf0\x9f\xa6\x99</think>\xc3\xa9t\xc3\xa9", "caf\xc3\xa9 \xf0\x9f\xa6\x99",
               "\xc3\xa9t\xc3\xa9");
    check_case("think inner markup", F, false, "<think>a <b> </thin k> c</think>d", "a <b> </thin k> c", "d");
    /* The prompt opened the block (DeepSeek-R1, Nemotron). */
    check_case("open", F, true, "Okay, so 2+2.\n</think>\n\n4", "Okay, so 2+2.", "4");
    check_case("open repeated marker", F, true, "<think>\nhmm</think>ok", "hmm", "ok");
    check_case("open immediately closed", F, true, "</think>ok", "", "ok");
    check_case("open never closed", F, true, "thinking until the end", "thinking until the end", "");
    check_case("open empty", F, true, "", "", "");
    check_case("none format", TOKD_REASONING_NONE, true, "<think>x</think>y", "", "<think>x</think>y");
}

static void test_other_formats(void) {
    check_case("command-r7b", TOKD_REASONING_COMMAND_R7B, false,
               "<|START_THINKING|>I will search.<|END_THINKING|><|START_RESPONSE|>Hello<|END_RESPONSE|>", "I will search.",
               "Hello");
    check_case("command-r7b plain", TOKD_REASONING_COMMAND_R7B, false, "<|START_RESPONSE|>Hi <|END_RESP", "", "Hi <|END_RESP");
    check_case("gemma4", TOKD_REASONING_GEMMA4, false, "<|channel>thought\nStep one.<channel|>Result", "Step one.", "Result");
    check_case("gemma4 empty", TOKD_REASONING_GEMMA4, false, "<|channel>thought\n<channel|>Result", "", "Result");
}

#define PUSH(p, s, ev) tokd_reasoning_push(p, s, strlen(s), ev)

static void test_holdback(void) {
    tokd_reasoning_parser *p = tokd_reasoning_parser_new(TOKD_REASONING_THINK, false);
    tokd_reasoning_events ev = {0};
    PUSH(p, "<thi", &ev);
    CHECK(ev.reasoning.len == 0 && ev.content.len == 0, "partial open marker held");
    PUSH(p, "nk>Some thought </th", &ev);
    CHECK(strcmp(str(&ev.reasoning), "Some thought") == 0, "reasoning released up to the possible marker: [%s]",
          str(&ev.reasoning));
    CHECK(!tokd_reasoning_done(p), "still reasoning");
    PUSH(p, "ink> Answer", &ev);
    CHECK(ev.reasoning.len == 0 && strcmp(str(&ev.content), "Answer") == 0, "content after close: [%s]", str(&ev.content));
    CHECK(tokd_reasoning_done(p), "done");
    PUSH(p, " </think> more", &ev);
    CHECK(strcmp(str(&ev.content), " </think> more") == 0, "content passes through at once");
    tokd_reasoning_finish(p, &ev);
    tokd_reasoning_events_free(&ev);
    tokd_reasoning_parser_free(p);
}

static void test_detect(void) {
    static const struct { const char *file; tokd_reasoning_format fmt; } T[] = {
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", TOKD_REASONING_THINK},
        {"deepseek-ai-DeepSeek-V3.1.jinja", TOKD_REASONING_THINK},
        {"llama-cpp-deepseek-r1.jinja", TOKD_REASONING_THINK},
        {"GLM-4.6.jinja", TOKD_REASONING_THINK},
        {"NVIDIA-Nemotron-Nano-v2.jinja", TOKD_REASONING_THINK},
        {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", TOKD_REASONING_COMMAND_R7B},
        {"gemma4.jinja", TOKD_REASONING_GEMMA4},
        {"Qwen-Qwen2.5-7B-Instruct.jinja", TOKD_REASONING_NONE},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", TOKD_REASONING_NONE},
        {"moonshotai-Kimi-K2.jinja", TOKD_REASONING_NONE},
    };
    char path[1024];
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        snprintf(path, sizeof path, "%s/templates/%s", t_shared(), T[i].file);
        char *src = tokd_read_file(path, NULL);
        CHECK(src != NULL, "read %s", path);
        if (!src) continue;
        tokd_reasoning_format got = tokd_reasoning_detect(src);
        CHECK(got == T[i].fmt, "%s: detected %s", T[i].file, tokd_reasoning_format_name(got));
        free(src);
    }
    for (int f = 0; f < TOKD_REASONING_N_FORMATS; f++)
        CHECK(tokd_reasoning_format_from_name(tokd_reasoning_format_name(f)) == f, "name round trip %d", f);
    /* Generation prompts as the shared templates end them. */
    const char *r1 = "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c><think>\n";
    CHECK(tokd_reasoning_prompt_opens(TOKD_REASONING_THINK, r1, strlen(r1)), "R1 prompt opens");
    const char *v31 = "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c></think>";
    CHECK(!tokd_reasoning_prompt_opens(TOKD_REASONING_THINK, v31, strlen(v31)), "V3.1 non-thinking prompt");
    CHECK(tokd_reasoning_prompt_opens(TOKD_REASONING_THINK, "<SPECIAL_11>Assistant\n<think>\n\n", 31), "Nemotron");
    CHECK(!tokd_reasoning_prompt_opens(TOKD_REASONING_THINK, "<think></think>", 15), "closed");
    const char *g = "<|turn>model\n<|channel>thought\n<channel|>";
    CHECK(!tokd_reasoning_prompt_opens(TOKD_REASONING_GEMMA4, g, strlen(g)), "gemma non-thinking prompt");
    CHECK(!tokd_reasoning_prompt_opens(TOKD_REASONING_NONE, "<think>", 7), "none");
}

/* Reasoning first, its content into the tool-call parser: the documented composition. */
static void test_with_tools(void) {
    const char *text = "<think>I should call f.</think>\n<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
    tokd_buf r = {0}, c = {0};
    tokd_reasoning_parse(TOKD_REASONING_THINK, false, text, strlen(text), &r, &c);
    tokd_toolcall_result res;
    tokd_toolcall_parse(TOKD_TOOLCALL_HERMES, 1, str(&c), c.len, &res);
    CHECK(strcmp(str(&r), "I should call f.") == 0, "reasoning");
    CHECK(res.n_calls == 1 && res.content.len == 0, "one call, no content");
    tokd_toolcall_result_free(&res);
    tokd_buf_free(&r);
    tokd_buf_free(&c);
}

int main(void) {
    test_think();
    test_other_formats();
    test_holdback();
    test_detect();
    test_with_tools();
    T_DONE();
}
