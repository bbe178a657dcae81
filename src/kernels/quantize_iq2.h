/* quantize_iq2.h — quantisers for the 2-bit grid types IQ2_XXS, IQ2_XS and IQ2_S, byte for
 * byte llama.cpp's quantize_iq2_xxs / quantize_iq2_xs / quantize_iq2_s (c392e5094), and the
 * search tables of the grids whose coordinates take three values (IQ2's 256, 512 and
 * 1024 points, IQ1's 2048), which an IQ1 quantiser can share.
 *
 * One row of n elements (n a multiple of 256); qw its n importance weights (>= 0), which
 * IQ2_XXS and IQ2_XS require and IQ2_S may go without (qw NULL: llama.cpp's weights
 * from x alone). Safe to call from several threads at once. */
#ifndef TOKD_KERNELS_QUANTIZE_IQ2_H
#define TOKD_KERNELS_QUANTIZE_IQ2_H

#include <stdint.h>

void tokd_iq2_xxs_from_float_w(const float *src, void *dst, int64_t n, const float *qw);
void tokd_iq2_xs_from_float_w(const float *src, void *dst, int64_t n, const float *qw);
void tokd_iq2_s_from_float_w(const float *src, void *dst, int64_t n, const float *qw);
void tokd_iq2_s_from_float(const float *src, void *dst, int64_t n); /* qw NULL */

/* Codes: a group of 8 levels l_j in {0, 1, 2} is the code u = sum_j l_j << 2j, at most
 * 0xAAAA; the point with levels l_j has coordinates 2 l_j + 1 (llama.cpp's quantisers
 * work on these, whatever values the format gives them later). */
#define TOKD_IQ2_NCODES 0xAAAB

/* The tables of one grid (tokd_iq2_qtables_get), built once and never freed:
 *   point[i]       point i's coordinates 2l + 1 (1, 3 or 5), in the grid's order;
 *   fpoint[i]      the same as floats;
 *   map[u]         for a code u < TOKD_IQ2_NCODES: the point with that code, if there is
 *                  one (>= 0); otherwise -1 - o, where neighbours[o] is a count c and
 *                  neighbours[o+1 .. o+c] are the points that llama.cpp searches for u:
 *                  those at one of the `shells` smallest squared distances from u's
 *                  coordinates, by distance and then by index. Codes with a level 3
 *                  (no group has one) map to an empty list, c = 0;
 *   shells         2 for 256 and 512 points, 1 for 1024, 3 for 2048 (llama.cpp's). */
typedef struct {
    int grid_size, shells;
    const int8_t (*point)[8];
    const float (*fpoint)[8];
    const int32_t *map;
    const uint16_t *neighbours;
} tokd_iq2_qtables;

/* The tables of the grid of grid_size points (256: IQ2_XXS, 512: IQ2_XS, 1024: IQ2_S,
 * 2048: IQ1_S and IQ1_M; points in iq_grids.h's order), built on first use (thread-safe);
 * NULL for another size. */
const tokd_iq2_qtables *tokd_iq2_qtables_get(int grid_size);

#endif
