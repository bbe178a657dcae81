/* cmd_render.c — `tokd render --template FILE.jinja`: renders a chat template with the JSON
 * object read from stdin (messages, tools, add_generation_prompt, bos_token, eos_token and
 * any other keys, each a template variable) and writes the text to stdout byte-exact.
 * add_generation_prompt defaults to false, as Hugging Face passes it. Errors: one line,
 * "tokd render: FILE:LINE:COL: message", and exit status 1. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "cli.h"

/* Add "add_generation_prompt": false when the object lacks it. Returns a new buffer or NULL. */
static char *with_defaults(const char *json, size_t len, size_t *out_len) {
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) return NULL;
    bool has = !cJSON_IsObject(root) || cJSON_GetObjectItemCaseSensitive(root, "add_generation_prompt") != NULL;
    bool empty = cJSON_IsObject(root) && root->child == NULL;
    cJSON_Delete(root);
    if (has) return NULL;
    const char *brace = memchr(json, '{', len);
    if (!brace) return NULL;
    static const char ins[] = "\"add_generation_prompt\": false";
    size_t pre = (size_t)(brace - json) + 1;
    char *o = tokd_xmalloc(len + sizeof ins + 2);
    memcpy(o, json, pre);
    memcpy(o + pre, ins, sizeof ins - 1);
    size_t n = pre + sizeof ins - 1;
    if (!empty) o[n++] = ',';
    memcpy(o + n, json + pre, len - pre);
    n += len - pre;
    *out_len = n;
    return o;
}

static int unknown_argument(const char *cmd, const char *opt, const char *a, void *dst) {
    fprintf(stderr, "tokd %s: unknown argument '%s' (usage: tokd render --template FILE.jinja < context.json)\n", cmd, a);
    return -1;
}

int cmd_render(int argc, char **argv) {
    const char *path = NULL;
    const cli_option opts[] = {CLI_STR("--template", "-t", &path, "FILE", "the Jinja chat template"), CLI_REST(unknown_argument, NULL)};
    int parsed = cli_parse("render", argc, argv, opts);
    if (parsed) return cli_exit_code(parsed);
    if (!path) {
        cli_die_msg("render", "missing --template FILE.jinja");
        return 2;
    }
    size_t tlen;
    char *tsrc = tokd_read_file(path, &tlen);
    if (!tsrc) {
        fprintf(stderr, "tokd render: cannot read %s: %s\n", path, strerror(errno));
        return 1;
    }
    size_t clen;
    char *ctx = tokd_read_stream(stdin, &clen);
    if (!ctx) {
        free(tsrc);
        cli_die_msg("render", "cannot read stdin");
        return 1;
    }
    size_t dlen;
    char *dctx = with_defaults(ctx, clen, &dlen);
    if (dctx) {
        free(ctx);
        ctx = dctx;
        clen = dlen;
    }
    tokd_err err = {{0}};
    int rc = 1;
    jinja_template *t = jinja_parse(tsrc, tlen, &err);
    if (!t) {
        fprintf(stderr, "tokd render: %s:%s\n", path, err.msg);
    } else {
        char *out;
        size_t olen;
        int r = jinja_render_json(t, ctx, clen, NULL, &out, &olen, &err);
        if (r == JINJA_ERR_CONTEXT)
            fprintf(stderr, "tokd render: stdin: %s\n", err.msg);
        else if (r)
            fprintf(stderr, "tokd render: %s:%s\n", path, err.msg);
        else {
            if (fwrite(out, 1, olen, stdout) != olen || fflush(stdout) != 0)
                fprintf(stderr, "tokd render: write error\n");
            else
                rc = 0;
            free(out);
        }
        jinja_free(t);
    }
    free(tsrc);
    free(ctx);
    return rc;
}
