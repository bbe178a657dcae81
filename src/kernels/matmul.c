/* matmul.c — see matmul.h.
 *
 * Work split: the outputs are cut into runs of whole weight rows that threads claim
 * as they go (below), so a thread that the OS deschedules (the machine is small and
 * shared) does not stall the region: the others take its remaining rows. Every output
 * is still computed by one thread in vec_dot's order of operations (one vec_dot /
 * vec_dot4 / gemm call, or rows_from_memory's lane sums), so which thread computes it
 * changes nothing.
 *
 * Decode (up to DECODE_MAX_ROWS activation rows: one sequence, or a few batched) is
 * bound by each core's memory stream, and every new stream starts cold, so a thread's
 * work stays one stream: thread ith owns an equal share of the product's rows (units of
 * 16 rows, counted across the matrices of the region) and claims them from the front, an
 * eighth of what is left at a time; a thread whose share is empty moves the back half of
 * the fullest other share into its own and streams that. The threads then finish within
 * a claim of each other (a core that the host slows, or that reads a little slower,
 * gives up its tail), and only the thread that steals starts a new stream. Against the
 * guided chunks used before (each thread's first chunk 9/10 of an equal share, the rest
 * in shrinking chunks from a shared counter, each one a new stream), TinyLlama shape, 2
 * threads, alternated in one process: one decode step's products with a kernel that only
 * reads its bytes read 0.90-0.95 of the read probe against 0.86-0.93 (Q4_K_M 0.945-0.948
 * against 0.864-0.882); whole decode steps were within the host's noise, from 2.6 %
 * faster to 2.4 % slower (BENCHMARKS.md, thirty-first session). Which thread computes an
 * output changes nothing. Each share's start depends only on the shapes and the thread
 * count, so tokd_matmul_prefetch_next can tell each thread, before the product, where it
 * will start.
 *
 * Prefill (more than DECODE_MAX_ROWS rows): thread ith starts on chunk ith, then takes the next
 * free chunk from an atomic counter. A chunk is a tile of TILE weight rows; the tile is walked
 * against the activation rows four at a time with vec_dot4 (the weight row unpacked once
 * for four rows), so the tile stays in L1/L2 while activation rows stream past it. The
 * last n_rows % 4 rows use vec_dot, which gives the same bits as vec_dot4 would.
 *
 * Types with a gemm kernel (Q4_0, Q8_0 on AVX-512 VNNI+VBMI) get their activation rows
 * in the kernel's prepared layout and one gemm call per chunk instead (same bits).
 *
 * Packed matrices (packed.h) go through their packed gemm for every row count, chunks
 * being whole groups of 16 rows. Matrices without a packed layout (F32, F16, BF16) go
 * through their type's vec_dot_stream in decode (types.h: the same bits, with
 * prefetches); a few activation rows take them 16 weight rows at a time, each read
 * from memory once against up to four activation rows (rows_from_memory; BF16, whose
 * order keeps no lane sums to hand on, vec_dot_stream_rows), the others from cache
 * (matmul_chunk).
 *
 * Pair mode (tokd_matmul_pair, the FFN's gate and up projections, prefill only): a
 * chunk is the same rows of both matrices, and its epilogue (SwiGLU) runs on them as
 * soon as both are computed, so the element-wise step costs no region of its own.
 * Decode runs the two as one product of two matrices and SwiGLU in a region after it:
 * each thread's stream is then one matrix at a time instead of two side by side, and
 * alternating the two every step in one process, the step ran 1.6 % faster for Q4_0,
 * 1.1 % for Q4_K_M and 0.5 % for Q8_0 (TinyLlama shape, 2 threads; BENCHMARKS.md, tenth
 * session); on the Zen 4 host with its cores on two dies, 5.5 % for Q4_0 and 6.0 % for
 * Q4_K_M. SwiGLU on the caller instead of in that region measured within the noise
 * (thirty-first session), and so did that region quantising down's activation, each
 * thread its own blocks, in place of down's preparation (sixtieth session). */
#include "kernels/matmul.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/packed.h"
#include "kernels/quants.h"
#include "kernels/step_profile.h"
#include "util.h"

#define TILE 64 /* weight rows per prefill chunk (64: activation rows are re-read from L3 4x less than with 16) */
#define UNIT TOKD_PACK_ROWS /* rows per work unit (a packed group) */
/* The smallest decode claim or stolen half, in weight bytes (at least one group): about
 * 0.8 us of one core's stream. It bounds how far apart the threads finish a product. At
 * 4 units, as before, that was up to 400 KB in the products of K = 5632 (a 16-row unit of
 * Q8_0 is 96 KB), and the threads ended TinyLlama's FFN-down 5-17 us apart against 2-4
 * with this floor; decode steps alternated in one process (200-400 rounds, 2 threads):
 * Q8_0 0.989-0.994 of the step time before, Q4_0 0.994-1.002, Q4_K_M 0.995-1.002, since
 * the thread that finishes first prefetches its next window meanwhile (BENCHMARKS.md,
 * thirty-second session). */
#define MIN_CLAIM_BYTES ((size_t)32 << 10)
#define CLAIM_DIVISOR 8     /* a thread claims 1/8 of what is left of its share */
#define MAX_DECODE_SHARES 128 /* threads past this many take no part in decode */
/* Up to TOKD_DECODE_MAX_ROWS activation rows (matmul.h: a batched decode step of a few
 * sequences), products are split as decode's: a contiguous share of every product a
 * thread, streamed once with decode's prefetches, instead of prefill's 64-row tiles
 * handed out from a counter (a stream that jumps every 72 KB). TinyLlama shape, Q4_0,
 * 2 threads, with the packed kernels' streaming of a few rows (packed_avx512.c): a step
 * of 4 sequences took 12-13 ms against 16 with the split at 4 rows, 16 sequences 44-45
 * against 50-57 (BENCHMARKS.md, thirty-sixth session). */
#define DECODE_MAX_ROWS TOKD_DECODE_MAX_ROWS
/* Batched decode of float weights (rows_from_memory): up to FEW_ROWS_ACT_BYTES of
 * activations go against each weight row whole, more in pieces of FEW_ROWS_PIECE_BYTES,
 * and the pieces' prefetches run FEW_ROWS_PF_BYTES ahead (the whole-row kernels' own
 * distance). Two threads streaming BF16 rows of K = 5632 whole against two activation
 * rows (45 KB, past the 48 KB L1 with the weights' lines) read 30-34 GB/s together
 * against 77 with one row, at K = 2048 four rows (32 KB) read 51, bound by arithmetic.
 * Through tokd_matmul, K = 5632 (the FFN down product): 2, 3, 4 and 8 rows read 51, 45,
 * 39 and 21 GB/s in 12 KB pieces against 42, 32, 25 and 17 whole, 48-50, 43-44, 37-38
 * with 8 or 16 KB pieces; at K = 2048, 16 KB pieces (3 and 4 rows) lost a quarter
 * against whole rows (thirty-eighth session). */
#ifndef FEW_ROWS_ACT_BYTES
#define FEW_ROWS_ACT_BYTES (32 * 1024)
#endif
#ifndef FEW_ROWS_PIECE_BYTES
#define FEW_ROWS_PIECE_BYTES (12 * 1024)
#endif
#ifndef FEW_ROWS_PF_BYTES
#define FEW_ROWS_PF_BYTES TOKD_PK_DECODE_LINE_PF
#endif

/* A decode share's units not yet claimed: (first << 32) | end. Its owner claims from
 * the front, a thief moves the end down. `ran`: the units its thread ran in the product,
 * stored when the thread is done with it (tokd_matmul_shares_done sums them). */
typedef struct {
    _Alignas(64) _Atomic uint64_t range;
    _Atomic int64_t ran;
} decode_share;

size_t tokd_matmul_scratch_bytes(const tokd_type_traits *tt, int64_t K, int64_t n_rows) {
    if (tt->vec_dot_type == 0 && !tt->act_convert) return 0; /* F32 activations used as they are */
    const tokd_type_traits *at = tokd_type_get(tt->vec_dot_type);
    size_t row = tokd_row_bytes(at, K);
    if (tt->gemm && tt->gemm_act_bytes(K) > row) row = tt->gemm_act_bytes(K);
    /* either packed form, whichever path the matrix was packed on */
    const tokd_packed_traits *pk = tokd_packed_get_any(tt->id), *pk2 = tokd_packed_get_avx2(tt->id);
    if (pk && pk->act_bytes(K) > row) row = pk->act_bytes(K);
    if (pk2 && pk2->act_bytes(K) > row) row = pk2->act_bytes(K);
    row = (row + 63) & ~(size_t)63;
    return row * (size_t)(n_rows < 2 ? 2 : n_rows); /* decode: room for two forms (mixed_region) */
}

typedef struct {
    tokd_matrix *W;
    const tokd_packed_traits *pk;
    int64_t n_groups;
} pack_job;

/* A last group that the matrix's height does not fill is packed from a copy of its rows
 * padded with zero bytes: zero scales, so zero weights in every type. */
static void pack_groups(void *arg, int ith, int nth) {
    pack_job *j = arg;
    const int64_t gr = j->pk->group_rows;
    for (int64_t G = ith; G < j->n_groups; G += nth) {
        const uint8_t *rows = (const uint8_t *)j->W->data + (size_t)(G * gr) * j->W->row_bytes;
        uint8_t *padded = NULL;
        if ((G + 1) * gr > j->W->n_out) {
            padded = tokd_xcalloc((size_t)gr, j->W->row_bytes);
            memcpy(padded, rows, (size_t)(j->W->n_out - G * gr) * j->W->row_bytes);
            rows = padded;
        }
        j->pk->pack(rows, j->W->row_bytes, (uint8_t *)j->W->packed + (size_t)G * j->W->group_bytes, j->W->K);
        free(padded);
    }
}

size_t tokd_matrix_packed_bytes(const tokd_matrix *W, const tokd_packed_traits *pk) {
    pk = tokd_packed_fit(pk, W->n_out);
    if (!pk || pk->id != W->tt->id || W->K % W->tt->blck || W->n_out < 1) return 0;
    return pk->group_bytes(W->K) * (size_t)((W->n_out + pk->group_rows - 1) / pk->group_rows);
}

int tokd_matrix_pack_into(tokd_pool *pool, tokd_matrix *W, const tokd_packed_traits *pk, void *dst) {
    if (!tokd_matrix_packed_bytes(W, pk)) return -1;
    pk = tokd_packed_fit(pk, W->n_out);
    W->group_bytes = pk->group_bytes(W->K);
    pack_job j = {.W = W, .pk = pk, .n_groups = (W->n_out + pk->group_rows - 1) / pk->group_rows};
    W->packed = dst;
    tokd_pool_run(pool, pack_groups, &j);
    W->pk = pk;
    return 0;
}

int tokd_matrix_pack(tokd_pool *pool, tokd_matrix *W, const tokd_packed_traits *pk) {
    size_t bytes = tokd_matrix_packed_bytes(W, pk);
    return bytes ? tokd_matrix_pack_into(pool, W, pk, tokd_aligned_alloc(bytes)) : -1;
}

#define MAX_MATS 4

typedef struct {
    const tokd_matrix *W; /* the first matrix (all share K and activation format) */
    const uint8_t *act;  /* activation rows in vec_dot format */
    size_t act_stride;   /* bytes between activation rows */
    int64_t n_rows;
    float *Y;
    int64_t ldy;
    /* several matrices over the same activation rows: chunks are numbered across them */
    int n_mats;
    const tokd_matrix *Ws[MAX_MATS];
    float *Ys[MAX_MATS];
    int64_t ldys[MAX_MATS];
    int64_t unit0[MAX_MATS + 1]; /* first unit (UNIT rows) of each matrix, counted across them */
    /* pair mode (tokd_matmul_pair): the units are rows of both matrices, and each chunk
       ends with epi over its rows of every activation row */
    tokd_pair_epilogue_fn epi;
    /* conversion stage */
    const float *X;
    int64_t ldx;
    const tokd_type_traits *at;
    int gemm; /* through tt->gemm with prepared activation rows */
    const tokd_packed_traits *pk; /* through the packed gemm */
    /* packed: each matrix's prepared activation rows (in decode, matrices whose
       preparations differ share a region, each form prepared once: mixed_region) */
    const uint8_t *mat_act[MAX_MATS];
    /* prefill: chunk c is chunk_units units from c * chunk_units, n_chunks of them */
    int64_t chunk_units, n_chunks;
    _Atomic int64_t next; /* next chunk to hand out, starts at nth */
    /* decode (chunk_units 0): each thread's share, claimed and stolen (decode_region) */
    int n_shares;
    int64_t claim_min, align;
    decode_share *share; /* n_shares, on the caller's stack (not zeroed with the job) */
    bool profile;        /* counting for step_profile.h, in stage prof_stage */
    tokd_stage prof_stage;
} matmul_job;

static void convert_rows(void *arg, int ith, int nth) {
    matmul_job *j = arg;
    if (j->pk) {
        for (int64_t r = ith; r < j->n_rows; r += nth)
            j->pk->prep(j->X + r * j->ldx, (uint8_t *)j->act + r * j->act_stride, j->W->K);
        return;
    }
    if (j->gemm) {
        for (int64_t r = ith; r < j->n_rows; r += nth)
            j->W->tt->gemm_prep(j->X + r * j->ldx, (uint8_t *)j->act + r * j->act_stride, j->W->K);
        return;
    }
    const tokd_from_float_fn convert = j->W->tt->act_convert ? j->W->tt->act_convert : j->at->from_float;
    for (int64_t r = ith; r < j->n_rows; r += nth)
        convert(j->X + r * j->ldx, (uint8_t *)j->act + r * j->act_stride, j->W->K);
}

/* Rows [o0, o1) of a packed matrix's last group (w), which its height leaves partial:
 * the kernel writes the whole group, so it writes here, and the rows that exist are
 * copied out, so that nothing past the height (the next activation row's outputs, or
 * the end of Y) is touched. */
#define PARTIAL_ROWS 16 /* activation rows a pass (the buffer: 16 x 32 floats) */
static void packed_partial_group(const tokd_matrix *W, const uint8_t *w, const matmul_job *j, int m, int64_t o0,
                                 int64_t o1, float *Y, int64_t ldy) {
    const int64_t gr = W->pk->group_rows;
    float part[PARTIAL_ROWS * 32];
    for (int64_t r0 = 0; r0 < j->n_rows; r0 += PARTIAL_ROWS) {
        const int64_t na = j->n_rows - r0 < PARTIAL_ROWS ? j->n_rows - r0 : PARTIAL_ROWS;
        W->pk->gemm(W->K, 1, w, W->group_bytes, na, j->mat_act[m] + (size_t)r0 * j->act_stride, j->act_stride, part, gr);
        for (int64_t r = 0; r < na; r++)
            memcpy(Y + (r0 + r) * ldy + o0, part + r * gr, sizeof(float) * (size_t)(o1 - o0));
    }
}

/* Weight rows [o0, o1) (row_bytes apart from w) against the four activation rows at a
 * (as bytes apart), into y[k * ldy + o]: two weight rows at a time where the type has
 * vec_dot2x4, the others with vec_dot4 (the same bits either way). */
static void rows_by_four(const tokd_type_traits *tt, int64_t K, const uint8_t *w, size_t row_bytes, int64_t o0,
                         int64_t o1, const uint8_t *a, size_t as, float *y, int64_t ldy) {
    int64_t o = o0;
    for (; tt->vec_dot2x4 && o + 2 <= o1; o += 2) {
        float out[8];
        tt->vec_dot2x4(K, out, w + (size_t)o * row_bytes, row_bytes, a, as);
        for (int k = 0; k < 4; k++) y[k * ldy + o] = out[k], y[k * ldy + o + 1] = out[4 + k];
    }
    for (; o < o1; o++) {
        float out[4];
        tt->vec_dot4(K, out, w + (size_t)o * row_bytes, a, as);
        for (int k = 0; k < 4; k++) y[k * ldy + o] = out[k];
    }
}

/* The end of a float row's dot products with `rows` activation rows (rows_from_memory):
 * the elements [body, K) past the lane sums' whole steps of 32, then tokd_reduce32, as
 * vec_dot ends; into y[r * ldy]. */
static void finish_rows(const tokd_type_traits *tt, int64_t K, int64_t body, const uint8_t *wrow, const uint8_t *a,
                        size_t as, int rows, float *acc, float *y, int64_t ldy) {
    float tail[32];
    if (K > body) tt->to_float(wrow + (size_t)body * tt->bytes, tail, K - body);
    for (int r = 0; r < rows; r++) {
        float *s = acc + 32 * r;
        const float *x = (const float *)(a + (size_t)r * as);
        for (int64_t k = body; k < K; k++) s[k & 31] += tail[k - body] * x[k];
        y[r * ldy] = tokd_reduce32(s);
    }
}

/* Weight rows [0, nw) (nw <= UNIT; row_bytes apart from w) of a float type against the
 * activation rows [0, rows) (1..4; as bytes apart from a), into y[r * ldy + o]: each
 * weight row read from memory once for all the rows, through vec_dot_rows_part. Where
 * the rows' activations would not stay in L1 (more than FEW_ROWS_ACT_BYTES), K goes in
 * pieces of FEW_ROWS_PIECE_BYTES of them, every weight row's piece in turn, and each
 * piece prefetches the one read FEW_ROWS_PF_BYTES later. The lane sums wait in acc
 * between pieces; finish_rows ends each row as vec_dot does, so each output has its
 * bits. */
static void rows_from_memory(const tokd_type_traits *tt, int64_t K, const uint8_t *w, size_t row_bytes, int64_t nw,
                             const uint8_t *a, size_t as, int rows, float *y, int64_t ldy) {
    _Alignas(64) float acc[UNIT][4 * 32];
    const int64_t body = K & ~(int64_t)31;
    if (!body) { /* K < 32: the tail alone */
        for (int64_t o = 0; o < nw; o++) {
            memset(acc[o], 0, sizeof acc[o]);
            finish_rows(tt, K, 0, w + (size_t)o * row_bytes, a, as, rows, acc[o], y + o, ldy);
        }
        return;
    }
    const size_t esz = tt->bytes; /* F32, F16: blocks of one element */
    const size_t act_bytes = (size_t)rows * (size_t)body * sizeof(float);
    int64_t piece = body;
    if (act_bytes > FEW_ROWS_ACT_BYTES) {
        const int64_t n_pieces = (int64_t)((act_bytes + FEW_ROWS_PIECE_BYTES - 1) / FEW_ROWS_PIECE_BYTES);
        piece = ((body + n_pieces - 1) / n_pieces + 31) & ~(int64_t)31;
    }
    const int64_t ahead = (int64_t)((FEW_ROWS_PF_BYTES + (size_t)piece * esz - 1) / ((size_t)piece * esz));
    for (int64_t c0 = 0; c0 < body; c0 += piece) {
        const int64_t n = body - c0 < piece ? body - c0 : piece;
        for (int64_t o = 0; o < nw; o++) {
            const uint8_t *pf = NULL; /* whole rows: the kernel's own prefetches run on */
            if (piece < body) {       /* the piece `ahead` pieces on, or this one near the end */
                const int64_t q = o + ahead, c = c0 + q / nw * piece;
                pf = c < body ? w + (size_t)(q % nw) * row_bytes + (size_t)c * esz
                              : w + (size_t)o * row_bytes + (size_t)c0 * esz;
            }
            tt->vec_dot_rows_part(n, c0 ? acc[o] : NULL, acc[o], w + (size_t)o * row_bytes + (size_t)c0 * esz,
                                  a + (size_t)c0 * sizeof(float), as, rows, pf);
            if (c0 + n == body) /* the row's last piece: finish it while its sums are hot */
                finish_rows(tt, K, body, w + (size_t)o * row_bytes, a, as, rows, acc[o], y + o, ldy);
        }
    }
}

/* Weight rows [o0, o1) of W against the job's activation rows from r0 on, into Y: four
 * at a time through rows_by_four, the rest one at a time with vec_dot. */
static void rows_by_vec_dot(const matmul_job *j, const tokd_matrix *W, int64_t r0, int64_t o0, int64_t o1, float *Y,
                            int64_t ldy) {
    const tokd_type_traits *tt = W->tt;
    const uint8_t *wbase = W->data;
    int64_t r = r0;
    for (; tt->vec_dot4 && r + 4 <= j->n_rows; r += 4)
        rows_by_four(tt, W->K, wbase, W->row_bytes, o0, o1, j->act + (size_t)r * j->act_stride, j->act_stride,
                     Y + r * ldy, ldy);
    for (; r < j->n_rows; r++) {
        const uint8_t *a = j->act + (size_t)r * j->act_stride;
        float *y = Y + r * ldy;
        for (int64_t o = o0; o < o1; o++) tt->vec_dot(W->K, &y[o], wbase + (size_t)o * W->row_bytes, a);
    }
}

/* Weight rows [o0, o1) of matrix m against every activation row, into its Y. */
static void matmul_chunk(const matmul_job *j, int m, int64_t o0, int64_t o1) {
    const tokd_matrix *W = j->Ws[m];
    float *Y = j->Ys[m];
    const int64_t ldy = j->ldys[m];
    const tokd_type_traits *tt = W->tt;
    const uint8_t *wbase = W->data;
    const int64_t K = W->K;
    if (j->pk) { /* o0 starts a group (job_units); o1 ends one, or is the height within the last */
        const int64_t gr = W->pk->group_rows, full = (o1 - o0) / gr;
        const uint8_t *w = (const uint8_t *)W->packed + (size_t)(o0 / gr) * W->group_bytes;
        if (full)
            W->pk->gemm(K, full, w, W->group_bytes, j->n_rows, j->mat_act[m], j->act_stride, Y + o0, ldy);
        if (o0 + full * gr < o1)
            packed_partial_group(W, w + (size_t)full * W->group_bytes, j, m, o0 + full * gr, o1, Y, ldy);
        return;
    }
    if (j->gemm) {
        tt->gemm(K, o1 - o0, wbase + (size_t)o0 * W->row_bytes, W->row_bytes, j->n_rows, j->act, j->act_stride,
                 Y + o0, ldy);
        return;
    }
    if (j->n_rows == 1) {
        tokd_vec_dot_fn dot = tt->vec_dot_stream ? tt->vec_dot_stream : tt->vec_dot;
        for (int64_t o = o0; o < o1; o++) dot(K, &Y[o], wbase + (size_t)o * W->row_bytes, j->act);
        return;
    }
    if (j->n_rows <= DECODE_MAX_ROWS && tt->vec_dot_rows_part && tt->vec_dot4) {
        /* a few activation rows (batched decode of F16 weights): UNIT weight rows
           at a time from memory once, against the first one to four activation rows
           together (rows_from_memory), then from cache against the others, four at a
           time; each output has one vec_dot's bits. BF16 TinyLlama shape (then on this path), 2 threads
           (bench_batch, two rounds alternated): a step of 2 sequences 41 ms against
           44-47 with the first row alone from memory, 4 sequences 50-53 against 74-77,
           8 sequences 97-98 against 110-114; F16 2 sequences 35-36 against 45-48
           (BENCHMARKS.md, thirty-eighth session). */
        const int first = (int)((j->n_rows - 1) % 4) + 1;
        for (int64_t t0 = o0; t0 < o1; t0 += UNIT) {
            const int64_t t1 = t0 + UNIT < o1 ? t0 + UNIT : o1;
            rows_from_memory(tt, K, wbase + (size_t)t0 * W->row_bytes, W->row_bytes, t1 - t0, j->act, j->act_stride,
                             first, Y + t0, ldy);
            for (int64_t r = first; r < j->n_rows; r += 4)
                rows_by_four(tt, K, wbase, W->row_bytes, t0, t1, j->act + (size_t)r * j->act_stride, j->act_stride,
                             Y + r * ldy, ldy);
        }
        return;
    }
    if (j->n_rows <= DECODE_MAX_ROWS && tt->vec_dot_stream_rows) {
        /* a few activation rows, without 32-lane sums to hand on (BF16, F32): UNIT weight rows at
           a time, each read from memory once against the first one to four activation
           rows together (vec_dot_stream_rows), then from cache against the others. BF16
           TinyLlama shape, 2 threads (bench_batch): steps of 2, 4, 8 and 16 sequences
           31, 44, 69 and 115 ms, against 39, 53, 98 and 172 with the F32-activation
           kernels and rows_from_memory before (BENCHMARKS.md, forty-first session); F32
           2, 3, 4 sequences 125-129, 143-145, 181-188 ms against 133, 190, 187-191 on
           rows_from_memory (forty-second session) */
        const int first = (int)((j->n_rows - 1) % 4) + 1;
        float out[4];
        for (int64_t t0 = o0; t0 < o1; t0 += UNIT) {
            const int64_t t1 = t0 + UNIT < o1 ? t0 + UNIT : o1;
            for (int64_t o = t0; o < t1; o++) {
                tt->vec_dot_stream_rows(K, out, wbase + (size_t)o * W->row_bytes, j->act, j->act_stride, first);
                for (int r = 0; r < first; r++) Y[r * ldy + o] = out[r];
            }
            rows_by_vec_dot(j, W, first, t0, t1, Y, ldy);
        }
        return;
    }
    rows_by_vec_dot(j, W, 0, o0, o1, Y, ldy);
}

/* The rows [*o0, *o1) of matrix m that units [u0, u1) of the job (counted across its
 * matrices) cover, within its height; 0 when none. */
static int matrix_rows(const matmul_job *j, int m, int64_t u0, int64_t u1, int64_t *o0, int64_t *o1) {
    const int64_t lo = u0 > j->unit0[m] ? u0 : j->unit0[m], hi = u1 < j->unit0[m + 1] ? u1 : j->unit0[m + 1];
    const int64_t n_out = j->Ws[m]->n_out;
    *o0 = (lo - j->unit0[m]) * UNIT;
    *o1 = (hi - j->unit0[m]) * UNIT < n_out ? (hi - j->unit0[m]) * UNIT : n_out;
    return *o0 < *o1;
}

/* Units [u0, u1) of the job (counted across its matrices; in pair mode, the same rows
 * of both, then the epilogue over them). */
static void run_units(const matmul_job *j, int64_t u0, int64_t u1) {
    if (j->epi) {
        const int64_t n_out = j->Ws[0]->n_out, o0 = u0 * UNIT, o1 = u1 * UNIT < n_out ? u1 * UNIT : n_out;
        if (o0 >= o1) return;
        matmul_chunk(j, 0, o0, o1);
        matmul_chunk(j, 1, o0, o1);
        for (int64_t r = 0; r < j->n_rows; r++)
            j->epi(j->Ys[0] + r * j->ldys[0] + o0, j->Ys[1] + r * j->ldys[1] + o0, o1 - o0, o0, n_out);
        return;
    }
    int64_t o0, o1;
    for (int m = 0; m < j->n_mats; m++) /* the part of each matrix */
        if (matrix_rows(j, m, u0, u1, &o0, &o1)) matmul_chunk(j, m, o0, o1);
}

static uint64_t share_range(int64_t first, int64_t end) { return (uint64_t)first << 32 | (uint64_t)end; }
static int64_t range_first(uint64_t r) { return (int64_t)(r >> 32); }
static int64_t range_end(uint64_t r) { return (int64_t)(r & 0xffffffffu); }

/* Claims the next units of share s from its front: 1/CLAIM_DIVISOR of what is left, at
 * least claim_min, whole groups. 0 when the share is empty. */
static int claim_front(matmul_job *j, decode_share *s, int64_t *u0, int64_t *u1) {
    uint64_t r = atomic_load_explicit(&s->range, memory_order_acquire);
    for (;;) {
        const int64_t first = range_first(r), left = range_end(r) - first;
        if (left <= 0) return 0;
        int64_t take = (left / CLAIM_DIVISOR + j->align - 1) / j->align * j->align;
        if (take < j->claim_min) take = j->claim_min;
        if (take > left) take = left;
        if (atomic_compare_exchange_weak_explicit(&s->range, &r, share_range(first + take, range_end(r)),
                                                  memory_order_acq_rel, memory_order_acquire)) {
            *u0 = first, *u1 = first + take;
            return 1;
        }
    }
}

/* Moves the back half of the fullest other share into share `me` (empty). 0 when no
 * share has two claims' worth left: its owner finishes it sooner than a thief would. */
static int steal_half(matmul_job *j, int me) {
    for (;;) {
        int victim = -1;
        uint64_t vr = 0;
        int64_t most = 2 * j->claim_min - 1;
        for (int t = 0; t < j->n_shares; t++) {
            uint64_t r = atomic_load_explicit(&j->share[t].range, memory_order_acquire);
            if (t != me && range_end(r) - range_first(r) > most) victim = t, vr = r, most = range_end(r) - range_first(r);
        }
        if (victim < 0) return 0;
        const int64_t end = range_end(vr), cut = end - most / 2 / j->align * j->align;
        if (atomic_compare_exchange_strong_explicit(&j->share[victim].range, &vr, share_range(range_first(vr), cut),
                                                    memory_order_acq_rel, memory_order_acquire)) {
            atomic_store_explicit(&j->share[me].range, share_range(cut, end), memory_order_release);
            return 1;
        }
    }
}

/* The weight bytes units [u0, u1) of a decode job (never in pair mode) read: whole groups
 * of packed matrices, the rows that exist of the others. */
static uint64_t units_bytes(const matmul_job *j, int64_t u0, int64_t u1) {
    uint64_t bytes = 0;
    int64_t o0, o1;
    for (int m = 0; m < j->n_mats; m++) {
        const tokd_matrix *W = j->Ws[m];
        if (!matrix_rows(j, m, u0, u1, &o0, &o1)) continue;
        if (W->pk) bytes += (uint64_t)((o1 - o0 + W->pk->group_rows - 1) / W->pk->group_rows) * W->group_bytes;
        else bytes += (uint64_t)(o1 - o0) * W->row_bytes;
    }
    return bytes;
}

/* Each thread's finish of the decode region being profiled, for its tail. */
static uint64_t profile_finish[TOKD_PROFILE_MAX_THREADS];

/* Decode: a thread streams its own share front to back, claim by claim, so its reads
 * stay one stream for the whole product; when its share is empty it takes the back half
 * of the fullest other share and streams that. */
static void decode_region(matmul_job *j, int ith) {
    if (ith >= j->n_shares) return;
    const bool profile = j->profile && ith < TOKD_PROFILE_MAX_THREADS;
    const uint64_t t0 = profile ? __rdtsc() : 0;
    uint64_t bytes = 0;
    decode_share *own = &j->share[ith];
    int64_t u0, u1, ran = 0;
    do
        while (claim_front(j, own, &u0, &u1)) {
            run_units(j, u0, u1);
            ran += u1 - u0;
            if (profile) bytes += units_bytes(j, u0, u1);
        }
    while (steal_half(j, ith));
    atomic_store_explicit(&own->ran, ran, memory_order_release); /* its outputs before it */
    if (profile) {
        profile_finish[ith] = __rdtsc();
        tokd_profile.share_cycles[ith][j->prof_stage] += profile_finish[ith] - t0;
        tokd_profile.share_bytes[ith][j->prof_stage] += bytes;
    }
}

/* The caller, around a profiled decode region: its preparation before, the threads'
 * spread of finish times after. */
static void profile_region_start(matmul_job *j, uint64_t prep_start) {
    j->profile = tokd_profile_on;
    if (!j->profile) return;
    j->prof_stage = tokd_profile_stage;
    tokd_profile.prep_cycles[j->prof_stage] += __rdtsc() - prep_start;
    tokd_profile.regions[j->prof_stage]++;
}
static void profile_region_end(const matmul_job *j) {
    if (!j->profile) return;
    const int n = j->n_shares < TOKD_PROFILE_MAX_THREADS ? j->n_shares : TOKD_PROFILE_MAX_THREADS;
    uint64_t first = UINT64_MAX, last = 0;
    for (int t = 0; t < n; t++) {
        if (profile_finish[t] < first) first = profile_finish[t];
        if (profile_finish[t] > last) last = profile_finish[t];
    }
    if (n > 0) {
        tokd_profile.tail_cycles[j->prof_stage] += last - first;
        tokd_profile.tails[j->prof_stage]++;
    }
}

static void matmul_region(void *arg, int ith, int nth) {
    matmul_job *j = arg;
    if (!j->chunk_units) {
        decode_region(j, ith);
        return;
    }
    for (int64_t c = ith; c < j->n_chunks; c = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed))
        run_units(j, c * j->chunk_units, (c + 1) * j->chunk_units);
    (void)nth;
}

/* The units of a job's matrices, counted across them: matrix m's are [unit0[m],
 * unit0[m+1]). A packed group may span several units (AVX-512 Q4_0: two, packed.h), and
 * a chunk must hold whole groups: each matrix's count is rounded up to a multiple of the
 * job's largest group (the units past its rows compute nothing), and that multiple is
 * returned, for decode_bounds to cut on. */
static int64_t job_units(int n_mats, const tokd_matrix *const *Ws, int64_t *unit0) {
    int64_t align = 1;
    for (int m = 0; m < n_mats; m++)
        if (Ws[m]->pk && Ws[m]->pk->group_rows / UNIT > align) align = Ws[m]->pk->group_rows / UNIT;
    unit0[0] = 0;
    for (int m = 0; m < n_mats; m++) {
        const int64_t units = (Ws[m]->n_out + UNIT - 1) / UNIT;
        unit0[m + 1] = unit0[m] + (units + align - 1) / align * align;
    }
    return align;
}

/* Thread ith's share of a decode product of n_units units (a multiple of align): an
 * equal part, in whole groups of align units. It depends only on the shapes and the
 * thread count, so tokd_matmul_prefetch_next can tell each thread where it starts. */
static void decode_share_units(int64_t n_units, int n_shares, int64_t align, int ith, int64_t *u0, int64_t *u1) {
    const int64_t groups = n_units / align;
    *u0 = groups * ith / n_shares * align;
    *u1 = groups * (ith + 1) / n_shares * align;
}
static int decode_shares(int nth) { return nth < MAX_DECODE_SHARES ? nth : MAX_DECODE_SHARES; }

/* The smallest claim of a decode job, in units: MIN_CLAIM_BYTES of its widest unit's
 * bytes, rounded up to whole groups (align units). */
static int64_t min_claim_units(int n_mats, const tokd_matrix *const *Ws, int64_t align) {
    size_t unit_bytes = 1;
    for (int m = 0; m < n_mats; m++) {
        const tokd_matrix *W = Ws[m];
        size_t b = W->pk ? W->group_bytes / (size_t)(W->pk->group_rows / UNIT) : (size_t)UNIT * W->row_bytes;
        if (b > unit_bytes) unit_bytes = b;
    }
    const int64_t units = (int64_t)((MIN_CLAIM_BYTES + unit_bytes - 1) / unit_bytes);
    return (units + align - 1) / align * align;
}

/* Whether two matrices can share converted activation rows and one region. */
static int same_act(const tokd_matrix *a, const tokd_matrix *b, int64_t n_rows) {
    if (a->pk || b->pk) return a->pk && b->pk && a->K == b->K && a->pk->prep == b->pk->prep;
    int ga = a->tt->gemm && n_rows >= a->tt->gemm_min_rows, gb = b->tt->gemm && n_rows >= b->tt->gemm_min_rows;
    if (a->K != b->K || a->tt->vec_dot_type != b->tt->vec_dot_type || a->tt->act_convert != b->tt->act_convert || ga != gb)
        return 0;
    return !ga || a->tt->gemm_prep == b->tt->gemm_prep;
}

/* Whether packed matrices with different activation preparations may still share a
 * region: one activation row (decode), so that each form is one row prepared by the
 * caller before the region, and at most MIXED_FORMS forms (the scratch holds two rows:
 * tokd_matmul_scratch_bytes). Q4_K_M's attention, whose V is Q6_K in about half the
 * layers, then runs Q, K and V in one region as in the other layers: the 256-row V
 * alone streamed at well under the large matrices' rate, and each region ends with the
 * threads waiting for each other. */
#define MIXED_FORMS 2
static int mixed_region(const tokd_matrix *a, const tokd_matrix *b, int64_t n_rows) {
    return n_rows == 1 && a->pk && b->pk && a->K == b->K;
}

/* The region of tokd_matmul_n that starts with the first of the matrices not yet run
 * (bit m of *done set for those run): it and the later ones that share its activation
 * form (or may mix with it), at most MAX_MATS. Their indices go to idx and their bits
 * into *done; returns their count, 0 when every matrix has run. */
static int next_region(int n_mats, const tokd_matrix *const *Ws, int64_t n_rows, unsigned *done, int *idx) {
    int first = 0, n = 0, forms = 0;
    const tokd_packed_traits *form[MIXED_FORMS];
    while (first < n_mats && (*done >> first & 1)) first++;
    for (int m = first; m < n_mats && n < MAX_MATS; m++) {
        if (*done >> m & 1) continue;
        if (!same_act(Ws[first], Ws[m], n_rows)) {
            if (!mixed_region(Ws[first], Ws[m], n_rows)) continue;
            int f = 0;
            while (f < forms && form[f]->prep != Ws[m]->pk->prep) f++;
            if (f == MIXED_FORMS) continue;
            if (f == forms) form[forms++] = Ws[m]->pk;
        } else if (!forms && Ws[m]->pk) {
            form[forms++] = Ws[m]->pk;
        }
        idx[n++] = m;
        *done |= 1u << m;
    }
    return n;
}
/* Whether tokd_matmul_pair runs its two matrices in pair mode (prefill only: above). */
static int pair_region(const tokd_matrix *a, const tokd_matrix *b, int64_t n_rows) {
    return n_rows > DECODE_MAX_ROWS && a->n_out == b->n_out && same_act(a, b, n_rows);
}

/* After a decode region the caller takes back the lines the other threads read in it and
 * that it writes again before the next one: one store to each, while they are dead. Each
 * store to a line another core holds waits for that copy to be invalidated. On a host
 * whose two cores sit on different dies (a one-way handoff of 160-200 ns; the Zen 4 host
 * switches between that and 30-40 ns within minutes), that made preparing a one-row Q4_0
 * activation take 3.2-3.8 us at K 2048 and 8.3-9.0 us at K 5632. With its scratch lines
 * claimed here, while the serial stages run, it took 0.9-1.05 and 2.45-2.6 us (near cores:
 * 1.0-1.2 and 2.2-2.3 before, 0.6-0.9 and 1.4-1.6 after).
 *
 * Decode steps alternated in one process (medians of 256 pairs), with and without:
 * - the scratch: 1.8 % faster (Q4_0) and 0.4 % (Q4_K_M) on far cores, 0.3-0.7 % on near
 *   ones (Q4_0, Q4_K_M, Q8_0);
 * - the job and its shares as well (written by run_job in the same stack frame every
 *   product): a further 0.4-1.5 % on far cores, 0-0.6 % on near ones.
 * The same stores just before the quantiser gained half as much; prefetchw in either place
 * gained nothing (BENCHMARKS.md, fifty-eighth session). */
static void reclaim_lines(void *begin, const void *end) {
    for (volatile uint8_t *p = begin; p < (const uint8_t *)end; p += 64 - ((uintptr_t)p & 63)) *p = 0;
}

/* Convert the activation rows and run the chunks of n_mats matrices (pair mode when epi
 * is set: two matrices of the same height, units counted over one). */
static void run_job(tokd_pool *pool, int n_mats, const tokd_matrix *const *Ws, const float *X, int64_t ldx, int64_t n_rows,
                    float *const *Ys, const int64_t *ldys, tokd_pair_epilogue_fn epi, void *scratch) {
    const uint64_t prep_start = tokd_profile_now();
    const tokd_matrix *W = Ws[0];
    matmul_job j = {.W = W, .n_rows = n_rows, .Y = Ys[0], .ldy = ldys[0], .X = X, .ldx = ldx, .n_mats = n_mats, .epi = epi};
    const uint8_t *act_end = NULL; /* past the prepared rows in scratch */
    if (W->pk) {
        j.pk = W->pk;
        j.act = scratch;
        j.act_stride = (W->pk->act_bytes(W->K) + 63) & ~(size_t)63;
        tokd_pool_run(n_rows > 1 ? pool : NULL, convert_rows, &j);
        const uint8_t *next = j.act + j.act_stride * (size_t)n_rows;
        for (int m = 0; m < n_mats; m++) { /* a mixed region's other form: one row, after the first */
            int f = 0;
            while (f < m && Ws[f]->pk->prep != Ws[m]->pk->prep) f++;
            if (f < m) j.mat_act[m] = j.mat_act[f];
            else if (Ws[m]->pk->prep == W->pk->prep) j.mat_act[m] = j.act;
            else {
                Ws[m]->pk->prep(X, (uint8_t *)next, W->K);
                j.mat_act[m] = next;
                next += (Ws[m]->pk->act_bytes(W->K) + 63) & ~(size_t)63;
            }
        }
        act_end = next;
    } else if (W->tt->vec_dot_type == 0 && !W->tt->act_convert) {
        j.act = (const uint8_t *)X;
        j.act_stride = (size_t)ldx * sizeof(float);
    } else {
        j.at = tokd_type_get(W->tt->vec_dot_type);
        j.act = scratch;
        j.gemm = W->tt->gemm && n_rows >= W->tt->gemm_min_rows;
        size_t row = j.gemm ? W->tt->gemm_act_bytes(W->K) : tokd_row_bytes(j.at, W->K);
        j.act_stride = (row + 63) & ~(size_t)63;
        tokd_pool_run(n_rows > 1 ? pool : NULL, convert_rows, &j);
        act_end = j.act + j.act_stride * (size_t)n_rows;
    }
    int nth = tokd_pool_size(pool);
    for (int m = 0; m < n_mats; m++) {
        j.Ws[m] = Ws[m];
        j.Ys[m] = Ys[m];
        j.ldys[m] = ldys[m];
    }
    const int64_t align = job_units(n_mats, Ws, j.unit0);
    const int64_t n_units = epi ? j.unit0[1] : j.unit0[n_mats];
    decode_share shares[MAX_DECODE_SHARES];
    if (n_rows <= DECODE_MAX_ROWS) {
        j.chunk_units = 0;
        j.share = shares;
        j.n_shares = decode_shares(nth);
        j.align = align;
        j.claim_min = min_claim_units(n_mats, Ws, align);
        for (int t = 0; t < j.n_shares; t++) {
            int64_t u0, u1;
            decode_share_units(n_units, j.n_shares, align, t, &u0, &u1);
            atomic_init(&j.share[t].range, share_range(u0, u1));
        }
    } else {
        _Static_assert(TILE / UNIT % 2 == 0, "prefill tiles hold whole 32-row groups");
        j.chunk_units = TILE / UNIT;
        j.n_chunks = (n_units + j.chunk_units - 1) / j.chunk_units;
    }
    atomic_init(&j.next, nth);
    if (n_rows <= DECODE_MAX_ROWS) profile_region_start(&j, prep_start);
    tokd_pool_run(pool, matmul_region, &j);
    if (n_rows <= DECODE_MAX_ROWS) profile_region_end(&j);
    if (n_rows <= DECODE_MAX_ROWS && nth > 1) { /* the other threads are done with these */
        if (n_rows == 1 && act_end) reclaim_lines(scratch, act_end);
        reclaim_lines(shares, shares + j.n_shares);
        reclaim_lines(&j, &j + 1);
    }
}

void tokd_matmul_n(tokd_pool *pool, int n_mats, const tokd_matrix *const *Ws, const float *X, int64_t ldx,
                   int64_t n_rows, float *const *Ys, const int64_t *ldys, void *scratch) {
    if (n_mats > 32) { /* more than next_region's bits: in runs of 32 */
        tokd_matmul_n(pool, 32, Ws, X, ldx, n_rows, Ys, ldys, scratch);
        tokd_matmul_n(pool, n_mats - 32, Ws + 32, X, ldx, n_rows, Ys + 32, ldys + 32, scratch);
        return;
    }
    unsigned done = 0;
    int idx[MAX_MATS], n;
    while ((n = next_region(n_mats, Ws, n_rows, &done, idx)) > 0) {
        const tokd_matrix *GW[MAX_MATS];
        float *GY[MAX_MATS];
        int64_t GL[MAX_MATS];
        for (int i = 0; i < n; i++) GW[i] = Ws[idx[i]], GY[i] = Ys[idx[i]], GL[i] = ldys[idx[i]];
        run_job(pool, n, GW, X, ldx, n_rows, GY, GL, NULL, scratch);
    }
}

typedef struct {
    tokd_pair_epilogue_fn epi;
    float *Ya, *Yb;
    int64_t n_out, ldy, n_rows;
} epilogue_job;

static void epilogue_region(void *arg, int ith, int nth) {
    epilogue_job *e = arg;
    int64_t per = ((e->n_out + nth - 1) / nth + 15) & ~(int64_t)15, o0 = per * ith, o1 = o0 + per < e->n_out ? o0 + per : e->n_out;
    for (int64_t r = 0; o0 < o1 && r < e->n_rows; r++)
        e->epi(e->Ya + r * e->ldy + o0, e->Yb + r * e->ldy + o0, o1 - o0, o0, e->n_out);
}

void tokd_matmul_pair(tokd_pool *pool, const tokd_matrix *Wa, const tokd_matrix *Wb, const float *X, int64_t ldx,
                      int64_t n_rows, float *Ya, float *Yb, int64_t ldy, tokd_pair_epilogue_fn epi, void *scratch) {
    const tokd_matrix *Ws[2] = {Wa, Wb};
    float *Ys[2] = {Ya, Yb};
    const int64_t ldys[2] = {ldy, ldy};
    if (pair_region(Wa, Wb, n_rows)) {
        run_job(pool, 2, Ws, X, ldx, n_rows, Ys, ldys, epi, scratch);
        return;
    }
    tokd_matmul_n(pool, 2, Ws, X, ldx, n_rows, Ys, ldys, scratch);
    epilogue_job e = {epi, Ya, Yb, Wa->n_out < Wb->n_out ? Wa->n_out : Wb->n_out, ldy, n_rows};
    tokd_pool_run(pool, epilogue_region, &e);
}

/* ---- one activation row, split by the caller (matmul.h) ---- */

/* The job matmul_chunk needs for one prepared row of W, as run_job sets it up. */
static void row_job(matmul_job *j, const tokd_matrix *W, const void *act, float *y) {
    memset(j, 0, sizeof *j);
    j->W = W;
    j->n_rows = 1;
    j->n_mats = 1;
    j->Ws[0] = W;
    j->Ys[0] = y;
    j->ldys[0] = W->n_out;
    j->act = act;
    j->mat_act[0] = act;
    size_t row = (size_t)W->K * sizeof(float); /* F32 activations as they are */
    if (W->pk) {
        j->pk = W->pk;
        row = W->pk->act_bytes(W->K);
    } else if (W->tt->vec_dot_type != 0 || W->tt->act_convert) {
        j->at = tokd_type_get(W->tt->vec_dot_type);
        j->gemm = W->tt->gemm && 1 >= W->tt->gemm_min_rows;
        row = j->gemm ? W->tt->gemm_act_bytes(W->K) : tokd_row_bytes(j->at, W->K);
    }
    j->act_stride = (row + 63) & ~(size_t)63;
}

const void *tokd_matmul_row_prepare(const tokd_matrix *W, const float *x, void *act) {
    if (!W->pk && W->tt->vec_dot_type == 0 && !W->tt->act_convert) return x; /* used as it is */
    matmul_job j;
    row_job(&j, W, act, NULL);
    j.X = x;
    j.ldx = W->K;
    convert_rows(&j, 0, 1);
    return act;
}

int64_t tokd_matmul_rows_align(const tokd_matrix *W) { return W->pk ? W->pk->group_rows : UNIT; }

int64_t tokd_matmul_row_cols_align(const tokd_matrix *W) { return W->pk ? tokd_packed_prep_cols_align(W->pk) : 0; }

void tokd_matmul_row_prepare_cols(const tokd_matrix *W, const float *x, void *act, int64_t c0, int64_t c1) {
    if (W->pk) tokd_packed_prep_cols(W->pk, x, act, W->K, c0, c1);
}

void tokd_matmul_row_claim_cols(const tokd_matrix *W, void *act, int64_t c0, int64_t c1) {
    if (W->pk) tokd_packed_prep_cols_claim(W->pk, act, W->K, c0, c1);
}

void tokd_matmul_rows(const tokd_matrix *W, const void *act, int64_t o0, int64_t o1, float *y) {
    if (o0 >= o1) return;
    matmul_job j;
    row_job(&j, W, act, y);
    matmul_chunk(&j, 0, o0, o1);
}

int tokd_matmul_row_shared(const tokd_matrix *a, const tokd_matrix *b) {
    if (a->pk || b->pk) return a->pk && b->pk && a->K == b->K && a->pk->prep == b->pk->prep;
    return same_act(a, b, 1);
}

size_t tokd_matmul_rows_span(const tokd_matrix *W, int64_t o0, int64_t o1, const void **start) {
    if (o0 >= o1) return *start = NULL, 0;
    if (W->pk) {
        const int64_t gr = W->pk->group_rows;
        *start = (const uint8_t *)W->packed + (size_t)(o0 / gr) * W->group_bytes;
        return (size_t)((o1 - o0 + gr - 1) / gr) * W->group_bytes;
    }
    *start = (const uint8_t *)W->data + (size_t)o0 * W->row_bytes;
    return (size_t)(o1 - o0) * W->row_bytes;
}

/* The first bytes (at most max_bytes) thread ith streams of a decode product of these
 * matrices (units counted as job_units counts them): the front of its share. */
static tokd_pool_window share_window(int n_mats, const tokd_matrix *const *Ws, const int64_t *unit0, int64_t align,
                                     int ith, int nth, size_t max_bytes) {
    int64_t s0, s1;
    decode_share_units(unit0[n_mats], nth, align, ith, &s0, &s1);
    if (s0 >= s1) return (tokd_pool_window){NULL, 0};
    int m = 0;
    while (s0 >= unit0[m + 1]) m++;
    const tokd_matrix *W = Ws[m];
    const int64_t u = s0 - unit0[m], u_end = (s1 < unit0[m + 1] ? s1 : unit0[m + 1]) - unit0[m];
    if (u * UNIT >= W->n_out) return (tokd_pool_window){NULL, 0}; /* a matrix's padding units (job_units) */
    const int64_t u_rows = (u_end * UNIT < W->n_out ? u_end * UNIT : W->n_out) - u * UNIT;
    size_t len = W->pk ? (size_t)((u_rows + W->pk->group_rows - 1) / W->pk->group_rows) * W->group_bytes
                       : (size_t)u_rows * W->row_bytes;
    size_t at = W->pk ? (size_t)(u * UNIT / W->pk->group_rows) * W->group_bytes : (size_t)(u * UNIT) * W->row_bytes;
    const uint8_t *base = W->pk ? W->packed : W->data;
    return (tokd_pool_window){base + at, len < max_bytes ? len : max_bytes};
}

size_t tokd_matmul_shares_bytes(int nth) { return (size_t)decode_shares(nth) * sizeof(decode_share); }

void tokd_matmul_shares_reset(void *shares, int n_mats, const tokd_matrix *const *Ws, int ith, int nth) {
    int64_t unit0[MAX_MATS + 1];
    const int64_t align = job_units(n_mats, Ws, unit0);
    const int n_shares = decode_shares(nth);
    if (ith >= n_shares) return;
    int64_t u0, u1;
    decode_share_units(unit0[n_mats], n_shares, align, ith, &u0, &u1);
    decode_share *s = &((decode_share *)shares)[ith];
    atomic_store_explicit(&s->range, share_range(u0, u1), memory_order_relaxed);
    atomic_store_explicit(&s->ran, 0, memory_order_relaxed);
}

bool tokd_matmul_shares_done(const void *shares, int n_mats, const tokd_matrix *const *Ws, int nth) {
    int64_t unit0[MAX_MATS + 1], ran = 0;
    job_units(n_mats, Ws, unit0);
    const decode_share *s = shares;
    for (int t = 0; t < decode_shares(nth); t++) ran += atomic_load_explicit(&s[t].ran, memory_order_acquire);
    return ran == unit0[n_mats];
}

tokd_pool_window tokd_matmul_shares_window(int n_mats, const tokd_matrix *const *Ws, int ith, int nth,
                                           size_t max_bytes) {
    int64_t unit0[MAX_MATS + 1];
    const int64_t align = job_units(n_mats, Ws, unit0);
    return share_window(n_mats, Ws, unit0, align, ith, decode_shares(nth), max_bytes);
}

int tokd_matmul_rows_together(const tokd_matrix *a, const tokd_matrix *b) {
    return same_act(a, b, 1) || mixed_region(a, b, 1);
}

void tokd_matmul_rows_shared(void *shares, int n_mats, const tokd_matrix *const *Ws, const void *const *acts,
                             float *const *ys, int ith, int nth, tokd_stage stage) {
    matmul_job j;
    row_job(&j, Ws[0], acts[0], ys[0]);
    j.n_mats = n_mats;
    for (int m = 1; m < n_mats; m++) {
        j.Ws[m] = Ws[m];
        j.Ys[m] = ys[m];
        j.ldys[m] = Ws[m]->n_out;
        j.mat_act[m] = acts[m];
    }
    j.align = job_units(n_mats, Ws, j.unit0);
    j.share = shares;
    j.n_shares = decode_shares(nth);
    j.claim_min = min_claim_units(n_mats, Ws, j.align);
    j.profile = tokd_profile_on;
    j.prof_stage = stage;
    decode_region(&j, ith);
}

void tokd_matmul_prefetch_next(tokd_pool *pool, int n_mats, const tokd_matrix *const *Ws, int64_t n_rows,
                               size_t max_bytes) {
    const int nth = tokd_pool_size(pool);
    if (nth == 1 || n_mats < 1 || n_rows < 1 || n_rows > DECODE_MAX_ROWS || nth > MAX_DECODE_SHARES) return;
    /* the first region tokd_matmul_n (or tokd_matmul_pair, which decodes as it) will run */
    unsigned done = 0;
    int idx[MAX_MATS];
    const tokd_matrix *GW[MAX_MATS];
    n_mats = next_region(n_mats < 32 ? n_mats : 32, Ws, n_rows, &done, idx);
    for (int i = 0; i < n_mats; i++) GW[i] = Ws[idx[i]];
    Ws = GW;
    int64_t unit0[MAX_MATS + 1] = {0};
    const int64_t align = job_units(n_mats, Ws, unit0);
    tokd_pool_window win[MAX_DECODE_SHARES];
    for (int ith = 0; ith < nth; ith++) win[ith] = share_window(n_mats, Ws, unit0, align, ith, nth, max_bytes);
    tokd_pool_prefetch_after_next(pool, win);
}

void tokd_matmul(tokd_pool *pool, const tokd_matrix *W, const float *X, int64_t ldx, int64_t n_rows, float *Y,
                 int64_t ldy, void *scratch) {
    tokd_matmul_n(pool, 1, &W, X, ldx, n_rows, &Y, &ldy, scratch);
}
