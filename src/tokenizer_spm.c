/* tokenizer_spm.c — SentencePiece-style tokenization ("llama" vocabularies).
 *
 * The fragment's spaces become U+2581 (with one prepended when the caller says the
 * space-prefix rule applies), then characters merge pairwise, always taking the pair
 * whose merged text is the vocabulary token with the highest score (leftmost on ties).
 * There is no pre-splitting into words: SentencePiece treats the text as one sequence.
 * A final symbol that is not a token (a character missing from the vocabulary, or an
 * invalid UTF-8 byte) becomes its bytes' <0xXX> tokens, or the unknown token when the
 * vocabulary has no byte tokens. */
#include <string.h>

#include "tokenizer_internal.h"

static bool spm_prio(const tokd_tokenizer *t, tk_work *w, const char *base, const tk_sym *l, const tk_sym *r,
                     double *prio) {
    (void)w;
    int32_t id = tk_map_get(&t->tok_map, base + l->off, l->n + r->n);
    if (id < 0) return false;
    *prio = -(double)t->score[id];
    return true;
}

void tk_spm_tokenize(const tokd_tokenizer *t, tk_work *w, const char *text, size_t len, bool space_prefix, tk_ids *out) {
    /* escape: ' ' -> U+2581 (3 bytes) */
    size_t n_sp = space_prefix ? 1 : 0;
    for (size_t i = 0; i < len; i++) n_sp += text[i] == ' ';
    size_t elen = len + 2 * n_sp + (space_prefix ? 1 : 0);
    if (elen == 0) return;
    tk_work_reserve_buf(w, elen);
    char *e = w->buf;
    size_t k = 0;
    static const char mark[3] = {(char)0xE2, (char)0x96, (char)0x81};
    if (space_prefix) {
        memcpy(e, mark, 3);
        k = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(e + k, mark, 3);
            k += 3;
        } else {
            e[k++] = text[i];
        }
    }
    tk_merge_run(t, w, e, k, spm_prio);
    for (int32_t i = 0; i != -1; i = w->syms[i].next) {
        const tk_sym *s = &w->syms[i];
        int32_t id = tk_map_get(&t->tok_map, e + s->off, s->n);
        if (id >= 0) {
            tk_ids_push(out, id);
            continue;
        }
        for (uint32_t j = 0; j < s->n; j++) {
            int32_t b = t->byte_tok[(uint8_t)e[s->off + j]];
            if (b >= 0) tk_ids_push(out, b);
        }
    }
}
