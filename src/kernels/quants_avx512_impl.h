/* quants_avx512_impl.h — body of the AVX-512 dot products, included twice by
 * dot_avx512.c: once plain (AVX-512 F/BW/VL) and once with VNNI. The includer defines
 *   SFX        name suffix (avx512 / avx512vnni)
 *   TGT        the function attribute with the target features
 *   DPBUSD(acc, u, s)  acc + sums of four u8*s8 products, per int32 lane
 *   DPWSSD(acc, a, b)  acc + sums of two s16*s16 products, per int32 lane
 * With VNNI those are single instructions; without, maddubs/madd sequences that give
 * the same exact results for the value ranges used here (no int16 saturation: every
 * u8 operand is at most 63, or 128 with |s8| <= 127, giving pairs <= 32512).
 *
 * Layouts are those of dot_avx2.c with twice the width: 32-element formats put two
 * blocks (b+j and b+j+4) in one zmm so that eight blocks reduce straight into the
 * canonical lane order; K-quants put 64 elements (Q4_K/Q5_K: a scale pair; Q2_K,
 * Q3_K, Q6_K: four 16-element groups, one per 128-bit lane) in one zmm, scales
 * spread with vpermw. The float arithmetic is the scalar reference's, operation for
 * operation, so results are bit-equal to it. */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(T) CAT(CAT(tokd_, T), CAT(_dot_, SFX))
#define S(name) CAT(name, CAT(_, SFX)) /* file-local helper names */

/* Eight fp16 values at p, p+stride, ..., p+7*stride, as floats. */
TGT static inline __m256 S(halves8)(const void *p, size_t stride) {
    const uint8_t *b = p;
    uint16_t h[8];
    for (int k = 0; k < 8; k++) memcpy(&h[k], b + k * stride, 2);
    __m128i v = _mm_cvtsi32_si128(h[0]);
    v = _mm_insert_epi16(v, h[1], 1);
    v = _mm_insert_epi16(v, h[2], 2);
    v = _mm_insert_epi16(v, h[3], 3);
    v = _mm_insert_epi16(v, h[4], 4);
    v = _mm_insert_epi16(v, h[5], 5);
    v = _mm_insert_epi16(v, h[6], 6);
    v = _mm_insert_epi16(v, h[7], 7);
    return _mm256_cvtph_ps(v);
}
/* The same for fp16 field f (in 2-byte words) of eight consecutive blocks of `stride`
 * bytes, gathered with two vpermt2w from two 128-byte windows inside the eight blocks
 * (never reading outside them; 8*stride >= 144 for every format): window A = bytes
 * [0, 128), window B = [WB, WB + 128). HB_IDX gives lane k's word index in its window;
 * HB_MASK the lanes taken from window B. All compile-time constants. */
#ifndef HB_IDX
#define HB_WB(st) (8 * (st) >= 256 ? 128 : 8 * (st) - 128)
#define HB_OFF(st, f, k) ((k) * (st) + 2 * (f))
#define HB_INB(st, f, k) (HB_OFF(st, f, k) + 2 > 128)
#define HB_IDX(st, f, k) (uint16_t)(HB_INB(st, f, k) ? (HB_OFF(st, f, k) - HB_WB(st)) / 2 : HB_OFF(st, f, k) / 2)
#define HB_IDX8(st, f)                                                                                         \
    {HB_IDX(st, f, 0), HB_IDX(st, f, 1), HB_IDX(st, f, 2), HB_IDX(st, f, 3), HB_IDX(st, f, 4), HB_IDX(st, f, 5), \
     HB_IDX(st, f, 6), HB_IDX(st, f, 7)}
#define HB_MASK(st, f)                                                                                          \
    (HB_INB(st, f, 0) | HB_INB(st, f, 1) << 1 | HB_INB(st, f, 2) << 2 | HB_INB(st, f, 3) << 3 |                 \
     HB_INB(st, f, 4) << 4 | HB_INB(st, f, 5) << 5 | HB_INB(st, f, 6) << 6 | HB_INB(st, f, 7) << 7)
#endif
TGT static inline __m256 S(halves8_blocks)(const void *p, int stride, const uint16_t *idx32, uint32_t mb) {
    const uint8_t *base = p;
    __m512i idx = _mm512_loadu_si512(idx32);
    __m512i v = _mm512_permutex2var_epi16(_mm512_loadu_si512(base), idx, _mm512_loadu_si512(base + 64));
    if (mb) {
        const uint8_t *wb = base + HB_WB(stride);
        __m512i hi = _mm512_permutex2var_epi16(_mm512_loadu_si512(wb), idx, _mm512_loadu_si512(wb + 64));
        v = _mm512_mask_mov_epi16(v, (__mmask32)mb, hi);
    }
    return _mm256_cvtph_ps(_mm512_castsi512_si128(v));
}
TGT static inline __m512i S(load2x256)(const void *a, const void *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}
/* Eight blocks' partial sums, zmm j holding blocks j (low 256 bits) and j+4 (high),
 * to one vector of the eight block sums in block order. */
TGT static inline __m256i S(hsum_4x16)(__m512i z0, __m512i z1, __m512i z2, __m512i z3) {
    __m512i t01 = _mm512_add_epi32(_mm512_unpacklo_epi32(z0, z1), _mm512_unpackhi_epi32(z0, z1));
    __m512i t23 = _mm512_add_epi32(_mm512_unpacklo_epi32(z2, z3), _mm512_unpackhi_epi32(z2, z3));
    __m512i t = _mm512_add_epi32(_mm512_unpacklo_epi64(t01, t23), _mm512_unpackhi_epi64(t01, t23));
    __m512i s = _mm512_add_epi32(t, _mm512_shuffle_i64x2(t, t, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_castsi512_si256(_mm512_shuffle_i64x2(s, s, _MM_SHUFFLE(0, 0, 2, 0)));
}
/* The nibbles of two Q4-style blocks: [a low | a high | b low | b high]. */
TGT static inline __m512i S(nibbles2)(const uint8_t *qa, const uint8_t *qb) {
    __m512i z = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)qa));
    z = _mm512_mask_broadcast_i32x4(z, 0xFF00, _mm_loadu_si128((const __m128i *)qb));
    z = _mm512_mask_srli_epi16(z, 0xFF00FF00u, z, 4);
    return _mm512_and_si512(z, _mm512_set1_epi8(0x0F));
}
/* Fifth bits of two Q5 blocks as 0x10 bytes, in the nibbles2 order. */
TGT static inline __m512i S(fifth2)(const uint8_t *qha, const uint8_t *qhb) {
    uint64_t m;
    uint32_t a, b;
    memcpy(&a, qha, 4);
    memcpy(&b, qhb, 4);
    m = (uint64_t)a | (uint64_t)b << 32;
    return _mm512_maskz_mov_epi8((__mmask64)m, _mm512_set1_epi8(0x10));
}

/* ---- 32-element formats ---- */

TGT static inline __m512i S(pair_q4_0)(const tokd_block_q4_0 *x, const tokd_block_q8_0 *y) {
    __m512i a = S(load2x256)(y[0].qs, y[4].qs), z = _mm512_setzero_si512();
    __m512i p = DPBUSD(z, S(nibbles2)(x[0].qs, x[4].qs), a);
    return _mm512_sub_epi32(p, DPBUSD(z, _mm512_set1_epi8(8), a));
}
TGT static inline __m512i S(pair_q4_1)(const tokd_block_q4_1 *x, const tokd_block_q8_1 *y) {
    return DPBUSD(_mm512_setzero_si512(), S(nibbles2)(x[0].qs, x[4].qs), S(load2x256)(y[0].qs, y[4].qs));
}
TGT static inline __m512i S(pair_q5_0)(const tokd_block_q5_0 *x, const tokd_block_q8_0 *y) {
    __m512i a = S(load2x256)(y[0].qs, y[4].qs), z = _mm512_setzero_si512();
    __m512i q = _mm512_or_si512(S(nibbles2)(x[0].qs, x[4].qs), S(fifth2)(x[0].qh, x[4].qh));
    return _mm512_sub_epi32(DPBUSD(z, q, a), DPBUSD(z, _mm512_set1_epi8(16), a));
}
TGT static inline __m512i S(pair_q5_1)(const tokd_block_q5_1 *x, const tokd_block_q8_1 *y) {
    __m512i q = _mm512_or_si512(S(nibbles2)(x[0].qs, x[4].qs), S(fifth2)(x[0].qh, x[4].qh));
    return DPBUSD(_mm512_setzero_si512(), q, S(load2x256)(y[0].qs, y[4].qs));
}
TGT static inline __m512i S(pair_q8_0)(const tokd_block_q8_0 *x, const tokd_block_q8_0 *y) {
    __m512i q = S(load2x256)(x[0].qs, x[4].qs), a = S(load2x256)(y[0].qs, y[4].qs);
    /* |q| as u8 times a with q's sign (a is never -128, so negating it is exact) */
    __m512i sa = _mm512_mask_sub_epi8(a, _mm512_movepi8_mask(q), _mm512_setzero_si512(), a);
    return DPBUSD(_mm512_setzero_si512(), _mm512_abs_epi8(q), sa);
}
/* IQ4_NL: the nibbles looked up in the table (vpshufb, each 128-bit lane), then as Q8_0. */
TGT static inline __m512i S(iq4_values2)(const uint8_t *qa, const uint8_t *qb) {
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)tokd_iq4_values));
    return _mm512_shuffle_epi8(table, S(nibbles2)(qa, qb));
}
TGT static inline __m512i S(pair_iq4_nl)(const tokd_block_iq4_nl *x, const tokd_block_q8_0 *y) {
    __m512i q = S(iq4_values2)(x[0].qs, x[4].qs), a = S(load2x256)(y[0].qs, y[4].qs);
    __m512i sa = _mm512_mask_sub_epi8(a, _mm512_movepi8_mask(q), _mm512_setzero_si512(), a);
    return DPBUSD(_mm512_setzero_si512(), _mm512_abs_epi8(q), sa);
}

#define DOT32_512(T, XT, YT, MIN)                                                                  \
    TGT void FN(T)(int64_t n, float *out, const void *w, const void *act) {                       \
        const XT *x = w;                                                                           \
        const YT *y = act;                                                                         \
        const int64_t nb = n / TOKD_QK;                                                            \
        static const uint16_t ixd[32] = HB_IDX8(sizeof(XT), 0), iyd[32] = HB_IDX8(sizeof(YT), 0);  \
        static const uint16_t ixm[32] = HB_IDX8(sizeof(XT), 1), iys[32] = HB_IDX8(sizeof(YT), 1);  \
        (void)ixm, (void)iys;                                                                      \
        __m256 acc = _mm256_setzero_ps();                                                          \
        int64_t b = 0;                                                                             \
        for (; b + 8 <= nb; b += 8) {                                                              \
            const XT *xb = x + b;                                                                  \
            const YT *yb = y + b;                                                                  \
            __m256i P = S(hsum_4x16)(S(pair_##T)(xb, yb), S(pair_##T)(xb + 1, yb + 1),             \
                                     S(pair_##T)(xb + 2, yb + 2), S(pair_##T)(xb + 3, yb + 3));     \
            __m256 dd = _mm256_mul_ps(S(halves8_blocks)(xb, sizeof(XT), ixd, HB_MASK(sizeof(XT), 0)),  \
                                      S(halves8_blocks)(yb, sizeof(YT), iyd, HB_MASK(sizeof(YT), 0))); \
            __m256 t = _mm256_mul_ps(dd, _mm256_cvtepi32_ps(P));                                   \
            DOT32_512_MIN_##MIN                                                                    \
            acc = _mm256_add_ps(acc, t);                                                           \
        }                                                                                          \
        float s[8];                                                                                \
        _mm256_storeu_ps(s, acc);                                                                  \
        for (; b < nb; b++) s[b & 7] += tokd_##T##_term(x + b, y + b);                             \
        *out = tokd_reduce8(s);                                                                    \
    }
#define DOT32_512_MIN_0
#define DOT32_512_MIN_1 \
    t = _mm256_add_ps(t, _mm256_mul_ps(S(halves8_blocks)(xb, sizeof *xb, ixm, HB_MASK(sizeof *xb, 1)),   \
                                       S(halves8_blocks)(yb, sizeof *yb, iys, HB_MASK(sizeof *yb, 1))));

DOT32_512(q4_0, tokd_block_q4_0, tokd_block_q8_0, 0)
DOT32_512(q4_1, tokd_block_q4_1, tokd_block_q8_1, 1)
DOT32_512(q5_0, tokd_block_q5_0, tokd_block_q8_0, 0)
DOT32_512(q5_1, tokd_block_q5_1, tokd_block_q8_1, 1)
DOT32_512(q8_0, tokd_block_q8_0, tokd_block_q8_0, 0)
DOT32_512(iq4_nl, tokd_block_iq4_nl, tokd_block_q8_0, 0)

/* ---- K-quants ---- */

TGT static inline int32_t S(hsum128)(__m128i s) {
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}
TGT static inline int32_t S(hsum256)(__m256i h) {
    return S(hsum128)(_mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
}
TGT static inline int32_t S(hsum512)(__m512i v) {
    return S(hsum256)(_mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)));
}
/* vpermw indices: group m of four 16-element groups, one per 128-bit lane. */
TGT static inline __m512i S(group4_idx)(int m) {
    const long long r = 0x0001000100010001LL;
    long long g0 = (4 * m) * r, g1 = (4 * m + 1) * r, g2 = (4 * m + 2) * r, g3 = (4 * m + 3) * r;
    return _mm512_set_epi64(g3, g3, g2, g2, g1, g1, g0, g0);
}
/* vpermw indices: scale pair p of Q4_K/Q5_K, [2p x16 | 2p+1 x16]. */
TGT static inline __m512i S(pair_idx)(int p) {
    long long lo = (2 * p) * 0x0001000100010001LL, hi = (2 * p + 1) * 0x0001000100010001LL;
    return _mm512_set_epi64(hi, hi, hi, hi, lo, lo, lo, lo);
}

/* Four integer sums at once: [sum v0, sum v1, sum v2, sum v3] (exact int32). */
TGT static inline __m128i S(hsum4x256)(__m256i a0, __m256i a1, __m256i a2, __m256i a3) {
    __m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
    return _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
}
TGT static inline __m256i S(fold512)(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

TGT void FN(q2_K)(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_q2_K *x = w;
    const tokd_block_q8_K *y = act;
    const __m512i m3 = _mm512_set1_epi8(3);
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        __m128i raw = _mm_loadu_si128((const __m128i *)x[b].scales);
        __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(raw, _mm_set1_epi8(0x0F)));
        __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F)));
        __m256i mm = _mm256_madd_epi16(mn16, _mm256_loadu_si256((const __m256i *)y[b].bsums));
        __m512i scz = _mm512_castsi256_si512(sc16);
        __m512i acc = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * h)));
            q = _mm512_mask_srli_epi16(q, 0xFFFF0000u, q, 2);
            const int8_t *a = y[b].qs + 128 * h;
            __m512i z01 = _mm512_and_si512(q, m3), z23 = _mm512_and_si512(_mm512_srli_epi16(q, 4), m3);
            __m512i p01 = _mm512_maddubs_epi16(z01, _mm512_loadu_si512(a));
            __m512i p23 = _mm512_maddubs_epi16(z23, _mm512_loadu_si512(a + 64));
            acc = DPWSSD(acc, p01, _mm512_permutexvar_epi16(S(group4_idx)(2 * h), scz));
            acc = DPWSSD(acc, p23, _mm512_permutexvar_epi16(S(group4_idx)(2 * h + 1), scz));
        }
        int32_t summ = S(hsum256)(mm);
        sum += tokd_k_term2(_cvtsh_ss(x[b].d), _cvtsh_ss(x[b].dmin), y[b].d, S(hsum512)(acc), summ);
    }
    *out = sum;
}

TGT void FN(q3_K)(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_q3_K *x = w;
    const tokd_block_q8_K *y = act;
    const __m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_sub_epi8(q3k_scales(x[b].scales), _mm_set1_epi8(32)));
        __m256i bm = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y[b].bsums));
        __m512i scz = _mm512_castsi256_si512(sc16);
        __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)x[b].hmask));
        __m512i acc = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * h)));
            q = _mm512_mask_srli_epi16(q, 0xFFFF0000u, q, 2);
            const int8_t *a = y[b].qs + 128 * h;
            /* third bits: steps s = 0,1 use hmask bits 4h, 4h+1; s = 2,3 bits 4h+2, 4h+3 */
            __m512i bit01 = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (4 * h))), _mm256_set1_epi8((char)(2 << (4 * h))), 1);
            __m512i bit23 = _mm512_slli_epi16(bit01, 2);
            __m512i z01 = _mm512_and_si512(q, m3), z23 = _mm512_and_si512(_mm512_srli_epi16(q, 4), m3);
            z01 = _mm512_mask_add_epi8(z01, _mm512_test_epi8_mask(hm, bit01), z01, four);
            z23 = _mm512_mask_add_epi8(z23, _mm512_test_epi8_mask(hm, bit23), z23, four);
            __m512i p01 = _mm512_maddubs_epi16(z01, _mm512_loadu_si512(a));
            __m512i p23 = _mm512_maddubs_epi16(z23, _mm512_loadu_si512(a + 64));
            acc = DPWSSD(acc, p01, _mm512_permutexvar_epi16(S(group4_idx)(2 * h), scz));
            acc = DPWSSD(acc, p23, _mm512_permutexvar_epi16(S(group4_idx)(2 * h + 1), scz));
        }
        int32_t bias = S(hsum256)(bm);
        sum += tokd_k_term1(_cvtsh_ss(x[b].d), y[b].d, S(hsum512)(acc) - 4 * bias);
    }
    *out = sum;
}

/* The 128 nibble bytes of a Q4_K/Q5_K block as four vectors z[p] = [low nibbles of
 * qs[32p..32p+31] | their high nibbles], i.e. elements 64p .. 64p+63 in order. */
TGT static inline void S(k4_nibbles)(const uint8_t *qs, __m512i z[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i q01 = _mm512_loadu_si512(qs), q23 = _mm512_loadu_si512(qs + 64);
    __m512i l01 = _mm512_and_si512(q01, m4), h01 = _mm512_and_si512(_mm512_srli_epi16(q01, 4), m4);
    __m512i l23 = _mm512_and_si512(q23, m4), h23 = _mm512_and_si512(_mm512_srli_epi16(q23, 4), m4);
    z[0] = _mm512_shuffle_i64x2(l01, h01, 0x44);
    z[1] = _mm512_shuffle_i64x2(l01, h01, 0xEE);
    z[2] = _mm512_shuffle_i64x2(l23, h23, 0x44);
    z[3] = _mm512_shuffle_i64x2(l23, h23, 0xEE);
}

/* One Q4_K super-block: the 16 partial sums of sumi and the 8 of summ (exact int32). */
TGT static inline void S(q4_K_parts)(const tokd_block_q4_K *x, const tokd_block_q8_K *y, __m256i *si, __m256i *sm) {
    __m128i scm = k4_scales_mins(x->scales);
    __m512i scz = _mm512_castsi128_si512(_mm_cvtepu8_epi16(scm));
    __m128i mn8 = _mm_srli_si128(scm, 8);
    *sm = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8)));
    __m512i z[4];
    S(k4_nibbles)(x->qs, z);
    const int8_t *a = y->qs;
    /* two independent accumulators shorten the dependency chain */
    __m512i a0 = DPWSSD(_mm512_setzero_si512(), _mm512_maddubs_epi16(z[0], _mm512_loadu_si512(a)),
                        _mm512_permutexvar_epi16(S(pair_idx)(0), scz));
    __m512i a1 = DPWSSD(_mm512_setzero_si512(), _mm512_maddubs_epi16(z[1], _mm512_loadu_si512(a + 64)),
                        _mm512_permutexvar_epi16(S(pair_idx)(1), scz));
    a0 = DPWSSD(a0, _mm512_maddubs_epi16(z[2], _mm512_loadu_si512(a + 128)), _mm512_permutexvar_epi16(S(pair_idx)(2), scz));
    a1 = DPWSSD(a1, _mm512_maddubs_epi16(z[3], _mm512_loadu_si512(a + 192)), _mm512_permutexvar_epi16(S(pair_idx)(3), scz));
    *si = S(fold512)(_mm512_add_epi32(a0, a1));
}

/* Four super-blocks per step: their integer sums reduced together and their float terms
 * computed four lanes at once (tokd_k_term2 lane by lane), then added to the running
 * sum one by one in block order, as the reference does. */
TGT void FN(q4_K)(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_q4_K *x = w;
    const tokd_block_q8_K *y = act;
    const int64_t nb = n / TOKD_QK_K;
    float sum = 0;
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        __m256i si[4], sm[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) S(q4_K_parts)(x + b + k, y + b + k, &si[k], &sm[k]);
        __m128 sumi = _mm_cvtepi32_ps(S(hsum4x256)(si[0], si[1], si[2], si[3]));
        __m128 summ = _mm_cvtepi32_ps(S(hsum4x256)(sm[0], sm[1], sm[2], sm[3]));
        __m128 dy = _mm_setr_ps(y[b].d, y[b + 1].d, y[b + 2].d, y[b + 3].d);
        __m128i h = _mm_setr_epi16((short)x[b].d, (short)x[b + 1].d, (short)x[b + 2].d, (short)x[b + 3].d, (short)x[b].dmin,
                                   (short)x[b + 1].dmin, (short)x[b + 2].dmin, (short)x[b + 3].dmin);
        __m256 f = _mm256_cvtph_ps(h);
        __m128 d = _mm_mul_ps(_mm256_castps256_ps128(f), dy), dm = _mm_mul_ps(_mm256_extractf128_ps(f, 1), dy);
        float t[4];
        _mm_storeu_ps(t, _mm_sub_ps(_mm_mul_ps(d, sumi), _mm_mul_ps(dm, summ)));
        sum += t[0];
        sum += t[1];
        sum += t[2];
        sum += t[3];
    }
    for (; b < nb; b++) {
        __m256i si, sm;
        S(q4_K_parts)(x + b, y + b, &si, &sm);
        int32_t sumi = S(hsum256)(si), summ = S(hsum256)(sm);
        sum += tokd_k_term2(_cvtsh_ss(x[b].d), _cvtsh_ss(x[b].dmin), y[b].d, sumi, summ);
    }
    *out = sum;
}

TGT void FN(q5_K)(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_q5_K *x = w;
    const tokd_block_q8_K *y = act;
    const __m512i sixteen = _mm512_set1_epi8(16);
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        __m128i scm = k4_scales_mins(x[b].scales);
        __m512i scz = _mm512_castsi128_si512(_mm_cvtepu8_epi16(scm));
        __m128i mn16 = _mm_cvtepu8_epi16(_mm_srli_si128(scm, 8));
        const __m128i *bs = (const __m128i *)y[b].bsums;
        __m128i pairs = _mm_hadd_epi16(_mm_loadu_si128(bs), _mm_loadu_si128(bs + 1));
        __m128i mm = _mm_madd_epi16(pairs, mn16);
        __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)x[b].qh));
        /* pair p: low half takes qh bit 2p, high half bit 2p+1 */
        __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8(1), _mm256_set1_epi8(2), 1);
        __m512i z[4];
        S(k4_nibbles)(x[b].qs, z);
        __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
        for (int p = 0; p < 4; p++) {
            __m512i q = _mm512_mask_add_epi8(z[p], _mm512_test_epi8_mask(hb, bit), z[p], sixteen);
            bit = _mm512_slli_epi16(bit, 2);
            __m512i p16 = _mm512_maddubs_epi16(q, _mm512_loadu_si512(y[b].qs + 64 * p));
            acc[p & 1] = DPWSSD(acc[p & 1], p16, _mm512_permutexvar_epi16(S(pair_idx)(p), scz));
        }
        int32_t summ = S(hsum128)(mm);
        sum += tokd_k_term2(_cvtsh_ss(x[b].d), _cvtsh_ss(x[b].dmin), y[b].d, S(hsum512)(_mm512_add_epi32(acc[0], acc[1])),
                            summ);
    }
    *out = sum;
}

TGT void FN(q6_K)(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_q6_K *x = w;
    const tokd_block_q8_K *y = act;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[b].scales));
        __m256i bm = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y[b].bsums));
        __m512i scz = _mm512_castsi256_si512(sc16);
        __m512i acc = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            __m512i ql = _mm512_loadu_si512(x[b].ql + 64 * h);
            __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x[b].qh + 32 * h)));
            qh = _mm512_mask_srli_epi16(qh, 0xFFFF0000u, qh, 2); /* [qh | qh >> 2] */
            const int8_t *a = y[b].qs + 128 * h;
            __m512i z01 = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_slli_epi16(qh, 4), m30));
            __m512i z23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), _mm512_and_si512(qh, m30));
            __m512i p01 = _mm512_maddubs_epi16(z01, _mm512_loadu_si512(a));
            __m512i p23 = _mm512_maddubs_epi16(z23, _mm512_loadu_si512(a + 64));
            acc = DPWSSD(acc, p01, _mm512_permutexvar_epi16(S(group4_idx)(2 * h), scz));
            acc = DPWSSD(acc, p23, _mm512_permutexvar_epi16(S(group4_idx)(2 * h + 1), scz));
        }
        int32_t bias = S(hsum256)(bm);
        sum += tokd_k_term1(_cvtsh_ss(x[b].d), y[b].d, S(hsum512)(acc) - 32 * bias);
    }
    *out = sum;
}


/* ---- four activation rows at once (prefill): the weight side is unpacked once; each
 * output is computed exactly as by the single-row function above (bit-equal). ---- */
/* IQ4_XS: two blocks of 32 a vector (nibbles2 order is element order), each lane's sum
 * times its block's scale, exact in int32. */
TGT void FN(iq4_xs)(int64_t n, float *out, const void *w, const void *act) {
    const tokd_block_iq4_xs *x = w;
    const tokd_block_q8_K *y = act;
    const __m512i zero = _mm512_setzero_si512();
    float sum = 0;
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        __m512i acc = zero;
#pragma GCC unroll 4
        for (int j = 0; j < 8; j += 2) {
            const __m512i q = S(iq4_values2)(x[b].qs + 16 * j, x[b].qs + 16 * j + 16);
            const __m512i a = _mm512_loadu_si512((const void *)(y[b].qs + 32 * j));
            const __m512i sa = _mm512_mask_sub_epi8(a, _mm512_movepi8_mask(q), zero, a);
            const __m512i sc = _mm512_mask_set1_epi32(_mm512_set1_epi32(tokd_iq4_xs_scale(&x[b], j)), 0xFF00,
                                                      tokd_iq4_xs_scale(&x[b], j + 1));
            acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(DPBUSD(zero, _mm512_abs_epi8(q), sa), sc));
        }
        sum += tokd_k_term1(_cvtsh_ss(x[b].d), y[b].d, S(hsum512)(acc));
    }
    *out = sum;
}

#define FN4(T) CAT(CAT(tokd_, T), CAT(_dot4_, SFX))

TGT void FN4(q4_0)(int64_t n, float out[4], const void *w, const void *act, size_t stride) {
    const tokd_block_q4_0 *x = w;
    const uint8_t *a0 = act;
    const int64_t nb = n / TOKD_QK;
    static const uint16_t ixd[32] = HB_IDX8(sizeof(tokd_block_q4_0), 0), iyd[32] = HB_IDX8(sizeof(tokd_block_q8_0), 0);
    const __m512i eight = _mm512_set1_epi8(8), zero = _mm512_setzero_si512();
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const tokd_block_q4_0 *xb = x + b;
        __m512i q[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) q[j] = S(nibbles2)(xb[j].qs, xb[j + 4].qs);
        __m256 dx = S(halves8_blocks)(xb, sizeof *xb, ixd, HB_MASK(sizeof(tokd_block_q4_0), 0));
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const tokd_block_q8_0 *yb = (const tokd_block_q8_0 *)(a0 + (size_t)r * stride) + b;
            __m512i p[4];
    #pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
                __m512i a = S(load2x256)(yb[j].qs, yb[j + 4].qs);
                p[j] = _mm512_sub_epi32(DPBUSD(zero, q[j], a), DPBUSD(zero, eight, a));
            }
            __m256i P = S(hsum_4x16)(p[0], p[1], p[2], p[3]);
            __m256 dd = _mm256_mul_ps(dx, S(halves8_blocks)(yb, sizeof *yb, iyd, HB_MASK(sizeof(tokd_block_q8_0), 0)));
            acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(dd, _mm256_cvtepi32_ps(P)));
        }
    }
    for (int r = 0; r < 4; r++) {
        const tokd_block_q8_0 *y = (const tokd_block_q8_0 *)(a0 + (size_t)r * stride);
        float s[8];
        _mm256_storeu_ps(s, acc[r]);
        for (int64_t t = b; t < nb; t++) s[t & 7] += tokd_q4_0_term(x + t, y + t);
        out[r] = tokd_reduce8(s);
    }
}

/* Formats whose weights are signed bytes (Q8_0, IQ4_NL after the table lookup): |q| as u8
 * times the activations with q's sign; VALS2(xb, j) gives blocks j and j+4. */
#define Q8_0_VALS2(xb, j) S(load2x256)((xb)[j].qs, (xb)[(j) + 4].qs)
#define IQ4_NL_VALS2(xb, j) S(iq4_values2)((xb)[j].qs, (xb)[(j) + 4].qs)
#define DOT4_SIGNED(T, XT, VALS2)                                                                          \
    TGT void FN4(T)(int64_t n, float out[4], const void *w, const void *act, size_t stride) {              \
        const XT *x = w;                                                                                   \
        const uint8_t *a0 = act;                                                                           \
        const int64_t nb = n / TOKD_QK;                                                                    \
        static const uint16_t ixd[32] = HB_IDX8(sizeof(XT), 0), iyd[32] = HB_IDX8(sizeof(tokd_block_q8_0), 0); \
        const __m512i zero = _mm512_setzero_si512();                                                       \
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()}; \
        int64_t b = 0;                                                                                     \
        for (; b + 8 <= nb; b += 8) {                                                                      \
            const XT *xb = x + b;                                                                          \
            __m512i aq[4];                                                                                 \
            __mmask64 neg[4];                                                                              \
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {                                          \
                __m512i q = VALS2(xb, j);                                                                  \
                aq[j] = _mm512_abs_epi8(q);                                                                \
                neg[j] = _mm512_movepi8_mask(q);                                                           \
            }                                                                                              \
            __m256 dx = S(halves8_blocks)(xb, sizeof *xb, ixd, HB_MASK(sizeof(XT), 0));                    \
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                                          \
                const tokd_block_q8_0 *yb = (const tokd_block_q8_0 *)(a0 + (size_t)r * stride) + b;        \
                __m512i p[4];                                                                              \
                _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {                                      \
                    __m512i a = S(load2x256)(yb[j].qs, yb[j + 4].qs);                                      \
                    p[j] = DPBUSD(zero, aq[j], _mm512_mask_sub_epi8(a, neg[j], zero, a));                  \
                }                                                                                          \
                __m256i P = S(hsum_4x16)(p[0], p[1], p[2], p[3]);                                          \
                __m256 dd = _mm256_mul_ps(dx, S(halves8_blocks)(yb, sizeof *yb, iyd, HB_MASK(sizeof(tokd_block_q8_0), 0))); \
                acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(dd, _mm256_cvtepi32_ps(P)));                  \
            }                                                                                              \
        }                                                                                                  \
        for (int r = 0; r < 4; r++) {                                                                      \
            const tokd_block_q8_0 *y = (const tokd_block_q8_0 *)(a0 + (size_t)r * stride);                 \
            float s[8];                                                                                    \
            _mm256_storeu_ps(s, acc[r]);                                                                   \
            for (int64_t t = b; t < nb; t++) s[t & 7] += tokd_##T##_term(x + t, y + t);                    \
            out[r] = tokd_reduce8(s);                                                                      \
        }                                                                                                  \
    }
DOT4_SIGNED(q8_0, tokd_block_q8_0, Q8_0_VALS2)
DOT4_SIGNED(iq4_nl, tokd_block_iq4_nl, IQ4_NL_VALS2)
#undef DOT4_SIGNED
#undef Q8_0_VALS2
#undef IQ4_NL_VALS2

/* IQ4_XS, four activation rows: each pair of blocks looked up once. */
TGT void FN4(iq4_xs)(int64_t n, float out[4], const void *w, const void *act, size_t stride) {
    const tokd_block_iq4_xs *x = w;
    const __m512i zero = _mm512_setzero_si512();
    float sum[4] = {0, 0, 0, 0};
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        __m512i acc[4] = {zero, zero, zero, zero};
#pragma GCC unroll 4
        for (int j = 0; j < 8; j += 2) {
            const __m512i q = S(iq4_values2)(x[b].qs + 16 * j, x[b].qs + 16 * j + 16), aq = _mm512_abs_epi8(q);
            const __mmask64 neg = _mm512_movepi8_mask(q);
            const __m512i sc = _mm512_mask_set1_epi32(_mm512_set1_epi32(tokd_iq4_xs_scale(&x[b], j)), 0xFF00,
                                                      tokd_iq4_xs_scale(&x[b], j + 1));
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                const tokd_block_q8_K *y = (const tokd_block_q8_K *)((const uint8_t *)act + (size_t)r * stride) + b;
                const __m512i a = _mm512_loadu_si512((const void *)(y->qs + 32 * j));
                const __m512i p = DPBUSD(zero, aq, _mm512_mask_sub_epi8(a, neg, zero, a));
                acc[r] = _mm512_add_epi32(acc[r], _mm512_mullo_epi32(p, sc));
            }
        }
        const float dx = _cvtsh_ss(x[b].d);
        for (int r = 0; r < 4; r++) {
            const tokd_block_q8_K *y = (const tokd_block_q8_K *)((const uint8_t *)act + (size_t)r * stride) + b;
            sum[r] += tokd_k_term1(dx, y->d, S(hsum512)(acc[r]));
        }
    }
    for (int r = 0; r < 4; r++) out[r] = sum[r];
}

/* The four rows' float terms, as tokd_k_term2 / tokd_k_term1 lane by lane. */
TGT static inline __m128 S(dy4)(const uint8_t *a0, size_t stride, int64_t b) {
    const tokd_block_q8_K *y0 = (const tokd_block_q8_K *)a0 + b, *y1 = (const tokd_block_q8_K *)(a0 + stride) + b;
    const tokd_block_q8_K *y2 = (const tokd_block_q8_K *)(a0 + 2 * stride) + b, *y3 = (const tokd_block_q8_K *)(a0 + 3 * stride) + b;
    return _mm_setr_ps(y0->d, y1->d, y2->d, y3->d);
}

TGT void FN4(q4_K)(int64_t n, float out[4], const void *w, const void *act, size_t stride) {
    const tokd_block_q4_K *x = w;
    const uint8_t *a0 = act;
    __m128 sum = _mm_setzero_ps();
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        __m128i scm = k4_scales_mins(x[b].scales);
        __m512i scz = _mm512_castsi128_si512(_mm_cvtepu8_epi16(scm));
        /* mins as int16, each twice: [m0 m0 m1 m1 .. m7 m7], against the 16 bsums */
        __m128i mn8 = _mm_srli_si128(scm, 8);
        __m256i mn16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8));
        __m512i z[4], sv[4];
        S(k4_nibbles)(x[b].qs, z);
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) sv[p] = _mm512_permutexvar_epi16(S(pair_idx)(p), scz);
        __m256i si[4], sm[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const tokd_block_q8_K *y = (const tokd_block_q8_K *)(a0 + (size_t)r * stride) + b;
            sm[r] = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), mn16);
            const int8_t *a = y->qs;
            __m512i acc0 = DPWSSD(_mm512_setzero_si512(), _mm512_maddubs_epi16(z[0], _mm512_loadu_si512(a)), sv[0]);
            __m512i acc1 = DPWSSD(_mm512_setzero_si512(), _mm512_maddubs_epi16(z[1], _mm512_loadu_si512(a + 64)), sv[1]);
            acc0 = DPWSSD(acc0, _mm512_maddubs_epi16(z[2], _mm512_loadu_si512(a + 128)), sv[2]);
            acc1 = DPWSSD(acc1, _mm512_maddubs_epi16(z[3], _mm512_loadu_si512(a + 192)), sv[3]);
            si[r] = S(fold512)(_mm512_add_epi32(acc0, acc1));
        }
        __m128 sumi = _mm_cvtepi32_ps(S(hsum4x256)(si[0], si[1], si[2], si[3]));
        __m128 summ = _mm_cvtepi32_ps(S(hsum4x256)(sm[0], sm[1], sm[2], sm[3]));
        __m128 dy = S(dy4)(a0, stride, b);
        __m128 d = _mm_mul_ps(_mm_set1_ps(_cvtsh_ss(x[b].d)), dy), dm = _mm_mul_ps(_mm_set1_ps(_cvtsh_ss(x[b].dmin)), dy);
        sum = _mm_add_ps(sum, _mm_sub_ps(_mm_mul_ps(d, sumi), _mm_mul_ps(dm, summ)));
    }
    _mm_storeu_ps(out, sum);
}

TGT void FN4(q6_K)(int64_t n, float out[4], const void *w, const void *act, size_t stride) {
    const tokd_block_q6_K *x = w;
    const uint8_t *a0 = act;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    __m128 sum = _mm_setzero_ps();
    for (int64_t b = 0; b < n / TOKD_QK_K; b++) {
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[b].scales));
        __m512i scz = _mm512_castsi256_si512(sc16);
        __m512i z[4], sv[4];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m512i ql = _mm512_loadu_si512(x[b].ql + 64 * h);
            __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x[b].qh + 32 * h)));
            qh = _mm512_mask_srli_epi16(qh, 0xFFFF0000u, qh, 2);
            z[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_slli_epi16(qh, 4), m30));
            z[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), _mm512_and_si512(qh, m30));
            sv[2 * h] = _mm512_permutexvar_epi16(S(group4_idx)(2 * h), scz);
            sv[2 * h + 1] = _mm512_permutexvar_epi16(S(group4_idx)(2 * h + 1), scz);
        }
        __m256i si[4], bm[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const tokd_block_q8_K *y = (const tokd_block_q8_K *)(a0 + (size_t)r * stride) + b;
            bm[r] = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y->bsums));
            __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
                acc = DPWSSD(acc, _mm512_maddubs_epi16(z[k], _mm512_loadu_si512(y->qs + 64 * k)), sv[k]);
            si[r] = S(fold512)(acc);
        }
        __m128i P = _mm_sub_epi32(S(hsum4x256)(si[0], si[1], si[2], si[3]),
                                  _mm_slli_epi32(S(hsum4x256)(bm[0], bm[1], bm[2], bm[3]), 5));
        __m128 d = _mm_mul_ps(_mm_set1_ps(_cvtsh_ss(x[b].d)), S(dy4)(a0, stride, b));
        sum = _mm_add_ps(sum, _mm_mul_ps(d, _mm_cvtepi32_ps(P)));
    }
    _mm_storeu_ps(out, sum);
}
#undef FN4

#undef DOT32_512
#undef DOT32_512_MIN_0
#undef DOT32_512_MIN_1
#undef FN
#undef S
