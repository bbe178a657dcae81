/* cmd_quantize.c — `tokd quantize IN.gguf OUT.gguf TYPE [-t N] [-q] [--pure]
 * [--output-tensor-type T] [--token-embedding-type T] [--allow-requantize]
 * [--imatrix FILE]`: convert a model's F32/F16/BF16 weights to TYPE (a type or a mix;
 * see src/quant_plan.h for the rules), copying all metadata and setting
 * general.file_type as llama.cpp does. The options are llama-quantize's (src/quantize.h;
 * --imatrix reads either of llama-imatrix's formats, src/imatrix.h). Per-tensor lines go
 * to stderr unless -q. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "quantize.h"

typedef struct {
    const char *arg[3];
    int n;
} positional;

/* IN.gguf OUT.gguf TYPE: an argument that is not an option. */
static int add_positional(const char *cmd, const char *opt, const char *a, void *dst) {
    positional *pos = dst;
    if (a[0] == '-' && a[1]) {
        fprintf(stderr, "tokd %s: unknown option '%s'\n", cmd, a);
        return -1;
    }
    if (pos->n == 3) {
        fprintf(stderr, "tokd %s: too many arguments ('%s')\n", cmd, a);
        return -1;
    }
    pos->arg[pos->n++] = a;
    return 0;
}

int cmd_quantize(int argc, char **argv) {
    positional p = {0};
    long n_threads = 0;
    bool quiet = false;
    tokd_quantize_opts qo = {0};
    const cli_option opts[] = {CLI_THREADS(&n_threads),
                               CLI_QUIET(&quiet),
                               CLI_FLAG("--pure", NULL, &qo.pure, "TYPE for every matrix, without the mixes' rules"),
                               CLI_STR("--output-tensor-type", NULL, &qo.output_type, "T", "the type of output.weight"),
                               CLI_STR("--token-embedding-type", NULL, &qo.embd_type, "T", "the type of token_embd.weight"),
                               CLI_FLAG("--allow-requantize", NULL, &qo.allow_requantize, "accept quantized input (dequantized first; lower quality)"),
                               CLI_STR("--imatrix", NULL, &qo.imatrix, "FILE", "an importance matrix (tokd imatrix or llama-imatrix)"),
                               CLI_REST(add_positional, &p)};
    int parsed = cli_parse("quantize", argc, argv, opts);
    if (parsed) return cli_exit_code(parsed);
    if (p.n != 3) {
        fprintf(stderr, "tokd quantize: need IN.gguf OUT.gguf TYPE (types: %s)\n", tokd_qtarget_list());
        return 2;
    }
    if (!tokd_qtarget_find(p.arg[2])) {
        tokd_err err;
        tokd_qtarget_unknown(p.arg[2], &err);
        fprintf(stderr, "tokd quantize: %s\n", err.msg);
        return 2;
    }
    if (!strcmp(p.arg[0], p.arg[1])) {
        fprintf(stderr, "tokd quantize: output '%s' is the input file\n", p.arg[1]);
        return 2;
    }
    tokd_err err;
    if (tokd_quantize_file_opts(p.arg[0], p.arg[1], p.arg[2], &qo, (int)n_threads, quiet ? NULL : stderr, &err)) {
        fprintf(stderr, "tokd quantize: %s\n", err.msg);
        return 1;
    }
    return 0;
}
