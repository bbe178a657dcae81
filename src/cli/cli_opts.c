/* cli_opts.c — cli_parse: walks argv against a command's option table (cli_opts.h), so
 * that every command gets the same matching, value checks, error lines and `--help` from
 * one loop instead of an if/else chain of its own. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"

static bool is_end(const cli_option *o) { return o->kind == CLI_K_END || o->kind == CLI_K_REST; }

/* "N[,N...]" into the row's cli_int_list; the list is only replaced once every value
 * has parsed. 0, or -1 after the error line. */
static int set_int_list(const char *cmd, const cli_option *o, const char *val) {
    cli_int_list parsed = {.n = 0};
    for (const char *at = val;;) {
        const size_t len = strcspn(at, ",");
        char item[32];
        if (parsed.n == CLI_INT_LIST_MAX) {
            fprintf(stderr, "tokd %s: at most %d values for %s\n", cmd, CLI_INT_LIST_MAX, o->name);
            return -1;
        }
        /* an empty or over-long item is a bad value: cli_int says so, naming the whole list */
        snprintf(item, sizeof item, "%.*s", len < sizeof item ? (int)len : 0, at);
        long v;
        if (cli_int(cmd, o->name, len && len < sizeof item ? item : val, o->lo, o->hi, &v)) return -1;
        parsed.v[parsed.n++] = (int)v;
        if (!at[len]) break;
        at += len + 1;
    }
    *(cli_int_list *)o->dst = parsed;
    return 0;
}

/* Stores val into the row's variable; 0, or -1 after the error line. */
static int set_value(const char *cmd, const cli_option *o, const char *val) {
    long lv;
    double dv;
    switch (o->kind) {
    case CLI_K_STR:
        *(const char **)o->dst = val;
        return 0;
    case CLI_K_LIST:
        if (*o->count >= o->hi) {
            fprintf(stderr, "tokd %s: at most %ld %s\n", cmd, o->hi, o->what);
            return -1;
        }
        ((const char **)o->dst)[(*o->count)++] = val;
        return 0;
    case CLI_K_INT:
    case CLI_K_LONG:
    case CLI_K_ULONG:
        if (cli_int(cmd, o->name, val, o->lo, o->hi, &lv)) return -1;
        if (o->kind == CLI_K_INT) *(int *)o->dst = (int)lv;
        else if (o->kind == CLI_K_LONG) *(long *)o->dst = lv;
        else *(unsigned long *)o->dst = (unsigned long)lv;
        return 0;
    case CLI_K_FLOAT:
    case CLI_K_DOUBLE:
        if (cli_float(cmd, o->name, val, o->flo, o->fhi, &dv)) return -1;
        if (o->kind == CLI_K_FLOAT) *(float *)o->dst = (float)dv;
        else *(double *)o->dst = dv;
        return 0;
    case CLI_K_CALL:
        return o->fn(cmd, o->name, val, o->dst);
    case CLI_K_INTS:
        return set_int_list(cmd, o, val);
    default: /* rows without a value never get here */
        return -1;
    }
}

/* A row's names as --help shows them: the one-dash form first, as `-t, --threads N`;
 * without one, indented to line up with those that have it. */
static int option_names(char *buf, size_t cap, const cli_option *o) {
    const char *first = o->name, *second = o->alias;
    if (second && second[1] != '-' && first[1] == '-') first = o->alias, second = o->name;
    int n = second ? snprintf(buf, cap, "%s, %s", first, second) : snprintf(buf, cap, "%s%s", first[1] == '-' ? "    " : "", first);
    if (o->arg) n += snprintf(buf + n, cap - (size_t)n, " %s", o->arg);
    return n;
}

/* text as a paragraph after a blank line, broken at spaces before column 90 */
static void print_wrapped(FILE *out, const char *text) {
    fputc('\n', out);
    size_t col = 0;
    for (const char *w = text; *w;) {
        size_t len = strcspn(w, " ");
        if (col && col + 1 + len > 90) fputc('\n', out), col = 0;
        else if (col) fputc(' ', out), col++;
        fwrite(w, 1, len, out);
        col += len;
        w += len;
        w += strspn(w, " ");
    }
    fputc('\n', out);
}

#define HELP_COLUMN 34 /* where the texts start; longer names push theirs to the next line */

void cli_print_help(FILE *out, const char *cmd, const cli_option *opts) {
    const cli_command *c = cli_command_find(cmd);
    fprintf(out, "usage: tokd %s\n", c ? c->synopsis : cmd);
    if (c) fprintf(out, "\n%s\n", c->purpose);
    fprintf(out, "\noptions:\n");
    for (const cli_option *o = opts; !is_end(o); o++) {
        char names[128];
        int n = option_names(names, sizeof names, o);
        fprintf(out, "  %s", names);
        if (n + 2 >= HELP_COLUMN) fprintf(out, "\n%*s", HELP_COLUMN, "");
        else fprintf(out, "%*s", HELP_COLUMN - n - 2, "");
        fprintf(out, "%s", o->help ? o->help : "");
        if (o->kind == CLI_K_LIST) fprintf(out, "; repeatable, up to %ld times", o->hi);
        fputc('\n', out);
    }
    fprintf(out, "  -h, --help%*s%s\n", HELP_COLUMN - 12, "", "print this help and exit");
    if (c && c->notes) print_wrapped(out, c->notes());
}

static bool is_help(const char *a) { return !strcmp(a, "-h") || !strcmp(a, "--help"); }

int cli_parse(const char *cmd, int argc, char **argv, const cli_option *opts) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const cli_option *o = opts;
        while (!is_end(o) && strcmp(a, o->name) != 0 && !(o->alias && strcmp(a, o->alias) == 0)) o++;
        if (is_end(o) && is_help(a)) { /* a row of the same name (none today) would win */
            cli_print_help(stdout, cmd, opts);
            return CLI_HELP_SHOWN;
        }
        if (o->kind == CLI_K_REST) {
            if (o->fn(cmd, NULL, a, o->dst)) return -1;
        } else if (o->kind == CLI_K_END) {
            fprintf(stderr, "tokd %s: unknown option '%s'\n", cmd, a);
            return -1;
        } else if (o->kind == CLI_K_FLAG) {
            *(bool *)o->dst = true;
        } else if (i + 1 >= argc) {
            fprintf(stderr, "tokd %s: option %s needs a value\n", cmd, a);
            return -1;
        } else if (set_value(cmd, o, argv[++i])) {
            return -1;
        }
    }
    return 0;
}
