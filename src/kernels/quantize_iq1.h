/* quantize_iq1.h — quantisers of the 1.5- and 1.75-bit grid types IQ1_S and IQ1_M
 * (quantize_iq1.c).
 *
 * One row of n elements (n a multiple of 256) to n/256 blocks (tokd_block_iq1_s,
 * tokd_block_iq1_m, quants.h): the bytes of llama.cpp's quantize_<type>(src, dst, 1, n,
 * qw) (c392e5094). qw: the row's n importance weights (>= 0), which both types require
 * (llama.cpp refuses IQ1_S without them, and llama-quantize refuses both). Safe to call
 * from several threads at once; the first call builds the grid's search tables. */
#ifndef TOKD_KERNELS_QUANTIZE_IQ1_H
#define TOKD_KERNELS_QUANTIZE_IQ1_H

#include <stdint.h>

void tokd_iq1_s_from_float_w(const float *src, void *dst, int64_t n, const float *qw);
void tokd_iq1_m_from_float_w(const float *src, void *dst, int64_t n, const float *qw);

#endif
