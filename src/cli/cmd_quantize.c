/* cmd_quantize.c — `tokd quantize IN.gguf OUT.gguf TYPE [-t N] [-q]`: convert a model's
 * F32/F16/BF16 weights to TYPE (a type or a mix; see src/quantize.h for the rules),
 * copying all metadata and setting general.file_type as llama.cpp does. Per-tensor
 * lines go to stderr unless -q. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "quantize.h"

int cmd_quantize(int argc, char **argv) {
    const char *pos[3] = {0}, *v;
    int n_pos = 0;
    long n_threads = 0;
    int quiet = 0;
    for (int i = 1; i < argc; i++) {
        int r;
        if ((r = cli_opt(argc, argv, &i, "-t", "--threads", &v))) {
            if (r < 0 || cli_int("quantize", "-t", v, 1, 1024, &n_threads)) return 2;
        } else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
            quiet = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "tokd quantize: unknown option '%s'\n", argv[i]);
            return 2;
        } else if (n_pos < 3) {
            pos[n_pos++] = argv[i];
        } else {
            fprintf(stderr, "tokd quantize: too many arguments ('%s')\n", argv[i]);
            return 2;
        }
    }
    if (n_pos != 3) {
        fprintf(stderr, "tokd quantize: need IN.gguf OUT.gguf TYPE (types: %s)\n", tokd_qtarget_list());
        return 2;
    }
    if (!tokd_qtarget_find(pos[2])) {
        fprintf(stderr, "tokd quantize: unknown type '%s' (supported: %s)\n", pos[2], tokd_qtarget_list());
        return 2;
    }
    if (!strcmp(pos[0], pos[1])) {
        fprintf(stderr, "tokd quantize: output '%s' is the input file\n", pos[1]);
        return 2;
    }
    tokd_err err;
    if (tokd_quantize_file(pos[0], pos[1], pos[2], (int)n_threads, quiet ? NULL : stderr, &err)) {
        fprintf(stderr, "tokd quantize: %s\n", err.msg);
        return 1;
    }
    return 0;
}
