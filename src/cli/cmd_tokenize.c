/* cmd_tokenize.c — `tokd tokenize` (placeholder until the tokenizer lands). */
#include <stdio.h>

#include "cli.h"

int cmd_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_die_msg("tokenize", "not implemented yet");
    return 1;
}
