/* sampler.c — see sampler.h for the processing order, tie rules, PRNG and robustness rules.
 *
 * Data layout. The penalty history is kept as counts with sparse lists of the tokens whose count
 * is non-zero, so applying penalties costs O(distinct tokens in the history), not O(n_vocab):
 *   - rep_*: counts over the repeat window (a ring of the last repeat_last_n accepted tokens,
 *     prompt included; with -1 the counts only grow). rep_list/rep_pos form a sparse set.
 *   - gen_*: counts over every token passed to tokd_sampler_accept (generated tokens).
 * Selection works on an array of candidates (processed logit, exp weight, id) built from the
 * tokens that survived processing, so banned tokens cost nothing past that pass. */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    float v;    /* processed logit (before temperature) */
    float e;    /* exp((v - v_max) / T): unnormalised probability, 1 at the maximum */
    int32_t id;
} cand;

struct tokd_sampler {
    tokd_sampler_params p;
    tokd_logit_bias *bias;
    int32_t n_vocab;
    uint64_t rng[4];

    int32_t *ring; /* repeat window, capacity p.repeat_last_n when > 0 */
    int32_t ring_len, ring_head;
    int32_t *rep_count, *rep_list, *rep_pos, n_rep;

    int32_t *gen_count, *gen_list, n_gen;

    float *work; /* processed logits */
    cand *cand;

    void (*mask)(void *ud, float *logits, int32_t n_vocab);
    void *mask_ud;
};

/* ---- e^x ------------------------------------------------------------------------------------------
 * Our own exponential for x <= 0, in plain IEEE float operations, each in its own statement (so
 * no compiler may fuse them into FMAs): the weights, and so the chosen tokens, are bit-identical on
 * every machine, whatever its libm. Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2, then the
 * Taylor polynomial of degree 7 for e^r (truncation error < 4e-9), then scaling by 2^k through the
 * exponent bits. Relative error a few ulp; results below 2^-125 flush to 0. */
static inline float exp_nonpos(float x) {
    if (!(x > -86.0f)) return x == x ? 0.0f : x; /* -inf and tiny -> 0 */
    if (x >= 0) return 1.0f;
    float kf = x * 1.44269504088896341f; /* log2(e) */
    int k = (int)(kf - 0.5f);              /* nearest integer (kf < 0), in -125..0 */
    float fk = (float)k;
    float hi = fk * 0.693145751953125f;    /* ln2 upper bits: exact product for |k| < 2^9 */
    float lo = fk * 1.428606765330187e-6f; /* ln2 - the upper bits */
    float r = x - hi;
    r = r - lo;
    float q = 1.0f / 5040;
    float t;
    t = q * r; q = t + 1.0f / 720;
    t = q * r; q = t + 1.0f / 120;
    t = q * r; q = t + 1.0f / 24;
    t = q * r; q = t + 1.0f / 6;
    t = q * r; q = t + 0.5f;
    t = q * r; q = t + 1.0f;
    t = q * r; q = t + 1.0f;
    uint32_t bits = (uint32_t)(k + 127) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    return q * scale;
}

/* ---- PRNG: splitmix64 to seed, xoshiro256** to draw ---------------------------------------- */

static uint64_t splitmix64_next(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t st[4]) {
    uint64_t out = rotl64(st[1] * 5, 7) * 9;
    uint64_t t = st[1] << 17;
    st[2] ^= st[0];
    st[3] ^= st[1];
    st[1] ^= st[2];
    st[0] ^= st[3];
    st[2] ^= t;
    st[3] = rotl64(st[3], 45);
    return out;
}

static void rng_seed(tokd_sampler *s) {
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64_next(&x); /* never all zero: splitmix64 is a bijection of distinct inputs */
}

uint64_t tokd_sampler_next_u64(tokd_sampler *s) { return xoshiro_next(s->rng); }

/* ---- parameters ------------------------------------------------------------------------------ */

void tokd_sampler_params_default(tokd_sampler_params *p) {
    memset(p, 0, sizeof *p);
    p->temperature = 0.8f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
}

#define MAX_REPEAT_WINDOW (1 << 22)

static int validate(const tokd_sampler_params *p, int32_t n_vocab, tokd_err *err) {
    if (!p) return tokd_seterr(err, "sampler: no parameters");
    if (n_vocab < 1 || n_vocab > TOKD_SAMPLER_MAX_VOCAB)
        return tokd_seterr(err, "sampler: vocabulary size %d out of range 1..%d", n_vocab, TOKD_SAMPLER_MAX_VOCAB);
    if (!isfinite(p->temperature) || p->temperature < 0)
        return tokd_seterr(err, "sampler: temperature must be a finite number >= 0 (got %g)", (double)p->temperature);
    if (!isfinite(p->top_p) || p->top_p < 0)
        return tokd_seterr(err, "sampler: top_p must be a finite number >= 0 (got %g)", (double)p->top_p);
    if (!isfinite(p->min_p) || p->min_p > 1)
        return tokd_seterr(err, "sampler: min_p must be a finite number <= 1 (got %g)", (double)p->min_p);
    if (!isfinite(p->repeat_penalty) || p->repeat_penalty <= 0)
        return tokd_seterr(err, "sampler: repeat_penalty must be a finite number > 0 (got %g)", (double)p->repeat_penalty);
    if (p->repeat_last_n < -1 || p->repeat_last_n > MAX_REPEAT_WINDOW)
        return tokd_seterr(err, "sampler: repeat_last_n must be -1 (whole history) or 0..%d (got %d)", MAX_REPEAT_WINDOW,
                           p->repeat_last_n);
    if (!isfinite(p->presence_penalty) || p->presence_penalty < -2 || p->presence_penalty > 2)
        return tokd_seterr(err, "sampler: presence_penalty must be in [-2, 2] (got %g)", (double)p->presence_penalty);
    if (!isfinite(p->frequency_penalty) || p->frequency_penalty < -2 || p->frequency_penalty > 2)
        return tokd_seterr(err, "sampler: frequency_penalty must be in [-2, 2] (got %g)", (double)p->frequency_penalty);
    if (p->n_logprobs < 0 || p->n_logprobs > TOKD_SAMPLER_MAX_LOGPROBS)
        return tokd_seterr(err, "sampler: n_logprobs must be in 0..%d (got %d)", TOKD_SAMPLER_MAX_LOGPROBS, p->n_logprobs);
    if (p->n_logit_bias < 0) return tokd_seterr(err, "sampler: negative logit bias count %d", p->n_logit_bias);
    if (p->n_logit_bias > 0 && !p->logit_bias)
        return tokd_seterr(err, "sampler: %d logit biases given but no array", p->n_logit_bias);
    for (int32_t i = 0; i < p->n_logit_bias; i++) {
        const tokd_logit_bias *b = &p->logit_bias[i];
        if (b->token < 0 || b->token >= n_vocab)
            return tokd_seterr(err, "sampler: logit bias token %d out of range 0..%d", b->token, n_vocab - 1);
        if (isnan(b->bias) || b->bias == INFINITY)
            return tokd_seterr(err, "sampler: logit bias for token %d must be a number or -inf (got %g)", b->token,
                               (double)b->bias);
    }
    return 0;
}

tokd_sampler *tokd_sampler_new(const tokd_sampler_params *p, int32_t n_vocab, tokd_err *err) {
    if (validate(p, n_vocab, err) < 0) return NULL;
    tokd_sampler *s = tokd_xcalloc(1, sizeof *s);
    s->p = *p;
    s->n_vocab = n_vocab;
    if (p->n_logit_bias > 0) {
        s->bias = tokd_xmalloc((size_t)p->n_logit_bias * sizeof *s->bias);
        memcpy(s->bias, p->logit_bias, (size_t)p->n_logit_bias * sizeof *s->bias);
    }
    s->p.logit_bias = s->bias;
    size_t n = (size_t)n_vocab;
    if (p->repeat_last_n > 0) s->ring = tokd_xmalloc((size_t)p->repeat_last_n * sizeof *s->ring);
    s->rep_count = tokd_xcalloc(n, sizeof *s->rep_count);
    s->rep_list = tokd_xmalloc(n * sizeof *s->rep_list);
    s->rep_pos = tokd_xmalloc(n * sizeof *s->rep_pos);
    s->gen_count = tokd_xcalloc(n, sizeof *s->gen_count);
    s->gen_list = tokd_xmalloc(n * sizeof *s->gen_list);
    s->work = tokd_aligned_alloc(n * sizeof *s->work);
    s->cand = tokd_xmalloc(n * sizeof *s->cand);
    rng_seed(s);
    return s;
}

void tokd_sampler_free(tokd_sampler *s) {
    if (!s) return;
    free(s->bias);
    free(s->ring);
    free(s->rep_count);
    free(s->rep_list);
    free(s->rep_pos);
    free(s->gen_count);
    free(s->gen_list);
    free(s->work);
    free(s->cand);
    free(s);
}

void tokd_sampler_reset(tokd_sampler *s) {
    for (int32_t i = 0; i < s->n_rep; i++) s->rep_count[s->rep_list[i]] = 0;
    for (int32_t i = 0; i < s->n_gen; i++) s->gen_count[s->gen_list[i]] = 0;
    s->n_rep = s->n_gen = 0;
    s->ring_len = s->ring_head = 0;
    rng_seed(s);
}

void tokd_sampler_set_mask(tokd_sampler *s, void (*mask)(void *ud, float *logits, int32_t n_vocab), void *ud) {
    s->mask = mask;
    s->mask_ud = ud;
}

/* ---- history ---------------------------------------------------------------------------------- */

static void rep_inc(tokd_sampler *s, int32_t t) {
    if (s->rep_count[t]++ == 0) {
        s->rep_pos[t] = s->n_rep;
        s->rep_list[s->n_rep++] = t;
    }
}

static void rep_dec(tokd_sampler *s, int32_t t) {
    if (--s->rep_count[t] == 0) {
        int32_t pos = s->rep_pos[t], last = s->rep_list[--s->n_rep];
        s->rep_list[pos] = last;
        s->rep_pos[last] = pos;
    }
}

static void push_window(tokd_sampler *s, int32_t t) {
    int32_t cap = s->p.repeat_last_n;
    if (cap == 0) return;
    if (cap < 0) { /* whole history; a count saturates rather than wraps */
        if (s->rep_count[t] < INT32_MAX) rep_inc(s, t);
        return;
    }
    if (s->ring_len == cap)
        rep_dec(s, s->ring[s->ring_head]);
    else
        s->ring_len++;
    s->ring[s->ring_head] = t;
    rep_inc(s, t);
    s->ring_head = s->ring_head + 1 == cap ? 0 : s->ring_head + 1;
}

void tokd_sampler_accept(tokd_sampler *s, int32_t token) {
    if (token < 0 || token >= s->n_vocab) return;
    push_window(s, token);
    if (s->gen_count[token] == 0) s->gen_list[s->n_gen++] = token;
    if (s->gen_count[token] < INT32_MAX) s->gen_count[token]++;
}

void tokd_sampler_accept_prompt(tokd_sampler *s, const int32_t *tokens, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] >= 0 && tokens[i] < s->n_vocab) push_window(s, tokens[i]);
}

/* ---- processors ------------------------------------------------------------------------------- */

void tokd_sampler_apply_processors(tokd_sampler *s, const float *logits, float *out) {
    int32_t n = s->n_vocab;
    for (int32_t i = 0; i < n; i++) {
        float x = logits[i];
        out[i] = isnan(x) ? -INFINITY : x;
    }
    for (int32_t i = 0; i < s->p.n_logit_bias; i++) out[s->bias[i].token] += s->bias[i].bias;
    float rp = s->p.repeat_penalty;
    if (rp != 1.0f) {
        for (int32_t i = 0; i < s->n_rep; i++) {
            int32_t t = s->rep_list[i];
            float v = out[t];
            out[t] = v > 0 ? v / rp : v * rp;
        }
    }
    float pres = s->p.presence_penalty, freq = s->p.frequency_penalty;
    if (pres != 0 || freq != 0) {
        for (int32_t i = 0; i < s->n_gen; i++) {
            int32_t t = s->gen_list[i];
            out[t] -= freq * (float)s->gen_count[t] + pres;
        }
    }
    if (s->mask) s->mask(s->mask_ud, out, n);
}

/* ---- selection -------------------------------------------------------------------------------- */

/* The one order every cut uses: higher logit first, then lower id. Candidates never hold NaN. */
static inline int before(const cand *a, const cand *b) { return a->v > b->v || (a->v == b->v && a->id < b->id); }

static inline void swap_cand(cand *a, cand *b) {
    cand t = *a;
    *a = *b;
    *b = t;
}

static void insertion_sort(cand *c, size_t n) {
    for (size_t i = 1; i < n; i++) {
        cand x = c[i];
        size_t j = i;
        while (j > 0 && before(&x, &c[j - 1])) {
            c[j] = c[j - 1];
            j--;
        }
        c[j] = x;
    }
}

/* A heap whose root is the *worst* element (the last in `before` order). */
static void sift_down(cand *c, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, w;
        if (l >= n) return;
        w = (l + 1 < n && before(&c[l], &c[l + 1])) ? l + 1 : l; /* the worse child */
        if (!before(&c[i], &c[w])) return;
        swap_cand(&c[i], &c[w]);
        i = w;
    }
}

static void heapify(cand *c, size_t n) {
    for (size_t i = n / 2; i-- > 0;) sift_down(c, n, i);
}

/* Sort c[0..n) into `before` order: insertion sort when small, else heapsort (in place, no
 * allocation, O(n log n) worst case). */
static void sort_cands(cand *c, size_t n) {
    if (n <= 32) {
        insertion_sort(c, n);
        return;
    }
    heapify(c, n);
    for (size_t end = n - 1; end > 0; end--) {
        swap_cand(&c[0], &c[end]);
        sift_down(c, end, 0);
    }
}

/* Rearrange c[0..n) so that c[0..k) holds the first k in `before` order (in no particular order).
 * Small k: one pass against a heap of the best k so far, whose branch is almost always "no"
 * (O(n + k log k log(n/k)) expected). Larger k: quickselect with a median-of-three pivot, falling
 * back to heapsort past a depth limit, so the worst case is O(n log n). Keys are unique (ids
 * differ), so the result is fully determined. */
static void select_top(cand *c, size_t n, size_t k) {
    if (k == 0 || k >= n) return;
    if (k <= n / 16) {
        heapify(c, k);
        for (size_t i = k; i < n; i++) {
            if (before(&c[i], &c[0])) {
                swap_cand(&c[i], &c[0]);
                sift_down(c, k, 0);
            }
        }
        return;
    }
    size_t lo = 0, hi = n;
    int depth = 8;
    for (size_t m = n; m > 1; m >>= 1) depth += 2;
    while (hi - lo > 16) {
        if (depth-- == 0) {
            sort_cands(c + lo, hi - lo);
            return;
        }
        size_t mid = lo + (hi - lo) / 2, last = hi - 1;
        if (before(&c[mid], &c[lo])) swap_cand(&c[mid], &c[lo]);
        if (before(&c[last], &c[lo])) swap_cand(&c[last], &c[lo]);
        if (before(&c[mid], &c[last])) swap_cand(&c[mid], &c[last]);
        /* now c[last] is the median of the three: use it as the pivot */
        cand pivot = c[last];
        size_t store = lo;
        for (size_t i = lo; i < last; i++)
            if (before(&c[i], &pivot)) swap_cand(&c[i], &c[store++]);
        swap_cand(&c[store], &c[last]);
        if (k == store || k == store + 1) return;
        if (k < store)
            hi = store;
        else
            lo = store + 1;
    }
    insertion_sort(c + lo, hi - lo);
}

/* Make c[0..need) the first `need` candidates, sorted; c[0..*sorted) already is. */
static void ensure_sorted(cand *c, size_t n, size_t *sorted, size_t need) {
    if (need > n) need = n;
    if (*sorted >= need) return;
    select_top(c + *sorted, n - *sorted, need - *sorted);
    sort_cands(c + *sorted, need - *sorted);
    *sorted = need;
}

/* Bucket of a candidate for top_p_cut, from the bits of its weight e in [0, 1]: 8 buckets per
 * power of two over 2^-32..1, smaller weights all in the last. Monotone in e (and e in the logit),
 * so each set {bucket <= b} is a prefix of the candidate order. */
#define TOPP_BUCKETS 256
static inline int topp_bucket(const cand *c) {
    uint32_t u;
    memcpy(&u, &c->e, 4);
    uint32_t d = (0x3f800000u - u) >> 20; /* e <= 1, so u <= bits of 1.0f */
    return d < TOPP_BUCKETS - 1 ? (int)d : TOPP_BUCKETS - 1;
}

/* top-p: the length of the shortest prefix (in candidate order) whose weight reaches target,
 * after rearranging c[0..n) so that this prefix comes first. c[0..sorted) is already sorted.
 * Unsorted input: a histogram of the weights by bucket finds the bucket where the cumulative
 * weight crosses the target; the buckets before it are kept whole (unsorted), and only that one
 * bucket is ordered, and only as far as needed. */
static size_t top_p_cut(cand *c, size_t n, size_t sorted, double target) {
    size_t lo = 0, hi = n; /* the range still to walk in order */
    double cum = 0;
    if (sorted < n && n > 64) {
        double mass[TOPP_BUCKETS] = {0};
        for (size_t i = 0; i < n; i++) mass[topp_bucket(&c[i])] += c[i].e;
        int b = 0;
        double before = 0;
        for (; b < TOPP_BUCKETS - 1; b++) {
            if (before + mass[b] >= target) break;
            before += mass[b];
        }
        /* three-way partition: [bucket < b] [bucket == b] [bucket > b] */
        size_t lt = 0, i = 0, gt = n;
        while (i < gt) {
            int bi = topp_bucket(&c[i]);
            if (bi < b)
                swap_cand(&c[lt++], &c[i++]);
            else if (bi > b)
                swap_cand(&c[i], &c[--gt]);
            else
                i++;
        }
        for (size_t j = 0; j < lt; j++) cum += c[j].e;
        lo = lt;
        hi = gt;
        sorted = 0;
    } else {
        sorted = sorted < n ? 0 : n;
    }
    /* walk c[lo..hi) in order, sorting only as far as needed */
    cand *w = c + lo;
    size_t m = hi - lo, ws = sorted ? m : 0;
    for (size_t i = 0; i < m; i++) {
        if (i == ws) ensure_sorted(w, m, &ws, ws < 32 ? 64 : ws * 2);
        cum += w[i].e;
        if (cum >= target) return lo + i + 1;
    }
    return hi; /* only by rounding */
}

static int32_t raw_argmax(const float *logits, int32_t n) {
    int32_t best = -1;
    for (int32_t i = 0; i < n; i++) {
        float x = logits[i];
        if (isnan(x)) continue;
        if (best < 0 || x > logits[best]) best = i;
    }
    return best < 0 ? 0 : best;
}

/* Raw log-softmax at the chosen token and the top-N alternatives. */
static void fill_logprobs(const tokd_sampler *s, const float *logits, int32_t chosen, tokd_sample_result *res) {
    int32_t n = s->n_vocab;
    float m = -INFINITY;
    int32_t n_inf = 0;
    for (int32_t i = 0; i < n; i++) {
        float x = logits[i];
        if (x > m) m = x; /* NaN never compares greater */
        if (x == INFINITY) n_inf++;
    }
    double lse; /* log of the normaliser; a logprob is x - lse */
    if (m == -INFINITY) {
        lse = INFINITY; /* nothing has mass: every logprob is -inf */
    } else if (m == INFINITY) {
        lse = 0; /* handled per token below */
    } else {
        double sum = 0;
        for (int32_t i = 0; i < n; i++) {
            float x = logits[i];
            if (x > -INFINITY) sum += (double)exp_nonpos(x - m);
        }
        lse = (double)m + log(sum);
    }
#define LOGPROB(x)                                                                                   \
    (m == INFINITY ? ((x) == INFINITY ? (float)-log((double)n_inf) : -INFINITY)                      \
                   : (lse == INFINITY || !((x) > -INFINITY) ? -INFINITY : (float)((double)(x) - lse)))
    res->logprob = LOGPROB(logits[chosen]);
    /* top-N by (raw logit desc, id asc), NaN ranked as -inf */
    int32_t nt = s->p.n_logprobs < n ? s->p.n_logprobs : n, cnt = 0;
    cand top[TOKD_SAMPLER_MAX_LOGPROBS];
    for (int32_t i = 0; i < n && nt > 0; i++) {
        cand c = {isnan(logits[i]) ? -INFINITY : logits[i], 0, i};
        if (cnt == nt && !before(&c, &top[cnt - 1])) continue;
        int32_t j = cnt < nt ? cnt++ : cnt - 1;
        while (j > 0 && before(&c, &top[j - 1])) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = c;
    }
    res->n_top = cnt;
    for (int32_t i = 0; i < cnt; i++) {
        res->top[i].token = top[i].id;
        res->top[i].logprob = LOGPROB(top[i].v);
    }
#undef LOGPROB
}

int32_t tokd_sampler_sample(tokd_sampler *s, const float *logits, tokd_sample_result *res) {
    const tokd_sampler_params *p = &s->p;
    int32_t nv = s->n_vocab;
    float *w = s->work;
    tokd_sampler_apply_processors(s, logits, w);

    int32_t tok = -1;
    if (p->temperature < 1e-6f) {
        for (int32_t i = 0; i < nv; i++)
            if (w[i] > -INFINITY && (tok < 0 || w[i] > w[tok])) tok = i; /* NaN (from a mask) fails both */
    } else {
        cand *c = s->cand;
        size_t n = 0;
        for (int32_t i = 0; i < nv; i++) {
            if (w[i] > -INFINITY) {
                c[n].v = w[i];
                c[n].id = i;
                n++;
            }
        }
        if (n > 0) {
            size_t sorted = 0;
            if (p->top_k > 0 && (size_t)p->top_k < n) {
                ensure_sorted(c, n, &sorted, (size_t)p->top_k);
                n = (size_t)p->top_k;
            }
            /* softmax weights relative to the maximum (which gets exactly 1) */
            float vmax = c[0].v;
            if (sorted == 0)
                for (size_t i = 1; i < n; i++)
                    if (c[i].v > vmax) vmax = c[i].v;
            float T = p->temperature;
            double total = 0;
            for (size_t i = 0; i < n; i++) {
                float e;
                if (vmax == INFINITY)
                    e = c[i].v == INFINITY ? 1.0f : 0.0f;
                else
                    e = exp_nonpos((c[i].v - vmax) / T);
                c[i].e = e;
                total += e;
            }
            /* min-p, then top-p: each keeps a prefix of the order, so this is their intersection */
            if (p->min_p > 0) {
                if (sorted == n) {
                    size_t keep = 0;
                    while (keep < n && c[keep].e >= p->min_p) keep++;
                    n = sorted = keep;
                } else {
                    size_t j = 0;
                    for (size_t i = 0; i < n; i++)
                        if (c[i].e >= p->min_p) c[j++] = c[i];
                    n = j;
                }
            }
            if (p->top_p < 1) n = top_p_cut(c, n, sorted, (double)p->top_p * total);
            /* renormalise and draw */
            double kept = 0;
            for (size_t i = 0; i < n; i++) kept += c[i].e;
            double u = (double)(xoshiro_next(s->rng) >> 11) * 0x1.0p-53;
            double target = u * kept, cum = 0;
            for (size_t i = 0; i < n; i++) {
                if (c[i].e > 0) tok = c[i].id; /* also the fallback if rounding runs past the end */
                cum += c[i].e;
                if (cum > target && c[i].e > 0) break;
            }
        }
    }
    int all_banned = tok < 0;
    if (all_banned) tok = raw_argmax(logits, nv);
    if (res) {
        memset(res, 0, sizeof *res);
        res->token = tok;
        res->all_banned = all_banned;
        fill_logprobs(s, logits, tok, res);
    }
    return tok;
}
