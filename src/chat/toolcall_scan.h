/* toolcall_scan.h — byte-level scanning shared by the tool-call and reasoning parsers.
 *
 * Both parsers read model output that arrives in arbitrary pieces and must act exactly as if
 * the whole text had arrived at once. They get there by asking only questions whose answer
 * cannot change when more bytes are appended: "does a marker start here?" answers MATCH or
 * NONE only when the bytes present decide it, and PARTIAL (wait) when the text ends inside a
 * possible marker. The JSON scanner finds where one JSON value ends without parsing it, keeping
 * its state between pieces, so a value streamed token by token is scanned once. Parsing proper
 * (cJSON) happens once the extent is known. */
#ifndef TOKD_TOOLCALL_SCAN_H
#define TOKD_TOOLCALL_SCAN_H

#include <stdbool.h>
#include <stddef.h>

enum { TOKD_SCAN_NONE = 0, TOKD_SCAN_MATCH = 1, TOKD_SCAN_PARTIAL = 2 };

/* Which of the NULL-terminated markers starts at s (n bytes available)? *which gets the
 * longest complete one, or -1. Returns PARTIAL when s ends inside a possible (longer) marker,
 * so that more text must decide (at the end of the output the caller takes *which); else
 * MATCH or NONE. */
int tokd_scan_markers(const char *s, size_t n, const char *const *markers, int *which);

/* Offset of the first complete occurrence of marker in s[from, n), or (size_t)-1. *resume gets
 * the offset from which a later search over more bytes must restart. */
size_t tokd_scan_find(const char *s, size_t n, size_t from, const char *marker, size_t *resume);

static inline bool tokd_scan_is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Where does the JSON value (object or array) starting after optional whitespace end?
 * Brackets are counted outside strings; nothing else is validated. */
typedef struct tokd_json_scan {
    size_t pos;   /* next byte to look at, relative to the start given to tokd_json_scan_run */
    int depth;    /* bracket depth; 0 before the value starts */
    bool in_str, esc, started;
} tokd_json_scan;

enum { TOKD_JSON_MORE = 0, TOKD_JSON_DONE = 1, TOKD_JSON_FAIL = 2 };

/* Continue over s[0, n) (the same start every call, n growing). DONE: the value ends at
 * *end (one past its closing bracket). FAIL: the first non-space byte, at *end, opens no
 * object or array. MORE: not yet. */
int tokd_json_scan_run(tokd_json_scan *js, const char *s, size_t n, size_t *end);

#endif
