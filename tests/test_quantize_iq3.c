/* test_quantize_iq3.c — the IQ3_XXS and IQ3_S quantisers (kernels/quantize_iq3.c).
 *
 * (a) known answers: rows of fixed pseudo-random data and importance weights (Gaussian;
 *     heavy-tailed with outliers and weights over eight decades, some exactly zero; a
 *     long row with zero stretches, whole sub-blocks of zero weights and outliers)
 *     quantise, with the weights and without, to bytes whose FNV-1a hash is that of
 *     llama.cpp's quantize_iq3_xxs / quantize_iq3_s(src, dst, 1, n, qw or NULL).
 * (b) round trip: dequantised rows are finite, their qw-weighted relative squared error
 *     is below a measured bound (with and without qw); a row of zeros gives zeros;
 *     nothing is written past the row.
 * (c) threads: two threads quantising at once (the first calls, which build the tables,
 *     racing) write the same bytes as one thread. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quantize_iq3.h"
#include "kernels/quants.h"
#include "t.h"
#include "t_hash.h"
#include "t_quant.h"
#include "t_rand.h"

typedef void (*wquant_fn)(const float *src, void *dst, int64_t n, const float *qw);
typedef void (*quant_fn)(const float *src, void *dst, int64_t n);
typedef void (*deq_fn)(const void *src, float *dst, int64_t n);
static const struct {
    const char *name;
    wquant_fn with_w;
    quant_fn plain;
    deq_fn to_float;
    size_t block_bytes;
} TYPES[] = {
    {"IQ3_XXS", tokd_iq3_xxs_from_float_w, tokd_iq3_xxs_from_float, tokd_iq3_xxs_to_float, sizeof(tokd_block_iq3_xxs)},
    {"IQ3_S", tokd_iq3_s_from_float_w, tokd_iq3_s_from_float, tokd_iq3_s_to_float, sizeof(tokd_block_iq3_s)},
};
#define N_TYPES (sizeof TYPES / sizeof TYPES[0])

/* ---- (a) known answers ---- */

static const struct {
    const char *what;
    int64_t n;
} CASES[] = {
    {"gaussian", 256},
    {"heavy tails, outliers, weights over decades with zeros", 512},
    {"zero stretches, zero-weight sub-blocks, outliers", 2048},
};
#define N_CASES (sizeof CASES / sizeof CASES[0])

/* Row c of the known answers: x[n] and qw[n] from c alone. Case 2 has all-zero values
   over elements 320..383 (two sub-blocks, after one without outliers: IQ3_S writes the
   later sub-blocks' indices from the skipped one's place on) and all-zero weights over
   384..415 and 1024..1279 (no trial scale fits there, and IQ3_XXS reuses the levels
   before: the zeros a skipped sub-block leaves, or the last fitted sub-block's); never
   in a row's first sub-block, where llama.cpp reads uninitialised memory. */
static void make_case(int c, float *x, float *qw, int64_t n) {
    uint64_t r = 0x1E3C0DEull + (uint64_t)c;
    for (int64_t i = 0; i < n; i++) {
        float v = 0, w = 1;
        switch (c) {
        case 0:
            v = 0.02f * t_rand_gauss(&r);
            w = (float)exp(1.5 * t_rand_gauss(&r));
            break;
        case 1: {
            const double g = t_rand_gauss(&r), u = t_rand_unit(&r);
            v = (float)(g / (0.2 + u)); /* heavy-tailed */
            if (i % 41 == 7) v *= 30;
            w = t_rand_u64(&r) % 6 == 0 ? 0 : (float)pow(10, 8 * t_rand_unit(&r) - 4);
            break;
        }
        default:
            v = 0.3f * t_rand_gauss(&r);
            if (t_rand_u64(&r) % 53 == 0 && (i < 256 || i >= 320)) v *= 15;
            if (i >= 320 && i < 384) v = 0;
            if (i % 256 >= 200 && i % 256 < 206) v = 0;
            w = t_rand_u64(&r) % 9 == 0 ? 0 : (float)exp(2 * t_rand_gauss(&r));
            if ((i >= 384 && i < 416) || (i >= 1024 && i < 1280)) w = 0;
            break;
        }
        x[i] = v, qw[i] = w;
    }
}

/* FNV-1a 64 of llama.cpp c392e5094's output on CASES[c] (make_case): [type][case][0] is
   quantize_<type>(x, dst, 1, n, qw), [1] the same with quant_weights NULL. From
   /tmp/s45/iq3/gen.c, a program that includes this file (main renamed) for make_case and
   links llama.cpp's libggml-base.so, after ggml_init and ggml_quantize_init(type). */
static const uint64_t EXPECT[N_TYPES][N_CASES][2] = {
    {{0x7cdd7112043e3454ull, 0x15d32503afeb42c0ull}, {0x6f49a9fc5f253fbeull, 0x8b39f60fcc7652ccull},
     {0x3bc277f8dd28754aull, 0x714d88c5fb4f487cull}}, /* IQ3_XXS */
    {{0x7de859925016a07bull, 0xbbd63375e7fd9dfeull}, {0x79cc3d6140e17d1full, 0x2afff577e8098a77ull},
     {0x7c0f4e87786dece3ull, 0x93b97c4ecce539ceull}}, /* IQ3_S */
};

static void test_known_answers(void) {
    float *x = malloc(sizeof(float) * 2048), *qw = malloc(sizeof(float) * 2048);
    uint8_t *q = malloc(2048);
    for (size_t t = 0; t < N_TYPES; t++)
        for (size_t c = 0; c < N_CASES; c++) {
            const int64_t n = CASES[c].n;
            const size_t bytes = (size_t)(n / TOKD_QK_K) * TYPES[t].block_bytes;
            make_case((int)c, x, qw, n);
            for (int plain = 0; plain < 2; plain++) {
                memset(q, 0xA5, 2048);
                if (plain)
                    TYPES[t].plain(x, q, n);
                else
                    TYPES[t].with_w(x, q, n, qw);
                const uint64_t h = t_fnv1a(q, bytes);
                CHECK(h == EXPECT[t][c][plain], "%s %s, %s (n %lld): hash %016llx, llama.cpp's %016llx", TYPES[t].name,
                      plain ? "without weights" : "with weights", CASES[c].what, (long long)n,
                      (unsigned long long)h, (unsigned long long)EXPECT[t][c][plain]);
            }
        }
    free(x), free(qw), free(q);
}

/* ---- (b) round trip ---- */

static void test_round_trip(void) {
    /* Bounds on sum qw (x - y)^2 / sum qw x^2 over the rows (y dequantised), with qw
       and without (the error still weighted by qw). Measured: IQ3_XXS 0.0232 with qw,
       0.0647 without; IQ3_S 0.0181, 0.0354 (the same bytes at any optimisation, so the
       same numbers under ASan). The bounds allow about 25%: ignoring qw (the error
       without it) fails the bound with it. */
    static const double BOUND[N_TYPES][2] = {{0.029, 0.081}, {0.023, 0.044}};
    const int64_t n = 512;
    const int rows = 24;
    uint64_t r = 0x3B175EEDull;
    float *x = malloc(sizeof(float) * n * rows), *y = malloc(sizeof(float) * n * rows);
    float *qw = malloc(sizeof(float) * n);
    uint8_t *q = malloc(256 + 16);
    for (int64_t i = 0; i < n; i++) qw[i] = (float)exp(1.5 * t_rand_gauss(&r));
    for (int64_t i = 0; i < n * rows; i++) x[i] = t_rand_gauss(&r) * (t_rand_u64(&r) % 100 == 0 ? 6 : 1);
    for (size_t t = 0; t < N_TYPES; t++) {
        const size_t rb = (size_t)(n / TOKD_QK_K) * TYPES[t].block_bytes;
        for (int plain = 0; plain < 2; plain++) {
            int nonfinite = 0, overrun = 0;
            double err = 0, ref = 0;
            for (int i = 0; i < rows; i++) {
                memset(q + rb, 0xA5, 16);
                if (plain)
                    TYPES[t].plain(x + n * i, q, n);
                else
                    TYPES[t].with_w(x + n * i, q, n, qw);
                for (int j = 0; j < 16; j++) overrun += q[rb + j] != 0xA5;
                TYPES[t].to_float(q, y + n * i, n);
                for (int64_t e = 0; e < n; e++) {
                    const double d = (double)x[n * i + e] - y[n * i + e];
                    nonfinite += !isfinite(y[n * i + e]);
                    err += qw[e] * d * d;
                    ref += qw[e] * (double)x[n * i + e] * x[n * i + e];
                }
            }
            printf("%-7s %s: weighted relative error %.4f (bound %.3f)\n", TYPES[t].name,
                   plain ? "without qw" : "with qw   ", err / ref, BOUND[t][plain]);
            CHECK(err / ref < BOUND[t][plain], "%s %s: weighted relative error %.4f, bound %.3f", TYPES[t].name,
                  plain ? "without qw" : "with qw", err / ref, BOUND[t][plain]);
            CHECK(nonfinite == 0, "%s: %d non-finite dequantised values", TYPES[t].name, nonfinite);
            CHECK(overrun == 0, "%s: %d bytes written past a row", TYPES[t].name, overrun);
        }
        /* zeros in, zeros out, with weights or without */
        float z[512] = {0};
        for (int plain = 0; plain < 2; plain++) {
            if (plain)
                TYPES[t].plain(z, q, n);
            else
                TYPES[t].with_w(z, q, n, qw);
            TYPES[t].to_float(q, y, n);
            int nz = 0;
            for (int64_t e = 0; e < n; e++) nz += y[e] != 0;
            CHECK(nz == 0, "%s: a row of zeros gives %d non-zero values", TYPES[t].name, nz);
        }
    }
    free(x), free(y), free(qw), free(q);
}

/* ---- (c) threads ---- */

enum { TH_N = 1024, TH_ROWS = 6 };

static void quantize_all(const t_quant_job *j) {
    for (size_t t = 0; t < N_TYPES; t++) {
        const size_t rb = (size_t)(TH_N / TOKD_QK_K) * TYPES[t].block_bytes;
        for (int i = 0; i < TH_ROWS; i++) {
            if (i % 2)
                TYPES[t].plain(j->x + TH_N * i, j->out[t] + rb * (size_t)i, TH_N);
            else
                TYPES[t].with_w(j->x + TH_N * i, j->out[t] + rb * (size_t)i, TH_N, j->qw);
        }
    }
}

static void test_threads(void) {
    uint64_t r = 0x7EAD5ull;
    float *x = malloc(sizeof(float) * TH_N * TH_ROWS), *qw = malloc(sizeof(float) * TH_N);
    for (int64_t i = 0; i < TH_N * TH_ROWS; i++) x[i] = t_rand_gauss(&r);
    /* with zero-weight sub-blocks, where the levels carried from the sub-block before count */
    for (int64_t i = 0; i < TH_N; i++) qw[i] = (i / 32) % 5 == 3 ? 0 : (float)exp(t_rand_gauss(&r));
    const char *names[N_TYPES];
    size_t bytes[N_TYPES];
    for (size_t t = 0; t < N_TYPES; t++)
        names[t] = TYPES[t].name, bytes[t] = TH_ROWS * (TH_N / TOKD_QK_K) * TYPES[t].block_bytes;
    /* these are the first calls of the program: both threads build-or-wait on the tables */
    t_quant_threads(quantize_all, N_TYPES, names, bytes, x, qw);
    free(x), free(qw);
}

int main(void) {
    test_threads();
    test_known_answers();
    test_round_trip();
    T_DONE();
}
