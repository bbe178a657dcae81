/* quants_iq.c — the grid types IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S:
 * to_float and the scalar dot product with Q8_K activations, which the SIMD path
 * (dot_iq_avx2.c) equals bit for bit.
 *
 * Each format codes a super-block of 256 weights as 8 sub-blocks of 32. Every group of 8
 * weights (IQ3: each half of one) is a point of the type's grid (iq_grids.h), picked by
 * an index of 8 to 11 bits; the IQ2 and IQ3 points' coordinates are positive, and a sign
 * byte negates some (IQ2_XXS, IQ2_XS and IQ3_XXS store 7 bits of it, the eighth being
 * their parity). Each half sub-block (16 weights) has an odd scale multiplier
 * ls = 2s + 1 for a 3- or 4-bit field s. IQ1 points have coordinates -1, 0, 1 and every
 * group of 8 is shifted by +-1/8 before scaling.
 *
 * The layouts, sub-block by sub-block (ib = 0..7, group l = 0..3 of 8 weights, element
 * 32 ib + 8 l + j); u16/u32 are little-endian reads of the bytes named:
 *   IQ2_XXS  qs[8ib + l] index; a = u32 qs[8ib+4..]: signs (a >> 7l) & 127, s = a >> 28.
 *   IQ2_XS   q = u16 qs[8ib + 2l..]: index q & 511, signs q >> 9; s = nibble l/2 of
 *            scales[ib] (low nibble first).
 *   IQ2_S    index qs[4ib + l] | bits 2l, 2l+1 of qh[ib] as bits 8, 9; sign byte
 *            qs[32 + 4ib + l]; s as IQ2_XS.
 *   IQ3_XXS  two 4-wide points qs[8ib + 2l], qs[8ib + 2l + 1] (elements j < 4, j >= 4);
 *            a = u32 qs[64 + 4ib..]: signs (a >> 7l) & 127, s = a >> 28.
 *   IQ3_S    two 4-wide points qs[8ib + 2l + i] | bit 2l + i of qh[ib] as bit 8; sign
 *            byte signs[4ib + l]; s = nibble ib%2 of scales[ib/2].
 *   IQ1_S    h = u16 qh[2ib..]: index qs[4ib + l] | bits 3l..3l+2 of h as bits 8-10;
 *            s = (h >> 12) & 7; shift -1/8 if h bit 15 is set, else +1/8.
 *   IQ1_M    b = qh[2ib + l/2]: index qs[4ib + l] | (b >> 4(l%2)) & 7 as bits 8-10;
 *            shift -1/8 if bit 3 + 4(l%2) of b is set; s of half h (0, 1) is bits
 *            6(ib%2) + 3h .. +2 of u16 scales[2(ib/2)..]; the fp16 super-block scale is
 *            the top nibbles of the four u16 words of scales, first word lowest.
 * No fp16 d field in IQ1_M; every other type starts with one.
 *
 * Values, with d the super-block scale and c a point's signed coordinate:
 *   x = ((d * ls) * k) * c            k = 1/8 (IQ2), 1/4 (IQ3_XXS), 1 (IQ3_S)
 *   x = (d * ls) * (c + shift)        IQ1
 * llama.cpp writes the first as d * (0.5 + s) * 0.25 (IQ2) and d * (0.5 + s) * 0.5
 * (IQ3_XXS): the same floats, halving being exact. The dot product with a Q8_K row y:
 *   P = sum over halves of ls * (exact integer sum of c * q8), and for IQ1
 *   Q = sum over groups of 8 of ls * sign(shift) * (sum of q8);
 *   each super-block adds (d * y.d) * P (IQ1: (d * y.d) * (P + 0.125f * Q)) in order
 *   into one float, which is multiplied by k at the end:
 * llama.cpp's portable order (its SIMD paths sum in float lanes instead). */
#include <string.h>

#include "kernels/iq_grids.h"
#include "kernels/quants.h"
#include "util.h"

/* One super-block, decoded. */
typedef struct {
    int8_t c[256];   /* each weight's signed coordinate */
    uint8_t ls[16];  /* each half sub-block's scale multiplier, 2s + 1 */
    int8_t shift[32];/* IQ1: each group of 8's shift sign, +1 or -1 */
    float d;
} iq_super;

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* n coordinates of a grid row, negated where the sign byte's bits (from bit `bit`) say */
static inline void put_signed(int8_t *c, const uint8_t *row, int n, uint8_t signs, int bit) {
    for (int j = 0; j < n; j++) c[j] = (int8_t)((signs >> (bit + j) & 1) ? -row[j] : row[j]);
}
static inline void put_scales(iq_super *s, int ib, int lo, int hi) {
    s->ls[2 * ib] = (uint8_t)(2 * lo + 1), s->ls[2 * ib + 1] = (uint8_t)(2 * hi + 1);
}

static void decode_iq2_xxs(const void *blk, iq_super *s) {
    const tokd_block_iq2_xxs *x = blk;
    s->d = tokd_f16_to_f32(x->d);
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = x->qs + 8 * ib;
        const uint32_t a = tokd_load_u32le(q + 4);
        for (int l = 0; l < 4; l++) put_signed(s->c + 32 * ib + 8 * l, tokd_iq2xxs_grid[q[l]], 8, tokd_iq_signs[(a >> 7 * l) & 127], 0);
        put_scales(s, ib, (int)(a >> 28), (int)(a >> 28));
    }
}
static void decode_iq2_xs(const void *blk, iq_super *s) {
    const tokd_block_iq2_xs *x = blk;
    s->d = tokd_f16_to_f32(x->d);
    for (int ib = 0; ib < 8; ib++) {
        for (int l = 0; l < 4; l++) {
            const uint16_t q = rd16(x->qs + 8 * ib + 2 * l);
            put_signed(s->c + 32 * ib + 8 * l, tokd_iq2xs_grid[q & 511], 8, tokd_iq_signs[q >> 9], 0);
        }
        put_scales(s, ib, x->scales[ib] & 15, x->scales[ib] >> 4);
    }
}
static void decode_iq2_s(const void *blk, iq_super *s) {
    const tokd_block_iq2_s *x = blk;
    s->d = tokd_f16_to_f32(x->d);
    for (int ib = 0; ib < 8; ib++) {
        for (int l = 0; l < 4; l++) {
            const int idx = x->qs[4 * ib + l] | ((x->qh[ib] >> 2 * l) & 3) << 8;
            put_signed(s->c + 32 * ib + 8 * l, tokd_iq2s_grid[idx], 8, x->qs[32 + 4 * ib + l], 0);
        }
        put_scales(s, ib, x->scales[ib] & 15, x->scales[ib] >> 4);
    }
}
static void decode_iq3_xxs(const void *blk, iq_super *s) {
    const tokd_block_iq3_xxs *x = blk;
    s->d = tokd_f16_to_f32(x->d);
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = x->qs + 8 * ib;
        const uint32_t a = tokd_load_u32le(x->qs + 64 + 4 * ib);
        for (int l = 0; l < 4; l++) {
            const uint8_t signs = tokd_iq_signs[(a >> 7 * l) & 127];
            put_signed(s->c + 32 * ib + 8 * l, tokd_iq3xxs_grid[q[2 * l]], 4, signs, 0);
            put_signed(s->c + 32 * ib + 8 * l + 4, tokd_iq3xxs_grid[q[2 * l + 1]], 4, signs, 4);
        }
        put_scales(s, ib, (int)(a >> 28), (int)(a >> 28));
    }
}
static void decode_iq3_s(const void *blk, iq_super *s) {
    const tokd_block_iq3_s *x = blk;
    s->d = tokd_f16_to_f32(x->d);
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = x->qs + 8 * ib, h = x->qh[ib];
        for (int l = 0; l < 4; l++) {
            const uint8_t signs = x->signs[4 * ib + l];
            put_signed(s->c + 32 * ib + 8 * l, tokd_iq3s_grid[q[2 * l] | ((h >> 2 * l) & 1) << 8], 4, signs, 0);
            put_signed(s->c + 32 * ib + 8 * l + 4, tokd_iq3s_grid[q[2 * l + 1] | ((h >> (2 * l + 1)) & 1) << 8], 4, signs, 4);
        }
        const int sc = (x->scales[ib / 2] >> 4 * (ib % 2)) & 15;
        put_scales(s, ib, sc, sc);
    }
}
static void decode_iq1_s(const void *blk, iq_super *s) {
    const tokd_block_iq1_s *x = blk;
    s->d = tokd_f16_to_f32(x->d);
    for (int ib = 0; ib < 8; ib++) {
        const uint16_t h = rd16(x->qh + 2 * ib);
        for (int l = 0; l < 4; l++) {
            memcpy(s->c + 32 * ib + 8 * l, tokd_iq1s_grid[x->qs[4 * ib + l] | ((h >> 3 * l) & 7) << 8], 8);
            s->shift[4 * ib + l] = (h & 0x8000) ? -1 : 1;
        }
        put_scales(s, ib, (h >> 12) & 7, (h >> 12) & 7);
    }
}
static void decode_iq1_m(const void *blk, iq_super *s) {
    const tokd_block_iq1_m *x = blk;
    uint16_t sc[4];
    for (int i = 0; i < 4; i++) sc[i] = rd16(x->scales + 2 * i);
    s->d = tokd_f16_to_f32((uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0xF0) | ((sc[2] >> 4) & 0xF00) | (sc[3] & 0xF000)));
    for (int ib = 0; ib < 8; ib++) {
        for (int l = 0; l < 4; l++) {
            const uint8_t b = x->qh[2 * ib + l / 2] >> 4 * (l % 2);
            memcpy(s->c + 32 * ib + 8 * l, tokd_iq1s_grid[x->qs[4 * ib + l] | (b & 7) << 8], 8);
            s->shift[4 * ib + l] = (b & 8) ? -1 : 1;
        }
        const int w = sc[ib / 2] >> 6 * (ib % 2);
        put_scales(s, ib, w & 7, (w >> 3) & 7);
    }
}

typedef struct {
    void (*decode)(const void *blk, iq_super *s);
    size_t bytes;
    float k;   /* the scale's constant factor (see the top) */
    bool iq1;  /* groups shifted by +-1/8 */
} iq_kind;

static void iq_to_float(const iq_kind *t, const void *src, float *dst, int64_t n) {
    tokd_iq_grids_init();
    iq_super s;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++, dst += TOKD_QK_K) {
        t->decode((const uint8_t *)src + (size_t)b * t->bytes, &s);
        for (int h = 0; h < 16; h++) {
            const float db = (s.d * (float)s.ls[h]) * t->k;
            for (int e = 16 * h; e < 16 * h + 16; e++)
                dst[e] = t->iq1 ? db * ((float)s.c[e] + (s.shift[e / 8] < 0 ? -0.125f : 0.125f)) : db * (float)s.c[e];
        }
    }
}

static void iq_dot(const iq_kind *t, int64_t n, float *out, const void *w, const void *act) {
    tokd_iq_grids_init();
    const tokd_block_q8_K *y = act;
    iq_super s;
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        t->decode((const uint8_t *)w + (size_t)b * t->bytes, &s);
        int32_t p = 0, q = 0;
        for (int h = 0; h < 16; h++) {
            int32_t half = 0;
            for (int e = 16 * h; e < 16 * h + 16; e++) half += s.c[e] * y[b].qs[e];
            p += s.ls[h] * half;
        }
        if (t->iq1)
            for (int g = 0; g < 32; g++) {
                int32_t a = 0;
                for (int e = 8 * g; e < 8 * g + 8; e++) a += y[b].qs[e];
                q += s.ls[g / 2] * s.shift[g] * a;
            }
        const float d = s.d * y[b].d;
        sum += t->iq1 ? d * ((float)p + 0.125f * (float)q) : d * (float)p;
    }
    *out = t->k * sum;
}

#define IQ_TYPE(T, K, IQ1)                                                                                \
    static const iq_kind kind_##T = {decode_##T, sizeof(tokd_block_##T), K, IQ1};                        \
    void tokd_##T##_to_float(const void *src, float *dst, int64_t n) { iq_to_float(&kind_##T, src, dst, n); } \
    void tokd_##T##_dot_ref(int64_t n, float *out, const void *w, const void *act) { iq_dot(&kind_##T, n, out, w, act); }
IQ_TYPE(iq2_xxs, 0.125f, false)
IQ_TYPE(iq2_xs, 0.125f, false)
IQ_TYPE(iq2_s, 0.125f, false)
IQ_TYPE(iq3_xxs, 0.25f, false)
IQ_TYPE(iq3_s, 1.0f, false)
IQ_TYPE(iq1_s, 1.0f, true)
IQ_TYPE(iq1_m, 1.0f, true)
