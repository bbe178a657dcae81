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
int cmd_perplexity(int argc, char **argv);

/* The commands (main.c's table): the name argv[1] gives, the synopsis `tokd NAME --help`
 * prints after "tokd ", one line on what the command is for, and (or NULL) a function
 * giving a paragraph that help ends with, such as the accepted values of an argument. */
typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *synopsis, *purpose;
    const char *(*notes)(void);
} cli_command;
const cli_command *cli_command_find(const char *name); /* NULL: no such command */

/* Shared helpers (cli_common.c); the option tables and cli_parse are in cli_opts.h. */
/* Parse numbers strictly (whole string, in range); print "tokd CMD: bad value for OPT" and
 * return -1 on failure. */
int cli_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
int cli_float(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out);
void cli_die_msg(const char *cmd, const char *msg);
/* The prompt of -p TEXT or -f FILE (FILE "-": stdin), read byte for byte: exactly one of
 * text and file is set. 0 with *prompt, *len and *owned (what to free; may be NULL);
 * else 2 (both or neither given) or 1 (unreadable file) after the error line. */
int cli_prompt(const char *cmd, const char *text, const char *file, const char **prompt, size_t *len, char **owned);
/* Ctrl-C for the commands that generate (run, chat). While armed, the first SIGINT only
 * sets a flag that cli_interrupted reads (as tokd_gen_params.interrupted: generation ends
 * at the next token); a second one, or one while disarmed, ends the process as SIGINT
 * does by default. Arming clears the flag. */
void cli_interrupt_install(void);
void cli_interrupt_arm(bool armed);
bool cli_interrupted(void *ud);
/* SIGINT, SIGTERM and SIGHUP remove the output files being written (outfile.h) before
 * their default action; main installs this for every command. */
void cli_signals_install(void);

#endif
