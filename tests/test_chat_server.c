/* test_chat_server.c — the pieces the chat endpoint puts together beyond the parsers' own
 * tests: forced tool-call grammars (toolchoice.h) in every supported format read back by the
 * tool-call parser, rule prefixing across several tools, and a model file that carries its
 * own chat template (the GGUF path of chat_render.h).
 *
 * `test_chat_server --with-template MODEL TEMPLATE OUT` writes a copy of MODEL with
 * tokenizer.chat_template set to TEMPLATE's text (used by tests/e2e_server_tools.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat/chat_render.h"
#include "chat/toolcall.h"
#include "chat/toolchoice.h"
#include "gguf.h"
#include "grammar.h"
#include "model.h"
#include "t.h"

/* Copy a GGUF file, replacing (or adding) tokenizer.chat_template. */
static int write_with_template(const char *model, const char *tpl_path, const char *out, tokd_err *err) {
    size_t tl;
    char *tpl = tokd_read_file(tpl_path, &tl);
    if (!tpl) return tokd_seterr(err, "cannot read %s", tpl_path);
    gguf_file *f = gguf_open(model, err);
    if (!f) {
        free(tpl);
        return -1;
    }
    gguf_writer *w = gguf_writer_new();
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (!gguf_str_eq(f->kv[i].key, "tokenizer.chat_template") && !gguf_str_eq(f->kv[i].key, "general.alignment"))
            gguf_writer_copy_kv(w, &f->kv[i]);
    gguf_writer_set_str_n(w, "tokenizer.chat_template", tpl, tl);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
    }
    int rc = gguf_writer_to_file(w, out, err);
    gguf_writer_free(w);
    gguf_close(f);
    free(tpl);
    return rc;
}

static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":7}},"
    "\"required\":[\"city\",\"days\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"say \\\"hi\\\"\"}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"add\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"a\":{\"type\":\"number\"},\"b\":{\"type\":\"number\"}},\"required\":[\"a\",\"b\"]}}}]";

typedef struct {
    tokd_toolcall_format fmt;
    const char *text, *name, *args; /* a call in the format, and what it reads back as */
} call_case;

static void test_toolchoice(void) {
    cJSON *tools = cJSON_Parse(TOOLS);
    static const call_case cases[] = {
        {TOKD_TOOLCALL_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>",
         "get_weather", "{\"city\":\"Paris\",\"days\":3}"},
        {TOKD_TOOLCALL_HERMES, "<tool_call>\n{\"name\": \"say \\\"hi\\\"\", \"arguments\": {\"x\": [1, {}]}}\n</tool_call>",
         "say \"hi\"", "{\"x\":[1,{}]}"},
        {TOKD_TOOLCALL_PHI4, "<|tool_call|>{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2.5}}<|/tool_call|>", "add",
         "{\"a\":1,\"b\":2.5}"},
        {TOKD_TOOLCALL_NEMOTRON, "<TOOLCALL>[{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]</TOOLCALL>", "add",
         "{\"a\":1,\"b\":2}"},
        {TOKD_TOOLCALL_LLAMA3, "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}", "add", "{\"a\":1,\"b\":2}"},
        {TOKD_TOOLCALL_MISTRAL, "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]", "add",
         "{\"a\":1,\"b\":2}"},
        {TOKD_TOOLCALL_FUNCTIONARY, "<function=add>{\"a\": 1, \"b\": 2}</function>", "add", "{\"a\":1,\"b\":2}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const call_case *c = &cases[i];
        tokd_err err = {{0}};
        char *g = tokd_toolchoice_gbnf(c->fmt, tools, NULL, &err);
        CHECK(g != NULL, "%s: %s", tokd_toolcall_format_name(c->fmt), err.msg);
        if (!g) continue;
        tokd_grammar *gr = tokd_grammar_parse(g, strlen(g), &err);
        CHECK(gr != NULL, "%s grammar: %s\n%s", tokd_toolcall_format_name(c->fmt), err.msg, g);
        if (gr) {
            CHECK(tokd_grammar_match(gr, c->text, strlen(c->text)), "%s: grammar rejects %s", tokd_toolcall_format_name(c->fmt), c->text);
            /* wrong arguments for the schema, and a name that is no tool, are rejected */
            char bad[512];
            snprintf(bad, sizeof bad, "%s", c->text);
            char *p = strstr(bad, "\"add\"");
            if (p) {
                p[1] = 'A';
                CHECK(!tokd_grammar_match(gr, bad, strlen(bad)), "%s: grammar accepts unknown tool %s", tokd_toolcall_format_name(c->fmt), bad);
            }
            tokd_grammar_free(gr);
        }
        free(g);
        tokd_toolcall_result r;
        tokd_toolcall_parse(c->fmt, 1, c->text, strlen(c->text), &r);
        CHECK(r.n_calls == 1 && !strcmp(r.calls[0].name, c->name) && !strcmp(r.calls[0].arguments, c->args) && r.content.len == 0,
              "%s: parsed %zu calls, name %s args %s content '%.*s'", tokd_toolcall_format_name(c->fmt), r.n_calls,
              r.n_calls ? r.calls[0].name : "-", r.n_calls ? r.calls[0].arguments : "-", (int)r.content.len,
              r.content.data ? r.content.data : "");
        tokd_toolcall_result_free(&r);
    }
    /* a named function: only that one */
    tokd_err err = {{0}};
    char *g = tokd_toolchoice_gbnf(TOKD_TOOLCALL_HERMES, tools, "add", &err);
    tokd_grammar *gr = g ? tokd_grammar_parse(g, strlen(g), &err) : NULL;
    CHECK(gr != NULL, "named: %s", err.msg);
    const char *add = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>";
    const char *other = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\", \"days\": 3}}\n</tool_call>";
    const char *bad_args = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>";
    if (gr) {
        CHECK(tokd_grammar_match(gr, add, strlen(add)), "named accepts add");
        CHECK(!tokd_grammar_match(gr, other, strlen(other)), "named rejects another tool");
        CHECK(!tokd_grammar_match(gr, bad_args, strlen(bad_args)), "named rejects arguments missing a required field");
    }
    tokd_grammar_free(gr);
    free(g);
    /* errors: unknown name, unsupported format, bad schema, no tools */
    CHECK(!tokd_toolchoice_gbnf(TOKD_TOOLCALL_HERMES, tools, "nope", &err) && strstr(err.msg, "nope"), "unknown name: %s", err.msg);
    CHECK(!tokd_toolchoice_gbnf(TOKD_TOOLCALL_GLM45, tools, NULL, &err) && strstr(err.msg, "not supported"), "glm: %s", err.msg);
    cJSON *bad = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"nonsense\"}}}]");
    CHECK(!tokd_toolchoice_gbnf(TOKD_TOOLCALL_HERMES, bad, NULL, &err) && strstr(err.msg, "parameters"), "bad schema: %s", err.msg);
    cJSON_Delete(bad);
    cJSON *empty = cJSON_CreateArray();
    CHECK(!tokd_toolchoice_gbnf(TOKD_TOOLCALL_HERMES, empty, NULL, &err), "no tools");
    cJSON_Delete(empty);
    cJSON_Delete(tools);
}

/* A model file with tokenizer.chat_template renders with it, exactly as the same template
 * given as source; without one, ChatML. */
static void test_gguf_template(void) {
    char model[512], tpl[512], out[512];
    snprintf(model, sizeof model, "%s/models/stories260K.gguf", t_shared());
    snprintf(tpl, sizeof tpl, "%s/templates/Qwen-Qwen2.5-7B-Instruct.jinja", t_shared());
    snprintf(out, sizeof out, "/tmp/tokd-test-chat-%d.gguf", (int)getpid());
    tokd_err err = {{0}};
    CHECK(write_with_template(model, tpl, out, &err) == 0, "write: %s", err.msg);
    tokd_model *m = tokd_model_load(out, &err), *plain = tokd_model_load(model, &err);
    CHECK(m && plain, "load: %s", err.msg);
    if (m && plain) {
        tokd_chat_template *t = tokd_chat_template_new(m, &err), *fb = tokd_chat_template_new(plain, &err);
        size_t len;
        char *src = tokd_read_file(tpl, &len);
        tokd_chat_template *ref = tokd_chat_template_from_source(m, src, len, &err);
        CHECK(t && fb && ref, "templates: %s", err.msg);
        if (t && fb && ref) {
            CHECK(!tokd_chat_template_is_fallback(t) && tokd_chat_template_is_fallback(fb), "fallback flags");
            cJSON *msgs = cJSON_Parse("[{\"role\":\"user\",\"content\":\"Weather?\"}]");
            cJSON *tools = cJSON_Parse(TOOLS);
            char *a = NULL, *b = NULL, *c = NULL;
            size_t al = 0, bl = 0, cl = 0;
            CHECK(tokd_chat_render(t, msgs, tools, true, NULL, &a, &al, &err) == 0, "render: %s", err.msg);
            CHECK(tokd_chat_render(ref, msgs, tools, true, NULL, &b, &bl, &err) == 0, "render ref: %s", err.msg);
            CHECK(tokd_chat_render(fb, msgs, NULL, true, NULL, &c, &cl, &err) == 0, "render chatml: %s", err.msg);
            CHECK(a && b && al == bl && !memcmp(a, b, al), "file template renders as the source");
            CHECK(a && strstr(a, "<tools>") && strstr(a, "get_weather"), "Qwen template describes the tools: %s", a ? a : "");
            CHECK(c && !strcmp(c, "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"), "ChatML: %s", c ? c : "");
            CHECK(tokd_toolcall_detect(src) == TOKD_TOOLCALL_HERMES, "Qwen 2.5 template: hermes tool calls");
            free(a);
            free(b);
            free(c);
            cJSON_Delete(msgs);
            cJSON_Delete(tools);
        }
        free(src);
        tokd_chat_template_free(t);
        tokd_chat_template_free(fb);
        tokd_chat_template_free(ref);
    }
    tokd_model_free(m);
    tokd_model_free(plain);
    remove(out);
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--with-template")) {
        tokd_err err = {{0}};
        if (write_with_template(argv[2], argv[3], argv[4], &err)) {
            fprintf(stderr, "test_chat_server: %s\n", err.msg);
            return 1;
        }
        return 0;
    }
    test_toolchoice();
    test_gguf_template();
    T_DONE();
}
