/* cli_opts.h — the subcommands' options as data. Each command lists its options in a
 * table of rows (one per option: names, kind, the variable it sets, accepted range) and
 * hands it to cli_parse, which owns the loop, the error messages and the exit status;
 * options several commands share (model, threads, context size, sampling) are declared
 * once below as rows and groups of rows. Rows point at the caller's variables, so a
 * table is a local array built where those variables live; the row macros check each
 * variable's type at compile time (_Generic) and pick how to store into it. */
#ifndef TOKD_CLI_OPTS_H
#define TOKD_CLI_OPTS_H

#include <stdbool.h>

typedef enum {
    CLI_K_END,    /* last row: an argument not in the table is an unknown option */
    CLI_K_REST,   /* last row: an argument not in the table goes to fn (opt NULL, val the argument) */
    CLI_K_FLAG,   /* no value: *(bool *)dst = true */
    CLI_K_STOP,   /* no value: *(bool *)dst = true, and parsing ends there (--help) */
    CLI_K_STR,    /* *(const char **)dst = value */
    CLI_K_LIST,   /* repeatable: value appended to the array dst (capacity hi, *count in use) */
    CLI_K_INT,    /* integer in [lo, hi] into an int, a long or an unsigned long */
    CLI_K_LONG,
    CLI_K_ULONG,
    CLI_K_FLOAT,  /* number in [flo, fhi] into a float or a double */
    CLI_K_DOUBLE,
    CLI_K_CALL,   /* value parsed by fn */
} cli_kind;

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
} cli_option;

/* Parses argv[1..argc) against opts (ended by a CLI_END or CLI_REST row). Returns 0, or
 * -1 after printing one error line on stderr (the command then exits 2). */
int cli_parse(const char *cmd, int argc, char **argv, const cli_option *opts);

/* Rows. N and A are the option's name and alias (or NULL), D a pointer to the variable
 * it sets; CLI_IS(T, D) stops the build unless D is a T. */
#define CLI_IS(T, D) _Generic((D), T: (D))
#define CLI_ROW(N, A, K, D) .name = (N), .alias = (A), .kind = (K), .dst = (D)
#define CLI_FLAG(N, A, D) {CLI_ROW(N, A, CLI_K_FLAG, CLI_IS(bool *, D))}
#define CLI_STOP(N, A, D) {CLI_ROW(N, A, CLI_K_STOP, CLI_IS(bool *, D))}
#define CLI_STR(N, A, D) {CLI_ROW(N, A, CLI_K_STR, CLI_IS(const char **, D))}
#define CLI_LIST(N, A, ARR, CAP, COUNT, WHAT) \
    {CLI_ROW(N, A, CLI_K_LIST, CLI_IS(const char **, ARR)), .hi = (CAP), .count = CLI_IS(int *, COUNT), .what = (WHAT)}
#define CLI_INT(N, A, D, LO, HI) \
    {CLI_ROW(N, A, _Generic((D), int *: CLI_K_INT, long *: CLI_K_LONG, unsigned long *: CLI_K_ULONG), D), .lo = (LO), .hi = (HI)}
#define CLI_NUM(N, A, D, LO, HI) \
    {CLI_ROW(N, A, _Generic((D), float *: CLI_K_FLOAT, double *: CLI_K_DOUBLE), D), .flo = (LO), .fhi = (HI)}
#define CLI_CALL(N, A, FN, D) {CLI_ROW(N, A, CLI_K_CALL, D), .fn = (FN)}
#define CLI_END {.kind = CLI_K_END}
#define CLI_REST(FN, D) {.kind = CLI_K_REST, .dst = (D), .fn = (FN)}

/* Options several commands share: the names are declared here, a range that differs
 * between commands is the caller's. */
#define CLI_MODEL(D) CLI_STR("-m", "--model", D)
#define CLI_THREADS(D) CLI_INT("-t", "--threads", D, 1, 1024)
#define CLI_CTX_SIZE(D, LO) CLI_INT("-c", "--ctx-size", D, LO, 1 << 24)
#define CLI_N_PREDICT(D, LO, HI) CLI_INT("-n", "--n-predict", D, LO, HI)
#define CLI_QUIET(D) CLI_FLAG("-q", "--quiet", D)
#define CLI_TEMP(SP) CLI_NUM("--temp", NULL, &(SP)->temperature, 0, 100)
/* The sampling options, into the tokd_sampler_params SP points at. */
#define CLI_SAMPLING(SP)                                                     \
    CLI_TEMP(SP), CLI_INT("--top-k", NULL, &(SP)->top_k, 0, 1 << 24),       \
        CLI_NUM("--top-p", NULL, &(SP)->top_p, 0, 1),                        \
        CLI_NUM("--min-p", NULL, &(SP)->min_p, 0, 1),                        \
        CLI_NUM("--repeat-penalty", NULL, &(SP)->repeat_penalty, 0.01, 100), \
        CLI_NUM("--presence-penalty", NULL, &(SP)->presence_penalty, -2, 2), \
        CLI_NUM("--frequency-penalty", NULL, &(SP)->frequency_penalty, -2, 2)

#endif
