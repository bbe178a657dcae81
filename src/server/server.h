/* server.h — the OpenAI-compatible HTTP server on top of the engine (libmicrohttpd + cJSON).
 *
 * Endpoints: POST /v1/completions, POST /v1/chat/completions (streaming as server-sent
 * events or not), GET /v1/models[/ID], GET /health, GET /metrics (Prometheus text),
 * POST /tokenize, POST /detokenize.
 *
 * Status codes: 200; 400 malformed JSON, wrong types, out-of-range values, invalid UTF-8,
 * prompt past the context (the message names both numbers); 401 missing or wrong key
 * when an API key is set (everything but /health and /metrics; compared in constant
 * time); 404 unknown route or model; 405 wrong method on a known route; 413 body over
 * the limit; 429 with Retry-After when the engine's queue is full; 503 with Retry-After
 * while shutting down. A client that sends its body slower than the timeout has its
 * connection closed (no response can be queued mid-body); idle connections are closed
 * after the same timeout. Errors are OpenAI error objects:
 *   {"error": {"message", "type", "param", "code"}}.
 *
 * Threads: one per connection (libmicrohttpd's thread-per-connection mode); a request
 * thread waits for the engine's events, and checks every 50 ms whether its client has
 * hung up, cancelling the engine requests when it has. */
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
