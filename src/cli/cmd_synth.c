/* cmd_synth.c — placeholder until `tokd synth` lands (issue 3). */
#include <stdio.h>

#include "cli.h"

int cmd_synth(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "tokd synth: not implemented yet\n");
    return 1;
}
