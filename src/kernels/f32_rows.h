/* f32_rows.h — F32 weight rows against F32 activation rows in the order of llama.cpp's
 * CPU products, on every path (f32_rows.c says why and how). */
#ifndef TOKD_KERNELS_F32_ROWS_H
#define TOKD_KERNELS_F32_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/types.h"

/* The scalar statement (tokd_vec_dot_fn): 16 lanes when n is a multiple of 16, else
 * ggml_vec_dot_f32's order (f32_rows.c). */
void tokd_f32_dot_ref(int64_t n, float *out, const void *w, const void *act);

/* The paths: dot, decode's stream form (the same bits, with prefetches: types.h,
 * vec_dot_stream) and its form for one to four activation rows
 * (tokd_vec_dot_stream_rows_fn), four activation rows (tokd_vec_dot4_fn) and, with
 * AVX-512, two weight rows by four (tokd_vec_dot2x4_fn). Rows whose length is not a
 * multiple of 16 go through the statement. */
#define TOKD_F32_DECL(ISA)                                                                               \
    void tokd_f32_dot_##ISA(int64_t n, float *out, const void *w, const void *act);                      \
    void tokd_f32_stream_dot_##ISA(int64_t n, float *out, const void *w, const void *act);               \
    void tokd_f32_dot4_##ISA(int64_t n, float out[4], const void *w, const void *act, size_t act_stride);    \
    void tokd_f32_stream_rows_##ISA(int64_t n, float *out, const void *w, const void *act, size_t act_stride, \
                                    int rows);
TOKD_F32_DECL(avx2)
TOKD_F32_DECL(avx512)
#undef TOKD_F32_DECL
void tokd_f32_dot2x4_avx512(int64_t n, float out[8], const void *w, size_t w_stride, const void *act,
                            size_t act_stride);

/* Sets the F32 row's kernels (vec_dot, vec_dot4, vec_dot2x4, vec_dot_stream,
 * vec_dot_stream_rows) for the path types.c chose, after types.c has reset them. */
void tokd_f32_select(tokd_type_traits *t, bool avx2, bool avx512);

#endif
