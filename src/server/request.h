/* request.h — the body of a generation request (/v1/completions, /v1/chat/completions)
 * checked and turned into what the engine needs: prompt tokens (a chat's messages
 * rendered with the model's template first), sampling parameters, stop strings, and the
 * grammar of a forced tool call, a response_format or a `grammar` field.
 *
 * It is its own module, apart from the HTTP server, because every field here comes from
 * the network: a fuzzer (fuzz/fuzz_request.c) drives it with hostile bodies without a
 * server, and whatever the body, the answer is either options or a 4xx error with a
 * message naming the field. */
#ifndef TOKD_SERVER_REQUEST_H
#define TOKD_SERVER_REQUEST_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "chat/chat_render.h"
#include "chat/toolcall.h"
#include "grammar.h"
#include "model.h"
#include "sampler.h"

/* What a request is checked against: the server's model, template and limits. */
typedef struct {
    const tokd_model *m;
    const tokd_chat_template *tpl;
    tokd_toolcall_format tool_fmt; /* the format a forced tool call's grammar is written in */
    const char *model_id;          /* the only 'model' a request may name */
    int max_choices;               /* prompts x n, at most */
    uint64_t seed;                 /* the sampling seed when the request gives none */
} tokd_req_ctx;

/* Why a request was refused: an HTTP status (400, 404), the message, and the offending
 * parameter and OpenAI error code where there is one (NULL otherwise). */
typedef struct {
    char msg[400];
    const char *param;
    int status;
    const char *code;
} tokd_req_err;

/* A generation request's options. stop[] points into the request's JSON (and the
 * template's stop list), so the JSON must outlive them. */
typedef struct {
    tokd_sampler_params sp;
    tokd_logit_bias bias[1024];
    int64_t max_tokens;
    int64_t n;
    const char *stop[24];
    int n_stop;
    /* chat templates, tools, constrained output */
    char *prompt_text;     /* the rendered chat prompt */
    bool parse_tools;      /* parse tool calls out of the output */
    bool single_call;      /* parallel_tool_calls false: answer with the first call only */
    tokd_grammar *grammar; /* owned until handed to the job */
    bool stream, include_usage, ignore_eos;
    int n_lp; /* -1 none */
    int32_t **prompts;
    int32_t *n_prompt;
    int n_prompts;
} tokd_gen_opts;

/* Parse root (a request body) into *o. 0 on success; -1 with *pe filled otherwise. Either
 * way *o must then be freed with tokd_gen_opts_free. */
int tokd_gen_opts_parse(const tokd_req_ctx *s, const cJSON *root, bool chat, tokd_gen_opts *o, tokd_req_err *pe);
void tokd_gen_opts_free(tokd_gen_opts *o);

/* root[k] as a boolean: 1 when given (*out set), 0 when absent or null, -1 (with *pe) when
 * it is not a boolean. */
int tokd_req_get_bool(const cJSON *root, const char *k, bool *out, tokd_req_err *pe);

/* cJSON keeps strings as C strings, so a \u0000 escape would silently cut one short (a
 * prompt, a message, a stop string): such bodies are refused instead. body must be one that
 * cJSON parsed. Returns 1 when a string (a key or a value) holds a \u0000 escape or a raw NUL
 * byte (which cJSON takes though JSON does not), with the top-level key it lies under (or
 * that it is) in field (cap bytes, "" for none), else 0. */
int tokd_req_find_nul(const char *body, size_t len, char *field, size_t cap);

#endif
