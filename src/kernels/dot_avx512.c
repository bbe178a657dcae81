/* dot_avx512.c — AVX-512 dot products (F/BW/VL; and a second set using VNNI), selected
 * at run time in types.c. Bit-equal to the scalar references, like dot_avx2.c. The
 * quantized kernels are written once in quants_avx512_impl.h and instantiated twice. */
#include <immintrin.h>
#include <string.h>

#include "kernels/packed.h"
#include "kernels/quants.h"
#include "kernels/unaligned.h"

/* The 16 six-bit scales of a Q3_K block, minus 32, as 16 bytes. */
static inline __m128i q3k_scales(const uint8_t *s) {
    uint32_t a = tokd_ld_u32(s), b = tokd_ld_u32(s + 4), c = tokd_ld_u32(s + 8);
    const uint32_t m4 = 0x0f0f0f0f, m2 = 0x03030303;
    uint32_t w0 = (a & m4) | ((c & m2) << 4);
    uint32_t w1 = (b & m4) | (((c >> 2) & m2) << 4);
    uint32_t w2 = ((a >> 4) & m4) | (((c >> 4) & m2) << 4);
    uint32_t w3 = ((b >> 4) & m4) | (((c >> 6) & m2) << 4);
    return _mm_setr_epi32((int)w0, (int)w1, (int)w2, (int)w3);
}
/* The eight 6-bit scales (bytes 0..7) and mins (bytes 8..15) of a Q4_K/Q5_K block. */
static inline __m128i k4_scales_mins(const uint8_t *s) {
    uint32_t a = tokd_ld_u32(s), b = tokd_ld_u32(s + 4), c = tokd_ld_u32(s + 8);
    const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    uint32_t sc_lo = a & m6, m_lo = b & m6;
    uint32_t sc_hi = (c & m4) | (((a >> 6) & m2) << 4);
    uint32_t m_hi = ((c >> 4) & m4) | (((b >> 6) & m2) << 4);
    return _mm_setr_epi32((int)sc_lo, (int)sc_hi, (int)m_lo, (int)m_hi);
}

#define T512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))

/* ---- F16 rows: lane i%32, two vectors of sixteen ----
 * (BF16 and F32 rows have their own orders and kernels: bf16_rows.c, f32_rows.c; F32
 * rows used these until the forty-second session.)
 * The _stream forms are decode's (types.h, vec_dot_stream): F16 matrices
 * have no packed layout, and one decode step reads each of their rows once, from memory.
 * Each step of 32 weights (ESZ bytes each) primes the page TOKD_PK_DECODE_PRIME_SKIP
 * further than the packed decode kernels do and prefetches its lines
 * TOKD_PK_DECODE_LINE_PF ahead with prefetchnta, as packed_avx512.c's decode does; the
 * arithmetic is the plain form's, so the bits are too. TinyLlama shape in BF16 (whose rows
 * used these kernels until the forty-first session), 2
 * threads, weights in huge pages (model.c): tg 17.9-18.0 tok/s plain, 22.9-23.9 with the
 * pages primed, 33.7-34.5 with the lines prefetched as well (BENCHMARKS.md, thirty-seventh
 * session). */

#define FLOAT_DOT_512(NAME, LOAD16, LOAD1, ESZ, STREAM)                                              \
    T512 void NAME(int64_t n, float *out, const void *w, const void *act) {                          \
        const float *x = act;                                                                        \
        const char *wb = w;                                                                          \
        __m512 a0 = _mm512_setzero_ps(), a1 = a0;                                                    \
        int64_t i = 0;                                                                               \
        for (; i + 32 <= n; i += 32) {                                                               \
            if (STREAM) {                                                                            \
                tokd_page_prime(wb + (ESZ) * i + TOKD_PK_DECODE_PRIME_SKIP, 32 * (ESZ));             \
                for (int l = 0; l < 32 * (ESZ); l += 64)                                             \
                    _mm_prefetch(wb + (ESZ) * i + TOKD_PK_DECODE_LINE_PF + l, _MM_HINT_NTA);         \
            }                                                                                        \
            a0 = _mm512_add_ps(a0, _mm512_mul_ps(LOAD16(i), _mm512_loadu_ps(x + i)));               \
            a1 = _mm512_add_ps(a1, _mm512_mul_ps(LOAD16(i + 16), _mm512_loadu_ps(x + i + 16)));     \
        }                                                                                            \
        float s[32];                                                                                 \
        _mm512_storeu_ps(s, a0);                                                                     \
        _mm512_storeu_ps(s + 16, a1);                                                                \
        for (; i < n; i++) s[i & 31] += LOAD1(i) * x[i];                                             \
        *out = tokd_reduce32(s);                                                                     \
    }
static inline uint16_t ld16(const void *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
}
#define F16_LOAD16(i) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + (i))))
#define F16_LOAD1(i) _cvtsh_ss(ld16((const uint16_t *)w + (i)))
FLOAT_DOT_512(tokd_f16_dot_avx512, F16_LOAD16, F16_LOAD1, 2, 0)
/* Four activation rows (tokd_vec_dot4_fn: prefill, batched decode): each weight vector
 * loaded and converted once for the four, and eight independent sums instead of two, so
 * the adds' latency no longer paces the loop. Row r's lanes take the same operations in
 * the same order as FLOAT_DOT_512's, so out[r] has its bits. */
#define FLOAT_DOT4_512(NAME, LOAD16, LOAD1)                                                          \
    T512 void NAME(int64_t n, float out[4], const void *w, const void *act, size_t act_stride) {    \
        const float *x[4];                                                                           \
        __m512 a0[4], a1[4];                                                                         \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                                        \
            x[r] = (const float *)((const char *)act + (size_t)r * act_stride);                      \
            a0[r] = a1[r] = _mm512_setzero_ps();                                                     \
        }                                                                                            \
        int64_t i = 0;                                                                               \
        for (; i + 32 <= n; i += 32) {                                                               \
            const __m512 w0 = LOAD16(i), w1 = LOAD16(i + 16);                                        \
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                                    \
                a0[r] = _mm512_add_ps(a0[r], _mm512_mul_ps(w0, _mm512_loadu_ps(x[r] + i)));         \
                a1[r] = _mm512_add_ps(a1[r], _mm512_mul_ps(w1, _mm512_loadu_ps(x[r] + i + 16)));    \
            }                                                                                        \
        }                                                                                            \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                                        \
            float s[32];                                                                             \
            _mm512_storeu_ps(s, a0[r]);                                                              \
            _mm512_storeu_ps(s + 16, a1[r]);                                                         \
            for (int64_t k = i; k < n; k++) s[k & 31] += LOAD1(k) * x[r][k];                         \
            out[r] = tokd_reduce32(s);                                                               \
        }                                                                                            \
    }
/* Two weight rows against four activation rows (tokd_vec_dot2x4_fn, prefill): each
 * activation vector loaded once for both weight rows (the asm keeps GCC from folding the
 * load into each multiply, which loads it twice), sixteen sums in registers. Each
 * (weight row, activation row) pair's lanes take FLOAT_DOT_512's operations in order, so
 * each output has vec_dot's bits. BF16 TinyLlama shape (then on these kernels), 2 threads, pp256 alternated with
 * the four-row form: 86-97 tok/s against 71-74 (BENCHMARKS.md, thirty-seventh session). */
#define FLOAT_DOT2X4_512(NAME, LOAD16, LOAD1)                                                        \
    T512 void NAME(int64_t n, float out[8], const void *w0, size_t ws, const void *act, size_t act_stride) { \
        const float *x[4];                                                                           \
        __m512 a0[2][4], a1[2][4];                                                                   \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                                        \
            x[r] = (const float *)((const char *)act + (size_t)r * act_stride);                      \
            a0[0][r] = a1[0][r] = a0[1][r] = a1[1][r] = _mm512_setzero_ps();                          \
        }                                                                                            \
        int64_t i = 0;                                                                               \
        for (; i + 32 <= n; i += 32) {                                                               \
            const void *w = w0;                                                                      \
            const __m512 u0 = LOAD16(i), u1 = LOAD16(i + 16);                                        \
            w = (const char *)w0 + ws;                                                               \
            const __m512 v0 = LOAD16(i), v1 = LOAD16(i + 16);                                        \
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                                    \
                __m512 xa = _mm512_loadu_ps(x[r] + i), xb = _mm512_loadu_ps(x[r] + i + 16);         \
                __asm__("" : "+v"(xa), "+v"(xb));                                                    \
                a0[0][r] = _mm512_add_ps(a0[0][r], _mm512_mul_ps(u0, xa));                           \
                a1[0][r] = _mm512_add_ps(a1[0][r], _mm512_mul_ps(u1, xb));                           \
                a0[1][r] = _mm512_add_ps(a0[1][r], _mm512_mul_ps(v0, xa));                           \
                a1[1][r] = _mm512_add_ps(a1[1][r], _mm512_mul_ps(v1, xb));                           \
            }                                                                                        \
        }                                                                                            \
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {                                        \
            const void *w = (const char *)w0 + (size_t)h * ws;                                       \
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                                    \
                float s[32];                                                                         \
                _mm512_storeu_ps(s, a0[h][r]);                                                       \
                _mm512_storeu_ps(s + 16, a1[h][r]);                                                  \
                for (int64_t k = i; k < n; k++) s[k & 31] += LOAD1(k) * x[r][k];                     \
                out[4 * h + r] = tokd_reduce32(s);                                                   \
            }                                                                                        \
        }                                                                                            \
    }
FLOAT_DOT2X4_512(tokd_f16_dot2x4_avx512, F16_LOAD16, F16_LOAD1)
FLOAT_DOT4_512(tokd_f16_dot4_avx512, F16_LOAD16, F16_LOAD1)
FLOAT_DOT_512(tokd_f16_stream_dot_avx512, F16_LOAD16, F16_LOAD1, 2, 1)
/* Weights [0, n) of one row against R = 1..4 activation rows, added into their lane sums
 * (tokd_vec_dot_rows_part_fn: batched decode of a few sequences, matmul.c), each weight
 * vector loaded once for the R rows. Without pf, the stream form's prefetches (page
 * primed, lines ahead); with pf, each line of pf's stream in step with w's, for a caller
 * that reads rows in pieces. Each lane takes FLOAT_DOT_512's operations in order. */
#define PART_STEP_512(LOAD16, R)                                                                     \
    const __m512 w0 = LOAD16(i), w1 = LOAD16(i + 16);                                                \
    _Pragma("GCC unroll 4") for (int r = 0; r < (R); r++) {                                          \
        a0[r] = _mm512_add_ps(a0[r], _mm512_mul_ps(w0, _mm512_loadu_ps(x[r] + i)));                 \
        a1[r] = _mm512_add_ps(a1[r], _mm512_mul_ps(w1, _mm512_loadu_ps(x[r] + i + 16)));            \
    }
#define FLOAT_DOT_PART_512(NAME, LOAD16, ESZ, R)                                                      \
    T512 static void NAME##_##R(int64_t n, const float *acc_in, float *acc, const void *w, const void *act, \
                                size_t act_stride, const void *pf) {                                 \
        const char *wb = w, *pb = pf;                                                                \
        const float *x[R];                                                                           \
        __m512 a0[R], a1[R];                                                                         \
        _Pragma("GCC unroll 4") for (int r = 0; r < (R); r++) {                                      \
            x[r] = (const float *)((const char *)act + (size_t)r * act_stride);                      \
            a0[r] = acc_in ? _mm512_loadu_ps(acc_in + 32 * r) : _mm512_setzero_ps();                 \
            a1[r] = acc_in ? _mm512_loadu_ps(acc_in + 32 * r + 16) : _mm512_setzero_ps();            \
        }                                                                                            \
        if (pb)                                                                                      \
            for (int64_t i = 0; i < n; i += 32) {                                                    \
                for (int l = 0; l < 32 * (ESZ); l += 64) _mm_prefetch(pb + (ESZ) * i + l, _MM_HINT_NTA); \
                PART_STEP_512(LOAD16, R)                                                             \
            }                                                                                        \
        else                                                                                         \
            for (int64_t i = 0; i < n; i += 32) {                                                    \
                tokd_page_prime(wb + (ESZ) * i + TOKD_PK_DECODE_PRIME_SKIP, 32 * (ESZ));             \
                for (int l = 0; l < 32 * (ESZ); l += 64)                                             \
                    _mm_prefetch(wb + (ESZ) * i + TOKD_PK_DECODE_LINE_PF + l, _MM_HINT_NTA);         \
                PART_STEP_512(LOAD16, R)                                                             \
            }                                                                                        \
        _Pragma("GCC unroll 4") for (int r = 0; r < (R); r++) {                                      \
            _mm512_storeu_ps(acc + 32 * r, a0[r]);                                                   \
            _mm512_storeu_ps(acc + 32 * r + 16, a1[r]);                                              \
        }                                                                                            \
    }
#define FLOAT_DOT_PART_512_ALL(NAME, LOAD16, ESZ)                                                     \
    FLOAT_DOT_PART_512(NAME, LOAD16, ESZ, 1)                                                         \
    FLOAT_DOT_PART_512(NAME, LOAD16, ESZ, 2)                                                         \
    FLOAT_DOT_PART_512(NAME, LOAD16, ESZ, 3)                                                         \
    FLOAT_DOT_PART_512(NAME, LOAD16, ESZ, 4)                                                         \
    T512 void NAME(int64_t n, const float *acc_in, float *acc, const void *w, const void *act,        \
                   size_t act_stride, int rows, const void *pf) {                                    \
        switch (rows) {                                                                              \
        case 1: NAME##_1(n, acc_in, acc, w, act, act_stride, pf); break;                             \
        case 2: NAME##_2(n, acc_in, acc, w, act, act_stride, pf); break;                             \
        case 3: NAME##_3(n, acc_in, acc, w, act, act_stride, pf); break;                             \
        default: NAME##_4(n, acc_in, acc, w, act, act_stride, pf); break;                            \
        }                                                                                            \
    }
FLOAT_DOT_PART_512_ALL(tokd_f16_rows_part_avx512, F16_LOAD16, 2)

/* ---- quantized rows, without VNNI ---- */
#define SFX avx512
#define TGT T512
#define DPBUSD(acc, u, s) \
    _mm512_add_epi32((acc), _mm512_madd_epi16(_mm512_maddubs_epi16((u), (s)), _mm512_set1_epi16(1)))
#define DPWSSD(acc, a, b) _mm512_add_epi32((acc), _mm512_madd_epi16((a), (b)))
#include "kernels/quants_avx512_impl.h"
#undef SFX
#undef TGT
#undef DPBUSD
#undef DPWSSD

/* ---- quantized rows, with VNNI ---- */
#define SFX avx512vnni
#define TGT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define DPBUSD(acc, u, s) _mm512_dpbusd_epi32((acc), (u), (s))
#define DPWSSD(acc, a, b) _mm512_dpwssd_epi32((acc), (a), (b))
#include "kernels/quants_avx512_impl.h"
#undef SFX
#undef TGT
#undef DPBUSD
#undef DPWSSD
