/* attention.h — softmax attention of one position's query heads over a paged KV cache.
 *
 * Owned here: the arithmetic of attention, stated once in scalar code
 * (tokd_attention_ref) and implemented again with AVX-512 and with AVX2 + FMA + F16C for
 * the heads that share one KV head (grouped-query attention), bit for bit. forward.c
 * only schedules it.
 *
 * The numerics, for query head q (already in the caller's layout) over keys 0..n-1, are
 * those of llama.cpp's CPU attention (its F16 cache, without flash attention, on an
 * AVX-512 build: K x Q and V x P are F16 products summed in 16 lanes, the softmax is
 * ggml's), so that tokd's BF16 models give its logits bit for bit at any width and length:
 *   qh = q rounded to F16;
 *   s_t = dot(qh, k_t) * scale, dot in 16 lanes: element i into lane i%16 in order,
 *         then tokd_reduce16's tree (quants.h); a head size that is not a multiple of
 *         16 takes ggml_vec_dot_f16's order instead (attention.c, score_dot);
 *   m = max s_t;  e_t = tokd_exp(s_t - m)  (vecmath.h);
 *   S = sum over chunks c of keys 16c..16c+15 (missing keys 0), in order, in double, of
 *       tokd_reduce16 of the chunk's e_t (a float);  inv = (float)(1 / S);
 *   p_t = e_t * inv rounded to F16;
 *   out = 16 lanes: key t's p_t * v_t into lane t%16 in key order, then tokd_reduce16.
 * Products of two F16 values are exact in F32, so each lane step is one rounding.
 * Every step depends only on the query and the keys at absolute positions 0..n-1, never
 * on the batch around it: batch invariance. */
#ifndef TOKD_ATTENTION_H
#define TOKD_ATTENTION_H

#include <stdint.h>

#include "kvcache.h"

/* The group heads q[g*hd ..] (g < group) that share KV head kvh, at a position seeing
 * keys 0..n_keys-1 of layer `layer` through the block table `blocks`: writes
 * out[g*hd ..]. scratch holds group * (n_keys rounded up to 16) floats. */
void tokd_attention(const tokd_kv *kv, const int32_t *blocks, int32_t layer, int32_t kvh, int32_t n_keys,
                    const float *q, int32_t group, int32_t hd, float *out, float *scratch);

/* The scalar statement of the same (any hd). */
void tokd_attention_ref(const tokd_kv *kv, const int32_t *blocks, int32_t layer, int32_t kvh, int32_t n_keys,
                        const float *q, int32_t group, int32_t hd, float *out, float *scratch);

/* The AVX2 path, whatever TOKD_KERNELS selected (for tests): 0, or -1 (nothing written)
 * where the CPU lacks AVX2, FMA or F16C or the path does not take the shape (hd other
 * than 32, 64, 128; a page not a multiple of 8 positions; group > 256; n_keys < 1). */
int tokd_attention_avx2(const tokd_kv *kv, const int32_t *blocks, int32_t layer, int32_t kvh, int32_t n_keys,
                        const float *q, int32_t group, int32_t hd, float *out, float *scratch);

#endif
