/* cli.h — the `tokd` subcommands. Each lives in its own file src/cli/cmd_NAME.c and
 * returns the process exit code. Errors are printed by the command as one line on
 * stderr ("tokd NAME: problem") with a non-zero exit. */
#ifndef TOKD_CLI_H
#define TOKD_CLI_H

int cmd_run(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_render(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_bench_serve(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_chat(int argc, char **argv);

/* Shared helpers for argument parsing (cli_common.c). */
/* If argv[*i] equals name (or its alias, which may be NULL) and a value follows, store it,
 * advance *i and return 1; if the value is missing, print an error and return -1; else 0. */
int cli_opt(int argc, char **argv, int *i, const char *name, const char *alias, const char **val);
/* Parse numbers strictly (whole string, in range); print "tokd CMD: bad value for OPT" and
 * return -1 on failure. */
int cli_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
int cli_float(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out);
void cli_die_msg(const char *cmd, const char *msg);

#endif
