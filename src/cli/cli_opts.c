/* cli_opts.c — cli_parse: walks argv against a command's option table (cli_opts.h), so
 * that every command gets the same matching, value checks and error lines from one loop
 * instead of an if/else chain of its own. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"

static bool is_end(const cli_option *o) { return o->kind == CLI_K_END || o->kind == CLI_K_REST; }

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
    default: /* rows without a value never get here */
        return -1;
    }
}

int cli_parse(const char *cmd, int argc, char **argv, const cli_option *opts) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const cli_option *o = opts;
        while (!is_end(o) && strcmp(a, o->name) != 0 && !(o->alias && strcmp(a, o->alias) == 0)) o++;
        if (o->kind == CLI_K_REST) {
            if (o->fn(cmd, NULL, a, o->dst)) return -1;
        } else if (o->kind == CLI_K_END) {
            fprintf(stderr, "tokd %s: unknown option '%s'\n", cmd, a);
            return -1;
        } else if (o->kind == CLI_K_FLAG || o->kind == CLI_K_STOP) {
            *(bool *)o->dst = true;
            if (o->kind == CLI_K_STOP) return 0;
        } else if (i + 1 >= argc) {
            fprintf(stderr, "tokd: option %s needs a value\n", a);
            return -1;
        } else if (set_value(cmd, o, argv[++i])) {
            return -1;
        }
    }
    return 0;
}
