/* gemm_avx512.c — matrix products for Q4_0 and Q8_0 weights with AVX-512 VNNI + VBMI:
 * nw weight rows against na activation rows prepared once per matmul (see types.h,
 * tokd_gemm_fn). Every output is bit-equal to the row's vec_dot on the same activation
 * row quantised to Q8_0 (so to vec_dot_ref): the integer block sums are exact whatever
 * the order, and the float part is the reference's operation for operation — term of
 * block b = (dx*dy) * (float)isum, added into lane b%8 in block order, then
 * tokd_reduce8.
 *
 * Why a prepared activation format: in the plain Q8_0 layout each 8-block group costs
 * a horizontal reduction of 4 vectors per (weight row, activation row), a second
 * dpbusd for Q4_0's -8 offset, and gathers of the fp16 scales. Here the activation's
 * 8-block group is stored as
 *   qs[256]   byte 64m + 4l + i = element 8m + 4(l/8) + i of block l%8 (m<4, l<16, i<4)
 *   dy[8]     the blocks' scales as float
 *   aux[8]    int32 per block: Q4_0: 8*sum(qs) (the offset term); Q8_0: unused (0)
 * (320 bytes), then the n_blocks % 8 tail blocks as plain tokd_block_q8_0. Weights are
 * permuted into the same order in registers once per group with vpermt2b, so four
 * dpbusd into one accumulator leave block k's sum split over lanes k and k+8: one add
 * gives the eight block sums in order. For Q8_0 the activation bytes are stored plus
 * 128 (unsigned operand of dpbusd) and 128*sum(w) — weight-side, computed once per
 * group and shared by every activation row — is subtracted. */
#include <immintrin.h>
#include <string.h>

#include "kernels/quants.h"

#define TG __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")))

#define GROUP_BYTES 320
#define RB 8 /* activation rows per weight unpack */
#define UNROLL _Pragma("GCC unroll 8")
/* Software prefetch distance for decode. The model is mmapped in 4 KB pages and the
 * hardware prefetchers stop at page boundaries; prefetch instructions never fault, so
 * running past the end of the matrix is harmless. */
#define PF_DIST 4096

size_t tokd_gemm_q8x_act_bytes(int64_t K) {
    int64_t nb = K / TOKD_QK;
    return (size_t)(nb / 8) * GROUP_BYTES + (size_t)(nb % 8) * sizeof(tokd_block_q8_0);
}

/* Quantise as tokd_q8_0_from_float, then lay the groups out as above (scalar: the
 * reference for the SIMD version below, and the path without AVX-512). */
static void prep_q8x_scalar(const float *x, uint8_t *out, int64_t ng, int q8w) {
    tokd_block_q8_0 blk[8];
    for (int64_t g = 0; g < ng; g++) {
        tokd_q8_0_from_float(x + g * 256, blk, 256);
        uint8_t *qs = out + g * GROUP_BYTES;
        float *dy = (float *)(qs + 256);
        int32_t *aux = (int32_t *)(qs + 288);
        for (int m = 0; m < 4; m++)
            for (int l = 0; l < 16; l++)
                for (int i = 0; i < 4; i++) {
                    int8_t v = blk[l % 8].qs[8 * m + 4 * (l / 8) + i];
                    qs[64 * m + 4 * l + i] = q8w ? (uint8_t)(v + 128) : (uint8_t)v;
                }
        for (int k = 0; k < 8; k++) {
            dy[k] = tokd_f16_to_f32(blk[k].d);
            int32_t s = 0;
            for (int i = 0; i < 32; i++) s += blk[k].qs[i];
            aux[k] = q8w ? 0 : 8 * s;
        }
    }
}

/* The same with AVX-512: per block amax (max is exact in any order), q =
 * cvtps_epi32(x * (127/amax)) under the default round-to-nearest-even, clamped to
 * +-127 — exactly tokd_q8_0_from_float's round_even for these magnitudes — and d =
 * amax/127 through the same fp16 conversion. NaN inputs take the scalar path. */
TG static int prep_q8x_512(const float *x, uint8_t *out, int64_t ng, int q8w) {
    const __m512i lim = _mm512_set1_epi32(127), nlim = _mm512_set1_epi32(-127);
    for (int64_t g = 0; g < ng; g++) {
        const float *xg = x + g * 256;
        uint8_t *qs = out + g * GROUP_BYTES;
        float *dy = (float *)(qs + 256);
        int32_t *aux = (int32_t *)(qs + 288);
        __m512i T[4];
        for (int k = 0; k < 8; k++) {
            __m512 a = _mm512_loadu_ps(xg + 32 * k), b = _mm512_loadu_ps(xg + 32 * k + 16);
            if (_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q)) return 0;
            float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
            float id = amax != 0 ? 127.f / amax : 0.0f;
            dy[k] = tokd_f16_to_f32(tokd_f32_to_f16(amax / 127.f));
            __m512 vid = _mm512_set1_ps(id);
            __m512i qa = _mm512_cvtps_epi32(_mm512_mul_ps(a, vid)), qb = _mm512_cvtps_epi32(_mm512_mul_ps(b, vid));
            qa = _mm512_max_epi32(_mm512_min_epi32(qa, lim), nlim);
            qb = _mm512_max_epi32(_mm512_min_epi32(qb, lim), nlim);
            aux[k] = q8w ? 0 : 8 * _mm512_reduce_add_epi32(_mm512_add_epi32(qa, qb));
            __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi32_epi8(qa)), _mm512_cvtepi32_epi8(qb), 1);
            if (k & 1) T[k / 2] = _mm512_inserti64x4(T[k / 2], q, 1);
            else T[k / 2] = _mm512_castsi256_si512(q);
        }
        /* dword l of vector m = dword 8*(l%8) + 2m + l/8 of the 64 dwords of T */
        for (int m = 0; m < 4; m++) {
            __m512i idx = _mm512_set_epi32(24 + 2 * m + 1, 16 + 2 * m + 1, 8 + 2 * m + 1, 2 * m + 1, 24 + 2 * m + 1,
                                           16 + 2 * m + 1, 8 + 2 * m + 1, 2 * m + 1, 24 + 2 * m, 16 + 2 * m, 8 + 2 * m,
                                           2 * m, 24 + 2 * m, 16 + 2 * m, 8 + 2 * m, 2 * m);
            __m512i lo = _mm512_permutex2var_epi32(T[0], idx, T[1]), hi = _mm512_permutex2var_epi32(T[2], idx, T[3]);
            __m512i z = _mm512_mask_blend_epi32(0xF0F0, lo, hi);
            if (q8w) z = _mm512_xor_si512(z, _mm512_set1_epi8((char)0x80));
            _mm512_storeu_si512(qs + 64 * m, z);
        }
    }
    return 1;
}

static void prep_q8x(const float *x, void *dst, int64_t K, int q8w) {
    const int64_t nb = K / TOKD_QK, ng = nb / 8;
    uint8_t *out = dst;
    if (!prep_q8x_512(x, out, ng, q8w)) prep_q8x_scalar(x, out, ng, q8w);
    if (nb % 8) tokd_q8_0_from_float(x + ng * 256, out + ng * GROUP_BYTES, (nb % 8) * TOKD_QK);
}
void tokd_gemm_q4_0_prep(const float *x, void *dst, int64_t K) { prep_q8x(x, dst, K, 0); }
void tokd_gemm_q8_0_prep(const float *x, void *dst, int64_t K) { prep_q8x(x, dst, K, 1); }
/* For tests: the scalar layout writer. */
void tokd_gemm_prep_ref(const float *x, void *dst, int64_t K, int q8w) {
    const int64_t nb = K / TOKD_QK, ng = nb / 8;
    prep_q8x_scalar(x, dst, ng, q8w);
    if (nb % 8) tokd_q8_0_from_float(x + ng * 256, (uint8_t *)dst + ng * GROUP_BYTES, (nb % 8) * TOKD_QK);
}

/* Byte-gather indices, a function of the block sizes only (built by tokd_gemm_init). */
typedef struct {
    uint8_t g4[2][64];    /* Q4_0 half h: byte offsets into window [0,128) of the group */
    uint8_t g4b7[2][64];  /* Q4_0 half h, block 7: offsets into window [80,144) */
    uint8_t g8[4][3][64]; /* Q8_0 vector m: windows [0,128), [128,256), [144,272) */
    uint64_t g8maskB[4];  /* Q8_0 vector m: bytes taken from the second window */
    uint16_t d4[32], d8a[32], d8b[32]; /* fp16 scales: Q4_0 (window [0,128)); Q8_0 two windows */
} gather_idx;
static gather_idx GI;
#define MASK_BLOCK7 0xF0000000F0000000ull /* bytes of lanes 7 and 15 */

void tokd_gemm_init(void) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 16; l++)
            for (int i = 0; i < 4; i++) {
                int k = l % 8, off = 18 * k + 2 + 8 * h + 4 * (l / 8) + i;
                GI.g4[h][4 * l + i] = (uint8_t)(k < 7 ? off : 0);
                GI.g4b7[h][4 * l + i] = (uint8_t)(k == 7 ? off - 80 : 0);
            }
    for (int m = 0; m < 4; m++) {
        GI.g8maskB[m] = 0;
        for (int l = 0; l < 16; l++)
            for (int i = 0; i < 4; i++) {
                int k = l % 8, off = 34 * k + 2 + 8 * m + 4 * (l / 8) + i, b = 4 * l + i;
                GI.g8[m][0][b] = (uint8_t)(off < 128 ? off : 0);
                GI.g8[m][1][b] = (uint8_t)(off >= 128 && k < 7 ? off - 128 : 0);
                GI.g8[m][2][b] = (uint8_t)(k == 7 ? off - 144 : 0);
                if (off >= 128 && k < 7) GI.g8maskB[m] |= 1ull << b;
            }
    }
    for (int k = 0; k < 32; k++) {
        GI.d4[k] = (uint16_t)(k < 8 ? 9 * k : 0);
        GI.d8a[k] = (uint16_t)(k < 4 ? 17 * k : 0);
        GI.d8b[k] = (uint16_t)(k >= 4 && k < 8 ? 17 * k - 64 : 0);
    }
}

/* One 8-block group of Q4_0 weights (144 bytes) as four u8 vectors in the prepared
 * order, and the blocks' scales. Reads only inside the group. */
TG static inline void w_q4_0(const uint8_t *x, __m512i z[4], __m256 *dx, __m256i *corr) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i r0 = _mm512_loadu_si512(x), r1 = _mm512_loadu_si512(x + 64), w2 = _mm512_loadu_si512(x + 80);
    __m512i g0 = _mm512_permutex2var_epi8(r0, _mm512_loadu_si512(GI.g4[0]), r1);
    __m512i g1 = _mm512_permutex2var_epi8(r0, _mm512_loadu_si512(GI.g4[1]), r1);
    g0 = _mm512_mask_permutexvar_epi8(g0, MASK_BLOCK7, _mm512_loadu_si512(GI.g4b7[0]), w2);
    g1 = _mm512_mask_permutexvar_epi8(g1, MASK_BLOCK7, _mm512_loadu_si512(GI.g4b7[1]), w2);
    z[0] = _mm512_and_si512(g0, m4);
    z[1] = _mm512_and_si512(g1, m4);
    z[2] = _mm512_and_si512(_mm512_srli_epi16(g0, 4), m4);
    z[3] = _mm512_and_si512(_mm512_srli_epi16(g1, 4), m4);
    __m512i d = _mm512_permutex2var_epi16(r0, _mm512_loadu_si512(GI.d4), r1);
    *dx = _mm256_cvtph_ps(_mm512_castsi512_si128(d));
    *corr = _mm256_setzero_si256();
}

/* One 8-block group of Q8_0 weights (272 bytes) as four s8 vectors in the prepared
 * order, the scales, and 128*sum(w) per block. */
TG static inline void w_q8_0(const uint8_t *x, __m512i z[4], __m256 *dx, __m256i *corr) {
    __m512i a0 = _mm512_loadu_si512(x), a1 = _mm512_loadu_si512(x + 64);
    __m512i b0 = _mm512_loadu_si512(x + 128), b1 = _mm512_loadu_si512(x + 192);
    __m512i c0 = _mm512_loadu_si512(x + 144), c1 = _mm512_loadu_si512(x + 208);
    const __m512i c128 = _mm512_set1_epi8((char)0x80);
    __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int m = 0; m < 4; m++) {
        __m512i v = _mm512_permutex2var_epi8(a0, _mm512_loadu_si512(GI.g8[m][0]), a1);
        __m512i vb = _mm512_permutex2var_epi8(b0, _mm512_loadu_si512(GI.g8[m][1]), b1);
        __m512i vc = _mm512_permutex2var_epi8(c0, _mm512_loadu_si512(GI.g8[m][2]), c1);
        v = _mm512_mask_mov_epi8(v, GI.g8maskB[m], vb);
        v = _mm512_mask_mov_epi8(v, MASK_BLOCK7, vc);
        z[m] = v;
        acc = _mm512_dpbusd_epi32(acc, c128, v);
    }
    *corr = _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
    __m512i d = _mm512_permutex2var_epi16(a0, _mm512_loadu_si512(GI.d8a), a1);
    __m512i db = _mm512_permutex2var_epi16(b0, _mm512_loadu_si512(GI.d8b), b1);
    d = _mm512_mask_mov_epi16(d, 0xF0, db);
    *dx = _mm256_cvtph_ps(_mm512_castsi512_si128(d));
}

/* NW (1 or 2) weight rows against NR prepared activation rows: each activation vector
 * is loaded once for both weight rows. Q4 != 0: Q4_0 (weights are the unsigned operand,
 * aux holds 8*sum(a)); else Q8_0 (activations unsigned, corr = 128*sum(w)). */
#define GEMM_ROWS(NAME, XT, WFN, Q4, TERM)                                                               \
    TG static inline __attribute__((always_inline)) void NAME(int64_t K, const uint8_t *w, size_t ws, int nwr, \
                                                               int nr, const uint8_t *act, size_t as, float *y, \
                                                               int64_t ldy) {                              \
        const int64_t nb = K / TOKD_QK, ng = nb / 8;                                                       \
        __m256 acc[RB];      /* one weight row: lanes = the 8 blocks of a group */                        \
        __m512 acc2[RB];     /* two weight rows: [row 0 lanes | row 1 lanes] */                           \
        UNROLL for (int r = 0; r < nr; r++) {                                                              \
            acc[r] = _mm256_setzero_ps();                                                                  \
            acc2[r] = _mm512_setzero_ps();                                                                 \
        }                                                                                                  \
        for (int64_t g = 0; g < ng; g++) {                                                                 \
            __m512i z[2][4];                                                                               \
            __m256 dx[2];                                                                                  \
            __m256i corr[2];                                                                               \
            if (nr == 1) /* decode: weights stream from DRAM through 4 KB pages; run ahead */            \
                for (int l = 0; l < (int)(8 * sizeof(XT)); l += 64)                                         \
                    _mm_prefetch((const char *)w + g * 8 * sizeof(XT) + PF_DIST + l, _MM_HINT_T0);            \
            UNROLL for (int q = 0; q < nwr; q++) WFN(w + (size_t)q * ws + g * 8 * sizeof(XT), z[q], &dx[q], &corr[q]); \
            __m512 dx2 = _mm512_setzero_ps();                                                              \
            __m512i corr2 = _mm512_setzero_si512();                                                        \
            if (nwr == 2) {                                                                                \
                dx2 = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(dx[0])), \
                                                          _mm256_castps_pd(dx[1]), 1));                    \
                corr2 = _mm512_inserti64x4(_mm512_castsi256_si512(corr[0]), corr[1], 1);                   \
            }                                                                                              \
            UNROLL for (int r = 0; r < nr; r++) {                                                          \
                const uint8_t *a = act + (size_t)r * as + g * GROUP_BYTES;                                 \
                __m512i av[4], s[2];                                                                       \
                UNROLL for (int m = 0; m < 4; m++) av[m] = _mm512_loadu_si512(a + 64 * m);                 \
                UNROLL for (int q = 0; q < nwr; q++) {                                                     \
                    s[q] = _mm512_setzero_si512();                                                         \
                    UNROLL for (int m = 0; m < 4; m++)                                                     \
                        s[q] = Q4 ? _mm512_dpbusd_epi32(s[q], z[q][m], av[m]) : _mm512_dpbusd_epi32(s[q], av[m], z[q][m]); \
                }                                                                                          \
                if (nwr == 2) {                                                                            \
                    /* [row 0's 8 block sums | row 1's], the same float ops lane by lane */                \
                    __m512i P = _mm512_add_epi32(_mm512_shuffle_i64x2(s[0], s[1], 0x44), _mm512_shuffle_i64x2(s[0], s[1], 0xEE)); \
                    P = _mm512_sub_epi32(P, Q4 ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(a + 288))) : corr2); \
                    __m512 dy = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd((const double *)(a + 256)))); \
                    acc2[r] = _mm512_add_ps(acc2[r], _mm512_mul_ps(_mm512_mul_ps(dx2, dy), _mm512_cvtepi32_ps(P))); \
                } else {                                                                                   \
                    __m256i P = _mm256_add_epi32(_mm512_castsi512_si256(s[0]), _mm512_extracti64x4_epi64(s[0], 1)); \
                    P = _mm256_sub_epi32(P, Q4 ? _mm256_loadu_si256((const __m256i *)(a + 288)) : corr[0]); \
                    __m256 dd = _mm256_mul_ps(dx[0], _mm256_loadu_ps((const float *)(a + 256)));           \
                    acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(dd, _mm256_cvtepi32_ps(P)));              \
                }                                                                                          \
            }                                                                                              \
        }                                                                                                  \
        UNROLL for (int r = 0; r < nr; r++) {                                                              \
            float t[16];                                                                                   \
            if (nwr == 2) _mm512_storeu_ps(t, acc2[r]);                                                    \
            else _mm256_storeu_ps(t, acc[r]);                                                              \
            const tokd_block_q8_0 *yt = (const tokd_block_q8_0 *)(act + (size_t)r * as + ng * GROUP_BYTES); \
            for (int q = 0; q < nwr; q++) {                                                                \
                const XT *x = (const XT *)(w + (size_t)q * ws);                                            \
                float *sq = t + 8 * q;                                                                     \
                for (int64_t tb = ng * 8; tb < nb; tb++) sq[tb & 7] += TERM(x + tb, yt + (tb - ng * 8));  \
                y[r * ldy + q] = tokd_reduce8(sq);                                                         \
            }                                                                                              \
        }                                                                                                  \
    }
GEMM_ROWS(rows_q4_0, tokd_block_q4_0, w_q4_0, 1, tokd_q4_0_term)
GEMM_ROWS(rows_q8_0, tokd_block_q8_0, w_q8_0, 0, tokd_q8_0_term)

/* Activation rows in blocks of RB (the weight group is unpacked once per block of
 * rows), each block against all nw weight rows, which stay in cache meanwhile. */
#define GEMM_CASE(ROWS, N)                                                                                 \
    case N: {                                                                                              \
        int64_t o = 0;                                                                                     \
        for (; o + 2 <= nw; o += 2) ROWS(K, W + (size_t)o * ws, ws, 2, N, a, as, yr + o, ldy);             \
        if (o < nw) ROWS(K, W + (size_t)o * ws, ws, 1, N, a, as, yr + o, ldy);                             \
        break;                                                                                             \
    }
#define GEMM(NAME, ROWS)                                                                                   \
    TG void NAME(int64_t K, int64_t nw, const void *w, size_t ws, int64_t na, const void *act, size_t as,  \
                 float *y, int64_t ldy) {                                                                  \
        const uint8_t *W = w, *A = act;                                                                    \
        for (int64_t r = 0; r < na; r += RB) {                                                             \
            int nr = na - r < RB ? (int)(na - r) : RB;                                                     \
            const uint8_t *a = A + (size_t)r * as;                                                         \
            float *yr = y + r * ldy;                                                                       \
            switch (nr) {                                                                                  \
                GEMM_CASE(ROWS, 8)                                                                         \
                GEMM_CASE(ROWS, 7)                                                                         \
                GEMM_CASE(ROWS, 6)                                                                         \
                GEMM_CASE(ROWS, 5)                                                                         \
                GEMM_CASE(ROWS, 4)                                                                         \
                GEMM_CASE(ROWS, 3)                                                                         \
                GEMM_CASE(ROWS, 2)                                                                         \
            default:                                                                                       \
                for (int64_t o = 0; o < nw; o++) ROWS(K, W + (size_t)o * ws, ws, 1, 1, a, as, yr + o, ldy); \
                break;                                                                                     \
            }                                                                                              \
        }                                                                                                  \
    }
GEMM(tokd_gemm_q4_0_avx512vbmi, rows_q4_0)
GEMM(tokd_gemm_q8_0_avx512vbmi, rows_q8_0)
