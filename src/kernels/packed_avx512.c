/* packed_avx512.c — the packed-layout products (packed.h) with AVX-512 VNNI.
 *
 * One call walks the activation rows eight at a time and, for each eight, every weight
 * group: a block's quants are loaded (and for Q4_0 split into nibbles) once and serve
 * all eight rows, each row's four-byte quant groups broadcast straight from memory into
 * vpdpbusd. Each row keeps one float accumulator per group of 16 outputs, so the order
 * of operations is exactly packed.h's contract: a block sum starts at the correction,
 * takes eight exact vpdpbusd steps, and is folded in with one fma. Q4_1 and Q5_1 sum
 * their unsigned values from zero and then fold each block's min term in with a second
 * fma, fmaf(mx, sy, out): the AVX2 forms' bits. */
#include <immintrin.h>
#include <string.h>

#include "kernels/packed.h"
#include "util.h"

#define TGT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
/* The 16-weight sub-block kernels (Q6_K, Q3_K, Q2_K: k16_tile) also use GFNI; packed.c
 * gives CPUs without it those types' AVX2 forms. */
#define TGT_GFNI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,gfni")))
#define INLINE static inline __attribute__((always_inline))
#define MAX_R 8
#define STREAM_MAX_ROWS (2 * MAX_R) /* activation rows up to which groups are streamed once (stream_group_rows, KQ_GEMM) */
/* How a K-quant tile prefetches its weight lines (KQ_GEMM says when each) */
enum { KQ_PF_NONE, KQ_PF_SPREAD, KQ_PF_BURST };

/* acc + vpdpbusd(w, the four activation bytes at p broadcast to every lane), the
 * broadcast folded into the instruction ({1to16}). GCC 12 emits a separate vpbroadcastd
 * for _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(x)): one more instruction and load
 * per step, and the steps are most of every kernel's loop. Same result either way. */
TGT INLINE __m512i dpbusd_bcast(__m512i acc, __m512i w, const uint8_t *p) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const uint8_t(*)[4])p));
    return acc;
}

/* A weight vector that feeds two operations (low and high nibbles), loaded once: left
 * alone GCC folds the load into both, reading every weight line twice. */
TGT INLINE __m512i load_once(const uint8_t *p) {
    __m512i v = _mm512_loadu_si512(p);
    __asm__("" : "+v"(v));
    return v;
}

/* The eight block-sum steps of activation row a (quants q, correction corr) against a
 * block's eight weight vectors, in quant-group order 0..7. */
TGT INLINE __m512i block_sum(const __m512i wv[8], const uint8_t *q, int32_t corr) {
    __m512i s = _mm512_set1_epi32(corr), t = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        s = dpbusd_bcast(s, wv[g], q + 4 * g);
        t = dpbusd_bcast(t, wv[g + 4], q + 4 * g + 16);
    }
    return _mm512_add_epi32(s, t);
}

/* v's bits moved n places up (n > 0) or down (n < 0) within each 16-bit lane, for the
 * kernels that gather one bit or bit pair of every byte at a fixed position and mask the
 * rest off; n must be a constant (immediate shifts). */
TGT INLINE __m512i shift16(__m512i v, int n) {
    return n > 0 ? _mm512_slli_epi16(v, n) : n < 0 ? _mm512_srli_epi16(v, -n) : v;
}

/* The block layouts of the 32-weight types (packed.h). Q4_1 and Q5_1 ("min" kinds) and
 * IQ4_XS keep no pairs: each block is whole lines, its scale data in the first (16 d and
 * 16 m; IQ4_XS: 16 d and 16 int8 block scales). */
enum { PK_Q8_0, PK_Q4_0, PK_Q5_0, PK_Q4_0X32, PK_Q4_1, PK_Q5_1, PK_IQ4_NL, PK_IQ4_XS };
#define PK_BLOCK_BYTES(kind)                                                                                       \
    ((kind) == PK_Q8_0 ? 16 * 34 : (kind) == PK_Q4_0 || (kind) == PK_IQ4_NL ? 16 * 18 : (kind) == PK_Q4_0X32 ? 32 * 18 \
     : (kind) == PK_Q4_1 || (kind) == PK_IQ4_XS ? 16 * 20 : (kind) == PK_Q5_1 ? 16 * 24 : 16 * 22)
/* Kinds with a min term per block (sums start at 0; the prepared row's last words are s) */
#define PK_MINS(kind) ((kind) == PK_Q4_1 || (kind) == PK_Q5_1)
/* Kinds whose blocks are whole lines, without pairs: line 0 the block's scale data */
#define PK_WHOLE(kind) (PK_MINS(kind) || (kind) == PK_IQ4_XS)
/* Kinds whose nibbles are indices into tokd_iq4_values */
#define PK_IQ4(kind) ((kind) == PK_IQ4_NL || (kind) == PK_IQ4_XS)
/* Kinds whose nibbles take a fifth bit from a vector after them (q5_0_merge) */
#define PK_FIFTH(kind) ((kind) == PK_Q5_0 || (kind) == PK_Q5_1)

/* IQ4_NL and IQ4_XS: Q4_0's nibbles are indices into tokd_iq4_values (these bytes are
 * those values plus 128; test_packed holds the kernels to the contract); the kernels look
 * them up as unsigned bytes for vpdpbusd, and the prepared row's corrections are -128 *
 * the quant sums, as Q8_0's. */
static const uint8_t iq4_values_plus128[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181, 197, 217, 241};
TGT INLINE void iq4_lookup(__m512i wv[8]) {
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)iq4_values_plus128));
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) wv[k] = _mm512_shuffle_epi8(table, wv[k]);
}
/* IQ4_XS's block scales from line 0 of a block (packed.h): the 16 rows' fp16 d times their
 * int8 block scales (the file's six bits minus 32); exact in float. */
TGT INLINE __m512 iq4_xs_scales(__m256i d, __m128i ls) {
    return _mm512_mul_ps(_mm512_cvtph_ps(d), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(ls)));
}

/* Q5_0: the fifth bits (high-bit vector hv: bit 2c + h of byte i in lane L is that of row
 * L's weight 16h + 4c + i) moved to bit 4 of the nibbles of wv[c] (h = 0) and wv[c + 4]
 * (h = 1). 16-bit shifts: the bits that cross into the other byte are masked off. */
TGT INLINE void q5_0_merge(__m512i wv[8], __m512i hv) {
    const __m512i m10 = _mm512_set1_epi8(0x10);
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) { /* bit k = 2c + h */
        const __m512i at4 = shift16(hv, 4 - k);
        const int v = (k >> 1) + 4 * (k & 1);
        wv[v] = _mm512_ternarylogic_epi32(at4, m10, wv[v], 0xEA); /* (at4 & 0x10) | wv */
    }
}

/* Block b of a group of nb blocks at w (for PK_Q4_0X32, its rows 16*half ..
 * 16*half+15): the eight weight vectors as block_sum takes them, into wv, and the 16
 * rows' scales as floats (returned). */
TGT INLINE __m512 block_weights(int kind, const uint8_t *w, int64_t b, int64_t nb, size_t block_bytes, int half,
                                __m512i wv[8]) {
    const int x32 = kind == PK_Q4_0X32;
    const uint8_t *q = w + (x32 ? (size_t)b * block_bytes + 64 + 256 * (size_t)half : tokd_pk_vectors_at(b, nb, block_bytes));
    const uint8_t *scales = w + (x32 ? (size_t)b * block_bytes + 32 * (size_t)half : tokd_pk_scales_at(b, block_bytes));
    if (PK_WHOLE(kind)) /* whole blocks: scale data, then the vectors */
        q = w + (size_t)b * block_bytes + 64, scales = w + (size_t)b * block_bytes;
    if (kind != PK_Q8_0) {
        const __m512i m4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m512i v = load_once(q + 64 * c);
            wv[c] = _mm512_and_si512(v, m4);
            wv[c + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        }
        if (PK_FIFTH(kind)) q5_0_merge(wv, _mm512_loadu_si512(q + 256));
        if (PK_IQ4(kind)) iq4_lookup(wv);
    } else {
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) wv[g] = _mm512_loadu_si512(q + 64 * g);
    }
    if (kind == PK_IQ4_XS)
        return iq4_xs_scales(_mm256_loadu_si256((const __m256i *)scales), _mm_loadu_si128((const __m128i *)(scales + 32)));
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)scales));
}

/* The min kinds' 16 mins of block b as floats (zero for the other kinds: unused). */
TGT INLINE __m512 block_mins(int kind, const uint8_t *w, int64_t b, size_t block_bytes) {
    if (!PK_MINS(kind)) return _mm512_setzero_ps();
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + (size_t)b * block_bytes + 32)));
}

/* acc plus block b (weights wv, scales dx, for the min kinds mins mx) against prepared
 * activation row a of nb blocks: the one order of operations every kernel here uses per
 * row and block (packed.h's contract). */
TGT INLINE __m512 block_row(int kind, const __m512i wv[8], __m512 dx, __m512 mx, const uint8_t *a, int64_t b, int64_t nb,
                            __m512 acc) {
    /* the prepared row's last words: the corrections, or (min kinds) each block's s */
    const __m512i s = block_sum(wv, a + b * 32, PK_MINS(kind) ? 0 : tokd_ld_i32(a + (size_t)nb * 36 + 4 * b));
    const __m512 d = _mm512_mul_ps(dx, _mm512_set1_ps(tokd_ld_f32(a + (size_t)nb * 32 + 4 * b)));
    acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(s), acc);
    if (PK_MINS(kind)) acc = _mm512_fmadd_ps(mx, _mm512_set1_ps(tokd_ld_f32(a + (size_t)nb * 36 + 4 * b)), acc);
    return acc;
}

/* R activation rows (as bytes apart) against one group of nb blocks (block_bytes each)
 * in the layout of `kind`; for PK_Q4_0X32, against its rows 16*half .. 16*half+15. */
TGT INLINE void group_tile(int64_t nb, const uint8_t *w, size_t block_bytes, const uint8_t *act, size_t as, int R,
                           int kind, int half, float *y, int64_t ldy) {
    __m512 acc[MAX_R];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        if (TOKD_PK_PF_DIST && R > 1 && half == 0) { /* the block's share of the group's bytes, ahead (decode primes pages) */
            const uint8_t *at = w + (size_t)b * block_bytes + TOKD_PK_PF_DIST;
#pragma GCC unroll 9
            for (size_t l = 0; l < block_bytes; l += 64) _mm_prefetch((const char *)at + l, _MM_HINT_T0);
        }
        __m512i wv[8];
        const __m512 dx = block_weights(kind, w, b, nb, block_bytes, half, wv), mx = block_mins(kind, w, b, block_bytes);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) acc[r] = block_row(kind, wv, dx, mx, act + (size_t)r * as, b, nb, acc[r]);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) _mm512_storeu_ps(y + r * ldy, acc[r]);
}

/* Decode reads every weight line once. A pair of Q4_0, Q5_0 or Q8_0 blocks is 9, 11 or
 * 17 whole lines (packed.h), so decode walks the blocks two at a time with every load on
 * a line, when the block count is even (then every group starts on a line). With an odd
 * count every other group lies 32 bytes off the lines, and its loads straddle them,
 * which costs a streaming core about a quarter of its read rate (BENCHMARKS.md); real
 * models' K (multiples of 64) never do that. The arithmetic per block is group_tile's
 * for one activation row, in the same order. */

/* Decode also prefetches every line TOKD_PK_DECODE_LINE_PF ahead, with prefetchnta
 * (packed.h says why). The paired kinds (Q4_0, Q5_0, Q8_0, IQ4_NL) and Q4_0's x32 blocks
 * issue them spread, through tokd_pk_prefetchnta_here: each block's lines just before
 * the block (x32: its scale line, then two lines with each quarter of its vectors), and
 * prime no page. Those that keep a whole block a step (Q4_1, Q5_1, IQ4_XS) issue the
 * block's lines at once and prime pages 16 KB ahead, not page_prime.h's 4
 * (TOKD_PK_DECODE_PRIME_SKIP, packed.h), as all of them did before the fifty-seventh
 * session. On the AMD EPYC Zen 4 host (2 cores), each kernel streaming 512 MB on two
 * threads alternated in one process with the burst and the priming (medians of 25
 * rounds): Q4_0 x32 1.02-1.11x where the probe read 32-34 GB/s and 1.20x at 55 (0.86 of
 * the probe before, 1.04 after); Q8_0 1.02-1.05x and 1.10x at 50-51 GB/s, Q5_0
 * 1.03-1.05x. Dropping only the priming gained Q4_0 nothing (0.99-1.01x), spreading
 * only the lines lost (Q4_0 0.94-0.98 of the probe, Q8_0 0.90-0.94), and Q4_1 lost
 * 1-2 % without its priming (BENCHMARKS.md, fifty-seventh session). */

/* Vectors per block after its scales (and mins): Q4_0, Q4_1 and the IQ4 kinds 4 of nibble
 * pairs, Q5_0 and Q5_1 those and one of fifth bits, Q8_0 8 of bytes. */
#define PK_VECTORS(kind) \
    ((kind) == PK_Q8_0 ? 8 : (kind) == PK_Q4_0 || (kind) == PK_Q4_1 || PK_IQ4(kind) ? 4 : 5)

/* One block of one activation row: raw holds the block's PK_VECTORS weight vectors as
 * stored, sc its 16 fp16 scales, mc (min kinds) its 16 fp16 mins (IQ4_XS: sc the 16 d,
 * mc's low 16 bytes the int8 block scales). */
TGT INLINE __m512 decode_block(int kind, const __m512i *raw, __m256i sc, __m256i mc, const uint8_t *a, int64_t b,
                               int64_t nb, __m512 acc) {
    __m512i wv[8];
    if (kind != PK_Q8_0) {
        const __m512i m4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            wv[c] = _mm512_and_si512(raw[c], m4);
            wv[c + 4] = _mm512_and_si512(_mm512_srli_epi16(raw[c], 4), m4);
        }
        if (PK_FIFTH(kind)) q5_0_merge(wv, raw[4]);
        if (PK_IQ4(kind)) iq4_lookup(wv);
    } else {
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) wv[g] = raw[g];
    }
    if (PK_MINS(kind)) return block_row(kind, wv, _mm512_cvtph_ps(sc), _mm512_cvtph_ps(mc), a, b, nb, acc);
    if (kind == PK_IQ4_XS) /* sc: the d, mc: the block scales */
        return block_row(kind, wv, iq4_xs_scales(sc, _mm256_castsi256_si128(mc)), _mm512_setzero_ps(), a, b, nb, acc);
    const __m512i s = block_sum(wv, a + b * 32, tokd_ld_i32(a + (size_t)nb * 36 + 4 * b));
    const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(sc), _mm512_set1_ps(tokd_ld_f32(a + (size_t)nb * 32 + 4 * b)));
    return _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(s), acc);
}

/* The nv vectors at q, each loaded once. */
TGT INLINE void load_vectors(__m512i *raw, const uint8_t *q, int nv) {
#pragma GCC unroll 8
    for (int g = 0; g < nv; g++) raw[g] = load_once(q + 64 * g);
}

/* One group, one activation row. */
TGT INLINE void decode_group(int kind, int64_t nb, const uint8_t *w, const uint8_t *a, float *y) {
    const size_t bb = PK_BLOCK_BYTES(kind);
    const int nv = PK_VECTORS(kind);
    __m512 acc = _mm512_setzero_ps();
    __m512i raw[8];
    int64_t b = 0;
    if (PK_WHOLE(kind)) { /* no pairs: line 0 the block's scale data, then its vectors */
        for (; b < nb; b++, w += bb) {
            tokd_page_prime(w + TOKD_PK_DECODE_PRIME_SKIP, bb);
            for (size_t l = 0; l < bb; l += 64) _mm_prefetch((const char *)w + TOKD_PK_DECODE_LINE_PF + l, _MM_HINT_NTA);
            const __m512i sm = load_once(w);
            load_vectors(raw, w + 64, nv);
            acc = decode_block(kind, raw, _mm512_castsi512_si256(sm), _mm512_extracti64x4_epi64(sm, 1), a, b, nb, acc);
        }
    }
    const size_t pair_lines = 2 * bb / 64; /* whole lines (packed.h) */
    for (; b + 2 <= nb; b += 2, w += 2 * bb) { /* line 0: both blocks' scales; then their vectors */
        for (size_t l = 0; l < pair_lines / 2; l++) tokd_pk_prefetchnta_here(w + TOKD_PK_DECODE_LINE_PF + 64 * l);
        const __m512i sc = load_once(w);
        load_vectors(raw, w + 64, nv);
        acc = decode_block(kind, raw, _mm512_castsi512_si256(sc), _mm256_setzero_si256(), a, b, nb, acc);
        for (size_t l = pair_lines / 2; l < pair_lines; l++) tokd_pk_prefetchnta_here(w + TOKD_PK_DECODE_LINE_PF + 64 * l);
        load_vectors(raw, w + 64 + 64 * nv, nv);
        acc = decode_block(kind, raw, _mm512_extracti64x4_epi64(sc, 1), _mm256_setzero_si256(), a, b + 1, nb, acc);
    }
    if (b < nb) { /* the last block, alone: scales, then vectors */
        load_vectors(raw, w + 32, nv);
        acc = decode_block(kind, raw, _mm256_loadu_si256((const __m256i *)w), _mm256_setzero_si256(), a, b, nb, acc);
    }
    _mm512_storeu_ps(y, acc);
}

/* One 32-row Q4_0 group (packed.h: x32), one activation row: each block's nine lines
 * prefetched as above, and each activation quant group broadcast once into a
 * register for both halves' vpdpbusd. Each half's arithmetic is decode_block's. */
TGT INLINE void decode_group_x32(int64_t nb, const uint8_t *w, const uint8_t *a, float *y) {
    const size_t bb = PK_BLOCK_BYTES(PK_Q4_0X32);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
    for (int64_t b = 0; b < nb; b++, w += bb) {
        tokd_pk_prefetchnta_here(w + TOKD_PK_DECODE_LINE_PF); /* the vectors' lines by quarters below */
        const __m512i sc = load_once(w);
        const int32_t corr = tokd_ld_i32(a + (size_t)nb * 36 + 4 * b);
        __m512i s0 = _mm512_set1_epi32(corr), s1 = s0, t0 = _mm512_setzero_si512(), t1 = t0;
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            tokd_pk_prefetchnta_here(w + TOKD_PK_DECODE_LINE_PF + 64 + 64 * c);
            tokd_pk_prefetchnta_here(w + TOKD_PK_DECODE_LINE_PF + 320 + 64 * c);
            const __m512i v0 = load_once(w + 64 + 64 * c), v1 = load_once(w + 320 + 64 * c);
            const __m512i lo = _mm512_set1_epi32(tokd_ld_i32(a + b * 32 + 4 * c));
            const __m512i hi = _mm512_set1_epi32(tokd_ld_i32(a + b * 32 + 4 * c + 16));
            s0 = _mm512_dpbusd_epi32(s0, _mm512_and_si512(v0, m4), lo);
            t0 = _mm512_dpbusd_epi32(t0, _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4), hi);
            s1 = _mm512_dpbusd_epi32(s1, _mm512_and_si512(v1, m4), lo);
            t1 = _mm512_dpbusd_epi32(t1, _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4), hi);
        }
        const __m512 dy = _mm512_set1_ps(tokd_ld_f32(a + (size_t)nb * 32 + 4 * b));
        const __m512 d0 = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(sc)), dy);
        const __m512 d1 = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(sc, 1)), dy);
        acc0 = _mm512_fmadd_ps(d0, _mm512_cvtepi32_ps(_mm512_add_epi32(s0, t0)), acc0);
        acc1 = _mm512_fmadd_ps(d1, _mm512_cvtepi32_ps(_mm512_add_epi32(s1, t1)), acc1);
    }
    _mm512_storeu_ps(y, acc0);
    _mm512_storeu_ps(y + 16, acc1);
}

/* Decode walks each group as one stream, with the line prefetches above (the K-quant
 * tiles below spread theirs over each super-block: packed.h, tokd_pk_prefetch_part).
 * Q4_0 groups once went two at a time as two prefetched streams when longer than 32 KB:
 * with priming, one stream was 20 % faster for Q4_0 and equal for Q8_0 (BENCHMARKS.md,
 * seventh session). */

/* A few activation rows (1..MAX_R; packed_gemm takes up to STREAM_MAX_ROWS, a batched
 * decode step of a few sequences, in passes of MAX_R) against groups that come from
 * memory once. group_tile walks a 32-row group's halves one after the other and
 * prefetches only a fixed distance ahead with t0, which suits prefill, where a tile is
 * reused by hundreds of rows from cache; for a few rows the weights are read once, so
 * this walks each block's lines once for every row and half, with decode's spread
 * prefetchnta line prefetches and no page priming (on the Zen 4 host, 2 and 4 rows
 * streaming 512 MB on two threads alternated in one process with the burst and the
 * priming, medians of 25: Q4_0 1.03-1.20x, Q8_0 1.05-1.13x, Q4_1 and Q5_0 0.92-1.04x,
 * neutral; fifty-seventh session). Each row's arithmetic per block and half is
 * group_tile's (block_weights, block_row, blocks in order), so the bits are group_tile's
 * and the one-row decode's: batch invariance holds. */
TGT INLINE void stream_group_rows(int kind, int64_t nb, const uint8_t *w, size_t block_bytes, const uint8_t *act,
                                  size_t as, int R, float *y, int64_t ldy) {
    const int halves = kind == PK_Q4_0X32 ? 2 : 1;
    __m512 acc[2][MAX_R];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) acc[0][r] = acc[1][r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = w + (size_t)b * block_bytes; /* the stream's position (pairs of blocks are contiguous) */
        const size_t lines = (block_bytes + 63) / 64;
#pragma GCC unroll 2
        for (int half = 0; half < halves; half++) {
            /* the lines of what this half loads (x32: the scale line and rows 0-15's four
               vectors, then rows 16-31's), TOKD_PK_DECODE_LINE_PF ahead, as decode */
            const size_t l0 = half ? 5 : 0, l1 = halves == 2 && !half ? 5 : lines;
            for (size_t l = l0; l < l1; l++) tokd_pk_prefetchnta_here(blk + TOKD_PK_DECODE_LINE_PF + 64 * l);
            __m512i wv[8];
            const __m512 dx = block_weights(kind, w, b, nb, block_bytes, half, wv), mx = block_mins(kind, w, b, block_bytes);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++)
                acc[half][r] = block_row(kind, wv, dx, mx, act + (size_t)r * as, b, nb, acc[half][r]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        for (int half = 0; half < halves; half++) _mm512_storeu_ps(y + r * ldy + 16 * half, acc[half][r]);
}

#define STREAM_CASE(RR)                                                                                 \
    case RR:                                                                                            \
        stream_group_rows(kind, nb, w, block_bytes, act, as, RR, y, ldy);                               \
        break;

/* One group against R (1..MAX_R) activation rows, R a constant in each case. */
TGT INLINE void stream_group(int kind, int64_t nb, const uint8_t *w, size_t block_bytes, const uint8_t *act, size_t as,
                             int R, float *y, int64_t ldy) {
    switch (R) {
        STREAM_CASE(1)
        STREAM_CASE(2)
        STREAM_CASE(3)
        STREAM_CASE(4)
        STREAM_CASE(5)
        STREAM_CASE(6)
        STREAM_CASE(7)
        STREAM_CASE(8)
    }
}

#define TILE_CASE(RR)                                                                           \
    case RR:                                                                                    \
        for (int64_t G = 0; G < n_groups; G++)                                                  \
            for (int h = 0; h < halves; h++)                                                    \
                group_tile(nb, wb + (size_t)G * group_bytes, block_bytes, a, as, RR, kind, h, yr + rows * G + 16 * h, ldy); \
        break;

TGT INLINE void packed_gemm(int kind, int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na,
                            const void *act, size_t as, float *y, int64_t ldy) {
    const int64_t nb = K / 32;
    const size_t block_bytes = PK_BLOCK_BYTES(kind);
    const uint8_t *wb = w;
    const int halves = kind == PK_Q4_0X32 ? 2 : 1, rows = 16 * halves;
    if (na == 1) {
        for (int64_t G = 0; G < n_groups; G++) {
            if (kind == PK_Q4_0X32) decode_group_x32(nb, wb + (size_t)G * group_bytes, act, y + 32 * G);
            else decode_group(kind, nb, wb + (size_t)G * group_bytes, act, y + 16 * G);
        }
        return;
    }
    if (na <= STREAM_MAX_ROWS) { /* each group from memory once, then its second pass of rows from cache */
        for (int64_t G = 0; G < n_groups; G++)
            for (int64_t r0 = 0; r0 < na; r0 += MAX_R)
                stream_group(kind, nb, wb + (size_t)G * group_bytes, block_bytes, (const uint8_t *)act + (size_t)r0 * as, as,
                             na - r0 < MAX_R ? (int)(na - r0) : MAX_R, y + r0 * ldy + rows * G, ldy);
        return;
    }
    for (int64_t r0 = 0; r0 < na; r0 += MAX_R) {
        const uint8_t *a = (const uint8_t *)act + (size_t)r0 * as;
        float *yr = y + r0 * ldy;
        switch (na - r0 >= MAX_R ? MAX_R : (int)(na - r0)) {
            TILE_CASE(8)
            TILE_CASE(7)
            TILE_CASE(6)
            TILE_CASE(5)
            TILE_CASE(4)
            TILE_CASE(3)
            TILE_CASE(2)
            TILE_CASE(1)
        }
    }
}

/* The exported kernels of the 32-weight kinds (packed.h), one per kind. */
#define PK_GEMM_ENTRY(NAME, KIND)                                                                                \
    TGT void NAME(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na, const void *act,   \
                  size_t as, float *y, int64_t ldy) {                                                            \
        packed_gemm(KIND, K, n_groups, w, group_bytes, na, act, as, y, ldy);                                     \
    }
PK_GEMM_ENTRY(tokd_packed_q4_0x32_gemm_avx512vnni, PK_Q4_0X32)
PK_GEMM_ENTRY(tokd_packed_q4_0_gemm_avx512vnni, PK_Q4_0)
PK_GEMM_ENTRY(tokd_packed_q8_0_gemm_avx512vnni, PK_Q8_0)
PK_GEMM_ENTRY(tokd_packed_q5_0_gemm_avx512vnni, PK_Q5_0)
PK_GEMM_ENTRY(tokd_packed_q4_1_gemm_avx512vnni, PK_Q4_1)
PK_GEMM_ENTRY(tokd_packed_q5_1_gemm_avx512vnni, PK_Q5_1)
PK_GEMM_ENTRY(tokd_packed_iq4_nl_gemm_avx512vnni, PK_IQ4_NL)
PK_GEMM_ENTRY(tokd_packed_iq4_xs_gemm_avx512vnni, PK_IQ4_XS)

/* Activation row preparation (packed.h), the same bytes as tokd_packed_prep_ref: the
 * Q8_0 activation quantiser (amax, q = round-to-even(x * 127/amax) within [-127, 127],
 * d = amax/127 as fp16) in registers. vmaxps returns its second operand when the first
 * is NaN, as fmaxf ignores a NaN |x|; vcvtps2dq rounds to even and turns NaN into
 * INT_MIN, which the clamp makes -127, as the scalar quantiser does. */
/* Sixteen vectors' horizontal reductions at once: lane 4k + j of the result reduces
 * vector 4j + k (pairs of 256-bit halves, then 128-bit chunks, then lanes within
 * chunks). For the exact operations used here (max of non-NaN floats, integer sums) any
 * order gives the same value; PREP_ORDER puts vector b's result in lane b. */
#define FOLD16(T, OP, r, out)                                                                          \
    do {                                                                                               \
        T r8_[8], r4_[4], r2_[2];                                                                      \
        for (int j_ = 0; j_ < 8; j_++)                                                                 \
            r8_[j_] = OP(_mm512_shuffle_f32x4(r[2 * j_], r[2 * j_ + 1], 0x44),                         \
                         _mm512_shuffle_f32x4(r[2 * j_], r[2 * j_ + 1], 0xEE));                        \
        for (int j_ = 0; j_ < 4; j_++)                                                                 \
            r4_[j_] = OP(_mm512_shuffle_f32x4(r8_[2 * j_], r8_[2 * j_ + 1], 0x88),                     \
                         _mm512_shuffle_f32x4(r8_[2 * j_], r8_[2 * j_ + 1], 0xDD));                    \
        for (int j_ = 0; j_ < 2; j_++)                                                                 \
            r2_[j_] = OP(_mm512_shuffle_ps(r4_[2 * j_], r4_[2 * j_ + 1], _MM_SHUFFLE(1, 0, 1, 0)),     \
                         _mm512_shuffle_ps(r4_[2 * j_], r4_[2 * j_ + 1], _MM_SHUFFLE(3, 2, 3, 2)));    \
        out = OP(_mm512_shuffle_ps(r2_[0], r2_[1], _MM_SHUFFLE(2, 0, 2, 0)),                           \
                 _mm512_shuffle_ps(r2_[0], r2_[1], _MM_SHUFFLE(3, 1, 3, 1)));                          \
        out = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), out); \
    } while (0)
#define PREP_MAX(a, b) _mm512_max_ps(a, b)
#define PREP_ADD(a, b) _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)))

TGT void tokd_packed_prep_blocks_avx512(const float *x, void *dst, int64_t K, int64_t b0, int64_t b1, int32_t bias) {
    const int64_t nb = K / 32;
    uint8_t *qs = dst;
    float *dy = (float *)(qs + nb * 32);
    int32_t *corr = (int32_t *)(dy + nb);
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    int64_t b = b0;
    x += b0 * 32;
    /* sixteen blocks at a time: their maxima, scales and sums reduced together (each
       block's bytes are those of the one-block loop below) */
    for (; b + 16 <= b1; b += 16, x += 512) {
        __m512 m[16], s[16];
        for (int i = 0; i < 16; i++)
            m[i] = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + 32 * i + 16)),
                                 _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + 32 * i)), _mm512_setzero_ps()));
        __m512 amax;
        FOLD16(__m512, PREP_MAX, m, amax);
        const __m512 idv = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_NEQ_UQ),
                                               _mm512_set1_ps(127.f), amax);
        _mm512_storeu_ps(dy + b, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_div_ps(amax, _mm512_set1_ps(127.f)),
                                                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
        float id[16];
        _mm512_storeu_ps(id, idv);
        for (int i = 0; i < 16; i++) {
            const __m512 vid = _mm512_set1_ps(id[i]);
            __m512i q0 = _mm512_min_epi32(hi, _mm512_max_epi32(lo, _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * i), vid))));
            __m512i q1 = _mm512_min_epi32(hi, _mm512_max_epi32(lo, _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * i + 16), vid))));
            _mm_storeu_si128((__m128i *)(qs + (b + i) * 32), _mm512_cvtepi32_epi8(q0));
            _mm_storeu_si128((__m128i *)(qs + (b + i) * 32 + 16), _mm512_cvtepi32_epi8(q1));
            s[i] = _mm512_castsi512_ps(_mm512_add_epi32(q0, q1));
        }
        __m512 sums;
        FOLD16(__m512, PREP_ADD, s, sums);
        if (bias == TOKD_PK_BIAS_S) /* Q4_1, Q5_1: Q8_1's s, fp16(d before its rounding * the sum) */
            _mm512_storeu_ps(corr + b, _mm512_cvtph_ps(_mm512_cvtps_ph(
                                           _mm512_mul_ps(_mm512_div_ps(amax, _mm512_set1_ps(127.f)),
                                                         _mm512_cvtepi32_ps(_mm512_castps_si512(sums))),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
        else
            _mm512_storeu_si512(corr + b, _mm512_mullo_epi32(_mm512_castps_si512(sums), _mm512_set1_epi32(-bias)));
    }
    for (; b < b1; b++, x += 32) {
        __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        __m512 m = _mm512_max_ps(_mm512_abs_ps(v1), _mm512_max_ps(_mm512_abs_ps(v0), _mm512_setzero_ps()));
        float amax = _mm512_reduce_max_ps(m);
        float id = amax != 0 ? 127.f / amax : 0.0f;
        const __m512 vid = _mm512_set1_ps(id);
        __m512i q0 = _mm512_min_epi32(hi, _mm512_max_epi32(lo, _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid))));
        __m512i q1 = _mm512_min_epi32(hi, _mm512_max_epi32(lo, _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid))));
        _mm_storeu_si128((__m128i *)(qs + b * 32), _mm512_cvtepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(qs + b * 32 + 16), _mm512_cvtepi32_epi8(q1));
        dy[b] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(amax / 127.f), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))); /* F16C: IEEE, as tokd_f32_to_f16 */
        const int32_t qsum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
        if (bias == TOKD_PK_BIAS_S) {
            const float sy = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(amax / 127.f * (float)qsum),
                                                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
            memcpy(&corr[b], &sy, 4);
        } else {
            corr[b] = -bias * qsum;
        }
    }
}
void tokd_packed_prep_avx512(const float *x, void *dst, int64_t K, int32_t bias) {
    tokd_packed_prep_blocks_avx512(x, dst, K, 0, K / 32, bias);
}

/* The K-quants with mins (Q2_K, Q4_K): per activation row of a super-block's tile (the
 * prepared row's float d at +256, its int16 pair sums at +260), the mins term of the
 * n_pairs (min 2i, min 2i+1) pairs mp through vpdpwssd, and the file layout's float step
 * acc += (dx*dy) * sumi - (dmx*dy) * summ. */
TGT INLINE void mins_fold(int R, int n_pairs, const __m512i *mp, const __m512i *isum, __m512 dx, __m512 dmx,
                          const uint8_t *a0, size_t as, __m512 *acc) {
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        const uint8_t *a = a0 + (size_t)r * as;
        __m512i summ = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int i = 0; i < n_pairs; i++) summ = _mm512_dpwssd_epi32(summ, mp[i], _mm512_set1_epi32(tokd_ld_i32(a + 260 + 4 * i)));
        const __m512 dy = _mm512_set1_ps(tokd_ld_f32(a + 256));
        __m512 d = _mm512_mul_ps(dx, dy), dm = _mm512_mul_ps(dmx, dy);
        __m512 term = _mm512_sub_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(isum[r])), _mm512_mul_ps(dm, _mm512_cvtepi32_ps(summ)));
        acc[r] = _mm512_add_ps(acc[r], term);
    }
}

/* ---- Q6_K, Q3_K and Q2_K ----
 * Per super-block and sub-block j (16 weights = four groups of four): the four groups'
 * unsigned values (Q6_K: 6-bit, q + 32, from the nibble and top-bit vectors; Q3_K:
 * 3-bit, q + 4, from the two-bit and high-bit vectors, one ternary logic op merging the
 * top bits; Q2_K: the two-bit values as they are) are rebuilt, then each activation
 * row's sum starts at its correction (-32 or -4 * the sub-block's activation sum; 0 for
 * Q2_K), takes four vpdpbusd steps, and is multiplied by the 16 rows' scales into the
 * super-block's integer sum. Q2_K's mins term is eight vpdpwssd of (min 2i, min 2i+1)
 * pairs with the activation's 16-element sums, as Q4_K's. The float arithmetic is the
 * file layout's: out + (dx*dy) * sumi (Q2_K: - (dmx*dy) * summ). */

#define Q6K_ACT 324 /* prepared activation bytes per super-block (packed.c) */
#define Q6K_SB (16 * 210)
#define Q3K_SB (32 + 256 + 1024 + 512)
#define Q2K_SB (16 * 84)
enum { K16_Q6, K16_Q3, K16_Q2 };

/* Q6_K: the 16 rows' unsigned values (q + 32) of sub-block j's four groups of four
 * weights, from its three vectors at v (packed.c, q6_K_pack): the first three groups are
 * bits 0-5 of each vector, the fourth is put together from their bits 6-7. One GF(2)
 * affine transform per vector moves its two top bits to bits 0-1, 2-3 or 4-5 of each
 * byte and clears the others (row 7 - i of the 8x8 bit matrix picks output bit i's
 * input bit), and one ternary OR merges the three. Streaming Q6_K matrices from memory
 * on two threads against the read probe, four runs of 151 alternated rounds (TinyLlama's
 * K = 2048): this kernel 0.955-1.046 of the probe, the one before with the file's
 * nibble and top-bit vectors 0.915-0.970, and this layout with 16-bit shifts and masks
 * in place of GFNI 0.873-0.940. So it needs GFNI (packed.c falls back to the AVX2 form
 * without it). */
TGT_GFNI INLINE void q6k_groups(const uint8_t *v, __m512i u[4]) {
    const __m512i a = load_once(v), b = load_once(v + 64), c = load_once(v + 128);
    const __m512i m3f = _mm512_set1_epi8(0x3F);
    u[0] = _mm512_and_si512(a, m3f);
    u[1] = _mm512_and_si512(b, m3f);
    u[2] = _mm512_and_si512(c, m3f);
    /* input bits 6, 7 to output bits 0, 1 (a), 2, 3 (b), 4, 5 (c) */
    const __m512i ta = _mm512_gf2p8affine_epi64_epi8(a, _mm512_set1_epi64((long long)0x4080000000000000ull), 0);
    const __m512i tb = _mm512_gf2p8affine_epi64_epi8(b, _mm512_set1_epi64((long long)0x0000408000000000ull), 0);
    const __m512i tc = _mm512_gf2p8affine_epi64_epi8(c, _mm512_set1_epi64((long long)0x0000000040800000ull), 0);
    u[3] = _mm512_ternarylogic_epi32(ta, tb, tc, 0xFE); /* ta | tb | tc */
}
/* Q2_K / Q3_K, group g = 8p + t (weights 4g..4g+3): bits 2s..2s+1 (s = p % 4) of two-bit
 * vector 8(p/4) + t (v); Q3_K with bit p of high-bit vector t (hv) moved to bit 2. */
TGT INLINE __m512i q2_group(__m512i v, int s) {
    return _mm512_and_si512(shift16(v, -2 * s), _mm512_set1_epi8(0x03));
}
TGT INLINE __m512i q3k_group(__m512i v, __m512i hv, int p, int s) {
    return _mm512_ternarylogic_epi32(shift16(hv, 2 - p), _mm512_set1_epi8(0x04), q2_group(v, s), 0xEA); /* (hv & 4) | lo */
}

TGT_GFNI INLINE void k16_tile(int kind, int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R, int pf,
                              float *y, int64_t ldy) {
    __m512 acc[MAX_R];
    const size_t sb_bytes = kind == K16_Q6 ? Q6K_SB : kind == K16_Q3 ? Q3K_SB : Q2K_SB;
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *lin = w + (size_t)b * sb_bytes; /* the super-block's share of the group's bytes */
        if (pf == KQ_PF_BURST) tokd_pk_kq_prefetch(lin, sb_bytes, TOKD_PK_PF_DIST);
        /* the header: d (and Q2_K's dmin); the body: the scales, then Q6_K's three vectors
           a sub-block, Q3_K's two-bit and high-bit vectors, or Q2_K's two-bit vectors (Q6_K
           and Q3_K super-blocks go in pairs, packed.h) */
        const uint8_t *hdr = kind == K16_Q2 ? lin : w + tokd_pk_scales_at(b, sb_bytes);
        const uint8_t *sc = kind == K16_Q2 ? lin + 64 : w + tokd_pk_vectors_at(b, nb, sb_bytes), *q = sc + 256;
        const uint8_t *top = q + 1024; /* Q3_K's high-bit vectors */
        __m512i isum[MAX_R];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) isum[r] = _mm512_setzero_si512();
        /* Q3_K and Q2_K: sub-blocks that share their vectors go together, so that each
           line is loaded once (else GCC folds a load into every use): sub-block j = 2p +
           par takes two-bit vectors 8(p / 4) + 4 par + i and high-bit vectors 4 par + i
           (group i), so the four p of one p / 4 and one par share them. The integer sums
           are exact, so their order changes no bit. Q6_K's sub-blocks go in order. */
        __m512i va[4], vb[4];
#pragma GCC unroll 16
        for (int jo = 0; jo < 16; jo++) {
            int j;
            __m512i u[4];
            if (kind == K16_Q6) {
                j = jo;
                q6k_groups(q + 192 * j, u);
            } else {
                const int half = jo >> 3, par = (jo >> 2) & 1, k = jo & 3, p = 4 * half + k;
                j = 2 * p + par;
                if (k == 0) {
#pragma GCC unroll 4
                    for (int i = 0; i < 4; i++) {
                        va[i] = load_once(q + 64 * (8 * half + 4 * par + i));
                        vb[i] = kind == K16_Q3 ? load_once(top + 64 * (4 * par + i)) : va[i];
                    }
                }
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++) u[i] = kind == K16_Q3 ? q3k_group(va[i], vb[i], p, k) : q2_group(va[i], k);
            }
            if (pf == KQ_PF_SPREAD) tokd_pk_prefetch_part(lin, sb_bytes, TOKD_PK_PF_DIST, jo, 16, TOKD_PK_NTA);
            const __m512i u0 = u[0], u1 = u[1], u2 = u[2], u3 = u[3];
            const __m128i scb = _mm_loadu_si128((const __m128i *)(sc + 16 * j));
            const __m512i scj = kind == K16_Q2 ? _mm512_and_si512(_mm512_cvtepu8_epi32(scb), _mm512_set1_epi32(0x0F))
                                               : _mm512_cvtepi8_epi32(scb);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                const uint8_t *a = act + (size_t)r * as + (size_t)b * Q6K_ACT;
                __m512i s = kind == K16_Q2 ? _mm512_setzero_si512() : _mm512_set1_epi32(tokd_ld_i32(a + 260 + 4 * j));
                /* intrinsics here: with dpbusd_bcast this loop ran ~11 % slower in L2 */
                s = _mm512_dpbusd_epi32(s, u0, _mm512_set1_epi32(tokd_ld_i32(a + 16 * j)));
                s = _mm512_dpbusd_epi32(s, u1, _mm512_set1_epi32(tokd_ld_i32(a + 16 * j + 4)));
                s = _mm512_dpbusd_epi32(s, u2, _mm512_set1_epi32(tokd_ld_i32(a + 16 * j + 8)));
                s = _mm512_dpbusd_epi32(s, u3, _mm512_set1_epi32(tokd_ld_i32(a + 16 * j + 12)));
                isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(s, scj));
            }
        }
        const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)hdr));
        if (kind == K16_Q2) {
            /* mins (high nibbles of the scale bytes) as (m 2i, m 2i+1) int16 pairs per row lane */
            __m512i mp[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) {
                __m512i lo = _mm512_srli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(sc + 32 * i))), 4);
                __m512i hi = _mm512_srli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(sc + 32 * i + 16))), 4);
                mp[i] = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
            }
            const __m512 dmx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(hdr + 32)));
            mins_fold(R, 8, mp, isum, dx, dmx, act + (size_t)b * Q6K_ACT, as, acc);
        } else {
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                const uint8_t *a = act + (size_t)r * as + (size_t)b * Q6K_ACT;
                __m512 d = _mm512_mul_ps(dx, _mm512_set1_ps(tokd_ld_f32(a + 256)));
                acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum[r])));
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) _mm512_storeu_ps(y + r * ldy, acc[r]);
}

/* The K-quant kernels' entry points. How a tile prefetches its weight lines (pf):
 * KQ_PF_SPREAD, spread over each super-block with prefetchnta (packed.h,
 * tokd_pk_prefetch_part), for groups read from memory once; KQ_PF_BURST, every line
 * of the super-block at once with prefetcht0, for prefill, whose later row tiles find the
 * group in L2; KQ_PF_NONE, for a group just read. Up to STREAM_MAX_ROWS activation rows
 * (decode, one sequence or a batch of a few) go group by group, every row tile against
 * the group before the next group (the first tile streams it, the others find it in
 * cache), as stream_group_rows does for the 32-weight kinds; more rows (prefill) go tile
 * by tile, every group against each tile. Each output's arithmetic is the tile's either
 * way, so the bits do not depend on the order. On the Zen 4 host, 2 to 16 rows
 * streaming 512 MB on two threads, alternated in one process with the tile-by-tile
 * order and its burst (medians of 25): Q4_K 1.09-1.76x, Q6_K 1.23-1.85x; one row
 * 0.98-1.00x. (The harness passes 128 groups a call, so past 8 rows its second tile read
 * them from memory again; in a model's decode a thread claims at most an eighth of its
 * share at a time, which for most matrices stays in L2 between tiles.) Whole runs
 * (`tokd bench -p 0 -n 32 -s 1,2,4,16 -t 2`): Q4_K_M 4 sequences 132 -> 186-192 tok/s,
 * 16 sequences 185-195 -> 257-275; Q6_K 16 sequences 151 -> 231 (BENCHMARKS.md,
 * fifty-seventh session). */
#define KQ_CASE(TILE_FN, RR, G0, G1, PF)                                                                     \
    case RR:                                                                                               \
        for (int64_t G = (G0); G < (G1); G++)                                                              \
            TILE_FN(nb, (const uint8_t *)w + (size_t)G * group_bytes, a, as, RR, PF, y + r0 * ldy + 16 * G, ldy); \
        break;
#define KQ_SWITCH(TILE_FN, G0, G1, PF)                                                                       \
    switch (na - r0 >= MAX_R ? MAX_R : (int)(na - r0)) {                                                   \
        KQ_CASE(TILE_FN, 8, G0, G1, PF)                                                                    \
        KQ_CASE(TILE_FN, 7, G0, G1, PF)                                                                    \
        KQ_CASE(TILE_FN, 6, G0, G1, PF)                                                                    \
        KQ_CASE(TILE_FN, 5, G0, G1, PF)                                                                    \
        KQ_CASE(TILE_FN, 4, G0, G1, PF)                                                                    \
        KQ_CASE(TILE_FN, 3, G0, G1, PF)                                                                    \
        KQ_CASE(TILE_FN, 2, G0, G1, PF)                                                                    \
        KQ_CASE(TILE_FN, 1, G0, G1, PF)                                                                    \
    }
#define KQ_GEMM(TARGET, NAME, TILE_FN)                                                                          \
    TARGET void NAME(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na, const void *act,\
                  size_t as, float *y, int64_t ldy) {                                                           \
        const int64_t nb = K / 256;                                                                             \
        if (na <= STREAM_MAX_ROWS) {                                                                            \
            for (int64_t g = 0; g < n_groups; g++)                                                              \
                for (int64_t r0 = 0; r0 < na; r0 += MAX_R) {                                                    \
                    const uint8_t *a = (const uint8_t *)act + (size_t)r0 * as;                                  \
                    KQ_SWITCH(TILE_FN, g, g + 1, r0 ? KQ_PF_NONE : KQ_PF_SPREAD)                                \
                }                                                                                               \
            return;                                                                                             \
        }                                                                                                       \
        for (int64_t r0 = 0; r0 < na; r0 += MAX_R) {                                                            \
            const uint8_t *a = (const uint8_t *)act + (size_t)r0 * as;                                          \
            KQ_SWITCH(TILE_FN, 0, n_groups, KQ_PF_BURST)                                                        \
        }                                                                                                       \
    }
TGT_GFNI INLINE void q6k_tile(int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R, int pf, float *y,
                              int64_t ldy) {
    k16_tile(K16_Q6, nb, w, act, as, R, pf, y, ldy);
}
TGT_GFNI INLINE void q3k_tile(int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R, int pf, float *y,
                              int64_t ldy) {
    k16_tile(K16_Q3, nb, w, act, as, R, pf, y, ldy);
}
TGT_GFNI INLINE void q2k_tile(int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R, int pf, float *y,
                              int64_t ldy) {
    k16_tile(K16_Q2, nb, w, act, as, R, pf, y, ldy);
}
KQ_GEMM(TGT_GFNI, tokd_packed_q6_K_gemm_avx512vnni, q6k_tile)
KQ_GEMM(TGT_GFNI, tokd_packed_q3_K_gemm_avx512vnni, q3k_tile)
KQ_GEMM(TGT_GFNI, tokd_packed_q2_K_gemm_avx512vnni, q2k_tile)

/* ---- Q4_K and Q5_K ----
 * Per super-block: sub-block j's eight quant groups are the low (j even) or high (j odd)
 * nibbles of vectors 8(j/2) .. 8(j/2)+7 (Q5_K: with bit j of high-bit vector t moved to
 * bit 4 of group t); each activation row's eight vpdpbusd give the 16 rows' sums,
 * multiplied by their scales into the integer sum; the mins term is four vpdpwssd of
 * (min 2i, min 2i+1) pairs with the activation's 32-element sums. Float steps as the
 * file layout's vec_dot: out + ((dx*dy) * sumi - (dmx*dy) * summ). */

#define Q4K_ACT 276
#define Q4K_SB 2304
#define Q5K_SB (Q4K_SB + 512)

/* Q5_K's fifth bits of sub-block j, group t, at bit 4 of each byte (16-bit shifts: the
 * bits that cross into the other byte of a word are masked off), merged into nibbles u. */
TGT INLINE __m512i q5k_merge(__m512i u, const uint8_t *qh, int t, int j) {
    const __m512i hv = _mm512_loadu_si512(qh + 64 * t);
    const __m512i at4 = shift16(hv, 4 - j);
    return _mm512_ternarylogic_epi32(at4, _mm512_set1_epi8(0x10), u, 0xEA); /* (at4 & 0x10) | u */
}

/* The 16 rows' six-bit scales and mins of a super-block (packed.c: lane L of the three
 * vectors at p holds row L's 12 file bytes), as bytes: lane bytes 0..3 of lo[0] are the
 * scales of sub-blocks 0..3, of hi[0] those of 4..7; lo[1] and hi[1] the mins. Sub-blocks
 * 4..7 take their low four bits from the third vector and their top two from the top of
 * the first (scales) or second (mins), as tokd_k4_scale_min. */
TGT INLINE void k4_scales(const uint8_t *p, __m512i lo[2], __m512i hi[2]) {
    const __m512i s = _mm512_loadu_si512(p), m = _mm512_loadu_si512(p + 64), x = _mm512_loadu_si512(p + 128);
    const __m512i low6 = _mm512_set1_epi8(0x3F), top2 = _mm512_set1_epi8((char)0xC0), nib = _mm512_set1_epi8(0x0F);
    lo[0] = _mm512_and_si512(s, low6);
    lo[1] = _mm512_and_si512(m, low6);
    /* (x & 0x0F) | top two bits moved to bits 4-5 (the masks keep each byte's own bits) */
    hi[0] = _mm512_ternarylogic_epi32(x, nib, _mm512_srli_epi32(_mm512_and_si512(s, top2), 2), 0xEA);
    hi[1] = _mm512_ternarylogic_epi32(_mm512_srli_epi32(x, 4), nib, _mm512_srli_epi32(_mm512_and_si512(m, top2), 2), 0xEA);
}
/* Byte k of every 32-bit lane of v, zero-extended. */
TGT INLINE __m512i k4_byte(__m512i v, int k) {
    const __m512i at = _mm512_set_epi32(12, 8, 4, 0, 12, 8, 4, 0, 12, 8, 4, 0, 12, 8, 4, 0);
    return _mm512_shuffle_epi8(v, _mm512_add_epi32(at, _mm512_set1_epi32((int)(0x80808000u | (unsigned)k))));
}
/* Bytes k and k+1 of every 32-bit lane of v as two zero-extended int16: (min k, min k+1)
 * pairs for vpdpwssd. */
TGT INLINE __m512i k4_pair16(__m512i v, int k) {
    const __m512i at = _mm512_set_epi32(0x0C000C, 0x080008, 0x040004, 0, 0x0C000C, 0x080008, 0x040004, 0, 0x0C000C,
                                        0x080008, 0x040004, 0, 0x0C000C, 0x080008, 0x040004, 0);
    return _mm512_shuffle_epi8(v, _mm512_add_epi32(at, _mm512_set1_epi32((int)(0x80008000u | ((unsigned)(k + 1) << 16) | (unsigned)k))));
}

TGT INLINE void k4_tile(int q5, int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R, int pf, float *y,
                        int64_t ldy) {
    __m512 acc[MAX_R];
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const size_t sb_bytes = q5 ? Q5K_SB : Q4K_SB;
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++, w += sb_bytes) {
        if (pf == KQ_PF_BURST) tokd_pk_kq_prefetch(w, sb_bytes, TOKD_PK_PF_DIST);
        const uint8_t *q = w + 256, *qh = w + Q4K_SB;
        __m512i lo[2], hi[2]; /* scales and mins */
        k4_scales(w + 64, lo, hi);
        __m512i isum[MAX_R];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) isum[r] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m512i raw[8];
#pragma GCC unroll 8
            for (int t = 0; t < 8; t++) raw[t] = load_once(q + 64 * (8 * c + t));
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const int j = 2 * c + h;
                if (pf == KQ_PF_SPREAD) tokd_pk_prefetch_part(w, sb_bytes, TOKD_PK_PF_DIST, j, 8, TOKD_PK_NTA);
                __m512i u[8];
#pragma GCC unroll 8
                for (int t = 0; t < 8; t++) {
                    u[t] = h ? _mm512_and_si512(_mm512_srli_epi16(raw[t], 4), m4) : _mm512_and_si512(raw[t], m4);
                    if (q5) u[t] = q5k_merge(u[t], qh, t, j);
                }
                const __m512i scj = k4_byte(j < 4 ? lo[0] : hi[0], j & 3);
#pragma GCC unroll 8
                for (int r = 0; r < R; r++) {
                    const uint8_t *a = act + (size_t)r * as + (size_t)b * Q4K_ACT + 32 * j;
                    __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 8
                    for (int t = 0; t < 8; t++) s = dpbusd_bcast(s, u[t], a + 4 * t);
                    isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(s, scj));
                }
            }
        }
        /* mins as (m 2i, m 2i+1) int16 pairs per row lane */
        const __m512i mp[4] = {k4_pair16(lo[1], 0), k4_pair16(lo[1], 2), k4_pair16(hi[1], 0), k4_pair16(hi[1], 2)};
        const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)w));
        const __m512 dmx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + 32)));
        mins_fold(R, 4, mp, isum, dx, dmx, act + (size_t)b * Q4K_ACT, as, acc);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) _mm512_storeu_ps(y + r * ldy, acc[r]);
}

TGT INLINE void q4k_tile(int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R, int pf, float *y,
                         int64_t ldy) {
    k4_tile(0, nb, w, act, as, R, pf, y, ldy);
}
TGT INLINE void q5k_tile(int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R, int pf, float *y,
                         int64_t ldy) {
    k4_tile(1, nb, w, act, as, R, pf, y, ldy);
}
KQ_GEMM(TGT, tokd_packed_q4_K_gemm_avx512vnni, q4k_tile)
KQ_GEMM(TGT, tokd_packed_q5_K_gemm_avx512vnni, q5k_tile)
