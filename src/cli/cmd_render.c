/* cmd_render.c — placeholder until the Jinja interpreter lands. */
#include <stdio.h>

#include "cli.h"

int cmd_render(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "tokd render: not implemented yet\n");
    return 1;
}
