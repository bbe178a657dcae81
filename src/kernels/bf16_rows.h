/* bf16_rows.h — BF16 weight rows against BF16 activation rows, in the order of ggml's
 * AVX512-BF16 products, on every path (bf16_rows.c says why and how). */
#ifndef TOKD_KERNELS_BF16_ROWS_H
#define TOKD_KERNELS_BF16_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/types.h"

/* The scalar statement of the order (tokd_vec_dot_fn; act holds n BF16 values). */
void tokd_bf16_dot_ref(int64_t n, float *out, const void *w, const void *act);
/* F32 activations to BF16: tokd_f32_to_bf16 of each (the BF16 row's from_float), eight
 * or sixteen at a time; the same bits, NaNs included. */
void tokd_bf16_act_avx2(const float *x, void *dst, int64_t n);

/* The paths: avx2 and avx512 compute the instruction's operations with FMA, avx512bf16
 * is the instruction (vdpbf16ps). dot, decode's stream form (the same bits, with
 * prefetches: types.h, vec_dot_stream) and its form for one to four activation rows
 * (tokd_vec_dot_stream_rows_fn), four activation rows (tokd_vec_dot4_fn) and, on
 * the AVX-512 paths, two weight rows by four (tokd_vec_dot2x4_fn). */
#define TOKD_BF16_DECL(ISA)                                                                              \
    void tokd_bf16_dot_##ISA(int64_t n, float *out, const void *w, const void *act);                     \
    void tokd_bf16_stream_dot_##ISA(int64_t n, float *out, const void *w, const void *act);              \
    void tokd_bf16_dot4_##ISA(int64_t n, float out[4], const void *w, const void *act, size_t act_stride);   \
    void tokd_bf16_stream_rows_##ISA(int64_t n, float *out, const void *w, const void *act, size_t act_stride, \
                                     int rows);
TOKD_BF16_DECL(avx2)
TOKD_BF16_DECL(avx512)
TOKD_BF16_DECL(avx512bf16)
#undef TOKD_BF16_DECL
void tokd_bf16_dot2x4_avx512(int64_t n, float out[8], const void *w, size_t w_stride, const void *act,
                             size_t act_stride);
void tokd_bf16_dot2x4_avx512bf16(int64_t n, float out[8], const void *w, size_t w_stride, const void *act,
                                 size_t act_stride);

/* Sets the BF16 row's kernels (vec_dot, vec_dot4, vec_dot2x4, vec_dot_stream,
 * vec_dot_stream_rows, act_convert) for the path types.c chose, after types.c has reset
 * them; bf16 allows the instruction. */
void tokd_bf16_select(tokd_type_traits *t, bool avx2, bool avx512, bool bf16);

#endif
