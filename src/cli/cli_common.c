/* cli_common.c — strict number parsing, the one-line error and the prompt of -p or -f,
 * shared by the subcommands (cli_opts.c parses option values with these). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
