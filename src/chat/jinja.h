/* jinja.h — a Jinja2 interpreter for chat templates, compatible with Python jinja2 as
 * Hugging Face transformers configures it (trim_blocks, lstrip_blocks, loopcontrols, a
 * json.dumps-based tojson, raise_exception, strftime_now).
 *
 * A template is parsed once into an immutable tree (jinja_parse) and may then be rendered
 * any number of times, from any number of threads at once. Rendering takes its variables
 * from a JSON object: each top-level key becomes a template variable. Every render runs
 * under limits (evaluation steps, recursion depth, output size, memory), so an untrusted
 * template cannot hang or exhaust the process: it fails with an error instead.
 *
 * Errors are one line; template errors read "LINE:COL: message". */
#ifndef TOKD_JINJA_H
#define TOKD_JINJA_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

typedef struct jinja_template jinja_template;

typedef struct jinja_limits {
    uint64_t max_steps; /* statements + expression nodes evaluated, plus bulk work */
    size_t max_output;  /* bytes of any one output buffer (the result, a macro's output) */
    size_t max_memory;  /* bytes of values allocated during one render */
    int max_depth;      /* nesting of macro calls, expressions and data structures */
} jinja_limits;

/* Defaults: 20M steps, 16 MiB output, 256 MiB memory, depth 500. */
void jinja_default_limits(jinja_limits *lim);

/* Parse src (need not be NUL-terminated). NULL on error, with err set to "LINE:COL: msg". */
jinja_template *jinja_parse(const char *src, size_t len, tokd_err *err);
void jinja_free(jinja_template *t);

#define JINJA_ERR_TEMPLATE (-1) /* the template failed: err is "LINE:COL: message" */
#define JINJA_ERR_CONTEXT (-2)  /* context_json is not a JSON object: err says why */

/* Render with the variables of the JSON object context_json (len bytes). On success returns
 * 0 and stores a malloc'd, NUL-terminated string in *out (its length, which excludes the NUL,
 * in *out_len; the text may contain NUL bytes). lim may be NULL for the defaults.
 * strftime_now() reads its clock from the environment variable TOKD_NOW
 * ("2026-01-15T09:30:00") when set, else the local time. */
int jinja_render_json(const jinja_template *t, const char *context_json, size_t len,
                      const jinja_limits *lim, char **out, size_t *out_len, tokd_err *err);

#endif
