/* cmd_imatrix.c — `tokd imatrix -m MODEL -f TEXT -o OUT [-c N] [-b N] [--chunks N]
 * [--process-output] [-t N]`: an importance matrix of MODEL over the calibration text in
 * TEXT (src/imatrix_collect.h), written in llama-imatrix's legacy format for
 * `tokd quantize --imatrix` (and llama-quantize). -c: tokens per chunk (default 512),
 * -b: tokens per forward batch (default: the chunk), --chunks: at most this many chunks,
 * --process-output: include output.weight, as llama-imatrix's option of that name. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "imatrix_collect.h"

int cmd_imatrix(int argc, char **argv) {
    const char *model_path = NULL, *text_path = NULL, *out_path = NULL;
    long n_threads = 0, n_ctx = 512, n_batch = 0, n_chunks = 0;
    bool process_output = false;
    const cli_option opts[] = {
        CLI_MODEL(&model_path),
        CLI_STR("-f", "--file", &text_path),
        CLI_STR("-o", "--output", &out_path),
        CLI_INT("-c", "--ctx-size", &n_ctx, 16, 1 << 20),
        CLI_INT("-b", "--batch-size", &n_batch, 0, 1 << 20),
        CLI_INT("--chunks", NULL, &n_chunks, 0, 1 << 30),
        CLI_FLAG("--process-output", NULL, &process_output),
        CLI_THREADS(&n_threads),
        CLI_END,
    };
    if (cli_parse("imatrix", argc, argv, opts)) return 2;
    if (!model_path || !text_path || !out_path) {
        fprintf(stderr, "tokd imatrix: need -m MODEL -f TEXT -o OUT\n");
        return 2;
    }
    tokd_err err;
    size_t len;
    char *text = tokd_read_file(text_path, &len);
    if (!text) {
        fprintf(stderr, "tokd imatrix: cannot read '%s'\n", text_path);
        return 1;
    }
    tokd_model *m = tokd_model_load(model_path, &err);
    if (!m) {
        fprintf(stderr, "tokd imatrix: %s\n", err.msg);
        free(text);
        return 1;
    }
    tokd_imatrix_collector *c = tokd_imatrix_collector_new(m, process_output);
    const tokd_imatrix_params p = {(int32_t)n_ctx, (int32_t)n_batch, (int32_t)n_chunks, (int32_t)n_threads};
    int chunks = tokd_imatrix_compute(m, text, len, &p, c, stderr, &err);
    int rc = chunks < 0 || tokd_imatrix_collector_write(c, out_path, text_path, chunks, &err);
    if (rc)
        fprintf(stderr, "tokd imatrix: %s\n", err.msg);
    else
        fprintf(stderr, "tokd imatrix: %lld tokens in %d chunks; wrote %s\n", (long long)tokd_imatrix_collector_tokens(c),
                chunks, out_path);
    tokd_imatrix_collector_free(c);
    tokd_model_free(m);
    free(text);
    return rc ? 1 : 0;
}
