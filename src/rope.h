/* rope.h — rotary position embedding: the cos/sin table of a position and the rotation
 * of each head's first n_rot dimensions, in normal (pairs 2i, 2i+1) or NEOX (pairs i,
 * i + n_rot/2) style.
 *
 * The rotation is stated once in scalar code (tokd_rope_apply_ref) and computed again 16
 * lanes wide with AVX-512 where n_rot is a multiple of 32, or 8 lanes wide with AVX2
 * where it is a multiple of 16, with the same bits, so batch invariance never depends on
 * which ran. For the pair (x0, x1) it is x0' = fma(x0, cos, -(x1 * sin)) and x1' =
 * fma(x0, sin, x1 * cos): the reference implementation writes two products and a sum,
 * and GCC, contracting them as C allows, fuses the first (llama.cpp's x86 builds; both
 * styles measured against its ROPE output, 0 differences in 9216 pairs). */
#ifndef TOKD_ROPE_H
#define TOKD_ROPE_H

#include <stdbool.h>
#include <stdint.h>

/* cs[2i], cs[2i+1] = cos, sin of (pos * freq_base^(-2i/n_rot) / freq_factors[i]) *
 * freq_scale for i < n_rot/2, the angle pos * freq_base^(-2i/n_rot) advanced by repeated
 * multiplication and then divided and scaled, as the reference implementation does.
 * freq_factors: the model's per-pair divisors (rope_freqs.weight: Llama 3.1 and later
 * stretch the low frequencies), or NULL for none; factors of 1 give NULL's bits. */
void tokd_rope_table(float *cs, int32_t pos, int32_t n_rot, float freq_base, float freq_scale, const float *freq_factors);

/* Rotate the first n_rot dims of each of n_heads heads (head_dim apart) of x by the
 * table cs. */
void tokd_rope_apply(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot, bool neox, const float *cs);
/* The scalar statement of the same. */
void tokd_rope_apply_ref(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot, bool neox, const float *cs);
/* The AVX2 loop, whichever path the process runs (for tests): -1 without AVX2 or for an
 * n_rot it does not take (not a multiple of 16, or wider than 1024), else 0. */
int tokd_rope_apply_avx2(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot, bool neox, const float *cs);

#endif
