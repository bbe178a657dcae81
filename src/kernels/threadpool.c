/* threadpool.c — see threadpool.h. */
#include "kernels/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <x86intrin.h>

#include "util.h"

/* Waiting is in three stages, timed with the TSC (constant rate; 2.1 GHz here): spin
 * on plain loads for spin_limit cycles; then sched_yield until SLEEP_CYCLES; then a
 * worker sleeps on the condition variable.
 *
 * spin_limit adapts. On an idle machine regions come microseconds apart and every
 * syscall (sched_yield included) is a VM world switch costing microseconds, so long
 * spinning wins (an empty region ~0.8 us). When other processes hold a core, two pool
 * threads share one, and a spinning thread only delays the one it waits for: there
 * the budget must be short. The caller measures each region's wait: if it had to
 * yield before the workers finished, the budget halves; if they finished while it
 * spun, it grows back. */
#define SPIN_MAX 200000u /* ~95 us */
#define SPIN_MIN 1000u
#define SLEEP_CYCLES 300000000ull /* ~0.1 s */

/* Region g's share ith (ith >= 1) is run by whichever thread claims it first: worker
 * ith when it wakes, or the caller once its own share is done. So a worker that the OS
 * has descheduled (the machine is small and shared) never stalls a region: the caller
 * runs its share. A kernel's share computes the same outputs whoever runs it. */
typedef struct {
    _Alignas(64) _Atomic unsigned claimed; /* last generation whose share was claimed */
    _Atomic unsigned done;                 /* last generation a worker finished */
} slot;

struct tokd_pool {
    int n;
    pthread_t *threads;
    slot *slots;                 /* n entries; 0 unused */
    _Atomic unsigned generation; /* bumped to start a region */
    _Atomic int stop;
    _Atomic int sleepers;
    _Atomic unsigned spin_limit; /* cycles of pure spinning before yielding */
    tokd_pool_fn fn;
    void *ctx;
    /* prefetch windows (tokd_pool_prefetch_after_next): pending until the next region
       starts, then win[] belongs to generation win_gen */
    int has_pending;
    tokd_pool_window *pending, *win;
    unsigned win_gen;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

typedef struct {
    tokd_pool *pool;
    int ith;
} worker_arg;

/* No `pause`: inside VMs pause-loop exiting hands the vCPU back to the host and a
 * spinning region can stall for milliseconds. A plain re-load is enough here. */
static inline void cpu_relax(void) { __asm__ volatile("" ::: "memory"); }

/* One step of an idle thread's window: a few lines, so the thread still notices the
 * next region within a cache miss's time (the loads' results are not waited for: the
 * generation check after them runs out of order).
 *
 * The lines are read with plain loads, not prefetcht0. A core drops software prefetches
 * that find no free miss buffer, and an idle thread issues these far faster than memory
 * answers, so most of a prefetched window never arrived (session 26 saw the same on the
 * Zen 3 host). A load waits for its buffer instead. On the Zen 4 host (2 cores), decode
 * steps alternated in one process between the two (medians of 257 pairs, `tokd bench -p
 * 0 -n 256 -r 2 -t 2`): Q4_0 0.993-0.998 of the step time with prefetches in 7 runs, on
 * cores near each other and far apart, Q4_K_M 0.993-0.997 in 3, where the same harness
 * flipping nothing reads 0.995-1.000: a gain of about 0.3 % (BENCHMARKS.md, fifty-ninth
 * session). On the Zen 3 host loads had measured alike (+0.46, -0.32, +0.05 %). */
#define PREFETCH_LINES_PER_STEP 4
static inline void prefetch_step(const char **ptr, size_t *left) {
    for (int i = 0; i < PREFETCH_LINES_PER_STEP && *left; i++) {
        (void)*(volatile const char *)*ptr;
        size_t step = *left < 64 ? *left : 64;
        *ptr += step;
        *left -= step;
    }
}

/* The window thread ith takes once its share of region g is done (none: len 0). Read
 * before the share is marked done, while the caller cannot be rewriting it. */
static void take_window(const tokd_pool *p, unsigned g, int ith, const char **ptr, size_t *left) {
    *left = 0;
    if (p->win_gen != g) return;
    *ptr = p->win[ith].ptr;
    *left = p->win[ith].ptr ? p->win[ith].len : 0;
}

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    tokd_pool *p = wa->pool;
    int ith = wa->ith;
    free(wa);
    unsigned seen = 0;
    const char *pf = NULL;
    size_t pf_left = 0;
    for (;;) {
        unsigned g;
        unsigned long long t0 = __rdtsc();
        while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen) {
            if (atomic_load_explicit(&p->stop, memory_order_acquire)) return NULL;
            if (pf_left) { /* waiting time starts once the window is done */
                prefetch_step(&pf, &pf_left);
                if (!pf_left) t0 = __rdtsc();
                continue;
            }
            unsigned long long dt = __rdtsc() - t0;
            if (dt < SLEEP_CYCLES) {
                if (dt > atomic_load_explicit(&p->spin_limit, memory_order_relaxed))
                    sched_yield(); /* share an oversubscribed machine */
                else cpu_relax();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            t0 = __rdtsc();
        }
        seen = g;
        pf_left = 0;
        /* claim share ith of region g unless the caller already has; while it is ours the
         * caller waits in region g, so fn and ctx are g's */
        slot *sl = &p->slots[ith];
        unsigned old = atomic_load_explicit(&sl->claimed, memory_order_acquire);
        if ((int)(old - g) < 0 &&
            atomic_compare_exchange_strong_explicit(&sl->claimed, &old, g, memory_order_acq_rel, memory_order_acquire)) {
            p->fn(p->ctx, ith, p->n);
            take_window(p, g, ith, &pf, &pf_left);
            atomic_store_explicit(&sl->done, g, memory_order_release);
        }
    }
}

int tokd_physical_cores(void) {
    /* Count distinct (physical id, core id) pairs in /proc/cpuinfo. */
    FILE *f = fopen("/proc/cpuinfo", "r");
    int cores = 0;
    if (f) {
        char line[256];
        int phys = 0, seen_pairs[1024][2], n_pairs = 0;
        while (fgets(line, sizeof line, f)) {
            int v;
            if (sscanf(line, "physical id : %d", &v) == 1) phys = v;
            if (sscanf(line, "core id : %d", &v) == 1) {
                int dup = 0;
                for (int i = 0; i < n_pairs; i++)
                    if (seen_pairs[i][0] == phys && seen_pairs[i][1] == v) dup = 1;
                if (!dup && n_pairs < 1024) {
                    seen_pairs[n_pairs][0] = phys;
                    seen_pairs[n_pairs][1] = v;
                    n_pairs++;
                }
            }
        }
        fclose(f);
        cores = n_pairs;
    }
    if (cores <= 0) cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 ? cores : 1;
}

tokd_pool *tokd_pool_new(int n_threads) {
    if (n_threads <= 0) n_threads = tokd_physical_cores();
    tokd_pool *p = tokd_xcalloc(1, sizeof *p);
    p->n = n_threads;
    atomic_init(&p->spin_limit, SPIN_MAX);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->threads = tokd_xcalloc((size_t)n_threads, sizeof(pthread_t));
    p->slots = tokd_aligned_alloc((size_t)n_threads * sizeof(slot));
    p->pending = tokd_xcalloc((size_t)n_threads, sizeof *p->pending);
    p->win = tokd_xcalloc((size_t)n_threads, sizeof *p->win);
    for (int i = 0; i < n_threads; i++) {
        atomic_init(&p->slots[i].claimed, 0);
        atomic_init(&p->slots[i].done, 0);
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = tokd_xmalloc(sizeof *wa);
        wa->pool = p;
        wa->ith = i;
        if (pthread_create(&p->threads[i], NULL, worker_main, wa) != 0) {
            free(wa);
            p->n = i; /* run with the threads we got */
            break;
        }
    }
    return p;
}

int tokd_pool_size(const tokd_pool *p) { return p ? p->n : 1; }

void tokd_pool_prefetch_after_next(tokd_pool *p, const tokd_pool_window *win) {
    if (!p || p->n == 1) return;
    memcpy(p->pending, win, (size_t)p->n * sizeof *win);
    p->has_pending = 1;
}

int tokd_pool_pending_window(const tokd_pool *p, int ith, tokd_pool_window *out) {
    if (!p || !p->has_pending || ith < 0 || ith >= p->n) return 0;
    *out = p->pending[ith];
    return 1;
}

void tokd_pool_run(tokd_pool *p, tokd_pool_fn fn, void *ctx) {
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    unsigned g = atomic_load_explicit(&p->generation, memory_order_relaxed) + 1;
    if (p->has_pending) {
        memcpy(p->win, p->pending, (size_t)p->n * sizeof *p->win);
        p->win_gen = g;
        p->has_pending = 0;
    }
    atomic_fetch_add(&p->generation, 1);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    fn(ctx, 0, p->n);
    const char *pf;
    size_t pf_left;
    take_window(p, g, 0, &pf, &pf_left);
    unsigned limit = atomic_load_explicit(&p->spin_limit, memory_order_relaxed);
    int yielded = 0;
    for (int i = 1; i < p->n; i++) {
        slot *sl = &p->slots[i];
        unsigned old = atomic_load_explicit(&sl->claimed, memory_order_acquire);
        if (old != g &&
            atomic_compare_exchange_strong_explicit(&sl->claimed, &old, g, memory_order_acq_rel, memory_order_acquire)) {
            fn(ctx, i, p->n); /* worker i has not started: run its share here */
            continue;
        }
        unsigned long long t0 = __rdtsc();
        while (atomic_load_explicit(&sl->done, memory_order_acquire) != g) {
            if (pf_left) { /* waiting time starts once the window is done */
                prefetch_step(&pf, &pf_left);
                if (!pf_left) t0 = __rdtsc();
                continue;
            }
            if (__rdtsc() - t0 > limit) {
                sched_yield(); /* a worker may be waiting for this core */
                yielded = 1;
            } else {
                cpu_relax();
            }
        }
    }
    if (yielded) limit = limit / 2 > SPIN_MIN ? limit / 2 : SPIN_MIN;
    else limit = limit + limit / 16 + 16 < SPIN_MAX ? limit + limit / 16 + 16 : SPIN_MAX;
    atomic_store_explicit(&p->spin_limit, limit, memory_order_relaxed);
}

void tokd_pool_free(tokd_pool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->threads);
    free(p->slots);
    free(p->pending);
    free(p->win);
    free(p);
}
