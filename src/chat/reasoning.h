/* reasoning.h — a model's visible thinking, split from its answer.
 *
 * Reasoning models write their thinking between markers before the answer; the chat endpoint
 * returns it as `reasoning_content`, apart from `content`. This module owns that split, all at
 * once and streaming. Formats (tokd_reasoning_detect guesses from the chat template):
 *   THINK        <think> ... </think>                  (DeepSeek R1/V3.1, Qwen3, GLM, Nemotron)
 *   COMMAND_R7B  <|START_THINKING|> ... <|END_THINKING|>, and the <|START_RESPONSE|> /
 *                <|END_RESPONSE|> markers around the answer are dropped
 *   GEMMA4       <|channel>thought ... <channel|>
 *
 * Rules. Reasoning is recognised only at the start of the output (after whitespace): an open
 * marker there starts it, and the first close marker ends it; anything later is content,
 * markers included. Many templates open the block in the generation prompt themselves
 * (DeepSeek-R1's "<｜Assistant｜><think>\n", Nemotron's "<think>\n\n"), so the output starts
 * inside it: pass starts_open (tokd_reasoning_prompt_opens tells from the rendered prompt);
 * then everything up to the close marker is reasoning, an open marker repeated at the start
 * is dropped, and output that never closes the block is all reasoning. Whitespace just inside
 * the markers and just after the close marker is dropped.
 *
 * Streaming holds back only a possible prefix of the marker being looked for and a run of
 * whitespace that may turn out to precede it; feeding the text in any pieces gives the same
 * concatenated reasoning and content as feeding it at once.
 *
 * With tools, run this first and feed its content to the tool-call parser (toolcall.h). */
#ifndef TOKD_REASONING_H
#define TOKD_REASONING_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

typedef enum tokd_reasoning_format {
    TOKD_REASONING_NONE = 0, /* no reasoning: everything is content */
    TOKD_REASONING_THINK,
    TOKD_REASONING_COMMAND_R7B,
    TOKD_REASONING_GEMMA4,
    TOKD_REASONING_N_FORMATS
} tokd_reasoning_format;

/* The format a chat template's text implies (NULL or none known → NONE). */
tokd_reasoning_format tokd_reasoning_detect(const char *chat_template);
const char *tokd_reasoning_format_name(tokd_reasoning_format fmt);
int tokd_reasoning_format_from_name(const char *name);

/* Does the rendered prompt end (but for whitespace) with the format's open marker, so that
 * generation starts inside the reasoning block? */
bool tokd_reasoning_prompt_opens(tokd_reasoning_format fmt, const char *prompt, size_t len);

/* What one push or finish released. Initialise with {0}; each push/finish overwrites it. */
typedef struct tokd_reasoning_events {
    tokd_buf reasoning; /* reasoning bytes released now (len may be 0, data NULL) */
    tokd_buf content;   /* content bytes released now */
} tokd_reasoning_events;
void tokd_reasoning_events_free(tokd_reasoning_events *ev);

typedef struct tokd_reasoning_parser tokd_reasoning_parser;

tokd_reasoning_parser *tokd_reasoning_parser_new(tokd_reasoning_format fmt, bool starts_open);
void tokd_reasoning_parser_free(tokd_reasoning_parser *p);
void tokd_reasoning_push(tokd_reasoning_parser *p, const char *text, size_t len, tokd_reasoning_events *ev);
/* The output ended: release what was held. Further pushes are ignored. */
void tokd_reasoning_finish(tokd_reasoning_parser *p, tokd_reasoning_events *ev);
/* Has the reasoning block closed (the answer begun)? */
bool tokd_reasoning_done(const tokd_reasoning_parser *p);

/* One-shot: appends to *reasoning and *content. */
void tokd_reasoning_parse(tokd_reasoning_format fmt, bool starts_open, const char *text, size_t len,
                          tokd_buf *reasoning, tokd_buf *content);

#endif
