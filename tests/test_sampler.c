/* test_sampler.c — logits processors and sampling: exact processor arithmetic, the sets each cut
 * keeps (checked against a double-precision reference by seeded draws), seeds, logprobs,
 * NaN/inf robustness, parameter validation. Also prints (does not assert) the cost of a call. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"
#include "t.h"
#include "t_rand.h"

static uint64_t rng = 88172645463325252ull; /* test-side randomness (t_rand.h), not the sampler's PRNG */

static tokd_sampler *mk(const tokd_sampler_params *p, int32_t n) {
    tokd_err err = {{0}};
    tokd_sampler *s = tokd_sampler_new(p, n, &err);
    CHECK(s != NULL, "tokd_sampler_new: %s", err.msg);
    if (!s) exit(1);
    return s;
}

static tokd_sampler_params plain(float temp) { /* every cut off */
    tokd_sampler_params p;
    tokd_sampler_params_default(&p);
    p.temperature = temp;
    p.top_k = 0;
    p.top_p = 1;
    p.min_p = 0;
    return p;
}

/* ---- reference distribution, in double ---- */

static const float *g_logits;
static int cmp_ref(const void *pa, const void *pb) {
    int a = *(const int *)pa, b = *(const int *)pb;
    if (g_logits[a] != g_logits[b]) return g_logits[a] > g_logits[b] ? -1 : 1;
    return a < b ? -1 : 1;
}

/* prob[i]: probability the sampler should give token i (logits already processed, no NaN). */
static void ref_dist(const float *l, int n, const tokd_sampler_params *p, double *prob) {
    int *ord = malloc((size_t)n * sizeof *ord), m = 0;
    for (int i = 0; i < n; i++) {
        prob[i] = 0;
        if (l[i] > -INFINITY) ord[m++] = i;
    }
    g_logits = l;
    qsort(ord, (size_t)m, sizeof *ord, cmp_ref);
    if (p->top_k > 0 && p->top_k < m) m = p->top_k;
    double mx = l[ord[0]], tot = 0;
    double *w = malloc((size_t)m * sizeof *w);
    for (int i = 0; i < m; i++) tot += w[i] = exp(((double)l[ord[i]] - mx) / p->temperature);
    int keep = m;
    if (p->top_p < 1) {
        double cum = 0;
        for (int i = 0; i < m; i++) {
            cum += w[i] / tot;
            if (cum >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0) {
        int k = 0;
        while (k < keep && w[k] >= p->min_p * w[0]) k++;
        keep = k;
    }
    double kt = 0;
    for (int i = 0; i < keep; i++) kt += w[i];
    for (int i = 0; i < keep; i++) prob[ord[i]] = w[i] / kt;
    free(w);
    free(ord);
}

/* Draw `draws` tokens and compare with the reference: tokens with probability 0 never appear,
 * and the chi-square statistic stays within df + 6 sqrt(2 df) + 6. Returns the statistic. */
static double check_dist(const char *what, const tokd_sampler_params *p, const float *l, int n, int draws) {
    double *prob = malloc((size_t)n * sizeof *prob);
    long *cnt = calloc((size_t)n, sizeof *cnt);
    ref_dist(l, n, p, prob);
    tokd_sampler *s = mk(p, n);
    int bad = 0;
    for (int d = 0; d < draws; d++) {
        int32_t t = tokd_sampler_sample(s, l, NULL);
        if (t < 0 || t >= n) {
            bad++;
            continue;
        }
        cnt[t]++;
    }
    CHECK(bad == 0, "%s: %d out-of-range tokens", what, bad);
    double chi = 0;
    int df = -1, outside = 0;
    for (int i = 0; i < n; i++) {
        if (prob[i] == 0) {
            if (cnt[i]) outside++;
            continue;
        }
        double e = prob[i] * draws;
        chi += (cnt[i] - e) * (cnt[i] - e) / e;
        df++;
    }
    CHECK(outside == 0, "%s: %d tokens outside the kept set were drawn", what, outside);
    double lim = df + 6 * sqrt(2.0 * (df > 0 ? df : 1)) + 6;
    CHECK(chi <= lim, "%s: chi-square %.1f over %d dof (limit %.1f)", what, chi, df, lim);
    tokd_sampler_free(s);
    free(prob);
    free(cnt);
    return chi;
}

static int kept_count(const tokd_sampler_params *p, const float *l, int n) {
    double *prob = malloc((size_t)n * sizeof *prob);
    ref_dist(l, n, p, prob);
    int k = 0;
    for (int i = 0; i < n; i++) k += prob[i] > 0;
    free(prob);
    return k;
}

/* ---- tests ---- */

static void test_defaults(void) {
    tokd_sampler_params p;
    memset(&p, 0x5a, sizeof p);
    tokd_sampler_params_default(&p);
    CHECK(p.temperature == 0.8f && p.top_k == 40 && p.top_p == 0.95f && p.min_p == 0.05f, "defaults (sampling)");
    CHECK(p.repeat_penalty == 1.0f && p.repeat_last_n == 64 && p.presence_penalty == 0 && p.frequency_penalty == 0,
          "defaults (penalties)");
    CHECK(p.seed == 0 && p.logit_bias == NULL && p.n_logit_bias == 0 && p.n_logprobs == 0, "defaults (rest)");
}

static void test_greedy(void) {
    enum { N = 32000 };
    float *l = malloc(N * sizeof *l);
    for (int i = 0; i < N; i++) l[i] = (float)(t_rand_unit(&rng) * 10 - 5);
    l[12345] = 7.5f;
    tokd_sampler_params p = plain(0);
    tokd_sampler *s = mk(&p, N);
    CHECK(tokd_sampler_sample(s, l, NULL) == 12345, "greedy argmax");
    l[20000] = 7.5f;
    l[31999] = 7.5f;
    CHECK(tokd_sampler_sample(s, l, NULL) == 12345, "greedy tie -> lowest id");
    l[500] = 7.5f;
    CHECK(tokd_sampler_sample(s, l, NULL) == 500, "greedy tie -> lowest id (500)");
    tokd_sampler_free(s);
    /* temperature below 1e-6 is greedy and consumes no randomness */
    p = plain(5e-7f);
    p.seed = 9;
    s = mk(&p, N);
    tokd_sampler_params q = plain(1);
    q.seed = 9;
    tokd_sampler *fresh = mk(&q, N);
    for (int i = 0; i < 10; i++) CHECK(tokd_sampler_sample(s, l, NULL) == 500, "near-zero temperature is greedy");
    CHECK(tokd_sampler_next_u64(s) == tokd_sampler_next_u64(fresh), "greedy calls advanced the PRNG");
    tokd_sampler_free(s);
    tokd_sampler_free(fresh);
    free(l);
}

static void test_temperature_limit(void) {
    enum { N = 1000 };
    float l[N];
    for (int i = 0; i < N; i++) l[i] = (float)(t_rand_unit(&rng) * 4);
    l[777] = 4.1f; /* clear winner by > 0.1 */
    int bad = 0;
    for (int t = 0; t < 3; t++) {
        tokd_sampler_params p = plain(t == 0 ? 1e-3f : t == 1 ? 1e-4f : 2e-6f);
        p.seed = (uint64_t)t;
        tokd_sampler *s = mk(&p, N);
        for (int d = 0; d < 500; d++) bad += tokd_sampler_sample(s, l, NULL) != 777;
        tokd_sampler_free(s);
    }
    CHECK(bad == 0, "temperature -> 0 did not converge to argmax (%d misses)", bad);
    /* and at temperature 1 the winner is far from certain */
    tokd_sampler_params p = plain(1);
    tokd_sampler *s = mk(&p, N);
    int hits = 0;
    for (int d = 0; d < 500; d++) hits += tokd_sampler_sample(s, l, NULL) == 777;
    CHECK(hits < 100, "temperature 1 picked the argmax %d/500 times", hits);
    tokd_sampler_free(s);
}

static void test_topk1(void) {
    enum { N = 5000 };
    float *l = malloc(N * sizeof *l);
    tokd_sampler_params pg = plain(0), pk = plain(1.5f);
    pk.top_k = 1;
    pk.top_p = 0.5f;
    pk.min_p = 0.1f;
    tokd_sampler *g = mk(&pg, N), *k = mk(&pk, N);
    int diff = 0;
    for (int it = 0; it < 200; it++) {
        for (int i = 0; i < N; i++) l[i] = (float)floor(t_rand_unit(&rng) * 50); /* many ties */
        diff += tokd_sampler_sample(g, l, NULL) != tokd_sampler_sample(k, l, NULL);
    }
    CHECK(diff == 0, "top_k=1 differs from greedy %d/200 times", diff);
    tokd_sampler_free(g);
    tokd_sampler_free(k);
    free(l);
}

static void test_distributions(void) {
    /* 8 tokens with well separated probabilities (ids not in logit order) */
    float l[8] = {1.0f, 3.0f, -1.0f, 2.2f, 0.4f, 2.9f, -INFINITY, 1.7f};
    tokd_sampler_params p = plain(1);
    check_dist("T=1", &p, l, 8, 100000);
    p = plain(0.5f);
    p.seed = 1;
    check_dist("T=0.5", &p, l, 8, 100000);
    p = plain(2.0f);
    p.seed = 2;
    check_dist("T=2", &p, l, 8, 100000);

    p = plain(1);
    p.top_k = 3;
    CHECK(kept_count(&p, l, 8) == 3, "reference top-k");
    check_dist("top_k=3", &p, l, 8, 100000);

    /* top-p: put the threshold midway between two cumulative masses so the set is unambiguous */
    double prob[8];
    p = plain(1);
    ref_dist(l, 8, &p, prob); /* full softmax */
    int ord[8] = {1, 5, 3, 7, 0, 4, 2, 6};
    double cum = 0;
    for (int keep = 1; keep <= 5; keep++) {
        double next = cum + prob[ord[keep - 1]];
        tokd_sampler_params q = plain(1);
        q.top_p = (float)(cum + (next - cum) * 0.5); /* needs exactly `keep` tokens */
        q.seed = 100 + (uint64_t)keep;
        CHECK(kept_count(&q, l, 8) == keep, "reference top-p keeps %d, want %d", kept_count(&q, l, 8), keep);
        char what[64];
        snprintf(what, sizeof what, "top_p keeping %d", keep);
        check_dist(what, &q, l, 8, 100000);
        cum = next;
    }
    p = plain(1);
    p.top_p = 0;
    check_dist("top_p=0", &p, l, 8, 2000);

    /* min-p: w/w_max for the order above is 1, .905, .449, .273, .135, .067, .018 */
    p = plain(1);
    p.min_p = 0.2f;
    CHECK(kept_count(&p, l, 8) == 4, "reference min-p keeps %d", kept_count(&p, l, 8));
    check_dist("min_p=0.2", &p, l, 8, 100000);
    p.min_p = 1.0f;
    check_dist("min_p=1", &p, l, 8, 2000);
    p.min_p = 0.1f;
    p.top_p = 0.7f; /* top-p alone keeps 3 */
    CHECK(kept_count(&p, l, 8) == 3, "reference top-p + min-p keeps %d", kept_count(&p, l, 8));
    check_dist("top_p=0.7+min_p=0.1", &p, l, 8, 100000);
    p.top_p = 0.99f; /* now min-p is the tighter: 5 */
    CHECK(kept_count(&p, l, 8) == 5, "reference top-p + min-p keeps %d", kept_count(&p, l, 8));
    check_dist("top_p=0.99+min_p=0.1", &p, l, 8, 100000);
    p = plain(1);
    p.top_k = 6;
    p.min_p = 0.2f;
    CHECK(kept_count(&p, l, 8) == 4, "reference top-k + min-p keeps %d", kept_count(&p, l, 8));
    check_dist("top_k=6+min_p=0.2", &p, l, 8, 100000);
    p.top_p = 0.99f;
    p.min_p = 0.1f;
    p.top_k = 4;
    p.temperature = 0.7f;
    check_dist("top_k=4+T=0.7+top_p+min_p", &p, l, 8, 100000);

    /* ties at the top-k boundary keep the lower ids */
    float tie[6] = {1, 2, 2, 2, 0, 2};
    p = plain(1);
    p.top_k = 2;
    check_dist("top_k tie", &p, tie, 6, 50000);

    /* a 1000-token vocabulary, shuffled, whose top-p set (~230 tokens) needs several rounds of
     * incremental sorting when top-k is off */
    enum { M = 1000 };
    float big[M];
    int perm[M];
    for (int i = 0; i < M; i++) perm[i] = i;
    for (int i = M - 1; i > 0; i--) {
        int j = (int)(t_rand_unit(&rng) * (i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int i = 0; i < M; i++) big[perm[i]] = -0.01f * (float)i;
    double bp[M];
    p = plain(1);
    ref_dist(big, M, &p, bp);
    cum = 0;
    for (int i = 0; i < 229; i++) cum += bp[perm[i]];
    p.top_p = (float)(cum + 0.5 * bp[perm[229]]);
    p.seed = 7;
    CHECK(kept_count(&p, big, M) == 230, "reference big top-p keeps %d", kept_count(&p, big, M));
    check_dist("1000-token top_p", &p, big, M, 100000);
    p.min_p = 0.5f; /* w >= 0.5: exp(-0.01 i) >= 0.5 -> i <= 69 */
    check_dist("1000-token top_p+min_p", &p, big, M, 100000);
    p.min_p = 0;
    p.top_k = 300;
    check_dist("1000-token top_k+top_p", &p, big, M, 100000);

    /* the statistic is sensitive: comparing T=1 draws against the T=1.1 reference fails */
    p = plain(1.1f);
    double *pr = malloc(8 * sizeof *pr);
    ref_dist(l, 8, &p, pr);
    tokd_sampler_params p1 = plain(1);
    tokd_sampler *s = mk(&p1, 8);
    long cnt[8] = {0};
    for (int d = 0; d < 200000; d++) cnt[tokd_sampler_sample(s, l, NULL)]++;
    double chi = 0;
    for (int i = 0; i < 8; i++)
        if (pr[i] > 0) chi += (cnt[i] - pr[i] * 200000) * (cnt[i] - pr[i] * 200000) / (pr[i] * 200000);
    CHECK(chi > 100, "chi-square does not tell T=1 from T=1.1 (%.1f)", chi);
    free(pr);
    tokd_sampler_free(s);
}

static float seq_logit(int i, int t) {
    uint32_t h = (uint32_t)i * 2654435761u + (uint32_t)t * 40503u;
    h ^= h >> 15;
    return (float)(h % 4096) / 512.0f - 4.0f; /* exact in float */
}

static void test_seeds(void) {
    enum { N = 32000, STEPS = 64 };
    float *l = malloc(N * sizeof *l);
    tokd_sampler_params p;
    tokd_sampler_params_default(&p);
    p.temperature = 1.5f;
    p.top_k = 200;
    p.top_p = 0.99f;
    p.min_p = 0;
    int32_t a[STEPS], b[STEPS], c[STEPS], d[STEPS];
    p.seed = 42;
    tokd_sampler *s1 = mk(&p, N), *s2 = mk(&p, N);
    p.seed = 43;
    tokd_sampler *s3 = mk(&p, N);
    for (int t = 0; t < STEPS; t++) {
        for (int i = 0; i < N; i++) l[i] = seq_logit(i, t); /* deterministic, no RNG, no libm */
        a[t] = tokd_sampler_sample(s1, l, NULL);
        b[t] = tokd_sampler_sample(s2, l, NULL);
        c[t] = tokd_sampler_sample(s3, l, NULL);
    }
    CHECK(memcmp(a, b, sizeof a) == 0, "same seed gave different sequences");
    CHECK(memcmp(a, c, sizeof a) != 0, "different seeds gave the same sequence");
    tokd_sampler_reset(s1);
    for (int t = 0; t < STEPS; t++) {
        for (int i = 0; i < N; i++) l[i] = seq_logit(i, t);
        d[t] = tokd_sampler_sample(s1, l, NULL);
    }
    CHECK(memcmp(a, d, sizeof a) == 0, "reset did not restart the sequence");
    /* pinned: the PRNG stream for seed 42 and the first tokens, so that a change to the PRNG or
     * to the selection order (which would change users' seeded outputs) is noticed */
    tokd_sampler_reset(s1);
    uint64_t r0 = tokd_sampler_next_u64(s1), r1 = tokd_sampler_next_u64(s1);
    CHECK(r0 == 0x15780b2e0c2ec716ULL && r1 == 0x6104d9866d113a7eULL, "PRNG stream for seed 42: %016llx %016llx", (unsigned long long)r0,
          (unsigned long long)r1);
    const int32_t pinned[8] = {19454, 11680, 29883, 4562, 2125, 25550, 2601, 22502};
    CHECK(memcmp(a, pinned, sizeof pinned) == 0, "first tokens for seed 42 changed: %d %d %d %d %d %d %d %d", a[0], a[1],
          a[2], a[3], a[4], a[5], a[6], a[7]);
    tokd_sampler_free(s1);
    tokd_sampler_free(s2);
    tokd_sampler_free(s3);
    free(l);
}

static void test_penalties(void) {
    enum { N = 16 };
    float l[N], out[N];
    for (int i = 0; i < N; i++) l[i] = (float)(i % 5) - 2.0f; /* -2 -1 0 1 2 -2 ... */
    /* repeat penalty over a window of 3, prompt tokens counted */
    tokd_sampler_params p = plain(1);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 3;
    tokd_sampler *s = mk(&p, N);
    int32_t prompt[] = {4, 5, 6};
    tokd_sampler_accept_prompt(s, prompt, 3);
    tokd_sampler_accept(s, 7);
    tokd_sampler_accept(s, 4);
    tokd_sampler_accept(s, 4); /* window now 7 4 4: distinct {7, 4} */
    tokd_sampler_apply_processors(s, l, out);
    for (int i = 0; i < N; i++) {
        float want = l[i];
        if (i == 7 || i == 4) want = l[i] > 0 ? l[i] / 2 : l[i] * 2;
        CHECK(out[i] == want, "repeat window: token %d got %g want %g", i, (double)out[i], (double)want);
    }
    tokd_sampler_accept(s, 9);
    tokd_sampler_accept(s, 9); /* window 4 9 9 */
    tokd_sampler_apply_processors(s, l, out);
    CHECK(out[7] == l[7] && out[4] == l[4] / 2 && out[9] == l[9] / 2, "repeat window slid: %g %g %g", (double)out[7],
          (double)out[4], (double)out[9]);
    CHECK(out[9] == 1.0f && out[4] == 1.0f, "repeat: positive logits divided");
    tokd_sampler_free(s);

    /* whole history (-1) and off (0) */
    p.repeat_last_n = -1;
    s = mk(&p, N);
    tokd_sampler_accept_prompt(s, prompt, 3);
    for (int i = 0; i < 100; i++) tokd_sampler_accept(s, 10);
    tokd_sampler_apply_processors(s, l, out);
    CHECK(out[5] == -4.0f && out[6] == -2.0f && out[4] == 1.0f && out[10] == -4.0f && out[11] == -1.0f,
          "whole-history repeat: %g %g %g %g %g", (double)out[5], (double)out[6], (double)out[4], (double)out[10],
          (double)out[11]);
    tokd_sampler_reset(s);
    tokd_sampler_apply_processors(s, l, out);
    CHECK(memcmp(out, l, sizeof l) == 0, "reset cleared the repeat history");
    tokd_sampler_free(s);
    p.repeat_last_n = 0;
    s = mk(&p, N);
    tokd_sampler_accept(s, 4);
    tokd_sampler_apply_processors(s, l, out);
    CHECK(memcmp(out, l, sizeof l) == 0, "repeat_last_n=0 is off");
    tokd_sampler_free(s);

    /* presence / frequency: generated tokens only, whole generation */
    p = plain(1);
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    p.repeat_last_n = 2;
    s = mk(&p, N);
    int32_t pr2[] = {1, 2, 2};
    tokd_sampler_accept_prompt(s, pr2, 3);
    for (int i = 0; i < 3; i++) tokd_sampler_accept(s, 3);
    tokd_sampler_accept(s, 8);
    for (int i = 0; i < 5; i++) tokd_sampler_accept(s, 12); /* window long gone: still counted */
    tokd_sampler_apply_processors(s, l, out);
    for (int i = 0; i < N; i++) {
        float want = l[i];
        if (i == 3) want = l[i] - 1.25f;
        if (i == 8) want = l[i] - 0.75f;
        if (i == 12) want = l[i] - 1.75f;
        CHECK(out[i] == want, "presence/frequency: token %d got %g want %g", i, (double)out[i], (double)want);
    }
    tokd_sampler_free(s);

    /* order: bias, then repeat, then presence/frequency, then the mask */
    tokd_logit_bias bias[] = {{3, 1.0f}, {3, 0.5f}, {5, -INFINITY}, {6, 3.0f}};
    p = plain(1);
    p.logit_bias = bias;
    p.n_logit_bias = 4;
    p.repeat_penalty = 2.0f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    s = mk(&p, N);
    bias[0].bias = 100; /* the sampler copied the array */
    tokd_sampler_accept(s, 3);
    tokd_sampler_accept(s, 6);
    tokd_sampler_accept(s, 6);
    tokd_sampler_apply_processors(s, l, out);
    /* token 3: 1 + 1.5 = 2.5 -> /2 = 1.25 -> -0.75 = 0.5; token 6: -1 + 3 = 2 -> 1 -> -1 = 0 */
    CHECK(out[3] == 0.5f, "bias+penalties on token 3: %g", (double)out[3]);
    CHECK(out[6] == 0.0f, "bias+penalties on token 6: %g", (double)out[6]);
    CHECK(out[5] == -INFINITY, "banned token 5: %g", (double)out[5]);
    tokd_sampler_free(s);
}

static void mask_even(void *ud, float *logits, int32_t n) {
    int *calls = ud;
    (*calls)++;
    for (int32_t i = 0; i < n; i += 2) logits[i] = -INFINITY;
}

static void mask_nan(void *ud, float *logits, int32_t n) {
    for (int32_t i = 0; i < n; i++) logits[i] = NAN;
}

static void test_bias_mask(void) {
    enum { N = 100 };
    float l[N], copy[N];
    for (int i = 0; i < N; i++) l[i] = (float)(t_rand_unit(&rng) * 2);
    l[40] = 10;
    l[41] = 9;
    l[42] = 8.5f;
    memcpy(copy, l, sizeof l);
    tokd_logit_bias ban[] = {{40, -INFINITY}};
    tokd_sampler_params p = plain(0);
    p.logit_bias = ban;
    p.n_logit_bias = 1;
    tokd_sampler *s = mk(&p, N);
    CHECK(tokd_sampler_sample(s, l, NULL) == 41, "greedy with the argmax banned");
    tokd_sampler_free(s);
    p.temperature = 3;
    s = mk(&p, N);
    int hit = 0;
    for (int d = 0; d < 20000; d++) hit += tokd_sampler_sample(s, l, NULL) == 40;
    CHECK(hit == 0, "banned token drawn %d times", hit);
    CHECK(memcmp(l, copy, sizeof l) == 0, "sample modified the logits");
    /* the mask: odd tokens only, and it sees the biased logits */
    int calls = 0;
    tokd_sampler_set_mask(s, mask_even, &calls);
    int even = 0;
    for (int d = 0; d < 5000; d++) even += tokd_sampler_sample(s, l, NULL) % 2 == 0;
    CHECK(even == 0 && calls == 5000, "mask: %d even tokens, %d calls", even, calls);
    /* a mask that bans everything (even with NaN): defined fallback, flagged */
    tokd_sampler_set_mask(s, mask_nan, NULL);
    tokd_sample_result r;
    tokd_sampler_reset(s);
    int32_t t = tokd_sampler_sample(s, l, &r);
    CHECK(t == 40 && r.token == 40 && r.all_banned == 1, "all banned -> raw argmax 40 flagged, got %d (%d)", t,
          r.all_banned);
    uint64_t after = tokd_sampler_next_u64(s);
    tokd_sampler_reset(s);
    CHECK(tokd_sampler_next_u64(s) == after, "all-banned call advanced the PRNG");
    tokd_sampler_set_mask(s, NULL, NULL);
    t = tokd_sampler_sample(s, l, &r);
    CHECK(r.all_banned == 0 && t != 40, "mask removed: %d", t);
    tokd_sampler_free(s);
}

static void test_logprobs(void) {
    enum { N = 32000 };
    float *l = malloc(N * sizeof *l);
    for (int i = 0; i < N; i++) l[i] = (float)(t_rand_unit(&rng) * 16 - 8);
    l[100] = l[200] = l[300] = 9.0f; /* a tie at the top */
    l[7] = 8.5f;
    double m = -INFINITY, sum = 0;
    for (int i = 0; i < N; i++) m = fmax(m, l[i]);
    for (int i = 0; i < N; i++) sum += exp((double)l[i] - m);
    double lse = m + log(sum);
    tokd_sampler_params p;
    tokd_sampler_params_default(&p);
    p.n_logprobs = 20;
    p.repeat_penalty = 1.3f; /* processing must not affect the reported logprobs */
    tokd_sampler *s = mk(&p, N);
    tokd_sample_result r;
    double worst = 0;
    int order_bad = 0;
    for (int it = 0; it < 20; it++) {
        int32_t t = tokd_sampler_sample(s, l, &r);
        tokd_sampler_accept(s, t);
        CHECK(r.token == t && t >= 0 && t < N, "token");
        worst = fmax(worst, fabs(r.logprob - ((double)l[t] - lse)));
        CHECK(r.n_top == 20, "n_top %d", r.n_top);
        for (int i = 0; i < r.n_top; i++) {
            worst = fmax(worst, fabs(r.top[i].logprob - ((double)l[r.top[i].token] - lse)));
            if (i > 0) {
                float a = l[r.top[i - 1].token], b = l[r.top[i].token];
                order_bad += !(a > b || (a == b && r.top[i - 1].token < r.top[i].token));
            }
        }
        /* the top-N really are the N largest */
        int larger = 0;
        float last = l[r.top[19].token];
        for (int i = 0; i < N; i++) larger += l[i] > last;
        CHECK(larger <= 19, "top-20 misses %d larger logits", larger - 19);
    }
    CHECK(worst < 2e-6, "logprob error %g", worst);
    CHECK(order_bad == 0, "top logprobs out of order %d times", order_bad);
    tokd_sampler_sample(s, l, &r);
    CHECK(r.top[0].token == 100 && r.top[1].token == 200 && r.top[2].token == 300 && r.top[3].token == 7,
          "top ties by id: %d %d %d %d", r.top[0].token, r.top[1].token, r.top[2].token, r.top[3].token);
    tokd_sampler_free(s);
    /* fewer tokens than asked; none asked */
    float small[3] = {0, 1, NAN};
    p.n_logprobs = 10;
    s = mk(&p, 3);
    tokd_sampler_sample(s, small, &r);
    CHECK(r.n_top == 3 && r.top[0].token == 1 && r.top[1].token == 0 && r.top[2].token == 2, "small vocab top");
    double l2 = log(1 + exp(-1.0));
    CHECK(fabs(r.top[0].logprob + l2) < 1e-6 && fabs(r.top[1].logprob - (-1 - l2)) < 1e-6 && r.top[2].logprob == -INFINITY,
          "small vocab logprobs %g %g %g", (double)r.top[0].logprob, (double)r.top[1].logprob, (double)r.top[2].logprob);
    tokd_sampler_free(s);
    p.n_logprobs = 0;
    s = mk(&p, 3);
    tokd_sampler_sample(s, small, &r);
    CHECK(r.n_top == 0, "n_top %d with none asked", r.n_top);
    tokd_sampler_free(s);
    free(l);
}

static void test_nan_inf(void) {
    enum { N = 64 };
    float l[N];
    for (int i = 0; i < N; i++) l[i] = (float)i * 0.1f;
    l[63] = NAN;
    l[62] = NAN;
    tokd_sampler_params p = plain(0);
    tokd_sampler *s = mk(&p, N);
    CHECK(tokd_sampler_sample(s, l, NULL) == 61, "greedy skips NaN");
    tokd_sampler_free(s);
    p = plain(1);
    s = mk(&p, N);
    int bad = 0;
    for (int d = 0; d < 5000; d++) {
        int32_t t = tokd_sampler_sample(s, l, NULL);
        bad += t == 62 || t == 63 || t < 0 || t >= N;
    }
    CHECK(bad == 0, "sampled NaN tokens %d times", bad);
    /* +inf: uniform among the infinite ones */
    l[10] = INFINITY;
    l[20] = INFINITY;
    int c10 = 0, c20 = 0;
    tokd_sample_result r;
    for (int d = 0; d < 4000; d++) {
        int32_t t = tokd_sampler_sample(s, l, &r);
        c10 += t == 10;
        c20 += t == 20;
    }
    CHECK(c10 + c20 == 4000 && c10 > 1800 && c20 > 1800, "+inf split %d/%d", c10, c20);
    CHECK(fabs(r.logprob + log(2.0)) < 1e-6, "logprob at +inf %g", (double)r.logprob);
    tokd_sampler_free(s);
    p = plain(0);
    s = mk(&p, N);
    CHECK(tokd_sampler_sample(s, l, NULL) == 10, "greedy +inf tie");
    tokd_sampler_free(s);
    /* all NaN, all -inf */
    for (int i = 0; i < N; i++) l[i] = NAN;
    p = plain(1);
    s = mk(&p, N);
    int32_t t = tokd_sampler_sample(s, l, &r);
    CHECK(t == 0 && r.all_banned && r.logprob == -INFINITY, "all NaN -> 0 (%d, %d, %g)", t, r.all_banned, (double)r.logprob);
    for (int i = 0; i < N; i++) l[i] = -INFINITY;
    l[5] = NAN;
    t = tokd_sampler_sample(s, l, &r);
    CHECK(t == 0 && r.all_banned, "all -inf -> 0 (%d)", t);
    tokd_sampler_free(s);
    /* extreme finite logits with tiny temperature do not overflow into NaN */
    for (int i = 0; i < N; i++) l[i] = (i % 2) ? 3e38f : -3e38f;
    l[33] = 3.4e38f;
    p = plain(1e-5f);
    s = mk(&p, N);
    t = tokd_sampler_sample(s, l, &r);
    CHECK(t == 33, "huge logits, tiny T: %d", t);
    tokd_sampler_free(s);
    /* random garbage with random parameters: always in range */
    int out_of_range = 0;
    for (int it = 0; it < 3000; it++) {
        tokd_sampler_params q = plain((float)(t_rand_unit(&rng) < 0.2 ? 0 : t_rand_unit(&rng) * 3));
        q.top_k = (int32_t)(t_rand_unit(&rng) * 80) - 10;
        q.top_p = (float)(t_rand_unit(&rng) * 1.2);
        q.min_p = (float)(t_rand_unit(&rng) - 0.3);
        q.repeat_penalty = (float)(0.5 + t_rand_unit(&rng));
        q.presence_penalty = (float)(t_rand_unit(&rng) * 4 - 2);
        q.frequency_penalty = (float)(t_rand_unit(&rng) * 4 - 2);
        q.seed = (uint64_t)it;
        q.n_logprobs = (int32_t)(t_rand_unit(&rng) * 21);
        int n = 1 + (int)(t_rand_unit(&rng) * N);
        for (int i = 0; i < n; i++) {
            double u = t_rand_unit(&rng);
            l[i] = u < 0.1 ? NAN : u < 0.15 ? INFINITY : u < 0.3 ? -INFINITY : u < 0.35 ? 3e38f : (float)(t_rand_unit(&rng) * 20 - 10);
        }
        s = mk(&q, n);
        for (int k = 0; k < 3; k++) {
            t = tokd_sampler_sample(s, l, (k & 1) ? &r : NULL);
            out_of_range += t < 0 || t >= n;
            tokd_sampler_accept(s, t);
        }
        tokd_sampler_free(s);
    }
    CHECK(out_of_range == 0, "%d out-of-range tokens on garbage", out_of_range);
}

#define BAD(field_setup, word)                                                                         \
    do {                                                                                               \
        tokd_sampler_params q;                                                                         \
        tokd_sampler_params_default(&q);                                                               \
        field_setup;                                                                                   \
        tokd_err e = {{0}};                                                                            \
        tokd_sampler *x = tokd_sampler_new(&q, n_vocab, &e);                                           \
        CHECK(x == NULL && strstr(e.msg, word) != NULL, "%s: accepted or message '%s'", #field_setup, e.msg); \
        tokd_sampler_free(x);                                                                          \
    } while (0)

static void test_validation(void) {
    int32_t n_vocab = 100;
    BAD(q.temperature = -0.1f, "temperature");
    BAD(q.temperature = NAN, "temperature");
    BAD(q.temperature = INFINITY, "temperature");
    BAD(q.top_p = -0.5f, "top_p");
    BAD(q.top_p = NAN, "top_p");
    BAD(q.min_p = 1.5f, "min_p");
    BAD(q.min_p = NAN, "min_p");
    BAD(q.repeat_penalty = 0, "repeat_penalty");
    BAD(q.repeat_penalty = -1, "repeat_penalty");
    BAD(q.repeat_last_n = -2, "repeat_last_n");
    BAD(q.presence_penalty = 2.5f, "presence_penalty");
    BAD(q.frequency_penalty = -3, "frequency_penalty");
    BAD(q.frequency_penalty = NAN, "frequency_penalty");
    BAD(q.n_logprobs = 21, "n_logprobs");
    BAD(q.n_logprobs = -1, "n_logprobs");
    BAD(q.n_logit_bias = 1, "logit bias");
    BAD(q.n_logit_bias = -1, "logit bias");
    tokd_logit_bias b1[] = {{5, 1}, {100, 1}}, b2[] = {{-1, 1}}, b3[] = {{5, NAN}}, b4[] = {{5, INFINITY}};
    BAD((q.logit_bias = b1, q.n_logit_bias = 2), "token 100");
    BAD((q.logit_bias = b2, q.n_logit_bias = 1), "token -1");
    BAD((q.logit_bias = b3, q.n_logit_bias = 1), "logit bias");
    BAD((q.logit_bias = b4, q.n_logit_bias = 1), "logit bias");
    n_vocab = 0;
    BAD((void)0, "vocabulary");
    n_vocab = -5;
    BAD((void)0, "vocabulary");
    tokd_err e = {{0}};
    CHECK(tokd_sampler_new(NULL, 10, &e) == NULL && e.msg[0], "NULL params");
    /* edge values that are valid */
    tokd_sampler_params q = plain(0);
    q.top_p = 0;
    q.min_p = 1;
    q.top_k = 1 << 30;
    q.repeat_last_n = -1;
    q.presence_penalty = -2;
    q.frequency_penalty = 2;
    q.n_logprobs = 20;
    tokd_logit_bias ok[] = {{0, -INFINITY}, {99, -100}};
    q.logit_bias = ok;
    q.n_logit_bias = 2;
    tokd_sampler *s = tokd_sampler_new(&q, 100, &e);
    CHECK(s != NULL, "valid edge parameters rejected: %s", e.msg);
    tokd_sampler_free(s);
    /* out-of-range accepted tokens are ignored */
    s = mk(&q, 100);
    tokd_sampler_accept(s, -1);
    tokd_sampler_accept(s, 100);
    int32_t junk[] = {-7, 1000, 3};
    tokd_sampler_accept_prompt(s, junk, 3);
    tokd_sampler_free(s);
}

static void test_big_vocab(void) {
    enum { N = 262144 };
    float *l = malloc(N * sizeof *l);
    for (int i = 0; i < N; i++) l[i] = (float)(t_rand_unit(&rng) * 10);
    l[N - 1] = 20;
    tokd_sampler_params p;
    tokd_sampler_params_default(&p);
    p.repeat_penalty = 1.1f;
    p.n_logprobs = 5;
    tokd_sampler *s = mk(&p, N);
    tokd_sample_result r;
    int32_t t = tokd_sampler_sample(s, l, &r);
    CHECK(t == N - 1 && r.top[0].token == N - 1, "256k vocab: %d", t);
    tokd_sampler_free(s);
    free(l);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void bench(void) {
    enum { N = 32000, RUNS = 101 };
    float *l = malloc(N * sizeof *l);
    for (int i = 0; i < N; i++) l[i] = (float)(t_rand_unit(&rng) * 20 - 10);
    tokd_sampler_params p;
    tokd_sampler_params_default(&p);
    double t_plain[RUNS], t_res[RUNS], t_topp[RUNS];
    tokd_sampler *s = mk(&p, N);
    tokd_sample_result r;
    for (int i = 0; i < RUNS; i++) {
        double t0 = tokd_now();
        tokd_sampler_sample(s, l, NULL);
        double t1 = tokd_now();
        tokd_sampler_sample(s, l, &r);
        double t2 = tokd_now();
        t_plain[i] = t1 - t0;
        t_res[i] = t2 - t1;
    }
    tokd_sampler_free(s);
    p.top_k = 0;
    p.min_p = 0;
    s = mk(&p, N);
    for (int i = 0; i < RUNS; i++) {
        double t0 = tokd_now();
        tokd_sampler_sample(s, l, NULL);
        t_topp[i] = tokd_now() - t0;
    }
    tokd_sampler_free(s);
    qsort(t_plain, RUNS, sizeof(double), cmp_double);
    qsort(t_res, RUNS, sizeof(double), cmp_double);
    qsort(t_topp, RUNS, sizeof(double), cmp_double);
    printf("sample, 32000 vocab, median of %d: defaults %.1f us; with logprob result %.1f us; top-p only (no top-k/min-p) %.1f us\n",
           RUNS, t_plain[RUNS / 2] * 1e6, t_res[RUNS / 2] * 1e6, t_topp[RUNS / 2] * 1e6);
    free(l);
}

int main(void) {
    test_defaults();
    test_greedy();
    test_temperature_limit();
    test_topk1();
    test_distributions();
    test_seeds();
    test_penalties();
    test_bias_mask();
    test_logprobs();
    test_nan_inf();
    test_validation();
    test_big_vocab();
    bench();
    T_DONE();
}
