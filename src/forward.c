/* forward.c — evaluation contexts and the forward pass over a batch of entries.
 *
 * Reads top to bottom like the maths (after llama2.c's run.c): embed → for each layer
 * { RMSNorm → Q,K,V (+bias) → RoPE → write K,V to the paged cache → attention over the
 * cache → output projection + residual → RMSNorm → SwiGLU FFN + residual } → final norm
 * → logits. The paging lives in kvcache.c, the per-type arithmetic in kernels/. A step
 * of one sequence on several threads runs the same maths as one region (decode_step.c);
 * everything else (prefill, batched decode, one thread) runs here, a region a product.
 *
 * Batch invariance: every value is reduced in an order fixed by the model's shapes and
 * absolute positions. Matmuls reduce each output with one vec_dot; attention walks the
 * cache in position order (scores, then a full softmax, then the weighted sum of V, as
 * llama.cpp computes it over its F16 cache); threads split independent outputs.
 * So a sequence gets the same bits alone, chunked, or beside others. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <stdatomic.h>

#include "attention.h"
#include "decode_step.h"
#include "kernels/step_profile.h"
#include "kvcache.h"
#include "model.h"
#include "rope.h"
#include "vecmath.h"

void tokd_ctx_set_decode_region(tokd_ctx *c, bool on) { c->step_on = on; }

void tokd_ctx_set_observer(tokd_ctx *c, tokd_mm_observer fn, void *ud) {
    c->observe = fn;
    c->observe_ud = ud;
}
#define OBSERVE(layer, which, x, n, K) \
    do { \
        if (c->observe) c->observe(c->observe_ud, layer, which, x, n, K); \
    } while (0)

void tokd_ctx_params_default(tokd_ctx_params *p) {
    p->n_ctx = 0;
    p->n_seq = 1;
    p->n_batch = 512;
    p->n_threads = 0;
    p->block_size = 16;
    p->n_blocks = 0;
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

size_t tokd_act_scratch_bytes(const tokd_model *m, int64_t n_rows) {
    size_t act = tokd_matmul_scratch_bytes(m->output.tt, m->output.K, n_rows);
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        const tokd_layer *L = &m->layers[l];
        const tokd_matrix *lm[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof lm / sizeof lm[0]; i++)
            act = max_size(act, tokd_matmul_scratch_bytes(lm[i]->tt, lm[i]->K, n_rows));
    }
    return act ? act : 64;
}

/* Scratch buffer sizes for n_batch rows. */
typedef struct {
    size_t x, xb, q, kv, ff, rope, act;
} tokd_scratch_sizes;

static void scratch_sizes(const tokd_model *m, int32_t n_batch, tokd_scratch_sizes *sz) {
    const tokd_hparams *hp = &m->hp;
    size_t B = (size_t)n_batch, qd = (size_t)hp->n_head * hp->head_dim, kvd = (size_t)hp->n_head_kv * hp->head_dim;
    sz->x = B * hp->n_embd * sizeof(float);
    sz->xb = B * max_size((size_t)hp->n_embd, qd) * sizeof(float);
    sz->q = B * qd * sizeof(float);
    sz->kv = B * kvd * sizeof(float);
    sz->ff = B * hp->n_ff * sizeof(float);
    sz->rope = B * (size_t)hp->n_rot * sizeof(float);
    sz->act = tokd_act_scratch_bytes(m, (int64_t)B);
}

uint64_t tokd_scratch_bytes(const tokd_model *m, const tokd_ctx_params *p) {
    tokd_scratch_sizes sz;
    scratch_sizes(m, p->n_batch > 0 ? p->n_batch : 512, &sz);
    int64_t n_ctx = p->n_ctx > 0 ? p->n_ctx : (m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096);
    int64_t n_thr = p->n_threads > 0 ? p->n_threads : tokd_physical_cores();
    uint64_t scores = (uint64_t)(m->hp.n_head / m->hp.n_head_kv) * (uint64_t)((n_ctx + 15) & ~(int64_t)15);
    return sz.x + sz.xb + 2 * sz.q + 2 * sz.kv + 2 * sz.ff + sz.rope + sz.act + (uint64_t)n_thr * scores * sizeof(float);
}

tokd_ctx *tokd_ctx_new(const tokd_model *m, const tokd_ctx_params *params, tokd_err *err) {
    tokd_ctx_params p = *params;
    const tokd_hparams *hp = &m->hp;
    if (p.n_ctx <= 0) p.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (p.n_seq <= 0) p.n_seq = 1;
    if (p.n_batch <= 0) p.n_batch = 512;
    if (p.block_size <= 0) p.block_size = 16;
    if (p.n_ctx > (1 << 24) || p.n_seq > (1 << 16) || p.n_batch > (1 << 16) || p.block_size > 4096) {
        tokd_seterr(err, "context parameters out of range (n_ctx %d, n_seq %d, n_batch %d, block %d)", p.n_ctx,
                    p.n_seq, p.n_batch, p.block_size);
        return NULL;
    }
    if (p.n_blocks <= 0) p.n_blocks = (int64_t)p.n_seq * ((p.n_ctx + p.block_size - 1) / p.block_size);
    tokd_ctx *c = tokd_xcalloc(1, sizeof *c);
    c->m = m;
    c->p = p;
    c->step_usable = -1;
    c->step_on = true;
    if (tokd_kv_init(&c->kv, p.block_size, p.n_blocks, hp->n_layer, hp->n_head_kv, hp->head_dim, err)) {
        free(c);
        return NULL;
    }
    c->seqs = tokd_xcalloc((size_t)p.n_seq, sizeof(tokd_seq_table));
    c->seq_new = tokd_xcalloc((size_t)p.n_seq, sizeof(int32_t));
    c->pool = tokd_pool_new(p.n_threads);
    tokd_scratch_sizes sz;
    scratch_sizes(m, p.n_batch, &sz);
    c->x = tokd_aligned_alloc(sz.x);
    c->xb = tokd_aligned_alloc(sz.xb);
    c->q = tokd_aligned_alloc(sz.q);
    c->k = tokd_aligned_alloc(sz.kv);
    c->v = tokd_aligned_alloc(sz.kv);
    c->att = tokd_aligned_alloc(sz.q);
    c->hg = tokd_aligned_alloc(sz.ff);
    c->hu = tokd_aligned_alloc(sz.ff);
    c->rope = tokd_aligned_alloc(sz.rope);
    c->act = tokd_aligned_alloc(sz.act);
    /* per thread: one score row per query head of a KV-head group, padded to 16 */
    c->scores_per_thread = (size_t)(m->hp.n_head / m->hp.n_head_kv) * (((size_t)p.n_ctx + 15) & ~(size_t)15);
    c->scores = tokd_aligned_alloc((size_t)tokd_pool_size(c->pool) * c->scores_per_thread * sizeof(float));
    return c;
}

void tokd_ctx_free(tokd_ctx *c) {
    if (!c) return;
    for (int32_t s = 0; s < c->p.n_seq; s++) tokd_seq_table_free(&c->kv, &c->seqs[s]);
    tokd_kv_free(&c->kv);
    tokd_decode_step_free(c);
    tokd_pool_free(c->pool);
    free(c->seqs);
    free(c->seq_new);
    free(c->x);
    free(c->xb);
    free(c->q);
    free(c->k);
    free(c->v);
    free(c->att);
    free(c->hg);
    free(c->hu);
    free(c->rope);
    free(c->act);
    free(c->scores);
    free(c);
}

int32_t tokd_seq_len(const tokd_ctx *c, int32_t seq) {
    return (seq >= 0 && seq < c->p.n_seq) ? c->seqs[seq].len : 0;
}

void tokd_seq_truncate(tokd_ctx *c, int32_t seq, int32_t new_len) {
    if (seq >= 0 && seq < c->p.n_seq) tokd_seq_shrink(&c->kv, &c->seqs[seq], new_len);
}

/* ---- building blocks ------------------------------------------------------------- */

typedef struct {
    tokd_ctx *c;
    const tokd_batch_entry *e;
    int32_t n, layer;
    _Atomic int64_t next; /* next task to hand out, starts at the pool size */
} attn_job;

/* One (entry, KV head) per task, taken from a shared counter: all the query heads that
 * share the KV head go through attention.c together (each K and V row read once for
 * them). The arithmetic, and why it rounds to F16 where it does, is in attention.h.
 * Tasks go KV head by KV head, each head's entries in order, so that in a prefill the
 * tasks a thread takes one after another read the same head's rows (512 KB at 2048
 * positions, TinyLlama shape: they stay in L2) rather than every head's in turn; pp512
 * after 2048 positions, 10 alternated pairs of runs: median 1.025x (0.86-1.14, the host's
 * noise). A decode step has one entry: the order is the same as before. RoPE and the
 * K, V write done inside a decode step's tasks, each for its own KV head, instead of on
 * the caller before the region: within the noise on cores on two dies (sixtieth session). */
static void attention_task(void *arg, int ith, int nth) {
    attn_job *j = arg;
    tokd_ctx *c = j->c;
    const tokd_hparams *hp = &c->m->hp;
    const int32_t hd = hp->head_dim, group = hp->n_head / hp->n_head_kv;
    float *scratch = c->scores + (size_t)ith * c->scores_per_thread;
    const int64_t n_tasks = (int64_t)j->n * hp->n_head_kv;
    for (int64_t task = ith; task < n_tasks; task = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) {
        int32_t ei = (int32_t)(task % j->n), kvh = (int32_t)(task / j->n);
        const tokd_batch_entry *e = &j->e[ei];
        size_t off = (size_t)ei * hp->n_head * hd + (size_t)kvh * group * hd;
        tokd_attention(&c->kv, c->seqs[e->seq].blocks, j->layer, kvh, e->pos + 1, c->q + off, group, hd, c->att + off,
                       scratch);
    }
    (void)nth;
}

/* ---- element-wise stages across the pool ------------------------------------------
 * Each output element (or each row, for RMSNorm, whose reduction is within the row)
 * is computed whole by one thread from its own inputs, so the split changes nothing. */
typedef struct {
    int kind; /* 1: x += y; 2: RMSNorm rows */
    float *a;
    const float *b, *w;
    int64_t n; /* elements (kind 1) or rows (kind 2) */
    int32_t E;
    float eps;
} ew_job;

static void ew_range(ew_job *j, int64_t i0, int64_t i1) {
    switch (j->kind) {
    case 1:
        tokd_add_n(j->a + i0, j->b + i0, i1 - i0);
        break;
    default:
        for (int64_t r = i0; r < i1; r++) tokd_rmsnorm(j->a + r * j->E, j->b + r * j->E, j->w, j->E, j->eps);
        break;
    }
}
static void ew_task(void *arg, int ith, int nth) {
    ew_job *j = arg;
    int64_t per = (j->n + nth - 1) / nth;
    if (j->kind != 2) per = (per + 15) & ~(int64_t)15;
    int64_t i0 = per * ith, i1 = i0 + per < j->n ? i0 + per : j->n;
    if (i0 < i1) ew_range(j, i0, i1);
}
/* Work below this many element-operations runs on the caller: a region costs ~1 us. */
#define EW_MIN_PARALLEL 4096
static void ew_run(tokd_pool *pool, ew_job *j, int64_t cost) {
    if (cost < EW_MIN_PARALLEL || tokd_pool_size(pool) == 1)
        ew_range(j, 0, j->n);
    else
        tokd_pool_run(pool, ew_task, j);
}
static void add_into(tokd_pool *pool, float *x, const float *y, int64_t n) {
    ew_job j = {.kind = 1, .a = x, .b = y, .n = n};
    ew_run(pool, &j, n / 4);
}
static void rmsnorm_rows(tokd_pool *pool, float *y, const float *x, const float *w, int32_t rows, int32_t E, float eps) {
    ew_job j = {.kind = 2, .a = y, .b = x, .w = w, .n = rows, .E = E, .eps = eps};
    ew_run(pool, &j, rows > 1 ? (int64_t)rows * E : 0);
}

/* ---- the forward pass ------------------------------------------------------------ */

static int validate_batch(tokd_ctx *c, const tokd_batch_entry *e, int32_t n, tokd_err *err) {
    if (n <= 0) return tokd_seterr(err, "empty batch");
    if (n > c->p.n_batch) return tokd_seterr(err, "batch of %d entries exceeds the context's n_batch %d", n, c->p.n_batch);
    for (int32_t s = 0; s < c->p.n_seq; s++) c->seq_new[s] = 0;
    for (int32_t i = 0; i < n; i++) {
        if (e[i].seq < 0 || e[i].seq >= c->p.n_seq)
            return tokd_seterr(err, "entry %d: sequence %d out of range (0..%d)", i, e[i].seq, c->p.n_seq - 1);
        if (e[i].token < 0 || e[i].token >= c->m->hp.n_vocab)
            return tokd_seterr(err, "entry %d: token %d out of range (0..%d)", i, e[i].token, c->m->hp.n_vocab - 1);
        int32_t expect = c->seqs[e[i].seq].len + c->seq_new[e[i].seq];
        if (e[i].pos != expect)
            return tokd_seterr(err, "entry %d: sequence %d expects position %d, got %d", i, e[i].seq, expect, e[i].pos);
        if (e[i].pos >= c->p.n_ctx)
            return tokd_seterr(err, "entry %d: position %d is past the context size %d", i, e[i].pos, c->p.n_ctx);
        c->seq_new[e[i].seq]++;
    }
    for (int32_t s = 0; s < c->p.n_seq; s++) {
        if (!c->seq_new[s]) continue;
        if (tokd_seq_reserve(&c->kv, &c->seqs[s], c->seqs[s].len + c->seq_new[s])) {
            for (int32_t r = 0; r < s; r++) tokd_seq_shrink(&c->kv, &c->seqs[r], c->seqs[r].len);
            return tokd_seterr(err, "KV cache full: no free block for sequence %d", s);
        }
    }
    return 0;
}

/* Decode streams the weights once per token, and between two products the pool threads
 * wait while the caller runs the serial stages (RoPE and the KV write, activation
 * preparation, norms and adds) or finish their share of a region at different times.
 * Each product is announced before the region that precedes it, so that every thread
 * reads the first bytes of its first chunk into its cache while it waits: the memory bus
 * keeps streaming across the gap. With 256 KB a thread (a quarter of an L2), steps alternated
 * in one process ran 1.3-1.8 % faster for Q4_0, 1.4 % for Q4_K_M and 0.5 % for Q8_0
 * (per-step medians; 64 KB and 512 KB measured alike; BENCHMARKS.md). That was on the
 * AVX-512 host. On the AVX2-only Zen 3 host a burst of prefetches that outruns memory is
 * mostly dropped (a 256 KB window issues in 3-4 us and then reads back no faster than
 * cold memory), so there the windows stream little; windows read with plain loads do
 * land in L2, yet steps alternated with them took as long (+0.46, -0.32, +0.05 %: the other
 * thread's stream keeps the bus busy through most gaps; BENCHMARKS.md, session 26). The
 * Zen 4 host dropped them too: steps alternated with and without the windows measured
 * alike (0.997-1.007) while they were prefetches; read with plain loads (threadpool.c)
 * they gain about 0.3 % (fifty-ninth session). */
#define PREFETCH_BYTES ((size_t)256 << 10)
/* The next product is of a, b, c (b and c may be NULL). */
static void announce(tokd_pool *pool, int32_t n, const tokd_matrix *a, const tokd_matrix *b, const tokd_matrix *c) {
    const tokd_matrix *Ws[3] = {a, b, c};
    tokd_matmul_prefetch_next(pool, c ? 3 : b ? 2 : 1, Ws, n, PREFETCH_BYTES);
}

void tokd_qkv_to_cache(tokd_ctx *c, int32_t layer, const tokd_batch_entry *e, const float *rope, float *q, float *k,
                       float *v, int32_t h0, int32_t h1) {
    const tokd_hparams *hp = &c->m->hp;
    const tokd_layer *L = &c->m->layers[layer];
    const int32_t hd = hp->head_dim, group = hp->n_head / hp->n_head_kv, bs = c->kv.block_size;
    const size_t q0 = (size_t)h0 * group * hd, q1 = (size_t)h1 * group * hd, k0 = (size_t)h0 * hd, k1 = (size_t)h1 * hd;
    if (L->bq)
        for (size_t d = q0; d < q1; d++) q[d] += L->bq[d];
    if (L->bk)
        for (size_t d = k0; d < k1; d++) k[d] += L->bk[d];
    if (L->bv)
        for (size_t d = k0; d < k1; d++) v[d] += L->bv[d];
    tokd_rope_apply(q + q0, (h1 - h0) * group, hd, hp->n_rot, hp->rope_neox, rope);
    tokd_rope_apply(k + k0, h1 - h0, hd, hp->n_rot, hp->rope_neox, rope);
    const tokd_seq_table *s = &c->seqs[e->seq];
    const int32_t block = s->blocks[e->pos / bs], slot = e->pos % bs;
    /* the cache holds F16 values, as llama.cpp's default F16 KV cache */
    for (int32_t h = h0; h < h1; h++)
        tokd_kv_store(&c->kv, block, layer, h, slot, k + (size_t)h * hd, v + (size_t)h * hd);
}

/* The layers and logits of a validated batch, each product a region of the pool. */
static void forward_batch(tokd_ctx *c, const tokd_batch_entry *e, int32_t n, float *logits) {
    const tokd_model *m = c->m;
    const tokd_hparams *hp = &m->hp;
    const int32_t E = hp->n_embd, hd = hp->head_dim, qd = hp->n_head * hd, kvd = hp->n_head_kv * hd, F = hp->n_ff;
    tokd_pool *pool = c->pool;
    for (int32_t i = 0; i < n; i++)
        m->tok_embd.tt->to_float((const uint8_t *)m->tok_embd.data + (size_t)e[i].token * m->tok_embd.row_bytes,
                                 c->x + (size_t)i * E, E);

    for (int32_t l = 0; l < hp->n_layer; l++) {
        const tokd_layer *L = &m->layers[l];
        rmsnorm_rows(pool, c->xb, c->x, L->attn_norm, n, E, hp->norm_eps);
        {
            const tokd_matrix *W3[3] = {&L->wq, &L->wk, &L->wv};
            float *Y3[3] = {c->q, c->k, c->v};
            const int64_t ld3[3] = {qd, kvd, kvd};
            OBSERVE(l, TOKD_MM_ATTN_IN, c->xb, n, E);
            tokd_profile_enter(TOKD_STAGE_QKV);
            tokd_matmul_n(pool, 3, W3, c->xb, E, n, Y3, ld3, c->act);
            tokd_profile_enter(TOKD_STAGE_OTHER);
        }
        for (int32_t i = 0; i < n; i++)
            tokd_qkv_to_cache(c, l, &e[i], c->rope + (size_t)i * hp->n_rot, c->q + (size_t)i * qd,
                              c->k + (size_t)i * kvd, c->v + (size_t)i * kvd, 0, hp->n_head_kv);
        attn_job aj = {c, e, n, l, tokd_pool_size(pool)};
        announce(pool, n, &L->wo, NULL, NULL);
        tokd_profile_enter(TOKD_STAGE_ATTENTION);
        tokd_pool_run(pool, attention_task, &aj);
        tokd_profile_enter(TOKD_STAGE_OTHER);
        announce(pool, n, &L->w_gate, &L->w_up, NULL);
        OBSERVE(l, TOKD_MM_ATTN_OUT, c->att, n, qd);
        tokd_profile_enter(TOKD_STAGE_O);
        tokd_matmul(pool, &L->wo, c->att, qd, n, c->xb, E, c->act);
        tokd_profile_enter(TOKD_STAGE_OTHER);
        add_into(pool, c->x, c->xb, (int64_t)n * E);

        rmsnorm_rows(pool, c->xb, c->x, L->ffn_norm, n, E, hp->norm_eps);
        announce(pool, n, &L->w_down, NULL, NULL);
        OBSERVE(l, TOKD_MM_FFN_IN, c->xb, n, E);
        tokd_profile_enter(TOKD_STAGE_FFN_UP);
        tokd_matmul_pair(pool, &L->w_gate, &L->w_up, c->xb, E, n, c->hg, c->hu, F, tokd_swiglu_cols, c->act);
        tokd_profile_enter(TOKD_STAGE_OTHER);
        if (l + 1 < hp->n_layer) announce(pool, n, &m->layers[l + 1].wq, &m->layers[l + 1].wk, &m->layers[l + 1].wv);
        else announce(pool, n, &m->output, NULL, NULL);
        OBSERVE(l, TOKD_MM_FFN_DOWN_IN, c->hg, n, F);
        tokd_profile_enter(TOKD_STAGE_FFN_DOWN);
        tokd_matmul(pool, &L->w_down, c->hg, F, n, c->xb, E, c->act);
        tokd_profile_enter(TOKD_STAGE_OTHER);
        add_into(pool, c->x, c->xb, (int64_t)n * E);
    }

    /* final norm and logits only for the rows asked for, gathered contiguously */
    int32_t n_out = 0;
    for (int32_t i = 0; i < n; i++)
        if (e[i].logits) tokd_rmsnorm(c->xb + (size_t)n_out++ * E, c->x + (size_t)i * E, m->output_norm, E, hp->norm_eps);
    if (n_out > 0) OBSERVE(-1, TOKD_MM_OUTPUT_IN, c->xb, n_out, E);
    tokd_profile_enter(TOKD_STAGE_LOGITS);
    if (n_out > 0) tokd_matmul(pool, &m->output, c->xb, E, n_out, logits, hp->n_vocab, c->act);
}

int tokd_forward(tokd_ctx *c, const tokd_batch_entry *e, int32_t n, float *logits, tokd_err *err) {
    const tokd_model *m = c->m;
    const tokd_hparams *hp = &m->hp;
    if (validate_batch(c, e, n, err)) return -1;
    tokd_profile_begin_pass();
    /* A decode step's embedding row is cold: its lines are asked for together, and the
       RoPE table is computed while they arrive (one by one, the conversion took ~10 us). */
    for (int32_t i = 0; i < n && i < 4; i++) {
        const char *row = (const char *)m->tok_embd.data + (size_t)e[i].token * m->tok_embd.row_bytes;
        for (size_t o = 0; o < m->tok_embd.row_bytes; o += 64) __builtin_prefetch(row + o, 0, 3);
    }
    for (int32_t i = 0; i < n; i++)
        tokd_rope_table(c->rope + (size_t)i * hp->n_rot, e[i].pos, hp->n_rot, hp->rope_freq_base, hp->rope_freq_scale,
                        m->rope_freqs);
    if (tokd_decode_step_usable(c, n)) tokd_decode_step(c, e, logits); /* one sequence: one region */
    else forward_batch(c, e, n, logits);
    for (int32_t i = 0; i < n; i++) c->seqs[e[i].seq].len++;
    tokd_profile_end_pass();
    return 0;
}

int32_t tokd_ctx_n_ctx(const tokd_ctx *c) { return c->p.n_ctx; }
int32_t tokd_ctx_n_batch(const tokd_ctx *c) { return c->p.n_batch; }
tokd_pool *tokd_ctx_pool(tokd_ctx *c) { return c->pool; }

tokd_kv *tokd_ctx_kv(tokd_ctx *c) { return &c->kv; }
tokd_seq_table *tokd_ctx_seq(tokd_ctx *c, int32_t seq) { return &c->seqs[seq]; }
int32_t tokd_ctx_n_seq(const tokd_ctx *c) { return c->p.n_seq; }
