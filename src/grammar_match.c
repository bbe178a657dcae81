/* grammar_match.c — the incremental matcher, the token trie and the token mask (see
 * grammar.h for the design).
 *
 * Stacks. Node i is (pos[i], parent[i]): pos is an element index (for the top node, the
 * character class to match next; below it, where to continue once the rule above returns),
 * parent is the next node down or -1. Nodes are hash-consed, so a stack is identified by its
 * top node id and a state by the sorted set of its top ids plus the UTF-8 prefix and the
 * accepting flag. Nodes accumulate while masks explore; every accepted token garbage-collects
 * the store down to the committed state's stacks.
 *
 * Step (consume one byte): UTF-8 decoding first; a complete code point advances every stack
 * whose class matches it, and the closure expands from there: a reference pushes the
 * continuation (none in tail position) and every alternative of the rule; the end of an
 * alternative returns to the continuation below; an empty stack means accepting. A visited
 * set of (position, stack) pairs makes the closure polynomial; a cap on visits and on the
 * number of stacks bounds pathological grammars (the state is then marked failed).
 *
 * Those caps bound one step; a mask takes a step per trie node it reaches (and up to 256
 * more per state for its loop bytes), so a grammar ambiguous enough to keep thousands of
 * stacks alive costs each mask thousands of steps of thousands of visits: a grammar
 * libFuzzer found took 176 ms a mask on a 100k-token vocabulary, and nothing bounded the
 * worst case but steps x visits. So a mask call also has a budget of closure work
 * (TOKD_GRAMMAR_MASK_WORK items by default, about 0.1-0.2 s here); past it the state fails
 * as at the other bounds. The masks of the JSON and test grammars on the shared vocabularies (32k to
 * 100k tokens) do at most ~30k items, 1/280 of it.
 *
 * Mask. Per call, states met while walking the trie are interned (so they compare as ints)
 * and transitions memoised; see grammar.h for the pruning. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_internal.h"

#define MAX_TOKEN_BYTES 1024
#define MAX_VISITS (1 << 17)

/* ---- vocabulary trie ------------------------------------------------------------------- */

struct tokd_grammar_vocab {
    int32_t n_vocab;
    char *pieces;          /* every token's bytes */
    int64_t *piece_off;    /* n_vocab + 1 */
    uint8_t *is_eog;
    int32_t *eog;
    int32_t n_eog;
    int32_t n_nodes, max_depth;
    uint8_t *byte;         /* edge byte into the node (preorder) */
    int32_t *end;          /* preorder index past the node's subtree */
    int32_t *tok_lo, *tok_own, *tok_hi; /* perm[tok_lo..tok_own): ending here; ..tok_hi: subtree */
    uint64_t *sub;         /* 4 words per node: bytes on edges in the subtree, its own edge included */
    uint8_t *text;         /* per node: every token below is, from this node's edge byte on, whole
                              UTF-8 characters of "text" (>= U+0020, not '"', '\\' or DEL) */
    uint8_t *clean;        /* per piece byte: the piece from here on is such text (build only) */
    int32_t *perm;         /* token ids in preorder of where they end */
};

typedef struct {
    const char *p;
    int64_t len;
    int32_t id;
} piece_ref;

static int cmp_piece(const void *a, const void *b) {
    const piece_ref *x = a, *y = b;
    int c = memcmp(x->p, y->p, (size_t)(x->len < y->len ? x->len : y->len));
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

typedef struct {
    tokd_grammar_vocab *v;
    const int32_t *ids;
    int32_t n_perm;
} build_ctx;

static int32_t build_node(build_ctx *b, int32_t lo, int32_t hi, int32_t depth, uint8_t byte) {
    tokd_grammar_vocab *v = b->v;
    int32_t n = v->n_nodes++;
    if (depth > v->max_depth) v->max_depth = depth;
    v->byte[n] = byte;
    v->tok_lo[n] = b->n_perm;
    uint64_t *sub = v->sub + 4 * (size_t)n;
    memset(sub, 0, 32);
    if (depth) sub[byte >> 6] |= 1ull << (byte & 63);
    int32_t i = lo;
    bool text = depth > 0;
    for (int32_t k = lo; k < hi && text && depth; k++) text = v->clean[v->piece_off[b->ids[k]] + depth - 1];
    v->text[n] = text;
    while (i < hi && v->piece_off[b->ids[i] + 1] - v->piece_off[b->ids[i]] == depth) v->perm[b->n_perm++] = b->ids[i++];
    v->tok_own[n] = b->n_perm;
    while (i < hi) {
        uint8_t c = (uint8_t)v->pieces[v->piece_off[b->ids[i]] + depth];
        int32_t j = i + 1;
        while (j < hi && (uint8_t)v->pieces[v->piece_off[b->ids[j]] + depth] == c) j++;
        int32_t ch = build_node(b, i, j, depth + 1, c);
        for (int k = 0; k < 4; k++) sub[k] |= v->sub[4 * (size_t)ch + k];
        i = j;
    }
    v->end[n] = v->n_nodes;
    v->tok_hi[n] = b->n_perm;
    return n;
}

tokd_grammar_vocab *tokd_grammar_vocab_new(const tokd_tokenizer *tok) {
    tokd_grammar_vocab *v = tokd_xcalloc(1, sizeof *v);
    int32_t V = tokd_tokenizer_n_vocab(tok);
    v->n_vocab = V;
    v->piece_off = tokd_xmalloc(((size_t)V + 1) * sizeof *v->piece_off);
    v->is_eog = tokd_xcalloc((size_t)V + 1, 1);
    v->eog = tokd_xmalloc(((size_t)V + 1) * sizeof *v->eog);
    tokd_buf all = {0};
    char buf[MAX_TOKEN_BYTES];
    int32_t *ids = tokd_xmalloc(((size_t)V + 1) * sizeof *ids), n_ids = 0;
    for (int32_t i = 0; i < V; i++) {
        v->piece_off[i] = (int64_t)all.len;
        if (tokd_token_is_eog(tok, i)) {
            v->is_eog[i] = 1;
            v->eog[v->n_eog++] = i;
            continue;
        }
        size_t n = tokd_token_piece(tok, i, false, buf, sizeof buf);
        if (n == 0 || n > sizeof buf) continue; /* never allowed */
        tokd_buf_append(&all, buf, n);
        ids[n_ids++] = i;
    }
    v->piece_off[V] = (int64_t)all.len;
    v->pieces = all.data ? all.data : tokd_xcalloc(1, 1);
    piece_ref *refs = tokd_xmalloc(((size_t)n_ids + 1) * sizeof *refs);
    for (int32_t i = 0; i < n_ids; i++)
        refs[i] = (piece_ref){v->pieces + v->piece_off[ids[i]], v->piece_off[ids[i] + 1] - v->piece_off[ids[i]], ids[i]};
    qsort(refs, (size_t)n_ids, sizeof *refs, cmp_piece);
    for (int32_t i = 0; i < n_ids; i++) ids[i] = refs[i].id;
    free(refs);
    /* clean[i]: bytes i.. of the piece are whole text characters */
    v->clean = tokd_xmalloc(all.len + 1);
    for (int32_t k = 0; k < n_ids; k++) {
        const unsigned char *pc = (const unsigned char *)v->pieces + v->piece_off[ids[k]];
        int64_t len = v->piece_off[ids[k] + 1] - v->piece_off[ids[k]];
        uint8_t *cl = v->clean + v->piece_off[ids[k]];
        for (int64_t i = len - 1; i >= 0; i--) {
            unsigned c0 = pc[i];
            int L = c0 < 0x80 ? 1 : c0 >= 0xC2 && c0 <= 0xDF ? 2 : c0 >= 0xE0 && c0 <= 0xEF ? 3 : c0 >= 0xF0 && c0 <= 0xF4 ? 4 : 0;
            bool ok = L > 0 && i + L <= len && (i + L == len || cl[i + L]);
            uint32_t cp = L == 1 ? c0 : L == 2 ? c0 & 0x1F : L == 3 ? c0 & 0x0F : c0 & 0x07;
            for (int j = 1; ok && j < L; j++) {
                ok = (pc[i + j] & 0xC0) == 0x80;
                cp = (cp << 6) | (pc[i + j] & 0x3F);
            }
            if (ok && L == 1) ok = c0 >= 0x20 && c0 != '"' && c0 != '\\' && c0 != 0x7F;
            if (ok && L == 3) ok = cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF);
            if (ok && L == 4) ok = cp >= 0x10000 && cp <= 0x10FFFF;
            cl[i] = ok;
        }
    }
    size_t max_nodes = all.len + 1;
    v->byte = tokd_xmalloc(max_nodes);
    v->end = tokd_xmalloc(max_nodes * sizeof *v->end);
    v->tok_lo = tokd_xmalloc(max_nodes * sizeof *v->tok_lo);
    v->tok_own = tokd_xmalloc(max_nodes * sizeof *v->tok_own);
    v->tok_hi = tokd_xmalloc(max_nodes * sizeof *v->tok_hi);
    v->sub = tokd_xmalloc(max_nodes * 32);
    v->text = tokd_xmalloc(max_nodes);
    v->perm = tokd_xmalloc(((size_t)n_ids + 1) * sizeof *v->perm);
    build_ctx b = {v, ids, 0};
    build_node(&b, 0, n_ids, 0, 0);
    free(ids);
    free(v->clean);
    v->clean = NULL;
    return v;
}

void tokd_grammar_vocab_free(tokd_grammar_vocab *v) {
    if (!v) return;
    free(v->pieces);
    free(v->piece_off);
    free(v->is_eog);
    free(v->eog);
    free(v->byte);
    free(v->end);
    free(v->tok_lo);
    free(v->tok_own);
    free(v->tok_hi);
    free(v->sub);
    free(v->text);
    free(v->perm);
    free(v);
}

/* ---- state ------------------------------------------------------------------------------ */

/* UTF-8 progress packed in one word: code point bits so far | remaining << 24 | length << 28. */
#define U8_CP(u) ((u) & 0x1FFFFFu)
#define U8_NEED(u) (((u) >> 24) & 3u)
#define U8_LEN(u) ((u) >> 28)
#define U8_PACK(cp, need, len) ((cp) | ((uint32_t)(need) << 24) | ((uint32_t)(len) << 28))

typedef struct {
    int32_t off, n;  /* tops in pool */
    uint32_t u8;
    bool acc, has_loop;
    int8_t text_loop; /* -1 unknown; 1: every text character leads back to this set */
    uint32_t hash;
    uint64_t loop[4];
} tg_set;

struct tokd_grammar_state {
    const tokd_grammar *g;
    const tokd_grammar_vocab *v;
    /* hash-consed nodes */
    int32_t *npos, *npar;
    int32_t n_nodes, cap_nodes;
    int32_t *ntab;
    uint32_t ntab_mask;
    /* committed state */
    int32_t *tops;
    int32_t n_tops, cap_tops;
    uint32_t u8;
    bool acc, failed;
    /* step output */
    int32_t *out;
    int32_t n_out, cap_out;
    uint32_t out_u8;
    bool out_acc;
    /* closure scratch */
    int32_t *work;
    int32_t cap_work;
    uint64_t *vis_key;
    uint32_t *vis_stamp, vis_mask, vis_gen, n_vis;
    int64_t work_budget, work_left; /* closure work a mask call may do, and still may (unbounded outside one) */
    int64_t last_work;              /* what the last mask call did */
    /* per-mask-call interning and memo */
    int32_t *pool;
    int32_t n_pool, cap_pool;
    tg_set *sets;
    int32_t n_sets, cap_sets;
    int32_t *stab;
    uint32_t *stab_stamp, stab_mask;
    int32_t *tt; /* 256 memoised transitions per set: 0 unknown, 1 bounds exceeded, 2 dead, 3 + id */
    uint32_t call_gen;
    uint8_t *allowed;
    int32_t *frames; /* node, set, cursor */
    int32_t *gc_map;
    int32_t cap_gc, gc_at;
};

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static void ntab_insert(tokd_grammar_state *s, int32_t id) {
    uint32_t h = (uint32_t)mix64(((uint64_t)(uint32_t)s->npos[id] << 32) | (uint32_t)s->npar[id]) & s->ntab_mask;
    while (s->ntab[h] >= 0) h = (h + 1) & s->ntab_mask;
    s->ntab[h] = id;
}

static void ntab_rebuild(tokd_grammar_state *s, uint32_t cap) {
    free(s->ntab);
    s->ntab = tokd_xmalloc(cap * sizeof *s->ntab);
    memset(s->ntab, 0xff, cap * sizeof *s->ntab);
    s->ntab_mask = cap - 1;
    for (int32_t i = 0; i < s->n_nodes; i++) ntab_insert(s, i);
}

static int32_t node(tokd_grammar_state *s, int32_t pos, int32_t par) {
    uint32_t h = (uint32_t)mix64(((uint64_t)(uint32_t)pos << 32) | (uint32_t)par) & s->ntab_mask;
    for (;; h = (h + 1) & s->ntab_mask) {
        int32_t id = s->ntab[h];
        if (id < 0) break;
        if (s->npos[id] == pos && s->npar[id] == par) return id;
    }
    if (s->n_nodes == s->cap_nodes) {
        s->cap_nodes *= 2;
        s->npos = tokd_xrealloc(s->npos, (size_t)s->cap_nodes * sizeof *s->npos);
        s->npar = tokd_xrealloc(s->npar, (size_t)s->cap_nodes * sizeof *s->npar);
    }
    int32_t id = s->n_nodes++;
    s->npos[id] = pos;
    s->npar[id] = par;
    if ((uint32_t)s->n_nodes * 2 > s->ntab_mask) ntab_rebuild(s, (s->ntab_mask + 1) * 2);
    else s->ntab[h] = id;
    return id;
}

static void out_push(tokd_grammar_state *s, int32_t t) {
    if (s->n_out == s->cap_out) {
        s->cap_out *= 2;
        s->out = tokd_xrealloc(s->out, (size_t)s->cap_out * sizeof *s->out);
    }
    s->out[s->n_out++] = t;
}

static void work_push(tokd_grammar_state *s, int32_t *n_work, int32_t pos, int32_t par) {
    if (*n_work + 2 > s->cap_work) {
        s->cap_work *= 2;
        s->work = tokd_xrealloc(s->work, (size_t)s->cap_work * sizeof *s->work);
    }
    s->work[(*n_work)++] = pos;
    s->work[(*n_work)++] = par;
}

/* First visit of (pos, par) in this closure? */
static bool visit(tokd_grammar_state *s, int32_t pos, int32_t par) {
    if ((s->n_vis + 1) * 2 > s->vis_mask) {
        uint32_t cap = (s->vis_mask + 1) * 2;
        uint64_t *ok = s->vis_key;
        uint32_t *os = s->vis_stamp, omask = s->vis_mask;
        s->vis_key = tokd_xmalloc(cap * sizeof *s->vis_key);
        s->vis_stamp = tokd_xcalloc(cap, sizeof *s->vis_stamp);
        s->vis_mask = cap - 1;
        for (uint32_t i = 0; i <= omask; i++) {
            if (os[i] != s->vis_gen) continue;
            uint32_t h = (uint32_t)mix64(ok[i]) & s->vis_mask;
            while (s->vis_stamp[h] == s->vis_gen) h = (h + 1) & s->vis_mask;
            s->vis_key[h] = ok[i];
            s->vis_stamp[h] = s->vis_gen;
        }
        free(ok);
        free(os);
    }
    uint64_t k = ((uint64_t)(uint32_t)pos << 32) | (uint32_t)par;
    uint32_t h = (uint32_t)mix64(k) & s->vis_mask;
    for (; s->vis_stamp[h] == s->vis_gen; h = (h + 1) & s->vis_mask)
        if (s->vis_key[h] == k) return false;
    s->vis_key[h] = k;
    s->vis_stamp[h] = s->vis_gen;
    s->n_vis++;
    return true;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static void sort_unique(int32_t *a, int32_t *n) {
    if (*n < 2) return;
    if (*n <= 16) {
        for (int32_t i = 1; i < *n; i++) {
            int32_t x = a[i], j = i;
            while (j > 0 && a[j - 1] > x) a[j] = a[j - 1], j--;
            a[j] = x;
        }
    } else qsort(a, (size_t)*n, sizeof *a, cmp_i32);
    int32_t m = 1;
    for (int32_t i = 1; i < *n; i++)
        if (a[i] != a[m - 1]) a[m++] = a[i];
    *n = m;
}

/* Closure from the pending work items into s->out. -1 when past the bounds. */
static int closure(tokd_grammar_state *s, int32_t n_work) {
    const tokd_grammar *g = s->g;
    while (n_work) {
        int32_t par = s->work[--n_work], pos = s->work[--n_work];
        if (--s->work_left < 0) return -1;
        if (!visit(s, pos, par)) continue;
        if (s->n_vis > MAX_VISITS) return -1;
        const tg_elem *e = &g->elems[pos];
        if (e->type == TG_CHAR) {
            out_push(s, node(s, pos, par));
            if (s->n_out > TOKD_GRAMMAR_MAX_STACKS) return -1;
        } else if (e->type == TG_END) {
            if (par < 0) s->out_acc = true;
            else work_push(s, &n_work, s->npos[par], s->npar[par]);
        } else {
            int32_t np = g->elems[pos + 1].type == TG_END ? par : node(s, pos + 1, par);
            for (int32_t a = g->alt_off[e->a + 1] - 1; a >= g->alt_off[e->a]; a--) work_push(s, &n_work, g->alt_start[a], np);
        }
    }
    sort_unique(s->out, &s->n_out);
    return 0;
}

static void new_closure(tokd_grammar_state *s) {
    s->n_out = 0;
    s->out_acc = false;
    s->n_vis = 0;
    if (++s->vis_gen == 0) { /* wrapped: clear the stamps */
        memset(s->vis_stamp, 0, ((size_t)s->vis_mask + 1) * sizeof *s->vis_stamp);
        s->vis_gen = 1;
    }
}

/* Consume byte b from the state (tops[n], u8). Result in s->out / out_u8 / out_acc.
 * Returns 1 if the result is alive, 0 if dead, -1 if the bounds were exceeded. */
static int step(tokd_grammar_state *s, const int32_t *tops, int32_t n, uint32_t u8, uint8_t b) {
    const tokd_grammar *g = s->g;
    uint32_t cp, need, len;
    if (U8_NEED(u8) == 0) {
        if (b < 0x80) cp = b, need = 0, len = 1;
        else if (b >= 0xC2 && b <= 0xDF) cp = b & 0x1F, need = 1, len = 2;
        else if (b >= 0xE0 && b <= 0xEF) cp = b & 0x0F, need = 2, len = 3;
        else if (b >= 0xF0 && b <= 0xF4) cp = b & 0x07, need = 3, len = 4;
        else return 0;
    } else {
        if ((b & 0xC0) != 0x80) return 0;
        cp = (U8_CP(u8) << 6) | (b & 0x3F);
        need = U8_NEED(u8) - 1;
        len = U8_LEN(u8);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    s->n_out = 0;
    s->out_acc = false;
    if (need) {
        uint32_t lo = cp << (6 * need), hi = lo | ((1u << (6 * need)) - 1);
        if (lo < min_cp[len]) lo = min_cp[len];
        if (hi > 0x10FFFF) hi = 0x10FFFF;
        if (lo > hi) return 0;
        if ((s->work_left -= n) < 0) return -1;
        for (int32_t i = 0; i < n; i++)
            if (tg_char_intersects(g, &g->elems[s->npos[tops[i]]], lo, hi)) out_push(s, tops[i]);
        s->out_u8 = U8_PACK(cp, need, len);
        return s->n_out > 0;
    }
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    new_closure(s);
    int32_t n_work = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t t = tops[i];
        if (tg_char_match(g, &g->elems[s->npos[t]], cp)) work_push(s, &n_work, s->npos[t] + 1, s->npar[t]);
    }
    if (closure(s, n_work)) return -1;
    s->out_u8 = 0;
    return s->n_out > 0 || s->out_acc;
}

static void set_committed_from_out(tokd_grammar_state *s) {
    if (s->n_out > s->cap_tops) {
        s->cap_tops = s->n_out;
        s->tops = tokd_xrealloc(s->tops, (size_t)s->cap_tops * sizeof *s->tops);
    }
    if (s->n_out) memcpy(s->tops, s->out, (size_t)s->n_out * sizeof *s->tops);
    s->n_tops = s->n_out;
    s->u8 = s->out_u8;
    s->acc = s->out_acc;
}

/* Forget the interned sets and memoised transitions (they name node ids). */
static void tables_reset(tokd_grammar_state *s) {
    if (++s->call_gen == 0) {
        memset(s->stab_stamp, 0, ((size_t)s->stab_mask + 1) * sizeof *s->stab_stamp);
        s->call_gen = 1;
    }
    s->n_sets = s->n_pool = 0;
}

/* Keep only the nodes the committed stacks use. */
static void gc(tokd_grammar_state *s) {
    tables_reset(s);
    if (s->n_nodes > s->cap_gc) {
        s->cap_gc = s->n_nodes;
        s->gc_map = tokd_xrealloc(s->gc_map, (size_t)s->cap_gc * sizeof *s->gc_map);
    }
    int32_t old_n = s->n_nodes;
    int32_t *op = s->npos, *oq = s->npar;
    s->npos = tokd_xmalloc((size_t)s->cap_nodes * sizeof *s->npos);
    s->npar = tokd_xmalloc((size_t)s->cap_nodes * sizeof *s->npar);
    s->n_nodes = 0;
    memset(s->ntab, 0xff, ((size_t)s->ntab_mask + 1) * sizeof *s->ntab);
    memset(s->gc_map, 0xff, (size_t)old_n * sizeof *s->gc_map);
    int32_t *chain = s->work; /* reuse the work buffer */
    for (int32_t i = 0; i < s->n_tops; i++) {
        int32_t n_chain = 0, t = s->tops[i];
        while (t >= 0 && s->gc_map[t] < 0) {
            if (n_chain == s->cap_work) {
                s->cap_work *= 2;
                s->work = chain = tokd_xrealloc(s->work, (size_t)s->cap_work * sizeof *s->work);
            }
            chain[n_chain++] = t;
            t = oq[t];
        }
        int32_t par = t < 0 ? -1 : s->gc_map[t];
        while (n_chain) {
            int32_t o = chain[--n_chain];
            par = s->gc_map[o] = node(s, op[o], par);
        }
        s->tops[i] = par;
    }
    free(op);
    free(oq);
    sort_unique(s->tops, &s->n_tops);
}

tokd_grammar_state *tokd_grammar_state_new(const tokd_grammar *g, const tokd_grammar_vocab *v) {
    tokd_grammar_state *s = tokd_xcalloc(1, sizeof *s);
    s->g = g;
    s->v = v;
    s->work_budget = TOKD_GRAMMAR_MASK_WORK;
    s->work_left = INT64_MAX;
    s->cap_nodes = 256;
    s->npos = tokd_xmalloc((size_t)s->cap_nodes * sizeof *s->npos);
    s->npar = tokd_xmalloc((size_t)s->cap_nodes * sizeof *s->npar);
    ntab_rebuild(s, 1024);
    s->cap_out = s->cap_work = 256;
    s->out = tokd_xmalloc((size_t)s->cap_out * sizeof *s->out);
    s->work = tokd_xmalloc((size_t)s->cap_work * sizeof *s->work);
    s->vis_mask = 1023;
    s->vis_key = tokd_xmalloc(1024 * sizeof *s->vis_key);
    s->vis_stamp = tokd_xcalloc(1024, sizeof *s->vis_stamp);
    s->cap_pool = 1024;
    s->pool = tokd_xmalloc((size_t)s->cap_pool * sizeof *s->pool);
    s->cap_sets = 256;
    s->sets = tokd_xmalloc((size_t)s->cap_sets * sizeof *s->sets);
    s->stab_mask = 1023;
    s->stab = tokd_xmalloc(1024 * sizeof *s->stab);
    s->stab_stamp = tokd_xcalloc(1024, sizeof *s->stab_stamp);
    s->tt = tokd_xmalloc((size_t)s->cap_sets * 256 * sizeof *s->tt);
    if (v) {
        s->allowed = tokd_xmalloc((size_t)v->n_vocab + 1);
        s->frames = tokd_xmalloc(((size_t)v->max_depth + 2) * 3 * sizeof *s->frames);
    }
    tokd_grammar_state_reset(s);
    return s;
}

void tokd_grammar_state_reset(tokd_grammar_state *s) {
    const tokd_grammar *g = s->g;
    s->n_nodes = 0;
    memset(s->ntab, 0xff, ((size_t)s->ntab_mask + 1) * sizeof *s->ntab);
    tables_reset(s);
    s->gc_at = 16384;
    s->failed = false;
    new_closure(s);
    int32_t n_work = 0;
    for (int32_t a = g->alt_off[g->root + 1] - 1; a >= g->alt_off[g->root]; a--) work_push(s, &n_work, g->alt_start[a], -1);
    if (closure(s, n_work)) s->failed = true;
    s->out_u8 = 0;
    set_committed_from_out(s);
}

void tokd_grammar_state_free(tokd_grammar_state *s) {
    if (!s) return;
    free(s->npos);
    free(s->npar);
    free(s->ntab);
    free(s->tops);
    free(s->out);
    free(s->work);
    free(s->vis_key);
    free(s->vis_stamp);
    free(s->pool);
    free(s->sets);
    free(s->stab);
    free(s->stab_stamp);
    free(s->tt);
    free(s->allowed);
    free(s->frames);
    free(s->gc_map);
    free(s);
}

int tokd_grammar_accept_bytes(tokd_grammar_state *s, const char *bytes, size_t len) {
    if (s->failed) return -1;
    if (!len) return 0;
    /* step from the committed state, then from copies of the output */
    int32_t *cur = NULL, n_cur = s->n_tops, cap_cur = 0;
    uint32_t u8 = s->u8;
    const int32_t *in = s->tops;
    int rc = 0;
    for (size_t i = 0; i < len; i++) {
        int r = step(s, in, n_cur, u8, (uint8_t)bytes[i]);
        if (r <= 0) {
            if (r < 0) s->failed = true;
            rc = -1;
            break;
        }
        if (s->n_out > cap_cur) {
            cap_cur = s->n_out * 2;
            cur = tokd_xrealloc(cur, (size_t)cap_cur * sizeof *cur);
        }
        if (s->n_out) memcpy(cur, s->out, (size_t)s->n_out * sizeof *cur);
        n_cur = s->n_out;
        u8 = s->out_u8;
        in = cur;
    }
    if (!rc) {
        set_committed_from_out(s);
        /* Nodes (and with them the sets and transitions the masks memoised) are kept across
         * tokens, so that a mask after a string token finds its work done; collected when the
         * store has grown well past what the committed stacks need. */
        if (s->n_nodes > s->gc_at) {
            gc(s);
            s->gc_at = 4 * s->n_nodes > 16384 ? 4 * s->n_nodes : 16384;
        }
    }
    free(cur);
    return rc;
}

int tokd_grammar_accept(tokd_grammar_state *s, int32_t token) {
    const tokd_grammar_vocab *v = s->v;
    if (!v || token < 0 || token >= v->n_vocab) return -1;
    if (v->is_eog[token]) return tokd_grammar_done(s) ? 0 : -1;
    int64_t a = v->piece_off[token], b = v->piece_off[token + 1];
    if (a == b) return -1;
    return tokd_grammar_accept_bytes(s, v->pieces + a, (size_t)(b - a));
}

bool tokd_grammar_done(const tokd_grammar_state *s) { return !s->failed && s->acc && U8_NEED(s->u8) == 0; }
bool tokd_grammar_can_continue(const tokd_grammar_state *s) { return !s->failed && s->n_tops > 0; }
bool tokd_grammar_failed(const tokd_grammar_state *s) { return s->failed; }
void tokd_grammar_state_set_work_budget(tokd_grammar_state *s, int64_t items) { s->work_budget = items; }
int64_t tokd_grammar_mask_work(const tokd_grammar_state *s) { return s->last_work; }

bool tokd_grammar_match(const tokd_grammar *g, const char *str, size_t len) {
    tokd_grammar_state *s = tokd_grammar_state_new(g, NULL);
    bool ok = tokd_grammar_accept_bytes(s, str, len) == 0 && tokd_grammar_done(s);
    tokd_grammar_state_free(s);
    return ok;
}

/* ---- mask ------------------------------------------------------------------------------- */

static uint32_t set_hash(const int32_t *t, int32_t n, uint32_t u8, bool acc) {
    uint64_t h = mix64(((uint64_t)u8 << 1) | acc);
    for (int32_t i = 0; i < n; i++) h = mix64(h ^ (uint32_t)t[i]);
    return (uint32_t)h;
}

/* Intern the state in s->out (or the committed one); returns its id. */
static int32_t intern(tokd_grammar_state *s, const int32_t *t, int32_t n, uint32_t u8, bool acc) {
    if ((uint32_t)(s->n_sets + 1) * 2 > s->stab_mask) {
        uint32_t cap = (s->stab_mask + 1) * 2;
        free(s->stab);
        free(s->stab_stamp);
        s->stab = tokd_xmalloc(cap * sizeof *s->stab);
        s->stab_stamp = tokd_xcalloc(cap, sizeof *s->stab_stamp);
        s->stab_mask = cap - 1;
        for (int32_t i = 0; i < s->n_sets; i++) {
            uint32_t h = s->sets[i].hash & s->stab_mask;
            while (s->stab_stamp[h] == s->call_gen) h = (h + 1) & s->stab_mask;
            s->stab[h] = i;
            s->stab_stamp[h] = s->call_gen;
        }
    }
    uint32_t hash = set_hash(t, n, u8, acc), h = hash & s->stab_mask;
    for (; s->stab_stamp[h] == s->call_gen; h = (h + 1) & s->stab_mask) {
        tg_set *x = &s->sets[s->stab[h]];
        if (x->hash == hash && x->n == n && x->u8 == u8 && x->acc == acc &&
            !memcmp(s->pool + x->off, t, (size_t)n * sizeof *t))
            return s->stab[h];
    }
    if (s->n_sets == s->cap_sets) {
        s->cap_sets *= 2;
        s->sets = tokd_xrealloc(s->sets, (size_t)s->cap_sets * sizeof *s->sets);
        s->tt = tokd_xrealloc(s->tt, (size_t)s->cap_sets * 256 * sizeof *s->tt);
    }
    if (s->n_pool + n > s->cap_pool) {
        while (s->n_pool + n > s->cap_pool) s->cap_pool *= 2;
        s->pool = tokd_xrealloc(s->pool, (size_t)s->cap_pool * sizeof *s->pool);
    }
    memcpy(s->pool + s->n_pool, t, (size_t)n * sizeof *t);
    int32_t id = s->n_sets++;
    s->sets[id] = (tg_set){.off = s->n_pool, .n = n, .u8 = u8, .acc = acc, .hash = hash, .text_loop = -1};
    memset(s->tt + (size_t)id * 256, 0, 256 * sizeof *s->tt);
    s->n_pool += n;
    s->stab[h] = id;
    s->stab_stamp[h] = s->call_gen;
    return id;
}

/* Memoised transition: the set after byte b, or -1 (dead). -2: bounds exceeded. */
static int32_t trans(tokd_grammar_state *s, int32_t sid, uint8_t b) {
    int32_t m = s->tt[(size_t)sid * 256 + b];
    if (m) return m - 3;
    tg_set x = s->sets[sid];
    int r = step(s, s->pool + x.off, x.n, x.u8, b);
    int32_t res = r < 0 ? -2 : r == 0 ? -1 : intern(s, s->out, s->n_out, s->out_u8, s->out_acc);
    s->tt[(size_t)sid * 256 + b] = res + 3;
    return res;
}

/* Bytes b with trans(sid, b) == sid. */
static const uint64_t *loop_bytes(tokd_grammar_state *s, int32_t sid) {
    if (!s->sets[sid].has_loop) {
        uint64_t m[4] = {0};
        for (int b = 0; b < 256; b++)
            if (trans(s, sid, (uint8_t)b) == sid) m[b >> 6] |= 1ull << (b & 63);
        memcpy(s->sets[sid].loop, m, sizeof m);
        s->sets[sid].has_loop = true;
    }
    return s->sets[sid].loop;
}

/* Does every text character (see tokd_grammar_vocab.text) lead from the set back to itself?
 * ASCII ones: checked byte by byte. The others: each stack's class must hold all of them or
 * none, and some ASCII text byte that loops must be matched by exactly the same stacks (then
 * every such character advances the same stacks to the same closure). */
static bool text_loop(tokd_grammar_state *s, int32_t sid) {
    if (s->sets[sid].text_loop >= 0) return s->sets[sid].text_loop;
    bool ok = U8_NEED(s->sets[sid].u8) == 0;
    const uint64_t *lp = ok ? loop_bytes(s, sid) : NULL;
    for (int b = 0x20; ok && b < 0x7F; b++)
        if (b != '"' && b != '\\' && !((lp[b >> 6] >> (b & 63)) & 1)) ok = false;
    const tokd_grammar *g = s->g;
    const int32_t *tops = s->pool + s->sets[sid].off;
    int32_t n = s->sets[sid].n;
    uint64_t full[2] = {0}; /* tops whose class holds every non-ASCII character (n <= 4096: use a slow path above 128) */
    if (ok && n > 128) ok = false;
    for (int32_t i = 0; ok && i < n; i++) {
        const tg_elem *e = &g->elems[s->npos[tops[i]]];
        const uint32_t *r = g->ranges + 2 * (size_t)e->a;
        bool any = tg_char_intersects(g, e, 0x80, 0x10FFFF), all = false;
        /* the class is normalised (sorted, merged, surrogates cut out) */
        for (int32_t k = 0; k < e->b && !all; k++)
            if (r[2 * k] <= 0x80 && r[2 * k + 1] >= 0xD7FF)
                all = k + 1 < e->b && r[2 * k + 2] == 0xE000 && r[2 * k + 3] == 0x10FFFF;
        if (any && !all) ok = false;
        if (all) full[i >> 6] |= 1ull << (i & 63);
    }
    bool found = false;
    for (int b = 0x20; ok && !found && b < 0x7F; b++) {
        if (b == '"' || b == '\\') continue;
        bool same = true;
        for (int32_t i = 0; i < n && same; i++)
            same = tg_char_match(g, &g->elems[s->npos[tops[i]]], (uint32_t)b) == (bool)((full[i >> 6] >> (i & 63)) & 1);
        found = same;
    }
    s->sets[sid].text_loop = ok && found;
    return ok && found;
}

static void allow_range(tokd_grammar_state *s, int32_t lo, int32_t hi) {
    const int32_t *perm = s->v->perm;
    for (int32_t i = lo; i < hi; i++) s->allowed[perm[i]] = 1;
}

void tokd_grammar_mask(tokd_grammar_state *s, float *logits, int32_t n_vocab) {
    const tokd_grammar_vocab *v = s->v;
    if (!v) return;
    int32_t V = v->n_vocab;
    memset(s->allowed, 0, (size_t)V);
    s->last_work = 0;
    if (!s->failed && s->n_tops > 0) {
        if (s->n_sets > (1 << 14) || s->n_pool > (1 << 22)) tables_reset(s);
        s->work_left = s->work_budget;
        int32_t *f = s->frames, sp = 1;
        f[0] = 0, f[1] = intern(s, s->tops, s->n_tops, s->u8, s->acc), f[2] = 1;
        while (sp && s->work_left >= 0) { /* past the budget the walk stops (and the state fails below) */
            int32_t *fr = &f[3 * (sp - 1)];
            int32_t nd = fr[0], sid = fr[1], c = fr[2];
            if (c >= v->end[nd]) {
                sp--;
                continue;
            }
            fr[2] = v->end[c];
            int32_t t = trans(s, sid, v->byte[c]);
            if (t < 0) continue; /* dead, or past the bounds: such tokens are not allowed */
            if (v->text[c] && v->tok_hi[c] - v->tok_lo[c] > 1 && text_loop(s, sid)) {
                allow_range(s, v->tok_lo[c], v->tok_hi[c]);
                continue;
            }
            if (t == sid && v->tok_hi[c] - v->tok_lo[c] > 1) {
                const uint64_t *lp = loop_bytes(s, sid), *sb = v->sub + 4 * (size_t)c;
                if (!(sb[0] & ~lp[0]) && !(sb[1] & ~lp[1]) && !(sb[2] & ~lp[2]) && !(sb[3] & ~lp[3])) {
                    allow_range(s, v->tok_lo[c], v->tok_hi[c]);
                    continue;
                }
            }
            allow_range(s, v->tok_lo[c], v->tok_own[c]);
            if (v->end[c] > c + 1 && s->sets[t].n > 0) {
                int32_t *nf = &f[3 * sp++];
                nf[0] = c, nf[1] = t, nf[2] = c + 1;
            }
        }
        s->last_work = s->work_budget - s->work_left;
        if (s->work_left < 0) { /* past the budget: as at any bound, the state fails */
            memset(s->allowed, 0, (size_t)V);
            s->failed = true;
        }
        s->work_left = INT64_MAX;
    }
    if (tokd_grammar_done(s) || s->failed)
        for (int32_t i = 0; i < v->n_eog; i++) s->allowed[v->eog[i]] = 1;
    int32_t n = n_vocab < V ? n_vocab : V;
    for (int32_t i = 0; i < n; i++)
        if (!s->allowed[i]) logits[i] = -INFINITY;
    for (int32_t i = n; i < n_vocab; i++) logits[i] = -INFINITY;
}

void tokd_grammar_mask_hook(void *ud, float *logits, int32_t n_vocab) { tokd_grammar_mask(ud, logits, n_vocab); }
