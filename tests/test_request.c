/* test_request.c — the server's request parsing (server/request.c) without a server: the
 * defaults of each endpoint, refusals that name their field, the constraints a request may
 * combine, and conversations as OpenAI clients send them on templates that need them
 * otherwise: tool-call arguments as objects (Llama 3.1) or as text (Functionary v3.2),
 * "" for a null content (Phi-3.5), no developer role (Mistral Small 3.1), no system role
 * (Gemma 2). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/request.h"
#include "t.h"
#include "tokd.h"
#include "util.h"

static tokd_model *model;

static tokd_chat_template *template_file(const char *name, tokd_toolcall_format *fmt) {
    char path[1024];
    snprintf(path, sizeof path, "%s/templates/%s", t_shared(), name);
    char *src = tokd_read_file(path, NULL);
    CHECK(src != NULL, "cannot read %s", path);
    if (!src) exit(1);
    tokd_err err;
    tokd_chat_template *t = tokd_chat_template_from_source(model, src, strlen(src), &err);
    CHECK(t != NULL, "%s: %s", name, t ? "" : err.msg);
    if (!t) exit(1);
    *fmt = tokd_toolcall_detect(src);
    free(src);
    return t;
}

/* Parse body with the context; returns the parse's result, *o and *pe filled. */
static int parse(const tokd_req_ctx *ctx, const char *body, bool chat, tokd_gen_opts *o, tokd_req_err *pe) {
    cJSON *root = cJSON_Parse(body);
    CHECK(root != NULL, "test body is not JSON: %s", body);
    memset(pe, 0, sizeof *pe);
    int rc = tokd_gen_opts_parse(ctx, root, chat, o, pe);
    /* stop[] points into the JSON: the callers here only look at counts and texts we own */
    for (int i = 0; i < o->n_stop; i++) o->stop[i] = NULL;
    cJSON_Delete(root);
    return rc;
}

/* body must be refused with status and param. */
static void refused(const tokd_req_ctx *ctx, const char *body, bool chat, int status, const char *param) {
    tokd_gen_opts o;
    tokd_req_err pe;
    int rc = parse(ctx, body, chat, &o, &pe);
    CHECK(rc == -1, "accepted: %s", body);
    CHECK(pe.status == status, "%s: status %d, want %d (%s)", body, pe.status, status, pe.msg);
    CHECK(param ? pe.param && !strcmp(pe.param, param) : !pe.param, "%s: param %s, want %s", body, pe.param ? pe.param : "(none)",
          param ? param : "(none)");
    CHECK(pe.msg[0] != 0, "%s: no message", body);
    tokd_gen_opts_free(&o);
}

static void test_completions(const tokd_req_ctx *ctx) {
    tokd_gen_opts o;
    tokd_req_err pe;
    CHECK(parse(ctx, "{\"prompt\": \"Once upon a time\"}", false, &o, &pe) == 0, "%s", pe.msg);
    CHECK(o.n_prompts == 1 && o.n_prompt[0] > 1, "%d prompts", o.n_prompts);
    CHECK(o.max_tokens == 16, "completions default max_tokens %lld", (long long)o.max_tokens);
    CHECK(o.sp.temperature == 1.0f && o.sp.top_p == 1.0f && o.sp.top_k == 0, "OpenAI sampling defaults");
    CHECK(o.sp.seed == ctx->seed, "default seed from the context");
    CHECK(!o.grammar && o.n_lp == -1 && !o.stream, "nothing asked, nothing set");
    tokd_gen_opts_free(&o);

    CHECK(parse(ctx, "{\"prompt\": [\"a\", [1, 2, 3]], \"n\": 2, \"stop\": [\"x\", \"\"], \"logit_bias\": {\"5\": -100}, "
                     "\"logprobs\": 2, \"seed\": 9, \"max_tokens\": 3}",
                false, &o, &pe) == 0,
          "%s", pe.msg);
    CHECK(o.n_prompts == 2 && o.n == 2 && o.n_prompt[1] == 3 && o.prompts[1][2] == 3, "prompt list of text and ids");
    CHECK(o.n_stop == 1, "empty stop strings are dropped: %d", o.n_stop);
    CHECK(o.sp.n_logit_bias == 1 && o.sp.logit_bias[0].token == 5 && isinf(o.sp.logit_bias[0].bias), "-100 bans");
    CHECK(o.n_lp == 2 && o.sp.n_logprobs == 2 && o.sp.seed == 9 && o.max_tokens == 3, "fields read");
    tokd_gen_opts_free(&o);

    refused(ctx, "[1, 2]", false, 400, NULL);
    refused(ctx, "{}", false, 400, "prompt");
    refused(ctx, "{\"prompt\": [99999]}", false, 400, "prompt");
    refused(ctx, "{\"prompt\": \"x\", \"model\": \"other\"}", false, 404, "model");
    refused(ctx, "{\"prompt\": \"x\", \"temperature\": 2.5}", false, 400, "temperature");
    refused(ctx, "{\"prompt\": \"x\", \"max_tokens\": 0}", false, 400, "max_tokens");
    refused(ctx, "{\"prompt\": \"x\", \"max_tokens\": 1.5}", false, 400, "max_tokens");
    refused(ctx, "{\"prompt\": \"x\", \"stream\": 1}", false, 400, "stream");
    refused(ctx, "{\"prompt\": \"x\", \"logit_bias\": {\"-1\": 1}}", false, 400, "logit_bias");
    refused(ctx, "{\"prompt\": \"x\", \"logit_bias\": {\"1\": 101}}", false, 400, "logit_bias");
    refused(ctx, "{\"prompt\": [\"a\", \"b\", \"c\"], \"n\": 6}", false, 400, "n");
    refused(ctx, "{\"prompt\": \"x\", \"stop\": [1]}", false, 400, "stop");
    /* fields that would change the answer and are not implemented: refused, never ignored */
    refused(ctx, "{\"prompt\": \"x\", \"echo\": true}", false, 400, "echo");
    refused(ctx, "{\"prompt\": \"x\", \"suffix\": \"end\"}", false, 400, "suffix");
    refused(ctx, "{\"prompt\": \"x\", \"best_of\": 3, \"n\": 2}", false, 400, "best_of");
    refused(ctx, "{\"prompt\": \"x\", \"best_of\": 1, \"n\": 2}", false, 400, "best_of");
    CHECK(parse(ctx, "{\"prompt\": \"x\", \"echo\": false, \"suffix\": \"\", \"best_of\": 2, \"n\": 2}", false, &o, &pe) == 0,
          "their neutral values pass: %s", pe.msg);
    tokd_gen_opts_free(&o);
    refused(ctx, "{\"prompt\": \"x\", \"grammar\": \"root ::= a\"}", false, 400, "grammar");
    refused(ctx, "{\"prompt\": \"x\", \"grammar\": \"root ::= \\\"a\\\"\", \"response_format\": {\"type\": \"json_object\"}}",
            false, 400, "response_format");
    refused(ctx, "{\"prompt\": \"x\", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"schema\": {\"enum\": []}}}}",
            false, 400, "response_format");
}

static void test_chat(const tokd_req_ctx *ctx) {
    tokd_gen_opts o;
    tokd_req_err pe;
    CHECK(parse(ctx, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Hi \"}, "
                     "{\"type\": \"text\", \"text\": \"there\"}]}], \"logprobs\": true, \"top_logprobs\": 3}",
                true, &o, &pe) == 0,
          "%s", pe.msg);
    CHECK(o.prompt_text && strstr(o.prompt_text, "Hi there"), "text parts joined: %s", o.prompt_text ? o.prompt_text : "");
    CHECK(o.max_tokens == -1 && o.n_lp == 3, "chat defaults: no length limit; top_logprobs read");
    tokd_gen_opts_free(&o);
    CHECK(parse(ctx, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": {\"type\": \"json_object\"}}",
                true, &o, &pe) == 0 && o.grammar,
          "json_object gives a grammar: %s", pe.msg);
    tokd_gen_opts_free(&o);

    refused(ctx, "{\"messages\": []}", true, 400, "messages");
    refused(ctx, "{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}", true, 400, "messages");
    refused(ctx, "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", true, 400, "messages");
    refused(ctx, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\", \"tool_calls\": []}]}", true, 400, "messages");
    refused(ctx, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_logprobs\": 2}", true, 400, "top_logprobs");
    refused(ctx, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tool_choice\": \"required\"}", true, 400,
            "tool_choice");
    refused(ctx, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"functions\": []}", true, 400, "functions");
    refused(ctx, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"function_call\": \"auto\"}", true, 400,
            "function_call");
    refused(ctx, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"parallel_tool_calls\": 0}", true, 400,
            "parallel_tool_calls");
    CHECK(parse(ctx, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"parallel_tool_calls\": false}", true, &o, &pe) == 0 &&
              o.single_call,
          "parallel_tool_calls false: %s", pe.msg);
    tokd_gen_opts_free(&o);
    CHECK(parse(ctx, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}", true, &o, &pe) == 0 && !o.single_call,
          "parallel calls by default");
    tokd_gen_opts_free(&o);
}

#define TOOLS                                                                                                     \
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather.\", " \
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"location\": {\"type\": \"string\"}}}}}]"
/* An OpenAI client's history: the call's arguments are a JSON string. */
#define HISTORY                                                                                                        \
    "\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Paris?\"}, "                                      \
    "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", "       \
    "\"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"location\\\": \\\"Paris\\\"}\"}}]}, "          \
    "{\"role\": \"tool\", \"tool_call_id\": \"c1\", \"name\": \"get_weather\", \"content\": \"18 C\"}]"

static void test_tool_history(void) {
    tokd_toolcall_format fmt;
    tokd_gen_opts o;
    tokd_req_err pe;

    /* Llama 3.1 prints the arguments with tojson: they must reach it as an object */
    tokd_chat_template *llama = template_file("meta-llama-Llama-3.1-8B-Instruct.jinja", &fmt);
    tokd_req_ctx ctx = {model, llama, fmt, "tokd", 16, 1};
    CHECK(parse(&ctx, "{" HISTORY ", " TOOLS "}", true, &o, &pe) == 0, "llama 3.1: %s", pe.msg);
    CHECK(o.prompt_text && strstr(o.prompt_text, "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}"),
          "llama 3.1 renders the call's arguments as an object: %s", o.prompt_text ? o.prompt_text : "");
    tokd_gen_opts_free(&o);
    tokd_chat_template_free(llama);

    /* Functionary v3.2 concatenates them to a string, which fails on an object (as in
       transformers): the arguments go in as the client's text */
    tokd_chat_template *fn = template_file("meetkai-functionary-medium-v3.2.jinja", &fmt);
    ctx.tpl = fn;
    ctx.tool_fmt = fmt;
    CHECK(parse(&ctx, "{" HISTORY ", " TOOLS "}", true, &o, &pe) == 0, "functionary v3.2: %s", pe.msg);
    CHECK(o.prompt_text && strstr(o.prompt_text, ">>>get_weather\n{\"location\": \"Paris\"}<|eot_id|>"),
          "functionary v3.2 renders the client's argument text: %s", o.prompt_text ? o.prompt_text : "");
    tokd_gen_opts_free(&o);
    /* arguments given as an object reach it as compact JSON text */
    CHECK(parse(&ctx,
                "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"c1\", "
                "\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": {\"location\": \"Oslo\"}}}]}], " TOOLS "}",
                true, &o, &pe) == 0,
          "functionary v3.2, object arguments: %s", pe.msg);
    CHECK(o.prompt_text && strstr(o.prompt_text, ">>>get_weather\n{\"location\":\"Oslo\"}"), "compact text: %s",
          o.prompt_text ? o.prompt_text : "");
    tokd_gen_opts_free(&o);
    tokd_chat_template_free(fn);

    /* a template error that is not about the arguments is still reported: Hermes 2 Pro
       adds each tool's description to a string, and this tool has none */
    tokd_chat_template *hermes = template_file("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", &fmt);
    ctx.tpl = hermes;
    ctx.tool_fmt = fmt;
    refused(&ctx, "{" HISTORY ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}]}", true,
            400, "messages");
    CHECK(parse(&ctx, "{" HISTORY ", " TOOLS "}", true, &o, &pe) == 0, "hermes 2 pro: %s", pe.msg);
    tokd_gen_opts_free(&o);
    tokd_chat_template_free(hermes);
}


/* Conversations an OpenAI client sends, on templates that reject them as sent. */
static void test_adaptations(void) {
    tokd_toolcall_format fmt;
    tokd_gen_opts o;
    tokd_req_err pe;
    tokd_req_ctx ctx = {model, NULL, TOKD_TOOLCALL_HERMES, "tokd", 16, 1};
    const char *sys_user = "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}]}";

    /* Gemma 2 raises "System role not supported": the system text goes before the user's */
    ctx.tpl = template_file("google-gemma-2-2b-it.jinja", &fmt);
    CHECK(parse(&ctx, sys_user, true, &o, &pe) == 0, "gemma 2, system message: %s", pe.msg);
    CHECK(o.prompt_text && strstr(o.prompt_text, "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>"), "system in user: %s",
          o.prompt_text ? o.prompt_text : "");
    tokd_gen_opts_free(&o);
    /* a conversation it cannot take however presented: its own error */
    refused(&ctx, "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"user\", \"content\": \"b\"}]}", true, 400,
            "messages");
    tokd_chat_template_free((tokd_chat_template *)ctx.tpl);

    /* Phi-3.5 concatenates each content: a tool-calling turn's null becomes "" */
    ctx.tpl = template_file("microsoft-Phi-3.5-mini-instruct.jinja", &fmt);
    CHECK(parse(&ctx, "{" HISTORY "}", true, &o, &pe) == 0, "phi 3.5, null content: %s", pe.msg);
    CHECK(o.prompt_text && strstr(o.prompt_text, "<|assistant|>\n<|end|>"), "empty assistant turn: %s", o.prompt_text ? o.prompt_text : "");
    tokd_gen_opts_free(&o);
    tokd_chat_template_free((tokd_chat_template *)ctx.tpl);

    /* Mistral Small 3.1 knows system, not developer */
    ctx.tpl = template_file("mistralai-Mistral-Small-3.1-24B-Instruct-2503.jinja", &fmt);
    CHECK(parse(&ctx, "{\"messages\": [{\"role\": \"developer\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}]}",
                true, &o, &pe) == 0,
          "mistral small 3.1, developer message: %s", pe.msg);
    CHECK(o.prompt_text && strstr(o.prompt_text, "[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT][INST]Hi[/INST]"), "developer as system: %s",
          o.prompt_text ? o.prompt_text : "");
    tokd_gen_opts_free(&o);
    /* and a template that accepts the conversation as sent renders it unchanged */
    CHECK(parse(&ctx, sys_user, true, &o, &pe) == 0 && o.prompt_text &&
              strstr(o.prompt_text, "[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT][INST]Hi[/INST]"),
          "as sent: %s", o.prompt_text ? o.prompt_text : pe.msg);
    tokd_gen_opts_free(&o);
    tokd_chat_template_free((tokd_chat_template *)ctx.tpl);
}

/* A \u0000 escape is found in any string and named by its top-level key; an escaped backslash
 * before "u0000" is text, not an escape. */
static void test_nul(void) {
    static const struct {
        const char *body, *field; /* field NULL: none */
    } cases[] = {
        {"{\"prompt\": \"a\\u0000b\"}", "prompt"},
        {"{\"prompt\": \"a\\\\u0000b\"}", NULL},
        {"{\"prompt\": \"a\\\\\\u0000b\"}", "prompt"},
        {"{\"model\": \"x\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\\u0000\"}]}", "messages"},
        {"{\"stop\": [\"ok\", \"\\u0000girl\"], \"prompt\": \"p\"}", "stop"},
        {"{\"a\": {\"prompt\": \"\\u0000\"}}", "a"},
        {"{\"pro\\u0000mpt\": \"x\"}", "pro\\u0000mpt"},
        {"{\"content\": \"\\u00001\"}", "content"},
        {"{\"content\": \"\\u0001 \\\" \\u0000\"}", "content"},
        {"{\"content\": \"\\u0010\\u00a0 \\\\\\\\u0000\"}", NULL},
        {"{\"x\": \"\\\"\", \"y\": [1, \"}\", {\"z\": \"\\u0000\"}]}", "y"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char field[64] = "?";
        cJSON *root = cJSON_Parse(cases[i].body);
        CHECK(root != NULL, "case %zu is not JSON", i);
        cJSON_Delete(root);
        int r = tokd_req_find_nul(cases[i].body, strlen(cases[i].body), field, sizeof field);
        CHECK(r == (cases[i].field != NULL), "%s: found %d", cases[i].body, r);
        if (r && cases[i].field) CHECK(!strcmp(field, cases[i].field), "%s: field '%s', want '%s'", cases[i].body, field, cases[i].field);
    }
    static const char raw[] = "{\"prompt\": \"a\0b\"}"; /* a raw NUL byte, which cJSON takes */
    char f[16] = "";
    CHECK(tokd_req_find_nul(raw, sizeof raw - 1, f, sizeof f) == 1 && !strcmp(f, "prompt"), "raw NUL: %s", f);
    char small[4];
    CHECK(tokd_req_find_nul("{\"messages\": \"\\u0000\"}", 22, small, sizeof small) == 1 && !strcmp(small, "mes"), "truncated field: %s", small);
}

/* Values that can never be served are refused with a message giving the real range. */
static void test_minor_refusals(const tokd_req_ctx *ctx) {
    tokd_gen_opts o;
    tokd_req_err pe;
    refused(ctx, "{\"prompt\": \"a\", \"max_tokens\": -1}", false, 400, "max_tokens");
    CHECK(parse(ctx, "{\"prompt\": \"a\", \"max_tokens\": 0}", false, &o, &pe) == -1 && strstr(pe.msg, "between 1 and"), "max_tokens 0: %s",
          pe.msg);
    tokd_gen_opts_free(&o);
    refused(ctx, "{\"prompt\": \"a\", \"max_completion_tokens\": 0}", false, 400, "max_completion_tokens");
    refused(ctx, "{\"prompt\": \"a\", \"grammar\": \"\"}", false, 400, "grammar");
    refused(ctx, "{\"prompt\": \"a\", \"grammar\": \" \\n\"}", false, 400, "grammar");
    /* logit_bias: every token banned is refused; all but one is fine */
    int32_t nv = model->hp.n_vocab;
    if (nv > 1024) return;
    tokd_buf b = {0};
    tokd_buf_appendf(&b, "{\"prompt\": \"a\", \"logit_bias\": {\"05\": -100");
    for (int32_t t = 0; t < nv; t++) tokd_buf_appendf(&b, ", \"%d\": -100", t);
    tokd_buf_appendf(&b, "}}");
    refused(ctx, b.data, false, 400, "logit_bias");
    tokd_buf_clear(&b);
    tokd_buf_appendf(&b, "{\"prompt\": \"a\", \"logit_bias\": {\"5\": -100");
    for (int32_t t = 1; t < nv; t++) tokd_buf_appendf(&b, ", \"%d\": -100", t);
    tokd_buf_appendf(&b, "}}");
    CHECK(parse(ctx, b.data, false, &o, &pe) == 0, "token 0 left: %s", pe.msg);
    tokd_gen_opts_free(&o);
    tokd_buf_free(&b);
}

int main(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/tiny-llama-f32.gguf", t_shared());
    tokd_err err;
    model = tokd_model_load(path, &err);
    CHECK(model != NULL, "%s", model ? "" : err.msg);
    if (!model) T_DONE();
    tokd_chat_template *chatml = tokd_chat_template_new(model, &err);
    CHECK(chatml != NULL, "ChatML");
    tokd_req_ctx ctx = {model, chatml, TOKD_TOOLCALL_HERMES, "tokd", 16, 77};
    test_completions(&ctx);
    test_chat(&ctx);
    test_tool_history();
    test_adaptations();
    test_nul();
    test_minor_refusals(&ctx);
    tokd_chat_template_free(chatml);
    tokd_model_free(model);
    T_DONE();
}
