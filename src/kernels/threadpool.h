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

#include <stddef.h>

typedef struct tokd_pool tokd_pool;
typedef void (*tokd_pool_fn)(void *ctx, int ith, int nth);

/* n_threads <= 0: number of physical cores. */
tokd_pool *tokd_pool_new(int n_threads);
void tokd_pool_free(tokd_pool *p);
int tokd_pool_size(const tokd_pool *p);
/* p may be NULL: runs fn(ctx, 0, 1) inline. Not reentrant. */
void tokd_pool_run(tokd_pool *p, tokd_pool_fn fn, void *ctx);
/* Memory a thread should pull into its cache while it would otherwise wait. */
typedef struct {
    const void *ptr;
    size_t len;
} tokd_pool_window;
/* Hands win[ith] (len 0: none) to thread ith for the next region tokd_pool_run starts:
 * once the thread has finished its share of that region, it reads the window (every
 * line, once) while it waits, until the region after begins (the caller: until the workers finish
 * the region). Decode uses it to start the next product's weight stream during the
 * serial stages between products. win has tokd_pool_size(p) entries; p may be NULL. */
void tokd_pool_prefetch_after_next(tokd_pool *p, const tokd_pool_window *win);
/* For tests: 1 and thread ith's pending window in *out while windows wait for the next
 * region, else 0. */
int tokd_pool_pending_window(const tokd_pool *p, int ith, tokd_pool_window *out);
/* Physical core count (falls back to online CPUs). */
int tokd_physical_cores(void);

#endif
