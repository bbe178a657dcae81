/* bench_batch.c — batched decode: the time of one decode step that carries B sequences
 * at once (one new token each, as the server's continuous batching runs them), for B
 * from 1 to 32, against the one-sequence step. With weights read once per step, a step
 * of a few sequences should cost little more than one sequence's (decode is bound by
 * memory), until the arithmetic of B rows takes over (prefill's rate).
 *
 *   build:  make bench
 *   run:    build/bench/bench_batch MODEL.gguf [STEPS [THREADS]]   (default 16 steps, 2 threads)
 *
 * Each sequence first holds a 64-token prompt; each B then runs STEPS steps from there
 * (sequences cut back to 64 after), and the B values are visited in rounds, three times,
 * so that the host's slow minutes fall on all of them alike. Prints, per B, the median
 * step time over all its steps, the aggregate tokens/s, and the step time over the
 * one-sequence step's; then prefill of 512 tokens for the arithmetic-bound rate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokd.h"
#include "util.h"

#define N_PROMPT 64
#define ROUNDS 3

static const int32_t batch_sizes[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};
#define N_SIZES ((int)(sizeof batch_sizes / sizeof batch_sizes[0]))
#define MAX_SEQ 32

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_batch MODEL.gguf [STEPS [THREADS]]\n");
        return 2;
    }
    const int steps = argc > 2 ? atoi(argv[2]) : 16, threads = argc > 3 ? atoi(argv[3]) : 2;
    if (steps < 1 || threads < 1) {
        fprintf(stderr, "bench_batch: STEPS and THREADS must be positive\n");
        return 2;
    }
    tokd_err err;
    tokd_model *m = tokd_model_load(argv[1], &err);
    if (!m) {
        fprintf(stderr, "bench_batch: %s\n", err.msg);
        return 1;
    }
    tokd_model_info mi;
    tokd_model_get_info(m, &mi);
    const int32_t V = mi.n_vocab;
    tokd_ctx_params cp;
    tokd_ctx_params_default(&cp);
    cp.n_ctx = N_PROMPT + steps > 512 ? N_PROMPT + steps : 512;
    cp.n_seq = MAX_SEQ;
    cp.block_size = 16;
    cp.n_blocks = MAX_SEQ * ((N_PROMPT + steps + 15) / 16 + 1) + 512 / 16; /* what is used, not 32 full contexts */
    cp.n_threads = threads;
    tokd_ctx *c = tokd_ctx_new(m, &cp, &err);
    if (!c) {
        fprintf(stderr, "bench_batch: %s\n", err.msg);
        return 1;
    }
    tokd_batch_entry *e = tokd_xcalloc(512, sizeof *e);
    float *logits = tokd_xmalloc(sizeof(float) * (size_t)V * MAX_SEQ);
    double *t = tokd_xmalloc(sizeof(double) * (size_t)(N_SIZES * ROUNDS * steps));
    int rc = 0;
    for (int32_t s = 0; s < MAX_SEQ && !rc; s++) {
        for (int32_t i = 0; i < N_PROMPT; i++) e[i] = (tokd_batch_entry){(i * 13 + s * 7 + 3) % V, i, s, i == N_PROMPT - 1};
        rc = tokd_forward(c, e, N_PROMPT, logits, &err);
    }
    for (int round = 0; round < ROUNDS && !rc; round++)
        for (int bi = 0; bi < N_SIZES && !rc; bi++) {
            const int32_t B = batch_sizes[bi];
            for (int st = 0; st < steps && !rc; st++) {
                for (int32_t s = 0; s < B; s++) {
                    const int32_t pos = tokd_seq_len(c, s);
                    e[s] = (tokd_batch_entry){(pos * 31 + s) % V, pos, s, true};
                }
                const double t0 = tokd_now();
                rc = tokd_forward(c, e, B, logits, &err);
                t[(bi * ROUNDS + round) * steps + st] = tokd_now() - t0;
            }
            for (int32_t s = 0; s < B; s++) tokd_seq_truncate(c, s, N_PROMPT);
        }
    if (rc) {
        fprintf(stderr, "bench_batch: %s\n", err.msg);
        return 1;
    }
    printf("%s, %d threads, %d steps x %d rounds per batch size, prompts of %d tokens\n", argv[1], threads, steps,
           ROUNDS, N_PROMPT);
    printf("%9s %12s %12s %14s\n", "sequences", "step ms", "tokens/s", "step / 1 seq");
    double one = 0;
    for (int bi = 0; bi < N_SIZES; bi++) {
        double *ts = t + bi * ROUNDS * steps;
        qsort(ts, (size_t)(ROUNDS * steps), sizeof *ts, cmp);
        const int n = ROUNDS * steps;
        const double med = n % 2 ? ts[n / 2] : 0.5 * (ts[n / 2 - 1] + ts[n / 2]);
        if (bi == 0) one = med;
        printf("%9d %12.2f %12.1f %14.2f\n", batch_sizes[bi], 1e3 * med, batch_sizes[bi] / med, med / one);
    }
    /* prefill: one sequence of 512 tokens, the arithmetic-bound rate */
    tokd_seq_truncate(c, 0, 0);
    double best = 1e30;
    for (int r = 0; r < ROUNDS && !rc; r++) {
        for (int32_t i = 0; i < 512; i++) e[i] = (tokd_batch_entry){(i * 37 + 11) % V, i, 0, i == 511};
        const double t0 = tokd_now();
        rc = tokd_forward(c, e, 512, logits, &err);
        const double dt = tokd_now() - t0;
        if (dt < best) best = dt;
        tokd_seq_truncate(c, 0, 0);
    }
    if (!rc) printf("prefill of 512 tokens: %.1f tokens/s (best of %d)\n", 512 / best, ROUNDS);
    free(t);
    free(logits);
    free(e);
    tokd_ctx_free(c);
    tokd_model_free(m);
    return rc ? 1 : 0;
}
