/* decode_step.h — a context's state, shared by the forward pass (forward.c) and its
 * one-region decode step (decode_step.c).
 *
 * A decode step of one sequence runs as one parallel region: every thread keeps its own
 * copy of the residual stream, computes the norms and activation preparations itself,
 * and computes its part of every product (K and V by KV head, so that RoPE, the KV
 * write and attention need nothing from the others but Q; every other product's rows,
 * Q's too, claimed and stolen); the threads meet at five barriers a layer instead of
 * handing the activations back and forth through some ten regions.
 * decode_step.c says why and what it measured. */
#ifndef TOKD_DECODE_STEP_H
#define TOKD_DECODE_STEP_H

#include <stdatomic.h>
#include <stdbool.h>

#include "model.h"

/* One thread's arrival at the step's barriers (its own line). */
typedef struct {
    _Alignas(64) _Atomic unsigned epoch; /* the last barrier it reached */
    _Atomic uint64_t arrived;            /* when (TSC), for the profile (the next barrier's may
                                            overwrite it while thread 0 reads: relaxed) */
} tokd_step_flag;

struct tokd_ctx {
    const tokd_model *m;
    tokd_ctx_params p;
    tokd_kv kv;
    tokd_seq_table *seqs;
    tokd_pool *pool;
    /* scratch, n_batch rows each */
    float *x, *xb, *q, *k, *v, *att, *hg, *hu, *rope;
    float *scores; /* attention scratch: scores_per_thread floats per pool thread */
    size_t scores_per_thread;
    void *act;
    int32_t *seq_new;  /* per sequence: entries in the current batch */
    tokd_mm_observer observe; /* NULL but for importance-matrix collection */
    void *observe_ud;
    /* the one-region decode step (decode_step.c) */
    int step_usable;          /* -1 not yet known, 0 no, 1 yes: the model's shapes allow it */
    bool step_on;             /* tokd_ctx_set_decode_region; default on */
    unsigned step_epoch;      /* the last barrier epoch used */
    tokd_step_flag *step_flags; /* one per pool thread */
    void *step_scratch;       /* per pool thread: step_thread_bytes */
    size_t step_thread_bytes;
    void *step_shares;        /* the products' shares, one slot each (decode_step.c) */
    size_t step_slot_bytes;
    void *step_xact;          /* O's or down's prepared row, each thread its columns */
    bool step_x_o, step_x_down; /* whether O's and down's rows are prepared so, every layer */
};

/* The scratch any of the model's matrices needs for n_rows prepared activation rows
 * (tokd_matmul_scratch_bytes; forward.c). */
size_t tokd_act_scratch_bytes(const tokd_model *m, int64_t n_rows);
/* One entry's KV heads [h0, h1) after the Q, K and V products (q, k, v: the entry's
 * rows, its RoPE table rope): their biases, RoPE, and K and V written to the cache at
 * the entry's position (forward.c; each head is independent of the others). */
void tokd_qkv_to_cache(tokd_ctx *c, int32_t layer, const tokd_batch_entry *e, const float *rope, float *q, float *k,
                       float *v, int32_t h0, int32_t h1);
/* Whether tokd_decode_step can run this batch (one entry, several threads, no observer,
 * the model's heads and rows split evenly enough); allocates its scratch on first use. */
bool tokd_decode_step_usable(tokd_ctx *c, int32_t n);
/* The forward pass of one validated entry, its RoPE table in c->rope: as tokd_forward's
 * layer loop and logits, the same bits. */
void tokd_decode_step(tokd_ctx *c, const tokd_batch_entry *e, float *logits);
void tokd_decode_step_free(tokd_ctx *c);

#endif
