/* types.h — the weight-type table: one row per ggml tensor type tokd can compute with.
 *
 * Modelled on ggml's type traits: adding a type is adding a row, not editing switches.
 * A row gives the block geometry, conversion to float, quantisation from float, and
 * the dot product of one weight row with one activation row already converted to the
 * row's `vec_dot_type` (F32 for float weights; an 8-bit block format for quantized
 * weights, so activations are quantised once per matmul, not once per weight row).
 *
 * Every dot product reduces in an order fixed by n and the type (never by how many rows
 * are being computed), which is what makes batch invariance hold.
 *
 * `vec_dot` is the fastest implementation for this CPU (chosen once by
 * tokd_kernels_init from cpuid; TOKD_KERNELS=scalar forces the reference, =avx2 the AVX2
 * path, =nogemm leaves out the Q4_0/Q8_0 gemm kernels, =nobf16 the BF16 rows'
 * instruction);
 * `vec_dot_ref` is the portable scalar reference the SIMD paths are tested against.
 *
 * The rows (quants.h has the block layouts): F32, F16 (activations F32, rounded to F16
 * for F16 weights as ggml's CPU backend converts them: act_convert); BF16 (activations
 * BF16, in the order of ggml's AVX512-BF16 products: bf16_rows.h); Q4_0,
 * Q5_0, Q8_0, IQ4_NL (activations Q8_0); Q4_1, Q5_1 (activations Q8_1); Q2_K..Q6_K and
 * IQ4_XS (activations Q8_K); and Q8_1, Q8_K themselves. Every SIMD vec_dot is bit-equal to vec_dot_ref, so
 * the selected path never changes a result. For Q8_0 and Q8_1, from_float quantises as
 * ggml's CPU backend does activations; tokd_q8_0_from_float_ref (quants.h) is the
 * byte-exact llama.cpp file quantiser for Q8_0 weights. Every other from_float is
 * llama-quantize's algorithm without importance matrix (byte-exact on the golden
 * models' Q4_0, Q4_K, Q6_K, F16, BF16 tensors, tested in test_quants); from_float_w is
 * its algorithm with one (Q4_0..Q5_1, Q2_K..Q6_K, IQ4_NL, IQ4_XS; test_quants_weighted). */
#ifndef TOKD_KERNELS_TYPES_H
#define TOKD_KERNELS_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef void (*tokd_to_float_fn)(const void *src, float *dst, int64_t n);
typedef void (*tokd_from_float_fn)(const float *src, void *dst, int64_t n);
/* Quantisation with an importance matrix (llama-quantize --imatrix): one row of n
 * elements, n a multiple of the block; qw = n importance weights (the imatrix entry for
 * the row's columns, all >= 0). */
typedef void (*tokd_from_float_w_fn)(const float *src, void *dst, int64_t n, const float *qw);
typedef void (*tokd_vec_dot_fn)(int64_t n, float *out, const void *w, const void *act);
/* Four dot products of one weight row with four activation rows act, act + act_stride,
 * act + 2*act_stride, act + 3*act_stride (bytes): out[r] is bit-equal to what vec_dot
 * gives for row r. Shares the weight row's unpacking between the rows (prefill). */
typedef void (*tokd_vec_dot4_fn)(int64_t n, float out[4], const void *w, const void *act, size_t act_stride);
/* Two weight rows (w, w + w_stride bytes) against four activation rows as vec_dot4's:
 * out[4h + r] bit-equal to what vec_dot gives for weight row h and activation row r
 * (prefill of the float types: each activation load serves both weight rows). */
typedef void (*tokd_vec_dot2x4_fn)(int64_t n, float out[8], const void *w, size_t w_stride, const void *act,
                                   size_t act_stride);
/* Weights [0, n) (n a multiple of 32) of one row against `rows` (1..4) activation rows
 * x_r = act + r*act_stride (bytes), added to their lane sums: acc[32*r + i % 32] =
 * acc_in[32*r + i % 32] + w[i] * x_r[i] for i in order (acc_in NULL: sums from zero), as
 * vec_dot's vector loop does, so that the caller's tail and tokd_reduce32 (quants.h)
 * give vec_dot's bits. For batched decode of a few sequences: the weight row is read
 * from memory once for all of them, whole or in pieces. pf NULL: prefetches ahead in
 * w's own stream; else each line of pf + (w's offset), for a caller that interleaves
 * rows. */
/* Decode's form of vec_dot for `rows` (1..4) activation rows act + r*act_stride (bytes):
 * out[r] bit-equal to vec_dot of the weight row with row r; the weight row read once
 * from memory, with vec_dot_stream's prefetches (batched decode of rows whose order
 * has no lane sums to hand on: BF16). */
typedef void (*tokd_vec_dot_stream_rows_fn)(int64_t n, float *out, const void *w, const void *act, size_t act_stride,
                                            int rows);
typedef void (*tokd_vec_dot_rows_part_fn)(int64_t n, const float *acc_in, float *acc, const void *w, const void *act,
                                          size_t act_stride, int rows, const void *pf);

/* Matrix products with activation rows prepared once per matmul in a type-specific
 * layout (gemm_act_bytes(K) bytes per row, written by gemm_prep from F32):
 * y[r*ldy + o] = dot(weight row o, activation row r) for o < nw, r < na, each output
 * bit-equal to vec_dot of weight row o with activation row r converted by the
 * activation type's from_float. Weight rows ws bytes apart, activation rows as bytes
 * apart (64-byte aligned). */
typedef void (*tokd_gemm_prep_fn)(const float *x, void *dst, int64_t K);
typedef size_t (*tokd_gemm_act_bytes_fn)(int64_t K);
typedef void (*tokd_gemm_fn)(int64_t K, int64_t nw, const void *w, size_t ws, int64_t na, const void *act, size_t as,
                             float *y, int64_t ldy);

typedef struct tokd_type_traits {
    uint32_t id;          /* GGML_TYPE_* */
    const char *name;
    uint32_t blck;        /* elements per block */
    uint32_t bytes;       /* bytes per block */
    uint32_t vec_dot_type;/* activation format for vec_dot */
    tokd_to_float_fn to_float;
    tokd_from_float_fn from_float;     /* reference quantiser; NULL if not supported */
    /* the quantiser with an importance matrix, byte-exact with llama.cpp's
       quantize_<type>(src, dst, 1, n, qw) (quants_weighted.c): one row of n elements, n a
       multiple of the block, qw = n importance weights (the imatrix entry for the row's
       columns, all >= 0); NULL for the types that ignore an importance matrix (F32, F16,
       BF16, Q8_0, Q8_1, Q8_K and the grid IQ types) */
    tokd_from_float_w_fn from_float_w;
    tokd_vec_dot_fn vec_dot;           /* selected implementation */
    tokd_vec_dot_fn vec_dot_ref;       /* scalar reference */
    tokd_vec_dot4_fn vec_dot4;         /* selected four-row implementation; NULL if none
                                          (then use tokd_vec_dot4, which loops) */
    tokd_gemm_fn gemm;                 /* NULL if none on this CPU (then vec_dot/vec_dot4) */
    tokd_gemm_prep_fn gemm_prep;
    tokd_gemm_act_bytes_fn gemm_act_bytes;
    int gemm_min_rows;                 /* use gemm from this many activation rows on */
    /* decode's form of vec_dot, for a weight row read once from memory: the same bits,
       with its own prefetches (dot_avx512.c); NULL where vec_dot serves decode too */
    tokd_vec_dot_fn vec_dot_stream;
    tokd_vec_dot_stream_rows_fn vec_dot_stream_rows; /* one to four rows of it; NULL if none */
    tokd_vec_dot2x4_fn vec_dot2x4;     /* selected two-by-four implementation; NULL if none */
    /* decode's form for one to four activation rows at once; NULL where there is none */
    tokd_vec_dot_rows_part_fn vec_dot_rows_part;
    /* the activation rows' conversion from F32 into vec_dot_type's layout, where it is not
       that type's from_float (F16 weights: rounded to F16, kept as F32); NULL: from_float,
       and F32 activations are used as they are */
    tokd_from_float_fn act_convert;
} tokd_type_traits;

/* NULL if the type cannot be computed with. Call tokd_kernels_init first (idempotent). */
const tokd_type_traits *tokd_type_get(uint32_t id);

/* CPU features and kernel selection. */
typedef struct {
    bool avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512vnni, avx512bf16, avxvnni, avx512vbmi, gfni;
} tokd_cpu_features;
const tokd_cpu_features *tokd_cpu(void);
void tokd_kernels_init(void);
/* Name of the selected SIMD path ("scalar", "avx2", "avx512"). */
const char *tokd_kernels_path(void);
/* For the float SIMD code outside the weight kernels (attention, vecmath, the forward
 * pass), which follows the same path: 512-bit vectors (AVX-512 F/VL with AVX2, FMA and
 * F16C) on "avx512"; 256-bit ones (AVX2, FMA, F16C) on "avx512" or "avx2", for what the
 * 512-bit code does not take; neither on "scalar". tokd_cpu_avx2 says whether the CPU
 * could run the 256-bit code at all (test hooks). */
bool tokd_use_f32_avx512(void);
bool tokd_use_f32_avx2(void);
bool tokd_cpu_avx2(void);

/* Four rows through vec_dot4 where the row has one, else four vec_dot calls: the same
 * results either way. */
static inline void tokd_vec_dot4(const tokd_type_traits *t, int64_t n, float out[4], const void *w, const void *act,
                                 size_t act_stride) {
    if (t->vec_dot4) {
        t->vec_dot4(n, out, w, act, act_stride);
        return;
    }
    for (int r = 0; r < 4; r++) t->vec_dot(n, &out[r], w, (const uint8_t *)act + (size_t)r * act_stride);
}

/* Bytes for n elements of a type (n must be a multiple of blck). */
static inline size_t tokd_row_bytes(const tokd_type_traits *t, int64_t n) {
    return (size_t)(n / t->blck) * t->bytes;
}

#endif
