/* cmd_synth.c — `tokd synth -o OUT.gguf --shape NAME --type T [--vocab VOCAB.gguf]
 * [--seed S] [-t N] [-q]`: a random-weight model of a real shape (see src/synth.h). */
#include <stdio.h>

#include "cli.h"
#include "quantize.h"
#include "synth.h"

int cmd_synth(int argc, char **argv) {
    tokd_synth_params p = {0};
    p.log = stderr;
    long n_threads = 0;
    bool quiet = false;
    const cli_option opts[] = {
        CLI_STR("-o", "--output", &p.out_path, "FILE", "the GGUF file to write"),
        CLI_STR("--shape", NULL, &p.shape, "NAME", "the model shape (below)"),
        CLI_STR("--type", NULL, &p.type, "T", "the weight type or mix (below)"),
        CLI_STR("--vocab", NULL, &p.vocab_path, "FILE", "the GGUF file to copy the tokenizer from (default: the shape's in ../shared)"),
        CLI_INT("--seed", NULL, &p.seed, 0, 0x7fffffffffffffffL, "S", "the weights' seed (default 0)"),
        CLI_THREADS(&n_threads),
        CLI_QUIET(&quiet),
        CLI_END,
    };
    int parsed = cli_parse("synth", argc, argv, opts);
    if (parsed) return cli_exit_code(parsed);
    if (quiet) p.log = NULL;
    if (!p.out_path || !p.shape || !p.type) {
        fprintf(stderr, "tokd synth: need -o OUT.gguf --shape NAME --type T (shapes: %s)\n", tokd_synth_shape_list());
        return 2;
    }
    if (!tokd_synth_shape_find(p.shape)) {
        fprintf(stderr, "tokd synth: unknown shape '%s' (shapes: %s)\n", p.shape, tokd_synth_shape_list());
        return 2;
    }
    if (!tokd_qtarget_find(p.type)) {
        tokd_err err;
        tokd_qtarget_unknown(p.type, &err);
        fprintf(stderr, "tokd synth: %s\n", err.msg);
        return 2;
    }
    p.n_threads = (int)n_threads;
    tokd_err err;
    if (tokd_synth(&p, &err)) {
        fprintf(stderr, "tokd synth: %s\n", err.msg);
        return 1;
    }
    return 0;
}
