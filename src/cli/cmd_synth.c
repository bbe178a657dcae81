/* cmd_synth.c — `tokd synth -o OUT.gguf --shape NAME --type T [--vocab VOCAB.gguf]
 * [--seed S] [-t N] [-q]`: a random-weight model of a real shape (see src/synth.h). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "quantize.h"
#include "synth.h"

int cmd_synth(int argc, char **argv) {
    tokd_synth_params p = {0};
    p.log = stderr;
    const char *v;
    long n_threads = 0;
    for (int i = 1; i < argc; i++) {
        int r;
        if ((r = cli_opt(argc, argv, &i, "-o", "--output", &v))) {
            if (r < 0) return 2;
            p.out_path = v;
        } else if ((r = cli_opt(argc, argv, &i, "--shape", NULL, &v))) {
            if (r < 0) return 2;
            p.shape = v;
        } else if ((r = cli_opt(argc, argv, &i, "--type", NULL, &v))) {
            if (r < 0) return 2;
            p.type = v;
        } else if ((r = cli_opt(argc, argv, &i, "--vocab", NULL, &v))) {
            if (r < 0) return 2;
            p.vocab_path = v;
        } else if ((r = cli_opt(argc, argv, &i, "--seed", NULL, &v))) {
            long seed;
            if (r < 0 || cli_int("synth", "--seed", v, 0, 0x7fffffffffffffffL, &seed)) return 2;
            p.seed = (uint64_t)seed;
        } else if ((r = cli_opt(argc, argv, &i, "-t", "--threads", &v))) {
            if (r < 0 || cli_int("synth", "-t", v, 1, 1024, &n_threads)) return 2;
        } else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
            p.log = NULL;
        } else {
            fprintf(stderr, "tokd synth: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!p.out_path || !p.shape || !p.type) {
        fprintf(stderr, "tokd synth: need -o OUT.gguf --shape NAME --type T (shapes: %s)\n", tokd_synth_shape_list());
        return 2;
    }
    if (!tokd_synth_shape_find(p.shape)) {
        fprintf(stderr, "tokd synth: unknown shape '%s' (shapes: %s)\n", p.shape, tokd_synth_shape_list());
        return 2;
    }
    if (!tokd_qtarget_find(p.type)) {
        fprintf(stderr, "tokd synth: unknown type '%s' (supported: %s)\n", p.type, tokd_qtarget_list());
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
