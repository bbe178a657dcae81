/* tokenizer_detok.c — incremental detokenizer.
 *
 * Token pieces are appended to a small pending buffer; everything up to the last
 * position where a UTF-8 sequence could still be incomplete is released. A sequence is
 * held only while its bytes so far are a valid prefix (strict RFC 3629 rules, so e.g.
 * E0 80 is released at once as invalid). Invalid bytes are released unchanged rather
 * than replaced: the stream stays byte-exact (the concatenation of the pieces), and
 * for valid UTF-8 every released chunk is valid UTF-8. At most 3 bytes are ever held.
 * The SentencePiece space marker and byte tokens are resolved by the token pieces
 * (tokd_token_piece); the optional STRIP_SPACE_PREFIX drops the one space the encoder
 * added in front of the text. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"
#include "unicode_utf8.h"

struct tokd_detok {
    const tokd_tokenizer *t;
    unsigned flags;
    bool started; /* a non-empty piece was seen (for STRIP_SPACE_PREFIX) */
    uint8_t held[4];
    size_t nheld;
};

tokd_detok *tokd_detok_new_ex(const tokd_tokenizer *t, unsigned flags) {
    if (!t) return NULL;
    tokd_detok *d = tokd_xcalloc(1, sizeof *d);
    d->t = t;
    d->flags = flags;
    return d;
}

tokd_detok *tokd_detok_new(const tokd_tokenizer *t) { return tokd_detok_new_ex(t, 0); }

void tokd_detok_free(tokd_detok *d) { free(d); }

/* Release the complete part of held+p[0..n) into out; keep an incomplete tail. */
static void feed(tokd_detok *d, const uint8_t *p, size_t n, tokd_buf *out) {
    uint8_t stackbuf[256];
    size_t total = d->nheld + n;
    uint8_t *buf = total <= sizeof stackbuf ? stackbuf : tokd_xmalloc(total);
    memcpy(buf, d->held, d->nheld);
    memcpy(buf + d->nheld, p, n);
    d->nheld = 0;
    size_t i = 0;
    while (i < total) {
        if (buf[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int k = tokd_utf8_decode(buf + i, total - i, &cp);
        if (k == 0) break; /* a valid but incomplete prefix: hold it (at most 3 bytes) */
        i += k > 0 ? (size_t)k : 1;
    }
    if (i > 0) tokd_buf_append(out, buf, i);
    memcpy(d->held, buf + i, total - i);
    d->nheld = total - i;
    if (buf != stackbuf) free(buf);
}

void tokd_detok_push(tokd_detok *d, int32_t id, tokd_buf *out) {
    if (!d || !out) return;
    const tokd_tokenizer *t = d->t;
    if (id < 0 || id >= t->n_vocab) return;
    bool special = (d->flags & TOKD_DETOK_RENDER_SPECIAL) != 0;
    size_t n = tokd_token_piece(t, id, special, NULL, 0);
    if (n == 0) return;
    const uint8_t *p = (const uint8_t *)t->piece_arena + t->piece_off[id];
    if (!d->started) {
        d->started = true;
        if ((d->flags & TOKD_DETOK_STRIP_SPACE_PREFIX) && p[0] == ' ') {
            p++;
            n--;
        }
    }
    feed(d, p, n, out);
}

void tokd_detok_flush(tokd_detok *d, tokd_buf *out) {
    if (!d || !out) return;
    if (d->nheld) tokd_buf_append(out, d->held, d->nheld);
    d->nheld = 0;
}

void tokd_detokenize(const tokd_tokenizer *t, const int32_t *ids, size_t n, unsigned flags, tokd_buf *out) {
    tokd_detok *d = tokd_detok_new_ex(t, flags);
    if (!d) return;
    for (size_t i = 0; i < n; i++) tokd_detok_push(d, ids[i], out);
    tokd_detok_flush(d, out);
    tokd_detok_free(d);
}
