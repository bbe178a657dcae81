/* chat_render.c — see chat_render.h. */
#include "chat/chat_render.h"

#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

static const char chatml[] =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + (message['content'] if message['content'] is string else '') + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

static const char *const chatml_stops[] = {"<|im_end|>", "<|im_start|>", NULL};
static const char *const no_stops[] = {NULL};

struct tokd_chat_template {
    jinja_template *tpl;
    bool fallback;
    char *bos, *eos;
};

static char *token_text(const tokd_model *m, int32_t id) {
    size_t len = 0;
    const char *s = id >= 0 ? tokd_token_text(m->tok, id, &len) : NULL;
    char *r = tokd_xmalloc(len + 1);
    if (s && len) memcpy(r, s, len);
    r[s ? len : 0] = 0;
    return r;
}

tokd_chat_template *tokd_chat_template_from_source(const tokd_model *m, const char *src, size_t len, tokd_err *err) {
    tokd_err perr;
    jinja_template *tpl = jinja_parse(src, len, &perr);
    if (!tpl) {
        tokd_seterr(err, "chat template: %s", perr.msg);
        return NULL;
    }
    tokd_chat_template *t = tokd_xcalloc(1, sizeof *t);
    t->tpl = tpl;
    t->bos = token_text(m, tokd_token_bos(m->tok));
    t->eos = token_text(m, tokd_token_eos(m->tok));
    return t;
}

tokd_chat_template *tokd_chat_template_new(const tokd_model *m, tokd_err *err) {
    gguf_str src;
    int r = gguf_get_str(m->gguf, "tokenizer.chat_template", &src, err);
    if (r < 0) return NULL;
    if (r == 0 && src.len > 0) return tokd_chat_template_from_source(m, src.ptr, (size_t)src.len, err);
    tokd_chat_template *t = tokd_chat_template_from_source(m, chatml, sizeof chatml - 1, err);
    if (t) t->fallback = true;
    return t;
}

void tokd_chat_template_free(tokd_chat_template *t) {
    if (!t) return;
    jinja_free(t->tpl);
    free(t->bos);
    free(t->eos);
    free(t);
}

bool tokd_chat_template_is_fallback(const tokd_chat_template *t) { return t->fallback; }

const char *const *tokd_chat_template_stops(const tokd_chat_template *t) { return t->fallback ? chatml_stops : no_stops; }

int tokd_chat_render(const tokd_chat_template *t, const cJSON *messages, const cJSON *tools, bool add_generation_prompt,
                     const cJSON *extra, char **out, size_t *out_len, tokd_err *err) {
    cJSON *ctx = cJSON_CreateObject();
    if (extra && cJSON_IsObject(extra))
        for (const cJSON *it = extra->child; it; it = it->next)
            if (it->string) cJSON_AddItemToObject(ctx, it->string, cJSON_Duplicate(it, 1));
    cJSON_DeleteItemFromObject(ctx, "messages");
    cJSON_AddItemToObject(ctx, "messages", cJSON_Duplicate(messages, 1));
    if (tools && cJSON_IsArray(tools)) {
        cJSON_DeleteItemFromObject(ctx, "tools");
        cJSON_AddItemToObject(ctx, "tools", cJSON_Duplicate(tools, 1));
    }
    cJSON_DeleteItemFromObject(ctx, "add_generation_prompt");
    cJSON_AddBoolToObject(ctx, "add_generation_prompt", add_generation_prompt);
    if (!cJSON_GetObjectItemCaseSensitive(ctx, "bos_token")) cJSON_AddStringToObject(ctx, "bos_token", t->bos);
    if (!cJSON_GetObjectItemCaseSensitive(ctx, "eos_token")) cJSON_AddStringToObject(ctx, "eos_token", t->eos);
    char *json = cJSON_PrintUnformatted(ctx);
    cJSON_Delete(ctx);
    if (!json) return tokd_seterr(err, "chat template: cannot build the context");
    tokd_err rerr;
    int rc = jinja_render_json(t->tpl, json, strlen(json), NULL, out, out_len, &rerr);
    free(json);
    if (rc != 0) return tokd_seterr(err, "chat template: %s", rerr.msg);
    return 0;
}

static bool is_role(const cJSON *m, const char *role) {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
    return cJSON_IsString(r) && !strcmp(r->valuestring, role);
}

bool tokd_chat_system_into_user(cJSON *messages, bool apply) {
    cJSON *user = messages->child;
    while (user && (is_role(user, "system") || is_role(user, "developer"))) user = user->next;
    if (user == messages->child || !user || !is_role(user, "user")) return false;
    if (!apply) return true;
    tokd_buf b = {0};
    tokd_buf_append(&b, "", 0);
    while (messages->child != user) {
        cJSON *sys = cJSON_DetachItemViaPointer(messages, messages->child);
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(sys, "content");
        if (cJSON_IsString(c) && *c->valuestring) {
            tokd_buf_append(&b, c->valuestring, strlen(c->valuestring));
            tokd_buf_append(&b, "\n\n", 2);
        }
        cJSON_Delete(sys);
    }
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(user, "content");
    if (cJSON_IsString(c)) tokd_buf_append(&b, c->valuestring, strlen(c->valuestring));
    cJSON_ReplaceItemInObjectCaseSensitive(user, "content", cJSON_CreateString(b.data));
    tokd_buf_free(&b);
    return true;
}

int tokd_chat_tokenize(const tokd_model *m, const char *text, size_t len, int32_t **out, size_t *n_out, tokd_err *err) {
    tokd_tokenizer_info ti;
    tokd_tokenizer_get_info(m->tok, &ti);
    size_t bl = 0;
    const char *bos = ti.bos >= 0 ? tokd_token_text(m->tok, ti.bos, &bl) : NULL;
    bool starts_with_bos = bos && bl > 0 && len >= bl && memcmp(text, bos, bl) == 0;
    int32_t *toks = NULL;
    size_t n = 0;
    if (tokd_tokenize(m->tok, text, len, false, true, &toks, &n, err)) return -1;
    if (ti.add_bos && ti.bos >= 0 && !starts_with_bos) {
        toks = tokd_xrealloc(toks, (n + 1) * sizeof *toks);
        memmove(toks + 1, toks, n * sizeof *toks);
        toks[0] = ti.bos;
        n++;
    }
    *out = toks;
    *n_out = n;
    return 0;
}
