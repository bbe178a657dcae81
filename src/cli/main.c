/* main.c — `tokd` entry point: dispatches to the subcommand named by argv[1]. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *usage;
} command;

static const command commands[] = {
    {"run", cmd_run, "run -m MODEL -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S] [--stop STR]... [-t THREADS] [--grammar-file F] [--json-schema F]  (README lists all)"},
    {"tokenize", cmd_tokenize, "tokenize -m MODEL [--no-bos] [--special]   (text on stdin)"},
    {"logits", cmd_logits, "logits -m MODEL -p PROMPT -o FILE"},
    {"info", cmd_info, "info -m MODEL"},
    {"render", cmd_render, "render --template FILE.jinja   (JSON on stdin)"},
    {"serve", cmd_serve, "serve -m MODEL [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--max-seqs N] [--kv-mem MIB] [--ctx N] [-t N] [--timeout S] [--chat-template-file F] [--tool-format NAME] [--reasoning-format NAME] [--no-prefix-cache]  (README lists all)"},
    {"bench-serve", cmd_bench_serve, "bench-serve [--host H] [--port P] [-c CLIENTS] [-n REQUESTS] [--max-tokens N] [--prompt-words N] [--shared-prefix-words N] [--temp T] [--api-key K]"},
    {"chat", cmd_chat, "chat -m MODEL [--system TEXT] [-n N] [--temp T] [--seed S] [-t N] [-c CTX]"},
    {"bench", cmd_bench, "bench -m MODEL [-p 512] [-n 128] [-r 3] [-t N] [--json]"},
    {"quantize", cmd_quantize, "quantize IN.gguf OUT.gguf TYPE [--imatrix FILE]"},
    {"imatrix", cmd_imatrix, "imatrix -m MODEL -f TEXT -o OUT [--in-file F]... [--output-format gguf|dat] [-c 512] [-b N] [--chunks N] [--chunk N] [--process-output] [--no-ppl] [--parse-special] [--save-frequency N] [-t N]"},
    {"synth", cmd_synth, "synth -o OUT.gguf --shape NAME --type T [--vocab VOCAB.gguf] [--seed S]"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: tokd COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  tokd %s\n", commands[i].usage);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "tokd: unknown command '%s' (try tokd --help)\n", argv[1]);
    return 2;
}
