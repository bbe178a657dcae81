/* gemm_iq_avx512.c — the grid types' gemm (tokd_gemm_fn: prefill and batched decode)
 * on AVX-512 VNNI.
 *
 * The AVX2/AVX-512 gemm in dot_iq_avx2.c decodes a weight super-block once and then
 * reduces each activation row's products horizontally, a super-block at a time: about
 * 14 MACs an instruction. Here sixteen weight rows are decoded together and transposed
 * so that lane r of a vector holds four consecutive weights of row r (a "quad"). Then
 * one vpdpbusd with four activation quants broadcast from memory makes 64 MACs, and
 * each lane ends with its own row's sum: no horizontal reduction at all.
 *
 * vpdpbusd multiplies unsigned bytes by signed ones, and only the signed operand can be
 * broadcast. So the activations are plain Q8_K (signed; tokd_q8_K_quantize) and the
 * decoded weights carry +128 (unsigned). The 128 * sum(a) this adds to each scale
 * group's sum is taken off with the activations' own block sums (Q8_K bsums), which
 * start each group's accumulator. Then each group's sum is multiplied by its rows'
 * integer scales (vpmulld) and added up: the super-block's integer sum S is the
 * reference's (quants_iq.c), exactly, and the float steps after it are the one-row
 * kernels' (d = DX * y.d; sum += TERM; out = K * sum), in the same order. So every
 * output equals the one-row kernels' bit for bit (test_gemm, test_iq_models).
 *
 * Work order: sixteen weight rows at a time; their super-blocks decoded SLAB at a time
 * into tiles that stay in L1 (5 KB each); every activation row run against the slab,
 * four rows at a time, their partial sums kept in y between slabs (stored floats are
 * exact, so the sums' order and values are unchanged). One thread, cached, 512
 * activation rows: 3.4-4.4x the old gemm; pp512 of TinyLlama-shape files 3.2-3.9x
 * (BENCHMARKS.md, fifty-fifth session). */
#include <immintrin.h>
#include <string.h>

#include "kernels/iq_decode_avx2.h"
#include "kernels/quants.h"

#define AV __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

#define TILE_ROWS 16 /* weight rows a tile: one per 32-bit lane */
#define SLAB 4       /* super-blocks decoded at a time (4 x 5 KB: L1) */

/* One super-block of sixteen weight rows. */
typedef struct {
    __m512i wq[64]; /* quad q: lane r holds row r's weights 4q..4q+3, each + 128 */
    __m512i ls[16]; /* scale group g (16 or 32 weights): lane r is row r's multiplier */
    __m512 dx;      /* lane r: row r's super-block scale (DX) */
} iq_tile;

/* Sixteen rows of 64 dwords (the decoded super-blocks, row-major) into 64 vectors of
 * sixteen rows' dword q: four 16x16 transposes (unpacks of dwords, then of qwords, then
 * two rounds of 128-bit lane shuffles). */
AV static void transpose_rows(const uint32_t rows[TILE_ROWS][64], __m512i wq[64]) {
    /* every loop unrolled, so that z and t stay in registers (rolled, GCC kept them on
       the stack and the transposes took half of a 4-row gemm's time) */
    for (int c = 0; c < 4; c++) {
        __m512i z[16], t[16];
        _Pragma("GCC unroll 16") for (int r = 0; r < 16; r++) z[r] = _mm512_load_si512(&rows[r][16 * c]);
        _Pragma("GCC unroll 8") for (int r = 0; r < 16; r += 2) {
            t[r] = _mm512_unpacklo_epi32(z[r], z[r + 1]);
            t[r + 1] = _mm512_unpackhi_epi32(z[r], z[r + 1]);
        }
        /* group g (rows 4g..4g+3): z[4g + j], lane k = the four rows' dword 4k + j */
        _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++) {
            z[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
            z[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
            z[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
            z[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
        }
        /* dword 4k + j of all rows: lane k of z[4g + j] for g = 0..3 */
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
            const __m512i v0 = _mm512_shuffle_i32x4(z[j], z[4 + j], 0x44), v1 = _mm512_shuffle_i32x4(z[j], z[4 + j], 0xEE);
            const __m512i v2 = _mm512_shuffle_i32x4(z[8 + j], z[12 + j], 0x44), v3 = _mm512_shuffle_i32x4(z[8 + j], z[12 + j], 0xEE);
            wq[16 * c + 0 + j] = _mm512_shuffle_i32x4(v0, v2, 0x88);
            wq[16 * c + 4 + j] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
            wq[16 * c + 8 + j] = _mm512_shuffle_i32x4(v1, v3, 0x88);
            wq[16 * c + 12 + j] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
        }
    }
}

/* G: weights a scale group (16: the halves of IQ2_XS, IQ2_S, IQ1_M; 32: one scale a
 * sub-block); DX, TERM (of vectors d and S) and K as in dot_iq_avx2.c's IQ_TYPES. */
#define IQ_VNNI_TYPES(X)                                             \
    X(iq2_xxs, 32, h2f(x->d), _mm512_mul_ps(d, Sf), 0.125f)          \
    X(iq2_xs, 16, h2f(x->d), _mm512_mul_ps(d, Sf), 0.125f)           \
    X(iq2_s, 16, h2f(x->d), _mm512_mul_ps(d, Sf), 0.125f)            \
    X(iq3_xxs, 32, h2f(x->d), _mm512_mul_ps(d, Sf), 0.25f)           \
    X(iq3_s, 32, h2f(x->d), _mm512_mul_ps(d, Sf), 1.0f)              \
    X(iq1_s, 32, h2f(x->d), _mm512_mul_ps(d, _mm512_mul_ps(Sf, _mm512_set1_ps(0.125f))), 1.0f) \
    X(iq1_m, 16, iq1_m_d(x), _mm512_mul_ps(d, _mm512_mul_ps(Sf, _mm512_set1_ps(0.125f))), 1.0f)

/* A tile from its rows' decoded super-blocks (dec: + 128, row-major), scale multipliers
 * (ls[group][row]) and scales (dx): rows from `rows` on get zero weights and scales
 * (their lanes' outputs are never stored), then the weights are transposed. */
AV static void finish_tile(uint32_t dec[TILE_ROWS][64], int32_t ls[16][TILE_ROWS], float dx[TILE_ROWS], int rows,
                           int groups, iq_tile *t) {
    for (int r = rows; r < TILE_ROWS; r++) {
        memset(dec[r], 0x80, sizeof dec[r]);
        for (int g = 0; g < groups; g++) ls[g][r] = 0;
        dx[r] = 0;
    }
    transpose_rows((const uint32_t(*)[64])dec, t->wq);
    for (int g = 0; g < groups; g++) t->ls[g] = _mm512_load_si512(ls[g]);
    t->dx = _mm512_load_ps(dx);
}

/* Super-block b of weight rows w[0..rows) into a tile, by the AVX2 decoders. */
#define DECODE_TILE(T, G, DX)                                                                                  \
    AV static void decode_tile_##T(const uint8_t *w, size_t ws, int rows, int64_t b, iq_tile *t) {           \
        _Alignas(64) uint32_t dec[TILE_ROWS][64];                                                              \
        _Alignas(64) int32_t ls[16][TILE_ROWS];                                                                \
        _Alignas(64) float dx[TILE_ROWS];                                                                      \
        for (int r = 0; r < rows; r++) {                                                                       \
            const tokd_block_##T *x = (const tokd_block_##T *)(w + (size_t)r * ws) + b;                        \
            const __m256i ls16 = T##_scales(x);                                                                \
            _Pragma("GCC unroll 8") for (int ib = 0; ib < 8; ib++) {                                           \
                const iq_sub s = T##_sub(x, ib, ls16);                                                         \
                const __m256i q = _mm256_xor_si256(_mm256_sign_epi8(s.mag, s.sv), _mm256_set1_epi8(-128));     \
                _mm256_store_si256((__m256i *)&dec[r][8 * ib], q);                                             \
                if ((G) == 16) {                                                                               \
                    ls[2 * ib][r] = _mm256_extract_epi16(s.sc, 0);                                             \
                    ls[2 * ib + 1][r] = _mm256_extract_epi16(s.sc, 8);                                         \
                } else                                                                                         \
                    ls[ib][r] = _mm256_extract_epi16(s.sc, 0);                                                 \
            }                                                                                                  \
            dx[r] = DX;                                                                                        \
        }                                                                                                      \
        finish_tile(dec, ls, dx, rows, 256 / (G), t);                                                          \
    }

/* acc += w (unsigned bytes) . the four signed bytes at p, broadcast: one vpdpbusd with
 * its broadcast from memory ({1to16}), which GCC does not fold from the intrinsics
 * (a separate vpbroadcastd each: 0.90-1.00x, BENCHMARKS.md, fifty-fifth session). The
 * operand is a struct of the bytes themselves, so the read aliases them as C allows. */
typedef struct {
    int8_t b[4];
} act_quad;
AV static inline __attribute__((always_inline)) __m512i dpbusd_bcast(__m512i acc, __m512i w, const int8_t *p) {
    __asm__("vpdpbusd %[a]%{1to16%}, %[w], %[acc]" : [acc] "+v"(acc) : [w] "v"(w), [a] "m"(*(const act_quad *)p));
    return acc;
}

/* a scale group's sum of activations (Q8_K keeps one a 16) */
#define GROUP_BSUM(G, y, g) ((G) == 16 ? (y)->bsums[g] : (y)->bsums[2 * (g)] + (y)->bsums[2 * (g) + 1])

/* One activation row's super-block against a tile: the integer sums S of the sixteen
 * rows. Each group's accumulator starts at -128 * (its activations' sum), so that the
 * +128 on the weights drops out. */
#define GROUP_SUMS(T, G)                                                                                       \
    AV static inline __attribute__((always_inline)) __m512i tile_sums_##T(const iq_tile *t,                   \
                                                                          const tokd_block_q8_K *y) {          \
        __m512i S = _mm512_setzero_si512();                                                                    \
        _Pragma("GCC unroll 16") for (int g = 0; g < 256 / (G); g++) {                                        \
            __m512i D = _mm512_set1_epi32(-128 * GROUP_BSUM(G, y, g));                                         \
            _Pragma("GCC unroll 8") for (int q = 0; q < (G) / 4; q++)                                          \
                D = dpbusd_bcast(D, t->wq[(G) / 4 * g + q], y->qs + (G) * g + 4 * q);                           \
            S = _mm512_add_epi32(S, _mm512_mullo_epi32(D, t->ls[g]));                                          \
        }                                                                                                      \
        return S;                                                                                              \
    }

/* The same for four activation rows at once, each weight quad loaded once for the four,
 * and their float terms added to the four rows' sums. Everything is named and passed by
 * pointer to locals: in arrays GCC kept the sums on the stack. */
#define ROWS4(T, G, TERM)                                                                                      \
    AV static inline __attribute__((always_inline)) void tile_rows4_##T(                                        \
        const iq_tile *t, const tokd_block_q8_K *y0, const tokd_block_q8_K *y1, const tokd_block_q8_K *y2,     \
        const tokd_block_q8_K *y3, __m512 *sum0, __m512 *sum1, __m512 *sum2, __m512 *sum3) {                   \
        __m512i S0 = _mm512_setzero_si512(), S1 = S0, S2 = S0, S3 = S0;                                        \
        _Pragma("GCC unroll 16") for (int g = 0; g < 256 / (G); g++) {                                        \
            __m512i D0 = _mm512_set1_epi32(-128 * GROUP_BSUM(G, y0, g));                                       \
            __m512i D1 = _mm512_set1_epi32(-128 * GROUP_BSUM(G, y1, g));                                       \
            __m512i D2 = _mm512_set1_epi32(-128 * GROUP_BSUM(G, y2, g));                                       \
            __m512i D3 = _mm512_set1_epi32(-128 * GROUP_BSUM(G, y3, g));                                       \
            _Pragma("GCC unroll 8") for (int q = 0; q < (G) / 4; q++) {                                        \
                const __m512i W = t->wq[(G) / 4 * g + q];                                                      \
                const int o = (G) * g + 4 * q;                                                                 \
                D0 = dpbusd_bcast(D0, W, y0->qs + o);                                                         \
                D1 = dpbusd_bcast(D1, W, y1->qs + o);                                                         \
                D2 = dpbusd_bcast(D2, W, y2->qs + o);                                                         \
                D3 = dpbusd_bcast(D3, W, y3->qs + o);                                                         \
            }                                                                                                  \
            const __m512i L = t->ls[g];                                                                        \
            S0 = _mm512_add_epi32(S0, _mm512_mullo_epi32(D0, L));                                              \
            S1 = _mm512_add_epi32(S1, _mm512_mullo_epi32(D1, L));                                              \
            S2 = _mm512_add_epi32(S2, _mm512_mullo_epi32(D2, L));                                              \
            S3 = _mm512_add_epi32(S3, _mm512_mullo_epi32(D3, L));                                              \
        }                                                                                                      \
        __m512 d, Sf;                                                                                          \
        d = _mm512_mul_ps(t->dx, _mm512_set1_ps(y0->d)), Sf = _mm512_cvtepi32_ps(S0), *sum0 = _mm512_add_ps(*sum0, TERM); \
        d = _mm512_mul_ps(t->dx, _mm512_set1_ps(y1->d)), Sf = _mm512_cvtepi32_ps(S1), *sum1 = _mm512_add_ps(*sum1, TERM); \
        d = _mm512_mul_ps(t->dx, _mm512_set1_ps(y2->d)), Sf = _mm512_cvtepi32_ps(S2), *sum2 = _mm512_add_ps(*sum2, TERM); \
        d = _mm512_mul_ps(t->dx, _mm512_set1_ps(y3->d)), Sf = _mm512_cvtepi32_ps(S3), *sum3 = _mm512_add_ps(*sum3, TERM); \
    }

/* The gemm NAME of type T with tiles from DECODE (tokd_gemm_fn). */
#define GEMM_BODY(NAME, T, TERM, K, DECODE)                                                                    \
    AV void NAME(int64_t n, int64_t nw, const void *w, size_t ws, int64_t na, const void *act, size_t as,     \
                 float *y, int64_t ldy) {                                                                      \
        const int64_t nb = n / TOKD_QK_K;                                                                      \
        iq_tile tiles[SLAB];                                                                                   \
        for (int64_t o0 = 0; o0 < nw; o0 += TILE_ROWS) {                                                       \
            const int rows = nw - o0 < TILE_ROWS ? (int)(nw - o0) : TILE_ROWS;                                 \
            const __mmask16 m = (__mmask16)((1u << rows) - 1);                                                 \
            const uint8_t *wt = (const uint8_t *)w + (size_t)o0 * ws;                                          \
            for (int64_t b0 = 0; b0 < nb; b0 += SLAB) {                                                        \
                const int ns = nb - b0 < SLAB ? (int)(nb - b0) : SLAB;                                         \
                const int last = b0 + ns == nb;                                                                \
                for (int s = 0; s < ns; s++) DECODE(wt, ws, rows, b0 + s, &tiles[s]);                          \
                int64_t r = 0;                                                                                 \
                for (; r + 4 <= na; r += 4) {                                                                  \
                    const tokd_block_q8_K *y0 = (const tokd_block_q8_K *)((const uint8_t *)act + (size_t)r * as) + b0; \
                    const tokd_block_q8_K *y1 = (const tokd_block_q8_K *)((const uint8_t *)y0 + as);           \
                    const tokd_block_q8_K *y2 = (const tokd_block_q8_K *)((const uint8_t *)y1 + as);           \
                    const tokd_block_q8_K *y3 = (const tokd_block_q8_K *)((const uint8_t *)y2 + as);           \
                    float *out = y + r * ldy + o0;                                                             \
                    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;                                \
                    if (b0) {                                                                                  \
                        s0 = _mm512_maskz_loadu_ps(m, out), s1 = _mm512_maskz_loadu_ps(m, out + ldy);          \
                        s2 = _mm512_maskz_loadu_ps(m, out + 2 * ldy), s3 = _mm512_maskz_loadu_ps(m, out + 3 * ldy); \
                    }                                                                                          \
                    for (int s = 0; s < ns; s++)                                                               \
                        tile_rows4_##T(&tiles[s], &y0[s], &y1[s], &y2[s], &y3[s], &s0, &s1, &s2, &s3);         \
                    if (last) {                                                                                \
                        const __m512 k = _mm512_set1_ps(K);                                                    \
                        s0 = _mm512_mul_ps(k, s0), s1 = _mm512_mul_ps(k, s1);                                  \
                        s2 = _mm512_mul_ps(k, s2), s3 = _mm512_mul_ps(k, s3);                                  \
                    }                                                                                          \
                    _mm512_mask_storeu_ps(out, m, s0), _mm512_mask_storeu_ps(out + ldy, m, s1);                \
                    _mm512_mask_storeu_ps(out + 2 * ldy, m, s2), _mm512_mask_storeu_ps(out + 3 * ldy, m, s3);  \
                }                                                                                              \
                for (; r < na; r++) {                                                                          \
                    const tokd_block_q8_K *yb = (const tokd_block_q8_K *)((const uint8_t *)act + (size_t)r * as) + b0; \
                    float *out = y + r * ldy + o0;                                                             \
                    __m512 sum = b0 ? _mm512_maskz_loadu_ps(m, out) : _mm512_setzero_ps();                     \
                    for (int s = 0; s < ns; s++) {                                                             \
                        const __m512 d = _mm512_mul_ps(tiles[s].dx, _mm512_set1_ps(yb[s].d));                  \
                        const __m512 Sf = _mm512_cvtepi32_ps(tile_sums_##T(&tiles[s], &yb[s]));                \
                        sum = _mm512_add_ps(sum, TERM);                                                        \
                    }                                                                                          \
                    if (last) sum = _mm512_mul_ps(_mm512_set1_ps(K), sum);                                     \
                    _mm512_mask_storeu_ps(out, m, sum);                                                        \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
    }

#define IQ_GEMM_VNNI(T, G, DX, TERM, K)                                                                        \
    DECODE_TILE(T, G, DX)                                                                                      \
    GROUP_SUMS(T, G)                                                                                           \
    ROWS4(T, G, TERM)                                                                                          \
    GEMM_BODY(tokd_##T##_gemm_avx512vnni, T, TERM, K, decode_tile_##T)
IQ_VNNI_TYPES(IQ_GEMM_VNNI)

/* IQ3_XXS on CPUs with VBMI: the same gemm with each row's super-block unpacked by
 * dot_iq_avx512.c's register lookups instead of the AVX2 decoder (1.14-1.28x with 4 to 16
 * activation rows, the same at 512; IQ2_XXS's AVX2 decoder was the faster one). */
AV static void decode_tile_iq3_xxs_vbmi(const uint8_t *w, size_t ws, int rows, int64_t b, iq_tile *t) {
    _Alignas(64) uint32_t dec[TILE_ROWS][64];
    _Alignas(64) int32_t ls[16][TILE_ROWS];
    _Alignas(64) float dx[TILE_ROWS];
    for (int r = 0; r < rows; r++) {
        const tokd_block_iq3_xxs *x = (const tokd_block_iq3_xxs *)(w + (size_t)r * ws) + b;
        int32_t ls8[8];
        tokd_iq3_xxs_unpack_avx512vbmi(x, (uint8_t *)dec[r], ls8);
        for (int g = 0; g < 8; g++) ls[g][r] = ls8[g];
        dx[r] = h2f(x->d);
    }
    finish_tile(dec, ls, dx, rows, 8, t);
}
#define TERM_D_S _mm512_mul_ps(d, Sf)
GEMM_BODY(tokd_iq3_xxs_gemm_avx512vbmi, iq3_xxs, TERM_D_S, 0.25f, decode_tile_iq3_xxs_vbmi)

/* Their activation rows: plain Q8_K (the bsums included), in tokd_iq_gemm_act_bytes. */
void tokd_iq_gemm_prep_vnni(const float *x, void *dst, int64_t n) { tokd_q8_K_quantize(x, dst, n); }
