/* bench_regions.c — where a decode step's products lose against the read probe.
 *
 * Runs the weight products of one decode step of a model (every layer's Q/K/V, output,
 * gate/up and down products and the output matrix, with the same decode regions, chunks
 * and prefetch windows as tokd_forward, but none of the serial stages between them)
 * back to back, in three ways, alternated in one process so that the host's drift
 * cancels:
 *   kernel  the real packed kernels;
 *   read    the same regions and chunks with a "kernel" that only reads its weight bytes
 *           the way the probe does (wide loads, pages primed ahead);
 *   probe   the bandwidth probe of `tokd bench` (bench.h), measured right before each.
 *   step    a real decode step (tokd_forward, one token at position 64, tg128's mean),
 *           whose weight bytes are the products'.
 *   cached  each packed form's real kernel alone on one thread, decode, over the first
 *           groups of one of its matrices that fit in L2 (CACHED_BYTES), again and again:
 *           the rate its arithmetic allows with no DRAM behind it.
 * It prints the medians (and quartiles) of kernel/probe, read/probe and kernel/read:
 * read/probe is what the region structure costs (activation preparation on the caller,
 * waking the workers, threads finishing apart, each chunk's stream starting cold),
 * kernel/read what the kernels' arithmetic costs on top; and step/kernel, what the
 * serial stages between the products (attention, RoPE and the KV write, norms, adds,
 * SwiGLU) cost a whole step beyond its products, net of the prefetch windows that keep
 * the bus busy while they run. Per form, cached x threads / probe: how far the kernels'
 * arithmetic is above the machine's read rate. Near 1 a form is as much bound by its
 * instructions as by memory; a host whose cores are shared (an SMT sibling busy) lowers
 * it, and the probe much less.
 *
 *   build:  make bench
 *   run:    build/bench/bench_regions MODEL.gguf [ROUNDS]    (default 21 rounds, 2 threads)
 *
 * Needs a model whose matrices are packed on this CPU (packed.h); others are refused. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "kernels/matmul.h"
#include "kernels/types.h"
#include "model.h"
#include "tokd.h"
#include "util.h"
#include "vecmath.h"

#define MAX_MATRICES 1024
#define MAX_ROUNDS 201
#define WINDOW_BYTES ((size_t)256 << 10) /* forward.c's PREFETCH_BYTES */

static _Atomic uint64_t sink; /* the threads mix their reads into it at once */

/* The probe's read loop over a chunk's weight bytes (bench.h), as a packed gemm. */
static void read_only_gemm(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na, const void *act,
                           size_t as, float *y, int64_t ldy) {
    atomic_fetch_xor_explicit(&sink, tokd_bench_read_bytes(w, (size_t)n_groups * group_bytes), memory_order_relaxed);
    (void)K, (void)na, (void)act, (void)as, (void)y, (void)ldy;
}

/* Every packed matrix with its real traits and a copy whose gemm only reads. */
typedef struct {
    int n, n_forms;
    int first[16]; /* each form's first matrix (the cached rates) */
    tokd_matrix *mat[MAX_MATRICES];
    const tokd_packed_traits *real[MAX_MATRICES], *reader[MAX_MATRICES];
    tokd_packed_traits forms[16];
} variants;

static int add_matrix(variants *v, tokd_matrix *W) {
    if (!W->pk || v->n == MAX_MATRICES) return -1;
    int f = 0;
    while (f < v->n_forms && v->forms[f].id != W->pk->id) f++;
    if (f == v->n_forms) {
        if (f == 16) return -1;
        v->forms[f] = *W->pk;
        v->forms[f].gemm = read_only_gemm;
        v->first[f] = v->n;
        v->n_forms++;
    }
    v->mat[v->n] = W;
    v->real[v->n] = W->pk;
    v->reader[v->n] = &v->forms[f];
    v->n++;
    return 0;
}

static void use(variants *v, int reader) {
    for (int i = 0; i < v->n; i++) v->mat[i]->pk = reader ? v->reader[i] : v->real[i];
}

static double matrix_bytes(const tokd_matrix *W) {
    return (double)W->group_bytes * (double)((W->n_out + W->pk->group_rows - 1) / W->pk->group_rows);
}

static void announce(tokd_pool *pool, const tokd_matrix *a, const tokd_matrix *b, const tokd_matrix *c) {
    const tokd_matrix *Ws[3] = {a, b, c};
    tokd_matmul_prefetch_next(pool, c ? 3 : b ? 2 : 1, Ws, 1, WINDOW_BYTES);
}

/* The weight bytes of one decode step's products. */
static double step_bytes(const tokd_model *m) {
    double bytes = matrix_bytes(&m->output);
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        const tokd_layer *L = &m->layers[l];
        const tokd_matrix *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int k = 0; k < 7; k++) bytes += matrix_bytes(ws[k]);
    }
    return bytes;
}

typedef struct {
    float *x, *y0, *y1, *y2, *logits;
    void *act;
} buffers;

/* One decode step's products in tokd_forward's order, announcements included. */
static void products(const tokd_model *m, tokd_pool *pool, const buffers *b) {
    const tokd_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, F = hp->n_ff, qd = (int64_t)hp->n_head * hp->head_dim;
    const int64_t kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const tokd_layer *L = &m->layers[l];
        const tokd_matrix *W3[3] = {&L->wq, &L->wk, &L->wv};
        float *Y3[3] = {b->y0, b->y1, b->y2};
        const int64_t ld3[3] = {qd, kvd, kvd};
        announce(pool, &L->wo, NULL, NULL);
        tokd_matmul_n(pool, 3, W3, b->x, E, 1, Y3, ld3, b->act);
        announce(pool, &L->w_gate, &L->w_up, NULL);
        tokd_matmul(pool, &L->wo, b->x, qd, 1, b->y0, E, b->act);
        announce(pool, &L->w_down, NULL, NULL);
        tokd_matmul_pair(pool, &L->w_gate, &L->w_up, b->x, E, 1, b->y0, b->y1, F, tokd_swiglu_cols, b->act);
        if (l + 1 < hp->n_layer) announce(pool, &m->layers[l + 1].wq, &m->layers[l + 1].wk, &m->layers[l + 1].wv);
        else announce(pool, &m->output, NULL, NULL);
        tokd_matmul(pool, &L->w_down, b->y0, F, 1, b->y2, E, b->act);
    }
    tokd_matmul(pool, &m->output, b->x, E, 1, b->logits, hp->n_vocab, b->act);
}

/* The context holds POS positions (a prompt run once, prefill); each call decodes one token
 * at position POS, tg128's mean, and drops it again. Returns its seconds. */
#define POS 64
static void die(const tokd_err *err) {
    fprintf(stderr, "bench_regions: %s\n", err->msg);
    exit(1);
}
static void fill_context(tokd_ctx *c, float *logits, int32_t vocab) {
    tokd_batch_entry e[POS];
    tokd_err err;
    for (int32_t i = 0; i < POS; i++) e[i] = (tokd_batch_entry){(i * 7919 + 11) % vocab, i, 0, i == POS - 1};
    if (tokd_forward(c, e, POS, logits, &err)) die(&err);
}
static double decode_step(tokd_ctx *c, float *logits, int32_t vocab) {
    tokd_err err;
    tokd_batch_entry e = {.token = 12345 % vocab, .pos = POS, .seq = 0, .logits = true};
    const double t0 = tokd_now();
    if (tokd_forward(c, &e, 1, logits, &err)) die(&err);
    const double dt = tokd_now() - t0;
    tokd_seq_truncate(c, 0, POS);
    return dt;
}

/* One form's real kernel on one thread, decode (one activation row prepared from x),
 * over the first groups of W that fit in CACHED_BYTES, repeated for about 20 ms after a
 * first pass brings them into cache: weight bytes a second. The kernel's prefetches
 * still run ahead past those groups, as they do in a step. */
#define CACHED_BYTES ((size_t)160 << 10)
static double cached_rate(const tokd_matrix *W, const tokd_packed_traits *pk, const float *x, void *act, float *y) {
    const int64_t all = (W->n_out + pk->group_rows - 1) / pk->group_rows;
    int64_t groups = (int64_t)(CACHED_BYTES / W->group_bytes);
    if (groups < 1) groups = 1;
    if (groups > all) groups = all;
    pk->prep(x, act, W->K);
    pk->gemm(W->K, groups, W->packed, W->group_bytes, 1, act, pk->act_bytes(W->K), y, 0);
    long passes = 0;
    const double t0 = tokd_now();
    double t;
    do {
        for (int i = 0; i < 16; i++) pk->gemm(W->K, groups, W->packed, W->group_bytes, 1, act, pk->act_bytes(W->K), y, 0);
        passes += 16;
        t = tokd_now() - t0;
    } while (t < 0.02);
    return (double)passes * (double)groups * (double)W->group_bytes / t;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void print_stat(const char *name, double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    printf("%-13s %.3f  (quartiles %.3f .. %.3f)\n", name, v[n / 2], v[n / 4], v[3 * n / 4]);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_regions MODEL.gguf [ROUNDS]\n");
        return 2;
    }
    const int rounds = argc > 2 ? atoi(argv[2]) : 21;
    if (rounds < 3 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "rounds: 3..%d\n", MAX_ROUNDS);
        return 2;
    }
    tokd_err err;
    tokd_model *m = tokd_model_load(argv[1], &err);
    if (!m) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    if (!tokd_cpu()->avx2) {
        fprintf(stderr, "bench_regions: needs AVX2 (the packed kernels)\n");
        return 1;
    }
    static variants v;
    int unpacked = 0;
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        tokd_layer *L = &m->layers[l];
        tokd_matrix *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int k = 0; k < 7; k++) unpacked |= add_matrix(&v, ws[k]) != 0;
    }
    unpacked |= add_matrix(&v, &m->output) != 0;
    if (unpacked) {
        fprintf(stderr, "bench_regions: every matrix must be packed on this CPU\n");
        return 1;
    }
    tokd_ctx_params cp;
    tokd_ctx_params_default(&cp);
    cp.n_ctx = 128;
    cp.n_batch = POS;
    cp.n_threads = 2;
    tokd_ctx *c = tokd_ctx_new(m, &cp, &err);
    if (!c) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    tokd_pool *pool = tokd_ctx_pool(c);
    const int64_t widest = m->hp.n_ff > m->hp.n_vocab ? m->hp.n_ff : m->hp.n_vocab;
    buffers b = {tokd_xcalloc((size_t)widest, sizeof(float)), tokd_xcalloc((size_t)widest, sizeof(float)),
                 tokd_xcalloc((size_t)widest, sizeof(float)), tokd_xcalloc((size_t)widest, sizeof(float)),
                 tokd_xcalloc((size_t)m->hp.n_vocab, sizeof(float)), NULL};
    size_t act = 0;
    for (int i = 0; i < v.n; i++) {
        size_t a = tokd_matmul_scratch_bytes(v.mat[i]->tt, v.mat[i]->K, 1);
        if (a > act) act = a;
    }
    b.act = tokd_aligned_alloc(act);
    for (int64_t i = 0; i < widest; i++) b.x[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    tokd_bench_reader *rd = tokd_bench_reader_new((size_t)512 << 20);

    const int n_cached = v.n_forms, *form_mat = v.first;
    size_t cached_act = 0;
    for (int f = 0; f < n_cached; f++) {
        const size_t a = v.real[form_mat[f]]->act_bytes(v.mat[form_mat[f]]->K);
        if (a > cached_act) cached_act = a;
    }
    void *cact = tokd_aligned_alloc(cached_act);
    float *cy = tokd_xcalloc(CACHED_BYTES, sizeof(float)); /* more outputs than any fitting groups have */
    static double cached[16][MAX_ROUNDS];

    static double kernel[MAX_ROUNDS], reader[MAX_ROUNDS], ratio[MAX_ROUNDS], step[MAX_ROUNDS], serial[MAX_ROUNDS];
    const double bytes = step_bytes(m);
    products(m, pool, &b); /* warm-up */
    fill_context(c, b.logits, m->hp.n_vocab);
    for (int i = 0; i < 4; i++) decode_step(c, b.logits, m->hp.n_vocab);
    for (int r = 0; r < rounds; r++) {
        double rate[3];
        for (int k = 0; k < 3; k++) {
            const int which = (k + r) % 3; /* the order rotates */
            const double bw = tokd_bench_reader_measure(rd, pool, 3);
            if (which == 2) {
                use(&v, 0);
                rate[2] = bytes / decode_step(c, b.logits, m->hp.n_vocab);
                step[r] = rate[2] / bw;
                continue;
            }
            use(&v, which);
            const double t0 = tokd_now();
            products(m, pool, &b);
            rate[which] = bytes / (tokd_now() - t0);
            (which ? reader : kernel)[r] = rate[which] / bw;
        }
        ratio[r] = rate[0] / rate[1];
        serial[r] = rate[2] / rate[0];
        const double bw = tokd_bench_reader_measure(rd, pool, 3);
        for (int f = 0; f < n_cached; f++) {
            const int i = form_mat[f];
            cached[f][r] = cached_rate(v.mat[i], v.real[i], b.x, cact, cy) * cp.n_threads / bw;
        }
    }
    use(&v, 0);
    printf("%s: one decode step's products, 2 threads, %d rounds (medians of per-round ratios)\n", argv[1], rounds);
    print_stat("kernel/probe", kernel, rounds);
    print_stat("read/probe", reader, rounds);
    print_stat("kernel/read", ratio, rounds);
    print_stat("step/probe", step, rounds);
    print_stat("step/kernel", serial, rounds);
    for (int f = 0; f < n_cached; f++) {
        const tokd_matrix *W = v.mat[form_mat[f]];
        char name[64];
        snprintf(name, sizeof name, "cached %s", W->tt->name);
        printf("%d threads x one thread's rate in L2 over the probe (K %lld):\n", cp.n_threads, (long long)W->K);
        print_stat(name, cached[f], rounds);
    }
    free(cy);
    free(cact);
    tokd_bench_reader_free(rd);
    tokd_ctx_free(c);
    tokd_model_free(m);
    return 0;
}
