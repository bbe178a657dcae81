/* step_profile.h — where a decode step's time goes, stage by stage and thread by thread.
 *
 * `tokd bench --profile N` turns it on for N decode steps after its timed runs and prints
 * what it counted; the engine never turns it on. For each stage of the forward pass the
 * caller's time; for each decode product (the regions of matmul.c with fewer than 4
 * activation rows) the activation preparation before the region, how far apart the threads
 * finish it ("tail"), and each thread's time and weight bytes inside its share, from which
 * its read rate follows. Those per-thread rates are what showed that the two threads of
 * this project's 2-core host read 10-15 % apart in their shares though not in the read
 * probe (BENCHMARKS.md, thirty-second session); earlier sessions had counted the same
 * things with patches kept outside the repository, which drifted from the code.
 *
 * Off, each hook is a load and a branch not taken, a few hundred a step, so the hooks
 * stay compiled in. Times are TSC cycles (constant rate on the x86-64 CPUs tokd runs on;
 * threadpool.c waits on the same counter); the reader converts them with the rate it
 * measures beside them. The counters are one set for the process: profile one context at
 * a time, and only between steps turn it on or off or read it. */
#ifndef TOKD_KERNELS_STEP_PROFILE_H
#define TOKD_KERNELS_STEP_PROFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <x86intrin.h>

#define TOKD_PROFILE_MAX_THREADS 16 /* threads past this many are not counted */

typedef enum {
    TOKD_STAGE_OTHER,     /* embedding, norms, adds, RoPE and the KV write, windows */
    TOKD_STAGE_QKV,       /* Q, K and V products */
    TOKD_STAGE_ATTENTION, /* attention over the cache */
    TOKD_STAGE_O,         /* output projection */
    TOKD_STAGE_FFN_UP,    /* gate and up products, and SwiGLU */
    TOKD_STAGE_FFN_DOWN,  /* down product */
    TOKD_STAGE_LOGITS,    /* the output matrix */
    TOKD_STAGE_COUNT
} tokd_stage;

typedef struct {
    uint64_t stage_cycles[TOKD_STAGE_COUNT]; /* the caller's time in each stage */
    /* decode products, by stage */
    uint64_t regions[TOKD_STAGE_COUNT];
    uint64_t prep_cycles[TOKD_STAGE_COUNT]; /* activation rows prepared by the caller */
    uint64_t tail_cycles[TOKD_STAGE_COUNT]; /* last thread's finish minus the first's */
    uint64_t tails[TOKD_STAGE_COUNT];       /* the spreads in tail_cycles (regions, or a decode
                                               step's barriers: attention's too) */
    uint64_t share_cycles[TOKD_PROFILE_MAX_THREADS][TOKD_STAGE_COUNT];
    uint64_t share_bytes[TOKD_PROFILE_MAX_THREADS][TOKD_STAGE_COUNT]; /* weight bytes read */
    uint64_t steps; /* forward passes counted */
} tokd_step_profile;

/* The state the hooks below read and write. */
extern bool tokd_profile_on;
extern tokd_stage tokd_profile_stage;
extern uint64_t tokd_profile_mark_at;
extern tokd_step_profile tokd_profile;

/* Zeroes the counters and turns counting on (or off). */
void tokd_profile_start(bool on);
/* Turns counting off and keeps the counters. */
void tokd_profile_stop(void);
const char *tokd_stage_name(tokd_stage s);

static inline uint64_t tokd_profile_now(void) { return tokd_profile_on ? __rdtsc() : 0; }

/* The caller enters stage `next`: the time since the last mark goes to the stage it left. */
static inline void tokd_profile_enter(tokd_stage next) {
    if (!tokd_profile_on) return;
    const uint64_t t = __rdtsc();
    if (tokd_profile_mark_at) tokd_profile.stage_cycles[tokd_profile_stage] += t - tokd_profile_mark_at;
    tokd_profile_mark_at = t;
    tokd_profile_stage = next;
}
/* A forward pass starts (in stage OTHER) or ends: the time between passes is not counted. */
static inline void tokd_profile_begin_pass(void) {
    if (!tokd_profile_on) return;
    tokd_profile_mark_at = __rdtsc();
    tokd_profile_stage = TOKD_STAGE_OTHER;
}
static inline void tokd_profile_end_pass(void) {
    if (!tokd_profile_on) return;
    tokd_profile_enter(TOKD_STAGE_OTHER);
    tokd_profile_mark_at = 0;
    tokd_profile.steps++;
}

#endif
