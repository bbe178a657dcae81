/* iq_grids.h — the lattice points of the IQ1, IQ2 and IQ3 formats, expanded into rows of
 * bytes: row i of a grid is point i, one byte a coordinate (as llama.cpp's tables hold
 * them, byte j of the little-endian word being coordinate j). Filled by
 * tokd_iq_grids_init (idempotent, thread-safe), which tokd_kernels_init calls; the
 * scalar entry points call it too, the SIMD kernels rely on tokd_kernels_init. */
#ifndef TOKD_KERNELS_IQ_GRIDS_H
#define TOKD_KERNELS_IQ_GRIDS_H

#include <stdint.h>

/* IQ2_XXS's and IQ3_XXS's points as their compact codes (iq_grids.c), which the
 * AVX-512 VBMI kernels look up in registers (dot_iq_avx512.c). */
extern const uint16_t tokd_iq2xxs_codes[256], tokd_iq3xxs_codes[256];
extern uint8_t tokd_iq2xxs_grid[256][8], tokd_iq2xs_grid[512][8], tokd_iq2s_grid[1024][8];
extern uint8_t tokd_iq3xxs_grid[256][4], tokd_iq3s_grid[512][4];
extern int8_t tokd_iq1s_grid[2048][8]; /* coordinates -1, 0, 1 */
/* The sign byte of a group of 8 from its 7 stored bits: bit j set means coordinate j is
 * negated; bit 7 makes the count of negated coordinates even. */
extern uint8_t tokd_iq_signs[128];
/* The same as 8 bytes of +1 or -1 (-1 where the coordinate is negated), for vpsignb:
 * tokd_iq_sign8[s] for a whole sign byte s, tokd_iq_sign8_7[f] for 7 stored bits f. */
extern uint64_t tokd_iq_sign8[256], tokd_iq_sign8_7[128];
/* IQ1_M's shift signs as +-1 bytes, 8 for each group, by the four groups' shift bits */
extern uint64_t tokd_iq1m_shift8[16][4];

void tokd_iq_grids_init(void);

#endif
