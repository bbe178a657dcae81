/* fuzz_request.c — libFuzzer target for the server's request parsing (server/request.c):
 * the JSON body of /v1/completions and /v1/chat/completions turned into prompt tokens,
 * sampling parameters, stop strings and grammars, through the real chat templates.
 *
 * Every body cJSON parses also goes through tokd_req_find_nul (the server refuses a
 * string with a NUL before parsing the options), which must answer 0, or 1 with a
 * terminated field name.
 *
 * Input: byte 0 picks the endpoint (bit 0: chat) and the chat template (the rest: an index
 * into templates[], taken modulo their count); the remaining bytes are the body. Whatever
 * the bytes, nothing may crash or leak, and the answer is one of two:
 * - a refusal: status 400 or 404 with a message;
 * - options the engine accepts as they are: at least one prompt, every prompt non-empty
 *   and made of the vocabulary's ids, prompts x n within the limit, stop strings
 *   non-empty, max_tokens positive, a sampler that tokd_sampler_new takes, and a grammar
 *   (when there is one) that a matcher can start on. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"
#include "server/request.h"
#include "tokenizer.h"
#include "tokd.h"
#include "util.h"

#define MAX_CHOICES 16

/* Templates of the tool-call formats the server knows, from ../shared/templates; index 0
 * is the model's own (the tiny model has none: ChatML). */
static const char *const template_files[] = {
    NULL,
    "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "Qwen-Qwen2.5-7B-Instruct.jinja",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
    "meetkai-functionary-medium-v3.2.jinja",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
    "deepseek-ai-DeepSeek-V3.1.jinja",
};
#define N_TEMPLATES (int)(sizeof template_files / sizeof *template_files)

static tokd_model *model;
static tokd_chat_template *templates[N_TEMPLATES];
static tokd_toolcall_format formats[N_TEMPLATES];
static tokd_grammar_vocab *vocab;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *dir = getenv("TOKD_SHARED");
    if (!dir) dir = "../shared";
    char path[1024];
    tokd_err err;
    snprintf(path, sizeof path, "%s/models/tiny-llama-f32.gguf", dir);
    if (!(model = tokd_model_load(path, &err))) {
        fprintf(stderr, "fuzz_request: %s (set TOKD_SHARED)\n", err.msg);
        exit(1);
    }
    for (int i = 0; i < N_TEMPLATES; i++) {
        if (!template_files[i]) {
            templates[i] = tokd_chat_template_new(model, &err);
            formats[i] = TOKD_TOOLCALL_HERMES; /* the server's choice when the template shows none */
        } else {
            size_t len = 0;
            snprintf(path, sizeof path, "%s/templates/%s", dir, template_files[i]);
            char *src = tokd_read_file(path, &len);
            if (!src) {
                fprintf(stderr, "fuzz_request: cannot read %s (set TOKD_SHARED)\n", path);
                exit(1);
            }
            templates[i] = tokd_chat_template_from_source(model, src, len, &err);
            formats[i] = tokd_toolcall_detect(src);
            if (formats[i] == TOKD_TOOLCALL_NONE) formats[i] = TOKD_TOOLCALL_HERMES;
            free(src);
        }
        if (!templates[i]) {
            fprintf(stderr, "fuzz_request: template %d: %s\n", i, err.msg);
            exit(1);
        }
    }
    vocab = tokd_grammar_vocab_new(model->tok);
    return 0;
}

static void check_accepted(const tokd_gen_opts *o, bool chat) {
    const int32_t n_vocab = model->hp.n_vocab;
    if (o->n_prompts < 1 || o->n < 1 || (int64_t)o->n_prompts * o->n > MAX_CHOICES) abort();
    for (int i = 0; i < o->n_prompts; i++) {
        if (o->n_prompt[i] < 1) abort();
        for (int32_t k = 0; k < o->n_prompt[i]; k++)
            if (o->prompts[i][k] < 0 || o->prompts[i][k] >= n_vocab) abort();
    }
    if (chat && !o->prompt_text) abort();
    if (o->max_tokens == 0 || o->max_tokens < -1) abort();
    if (o->n_stop < 0 || o->n_stop > 24) abort();
    for (int i = 0; i < o->n_stop; i++)
        if (!o->stop[i] || !*o->stop[i]) abort();
    tokd_err err;
    tokd_sampler *sm = tokd_sampler_new(&o->sp, n_vocab, &err);
    if (!sm) {
        fprintf(stderr, "fuzz_request: accepted options the sampler refuses: %s\n", err.msg);
        abort();
    }
    tokd_sampler_free(sm);
    if (o->grammar) {
        tokd_grammar_state *st = tokd_grammar_state_new(o->grammar, vocab);
        if (!st) abort();
        tokd_grammar_state_free(st);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 16384) return 0;
    const bool chat = data[0] & 1;
    const int t = (data[0] >> 1) % N_TEMPLATES;
    const tokd_req_ctx ctx = {model, templates[t], formats[t], "tokd", MAX_CHOICES, 1234};
    cJSON *root = cJSON_ParseWithLength((const char *)data + 1, size - 1);
    if (root) { /* the server's NUL scan runs on every body cJSON parsed: a bounded, terminated field */
        char field[64];
        memset(field, 0x55, sizeof field);
        const int nul = tokd_req_find_nul((const char *)data + 1, size - 1, field, sizeof field);
        if ((nul != 0 && nul != 1) || (nul && !memchr(field, 0, sizeof field))) abort();
    }
    tokd_gen_opts o;
    tokd_req_err pe = {0};
    if (tokd_gen_opts_parse(&ctx, root, chat, &o, &pe) == 0) {
        check_accepted(&o, chat);
    } else if ((pe.status != 400 && pe.status != 404) || !pe.msg[0] || !memchr(pe.msg, 0, sizeof pe.msg)) {
        abort();
    }
    tokd_gen_opts_free(&o);
    cJSON_Delete(root);
    return 0;
}
