/* dot_iq_avx512.c — the one-row dot products of IQ2_XXS and IQ3_XXS with Q8_K
 * activations on AVX-512 with VBMI and VNNI (quants_iq.c has the layouts and the
 * arithmetic; dot_iq_avx2.c the AVX2 kernels, which the other grid types keep).
 *
 * Decode of these types is bound by unpacking, not by memory: the AVX2 kernels load each
 * group's grid row (8 or 4 bytes) and sign byte by a scalar load and assemble them into
 * vectors, about 14 ns a super-block on one Zen 5 core, so two threads decode a 1.1B
 * IQ2_XXS model at a tenth of the memory's rate. Here nothing is loaded per group:
 *   - the grid's 256 points are held as their 16-bit codes (iq_grids.c: 2 or 3 bits a
 *     coordinate) in eight registers, and a super-block's 32 (IQ3: 64) indices are looked
 *     up at once: vpermt2w over four pairs of registers by the index's low 6 bits, then
 *     two blends by bits 6 and 7;
 *   - each weight vector's codes are spread to one a qword (vpermb), cut into one byte a
 *     coordinate (vpmultishiftqb) and mapped to the coordinate values (vpermb);
 *   - the sign bytes come from the 128-entry table tokd_iq_signs by vpermt2b on their 7
 *     stored bits, and each 64 of them are loaded straight into a mask register that
 *     negates the activations (as vpsignb does in the AVX2 kernels);
 *   - vpdpbusd sums four products a lane; the sub-blocks' scales multiply the lane sums
 *     through vpackssdw + vpmaddwd (every lane sum is below 2^15 in magnitude: at most
 *     4 * 62 * 127); four super-blocks' integer sums are reduced together.
 * Every super-block's integer sum is exact, and the float steps after it are the
 * reference's (d = DX * y.d; sum += d * S; K * sum), so the result equals the scalar
 * reference bit for bit, as the AVX2 kernels' does (test_quants).
 *
 * One thread, 64 rows of 2048 in cache, alternated with the AVX2 kernel in one process,
 * best of 200 (BENCHMARKS.md, fifty-fourth session): IQ2_XXS 13.7 -> 8.7 ns a
 * super-block, IQ3_XXS 18.7 -> 11.2. The 512- and 1024-point grids (IQ2_XS, IQ3_S,
 * IQ2_S) do not fit in registers beside the rest; looked up the same way from sixteen,
 * they ran at 0.9x their AVX2 kernels, which they keep. */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>

#include "kernels/iq_grids.h"
#include "kernels/quants.h"

#define A5 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,f16c")))
#define INLINE static inline __attribute__((always_inline))

/* The permutation and shift controls, filled once (tokd_iq_avx512_init). */
static struct {
    _Alignas(64) uint8_t idx2[64];   /* IQ2_XXS: index byte 4k+j of the block (8k + j) to word 4k + j */
    _Alignas(64) uint8_t idx3[2][64]; /* IQ3_XXS: index bytes 32h .. 32h+31 to words */
    _Alignas(64) uint8_t spread2[4][64]; /* IQ2: weight vector q, qword i: code word 8q + i in bytes 0, 1 */
    _Alignas(64) uint8_t spread3[2][64]; /* IQ3: qword i: code words 2i, 2i+1 of a half (q odd: the second 16) */
    _Alignas(64) uint8_t cut2[64];   /* multishift offsets: coordinate j at bit 2j */
    _Alignas(64) uint8_t cut3[64];   /* coordinate j of word w (of 2 in the qword) at bit 16w + 3j */
    _Alignas(64) uint8_t val2[64];   /* code & 3 -> 8, 25, 43 */
    _Alignas(64) uint8_t val3[64];   /* code & 7 -> 4, 12, ..., 62 */
    _Alignas(64) uint8_t sign2[64];  /* IQ2: sub-block k's four 7-bit sign fields (bits 32 + 7j of qword k) */
    _Alignas(64) uint8_t pack2[64];  /* IQ2: those fields (bytes 8k + j) packed to bytes 4k + j */
    _Alignas(64) uint8_t sign3[64];  /* IQ3: qword m: the fields of words 2m (bits 7j) and 2m+1 (32 + 7j) */
    /* the scale words' sources for vpmaddwd (scaled_sum), by where the scale vector holds
       sub-block k's scale: word 4k (IQ2_XXS), 2k (IQ3_XXS) */
    _Alignas(64) uint16_t scale2[2][32];
    _Alignas(64) uint16_t scale3[2][32];
} ctl;

static void init_once(void) {
    static const uint8_t v2[4] = {8, 25, 43, 0}, v3[8] = {4, 12, 20, 28, 36, 44, 52, 62};
    for (int p = 0; p < 32; p++) {
        ctl.idx2[2 * p] = (uint8_t)(8 * (p / 4) + p % 4);
        for (int h = 0; h < 2; h++) ctl.idx3[h][2 * p] = (uint8_t)(32 * h + p);
    }
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) {
            for (int q = 0; q < 4; q++) ctl.spread2[q][8 * i + j] = (uint8_t)(2 * (8 * q + i) + (j > 0));
            for (int h = 0; h < 2; h++) ctl.spread3[h][8 * i + j] = (uint8_t)(2 * (16 * h + 2 * i) + (j < 4 ? j : 3));
            ctl.cut2[8 * i + j] = (uint8_t)(2 * j);
            ctl.cut3[8 * i + j] = (uint8_t)(16 * (j / 4) + 3 * (j % 4));
            ctl.sign2[8 * i + j] = (uint8_t)(32 + 7 * (j % 4));
            ctl.sign3[8 * i + j] = (uint8_t)(32 * (j / 4) + 7 * (j % 4));
        }
    for (int i = 0; i < 64; i++) {
        ctl.val2[i] = v2[i & 3];
        ctl.val3[i] = v3[i & 7];
        ctl.pack2[i] = (uint8_t)(i < 32 ? 8 * (i / 4) + i % 4 : 0);
    }
    /* vpackssdw of lane sums a (sub-blocks s, s+1) and b (s+2, s+3) leaves, in 128-bit
       lane L, four words of a's dwords 4L.. (sub-block s + L/2), then four of b's (s + 2 +
       L/2): each word's scale is that sub-block's, taken from where the scale vector holds
       it (IQ2: word 4k, the low word of qword k; IQ3: word 2k, of dword k). */
    for (int half = 0; half < 2; half++)
        for (int L = 0; L < 4; L++)
            for (int w = 0; w < 8; w++) {
                const int k = 4 * half + L / 2 + (w >= 4 ? 2 : 0);
                ctl.scale2[half][8 * L + w] = (uint16_t)(4 * k);
                ctl.scale3[half][8 * L + w] = (uint16_t)(2 * k);
            }
}

void tokd_iq_avx512_init(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_once);
}

/* A grid's 256 points' codes, held in eight registers across a row. */
typedef struct {
    __m512i t[8];
} code_table;
A5 INLINE code_table load_codes(const uint16_t *codes) {
    code_table c;
    for (int i = 0; i < 8; i++) c.t[i] = _mm512_loadu_si512(codes + 32 * i);
    return c;
}
/* The codes of 32 points by their word indices (below 256): vpermt2w over each pair of
 * registers (64 points) by the index's low 6 bits, then blends by bits 6 and 7. */
A5 INLINE __m512i lookup(const code_table *c, __m512i idx) {
    const __m512i l0 = _mm512_permutex2var_epi16(c->t[0], idx, c->t[1]), l1 = _mm512_permutex2var_epi16(c->t[2], idx, c->t[3]);
    const __m512i l2 = _mm512_permutex2var_epi16(c->t[4], idx, c->t[5]), l3 = _mm512_permutex2var_epi16(c->t[6], idx, c->t[7]);
    const __mmask32 b6 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(64)), b7 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(128));
    return _mm512_mask_blend_epi16(b7, _mm512_mask_blend_epi16(b6, l0, l1), _mm512_mask_blend_epi16(b6, l2, l3));
}

/* 64 sign bits (one a coordinate) from memory into a mask register. */
A5 INLINE __mmask64 load_mask(uint64_t *p) { return _load_mask64((__mmask64 *)p); }

/* Weight vector q (coordinates 64q ..) from code words 8q + i (2 bits a coordinate:
 * IQ2) or from the two halves' code words 16q + 2i, +1 (3 bits: IQ3), as unsigned bytes. */
A5 INLINE __m512i expand2(__m512i cw, int q) {
    const __m512i spread = _mm512_permutexvar_epi8(_mm512_load_si512(ctl.spread2[q]), cw);
    return _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(_mm512_load_si512(ctl.cut2), spread), _mm512_load_si512(ctl.val2));
}
A5 INLINE __m512i expand3(const __m512i cw[2], int q) {
    const __m512i spread = _mm512_permutexvar_epi8(_mm512_load_si512(ctl.spread3[q & 1]), cw[q >> 1]);
    return _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(_mm512_load_si512(ctl.cut3), spread), _mm512_load_si512(ctl.val3));
}

/* IQ3_XXS's index bytes 0 .. 31 (half 1: 32 .. 63) of v as 32 words. */
A5 INLINE __m512i bytes_to_words(__m512i v, int half) {
    return _mm512_maskz_permutexvar_epi8(0x5555555555555555ull, _mm512_load_si512(ctl.idx3[half]), v);
}

/* Sub-block pairs' lane sums (lanes 0-7: the first sub-block, 8-15: the second) times
 * their scales, added: dq[0..3] hold sub-blocks 0..7, `ls` the scales where scale_ctl
 * says. */
A5 INLINE __m512i scaled_sum(const __m512i dq[4], __m512i ls, const uint16_t (*scale_ctl)[32]) {
    const __m512i s01 = _mm512_permutexvar_epi16(_mm512_load_si512(scale_ctl[0]), ls);
    const __m512i s23 = _mm512_permutexvar_epi16(_mm512_load_si512(scale_ctl[1]), ls);
    return _mm512_add_epi32(_mm512_madd_epi16(_mm512_packs_epi32(dq[0], dq[1]), s01),
                            _mm512_madd_epi16(_mm512_packs_epi32(dq[2], dq[3]), s23));
}

/* Weight vector q (64 coordinates, unsigned) times the activations with the signs of
 * `neg` (one bit a coordinate) put on them: 16 lane sums. */
A5 INLINE __m512i signed_dot(__m512i w, __mmask64 neg, const int8_t *a, int q) {
    const __m512i act = _mm512_loadu_si512(a + 64 * q);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, _mm512_mask_sub_epi8(act, neg, _mm512_setzero_si512(), act));
}

/* One super-block's integer sum, in lanes, for each type. The 7-bit sign fields become
 * sign bytes by vpermt2b from tokd_iq_signs (ks0, ks1), stored so that each 64 of them
 * load into a mask register. */
A5 INLINE __m512i iq2_xxs_sum(const tokd_block_iq2_xxs *x, const int8_t *a, const code_table *codes, __m512i ks0, __m512i ks1) {
    const __m512i v = _mm512_loadu_si512(x->qs); /* qword k: sub-block k's indices, signs, scale */
    const __m512i cw = lookup(codes, _mm512_maskz_permutexvar_epi8(0x5555555555555555ull, _mm512_load_si512(ctl.idx2), v));
    _Alignas(64) uint64_t signs[8];
    const __m512i fields = _mm512_multishift_epi64_epi8(_mm512_load_si512(ctl.sign2), v);
    _mm512_store_si512(signs, _mm512_permutexvar_epi8(_mm512_load_si512(ctl.pack2), _mm512_permutex2var_epi8(ks0, fields, ks1)));
    const __m512i s = _mm512_srli_epi64(v, 60);
    __m512i dq[4];
    for (int q = 0; q < 4; q++) dq[q] = signed_dot(expand2(cw, q), load_mask(signs + q), a, q);
    return scaled_sum(dq, _mm512_add_epi64(_mm512_add_epi64(s, s), _mm512_set1_epi64(1)), ctl.scale2);
}
A5 INLINE __m512i iq3_xxs_sum(const tokd_block_iq3_xxs *x, const int8_t *a, const code_table *codes, __m512i ks0, __m512i ks1) {
    const __m512i v = _mm512_loadu_si512(x->qs); /* the 64 indices */
    const __m512i sv = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(x->qs + 64))); /* dword k: sub-block k's signs, scale */
    const __m512i cw[2] = {lookup(codes, bytes_to_words(v, 0)), lookup(codes, bytes_to_words(v, 1))};
    _Alignas(64) uint64_t signs[8];
    _mm512_store_si512(signs, _mm512_permutex2var_epi8(ks0, _mm512_multishift_epi64_epi8(_mm512_load_si512(ctl.sign3), sv), ks1));
    const __m512i s = _mm512_srli_epi32(sv, 28);
    __m512i dq[4];
    for (int q = 0; q < 4; q++) dq[q] = signed_dot(expand3(cw, q), load_mask(signs + q), a, q);
    return scaled_sum(dq, _mm512_add_epi32(_mm512_add_epi32(s, s), _mm512_set1_epi32(1)), ctl.scale3);
}
/* The lane sums of four vectors: element j of the result is the sum of v_j's lanes. */
A5 INLINE __m128i hsum4(__m512i a, __m512i b, __m512i c, __m512i d) {
    const __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    const __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
    const __m512i r = _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
    const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(r), _mm512_extracti64x4_epi64(r, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* The row: super-blocks four at a time (their sums reduced together), then one by one;
 * each super-block's float term in order, as the reference adds them. K: the type's
 * final factor (quants_iq.c). */
#define IQ_DOT_512(T, CODES, K)                                                                           \
    A5 void tokd_##T##_dot_avx512vbmi(int64_t n, float *out, const void *w, const void *act) {            \
        const tokd_block_##T *x = w;                                                                      \
        const tokd_block_q8_K *y = act;                                                                   \
        const int64_t nb = n / TOKD_QK_K;                                                                 \
        const code_table codes = load_codes(CODES);                                                       \
        const __m512i ks0 = _mm512_loadu_si512(tokd_iq_signs), ks1 = _mm512_loadu_si512(tokd_iq_signs + 64); \
        float sum = 0;                                                                                    \
        int64_t b = 0;                                                                                    \
        for (; b + 4 <= nb; b += 4) {                                                                     \
            int32_t S[4];                                                                                 \
            _mm_storeu_si128((__m128i *)S, hsum4(T##_sum(&x[b], y[b].qs, &codes, ks0, ks1),               \
                                                 T##_sum(&x[b + 1], y[b + 1].qs, &codes, ks0, ks1),       \
                                                 T##_sum(&x[b + 2], y[b + 2].qs, &codes, ks0, ks1),       \
                                                 T##_sum(&x[b + 3], y[b + 3].qs, &codes, ks0, ks1)));     \
            for (int j = 0; j < 4; j++) {                                                                 \
                const float d = _cvtsh_ss(x[b + j].d) * y[b + j].d;                                       \
                sum += d * (float)S[j];                                                                   \
            }                                                                                             \
        }                                                                                                 \
        for (; b < nb; b++) {                                                                             \
            const float d = _cvtsh_ss(x[b].d) * y[b].d;                                                   \
            sum += d * (float)_mm512_reduce_add_epi32(T##_sum(&x[b], y[b].qs, &codes, ks0, ks1));         \
        }                                                                                                 \
        *out = (K) * sum;                                                                                 \
    }
IQ_DOT_512(iq2_xxs, tokd_iq2xxs_codes, 0.125f)
IQ_DOT_512(iq3_xxs, tokd_iq3xxs_codes, 0.25f)

/* ---- IQ3_XXS super-blocks unpacked for the VNNI gemm (gemm_iq_avx512.c) ----
 * The same decoding, written out instead of multiplied: the 256 weights with their signs
 * and 128 added, as unsigned bytes (128 +- coordinate), and the eight sub-blocks' scale
 * multipliers (2s + 1). In that gemm's tiles this ran 1.14-1.28x the AVX2 decoder with 4
 * to 16 activation rows; IQ2_XXS unpacked the same way ran 0.93-0.99x its AVX2 decoder,
 * which it keeps (BENCHMARKS.md, fifty-fifth session). */
A5 INLINE void store_signed(uint8_t *w, __m512i mag, __mmask64 neg) {
    const __m512i c128 = _mm512_set1_epi8(-128);
    _mm512_storeu_si512(w, _mm512_mask_sub_epi8(_mm512_add_epi8(c128, mag), neg, c128, mag));
}
A5 void tokd_iq3_xxs_unpack_avx512vbmi(const void *blk, uint8_t w[256], int32_t ls[8]) {
    const tokd_block_iq3_xxs *x = blk;
    const code_table codes = load_codes(tokd_iq3xxs_codes);
    const __m512i ks0 = _mm512_loadu_si512(tokd_iq_signs), ks1 = _mm512_loadu_si512(tokd_iq_signs + 64);
    const __m512i v = _mm512_loadu_si512(x->qs);
    const __m512i sv = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(x->qs + 64)));
    const __m512i cw[2] = {lookup(&codes, bytes_to_words(v, 0)), lookup(&codes, bytes_to_words(v, 1))};
    _Alignas(64) uint64_t signs[8];
    _mm512_store_si512(signs, _mm512_permutex2var_epi8(ks0, _mm512_multishift_epi64_epi8(_mm512_load_si512(ctl.sign3), sv), ks1));
    for (int q = 0; q < 4; q++) store_signed(w + 64 * q, expand3(cw, q), load_mask(signs + q));
    const __m256i s = _mm256_srli_epi32(_mm512_castsi512_si256(sv), 28);
    _mm256_storeu_si256((__m256i *)ls, _mm256_add_epi32(_mm256_add_epi32(s, s), _mm256_set1_epi32(1)));
}
