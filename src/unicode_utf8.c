/* unicode_utf8.c — strict UTF-8 decoding/encoding and the GPT-2 byte-level map
 * (see unicode_utf8.h for why there are two notions of a character). */
#include "unicode_utf8.h"

int tokd_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    size_t need;
    uint32_t v;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (b >= 0xC2 && b <= 0xDF) {
        need = 2;
        v = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 3;
        v = b & 0x0F;
        if (b == 0xE0) lo = 0xA0;      /* no overlongs */
        else if (b == 0xED) hi = 0x9F; /* no surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 4;
        v = b & 0x07;
        if (b == 0xF0) lo = 0x90;      /* no overlongs */
        else if (b == 0xF4) hi = 0x8F; /* <= U+10FFFF */
    } else {
        return -1; /* continuation byte, C0, C1, F5..FF */
    }
    for (size_t i = 1; i < need; i++) {
        if (i >= n) return 0;
        uint8_t c = s[i];
        uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (c < l || c > h) return -1;
        v = (v << 6) | (c & 0x3F);
    }
    *cp = v;
    return (int)need;
}

bool tokd_utf8_valid(const void *p, size_t n) {
    const uint8_t *s = p;
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        int k = tokd_utf8_decode(s + i, n - i, &cp);
        if (k <= 0) return false;
        i += (size_t)k;
    }
    return true;
}

size_t tokd_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static bool bytelevel_printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t tokd_bytelevel_cp(uint8_t byte) {
    if (bytelevel_printable(byte)) return byte;
    /* rank of this byte among the non-printable ones */
    uint32_t k = 0;
    for (unsigned b = 0; b < byte; b++)
        if (!bytelevel_printable(b)) k++;
    return 256 + k;
}

int tokd_bytelevel_byte(uint32_t cp) {
    if (cp < 256) return bytelevel_printable(cp) ? (int)cp : -1;
    if (cp >= 256 + 68) return -1;
    uint32_t k = cp - 256;
    for (unsigned b = 0; b < 256; b++)
        if (!bytelevel_printable(b) && k-- == 0) return (int)b;
    return -1;
}
