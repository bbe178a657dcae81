/* bench_pool.c — cost of an empty parallel region of the thread pool
 * (src/kernels/threadpool.h): tokd_pool_run with a function that does nothing, timed
 * one region at a time, many times back to back as a decode step does (~150 regions).
 * Prints the median, p90, p99 and max in microseconds; issue 3 asks <= 5 us median.
 *
 *   build:  make bench            (or: make build/libtokd.a && cc -std=c17 -O2
 *              -D_GNU_SOURCE -Iinclude -Isrc bench/bench_pool.c build/libtokd.a -lm -lpthread)
 *   run:    build/bench/bench_pool [THREADS [REGIONS]]     (default 2 threads, 200000)
 *
 * The machine is shared and small: when other processes hold the cores, a region waits
 * for a descheduled worker and the tail grows; read the median. */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/threadpool.h"
#include "util.h"

static void empty(void *ctx, int ith, int nth) {
    (void)ctx;
    (void)ith;
    (void)nth;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    long n = argc > 2 ? atol(argv[2]) : 200000;
    if (threads < 1 || n < 100) {
        fprintf(stderr, "usage: bench_pool [THREADS>=1 [REGIONS>=100]]\n");
        return 2;
    }
    tokd_pool *pool = tokd_pool_new(threads);
    double *t = malloc((size_t)n * sizeof *t);
    if (!t) return 1;
    for (int i = 0; i < 10000; i++) tokd_pool_run(pool, empty, NULL); /* warm-up */
    double start = tokd_now();
    for (long i = 0; i < n; i++) {
        double t0 = tokd_now();
        tokd_pool_run(pool, empty, NULL);
        t[i] = (tokd_now() - t0) * 1e6;
    }
    double total = tokd_now() - start;
    qsort(t, (size_t)n, sizeof *t, cmp);
    double med = t[n / 2];
    printf("empty parallel region, %d threads, %ld regions: median %.2f us, p90 %.2f us, p99 %.2f us, max %.1f us "
           "(%.2f us per region overall)\n",
           tokd_pool_size(pool), n, med, t[n * 90 / 100], t[n * 99 / 100], t[n - 1], total / n * 1e6);
    printf("issue 3 target: median <= 5 us: %s\n", med <= 5.0 ? "met" : "NOT met");
    free(t);
    tokd_pool_free(pool);
    return 0;
}
