/* unicode_utf8.h — the UTF-8 facts the tokenizer needs, and the GPT-2 byte<->unicode map.
 *
 * Everything here works on raw bytes that may not be valid UTF-8. Two notions of a
 * "character" are used on purpose:
 *  - tokd_utf8_lead_len: the length a lead byte announces (1 for ASCII and for stray
 *    continuation bytes, 2/3/4 for lead bytes). The merge tokenizers split text into
 *    symbols with it, exactly as llama.cpp and SentencePiece do, so invalid input is cut
 *    into byte-sized pieces rather than rejected;
 *  - tokd_utf8_decode: strict RFC 3629 decoding (no overlongs, surrogates or values past
 *    U+10FFFF), used where validity matters (the incremental detokenizer).
 * The GPT-2 byte-level map sends every byte to a printable code point: bytes that are
 * printable Latin-1 (0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF) map to themselves, the other 68
 * map to U+0100.. in byte order. */
#ifndef TOKD_UNICODE_UTF8_H
#define TOKD_UNICODE_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length announced by a lead byte (1..4); continuation bytes count as 1. */
static inline size_t tokd_utf8_lead_len(uint8_t b) {
    static const uint8_t tab[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return tab[b >> 4];
}

/* Strict decode of the sequence starting at s (n bytes available).
 * Returns the length (1..4) of a complete valid sequence and stores its code point;
 * 0 if the bytes so far are a valid but incomplete prefix (more bytes could complete it);
 * -1 if s[0] cannot start a valid sequence given the bytes present. n must be >= 1. */
int tokd_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);

/* Whole buffer valid UTF-8? */
bool tokd_utf8_valid(const void *s, size_t n);

/* Encode a code point (<= 0x10FFFF) into out; returns its length. */
size_t tokd_utf8_encode(uint32_t cp, char out[4]);

/* GPT-2 byte-level map. */
uint32_t tokd_bytelevel_cp(uint8_t byte);
/* Inverse: the byte for code point cp, or -1 if cp is not in the map. */
int tokd_bytelevel_byte(uint32_t cp);

#endif
