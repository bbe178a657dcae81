/* cmd_perplexity.c — `tokd perplexity -m MODEL -f TEXT [-c 512] [-b N] [--chunks N]
 * [--parse-special] [-t N]`: the model's perplexity on a text, the figure people compare
 * quantized files by. The text is cut into chunks of -c tokens, each evaluated from an
 * empty cache with BOS first, and each chunk's second half of positions is scored on the
 * token that follows: llama-perplexity's and llama-imatrix's scoring, run by the same
 * code as `tokd imatrix` (src/imatrix_collect.h) with nothing collected. The running
 * estimate goes to stderr chunk by chunk, the final one, with its standard error, to
 * stdout. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "imatrix_collect.h"

int cmd_perplexity(int argc, char **argv) {
    const char *model_path = NULL, *text_path = NULL;
    long n_ctx = 512, n_batch = 0, n_chunks = 0, n_threads = 0;
    bool parse_special = false;
    const cli_option opts[] = {
        CLI_MODEL(&model_path),
        CLI_STR("-f", "--file", &text_path, "TEXT", "the text file to score"),
        CLI_INT("-c", "--ctx-size", &n_ctx, 16, 1 << 20, "N", "tokens per chunk (default 512)"),
        CLI_INT("-b", "--batch-size", &n_batch, 0, 1 << 20, "N", "tokens per batch within a chunk (default: the chunk)"),
        CLI_INT("--chunks", NULL, &n_chunks, 0, 1 << 30, "N", "score at most N chunks (default 0: all)"),
        CLI_FLAG("--parse-special", NULL, &parse_special, "read special tokens written in the text as such"),
        CLI_THREADS(&n_threads),
        CLI_END,
    };
    int parsed = cli_parse("perplexity", argc, argv, opts);
    if (parsed) return cli_exit_code(parsed);
    if (!model_path || !text_path) {
        cli_die_msg("perplexity", "need -m MODEL -f TEXT");
        return 2;
    }
    size_t len = 0;
    char *text = tokd_read_file(text_path, &len);
    if (!text) {
        fprintf(stderr, "tokd perplexity: cannot read '%s'\n", text_path);
        return 1;
    }
    tokd_err err;
    tokd_model *m = tokd_model_load(model_path, &err);
    if (!m) {
        fprintf(stderr, "tokd perplexity: %s\n", err.msg);
        free(text);
        return 1;
    }
    tokd_imatrix_params p = {.n_ctx = (int32_t)n_ctx, .n_batch = (int32_t)n_batch, .n_chunks = (int32_t)n_chunks,
                             .n_threads = (int32_t)n_threads, .parse_special = parse_special,
                             .log_name = "tokd perplexity"};
    tokd_imatrix_ppl ppl;
    const double t0 = tokd_now();
    int chunks = tokd_imatrix_compute(m, text, len, &p, NULL, &ppl, stderr, &err);
    int rc = 0;
    double estimate, se;
    if (chunks < 0) {
        fprintf(stderr, "tokd perplexity: %s\n", err.msg);
        rc = 1;
    } else if (!tokd_imatrix_ppl_estimate(&ppl, &estimate, &se)) {
        fprintf(stderr, "tokd perplexity: chunks of %ld tokens score fewer than two positions\n", n_ctx);
        rc = 1;
    } else {
        printf("PPL %.4f +/- %.5f over %lld positions (%d chunks of %ld tokens)\n", estimate, se, (long long)ppl.n,
               chunks, n_ctx);
        fprintf(stderr, "tokd perplexity: %.2f s, %.1f tokens/s\n", tokd_now() - t0,
                (double)chunks * (double)n_ctx / (tokd_now() - t0));
    }
    tokd_model_free(m);
    free(text);
    return rc;
}
