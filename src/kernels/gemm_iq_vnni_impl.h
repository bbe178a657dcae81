/* gemm_iq_vnni_impl.h — the grid types' VNNI gemm (tokd_gemm_fn: prefill and batched
 * decode), written once for any vector width and instantiated twice: 16 lanes on AVX-512
 * VNNI (gemm_iq_avx512.c), 8 lanes on AVX-VNNI (gemm_iq_avxvnni.c: Alder Lake and the
 * other AVX2 CPUs with vpdpbusd on 256-bit vectors).
 *
 * The older gemm in dot_iq_avx2.c decodes a weight super-block once and then reduces
 * each activation row's products horizontally, a super-block at a time: about 14 MACs
 * an instruction. Here TILE_ROWS weight rows are decoded together and transposed so
 * that lane r of a vector holds four consecutive weights of row r (a "quad"). Then one
 * vpdpbusd with four activation quants broadcast makes 4 x TILE_ROWS MACs, and each lane
 * ends with its own row's sum: no horizontal reduction at all.
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
 * Work order: TILE_ROWS weight rows at a time; their super-blocks decoded SLAB at a time
 * into tiles that stay in L1 (5 KB each at 16 lanes); every activation row run against
 * the slab, four rows at a time, their partial sums kept in y between slabs (stored
 * floats are exact, so the sums' order and values are unchanged).
 *
 * The including file defines: AV (the target attribute), TILE_ROWS, the vector types VI
 * and VF with their operations (VI_ZERO, VI_SET1, VI_ADD, VI_MULLO, VI_LOAD, VF_ZERO,
 * VF_SET1, VF_ADD, VF_MUL, VF_CVT, VF_LOAD), OUT_MASK with out_mask / out_load / out_store
 * (the first `rows` lanes of an output row), transpose_rows, dpbusd_bcast, and
 * GEMM_NAME(T), the kernels' names. */
#include <string.h>

#include "kernels/iq_decode_avx2.h"
#include "kernels/quants.h"

#define SLAB 4 /* super-blocks decoded at a time (4 x 5 KB: L1) */

/* One super-block of TILE_ROWS weight rows. */
typedef struct {
    VI wq[64]; /* quad q: lane r holds row r's weights 4q..4q+3, each + 128 */
    VI ls[16]; /* scale group g (16 or 32 weights): lane r is row r's multiplier */
    VF dx;     /* lane r: row r's super-block scale (DX) */
} iq_tile;

/* G: weights a scale group (16: the halves of IQ2_XS, IQ2_S, IQ1_M; 32: one scale a
 * sub-block); DX, TERM (of vectors d and S) and K as in dot_iq_avx2.c's IQ_TYPES. */
#define IQ_VNNI_TYPES(X)                                                      \
    X(iq2_xxs, 32, h2f(x->d), VF_MUL(d, Sf), 0.125f)                          \
    X(iq2_xs, 16, h2f(x->d), VF_MUL(d, Sf), 0.125f)                           \
    X(iq2_s, 16, h2f(x->d), VF_MUL(d, Sf), 0.125f)                            \
    X(iq3_xxs, 32, h2f(x->d), VF_MUL(d, Sf), 0.25f)                           \
    X(iq3_s, 32, h2f(x->d), VF_MUL(d, Sf), 1.0f)                              \
    X(iq1_s, 32, h2f(x->d), VF_MUL(d, VF_MUL(Sf, VF_SET1(0.125f))), 1.0f)     \
    X(iq1_m, 16, iq1_m_d(x), VF_MUL(d, VF_MUL(Sf, VF_SET1(0.125f))), 1.0f)

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
    for (int g = 0; g < groups; g++) t->ls[g] = VI_LOAD(ls[g]);
    t->dx = VF_LOAD(dx);
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

/* a scale group's sum of activations (Q8_K keeps one a 16) */
#define GROUP_BSUM(G, y, g) ((G) == 16 ? (y)->bsums[g] : (y)->bsums[2 * (g)] + (y)->bsums[2 * (g) + 1])

/* One activation row's super-block against a tile: the integer sums S of its rows.
 * Each group's accumulator starts at -128 * (its activations' sum), so that the +128 on
 * the weights drops out. */
#define GROUP_SUMS(T, G)                                                                                       \
    AV static inline __attribute__((always_inline)) VI tile_sums_##T(const iq_tile *t, const tokd_block_q8_K *y) { \
        VI S = VI_ZERO();                                                                                      \
        _Pragma("GCC unroll 16") for (int g = 0; g < 256 / (G); g++) {                                        \
            VI D = VI_SET1(-128 * GROUP_BSUM(G, y, g));                                                        \
            _Pragma("GCC unroll 8") for (int q = 0; q < (G) / 4; q++)                                          \
                D = dpbusd_bcast(D, t->wq[(G) / 4 * g + q], y->qs + (G) * g + 4 * q);                           \
            S = VI_ADD(S, VI_MULLO(D, t->ls[g]));                                                              \
        }                                                                                                      \
        return S;                                                                                              \
    }

/* The same for four activation rows at once, each weight quad loaded once for the four,
 * and their float terms added to the four rows' sums. Everything is named and passed by
 * pointer to locals: in arrays GCC kept the sums on the stack. */
#define ROWS4(T, G, TERM)                                                                                      \
    AV static inline __attribute__((always_inline)) void tile_rows4_##T(                                        \
        const iq_tile *t, const tokd_block_q8_K *y0, const tokd_block_q8_K *y1, const tokd_block_q8_K *y2,     \
        const tokd_block_q8_K *y3, VF *sum0, VF *sum1, VF *sum2, VF *sum3) {                                   \
        VI S0 = VI_ZERO(), S1 = S0, S2 = S0, S3 = S0;                                                          \
        _Pragma("GCC unroll 16") for (int g = 0; g < 256 / (G); g++) {                                        \
            VI D0 = VI_SET1(-128 * GROUP_BSUM(G, y0, g));                                                      \
            VI D1 = VI_SET1(-128 * GROUP_BSUM(G, y1, g));                                                      \
            VI D2 = VI_SET1(-128 * GROUP_BSUM(G, y2, g));                                                      \
            VI D3 = VI_SET1(-128 * GROUP_BSUM(G, y3, g));                                                      \
            _Pragma("GCC unroll 8") for (int q = 0; q < (G) / 4; q++) {                                        \
                const VI W = t->wq[(G) / 4 * g + q];                                                           \
                const int o = (G) * g + 4 * q;                                                                 \
                D0 = dpbusd_bcast(D0, W, y0->qs + o);                                                         \
                D1 = dpbusd_bcast(D1, W, y1->qs + o);                                                         \
                D2 = dpbusd_bcast(D2, W, y2->qs + o);                                                         \
                D3 = dpbusd_bcast(D3, W, y3->qs + o);                                                         \
            }                                                                                                  \
            const VI L = t->ls[g];                                                                             \
            S0 = VI_ADD(S0, VI_MULLO(D0, L));                                                                  \
            S1 = VI_ADD(S1, VI_MULLO(D1, L));                                                                  \
            S2 = VI_ADD(S2, VI_MULLO(D2, L));                                                                  \
            S3 = VI_ADD(S3, VI_MULLO(D3, L));                                                                  \
        }                                                                                                      \
        VF d, Sf;                                                                                              \
        d = VF_MUL(t->dx, VF_SET1(y0->d)), Sf = VF_CVT(S0), *sum0 = VF_ADD(*sum0, TERM);                       \
        d = VF_MUL(t->dx, VF_SET1(y1->d)), Sf = VF_CVT(S1), *sum1 = VF_ADD(*sum1, TERM);                       \
        d = VF_MUL(t->dx, VF_SET1(y2->d)), Sf = VF_CVT(S2), *sum2 = VF_ADD(*sum2, TERM);                       \
        d = VF_MUL(t->dx, VF_SET1(y3->d)), Sf = VF_CVT(S3), *sum3 = VF_ADD(*sum3, TERM);                       \
    }

/* The gemm NAME of type T with tiles from DECODE (tokd_gemm_fn). */
#define GEMM_BODY(NAME, T, TERM, K, DECODE)                                                                    \
    AV void NAME(int64_t n, int64_t nw, const void *w, size_t ws, int64_t na, const void *act, size_t as,     \
                 float *y, int64_t ldy) {                                                                      \
        const int64_t nb = n / TOKD_QK_K;                                                                      \
        iq_tile tiles[SLAB];                                                                                   \
        for (int64_t o0 = 0; o0 < nw; o0 += TILE_ROWS) {                                                       \
            const int rows = nw - o0 < TILE_ROWS ? (int)(nw - o0) : TILE_ROWS;                                 \
            const OUT_MASK m = out_mask(rows);                                                                 \
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
                    VF s0 = VF_ZERO(), s1 = s0, s2 = s0, s3 = s0;                                              \
                    if (b0) {                                                                                  \
                        s0 = out_load(m, out), s1 = out_load(m, out + ldy);                                    \
                        s2 = out_load(m, out + 2 * ldy), s3 = out_load(m, out + 3 * ldy);                      \
                    }                                                                                          \
                    for (int s = 0; s < ns; s++)                                                               \
                        tile_rows4_##T(&tiles[s], &y0[s], &y1[s], &y2[s], &y3[s], &s0, &s1, &s2, &s3);         \
                    if (last) {                                                                                \
                        const VF k = VF_SET1(K);                                                               \
                        s0 = VF_MUL(k, s0), s1 = VF_MUL(k, s1);                                                \
                        s2 = VF_MUL(k, s2), s3 = VF_MUL(k, s3);                                                \
                    }                                                                                          \
                    out_store(out, m, s0), out_store(out + ldy, m, s1);                                        \
                    out_store(out + 2 * ldy, m, s2), out_store(out + 3 * ldy, m, s3);                          \
                }                                                                                              \
                for (; r < na; r++) {                                                                          \
                    const tokd_block_q8_K *yb = (const tokd_block_q8_K *)((const uint8_t *)act + (size_t)r * as) + b0; \
                    float *out = y + r * ldy + o0;                                                             \
                    VF sum = b0 ? out_load(m, out) : VF_ZERO();                                                \
                    for (int s = 0; s < ns; s++) {                                                             \
                        const VF d = VF_MUL(tiles[s].dx, VF_SET1(yb[s].d));                                    \
                        const VF Sf = VF_CVT(tile_sums_##T(&tiles[s], &yb[s]));                                \
                        sum = VF_ADD(sum, TERM);                                                               \
                    }                                                                                          \
                    if (last) sum = VF_MUL(VF_SET1(K), sum);                                                   \
                    out_store(out, m, sum);                                                                    \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
    }

#define IQ_GEMM_VNNI(T, G, DX, TERM, K)                                                                        \
    DECODE_TILE(T, G, DX)                                                                                      \
    GROUP_SUMS(T, G)                                                                                           \
    ROWS4(T, G, TERM)                                                                                          \
    GEMM_BODY(GEMM_NAME(T), T, TERM, K, decode_tile_##T)
IQ_VNNI_TYPES(IQ_GEMM_VNNI)
