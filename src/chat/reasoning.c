/* reasoning.c — splitting reasoning from content (rules in reasoning.h).
 *
 * A format is a row: open marker, close marker, markers dropped from the answer. The machine
 * has three states over a buffer of bytes not yet released:
 *   START      only whitespace so far; is an open (or, when starting open, a close) marker next?
 *   REASONING  released as reasoning up to the close marker;
 *   CONTENT    released as content (dropped markers removed).
 * As in toolcall.c, each step consumes a prefix of the buffer or waits for bytes that decide
 * it, so the split never depends on how the text was cut. */
#include "chat/reasoning.h"

#include <stdlib.h>
#include <string.h>

#include "chat/toolcall_scan.h"

typedef struct rspec {
    const char *name;
    const char *open, *close;
    const char *drops[3]; /* NULL-terminated */
} rspec;

static const rspec SPECS[TOKD_REASONING_N_FORMATS] = {
    [TOKD_REASONING_NONE] = {.name = "none"},
    [TOKD_REASONING_THINK] = {.name = "think", .open = "<think>", .close = "</think>"},
    [TOKD_REASONING_COMMAND_R7B] = {.name = "command-r7b", .open = "<|START_THINKING|>", .close = "<|END_THINKING|>",
                                    .drops = {"<|START_RESPONSE|>", "<|END_RESPONSE|>"}},
    [TOKD_REASONING_GEMMA4] = {.name = "gemma4", .open = "<|channel>thought", .close = "<channel|>"},
};

typedef enum { ST_START, ST_REASONING, ST_CONTENT } state;

struct tokd_reasoning_parser {
    const rspec *spec;
    bool starts_open, finished;
    bool lead; /* drop whitespace at the start of the current part */
    state st;
    tokd_buf pend;
};

tokd_reasoning_format tokd_reasoning_detect(const char *t) {
    if (!t) return TOKD_REASONING_NONE;
    if (strstr(t, "<|START_THINKING|>")) return TOKD_REASONING_COMMAND_R7B;
    if (strstr(t, "<|channel>")) return TOKD_REASONING_GEMMA4;
    if (strstr(t, "<think>") || strstr(t, "</think>")) return TOKD_REASONING_THINK;
    return TOKD_REASONING_NONE;
}

const char *tokd_reasoning_format_name(tokd_reasoning_format fmt) {
    return (unsigned)fmt < TOKD_REASONING_N_FORMATS ? SPECS[fmt].name : "none";
}

int tokd_reasoning_format_from_name(const char *name) {
    for (int i = 0; name && i < TOKD_REASONING_N_FORMATS; i++)
        if (strcmp(name, SPECS[i].name) == 0) return i;
    return -1;
}

bool tokd_reasoning_prompt_opens(tokd_reasoning_format fmt, const char *prompt, size_t len) {
    if ((unsigned)fmt >= TOKD_REASONING_N_FORMATS || !SPECS[fmt].open || !prompt) return false;
    while (len && tokd_scan_is_space(prompt[len - 1])) len--;
    size_t ol = strlen(SPECS[fmt].open);
    return len >= ol && memcmp(prompt + len - ol, SPECS[fmt].open, ol) == 0;
}

static void consume(tokd_reasoning_parser *p, size_t n) {
    memmove(p->pend.data, p->pend.data + n, p->pend.len - n);
    p->pend.len -= n;
    p->pend.data[p->pend.len] = 0;
}

static void release(tokd_reasoning_parser *p, tokd_buf *to, size_t n) {
    if (n == 0) return;
    tokd_buf_append(to, p->pend.data, n);
    consume(p, n);
    p->lead = false;
}

/* Drop leading whitespace of a part; true if anything went. */
static bool drop_lead(tokd_reasoning_parser *p) {
    if (!p->lead) return false;
    size_t i = 0;
    while (i < p->pend.len && tokd_scan_is_space(p->pend.data[i])) i++;
    consume(p, i);
    if (p->pend.len > 0) p->lead = false;
    return i > 0;
}

static void enter(tokd_reasoning_parser *p, state st, size_t skip) {
    consume(p, skip);
    p->st = st;
    p->lead = true;
}

static bool step_start(tokd_reasoning_parser *p, bool eof) {
    const char *s = p->pend.data;
    size_t n = p->pend.len, i = 0;
    while (i < n && tokd_scan_is_space(s[i])) i++;
    if (i == n && !eof) return false;
    const char *markers[] = {p->spec->open, p->starts_open ? p->spec->close : NULL, NULL};
    int which, r = tokd_scan_markers(s + i, n - i, markers, &which);
    if (r == TOKD_SCAN_PARTIAL && !eof) return false;
    if (which >= 0) enter(p, which == 0 ? ST_REASONING : ST_CONTENT, i + strlen(markers[which]));
    else if (p->starts_open) enter(p, ST_REASONING, 0);
    else p->st = ST_CONTENT; /* leading whitespace of a plain answer is kept */
    return true;
}

static bool step_reasoning(tokd_reasoning_parser *p, tokd_reasoning_events *ev, bool eof) {
    if (drop_lead(p)) return true;
    const char *s = p->pend.data;
    const char *markers[] = {p->spec->close, NULL};
    size_t n = p->pend.len, ws_from = 0;
    for (size_t i = 0; i < n; i++) {
        int which, r = tokd_scan_markers(s + i, n - i, markers, &which);
        if (r == TOKD_SCAN_PARTIAL && !eof) break;
        if (which >= 0) {
            release(p, &ev->reasoning, ws_from);
            enter(p, ST_CONTENT, i - ws_from + strlen(p->spec->close));
            return true;
        }
        if (!tokd_scan_is_space(s[i])) ws_from = i + 1;
    }
    release(p, &ev->reasoning, eof ? n : ws_from);
    return false;
}

static bool step_content(tokd_reasoning_parser *p, tokd_reasoning_events *ev, bool eof) {
    if (drop_lead(p)) return true;
    const char *s = p->pend.data;
    size_t n = p->pend.len;
    for (size_t i = 0; p->spec->drops[0] && i < n; i++) {
        int which, r = tokd_scan_markers(s + i, n - i, p->spec->drops, &which);
        if (r == TOKD_SCAN_PARTIAL && !eof) {
            release(p, &ev->content, i);
            return false;
        }
        if (which >= 0) {
            release(p, &ev->content, i);
            consume(p, strlen(p->spec->drops[which]));
            return true;
        }
    }
    release(p, &ev->content, n);
    return false;
}

static void run(tokd_reasoning_parser *p, tokd_reasoning_events *ev, bool eof) {
    for (;;) {
        bool progress;
        if (p->st == ST_START) progress = step_start(p, eof);
        else if (p->st == ST_REASONING) progress = step_reasoning(p, ev, eof);
        else progress = step_content(p, ev, eof);
        if (!progress) return;
    }
}

tokd_reasoning_parser *tokd_reasoning_parser_new(tokd_reasoning_format fmt, bool starts_open) {
    tokd_reasoning_parser *p = tokd_xcalloc(1, sizeof *p);
    p->spec = &SPECS[(unsigned)fmt < TOKD_REASONING_N_FORMATS ? fmt : TOKD_REASONING_NONE];
    p->starts_open = starts_open && p->spec->open;
    p->st = p->spec->open ? ST_START : ST_CONTENT;
    tokd_buf_append(&p->pend, "", 0);
    return p;
}

void tokd_reasoning_parser_free(tokd_reasoning_parser *p) {
    if (!p) return;
    tokd_buf_free(&p->pend);
    free(p);
}

static void events_begin(tokd_reasoning_events *ev) {
    tokd_buf_clear(&ev->reasoning);
    tokd_buf_clear(&ev->content);
}

void tokd_reasoning_push(tokd_reasoning_parser *p, const char *text, size_t len, tokd_reasoning_events *ev) {
    events_begin(ev);
    if (p->finished) return;
    tokd_buf_append(&p->pend, text, len);
    run(p, ev, false);
}

void tokd_reasoning_finish(tokd_reasoning_parser *p, tokd_reasoning_events *ev) {
    events_begin(ev);
    if (!p->finished) run(p, ev, true);
    p->finished = true;
}

bool tokd_reasoning_done(const tokd_reasoning_parser *p) {
    return p->st == ST_CONTENT;
}

void tokd_reasoning_events_free(tokd_reasoning_events *ev) {
    tokd_buf_free(&ev->reasoning);
    tokd_buf_free(&ev->content);
}

static void append_events(const tokd_reasoning_events *ev, tokd_buf *reasoning, tokd_buf *content) {
    if (ev->reasoning.len) tokd_buf_append(reasoning, ev->reasoning.data, ev->reasoning.len);
    if (ev->content.len) tokd_buf_append(content, ev->content.data, ev->content.len);
}

void tokd_reasoning_parse(tokd_reasoning_format fmt, bool starts_open, const char *text, size_t len,
                          tokd_buf *reasoning, tokd_buf *content) {
    tokd_reasoning_parser *p = tokd_reasoning_parser_new(fmt, starts_open);
    tokd_reasoning_events ev = {0};
    tokd_reasoning_push(p, text, len, &ev);
    append_events(&ev, reasoning, content);
    tokd_reasoning_finish(p, &ev);
    append_events(&ev, reasoning, content);
    tokd_reasoning_events_free(&ev);
    tokd_reasoning_parser_free(p);
}
