/* test_vecmath.c — vecmath.c: tokd_exp_neg within 2 ulp of exp over [-104, 0] and exact
 * at its edges; silu within 4 ulp of the double-precision value; the AVX-512 loops give
 * the scalar statements' bits for every input tried. */
#include <math.h>
#include <string.h>

#include "kernels/types.h"
#include "t.h"
#include "util.h"
#include "vecmath.h"

static void check_exp(void) {
    double worst = 0.0;
    int bad_special = 0;
    for (int i = 0; i <= 2000000; i++) {
        float x = -104.0f * (float)i / 2000000.0f;
        double want = exp((double)x), got = tokd_exp_neg(x);
        if (want < 0x1p-126) continue; /* denormal results: absolute error only */
        double ulp = ldexp(1.0, ilogb(want) - 23);
        double err = fabs(got - want) / ulp;
        if (err > worst) worst = err;
    }
    bad_special += tokd_exp_neg(0.0f) != 1.0f;
    bad_special += tokd_exp_neg(-0.0f) != 1.0f;
    bad_special += tokd_exp_neg(-200.0f) != 0.0f;
    bad_special += tokd_exp_neg(-INFINITY) != 0.0f;
    bad_special += tokd_exp_neg(5.0f) != 1.0f;
    CHECK(worst <= 2.0, "tokd_exp_neg %.2f ulp from exp", worst);
    /* the vector exponential: the scalar one's bits over the whole range */
    enum { N = 1 << 20 };
    float *x = tokd_xmalloc(sizeof(float) * N), *y = tokd_xmalloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) x[i] = -110.0f * (float)i / (float)N;
    x[7] = NAN, x[9] = -INFINITY, x[11] = 3.0f, x[13] = -0.0f;
    tokd_exp_neg_n(x, y, N);
    int bad_vec = 0;
    for (int i = 0; i < N; i++) {
        float want = tokd_exp_neg(x[i]);
        bad_vec += memcmp(&want, &y[i], 4) != 0;
    }
    CHECK(bad_vec == 0, "%d vector exponentials differ from the scalar one", bad_vec);
    free(x);
    free(y);
    CHECK(bad_special == 0, "%d special values of tokd_exp_neg wrong", bad_special);
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

int main(void) {
    tokd_kernels_init();
    check_exp();
    check_silu();
    T_DONE();
}
