/* packed.h — weight matrices repacked at load time into a row-interleaved layout.
 *
 * A GGUF file stores each weight row as a run of blocks (Q4_0: an fp16 scale and 16
 * bytes of nibbles per 32 weights). Reading it that way, a SIMD dot product spends most
 * of its instructions reducing each block's partial sums across lanes. The packed
 * layout puts 16 rows side by side instead: for block b of a group of 16 rows, the 16
 * scales, then the quants in 64-byte vectors whose 32-bit lane L holds four consecutive
 * weights of row L. One VNNI instruction (vpdpbusd) with a broadcast group of four
 * activation bytes then advances all 16 rows' block sums at once, with no horizontal
 * reductions, for decode (one activation row) and prefill (many) alike.
 *
 * Layout of group G (rows 16G .. 16G+15): its blocks in pairs (2p, 2p+1) of
 * 2*block_bytes at G*group_bytes + 2p*block_bytes: the two blocks' 16 fp16 scales (row
 * order; block 2p's, then block 2p+1's: one 64-byte line), then block 2p's vectors, then
 * block 2p+1's. A last block without a partner (odd K/32) is its scales, then its
 * vectors. tokd_pk_scales_at / tokd_pk_vectors_at give the offsets. A Q4_0 block is 4.5
 * lines, so with the scales side by side a pair is nine whole lines and every vector
 * starts on a line: decode, which reads each weight line once, loads each line once
 * (alternated in one process over the TinyLlama Q4_0 decode products, 2.6-3.9 % faster
 * than blocks of scales then vectors, whose vectors straddle lines every other block;
 * BENCHMARKS.md, tenth session). A block's vectors:
 *   Q4_0: 4 vectors of 64 bytes; vector c, byte 4L+i = qs[4c+i] of row L (low nibble:
 *         weight 4c+i, high nibble: weight 16+4c+i), stored as in the file (offset 8);
 *   Q8_0: 8 vectors of 64 bytes; vector g, byte 4L+i = qs[4g+i] of row L plus 128, as an
 *         unsigned byte (the AVX2 form keeps qs[4g+i] as it is, and its activation
 *         corrections are 0);
 *   Q5_0: Q4_0's 4 vectors, then one of fifth bits: byte 4L+i, bit
 *         2c+h = the fifth bit of row L's weight 16h+4c+i (offset 16; packed.c).
 * IQ4_NL (AVX-512 VNNI only): Q4_0's layout and bytes (its nibbles are table indices),
 * and Q8_0's activation rows (corrections -128 * the quant sums); the kernel looks the
 * nibbles up as table value + 128.
 * IQ4_XS (AVX-512 VNNI only): blocks of 32 at b * 320 as Q4_1's, line 0 the 16 rows' fp16
 * d and int8 block scales (packed.c, iq4_xs_pack), then Q4_0's vectors, looked up as
 * IQ4_NL's; activation rows from Q8_K's quantiser, each block with its super-block's d
 * (packed.c, iq4_xs_prep). Its contract is packed.c's iq4_xs_ref_dot.
 * Q4_1 keeps no pairs: block b at b * 320, five whole lines: the 16
 * rows' fp16 d, their 16 fp16 m (one line), then Q4_0's 4 vectors (nibbles 0..15).
 * Q5_1 likewise at b * 384: Q4_1's block, then a fifth-bit vector as Q5_0's.
 *
 * AVX-512 Q4_0 groups 32 rows instead ("x32"; other paths and other types: 16). Block b
 * of a group is 576 bytes, nine whole lines, at b * 576: the 32 rows' fp16 scales (row
 * order: one line), then the vectors of rows 0-15, then those of rows 16-31, each half
 * as the 16-row block's 4 vectors above. Decode then loads each activation quant group
 * once for 32 rows' vpdpbusd instead of once for 16, and each block's scale and
 * correction loads serve twice the bytes. Each thread streaming 300 MB through the
 * kernel, alternated in one process with the 16-row kernel (medians of 15 rounds): this
 * kernel 1.008-1.038x as fast, a first hand-written form of it 1.01-1.07x in medium host
 * states (probe 53-66 GB/s) and 0.99x in the fast one (74 GB/s); whole `tokd bench`
 * tg128 runs alternated with the 16-row build: ahead in tok/s in 5 of 6 pairs
 * (BENCHMARKS.md, nineteenth session). No pairing is needed: every block is whole lines.
 * A matrix of an odd number of 16-row groups keeps the 16-row form (tokd_packed_fit).
 * A height that is not a multiple of 16 (a vocabulary of 32001) packs a last group
 * padded with zero rows, whose outputs past the height are never stored (matmul.c).
 * The numerics are the contract below, row by row.
 *
 * Activation rows are prepared once per matmul (prep): the Q8_0 activation quantiser's
 * blocks, rearranged as nb*32 quant bytes, nb float scales, and nb int32 corrections
 * (-8 * the block's quant sum for Q4_0 weights, -16 for Q5_0, -128 for Q8_0), so the
 * kernel starts each block sum at the correction and never subtracts. For Q4_1 and Q5_1 (bias
 * TOKD_PK_BIAS_S) the last nb words are instead floats: each block's s as Q8_1 has it,
 * fp16(d * sum of the quants) with d = amax / 127 before its own rounding.
 *
 * Q4_K (16 rows' super-blocks of 256): 16 fp16 d and dmin, the six-bit scales and mins
 * as the file codes them, row by row in three vectors, 32 vectors of nibbles in the
 * file's byte order (packed.c, q4_K_pack); the min term goes through vpdpwssd with
 * the activation's 32-element sums. Numerics: the file layout's vec_dot, bit for bit.
 * Q5_K: Q4_K's super-block of 16 rows, then 8 vectors of the rows' fifth bits (qh,
 * four bytes per lane as the quants; packed.c, q5_K_pack); the kernel merges bit j into
 * sub-block j's nibbles. Same activation rows and numerics as Q4_K.
 * Q6_K (16 rows' super-blocks of 256): 16 fp16 d, the 16 x 16 int8 scales by
 * sub-block then row, three vectors a sub-block holding its 6-bit values (packed.c,
 * q6_K_pack).
 * Its activation rows are Q8_K's quantiser with -32 * each 16-element sum; its numerics
 * are exactly the file layout's vec_dot (out = out + (dx*dy) * (float)isum per
 * super-block), so packing a Q6_K matrix changes no result.
 * Q3_K goes through Q6_K's kernel shape: 16 fp16 d, the scales as int8 [sub-block][row],
 * 16 vectors of two-bit quants and 8 of high bits in the file's byte order (packed.c,
 * q3_K_pack); activation rows as Q6_K's with -4 * each sum, and the same numerics as its
 * file layout's vec_dot. Q2_K too, with the file's own bytes (packed.c, q2_K_pack) and
 * Q4_K's vpdpwssd mins term over the activation's 16-element sums.
 * Q6_K's and Q3_K's super-blocks (52.5 and 28.5 lines) are paired as the 32-weight
 * blocks above: the two 32-byte d headers in one line, then each super-block's scales
 * and vectors (tokd_pk_scales_at / tokd_pk_vectors_at with the super-block's bytes), so
 * that none of their loads straddles a line. Q2_K, Q4_K and Q5_K super-blocks are whole
 * lines (21, 37 and 45).
 *
 * Numerics of Q4_0/Q5_0/Q8_0 (the contract every implementation meets bit for bit;
 * ref_dot computes it from an unpacked row): out = 0; for each block b in order:
 *   out = fmaf(dx_b * dy_b, (float)isum_b, out)
 * with isum_b the exact integer dot product of the block's signed weights (q - 8 for
 * Q4_0, q - 16 for Q5_0, the table value for IQ4_NL) and activation quants. This differs from the unpacked
 * vec_dot's order, so a matrix is either packed for every product or for none: batch
 * invariance holds because decode and prefill both go through packed_gemm.
 * Q4_1 and Q5_1 the same with a min term after each block's: out = fmaf(dx_b * dy_b,
 * (float)isum_b, out); out = fmaf(mx_b, sy_b, out), with isum_b over the unsigned values
 * (0..15, 0..31) and sy_b the activation block's s (above). */
#ifndef TOKD_KERNELS_PACKED_H
#define TOKD_KERNELS_PACKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/page_prime.h"
#include "kernels/unaligned.h"

#define TOKD_PACK_ROWS 16
/* prep's bias for Q4_1 and Q5_1: the block's s (a float) in place of a correction (below) */
#define TOKD_PK_BIAS_S INT32_MIN


/* Where block b (of nb, block_bytes each) of a packed 32-weight group keeps its 16 scales
 * and its vectors (above). */
static inline size_t tokd_pk_scales_at(int64_t b, size_t block_bytes) {
    return (size_t)(b & ~(int64_t)1) * block_bytes + (size_t)(b & 1) * 32;
}
static inline size_t tokd_pk_vectors_at(int64_t b, int64_t nb, size_t block_bytes) {
    const size_t pair = (size_t)(b & ~(int64_t)1) * block_bytes;
    if ((b | 1) >= nb) return pair + 32; /* the last block, without a partner */
    return pair + 64 + (size_t)(b & 1) * (block_bytes - 32);
}

/* Software prefetch distance of both paths' kernels, in bytes of a group's stream: every
 * line of the K-quants (below), and of the 32-weight types with several activation rows.
 * Medians of interleaved runs, 2048-row matrices from DRAM, one thread: 16 activation
 * rows 150-183 G MAC/s without it, 248-265 at 2048, 269-283 at 4096..8192. Decode of the
 * 32-weight types primes pages instead (page_prime.h), and on most paths also
 * prefetches every line (TOKD_PK_DECODE_LINE_PF, TOKD_PK_AVX2_DECODE_LINE_PF). */
#ifndef TOKD_PK_PF_DIST
#define TOKD_PK_PF_DIST 6144
#endif
/* AVX-512 decode of Q4_0, Q5_0 and Q8_0 also prefetches every line this far ahead, with
 * prefetchnta (and the K-quants' quarters below are nta too). On the AMD EPYC Zen 5 host
 * (2 cores) one core reads at most ~44 GB/s however it asks (plain loads; prefetcht0,
 * t1, t2 or nta; one to four streams: 39-42 GB/s in the same minutes) and two cores read
 * twice that, so each core's outstanding misses are the bound. Each form's packed decode
 * kernel streaming 512 MB on two threads, variants alternated in one process (medians of
 * 11, probe 83-86 GB/s): Q4_0 82.0-82.7 GB/s with prefetcht0 3 KB ahead (the earlier
 * AVX-512 host's choice), 85.3-85.8 with prefetchnta 6 KB ahead, 80.9-81.5 with nta 3 KB
 * ahead; Q5_0 the same (79.8-83.6) with either. Whole `tokd bench` tg runs alternated
 * with the t0 build: Q4_0 ahead in 6 of 6 pairs, median share 88.2 % against 85.9 %.
 * Q8_0's nta lines 4 KB ahead and the Q4_K quarters with nta also streamed faster alone
 * (86.5 against 81.3-84.7 GB/s; 84.0-85.4 against 79.6-81.4) but then kept nothing in
 * whole `tokd bench` runs, a test the host's swings of +-10 % between runs could not
 * decide (thirtieth session). Whole decode steps alternated in one process decided it
 * (16 steps a round, medians of the rounds' time ratios; thirty-third session): Q8_0
 * with nta lines 6 KB ahead 0.975, 0.994 and 0.990 of the step time with page priming
 * alone (150-300 rounds each); Q4_K_M 0.972-0.984 with nta Q4_K quarters (three runs),
 * 0.967 and 0.977 with nta Q6_K quarters too (0.980 against nta Q4_K quarters alone); a
 * Q6_K file 0.978 with nta quarters. The one loss: Q4_0's output matrix (Q6_K) took
 * 3-7 % longer with nta, 1.003-1.005 of Q4_0's step. On the earlier AVX-512 host Q8_0's
 * lines 4 KB ahead (prefetcht0) lost 6 of 6 pairs; there 3 KB ahead with t0 gave Q4_0
 * 1.030-1.069 and Q5_0 1.069 of the build without (BENCHMARKS.md, thirteenth session). */
#define TOKD_PK_DECODE_LINE_PF 6144
/* The AVX2 kernels' decode of Q4_0, Q5_0 and Q8_0 prefetch every line this far ahead, as
 * well as priming pages. Measured on an AVX2-only AMD EPYC (Zen 3, 2 cores), where these
 * kernels are the ones decode runs: each thread streaming 200 MB of one type's packed
 * groups, alternated with the read probe (medians of 9 rounds), Q8_0 0.64 of the probe
 * on priming alone, 0.85-0.99 with lines 512-12288 bytes ahead and 1.07 at 4096; Q4_0
 * 0.91 at 3072 (the AVX-512 distance then), 1.05 at 4096 and 4608, 0.92 at 6144-8192;
 * Q5_0 0.92 and 1.07 (BENCHMARKS.md, twenty-first session). */
#define TOKD_PK_AVX2_DECODE_LINE_PF 4096
/* AVX-512 one-row decode of the 32-weight kinds that keep a whole block a step (Q4_1,
 * Q5_1, IQ4_XS) and of the unpacked F16, BF16 and F32 rows primes each page this much
 * further ahead than TOKD_PRIME_DIST (page_prime.h): 16 KB ahead in all. Since the
 * fifty-seventh session the paired kinds, Q4_0's x32 blocks, the few-row streams and the
 * K-quants prime no page (packed_avx512.c). Measured once the weights were in huge pages
 * (util.h: tokd_huge_alloc), where priming no longer costs a page walk: this kernel
 * compiled beside the 4 KB one, each driving one of two copies of the model in one
 * process, decode alternated (medians of 11-15 rounds, TinyLlama shape, 2 threads),
 * against the same harness with both copies on identical kernels: Q4_0 +5 to +10 %,
 * Q8_0 -5 to +12 % (neutral to positive); 32 KB read like 16 KB. The read probe reads the
 * same at 4, 8 and 16 KB (56.6, 57.4, 57.3 GB/s, alternated), so it keeps 4 KB. */
#define TOKD_PK_DECODE_PRIME_SKIP 12288

/* A prefetch of p's line (prefetcht0) that stays where the code puts it. The compiler
 * treats __builtin_prefetch as free to schedule and, in an unrolled loop whose addresses
 * are constants apart, hoists every one to the loop's top: a spread of prefetches
 * becomes a burst (seen in the AVX2 Q6_K kernel). A volatile asm keeps its order among
 * the kernel's other volatile asm and its place in the loop. */
static inline __attribute__((always_inline)) void tokd_pk_prefetch_here(const void *p) {
    __asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)p));
}
/* The same with prefetchnta (the AVX-512 decode streams, TOKD_PK_DECODE_LINE_PF). */
static inline __attribute__((always_inline)) void tokd_pk_prefetchnta_here(const void *p) {
    __asm__ volatile("prefetchnta %0" : : "m"(*(const char *)p));
}

/* The K-quant kernels' prefill prefetch (both paths): every line of super-block sb,
 * `dist` bytes ahead, at once. Without it the K-quant kernels read at about half the
 * probe's rate, so the per-line prefetches carry the stream. */
static inline __attribute__((always_inline)) void tokd_pk_kq_prefetch(const uint8_t *sb, size_t sb_bytes, size_t dist) {
    for (size_t l = 0; l < sb_bytes; l += 64) __builtin_prefetch(sb + dist + l, 0, 3);
}
/* AVX-512 K-quant decode spreads those line prefetches over the super-block instead:
 * part i of n of its lines as the kernel reaches the i-th n-th of its work (Q4_K and Q5_K:
 * eighths, one a sub-block; Q2_K, Q3_K and Q6_K: sixteenths), with prefetchnta through
 * tokd_pk_prefetchnta_here, so that the unrolled loops keep them apart (the same loops
 * with __builtin_prefetch read 0.49-0.81 of the probe, the hoisted burst), and no page
 * priming (page_prime.h). tokd_pk_prefetch_part, below, writes them.
 * Measured on an AMD EPYC Zen 4 (2 cores, probe 27-52 GB/s), each type's decode kernel
 * streaming 512 MB on two threads, alternated in one process with the scheme before and
 * with the read probe (medians of 15 rounds, K 2048 and 5632; BENCHMARKS.md,
 * fifty-seventh session), against the scheme before: Q4_K 1.05-1.07x, Q5_K 1.19-1.21x,
 * Q6_K 1.14x, Q3_K 1.71-2.14x, Q2_K 1.53-1.67x, now 0.94-1.07 of the probe (Q5_K
 * 0.87-0.93). The scheme before, set on the Zen 5 host and the earlier AVX-512 one:
 * quarters for Q4_K, Q5_K and Q6_K, the burst for Q2_K and Q3_K, and each super-block's
 * page primed 10 KB ahead; on Zen 4, dropping the priming alone gained 8-10 % (Q4_K and
 * Q6_K), and the finer parts the rest (the AVX2 path had found both on Zen 3, packed_avx2_gemm.h). On Zen 5,
 * Q6_K's quarters had beaten the burst and its sixteenths had not (thirtieth session):
 * the next Zen 5 host should measure this again. prefetcht0 and prefetchnta read alike
 * on Zen 4; nta is what Zen 5 preferred (TOKD_PK_DECODE_LINE_PF). */
enum tokd_pk_hint { TOKD_PK_T0, TOKD_PK_NTA };
/* Part i of n of the lines of [p, p + bytes), `dist` bytes ahead, each line in exactly one
 * part, with prefetcht0 or prefetchnta (hint, a constant at every call, so the choice folds
 * away). The one place the spread decode prefetches are written: the AVX-512 K-quant tiles
 * (nta, above) and the AVX2 decode and batched-decode tiles (t0, which Zen 3 preferred:
 * packed_avx2_gemm.h). */
static inline __attribute__((always_inline)) void tokd_pk_prefetch_part(const uint8_t *p, size_t bytes, size_t dist, int i,
                                                                       int n, enum tokd_pk_hint hint) {
    const size_t n_lines = (bytes + 63) / 64, l0 = (size_t)i * n_lines / (size_t)n, l1 = (size_t)(i + 1) * n_lines / (size_t)n;
    for (size_t l = l0; l < l1; l++) {
        if (hint == TOKD_PK_NTA) tokd_pk_prefetchnta_here(p + dist + 64 * l);
        else tokd_pk_prefetch_here(p + dist + 64 * l);
    }
}

/* gemm: for weight groups [0, n_groups) (group_bytes apart) and activation rows
 * [0, na) (as bytes apart), y[r*ldy + R*G + L] = dot(row R*G+L, activation row r), R
 * the form's group_rows. */
typedef void (*tokd_packed_gemm_fn)(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                    const void *act, size_t as, float *y, int64_t ldy);

typedef struct {
    uint32_t id;                                         /* GGML type it packs */
    size_t (*group_bytes)(int64_t K);                    /* packed bytes of one group (group_rows rows) */
    size_t (*act_bytes)(int64_t K);                      /* prepared bytes of one activation row */
    void (*prep)(const float *x, void *dst, int64_t K);  /* one activation row from F32 */
    /* group_rows rows of K weights (file layout, row_bytes apart) into one packed group */
    void (*pack)(const void *rows, size_t row_bytes, void *dst, int64_t K);
    tokd_packed_gemm_fn gemm;                            /* selected SIMD implementation */
    /* the contract above, from an unpacked row and an activation row in the weight
       type's vec_dot format (Q8_0, Q8_1 or Q8_K blocks): the reference gemm is tested against */
    float (*ref_dot)(int64_t K, const void *row, const void *act);
    /* Q4_0 / Q8_0: prep's corrections are -act_bias * the block's quant sum; Q4_1, Q5_1:
       TOKD_PK_BIAS_S (tests) */
    int32_t act_bias;
    /* rows of a group: 16 (TOKD_PACK_ROWS), or 32 for AVX-512 Q4_0 (the layouts above);
       pack packs that many rows, and group_bytes is their bytes. A decode product's last
       claims are whole groups, so at K 5632 (TinyLlama's down: 101 KB a 32-row group)
       the threads finish 3-4 us apart; down in the 16-row form still ran 2-6 % slower a
       step (BENCHMARKS.md, sixtieth session) */
    int group_rows;
} tokd_packed_traits;

/* The form of pk's type that packs a matrix of n_out rows (counted up to a multiple of
 * 16: a last, partial group is padded with zero rows): pk where group_rows divides that
 * count, else the same path's 16-row form of the type (AVX-512 Q4_0 keeps one for
 * heights of an odd number of 16-row groups), or NULL. tokd_matrix_pack applies it. */
const tokd_packed_traits *tokd_packed_fit(const tokd_packed_traits *pk, int64_t n_out);

/* The packed form for weights of this type on this CPU, or NULL (no SIMD kernel here,
 * or TOKD_REPACK=0 in the environment): such matrices stay as they are in the file.
 * AVX-512 VNNI packs Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q2_K to Q6_K; the AVX2 forms the
 * same types (Q8_0 with signed quants, below), on the AVX2 path and on AVX-512 CPUs
 * without VNNI (and Q2_K, Q3_K, Q6_K on AVX-512 VNNI CPUs without GFNI). */
const tokd_packed_traits *tokd_packed_get(uint32_t type);
/* false where TOKD_REPACK=0 in the environment: the model then keeps every matrix in
 * the file's mapping (model.c), packed or not (tests compare the two). */
bool tokd_repack_enabled(void);
/* The same, ignoring TOKD_REPACK (tests). */
const tokd_packed_traits *tokd_packed_get_any(uint32_t type);
/* The AVX2 form whatever path the process runs (tests), or NULL without AVX2: its
 * AVX-VNNI kernel where the CPU has AVX-VNNI. */
const tokd_packed_traits *tokd_packed_get_avx2(uint32_t type);
/* The AVX2 form with the kernel asked for (vnni: the AVX-VNNI one), or NULL where the
 * CPU cannot run it (tests). */
const tokd_packed_traits *tokd_packed_get_avx2_form(uint32_t type, int vnni);

/* Activation row preparation with corrections -bias * sum(quants): the scalar
 * statement (Q8_0's activation quantiser) and the AVX-512 one the table uses. */
void tokd_packed_prep_ref(const float *x, void *dst, int64_t K, int32_t bias);
void tokd_packed_prep_avx512(const float *x, void *dst, int64_t K, int32_t bias);
void tokd_packed_prep_avx2(const float *x, void *dst, int64_t K, int32_t bias);
/* The same for blocks [b0, b1) of x (all K values) only, in their places in dst's row
 * of K: each block's bytes depend on its own 32 values alone. */
void tokd_packed_prep_blocks_avx512(const float *x, void *dst, int64_t K, int64_t b0, int64_t b1, int32_t bias);
void tokd_packed_prep_blocks_avx2(const float *x, void *dst, int64_t K, int64_t b0, int64_t b1, int32_t bias);

/* An activation row prepared in parts, columns [c0, c1) by each of several threads
 * (decode_step.c exchanges them instead of each thread preparing the whole row): the
 * column multiple at which pk's preparation splits (32 for the Q8_0 layout's blocks, 256
 * for the K-quants' super-blocks), or 0 where it does not (IQ4_XS). */
int64_t tokd_packed_prep_cols_align(const tokd_packed_traits *pk);
/* Columns [c0, c1) of x (all K values; c0 and c1 multiples of that, or c1 = K) into
 * their places in dst, a prepared row of K columns: the bytes pk->prep writes there. */
void tokd_packed_prep_cols(const tokd_packed_traits *pk, const float *x, void *dst, int64_t K, int64_t c0, int64_t c1);
/* The bytes of such a row that tokd_packed_prep_cols(pk, ..., c0, c1) writes, as runs
 * [off, off + len) into spans (at most TOKD_PREP_SPANS): the Q8_0 layout's quants, scales
 * and corrections of blocks [c0 / 32, c1 / 32), or the K-quants' super-blocks (with any
 * padding the preparation leaves in them: Q2_K's 32 bytes a super-block). No byte of one
 * column range's runs is in another's. Returns how many runs (0 where the preparation
 * does not split). */
#define TOKD_PREP_SPANS 3
typedef struct {
    size_t off, len;
} tokd_prep_span;
int tokd_packed_prep_cols_spans(const tokd_packed_traits *pk, int64_t K, int64_t c0, int64_t c1, tokd_prep_span *spans);
/* Takes back from other cores the cache lines of dst that columns [c0, c1) alone fill
 * (whole lines inside those runs): one store to each, which leaves their bytes undefined
 * until tokd_packed_prep_cols writes the columns. A line shared with other columns is left
 * alone, so threads claiming their own columns never write each other's bytes. */
void tokd_packed_prep_cols_claim(const tokd_packed_traits *pk, void *dst, int64_t K, int64_t c0, int64_t c1);

/* SIMD kernels (packed_avx512.c) */
void tokd_packed_q4_0_gemm_avx512vnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                      const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q4_0x32_gemm_avx512vnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                         const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q4_K_gemm_avx512vnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                      const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q5_0_gemm_avx512vnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                      const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q4_1_gemm_avx512vnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                      const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q5_1_gemm_avx512vnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                      const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_iq4_nl_gemm_avx512vnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                        const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_iq4_xs_gemm_avx512vnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                        const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q2_K_gemm_avx512vnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                      const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q3_K_gemm_avx512vnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                      const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q5_K_gemm_avx512vnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                      const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q6_K_gemm_avx512vnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                      const void *act, size_t as, float *y, int64_t ldy);
/* packed_avx2.c */
void tokd_packed_q4_1_gemm_avx2(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q4_1_gemm_avxvnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                   const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q5_1_gemm_avx2(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q5_1_gemm_avxvnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                   const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q5_0_gemm_avx2(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q5_0_gemm_avxvnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                   const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q4_0_gemm_avx2(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q4_0_gemm_avxvnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                   const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q4_K_gemm_avx2(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q4_K_gemm_avxvnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                   const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q5_K_gemm_avx2(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q5_K_gemm_avxvnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                   const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q8_0_gemm_avx2(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q8_0_gemm_avxvnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                   const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q6_K_gemm_avx2(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q6_K_gemm_avxvnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                   const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q3_K_gemm_avx2(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q3_K_gemm_avxvnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                   const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q2_K_gemm_avx2(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q2_K_gemm_avxvnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                   const void *act, size_t as, float *y, int64_t ldy);
void tokd_packed_q8_0_gemm_avx512vnni(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                                      const void *act, size_t as, float *y, int64_t ldy);

#endif
