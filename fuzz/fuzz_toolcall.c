/* fuzz_toolcall.c — libFuzzer target for the output parsers (toolcall.c, reasoning.c).
 *
 * Input: byte 0 picks the tool-call format and the reasoning format and whether the reasoning
 * block starts open; bytes 1-2 seed where the text is cut; the rest is the model's text. The
 * text is parsed all at once, then streamed in pieces cut at seeded random places (and once
 * byte by byte when short). Whatever the bytes, nothing may crash or leak, and the streamed
 * result must equal the one-shot one: content, calls (id, name, arguments), reasoning. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/reasoning.h"
#include "chat/toolcall.h"

static size_t next_cut(uint32_t *x, size_t at, size_t len) {
    *x = *x * 1103515245u + 12345u;
    size_t step = 1 + ((*x >> 16) % 9);
    return at + step < len ? at + step : len;
}

static void same_or_trap(const char *a, size_t an, const char *b, size_t bn) {
    if (an != bn || (an && memcmp(a, b, an) != 0)) __builtin_trap();
}

static void check_toolcall(tokd_toolcall_format fmt, uint32_t seed, const char *text, size_t len, bool bytewise) {
    tokd_toolcall_result r;
    tokd_toolcall_parse(fmt, 5, text, len, &r);
    tokd_toolcall_parser *p = tokd_toolcall_parser_new(fmt, 5);
    tokd_toolcall_events ev = {0};
    tokd_buf content = {0};
    size_t n_calls = 0;
    for (size_t at = 0; at < len;) {
        size_t end = bytewise ? at + 1 : next_cut(&seed, at, len);
        tokd_toolcall_push(p, text + at, end - at, &ev);
        tokd_buf_append(&content, ev.content.data ? ev.content.data : "", ev.content.len);
        if (ev.first_index != n_calls && ev.n_calls) __builtin_trap();
        n_calls += ev.n_calls;
        at = end;
    }
    bool any = tokd_toolcall_finish(p, &ev);
    tokd_buf_append(&content, ev.content.data ? ev.content.data : "", ev.content.len);
    n_calls += ev.n_calls;
    size_t n;
    const tokd_toolcall_call *calls = tokd_toolcall_calls(p, &n);
    if (n != r.n_calls || n != n_calls || any != (n > 0)) __builtin_trap();
    same_or_trap(content.data, content.len, r.content.data, r.content.len);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(calls[i].id, r.calls[i].id) || strcmp(calls[i].name, r.calls[i].name) ||
            strcmp(calls[i].arguments, r.calls[i].arguments))
            __builtin_trap();
    }
    cJSON_Delete(tokd_toolcall_calls_json(calls, n));
    tokd_buf_free(&content);
    tokd_toolcall_events_free(&ev);
    tokd_toolcall_parser_free(p);
    tokd_toolcall_result_free(&r);
}

static void check_reasoning(tokd_reasoning_format fmt, bool open, uint32_t seed, const char *text, size_t len) {
    tokd_buf r1 = {0}, c1 = {0}, r2 = {0}, c2 = {0};
    tokd_reasoning_parse(fmt, open, text, len, &r1, &c1);
    tokd_reasoning_parser *p = tokd_reasoning_parser_new(fmt, open);
    tokd_reasoning_events ev = {0};
    for (size_t at = 0; at <= len;) {
        size_t end = at < len ? next_cut(&seed, at, len) : len;
        if (at < len) tokd_reasoning_push(p, text + at, end - at, &ev);
        else tokd_reasoning_finish(p, &ev);
        tokd_buf_append(&r2, ev.reasoning.data ? ev.reasoning.data : "", ev.reasoning.len);
        tokd_buf_append(&c2, ev.content.data ? ev.content.data : "", ev.content.len);
        if (at == len) break;
        at = end;
    }
    same_or_trap(r1.data, r1.len, r2.data, r2.len);
    same_or_trap(c1.data, c1.len, c2.data, c2.len);
    tokd_reasoning_events_free(&ev);
    tokd_reasoning_parser_free(p);
    tokd_buf_free(&r1);
    tokd_buf_free(&c1);
    tokd_buf_free(&r2);
    tokd_buf_free(&c2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3 || size > 1 << 14) return 0;
    tokd_toolcall_format tf = (tokd_toolcall_format)(data[0] % TOKD_TOOLCALL_N_FORMATS);
    tokd_reasoning_format rf = (tokd_reasoning_format)((data[0] >> 4) % TOKD_REASONING_N_FORMATS);
    bool open = data[0] & 0x40;
    uint32_t seed = (uint32_t)data[1] | (uint32_t)data[2] << 8;
    const char *text = (const char *)data + 3;
    size_t len = size - 3;
    check_toolcall(tf, seed, text, len, false);
    if (len <= 256) check_toolcall(tf, seed, text, len, true);
    check_reasoning(rf, open, seed, text, len);
    return 0;
}
