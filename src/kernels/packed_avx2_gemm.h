/* packed_avx2_gemm.h — the body of packed_avx2.c's kernels, included there once per
 * form with PK_NAME (suffixes each function), PK_TARGET (its target attribute) and
 * PK_VNNI (1: vpdpbusd on 256-bit vectors, AVX-VNNI; 0: vpmaddubsw + vpmaddwd). Not a
 * header for anything else. */

/* vpdpbusd's step: s + (sum of four u8 x s8 products per int32 lane). */
PK_TARGET INLINE __m256i PK_NAME(dp4)(__m256i s, __m256i u, __m256i a) {
#if PK_VNNI
    return _mm256_dpbusd_avx_epi32(s, u, a);
#else
    return _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1)));
#endif
}

/* The int16 form of vpmaddubsw's products, for sums that vpmaddwd turns into int32 lanes
 * once per several steps instead of once a step: u8 x s8 pairs summed into int16 lanes
 * (padd: s + the pair sums). Each caller bounds its own sums below 2^15: the activations
 * are -127..127 (act_quant.c), so a pair of products of weights 0..15 is at most 3810 in
 * magnitude and eight such sums 30480; weights 0..31 allow four, 0..63 two. On the CPUs
 * this form is for, both multiplies issue to the same pipes (on the AVX2-only Zen 3,
 * twelve independent vpmaddubsw, or vpmaddwd, or the two mixed, run 1.6-2 a cycle a
 * core), so halving the vpmaddwd halves a kernel's multiplies: the AVX-VNNI form keeps
 * dp4's one instruction. */
PK_TARGET INLINE __m256i PK_NAME(padd)(__m256i s, __m256i u, __m256i a) {
    return _mm256_add_epi16(s, _mm256_maddubs_epi16(u, a));
}
/* int16 pair sums as int32 lanes (each the sum of its two halves), times 1. */
PK_TARGET INLINE __m256i PK_NAME(pairs32)(__m256i p) { return _mm256_madd_epi16(p, _mm256_set1_epi16(1)); }

/* The two sums that the fully unrolled decode loops build step by step are pinned in
 * registers after each step (PK_PIN: an empty asm that takes them and gives them back),
 * and loads are kept within their step by a compiler barrier (PK_LOADS_HERE). Without
 * them GCC 12 reassociated the integer chains into trees, hoisted a whole half's
 * broadcasts and products ahead of the sums, and spilled them: the Q4_K decode kept a
 * 2.6 KB stack frame and Q2_K's sums lived in memory. Neither changes an integer (the
 * sums are exact). */
#define PK_PIN(a, b) __asm__("" : "+x"(a), "+x"(b))
#define PK_LOADS_HERE() __asm__ volatile("" ::: "memory")

/* Batched decode's prefetches (PK_PF_STREAM, PK_GEMM): the lines of a block's share of
 * the group's bytes (blk, n bytes), TOKD_PK_STREAM_PF ahead, at the step that reaches it
 * (stream_prefetch), or part i of n of a super-block's lines before each of its sub-block
 * steps (tokd_pk_prefetch_part, packed.h), through tokd_pk_prefetch_here so that the
 * unrolled loops keep them where they are. */
PK_TARGET INLINE void PK_NAME(stream_prefetch)(const uint8_t *blk, size_t n) {
    for (size_t l = 0; l < n; l += 64) tokd_pk_prefetch_here(blk + TOKD_PK_STREAM_PF + l);
}

/* v's bits moved n places up (n > 0) or down (n < 0) within each 16-bit lane, for the
 * kernels that gather one bit or bit pair of every byte at a fixed position and mask the
 * rest off (with the bits that crossed into the other byte of a word); n must be a
 * constant (immediate shifts). packed_avx512.c's shift16. */
PK_TARGET INLINE __m256i PK_NAME(shift16)(__m256i v, int n) {
    return n > 0 ? _mm256_slli_epi16(v, n) : n < 0 ? _mm256_srli_epi16(v, -n) : v;
}

/* Q5_K's and Q5_0's fifth bits: bit j (0..7) of each byte of hv moved to bit 4 and or-ed
 * into nibbles u (0..15); j must be a constant. */
PK_TARGET INLINE __m256i PK_NAME(q5k_merge)(__m256i u, __m256i hv, int j) {
    const __m256i at4 = PK_NAME(shift16)(hv, 4 - j);
    return _mm256_or_si256(u, _mm256_and_si256(at4, _mm256_set1_epi8(0x10)));
}

/* The K-quants with mins (Q2_K, Q4_K): per activation row of a super-block's tile (the
 * prepared row's float d at +256, its int16 pair sums at +260), the mins term of the
 * n_pairs (min 2i, min 2i+1) pairs mp through vpmaddwd (vpdpwssd's integer), and the
 * file layout's float step acc += (dx*dy) * sumi - (dmx*dy) * summ. packed_avx512.c's
 * mins_fold on one 8-row half. */
PK_TARGET INLINE void PK_NAME(mins_fold)(int R, int n_pairs, const __m256i *mp, const __m256i *isum, __m256 dx,
                                         __m256 dmx, const uint8_t *a0, size_t as, __m256 *acc) {
    for (int r = 0; r < R; r++) {
        const uint8_t *a = a0 + (size_t)r * as;
        __m256i summ = _mm256_setzero_si256();
        for (int i = 0; i < n_pairs; i++)
            summ = _mm256_add_epi32(summ, _mm256_madd_epi16(mp[i], _mm256_set1_epi32(tokd_ld_i32(a + 260 + 4 * i))));
        const __m256 dy = _mm256_set1_ps(tokd_ld_f32(a + 256));
        const __m256 d = _mm256_mul_ps(dx, dy), dm = _mm256_mul_ps(dmx, dy);
        const __m256 term = _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[r])),
                                          _mm256_mul_ps(dm, _mm256_cvtepi32_ps(summ)));
        acc[r] = _mm256_add_ps(acc[r], term);
    }
}

/* R activation rows (as bytes apart) against one group of nb blocks of Q4_0 (q5 = 0)
 * or Q5_0 (q5 = 1: the nibbles take bit 2c / 2c+1 of the block's fifth-bit vector):
 * outputs y[r * ldy + 0..15]. */
PK_TARGET INLINE void PK_NAME(q4_5_0_tile)(int q5, int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R,
                                           int pf, float *y, int64_t ldy) {
    __m256 acc[MAX_R][2];
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    const size_t dy_off = (size_t)nb * 32, corr_off = (size_t)nb * 36;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const size_t block_bytes = q5 ? Q5_0_BLOCK_BYTES : BLOCK_BYTES;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *lin = w + (size_t)b * block_bytes; /* the block's share of the group's bytes */
        const uint8_t *sc = w + tokd_pk_scales_at(b, block_bytes), *qv = w + tokd_pk_vectors_at(b, nb, block_bytes);
        if (R > 1) {
            if (pf != PK_PF_NONE)
                for (size_t l = 0; l < block_bytes; l += 64)
                    _mm_prefetch((const char *)lin + TOKD_PK_PF_DIST + l, _MM_HINT_T0);
        } else { /* decode: pages primed, and every line TOKD_PK_AVX2_DECODE_LINE_PF ahead (packed.h) */
            tokd_page_prime(lin, block_bytes);
            for (size_t l = 0; l < block_bytes; l += 64)
                _mm_prefetch((const char *)lin + TOKD_PK_AVX2_DECODE_LINE_PF + l, _MM_HINT_T0);
        }
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i lo[4], hi[4];
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(qv + 64 * c + 32 * h));
                lo[c] = _mm256_and_si256(v, m4);
                hi[c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                if (q5) {
                    const __m256i hv = _mm256_loadu_si256((const __m256i *)(qv + 256 + 32 * h));
                    lo[c] = PK_NAME(q5k_merge)(lo[c], hv, 2 * c);
                    hi[c] = PK_NAME(q5k_merge)(hi[c], hv, 2 * c + 1);
                }
            }
            const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sc + 16 * h)));
            for (int r = 0; r < R; r++) {
                const uint8_t *a = act + (size_t)r * as, *q = a + b * 32;
                __m256i s = _mm256_set1_epi32(tokd_ld_i32(a + corr_off + 4 * b)), t = _mm256_setzero_si256();
                if (!PK_VNNI) { /* int16 sums (padd): nibbles' eight steps fit, 5-bit values' four */
                    __m256i p = _mm256_setzero_si256(), p2 = p;
#pragma GCC unroll 4
                    for (int g = 0; g < 4; g++) {
                        p = PK_NAME(padd)(p, lo[g], _mm256_set1_epi32(tokd_ld_i32(q + 4 * g)));
                        p2 = PK_NAME(padd)(p2, hi[g], _mm256_set1_epi32(tokd_ld_i32(q + 4 * g + 16)));
                    }
                    t = q5 ? _mm256_add_epi32(PK_NAME(pairs32)(p), PK_NAME(pairs32)(p2)) : PK_NAME(pairs32)(_mm256_add_epi16(p, p2));
                } else {
#pragma GCC unroll 4
                    for (int g = 0; g < 4; g++) {
                        s = PK_NAME(dp4)(s, lo[g], _mm256_set1_epi32(tokd_ld_i32(q + 4 * g)));
                        t = PK_NAME(dp4)(t, hi[g], _mm256_set1_epi32(tokd_ld_i32(q + 4 * g + 16)));
                    }
                }
                const __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(tokd_ld_f32(a + dy_off + 4 * b)));
                acc[r][h] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_add_epi32(s, t)), acc[r][h]);
            }
        }
    }
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(y + r * ldy, acc[r][0]);
        _mm256_storeu_ps(y + r * ldy + 8, acc[r][1]);
    }
}
/* The rows tiles' float sums (q4_0_rows_tile, q8_0_rows_tile, q4k_rows_tile): acc[h][r]
 * for rows 8h..8h+7 and activation row r, zeroed, and stored to y[r * ldy + 8h ..]. */
PK_TARGET INLINE void PK_NAME(rows_zero)(int R, __m256 acc[2][MAX_R]) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) acc[h][r] = _mm256_setzero_ps();
}
PK_TARGET INLINE void PK_NAME(rows_store)(int R, __m256 acc[2][MAX_R], float *y, int64_t ldy) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) _mm256_storeu_ps(y + r * ldy + 8 * h, acc[h][r]);
}

/* One k-group step of the 32-weight rows tiles: group g's four activation bytes of each
 * row (ab: the block's bytes of row 0, rows as apart; the low nibbles' groups 0-3 at 4g,
 * the high ones' at 16 + 4(g - 4)) broadcast into both halves' sums p[h][r] against the
 * halves' weight vectors u[h]: int32 sums with dp4 (int32_sums), else int16 with padd. */
PK_TARGET INLINE void PK_NAME(rows_step)(int R, int int32_sums, __m256i p[2][MAX_R], const __m256i u[2], const uint8_t *ab,
                                         size_t as, int g) {
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        const __m256i a = _mm256_set1_epi32(tokd_ld_i32(ab + (size_t)r * as + 4 * (g & 3) + 16 * (g >> 2)));
        if (int32_sums) {
            p[0][r] = PK_NAME(dp4)(p[0][r], u[0], a);
            p[1][r] = PK_NAME(dp4)(p[1][r], u[1], a);
        } else {
            p[0][r] = PK_NAME(padd)(p[0][r], u[0], a);
            p[1][r] = PK_NAME(padd)(p[1][r], u[1], a);
        }
        PK_PIN(p[0][r], p[1][r]);
    }
}

/* Q4_0 against several activation rows with vpmaddubsw: both halves of the 16 rows per
 * broadcast, as q4k_rows_tile. Per block, k-group g's two vectors (rows 0-7 and 8-15:
 * the low nibbles of vector g, or the high of vector g - 4) are unpacked and each
 * activation row's broadcast goes into both halves' int16 sums, all eight steps (padd):
 * 2R registers. Each sum then takes pairs32 and the block's correction, and the float
 * step out = fmaf(dx * dy, (float)isum, out), in block order: the integers and the
 * floats of q4_5_0_tile, the same bits. Prefill prefetches nothing (q4k_rows_tile); the
 * first tile of a batched decode prefetches each block's lines (PK_PF_STREAM). */
PK_TARGET INLINE void PK_NAME(q4_0_rows_tile)(int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R,
                                              int pf, float *y, int64_t ldy) {
    __m256 acc[2][MAX_R];
    PK_NAME(rows_zero)(R, acc);
    const size_t dy_off = (size_t)nb * 32, corr_off = (size_t)nb * 36;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *sc = w + tokd_pk_scales_at(b, BLOCK_BYTES), *qv = w + tokd_pk_vectors_at(b, nb, BLOCK_BYTES);
        const uint8_t *ab = act + (size_t)b * 32;
        if (pf == PK_PF_STREAM) PK_NAME(stream_prefetch)(w + (size_t)b * BLOCK_BYTES, BLOCK_BYTES);
        __m256i p[2][MAX_R];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) p[0][r] = p[1][r] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            if (g == 4) PK_LOADS_HERE(); /* the high nibbles load their vectors again, not from the stack */
            __m256i u[2];
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(qv + 64 * (g & 3) + 32 * h));
                u[h] = _mm256_and_si256(g < 4 ? v : _mm256_srli_epi16(v, 4), m4);
            }
            PK_NAME(rows_step)(R, 0, p, u, ab, as, g);
        }
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sc + 16 * h)));
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const uint8_t *a = act + (size_t)r * as;
                const __m256i s = _mm256_set1_epi32(tokd_ld_i32(a + corr_off + 4 * b));
                const __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(tokd_ld_f32(a + dy_off + 4 * b)));
                acc[h][r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_add_epi32(s, PK_NAME(pairs32)(p[h][r]))), acc[h][r]);
            }
        }
    }
    PK_NAME(rows_store)(R, acc, y, ldy);
}
PK_TARGET INLINE void PK_NAME(group_tile)(int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R, int pf,
                                          float *y, int64_t ldy) {
    if (!PK_VNNI && R > 1)
        PK_NAME(q4_0_rows_tile)(nb, w, act, as, R, pf, y, ldy);
    else
        PK_NAME(q4_5_0_tile)(0, nb, w, act, as, R, pf, y, ldy);
}
/* Q4_1 (q5 = 0) and Q5_1 (q5 = 1: each group's values take their fifth bit from the
 * block's fifth-bit vector, as Q5_0's) (packed.h): the unsigned sums with no correction,
 * both halves of the 16 rows per broadcast (q4_0_rows_tile's form, for one or several
 * activation rows), then per block and half out = fmaf(dx * dy, (float)isum, out) and
 * out = fmaf(mx, sy, out). The int16 sums hold eight steps of nibbles but four of 5-bit
 * values: Q5_1's first four go to int32 (s32) before the last four start. */
PK_TARGET INLINE void PK_NAME(q4_1_5_1_tile)(int q5, int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R,
                                             int pf, float *y, int64_t ldy) {
    __m256 acc[2][MAX_R];
    PK_NAME(rows_zero)(R, acc);
    const size_t dy_off = (size_t)nb * 32, sy_off = (size_t)nb * 36;
    const size_t block_bytes = q5 ? Q5_1_BLOCK_BYTES : Q4_1_BLOCK_BYTES;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = w + (size_t)b * block_bytes, *qv = blk + 64, *ab = act + (size_t)b * 32;
        if (R > 1) {
            if (pf != PK_PF_NONE)
                for (size_t l = 0; l < block_bytes; l += 64) _mm_prefetch((const char *)blk + TOKD_PK_PF_DIST + l, _MM_HINT_T0);
        } else { /* decode: as q4_5_0_tile */
            tokd_page_prime(blk, block_bytes);
            for (size_t l = 0; l < block_bytes; l += 64)
                _mm_prefetch((const char *)blk + TOKD_PK_AVX2_DECODE_LINE_PF + l, _MM_HINT_T0);
        }
        __m256i p[2][MAX_R], s32[2][MAX_R];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) p[0][r] = p[1][r] = s32[0][r] = s32[1][r] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            if (g == 4) PK_LOADS_HERE(); /* the high nibbles load their vectors again, not from the stack */
            if (g == 4 && q5 && !PK_VNNI)
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) {
                    s32[0][r] = PK_NAME(pairs32)(p[0][r]), s32[1][r] = PK_NAME(pairs32)(p[1][r]);
                    p[0][r] = p[1][r] = _mm256_setzero_si256();
                }
            __m256i u[2];
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(qv + 64 * (g & 3) + 32 * h));
                u[h] = _mm256_and_si256(g < 4 ? v : _mm256_srli_epi16(v, 4), m4);
                if (q5)
                    u[h] = PK_NAME(q5k_merge)(u[h], _mm256_loadu_si256((const __m256i *)(qv + 256 + 32 * h)),
                                              2 * (g & 3) + (g >> 2));
            }
            PK_NAME(rows_step)(R, PK_VNNI, p, u, ab, as, g);
        }
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * h)));
            const __m256 mx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 32 + 16 * h)));
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const uint8_t *a = act + (size_t)r * as;
                const __m256i isum = PK_VNNI ? p[h][r] : _mm256_add_epi32(s32[h][r], PK_NAME(pairs32)(p[h][r]));
                const __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(tokd_ld_f32(a + dy_off + 4 * b)));
                acc[h][r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc[h][r]);
                acc[h][r] = _mm256_fmadd_ps(mx, _mm256_set1_ps(tokd_ld_f32(a + sy_off + 4 * b)), acc[h][r]);
            }
        }
    }
    PK_NAME(rows_store)(R, acc, y, ldy);
}
PK_TARGET INLINE void PK_NAME(q4_1_tile)(int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R, int pf,
                                         float *y, int64_t ldy) {
    PK_NAME(q4_1_5_1_tile)(0, nb, w, act, as, R, pf, y, ldy);
}
PK_TARGET INLINE void PK_NAME(q5_1_tile)(int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R, int pf,
                                         float *y, int64_t ldy) {
    PK_NAME(q4_1_5_1_tile)(1, nb, w, act, as, R, pf, y, ldy);
}
PK_TARGET INLINE void PK_NAME(q5_0_tile)(int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R, int pf,
                                         float *y, int64_t ldy) {
    PK_NAME(q4_5_0_tile)(1, nb, w, act, as, R, pf, y, ldy);
}


/* ---- Q4_K and Q5_K (packed.h's layout; packed_avx512.c's arithmetic) ----
 * One half of the 16 rows (h: rows 8h..8h+7, bytes 32h..32h+31 of every 64-byte vector)
 * at a time, for all super-blocks, so that a row's sums need only three registers. Per
 * super-block and sub-blocks 2c, 2c+1: their 8 quant groups are the low and the high
 * nibbles of vectors 8c..8c+7 (each loaded once for both; Q5_K: with bit j of high-bit
 * vector t moved to bit 4 of group t of sub-block j); each row's two sums take 8 dp4
 * steps each, then sum * scale joins the integer sum (exact, so in any order); the mins
 * term is four vpmaddwd of (min 2i, min 2i+1) pairs with the activation's 32-element sums
 * (vpdpwssd's integer). Float steps: out + ((dx*dy) * sumi - (dmx*dy) * summ), as the
 * file layout's vec_dot. The pass that streams the group prefetches the super-blocks
 * ahead (k4_tile says which pass that is). */

/* Rows 8h..8h+7's six-bit scales and mins (p: this half's bytes of the three scale
 * vectors), as packed_avx512.c's k4_scales: lane bytes 0..3 of lo[0] the scales of
 * sub-blocks 0..3, of hi[0] those of 4..7, lo[1] and hi[1] the mins. */
PK_TARGET INLINE void PK_NAME(k4_scales)(const uint8_t *p, __m256i lo[2], __m256i hi[2]) {
    const __m256i s = _mm256_loadu_si256((const __m256i *)p), m = _mm256_loadu_si256((const __m256i *)(p + 64));
    const __m256i x = _mm256_loadu_si256((const __m256i *)(p + 128));
    const __m256i low6 = _mm256_set1_epi8(0x3F), top2 = _mm256_set1_epi8((char)0xC0), nib = _mm256_set1_epi8(0x0F);
    lo[0] = _mm256_and_si256(s, low6);
    lo[1] = _mm256_and_si256(m, low6);
    hi[0] = _mm256_or_si256(_mm256_and_si256(x, nib), _mm256_srli_epi32(_mm256_and_si256(s, top2), 2));
    hi[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(x, 4), nib), _mm256_srli_epi32(_mm256_and_si256(m, top2), 2));
}
/* Byte k of every 32-bit lane of v, zero-extended. */
PK_TARGET INLINE __m256i PK_NAME(k4_byte)(__m256i v, int k) {
    const __m256i at = _mm256_set_epi32(12, 8, 4, 0, 12, 8, 4, 0);
    return _mm256_shuffle_epi8(v, _mm256_add_epi32(at, _mm256_set1_epi32((int)(0x80808000u | (unsigned)k))));
}
/* Bytes k and k+1 of every 32-bit lane of v as two zero-extended int16 (min pairs). */
PK_TARGET INLINE __m256i PK_NAME(k4_pair16)(__m256i v, int k) {
    const __m256i at = _mm256_set_epi32(0x0C000C, 0x080008, 0x040004, 0, 0x0C000C, 0x080008, 0x040004, 0);
    return _mm256_shuffle_epi8(v, _mm256_add_epi32(at, _mm256_set1_epi32((int)(0x80008000u | ((unsigned)(k + 1) << 16) | (unsigned)k))));
}

/* Group t of sub-blocks 2c (lo: the low nibbles) and 2c+1 (hi: the high ones) of rows
 * 8h..8h+7 (q, qh: this half's bytes of the quant and high-bit vectors); Q5_K: with
 * their fifth bits merged. */
PK_TARGET INLINE void PK_NAME(k4_groups)(int q5, int c, int t, const uint8_t *q, const uint8_t *qh, __m256i *lo,
                                         __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i raw = _mm256_loadu_si256((const __m256i *)(q + 64 * (8 * c + t)));
    *lo = _mm256_and_si256(raw, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
    if (q5) {
        const __m256i hv = _mm256_loadu_si256((const __m256i *)(qh + 64 * t));
        *lo = PK_NAME(q5k_merge)(*lo, hv, 2 * c);
        *hi = PK_NAME(q5k_merge)(*hi, hv, 2 * c + 1);
    }
}

/* Sub-blocks 2c and 2c+1 of super-block b for rows 8h..8h+7 (q, qh: this half's bytes of
 * the quant and high-bit vectors; sc0, sc1: the two sub-blocks' scales a row lane), into
 * isum[0..R). */
PK_TARGET INLINE void PK_NAME(k4_pair)(int q5, int c, const uint8_t *q, const uint8_t *qh, __m256i sc0, __m256i sc1,
                                       const uint8_t *act, size_t as, int R, __m256i *isum) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i s0[MAX_R], s1[MAX_R];
    for (int r = 0; r < R; r++) s0[r] = s1[r] = _mm256_setzero_si256();
    if (!PK_VNNI && R > 1) {
        /* several rows: a sub-block's eight groups unpacked once, then each row's sum in one
           int16 register (four rows fit the 16 ymm registers without spilling). Against
           both sub-blocks' sums per step for all rows (two accumulators a row): one thread
           on a cached prefill tile, 1.63x for Q4_K, 1.59x for Q5_K (BENCHMARKS.md,
           twenty-first session). */
#pragma GCC unroll 2
        for (int sub = 0; sub < 2; sub++) {
            const __m256i sc = sub ? sc1 : sc0, scw = _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16));
            __m256i u[8];
#pragma GCC unroll 8
            for (int t = 0; t < 8; t++) {
                const __m256i raw = _mm256_loadu_si256((const __m256i *)(q + 64 * (8 * c + t)));
                u[t] = _mm256_and_si256(sub ? _mm256_srli_epi16(raw, 4) : raw, m4);
                if (q5) u[t] = PK_NAME(q5k_merge)(u[t], _mm256_loadu_si256((const __m256i *)(qh + 64 * t)), 2 * c + sub);
            }
            for (int r = 0; r < R; r++) {
                const uint8_t *a = act + (size_t)r * as + 64 * c + 32 * sub;
                __m256i p = _mm256_setzero_si256(), s = p;
#pragma GCC unroll 8
                for (int t = 0; t < 8; t++) {
                    p = PK_NAME(padd)(p, u[t], _mm256_set1_epi32(tokd_ld_i32(a + 4 * t)));
                    if (q5 && t == 3) { /* 5-bit values: four steps' sums at a time */
                        s = _mm256_madd_epi16(p, scw);
                        p = _mm256_setzero_si256();
                    }
                }
                isum[r] = _mm256_add_epi32(isum[r], _mm256_add_epi32(s, _mm256_madd_epi16(p, scw)));
            }
        }
        return;
    }
    if (!PK_VNNI) { /* int16 sums (padd): eight steps of nibbles, four of 5-bit values at a time */
        __m256i p0[MAX_R], p1[MAX_R];
        const __m256i sc0w = _mm256_or_si256(sc0, _mm256_slli_epi32(sc0, 16)), sc1w = _mm256_or_si256(sc1, _mm256_slli_epi32(sc1, 16));
        for (int r = 0; r < R; r++) p0[r] = p1[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int t = 0; t < 8; t++) {
            __m256i lo, hi;
            PK_NAME(k4_groups)(q5, c, t, q, qh, &lo, &hi);
            for (int r = 0; r < R; r++) {
                const uint8_t *a = act + (size_t)r * as + 64 * c + 4 * t;
                p0[r] = PK_NAME(padd)(p0[r], lo, _mm256_set1_epi32(tokd_ld_i32(a)));
                p1[r] = PK_NAME(padd)(p1[r], hi, _mm256_set1_epi32(tokd_ld_i32(a + 32)));
                PK_PIN(p0[r], p1[r]);
                if (q5 && t == 3) { /* scale (in both int16 halves) times each pair sum, summed */
                    s0[r] = _mm256_madd_epi16(p0[r], sc0w);
                    s1[r] = _mm256_madd_epi16(p1[r], sc1w);
                    p0[r] = p1[r] = _mm256_setzero_si256();
                }
            }
        }
        for (int r = 0; r < R; r++) { /* the integers of the dp4 form below: exact, in any order */
            isum[r] = _mm256_add_epi32(isum[r], _mm256_add_epi32(s0[r], _mm256_madd_epi16(p0[r], sc0w)));
            isum[r] = _mm256_add_epi32(isum[r], _mm256_add_epi32(s1[r], _mm256_madd_epi16(p1[r], sc1w)));
        }
        return;
    }
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++) {
        __m256i lo, hi;
        PK_NAME(k4_groups)(q5, c, t, q, qh, &lo, &hi);
        for (int r = 0; r < R; r++) {
            const uint8_t *a = act + (size_t)r * as + 64 * c + 4 * t;
            s0[r] = PK_NAME(dp4)(s0[r], lo, _mm256_set1_epi32(tokd_ld_i32(a)));
            s1[r] = PK_NAME(dp4)(s1[r], hi, _mm256_set1_epi32(tokd_ld_i32(a + 32)));
        }
    }
    for (int r = 0; r < R; r++) { /* sub-block 2c's term, then 2c+1's, as the j order */
        isum[r] = _mm256_add_epi32(isum[r], _mm256_mullo_epi32(s0[r], sc0));
        isum[r] = _mm256_add_epi32(isum[r], _mm256_mullo_epi32(s1[r], sc1));
    }
}

/* Rows 8h..8h+7 of super-block wb (activation bytes ab) into acc[0..R): the super-block's
 * integer sums, then its float step. pf (the pass that streams the group): prefetch the
 * super-block's lines TOKD_PK_PF_DIST ahead, all at once for several activation rows.
 * Decode primes no page: with every line prefetched, priming the page beyond them cost
 * the AVX2-only Zen 3 streaming 200 MB a thread, A/B in one process (medians of 9-15):
 * without it Q4_K 1.18x, Q5_K 1.10x, Q6_K 1.14x and 1.13x (BENCHMARKS.md,
 * twenty-first session; the AVX-512 path found the same on Zen 4 in the fifty-seventh,
 * packed.h; Q4_0 and Q8_0 read the same either way, 0.98 and 1.01, and keep it). Decode's
 * lines go by eighths instead, one before each sub-block pair of each half (h = 0 then
 * 1), so that the second half, which finds its bytes in cache, still issues the stream's
 * prefetches: the AVX-512 path's quarters of the time went in the first half only, and
 * the requests came in bursts. On the
 * AVX2-only Zen 3, A/B in one process, 200 MB a thread (medians of 9-15 alternations):
 * eighths against quarters 1.03, 1.05, 0.93 (BENCHMARKS.md, twenty-first session). */
PK_TARGET INLINE void PK_NAME(k4_half)(int q5, int h, int pf, const uint8_t *wb, const uint8_t *ab, size_t as, int R,
                                       __m256 *acc) {
    const size_t sb_bytes = q5 ? Q5K_SB : Q4K_SB;
    if (pf && R > 1) tokd_pk_kq_prefetch(wb, sb_bytes, TOKD_PK_PF_DIST); /* decode: no page priming, below */
    const uint8_t *q = wb + 256 + 32 * h, *qh = wb + Q4K_SB + 32 * h;
    __m256i lo[2], hi[2]; /* scales and mins */
    PK_NAME(k4_scales)(wb + 64 + 32 * h, lo, hi);
    __m256i isum[MAX_R];
    for (int r = 0; r < R; r++) isum[r] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) { /* unrolled: Q5_K's merge shifts are immediates */
        if (R == 1) {
            tokd_pk_prefetch_part(wb, sb_bytes, TOKD_PK_PF_DIST, 4 * h + c, 8, TOKD_PK_T0);
            PK_LOADS_HERE(); /* each sub-block pair's broadcasts in its own step */
        }
        const __m256i *sv = c < 2 ? &lo[0] : &hi[0];
        PK_NAME(k4_pair)(q5, c, q, qh, PK_NAME(k4_byte)(*sv, (2 * c) & 3), PK_NAME(k4_byte)(*sv, (2 * c + 1) & 3), ab, as,
                         R, isum);
    }
    const __m256i mp[4] = {PK_NAME(k4_pair16)(lo[1], 0), PK_NAME(k4_pair16)(lo[1], 2), PK_NAME(k4_pair16)(hi[1], 0),
                           PK_NAME(k4_pair16)(hi[1], 2)};
    const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wb + 16 * h)));
    const __m256 dmx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wb + 32 + 16 * h)));
    PK_NAME(mins_fold)(R, 4, mp, isum, dx, dmx, ab, as, acc);
}

/* Q4_K against several activation rows with vpmaddubsw (the int16 form): both halves of
 * the 16 rows per broadcast. A broadcast of four activation bytes costs about what the
 * multiply it feeds does, and k4_half's pass over one half spends one on each multiply;
 * here each feeds two, rows 0-7's and rows 8-15's vectors of the same weights. Per
 * sub-block, group t's two vectors are unpacked and every activation row's broadcast
 * goes into both halves' int16 sums (all eight steps of nibbles fit: padd): 2R
 * registers, eight for four rows, beside the two vectors, the broadcast and the mask.
 * The integers are k4_pair's (exact, in any order), and each half's float step is
 * mins_fold's as in k4_half, once per super-block in super-block order: the same bits.
 * One thread on a cached prefill tile, against the two passes of one half each: 1.27-1.40x
 * (BENCHMARKS.md, twenty-third session). Q5_K keeps the two passes: its merges spilled
 * here, and it ran 0.7x. Prefill prefetches nothing: a prefill chunk's groups stay in L2
 * for all its activation rows, and the hardware prefetcher brings them in for the first;
 * without the super-block's prefetch, whole Q4_K_M prefills ran 1.04-1.08x faster
 * (alternated in one process, medians of 5-9 rounds). A batched decode's first tile reads
 * the group from memory once for all its rows, and prefetches an eighth of each
 * super-block's lines before each sub-block pass (PK_PF_STREAM). */
PK_TARGET INLINE void PK_NAME(q4k_rows_tile)(int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R,
                                             int pf, float *y, int64_t ldy) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[2][MAX_R];
    PK_NAME(rows_zero)(R, acc);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = w + (size_t)b * Q4K_SB, *ab = act + (size_t)b * Q4K_ACT;
        __m256i lo[2][2], hi[2][2]; /* each half's scales and mins (k4_scales) */
        PK_NAME(k4_scales)(wb + 64, lo[0], hi[0]);
        PK_NAME(k4_scales)(wb + 96, lo[1], hi[1]);
        __m256i isum[2][MAX_R];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) isum[h][r] = _mm256_setzero_si256();
        /* sub-block 2c + sub: the low nibbles of pair c's vectors, or the high; the pair
           loop stays rolled (unrolled, the tile ran 1.3-1.7x slower: its code outgrew
           what the core caches of it) */
#pragma GCC unroll 1
        for (int c = 0; c < 4; c++)
#pragma GCC unroll 2
            for (int sub = 0; sub < 2; sub++) {
                const int j = 2 * c + sub;
                PK_LOADS_HERE(); /* each pass loads its vectors: GCC kept 2c's on the stack for 2c + 1 */
                if (pf == PK_PF_STREAM) tokd_pk_prefetch_part(wb, Q4K_SB, TOKD_PK_STREAM_PF, j, 8, TOKD_PK_T0);
                __m256i scw[2];
#pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    const __m256i sc = PK_NAME(k4_byte)(j < 4 ? lo[h][0] : hi[h][0], j & 3);
                    scw[h] = _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16));
                }
                __m256i p[2][MAX_R];
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) p[0][r] = p[1][r] = _mm256_setzero_si256();
#pragma GCC unroll 8
                for (int t = 0; t < 8; t++) {
                    __m256i u[2];
#pragma GCC unroll 2
                    for (int h = 0; h < 2; h++) {
                        const __m256i raw = _mm256_loadu_si256((const __m256i *)(wb + 256 + 32 * h + 64 * (8 * c + t)));
                        u[h] = _mm256_and_si256(sub ? _mm256_srli_epi16(raw, 4) : raw, m4);
                    }
#pragma GCC unroll 4
                    for (int r = 0; r < R; r++) {
                        const __m256i a = _mm256_set1_epi32(tokd_ld_i32(ab + (size_t)r * as + 64 * c + 32 * sub + 4 * t));
                        p[0][r] = PK_NAME(padd)(p[0][r], u[0], a);
                        p[1][r] = PK_NAME(padd)(p[1][r], u[1], a);
                        PK_PIN(p[0][r], p[1][r]);
                    }
                }
#pragma GCC unroll 2
                for (int h = 0; h < 2; h++) /* the int16 sums times the scales, into isum */
#pragma GCC unroll 4
                    for (int r = 0; r < R; r++) isum[h][r] = _mm256_add_epi32(isum[h][r], _mm256_madd_epi16(p[h][r], scw[h]));
            }
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i mp[4] = {PK_NAME(k4_pair16)(lo[h][1], 0), PK_NAME(k4_pair16)(lo[h][1], 2),
                                   PK_NAME(k4_pair16)(hi[h][1], 0), PK_NAME(k4_pair16)(hi[h][1], 2)};
            const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wb + 16 * h)));
            const __m256 dmx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wb + 32 + 16 * h)));
            PK_NAME(mins_fold)(R, 4, mp, isum[h], dx, dmx, ab, as, acc[h]);
        }
    }
    PK_NAME(rows_store)(R, acc, y, ldy);
}

/* Several activation rows: one half of the rows at a time over the whole group (three
 * registers a row), the first pass streaming the group and the second finding it in
 * cache. Decode (one row): both halves of each super-block as it arrives, so that the
 * stream never pauses for a pass from cache; each half's sums keep their order, so the
 * bits are the same. Whole `tokd bench` tg runs on the AVX2 path (TOKD_KERNELS=avx2 on
 * the AVX-512 machine, BENCHMARKS.md, thirteenth session), alternated with the two-pass
 * decode (both with this session's prefetching): Q4_K_M ahead in 4 of 4 pairs, shares
 * 62-67 % against 51-57 %; against the build before both changes, 71-74 tok/s against
 * 61-63. (Before the single pass, the first pass's prefetching had taken Q4_K_M from
 * 52-54 to 68 tok/s, against the plain read probe of the time.) */
PK_TARGET INLINE void PK_NAME(k4_tile)(int q5, int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R,
                                       int pf, float *y, int64_t ldy) {
    const size_t sb_bytes = q5 ? Q5K_SB : Q4K_SB;
    if (R == 1) {
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *wb = w + (size_t)b * sb_bytes, *ab = act + (size_t)b * Q4K_ACT;
            PK_NAME(k4_half)(q5, 0, 1, wb, ab, as, 1, &acc[0]);
            PK_NAME(k4_half)(q5, 1, 0, wb, ab, as, 1, &acc[1]);
        }
        _mm256_storeu_ps(y, acc[0]);
        _mm256_storeu_ps(y + 8, acc[1]);
        return;
    }
    if (!PK_VNNI && !q5) {
        PK_NAME(q4k_rows_tile)(nb, w, act, as, R, pf, y, ldy);
        return;
    }
    for (int h = 0; h < 2; h++) {
        __m256 acc[MAX_R];
        for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++)
            PK_NAME(k4_half)(q5, h, h == 0 && pf != PK_PF_NONE, w + (size_t)b * sb_bytes, act + (size_t)b * Q4K_ACT, as, R, acc);
        for (int r = 0; r < R; r++) _mm256_storeu_ps(y + r * ldy + 8 * h, acc[r]);
    }
}

PK_TARGET INLINE void PK_NAME(q4k_tile)(int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R, int pf,
                                        float *y, int64_t ldy) {
    PK_NAME(k4_tile)(0, nb, w, act, as, R, pf, y, ldy);
}
PK_TARGET INLINE void PK_NAME(q5k_tile)(int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R, int pf,
                                        float *y, int64_t ldy) {
    PK_NAME(k4_tile)(1, nb, w, act, as, R, pf, y, ldy);
}


/* ---- Q6_K, Q3_K and Q2_K (packed.h's layouts; packed_avx512.c's k16_tile arithmetic) ----
 * One 8-row half at a time, in two passes or per super-block as Q4_K. Per super-block
 * and sub-block j (16 weights = four groups of four): the four groups' unsigned values
 * are rebuilt (Q6_K: 6-bit, q + 32, from its three vectors a sub-block; Q3_K: 3-bit,
 * q + 4, from the two-bit and high-bit vectors; Q2_K: the two-bit values as they are),
 * then each row's sum starts at its
 * correction (-32 or -4 * the sub-block's activation sum; 0 for Q2_K), takes four dp4
 * steps and joins the integer sum times the rows' scales (int8 for Q6_K and Q3_K, the
 * scale byte's low nibble for Q2_K). Float steps as the file layout's vec_dot: out +
 * (dx*dy) * (float)isum per super-block; Q2_K: out + ((dx*dy) * sumi - (dmx*dy) * summ),
 * its mins term as Q4_K's with eight (min 2i, min 2i+1) pairs against the activation's
 * 16-element sums (mins_fold).
 * None of them saturates vpmaddubsw: its int16 sum of two unsigned weight x signed
 * activation products is at most 2 * 63 * 128 = 16128 (Q6_K), 2 * 7 * 128 = 1792 (Q3_K's
 * q + 4 <= 7) or 2 * 3 * 128 = 768 (Q2_K's 0..3) in magnitude, below 2^15; so dp4 is
 * vpdpbusd's exact integer in both forms, and every sum here is the AVX-512 one. */
/* Q6_K group t (0..3) of the sub-block whose three vectors (this half's bytes) are at v
 * (packed.c, q6_K_pack): bits 0-5 of vector t, or for t = 3 bits 6-7 of the three put
 * together (packed_avx512.c, q6k_groups). */
PK_TARGET INLINE __m256i PK_NAME(q6k_group)(const uint8_t *v, int t) {
    const __m256i m3f = _mm256_set1_epi8(0x3F);
    if (t < 3) return _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(v + 64 * t)), m3f);
    const __m256i a = _mm256_loadu_si256((const __m256i *)v), b = _mm256_loadu_si256((const __m256i *)(v + 64));
    const __m256i c = _mm256_loadu_si256((const __m256i *)(v + 128));
    const __m256i a2 = _mm256_and_si256(_mm256_srli_epi16(a, 6), _mm256_set1_epi8(0x03));
    const __m256i b2 = _mm256_and_si256(_mm256_srli_epi16(b, 4), _mm256_set1_epi8(0x0C));
    const __m256i c2 = _mm256_and_si256(_mm256_srli_epi16(c, 2), _mm256_set1_epi8(0x30));
    return _mm256_or_si256(_mm256_or_si256(a2, b2), c2);
}

/* Two-bit group g (weights 4g..4g+3 of each row, g = 8p + t) of Q2_K / Q3_K: bits
 * 2s..2s+1 (s = p % 4) of two-bit vector 8(p/4) + t. */
PK_TARGET INLINE __m256i PK_NAME(q2_group)(const uint8_t *q2, int g) {
    const int t = g & 7, p = g >> 3, s = p & 3;
    const __m256i v = _mm256_loadu_si256((const __m256i *)(q2 + 64 * (8 * (p >> 2) + t)));
    return _mm256_and_si256(PK_NAME(shift16)(v, -2 * s), _mm256_set1_epi8(0x03));
}
/* Q3_K: with bit p of high-bit vector t moved to bit 2 (q + 4: the file's "subtract 4
 * where the bit is clear" is the correction's -4 * sum). */
PK_TARGET INLINE __m256i PK_NAME(q3k_group)(const uint8_t *q2, const uint8_t *hm, int g) {
    const int t = g & 7, p = g >> 3;
    const __m256i h = _mm256_loadu_si256((const __m256i *)(hm + 64 * t));
    return _mm256_or_si256(_mm256_and_si256(PK_NAME(shift16)(h, 2 - p), _mm256_set1_epi8(0x04)), PK_NAME(q2_group)(q2, g));
}
PK_TARGET INLINE __m256i PK_NAME(k16_group)(int kind, const uint8_t *q, const uint8_t *top, int g) {
    return kind == K16_Q6 ? PK_NAME(q6k_group)(q + 192 * (g >> 2), g & 3)
           : kind == K16_Q3 ? PK_NAME(q3k_group)(q, top, g)
                            : PK_NAME(q2_group)(q, g);
}

/* Sub-block j's four groups of rows 8h..8h+7 (qh: this half's quant bytes). */
PK_TARGET INLINE void PK_NAME(k16_groups)(int kind, const uint8_t *qh, int j, __m256i *u) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) u[k] = PK_NAME(k16_group)(kind, qh, qh + 1024, 4 * j + k);
}
/* s + the sub-block sum of groups u[] against the four broadcast activation groups a[]. */
PK_TARGET INLINE __m256i PK_NAME(k16_sum)(int kind, const __m256i *u, const __m256i *a, __m256i s) {
    if (PK_VNNI) return PK_NAME(dp4)(PK_NAME(dp4)(PK_NAME(dp4)(PK_NAME(dp4)(s, u[0], a[0]), u[1], a[1]), u[2], a[2]), u[3], a[3]);
    const __m256i p01 = PK_NAME(padd)(_mm256_maddubs_epi16(u[0], a[0]), u[1], a[1]);
    const __m256i p23 = PK_NAME(padd)(_mm256_maddubs_epi16(u[2], a[2]), u[3], a[3]);
    if (kind == K16_Q6) /* 6-bit values: two steps' sums fit int16 (padd) */
        return _mm256_add_epi32(s, _mm256_add_epi32(PK_NAME(pairs32)(p01), PK_NAME(pairs32)(p23)));
    return _mm256_add_epi32(s, PK_NAME(pairs32)(_mm256_add_epi16(p01, p23))); /* 3-bit (q + 4 <= 7), 2-bit: all four */
}
/* Activation row a's four groups of sub-block j, broadcast, and its correction. */
PK_TARGET INLINE __m256i PK_NAME(k16_act)(int kind, const uint8_t *a, int j, __m256i *g) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) g[k] = _mm256_set1_epi32(tokd_ld_i32(a + 16 * j + 4 * k));
    return kind == K16_Q2 ? _mm256_setzero_si256() : _mm256_set1_epi32(tokd_ld_i32(a + 260 + 4 * j));
}
/* Sub-block j's scales of rows 8h..8h+7 (sc: this half's scale bytes). */
PK_TARGET INLINE __m256i PK_NAME(k16_scales)(int kind, const uint8_t *sc, int j) {
    const __m128i scb = _mm_loadl_epi64((const __m128i *)(sc + 16 * j));
    return kind == K16_Q2 ? _mm256_and_si256(_mm256_cvtepu8_epi32(scb), _mm256_set1_epi32(0x0F)) : _mm256_cvtepi8_epi32(scb);
}
/* The super-block's float step for rows 8h..8h+7 (wb: its header; sc: this half's scale
 * bytes), R activation rows. */
PK_TARGET INLINE void PK_NAME(k16_float)(int kind, int h, const uint8_t *wb, const uint8_t *sc, const __m256i *isum,
                                         const uint8_t *ab, size_t as, int R, __m256 *acc) {
    const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wb + 16 * h)));
    if (kind == K16_Q2) {
        /* mins (high nibbles of the scale bytes) as (m 2i, m 2i+1) int16 pairs per row lane */
        __m256i mp[8];
        for (int i = 0; i < 8; i++) {
            const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(sc + 32 * i)));
            const __m256i hi = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(sc + 32 * i + 16)));
            mp[i] = _mm256_or_si256(_mm256_srli_epi32(lo, 4), _mm256_slli_epi32(_mm256_srli_epi32(hi, 4), 16));
        }
        const __m256 dmx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wb + 32 + 16 * h)));
        PK_NAME(mins_fold)(R, 8, mp, isum, dx, dmx, ab, as, acc);
    } else {
        for (int r = 0; r < R; r++) {
            const __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(tokd_ld_f32(ab + (size_t)r * as + 256)));
            acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[r])));
        }
    }
}
/* Where super-block b keeps its header (d, Q2_K's dmin) and its body (the scales, then
 * Q6_K's three vectors a sub-block, Q3_K's two-bit and high-bit vectors, or Q2_K's
 * two-bit vectors; Q6_K and Q3_K super-blocks go in pairs, packed.h). */
PK_TARGET INLINE void PK_NAME(k16_at)(int kind, int64_t b, int64_t nb, const uint8_t *w, const uint8_t **wb,
                                      const uint8_t **sc) {
    const size_t sb_bytes = kind == K16_Q6 ? Q6K_SB : kind == K16_Q3 ? Q3K_SB : Q2K_SB;
    const uint8_t *lin = w + (size_t)b * sb_bytes;
    *wb = kind == K16_Q2 ? lin : w + tokd_pk_scales_at(b, sb_bytes);
    *sc = kind == K16_Q2 ? lin + 64 : w + tokd_pk_vectors_at(b, nb, sb_bytes);
}
/* For 8 rows (sc: their scale bytes) and a prepared activation row ab (Q6_K, Q3_K: each
 * sub-block's correction -bias * its activation sum, bias 32 or 4), the int32 lanes
 * sum over j of scale j * correction j, through vpmaddwd instead of 16 vpmullo: the
 * sums (correction / bias, exact: |sum| <= 2032) as int16 pairs, each sub-block pair's
 * scales as int16 pairs, times bias at the end (a shift). */
PK_TARGET INLINE __m256i PK_NAME(k16_corr_term)(int kind, const uint8_t *sc, const uint8_t *ab) {
    const int log2_bias = kind == K16_Q6 ? 5 : 2;
    const __m256i c0 = _mm256_srai_epi32(_mm256_loadu_si256((const __m256i *)(ab + 260)), log2_bias);
    const __m256i c1 = _mm256_srai_epi32(_mm256_loadu_si256((const __m256i *)(ab + 292)), log2_bias);
    /* int16 sums of sub-blocks 0..15 in order (vpackssdw works within 128-bit lanes) */
    const __m256i bs = _mm256_permute4x64_epi64(_mm256_packs_epi32(c0, c1), _MM_SHUFFLE(3, 1, 2, 0));
    __m256i t = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) { /* sub-blocks 2i, 2i+1: scale bytes at 32i and 32i + 16 */
        const __m128i x = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(sc + 32 * i)),
                                            _mm_loadl_epi64((const __m128i *)(sc + 32 * i + 16)));
        t = _mm256_add_epi32(t, _mm256_madd_epi16(_mm256_cvtepi8_epi16(x), _mm256_permutevar8x32_epi32(bs, _mm256_set1_epi32(i))));
    }
    return _mm256_slli_epi32(t, log2_bias);
}
/* Several activation rows: rows 8h..8h+7 of super-block b into acc[0..R). Prefill
 * prefetches nothing, as q4k_rows_tile: without it whole Q4_K_M prefills (Q6_K's share)
 * ran 1.03x (alternated in one process, median of 9 rounds; BENCHMARKS.md, twenty-third
 * session). pf: the first half's pass of a batched decode's first tile, which streams
 * the group, prefetches a sixteenth of the super-block's lines before each sub-block. */
PK_TARGET INLINE void PK_NAME(k16_half)(int kind, int h, int pf, int64_t b, int64_t nb, const uint8_t *w,
                                        const uint8_t *act, size_t as, int R, __m256 *acc) {
    const size_t sb_bytes = kind == K16_Q6 ? Q6K_SB : kind == K16_Q3 ? Q3K_SB : Q2K_SB;
    const uint8_t *wb, *sc, *ab = act + (size_t)b * Q6K_ACT;
    PK_NAME(k16_at)(kind, b, nb, w, &wb, &sc);
    const uint8_t *q = sc + 256 + 32 * h;
    sc += 8 * h;
    __m256i isum[MAX_R];
    for (int r = 0; r < R; r++) isum[r] = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) {
        __m256i u[4], g[4];
        if (pf) tokd_pk_prefetch_part(w + (size_t)b * sb_bytes, sb_bytes, TOKD_PK_STREAM_PF, j, 16, TOKD_PK_T0);
        PK_NAME(k16_groups)(kind, q, j, u);
        const __m256i scj = PK_NAME(k16_scales)(kind, sc, j);
        for (int r = 0; r < R; r++) {
            const __m256i corr = PK_NAME(k16_act)(kind, ab + (size_t)r * as, j, g);
            isum[r] = _mm256_add_epi32(isum[r], _mm256_mullo_epi32(PK_NAME(k16_sum)(kind, u, g, corr), scj));
        }
    }
    PK_NAME(k16_float)(kind, h, wb, sc, isum, ab, as, R, acc);
}
/* Decode (one activation row): super-block b's two halves together, sub-block by
 * sub-block, so that each line is used whole as it arrives and each activation group is
 * broadcast once for both; each half's sums keep k16_half's order (the same bits). The
 * super-block's lines TOKD_PK_PF_DIST ahead are prefetched spread over the 16
 * sub-blocks, a sixteenth before each, and no page is primed (k4_half says why).
 * Measured on the AVX2-only Zen 3 (where the AVX-512 path's burst was measured better,
 * these are the kernels decode runs), each thread streaming 200 MB of packed groups
 * alternated with the read probe (medians of 9): Q6_K 0.55 of the probe with the burst
 * at any distance from 2 to 16 KB, 0.80-0.85 spread over the first half's sub-blocks;
 * Q3_K 0.64 and 0.80; Q2_K 0.72 and 0.76. Then A/B in one process: spread over both
 * halves against the first only, Q6_K 1.15, 1.06, 1.10; both halves together against
 * one after the other, Q6_K 1.04 and 1.00, Q3_K 1.17 and 1.09, Q2_K 1.35, 1.46 and 1.52
 * (Q6_K one thread on cached groups 1.21). The same for Q4_K measured 0.91 and 0.94
 * streaming, and again with its sums pinned (PK_PIN) 0.75-0.78 on cached groups and
 * 0.97-1.04 streaming: it keeps k4_half's two passes (BENCHMARKS.md, twenty-first and
 * twenty-second sessions). */
PK_TARGET INLINE void PK_NAME(k16_decode)(int kind, int64_t b, int64_t nb, const uint8_t *w, const uint8_t *act,
                                          __m256 *acc) {
    const size_t sb_bytes = kind == K16_Q6 ? Q6K_SB : kind == K16_Q3 ? Q3K_SB : Q2K_SB;
    const uint8_t *lin = w + (size_t)b * sb_bytes, *wb, *sc, *ab = act + (size_t)b * Q6K_ACT;
    PK_NAME(k16_at)(kind, b, nb, w, &wb, &sc);
    __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) {
        tokd_pk_prefetch_part(lin, sb_bytes, TOKD_PK_PF_DIST, j, 16, TOKD_PK_T0);
        PK_LOADS_HERE(); /* each sub-block's loads in its own step */
        __m256i g[4], u[4];
        const __m256i corr = PK_NAME(k16_act)(kind, ab, j, g);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            PK_NAME(k16_groups)(kind, sc + 256 + 32 * h, j, u);
            const __m256i scj = PK_NAME(k16_scales)(kind, sc + 8 * h, j);
            if (PK_VNNI) {
                isum[h] = _mm256_add_epi32(isum[h], _mm256_mullo_epi32(PK_NAME(k16_sum)(kind, u, g, corr), scj));
                continue;
            }
            /* the scale in both int16 halves of its lane: vpmaddwd multiplies the int16
               pair sums by it and adds them, in place of vpmullo on their int32 sum */
            const __m256i scw = _mm256_or_si256(_mm256_and_si256(scj, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(scj, 16));
            const __m256i p01 = PK_NAME(padd)(_mm256_maddubs_epi16(u[0], g[0]), u[1], g[1]);
            const __m256i p23 = PK_NAME(padd)(_mm256_maddubs_epi16(u[2], g[2]), u[3], g[3]);
            if (kind == K16_Q6) /* 6-bit values: two steps' sums fit int16 */
                isum[h] = _mm256_add_epi32(isum[h], _mm256_add_epi32(_mm256_madd_epi16(p01, scw), _mm256_madd_epi16(p23, scw)));
            else
                isum[h] = _mm256_add_epi32(isum[h], _mm256_madd_epi16(_mm256_add_epi16(p01, p23), scw));
        }
        PK_PIN(isum[0], isum[1]);
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) { /* a copy: isum's address taken would keep it in memory */
        __m256i is = isum[h];
        if (!PK_VNNI && kind != K16_Q2) /* the corrections' term, sum over j of scale j * correction j, as int16 pairs */
            is = _mm256_add_epi32(is, PK_NAME(k16_corr_term)(kind, sc + 8 * h, ab));
        PK_NAME(k16_float)(kind, h, wb, sc + 8 * h, &is, ab, 0, 1, &acc[h]);
    }
}
/* As k4_tile: two passes of one half each for several activation rows, both halves of
 * each super-block as it arrives for decode (k16_decode). */
PK_TARGET INLINE void PK_NAME(k16_tile)(int kind, int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R,
                                        int pf, float *y, int64_t ldy) {
    if (R == 1) {
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int64_t b = 0; b < nb; b++) PK_NAME(k16_decode)(kind, b, nb, w, act, acc);
        _mm256_storeu_ps(y, acc[0]);
        _mm256_storeu_ps(y + 8, acc[1]);
        return;
    }
    for (int h = 0; h < 2; h++) {
        __m256 acc[MAX_R];
        for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) PK_NAME(k16_half)(kind, h, h == 0 && pf == PK_PF_STREAM, b, nb, w, act, as, R, acc);
        for (int r = 0; r < R; r++) _mm256_storeu_ps(y + r * ldy + 8 * h, acc[r]);
    }
}
PK_TARGET INLINE void PK_NAME(q6k_tile)(int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R, int pf,
                                        float *y, int64_t ldy) {
    PK_NAME(k16_tile)(K16_Q6, nb, w, act, as, R, pf, y, ldy);
}
PK_TARGET INLINE void PK_NAME(q3k_tile)(int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R, int pf,
                                        float *y, int64_t ldy) {
    PK_NAME(k16_tile)(K16_Q3, nb, w, act, as, R, pf, y, ldy);
}
PK_TARGET INLINE void PK_NAME(q2k_tile)(int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R, int pf,
                                        float *y, int64_t ldy) {
    PK_NAME(k16_tile)(K16_Q2, nb, w, act, as, R, pf, y, ldy);
}


/* ---- Q8_0 (the AVX2 form: packed.h's layout with the quants as signed bytes) ----
 * vpmaddubsw multiplies unsigned by signed bytes, so each step takes |w| and the
 * activation with w's sign (vpsignb): |w| * sign(a, w) = w * a, and two such products
 * stay within int16 (2 * 128 * 127 < 2^15), so the sum is exact and the corrections are
 * 0. Numerics: packed.h's contract, out = fmaf(dx * dy, (float)isum, out) per block. */
/* Q8_0 against several activation rows: both halves of the 16 rows per broadcast, as
 * q4_0_rows_tile. Each of a block's eight steps loads the two halves' vectors, and each
 * activation row's broadcast takes each half's signs (vpsignb) into that half's int32
 * sum: 2R registers. The integers are q8_0_tile's (exact, in any order), the float step
 * out = fmaf(dx * dy, (float)isum, out) in block order: the same bits. */
PK_TARGET INLINE void PK_NAME(q8_0_rows_tile)(int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R,
                                              int pf, float *y, int64_t ldy) {
    __m256 acc[2][MAX_R];
    PK_NAME(rows_zero)(R, acc);
    const size_t dy_off = (size_t)nb * 32;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *sc = w + tokd_pk_scales_at(b, Q8_0_BLOCK_BYTES), *qv = w + tokd_pk_vectors_at(b, nb, Q8_0_BLOCK_BYTES);
        if (pf == PK_PF_STREAM) PK_NAME(stream_prefetch)(w + (size_t)b * Q8_0_BLOCK_BYTES, Q8_0_BLOCK_BYTES);
        __m256i s[2][MAX_R];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) s[0][r] = s[1][r] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            __m256i v[2], u[2];
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                v[h] = _mm256_loadu_si256((const __m256i *)(qv + 64 * g + 32 * h));
                u[h] = _mm256_sign_epi8(v[h], v[h]);
            }
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const __m256i a = _mm256_set1_epi32(tokd_ld_i32(act + (size_t)r * as + b * 32 + 4 * g));
                s[0][r] = PK_NAME(dp4)(s[0][r], u[0], _mm256_sign_epi8(a, v[0]));
                s[1][r] = PK_NAME(dp4)(s[1][r], u[1], _mm256_sign_epi8(a, v[1]));
                PK_PIN(s[0][r], s[1][r]);
            }
            PK_LOADS_HERE(); /* each step's vectors loaded in it */
        }
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sc + 16 * h)));
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(tokd_ld_f32(act + (size_t)r * as + dy_off + 4 * b)));
                acc[h][r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s[h][r]), acc[h][r]);
            }
        }
    }
    PK_NAME(rows_store)(R, acc, y, ldy);
}
PK_TARGET INLINE void PK_NAME(q8_0_tile)(int64_t nb, const uint8_t *w, const uint8_t *act, size_t as, int R, int pf,
                                         float *y, int64_t ldy) {
    if (!PK_VNNI && R > 1) {
        PK_NAME(q8_0_rows_tile)(nb, w, act, as, R, pf, y, ldy);
        return;
    }
    __m256 acc[MAX_R][2];
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    const size_t dy_off = (size_t)nb * 32;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *lin = w + (size_t)b * Q8_0_BLOCK_BYTES; /* the block's share of the group's bytes */
        const uint8_t *sc = w + tokd_pk_scales_at(b, Q8_0_BLOCK_BYTES), *qv = w + tokd_pk_vectors_at(b, nb, Q8_0_BLOCK_BYTES);
        if (R == 1) { /* decode: as Q4_0's (packed.h, TOKD_PK_AVX2_DECODE_LINE_PF); prefill: no
                         software prefetch (whole Q8_0 prefills 1.06x without; k16_half) */
            tokd_page_prime(lin, Q8_0_BLOCK_BYTES);
            for (size_t l = 0; l < Q8_0_BLOCK_BYTES; l += 64)
                _mm_prefetch((const char *)lin + TOKD_PK_AVX2_DECODE_LINE_PF + l, _MM_HINT_T0);
        } else if (pf == PK_PF_STREAM) { /* AVX-VNNI's batched decode (q8_0_rows_tile otherwise) */
            PK_NAME(stream_prefetch)(lin, Q8_0_BLOCK_BYTES);
        }
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sc + 16 * h)));
            __m256i s[MAX_R], t[MAX_R];
            for (int r = 0; r < R; r++) s[r] = t[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(qv + 64 * g + 32 * h));
                const __m256i u = _mm256_sign_epi8(v, v);
                for (int r = 0; r < R; r++) {
                    const __m256i a = _mm256_sign_epi8(_mm256_set1_epi32(tokd_ld_i32(act + (size_t)r * as + b * 32 + 4 * g)), v);
                    if (g & 1) t[r] = PK_NAME(dp4)(t[r], u, a);
                    else s[r] = PK_NAME(dp4)(s[r], u, a);
                }
            }
            for (int r = 0; r < R; r++) {
                const __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(tokd_ld_f32(act + (size_t)r * as + dy_off + 4 * b)));
                acc[r][h] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_add_epi32(s[r], t[r])), acc[r][h]);
            }
        }
    }
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(y + r * ldy, acc[r][0]);
        _mm256_storeu_ps(y + r * ldy + 8, acc[r][1]);
    }
}

/* The entry points: activation rows in tiles of up to MAX_R, the tile width a constant
 * in each call so that the accumulators are registers. QK: weights per block (Q4_0,
 * Q8_0) or super-block (the K-quants). A batched decode's few rows (up to
 * PK_STREAM_MAX_ROWS) go group by group, every row tile against the group before the
 * next group: the first tile streams it from memory with its prefetches (PK_PF_STREAM),
 * the others find it in cache (PK_PF_NONE). More rows (prefill) go tile by tile, every
 * group against each tile (PK_PF_TILE: each tile's own prefill prefetching). Each
 * output's arithmetic is its tile's either way, so the order changes no bit. */
#define PK_TILE_CALL(TILE, R, G, PF)                                                                        \
    PK_NAME(TILE)(nb, (const uint8_t *)w + (size_t)(G) * group_bytes, a, as, R, PF, y + r0 * ldy + 16 * (G), ldy)
/* Groups [G0, G1) against the row tile at r0 (up to MAX_R rows) */
#define PK_TILES(TILE, G0, G1, PF)                                                                          \
    do {                                                                                                   \
        const uint8_t *a = (const uint8_t *)act + (size_t)r0 * as;                                         \
        for (int64_t G = (G0); G < (G1); G++)                                                              \
            switch (na - r0 >= MAX_R ? MAX_R : (int)(na - r0)) {                                           \
            case 4: PK_TILE_CALL(TILE, 4, G, PF); break;                                                   \
            case 3: PK_TILE_CALL(TILE, 3, G, PF); break;                                                   \
            case 2: PK_TILE_CALL(TILE, 2, G, PF); break;                                                   \
            default: PK_TILE_CALL(TILE, 1, G, PF); break;                                                  \
            }                                                                                              \
    } while (0)
#define PK_GEMM(NAME, TILE, QK)                                                                              \
    PK_TARGET void PK_NAME(NAME)(int64_t K, int64_t n_groups, const void *w, size_t group_bytes, int64_t na, \
                                 const void *act, size_t as, float *y, int64_t ldy) {                      \
        const int64_t nb = K / (QK);                                                                       \
        if (na > 1 && na <= PK_STREAM_MAX_ROWS) {                                                          \
            for (int64_t g = 0; g < n_groups; g++)                                                         \
                for (int64_t r0 = 0; r0 < na; r0 += MAX_R) PK_TILES(TILE, g, g + 1, r0 ? PK_PF_NONE : PK_PF_STREAM); \
            return;                                                                                        \
        }                                                                                                  \
        for (int64_t r0 = 0; r0 < na; r0 += MAX_R) PK_TILES(TILE, 0, n_groups, PK_PF_TILE);                \
    }
PK_GEMM(tokd_packed_q4_0_gemm, group_tile, 32)
PK_GEMM(tokd_packed_q5_0_gemm, q5_0_tile, 32)
PK_GEMM(tokd_packed_q4_1_gemm, q4_1_tile, 32)
PK_GEMM(tokd_packed_q5_1_gemm, q5_1_tile, 32)
PK_GEMM(tokd_packed_q8_0_gemm, q8_0_tile, 32)
PK_GEMM(tokd_packed_q4_K_gemm, q4k_tile, 256)
PK_GEMM(tokd_packed_q5_K_gemm, q5k_tile, 256)
PK_GEMM(tokd_packed_q6_K_gemm, q6k_tile, 256)
PK_GEMM(tokd_packed_q3_K_gemm, q3k_tile, 256)
PK_GEMM(tokd_packed_q2_K_gemm, q2k_tile, 256)
#undef PK_GEMM
#undef PK_TILES
#undef PK_TILE_CALL
