/* page_prime.h — priming the hardware prefetcher at page boundaries of a stream.
 *
 * Shared by the decode kernels (packed_avx512.c, packed_avx2_gemm.h) and by the read
 * probe in bench.c, which must read the way the kernels do to measure the machine's
 * read rate rather than a plain loop's (BENCHMARKS.md, eleventh session). */
#ifndef TOKD_KERNELS_PAGE_PRIME_H
#define TOKD_KERNELS_PAGE_PRIME_H

#include <stddef.h>
#include <stdint.h>

/* Decode's page priming. Decode streams each weight byte once at a few instructions per
 * byte, and the hardware prefetcher alone held the Q4_0 kernels to ~80 % of the
 * machine's read rate: it does not cross 4 KB pages, so every page began with demand
 * misses. A kernel calls this once per step of `step` bytes (< 4 KB) of its stream at
 * p: when the window TOKD_PRIME_DIST bytes ahead enters a new page, that page's first
 * lines are prefetched, which starts the hardware prefetcher there before the loads
 * arrive (a prefetch never faults, so priming past a matrix's end is harmless). Measured on
 * the TinyLlama matrices (BENCHMARKS.md, seventh session): Q4_0 decode products 78 ->
 * 95 % of the read probe; prefetching every line ahead instead (what prefill does) was
 * slower than nothing for Q4_0 decode. Some kernels prefetch every line as well as
 * priming (packed_avx512.c says which, and why). */
#ifndef TOKD_PRIME_DIST
#define TOKD_PRIME_DIST 4096
#endif
#ifndef TOKD_PRIME_LINES
#define TOKD_PRIME_LINES 2
#endif
static inline __attribute__((always_inline)) void tokd_page_prime(const void *p, size_t step) {
    const uintptr_t a = (uintptr_t)p + TOKD_PRIME_DIST, b = a + step;
    if ((a ^ b) >> 12) {
        const char *page = (const char *)(b & ~(uintptr_t)4095);
        for (int l = 0; l < TOKD_PRIME_LINES; l++) __builtin_prefetch(page + 64 * l, 0, 3);
    }
}

#endif
