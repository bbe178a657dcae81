/* t_json_string.h — the value of a JSON string's text, NUL-safe (cJSON's C strings stop at a
 * \u0000), for the tests and the fuzzer that check what a grammar wrote. */
#ifndef TOKD_T_JSON_STRING_H
#define TOKD_T_JSON_STRING_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unicode_utf8.h"

/* The value of a JSON string's text j (n bytes, quotes included, well formed: a grammar or
 * a parser vouched for it) into v (at least n bytes); returns its length in bytes and its
 * code points in *cps. \u escapes of surrogate pairs become one character. */
static inline size_t t_json_string_value(const char *j, size_t n, char *v, long *cps) {
    size_t o = 0;
    *cps = 0;
    for (size_t i = 1; i + 1 < n; ++*cps) {
        if (j[i] != '\\') {
            size_t len = tokd_utf8_lead_len((uint8_t)j[i]);
            memcpy(v + o, j + i, len), o += len, i += len;
            continue;
        }
        char e = j[i + 1];
        i += 2;
        if (e != 'u') {
            v[o++] = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'b' ? '\b' : e == 'f' ? '\f' : e;
            continue;
        }
        char hex[5] = {j[i], j[i + 1], j[i + 2], j[i + 3], 0};
        uint32_t c = (uint32_t)strtoul(hex, NULL, 16);
        i += 4;
        if (c >= 0xD800 && c < 0xDC00 && i + 6 <= n && j[i] == '\\' && j[i + 1] == 'u') {
            char lo[5] = {j[i + 2], j[i + 3], j[i + 4], j[i + 5], 0};
            uint32_t l = (uint32_t)strtoul(lo, NULL, 16);
            if (l >= 0xDC00 && l < 0xE000) c = 0x10000 + ((c - 0xD800) << 10) + (l - 0xDC00), i += 6;
        }
        o += tokd_utf8_encode(c, v + o);
    }
    return o;
}
#endif
