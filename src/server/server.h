/* server.h — the OpenAI-compatible HTTP server on top of the engine (libmicrohttpd + cJSON).
 *
 * Endpoints: POST /v1/completions, POST /v1/chat/completions (streaming as server-sent
 * events or not), GET /v1/models[/ID], GET /health, GET /metrics (Prometheus text),
 * POST /tokenize, POST /detokenize.
 *
 * Status codes: 200; 400 malformed JSON, wrong types, out-of-range values, invalid UTF-8,
 * a \u0000 escape in any string of the body (cJSON keeps C strings, so it would silently cut
 * the text; the error names the top-level field), prompt past the context (the message names
 * both numbers), more choices (prompts x n) than the engine holds at once (--max-seqs +
 * --max-queue: a 429 would never clear), logit_bias banning every token, and a grammar that
 * no allowed token can continue (found while generating: then the request ends with a 400
 * invalid_request_error, or that error object as the stream's last event); 401 missing
 * or wrong key when an API key is set (everything but /health and /metrics; compared in constant
 * time); 404 unknown route or model; 405 wrong method on a known route; 413 body over
 * the limit; 429 with Retry-After when the engine's queue is full; 503 with Retry-After
 * while shutting down. A client that sends its body slower than the timeout has its
 * connection closed (no response can be queued mid-body); idle connections are closed
 * after the same timeout. Errors are OpenAI error objects:
 *   {"error": {"message", "type", "param", "code"}}.
 *
 * Chat. Messages (system/developer, user, assistant with content and/or tool_calls, tool with
 * tool_call_id; content as a string or text parts) and `tools` are rendered with the model's
 * own chat template (chat_render.h: Hugging Face semantics, bos/eos strings, optional
 * `chat_template_kwargs` as extra variables, `add_generation_prompt` default true), or with
 * ChatML when the file has none (then "<|im_end|>" and "<|im_start|>" are also stop strings).
 * Tool-call arguments sent back as a JSON string holding an object are passed to the template
 * as that object (templates print them with tojson). A template error is a 400 with its
 * message. The rendered text is tokenized with special tokens parsed, as transformers does:
 * special-token text inside a message (e.g. "<|im_end|>" typed by a user) becomes that special
 * token. This matches the reference tokenization the model was tuned on, and is the
 * reference's own behaviour; a deployment that takes untrusted chat content should filter
 * it upstream. (Kept deliberately: tokenizing message bodies apart would change the tokens at
 * every boundary and break byte-exactness with the reference.)
 *
 * Output formats are fixed per server: tool calls in the format the template shows
 * (toolcall.h; Hermes when it shows none; --tool-format overrides), reasoning in the format
 * it shows (reasoning.h; <think> when it shows none; --reasoning-format, "none" turns it off).
 * The chat output goes through the reasoning parser (-> `reasoning_content`, also as
 * `delta.reasoning_content`) and then, when tool calls are enabled, through the tool-call
 * parser (-> `tool_calls` with finish_reason "tool_calls"; streamed as one delta per call).
 * Output cut short (max_tokens, the context) answers finish_reason "length" even when it holds
 * calls, as OpenAI does: the calls completed before the cut are kept, a call still being
 * written is dropped (neither a call nor content: toolcall.h). Tool-call ids are unique for
 * the server process (a counter and a per-process random value; never derived from `seed`),
 * and everything else in the answer stays deterministic under a seed.
 * Detokenization renders special tokens while tool calls are parsed (markers may be special).
 * tool_choice: "auto" (default with tools) parses calls; "none" still renders the tools but
 * parses nothing; "required" and {"type":"function","function":{"name"}} force one call with a
 * grammar in the model's format (toolchoice.h) whose arguments follow the tool's parameters.
 * parallel_tool_calls false answers with the model's first call only. The request's fields
 * are read and checked in request.h, which also refuses the ones not implemented (echo,
 * suffix, best_of above n, the legacy functions / function_call) and renders again, adapted,
 * a conversation the template fails on as an OpenAI client sends it.
 *
 * Constrained output (both endpoints): `response_format` {"type":"json_object"} or
 * {"type":"json_schema","json_schema":{"schema":{...}}}, or `grammar` (GBNF-style text,
 * grammar.h); at most one, and none with a forced tool call. Each sequence gets its own
 * matcher state in the engine; a bad grammar or schema (or an empty `grammar`) is a 400
 * naming the problem; a grammar the vocabulary cannot complete ends the request with a 400
 * (see above), never a crash.
 *
 * /v1/completions logprobs: text_offset is each token's byte offset in the returned text
 * (text a stop string holds back counts, so the offsets never lag behind the tokens).
 *
 * Threads: one per connection (libmicrohttpd's thread-per-connection mode); a request
 * thread waits for the engine's events, and checks every 50 ms whether its client has
 * hung up (also while tokens keep arriving), cancelling the engine requests when it has.
 * Every request whose client hangs up before the end of its answer is counted once in
 * tokd_client_disconnects_total, also a stream whose hang-up libmicrohttpd sees first (a
 * failed write); connections the server itself closes at shutdown are not. */
#ifndef TOKD_SERVER_H
#define TOKD_SERVER_H

#include <signal.h>
#include <stddef.h>

#include "engine.h"

typedef struct {
    const char *host;        /* IPv4 address or "localhost" (default 127.0.0.1) */
    int port;                /* default 8080; 0: any free port (printed) */
    const char *api_key;     /* NULL: no authentication */
    const char *model_id;    /* name reported by /v1/models and accepted in "model" */
    double timeout_s;        /* idle/slow-body timeout (default 30) */
    size_t max_body;         /* bytes (default 8 MiB) */
    double shutdown_grace_s; /* in-flight requests get this long on SIGTERM (default 30) */
    int max_connections;     /* default 512 */
    int max_choices;         /* prompts x n per request (default 16) */
    const char *chat_template;    /* Jinja source replacing the model's template (NULL: the model's, or ChatML) */
    const char *tool_format;      /* tool-call format name (toolcall.h; NULL: detected from the template, else hermes) */
    const char *reasoning_format; /* reasoning format name (reasoning.h; NULL: detected, else think; "none": off) */
} tokd_server_params;
void tokd_server_params_default(tokd_server_params *p);

/* Serve until *stop becomes non-zero, then shut down gracefully: stop accepting, let
 * in-flight requests finish up to the grace period, cancel the rest. Returns 0, or -1
 * with err when the server cannot start. */
int tokd_server_run(tokd_engine *e, const tokd_server_params *p, volatile sig_atomic_t *stop, tokd_err *err);

#endif
