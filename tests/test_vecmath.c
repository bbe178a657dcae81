/* test_vecmath.c — vecmath.c: tokd_exp within 2.5 ulp of exp over [-103, 88], ggml's
 * value where that is not the correctly rounded one, exact at its edges; silu within 4 ulp of the double-precision value; the selected loops and
 * the AVX2 loops (on any CPU with AVX2, FMA and F16C) give the scalar statements' bits
 * for every input tried, NaN, infinities, zeros, huge and tiny values included; RMSNorm
 * likewise, at every tail length. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/types.h"
#include "t.h"
#include "util.h"
#include "vecmath.h"

/* Values where ggml's AVX-512 expf (which made ../shared/golden, and whose softmax and
 * SiLU output tokd reproduces bit for bit) is not the correctly rounded exp: the
 * statement must give ggml's value, including a subnormal result rounded once. */
static const float exp_pins[][2] = {
    {-0x1.75cc64p+6f, 0x1.2228p-135f}, /* correctly rounded 0x1.222cp-135 */
    {-0x1.2965fcp+6f, 0x1.aa7168p-108f}, /* 0x1.aa716cp-108 */
    {-0x1.b9ff24p+5f, 0x1.395daap-80f},  /* 0x1.395dacp-80 */
    {-0x1.21325p+5f, 0x1.cc8b9cp-53f},   /* 0x1.cc8b9ep-53 */
    {-0x1.10cbp+4f, 0x1.526c48p-25f},    /* 0x1.526c46p-25 */
    {0x1.06754p+1f, 0x1.f15efap+2f},     /* 0x1.f15efcp+2 */
    {0x1.52685p+4f, 0x1.6d7c8p+30f},     /* 0x1.6d7c82p+30 */
    {0x1.420108p+5f, 0x1.0c942ep+58f},   /* 0x1.0c943p+58 */
};

static void check_exp(void) {
    double worst = 0.0;
    int bad_special = 0, bad_pin = 0;
    for (int i = 0; i <= 2000000; i++) {
        float x = -103.0f + 191.0f * (float)i / 2000000.0f;
        double want = exp((double)x), got = tokd_exp(x);
        if (want < 0x1p-126) continue; /* denormal results: absolute error only */
        double ulp = ldexp(1.0, ilogb(want) - 23);
        double err = fabs(got - want) / ulp;
        if (err > worst) worst = err;
    }
    for (size_t i = 0; i < sizeof exp_pins / sizeof exp_pins[0]; i++) {
        float got = tokd_exp(exp_pins[i][0]), got_v;
        tokd_exp_n(&exp_pins[i][0], &got_v, 1);
        bad_pin += memcmp(&got, &exp_pins[i][1], 4) != 0;
        bad_pin += memcmp(&got_v, &exp_pins[i][1], 4) != 0;
    }
    bad_special += tokd_exp(0.0f) != 1.0f;
    bad_special += tokd_exp(-0.0f) != 1.0f;
    bad_special += tokd_exp(-200.0f) != 0.0f;
    bad_special += tokd_exp(-INFINITY) != 0.0f;
    bad_special += tokd_exp(100.0f) != INFINITY;
    bad_special += tokd_exp(INFINITY) != INFINITY;
    bad_special += !isnan(tokd_exp(NAN));
    bad_special += tokd_exp(-104.0f) != 0.0f; /* below 2^-150 */
    CHECK(worst <= 2.5, "tokd_exp %.2f ulp from exp", worst);
    CHECK(bad_pin == 0, "%d of ggml's exp values not reproduced", bad_pin);
    /* the vector exponential: the scalar one's bits over the whole range */
    enum { N = 1 << 20 };
    float *x = tokd_xmalloc(sizeof(float) * N), *y = tokd_xmalloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) x[i] = -110.0f + 210.0f * (float)i / (float)N;
    x[7] = NAN, x[9] = -INFINITY, x[11] = INFINITY, x[13] = -0.0f;
    tokd_exp_n(x, y, N);
    int bad_vec = 0;
    for (int i = 0; i < N; i++) {
        float want = tokd_exp(x[i]);
        bad_vec += isnan(want) ? !isnan(y[i]) : memcmp(&want, &y[i], 4) != 0; /* NaN: any payload */
    }
    CHECK(bad_vec == 0, "%d vector exponentials differ from the scalar one", bad_vec);
    free(x);
    free(y);
    CHECK(bad_special == 0, "%d special values of tokd_exp wrong", bad_special);
}

static void check_silu(void) {
    enum { N = 1 << 20 };
    float *g = tokd_xmalloc(sizeof(float) * N), *u = tokd_xmalloc(sizeof(float) * N), *y = tokd_xmalloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) {
        g[i] = -120.0f + 240.0f * (float)i / (float)N;
        u[i] = (i % 3 == 0) ? 1.0f : 0.5f - (float)(i % 101) / 50.0f;
    }
    g[5] = 0.0f, g[6] = -0.0f, g[7] = 1e-30f, g[8] = -1e-30f, g[9] = 88.0f, g[10] = -88.0f;
    memcpy(y, g, sizeof(float) * N);
    tokd_swiglu_n(y, u, N);
    int bad = 0;
    double worst = 0.0;
    for (int i = 0; i < N; i++) {
        float want = tokd_silu(g[i]) * u[i];
        bad += memcmp(&want, &y[i], 4) != 0;
        double exact = (double)g[i] / (1.0 + exp(-(double)g[i]));
        float s = tokd_silu(g[i]);
        if (fabs(exact) > 1e-30) {
            double ulp = ldexp(1.0, ilogb(exact) - 23);
            double err = fabs(s - exact) / ulp;
            if (err > worst) worst = err;
        }
    }
    CHECK(bad == 0, "%d vector SwiGLU values differ from the scalar statement", bad);
    CHECK(worst <= 4.0, "silu %.2f ulp from the exact value", worst);
    free(g);
    free(u);
    free(y);
}

/* The FFN's SwiGLU by columns: the row's last width % 16 columns in ggml's scalar form
 * (libm's expf), the others tokd_swiglu_n's, whatever the split into calls; the inputs
 * tell the two forms apart somewhere. */
static void check_swiglu_cols(void) {
    enum { W = 1000 + 13 };
    float g[W], u[W], want[W], got[W];
    for (int i = 0; i < W; i++) g[i] = -12.0f + 24.0f * (float)i / (float)W, u[i] = 0.5f + (float)(i % 7) * 0.25f;
    const int body = W - W % 16;
    memcpy(want, g, sizeof g);
    tokd_swiglu_n(want, u, body);
    int forms_differ = 0;
    for (int i = body; i < W; i++) {
        const float s = g[i] / (1.0f + expf(-g[i])), v = tokd_silu(g[i]);
        forms_differ += s != v;
        want[i] = s * u[i];
    }
    for (int i = 0; i < body; i++) {
        const float v = tokd_silu(g[i]) * u[i], s = g[i] / (1.0f + expf(-g[i])) * u[i];
        forms_differ += v != s;
    }
    int bad = 0;
    for (int split = 0; split <= W; split += 97) { /* two calls, split anywhere */
        memcpy(got, g, sizeof g);
        tokd_swiglu_cols(got, u, split, 0, W);
        tokd_swiglu_cols(got + split, u + split, W - split, split, W);
        bad += memcmp(got, want, sizeof got) != 0;
    }
    CHECK(forms_differ > 0, "the SwiGLU inputs tell libm's form from tokd_exp's");
    CHECK(bad == 0, "%d splits of tokd_swiglu_cols differ from its statement", bad);
}

static float bits_f(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* The same bits, or both NaN: silu(NaN) multiplies two NaNs (g * E), and which one's
 * sign and payload come out is the compiler's choice of operand order (the statement
 * inlined into tokd_swiglu_n and called out of line already differ), not arithmetic. */
static int differ_silu(float want, float got) {
    if (isnan(want) && isnan(got)) return 0;
    return memcmp(&want, &got, 4) != 0;
}

/* The AVX2 loops against the statements, the selected path whatever it is: every value
 * of a sweep plus the special ones, at every offset of an 8-lane vector and with tails. */
static void check_avx2(void) {
    const tokd_cpu_features *c = tokd_cpu();
    enum { N = 1 << 18 };
    float *x = tokd_xmalloc(sizeof(float) * N), *y = tokd_xmalloc(sizeof(float) * N);
    float *u = tokd_xmalloc(sizeof(float) * N), *g = tokd_xmalloc(sizeof(float) * N);
    if (!(c->avx2 && c->fma && c->f16c)) {
        CHECK(tokd_exp_n_avx2(x, y, 8) == -1 && tokd_swiglu_n_avx2(g, u, 8) == -1,
              "the AVX2 loops refuse a CPU without AVX2, FMA and F16C");
        goto out;
    }
    const float special[] = {NAN, -NAN, bits_f(0x7fa00001u), bits_f(0xffc12345u), INFINITY, -INFINITY, 0.0f, -0.0f,
                             1e30f, -1e30f, FLT_MAX, -FLT_MAX, 1e-40f, -1e-40f, FLT_MIN, -FLT_MIN, 1e-30f,
                             -1e-30f, -103.99f, -104.0f, -104.01f, -87.34f, -88.73f, 88.73f, -0.5f, 0.5f,
                             -1.0f, 1.0f, -16.635532f, 104.0f, 200.0f, -200.0f, 3.0f, -3.0f};
    const int n_special = (int)(sizeof special / sizeof special[0]);
    for (int i = 0; i < N; i++) {
        x[i] = -240.0f + 250.0f * (float)i / (float)N; /* both signs, past the overflow at 88.7 */
        u[i] = (i % 3 == 0) ? 1.0f : 0.5f - (float)(i % 101) / 50.0f;
    }
    /* each special value at every lane offset, in the vector body and in the tail */
    for (int j = 0; j < n_special; j++)
        for (int o = 0; o < 8; o++) x[1000 + j * 8 + o + (j % 3)] = special[j], x[N - 1 - ((j * 8 + o) % 7)] = special[j];
    for (int j = 0; j < n_special; j++) u[3000 + j * 9] = special[j]; /* special multipliers too */
    int bad_exp = 0, bad_silu = 0, rc = 0;
    for (int64_t n = N - 7; n <= N; n++) { /* every tail length, 0..7 */
        memset(y, 0xA5, sizeof(float) * N);
        rc |= tokd_exp_n_avx2(x, y, n);
        for (int64_t i = 0; i < n; i++) {
            float want = tokd_exp(x[i]);
            bad_exp += isnan(want) ? !isnan(y[i]) : memcmp(&want, &y[i], 4) != 0;
        }
        float sentinel = bits_f(0xA5A5A5A5u);
        bad_exp += n < N && memcmp(&y[n], &sentinel, 4) != 0; /* nothing past n */
    }
    for (int64_t n = N - 7; n <= N; n += 3) {
        memcpy(g, x, sizeof(float) * N);
        rc |= tokd_swiglu_n_avx2(g, u, n);
        for (int64_t i = 0; i < N; i++) {
            float want = i < n ? tokd_silu(x[i]) * u[i] : x[i];
            bad_silu += i < n ? differ_silu(want, g[i]) : memcmp(&want, &g[i], 4) != 0;
        }
    }
    CHECK(rc == 0, "the AVX2 loops run on a CPU with AVX2, FMA and F16C");
    CHECK(bad_exp == 0, "%d AVX2 exponentials differ from the scalar statement", bad_exp);
    CHECK(bad_silu == 0, "%d AVX2 SwiGLU values differ from the scalar statement", bad_silu);
    /* the selected path on the same inputs */
    int bad_sel = 0;
    tokd_exp_n(x, y, N);
    memcpy(g, x, sizeof(float) * N);
    tokd_swiglu_n(g, u, N);
    for (int64_t i = 0; i < N; i++) {
        float we = tokd_exp(x[i]), ws = tokd_silu(x[i]) * u[i];
        bad_sel += isnan(we) ? !isnan(y[i]) : memcmp(&we, &y[i], 4) != 0;
        bad_sel += differ_silu(ws, g[i]);
    }
    CHECK(bad_sel == 0, "%d values of the %s path differ from the scalar statements on special inputs", bad_sel,
          tokd_kernels_path());
out:
    free(x);
    free(y);
    free(u);
    free(g);
}

/* RMSNorm: the selected path and the AVX2 loop give the scalar statement's bits at
 * every length 1..100 and around the model widths (tails of every size), write nothing
 * past n, and the statement is within 4 ulp of the norm computed in double. */
static void check_rmsnorm(void) {
    enum { N = 8200 };
    float *x = tokd_xmalloc(sizeof(float) * N), *w = tokd_xmalloc(sizeof(float) * N);
    float *want = tokd_xmalloc(sizeof(float) * (N + 16)), *got = tokd_xmalloc(sizeof(float) * (N + 16));
    uint32_t r = 12345;
    for (int i = 0; i < N; i++) {
        r = r * 1664525u + 1013904223u;
        float m = (float)((r >> 8) & 0xFFFF) / 32768.0f - 1.0f;
        x[i] = m * ((i % 97 == 0) ? 300.0f : (i % 13 == 0) ? 1e-3f : 1.5f); /* a wide dynamic range */
        w[i] = 0.25f + (float)(i % 37) / 20.0f;
    }
    const bool avx2 = tokd_cpu()->avx2 && tokd_cpu()->fma && tokd_cpu()->f16c;
    int bad_sel = 0, bad_avx2 = 0, bad_tail = 0, rc = 0;
    double worst = 0.0;
    const float sentinel = bits_f(0xA5A5A5A5u);
    for (int n = 1; n <= N; n = n < 100 ? n + 1 : n < 2040 ? 2040 : n < 2056 ? n + 1 : n < 5624 ? 5624 : n < 5640 ? n + 1 : n + 1279) {
        tokd_rmsnorm_ref(want, x, w, n, 1e-5f);
        double ss = 0.0;
        for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
        double sc = 1.0 / sqrt(ss / n + 1e-5);
        for (int i = 0; i < n; i++) {
            double exact = (double)x[i] * sc * w[i];
            if (fabs(exact) < 1e-30) continue;
            double err = fabs(want[i] - exact) / ldexp(1.0, ilogb(exact) - 23);
            if (err > worst) worst = err;
        }
        for (int path = 0; path < 2; path++) {
            if (path == 1 && !avx2) continue;
            for (int i = 0; i < n + 16; i++) got[i] = sentinel;
            if (path == 0) tokd_rmsnorm(got, x, w, n, 1e-5f);
            else rc |= tokd_rmsnorm_avx2(got, x, w, n, 1e-5f);
            int d = memcmp(want, got, sizeof(float) * (size_t)n) != 0;
            bad_sel += path == 0 && d;
            bad_avx2 += path == 1 && d;
            for (int i = n; i < n + 16; i++) bad_tail += memcmp(&got[i], &sentinel, 4) != 0;
        }
    }
    CHECK(worst <= 4.0, "RMSNorm statement %.2f ulp from the norm in double", worst);
    CHECK(bad_sel == 0, "%d lengths where the %s RMSNorm differs from the scalar statement", bad_sel, tokd_kernels_path());
    CHECK(bad_avx2 == 0 && rc == 0, "%d lengths where the AVX2 RMSNorm differs from the scalar statement", bad_avx2);
    CHECK(avx2 || tokd_rmsnorm_avx2(got, x, w, 8, 1e-5f) == -1, "the AVX2 RMSNorm refuses a CPU without AVX2, FMA and F16C");
    CHECK(bad_tail == 0, "%d values written past the row", bad_tail);
    free(x);
    free(w);
    free(want);
    free(got);
}

/* The element-wise moves: the AVX2 loops and the selected path against the scalar
 * statements at every length 0..40 (vector bodies, tails) and on a sweep. The F16
 * conversion's sweep takes every exponent, both signs, and mantissas that end exactly on,
 * just below and just above a rounding tie, so that overflow to infinity (65520), the
 * subnormals and their underflow to zero (2^-25 rounds to 0, just above it to 2^-24) are
 * all crossed; a NaN must stay a NaN of the same sign. */
static int differ_f16(float x, uint16_t want, uint16_t got) {
    if (isnan(x)) return (got & 0x7fffu) <= 0x7c00u || (got & 0x8000u) != (want & 0x8000u);
    return want != got;
}
static void check_moves(void) {
    const bool avx2 = tokd_cpu()->avx2 && tokd_cpu()->fma && tokd_cpu()->f16c;
    enum { N = 256 * 2 * 64 };
    float *x = tokd_xmalloc(sizeof(float) * N), *a = tokd_xmalloc(sizeof(float) * N);
    float *a2 = tokd_xmalloc(sizeof(float) * N);
    uint16_t *h = tokd_xmalloc(sizeof(uint16_t) * (N + 8));
    const uint32_t tails[8] = {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x1fffu, 0x2000u, 0x3000u};
    int i = 0;
    for (uint32_t e = 0; e < 256; e++)
        for (uint32_t s = 0; s < 2; s++)
            for (uint32_t m = 0; m < 64; m++, i++) /* m's high bits pick the upper mantissa, the low 3 the tail */
                x[i] = bits_f(s << 31 | e << 23 | ((m >> 3) * 0x2b5e000u & 0x7fe000u) | tails[m & 7]);
    int bad_avx2 = 0, bad_sel = 0, rc = 0;
    for (int64_t n = 0; n <= N; n = n < 40 ? n + 1 : n + (N - 40) / 3) {
        const uint16_t sentinel = 0xA5A5;
        for (int p = 0; p < 2; p++) {
            if (p == 0 && !avx2) continue;
            for (int64_t j = 0; j < N + 8; j++) h[j] = sentinel;
            if (p == 0) rc |= tokd_f32_to_f16_n_avx2(h, x, n);
            else tokd_f32_to_f16_n(h, x, n);
            int bad = h[n] != sentinel; /* nothing past n */
            for (int64_t j = 0; j < n; j++) bad += differ_f16(x[j], tokd_f32_to_f16(x[j]), h[j]);
            for (int64_t j = 0; j < N; j++) a[j] = a2[j] = x[(j * 7) % N] * 0.5f; /* a mix of magnitudes */
            if (p == 0) rc |= tokd_add_n_avx2(a, x, n);
            else tokd_add_n(a, x, n);
            for (int64_t j = 0; j < N; j++) {
                float want = j < n ? a2[j] + x[j] : a2[j];
                bad += memcmp(&want, &a[j], 4) != 0 && !(isnan(want) && isnan(a[j]));
            }
            if (p == 0) bad_avx2 += bad;
            else bad_sel += bad;
        }
    }
    CHECK(rc == 0, "the AVX2 moves run on a CPU with AVX2, FMA and F16C");
    CHECK(bad_avx2 == 0, "%d AVX2 F16 conversions or adds differ from the scalar statements", bad_avx2);
    CHECK(bad_sel == 0, "%d F16 conversions or adds of the %s path differ from the scalar statements", bad_sel,
          tokd_kernels_path());
    CHECK(avx2 || (tokd_add_n_avx2(a, x, 8) == -1 && tokd_f32_to_f16_n_avx2(h, x, 8) == -1),
          "the AVX2 moves refuse a CPU without AVX2, FMA and F16C");
    /* the boundaries named above, by value */
    const float at[] = {65504.0f, 65519.99f, 65520.0f, 5.9604645e-8f /* 2^-24 */, 2.9802322e-8f /* 2^-25 */,
                        2.9802326e-8f, 6.1035156e-5f /* 2^-14 */};
    const uint16_t want_at[] = {0x7bff, 0x7bff, 0x7c00, 0x0001, 0x0000, 0x0001, 0x0400};
    for (int j = 0; j < 7; j++) {
        uint16_t got[8];
        float v[8];
        for (int k = 0; k < 8; k++) v[k] = at[j];
        tokd_f32_to_f16_n(got, v, 8);
        CHECK(tokd_f32_to_f16(at[j]) == want_at[j] && got[0] == want_at[j], "F16 of %g: 0x%04x (scalar 0x%04x), want 0x%04x",
              (double)at[j], got[0], tokd_f32_to_f16(at[j]), want_at[j]);
    }
    free(x);
    free(a);
    free(a2);
    free(h);
}

int main(void) {
    tokd_kernels_init();
    check_exp();
    check_silu();
    check_swiglu_cols();
    check_avx2();
    check_rmsnorm();
    check_moves();
    T_DONE();
}
