/* grammar_internal.h — the compiled grammar, shared by grammar.c (parser) and
 * grammar_match.c (matcher, trie, mask). */
#ifndef TOKD_GRAMMAR_INTERNAL_H
#define TOKD_GRAMMAR_INTERNAL_H

#include "grammar.h"

enum { TG_END = 0, TG_CHAR = 1, TG_REF = 2 };

typedef struct {
    uint8_t type;
    int32_t a, b;     /* CHAR: ranges[2a .. 2(a+b)) as lo,hi pairs; REF: a = rule */
    uint64_t ascii[2]; /* CHAR: code points 0..127 it matches */
} tg_elem;

struct tokd_grammar {
    tg_elem *elems;
    int32_t n_elems;
    uint32_t *ranges; /* lo,hi pairs, sorted and merged per class */
    int32_t n_ranges;
    int32_t n_rules;
    int32_t *alt_off;   /* rule r's alternatives: alt_start[alt_off[r] .. alt_off[r+1]) */
    int32_t *alt_start; /* element index where an alternative begins */
    int32_t root;
    char **names;       /* rule names (generated ones describe their origin) */
};

static inline bool tg_char_match(const tokd_grammar *g, const tg_elem *e, uint32_t cp) {
    if (cp < 128) return (e->ascii[cp >> 6] >> (cp & 63)) & 1;
    const uint32_t *r = g->ranges + 2 * (size_t)e->a;
    int32_t lo = 0, hi = e->b - 1;
    while (lo <= hi) {
        int32_t mid = (lo + hi) >> 1;
        if (cp < r[2 * mid]) hi = mid - 1;
        else if (cp > r[2 * mid + 1]) lo = mid + 1;
        else return true;
    }
    return false;
}

/* Does the class match some code point in [lo, hi]? */
static inline bool tg_char_intersects(const tokd_grammar *g, const tg_elem *e, uint32_t lo, uint32_t hi) {
    const uint32_t *r = g->ranges + 2 * (size_t)e->a;
    for (int32_t i = 0; i < e->b; i++)
        if (r[2 * i] <= hi && r[2 * i + 1] >= lo) return true;
    return false;
}

#endif
