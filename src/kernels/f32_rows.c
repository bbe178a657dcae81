/* f32_rows.c — F32 weight rows against F32 activation rows, on every path in the order
 * of llama.cpp's CPU products.
 *
 * Why this order. ../shared/golden was made by llama.cpp on an AVX-512 build. Its F32
 * products go through llamafile's tinyBLAS where the row length n is a multiple of 16:
 * each output one chain of FMAs over 16 lanes (element i into lane i % 16, in order),
 * the lanes folded as _mm512_reduce_add_ps folds them (tokd_reduce16). Other lengths
 * fall back to ggml_vec_dot_f32, which as GCC builds it is:
 *   - the first n & ~63 elements in 64 lanes of FMAs (element i into lane i % 64),
 *     folded lanes l + l+32 and l+16 + l+48, then l + l+16, then tokd_reduce16;
 *   - the rest added in order to that float, each product rounded first (GCC vectorises
 *     the products 16 and 8 at a time), except the last (n - body) % 8, fused into the
 *     sum (GCC contracts the scalar remainder to FMA).
 * Measured on llama.cpp's own inputs (stories260K's FFN down projection, n = 172): 0 of
 * 1536 outputs differ; 305 with every remainder product rounded. With this order, and
 * attention and SiLU as llama.cpp computes them, the F32 golden models are bit-exact.
 * tokd's F32 rows summed in 32 lanes with separate multiplies and adds until the
 * forty-second session (golden KL 1e-14 - 1e-11).
 *
 * The paths. The 16-lane order with FMA on AVX-512 (one vector) and AVX2 (two vectors,
 * lanes 0-7 and 8-15). Rows of any other length (no model has them but stories260K's
 * 172-wide FFN) run the statement's 64-lane body as four (AVX-512) or eight (AVX2)
 * vectors of FMA chains, folded as the statement folds, and its tail in order, one
 * element at a time (odd_ISA). Until the sixty-sixth session they called the statement,
 * whose fmaf is a libm call a product: a third of the time of every stories260K test
 * under ASan.
 *
 * Decode. Each output is one chain of dependent FMAs, 64 bytes of weights a step (4
 * cycles), so one row at a time streams well past one core's share of the memory
 * bandwidth. Batched decode takes one to four activation rows per weight row read
 * (stream_rows), whose chains run side by side. */
#include "kernels/f32_rows.h"

#include <immintrin.h>
#include <math.h>

#include "kernels/packed.h"
#include "kernels/page_prime.h"
#include "kernels/quants.h"
#include "kernels/row_forms.h"

void tokd_f32_dot_ref(int64_t n, float *out, const void *w, const void *act) {
    const float *wf = w, *x = act;
    if (n % 16 == 0) {
        float s[16] = {0};
        for (int64_t i = 0; i < n; i++) s[i % 16] = fmaf(wf[i], x[i], s[i % 16]);
        *out = tokd_reduce16(s);
        return;
    }
    const int64_t body = n & ~(int64_t)63, fused = n - (n - body) % 8;
    float s[64] = {0};
    for (int64_t i = 0; i < body; i++) s[i % 64] = fmaf(wf[i], x[i], s[i % 64]);
    for (int l = 0; l < 16; l++) {
        s[l] = s[l] + s[l + 32];
        s[l + 16] = s[l + 16] + s[l + 48];
    }
    for (int l = 0; l < 16; l++) s[l] = s[l] + s[l + 16];
    float sum = tokd_reduce16(s);
    for (int64_t i = body; i < fused; i++) {
        const float p = wf[i] * x[i];
        sum = sum + p;
    }
    for (int64_t i = fused; i < n; i++) sum = fmaf(wf[i], x[i], sum);
    *out = sum;
}

/* ---- the paths' operations -------------------------------------------------------- */

#define TGT_avx2 __attribute__((target("avx2,fma,f16c")))
#define TGT_avx512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
#define INLINE static inline __attribute__((always_inline))

typedef __m512 acc_avx512;
TGT_avx512 INLINE __m512 zero_avx512(void) { return _mm512_setzero_ps(); }
TGT_avx512 INLINE __m512 wload_avx512(const float *w) { return _mm512_loadu_ps(w); }
TGT_avx512 INLINE __m512 step_avx512(__m512 a, __m512 w, const float *x) { return _mm512_fmadd_ps(w, _mm512_loadu_ps(x), a); }
TGT_avx512 INLINE void store_avx512(float s[16], __m512 a) { _mm512_storeu_ps(s, a); }

typedef struct {
    __m256 lo, hi;
} acc_avx2;
typedef acc_avx2 wv_avx2;
typedef __m512 wv_avx512;
TGT_avx2 INLINE acc_avx2 zero_avx2(void) { return (acc_avx2){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
TGT_avx2 INLINE wv_avx2 wload_avx2(const float *w) { return (wv_avx2){_mm256_loadu_ps(w), _mm256_loadu_ps(w + 8)}; }
TGT_avx2 INLINE acc_avx2 step_avx2(acc_avx2 a, wv_avx2 w, const float *x) {
    a.lo = _mm256_fmadd_ps(w.lo, _mm256_loadu_ps(x), a.lo);
    a.hi = _mm256_fmadd_ps(w.hi, _mm256_loadu_ps(x + 8), a.hi);
    return a;
}
TGT_avx2 INLINE void store_avx2(float s[16], acc_avx2 a) {
    _mm256_storeu_ps(s, a.lo);
    _mm256_storeu_ps(s + 8, a.hi);
}

/* A row whose length is not a multiple of 16, in the statement's order: the 64-lane body
 * (lane l of the statement is lane l % 8 of vector l / 8 here, l % 16 of l / 16 on
 * AVX-512) and its folds, then the tail. The tail's products are rounded before their
 * addition (-ffp-contract=off keeps them apart) but the last (n - body) % 8, which are
 * fused, as fmaf is. */
TGT_avx2 INLINE float fused_step(float a, float b, float c) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}
TGT_avx2 INLINE float odd_tail(int64_t n, int64_t body, float sum, const float *w, const float *x) {
    const int64_t fused = n - (n - body) % 8;
    for (int64_t i = body; i < fused; i++) {
        const float p = w[i] * x[i];
        sum = sum + p;
    }
    for (int64_t i = fused; i < n; i++) sum = fused_step(w[i], x[i], sum);
    return sum;
}
TGT_avx2 INLINE float odd_avx2(int64_t n, const float *w, const float *x) {
    const int64_t body = n & ~(int64_t)63;
    __m256 a[8];
    _Pragma("GCC unroll 8") for (int v = 0; v < 8; v++) a[v] = _mm256_setzero_ps();
    for (int64_t i = 0; i < body; i += 64)
        _Pragma("GCC unroll 8") for (int v = 0; v < 8; v++)
            a[v] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8 * v), _mm256_loadu_ps(x + i + 8 * v), a[v]);
    /* l + l+32 and l+16 + l+48, then l + l+16 */
    _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) a[v] = _mm256_add_ps(a[v], a[v + 4]);
    float s[16];
    _mm256_storeu_ps(s, _mm256_add_ps(a[0], a[2]));
    _mm256_storeu_ps(s + 8, _mm256_add_ps(a[1], a[3]));
    return odd_tail(n, body, tokd_reduce16(s), w, x);
}
TGT_avx512 INLINE float odd_avx512(int64_t n, const float *w, const float *x) {
    const int64_t body = n & ~(int64_t)63;
    __m512 a[4];
    _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) a[v] = _mm512_setzero_ps();
    for (int64_t i = 0; i < body; i += 64)
        _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++)
            a[v] = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16 * v), _mm512_loadu_ps(x + i + 16 * v), a[v]);
    float s[16];
    _mm512_storeu_ps(s, _mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3])));
    return odd_tail(n, body, tokd_reduce16(s), w, x);
}

/* Decode's prefetches for the 64 weight bytes at p (the distances of the other float
 * rows' stream forms, dot_avx512.c and dot_avx2.c). */
INLINE void ahead_avx512(const float *p) {
    tokd_page_prime((const char *)p + TOKD_PK_DECODE_PRIME_SKIP, 64);
    tokd_pk_prefetchnta_here((const char *)p + TOKD_PK_DECODE_LINE_PF);
}
INLINE void ahead_avx2(const float *p) {
    tokd_page_prime(p, 64);
    tokd_pk_prefetch_here((const char *)p + TOKD_PK_AVX2_DECODE_LINE_PF);
}

/* ---- the kernels, once for every path --------------------------------------------- */

#define ROW(act, r, as) ((const float *)((const char *)(act) + (size_t)(r) * (as)))

/* One weight row against R = 1..4 activation rows (as bytes apart), each weight step
 * loaded once for the R; with stream set, decode's prefetches ahead of w. Every form
 * below is this with constants, unrolled, so the lane sums stay in registers. */
#define F32_KERNELS(ISA)                                                                                 \
    TGT_##ISA INLINE void rows_##ISA(int64_t n, float *out, const float *w, const void *act, size_t as,   \
                                     const int R, const int stream) {                                    \
        if (n % 16) {                                                                                    \
            for (int r = 0; r < R; r++) out[r] = odd_##ISA(n, w, ROW(act, r, as));                        \
            return;                                                                                      \
        }                                                                                                \
        acc_##ISA a[4];                                                                                  \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) a[r] = zero_##ISA();                         \
        for (int64_t i = 0; i < n; i += 16) {                                                            \
            if (stream) ahead_##ISA(w + i);                                                              \
            const wv_##ISA wv = wload_##ISA(w + i);                                                      \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) a[r] = step_##ISA(a[r], wv, ROW(act, r, as) + i); \
        }                                                                                                \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                            \
            float s[16];                                                                                 \
            store_##ISA(s, a[r]);                                                                        \
            out[r] = tokd_reduce16(s);                                                                   \
        }                                                                                                \
    }                                                                                                    \
    TOKD_ROW_FORMS(f32, ISA, TGT_##ISA)

F32_KERNELS(avx2)
F32_KERNELS(avx512)

/* Two weight rows against four activation rows (prefill): each activation vector loaded
 * once for both weight rows, eight chains of sums in flight. */
TGT_avx512 void tokd_f32_dot2x4_avx512(int64_t n, float out[8], const void *w, size_t ws, const void *act,
                                       size_t as) {
    const float *w0 = w, *w1 = (const float *)((const char *)w + ws);
    if (n % 16) {
        for (int r = 0; r < 4; r++) {
            out[r] = odd_avx512(n, w0, ROW(act, r, as));
            out[4 + r] = odd_avx512(n, w1, ROW(act, r, as));
        }
        return;
    }
    __m512 a0[4], a1[4];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) a0[r] = a1[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 u = _mm512_loadu_ps(w0 + i), v = _mm512_loadu_ps(w1 + i);
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
            __m512 x = _mm512_loadu_ps(ROW(act, r, as) + i);
            __asm__("" : "+v"(x)); /* one load for both weight rows, not one folded into each FMA */
            a0[r] = _mm512_fmadd_ps(u, x, a0[r]);
            a1[r] = _mm512_fmadd_ps(v, x, a1[r]);
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
        float s[16];
        _mm512_storeu_ps(s, a0[r]);
        out[r] = tokd_reduce16(s);
        _mm512_storeu_ps(s, a1[r]);
        out[4 + r] = tokd_reduce16(s);
    }
}

/* ---- selection --------------------------------------------------------------------- */

/* types.c has reset t's kernels: the scalar statement stays where there is no path. */
void tokd_f32_select(tokd_type_traits *t, bool avx2, bool avx512) {
    if (avx512) {
        t->vec_dot = tokd_f32_dot_avx512;
        t->vec_dot_stream = tokd_f32_stream_dot_avx512;
        t->vec_dot4 = tokd_f32_dot4_avx512;
        t->vec_dot2x4 = tokd_f32_dot2x4_avx512;
        t->vec_dot_stream_rows = tokd_f32_stream_rows_avx512;
    } else if (avx2) {
        t->vec_dot = tokd_f32_dot_avx2;
        t->vec_dot_stream = tokd_f32_stream_dot_avx2;
        t->vec_dot4 = tokd_f32_dot4_avx2;
        t->vec_dot_stream_rows = tokd_f32_stream_rows_avx2;
    }
}
