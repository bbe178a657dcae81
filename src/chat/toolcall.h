/* toolcall.h — tool calls in model output, returned as OpenAI `tool_calls`.
 *
 * Models of each family write a tool call in their own syntax; this module owns turning the
 * generated text back into content plus a list of calls (id, function name, arguments as a
 * compact JSON string), both all at once and as streaming deltas.
 *
 * Formats (the model's chat template shows which; tokd_toolcall_detect guesses from it):
 *   HERMES       <tool_call>{"name": N, "arguments": {...}}</tool_call>   (Qwen 2.5, Hermes 2/3)
 *   PHI4         <|tool_call|>{...}<|/tool_call|>                          (Phi-4-mini)
 *   NEMOTRON     <TOOLCALL>[{...}, ...]</TOOLCALL>                         (Nemotron Nano v2)
 *   LLAMA3       {"name": N, "parameters": {...}} at the start of the message or after
 *                <|python_tag|>; several separated by ';'                 (Llama 3.1-3.3)
 *   MISTRAL      [TOOL_CALLS][{...}, ...]  and  [TOOL_CALLS]name[ARGS]{...} (Nemo, Small 3.x)
 *   FUNCTIONARY  <function=name>{...}</function>                           (functionary v3.1)
 *   DEEPSEEK     <｜tool▁call▁begin｜>[function<｜tool▁sep｜>]name ... <｜tool▁call▁end｜>, args as
 *                bare JSON or a ```json fence; the <｜tool▁calls▁begin/end｜> wrapper is dropped
 *   COMMAND_R7B  <|START_ACTION|>[{"tool_name": N, "parameters": {...}}]<|END_ACTION|>; the
 *                <|START_RESPONSE|>/<|END_RESPONSE|> wrapper around content is dropped
 *   GLM45        <tool_call>name\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>...</tool_call>
 * Inside a call object the arguments may be called "arguments" or "parameters" and may be an
 * object (printed compactly) or a string (kept verbatim); missing arguments read as {}.
 *
 * Streaming. The parser is fed text as it is generated. Content is released as soon as it
 * cannot be part of a call: only a possible prefix of a start marker is held back (as stop
 * strings do), plus a run of whitespace, which is dropped when a call follows it or when
 * the output ends right after a call ("A\n<tool_call>...</tool_call>\nB" gives content "A\nB",
 * "A\n<tool_call>...</tool_call>\n" gives "A"). A call is emitted whole when its block closes: one delta carrying index, id,
 * name and the complete arguments (OpenAI clients accumulate it like any first delta).
 * Arguments are not streamed piecemeal because they are re-printed compactly from the parsed
 * JSON, which needs the whole value; the price is that a long argument arrives at once.
 *
 * Feeding the text in any pieces gives the same content (concatenated) and the same calls as
 * feeding it at once: every decision depends only on bytes already seen, never on where the
 * pieces were cut. A block that does not parse (bad JSON, no name) is returned as content,
 * markers included. A block still open when the output ends counts if its body parses, unless
 * the output was cut short (tokd_toolcall_finish_cut: then it is dropped).
 *
 * Special tokens: the markers must appear in the text, so the caller must detokenize with
 * special tokens rendered (at least those of the markers). Ids are "call_" + 24 letters or
 * digits (9 for MISTRAL, whose templates require that length), derived from the caller's id
 * seed and the call's index, so that tests are deterministic; a caller that needs ids unique
 * across requests (the server) gives every parser its own seed. */
#ifndef TOKD_TOOLCALL_H
#define TOKD_TOOLCALL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

typedef enum tokd_toolcall_format {
    TOKD_TOOLCALL_NONE = 0, /* no tool calls: everything is content */
    TOKD_TOOLCALL_HERMES,
    TOKD_TOOLCALL_PHI4,
    TOKD_TOOLCALL_NEMOTRON,
    TOKD_TOOLCALL_LLAMA3,
    TOKD_TOOLCALL_MISTRAL,
    TOKD_TOOLCALL_FUNCTIONARY,
    TOKD_TOOLCALL_DEEPSEEK,
    TOKD_TOOLCALL_COMMAND_R7B,
    TOKD_TOOLCALL_GLM45,
    TOKD_TOOLCALL_N_FORMATS
} tokd_toolcall_format;

/* The format a chat template's text implies (NONE when it shows none we know; NULL → NONE). */
tokd_toolcall_format tokd_toolcall_detect(const char *chat_template);
/* "hermes", "llama3", ... and back (for a command-line override); -1 when unknown. */
const char *tokd_toolcall_format_name(tokd_toolcall_format fmt);
int tokd_toolcall_format_from_name(const char *name);

typedef struct tokd_toolcall_call {
    char id[32];     /* NUL-terminated */
    char *name;      /* malloc'd, NUL-terminated */
    char *arguments; /* malloc'd JSON text, compact when the model gave an object */
} tokd_toolcall_call;

/* What one push or finish released. Initialise with {0}; each push/finish overwrites it. */
typedef struct tokd_toolcall_events {
    tokd_buf content;                /* content bytes released now (may be empty) */
    const tokd_toolcall_call *calls; /* calls completed now; valid until the next push/finish */
    size_t n_calls;
    size_t first_index;              /* the index (in the message) of calls[0] */
} tokd_toolcall_events;
void tokd_toolcall_events_free(tokd_toolcall_events *ev);

typedef struct tokd_toolcall_parser tokd_toolcall_parser;

tokd_toolcall_parser *tokd_toolcall_parser_new(tokd_toolcall_format fmt, uint64_t id_seed);
void tokd_toolcall_parser_free(tokd_toolcall_parser *p);
/* Feed generated bytes. */
void tokd_toolcall_push(tokd_toolcall_parser *p, const char *text, size_t len, tokd_toolcall_events *ev);
/* The output ended: release what was held. Returns true when any call was made (the caller
 * then answers with finish_reason "tool_calls"). Further pushes are ignored. */
bool tokd_toolcall_finish(tokd_toolcall_parser *p, tokd_toolcall_events *ev);
/* The output was cut short (max_tokens, the context): like finish, except that a block still
 * open after its start marker is dropped, neither a call (its arguments may be a prefix of
 * what the model meant) nor content (it is half-written markup). Calls completed before the
 * cut stay. A bare-JSON opening (LLAMA3) cannot be told from content and stays content.
 * The caller answers finish_reason "length" either way. */
bool tokd_toolcall_finish_cut(tokd_toolcall_parser *p, tokd_toolcall_events *ev);
/* Every call made so far, in order (valid until the next push/finish/free). */
const tokd_toolcall_call *tokd_toolcall_calls(const tokd_toolcall_parser *p, size_t *n);

/* One-shot: the whole output at once. */
typedef struct tokd_toolcall_result {
    tokd_buf content;
    tokd_toolcall_call *calls;
    size_t n_calls;
} tokd_toolcall_result;
void tokd_toolcall_parse(tokd_toolcall_format fmt, uint64_t id_seed, const char *text, size_t len,
                         tokd_toolcall_result *out);
void tokd_toolcall_result_free(tokd_toolcall_result *r);

/* OpenAI JSON: the message's "tool_calls" array
 * [{"id", "type": "function", "function": {"name", "arguments"}}, ...], and one streaming delta
 * {"index", "id", "type", "function": {"name", "arguments"}} for a call at index. */
cJSON *tokd_toolcall_calls_json(const tokd_toolcall_call *calls, size_t n);
cJSON *tokd_toolcall_delta_json(const tokd_toolcall_call *call, size_t index);

#endif
