/* cmd_logits.c — `tokd logits`: evaluate a prompt (-p, or -f from a file) in one batched
 * pass and write the logits of every position as little-endian float32,
 * n_positions x n_vocab. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "model.h"

int cmd_logits(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *prompt_file = NULL, *out_path = NULL;
    long n_threads = 0;
    const cli_option opts[] = {
        CLI_MODEL(&model_path),
        CLI_STR("-p", "--prompt", &prompt, "TEXT", "the prompt (with the model's default BOS handling)"),
        CLI_STR("-f", "--file", &prompt_file, "FILE", "the prompt read from FILE ('-': stdin), byte for byte"),
        CLI_STR("-o", "--output", &out_path, "FILE", "where to write the float32 logits ('-': stdout)"),
        CLI_THREADS(&n_threads),
        CLI_END,
    };
    int parsed = cli_parse("logits", argc, argv, opts);
    if (parsed) return cli_exit_code(parsed);
    if (!model_path || (!prompt && !prompt_file) || !out_path) {
        fprintf(stderr, "tokd logits: need -m MODEL -p PROMPT (or -f FILE) -o FILE\n");
        return 2;
    }
    size_t prompt_len = 0;
    char *prompt_owned = NULL;
    int bad_prompt = cli_prompt("logits", prompt, prompt_file, &prompt, &prompt_len, &prompt_owned);
    if (bad_prompt) return bad_prompt;
    tokd_err err;
    tokd_model *m = tokd_model_load(model_path, &err);
    if (!m) {
        fprintf(stderr, "tokd logits: %s\n", err.msg);
        free(prompt_owned);
        return 1;
    }
    int32_t *toks = NULL;
    size_t n = 0;
    int rc = 1;
    tokd_ctx *c = NULL;
    float *logits = NULL;
    tokd_batch_entry *batch = NULL;
    FILE *fp = NULL;
    const int bad_tokens = tokd_tokenize(m->tok, prompt, prompt_len, true, false, &toks, &n, &err);
    free(prompt_owned);
    if (bad_tokens) goto fail;
    if (n == 0) {
        tokd_seterr(&err, "the prompt has no tokens");
        goto fail;
    }
    tokd_ctx_params cp;
    tokd_ctx_params_default(&cp);
    cp.n_threads = (int32_t)n_threads;
    cp.n_batch = (int32_t)n;
    if ((int32_t)n > m->hp.n_ctx_train) cp.n_ctx = (int32_t)n;
    else cp.n_ctx = m->hp.n_ctx_train;
    c = tokd_ctx_new(m, &cp, &err);
    if (!c) goto fail;
    size_t V = (size_t)m->hp.n_vocab;
    logits = malloc(n * V * sizeof(float));
    batch = malloc(n * sizeof *batch);
    if (!logits || !batch) {
        tokd_seterr(&err, "out of memory for %zu x %zu logits", n, V);
        goto fail;
    }
    for (size_t i = 0; i < n; i++) batch[i] = (tokd_batch_entry){toks[i], (int32_t)i, 0, true};
    if (tokd_forward(c, batch, (int32_t)n, logits, &err)) goto fail;
    const bool to_stdout = !strcmp(out_path, "-");
    fp = to_stdout ? stdout : fopen(out_path, "wb");
    if (!fp) {
        tokd_seterr(&err, "cannot create '%s': %s", out_path, strerror(errno));
        goto fail;
    }
    errno = 0;
    const bool written = fwrite(logits, sizeof(float), n * V, fp) == n * V;
    /* also when the write failed: the FILE is freed (stdout is only flushed) */
    const bool closed = to_stdout ? fflush(fp) == 0 : fclose(fp) == 0;
    fp = NULL;
    if (!written || !closed) {
        tokd_seterr(&err, "cannot write '%s': %s", to_stdout ? "stdout" : out_path, strerror(errno ? errno : EIO));
        goto fail;
    }
    fprintf(stderr, "tokd logits: %zu positions x %zu logits written to %s\n", n, V, to_stdout ? "stdout" : out_path);
    rc = 0;
fail:
    if (rc) fprintf(stderr, "tokd logits: %s\n", err.msg);
    if (fp) fclose(fp);
    free(batch);
    free(logits);
    free(toks);
    tokd_ctx_free(c);
    tokd_model_free(m);
    return rc;
}
