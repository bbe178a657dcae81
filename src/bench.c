/* bench.c — see bench.h. */
#include "bench.h"

#include <immintrin.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/bf16_rows.h"
#include "kernels/packed.h" /* the probe's Q8_0 form, the decode line distances, page_prime.h */
#include "model.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void tokd_bench_stat_of(tokd_bench_stat *s, const double *v, int n) {
    if (n > TOKD_BENCH_MAX_REPS) n = TOKD_BENCH_MAX_REPS;
    s->n = n;
    memcpy(s->samples, v, (size_t)n * sizeof *v);
    double sorted[TOKD_BENCH_MAX_REPS];
    memcpy(sorted, v, (size_t)n * sizeof *v);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
    s->min = sorted[0];
    s->max = sorted[n - 1];
    s->median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

/* ---- memory read bandwidth ------------------------------------------------------------ *
 * The limit tg is held to is the fastest rate at which a core can read memory, so the
 * probe reads the way the fastest reader does: wide loads, and each page's first lines
 * prefetched a page ahead (tokd_page_prime, as the decode kernels do), because the
 * hardware prefetcher stops at every 4 KB page. A plain read loop, without the priming,
 * read 27-31 GB/s on this machine in the minutes the primed one read 42-46 (2 threads,
 * alternated pass by pass, BENCHMARKS.md eleventh session): against it, kernels that
 * prime their pages showed shares above 100 %. On CPUs without AVX-512 (the AVX2 probe)
 * the decode kernels also prefetch every line 4 KB ahead (packed.h,
 * TOKD_PK_AVX2_DECODE_LINE_PF), and so does the probe: on an AVX2-only Zen 3, alternated
 * pass by pass (medians of 11), 30.0-31.7 GB/s with the lines against 26.5-28.0 without,
 * 27.5-27.8 with them 3 or 6 KB ahead (BENCHMARKS.md, twenty-first session). The AVX-512
 * probe prefetches every line too, as the AVX-512 Q4_0 decode does: 6 KB ahead with
 * prefetchnta (packed.h, TOKD_PK_DECODE_LINE_PF). On the Zen 5 host that read 1-5 % more
 * than the loop without, alternated pass by pass (medians of 11, five runs, 69-90 GB/s;
 * BENCHMARKS.md, thirtieth session).
 *
 * No read loop is known to be the fastest reader on every machine: on that Zen 3 the
 * Q8_0 decode kernel, arithmetic and all, read 1.03-1.13x what the loop read beside it
 * (bench_regions' kernel/probe; tg shares of 106-109 %). So each pass of the probe
 * also runs the Q8_0 decode kernel of the path in use (packed.h) over the same buffer,
 * as 16-row groups of 2048 weights, and the probe reports whichever of the two forms'
 * medians is higher: the limit is the fastest read tokd has seen, never one its own
 * kernels beat. */

/* Every thread's reads end here, so the compiler cannot drop them; atomic because the
 * probe's threads mix into it at once (a plain shared variable was a data race). */
static _Atomic uint64_t bench_sink;
static void sink_mix(uint64_t v) { atomic_fetch_xor_explicit(&bench_sink, v, memory_order_relaxed); }

__attribute__((target("avx512f"))) static uint64_t read_avx512(const uint8_t *p, size_t n) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 256 <= n; i += 256) {
        tokd_page_prime(p + i, 256);
        for (int l = 0; l < 4; l++) _mm_prefetch((const char *)p + i + TOKD_PK_DECODE_LINE_PF + 64 * l, _MM_HINT_NTA);
        a0 = _mm512_xor_si512(a0, _mm512_loadu_si512((const void *)(p + i)));
        a1 = _mm512_xor_si512(a1, _mm512_loadu_si512((const void *)(p + i + 64)));
        a2 = _mm512_xor_si512(a2, _mm512_loadu_si512((const void *)(p + i + 128)));
        a3 = _mm512_xor_si512(a3, _mm512_loadu_si512((const void *)(p + i + 192)));
    }
    for (; i + 64 <= n; i += 64) a0 = _mm512_xor_si512(a0, _mm512_loadu_si512((const void *)(p + i)));
    a0 = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
    return (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(a0)); /* one lane: no scalar overflow */
}

__attribute__((target("avx2"))) static uint64_t read_avx2(const uint8_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        tokd_page_prime(p + i, 128);
        _mm_prefetch((const char *)p + i + TOKD_PK_AVX2_DECODE_LINE_PF, _MM_HINT_T0);
        _mm_prefetch((const char *)p + i + TOKD_PK_AVX2_DECODE_LINE_PF + 64, _MM_HINT_T0);
        a0 = _mm256_xor_si256(a0, _mm256_loadu_si256((const __m256i *)(p + i)));
        a1 = _mm256_xor_si256(a1, _mm256_loadu_si256((const __m256i *)(p + i + 32)));
        a2 = _mm256_xor_si256(a2, _mm256_loadu_si256((const __m256i *)(p + i + 64)));
        a3 = _mm256_xor_si256(a3, _mm256_loadu_si256((const __m256i *)(p + i + 96)));
    }
    for (; i + 32 <= n; i += 32) a0 = _mm256_xor_si256(a0, _mm256_loadu_si256((const __m256i *)(p + i)));
    a0 = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    return (uint64_t)_mm256_extract_epi64(a0, 0) ^ (uint64_t)_mm256_extract_epi64(a0, 3);
}

static uint64_t read_scalar(const uint8_t *p, size_t n) {
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t i = 0; i + 32 <= n; i += 32) {
        tokd_page_prime(p + i, 32);
        uint64_t w[4];
        memcpy(w, p + i, 32);
        a0 ^= w[0];
        a1 ^= w[1];
        a2 ^= w[2];
        a3 ^= w[3];
    }
    return a0 ^ a1 ^ a2 ^ a3;
}

uint64_t tokd_bench_read_bytes(const void *p, size_t n) {
    const tokd_cpu_features *cpu = tokd_cpu();
    return cpu->avx512f ? read_avx512(p, n) : cpu->avx2 ? read_avx2(p, n) : read_scalar(p, n);
}

typedef struct {
    const uint8_t *buf;
    size_t bytes;
    int form; /* 0: the read loop, 1: the Q8_0 decode kernel */
    const tokd_packed_traits *q8; /* NULL: no packed Q8_0 form on this CPU */
    void *q8_act;                 /* one prepared activation row */
    float *q8_out;                /* the kernel's outputs, rows of all threads */
} read_job;

#define PROBE_K 2048 /* the Q8_0 form's row length */

static void read_slice(void *arg, int ith, int nth) {
    read_job *j = arg;
    size_t per = (j->bytes / (size_t)nth) & ~(size_t)255;
    const uint8_t *p = j->buf + per * (size_t)ith;
    if (j->form == 1) {
        const size_t gb = j->q8->group_bytes(PROBE_K);
        const int64_t n_groups = (int64_t)(per / gb);
        j->q8->gemm(PROBE_K, n_groups, p, gb, 1, j->q8_act, 0, j->q8_out + (size_t)ith * (size_t)n_groups * (size_t)j->q8->group_rows, 0);
        return;
    }
    sink_mix(tokd_bench_read_bytes(p, per));
}

struct tokd_bench_reader {
    read_job job;
};

tokd_bench_reader *tokd_bench_reader_new(size_t bytes) {
    tokd_bench_reader *rd = tokd_xcalloc(1, sizeof *rd);
    rd->job.bytes = bytes & ~(size_t)4095;
    uint8_t *buf = tokd_xhuge_alloc(rd->job.bytes); /* the weights' kind of memory */
    for (size_t i = 0; i < rd->job.bytes; i += 64) buf[i] = (uint8_t)i; /* fault every page in */
    memset(buf, 1, rd->job.bytes);
    rd->job.buf = buf;
    rd->job.q8 = tokd_packed_get(GGML_TYPE_Q8_0);
    if (rd->job.q8) {
        float x[PROBE_K];
        for (int i = 0; i < PROBE_K; i++) x[i] = (float)(i % 7) - 3.0f;
        rd->job.q8_act = tokd_aligned_alloc(rd->job.q8->act_bytes(PROBE_K));
        rd->job.q8->prep(x, rd->job.q8_act, PROBE_K);
        rd->job.q8_out = tokd_xmalloc((rd->job.bytes / rd->job.q8->group_bytes(PROBE_K) + 1) * (size_t)rd->job.q8->group_rows * sizeof(float));
    }
    return rd;
}

/* Per-pass rates (bytes/s) of each form, gathered pass by pass. */
typedef struct {
    double v[2][TOKD_BENCH_MAX_REPS];
    int n;
} probe_samples;

/* One timed pass of each form, appended to s (up to TOKD_BENCH_MAX_REPS passes). The
 * forms alternate, so the host's drift hits both. */
static void reader_sample(tokd_bench_reader *rd, tokd_pool *pool, probe_samples *s) {
    if (s->n >= TOKD_BENCH_MAX_REPS) return;
    const int nth = tokd_pool_size(pool);
    const size_t share = (rd->job.bytes / (size_t)nth) & ~(size_t)255;
    for (int f = 0; f < (rd->job.q8 ? 2 : 1); f++) {
        rd->job.form = f;
        size_t bytes = share * (size_t)nth;
        if (f == 1) { /* whole groups of each thread's share */
            const size_t gb = rd->job.q8->group_bytes(PROBE_K);
            bytes = share / gb * gb * (size_t)nth;
        }
        const double t0 = tokd_now();
        tokd_pool_run(pool, read_slice, &rd->job);
        s->v[f][s->n] = (double)bytes / (tokd_now() - t0);
    }
    s->n++;
}

/* One untimed pass of the read loop: the first pass after other work reads slower than
 * the next (~10 % between tg's steps in a slow minute), so every measurement starts with
 * one. */
static void reader_warm(tokd_bench_reader *rd, tokd_pool *pool) {
    rd->job.form = 0;
    tokd_pool_run(pool, read_slice, &rd->job);
}

/* The probe's figure: the higher of the forms' medians (the comment above says why). */
static double probe_best(const tokd_bench_reader *rd, const probe_samples *s) {
    double best = 0;
    for (int f = 0; f < (rd->job.q8 ? 2 : 1) && s->n > 0; f++) {
        tokd_bench_stat st;
        tokd_bench_stat_of(&st, s->v[f], s->n);
        if (st.median > best) best = st.median;
    }
    return best;
}

double tokd_bench_reader_measure(tokd_bench_reader *rd, tokd_pool *pool, int passes) {
    reader_warm(rd, pool);
    probe_samples s = {.n = 0};
    for (int i = 0; i < (passes < 1 ? 1 : passes); i++) reader_sample(rd, pool, &s);
    return probe_best(rd, &s);
}

void tokd_bench_reader_free(tokd_bench_reader *rd) {
    if (!rd) return;
    tokd_huge_free((void *)rd->job.buf, rd->job.bytes);
    free(rd->job.q8_act);
    free(rd->job.q8_out);
    free(rd);
}

double tokd_bench_read_bandwidth(tokd_pool *pool, size_t bytes, int passes) {
    tokd_bench_reader *rd = tokd_bench_reader_new(bytes);
    double bw = tokd_bench_reader_measure(rd, pool, passes);
    tokd_bench_reader_free(rd);
    return bw;
}

/* ---- arithmetic peak -------------------------------------------------------------------- *
 * 12 independent accumulator chains hide the instruction latency; the empty asm
 * statement makes the inputs opaque so the compiler cannot fold the loop. */

#define PEAK_ITERS 4000000

/* Twelve named accumulators (an array would live in memory at -O2), made opaque to the
 * compiler so that it cannot merge the identical chains. */
#define PEAK_BODY(VT, ZERO, OP, ADD, REDUCE, MACS_PER_OP)                                   \
    VT c0 = ZERO, c1 = ZERO, c2 = ZERO, c3 = ZERO, c4 = ZERO, c5 = ZERO, c6 = ZERO, c7 = ZERO, \
       c8 = ZERO, c9 = ZERO, c10 = ZERO, c11 = ZERO;                                        \
    __asm__ volatile("" : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5), "+v"(c6), \
                     "+v"(c7), "+v"(c8), "+v"(c9), "+v"(c10), "+v"(c11));                     \
    for (int i = 0; i < PEAK_ITERS; i++) {                                                   \
        __asm__ volatile("" : "+v"(a), "+v"(b));                                             \
        c0 = OP(c0); c1 = OP(c1); c2 = OP(c2); c3 = OP(c3); c4 = OP(c4); c5 = OP(c5);          \
        c6 = OP(c6); c7 = OP(c7); c8 = OP(c8); c9 = OP(c9); c10 = OP(c10); c11 = OP(c11);      \
    }                                                                                        \
    c0 = ADD(ADD(ADD(c0, c1), ADD(c2, c3)), ADD(ADD(c4, c5), ADD(c6, c7)));                  \
    c0 = ADD(c0, ADD(ADD(c8, c9), ADD(c10, c11)));                                           \
    sink_mix((uint64_t)REDUCE(c0));                                                          \
    return (uint64_t)PEAK_ITERS * 12 * (MACS_PER_OP)

__attribute__((target("avx512f,avx512bw,avx512vnni"))) static uint64_t peak_vnni512(void) {
    __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(2);
#define OP(c) _mm512_dpbusd_epi32(c, a, b)
#define RED(c) _mm_cvtsi128_si32(_mm512_castsi512_si128(c)) /* one lane: no scalar overflow */
    PEAK_BODY(__m512i, _mm512_setzero_si512(), OP, _mm512_add_epi32, RED, 64);
#undef OP
#undef RED
}

__attribute__((target("avx2,avxvnni"))) static uint64_t peak_avxvnni(void) {
    __m256i a = _mm256_set1_epi8(1), b = _mm256_set1_epi8(2);
#define OP(c) _mm256_dpbusd_avx_epi32(c, a, b)
#define RED(c) _mm256_extract_epi32(c, 0)
    PEAK_BODY(__m256i, _mm256_setzero_si256(), OP, _mm256_add_epi32, RED, 32);
#undef OP
#undef RED
}

/* vpmaddubsw's own rate (32 u8 x s8 products, summed in pairs into int16 lanes), from two
 * constant registers into twelve, so that nothing but the multiply port bounds it. It is
 * asm because the intrinsic form (twelve chains c = c + vpmaddubsw(a, c)) needs fifteen
 * registers with its temporary, and GCC 12 spilled them (27 stack references in the
 * loop): on an AVX2-only Zen 3 it reported 121-164 G MAC/s for two cores, while this
 * loop reads ~1.5-2 instructions a cycle a core, 290-370 G MAC/s (twenty-third session). */
__attribute__((target("avx2"))) static uint64_t peak_avx2_int8(void) {
    __m256i a = _mm256_set1_epi8(1), b = _mm256_set1_epi8(2), c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11;
    for (int i = 0; i < PEAK_ITERS; i++)
        __asm__ volatile("vpmaddubsw %[b], %[a], %[c0]\n\tvpmaddubsw %[b], %[a], %[c1]\n\t"
                         "vpmaddubsw %[b], %[a], %[c2]\n\tvpmaddubsw %[b], %[a], %[c3]\n\t"
                         "vpmaddubsw %[b], %[a], %[c4]\n\tvpmaddubsw %[b], %[a], %[c5]\n\t"
                         "vpmaddubsw %[b], %[a], %[c6]\n\tvpmaddubsw %[b], %[a], %[c7]\n\t"
                         "vpmaddubsw %[b], %[a], %[c8]\n\tvpmaddubsw %[b], %[a], %[c9]\n\t"
                         "vpmaddubsw %[b], %[a], %[c10]\n\tvpmaddubsw %[b], %[a], %[c11]"
                         : [c0] "=&x"(c0), [c1] "=&x"(c1), [c2] "=&x"(c2), [c3] "=&x"(c3), [c4] "=&x"(c4),
                           [c5] "=&x"(c5), [c6] "=&x"(c6), [c7] "=&x"(c7), [c8] "=&x"(c8), [c9] "=&x"(c9),
                           [c10] "=&x"(c10), [c11] "=&x"(c11)
                         : [a] "x"(a), [b] "x"(b));
    const __m256i s = _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(c0, c1), _mm256_add_epi16(c2, c3)),
                                       _mm256_add_epi16(_mm256_add_epi16(c4, c5), _mm256_add_epi16(c6, c7)));
    sink_mix((uint64_t)_mm256_extract_epi16(_mm256_add_epi16(s, _mm256_add_epi16(_mm256_add_epi16(c8, c9), _mm256_add_epi16(c10, c11))), 0));
    return (uint64_t)PEAK_ITERS * 12 * 32;
}

__attribute__((target("avx512f"))) static uint64_t peak_fma512(void) {
    __m512 a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(1e-9f);
#define OP(c) _mm512_fmadd_ps(a, b, c)
    PEAK_BODY(__m512, _mm512_setzero_ps(), OP, _mm512_add_ps, _mm512_reduce_add_ps, 16);
#undef OP
}

/* BF16 products with AVX512-BF16 (the BF16 rows' prefill, bf16_rows.c): 32 a vdpbf16ps */
__attribute__((target("avx512f,avx512bf16"))) static uint64_t peak_bf16_512(void) {
    __m512 a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(1e-9f);
#define OP(c) _mm512_dpbf16_ps(c, (__m512bh)_mm512_castps_si512(a), (__m512bh)_mm512_castps_si512(b))
    PEAK_BODY(__m512, _mm512_setzero_ps(), OP, _mm512_add_ps, _mm512_reduce_add_ps, 32);
#undef OP
}
__attribute__((target("avx2,fma"))) static uint64_t peak_fma256(void) {
    __m256 a = _mm256_set1_ps(1.0f), b = _mm256_set1_ps(1e-9f);
#define OP(c) _mm256_fmadd_ps(a, b, c)
    PEAK_BODY(__m256, _mm256_setzero_ps(), OP, _mm256_add_ps, _mm256_cvtss_f32, 8);
#undef OP
}

typedef struct {
    uint64_t (*fn)(void);
    _Atomic uint64_t macs;
} peak_job;

static void peak_run(void *arg, int ith, int nth) {
    peak_job *j = arg;
    j->macs += j->fn();
}

static double run_peak(tokd_pool *pool, uint64_t (*fn)(void)) {
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        peak_job j = {fn, 0};
        double t0 = tokd_now();
        tokd_pool_run(pool, peak_run, &j);
        double rate = (double)j.macs / (tokd_now() - t0);
        if (rate > best) best = rate;
    }
    return best;
}

double tokd_bench_peak_int8(tokd_pool *pool, const char **isa) {
    const tokd_cpu_features *c = tokd_cpu();
    if (c->avx512f && c->avx512bw && c->avx512vnni) {
        *isa = "avx512-vnni vpdpbusd";
        return run_peak(pool, peak_vnni512);
    }
    if (c->avx2 && c->avxvnni) {
        *isa = "avx-vnni vpdpbusd";
        return run_peak(pool, peak_avxvnni);
    }
    if (c->avx2) {
        *isa = "avx2 vpmaddubsw";
        return run_peak(pool, peak_avx2_int8);
    }
    *isa = "none";
    return 0;
}

double tokd_bench_peak_f32(tokd_pool *pool, const char **isa) {
    const tokd_cpu_features *c = tokd_cpu();
    if (c->avx512f) {
        *isa = "avx512 fma";
        return run_peak(pool, peak_fma512);
    }
    if (c->avx2 && c->fma) {
        *isa = "avx2 fma";
        return run_peak(pool, peak_fma256);
    }
    *isa = "none";
    return 0;
}

/* The BF16 rows' own peak, where their kernels use the instruction (TOKD_KERNELS may turn
 * it off); 0 elsewhere. */
double tokd_bench_peak_bf16(tokd_pool *pool, const char **isa) {
    *isa = "none";
    if (tokd_type_get(GGML_TYPE_BF16)->vec_dot != tokd_bf16_dot_avx512bf16) return 0;
    *isa = "avx512-bf16 vdpbf16ps";
    return run_peak(pool, peak_bf16_512);
}

/* ---- the handoff between threads ---------------------------------------------------------- */

/* Threads 0 and 1 of the pool pass a turn back and forth: each hands over when it sees
 * the other's. Thread 0 stops after HANDOFF_ROUNDS round trips or HANDOFF_MAX_S seconds
 * (a host with one free CPU switches between them at the scheduler's pace), and thread
 * 1 gives up if thread 0 has finished, or never started, the exchange. */
#define HANDOFF_ROUNDS 2000
#define HANDOFF_MAX_S 0.005
typedef struct {
    _Alignas(64) _Atomic int turn; /* odd: thread 1's to take; even: thread 0's */
    _Alignas(64) _Atomic int arrived, over;
    double one_way_s; /* 0: no round trip completed */
} handoff_job;

static void handoff_region(void *arg, int ith, int nth) {
    handoff_job *h = arg;
    (void)nth;
    if (ith == 1) {
        atomic_store_explicit(&h->arrived, 1, memory_order_release);
        for (int want = 1;; want += 2) {
            while (atomic_load_explicit(&h->turn, memory_order_acquire) != want)
                if (atomic_load_explicit(&h->over, memory_order_acquire)) return;
            atomic_store_explicit(&h->turn, want + 1, memory_order_release);
        }
    }
    if (ith != 0) return;
    const double give_up = tokd_now() + HANDOFF_MAX_S;
    while (!atomic_load_explicit(&h->arrived, memory_order_acquire))
        if (tokd_now() > give_up) goto over;
    const double t0 = tokd_now();
    int done = 0;
    while (done < HANDOFF_ROUNDS) {
        atomic_store_explicit(&h->turn, 2 * done + 1, memory_order_release);
        while (atomic_load_explicit(&h->turn, memory_order_acquire) != 2 * done + 2) {}
        done++;
        if (done % 64 == 0 && tokd_now() > give_up) break; /* the clock read seldom: it costs a handoff's time */
    }
    h->one_way_s = (tokd_now() - t0) / (2.0 * done);
over:
    atomic_store_explicit(&h->over, 1, memory_order_release);
}

double tokd_bench_handoff_ns(tokd_pool *pool) {
    if (tokd_pool_size(pool) < 2) return 0;
    double v[5];
    int n = 0;
    for (int i = 0; i < 5; i++) {
        handoff_job h = {.one_way_s = 0};
        tokd_pool_run(pool, handoff_region, &h);
        if (h.one_way_s > 0) v[n++] = h.one_way_s * 1e9;
    }
    if (!n) return 0;
    tokd_bench_stat s;
    tokd_bench_stat_of(&s, v, n);
    return s.median;
}

/* ---- the model ---------------------------------------------------------------------------- */

static bool is_float_type(uint32_t t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16; }

static void count_matrix(const tokd_matrix *w, tokd_bench_result *r) {
    r->bytes_per_token += (uint64_t)w->n_out * w->row_bytes;
    r->macs_per_token += (uint64_t)w->n_out * (uint64_t)w->K;
    if (is_float_type(w->tt->id)) r->all_quantized = false;
    if (w->tt->id != GGML_TYPE_BF16) r->all_bf16 = false;
}

static void describe_types(const tokd_model *m, char *out, size_t cap) {
    uint32_t count[GGML_TYPE_MAX_ID] = {0};
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++)
        if (m->gguf->tensors[i].type < GGML_TYPE_MAX_ID) count[m->gguf->tensors[i].type]++;
    size_t len = 0;
    out[0] = 0;
    for (uint32_t t = 0; t < GGML_TYPE_MAX_ID && len < cap; t++)
        if (count[t]) len += (size_t)snprintf(out + len, cap - len, "%s%s x%u", len ? " " : "", ggml_type_name(t), count[t]);
}

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* Decode steps from position depth with step_profile.h counting; untimed by the tg figures. */
static int profile_decode(tokd_ctx *c, int32_t depth, int steps, int32_t n_seqs, tokd_batch_entry *batch, int32_t n_vocab,
                          uint64_t *rng, float *logits, tokd_bench_result *r, tokd_err *err) {
    for (int32_t s = 0; s < n_seqs; s++) tokd_seq_truncate(c, s, depth);
    tokd_profile_start(true);
    const double t0 = tokd_now();
    const uint64_t c0 = __rdtsc();
    int rc = 0;
    for (int32_t i = depth; i < depth + steps && !rc; i++) {
        for (int32_t s = 0; s < n_seqs; s++) batch[s] = (tokd_batch_entry){(int32_t)(lcg(rng) % (uint64_t)n_vocab), i, s, true};
        rc = tokd_forward(c, batch, n_seqs, logits, err);
    }
    const uint64_t cycles = __rdtsc() - c0;
    const double secs = tokd_now() - t0;
    tokd_profile_stop();
    r->profile = tokd_profile;
    r->profile_step_s = secs / steps;
    r->profile_tsc_hz = secs > 0 ? (double)cycles / secs : 0;
    return rc;
}

int tokd_bench_model(const tokd_bench_params *p, tokd_bench_result *r, tokd_err *err) {
    memset(r, 0, sizeof *r);
    if (p->reps < 1 || p->reps > TOKD_BENCH_MAX_REPS) return tokd_seterr(err, "repetitions %d out of range (1..%d)", p->reps, TOKD_BENCH_MAX_REPS);
    if (p->n_prompt < 0 || p->n_gen < 0 || p->n_depth < 0) return tokd_seterr(err, "negative token counts");
    const int32_t S = p->n_seqs > 0 ? p->n_seqs : 1;
    if (S > TOKD_BENCH_MAX_SEQS) return tokd_seterr(err, "%d sequences: at most %d", S, TOKD_BENCH_MAX_SEQS);
    if ((int64_t)S * p->n_prompt > TOKD_BENCH_MAX_BATCH)
        return tokd_seterr(err, "%d prompts of %d tokens: more than %d tokens in one batch", S, p->n_prompt, TOKD_BENCH_MAX_BATCH);
    tokd_model *m = tokd_model_load(p->model_path, err);
    if (!m) return -1;
    const tokd_hparams *hp = &m->hp;
    snprintf(r->name, sizeof r->name, "%s", m->name);
    snprintf(r->arch, sizeof r->arch, "%s", m->arch_name);
    describe_types(m, r->types, sizeof r->types);
    r->weight_bytes = m->weight_bytes;
    r->kernels = tokd_kernels_path();
    r->all_quantized = true;
    r->all_bf16 = true;

    /* bytes and multiply-accumulates of one decode step (of S tokens, one a sequence: the
       weights once, each sequence's embedding row and KV cache) */
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const tokd_layer *L = &m->layers[l];
        const tokd_matrix *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) count_matrix(ws[i], r);
        r->bytes_per_token += 2ull * (uint64_t)hp->n_embd * sizeof(float);
        if (L->bq) r->bytes_per_token += (uint64_t)(hp->n_head + 2 * hp->n_head_kv) * (uint64_t)hp->head_dim * sizeof(float);
    }
    count_matrix(&m->output, r);
    r->bytes_per_token += (uint64_t)hp->n_embd * sizeof(float);
    r->bytes_per_token += (uint64_t)S * m->tok_embd.row_bytes;
    /* mean KV cache read per decode step: positions d+1..d+n_gen of every sequence */
    r->bytes_per_token += (uint64_t)((double)S * (double)tokd_kv_bytes_per_token(m) * (p->n_depth + (p->n_gen + 1) / 2.0));
    r->n_seqs = S;

    tokd_ctx_params cp;
    tokd_ctx_params_default(&cp);
    cp.n_threads = p->n_threads;
    cp.n_seq = S;
    cp.n_batch = S * p->n_prompt > 32 ? S * p->n_prompt : S > 32 ? S : 32;
    int32_t need = (p->n_prompt > p->n_gen ? p->n_prompt : p->n_gen) + 32;
    if (p->profile_steps + 32 > need) need = p->profile_steps + 32;
    if ((int64_t)need + p->n_depth > (1 << 24)) {
        tokd_seterr(err, "depth %d too large", p->n_depth);
        tokd_model_free(m);
        return -1;
    }
    cp.n_ctx = need + p->n_depth;
    int rc = -1;
    tokd_batch_entry *batch = NULL;
    float *logits = NULL;
    tokd_bench_reader *reader = NULL;
    tokd_ctx *c = tokd_ctx_new(m, &cp, err);
    if (!c) goto done;
    r->n_threads = p->n_threads > 0 ? p->n_threads : tokd_physical_cores();
    batch = tokd_xmalloc((size_t)cp.n_batch * sizeof *batch);
    logits = tokd_xmalloc((size_t)S * (size_t)hp->n_vocab * sizeof(float));
    uint64_t rng = 42;
    r->bw_mib = p->bw_mib > 0 ? p->bw_mib : 512;
    /* the probe beside the tg runs: mapped now, before the warm-up */
    if (p->measure_machine && p->n_gen > 0) reader = tokd_bench_reader_new((size_t)r->bw_mib << 20);

    /* warm-up: a short prompt and one decode step (pages in every weight) */
    int32_t nw = p->n_prompt < 32 ? (p->n_prompt > 0 ? p->n_prompt : 1) : 32;
    for (int32_t i = 0; i < nw; i++) batch[i] = (tokd_batch_entry){(int32_t)(lcg(&rng) % (uint64_t)hp->n_vocab), i, 0, i == nw - 1};
    if (tokd_forward(c, batch, nw, logits, err)) goto done;
    batch[0] = (tokd_batch_entry){(int32_t)(lcg(&rng) % (uint64_t)hp->n_vocab), nw, 0, true};
    if (tokd_forward(c, batch, 1, logits, err)) goto done;

    /* the depth: filled once, untimed, in batches of n_batch, in every sequence; every run
       cuts back to it */
    const int32_t d = p->n_depth;
    tokd_seq_truncate(c, 0, 0);
    for (int32_t s = 0; s < S; s++)
        for (int32_t i0 = 0; i0 < d; i0 += cp.n_batch) {
            const int32_t nb = d - i0 < cp.n_batch ? d - i0 : cp.n_batch;
            for (int32_t i = 0; i < nb; i++)
                batch[i] = (tokd_batch_entry){(int32_t)(lcg(&rng) % (uint64_t)hp->n_vocab), i0 + i, s, i == nb - 1};
            if (tokd_forward(c, batch, nb, logits, err)) goto done;
        }

    double v[TOKD_BENCH_MAX_REPS], bw[TOKD_BENCH_MAX_REPS], share[TOKD_BENCH_MAX_REPS], handoff[TOKD_BENCH_MAX_REPS];
    if (p->n_prompt > 0) { /* S prompts of n_prompt tokens in one batch */
        const int32_t n = S * p->n_prompt;
        for (int rep = 0; rep < p->reps; rep++) {
            for (int32_t s = 0; s < S; s++) {
                tokd_seq_truncate(c, s, d);
                for (int32_t i = 0; i < p->n_prompt; i++)
                    batch[s * p->n_prompt + i] =
                        (tokd_batch_entry){(int32_t)(lcg(&rng) % (uint64_t)hp->n_vocab), d + i, s, i == p->n_prompt - 1};
            }
            double t0 = tokd_now();
            if (tokd_forward(c, batch, n, logits, err)) goto done;
            v[rep] = n / (tokd_now() - t0);
        }
        tokd_bench_stat_of(&r->pp, v, p->reps);
    }
    if (p->n_gen > 0) {
        /* the probe's passes between the steps, every `every` steps (bench.h says when) */
        const bool between = p->tg_probe == TOKD_BENCH_PROBE_BETWEEN ||
                             (p->tg_probe == TOKD_BENCH_PROBE_AUTO && r->bytes_per_token >= TOKD_BENCH_PROBE_MIN_STEP_BYTES);
        const int32_t every = reader && between
                                  ? (p->n_gen + TOKD_BENCH_PROBE_PASSES - 1) / TOKD_BENCH_PROBE_PASSES
                                  : 0;
        r->tg_probe_passes = every ? (p->n_gen + every - 1) / every : 0;
        for (int rep = 0; rep < p->reps; rep++) { /* each step one token of each of the S sequences */
            for (int32_t s = 0; s < S; s++) tokd_seq_truncate(c, s, d);
            probe_samples probe = {.n = 0};
            double secs = 0, t0 = tokd_now();
            for (int32_t j = 0; j < p->n_gen; j++) {
                for (int32_t s = 0; s < S; s++)
                    batch[s] = (tokd_batch_entry){(int32_t)(lcg(&rng) % (uint64_t)hp->n_vocab), d + j, s, true};
                if (tokd_forward(c, batch, S, logits, err)) goto done;
                if (every && ((j + 1) % every == 0 || j + 1 == p->n_gen)) { /* untimed */
                    secs += tokd_now() - t0;
                    reader_warm(reader, tokd_ctx_pool(c));
                    reader_sample(reader, tokd_ctx_pool(c), &probe);
                    t0 = tokd_now();
                }
            }
            secs += tokd_now() - t0;
            v[rep] = (double)S * p->n_gen / secs;
            if (reader) {
                bw[rep] = every ? probe_best(reader, &probe) : tokd_bench_reader_measure(reader, tokd_ctx_pool(c), 3);
                share[rep] = v[rep] * (double)r->bytes_per_token / ((double)S * bw[rep]);
                handoff[rep] = tokd_bench_handoff_ns(tokd_ctx_pool(c));
            }
        }
        tokd_bench_stat_of(&r->tg, v, p->reps);
        if (reader) {
            tokd_bench_stat_of(&r->tg_bw, bw, p->reps);
            tokd_bench_stat_of(&r->tg_shares, share, p->reps);
            if (tokd_pool_size(tokd_ctx_pool(c)) > 1) tokd_bench_stat_of(&r->tg_handoff, handoff, p->reps);
        }
    }
    if (p->profile_steps > 0 && profile_decode(c, d, p->profile_steps, S, batch, hp->n_vocab, &rng, logits, r, err)) goto done;
    tokd_ctx_free(c);
    c = NULL;

    if (p->measure_machine) {
        tokd_pool *pool = tokd_pool_new(p->n_threads);
        r->bandwidth = reader ? tokd_bench_reader_measure(reader, pool, 7) : tokd_bench_read_bandwidth(pool, (size_t)r->bw_mib << 20, 7);
        r->peak_int8 = tokd_bench_peak_int8(pool, &r->isa_int8);
        r->peak_f32 = tokd_bench_peak_f32(pool, &r->isa_f32);
        r->peak_bf16 = tokd_bench_peak_bf16(pool, &r->isa_bf16);
        tokd_pool_free(pool);
        r->tg_limit = (double)S * (r->tg.n ? r->tg_bw.median : r->bandwidth) / (double)r->bytes_per_token;
        if (r->tg.n) r->tg_share = r->tg_shares.median;
        const bool bf16 = !r->all_quantized && r->all_bf16 && r->peak_bf16 > 0;
        r->pp_peak = r->all_quantized ? "int8" : bf16 ? "bf16" : "f32";
        double peak = r->all_quantized ? r->peak_int8 : bf16 ? r->peak_bf16 : r->peak_f32;
        if (r->pp.n && peak > 0) r->pp_peak_share = r->pp.median * (double)r->macs_per_token / peak;
    }
    rc = 0;
done:
    tokd_bench_reader_free(reader);
    free(batch);
    free(logits);
    tokd_ctx_free(c);
    tokd_model_free(m);
    return rc;
}
