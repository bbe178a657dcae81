/* quants.h — block formats of ggml's quantized tensor types, and their kernels.
 *
 * The layouts are those of GGUF files written by llama.cpp (field order, fp16 scales,
 * packing of sub-block scales); the structs below are byte-exact images of a block and
 * are read straight out of the mmapped file. Every block size is even and every block
 * starts with or contains only fields of at most 2-byte alignment (Q8_K: 4), so a
 * tensor at GGUF alignment keeps every field naturally aligned.
 *
 * Element order inside a block, which is what to_float and the dot products agree on:
 *   Q4_0/Q4_1    qs[j] low nibble = element j, high nibble = element j+16.
 *   Q5_0/Q5_1    as Q4 for the low 4 bits; bit j of the little-endian u32 qh is the
 *                fifth bit of element j (j = 0..31).
 *   Q8_0/Q8_1    qs[j] = element j.
 *   Q2_K         element e = 128h + 32s + l (h<2, s<4, l<32): bits 2s..2s+1 of
 *                qs[32h + l]; scales[e/16]: low nibble scale, high nibble min.
 *   Q3_K         low 2 bits as Q2_K; the third bit is bit e/32 of hmask[e%32] (set means
 *                +0, clear means -4); 16 six-bit scales packed in 12 bytes, minus 32.
 *   Q4_K/Q5_K    8 sub-blocks of 32; sub-block pair p (elements 64p..64p+63) uses
 *                qs[32p + l] low nibble (first 32) and high nibble (next 32); Q5_K's
 *                fifth bit of element 64p + l is bit 2p of qh[l], of 64p+32+l bit 2p+1.
 *                Six-bit scales and mins packed in 12 bytes (see tokd_k4_scale_min).
 *   Q6_K         element e = 128h + 32s + l: low 4 bits from ql[64h + l + 32(s&1)]
 *                (low nibble for s<2, high for s>=2), high 2 bits at bits 2s of
 *                qh[32h + l]; value minus 32; int8 scales[e/16].
 *   IQ4_NL       Q4_0's nibbles, each an index into tokd_iq4_values (x = d * value).
 *   IQ4_XS       eight IQ4_NL blocks of 32 (qs[16j..16j+15] for elements 32j..32j+31)
 *                under one fp16 d, with six-bit block scales minus 32 (see quants.c).
 *   IQ1_S/IQ1_M, IQ2_XXS/IQ2_XS/IQ2_S, IQ3_XXS/IQ3_S  super-blocks of 256 whose groups
 *                of 8 (IQ3: 4) weights are points of a fixed grid (iq_grids.h), with
 *                sign bits and odd sub-block scales; element order in quants_iq.c.
 *
 * Activation formats (the `vec_dot_type` of a row): Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 (which
 * carries d*sum(qs)) for Q4_1/Q5_1, Q8_K (float scale, 16-element sums) for the K-quants
 * and the IQ types but IQ4_NL (Q8_0 for IQ4_NL),
 * as ggml chooses, and quantised with ggml's CPU rounding so that results match
 * llama.cpp's closely. */
#ifndef TOKD_KERNELS_QUANTS_H
#define TOKD_KERNELS_QUANTS_H

#include <stdint.h>
#include <string.h>

#include "kernels/types.h"
#include "util.h"

#define TOKD_QK 32  /* block size of the 32-element formats */
#define TOKD_QK_K 256 /* super-block size of the K-quants */

typedef struct { uint16_t d; uint8_t qs[16]; } tokd_block_q4_0;
typedef struct { uint16_t d, m; uint8_t qs[16]; } tokd_block_q4_1;
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } tokd_block_q5_0;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } tokd_block_q5_1;
typedef struct { uint16_t d; int8_t qs[32]; } tokd_block_q8_0;
typedef struct { uint16_t d, s; int8_t qs[32]; } tokd_block_q8_1;   /* s = d * sum(qs) */
typedef struct { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; } tokd_block_q2_K;
typedef struct { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; } tokd_block_q3_K;
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; } tokd_block_q4_K;
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } tokd_block_q5_K;
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; } tokd_block_q6_K;
typedef struct { float d; int8_t qs[256]; int16_t bsums[16]; } tokd_block_q8_K;
typedef struct { uint16_t d; uint8_t qs[16]; } tokd_block_iq4_nl;
typedef struct { uint16_t d, scales_h; uint8_t scales_l[4]; uint8_t qs[128]; } tokd_block_iq4_xs;
typedef struct { uint16_t d; uint8_t qs[64]; } tokd_block_iq2_xxs;
typedef struct { uint16_t d; uint8_t qs[64]; uint8_t scales[8]; } tokd_block_iq2_xs;
typedef struct { uint16_t d; uint8_t qs[64]; uint8_t qh[8]; uint8_t scales[8]; } tokd_block_iq2_s;
typedef struct { uint16_t d; uint8_t qs[96]; } tokd_block_iq3_xxs;
typedef struct { uint16_t d; uint8_t qs[64]; uint8_t qh[8]; uint8_t signs[32]; uint8_t scales[4]; } tokd_block_iq3_s;
typedef struct { uint16_t d; uint8_t qs[32]; uint8_t qh[16]; } tokd_block_iq1_s;
typedef struct { uint8_t qs[32]; uint8_t qh[16]; uint8_t scales[8]; } tokd_block_iq1_m;

_Static_assert(sizeof(tokd_block_q4_0) == 18, "q4_0 layout");
_Static_assert(sizeof(tokd_block_q4_1) == 20, "q4_1 layout");
_Static_assert(sizeof(tokd_block_q5_0) == 22, "q5_0 layout");
_Static_assert(sizeof(tokd_block_q5_1) == 24, "q5_1 layout");
_Static_assert(sizeof(tokd_block_q8_0) == 34, "q8_0 layout");
_Static_assert(sizeof(tokd_block_q8_1) == 36, "q8_1 layout");
_Static_assert(sizeof(tokd_block_q2_K) == 84, "q2_K layout");
_Static_assert(sizeof(tokd_block_q3_K) == 110, "q3_K layout");
_Static_assert(sizeof(tokd_block_q4_K) == 144, "q4_K layout");
_Static_assert(sizeof(tokd_block_q5_K) == 176, "q5_K layout");
_Static_assert(sizeof(tokd_block_q6_K) == 210, "q6_K layout");
_Static_assert(sizeof(tokd_block_q8_K) == 292, "q8_K layout");
_Static_assert(sizeof(tokd_block_iq4_nl) == 18, "iq4_nl layout");
_Static_assert(sizeof(tokd_block_iq4_xs) == 136, "iq4_xs layout");
_Static_assert(sizeof(tokd_block_iq2_xxs) == 66, "iq2_xxs layout");
_Static_assert(sizeof(tokd_block_iq2_xs) == 74, "iq2_xs layout");
_Static_assert(sizeof(tokd_block_iq2_s) == 82, "iq2_s layout");
_Static_assert(sizeof(tokd_block_iq3_xxs) == 98, "iq3_xxs layout");
_Static_assert(sizeof(tokd_block_iq3_s) == 110, "iq3_s layout");
_Static_assert(sizeof(tokd_block_iq1_s) == 50, "iq1_s layout");
_Static_assert(sizeof(tokd_block_iq1_m) == 56, "iq1_m layout");

/* Scale and min j (0..7) of a Q4_K/Q5_K block's 12 packed bytes: j<4 in the low 6 bits
 * of bytes j and j+4; j>=4 in the nibbles of byte j+4 plus the top 2 bits of bytes j-4
 * (scale) and j (min). */
static inline void tokd_k4_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}
/* Scale j (0..15) of a Q3_K block's 12 packed bytes, already minus 32. */
static inline int tokd_q3k_scale(const uint8_t *s, int j) {
    int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    int hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* ---- scalar (portable reference) ------------------------------------------------- */
#define TOKD_QUANT_SCALAR(T)                                                 \
    void tokd_##T##_to_float(const void *src, float *dst, int64_t n);        \
    void tokd_##T##_from_float(const float *src, void *dst, int64_t n);      \
    void tokd_##T##_dot_ref(int64_t n, float *out, const void *w, const void *act);
TOKD_QUANT_SCALAR(q4_0)
TOKD_QUANT_SCALAR(q4_1)
TOKD_QUANT_SCALAR(q5_0)
TOKD_QUANT_SCALAR(q5_1)
TOKD_QUANT_SCALAR(q8_0)
TOKD_QUANT_SCALAR(q2_K)
TOKD_QUANT_SCALAR(q3_K)
TOKD_QUANT_SCALAR(q4_K)
TOKD_QUANT_SCALAR(q5_K)
TOKD_QUANT_SCALAR(q6_K)
TOKD_QUANT_SCALAR(iq4_nl)
TOKD_QUANT_SCALAR(iq4_xs)
#undef TOKD_QUANT_SCALAR
/* Round to nearest, ties to even, as ggml's nearest_int: adding 1.5*2^23 leaves the
 * rounded integer in the low mantissa bits for |v| < 2^22. Beyond that, and for NaN
 * (which gives 0), the result is whatever those bits say, in [-2^22, 2^22), as ggml's: the
 * quantisers clamp it, and reproduce ggml's bytes even on degenerate blocks. */
static inline int tokd_nearest_int(float v) {
    float t = v + 12582912.f;
    int32_t i;
    memcpy(&i, &t, 4);
    return (i & 0x007fffff) - 0x00400000;
}
/* With an importance matrix (quants_weighted.c), llama-quantize --imatrix: one row of n
 * elements (n a multiple of the block) and qw, its n importance weights (the imatrix
 * entry for the row's columns, all >= 0); writes the bytes of llama.cpp's
 * quantize_<type>(src, dst, 1, n, qw). */
#define TOKD_QUANT_W(T) void tokd_##T##_from_float_w(const float *src, void *dst, int64_t n, const float *qw);
TOKD_QUANT_W(q4_0)
TOKD_QUANT_W(q4_1)
TOKD_QUANT_W(q5_0)
TOKD_QUANT_W(q5_1)
TOKD_QUANT_W(q2_K)
TOKD_QUANT_W(q3_K)
TOKD_QUANT_W(q4_K)
TOKD_QUANT_W(q5_K)
TOKD_QUANT_W(q6_K)
TOKD_QUANT_W(iq4_nl)
TOKD_QUANT_W(iq4_xs)
#undef TOKD_QUANT_W
/* Pieces of quants.c's quantisers that quants_weighted.c shares:
 * tokd_fit_symmetric: x[i] ~ scale*(L[i] - nmax), L[i] in [0, 2*nmax), minimising the
 *   w-weighted squared error over 19 trial scales: ggml's make_qx_quants. n <= 32.
 * tokd_fit_affine: x[i] ~ scale*L[i] - min (L[i] in [0, nmax], min >= 0, returned in
 *   *min_out) minimising the wt-weighted squared (use_mad: absolute) error, searched
 *   over the nstep+1 inverse scales (rmin + rdelta*is + nmax)/(max - min) each with its
 *   least-squares (scale, min): ggml's make_qkx2_quants and make_qkx3_quants. n <= 32.
 * tokd_pack_2bit: Q2_K/Q3_K's 2-bit packing of 256 values L[e] < 4 (see above).
 * tokd_iq4_index: the index of the entry of tokd_iq4_values nearest to v (ties to the
 *   upper one, NaN to 15);
 * tokd_iq4_block_scale: IQ4's scale of 32 values x fitted with error weights w
 *   (without an importance matrix w = x^2); tokd_iq4_pack: the 32 values' indices at
 *   scale d, packed as nibbles. */
float tokd_fit_symmetric(int n, int nmax, const float *x, const float *w, int8_t *L);
/* Non-negative values x on the grid scale*L[i], L[i] <= nmax, minimising the w-weighted
 * squared error (ggml's make_qp_quants; quants_weighted.c): the K-quants' scales and mins,
 * IQ2_XXS's group levels. L as ggml keeps it, in bytes. */
float tokd_fit_positive(int n, int nmax, const float *x, uint8_t *L, const float *w);
float tokd_fit_affine(int n, int nmax, const float *x, const float *wt, uint8_t *L, float *min_out, float rmin,
                      float rdelta, int nstep, int use_mad);
void tokd_pack_2bit(const uint8_t *L, uint8_t *qs);
int tokd_iq4_index(float v);
float tokd_iq4_block_scale(const float *x, const float *w);
void tokd_iq4_pack(const float *x, float d, uint8_t qs[16]);
/* IQ4_XS's super-block from its eight block scales (quants.c). */
void tokd_iq4_xs_pack(const float *src, const float sc[8], tokd_block_iq4_xs *y);
/* Q6_K's block from its 16 fitted group scales and the fit's levels L (quants.c). */
void tokd_q6_K_pack(const float *src, const float scales[16], int8_t L[TOKD_QK_K], tokd_block_q6_K *y);
/* The grid types (quants_iq.c): no quantiser (llama.cpp makes them from an importance
 * matrix), only to_float and the scalar dot product with Q8_K. */
#define TOKD_QUANT_IQ(T)                                                 \
    void tokd_##T##_to_float(const void *src, float *dst, int64_t n);    \
    void tokd_##T##_dot_ref(int64_t n, float *out, const void *w, const void *act);
TOKD_QUANT_IQ(iq2_xxs)
TOKD_QUANT_IQ(iq2_xs)
TOKD_QUANT_IQ(iq2_s)
TOKD_QUANT_IQ(iq3_xxs)
TOKD_QUANT_IQ(iq3_s)
TOKD_QUANT_IQ(iq1_s)
TOKD_QUANT_IQ(iq1_m)
#undef TOKD_QUANT_IQ
void tokd_q8_1_to_float(const void *src, float *dst, int64_t n);
void tokd_q8_1_from_float(const float *src, void *dst, int64_t n);
void tokd_q8_K_to_float(const void *src, float *dst, int64_t n);
void tokd_q8_K_from_float(const float *src, void *dst, int64_t n);
/* The same bytes as tokd_q8_K_from_float, 16 or 8 lanes wide where the float SIMD path
 * allows (act_quant.c): what the K-quant activation preparations call. The AVX2 loop
 * whatever the path (tests): 0, or -1 (nothing written) on a CPU without AVX2. */
void tokd_q8_K_quantize(const float *src, void *dst, int64_t n);
int tokd_q8_K_quantize_avx2(const float *src, void *dst, int64_t n);
void tokd_q8_1_dot_ref(int64_t n, float *out, const void *w, const void *act); /* Q8_1 x Q8_1 */
void tokd_q8_K_dot_ref(int64_t n, float *out, const void *w, const void *act); /* Q8_K x Q8_K */
/* Q8_0 and Q8_1 are above all activation formats, so their from_float quantises as
 * ggml's x86 CPU backend does activations: q = round_half_even(x * (127/amax)).
 * llama.cpp's file quantiser for Q8_0 weights computes q = round_half_away(x / d),
 * d = amax/127: tokd_q8_0_from_float_ref reproduces it byte for byte. The two differ
 * only on exact ties and 1-ulp differences of the multiplier. */
void tokd_q8_0_from_float_ref(const float *src, void *dst, int64_t n);

/* ---- pieces shared by the scalar and SIMD paths (bit-equal results) --------------
 * Exact integer sums of one 32-element block against its Q8_0/Q8_1 activation block. */
static inline int32_t tokd_q4_0_isum(const tokd_block_q4_0 *x, const tokd_block_q8_0 *y) {
    int32_t s = 0;
    for (int j = 0; j < 16; j++) s += ((x->qs[j] & 0xF) - 8) * y->qs[j] + ((x->qs[j] >> 4) - 8) * y->qs[j + 16];
    return s;
}
static inline int32_t tokd_q4_1_isum(const tokd_block_q4_1 *x, const tokd_block_q8_1 *y) {
    int32_t s = 0;
    for (int j = 0; j < 16; j++) s += (x->qs[j] & 0xF) * y->qs[j] + (x->qs[j] >> 4) * y->qs[j + 16];
    return s;
}
static inline uint32_t tokd_load_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline int32_t tokd_q5_0_isum(const tokd_block_q5_0 *x, const tokd_block_q8_0 *y) {
    uint32_t qh = tokd_load_u32le(x->qh);
    int32_t s = 0;
    for (int j = 0; j < 16; j++) {
        int lo = (x->qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
        int hi = (x->qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
        s += (lo - 16) * y->qs[j] + (hi - 16) * y->qs[j + 16];
    }
    return s;
}
static inline int32_t tokd_q5_1_isum(const tokd_block_q5_1 *x, const tokd_block_q8_1 *y) {
    uint32_t qh = tokd_load_u32le(x->qh);
    int32_t s = 0;
    for (int j = 0; j < 16; j++) {
        int lo = (x->qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
        int hi = (x->qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
        s += lo * y->qs[j] + hi * y->qs[j + 16];
    }
    return s;
}
/* IQ4_NL's table of 16 values (llama.cpp's kvalues_iq4nl). */
extern const int8_t tokd_iq4_values[16];
static inline int32_t tokd_iq4_nl_isum(const tokd_block_iq4_nl *x, const tokd_block_q8_0 *y) {
    int32_t s = 0;
    for (int j = 0; j < 16; j++) s += tokd_iq4_values[x->qs[j] & 0xF] * y->qs[j] + tokd_iq4_values[x->qs[j] >> 4] * y->qs[j + 16];
    return s;
}
/* IQ4_XS block j's scale minus 32: six bits, the low four in scales_l (nibble j%2 of
 * byte j/2), the high two at bits 2j of scales_h. */
static inline int tokd_iq4_xs_scale(const tokd_block_iq4_xs *x, int j) {
    return (((x->scales_l[j / 2] >> 4 * (j % 2)) & 0xF) | (((x->scales_h >> 2 * j) & 3) << 4)) - 32;
}
static inline int32_t tokd_q8_0_isum(const tokd_block_q8_0 *x, const tokd_block_q8_0 *y) {
    int32_t s = 0;
    for (int j = 0; j < 32; j++) s += x->qs[j] * y->qs[j];
    return s;
}
/* A block's float term: (dx*dy)*P, plus mx*sy for the formats with a min. */
#define TOKD_H2F tokd_f16_to_f32
static inline float tokd_q4_0_term(const tokd_block_q4_0 *x, const tokd_block_q8_0 *y) {
    return (TOKD_H2F(x->d) * TOKD_H2F(y->d)) * (float)tokd_q4_0_isum(x, y);
}
static inline float tokd_q4_1_term(const tokd_block_q4_1 *x, const tokd_block_q8_1 *y) {
    return (TOKD_H2F(x->d) * TOKD_H2F(y->d)) * (float)tokd_q4_1_isum(x, y) + TOKD_H2F(x->m) * TOKD_H2F(y->s);
}
static inline float tokd_q5_0_term(const tokd_block_q5_0 *x, const tokd_block_q8_0 *y) {
    return (TOKD_H2F(x->d) * TOKD_H2F(y->d)) * (float)tokd_q5_0_isum(x, y);
}
static inline float tokd_q5_1_term(const tokd_block_q5_1 *x, const tokd_block_q8_1 *y) {
    return (TOKD_H2F(x->d) * TOKD_H2F(y->d)) * (float)tokd_q5_1_isum(x, y) + TOKD_H2F(x->m) * TOKD_H2F(y->s);
}
static inline float tokd_q8_0_term(const tokd_block_q8_0 *x, const tokd_block_q8_0 *y) {
    return (TOKD_H2F(x->d) * TOKD_H2F(y->d)) * (float)tokd_q8_0_isum(x, y);
}
static inline float tokd_iq4_nl_term(const tokd_block_iq4_nl *x, const tokd_block_q8_0 *y) {
    return (TOKD_H2F(x->d) * TOKD_H2F(y->d)) * (float)tokd_iq4_nl_isum(x, y);
}
#undef TOKD_H2F
/* Fixed reduction trees: eight lanes (the 32-element formats: block b goes to lane b%8),
 * 16 lanes (as GCC's _mm512_reduce_add_ps folds them: l + l+8, l + l+4, then
 * (0 + 2) + (1 + 3); attention and BF16 rows sum in ggml's 16-lane orders) and 32 lanes
 * (F32/F16: element i goes to lane i%32). */
static inline float tokd_reduce8(const float a[8]) {
    float r0 = a[0] + a[4], r1 = a[1] + a[5], r2 = a[2] + a[6], r3 = a[3] + a[7];
    return (r0 + r2) + (r1 + r3);
}
static inline float tokd_reduce16(const float s[16]) {
    float r8[8];
    for (int l = 0; l < 8; l++) r8[l] = s[l] + s[l + 8];
    return tokd_reduce8(r8);
}
static inline float tokd_reduce32(const float s[32]) {
    float r16[16];
    for (int l = 0; l < 16; l++) r16[l] = s[l] + s[l + 16];
    return tokd_reduce16(r16);
}
/* A K-quant super-block's float term from its exact integer sums. */
static inline float tokd_k_term1(float dx, float dy, int32_t sumi) {
    float d = dx * dy;
    return d * (float)sumi;
}
static inline float tokd_k_term2(float dx, float dmx, float dy, int32_t sumi, int32_t summ) {
    float d = dx * dy, dm = dmx * dy;
    return d * (float)sumi - dm * (float)summ;
}

/* F16 rows (activations F32): element i accumulates into lane i%32, then tokd_reduce32
 * (above); F32 rows have llama.cpp's order instead (f32_rows.h). The activation rows of F16 weights are rounded to F16 and kept
 * as F32 (tokd_type_traits.act_convert), as ggml's CPU backend converts them (its
 * vec_dot_type for F16 rows is F16): each element is the round trip through
 * tokd_f32_to_f16, so each product with a weight is exact in F32. The AVX2 form
 * (dot_avx2.c) gives the same bits for every input but NaN. */
void tokd_f16_round_row(const float *src, void *dst, int64_t n);
void tokd_f16_round_row_avx2(const float *src, void *dst, int64_t n);

void tokd_f16_dot_ref(int64_t n, float *out, const void *w, const void *act);

/* ---- SIMD (dot_avx2.c, dot_avx512.c); call only if the CPU has the features ------ */
#define TOKD_DOT_DECL(T, ISA) void tokd_##T##_dot_##ISA(int64_t n, float *out, const void *w, const void *act);
#define TOKD_DOT_QUANT(ISA)                                                                   \
    TOKD_DOT_DECL(q4_0, ISA) TOKD_DOT_DECL(q4_1, ISA) TOKD_DOT_DECL(q5_0, ISA)               \
    TOKD_DOT_DECL(q5_1, ISA) TOKD_DOT_DECL(q8_0, ISA) TOKD_DOT_DECL(q2_K, ISA)               \
    TOKD_DOT_DECL(q3_K, ISA) TOKD_DOT_DECL(q4_K, ISA) TOKD_DOT_DECL(q5_K, ISA)               \
    TOKD_DOT_DECL(q6_K, ISA)
#define TOKD_DOT_FLOAT(ISA) TOKD_DOT_DECL(f16, ISA) /* F32 rows: f32_rows.h */
TOKD_DOT_FLOAT(avx2) TOKD_DOT_QUANT(avx2)     /* dot_avx2.c: AVX2 + FMA + F16C */
TOKD_DOT_FLOAT(avx512) TOKD_DOT_QUANT(avx512) /* dot_avx512.c: + AVX-512 F/BW/VL */
TOKD_DOT_QUANT(avx512vnni)                    /* dot_avx512.c: + AVX-512 VNNI */
#define TOKD_DOT_IQ4(ISA) TOKD_DOT_DECL(iq4_nl, ISA) TOKD_DOT_DECL(iq4_xs, ISA)
TOKD_DOT_IQ4(avx2) TOKD_DOT_IQ4(avx512) TOKD_DOT_IQ4(avx512vnni)
/* dot_iq_avx2.c: the grid types, AVX2 (every SIMD path uses it), one and four rows */
#define TOKD_DOT_IQ(T)                                                                                           \
    void tokd_##T##_dot_avx2(int64_t n, float *out, const void *w, const void *act);                             \
    void tokd_##T##_dot4_avx2(int64_t n, float out[4], const void *w, const void *act, size_t act_stride); \
    void tokd_##T##_gemm_avx2(int64_t K, int64_t nw, const void *w, size_t ws, int64_t na, const void *act, size_t as, \
                              float *y, int64_t ldy);                                                         \
    void tokd_##T##_gemm_avx512(int64_t K, int64_t nw, const void *w, size_t ws, int64_t na, const void *act, size_t as, \
                                float *y, int64_t ldy);
TOKD_DOT_IQ(iq2_xxs) TOKD_DOT_IQ(iq2_xs) TOKD_DOT_IQ(iq2_s) TOKD_DOT_IQ(iq3_xxs) TOKD_DOT_IQ(iq3_s) TOKD_DOT_IQ(iq1_s)
TOKD_DOT_IQ(iq1_m)
#undef TOKD_DOT_IQ
/* dot_iq_avx512.c: IQ2_XXS and IQ3_XXS one-row kernels, AVX-512 with VBMI and VNNI;
 * tokd_iq_avx512_init fills their controls once (tokd_kernels_init calls it) */
#define TOKD_DOT_IQ_VBMI(T) void tokd_##T##_dot_avx512vbmi(int64_t n, float *out, const void *w, const void *act);
TOKD_DOT_IQ_VBMI(iq2_xxs) TOKD_DOT_IQ_VBMI(iq3_xxs)
#undef TOKD_DOT_IQ_VBMI
void tokd_iq_avx512_init(void);
/* ... and IQ3_XXS super-blocks unpacked for the VNNI gemm: the 256 weights with their
 * signs, plus 128, as unsigned bytes, and the eight sub-blocks' scale multipliers */
void tokd_iq3_xxs_unpack_avx512vbmi(const void *blk, uint8_t w[256], int32_t ls[8]);
/* their gemm's activation rows: Q8_K with 128 added to each quant, 64-byte multiples */
size_t tokd_iq_gemm_act_bytes(int64_t K);
void tokd_iq_gemm_prep(const float *x, void *dst, int64_t K);
/* gemm_iq_avx512.c and gemm_iq_avxvnni.c: their gemm on AVX-512 VNNI, sixteen weight
 * rows a vector, and on AVX-VNNI, eight; its activation rows are plain Q8_K
 * (tokd_iq_gemm_prep_vnni), tokd_iq_gemm_act_bytes each */
#define TOKD_GEMM_IQ_VNNI(T)                                                                                   \
    void tokd_##T##_gemm_avx512vnni(int64_t K, int64_t nw, const void *w, size_t ws, int64_t na, const void *act, \
                                    size_t as, float *y, int64_t ldy);                                         \
    void tokd_##T##_gemm_avxvnni(int64_t K, int64_t nw, const void *w, size_t ws, int64_t na, const void *act,   \
                                 size_t as, float *y, int64_t ldy);
TOKD_GEMM_IQ_VNNI(iq2_xxs) TOKD_GEMM_IQ_VNNI(iq2_xs) TOKD_GEMM_IQ_VNNI(iq2_s) TOKD_GEMM_IQ_VNNI(iq3_xxs)
TOKD_GEMM_IQ_VNNI(iq3_s) TOKD_GEMM_IQ_VNNI(iq1_s) TOKD_GEMM_IQ_VNNI(iq1_m)
#undef TOKD_GEMM_IQ_VNNI
/* ... and IQ3_XXS's with VBMI too (its super-blocks unpacked by dot_iq_avx512.c) */
void tokd_iq3_xxs_gemm_avx512vbmi(int64_t K, int64_t nw, const void *w, size_t ws, int64_t na, const void *act, size_t as,
                                  float *y, int64_t ldy);
void tokd_iq_gemm_prep_vnni(const float *x, void *dst, int64_t K);
/* The float rows' decode forms (tokd_type_traits.vec_dot_stream): the same bits as the
 * plain ones, with the row's pages primed and its lines prefetched ahead. */
#define TOKD_DOT_STREAM(ISA)                                                                  \
    TOKD_DOT_DECL(f16_stream, ISA)
TOKD_DOT_STREAM(avx2) TOKD_DOT_STREAM(avx512)
/* ... and for one to four activation rows at once, into lane sums (tokd_vec_dot_rows_part_fn) */
#define TOKD_DOT_PART_DECL(T, ISA)                                                                  \
    void tokd_##T##_rows_part_##ISA(int64_t n, const float *acc_in, float *acc, const void *w, const void *act, \
                                    size_t act_stride, int rows, const void *pf);
#define TOKD_DOT_PART(ISA) TOKD_DOT_PART_DECL(f16, ISA)
TOKD_DOT_PART(avx2) TOKD_DOT_PART(avx512)
/* four activation rows at once (see tokd_vec_dot4_fn), dot_avx512.c */
#define TOKD_DOT4_DECL(T, ISA) \
    void tokd_##T##_dot4_##ISA(int64_t n, float out[4], const void *w, const void *act, size_t act_stride);
#define TOKD_DOT4_ALL(ISA) TOKD_DOT4_DECL(q4_0, ISA) TOKD_DOT4_DECL(q8_0, ISA) TOKD_DOT4_DECL(q4_K, ISA) TOKD_DOT4_DECL(q6_K, ISA) \
    TOKD_DOT4_DECL(iq4_nl, ISA) TOKD_DOT4_DECL(iq4_xs, ISA)
TOKD_DOT4_ALL(avx512) TOKD_DOT4_ALL(avx512vnni)
TOKD_DOT4_DECL(f16, avx512) /* and dot_avx2.c: */
TOKD_DOT4_DECL(f16, avx2)
/* two weight rows against four activation rows (see tokd_vec_dot2x4_fn), dot_avx512.c */
#define TOKD_DOT2X4_DECL(T)                                                                         \
    void tokd_##T##_dot2x4_avx512(int64_t n, float out[8], const void *w, size_t w_stride, const void *act, \
                                  size_t act_stride);
TOKD_DOT2X4_DECL(f16)
#undef TOKD_DOT4_ALL
/* gemm_avx512.c (AVX-512 VNNI + VBMI): Q4_0 and Q8_0 products with prepared activation
 * rows (see tokd_gemm_fn and the layout in gemm_avx512.c). tokd_gemm_init builds the
 * gather tables (called by tokd_kernels_init). */
void tokd_gemm_init(void);
size_t tokd_gemm_q8x_act_bytes(int64_t K);
void tokd_gemm_q4_0_prep(const float *x, void *dst, int64_t K);
void tokd_gemm_q8_0_prep(const float *x, void *dst, int64_t K);
void tokd_gemm_prep_ref(const float *x, void *dst, int64_t K, int q8w); /* scalar, for tests */
void tokd_gemm_q4_0_avx512vbmi(int64_t K, int64_t nw, const void *w, size_t ws, int64_t na, const void *act, size_t as,
                               float *y, int64_t ldy);
void tokd_gemm_q8_0_avx512vbmi(int64_t K, int64_t nw, const void *w, size_t ws, int64_t na, const void *act, size_t as,
                               float *y, int64_t ldy);
#undef TOKD_DOT4_DECL
#undef TOKD_DOT_FLOAT
#undef TOKD_DOT_QUANT
#undef TOKD_DOT_DECL

#endif
