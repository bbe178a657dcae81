/* toolcall_scan.c — marker and JSON-extent scanning for the output parsers (see the header). */
#include "chat/toolcall_scan.h"

#include <string.h>

int tokd_scan_markers(const char *s, size_t n, const char *const *markers, int *which) {
    bool partial = false;
    size_t best = 0;
    *which = -1;
    for (int i = 0; markers && markers[i]; i++) {
        size_t ml = strlen(markers[i]);
        if (n < ml) {
            if (memcmp(s, markers[i], n) == 0) partial = true;
        } else if (memcmp(s, markers[i], ml) == 0 && ml > best) {
            best = ml;
            *which = i;
        }
    }
    if (partial) return TOKD_SCAN_PARTIAL;
    return *which >= 0 ? TOKD_SCAN_MATCH : TOKD_SCAN_NONE;
}

size_t tokd_scan_find(const char *s, size_t n, size_t from, const char *marker, size_t *resume) {
    size_t ml = strlen(marker);
    for (size_t i = from; i + ml <= n; i++)
        if (s[i] == marker[0] && memcmp(s + i, marker, ml) == 0) return i;
    /* Only the last ml-1 bytes can still begin an occurrence. */
    size_t r = n >= ml ? n - ml + 1 : 0;
    *resume = r > from ? r : from;
    return (size_t)-1;
}

/* One byte inside a value that has started; returns DONE/FAIL/MORE. */
static int json_scan_byte(tokd_json_scan *js, char c) {
    if (js->in_str) {
        if (js->esc) js->esc = false;
        else if (c == '\\') js->esc = true;
        else if (c == '"') js->in_str = false;
        return TOKD_JSON_MORE;
    }
    if (c == '"') js->in_str = true;
    else if (c == '{' || c == '[') js->depth++;
    else if (c == '}' || c == ']') {
        if (--js->depth == 0) return TOKD_JSON_DONE;
    }
    return TOKD_JSON_MORE;
}

int tokd_json_scan_run(tokd_json_scan *js, const char *s, size_t n, size_t *end) {
    for (; js->pos < n; js->pos++) {
        char c = s[js->pos];
        if (!js->started) {
            if (tokd_scan_is_space(c)) continue;
            if (c != '{' && c != '[') {
                *end = js->pos;
                return TOKD_JSON_FAIL;
            }
            js->started = true;
        }
        if (json_scan_byte(js, c) == TOKD_JSON_DONE) {
            *end = ++js->pos;
            return TOKD_JSON_DONE;
        }
    }
    return TOKD_JSON_MORE;
}
