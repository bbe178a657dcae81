/* gemm_iq_avx512.c — the grid types' gemm on AVX-512 VNNI: gemm_iq_vnni_impl.h (which
 * says how it works) at sixteen lanes, one weight row a 32-bit lane, and IQ3_XXS's form
 * with its tiles unpacked by VBMI. One thread, cached, 512 activation rows: 3.4-4.4x the
 * older gemm of dot_iq_avx2.c; pp512 of TinyLlama-shape files 3.2-3.9x (BENCHMARKS.md,
 * fifty-fifth session). */
#include <immintrin.h>
#include <stdint.h>

#define AV __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

#define TILE_ROWS 16 /* weight rows a tile: one per 32-bit lane */
#define VI __m512i
#define VF __m512
#define VI_ZERO _mm512_setzero_si512
#define VI_SET1 _mm512_set1_epi32
#define VI_ADD _mm512_add_epi32
#define VI_MULLO _mm512_mullo_epi32
#define VI_LOAD _mm512_load_si512
#define VF_ZERO _mm512_setzero_ps
#define VF_SET1 _mm512_set1_ps
#define VF_ADD _mm512_add_ps
#define VF_MUL _mm512_mul_ps
#define VF_CVT _mm512_cvtepi32_ps
#define VF_LOAD _mm512_load_ps
#define GEMM_NAME(T) tokd_##T##_gemm_avx512vnni

/* the first `rows` lanes of an output row */
#define OUT_MASK __mmask16
AV static inline __mmask16 out_mask(int rows) { return (__mmask16)((1u << rows) - 1); }
AV static inline __m512 out_load(__mmask16 m, const float *p) { return _mm512_maskz_loadu_ps(m, p); }
AV static inline void out_store(float *p, __mmask16 m, __m512 v) { _mm512_mask_storeu_ps(p, m, v); }

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

#include "kernels/gemm_iq_vnni_impl.h"

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
#define TERM_D_S VF_MUL(d, Sf)
GEMM_BODY(tokd_iq3_xxs_gemm_avx512vbmi, iq3_xxs, TERM_D_S, 0.25f, decode_tile_iq3_xxs_vbmi)

/* Their activation rows: plain Q8_K (the bsums included), in tokd_iq_gemm_act_bytes. */
void tokd_iq_gemm_prep_vnni(const float *x, void *dst, int64_t n) { tokd_q8_K_quantize(x, dst, n); }
