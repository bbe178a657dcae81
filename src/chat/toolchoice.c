/* toolchoice.c — see toolchoice.h. */
#include "chat/toolchoice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

/* A grammar literal for len bytes: quotes, backslashes and control bytes escaped. */
static void lit(tokd_buf *o, const char *s, size_t len) {
    tokd_buf_append(o, "\"", 1);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') tokd_buf_appendf(o, "\\%c", c);
        else if (c < 0x20 || c == 0x7F) tokd_buf_appendf(o, "\\x%02X", c);
        else tokd_buf_append(o, (const char *)&c, 1);
    }
    tokd_buf_append(o, "\"", 1);
}

static void lits(tokd_buf *o, const char *s) { lit(o, s, strlen(s)); }

static bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9') || c == '-'; }

/* Copy grammar text, prefixing every rule name (definitions and references). Literals,
 * character classes, repetition counts and comments are copied unchanged. */
static void prefixed(tokd_buf *o, const char *g, const char *prefix) {
    size_t pl = strlen(prefix);
    for (const char *p = g; *p;) {
        char c = *p;
        if (c == '"' || c == '[') {
            char close = c == '"' ? '"' : ']';
            const char *q = p + 1;
            while (*q && *q != close) q += (*q == '\\' && q[1]) ? 2 : 1;
            if (*q) q++;
            tokd_buf_append(o, p, (size_t)(q - p));
            p = q;
        } else if (c == '{') {
            const char *q = p;
            while (*q && *q != '}') q++;
            if (*q) q++;
            tokd_buf_append(o, p, (size_t)(q - p));
            p = q;
        } else if (c == '#') {
            const char *q = p;
            while (*q && *q != '\n') q++;
            tokd_buf_append(o, p, (size_t)(q - p));
            p = q;
        } else if (name_start(c)) {
            const char *q = p;
            while (*q && name_char(*q)) q++;
            tokd_buf_append(o, prefix, pl);
            tokd_buf_append(o, p, (size_t)(q - p));
            p = q;
        } else {
            tokd_buf_append(o, p, 1);
            p++;
        }
    }
}

char *tokd_toolchoice_gbnf(tokd_toolcall_format fmt, const cJSON *tools, const char *only_name, tokd_err *err) {
    const char *open, *close, *args_key = "arguments";
    bool functionary = false;
    switch (fmt) {
    case TOKD_TOOLCALL_HERMES: open = "<tool_call>\n{\"name\": "; close = "}\n</tool_call>"; break;
    case TOKD_TOOLCALL_PHI4: open = "<|tool_call|>{\"name\": "; close = "}<|/tool_call|>"; break;
    case TOKD_TOOLCALL_NEMOTRON: open = "<TOOLCALL>[{\"name\": "; close = "}]</TOOLCALL>"; break;
    case TOKD_TOOLCALL_LLAMA3: open = "{\"name\": "; close = "}"; args_key = "parameters"; break;
    case TOKD_TOOLCALL_MISTRAL: open = "[TOOL_CALLS][{\"name\": "; close = "}]"; break;
    case TOKD_TOOLCALL_FUNCTIONARY: open = "<function="; close = "</function>"; functionary = true; break;
    default:
        tokd_seterr(err, "forcing a tool call is not supported for the %s tool-call format",
                    tokd_toolcall_format_name(fmt) ? tokd_toolcall_format_name(fmt) : "unknown");
        return NULL;
    }
    if (!cJSON_IsArray(tools) || !tools->child) {
        tokd_seterr(err, "forcing a tool call needs a non-empty 'tools' array");
        return NULL;
    }
    tokd_buf rules = {0}, alts = {0};
    int k = 0, n_alts = 0;
    for (const cJSON *t = tools->child; t; t = t->next, k++) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsString(name) || !*name->valuestring) {
            tokd_seterr(err, "tools[%d].function.name must be a non-empty string", k);
            goto fail;
        }
        if (only_name && strcmp(only_name, name->valuestring)) continue;
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        bool any = !params || cJSON_IsNull(params);
        tokd_err serr;
        char *g = tokd_json_schema_to_gbnf(any ? NULL : params, any, &serr);
        if (!g) {
            tokd_seterr(err, "tools[%d].function.parameters: %s", k, serr.msg);
            goto fail;
        }
        char prefix[32];
        snprintf(prefix, sizeof prefix, "t%d-", k);
        prefixed(&rules, g, prefix);
        free(g);
        if (rules.len && rules.data[rules.len - 1] != '\n') tokd_buf_append(&rules, "\n", 1);
        tokd_buf_append(&alts, n_alts ? " | " : "", n_alts ? 3 : 0);
        if (functionary) {
            lits(&alts, name->valuestring);
            tokd_buf_appendf(&alts, " \">\" t%d-root", k);
        } else {
            char *quoted = cJSON_PrintUnformatted(name); /* the name as a JSON string */
            tokd_buf q = {0};
            tokd_buf_appendf(&q, "%s, \"%s\": ", quoted ? quoted : "\"\"", args_key);
            free(quoted);
            lit(&alts, q.data, q.len);
            tokd_buf_free(&q);
            tokd_buf_appendf(&alts, " t%d-root", k);
        }
        n_alts++;
    }
    if (!n_alts) {
        tokd_seterr(err, "no tool named '%.200s' in 'tools'", only_name ? only_name : "");
        goto fail;
    }
    tokd_buf out = {0};
    tokd_buf_append(&out, "root ::= ", 9);
    lits(&out, open);
    tokd_buf_appendf(&out, " ( %s ) ", alts.data);
    lits(&out, close);
    tokd_buf_append(&out, "\n", 1);
    tokd_buf_append(&out, rules.data, rules.len);
    tokd_buf_append(&out, "", 0);
    tokd_buf_free(&rules);
    tokd_buf_free(&alts);
    return out.data;
fail:
    tokd_buf_free(&rules);
    tokd_buf_free(&alts);
    return NULL;
}
