/* packed.c — see packed.h: the packers, activation preparation, the scalar statement of
 * the packed numerics, and the choice of packed form per weight type and CPU. */
#include "kernels/packed.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quants.h"
#include "kernels/types.h"
#include "gguf.h"
#include "util.h"

#define QK 32

static size_t q4_0_group_bytes(int64_t K) { return (size_t)(K / QK) * TOKD_PACK_ROWS * sizeof(tokd_block_q4_0); }
static size_t q8_0_group_bytes(int64_t K) { return (size_t)(K / QK) * TOKD_PACK_ROWS * sizeof(tokd_block_q8_0); }

static size_t act_bytes(int64_t K) {
    size_t nb = (size_t)(K / QK);
    return (nb * (QK + 2 * sizeof(float)) + 63) & ~(size_t)63;
}

/* The activation quantiser's amax (quants.c): |x| over the block, NaN passed over. */
static float absmax_q8(const float *x) {
    float m = 0.0f;
    for (int i = 0; i < QK; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

/* Quantise x as the Q8_0 activation format does and lay it out as packed.h says, with
 * corrections -bias * (sum of the block's quants), or Q8_1's s (TOKD_PK_BIAS_S). */
void tokd_packed_prep_ref(const float *x, void *dst, int64_t K, int32_t bias) {
    const int64_t nb = K / QK;
    uint8_t *qs = dst;
    float *dy = (float *)(qs + nb * QK);
    int32_t *corr = (int32_t *)(dy + nb);
    for (int64_t b = 0; b < nb; b++) {
        tokd_block_q8_0 blk;
        tokd_q8_0_from_float(x + b * QK, &blk, QK);
        memcpy(qs + b * QK, blk.qs, QK);
        dy[b] = tokd_f16_to_f32(blk.d);
        int32_t s = 0;
        for (int i = 0; i < QK; i++) s += blk.qs[i];
        if (bias == TOKD_PK_BIAS_S) { /* Q8_1's s: its d before rounding (quants.c) */
            const float sy = tokd_f16_to_f32(tokd_f32_to_f16(absmax_q8(x + b * QK) / 127.f * (float)s));
            memcpy(&corr[b], &sy, 4);
        } else {
            corr[b] = -bias * s;
        }
    }
}
static void q4_0_prep(const float *x, void *dst, int64_t K) { tokd_packed_prep_avx512(x, dst, K, 8); }
static void q8_0_prep(const float *x, void *dst, int64_t K) { tokd_packed_prep_avx512(x, dst, K, 128); }
static void q4_0_prep_avx2(const float *x, void *dst, int64_t K) { tokd_packed_prep_avx2(x, dst, K, 8); }
static void q8_0_prep_avx2(const float *x, void *dst, int64_t K) { tokd_packed_prep_avx2(x, dst, K, 0); }

static void q4_0_pack(const void *rows, size_t row_bytes, void *dst, int64_t K) {
    const int64_t nb = K / QK;
    const size_t bb = TOKD_PACK_ROWS * sizeof(tokd_block_q4_0);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *sc = (uint8_t *)dst + tokd_pk_scales_at(b, bb), *v = (uint8_t *)dst + tokd_pk_vectors_at(b, nb, bb);
        for (int L = 0; L < TOKD_PACK_ROWS; L++) {
            const tokd_block_q4_0 *x = (const tokd_block_q4_0 *)((const uint8_t *)rows + (size_t)L * row_bytes) + b;
            memcpy(sc + 2 * L, &x->d, 2);
            for (int c = 0; c < 4; c++) memcpy(v + 64 * c + 4 * L, x->qs + 4 * c, 4);
        }
    }
}

/* AVX-512 Q4_0 in groups of 32 rows (packed.h): block b at b * 576, its 32 scales, then
 * the two halves' vectors as q4_0_pack lays out 16 rows' */
static size_t q4_0x32_group_bytes(int64_t K) { return 2 * q4_0_group_bytes(K); }
static void q4_0x32_pack(const void *rows, size_t row_bytes, void *dst, int64_t K) {
    const int64_t nb = K / QK;
    const size_t bb = 2 * TOKD_PACK_ROWS * sizeof(tokd_block_q4_0);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *sc = (uint8_t *)dst + (size_t)b * bb;
        for (int L = 0; L < 2 * TOKD_PACK_ROWS; L++) {
            const tokd_block_q4_0 *x = (const tokd_block_q4_0 *)((const uint8_t *)rows + (size_t)L * row_bytes) + b;
            uint8_t *v = sc + 64 + 256 * (L / TOKD_PACK_ROWS);
            memcpy(sc + 2 * L, &x->d, 2);
            for (int c = 0; c < 4; c++) memcpy(v + 64 * c + 4 * (L % TOKD_PACK_ROWS), x->qs + 4 * c, 4);
        }
    }
}

/* Q5_0: Q4_0's block of 16 rows (scales, nibble vectors) plus one vector of fifth bits,
 * rearranged so that bit 2c + h of byte i in lane L is the fifth bit of row L's weight
 * 16h + 4c + i: the one whose nibble sits at byte i of nibble vector c, low (h = 0) or
 * high (h = 1). The file's 22 bytes per row and block. */
/* Byte i of a row's lane in the fifth-bit vector (packed.h): bit 2c+h = the fifth bit of
 * weight 16h+4c+i (qh: the block's 32 fifth bits, Q5_0 and Q5_1 alike). */
static uint8_t q5_fifth_bits(uint32_t qh, int i) {
    uint8_t byte = 0;
    for (int c = 0; c < 4; c++)
        for (int h = 0; h < 2; h++) byte |= (uint8_t)(((qh >> (16 * h + 4 * c + i)) & 1) << (2 * c + h));
    return byte;
}

/* ---- Q4_1 and Q5_1 (both paths): per block the 16 d, the 16 m, Q4_0's vectors (Q5_1:
 * and a fifth-bit vector); no pairs ---- */

#define Q4_1_BLOCK_BYTES (TOKD_PACK_ROWS * sizeof(tokd_block_q4_1))
static size_t q4_1_group_bytes(int64_t K) { return (size_t)(K / QK) * Q4_1_BLOCK_BYTES; }
static void q4_1_prep(const float *x, void *dst, int64_t K) { tokd_packed_prep_avx512(x, dst, K, TOKD_PK_BIAS_S); }
static void q4_1_prep_avx2(const float *x, void *dst, int64_t K) { tokd_packed_prep_avx2(x, dst, K, TOKD_PK_BIAS_S); }
static void q4_1_pack(const void *rows, size_t row_bytes, void *dst, int64_t K) {
    for (int64_t b = 0; b < K / QK; b++) {
        uint8_t *blk = (uint8_t *)dst + (size_t)b * Q4_1_BLOCK_BYTES, *v = blk + 64;
        for (int L = 0; L < TOKD_PACK_ROWS; L++) {
            const tokd_block_q4_1 *x = (const tokd_block_q4_1 *)((const uint8_t *)rows + (size_t)L * row_bytes) + b;
            memcpy(blk + 2 * L, &x->d, 2);
            memcpy(blk + 32 + 2 * L, &x->m, 2);
            for (int c = 0; c < 4; c++) memcpy(v + 64 * c + 4 * L, x->qs + 4 * c, 4);
        }
    }
}

/* Q5_1: Q4_1's block, then the fifth bits as q5_0_pack lays them out */
#define Q5_1_BLOCK_BYTES (TOKD_PACK_ROWS * sizeof(tokd_block_q5_1))
static size_t q5_1_group_bytes(int64_t K) { return (size_t)(K / QK) * Q5_1_BLOCK_BYTES; }
static void q5_1_pack(const void *rows, size_t row_bytes, void *dst, int64_t K) {
    for (int64_t b = 0; b < K / QK; b++) {
        uint8_t *blk = (uint8_t *)dst + (size_t)b * Q5_1_BLOCK_BYTES, *v = blk + 64;
        for (int L = 0; L < TOKD_PACK_ROWS; L++) {
            const tokd_block_q5_1 *x = (const tokd_block_q5_1 *)((const uint8_t *)rows + (size_t)L * row_bytes) + b;
            const uint32_t qh = tokd_load_u32le(x->qh);
            memcpy(blk + 2 * L, &x->d, 2);
            memcpy(blk + 32 + 2 * L, &x->m, 2);
            for (int c = 0; c < 4; c++) memcpy(v + 64 * c + 4 * L, x->qs + 4 * c, 4);
            for (int i = 0; i < 4; i++) v[256 + 4 * L + i] = q5_fifth_bits(qh, i);
        }
    }
}

static size_t q5_0_group_bytes(int64_t K) { return (size_t)(K / QK) * TOKD_PACK_ROWS * sizeof(tokd_block_q5_0); }
static void q5_0_prep(const float *x, void *dst, int64_t K) { tokd_packed_prep_avx512(x, dst, K, 16); }
static void q5_0_prep_avx2(const float *x, void *dst, int64_t K) { tokd_packed_prep_avx2(x, dst, K, 16); }
static void q5_0_pack(const void *rows, size_t row_bytes, void *dst, int64_t K) {
    const int64_t nb = K / QK;
    const size_t bb = TOKD_PACK_ROWS * sizeof(tokd_block_q5_0);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *sc = (uint8_t *)dst + tokd_pk_scales_at(b, bb), *v = (uint8_t *)dst + tokd_pk_vectors_at(b, nb, bb);
        for (int L = 0; L < TOKD_PACK_ROWS; L++) {
            const tokd_block_q5_0 *x = (const tokd_block_q5_0 *)((const uint8_t *)rows + (size_t)L * row_bytes) + b;
            const uint32_t qh = tokd_load_u32le(x->qh);
            memcpy(sc + 2 * L, &x->d, 2);
            for (int c = 0; c < 4; c++) memcpy(v + 64 * c + 4 * L, x->qs + 4 * c, 4);
            for (int i = 0; i < 4; i++) v[256 + 4 * L + i] = q5_fifth_bits(qh, i);
        }
    }
}

/* Q8_0 groups with the quants plus `offset` (128: unsigned bytes for vpdpbusd; 0: signed,
 * the AVX2 form). */
/* flip: 0x80808080 adds 128 to each byte (the unsigned quants of the VNNI form), 0
 * keeps them signed; four bytes a word (byte by byte the pack ran at 2.7-3.0 GB/s) */
static void q8_0_pack_flip(const void *rows, size_t row_bytes, void *dst, int64_t K, uint32_t flip) {
    const int64_t nb = K / QK;
    const size_t bb = TOKD_PACK_ROWS * sizeof(tokd_block_q8_0);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *sc = (uint8_t *)dst + tokd_pk_scales_at(b, bb), *v = (uint8_t *)dst + tokd_pk_vectors_at(b, nb, bb);
        for (int L = 0; L < TOKD_PACK_ROWS; L++) {
            const tokd_block_q8_0 *x = (const tokd_block_q8_0 *)((const uint8_t *)rows + (size_t)L * row_bytes) + b;
            memcpy(sc + 2 * L, &x->d, 2);
            uint32_t q[8];
            memcpy(q, x->qs, 32);
            for (int g = 0; g < 8; g++) {
                const uint32_t w = q[g] ^ flip;
                memcpy(v + 64 * g + 4 * L, &w, 4);
            }
        }
    }
}
static void q8_0_pack(const void *rows, size_t row_bytes, void *dst, int64_t K) {
    q8_0_pack_flip(rows, row_bytes, dst, K, 0x80808080u);
}
static void q8_0_pack_signed(const void *rows, size_t row_bytes, void *dst, int64_t K) {
    q8_0_pack_flip(rows, row_bytes, dst, K, 0);
}

/* ---- Q6_K (packed.h: its numerics are the file layout's vec_dot, bit for bit) ---- */

#define Q6K_ACT_BYTES 324 /* per super-block: 256 quants, float d, 16 int32 corrections */

static size_t q6_K_group_bytes(int64_t K) { return (size_t)(K / TOKD_QK_K) * TOKD_PACK_ROWS * sizeof(tokd_block_q6_K); }
static size_t q6_K_act_bytes(int64_t K) { return ((size_t)(K / TOKD_QK_K) * Q6K_ACT_BYTES + 63) & ~(size_t)63; }

/* One super-block of a K-quant activation row: Q8_K's quantiser, its 256 quants and
 * float d written at out, the block returned for the sums each type adds after them. */
static void q8_K_head(const float *x, uint8_t *out, tokd_block_q8_K *blk) {
    tokd_q8_K_quantize(x, blk, TOKD_QK_K);
    memcpy(out, blk->qs, TOKD_QK_K);
    memcpy(out + 256, &blk->d, 4);
}

/* Q8_K's quantiser, laid out per super-block as quants, d, and -bias * each 16-element
 * sum (the kernel multiplies unsigned values: Q6_K's q + 32, Q3_K's q + 4). */
static void k16_prep(const float *x, void *dst, int64_t K, int32_t bias) {
    uint8_t *out = dst;
    for (int64_t b = 0; b < K / TOKD_QK_K; b++, out += Q6K_ACT_BYTES) {
        tokd_block_q8_K blk;
        q8_K_head(x + b * TOKD_QK_K, out, &blk);
        for (int j = 0; j < 16; j++) {
            int32_t c = -bias * (int32_t)blk.bsums[j];
            memcpy(out + 260 + 4 * j, &c, 4);
        }
    }
}
static void q6_K_prep(const float *x, void *dst, int64_t K) { k16_prep(x, dst, K, 32); }

/* The unsigned 6-bit values (q + 32) of a Q6_K block's 256 weights, in order: weight
 * 128h + 32k + l has its low nibble in ql[64h + l + 32(k & 1)] (the high nibble for
 * k >= 2) and its top two bits at bit 2k of qh[32h + l]. One pass over the block: a
 * call per weight with the index arithmetic repeated made the pack run at 0.4 GB/s. */
static void q6_unpack(const tokd_block_q6_K *x, uint8_t u[TOKD_QK_K]) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t a = x->ql[64 * h + l], b = x->ql[64 * h + 32 + l], hb = x->qh[32 * h + l];
            u[128 * h + l] = (uint8_t)((a & 0xF) | (hb & 3) << 4);
            u[128 * h + 32 + l] = (uint8_t)((b & 0xF) | ((hb >> 2) & 3) << 4);
            u[128 * h + 64 + l] = (uint8_t)((a >> 4) | ((hb >> 4) & 3) << 4);
            u[128 * h + 96 + l] = (uint8_t)((b >> 4) | ((hb >> 6) & 3) << 4);
        }
}

/* Per super-block of 16 rows: 16 fp16 d; scales [sub-block j][row L]; then three
 * vectors per sub-block j (at 192 j), A, B and C: lane L, byte i of A, B and C holds,
 * in bits 0-5, the unsigned value (q + 32) of row L's weight 16j + i, 16j + 4 + i and
 * 16j + 8 + i, and in bits 6-7, bits 0-1, 2-3 and 4-5 of weight 16j + 12 + i's. So the
 * kernels rebuild a sub-block's four groups of four weights with three masks and a few
 * shifts and merges for the fourth, from three lines read in order (the file's split
 * into nibbles and top bits took about half as many instructions again; packed_avx512.c,
 * k16_tile). 16 * 210 bytes, as in the file. */
static void q6_K_pack(const void *rows, size_t row_bytes, void *dst, int64_t K) {
    const int64_t nb = K / TOKD_QK_K;
    const size_t sb = TOKD_PACK_ROWS * sizeof(tokd_block_q6_K);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *ds = (uint8_t *)dst + tokd_pk_scales_at(b, sb), *sc = (uint8_t *)dst + tokd_pk_vectors_at(b, nb, sb);
        uint8_t *q = sc + 256;
        for (int L = 0; L < TOKD_PACK_ROWS; L++) {
            const tokd_block_q6_K *x = (const tokd_block_q6_K *)((const uint8_t *)rows + (size_t)L * row_bytes) + b;
            uint8_t u[TOKD_QK_K];
            q6_unpack(x, u);
            memcpy(ds + 2 * L, &x->d, 2);
            for (int j = 0; j < 16; j++) {
                sc[16 * j + L] = (uint8_t)x->scales[j];
                /* four weights a 32-bit word: byte i of vector t is u[16j + 4t + i] with bits
                   2t, 2t+1 of u[16j + 12 + i] on top (each u < 64, so no bit crosses a byte) */
                uint32_t a[4];
                memcpy(a, u + 16 * j, 16);
                for (int t = 0; t < 3; t++) {
                    const uint32_t v = a[t] | ((a[3] >> (2 * t)) & 0x03030303u) << 6;
                    memcpy(q + 192 * j + 64 * t + 4 * L, &v, 4);
                }
            }
        }
    }
}

static float q6_K_ref_dot(int64_t K, const void *row, const void *act) {
    float out;
    tokd_q6_K_dot_ref(K, &out, row, act);
    return out;
}

/* ---- Q3_K (Q6_K's kernel shape and numerics: the file layout's vec_dot) ---- */

#define Q3K_GROUP_SB (32 + 256 + 1024 + 512) /* per super-block of 16 rows */

static size_t q3_K_group_bytes(int64_t K) { return (size_t)(K / TOKD_QK_K) * Q3K_GROUP_SB; }
static void q3_K_prep(const float *x, void *dst, int64_t K) { k16_prep(x, dst, K, 4); }

/* Per super-block of 16 rows: 16 fp16 d; the 16 six-bit scales minus 32 as int8,
 * [sub-block j][row L] (64 bytes more than the file per 16 rows); 16 vectors of two-bit
 * quants (vector v, lane L, byte i = qs[4v + i] of row L) and 8 of high bits (vector t,
 * lane L, byte i = hmask[4t + i]), both in the file's byte order. Weight 32p + 4t + i
 * (p = 0..7) is bits 2(p%4)..2(p%4)+1 of two-bit vector 8(p/4) + t, and bit p of high-bit
 * vector t; the kernel multiplies its unsigned value q + 4. */
static void q3_K_pack(const void *rows, size_t row_bytes, void *dst, int64_t K) {
    const int64_t nb = K / TOKD_QK_K;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *ds = (uint8_t *)dst + tokd_pk_scales_at(b, Q3K_GROUP_SB);
        uint8_t *body = (uint8_t *)dst + tokd_pk_vectors_at(b, nb, Q3K_GROUP_SB); /* scales, then the vectors */
        for (int L = 0; L < TOKD_PACK_ROWS; L++) {
            const tokd_block_q3_K *x = (const tokd_block_q3_K *)((const uint8_t *)rows + (size_t)L * row_bytes) + b;
            memcpy(ds + 2 * L, &x->d, 2);
            for (int j = 0; j < 16; j++) body[16 * j + L] = (uint8_t)(int8_t)tokd_q3k_scale(x->scales, j);
            for (int v = 0; v < 16; v++) memcpy(body + 256 + 64 * v + 4 * L, x->qs + 4 * v, 4);
            for (int t = 0; t < 8; t++) memcpy(body + 256 + 1024 + 64 * t + 4 * L, x->hmask + 4 * t, 4);
        }
    }
}

static float q3_K_ref_dot(int64_t K, const void *row, const void *act) {
    float out;
    tokd_q3_K_dot_ref(K, &out, row, act);
    return out;
}

/* ---- Q2_K (Q6_K's kernel shape, Q4_K's mins term; numerics: the file's vec_dot) ---- */

static size_t q2_K_group_bytes(int64_t K) { return (size_t)(K / TOKD_QK_K) * TOKD_PACK_ROWS * sizeof(tokd_block_q2_K); }

/* Q8_K's quantiser per super-block: quants, d, and the 16 sixteen-element sums as int16
 * (|sum| <= 2032) for the mins term. */
static void q2_K_prep(const float *x, void *dst, int64_t K) {
    uint8_t *out = dst;
    for (int64_t b = 0; b < K / TOKD_QK_K; b++, out += Q6K_ACT_BYTES) {
        tokd_block_q8_K blk;
        q8_K_head(x + b * TOKD_QK_K, out, &blk);
        memcpy(out + 260, blk.bsums, 32);
    }
}

/* Per super-block of 16 rows: 16 fp16 d, 16 fp16 dmin, the file's scale bytes (scale in
 * the low nibble, min in the high) [sub-block j][row L], and 16 vectors of two-bit quants
 * in the file's byte order (vector v, lane L, byte i = qs[4v + i] of row L; weight 32p +
 * 4t + i, p = 0..7, is bits 2(p%4)..2(p%4)+1 of vector 8(p/4) + t). 16 * 84 bytes, as in
 * the file. */
static void q2_K_pack(const void *rows, size_t row_bytes, void *dst, int64_t K) {
    uint8_t *out = dst;
    for (int64_t b = 0; b < K / TOKD_QK_K; b++, out += TOKD_PACK_ROWS * sizeof(tokd_block_q2_K))
        for (int L = 0; L < TOKD_PACK_ROWS; L++) {
            const tokd_block_q2_K *x = (const tokd_block_q2_K *)((const uint8_t *)rows + (size_t)L * row_bytes) + b;
            memcpy(out + 2 * L, &x->d, 2);
            memcpy(out + 32 + 2 * L, &x->dmin, 2);
            for (int j = 0; j < 16; j++) out[64 + 16 * j + L] = x->scales[j];
            for (int v = 0; v < 16; v++) memcpy(out + 320 + 64 * v + 4 * L, x->qs + 4 * v, 4);
        }
}

static float q2_K_ref_dot(int64_t K, const void *row, const void *act) {
    float out;
    tokd_q2_K_dot_ref(K, &out, row, act);
    return out;
}

/* ---- Q4_K (its numerics, too, are the file layout's vec_dot) ---- */

#define Q4K_ACT_BYTES 276   /* per super-block: 256 quants, float d, 8 int16 pair sums */
#define Q4K_GROUP_SB 2304   /* per super-block of 16 rows: d, dmin, six-bit scales and mins, quants */

static size_t q4_K_group_bytes(int64_t K) { return (size_t)(K / TOKD_QK_K) * Q4K_GROUP_SB; }
static size_t q4_K_act_bytes(int64_t K) { return ((size_t)(K / TOKD_QK_K) * Q4K_ACT_BYTES + 63) & ~(size_t)63; }

/* Q8_K's quantiser per super-block: quants, d, and the eight 32-element sums (each the
 * sum of two of Q8_K's 16-element sums; |sum| <= 4064 fits int16) for the min term. */
static void q4_K_prep(const float *x, void *dst, int64_t K) {
    uint8_t *out = dst;
    for (int64_t b = 0; b < K / TOKD_QK_K; b++, out += Q4K_ACT_BYTES) {
        tokd_block_q8_K blk;
        q8_K_head(x + b * TOKD_QK_K, out, &blk);
        for (int j = 0; j < 8; j++) {
            int16_t s2 = (int16_t)(blk.bsums[2 * j] + blk.bsums[2 * j + 1]);
            memcpy(out + 260 + 2 * j, &s2, 2);
        }
    }
}

/* Per super-block of 16 rows (36 lines, the file's bytes): 16 fp16 d, 16 fp16 dmin,
 * three vectors of the six-bit scales and mins as the file codes them (vector v, lane L =
 * bytes 4v .. 4v+3 of row L's 12 scale bytes: the kernels unpack sub-block j's scale and
 * min for all 16 rows with a few shifts, masks and byte shuffles, tokd_k4_scale_min's
 * rule), then 32 vectors of quants: vector 8c + t, lane L, byte i = qs[32c + 4t + i] of
 * row L (low nibble: weight 64c + 4t + i, high: weight 64c + 32 + 4t + i). Unpacking the
 * scales to bytes at load time instead (the layout before) made it 37 lines, 2.8 % more
 * to stream per token than the file. One core's in-cache rate is the same with the
 * unpacking in the kernel (107-110 GB/s both); streaming from memory on two threads, a
 * matrix took 0.99-1.06 (median 1.03) of the time it took before, four runs of 151
 * rounds alternated with the read probe (packed_avx512.c, k4_scales).
 * k4_pack_row writes row L's part from the fields Q4_K and Q5_K blocks share. */
static void k4_pack_row(uint8_t *out, int L, const uint16_t *d, const uint16_t *dmin, const uint8_t *scales,
                        const uint8_t *qs) {
    uint8_t *q = out + 256;
    memcpy(out + 2 * L, d, 2);
    memcpy(out + 32 + 2 * L, dmin, 2);
    for (int v = 0; v < 3; v++) memcpy(out + 64 + 64 * v + 4 * L, scales + 4 * v, 4);
    for (int v = 0; v < 32; v++) memcpy(q + 64 * v + 4 * L, qs + 4 * v, 4);
}

static void q4_K_pack(const void *rows, size_t row_bytes, void *dst, int64_t K) {
    uint8_t *out = dst;
    for (int64_t b = 0; b < K / TOKD_QK_K; b++, out += Q4K_GROUP_SB)
        for (int L = 0; L < TOKD_PACK_ROWS; L++) {
            const tokd_block_q4_K *x = (const tokd_block_q4_K *)((const uint8_t *)rows + (size_t)L * row_bytes) + b;
            k4_pack_row(out, L, &x->d, &x->dmin, x->scales, x->qs);
        }
}

static float q4_K_ref_dot(int64_t K, const void *row, const void *act) {
    float out;
    tokd_q4_K_dot_ref(K, &out, row, act);
    return out;
}

/* ---- Q5_K: Q4_K's group plus each row's fifth bits (numerics: the file's vec_dot) ---- */

#define Q5K_GROUP_SB (Q4K_GROUP_SB + TOKD_PACK_ROWS * 32)

static size_t q5_K_group_bytes(int64_t K) { return (size_t)(K / TOKD_QK_K) * Q5K_GROUP_SB; }

/* Q4_K's super-block of 16 rows (d, dmin, scales, mins, quant vectors: the Q5_K block
 * has the same fields but qh) followed by 8 vectors of high bits: vector t, lane L, byte
 * i = qh[4t + i] of row L, whose bit j is the fifth bit of sub-block j's weight 32j + 4t
 * + i, the one whose nibble sits at the same lane and byte of quant vector 8(j/2) + t. */
static void q5_K_pack(const void *rows, size_t row_bytes, void *dst, int64_t K) {
    uint8_t *out = dst;
    for (int64_t b = 0; b < K / TOKD_QK_K; b++, out += Q5K_GROUP_SB)
        for (int L = 0; L < TOKD_PACK_ROWS; L++) {
            const tokd_block_q5_K *x = (const tokd_block_q5_K *)((const uint8_t *)rows + (size_t)L * row_bytes) + b;
            k4_pack_row(out, L, &x->d, &x->dmin, x->scales, x->qs);
            for (int t = 0; t < 8; t++) memcpy(out + Q4K_GROUP_SB + 64 * t + 4 * L, x->qh + 4 * t, 4);
        }
}

static float q5_K_ref_dot(int64_t K, const void *row, const void *act) {
    float out;
    tokd_q5_K_dot_ref(K, &out, row, act);
    return out;
}

/* The numerics contract of packed.h, from file-layout rows: the exact block sums are
 * quants.h's, only the float accumulation (one fma per block, in order) is packed's.
 * Every 32-weight block starts with its fp16 d; block_bytes apart. */
static float block32_ref_dot(int64_t K, const uint8_t *row, size_t block_bytes, const tokd_block_q8_0 *y,
                             int32_t (*isum)(const void *x, const tokd_block_q8_0 *y)) {
    float out = 0.0f;
    for (int64_t b = 0; b < K / QK; b++, row += block_bytes) {
        uint16_t d;
        memcpy(&d, row, 2);
        out = fmaf(tokd_f16_to_f32(d) * tokd_f16_to_f32(y[b].d), (float)isum(row, &y[b]), out);
    }
    return out;
}
static int32_t q4_0_isum(const void *x, const tokd_block_q8_0 *y) { return tokd_q4_0_isum(x, y); }
static int32_t q5_0_isum(const void *x, const tokd_block_q8_0 *y) { return tokd_q5_0_isum(x, y); }
static int32_t q8_0_isum(const void *x, const tokd_block_q8_0 *y) { return tokd_q8_0_isum(x, y); }
static int32_t iq4_nl_isum(const void *x, const tokd_block_q8_0 *y) { return tokd_iq4_nl_isum(x, y); }
static float q4_0_ref_dot(int64_t K, const void *row, const void *act) {
    return block32_ref_dot(K, row, sizeof(tokd_block_q4_0), act, q4_0_isum);
}
static float q5_0_ref_dot(int64_t K, const void *row, const void *act) {
    return block32_ref_dot(K, row, sizeof(tokd_block_q5_0), act, q5_0_isum);
}
static float q8_0_ref_dot(int64_t K, const void *row, const void *act) {
    return block32_ref_dot(K, row, sizeof(tokd_block_q8_0), act, q8_0_isum);
}
static float iq4_nl_ref_dot(int64_t K, const void *row, const void *act) {
    return block32_ref_dot(K, row, sizeof(tokd_block_iq4_nl), act, iq4_nl_isum);
}

/* ---- IQ4_XS (AVX-512 VNNI): blocks of 32 as Q4_1's, whole lines without pairs; line 0
 * the 16 rows' fp16 d (of their super-block), then their int8 block scales (the file's
 * six bits minus 32), then 16 bytes of zeros; then Q4_0's 4 vectors of the block's
 * nibbles. Activation rows: Q8_K's quantiser (as the file layout's), laid out as Q8_0's
 * prepared rows with each block's scale the super-block's d and corrections -128 * the
 * block's quant sum. Contract: out = fmaf((d * ls_b) * dy, (float)isum_b, out) per block
 * of 32 in order, isum_b exact. */
static void iq4_xs_prep(const float *x, void *dst, int64_t K) {
    const int64_t nb = K / QK;
    uint8_t *qs = dst;
    float *dy = (float *)(qs + nb * QK);
    int32_t *corr = (int32_t *)(dy + nb);
    tokd_block_q8_K blk;
    for (int64_t B = 0; B < K / TOKD_QK_K; B++) {
        tokd_q8_K_quantize(x + B * TOKD_QK_K, &blk, TOKD_QK_K);
        memcpy(qs + B * TOKD_QK_K, blk.qs, TOKD_QK_K);
        for (int j = 0; j < 8; j++) {
            dy[8 * B + j] = blk.d;
            corr[8 * B + j] = -128 * ((int32_t)blk.bsums[2 * j] + blk.bsums[2 * j + 1]);
        }
    }
}
static void iq4_xs_pack(const void *rows, size_t row_bytes, void *dst, int64_t K) {
    for (int64_t b = 0; b < K / QK; b++) {
        uint8_t *blk = (uint8_t *)dst + (size_t)b * Q4_1_BLOCK_BYTES, *v = blk + 64;
        memset(blk, 0, 64);
        for (int L = 0; L < TOKD_PACK_ROWS; L++) {
            const tokd_block_iq4_xs *x = (const tokd_block_iq4_xs *)((const uint8_t *)rows + (size_t)L * row_bytes) + b / 8;
            memcpy(blk + 2 * L, &x->d, 2);
            blk[32 + L] = (uint8_t)(int8_t)tokd_iq4_xs_scale(x, (int)(b % 8));
            for (int c = 0; c < 4; c++) memcpy(v + 64 * c + 4 * L, x->qs + 16 * (b % 8) + 4 * c, 4);
        }
    }
}
static float iq4_xs_ref_dot(int64_t K, const void *row, const void *act) {
    const tokd_block_iq4_xs *x = row;
    const tokd_block_q8_K *y = act;
    float out = 0.0f;
    for (int64_t B = 0; B < K / TOKD_QK_K; B++)
        for (int j = 0; j < 8; j++) {
            const uint8_t *q = x[B].qs + 16 * j;
            const int8_t *a = y[B].qs + 32 * j;
            int32_t isum = 0;
            for (int l = 0; l < 16; l++) isum += tokd_iq4_values[q[l] & 0xF] * a[l] + tokd_iq4_values[q[l] >> 4] * a[l + 16];
            const float dx = tokd_f16_to_f32(x[B].d) * (float)tokd_iq4_xs_scale(&x[B], j);
            out = fmaf(dx * y[B].d, (float)isum, out);
        }
    return out;
}

/* Q4_1's and Q5_1's contract (packed.h) from file-layout rows, whose blocks start with
 * fp16 d and m, block_bytes apart, and Q8_1 activation blocks, whose s is the prepared
 * row's. */
static float min_block_ref_dot(int64_t K, const uint8_t *row, size_t block_bytes, const tokd_block_q8_1 *y,
                               int32_t (*isum)(const void *x, const tokd_block_q8_1 *y)) {
    float out = 0.0f;
    for (int64_t b = 0; b < K / QK; b++, row += block_bytes) {
        uint16_t d, m;
        memcpy(&d, row, 2);
        memcpy(&m, row + 2, 2);
        out = fmaf(tokd_f16_to_f32(d) * tokd_f16_to_f32(y[b].d), (float)isum(row, &y[b]), out);
        out = fmaf(tokd_f16_to_f32(m), tokd_f16_to_f32(y[b].s), out);
    }
    return out;
}
static int32_t q4_1_isum(const void *x, const tokd_block_q8_1 *y) { return tokd_q4_1_isum(x, y); }
static int32_t q5_1_isum(const void *x, const tokd_block_q8_1 *y) { return tokd_q5_1_isum(x, y); }
static float q4_1_ref_dot(int64_t K, const void *row, const void *act) {
    return min_block_ref_dot(K, row, sizeof(tokd_block_q4_1), act, q4_1_isum);
}
static float q5_1_ref_dot(int64_t K, const void *row, const void *act) {
    return min_block_ref_dot(K, row, sizeof(tokd_block_q5_1), act, q5_1_isum);
}

static const tokd_packed_traits PACKED[] = {
    {GGML_TYPE_Q4_0, q4_0x32_group_bytes, act_bytes, q4_0_prep, q4_0x32_pack, tokd_packed_q4_0x32_gemm_avx512vnni,
     q4_0_ref_dot, 8, 32},
    /* the first form of a type is the one offered; later ones only through tokd_packed_fit */
    {GGML_TYPE_Q8_0, q8_0_group_bytes, act_bytes, q8_0_prep, q8_0_pack, tokd_packed_q8_0_gemm_avx512vnni, q8_0_ref_dot, 128, 16},
    {GGML_TYPE_Q4_K, q4_K_group_bytes, q4_K_act_bytes, q4_K_prep, q4_K_pack, tokd_packed_q4_K_gemm_avx512vnni,
     q4_K_ref_dot, 0, 16},
    {GGML_TYPE_Q6_K, q6_K_group_bytes, q6_K_act_bytes, q6_K_prep, q6_K_pack, tokd_packed_q6_K_gemm_avx512vnni,
     q6_K_ref_dot, 0, 16},
    {GGML_TYPE_Q5_K, q5_K_group_bytes, q4_K_act_bytes, q4_K_prep, q5_K_pack, tokd_packed_q5_K_gemm_avx512vnni,
     q5_K_ref_dot, 0, 16},
    {GGML_TYPE_Q3_K, q3_K_group_bytes, q6_K_act_bytes, q3_K_prep, q3_K_pack, tokd_packed_q3_K_gemm_avx512vnni,
     q3_K_ref_dot, 0, 16},
    {GGML_TYPE_Q2_K, q2_K_group_bytes, q6_K_act_bytes, q2_K_prep, q2_K_pack, tokd_packed_q2_K_gemm_avx512vnni,
     q2_K_ref_dot, 0, 16},
    {GGML_TYPE_Q5_0, q5_0_group_bytes, act_bytes, q5_0_prep, q5_0_pack, tokd_packed_q5_0_gemm_avx512vnni, q5_0_ref_dot, 16, 16},
    {GGML_TYPE_Q4_0, q4_0_group_bytes, act_bytes, q4_0_prep, q4_0_pack, tokd_packed_q4_0_gemm_avx512vnni, q4_0_ref_dot, 8, 16},
    {GGML_TYPE_Q4_1, q4_1_group_bytes, act_bytes, q4_1_prep, q4_1_pack, tokd_packed_q4_1_gemm_avx512vnni, q4_1_ref_dot,
     TOKD_PK_BIAS_S, 16},
    {GGML_TYPE_Q5_1, q5_1_group_bytes, act_bytes, q4_1_prep, q5_1_pack, tokd_packed_q5_1_gemm_avx512vnni, q5_1_ref_dot,
     TOKD_PK_BIAS_S, 16},
    /* IQ4_NL: Q4_0's bytes, Q8_0's activation rows (packed.h) */
    {GGML_TYPE_IQ4_NL, q4_0_group_bytes, act_bytes, q8_0_prep, q4_0_pack, tokd_packed_iq4_nl_gemm_avx512vnni,
     iq4_nl_ref_dot, 128, 16},
    {GGML_TYPE_IQ4_XS, q4_1_group_bytes, act_bytes, iq4_xs_prep, iq4_xs_pack, tokd_packed_iq4_xs_gemm_avx512vnni,
     iq4_xs_ref_dot, 0, 16},
};

/* AVX2 without AVX-512 VNNI, with AVX-VNNI or not (Q8_0 with signed quants:
 * packed_avx2.c) */
static const tokd_packed_traits PACKED_AVX2[] = {
    {GGML_TYPE_Q4_1, q4_1_group_bytes, act_bytes, q4_1_prep_avx2, q4_1_pack, tokd_packed_q4_1_gemm_avx2, q4_1_ref_dot,
     TOKD_PK_BIAS_S, 16},
    {GGML_TYPE_Q5_1, q5_1_group_bytes, act_bytes, q4_1_prep_avx2, q5_1_pack, tokd_packed_q5_1_gemm_avx2, q5_1_ref_dot,
     TOKD_PK_BIAS_S, 16},
    {GGML_TYPE_Q4_0, q4_0_group_bytes, act_bytes, q4_0_prep_avx2, q4_0_pack, tokd_packed_q4_0_gemm_avx2, q4_0_ref_dot, 8, 16},
    {GGML_TYPE_Q5_0, q5_0_group_bytes, act_bytes, q5_0_prep_avx2, q5_0_pack, tokd_packed_q5_0_gemm_avx2, q5_0_ref_dot, 16, 16},
    {GGML_TYPE_Q8_0, q8_0_group_bytes, act_bytes, q8_0_prep_avx2, q8_0_pack_signed, tokd_packed_q8_0_gemm_avx2,
     q8_0_ref_dot, 0, 16},
    {GGML_TYPE_Q4_K, q4_K_group_bytes, q4_K_act_bytes, q4_K_prep, q4_K_pack, tokd_packed_q4_K_gemm_avx2, q4_K_ref_dot, 0, 16},
    {GGML_TYPE_Q5_K, q5_K_group_bytes, q4_K_act_bytes, q4_K_prep, q5_K_pack, tokd_packed_q5_K_gemm_avx2, q5_K_ref_dot, 0, 16},
    {GGML_TYPE_Q6_K, q6_K_group_bytes, q6_K_act_bytes, q6_K_prep, q6_K_pack, tokd_packed_q6_K_gemm_avx2, q6_K_ref_dot, 0, 16},
    {GGML_TYPE_Q3_K, q3_K_group_bytes, q6_K_act_bytes, q3_K_prep, q3_K_pack, tokd_packed_q3_K_gemm_avx2, q3_K_ref_dot, 0, 16},
    {GGML_TYPE_Q2_K, q2_K_group_bytes, q6_K_act_bytes, q2_K_prep, q2_K_pack, tokd_packed_q2_K_gemm_avx2, q2_K_ref_dot, 0, 16},
};
static const tokd_packed_traits PACKED_AVXVNNI[] = {
    {GGML_TYPE_Q4_1, q4_1_group_bytes, act_bytes, q4_1_prep_avx2, q4_1_pack, tokd_packed_q4_1_gemm_avxvnni,
     q4_1_ref_dot, TOKD_PK_BIAS_S, 16},
    {GGML_TYPE_Q5_1, q5_1_group_bytes, act_bytes, q4_1_prep_avx2, q5_1_pack, tokd_packed_q5_1_gemm_avxvnni,
     q5_1_ref_dot, TOKD_PK_BIAS_S, 16},
    {GGML_TYPE_Q4_0, q4_0_group_bytes, act_bytes, q4_0_prep_avx2, q4_0_pack, tokd_packed_q4_0_gemm_avxvnni, q4_0_ref_dot, 8, 16},
    {GGML_TYPE_Q5_0, q5_0_group_bytes, act_bytes, q5_0_prep_avx2, q5_0_pack, tokd_packed_q5_0_gemm_avxvnni, q5_0_ref_dot,
     16, 16},
    {GGML_TYPE_Q8_0, q8_0_group_bytes, act_bytes, q8_0_prep_avx2, q8_0_pack_signed, tokd_packed_q8_0_gemm_avxvnni,
     q8_0_ref_dot, 0, 16},
    {GGML_TYPE_Q4_K, q4_K_group_bytes, q4_K_act_bytes, q4_K_prep, q4_K_pack, tokd_packed_q4_K_gemm_avxvnni,
     q4_K_ref_dot, 0, 16},
    {GGML_TYPE_Q5_K, q5_K_group_bytes, q4_K_act_bytes, q4_K_prep, q5_K_pack, tokd_packed_q5_K_gemm_avxvnni,
     q5_K_ref_dot, 0, 16},
    {GGML_TYPE_Q6_K, q6_K_group_bytes, q6_K_act_bytes, q6_K_prep, q6_K_pack, tokd_packed_q6_K_gemm_avxvnni,
     q6_K_ref_dot, 0, 16},
    {GGML_TYPE_Q3_K, q3_K_group_bytes, q6_K_act_bytes, q3_K_prep, q3_K_pack, tokd_packed_q3_K_gemm_avxvnni,
     q3_K_ref_dot, 0, 16},
    {GGML_TYPE_Q2_K, q2_K_group_bytes, q6_K_act_bytes, q2_K_prep, q2_K_pack, tokd_packed_q2_K_gemm_avxvnni,
     q2_K_ref_dot, 0, 16},
};

/* How each preparation splits by columns (tokd_packed_prep_cols): the Q8_0 layout's
 * blocks, through the block-range form of its SIMD preparation with the form's bias, or
 * the K-quants' super-blocks, whose bytes lie together (sb_bytes each). A preparation not
 * listed (IQ4_XS's) does not split. */
typedef struct {
    void (*prep)(const float *x, void *dst, int64_t K);
    void (*blocks)(const float *x, void *dst, int64_t K, int64_t b0, int64_t b1, int32_t bias);
    int32_t bias;
    size_t sb_bytes; /* K-quants: prepared bytes a super-block (blocks NULL) */
} prep_split;
static const prep_split PREP_SPLITS[] = {
    {q4_0_prep, tokd_packed_prep_blocks_avx512, 8, 0},
    {q8_0_prep, tokd_packed_prep_blocks_avx512, 128, 0},
    {q5_0_prep, tokd_packed_prep_blocks_avx512, 16, 0},
    {q4_1_prep, tokd_packed_prep_blocks_avx512, TOKD_PK_BIAS_S, 0},
    {q4_0_prep_avx2, tokd_packed_prep_blocks_avx2, 8, 0},
    {q8_0_prep_avx2, tokd_packed_prep_blocks_avx2, 0, 0},
    {q5_0_prep_avx2, tokd_packed_prep_blocks_avx2, 16, 0},
    {q4_1_prep_avx2, tokd_packed_prep_blocks_avx2, TOKD_PK_BIAS_S, 0},
    {q4_K_prep, NULL, 0, Q4K_ACT_BYTES},
    {q6_K_prep, NULL, 0, Q6K_ACT_BYTES},
    {q3_K_prep, NULL, 0, Q6K_ACT_BYTES},
    {q2_K_prep, NULL, 0, Q6K_ACT_BYTES},
};
static const prep_split *split_of(const tokd_packed_traits *pk) {
    for (size_t i = 0; i < sizeof PREP_SPLITS / sizeof PREP_SPLITS[0]; i++)
        if (PREP_SPLITS[i].prep == pk->prep) return &PREP_SPLITS[i];
    return NULL;
}

int64_t tokd_packed_prep_cols_align(const tokd_packed_traits *pk) {
    const prep_split *sp = split_of(pk);
    return !sp ? 0 : sp->blocks ? QK : TOKD_QK_K;
}

void tokd_packed_prep_cols(const tokd_packed_traits *pk, const float *x, void *dst, int64_t K, int64_t c0, int64_t c1) {
    const prep_split *sp = split_of(pk);
    if (!sp || c0 >= c1) return;
    if (sp->blocks) {
        sp->blocks(x, dst, K, c0 / QK, c1 / QK, sp->bias);
        return;
    }
    pk->prep(x + c0, (uint8_t *)dst + (size_t)(c0 / TOKD_QK_K) * sp->sb_bytes, c1 - c0);
}

int tokd_packed_prep_cols_spans(const tokd_packed_traits *pk, int64_t K, int64_t c0, int64_t c1, tokd_prep_span *spans) {
    const prep_split *sp = split_of(pk);
    if (!sp || c0 >= c1) return 0;
    if (!sp->blocks) { /* the K-quants: whole super-blocks */
        const size_t s0 = (size_t)(c0 / TOKD_QK_K), s1 = (size_t)(c1 / TOKD_QK_K);
        spans[0] = (tokd_prep_span){s0 * sp->sb_bytes, (s1 - s0) * sp->sb_bytes};
        return 1;
    }
    /* the Q8_0 layout: every block's quants, then every block's scale (float), then every
       block's correction (int32) */
    const size_t nb = (size_t)(K / QK), b0 = (size_t)(c0 / QK), b1 = (size_t)(c1 / QK);
    spans[0] = (tokd_prep_span){b0 * QK, (b1 - b0) * QK};
    spans[1] = (tokd_prep_span){nb * QK + b0 * sizeof(float), (b1 - b0) * sizeof(float)};
    spans[2] = (tokd_prep_span){nb * (QK + sizeof(float)) + b0 * sizeof(int32_t), (b1 - b0) * sizeof(int32_t)};
    return 3;
}

void tokd_packed_prep_cols_claim(const tokd_packed_traits *pk, void *dst, int64_t K, int64_t c0, int64_t c1) {
    tokd_prep_span spans[TOKD_PREP_SPANS];
    const int n = tokd_packed_prep_cols_spans(pk, K, c0, c1, spans);
    for (int i = 0; i < n; i++) {
        const uintptr_t begin = (uintptr_t)dst + spans[i].off, end = begin + spans[i].len;
        for (uintptr_t line = (begin + 63) & ~(uintptr_t)63; line + 64 <= end; line += 64) *(volatile uint8_t *)line = 0;
    }
}

static const tokd_packed_traits *find(const tokd_packed_traits *table, size_t n, uint32_t type) {
    for (size_t i = 0; i < n; i++)
        if (table[i].id == type) return &table[i];
    return NULL;
}

const tokd_packed_traits *tokd_packed_get_avx2_form(uint32_t type, int vnni) {
    tokd_kernels_init();
    const tokd_cpu_features *c = tokd_cpu();
    if (!(c->avx2 && c->fma && c->f16c) || (vnni && !c->avxvnni)) return NULL;
    if (vnni) return find(PACKED_AVXVNNI, sizeof PACKED_AVXVNNI / sizeof PACKED_AVXVNNI[0], type);
    return find(PACKED_AVX2, sizeof PACKED_AVX2 / sizeof PACKED_AVX2[0], type);
}

const tokd_packed_traits *tokd_packed_get_avx2(uint32_t type) {
    tokd_kernels_init();
    return tokd_packed_get_avx2_form(type, tokd_cpu()->avxvnni);
}

const tokd_packed_traits *tokd_packed_get_any(uint32_t type) {
    tokd_kernels_init();
    const tokd_cpu_features *c = tokd_cpu();
    const char *path = tokd_kernels_path(); /* TOKD_KERNELS may force a narrower path */
    if (c->avx512f && c->avx512bw && c->avx512vl && c->avx512vnni && c->f16c && c->fma && !strcmp(path, "avx512")) {
        /* the AVX-512 Q6_K kernel needs GFNI (packed_avx512.c, q6k_groups), which the
           VNNI CPUs before Ice Lake lack; Q3_K and Q2_K share its code. There they take
           the AVX2 forms (same layouts). */
        const bool k16 = type == GGML_TYPE_Q6_K || type == GGML_TYPE_Q3_K || type == GGML_TYPE_Q2_K;
        if (k16 && !c->gfni) return tokd_packed_get_avx2(type);
        return find(PACKED, sizeof PACKED / sizeof PACKED[0], type);
    }
    /* AVX2 path, or AVX-512 without VNNI (Skylake-SP and -X): the AVX2 forms */
    if (!strcmp(path, "avx2") || !strcmp(path, "avx512")) return tokd_packed_get_avx2(type);
    return NULL;
}

const tokd_packed_traits *tokd_packed_fit(const tokd_packed_traits *pk, int64_t n_out) {
    n_out = (n_out + TOKD_PACK_ROWS - 1) / TOKD_PACK_ROWS * TOKD_PACK_ROWS; /* the padded height */
    if (!pk || n_out % pk->group_rows == 0) return pk;
    const tokd_packed_traits *tables[] = {PACKED, PACKED_AVX2, PACKED_AVXVNNI};
    const size_t sizes[] = {sizeof PACKED / sizeof PACKED[0], sizeof PACKED_AVX2 / sizeof PACKED_AVX2[0],
                            sizeof PACKED_AVXVNNI / sizeof PACKED_AVXVNNI[0]};
    for (size_t t = 0; t < 3; t++)
        if (pk >= tables[t] && pk < tables[t] + sizes[t])
            for (size_t i = 0; i < sizes[t]; i++)
                if (tables[t][i].id == pk->id && n_out % tables[t][i].group_rows == 0) return &tables[t][i];
    return NULL;
}

bool tokd_repack_enabled(void) {
    const char *e = getenv("TOKD_REPACK");
    return !(e && !strcmp(e, "0"));
}

const tokd_packed_traits *tokd_packed_get(uint32_t type) {
    return tokd_repack_enabled() ? tokd_packed_get_any(type) : NULL;
}
