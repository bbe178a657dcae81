/* tokenizer_internal.h — the tokenizer's private state, shared by its modules:
 *   tokenizer.c        loading, special-token partition, tokenize dispatch, pieces
 *   tokenizer_merge.c  the symbol/bigram merge engine both BPE flavours run on
 *   tokenizer_spm.c    SentencePiece-style tokenization (score-driven merges)
 *   tokenizer_bpe.c    byte-level BPE: PCRE2 pre-tokenizers, byte map, rank merges
 *   tokenizer_detok.c  incremental detokenizer
 * Nothing here is public API. */
#ifndef TOKD_TOKENIZER_INTERNAL_H
#define TOKD_TOKENIZER_INTERNAL_H

#include "tokenizer.h"
#include "tokenizer_map.h"

/* token attributes (bit set; token_type in GGUF gives one of the first six) */
enum {
    TK_NORMAL = 1 << 0,
    TK_UNKNOWN = 1 << 1,
    TK_CONTROL = 1 << 2,
    TK_USER = 1 << 3,
    TK_UNUSED = 1 << 4,
    TK_BYTE = 1 << 5,
    TK_UNDEF = 1 << 6,
    TK_LSTRIP = 1 << 7, /* swallow whitespace before the token (special partition) */
    TK_RSTRIP = 1 << 8, /* swallow whitespace after it */
    TK_EOG = 1 << 9,
};

typedef enum { TK_SPM, TK_BPE } tk_kind;

#define TK_MAX_REGEX 8

struct tokd_tokenizer {
    tk_kind kind;
    char *model, *pre;
    int32_t n_vocab;
    char *text_arena; /* token texts, back to back */
    uint32_t *text_off, *text_len;
    float *score;
    uint16_t *attr;
    char *piece_arena; /* rendered pieces (special tokens as their text) */
    uint32_t *piece_off, *piece_len;
    tk_map tok_map;   /* text -> id */
    tk_map merge_map; /* "left right" -> rank */
    char *merge_arena;
    int32_t n_merges;
    int32_t bos, eos, eot, eom, unk;
    bool add_bos, add_eos, add_space_prefix, ignore_merges;
    int32_t byte_tok[256]; /* SPM byte fallback; -1 none */
    int32_t *special;      /* control/user/unknown ids, longest text first */
    int32_t n_special;
    int n_regex;
    void *regex[TK_MAX_REGEX]; /* pcre2_code_8 * */
};

static inline const char *tk_text(const tokd_tokenizer *t, int32_t id) { return t->text_arena + t->text_off[id]; }

/* growable id vector */
typedef struct {
    int32_t *v;
    size_t n, cap;
} tk_ids;
void tk_ids_push(tk_ids *a, int32_t id);

/* Merge engine. Symbols are spans of one base string, linked in a list. */
typedef struct {
    int32_t prev, next;
    uint32_t off, n;
} tk_sym;
typedef struct {
    double prio; /* lower merges first */
    int32_t left, right;
    uint32_t size;
} tk_bigram;
typedef struct {
    tk_sym *syms;
    size_t nsyms, csyms;
    tk_bigram *heap;
    size_t nheap, cheap;
    char *buf; /* scratch for callers (escaped/encoded text) */
    size_t cbuf;
    char *key; /* scratch for pair keys */
    size_t ckey;
} tk_work;
void tk_work_free(tk_work *w);
void tk_work_reserve_buf(tk_work *w, size_t n);
void tk_work_reserve_key(tk_work *w, size_t n);

/* Priority of merging the adjacent symbols l and r of base, or false if they do not
 * merge. */
typedef bool (*tk_prio_fn)(const tokd_tokenizer *t, tk_work *w, const char *base, const tk_sym *l, const tk_sym *r,
                           double *prio);
/* Split base[0..len) into characters (lead-byte lengths) and merge them to a fixpoint.
 * Afterwards w->syms[0] starts the list (follow .next until -1); len must be > 0. */
void tk_merge_run(const tokd_tokenizer *t, tk_work *w, const char *base, size_t len, tk_prio_fn fn);

/* family-specific tokenization of one raw-text fragment */
void tk_spm_tokenize(const tokd_tokenizer *t, tk_work *w, const char *text, size_t len, bool space_prefix, tk_ids *out);
int tk_bpe_init(tokd_tokenizer *t, tokd_err *err);
void tk_bpe_free(tokd_tokenizer *t);
void tk_bpe_tokenize(const tokd_tokenizer *t, tk_work *w, const char *text, size_t len, tk_ids *out);

#endif
