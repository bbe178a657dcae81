/* decode_step.c — one sequence's decode step as one parallel region (decode_step.h).
 *
 * forward.c runs a decode step as some ten regions a layer: each product is a region of
 * the pool, and between them the caller alone runs the serial stages (norms, adds, the
 * activation preparation, RoPE and the KV write) while the other threads wait. Every
 * region's start and end hand data between cores: the prepared activation out, the
 * outputs back. On the Zen 4 host whose two vCPUs sit on two dies part of the time (a
 * one-way handoff of 155-185 ns against 26-56 on one die), those hand-offs and serial
 * stages cost about 0.8 ms of an 11 ms Q4_0 step (BENCHMARKS.md, sixtieth session).
 *
 * Here every thread runs the whole step:
 * - it keeps its own copy of the residual stream x, and computes each RMSNorm and each
 *   activation preparation itself (the same function on the same input: the same bits);
 * - of K and V it computes the rows of its KV heads, so it also applies their RoPE,
 *   writes them to the cache and runs their attention with nothing from the other
 *   threads but Q; Q's rows are claimed and stolen (below), each thread's share an
 *   equal part (its heads' rows where they split evenly), and before RoPE a thread
 *   waits until every Q row is computed (tokd_matmul_shares_done): no barrier, since Q
 *   comes first and K and V after, and a thief is done with what it took by the time
 *   its victim has read its own K and V;
 * - the rows of O, of gate and up (one product of the two matrices), of down and of the
 *   logits are claimed and stolen as matmul.c's decode products' are
 *   (tokd_matmul_rows_shared); then each thread applies SwiGLU to a fixed share of the
 *   columns, which are its columns of down's input;
 * - O's and down's inputs (the heads' attention outputs, the SwiGLU columns) come from
 *   every thread; where the weight type's preparation splits by columns (packed.h), each
 *   thread prepares its own columns into one shared row before the barrier, instead of
 *   each preparing the whole row from the others' floats after it: on cores on two dies,
 *   steps alternated with the whole-row preparation, Q4_K_M 0.9919, 0.9859, 0.9907,
 *   0.9927 where the null flip read 0.9973, 0.9903, 0.9985, 1.0009; Q4_0 0.9946, 0.9981,
 *   1.0000 (null 0.9936-1.0021) (BENCHMARKS.md, sixty-second session);
 * - the other thread read that row last layer, so each line this thread writes there
 *   would first wait for the other core's copy to be invalidated: on cores on two dies,
 *   down's half row took 2.5-4.2 us to prepare against 0.9-1.4 with its lines claimed
 *   (one store to each, claim_cols) before the product ahead of it, where the
 *   invalidations overlap the stream; steps alternated, Q4_0 0.9900-1.0030 (median
 *   0.9954) against a null flip's 0.9978-1.0024 (BENCHMARKS.md, sixty-third session);
 * - the threads meet at five barriers a layer: after attention (O needs every head),
 *   after O and after down (each thread adds the whole output into its x), after gate
 *   and up (SwiGLU needs both rows of its columns), after SwiGLU (down needs every
 *   column). A thread that arrives first reads the first bytes of its next product's
 *   rows while it waits, as the pool's windows do.
 * Each output is computed by one thread with the kernel and prepared row that
 * tokd_matmul gives it, so the step has forward.c's bits (tests/test_decode_step.c).
 *
 * TinyLlama shape, 2 threads, steps alternated in one process with forward.c's
 * (`tokd bench -p 0 -n 256 -r 2 -t 2`, medians of 257 paired step ratios; the null
 * flip reads 0.994-1.001): on cores on two dies, Q4_0 0.978-0.991 in 7 runs, Q4_K_M
 * 0.989-0.995 in 3; on one die 0.997-1.000 (BENCHMARKS.md, sixty-first session).
 *
 * Gate and up were each thread's fixed half of both rows until the sixty-seventh
 * session. On the AVX2-only Zen 3, where one core reads 17-19 GB/s alone against 29-31
 * for two, the halves finished 18-56 us apart a layer (which thread first changed from
 * layer to layer), and the one left reading alone wasted half the bus. Claimed and
 * stolen, with the barrier before SwiGLU that this costs, steps alternated in one
 * process against the fixed halves (60 rounds of 8 steps): Q4_0 0.9654, 0.9735, 0.9777,
 * 0.9860, 0.9882, 0.9973, Q8_0 0.9943, 0.9947, Q4_K_M 0.9855, 0.9913, where the null
 * flip read 0.9838-1.0073 in the same batches; whole tg128 runs alternated, Q4_0 share
 * medians 93.5 -> 94.3 %, 92.7 -> 93.2 % and 94.4 -> 95.85 % (six pairs each;
 * BENCHMARKS.md, sixty-fifth and sixty-seventh sessions). On the AVX-512 Zen 4 with its
 * cores on two dies the same claimed product read within 0.4 % of the fixed halves
 * (0.9867-0.9945 against 0.9845-0.9906, each against forward.c, sixty-first session),
 * up alone claimed 0.8-1.2 % slower and gate and up claimed in pairs (the same rows of
 * both, then their SwiGLU, no barrier) 3-4 % slower.
 *
 * Q was each thread's fixed rows too until the sixty-eighth session. On the Zen 3 the
 * threads then finished Q, K and V 3-12 us apart in a layer at the quartiles, either
 * thread first (two cores streaming together drift apart for tens of microseconds), and
 * the barrier after attention waited a median 4-20 us, a tenth of the time 29-71 us
 * (profiled runs of 256 steps). Four such runs alternated: medians 6.3 and 3.8 us fixed,
 * 2.4 and 9.9 claimed; a tenth of the time over 32 and 29 us fixed, 13 and 23 claimed.
 * Steps alternated in one process against fixed Q (8 steps a variant, 500 rounds): Q4_0
 * 0.9961 and 0.9957 where the null flip read 0.9976 and 1.0074; 200 rounds, Q4_0
 * 0.9949, 1.0004, 0.9921 (null 1.0067, 0.9970, 0.9988), Q8_0 0.9921 (0.9962), Q4_K_M
 * 0.9915 (1.0099); with 60 rounds, Q4_0 0.9904-1.0014 (null 1.0024-1.0158): below the
 * null in 9 of 10 pairs, about 0.5-1 % (BENCHMARKS.md, sixty-eighth session). The
 * sixty-seventh session's claimed Q, K and V, with a barrier before attention, measured
 * nothing. */
#include "decode_step.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "attention.h"
#include "kernels/step_profile.h"
#include "vecmath.h"

/* Barriers a layer (each with its own epoch): after attention, O, gate and up, SwiGLU
 * and down. */
#define STEP_EPOCHS_PER_LAYER 5

/* A thread waiting at a barrier spins this many TSC cycles (~95 us), then yields the core
 * each time round: on an oversubscribed machine the thread it waits for may need it. */
#define STEP_SPIN_CYCLES 200000u
/* What a thread that waits at a barrier reads of its next product (as forward.c's
 * windows), an L2's worth. The waits before down were the longest while gate and up
 * were fixed halves (15-43 us apart on cores on two dies), about what a core reads of
 * 1 MB.
 * Steps alternated in one process on cores on two dies, Q4_0: 512 KB against 256 KB
 * 0.9925-0.9961 in 6 runs (sixty-first session); 1 MB against 512 KB 0.9952, 0.9932,
 * 0.9953, 0.9931, 0.9988, and 2 MB 0.9973, 0.9939, 0.9948, 0.9924, where the null flip
 * read 1.0000, 1.0001, 0.9991, 0.9990, 0.9981, 0.9996 in the same rounds (BENCHMARKS.md,
 * sixty-second session). */
#define STEP_WINDOW_BYTES ((size_t)1 << 20)

/* The products whose rows the threads claim and steal, each with its shares' slot. */
typedef enum { SLOT_Q, SLOT_O, SLOT_GATE_UP, SLOT_DOWN, SLOT_LOGITS, SLOT_COUNT } share_slot;

/* Thread ith's rows [*o0, *o1) of a product of n_out rows cut in whole runs of align. */
static void share_rows(int64_t n_out, int64_t align, int ith, int nth, int64_t *o0, int64_t *o1) {
    const int64_t runs = (n_out + align - 1) / align;
    *o0 = runs * ith / nth * align;
    *o1 = runs * (ith + 1) / nth * align;
    if (*o1 > n_out) *o1 = n_out;
    if (*o0 > n_out) *o0 = n_out;
}
static void head_share(const tokd_hparams *hp, int ith, int nth, int32_t *h0, int32_t *h1) {
    *h0 = (int32_t)((int64_t)hp->n_head_kv * ith / nth);
    *h1 = (int32_t)((int64_t)hp->n_head_kv * (ith + 1) / nth);
}

/* Whether the threads split the model evenly, on its matrices' groups: the same number
 * of KV heads each, whose Q, K and V rows start on group boundaries, and gate and up
 * with one grouping between them (the larger group a multiple of the smaller: SwiGLU's
 * columns are cut on it) that can run as one product (tokd_matmul_rows_together; a
 * model whose gate and up cannot, one packed and one not, takes forward.c's path). */
static bool splits_on_groups(const tokd_model *m, int nth) {
    const tokd_hparams *hp = &m->hp;
    if (hp->n_head_kv % nth || hp->n_head % hp->n_head_kv) return false;
    const int64_t group = hp->n_head / hp->n_head_kv;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const tokd_layer *L = &m->layers[l];
        const int64_t ga = tokd_matmul_rows_align(&L->w_gate), ua = tokd_matmul_rows_align(&L->w_up);
        if ((ga > ua ? ga % ua : ua % ga) != 0 || !tokd_matmul_rows_together(&L->w_gate, &L->w_up)) return false;
        for (int t = 1; t < nth; t++) {
            int32_t h0, h1;
            head_share(hp, t, nth, &h0, &h1);
            if ((int64_t)h0 * group * hp->head_dim % tokd_matmul_rows_align(&L->wq) ||
                (int64_t)h0 * hp->head_dim % tokd_matmul_rows_align(&L->wk) ||
                (int64_t)h0 * hp->head_dim % tokd_matmul_rows_align(&L->wv))
                return false;
        }
    }
    return true;
}

/* Whether W's prepared row splits at column `col` (tokd_matmul_row_cols_align). */
static bool splits_at(const tokd_matrix *W, int64_t col) {
    const int64_t a = tokd_matmul_row_cols_align(W);
    return a > 0 && col % a == 0;
}
/* Whether every layer's O row can be prepared in parts, each thread the columns of its
 * heads' attention output; and down's, each thread the SwiGLU columns of its gate and
 * up rows. */
static bool o_cols_split(const tokd_model *m, int nth) {
    const tokd_hparams *hp = &m->hp;
    for (int32_t l = 0; l < hp->n_layer; l++)
        for (int t = 1; t < nth; t++) {
            int32_t h0, h1;
            head_share(hp, t, nth, &h0, &h1);
            if (!splits_at(&m->layers[l].wo, (int64_t)h0 * (hp->n_head / hp->n_head_kv) * hp->head_dim)) return false;
        }
    return true;
}
static bool down_cols_split(const tokd_model *m, int nth) {
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        const tokd_layer *L = &m->layers[l];
        const int64_t ga = tokd_matmul_rows_align(&L->w_gate), ua = tokd_matmul_rows_align(&L->w_up);
        for (int t = 1; t < nth; t++) {
            int64_t g0, g1;
            share_rows(m->hp.n_ff, ga > ua ? ga : ua, t, nth, &g0, &g1);
            if (!splits_at(&L->w_down, g0)) return false;
        }
    }
    return true;
}

static size_t round_line(size_t n) { return (n + 63) & ~(size_t)63; }

bool tokd_decode_step_usable(tokd_ctx *c, int32_t n) {
    const int nth = tokd_pool_size(c->pool);
    if (n != 1 || nth < 2 || !c->step_on || c->observe) return false;
    if (c->step_usable < 0) {
        c->step_usable = splits_on_groups(c->m, nth);
        if (c->step_usable) {
            const size_t E = (size_t)c->m->hp.n_embd;
            /* a thread's scratch: x and the normed row, then three prepared activation
               rows (Q, K and V may each want their own form) */
            const size_t act_row = round_line(tokd_act_scratch_bytes(c->m, 1));
            c->step_thread_bytes = 2 * round_line(E * sizeof(float)) + 3 * act_row;
            c->step_scratch = tokd_aligned_alloc((size_t)nth * c->step_thread_bytes);
            c->step_flags = tokd_aligned_alloc((size_t)nth * sizeof *c->step_flags);
            c->step_slot_bytes = round_line(tokd_matmul_shares_bytes(nth));
            c->step_shares = tokd_aligned_alloc(SLOT_COUNT * c->step_slot_bytes);
            c->step_xact = tokd_aligned_alloc(act_row);
            c->step_x_o = o_cols_split(c->m, nth);
            c->step_x_down = down_cols_split(c->m, nth);
            for (int t = 0; t < nth; t++) {
                atomic_init(&c->step_flags[t].epoch, 0);
                atomic_init(&c->step_flags[t].arrived, 0);
            }
            c->step_epoch = 0;
        }
    }
    return c->step_usable == 1;
}

void tokd_decode_step_free(tokd_ctx *c) {
    free(c->step_xact);
    free(c->step_scratch);
    free(c->step_flags);
    free(c->step_shares);
}

typedef struct {
    tokd_ctx *c;
    const tokd_batch_entry *e;
    float *logits;    /* NULL: no logits for this entry */
    unsigned epoch0;  /* the epoch before the step's first barrier */
} step_job;

/* One turn of a wait begun at TSC t0: a spin, or once the wait is past STEP_SPIN_CYCLES,
 * the core given up (sched_yield). */
static inline void wait_turn(uint64_t t0) {
    if (__rdtsc() - t0 > STEP_SPIN_CYCLES) sched_yield();
    else __asm__ volatile("" ::: "memory");
}

/* Waits until every other thread has reached barrier `epoch`, reading the window
 * [win, win + len) meanwhile: a few lines between checks, with plain loads (threadpool.c
 * says why not prefetches). The acquire loads make what the others wrote before their
 * release stores visible after. */
static void wait_others(tokd_ctx *c, int ith, int nth, unsigned epoch, const void *win, size_t len) {
    const char *pf = win;
    for (int t = 0; t < nth; t++) {
        if (t == ith) continue;
        _Atomic unsigned *flag = &c->step_flags[t].epoch;
        uint64_t t0 = __rdtsc();
        while ((int)(atomic_load_explicit(flag, memory_order_acquire) - epoch) < 0) {
            if (len) {
                for (int i = 0; i < 4 && len; i++) {
                    (void)*(volatile const char *)pf;
                    const size_t step = len < 64 ? len : 64;
                    pf += step, len -= step;
                }
                if (!len) t0 = __rdtsc();
                continue;
            }
            wait_turn(t0);
        }
    }
}

/* Barrier `epoch`: publishes what this thread wrote before it, then waits for the others. */
static void step_barrier(tokd_ctx *c, int ith, int nth, unsigned epoch, const void *win, size_t len) {
    tokd_step_flag *f = c->step_flags;
    if (tokd_profile_on) atomic_store_explicit(&f[ith].arrived, __rdtsc(), memory_order_relaxed);
    atomic_store_explicit(&f[ith].epoch, epoch, memory_order_release);
    wait_others(c, ith, nth, epoch, win, len);
}

/* Thread 0, after a barrier: how far apart the threads reached it, charged to stage st. */
static void profile_tail(const tokd_ctx *c, int ith, int nth, tokd_stage st) {
    if (!tokd_profile_on || ith != 0) return;
    uint64_t first = UINT64_MAX, last = 0;
    for (int t = 0; t < nth; t++) {
        const uint64_t a = atomic_load_explicit(&c->step_flags[t].arrived, memory_order_relaxed);
        if (a < first) first = a;
        if (a > last) last = a;
    }
    tokd_profile.tail_cycles[st] += last - first;
    tokd_profile.tails[st]++;
}
/* Thread 0 enters stage st (the profile's stage times are the caller's). */
static inline void stage(int ith, tokd_stage st) {
    if (ith == 0) tokd_profile_enter(st);
}
/* Thread ith's time since t0 and weight bytes in its fixed rows of a product. */
static void profile_share(int ith, tokd_stage st, uint64_t t0, size_t bytes) {
    if (!tokd_profile_on || ith >= TOKD_PROFILE_MAX_THREADS) return;
    tokd_profile.share_cycles[ith][st] += __rdtsc() - t0;
    tokd_profile.share_bytes[ith][st] += bytes;
}
/* Thread 0 counts preparation time since t0 in stage st (part of it may come before
 * the product's barrier: prepare_cols). */
static inline void profile_prep_part(int ith, tokd_stage st, uint64_t t0) {
    if (tokd_profile_on && ith == 0) tokd_profile.prep_cycles[st] += __rdtsc() - t0;
}
/* Thread 0 counts a product and its preparation, begun at t0, in stage st. */
static inline void profile_prep(int ith, tokd_stage st, uint64_t t0) {
    profile_prep_part(ith, st, t0);
    if (tokd_profile_on && ith == 0) tokd_profile.regions[st]++;
}

/* This thread's static rows [o0, o1) of W against act, into y; its bytes for the profile. */
static size_t rows(const tokd_matrix *W, const void *act, int64_t o0, int64_t o1, float *y) {
    tokd_matmul_rows(W, act, o0, o1, y);
    const void *start;
    return tokd_matmul_rows_span(W, o0, o1, &start);
}

/* A product whose rows the threads claim and steal (tokd_matmul_rows_shared): shares in
 * their own slot of the context, reset by each thread before the barrier ahead of it. */
static void *shares_of(const tokd_ctx *c, share_slot s) {
    return (uint8_t *)c->step_shares + (size_t)s * c->step_slot_bytes;
}

/* The barrier ahead of a product whose rows are claimed (the n matrices Ws, in `slot`;
 * n = 0: none follows): this thread resets its share, then reads the front of it while
 * it waits. */
static void barrier_before_claims(tokd_ctx *c, int ith, int nth, unsigned epoch, share_slot slot, int n,
                                  const tokd_matrix *const *Ws) {
    tokd_pool_window w = {NULL, 0};
    if (n) {
        tokd_matmul_shares_reset(shares_of(c, slot), n, Ws, ith, nth);
        w = tokd_matmul_shares_window(n, Ws, ith, nth, STEP_WINDOW_BYTES);
    }
    step_barrier(c, ith, nth, epoch, w.ptr, w.len);
}
/* After this thread's part of a claimed product (W in `slot`): waits until every row of
 * it has been computed, by whichever thread (tokd_matmul_shares_done). */
static void wait_claims_done(tokd_ctx *c, share_slot slot, const tokd_matrix *W, int nth) {
    const uint64_t t0 = __rdtsc();
    while (!tokd_matmul_shares_done(shares_of(c, slot), 1, &W, nth)) wait_turn(t0);
}
/* This thread's columns [c0, c1) of x prepared for W into the step's shared row, before
 * the barrier that hands the row to every thread (c->step_x_o, c->step_x_down). Each
 * thread then reads the others' columns, a quarter of their floats' bytes, instead of
 * preparing the whole row from the others' floats. */
static void prepare_cols(tokd_ctx *c, int ith, tokd_stage st, const tokd_matrix *W, const float *x, int64_t c0,
                         int64_t c1) {
    const uint64_t t0 = tokd_profile_now();
    tokd_matmul_row_prepare_cols(W, x, c->step_xact, c0, c1);
    profile_prep_part(ith, st, t0);
}

/* A product whose rows the threads claim (W in `slot`, after barrier_before_claims):
 * this thread prepares x for it into act (x NULL: act holds the row, prepare_cols) and
 * computes the rows it claims into y. */
static void claimed_product(tokd_ctx *c, int ith, int nth, share_slot slot, tokd_stage st, const tokd_matrix *W,
                            const float *x, void *act, float *y) {
    stage(ith, st);
    const uint64_t t0 = tokd_profile_now();
    const void *a = x ? tokd_matmul_row_prepare(W, x, act) : act;
    profile_prep(ith, st, t0);
    tokd_matmul_rows_shared(shares_of(c, slot), 1, &W, &a, &y, ith, nth, st);
    stage(ith, TOKD_STAGE_OTHER);
}

/* Early in the layer, ahead of a product that streams weights: this thread's lines of
 * the shared row that it will prepare columns [c0, c1) of for W (prepare_cols), taken
 * back from the other cores, which read the row last. The row is idle then: its readers
 * finished at the barrier before, and its writers write after this. */
static void claim_cols(tokd_ctx *c, bool split, const tokd_matrix *W, int64_t c0, int64_t c1) {
    if (split) tokd_matmul_row_claim_cols(W, c->step_xact, c0, c1);
}

/* A claimed product (W in `slot`, stage st) whose input x every thread wrote part of,
 * this thread columns [c0, c1) (O: its heads' attention outputs; down: its SwiGLU
 * columns), after barrier `epoch`, which ends stage `before`. With `split` this thread
 * prepares its columns into the shared row before the barrier (prepare_cols) and every
 * thread reads the row from there; else each prepares the whole row from x into act. */
static void gathered_product(tokd_ctx *c, int ith, int nth, unsigned epoch, tokd_stage before, share_slot slot,
                             tokd_stage st, const tokd_matrix *W, bool split, const float *x, int64_t c0, int64_t c1,
                             void *act, float *y) {
    if (split) prepare_cols(c, ith, st, W, x, c0, c1);
    barrier_before_claims(c, ith, nth, epoch, slot, 1, &W);
    profile_tail(c, ith, nth, before);
    claimed_product(c, ith, nth, slot, st, W, split ? NULL : x, split ? c->step_xact : act, y);
}

static void step_thread(void *arg, int ith, int nth) {
    step_job *j = arg;
    tokd_ctx *c = j->c;
    const tokd_model *m = c->m;
    const tokd_hparams *hp = &m->hp;
    const tokd_batch_entry *e = j->e;
    const int32_t E = hp->n_embd, hd = hp->head_dim, F = hp->n_ff, group = hp->n_head / hp->n_head_kv;
    const tokd_seq_table *seq = &c->seqs[e->seq];
    const size_t row_bytes = round_line((size_t)E * sizeof(float));
    uint8_t *mine = (uint8_t *)c->step_scratch + (size_t)ith * c->step_thread_bytes;
    float *x = (float *)mine, *xn = (float *)(mine + row_bytes);
    const size_t slot_bytes = (c->step_thread_bytes - 2 * row_bytes) / 3;
    uint8_t *act[3] = {mine + 2 * row_bytes, mine + 2 * row_bytes + slot_bytes, mine + 2 * row_bytes + 2 * slot_bytes};
    float *scores = c->scores + (size_t)ith * c->scores_per_thread;
    float *y = c->xb; /* O's and down's outputs */
    unsigned epoch = j->epoch0;
    uint64_t t0;

    int32_t h0, h1;
    head_share(hp, ith, nth, &h0, &h1);
    m->tok_embd.tt->to_float((const uint8_t *)m->tok_embd.data + (size_t)e->token * m->tok_embd.row_bytes, x, E);

    for (int32_t l = 0; l < hp->n_layer; l++) {
        const tokd_layer *L = &m->layers[l];
        if (l > 0) tokd_add_n(x, y, E); /* the previous layer's down output */

        /* Q claimed and stolen, then K and V of this thread's KV heads */
        tokd_rmsnorm(xn, x, L->attn_norm, E, hp->norm_eps);
        const int64_t q0 = (int64_t)h0 * group * hd, q1 = (int64_t)h1 * group * hd, k0 = (int64_t)h0 * hd,
                      k1 = (int64_t)h1 * hd;
        stage(ith, TOKD_STAGE_QKV);
        t0 = tokd_profile_now();
        const void *aq = tokd_matmul_row_prepare(&L->wq, xn, act[0]);
        const void *ak = tokd_matmul_row_shared(&L->wq, &L->wk) ? aq : tokd_matmul_row_prepare(&L->wk, xn, act[1]);
        const void *av = tokd_matmul_row_shared(&L->wq, &L->wv)   ? aq
                         : tokd_matmul_row_shared(&L->wk, &L->wv) ? ak
                                                                  : tokd_matmul_row_prepare(&L->wv, xn, act[2]);
        profile_prep(ith, TOKD_STAGE_QKV, t0);
        claim_cols(c, c->step_x_o, &L->wo, q0, q1); /* down read the row last */
        const tokd_matrix *wq = &L->wq;
        tokd_matmul_rows_shared(shares_of(c, SLOT_Q), 1, &wq, &aq, &c->q, ith, nth, TOKD_STAGE_QKV);
        t0 = tokd_profile_now();
        const size_t kv_bytes = rows(&L->wk, ak, k0, k1, c->k) + rows(&L->wv, av, k0, k1, c->v);
        profile_share(ith, TOKD_STAGE_QKV, t0, kv_bytes);
        stage(ith, TOKD_STAGE_OTHER);
        wait_claims_done(c, SLOT_Q, wq, nth); /* its heads' Q rows may have been stolen */

        /* their bias, RoPE, cache write and attention */
        stage(ith, TOKD_STAGE_ATTENTION);
        tokd_qkv_to_cache(c, l, e, c->rope, c->q, c->k, c->v, h0, h1);
        for (int32_t h = h0; h < h1; h++)
            tokd_attention(&c->kv, seq->blocks, l, h, e->pos + 1, c->q + (size_t)h * group * hd, group, hd,
                           c->att + (size_t)h * group * hd, scores);
        stage(ith, TOKD_STAGE_OTHER);

        /* O: every head's attention output in */
        gathered_product(c, ith, nth, ++epoch, TOKD_STAGE_ATTENTION, SLOT_O, TOKD_STAGE_O, &L->wo, c->step_x_o, c->att,
                         q0, q1, act[0], y);

        /* gate and up: one product of both, its rows claimed and stolen */
        const tokd_matrix *GU[2] = {&L->w_gate, &L->w_up};
        barrier_before_claims(c, ith, nth, ++epoch, SLOT_GATE_UP, 2, GU);
        profile_tail(c, ith, nth, TOKD_STAGE_O);

        tokd_add_n(x, y, E);
        tokd_rmsnorm(xn, x, L->ffn_norm, E, hp->norm_eps);
        stage(ith, TOKD_STAGE_FFN_UP);
        t0 = tokd_profile_now();
        const void *gu_act[2];
        gu_act[0] = tokd_matmul_row_prepare(GU[0], xn, act[0]);
        gu_act[1] = tokd_matmul_row_shared(GU[0], GU[1]) ? gu_act[0] : tokd_matmul_row_prepare(GU[1], xn, act[1]);
        profile_prep(ith, TOKD_STAGE_FFN_UP, t0);
        int64_t g0, g1; /* this thread's columns of SwiGLU, and of down's prepared row */
        const int64_t ga = tokd_matmul_rows_align(GU[0]), ua = tokd_matmul_rows_align(GU[1]);
        share_rows(F, ga > ua ? ga : ua, ith, nth, &g0, &g1);
        claim_cols(c, c->step_x_down, &L->w_down, g0, g1); /* O read the row last */
        float *gu_out[2] = {c->hg, c->hu};
        tokd_matmul_rows_shared(shares_of(c, SLOT_GATE_UP), 2, GU, gu_act, gu_out, ith, nth, TOKD_STAGE_FFN_UP);
        stage(ith, TOKD_STAGE_OTHER);

        /* SwiGLU: every row of gate and up in; this thread's fixed columns */
        step_barrier(c, ith, nth, ++epoch, NULL, 0);
        profile_tail(c, ith, nth, TOKD_STAGE_FFN_UP);
        tokd_swiglu_cols(c->hg + g0, c->hu + g0, g1 - g0, g0, F);

        /* down: every column of the SwiGLU product in */
        gathered_product(c, ith, nth, ++epoch, TOKD_STAGE_FFN_UP, SLOT_DOWN, TOKD_STAGE_FFN_DOWN, &L->w_down,
                         c->step_x_down, c->hg, g0, g1, act[0], y);
        if (l + 1 < hp->n_layer) /* the next layer's Q */
            barrier_before_claims(c, ith, nth, ++epoch, SLOT_Q, 1, (const tokd_matrix *const[]){&m->layers[l + 1].wq});
        else /* the logits' rows, if this step has them */
            barrier_before_claims(c, ith, nth, ++epoch, SLOT_LOGITS, j->logits ? 1 : 0,
                                  (const tokd_matrix *const[]){&m->output});
        profile_tail(c, ith, nth, TOKD_STAGE_FFN_DOWN);
    }
    if (!j->logits) return;
    tokd_add_n(x, y, E);
    tokd_rmsnorm(xn, x, m->output_norm, E, hp->norm_eps);
    claimed_product(c, ith, nth, SLOT_LOGITS, TOKD_STAGE_LOGITS, &m->output, xn, act[0], j->logits);
}

void tokd_decode_step(tokd_ctx *c, const tokd_batch_entry *e, float *logits) {
    step_job j = {c, e, e->logits ? logits : NULL, c->step_epoch};
    /* layer 0's Q shares, which no barrier in the step comes before: reset here, before
       the region hands them to the threads */
    const int nth = tokd_pool_size(c->pool);
    const tokd_matrix *wq0 = &c->m->layers[0].wq;
    for (int t = 0; t < nth; t++) tokd_matmul_shares_reset(shares_of(c, SLOT_Q), 1, &wq0, t, nth);
    tokd_pool_run(c->pool, step_thread, &j);
    c->step_epoch += (unsigned)STEP_EPOCHS_PER_LAYER * (unsigned)c->m->hp.n_layer;
}
