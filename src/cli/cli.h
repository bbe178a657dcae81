/* cli.h — the `tokd` subcommands. Each lives in its own file src/cli/cmd_NAME.c and
 * returns the process exit code. Errors are printed by the command as one line on
 * stderr ("tokd NAME: problem") with a non-zero exit. */
#ifndef TOKD_CLI_H
#define TOKD_CLI_H

#include "cli_opts.h"

int cmd_run(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_render(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_bench_serve(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_imatrix(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_chat(int argc, char **argv);

/* Shared helpers (cli_common.c); the option tables and cli_parse are in cli_opts.h. */
/* Parse numbers strictly (whole string, in range); print "tokd CMD: bad value for OPT" and
 * return -1 on failure. */
int cli_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
int cli_float(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out);
void cli_die_msg(const char *cmd, const char *msg);

#endif
