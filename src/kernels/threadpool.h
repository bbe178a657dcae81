/* threadpool.h — a fixed pool of worker threads for data-parallel kernels.
 *
 * tokd_pool_run(pool, fn, ctx) runs fn(ctx, ith, nth) on every thread of the pool (the
 * caller is thread 0) and returns when all have finished. Work is split by the callee
 * from (ith, nth), so a kernel decides its own partitioning — always along outputs,
 * never along a reduction, which keeps results independent of the thread count.
 *
 * Workers spin on a generation counter for a short while after each region (a decode
 * step launches ~150 regions back to back, so sleeping between them would cost more
 * than the work) and fall back to a condition variable when idle. */
#ifndef TOKD_THREADPOOL_H
#define TOKD_THREADPOOL_H

typedef struct tokd_pool tokd_pool;
typedef void (*tokd_pool_fn)(void *ctx, int ith, int nth);

/* n_threads <= 0: number of physical cores. */
tokd_pool *tokd_pool_new(int n_threads);
void tokd_pool_free(tokd_pool *p);
int tokd_pool_size(const tokd_pool *p);
/* p may be NULL: runs fn(ctx, 0, 1) inline. Not reentrant. */
void tokd_pool_run(tokd_pool *p, tokd_pool_fn fn, void *ctx);
/* Physical core count (falls back to online CPUs). */
int tokd_physical_cores(void);

#endif
