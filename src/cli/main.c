/* main.c — `tokd` entry point: dispatches to the subcommand named by argv[1]. The table
 * below is also where each command's synopsis and purpose live for the help texts
 * (`tokd --help`, and `tokd NAME --help`, whose option lines come from the command's
 * option table: cli_opts.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "quant_plan.h"
#include "synth.h"

static const char *quantize_notes(void) {
    static char text[2048];
    snprintf(text, sizeof text, "TYPE: %s.", tokd_qtarget_list());
    return text;
}

static const char *synth_notes(void) {
    static char text[2048];
    snprintf(text, sizeof text, "NAME: %s. T: a type as tokd quantize takes it (tokd quantize --help).", tokd_synth_shape_list());
    return text;
}

static const char *bench_notes(void) {
    return "Lists: -p 128,512 -n 128 -t 1,2 runs every thread count at every depth and sequence count, and in each "
           "the i-th -p with the i-th -n (a shorter list stands for 0: none), as llama-bench's rows: pp128 and tg128, "
           "then pp512, at 1 thread and again at 2. Text prints a block for each, then a table of every row; --json one object a line. "
           "-s 4 (llama-batched-bench's parallel sequences) labels its rows pp512 x4 and tg128 x4: tokens/s of all "
           "four sequences together, tg's limit four tokens a step's bytes.";
}

static const cli_command commands[] = {
    {"run", cmd_run, "run [-m MODEL] (-p PROMPT | -f FILE) [options]", "Generates text from a prompt and streams it to stdout; the timings go to stderr.", NULL},
    {"chat", cmd_chat, "chat -m MODEL [options]", "An interactive chat in the terminal, on the model's chat template (/reset, /exit).", NULL},
    {"serve", cmd_serve, "serve -m MODEL [options]", "An OpenAI-compatible HTTP server with continuous batching and prefix caching.", NULL},
    {"bench-serve", cmd_bench_serve, "bench-serve [options]", "A load generator for a running tokd serve: requests/s, tokens/s, TTFT and ITL.", NULL},
    {"bench", cmd_bench, "bench -m MODEL [options]", "Prompt (pp) and generation (tg) speed, and their shares of the machine's limits.", bench_notes},
    {"quantize", cmd_quantize, "quantize IN.gguf OUT.gguf TYPE [options]", "Writes a model quantized to TYPE, a weight type or one of llama.cpp's mixes.", quantize_notes},
    {"imatrix", cmd_imatrix, "imatrix -m MODEL -f TEXT -o OUT [options]  |  --in-file F... -o OUT  |  --show-statistics --in-file F",
     "Computes, combines or describes an importance matrix for tokd quantize --imatrix.", NULL},
    {"perplexity", cmd_perplexity, "perplexity -m MODEL -f TEXT [options]", "The model's perplexity on a text, scored as llama-perplexity scores it.", NULL},
    {"synth", cmd_synth, "synth -o OUT.gguf --shape NAME --type T [options]", "Writes a random-weight model of a real shape, for benchmarks.", synth_notes},
    {"logits", cmd_logits, "logits -m MODEL (-p PROMPT | -f FILE) -o FILE [options]", "Writes the logits of every prompt position as float32, n_positions x n_vocab.", NULL},
    {"tokenize", cmd_tokenize, "tokenize -m MODEL [options]  < text", "Prints the token ids of the text on stdin, space-separated.", NULL},
    {"info", cmd_info, "info -m MODEL", "Architecture, hyperparameters, tokenizer, tensor types and the memory budget.", NULL},
    {"render", cmd_render, "render --template FILE.jinja  < context.json", "Renders a chat template with the JSON object on stdin and prints the text.", NULL},
};

const cli_command *cli_command_find(const char *name) {
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(name, commands[i].name)) return &commands[i];
    return NULL;
}

static void usage(FILE *out) {
    fprintf(out, "usage: tokd COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].purpose);
    fprintf(out, "\n`tokd COMMAND --help` lists a command's options.\n");
}

/* Output that did not reach stdout (a full disk, a closed descriptor) fails a command that
 * otherwise succeeded, with one line. */
static int check_stdout(const char *cmd, int rc) {
    errno = 0;
    if (rc || (fflush(stdout) == 0 && !ferror(stdout))) return rc; /* a failed command said why */
    fprintf(stderr, "tokd%s%s: writing stdout failed: %s\n", cmd ? " " : "", cmd ? cmd : "", strerror(errno ? errno : EIO));
    return 1;
}

int main(int argc, char **argv) {
    cli_signals_install();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return check_stdout(NULL, 0);
    }
    const cli_command *c = cli_command_find(argv[1]);
    if (c) return check_stdout(c->name, c->fn(argc - 1, argv + 1));
    fprintf(stderr, "tokd: unknown command '%s' (try tokd --help)\n", argv[1]);
    return 2;
}
