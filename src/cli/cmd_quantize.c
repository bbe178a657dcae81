/* cmd_quantize.c — placeholder until `tokd quantize` lands (issue 3). */
#include <stdio.h>

#include "cli.h"

int cmd_quantize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "tokd quantize: not implemented yet\n");
    return 1;
}
