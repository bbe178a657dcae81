/* stop.h — stop strings over streamed text.
 *
 * Generated text arrives in pieces of bytes. A stop string is never emitted, not even partly, and
 * text is held back only while it could still become (the start of) a stop string.
 *
 * Rules (streaming is equivalent to feeding all the text at once and then flushing):
 *   - The match that wins is the one that starts earliest in the text. So a completed stop string
 *     is acted on only once no earlier position can still become a stop string: with stop strings
 *     "abc" and "b", the text "ab" stops at nothing yet ("abc" may still follow); "abx" stops
 *     before the "b"; "abc" stops before the "a". Among matches starting at the same byte the
 *     result is the same (everything from that byte on is dropped).
 *   - The bytes held back are exactly the longest suffix of the pending text that is a proper
 *     prefix of some stop string; everything before it is emitted.
 *   - Matching is on bytes. When the text and the stop strings are valid UTF-8, the held-back
 *     suffix starts at a character boundary, so emitted pieces never split a character that the
 *     input kept whole.
 * After a stop, the matcher is finished: push emits nothing and returns 1, flush emits nothing,
 * until tokd_stop_reset.
 *
 * Cost: each push scans the held bytes plus the new ones once per stop string (held bytes are
 * fewer than the longest stop string), so a whole generation costs O(text * stop strings). */
#ifndef TOKD_STOP_H
#define TOKD_STOP_H

#include <stddef.h>

#include "util.h"

typedef struct tokd_stop tokd_stop;

/* Copies the strings. lens may be NULL (then each string is NUL-terminated); empty strings are
 * ignored; n <= 0 gives a matcher that passes everything through. */
tokd_stop *tokd_stop_new(const char *const *strs, const size_t *lens, int n);
void tokd_stop_free(tokd_stop *s);

/* Start over for a new generation with the same stop strings. */
void tokd_stop_reset(tokd_stop *s);

/* Feed newly produced bytes. Appends to *emit the bytes that are now safe to release.
 * Returns 1 if a stop string completed (the text from its first byte on is dropped, emit holds
 * everything before it), else 0. */
int tokd_stop_push(tokd_stop *s, const char *text, size_t len, tokd_buf *emit);

/* Generation ended for another reason: release whatever is held back. If the held text already
 * contains a complete stop string (it was waiting for an earlier, longer one that can now never
 * complete), only the text before the earliest such match is released and 1 is returned;
 * otherwise all of it, and 0. */
int tokd_stop_flush(tokd_stop *s, tokd_buf *emit);

/* Bytes currently held back (for tests and diagnostics). */
size_t tokd_stop_held(const tokd_stop *s);

/* The index (among the strings given to tokd_stop_new) of the stop string that stopped the
 * text, or -1 if none has. When several match at the winning position, the shortest (then the
 * first given), which is the same however the text was split. */
int tokd_stop_which(const tokd_stop *s);

#endif
