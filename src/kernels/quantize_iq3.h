/* quantize_iq3.h — quantisers of the 3-bit grid types IQ3_XXS and IQ3_S (quantize_iq3.c).
 *
 * One row of n elements (n a multiple of 256) to n/256 blocks (tokd_block_iq3_xxs,
 * tokd_block_iq3_s, quants.h): the bytes of llama.cpp's quantize_<type>(src, dst, 1, n,
 * qw) (c392e5094). qw: the row's n importance weights (>= 0; llama-quantize passes the
 * same imatrix entry for every row of a matrix); the entry points without qw are
 * llama.cpp's quant_weights == NULL path, whose error weights are x^2. Safe to call from
 * several threads at once; the first call builds the lattice tables. */
#ifndef TOKD_KERNELS_QUANTIZE_IQ3_H
#define TOKD_KERNELS_QUANTIZE_IQ3_H

#include <stdint.h>

void tokd_iq3_xxs_from_float_w(const float *src, void *dst, int64_t n, const float *qw);
void tokd_iq3_s_from_float_w(const float *src, void *dst, int64_t n, const float *qw);
void tokd_iq3_xxs_from_float(const float *src, void *dst, int64_t n);
void tokd_iq3_s_from_float(const float *src, void *dst, int64_t n);

#endif
