/* tokenizer.h — text <-> tokens, loaded from GGUF metadata.
 *
 * Two tokenizer families, chosen by tokenizer.ggml.model:
 *  - "llama": SentencePiece-style BPE. Spaces become U+2581 ("▁"), a leading space is
 *    added (add_space_prefix), then adjacent symbols are merged greedily by the score of
 *    the merged token (highest first, leftmost on ties); characters that never form a
 *    token fall back to byte tokens <0xXX> (or the unknown token if the vocabulary has
 *    none).
 *  - "gpt2": byte-level BPE. The text is cut into words by the pre-tokenizer regexes
 *    named by tokenizer.ggml.pre (PCRE2, Unicode properties), each word's bytes are
 *    mapped through the GPT-2 byte<->unicode table and merged by merge rank.
 * Special tokens (control, user-defined, unknown) are cut out of the text first, longest
 * token first; control and unknown tokens only when the caller asks (parse_special),
 * user-defined ones always (as Hugging Face and llama.cpp do).
 *
 * Bytes that are not valid UTF-8 are accepted everywhere: each invalid byte is a
 * character of its own, which becomes its byte token (byte-level BPE: the byte's
 * mapped code point; SentencePiece: <0xXX>). Nothing in the input can make tokenization
 * fail or crash.
 *
 * A loaded tokenizer is immutable: any number of threads may tokenize with it at once. */
#ifndef TOKD_TOKENIZER_H
#define TOKD_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "util.h"

typedef struct tokd_tokenizer tokd_tokenizer;

/* Build from the metadata of f (works on vocabulary-only files). Everything needed is
 * copied: f may be closed afterwards. Bad metadata -> NULL with err naming it. */
tokd_tokenizer *tokd_tokenizer_load(const gguf_file *f, tokd_err *err);
void tokd_tokenizer_free(tokd_tokenizer *t);
int32_t tokd_tokenizer_n_vocab(const tokd_tokenizer *t);

/* Tokenize len bytes (any bytes). add_special: add BOS/EOS as the metadata says.
 * parse_special: recognise control/unknown token texts. *out is malloc'd (may be NULL
 * when *n_out is 0). Returns 0, or -1 with err set. */
int tokd_tokenize(const tokd_tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                  int32_t **out, size_t *n_out, tokd_err *err);

/* Bytes of a token as it appears in output text; returns the full length (writes at
 * most cap bytes). Control/unknown tokens render as "" unless render_special; unused
 * tokens always as "". Out-of-range id -> 0. */
size_t tokd_token_piece(const tokd_tokenizer *t, int32_t id, bool render_special, char *buf, size_t cap);

int32_t tokd_token_bos(const tokd_tokenizer *t); /* -1 if none */
int32_t tokd_token_eos(const tokd_tokenizer *t);
/* End of generation: EOS, EOT, EOM and well-known end-of-turn texts (<|eot_id|>,
 * <|im_end|>, <|endoftext|>, ...). */
bool tokd_token_is_eog(const tokd_tokenizer *t, int32_t id);
bool tokd_token_is_control(const tokd_tokenizer *t, int32_t id);
/* Raw vocabulary string (not NUL-terminated); NULL for an out-of-range id. */
const char *tokd_token_text(const tokd_tokenizer *t, int32_t id, size_t *len);
/* Id of the token whose raw text is exactly s, or -1. */
int32_t tokd_token_lookup(const tokd_tokenizer *t, const char *s, size_t len);

typedef struct {
    const char *model; /* "llama" or "gpt2" */
    const char *pre;   /* pre-tokenizer name ("default" when absent) */
    int32_t n_vocab, n_merges, n_special, bos, eos, unk;
    bool add_bos, add_eos, add_space_prefix;
} tokd_tokenizer_info;
void tokd_tokenizer_get_info(const tokd_tokenizer *t, tokd_tokenizer_info *info);

/* ---- Incremental detokenizer ---------------------------------------------------------
 * Appends the text of each pushed token, but only whole UTF-8 sequences: an incomplete
 * trailing sequence is held back until a later token completes it. Bytes that can no
 * longer be part of a valid sequence (stray continuation bytes, bad lead bytes, a lead
 * byte followed by a non-continuation byte) are released unchanged, so the concatenated
 * output is always exactly the concatenation of the token pieces (lossless; valid UTF-8
 * whenever the pieces together are). flush() releases whatever is held at end of
 * stream. */
typedef struct tokd_detok tokd_detok;
enum {
    TOKD_DETOK_RENDER_SPECIAL = 1,    /* render control/unknown tokens as their text */
    TOKD_DETOK_STRIP_SPACE_PREFIX = 2 /* SentencePiece: drop the leading space of the first piece */
};
tokd_detok *tokd_detok_new(const tokd_tokenizer *t); /* flags = 0 */
tokd_detok *tokd_detok_new_ex(const tokd_tokenizer *t, unsigned flags);
void tokd_detok_free(tokd_detok *d);
void tokd_detok_push(tokd_detok *d, int32_t id, tokd_buf *out);
void tokd_detok_flush(tokd_detok *d, tokd_buf *out);

/* Whole-sequence detokenization (concatenated pieces) appended to out. */
void tokd_detokenize(const tokd_tokenizer *t, const int32_t *ids, size_t n, unsigned flags, tokd_buf *out);

#endif
