/* tokenizer.c — loading a tokenizer from GGUF metadata, the special-token partition,
 * tokenize dispatch and token pieces.
 *
 * Loading copies what it needs out of the GGUF file (token texts, scores, types, merges)
 * into arenas owned by the tokenizer, validates every id and array length, and follows
 * llama.cpp's defaults where metadata is silent (the reference for GGUF semantics):
 * SPM vocabularies add BOS and a space prefix; byte-level BPE adds BOS only for the
 * Llama-3 family of pre-tokenizers; default BOS/EOS/UNK ids per family; end-of-turn
 * tokens recognised by their well-known texts.
 *
 * Special tokens are cut out of the text before the model tokenizer runs: candidates
 * are tried longest text first, each claiming its leftmost non-overlapping occurrences
 * in the text not yet claimed (the order llama.cpp uses, so results agree on overlaps).
 * Claimed bytes are tracked in one array, so the partition is linear in the text per
 * candidate token. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"
#include "unicode_utf8.h"

static char *dup_n(const char *s, size_t n) {
    char *p = tokd_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* Optional token id from metadata: absent or out of range -> keep *id. */
static int get_id(const gguf_file *f, const char *key, int32_t n_vocab, int32_t *id, tokd_err *err) {
    int64_t v;
    int rc = gguf_get_i64(f, key, &v, err);
    if (rc < 0) return -1;
    if (rc == 0 && v >= 0 && v < n_vocab) *id = (int32_t)v;
    return 0;
}

static int get_flag(const gguf_file *f, const char *key, bool *out, tokd_err *err) {
    return gguf_get_bool(f, key, out, err) < 0 ? -1 : 0;
}

static const char *const eot_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                        "<|end_of_text|>", "<EOT>", "_<EOT>", "<end_of_utterance>", NULL};
static const char *const eog_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                        "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
                                        "<|return|>", "<|call|>", NULL};

static int32_t lookup_c(const tokd_tokenizer *t, const char *s) { return tk_map_get(&t->tok_map, s, strlen(s)); }

/* Byte value of an SPM byte token "<0xXX>", or -1. */
static int byte_token_value(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Render the piece of token id (special tokens as their raw text) into b. */
static void render_piece(const tokd_tokenizer *t, int32_t id, tokd_buf *b) {
    const char *s = tk_text(t, id);
    size_t n = t->text_len[id];
    uint16_t a = t->attr[id];
    if (a & (TK_CONTROL | TK_UNKNOWN | TK_USER)) {
        tokd_buf_append(b, s, n);
        return;
    }
    if (a & TK_NORMAL) {
        if (t->kind == TK_SPM) {
            for (size_t i = 0; i < n;) {
                if (i + 3 <= n && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
                    tokd_buf_append(b, " ", 1);
                    i += 3;
                } else {
                    tokd_buf_append(b, s + i, 1);
                    i++;
                }
            }
        } else {
            for (size_t i = 0; i < n;) {
                uint32_t cp;
                int k = tokd_utf8_decode((const uint8_t *)s + i, n - i, &cp);
                if (k <= 0) { /* not UTF-8 in the vocabulary: copy the byte */
                    tokd_buf_append(b, s + i, 1);
                    i++;
                    continue;
                }
                int byte = tokd_bytelevel_byte(cp);
                if (byte >= 0) {
                    char c = (char)byte;
                    tokd_buf_append(b, &c, 1);
                } else {
                    tokd_buf_append(b, s + i, (size_t)k);
                }
                i += (size_t)k;
            }
        }
        return;
    }
    if (a & TK_BYTE) {
        int v = byte_token_value(s, n);
        if (v >= 0) {
            char c = (char)v;
            tokd_buf_append(b, &c, 1);
        } else {
            tokd_buf_append(b, s, n);
        }
    }
    /* unused / undefined: empty */
}

static int cmp_special(const void *pa, const void *pb, void *ctx) {
    const tokd_tokenizer *t = ctx;
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    if (t->text_len[a] != t->text_len[b]) return t->text_len[a] > t->text_len[b] ? -1 : 1;
    return a < b ? -1 : a > b;
}

static bool name_contains(const char *s, const char *sub) {
    size_t n = strlen(s), m = strlen(sub);
    for (size_t i = 0; i + m <= n; i++) {
        size_t j = 0;
        while (j < m && tolower((unsigned char)s[i + j]) == sub[j]) j++;
        if (j == m) return true;
    }
    return false;
}

tokd_tokenizer *tokd_tokenizer_load(const gguf_file *f, tokd_err *err) {
    if (!f) {
        tokd_seterr(err, "tokenizer: no file");
        return NULL;
    }
    gguf_str model, pre = {0};
    int rc = gguf_get_str(f, "tokenizer.ggml.model", &model, err);
    if (rc < 0) return NULL;
    if (rc > 0) {
        tokd_seterr(err, "tokenizer: tokenizer.ggml.model is missing (no vocabulary in this file)");
        return NULL;
    }
    tokd_tokenizer *t = tokd_xcalloc(1, sizeof *t);
    t->eot = t->eom = -1;
    if (gguf_str_eq(model, "llama")) {
        t->kind = TK_SPM;
        t->bos = 1, t->eos = 2, t->unk = 0;
        t->add_bos = true;
        t->add_space_prefix = true;
    } else if (gguf_str_eq(model, "gpt2")) {
        t->kind = TK_BPE;
        t->bos = 11, t->eos = 11, t->unk = -1;
    } else {
        tokd_seterr(err, "tokenizer: unsupported tokenizer.ggml.model '%.*s' (supported: llama, gpt2)",
                    (int)(model.len > 64 ? 64 : model.len), model.ptr);
        goto fail;
    }
    t->model = dup_n(model.ptr, model.len);
    rc = gguf_get_str(f, "tokenizer.ggml.pre", &pre, err);
    if (rc < 0) goto fail;
    t->pre = rc == 0 ? dup_n(pre.ptr, pre.len) : tokd_xstrdup("default");

    gguf_array toks, scores = {0}, types = {0};
    rc = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks, err);
    if (rc < 0) goto fail;
    if (rc > 0) {
        tokd_seterr(err, "tokenizer: tokenizer.ggml.tokens is missing");
        goto fail;
    }
    if (toks.n == 0 || toks.n > (1u << 30)) {
        tokd_seterr(err, "tokenizer: bad vocabulary size %llu", (unsigned long long)toks.n);
        goto fail;
    }
    int32_t n = t->n_vocab = (int32_t)toks.n;
    rc = gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_TYPE_COUNT, &scores, err);
    if (rc < 0) goto fail;
    bool have_scores = rc == 0;
    if (have_scores) {
        if (scores.elem_type != GGUF_TYPE_FLOAT32 && scores.elem_type != GGUF_TYPE_INT32) {
            tokd_seterr(err, "tokenizer: tokenizer.ggml.scores has element type %s", gguf_type_name(scores.elem_type));
            goto fail;
        }
        if (scores.n < toks.n) {
            tokd_seterr(err, "tokenizer: %llu scores for %llu tokens", (unsigned long long)scores.n, (unsigned long long)toks.n);
            goto fail;
        }
    }
    rc = gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_TYPE_COUNT, &types, err);
    if (rc < 0) goto fail;
    bool have_types = rc == 0;
    if (have_types) {
        if (types.elem_type == GGUF_TYPE_STRING || types.elem_type == GGUF_TYPE_ARRAY || types.elem_type == GGUF_TYPE_FLOAT32 ||
            types.elem_type == GGUF_TYPE_FLOAT64 || types.elem_type == GGUF_TYPE_BOOL) {
            tokd_seterr(err, "tokenizer: tokenizer.ggml.token_type has element type %s", gguf_type_name(types.elem_type));
            goto fail;
        }
        if (types.n < toks.n) {
            tokd_seterr(err, "tokenizer: %llu token types for %llu tokens", (unsigned long long)types.n, (unsigned long long)toks.n);
            goto fail;
        }
    }

    /* texts */
    uint64_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        if (toks.strs[i].len > (1u << 20)) {
            tokd_seterr(err, "tokenizer: token %d is %llu bytes long", i, (unsigned long long)toks.strs[i].len);
            goto fail;
        }
        total += toks.strs[i].len;
    }
    if (total > 0xFFFFFFF0u) {
        tokd_seterr(err, "tokenizer: token texts too large");
        goto fail;
    }
    t->text_arena = tokd_xmalloc(total + 1);
    t->text_off = tokd_xmalloc((size_t)n * sizeof *t->text_off);
    t->text_len = tokd_xmalloc((size_t)n * sizeof *t->text_len);
    t->score = tokd_xmalloc((size_t)n * sizeof *t->score);
    t->attr = tokd_xmalloc((size_t)n * sizeof *t->attr);
    tk_map_init(&t->tok_map, (size_t)n);
    uint64_t off = 0;
    for (int32_t i = 0; i < n; i++) {
        memcpy(t->text_arena + off, toks.strs[i].ptr, toks.strs[i].len);
        t->text_off[i] = (uint32_t)off;
        t->text_len[i] = (uint32_t)toks.strs[i].len;
        off += toks.strs[i].len;
        t->score[i] = have_scores ? (float)gguf_arr_f64(&scores, (uint64_t)i) : 0.0f;
        uint16_t a = TK_NORMAL;
        if (have_types) {
            switch (gguf_arr_i64(&types, (uint64_t)i)) {
            case 1: a = TK_NORMAL; break;
            case 2: a = TK_UNKNOWN; break;
            case 3: a = TK_CONTROL; break;
            case 4: a = TK_USER; break;
            case 5: a = TK_UNUSED; break;
            case 6: a = TK_BYTE; break;
            default: a = TK_UNDEF; break;
            }
        }
        t->attr[i] = a;
        if (t->text_len[i] > 0) tk_map_put(&t->tok_map, tk_text(t, i), t->text_len[i], i); /* first id wins */
    }

    /* merges */
    if (t->kind == TK_BPE) {
        gguf_array merges;
        rc = gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges, err);
        if (rc < 0) goto fail;
        if (rc > 0) {
            tokd_seterr(err, "tokenizer: tokenizer.ggml.merges is missing (needed by gpt2 tokenizers)");
            goto fail;
        }
        if (merges.n > (1u << 30)) {
            tokd_seterr(err, "tokenizer: too many merges (%llu)", (unsigned long long)merges.n);
            goto fail;
        }
        uint64_t mt = 0;
        for (uint64_t i = 0; i < merges.n; i++) mt += merges.strs[i].len;
        if (mt > 0xFFFFFFF0u) {
            tokd_seterr(err, "tokenizer: merges too large");
            goto fail;
        }
        t->merge_arena = tokd_xmalloc(mt + 1);
        tk_map_init(&t->merge_map, merges.n);
        uint64_t mo = 0;
        for (uint64_t i = 0; i < merges.n; i++) {
            const gguf_str *s = &merges.strs[i];
            memcpy(t->merge_arena + mo, s->ptr, s->len);
            /* a merge is "left right", split at the first space after the first byte */
            const char *m = t->merge_arena + mo;
            const char *sp = s->len > 1 ? memchr(m + 1, ' ', s->len - 1) : NULL;
            if (sp) tk_map_put(&t->merge_map, m, s->len, (int32_t)i);
            mo += s->len;
        }
        t->n_merges = (int32_t)merges.n;
    }

    /* pre-tokenizer and flags that depend on it */
    if (t->kind == TK_BPE) {
        const char *p = t->pre;
        if (!strcmp(p, "llama3") || !strcmp(p, "llama-v3") || !strcmp(p, "llama-bpe") || !strcmp(p, "falcon3") ||
            !strcmp(p, "pixtral") || !strcmp(p, "tekken")) {
            t->ignore_merges = true;
            t->add_bos = true;
        } else if (!strcmp(p, "chameleon")) {
            t->add_bos = true;
        } else if (!strcmp(p, "chatglm-bpe") || !strcmp(p, "glm4")) {
            t->bos = -1;
        }
        if (tk_bpe_init(t, err) < 0) goto fail;
    }

    /* special ids */
    if (t->bos >= n) t->bos = -1;
    if (t->eos >= n) t->eos = -1;
    if (t->unk >= n) t->unk = -1;
    if (get_id(f, "tokenizer.ggml.bos_token_id", n, &t->bos, err) < 0 ||
        get_id(f, "tokenizer.ggml.eos_token_id", n, &t->eos, err) < 0 ||
        get_id(f, "tokenizer.ggml.eot_token_id", n, &t->eot, err) < 0 ||
        get_id(f, "tokenizer.ggml.eom_token_id", n, &t->eom, err) < 0 ||
        get_id(f, "tokenizer.ggml.unknown_token_id", n, &t->unk, err) < 0)
        goto fail;
    if (get_flag(f, "tokenizer.ggml.add_bos_token", &t->add_bos, err) < 0 ||
        get_flag(f, "tokenizer.ggml.add_eos_token", &t->add_eos, err) < 0 ||
        get_flag(f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err) < 0)
        goto fail;
    if (t->add_bos && t->bos < 0) {
        tokd_seterr(err, "tokenizer: add_bos_token is true but there is no valid bos_token_id");
        goto fail;
    }
    if (t->add_eos && t->eos < 0) {
        tokd_seterr(err, "tokenizer: add_eos_token is true but there is no valid eos_token_id");
        goto fail;
    }

    /* end-of-turn tokens by text (they are control tokens whatever the file says) */
    if (t->eot < 0)
        for (int i = 0; eot_texts[i] && t->eot < 0; i++) t->eot = lookup_c(t, eot_texts[i]);
    if (t->eom < 0) t->eom = lookup_c(t, "<|eom_id|>");
    for (int i = 0; eog_texts[i]; i++) {
        int32_t id = lookup_c(t, eog_texts[i]);
        if (id >= 0) t->attr[id] |= TK_EOG | TK_CONTROL;
    }
    if (t->eot >= 0) t->attr[t->eot] |= TK_EOG | TK_CONTROL;
    if (t->eom >= 0) t->attr[t->eom] |= TK_EOG | TK_CONTROL;
    if (t->eos >= 0) t->attr[t->eos] |= TK_EOG;

    /* byte fallback (SPM) */
    for (int b = 0; b < 256; b++) {
        char hex[7];
        static const char digits[] = "0123456789ABCDEF";
        hex[0] = '<', hex[1] = '0', hex[2] = 'x', hex[3] = digits[b >> 4], hex[4] = digits[b & 15], hex[5] = '>', hex[6] = 0;
        int32_t id = tk_map_get(&t->tok_map, hex, 6);
        if (id < 0) {
            char c = (char)b;
            id = tk_map_get(&t->tok_map, &c, 1);
        }
        t->byte_tok[b] = id >= 0 ? id : t->unk;
    }

    /* special-token candidates, longest first */
    t->special = tokd_xmalloc((size_t)n * sizeof *t->special);
    for (int32_t i = 0; i < n; i++)
        if ((t->attr[i] & (TK_CONTROL | TK_USER | TK_UNKNOWN)) && t->text_len[i] > 0) t->special[t->n_special++] = i;
    qsort_r(t->special, (size_t)t->n_special, sizeof *t->special, cmp_special, t);

    /* Phi-3: special tokens swallow the whitespace after them (as llama.cpp sets up) */
    gguf_str gname;
    if (gguf_get_str(f, "general.name", &gname, NULL) == 0) {
        char *name = dup_n(gname.ptr, gname.len > 256 ? 256 : gname.len);
        if (name_contains(name, "phi-3") || name_contains(name, "phi3")) {
            for (int32_t i = 0; i < t->n_special; i++) t->attr[t->special[i]] |= TK_RSTRIP;
            int32_t id = lookup_c(t, "</s>");
            if (id >= 0) t->attr[id] |= TK_RSTRIP;
            const char *keep[] = {"<unk>", "<s>", "<|endoftext|>"};
            for (int i = 0; i < 3; i++)
                if ((id = lookup_c(t, keep[i])) >= 0) t->attr[id] &= (uint16_t)~TK_RSTRIP;
        }
        free(name);
    }

    /* pieces */
    tokd_buf pb = {0};
    t->piece_off = tokd_xmalloc((size_t)n * sizeof *t->piece_off);
    t->piece_len = tokd_xmalloc((size_t)n * sizeof *t->piece_len);
    for (int32_t i = 0; i < n; i++) {
        size_t before = pb.len;
        render_piece(t, i, &pb);
        t->piece_off[i] = (uint32_t)before;
        t->piece_len[i] = (uint32_t)(pb.len - before);
    }
    t->piece_arena = pb.data ? pb.data : tokd_xcalloc(1, 1);
    return t;
fail:
    tokd_tokenizer_free(t);
    return NULL;
}

void tokd_tokenizer_free(tokd_tokenizer *t) {
    if (!t) return;
    if (t->kind == TK_BPE) tk_bpe_free(t);
    free(t->model);
    free(t->pre);
    free(t->text_arena);
    free(t->text_off);
    free(t->text_len);
    free(t->score);
    free(t->attr);
    free(t->piece_arena);
    free(t->piece_off);
    free(t->piece_len);
    tk_map_free(&t->tok_map);
    tk_map_free(&t->merge_map);
    free(t->merge_arena);
    free(t->special);
    free(t);
}

int32_t tokd_tokenizer_n_vocab(const tokd_tokenizer *t) { return t ? t->n_vocab : 0; }

/* ---- special-token partition ------------------------------------------------------ */

enum { MARK_RAW = -1, MARK_DROP = -2, MARK_CONT = -3 };

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* Returns a malloc'd array mark[len] (token id at the start of each claimed span), or
 * NULL if no special token occurs. */
static int32_t *partition(const tokd_tokenizer *t, const char *text, size_t len, bool parse_special) {
    int32_t *mark = NULL;
    for (int32_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special[k];
        uint16_t a = t->attr[id];
        if (!parse_special && (a & (TK_CONTROL | TK_UNKNOWN))) continue;
        const char *s = tk_text(t, id);
        size_t L = t->text_len[id];
        if (L > len) continue;
        size_t p = 0;
        while (p + L <= len) {
            const char *hit = memmem(text + p, len - p, s, L);
            if (!hit) break;
            size_t at = (size_t)(hit - text);
            if (!mark) {
                mark = tokd_xmalloc(len * sizeof *mark);
                for (size_t i = 0; i < len; i++) mark[i] = MARK_RAW;
            }
            bool free_span = true;
            for (size_t i = at; i < at + L; i++)
                if (mark[i] != MARK_RAW) {
                    free_span = false;
                    break;
                }
            if (!free_span) {
                p = at + 1;
                continue;
            }
            mark[at] = id;
            for (size_t i = at + 1; i < at + L; i++) mark[i] = MARK_CONT;
            if (a & TK_LSTRIP)
                for (size_t i = at; i > 0 && mark[i - 1] == MARK_RAW && is_ws(text[i - 1]); i--) mark[i - 1] = MARK_DROP;
            p = at + L;
            if (a & TK_RSTRIP)
                while (p < len && mark[p] == MARK_RAW && is_ws(text[p])) mark[p++] = MARK_DROP;
        }
    }
    return mark;
}

static void tokenize_fragment(const tokd_tokenizer *t, tk_work *w, const char *text, size_t len, bool prev_special,
                              tk_ids *out) {
    if (t->kind == TK_SPM)
        tk_spm_tokenize(t, w, text, len, t->add_space_prefix && prev_special, out);
    else
        tk_bpe_tokenize(t, w, text, len, out);
}

int tokd_tokenize(const tokd_tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                  int32_t **out, size_t *n_out, tokd_err *err) {
    if (!out || !n_out) return tokd_seterr(err, "tokenize: no output");
    *out = NULL;
    *n_out = 0;
    if (!t) return tokd_seterr(err, "tokenize: no tokenizer");
    if (!text && len) return tokd_seterr(err, "tokenize: no text");
    tk_ids ids = {0};
    tk_work w = {0};
    if (add_special && t->add_bos && t->bos >= 0) tk_ids_push(&ids, t->bos);
    if (len > 0) {
        int32_t *mark = t->n_special ? partition(t, text, len, parse_special) : NULL;
        if (!mark) {
            tokenize_fragment(t, &w, text, len, true, &ids);
        } else {
            bool prev_special = true;
            size_t i = 0;
            while (i < len) {
                if (mark[i] >= 0) {
                    tk_ids_push(&ids, mark[i]);
                    prev_special = true;
                    i++;
                    while (i < len && mark[i] == MARK_CONT) i++;
                } else if (mark[i] == MARK_DROP) {
                    i++;
                } else {
                    size_t j = i;
                    while (j < len && mark[j] == MARK_RAW) j++;
                    tokenize_fragment(t, &w, text + i, j - i, prev_special, &ids);
                    prev_special = false;
                    i = j;
                }
            }
            free(mark);
        }
    }
    if (add_special && t->add_eos && t->eos >= 0) tk_ids_push(&ids, t->eos);
    tk_work_free(&w);
    *out = ids.v;
    *n_out = ids.n;
    return 0;
}

/* ---- pieces and queries ----------------------------------------------------------- */

size_t tokd_token_piece(const tokd_tokenizer *t, int32_t id, bool render_special, char *buf, size_t cap) {
    if (!t || id < 0 || id >= t->n_vocab) return 0;
    if (!render_special && (t->attr[id] & (TK_CONTROL | TK_UNKNOWN))) return 0;
    size_t n = t->piece_len[id];
    if (buf && cap) memcpy(buf, t->piece_arena + t->piece_off[id], n < cap ? n : cap);
    return n;
}

int32_t tokd_token_bos(const tokd_tokenizer *t) { return t ? t->bos : -1; }
int32_t tokd_token_eos(const tokd_tokenizer *t) { return t ? t->eos : -1; }

bool tokd_token_is_eog(const tokd_tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->n_vocab && (t->attr[id] & TK_EOG);
}

bool tokd_token_is_control(const tokd_tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->n_vocab && (t->attr[id] & TK_CONTROL);
}

const char *tokd_token_text(const tokd_tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n_vocab) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = t->text_len[id];
    return tk_text(t, id);
}

int32_t tokd_token_lookup(const tokd_tokenizer *t, const char *s, size_t len) {
    return t && (s || !len) ? tk_map_get(&t->tok_map, s, len) : -1;
}

void tokd_tokenizer_get_info(const tokd_tokenizer *t, tokd_tokenizer_info *info) {
    memset(info, 0, sizeof *info);
    if (!t) return;
    info->model = t->model;
    info->pre = t->pre;
    info->n_vocab = t->n_vocab;
    info->n_merges = t->n_merges;
    info->n_special = t->n_special;
    info->bos = t->bos;
    info->eos = t->eos;
    info->unk = t->unk;
    info->add_bos = t->add_bos;
    info->add_eos = t->add_eos;
    info->add_space_prefix = t->add_space_prefix;
}
