/* request.c — see request.h.
 *
 * Each field is checked where it is read, and the first bad one ends the parse with a
 * message that names it: ranges as the OpenAI API documents them, strings as valid
 * UTF-8, token ids within the vocabulary. Everything allocated on the way hangs off the
 * options, so one tokd_gen_opts_free releases it on every path. */
#include "server/request.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/toolchoice.h"
#include "tokenizer.h"
#include "unicode_utf8.h"
#include "util.h"


static int fail(tokd_req_err *pe, int status, const char *param, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(tokd_req_err *pe, int status, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pe->msg, sizeof pe->msg, fmt, ap);
    va_end(ap);
    pe->param = param;
    pe->status = status;
    return -1;
}

static bool present(const cJSON *o) { return o && !cJSON_IsNull(o); }

static int get_num(const cJSON *root, const char *k, double lo, double hi, double *out, tokd_req_err *pe) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, k);
    if (!present(v)) return 0;
    if (!cJSON_IsNumber(v)) return fail(pe, 400, k, "'%s' must be a number", k);
    double d = v->valuedouble;
    if (!isfinite(d) || d < lo || d > hi) return fail(pe, 400, k, "'%s' must be between %g and %g", k, lo, hi);
    *out = d;
    return 1;
}

static int get_int(const cJSON *root, const char *k, double lo, double hi, int64_t *out, tokd_req_err *pe) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, k);
    if (!present(v)) return 0;
    if (!cJSON_IsNumber(v)) return fail(pe, 400, k, "'%s' must be an integer", k);
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d)) return fail(pe, 400, k, "'%s' must be an integer", k);
    if (d < lo || d > hi) return fail(pe, 400, k, "'%s' must be between %.0f and %.0f", k, lo, hi);
    *out = (int64_t)d;
    return 1;
}

int tokd_req_get_bool(const cJSON *root, const char *k, bool *out, tokd_req_err *pe) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, k);
    if (!present(v)) return 0;
    if (!cJSON_IsBool(v)) return fail(pe, 400, k, "'%s' must be a boolean", k);
    *out = cJSON_IsTrue(v);
    return 1;
}

/* Whether the -100 biases (bans) cover all n_vocab tokens (keys may name a token twice: "5", "05"). */
static bool bans_every_token(const tokd_logit_bias *b, int n, int32_t n_vocab) {
    int n_banned = 0;
    for (int i = 0; i < n; i++) n_banned += b[i].bias == -INFINITY;
    if (n_banned < n_vocab) return false;
    bool *seen = tokd_xcalloc((size_t)n_vocab, sizeof *seen);
    int32_t distinct = 0;
    for (int i = 0; i < n; i++) {
        if (b[i].bias != -INFINITY || seen[b[i].token]) continue;
        seen[b[i].token] = true;
        distinct++;
    }
    free(seen);
    return distinct == n_vocab;
}

static int check_utf8(const char *s, const char *param, tokd_req_err *pe) {
    if (!tokd_utf8_valid(s, strlen(s))) return fail(pe, 400, param, "'%s' is not valid UTF-8", param);
    return 0;
}

void tokd_gen_opts_free(tokd_gen_opts *o) {
    free(o->prompt_text);
    tokd_grammar_free(o->grammar);
    o->prompt_text = NULL;
    o->grammar = NULL;
    for (int i = 0; i < o->n_prompts; i++) free(o->prompts[i]);
    free(o->prompts);
    free(o->n_prompt);
}

static void add_prompt(tokd_gen_opts *o, int32_t *toks, int32_t n) {
    o->prompts = tokd_xrealloc(o->prompts, (size_t)(o->n_prompts + 1) * sizeof *o->prompts);
    o->n_prompt = tokd_xrealloc(o->n_prompt, (size_t)(o->n_prompts + 1) * sizeof *o->n_prompt);
    o->prompts[o->n_prompts] = toks;
    o->n_prompt[o->n_prompts++] = n;
}

static int tokenize_into(const tokd_req_ctx *s, tokd_gen_opts *o, const char *text, bool add_special, bool parse_special, tokd_req_err *pe) {
    int32_t *toks = NULL;
    size_t n = 0;
    tokd_err err;
    if (tokd_tokenize(s->m->tok, text, strlen(text), add_special, parse_special, &toks, &n, &err))
        return fail(pe, 400, "prompt", "cannot tokenize the prompt: %s", err.msg);
    if (n == 0) {
        free(toks);
        return fail(pe, 400, "prompt", "the prompt is empty");
    }
    add_prompt(o, toks, (int32_t)n);
    return 0;
}

static int parse_token_list(const tokd_req_ctx *s, tokd_gen_opts *o, const cJSON *arr, tokd_req_err *pe) {
    int n = cJSON_GetArraySize(arr);
    if (n <= 0) return fail(pe, 400, "prompt", "the prompt is empty");
    int32_t *t = tokd_xmalloc((size_t)n * sizeof *t);
    int i = 0;
    for (const cJSON *v = arr->child; v; v = v->next, i++) {
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 ||
            v->valuedouble >= s->m->hp.n_vocab) {
            free(t);
            return fail(pe, 400, "prompt", "prompt token at index %d is not a token id (0..%d)", i, s->m->hp.n_vocab - 1);
        }
        t[i] = (int32_t)v->valuedouble;
    }
    add_prompt(o, t, n);
    return 0;
}

static int parse_prompt(const tokd_req_ctx *s, tokd_gen_opts *o, const cJSON *root, tokd_req_err *pe) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (!present(p)) return fail(pe, 400, "prompt", "'prompt' is required");
    if (cJSON_IsString(p)) {
        if (check_utf8(p->valuestring, "prompt", pe)) return -1;
        return tokenize_into(s, o, p->valuestring, true, false, pe);
    }
    if (!cJSON_IsArray(p) || !p->child) return fail(pe, 400, "prompt", "'prompt' must be a string, a list of strings or token ids");
    if (cJSON_IsNumber(p->child)) return parse_token_list(s, o, p, pe);
    if (cJSON_GetArraySize(p) > s->max_choices) return fail(pe, 400, "prompt", "at most %d prompts per request", s->max_choices);
    for (const cJSON *v = p->child; v; v = v->next) {
        if (cJSON_IsString(v)) {
            if (check_utf8(v->valuestring, "prompt", pe) || tokenize_into(s, o, v->valuestring, true, false, pe)) return -1;
        } else if (cJSON_IsArray(v)) {
            if (parse_token_list(s, o, v, pe)) return -1;
        } else {
            return fail(pe, 400, "prompt", "'prompt' must be a string, a list of strings or token ids");
        }
    }
    return 0;
}

/* Message content as text: a string, an array of text parts (joined), or absent/null.
 * Returns a malloc'd string, or NULL for null/absent (*bad set when the type is wrong). */
static char *content_text(const cJSON *content, int i, tokd_req_err *pe, bool *bad) {
    *bad = false;
    if (!present(content)) return NULL;
    if (cJSON_IsString(content)) return tokd_xstrdup(content->valuestring);
    if (!cJSON_IsArray(content)) {
        *bad = true;
        fail(pe, 400, "messages", "messages[%d].content must be a string or an array of parts", i);
        return NULL;
    }
    tokd_buf b = {0};
    tokd_buf_append(&b, "", 0);
    for (const cJSON *part = content->child; part; part = part->next) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type"), *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text)) {
            tokd_buf_free(&b);
            *bad = true;
            fail(pe, 400, "messages", "messages[%d].content: only text parts are supported", i);
            return NULL;
        }
        tokd_buf_append(&b, text->valuestring, strlen(text->valuestring));
    }
    return b.data;
}

/* An assistant message's tool_calls, normalised for templates: {"id", "type": "function",
 * "function": {"name", "arguments"}}. Most templates want the arguments as an object
 * (they print them with tojson or iterate over them, as transformers users pass them), so
 * a JSON string holding an object becomes that object, and any other string is kept as
 * it is. With string_args, the arguments are text instead, as the OpenAI API sends them:
 * for the templates that concatenate them to a string (Functionary v3.2), which fail on
 * an object as they do in transformers. */
static cJSON *norm_tool_calls(const cJSON *tcs, int i, bool string_args, tokd_req_err *pe) {
    if (!cJSON_IsArray(tcs)) {
        fail(pe, 400, "messages", "messages[%d].tool_calls must be an array", i);
        return NULL;
    }
    cJSON *out = cJSON_CreateArray();
    int k = 0;
    for (const cJSON *tc = tcs->child; tc; tc = tc->next, k++) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name"), *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(tc, "id");
        if (!cJSON_IsObject(tc) || !cJSON_IsObject(fn) || !cJSON_IsString(name) || (present(id) && !cJSON_IsString(id)) ||
            (present(args) && !cJSON_IsString(args) && !cJSON_IsObject(args))) {
            cJSON_Delete(out);
            fail(pe, 400, "messages",
                 "messages[%d].tool_calls[%d] must be {\"id\", \"type\": \"function\", \"function\": {\"name\": string, "
                 "\"arguments\": string}}", i, k);
            return NULL;
        }
        cJSON *o = cJSON_CreateObject(), *f = cJSON_CreateObject();
        if (cJSON_IsString(id)) cJSON_AddStringToObject(o, "id", id->valuestring);
        cJSON_AddStringToObject(o, "type", "function");
        cJSON_AddStringToObject(f, "name", name->valuestring);
        cJSON *a = NULL;
        if (string_args) {
            char *printed = cJSON_IsObject(args) ? cJSON_PrintUnformatted(args) : NULL;
            a = cJSON_CreateString(cJSON_IsString(args) ? args->valuestring : printed ? printed : "{}");
            cJSON_free(printed);
        } else if (cJSON_IsString(args)) {
            a = cJSON_Parse(args->valuestring);
            if (!cJSON_IsObject(a)) {
                cJSON_Delete(a);
                a = cJSON_CreateString(args->valuestring);
            }
        } else if (cJSON_IsObject(args)) {
            a = cJSON_Duplicate(args, 1);
        } else {
            a = cJSON_CreateObject();
        }
        cJSON_AddItemToObject(f, "arguments", a);
        cJSON_AddItemToObject(o, "function", f);
        cJSON_AddItemToArray(out, o);
    }
    return out;
}

/* The request's tools: [{"type": "function", "function": {"name", "description"?, "parameters"?}}]. */
static int check_tools(const cJSON *tools, tokd_req_err *pe) {
    if (!cJSON_IsArray(tools)) return fail(pe, 400, "tools", "'tools' must be an array");
    int k = 0;
    for (const cJSON *t = tools->child; t; t = t->next, k++) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type"), *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name"), *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        if (!cJSON_IsObject(t) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") || !cJSON_IsObject(fn))
            return fail(pe, 400, "tools", "tools[%d] must be {\"type\": \"function\", \"function\": {...}}", k);
        if (!cJSON_IsString(name) || !*name->valuestring) return fail(pe, 400, "tools", "tools[%d].function.name must be a non-empty string", k);
        if (present(params) && !cJSON_IsObject(params) && !cJSON_IsBool(params))
            return fail(pe, 400, "tools", "tools[%d].function.parameters must be a JSON Schema object", k);
    }
    return 0;
}

/* Ways to present a conversation to a template that fails on it as the client sent it.
 * Each is what some real template needs and an OpenAI client does not send:
 * - ADAPT_ARGS_TEXT: tool-call arguments as text (Functionary v3.2 concatenates them);
 * - ADAPT_EMPTY_CONTENT: "" for an assistant turn's null content (Phi-3.5 concatenates
 *   it, Kimi K2 iterates over it);
 * - ADAPT_DEVELOPER_AS_SYSTEM: the developer role as system (few templates know it);
 * - ADAPT_SYSTEM_IN_USER: the leading system text put before the first user turn's, for
 *   templates without a system role (Gemma 2). */
enum { ADAPT_ARGS_TEXT = 1, ADAPT_EMPTY_CONTENT = 2, ADAPT_DEVELOPER_AS_SYSTEM = 4, ADAPT_SYSTEM_IN_USER = 8, N_ADAPT = 16 };

/* The request's messages checked and normalised for the template: role, content as text
 * (null for an assistant turn that only calls tools), name, tool_call_id,
 * reasoning_content, and tool_calls (norm_tool_calls); with the adaptations in adapt.
 * NULL with *pe on a bad message. *can gets the adaptations that would change anything. */
static cJSON *norm_messages(const cJSON *ms, unsigned adapt, unsigned *can, tokd_req_err *pe) {
    *can = 0;
    cJSON *norm = cJSON_CreateArray();
    int i = 0, rc = 0;
    for (const cJSON *m = ms->child; m && !rc; m = m->next, i++) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role)) {
            rc = fail(pe, 400, "messages", "messages[%d] must be an object with a string 'role'", i);
            break;
        }
        const char *r = role->valuestring;
        bool assistant = !strcmp(r, "assistant");
        if (strcmp(r, "system") && strcmp(r, "developer") && strcmp(r, "user") && !assistant && strcmp(r, "tool")) {
            rc = fail(pe, 400, "messages", "messages[%d].role must be system, developer, user, assistant or tool", i);
            break;
        }
        bool bad;
        char *text = content_text(cJSON_GetObjectItemCaseSensitive(m, "content"), i, pe, &bad);
        if (bad) {
            rc = -1;
            break;
        }
        if (text && !tokd_utf8_valid(text, strlen(text))) {
            free(text);
            rc = fail(pe, 400, "messages", "messages[%d].content is not valid UTF-8", i);
            break;
        }
        cJSON *nm = cJSON_CreateObject();
        cJSON_AddItemToArray(norm, nm);
        const bool developer = !strcmp(r, "developer");
        if (developer) *can |= ADAPT_DEVELOPER_AS_SYSTEM;
        cJSON_AddStringToObject(nm, "role", developer && (adapt & ADAPT_DEVELOPER_AS_SYSTEM) ? "system" : r);
        /* assistant turns that only call tools have null content, as in the OpenAI API */
        if (!text && assistant) *can |= ADAPT_EMPTY_CONTENT;
        if (text) cJSON_AddStringToObject(nm, "content", text);
        else if (assistant && !(adapt & ADAPT_EMPTY_CONTENT)) cJSON_AddNullToObject(nm, "content");
        else cJSON_AddStringToObject(nm, "content", "");
        free(text);
        static const char *const copy_str[] = {"name", "tool_call_id", "reasoning_content"};
        for (size_t k = 0; k < sizeof copy_str / sizeof *copy_str; k++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, copy_str[k]);
            if (!present(v)) continue;
            if (!cJSON_IsString(v)) {
                rc = fail(pe, 400, "messages", "messages[%d].%s must be a string", i, copy_str[k]);
                break;
            }
            cJSON_AddStringToObject(nm, copy_str[k], v->valuestring);
        }
        const cJSON *tcs = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        if (!rc && present(tcs)) {
            if (!assistant) {
                rc = fail(pe, 400, "messages", "messages[%d]: only assistant messages have tool_calls", i);
                break;
            }
            cJSON *t = norm_tool_calls(tcs, i, adapt & ADAPT_ARGS_TEXT, pe);
            if (!t) rc = -1;
            else cJSON_AddItemToObject(nm, "tool_calls", t);
            if (t && t->child) *can |= ADAPT_ARGS_TEXT;
        }
    }
    if (rc) {
        cJSON_Delete(norm);
        return NULL;
    }
    if (tokd_chat_system_into_user(norm, adapt & ADAPT_SYSTEM_IN_USER)) *can |= ADAPT_SYSTEM_IN_USER;
    return norm;
}

/* Chat messages -> the model's chat template (chat_render.h) -> prompt tokens. When the
 * template fails on the conversation as sent, it is rendered again with the adaptations
 * that change something (ADAPT_*), fewest first; if none renders, the first error is the
 * answer. The templates' own messages then reach the client, as transformers would raise
 * them. */
static int parse_messages(const tokd_req_ctx *s, tokd_gen_opts *o, const cJSON *root, tokd_req_err *pe) {
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!cJSON_IsArray(ms) || !ms->child) return fail(pe, 400, "messages", "'messages' must be a non-empty array");
    unsigned can;
    cJSON *norm = norm_messages(ms, 0, &can, pe);
    if (!norm) return -1;
    int rc = 0;
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (!rc && present(tools) && check_tools(tools, pe)) rc = -1;
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(root, "chat_template_kwargs");
    if (!rc && present(kw) && !cJSON_IsObject(kw))
        rc = fail(pe, 400, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
    bool gen_prompt = true;
    if (!rc && tokd_req_get_bool(root, "add_generation_prompt", &gen_prompt, pe) < 0) rc = -1;
    if (!rc) {
        char *text = NULL;
        size_t len = 0;
        tokd_err err;
        const cJSON *tools_arg = present(tools) && cJSON_GetArraySize(tools) > 0 ? tools : NULL, *kw_arg = present(kw) ? kw : NULL;
        int failed = tokd_chat_render(s->tpl, norm, tools_arg, gen_prompt, kw_arg, &text, &len, &err);
        for (int bits = 1; failed && bits <= 4; bits++) /* how many adaptations at once */
            for (unsigned adapt = 1; failed && adapt < N_ADAPT; adapt++) {
                if ((adapt & can) != adapt || __builtin_popcount(adapt) != bits) continue;
                unsigned ignore;
                cJSON *adapted = norm_messages(ms, adapt, &ignore, pe); /* the same checks passed once */
                tokd_err err2;
                if (adapted && !tokd_chat_render(s->tpl, adapted, tools_arg, gen_prompt, kw_arg, &text, &len, &err2)) failed = 0;
                cJSON_Delete(adapted);
            }
        if (failed) {
            rc = fail(pe, 400, "messages", "%s", err.msg);
        } else {
            int32_t *toks = NULL;
            size_t n = 0;
            if (tokd_chat_tokenize(s->m, text, len, &toks, &n, &err)) {
                rc = fail(pe, 400, "messages", "cannot tokenize the rendered chat: %s", err.msg);
            } else if (n == 0) {
                free(toks);
                rc = fail(pe, 400, "messages", "the rendered chat prompt is empty");
            } else {
                add_prompt(o, toks, (int32_t)n);
            }
            o->prompt_text = text;
        }
    }
    cJSON_Delete(norm);
    return rc;
}

/* tool_choice: "none" renders the tools but parses no calls; "auto" (the default with tools)
 * parses calls the model makes; "required" or {"type": "function", "function": {"name"}}
 * force one call with a grammar in the model's tool-call format (toolchoice.h).
 * parallel_tool_calls false keeps the answer to the model's first call. */
static int parse_tool_choice(const tokd_req_ctx *s, tokd_gen_opts *o, const cJSON *root, tokd_req_err *pe) {
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    bool have = cJSON_IsArray(tools) && tools->child;
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    const char *force = NULL; /* "" = any tool */
    if (!present(tc) || (cJSON_IsString(tc) && !strcmp(tc->valuestring, "auto"))) {
        o->parse_tools = have;
    } else if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "none")) {
        o->parse_tools = false;
    } else if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "required")) {
        force = "";
    } else if (cJSON_IsObject(tc)) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function"), *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsString(name))
            return fail(pe, 400, "tool_choice", "'tool_choice' object must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
        force = name->valuestring;
    } else {
        return fail(pe, 400, "tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or a function object");
    }
    bool parallel = true;
    if (tokd_req_get_bool(root, "parallel_tool_calls", &parallel, pe) < 0) return -1;
    o->single_call = !parallel;
    if (!force) return 0;
    if (!have) return fail(pe, 400, "tool_choice", "'tool_choice' requires a non-empty 'tools' array");
    o->parse_tools = true;
    tokd_err err;
    char *g = tokd_toolchoice_gbnf(s->tool_fmt, tools, *force ? force : NULL, &err);
    if (!g) return fail(pe, 400, "tool_choice", "%s", err.msg);
    o->grammar = tokd_grammar_parse(g, strlen(g), &err);
    free(g);
    if (!o->grammar) return fail(pe, 400, "tools", "cannot build the tool-call grammar: %s", err.msg);
    return 0;
}

/* response_format (json_object, json_schema) and grammar (GBNF-style text): at most one
 * constraint per request, and none beside a forced tool call. */
static int parse_constraints(tokd_gen_opts *o, const cJSON *root, tokd_req_err *pe) {
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "response_format");
    const cJSON *gr = cJSON_GetObjectItemCaseSensitive(root, "grammar");
    tokd_err err;
    if (present(gr)) {
        if (!cJSON_IsString(gr)) return fail(pe, 400, "grammar", "'grammar' must be a string (GBNF-style grammar text)");
        if (o->grammar) return fail(pe, 400, "grammar", "'grammar' cannot be combined with a forced tool call");
        if (!gr->valuestring[strspn(gr->valuestring, " \t\r\n")])
            return fail(pe, 400, "grammar", "'grammar' is empty (give GBNF-style text with a root rule, or leave it out)");
        o->grammar = tokd_grammar_parse(gr->valuestring, strlen(gr->valuestring), &err);
        if (!o->grammar) return fail(pe, 400, "grammar", "%s", err.msg);
    }
    if (!present(rf)) return 0;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (!cJSON_IsObject(rf) || !cJSON_IsString(type))
        return fail(pe, 400, "response_format", "'response_format' must be an object with a string 'type'");
    const char *t = type->valuestring;
    if (!strcmp(t, "text")) return 0;
    bool any;
    const cJSON *schema = NULL;
    if (!strcmp(t, "json_object")) {
        any = true;
    } else if (!strcmp(t, "json_schema")) {
        const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
        if (!cJSON_IsObject(js)) return fail(pe, 400, "response_format", "'response_format.json_schema' must be an object");
        schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
        if (present(schema) && !cJSON_IsObject(schema) && !cJSON_IsBool(schema))
            return fail(pe, 400, "response_format", "'response_format.json_schema.schema' must be a JSON Schema object");
        any = !present(schema);
        if (any) schema = NULL;
    } else {
        return fail(pe, 400, "response_format", "'response_format.type' must be text, json_object or json_schema");
    }
    if (o->grammar)
        return fail(pe, 400, "response_format", "'response_format' cannot be combined with 'grammar' or a forced tool call");
    o->grammar = tokd_grammar_from_json_schema(schema, any, &err);
    if (!o->grammar) return fail(pe, 400, "response_format", "invalid JSON schema: %s", err.msg);
    return 0;
}

/* OpenAI fields that would change the answer and that tokd does not implement: refused
 * by name rather than ignored, so that no client mistakes the answer for one to what it
 * asked.
 * Their neutral values (echo false, best_of equal to n, an empty suffix) pass. */
static int unsupported(const cJSON *root, bool chat, tokd_req_err *pe) {
    bool b = false;
    if (!chat) {
        if (tokd_req_get_bool(root, "echo", &b, pe) < 0) return -1;
        if (b) return fail(pe, 400, "echo", "'echo' is not supported (the prompt is not returned with the completion)");
        const cJSON *suffix = cJSON_GetObjectItemCaseSensitive(root, "suffix");
        if (present(suffix) && (!cJSON_IsString(suffix) || *suffix->valuestring))
            return fail(pe, 400, "suffix", "'suffix' is not supported (no text insertion)");
        int64_t n = 1, best_of;
        if (get_int(root, "n", 1, 1e6, &n, pe) < 0) return -1;
        best_of = n;
        if (get_int(root, "best_of", 1, 1e6, &best_of, pe) < 0) return -1;
        if (best_of > n) return fail(pe, 400, "best_of", "'best_of' above 'n' is not supported: ask for n choices instead");
        if (best_of < n) return fail(pe, 400, "best_of", "'best_of' must be at least 'n'");
    } else {
        if (present(cJSON_GetObjectItemCaseSensitive(root, "functions")))
            return fail(pe, 400, "functions", "'functions' is not supported: use 'tools' (the current OpenAI form)");
        if (present(cJSON_GetObjectItemCaseSensitive(root, "function_call")))
            return fail(pe, 400, "function_call", "'function_call' is not supported: use 'tool_choice' (the current OpenAI form)");
    }
    return 0;
}

int tokd_gen_opts_parse(const tokd_req_ctx *s, const cJSON *root, bool chat, tokd_gen_opts *o, tokd_req_err *pe) {
    memset(o, 0, sizeof *o);
    tokd_sampler_params_default(&o->sp);
    o->sp.temperature = 1.0f;
    o->sp.top_k = 0;
    o->sp.top_p = 1.0f;
    o->sp.min_p = 0.0f;
    o->sp.seed = s->seed;
    o->max_tokens = chat ? -1 : 16;
    o->n = 1;
    o->n_lp = -1;
    if (!cJSON_IsObject(root)) return fail(pe, 400, NULL, "the request body must be a JSON object");
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (present(model)) {
        if (!cJSON_IsString(model)) return fail(pe, 400, "model", "'model' must be a string");
        if (strcmp(model->valuestring, s->model_id)) {
            pe->code = "model_not_found";
            return fail(pe, 404, "model", "the model '%.200s' does not exist (this server has '%.100s')", model->valuestring, s->model_id);
        }
    }
    double d;
    int64_t v;
    int r;
    if ((r = get_int(root, "max_tokens", 1, 1e9, &v, pe)) < 0) return -1;
    if (r) o->max_tokens = v;
    if ((r = get_int(root, "max_completion_tokens", 1, 1e9, &v, pe)) < 0) return -1;
    if (r) o->max_tokens = v;
    if ((r = get_num(root, "temperature", 0, 2, &d, pe)) < 0) return -1;
    if (r) o->sp.temperature = (float)d;
    if ((r = get_num(root, "top_p", 0, 1, &d, pe)) < 0) return -1;
    if (r) o->sp.top_p = (float)d;
    if ((r = get_int(root, "top_k", -1, 1e6, &v, pe)) < 0) return -1;
    if (r) o->sp.top_k = (int32_t)v;
    if ((r = get_num(root, "min_p", 0, 1, &d, pe)) < 0) return -1;
    if (r) o->sp.min_p = (float)d;
    if ((r = get_num(root, "presence_penalty", -2, 2, &d, pe)) < 0) return -1;
    if (r) o->sp.presence_penalty = (float)d;
    if ((r = get_num(root, "frequency_penalty", -2, 2, &d, pe)) < 0) return -1;
    if (r) o->sp.frequency_penalty = (float)d;
    if ((r = get_num(root, "repetition_penalty", 0.01, 10, &d, pe)) < 0) return -1;
    if (r) o->sp.repeat_penalty = (float)d;
    if ((r = get_int(root, "seed", -9007199254740992.0, 9007199254740992.0, &v, pe)) < 0) return -1;
    if (r) o->sp.seed = (uint64_t)v;
    if ((r = get_int(root, "n", 1, s->max_choices, &v, pe)) < 0) return -1;
    if (r) o->n = v;
    if (tokd_req_get_bool(root, "stream", &o->stream, pe) < 0 || tokd_req_get_bool(root, "ignore_eos", &o->ignore_eos, pe) < 0) return -1;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (present(so)) {
        if (!cJSON_IsObject(so)) return fail(pe, 400, "stream_options", "'stream_options' must be an object");
        if (tokd_req_get_bool(so, "include_usage", &o->include_usage, pe) < 0) return -1;
    }
    const cJSON *user = cJSON_GetObjectItemCaseSensitive(root, "user");
    if (present(user) && !cJSON_IsString(user)) return fail(pe, 400, "user", "'user' must be a string");
    if (unsupported(root, chat, pe)) return -1;
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(root, "stop");
    if (present(stop)) {
        if (cJSON_IsString(stop)) {
            if (check_utf8(stop->valuestring, "stop", pe)) return -1;
            if (*stop->valuestring) o->stop[o->n_stop++] = stop->valuestring;
        } else if (cJSON_IsArray(stop)) {
            if (cJSON_GetArraySize(stop) > 16) return fail(pe, 400, "stop", "at most 16 stop strings");
            for (const cJSON *x = stop->child; x; x = x->next) {
                if (!cJSON_IsString(x)) return fail(pe, 400, "stop", "'stop' must be a string or a list of strings");
                if (check_utf8(x->valuestring, "stop", pe)) return -1;
                if (*x->valuestring) o->stop[o->n_stop++] = x->valuestring;
            }
        } else {
            return fail(pe, 400, "stop", "'stop' must be a string or a list of strings");
        }
    }
    const cJSON *lb = cJSON_GetObjectItemCaseSensitive(root, "logit_bias");
    if (present(lb)) {
        if (!cJSON_IsObject(lb)) return fail(pe, 400, "logit_bias", "'logit_bias' must be an object of token id -> bias");
        for (const cJSON *x = lb->child; x; x = x->next) {
            char *end;
            errno = 0;
            long id = strtol(x->string, &end, 10);
            if (o->sp.n_logit_bias >= 1024) return fail(pe, 400, "logit_bias", "at most 1024 logit_bias entries");
            if (errno || end == x->string || *end || id < 0 || id >= s->m->hp.n_vocab)
                return fail(pe, 400, "logit_bias", "logit_bias key '%.40s' is not a token id (0..%d)", x->string, s->m->hp.n_vocab - 1);
            if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < -100 || x->valuedouble > 100)
                return fail(pe, 400, "logit_bias", "logit_bias values must be numbers between -100 and 100");
            o->bias[o->sp.n_logit_bias].token = (int32_t)id;
            o->bias[o->sp.n_logit_bias++].bias = x->valuedouble <= -100 ? -INFINITY : (float)x->valuedouble;
        }
        o->sp.logit_bias = o->bias;
        if (bans_every_token(o->bias, o->sp.n_logit_bias, s->m->hp.n_vocab))
            return fail(pe, 400, "logit_bias", "'logit_bias' bans every token of the vocabulary (-100 on all %d): nothing could be generated",
                        s->m->hp.n_vocab);
    }
    if (chat) {
        bool lp = false;
        if (tokd_req_get_bool(root, "logprobs", &lp, pe) < 0) return -1;
        if ((r = get_int(root, "top_logprobs", 0, TOKD_SAMPLER_MAX_LOGPROBS, &v, pe)) < 0) return -1;
        if (r && !lp) return fail(pe, 400, "top_logprobs", "'top_logprobs' requires 'logprobs': true");
        if (lp) o->n_lp = r ? (int)v : 0;
    } else {
        if ((r = get_int(root, "logprobs", 0, TOKD_SAMPLER_MAX_LOGPROBS, &v, pe)) < 0) return -1;
        if (r) o->n_lp = (int)v;
    }
    o->sp.n_logprobs = o->n_lp > 0 ? o->n_lp : (o->n_lp == 0 ? 1 : 0); /* 1 so that the chosen token's logprob is computed */
    if (chat ? parse_messages(s, o, root, pe) : parse_prompt(s, o, root, pe)) return -1;
    if (chat && parse_tool_choice(s, o, root, pe)) return -1;
    if (parse_constraints(o, root, pe)) return -1;
    if (chat) /* ChatML on a model without a template: its end-of-turn markers are text */
        for (const char *const *st = tokd_chat_template_stops(s->tpl); *st && o->n_stop < 24; st++) o->stop[o->n_stop++] = *st;
    if ((int64_t)o->n_prompts * o->n > s->max_choices)
        return fail(pe, 400, "n", "prompts x n is %lld, at most %d choices per request", (long long)o->n_prompts * o->n,
                    s->max_choices);
    return 0;
}

/* ---- NUL characters ---------------------------------------------------------------------- */

/* s[i] opens a JSON string: the index of its closing quote (or n); *nul when it holds a \u0000
 * escape or a raw NUL byte (invalid JSON that cJSON takes). Each backslash takes the byte after
 * it along, so "\\u0000" (an escaped backslash, then text) is not one. */
static size_t scan_string(const char *s, size_t n, size_t i, bool *nul) {
    for (i++; i < n && s[i] != '"'; i++) {
        if (s[i] == 0) *nul = true;
        if (s[i] != '\\') continue;
        if (n - i >= 6 && !memcmp(s + i + 1, "u0000", 5)) *nul = true;
        i++;
    }
    return i;
}

static bool key_follows(const char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
    return i < n && s[i] == ':';
}

int tokd_req_find_nul(const char *body, size_t len, char *field, size_t cap) {
    size_t key_at = 0, key_len = 0;
    int depth = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = body[i];
        if (ch == '{' || ch == '[') depth++;
        else if (ch == '}' || ch == ']') depth--;
        if (ch != '"') continue;
        bool nul = false;
        size_t end = scan_string(body, len, i, &nul);
        if (depth == 1 && key_follows(body, len, end + 1)) { /* a top-level key */
            key_at = i + 1;
            key_len = end - i - 1;
        }
        if (nul) {
            if (cap) snprintf(field, cap, "%.*s", (int)(key_len < cap ? key_len : cap - 1), body + key_at);
            return 1;
        }
        i = end;
    }
    return 0;
}
