/* cli_opts.h — the subcommands' options as data. Each command lists its options in a
 * table of rows (one per option: names, kind, the variable it sets, accepted range, and
 * the line `--help` prints for it) and hands it to cli_parse, which owns the loop, the
 * error messages, `-h`/`--help` and the exit status; since the help is generated from
 * the rows that parse, it cannot list an option the command lacks or miss one it has;
 * options several commands share (model, threads, context size, sampling) are declared
 * once below as rows and groups of rows. Rows point at the caller's variables, so a
 * table is a local array built where those variables live; the row macros check each
 * variable's type at compile time (_Generic) and pick how to store into it. */
#ifndef TOKD_CLI_OPTS_H
#define TOKD_CLI_OPTS_H

#include <stdbool.h>
#include <stdio.h>

typedef enum {
    CLI_K_END,    /* last row: an argument not in the table is an unknown option */
    CLI_K_REST,   /* last row: an argument not in the table goes to fn (opt NULL, val the argument) */
    CLI_K_FLAG,   /* no value: *(bool *)dst = true */
    CLI_K_STR,    /* *(const char **)dst = value */
    CLI_K_LIST,   /* repeatable: value appended to the array dst (capacity hi, *count in use) */
    CLI_K_INT,    /* integer in [lo, hi] into an int, a long or an unsigned long */
    CLI_K_LONG,
    CLI_K_ULONG,
    CLI_K_FLOAT,  /* number in [flo, fhi] into a float or a double */
    CLI_K_DOUBLE,
    CLI_K_CALL,   /* value parsed by fn */
    CLI_K_INTS,   /* "N[,N...]": integers in [lo, hi] into a cli_int_list, replacing what it held */
} cli_kind;

/* The values of an option that takes a comma-separated list of integers (tokd bench's
 * -p 128,512, as llama-bench's); the caller sets the default list before parsing. */
#define CLI_INT_LIST_MAX 16
typedef struct {
    int v[CLI_INT_LIST_MAX];
    int n;
} cli_int_list;

/* Parses val for the option named opt (its first name) into dst; returns 0, or -1
 * after printing one error line. */
typedef int cli_fn(const char *cmd, const char *opt, const char *val, void *dst);

typedef struct {
    const char *name, *alias; /* alias may be NULL; error lines use name */
    cli_kind kind;
    void *dst;
    long lo, hi;              /* integer range; a list's capacity is hi */
    double flo, fhi;          /* number range */
    int *count;               /* list: values stored so far */
    const char *what;         /* list: its error reads "at most HI <what>" */
    cli_fn *fn;               /* CLI_K_CALL, CLI_K_REST */
    const char *arg;          /* the value's name in --help ("N", "FILE"); NULL for flags */
    const char *help;         /* what the option does, one line for --help */
} cli_option;

/* Parses argv[1..argc) against opts (ended by a CLI_END or CLI_REST row). Returns 0; or
 * CLI_HELP_SHOWN after printing the command's help on stdout for -h or --help (the
 * command then exits 0); or -1 after printing one error line on stderr (exit 2).
 * cli_exit_code maps the two non-zero results to those exit codes. */
#define CLI_HELP_SHOWN 1
int cli_parse(const char *cmd, int argc, char **argv, const cli_option *opts);
static inline int cli_exit_code(int parse_result) { return parse_result == CLI_HELP_SHOWN ? 0 : 2; }

/* The help cli_parse prints: `usage: tokd SYNOPSIS`, the command's purpose, and one line
 * per row (names, value, text), then the command's notes, into out. */
void cli_print_help(FILE *out, const char *cmd, const cli_option *opts);

/* Rows. N and A are the option's name and alias (or NULL), D a pointer to the variable
 * it sets; CLI_IS(T, D) stops the build unless D is a T. ARG names the value in --help
 * and H says what the option does there. */
#define CLI_IS(T, D) _Generic((D), T: (D))
#define CLI_ROW(N, A, K, D) .name = (N), .alias = (A), .kind = (K), .dst = (D)
#define CLI_FLAG(N, A, D, H) {CLI_ROW(N, A, CLI_K_FLAG, CLI_IS(bool *, D)), .help = (H)}
#define CLI_STR(N, A, D, ARG, H) {CLI_ROW(N, A, CLI_K_STR, CLI_IS(const char **, D)), .arg = (ARG), .help = (H)}
#define CLI_LIST(N, A, ARR, CAP, COUNT, WHAT, ARG, H)                                                              \
    {CLI_ROW(N, A, CLI_K_LIST, CLI_IS(const char **, ARR)), .hi = (CAP), .count = CLI_IS(int *, COUNT), .what = (WHAT), \
     .arg = (ARG), .help = (H)}
#define CLI_INT(N, A, D, LO, HI, ARG, H)                                                                         \
    {CLI_ROW(N, A, _Generic((D), int *: CLI_K_INT, long *: CLI_K_LONG, unsigned long *: CLI_K_ULONG), D), .lo = (LO), \
     .hi = (HI), .arg = (ARG), .help = (H)}
#define CLI_NUM(N, A, D, LO, HI, ARG, H)                                                                       \
    {CLI_ROW(N, A, _Generic((D), float *: CLI_K_FLOAT, double *: CLI_K_DOUBLE), D), .flo = (LO), .fhi = (HI), \
     .arg = (ARG), .help = (H)}
#define CLI_INTS(N, A, D, LO, HI, ARG, H) \
    {CLI_ROW(N, A, CLI_K_INTS, CLI_IS(cli_int_list *, D)), .lo = (LO), .hi = (HI), .arg = (ARG), .help = (H)}
#define CLI_CALL(N, A, FN, D, ARG, H) {CLI_ROW(N, A, CLI_K_CALL, D), .fn = (FN), .arg = (ARG), .help = (H)}
#define CLI_END {.kind = CLI_K_END}
#define CLI_REST(FN, D) {.kind = CLI_K_REST, .dst = (D), .fn = (FN)}

/* Options several commands share: the names and texts are declared here, a range that
 * differs between commands is the caller's. */
#define CLI_MODEL(D) CLI_STR("-m", "--model", D, "FILE", "the GGUF model file")
#define CLI_THREADS(D) CLI_INT("-t", "--threads", D, 1, 1024, "N", "threads (default: the physical cores)")
#define CLI_CTX_SIZE(D, LO) CLI_INT("-c", "--ctx-size", D, LO, 1 << 24, "N", "context size in tokens (default: the model's, at most 4096)")
#define CLI_N_PREDICT(D, LO, HI, H) CLI_INT("-n", "--n-predict", D, LO, HI, "N", H)
#define CLI_QUIET(D) CLI_FLAG("-q", "--quiet", D, "no progress lines")
#define CLI_TEMP(SP) CLI_NUM("--temp", NULL, &(SP)->temperature, 0, 100, "T", "sampling temperature (default 0.8; 0: greedy)")
/* The sampling options, into the tokd_sampler_params SP points at. */
#define CLI_SAMPLING(SP)                                                                                                      \
    CLI_TEMP(SP), CLI_INT("--top-k", NULL, &(SP)->top_k, 0, 1 << 24, "K", "keep the K likeliest tokens (default 40; 0: all)"),     \
        CLI_NUM("--top-p", NULL, &(SP)->top_p, 0, 1, "P", "keep the likeliest tokens whose probabilities add to P (default 0.95)"), \
        CLI_NUM("--min-p", NULL, &(SP)->min_p, 0, 1, "P", "drop tokens less likely than P times the likeliest (default 0.05)"),            \
        CLI_NUM("--repeat-penalty", NULL, &(SP)->repeat_penalty, 0.01, 100, "R", "penalise the last 64 tokens by R (default 1: off)"), \
        CLI_NUM("--presence-penalty", NULL, &(SP)->presence_penalty, -2, 2, "P", "subtract P from each generated token's logit (default 0)"), \
        CLI_NUM("--frequency-penalty", NULL, &(SP)->frequency_penalty, -2, 2, "F", "subtract F times its count from each generated token's logit (default 0)")

#endif
