/* test_quants_weighted.c — the quantisers with an importance matrix (quants_weighted.c,
 * tokd_<type>_from_float_w, tokd_type_traits.from_float_w).
 *
 * (a) known answers: for each of the 11 types, rows of fixed pseudo-random data and
 *     importance weights (Gaussian; a wide dynamic range with outliers; zero stretches
 *     with zero weights; all zeros; weights zero over whole blocks and a whole
 *     super-block; one and three blocks of 32) quantise to bytes whose FNV-1a hash is
 *     that of llama.cpp's quantize_<type>(src, dst, 1, n, qw) on the same rows.
 * (b) properties: over many rows with one strongly non-uniform qw (as an imatrix gives a
 *     matrix), the qw-weighted squared error is below both from_float's and that of
 *     from_float_w given uniform weights (so it fails if qw were ignored); dequantised
 *     values finite; all-zero rows give zeros; nothing written past the row.
 * (c) the table: from_float_w set exactly for the 11 types and the grid types that have
 *     a quantiser. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "kernels/quantize_iq1.h"
#include "kernels/quantize_iq2.h"
#include "kernels/quantize_iq3.h"
#include "kernels/quants.h"
#include "kernels/types.h"
#include "t.h"
#include "t_hash.h"
#include "t_rand.h"

typedef void (*wquant_fn)(const float *src, void *dst, int64_t n, const float *qw);
static const struct {
    uint32_t id;
    wquant_fn fn;
} WTYPES[] = {
    {GGML_TYPE_Q4_0, tokd_q4_0_from_float_w},     {GGML_TYPE_Q4_1, tokd_q4_1_from_float_w},
    {GGML_TYPE_Q5_0, tokd_q5_0_from_float_w},     {GGML_TYPE_Q5_1, tokd_q5_1_from_float_w},
    {GGML_TYPE_Q2_K, tokd_q2_K_from_float_w},     {GGML_TYPE_Q3_K, tokd_q3_K_from_float_w},
    {GGML_TYPE_Q4_K, tokd_q4_K_from_float_w},     {GGML_TYPE_Q5_K, tokd_q5_K_from_float_w},
    {GGML_TYPE_Q6_K, tokd_q6_K_from_float_w},     {GGML_TYPE_IQ4_NL, tokd_iq4_nl_from_float_w},
    {GGML_TYPE_IQ4_XS, tokd_iq4_xs_from_float_w},
};
#define N_WTYPES (sizeof WTYPES / sizeof WTYPES[0])

/* ---- (a) known answers ---- */

/* The rows: n, and what make_case puts in them. The last two are for the 32-element
 * types only. */
static const struct {
    const char *what;
    int64_t n;
} CASES[] = {
    {"gaussian", 256},
    {"wide dynamic range, outliers", 512},
    {"zero stretches, outliers, 1 in 8 weights zero", 4096},
    {"all zeros", 256},
    {"weights zero over a block of 32 and a super-block", 512},
    {"three blocks of 32, offset", 96},
    {"one block of 32", 32},
};
#define N_CASES (sizeof CASES / sizeof CASES[0])

/* Row c of the known answers: x[n] and qw[n] from c alone. */
static void make_case(int c, float *x, float *qw, int64_t n) {
    uint64_t r = 0xC0FFEE00ull + (uint64_t)c;
    for (int64_t i = 0; i < n; i++) {
        float v = 0, w = 1;
        switch (c) {
        case 0:
            v = 0.02f * t_rand_gauss(&r);
            w = (float)exp(1.5 * t_rand_gauss(&r));
            break;
        case 1:
            v = (float)(t_rand_gauss(&r) * pow(10, 3 * t_rand_pm1(&r)));
            if (i % 37 == 5) v *= 40;
            w = (float)exp(3 * t_rand_gauss(&r));
            break;
        case 2:
            v = 0.5f * t_rand_gauss(&r);
            if (t_rand_u64(&r) % 97 == 0) v *= 12;
            if ((i / 64) % 7 == 3) v = 0;
            w = t_rand_u64(&r) % 8 == 0 ? 0 : (float)exp(2 * t_rand_gauss(&r));
            break;
        case 3:
            w = (float)exp(t_rand_gauss(&r));
            break;
        case 4:
            v = t_rand_gauss(&r);
            w = (i >= 32 && i < 64) || i >= 256 ? 0 : (float)exp(t_rand_gauss(&r));
            break;
        case 5:
            v = 3 * t_rand_gauss(&r) - 1;
            w = 0.1f + 0.9f * (float)t_rand_unit(&r);
            break;
        default:
            v = 7 * t_rand_half(&r);
            w = (float)exp(2 * t_rand_gauss(&r));
            break;
        }
        x[i] = v, qw[i] = w;
    }
}

/* FNV-1a 64 of llama.cpp c392e5094's quantize_<type>(x, dst, 1, n, qw), quant_weights =
 * qw, for WTYPES[t] and row CASES[c] (make_case), from a program that includes this file
 * for make_case and links llama.cpp's libggml-base.so (after ggml_init, which fills the
 * fp16 table its K-quants read their scales back through); 0 where the row does not fit
 * the type's block. Row 4's super-block of zero weights gives llama.cpp (and tokd) NaN
 * scales for Q2_K, Q4_K and Q5_K, and its zero-weight blocks of 32 NaN for IQ4_NL: the
 * hashes hold those bytes too. */
static const uint64_t EXPECT[N_WTYPES][N_CASES] = {
    {0xcc7781536973d0b0ull, 0xfdfaa317136a86d7ull, 0x8413566b0cd2f4beull, 0xec32669a74fcae65ull,
     0x26e36eabb6c8c508ull, 0x80b3862a48408d2full, 0xebbe444ea329171dull}, /* Q4_0 */
    {0x601ebd8f055fa5c6ull, 0xb9896915205f1622ull, 0xb050706bb2be54c8ull, 0x81b169c331cabfa5ull,
     0x15874227a260bcfaull, 0x0eb387d3c42631caull, 0xea0e899061b4f2f0ull}, /* Q4_1 */
    {0x826f5bfb2135218aull, 0xc93476ec41d123e7ull, 0xc75f889a8404e4d3ull, 0xad7f8afd9dfb20e5ull,
     0x2429421d573ebaffull, 0xcb0f003394706a04ull, 0x4df89aca7301f237ull}, /* Q5_0 */
    {0xd7c996475675c12dull, 0x62b5882f2ac558fcull, 0x4ad0c36c8ac4e235ull, 0xab0c262759a1d225ull,
     0x80ec80a5f657d67bull, 0x834ab4451df20f60ull, 0xf71d3a2de18f6479ull}, /* Q5_1 */
    {0x1aaf355a994c68b0ull, 0xbceaf785ba9918b4ull, 0x47f37bbc53df70deull, 0x6975f1271857fe35ull,
     0x1aa5d79fd436d618ull, 0x0000000000000000ull, 0x0000000000000000ull}, /* Q2_K */
    {0xfccecf0ee54201d2ull, 0x8414685d41fc3f67ull, 0x37cb7438b485fe73ull, 0x76c519d78418065dull,
     0xc6f406bfcffe5438ull, 0x0000000000000000ull, 0x0000000000000000ull}, /* Q3_K */
    {0x77df4743d19cc01dull, 0x889e9c5cb9ca7cf6ull, 0xca490ad84e5a1a1eull, 0xec32669a74fcae65ull,
     0x312f0484dca272b1ull, 0x0000000000000000ull, 0x0000000000000000ull}, /* Q4_K */
    {0xaab729f054184a5bull, 0xa4061b28347be465ull, 0x015fce08f72c352dull, 0xad7f8afd9dfb20e5ull,
     0x34678099a9277fbbull, 0x0000000000000000ull, 0x0000000000000000ull}, /* Q5_K */
    {0x04b6ab1141be3ebaull, 0x3a1d35c3a7c4a981ull, 0xb094c54b2c6c4d29ull, 0x51d8f4040b006a2dull,
     0x992f07ba2e8a9d77ull, 0x0000000000000000ull, 0x0000000000000000ull}, /* Q6_K */
    {0x1af9e8789c8c795full, 0xaf2ff070fa7a2f67ull, 0x62056f1f3d066bc4ull, 0x8896fdfef75dec65ull,
     0xd04349f7433c0088ull, 0xa259c6d5d8625da1ull, 0x4ce8137998789a6eull}, /* IQ4_NL */
    {0xd0e4e738a95d6ae8ull, 0xc2ee413858f9dd85ull, 0x18c5c4f534a2f88aull, 0xe937020c18d8434dull,
     0x3c543c3603b9c52eull, 0x0000000000000000ull, 0x0000000000000000ull}, /* IQ4_XS */
};

static void test_known_answers(void) {
    float *x = malloc(sizeof(float) * 4096), *qw = malloc(sizeof(float) * 4096);
    uint8_t *q = malloc(4096 * 2);
    for (size_t t = 0; t < N_WTYPES; t++) {
        const tokd_type_traits *tt = tokd_type_get(WTYPES[t].id);
        for (size_t c = 0; c < N_CASES; c++) {
            const int64_t n = CASES[c].n;
            if (n % tt->blck) continue;
            make_case((int)c, x, qw, n);
            WTYPES[t].fn(x, q, n, qw);
            const uint64_t h = t_fnv1a(q, tokd_row_bytes(tt, n));
            CHECK(h == EXPECT[t][c], "%s, %s (n %lld): hash %016llx, llama.cpp's %016llx", tt->name, CASES[c].what,
                  (long long)n, (unsigned long long)h, (unsigned long long)EXPECT[t][c]);
        }
    }
    free(x), free(qw), free(q);
}

/* ---- (a') known answers without weights, on degenerate rows ----
 * The quantisers without an importance matrix (from_float, quants.c) give llama.cpp's
 * bytes also where its arithmetic leaves the ordinary range: values spread over twelve
 * decades (scales rounding to huge or negative integers, kept modulo 256 as ggml keeps
 * them in a uint8 or int8) and values so large that the FP16 scales overflow to
 * infinity (ggml's rounding then reads NaN and infinities as its bit trick does). */
static const struct {
    const char *what;
    int64_t n;
} PLAIN_CASES[] = {
    {"values over twelve decades", 512},
    {"values near 1e6: scales overflow FP16", 256},
    {"a single huge outlier", 256},
};
#define N_PLAIN (sizeof PLAIN_CASES / sizeof PLAIN_CASES[0])
static void make_plain_case(int c, float *x, int64_t n) {
    uint64_t r = 0xBADF00Dull + (uint64_t)c;
    for (int64_t i = 0; i < n; i++) {
        double v = t_rand_gauss(&r);
        x[i] = (float)(c == 0 ? v * pow(10, 6 * t_rand_pm1(&r)) : c == 1 ? v * 1e6 : i == 77 ? 3e9 : v);
    }
}
/* FNV-1a 64 of llama.cpp c392e5094's quantize_<type>(x, dst, 1, n, NULL) on those rows
 * (the same generator as EXPECT). */
static const uint64_t EXPECT_PLAIN[N_WTYPES][N_PLAIN] = {
    {0x8b7ff418147d2aa4ull, 0xbf27278206ca2e1dull, 0x91ffa038cd7c5fa7ull}, /* Q4_0 */
    {0x136b0f26eb699cd5ull, 0x9801a360d4ab9279ull, 0x92f78a4d432d09cbull}, /* Q4_1 */
    {0x70890fe5a9fb3c9aull, 0xa7249795763cf5f9ull, 0xf208c2f5ebf5bc0cull}, /* Q5_0 */
    {0x481ec3f42b74f690ull, 0x7742431e14f8842aull, 0x1e373f8535bf8bb2ull}, /* Q5_1 */
    {0x2283d45b947ed695ull, 0xc593e3b645968cbeull, 0xc39f7d5761dcd929ull}, /* Q2_K */
    {0x04d9fae457fa7e0cull, 0x65a54af6e8524acdull, 0x0d2ec78bed370a51ull}, /* Q3_K */
    {0x54e54f2b2dad7dbeull, 0x7a9113a684d1fbfaull, 0x9eaa718120c97417ull}, /* Q4_K */
    {0x6bc29fba512b6358ull, 0xe6dfe44895d544e6ull, 0x3f7b494f2b157e61ull}, /* Q5_K */
    {0xa39c60244f968855ull, 0xdc770423d5705eb5ull, 0xc721b206a0884239ull}, /* Q6_K */
    {0x973ec8c3801f0e39ull, 0x18f73fc7955055beull, 0xab20721f201616a3ull}, /* IQ4_NL */
    {0xa107bd3f7486ac01ull, 0x4d313d647db7a6eaull, 0x1a668f09d8154084ull}, /* IQ4_XS */
};
static void test_plain_known_answers(void) {
    float x[512];
    uint8_t q[512 * 2];
    for (size_t t = 0; t < N_WTYPES; t++) {
        const tokd_type_traits *tt = tokd_type_get(WTYPES[t].id);
        for (size_t c = 0; c < N_PLAIN; c++) {
            make_plain_case((int)c, x, PLAIN_CASES[c].n);
            tt->from_float(x, q, PLAIN_CASES[c].n);
            uint64_t h = t_fnv1a(q, tokd_row_bytes(tt, PLAIN_CASES[c].n));
            CHECK(h == EXPECT_PLAIN[t][c], "%s without weights, %s: hash %016llx, llama.cpp's %016llx", tt->name,
                  PLAIN_CASES[c].what, (unsigned long long)h, (unsigned long long)EXPECT_PLAIN[t][c]);
        }
    }
}

/* ---- (b) properties ---- */

/* sum over the rows of sum_i qw[i] * (x[i] - y[i])^2 */
static double weighted_error(const float *x, const float *y, const float *qw, int64_t n, int rows) {
    double e = 0;
    for (int r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++) {
            const double d = (double)x[r * n + i] - y[r * n + i];
            e += qw[i] * d * d;
        }
    return e;
}

static void test_weighted_error(void) {
    /* Bounds on E_w / E_from_float and E_w / E_uniform (from_float_w given qw all 1), the
       errors weighted by qw. Measured: the two ratios; and, in brackets, E_uniform /
       E_from_float, what the first would be if qw were ignored (the second would be 1):
       each bound lies between. */
    static const struct {
        uint32_t id;
        double max_vs_plain, max_vs_uniform;
    } B[] = {
        {GGML_TYPE_Q4_0, 0.75, 0.78},   /* 0.614 0.632 [0.971] */
        {GGML_TYPE_Q4_1, 0.45, 0.50},   /* 0.288 0.364 [0.791] */
        {GGML_TYPE_Q5_0, 0.80, 0.85},   /* 0.683 0.721 [0.946] */
        {GGML_TYPE_Q5_1, 0.50, 0.55},   /* 0.320 0.390 [0.821] */
        {GGML_TYPE_Q2_K, 0.50, 0.60},   /* 0.330 0.427 [0.773] */
        {GGML_TYPE_Q3_K, 0.72, 0.75},   /* 0.587 0.605 [0.969] */
        {GGML_TYPE_Q4_K, 0.60, 0.60},   /* 0.427 0.438 [0.977] */
        {GGML_TYPE_Q5_K, 0.68, 0.70},   /* 0.523 0.541 [0.966] */
        {GGML_TYPE_Q6_K, 0.75, 0.75},   /* 0.614 0.606 [1.014] */
        {GGML_TYPE_IQ4_NL, 0.68, 0.70}, /* 0.530 0.547 [0.968] */
        {GGML_TYPE_IQ4_XS, 0.75, 0.75}, /* 0.595 0.604 [0.986] */
    };
    const int64_t n = 512;
    const int rows = 96;
    uint64_t r = 0x1A7E1A7Eull;
    float *x = malloc(sizeof(float) * n * rows), *y = malloc(sizeof(float) * n * rows);
    float *qw = malloc(sizeof(float) * n), *ones = malloc(sizeof(float) * n);
    uint8_t *q = malloc((size_t)n * rows * 2 + 64);
    for (int64_t i = 0; i < n; i++) qw[i] = (float)exp(2.5 * t_rand_gauss(&r)), ones[i] = 1;
    for (int64_t i = 0; i < n * rows; i++) x[i] = t_rand_gauss(&r) * (t_rand_u64(&r) % 100 == 0 ? 8 : 1);
    for (size_t k = 0; k < sizeof B / sizeof B[0]; k++) {
        const tokd_type_traits *t = tokd_type_get(B[k].id);
        const size_t rb = tokd_row_bytes(t, n);
        double e[3];
        int nonfinite = 0, overrun = 0;
        for (int way = 0; way < 3; way++) {
            for (int i = 0; i < rows; i++) {
                uint8_t *qr = q + rb * (size_t)i;
                memset(qr + rb, 0xA5, 16);
                if (way == 0) t->from_float_w(x + n * i, qr, n, qw);
                if (way == 1) t->from_float(x + n * i, qr, n);
                if (way == 2) t->from_float_w(x + n * i, qr, n, ones);
                for (int j = 0; j < 16; j++) overrun += qr[rb + j] != 0xA5;
                t->to_float(qr, y + n * i, n);
            }
            for (int64_t i = 0; i < n * rows; i++) nonfinite += !isfinite(y[i]);
            e[way] = weighted_error(x, y, qw, n, rows);
        }
        printf("%-6s qw-weighted error: with qw %.4g, from_float %.4g (ratio %.3f, bound %.2f), uniform qw %.4g "
               "(ratio %.3f, bound %.2f)\n",
               t->name, e[0], e[1], e[0] / e[1], B[k].max_vs_plain, e[2], e[0] / e[2], B[k].max_vs_uniform);
        CHECK(e[0] < B[k].max_vs_plain * e[1], "%s: weighted error %.4g, from_float's %.4g", t->name, e[0], e[1]);
        CHECK(e[0] < B[k].max_vs_uniform * e[2], "%s: weighted error %.4g, with uniform qw %.4g", t->name, e[0], e[2]);
        CHECK(nonfinite == 0, "%s: %d non-finite dequantised values", t->name, nonfinite);
        CHECK(overrun == 0, "%s: %d bytes written past a row", t->name, overrun);
        /* zeros in, zeros out, whatever the weights */
        memset(x, 0, sizeof(float) * n);
        t->from_float_w(x, q, n, qw);
        t->to_float(q, y, n);
        int nz = 0;
        for (int64_t i = 0; i < n; i++) nz += y[i] != 0;
        CHECK(nz == 0, "%s: a row of zeros gives %d non-zero values", t->name, nz);
        for (int64_t i = 0; i < n; i++) x[i] = t_rand_gauss(&r) * (t_rand_u64(&r) % 100 == 0 ? 8 : 1);
    }
    free(x), free(y), free(qw), free(ones), free(q);
}

/* ---- (c) the table ---- */

/* the grid types' quantisers (quantize_iq1.c, quantize_iq2.c, quantize_iq3.c; their own tests) */
static const struct {
    uint32_t id;
    wquant_fn fn;
} GRID_W[] = {
    {GGML_TYPE_IQ1_S, tokd_iq1_s_from_float_w},
    {GGML_TYPE_IQ1_M, tokd_iq1_m_from_float_w},
    {GGML_TYPE_IQ2_XXS, tokd_iq2_xxs_from_float_w},
    {GGML_TYPE_IQ2_XS, tokd_iq2_xs_from_float_w},
    {GGML_TYPE_IQ2_S, tokd_iq2_s_from_float_w},
    {GGML_TYPE_IQ3_XXS, tokd_iq3_xxs_from_float_w},
    {GGML_TYPE_IQ3_S, tokd_iq3_s_from_float_w},
};
#define N_GRID_W (sizeof GRID_W / sizeof GRID_W[0])

static void test_traits(void) {
    static const uint32_t ALL[] = {
        GGML_TYPE_F32,     GGML_TYPE_F16,     GGML_TYPE_BF16,   GGML_TYPE_Q4_0,    GGML_TYPE_Q4_1,  GGML_TYPE_Q5_0,
        GGML_TYPE_Q5_1,    GGML_TYPE_Q8_0,    GGML_TYPE_Q8_1,   GGML_TYPE_Q2_K,    GGML_TYPE_Q3_K,  GGML_TYPE_Q4_K,
        GGML_TYPE_Q5_K,    GGML_TYPE_Q6_K,    GGML_TYPE_Q8_K,   GGML_TYPE_IQ4_NL,  GGML_TYPE_IQ4_XS, GGML_TYPE_IQ2_XXS,
        GGML_TYPE_IQ2_XS,  GGML_TYPE_IQ2_S,   GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S,  GGML_TYPE_IQ1_S, GGML_TYPE_IQ1_M,
    };
    int with = 0;
    for (size_t i = 0; i < sizeof ALL / sizeof ALL[0]; i++) {
        const tokd_type_traits *t = tokd_type_get(ALL[i]);
        CHECK(t != NULL, "type %u missing from the table", ALL[i]);
        if (!t) continue;
        wquant_fn want = NULL;
        for (size_t k = 0; k < N_WTYPES; k++)
            if (WTYPES[k].id == ALL[i]) want = WTYPES[k].fn;
        for (size_t k = 0; k < N_GRID_W; k++)
            if (GRID_W[k].id == ALL[i]) want = GRID_W[k].fn;
        CHECK(t->from_float_w == want, "%s: from_float_w %s", t->name, want ? "not its quantiser" : "set");
        with += t->from_float_w != NULL;
    }
    CHECK(with == (int)(N_WTYPES + N_GRID_W), "%d types with from_float_w, expected %d", with, (int)(N_WTYPES + N_GRID_W));
}

int main(void) {
    tokd_kernels_init();
    test_traits();
    test_known_answers();
    test_plain_known_answers();
    test_weighted_error();
    T_DONE();
}
