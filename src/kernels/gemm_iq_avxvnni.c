/* gemm_iq_avxvnni.c — the grid types' gemm on AVX-VNNI (vpdpbusd on 256-bit vectors:
 * Alder Lake and later Intel cores, Zen 5, without AVX-512 or beside it):
 * gemm_iq_vnni_impl.h, which says how it works, at eight lanes, one weight row a 32-bit
 * lane. The VEX form has no broadcast operand, so the four activation quants of each
 * product are broadcast by a vpbroadcastd from memory first. Chosen where the CPU has
 * AVX-VNNI and not AVX-512 VNNI (types.c); the old gemm in dot_iq_avx2.c serves AVX2
 * CPUs without it. */
#include <immintrin.h>
#include <stdint.h>

#include "kernels/unaligned.h"

#define AV __attribute__((target("avx2,fma,f16c,avxvnni")))

#define TILE_ROWS 8 /* weight rows a tile: one per 32-bit lane */
#define VI __m256i
#define VF __m256
#define VI_ZERO _mm256_setzero_si256
#define VI_SET1 _mm256_set1_epi32
#define VI_ADD _mm256_add_epi32
#define VI_MULLO _mm256_mullo_epi32
#define VI_LOAD(p) _mm256_load_si256((const __m256i *)(p))
#define VF_ZERO _mm256_setzero_ps
#define VF_SET1 _mm256_set1_ps
#define VF_ADD _mm256_add_ps
#define VF_MUL _mm256_mul_ps
#define VF_CVT _mm256_cvtepi32_ps
#define VF_LOAD _mm256_load_ps
#define GEMM_NAME(T) tokd_##T##_gemm_avxvnni

/* the first `rows` lanes of an output row: lane i is in while i < rows */
#define OUT_MASK __m256i
AV static inline __m256i out_mask(int rows) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
AV static inline __m256 out_load(__m256i m, const float *p) { return _mm256_maskload_ps(p, m); }
AV static inline void out_store(float *p, __m256i m, __m256 v) { _mm256_maskstore_ps(p, m, v); }

/* Eight rows of 64 dwords (the decoded super-blocks, row-major) into 64 vectors of
 * eight rows' dword q: eight 8x8 transposes (unpacks of dwords, then of qwords, then
 * 128-bit halves exchanged). Unrolled, so that everything stays in registers. */
AV static void transpose_rows(const uint32_t rows[TILE_ROWS][64], __m256i wq[64]) {
    _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
        __m256i z[8], t[8];
        _Pragma("GCC unroll 8") for (int r = 0; r < 8; r++) z[r] = _mm256_load_si256((const __m256i *)&rows[r][8 * c]);
        _Pragma("GCC unroll 4") for (int r = 0; r < 8; r += 2) {
            t[r] = _mm256_unpacklo_epi32(z[r], z[r + 1]);
            t[r + 1] = _mm256_unpackhi_epi32(z[r], z[r + 1]);
        }
        /* rows 4h..4h+3: z[4h + j] holds their dwords j (low half) and 4 + j (high half) */
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
            z[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
            z[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
            z[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
            z[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
        }
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
            wq[8 * c + j] = _mm256_permute2x128_si256(z[j], z[4 + j], 0x20);
            wq[8 * c + 4 + j] = _mm256_permute2x128_si256(z[j], z[4 + j], 0x31);
        }
    }
}

/* acc += w (unsigned bytes) . the four signed bytes at p, broadcast */
AV static inline __attribute__((always_inline)) __m256i dpbusd_bcast(__m256i acc, __m256i w, const int8_t *p) {
    return _mm256_dpbusd_avx_epi32(acc, w, _mm256_set1_epi32(tokd_ld_i32(p)));
}

#include "kernels/gemm_iq_vnni_impl.h"
