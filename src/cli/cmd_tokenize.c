/* cmd_tokenize.c — `tokd tokenize -m MODEL [--no-bos] [--special]`.
 * Reads all of stdin byte-exact (any size, any bytes; nothing added or removed), prints
 * the token ids space-separated on one line. By default BOS/EOS are added as the model's
 * metadata says; --no-bos adds neither. Special-token texts are recognised only with
 * --special. Works on vocabulary-only GGUF files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gguf.h"
#include "tokenizer.h"

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL;
    bool no_bos = false, special = false;
    const cli_option opts[] = {
        CLI_MODEL(&model),
        CLI_FLAG("--no-bos", NULL, &no_bos, "add no BOS or EOS token"),
        CLI_FLAG("--special", NULL, &special, "read special-token texts (<s>, <|im_start|>) as those tokens"),
        CLI_END,
    };
    int parsed = cli_parse("tokenize", argc, argv, opts);
    if (parsed) return cli_exit_code(parsed);
    if (!model) {
        fprintf(stderr, "tokd tokenize: missing -m MODEL (usage: tokd tokenize -m MODEL [--no-bos] [--special] < text)\n");
        return 2;
    }
    tokd_err err;
    gguf_file *f = gguf_open(model, &err);
    if (!f) {
        fprintf(stderr, "tokd tokenize: %s\n", err.msg);
        return 1;
    }
    tokd_tokenizer *t = tokd_tokenizer_load(f, &err);
    gguf_close(f);
    if (!t) {
        fprintf(stderr, "tokd tokenize: %s: %s\n", model, err.msg);
        return 1;
    }
    size_t in_len = 0;
    char *in = tokd_read_stream(stdin, &in_len);
    if (!in) {
        fprintf(stderr, "tokd tokenize: reading stdin: %s\n", strerror(errno));
        tokd_tokenizer_free(t);
        return 1;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = tokd_tokenize(t, in, in_len, !no_bos, special, &ids, &n, &err);
    free(in);
    tokd_tokenizer_free(t);
    if (rc < 0) {
        fprintf(stderr, "tokd tokenize: %s\n", err.msg);
        return 1;
    }
    tokd_buf out = {0};
    for (size_t i = 0; i < n; i++) tokd_buf_appendf(&out, i ? " %d" : "%d", ids[i]);
    tokd_buf_append(&out, "\n", 1);
    free(ids);
    size_t want = out.len, wrote = fwrite(out.data, 1, out.len, stdout);
    tokd_buf_free(&out);
    if (wrote != want || fflush(stdout) != 0) {
        fprintf(stderr, "tokd tokenize: writing stdout failed\n");
        return 1;
    }
    return 0;
}
