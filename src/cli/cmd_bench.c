/* cmd_bench.c — placeholder until `tokd bench` lands (issue 3). */
#include <stdio.h>

#include "cli.h"

int cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "tokd bench: not implemented yet\n");
    return 1;
}
