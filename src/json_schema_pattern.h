/* json_schema_pattern.h — a JSON Schema `pattern` (ECMA-262 regular expression) as a grammar
 * expression for the JSON text of a string whose value it matches (json_schema_pattern.c). */
#ifndef TOKD_JSON_SCHEMA_PATTERN_H
#define TOKD_JSON_SCHEMA_PATTERN_H

#include <stddef.h>

#include "util.h"

/* Append to out a grammar expression, quotes included, for JSON strings whose value matches
 * `pattern` (searched, as JSON Schema does: unanchored unless it starts with ^ / ends with $)
 * and has between min_len and max_len code points (max_len < 0: no maximum). It refers to
 * the rule `char1` (a JSON string character other than a \u escape of a surrogate) and, when
 * the length bounds cut into the pattern, to rules it appends to `rules`, named p<id>-...
 * (id: unique within the grammar). format: NULL for a schema's own pattern, else the name of
 * the format the pattern implements, which the errors then name instead. max_bytes: the most
 * grammar text it may write (at most 4 MB in any case). 0, or -1 with a one-line reason in msg
 * ("json schema: 'pattern' ...") when the pattern is outside the supported subset or no
 * string can satisfy it. */
int tokd_pattern_to_grammar(const char *pattern, const char *format, long min_len, long max_len, int id, size_t max_bytes,
                            tokd_buf *out, tokd_buf *rules, char *msg, size_t msg_size);

#endif
