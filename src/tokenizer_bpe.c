/* tokenizer_bpe.c — byte-level BPE ("gpt2" vocabularies).
 *
 * Pipeline for one raw-text fragment:
 *  1. Pre-tokenize: the regexes named by tokenizer.ggml.pre are applied in order; each
 *     one cuts every current piece into its matches and the gaps between them (both kept,
 *     the Hugging Face "Isolated" split). A regex sees one piece at a time, so look-aheads
 *     stop at the piece's end. The patterns are the pre_tokenizer patterns of each
 *     family's tokenizer.json (the same list llama.cpp keeps), compiled with PCRE2 in UTF
 *     + UCP mode so \p{L}, \p{N}, \s are Unicode properties, JIT-compiled when available.
 *  2. Each word's bytes are mapped through the GPT-2 byte<->unicode table, so every
 *     symbol is one input byte and every word is valid UTF-8 for the vocabulary lookup.
 *  3. Symbols merge by rank from tokenizer.ggml.merges (lowest rank first, leftmost on
 *     ties) within the word; merging never crosses words, so the cost is linear in the
 *     text for ordinary words and O(n log n) for a single huge one.
 * Invalid UTF-8: PCRE2 runs with PCRE2_MATCH_INVALID_UTF, under which invalid bytes
 * simply never match; they end up in gap pieces and, after step 2, as their byte tokens.
 * A PCRE2 failure (resource limits) cannot lose text either: the rest of that piece
 * becomes one gap. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"
#include "unicode_utf8.h"

/* GPT-2 (also gpt-neox, mpt, olmo, phi-2, jais, ...) */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
/* Llama 3 */
#define RE_LLAMA3                                                                                                      \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|" \
    "\\s+(?!\\S)|\\s+"
/* Qwen2: like Llama 3 but single digits */
#define RE_QWEN2                                                                                                       \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"     \
    "\\s+(?!\\S)|\\s+"
#define RE_GPT2_NOWS "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_CJK "[一-龥ࠀ-一가-퟿]+"
#define RE_BLOOM " ?[^(\\s|.,!?…。，、।۔،)]+"
#define RE_TEKKEN                                                                                                      \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"                           \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| "                    \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_GPT4O                                                                                                       \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* DeepSeek LLM: its letter class is an explicit list of cased-letter ranges. Code points whose
 * Unicode normalisation differs (e.g. U+1F7D, U+2126 OHM, U+212A KELVIN) are written as \x{...}
 * so that no editor can silently normalise them. */
#define RE_DEEPSEEK_LETTERS                                                                                            \
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\\x{1F7D}ᾀ-ᾴᾶ-ᾼ\\x{1FBE}ῂ-ῄῆ-ῌῐ-\\x{1FD3}ῖ-\\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\\x{2126}ℨ\\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+"

typedef struct {
    const char *names; /* '|'-separated tokenizer.ggml.pre values */
    const char *re[TK_MAX_REGEX];
} pre_def;

static const pre_def pre_defs[] = {
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2_NOWS, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {"gpt-2|gpt2|gpt-neox|mpt|olmo|jais|phi-2|jina-es|jina-de|jina-v1-en|jina-v2-es|jina-v2-de|jina-v2-code|roberta-bpe|"
     "gigachat|exaone4|trillion|granite-docling|a.x-4.0|mellum|modern-bert",
     {RE_GPT2}},
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|dbrx|smaug-bpe|chatglm-bpe|glm4|midm-2.0|lfm2", {RE_LLAMA3}},
    {"qwen2|qwen2.5|qwen-2.5|deepseek-r1-qwen|megrez|stablelm2|hunyuan|kormo", {RE_QWEN2}},
    {"deepseek-llm",
     {"[\r\n]", RE_DEEPSEEK_LETTERS, "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", RE_CJK, "\\p{N}+"}},
    {"deepseek-coder", {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK, "\\p{N}"}},
    {"deepseek-v3",
     {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
      "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2_NOWS, "[0-9][0-9][0-9]"}},
    {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b", {"\\p{N}", RE_GPT2_NOWS}},
    {"poro-chat|bloom|gpt3-finnish", {RE_BLOOM}},
    {"viking", {RE_BLOOM, "\\p{N}"}},
    {"tekken", {RE_TEKKEN}},
    {"gpt-4o|llama4", {RE_GPT4O}},
    {"chameleon",
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
      "[\\p{P}!-/:-@\\[-`{-~]", RE_GPT2_NOWS}},
};

static bool name_in_list(const char *name, const char *list) {
    size_t n = strlen(name);
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, '|');
        size_t m = e ? (size_t)(e - p) : strlen(p);
        if (m == n && memcmp(p, name, n) == 0) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

int tk_bpe_init(tokd_tokenizer *t, tokd_err *err) {
    const pre_def *def = NULL;
    for (size_t i = 0; i < sizeof pre_defs / sizeof pre_defs[0]; i++)
        if (name_in_list(t->pre, pre_defs[i].names)) def = &pre_defs[i];
    if (!def) return tokd_seterr(err, "tokenizer: unknown pre-tokenizer '%.64s' (tokenizer.ggml.pre)", t->pre);
    for (int i = 0; i < TK_MAX_REGEX && def->re[i]; i++) {
        int ecode;
        PCRE2_SIZE eoff;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)def->re[i], PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY, &ecode,
                                       &eoff, NULL);
        if (!re) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(ecode, msg, sizeof msg);
            return tokd_seterr(err, "tokenizer: pre-tokenizer '%s' regex %d does not compile: %s", t->pre, i, (char *)msg);
        }
        (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* the interpreter is the fallback */
        t->regex[t->n_regex++] = re;
    }
    return 0;
}

void tk_bpe_free(tokd_tokenizer *t) {
    for (int i = 0; i < t->n_regex; i++) pcre2_code_free(t->regex[i]);
    t->n_regex = 0;
}

typedef struct {
    size_t off, len;
} span;
typedef struct {
    span *v;
    size_t n, cap;
} spans;

static void spans_push(spans *s, size_t off, size_t len) {
    if (len == 0) return;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->v = tokd_xrealloc(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n++] = (span){off, len};
}

static void split_one(const pcre2_code *re, pcre2_match_data *md, pcre2_match_context *mc, const char *text, span in,
                      spans *out) {
    const PCRE2_SPTR subj = (PCRE2_SPTR)(text + in.off);
    size_t pos = 0, last = 0;
    while (pos < in.len) {
        int rc = pcre2_match(re, subj, in.len, pos, 0, md, mc);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) break; /* resource limit: rest is one gap */
        if (rc == PCRE2_ERROR_NOMATCH) break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t s = ov[0], e = ov[1];
        if (s > in.len || e > in.len || e < s) break;
        if (e == s) { /* empty match: step over one character */
            pos = s + 1;
            while (pos < in.len && (subj[pos] & 0xC0) == 0x80) pos++;
            continue;
        }
        if (s > last) spans_push(out, in.off + last, s - last);
        spans_push(out, in.off + s, e - s);
        last = pos = e;
    }
    if (last < in.len) spans_push(out, in.off + last, in.len - last);
}

static bool bpe_prio(const tokd_tokenizer *t, tk_work *w, const char *base, const tk_sym *l, const tk_sym *r,
                     double *prio) {
    size_t n = (size_t)l->n + 1 + r->n;
    tk_work_reserve_key(w, n);
    memcpy(w->key, base + l->off, l->n);
    w->key[l->n] = ' ';
    memcpy(w->key + l->n + 1, base + r->off, r->n);
    int32_t rank = tk_map_get(&t->merge_map, w->key, n);
    if (rank < 0) return false;
    *prio = (double)rank;
    return true;
}

static void bpe_word(const tokd_tokenizer *t, tk_work *w, const char *word, size_t len, tk_ids *out) {
    /* byte-level encode: each byte becomes a 1- or 2-byte UTF-8 code point */
    tk_work_reserve_buf(w, 2 * len);
    char *e = w->buf;
    size_t k = 0;
    for (size_t i = 0; i < len; i++) k += tokd_utf8_encode(tokd_bytelevel_cp((uint8_t)word[i]), e + k);
    if (t->ignore_merges) {
        int32_t id = tk_map_get(&t->tok_map, e, k);
        if (id >= 0) {
            tk_ids_push(out, id);
            return;
        }
    }
    tk_merge_run(t, w, e, k, bpe_prio);
    for (int32_t i = 0; i != -1; i = w->syms[i].next) {
        const tk_sym *s = &w->syms[i];
        int32_t id = tk_map_get(&t->tok_map, e + s->off, s->n);
        if (id >= 0) {
            tk_ids_push(out, id);
            continue;
        }
        /* not in the vocabulary: fall back to single-byte tokens of the symbol's text,
         * then to the unknown token (llama.cpp drops what has neither) */
        for (uint32_t j = 0; j < s->n; j++) {
            int32_t b = tk_map_get(&t->tok_map, e + s->off + j, 1);
            if (b < 0) b = t->unk;
            if (b >= 0) tk_ids_push(out, b);
        }
    }
}

void tk_bpe_tokenize(const tokd_tokenizer *t, tk_work *w, const char *text, size_t len, tk_ids *out) {
    if (len == 0) return;
    spans a = {0}, b = {0};
    spans_push(&a, 0, len);
    pcre2_match_data *md = pcre2_match_data_create(16, NULL);
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    pcre2_jit_stack *js = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
    if (mc && js) pcre2_jit_stack_assign(mc, NULL, js);
    if (md) {
        for (int r = 0; r < t->n_regex; r++) {
            b.n = 0;
            for (size_t i = 0; i < a.n; i++) split_one(t->regex[r], md, mc, text, a.v[i], &b);
            spans tmp = a;
            a = b;
            b = tmp;
        }
    }
    for (size_t i = 0; i < a.n; i++) bpe_word(t, w, text + a.v[i].off, a.v[i].len, out);
    if (js) pcre2_jit_stack_free(js);
    if (mc) pcre2_match_context_free(mc);
    if (md) pcre2_match_data_free(md);
    free(a.v);
    free(b.v);
}
