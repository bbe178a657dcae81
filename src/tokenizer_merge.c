/* tokenizer_merge.c — the merge loop shared by SentencePiece-style and byte-level BPE.
 *
 * The text is split into characters (symbols) kept in a doubly linked list over an
 * array; every adjacent pair that can merge goes into a binary heap ordered by
 * (priority, position of the left symbol). Popping the best pair merges the right
 * symbol into the left and queues the two new neighbour pairs. Entries made stale by
 * earlier merges are recognised by their recorded byte size (a symbol only ever grows,
 * so a pair whose sizes no longer add up was overtaken) and skipped. This is the
 * llama.cpp / SentencePiece algorithm: O(n log n) in the length of the text, and the
 * tie rule (leftmost first) makes the result unique. */
#include <stdlib.h>

#include "tokenizer_internal.h"
#include "unicode_utf8.h"

void tk_ids_push(tk_ids *a, int32_t id) {
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 64;
        a->v = tokd_xrealloc(a->v, a->cap * sizeof *a->v);
    }
    a->v[a->n++] = id;
}

void tk_work_free(tk_work *w) {
    free(w->syms);
    free(w->heap);
    free(w->buf);
    free(w->key);
}

void tk_work_reserve_buf(tk_work *w, size_t n) {
    if (n > w->cbuf) {
        w->cbuf = n + n / 2 + 64;
        w->buf = tokd_xrealloc(w->buf, w->cbuf);
    }
}

void tk_work_reserve_key(tk_work *w, size_t n) {
    if (n > w->ckey) {
        w->ckey = n + n / 2 + 64;
        w->key = tokd_xrealloc(w->key, w->ckey);
    }
}

static bool bg_better(const tk_bigram *a, const tk_bigram *b) {
    return a->prio < b->prio || (a->prio == b->prio && a->left < b->left);
}

static void heap_push(tk_work *w, tk_bigram b) {
    if (w->nheap == w->cheap) {
        w->cheap = w->cheap ? w->cheap * 2 : 64;
        w->heap = tokd_xrealloc(w->heap, w->cheap * sizeof *w->heap);
    }
    size_t i = w->nheap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bg_better(&b, &w->heap[p])) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = b;
}

static tk_bigram heap_pop(tk_work *w) {
    tk_bigram top = w->heap[0];
    tk_bigram last = w->heap[--w->nheap];
    size_t i = 0, n = w->nheap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bg_better(&w->heap[c + 1], &w->heap[c])) c++;
        if (!bg_better(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

static void try_pair(const tokd_tokenizer *t, tk_work *w, const char *base, int32_t l, int32_t r, tk_prio_fn fn) {
    if (l < 0 || r < 0) return;
    double prio;
    if (!fn(t, w, base, &w->syms[l], &w->syms[r], &prio)) return;
    heap_push(w, (tk_bigram){prio, l, r, w->syms[l].n + w->syms[r].n});
}

void tk_merge_run(const tokd_tokenizer *t, tk_work *w, const char *base, size_t len, tk_prio_fn fn) {
    w->nsyms = 0;
    w->nheap = 0;
    if (len > w->csyms) {
        w->csyms = len;
        w->syms = tokd_xrealloc(w->syms, w->csyms * sizeof *w->syms);
    }
    size_t off = 0;
    while (off < len) {
        size_t n = tokd_utf8_lead_len((uint8_t)base[off]);
        if (n > len - off) n = len - off;
        int32_t idx = (int32_t)w->nsyms;
        w->syms[w->nsyms++] = (tk_sym){idx - 1, off + n == len ? -1 : idx + 1, (uint32_t)off, (uint32_t)n};
        off += n;
    }
    for (size_t i = 1; i < w->nsyms; i++) try_pair(t, w, base, (int32_t)i - 1, (int32_t)i, fn);
    while (w->nheap) {
        tk_bigram b = heap_pop(w);
        tk_sym *l = &w->syms[b.left], *r = &w->syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size || l->next != b.right) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->syms[r->next].prev = b.left;
        try_pair(t, w, base, l->prev, b.left, fn);
        try_pair(t, w, base, b.left, l->next, fn);
    }
}
