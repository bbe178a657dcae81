/* cli_common.c — strict number parsing, the one-line error, the prompt of -p or -f,
 * Ctrl-C during generation and the signals' clean-up, shared by the subcommands
 * (cli_opts.c parses option values with these). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outfile.h"
#include "util.h"

#include "cli.h"

int cli_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "tokd %s: bad value for %s: '%s' (expected an integer in [%ld, %ld])\n", cmd, opt, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_float(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "tokd %s: bad value for %s: '%s' (expected a number in [%g, %g])\n", cmd, opt, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

void cli_die_msg(const char *cmd, const char *msg) { fprintf(stderr, "tokd %s: %s\n", cmd, msg); }

static volatile sig_atomic_t interrupt_armed, interrupt_seen;

/* A signal's default action (ending the process), once the half-written output files are
 * gone. */
static void on_fatal_signal(int sig) {
    tokd_outfile_remove_pending();
    signal(sig, SIG_DFL);
    raise(sig);
}

void cli_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        /* a signal the caller ignores (nohup) stays ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(sigs[i], &sa, NULL);
    }
}

static void on_sigint(int sig) {
    if (!interrupt_armed || interrupt_seen) { /* the default action, once this handler returns */
        on_fatal_signal(sig);
        return;
    }
    interrupt_seen = 1;
}

void cli_interrupt_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESTART; /* output written as the text streams must not fail with EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

void cli_interrupt_arm(bool armed) {
    interrupt_seen = 0;
    interrupt_armed = armed;
}

bool cli_interrupted(void *ud) {
    (void)ud;
    return interrupt_seen != 0;
}

int cli_prompt(const char *cmd, const char *text, const char *file, const char **prompt, size_t *len, char **owned) {
    *owned = NULL;
    if (!text == !file) {
        fprintf(stderr, "tokd %s: %s\n", cmd, text ? "-p and -f exclude each other" : "missing -p PROMPT (or -f FILE)");
        return 2;
    }
    if (text) {
        *prompt = text;
        *len = strlen(text);
        return 0;
    }
    *owned = strcmp(file, "-") ? tokd_read_file(file, len) : tokd_read_stream(stdin, len);
    if (!*owned) {
        fprintf(stderr, "tokd %s: cannot read '%s': %s\n", cmd, strcmp(file, "-") ? file : "stdin", strerror(errno));
        return 1;
    }
    *prompt = *owned;
    return 0;
}
