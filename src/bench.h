/* bench.h — what `tokd bench` measures, as a library.
 *
 * Model speed with llama-bench's definitions:
 *   pp (prompt processing): one batch of n_prompt tokens evaluated in a single
 *       tokd_forward call from an empty context, logits for the last token only;
 *       tokens/s = n_prompt / time of that call;
 *   tg (text generation): n_gen single-token tokd_forward calls from an empty context,
 *       each returning logits; tokens/s = n_gen / total time.
 * Each is repeated `reps` times (the context cleared in between) after one warm-up (a
 * prompt of min(n_prompt, 32) tokens and one decode step, which also pages in the
 * mmapped weights); results are the median, min and max over the repetitions.
 * With a depth d (llama-bench's -d, "pp512 @ d2048"), a prompt of d tokens fills the
 * cache once, untimed, and each repetition starts from it (the context cut back to d
 * positions): pp is then one batch at positions d..d+p-1, tg n steps from position d,
 * which measures attention over a long context beside the weights.
 * With n_seqs S > 1 (llama-batched-bench's parallel sequences, as the server's continuous
 * batching runs them): pp is S prompts of n_prompt tokens in one batch, tg n steps that
 * each decode one token of each of S sequences; tokens/s count every sequence's tokens,
 * and the bytes of a decode step are the weights once plus each sequence's embedding row
 * and KV cache, so tg's bandwidth limit is S x bandwidth / those bytes.
 *
 * Machine limits, measured with the same thread count on the same thread pool:
 *   memory read bandwidth — every thread streams its slice of a buffer far larger than
 *       the caches (512 MiB) with the widest loads the CPU has, priming each page a page
 *       ahead as the decode kernels do (bench.c); median over passes;
 *   arithmetic peak — a tight loop of independent int8 multiply-accumulates (AVX-512
 *       VNNI vpdpbusd, AVX-VNNI, or AVX2 vpmaddubsw) and of f32 FMAs, in registers only;
 *       best of a few runs.
 * The host's memory speed drifts (on the shared machines here the same probe reads
 * 38..80 GB/s from one minute to the next), so the bandwidth tg is compared with is
 * measured again right after each tg repetition (3 passes, in the same seconds), and
 * tg's share is the median over repetitions of that repetition's share.
 * Derived: tg's limit = bandwidth / bytes read per decoded token (every weight matrix,
 * the output matrix, one embedding row, norms, plus the mean KV cache read over the
 * run, depth included), and tg's share of it; pp's share of the arithmetic peak = pp
 * tokens/s x multiply-accumulates per token (weight-matrix elements) / peak MAC/s,
 * against the int8 peak when every weight matrix is quantized (the kernels then multiply
 * int8) and the f32 peak otherwise. */
#ifndef TOKD_BENCH_H
#define TOKD_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/step_profile.h"
#include "kernels/threadpool.h"
#include "util.h"

#define TOKD_BENCH_MAX_REPS 100
#define TOKD_BENCH_MAX_SEQS 256
#define TOKD_BENCH_MAX_BATCH 65536 /* tokens in pp's one batch (n_seqs x n_prompt): as -p's own limit */
/* tg's bandwidth is measured in the minute tg runs, because shared hosts change speed from
 * one second to the next: after every ceil(n / TOKD_BENCH_PROBE_PASSES) steps, untimed, a
 * pass that warms the probe and then one pass of each form (below), and each run's limit
 * from the medians of its own passes. Measured only after each run (3 passes, ~50 ms
 * against a second of steps), the TinyLlama-shape files' per-run shares spread over 12
 * points on average and up to 25 (five runs a set); between the steps over 7 (5 without
 * one run in which the host's bandwidth doubled midway), and the median shares were no
 * higher: Q4_0 5 points lower, Q8_0 3 lower, Q4_K_M 2 higher on average (BENCHMARKS.md,
 * fifty-first session). A step that reads less than TOKD_BENCH_PROBE_MIN_STEP_BYTES may
 * keep its weights in the last-level cache from one step to the next, and the probe's
 * passes would evict them (stories260K: 6.9 % between against 10.8 % after), so such
 * models are measured after each run (TOKD_BENCH_PROBE_AUTO; the other two force one or
 * the other). */
enum { TOKD_BENCH_PROBE_AUTO, TOKD_BENCH_PROBE_BETWEEN, TOKD_BENCH_PROBE_AFTER };
#define TOKD_BENCH_PROBE_PASSES 16
#define TOKD_BENCH_PROBE_MIN_STEP_BYTES ((uint64_t)256 << 20)

typedef struct {
    double median, min, max;
    int n;
    double samples[TOKD_BENCH_MAX_REPS];
} tokd_bench_stat;

/* Median/min/max of n values (n >= 1). */
void tokd_bench_stat_of(tokd_bench_stat *s, const double *v, int n);

/* The probe's read loop over n bytes at p (any alignment): wide loads of this CPU's path,
 * pages primed ahead, and on AVX2 every line TOKD_PK_AVX2_DECODE_LINE_PF ahead; returns
 * a value made of the bytes, for the caller to sink. bench_regions reads weight chunks
 * with it. */
uint64_t tokd_bench_read_bytes(const void *p, size_t n);

/* Read bandwidth in bytes/s: median over `passes` passes over `bytes` bytes. */
double tokd_bench_read_bandwidth(tokd_pool *pool, size_t bytes, int passes);

/* The same probe with its buffer allocated and faulted in once, so that measurements can
 * sit between timed runs: allocating and freeing 512 MiB right before a run slowed the
 * run's first pass over the weights by half here, reading a buffer already mapped does
 * not. */
typedef struct tokd_bench_reader tokd_bench_reader;
tokd_bench_reader *tokd_bench_reader_new(size_t bytes);
double tokd_bench_reader_measure(tokd_bench_reader *rd, tokd_pool *pool, int passes);
void tokd_bench_reader_free(tokd_bench_reader *rd);

/* How long a store by pool thread 0 takes to be seen by thread 1 and back, halved: the
 * one-way handoff in ns (median of 5 exchanges of up to 2000 round trips each), 0 with
 * one thread or when thread 1 never joined (5 ms). It tells where the host put the two
 * cores: on the 2-core Zen 4 host 26-56 ns when they share a die, 157-200 when they do
 * not, and the placement changes within minutes. It moves tg's share: far apart each
 * core reads memory through its own link, so the probe reads up to twice as fast, while
 * every hand-off between the cores (the start and end of each product, the activations
 * and outputs they pass) costs 4-5 times as much (BENCHMARKS.md, fifty-eighth and
 * fifty-ninth sessions). */
double tokd_bench_handoff_ns(tokd_pool *pool);

/* Arithmetic peak in multiply-accumulates per second over all pool threads; *isa names
 * the instruction used ("avx512-vnni", ...; "none" and 0 when the CPU has no SIMD path). */
double tokd_bench_peak_int8(tokd_pool *pool, const char **isa);
double tokd_bench_peak_f32(tokd_pool *pool, const char **isa);
double tokd_bench_peak_bf16(tokd_pool *pool, const char **isa); /* 0 where BF16 rows do not use vdpbf16ps */

typedef struct {
    const char *model_path;
    int n_prompt, n_gen, reps, n_threads;
    int n_depth;          /* positions already in the cache before each pp and tg run (llama-bench's -d) */
    int n_seqs;           /* sequences run together (0 or 1: one; see above) */
    bool measure_machine; /* bandwidth and peaks */
    int bw_mib;           /* bandwidth buffer in MiB (0: 512) */
    int tg_probe;         /* when tg's bandwidth is measured: TOKD_BENCH_PROBE_AUTO, _BETWEEN or _AFTER */
    int profile_steps;    /* > 0: that many decode steps from position n_depth, profiled (step_profile.h) */
} tokd_bench_params;

typedef struct {
    char name[128], arch[32], types[256];
    uint64_t weight_bytes;     /* all tensors of the file */
    uint64_t bytes_per_token;  /* read per decode step (see above): per token when n_seqs is 1 */
    uint64_t macs_per_token;   /* weight-matrix multiply-accumulates per token */
    bool all_quantized;
    bool all_bf16;             /* every weight matrix BF16 */
    int n_threads, n_seqs;
    const char *kernels;
    tokd_bench_stat pp, tg;    /* tokens/s; n = 0 when skipped */
    double bandwidth;          /* bytes/s */
    int bw_mib;                /* buffer it was measured on */
    double peak_int8, peak_f32, peak_bf16; /* MAC/s */
    const char *isa_int8, *isa_f32, *isa_bf16;
    const char *pp_peak;       /* which of them pp_peak_share is against: "int8", "bf16", "f32" */
    tokd_bench_stat tg_bw;     /* bytes/s, each tg repetition's probe (tg_probe_passes) */
    int tg_probe_passes;       /* passes of the probe between each repetition's steps; 0: 3 after it */
    tokd_bench_stat tg_shares; /* each repetition's tokens/s over its own limit */
    tokd_bench_stat tg_handoff; /* ns, tokd_bench_handoff_ns after each repetition (n = 0 with one thread) */
    double tg_limit, tg_share, pp_peak_share; /* tg_limit from tg_bw's median; tg_share = tg_shares' median */
    /* profile_steps > 0: the profiled steps' counters, their mean wall time and the TSC
       rate measured over them */
    tokd_step_profile profile;
    double profile_step_s, profile_tsc_hz;
} tokd_bench_result;

int tokd_bench_model(const tokd_bench_params *p, tokd_bench_result *r, tokd_err *err);

#endif
