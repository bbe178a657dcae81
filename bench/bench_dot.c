/* bench_dot.c — single-thread matrix-vector product speed of every weight type's dot
 * product implementations, in GB/s of weight bytes read.
 *
 *   build:  make build/libtokd.a && cc -std=c17 -O2 -D_GNU_SOURCE -Isrc bench/bench_dot.c \
 *              build/libtokd.a -lm -lpthread -o build/bench_dot
 *   run:    build/bench_dot [ROWS [K [SECONDS]]]      (default 4096 4096 0.3)
 *
 * The weights are random blocks with valid scales (speed does not depend on values);
 * one activation row is quantised once to the type's vec_dot_type, as in decode. Time
 * is the thread's CPU time, best of five, so that other processes sharing the core
 * count as little as possible. A
 * 4096 x 4096 matrix fits in a large L3 cache: pass ROWS = 32768 or more to measure
 * from DRAM. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf.h"
#include "kernels/bf16_rows.h"
#include "kernels/f32_rows.h"
#include "kernels/quants.h"
#include "kernels/types.h"
#include "util.h"

typedef struct {
    uint32_t id;
    tokd_vec_dot_fn avx2, avx512, vnni;
} row;
static const row ROWS_[] = {
    {GGML_TYPE_F32, tokd_f32_dot_avx2, tokd_f32_dot_avx512, NULL},
    {GGML_TYPE_F16, tokd_f16_dot_avx2, tokd_f16_dot_avx512, NULL},
    {GGML_TYPE_BF16, tokd_bf16_dot_avx2, tokd_bf16_dot_avx512, NULL},
    {GGML_TYPE_Q8_0, tokd_q8_0_dot_avx2, tokd_q8_0_dot_avx512, tokd_q8_0_dot_avx512vnni},
    {GGML_TYPE_Q4_0, tokd_q4_0_dot_avx2, tokd_q4_0_dot_avx512, tokd_q4_0_dot_avx512vnni},
    {GGML_TYPE_Q4_1, tokd_q4_1_dot_avx2, tokd_q4_1_dot_avx512, tokd_q4_1_dot_avx512vnni},
    {GGML_TYPE_Q5_0, tokd_q5_0_dot_avx2, tokd_q5_0_dot_avx512, tokd_q5_0_dot_avx512vnni},
    {GGML_TYPE_Q5_1, tokd_q5_1_dot_avx2, tokd_q5_1_dot_avx512, tokd_q5_1_dot_avx512vnni},
    {GGML_TYPE_Q2_K, tokd_q2_K_dot_avx2, tokd_q2_K_dot_avx512, tokd_q2_K_dot_avx512vnni},
    {GGML_TYPE_Q3_K, tokd_q3_K_dot_avx2, tokd_q3_K_dot_avx512, tokd_q3_K_dot_avx512vnni},
    {GGML_TYPE_Q4_K, tokd_q4_K_dot_avx2, tokd_q4_K_dot_avx512, tokd_q4_K_dot_avx512vnni},
    {GGML_TYPE_Q5_K, tokd_q5_K_dot_avx2, tokd_q5_K_dot_avx512, tokd_q5_K_dot_avx512vnni},
    {GGML_TYPE_Q6_K, tokd_q6_K_dot_avx2, tokd_q6_K_dot_avx512, tokd_q6_K_dot_avx512vnni},
};

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Best of five timings (of the thread's CPU time): robust to other processes. */
/* Prefill-style: four activation rows per weight row, selected vec_dot four times vs
 * tokd_vec_dot4; multiply-accumulates per second. */
static double run4(const tokd_type_traits *t, bool four, int64_t rows, int64_t K, const uint8_t *W, size_t rb,
                   const uint8_t *A, size_t ab, double seconds) {
    double best = 0;
    float out[4];
    for (int trial = 0; trial < 5; trial++) {
        int reps = 0;
        double t0 = cpu_now(), el;
        do {
            for (int64_t r = 0; r < rows; r++) {
                if (four)
                    tokd_vec_dot4(t, K, out, W + (size_t)r * rb, A, ab);
                else
                    for (int k = 0; k < 4; k++) t->vec_dot(K, &out[k], W + (size_t)r * rb, A + (size_t)k * ab);
            }
            reps++;
            el = cpu_now() - t0;
        } while (el < seconds / 5);
        double g = 4.0 * (double)rows * (double)K * reps / el / 1e9;
        if (g > best) best = g;
    }
    return best;
}

static double run(tokd_vec_dot_fn fn, int64_t rows, int64_t K, const uint8_t *W, size_t rb, const void *A, float *out,
                  double seconds) {
    double best = 0;
    for (int trial = 0; trial < 5; trial++) {
        int reps = 0;
        double t0 = cpu_now(), t;
        do {
            for (int64_t r = 0; r < rows; r++) fn(K, &out[r], W + (size_t)r * rb, A);
            reps++;
            t = cpu_now() - t0;
        } while (t < seconds / 5);
        double gbs = (double)rows * (double)rb * reps / t / 1e9;
        if (gbs > best) best = gbs;
    }
    return best;
}
/* The gemm kernel (Q4_0/Q8_0): as matmul calls it, a tile of 16 weight rows against na
 * prepared activation rows. na = 1: GB/s of weights (decode); else GMAC/s. */
static double run_gemm(const tokd_type_traits *t, int64_t na, int64_t rows, int64_t K, const uint8_t *W, size_t rb,
                       const uint8_t *A, size_t as, float *Y, double seconds) {
    double best = 0;
    for (int trial = 0; trial < 5; trial++) {
        int reps = 0;
        double t0 = cpu_now(), el;
        do {
            for (int64_t o = 0; o < rows; o += 16)
                t->gemm(K, rows - o < 16 ? rows - o : 16, W + (size_t)o * rb, rb, na, A, as, Y + o, rows);
            reps++;
            el = cpu_now() - t0;
        } while (el < seconds / 5);
        double g = na == 1 ? (double)rows * (double)rb * reps / el / 1e9 : (double)na * (double)rows * (double)K * reps / el / 1e9;
        if (g > best) best = g;
    }
    return best;
}

int main(int argc, char **argv) {
    int64_t rows = argc > 1 ? atoll(argv[1]) : 4096, K = argc > 2 ? atoll(argv[2]) : 4096;
    double seconds = argc > 3 ? atof(argv[3]) : 0.3;
    if (rows <= 0 || K <= 0 || K % 256) {
        fprintf(stderr, "usage: bench_dot [ROWS [K (multiple of 256) [SECONDS]]]\n");
        return 1;
    }
    tokd_kernels_init();
    const tokd_cpu_features *c = tokd_cpu();
    bool avx2 = c->avx2 && c->fma && c->f16c, avx512 = avx2 && c->avx512f && c->avx512bw && c->avx512vl,
         vnni = avx512 && c->avx512vnni;
    printf("matvec %lld x %lld, one thread, GB/s of weights read (selected path: %s)\n", (long long)rows, (long long)K,
           tokd_kernels_path());
    printf("%-5s %8s %8s %8s %8s %8s\n", "type", "scalar", "avx2", "avx512", "vnni", "selected");
    float *x = malloc(sizeof(float) * (size_t)K), *out = malloc(sizeof(float) * (size_t)rows);
    for (int64_t i = 0; i < K; i++) x[i] = (float)((i * 7919) % 2001 - 1000) / 1000.0f;
    for (size_t i = 0; i < sizeof ROWS_ / sizeof ROWS_[0]; i++) {
        const tokd_type_traits *t = tokd_type_get(ROWS_[i].id), *a = tokd_type_get(t->vec_dot_type);
        size_t rb = tokd_row_bytes(t, K);
        uint8_t *W = tokd_aligned_alloc(rb * (size_t)rows);
        /* every block a copy of one quantised block (finite scales; speed does not depend on values) */
        float blockf[256];
        uint8_t tmpl[512];
        for (int j = 0; j < 256; j++) blockf[j] = (float)((j * 37) % 101 - 50) / 50.0f;
        t->from_float(blockf, tmpl, t->blck);
        for (size_t b = 0; b < rb * (size_t)rows / t->bytes; b++) memcpy(W + b * t->bytes, tmpl, t->bytes);
        void *A = tokd_aligned_alloc(tokd_row_bytes(a, K) + 64);
        a->from_float(x, A, K);
        double g_ref = run(t->vec_dot_ref, rows / 8 ? rows / 8 : 1, K, W, rb, A, out, seconds / 3);
        double g2 = avx2 ? run(ROWS_[i].avx2, rows, K, W, rb, A, out, seconds) : 0;
        double g5 = avx512 && ROWS_[i].avx512 ? run(ROWS_[i].avx512, rows, K, W, rb, A, out, seconds) : 0;
        double gv = vnni && ROWS_[i].vnni ? run(ROWS_[i].vnni, rows, K, W, rb, A, out, seconds) : 0;
        double gs = run(t->vec_dot, rows, K, W, rb, A, out, seconds);
        printf("%-5s %8.2f %8.2f %8.2f %8.2f %8.2f", t->name, g_ref, g2, g5, gv, gs);
        if (t->vec_dot4) {
            size_t ab = tokd_row_bytes(a, K);
            uint8_t *A4 = tokd_aligned_alloc(ab * 4 + 64);
            for (int k = 0; k < 4; k++) a->from_float(x, A4 + (size_t)k * ab, K);
            printf("   prefill 4 rows: %.1f GMAC/s as 4 x vec_dot, %.1f with vec_dot4", run4(t, false, rows, K, W, rb, A4, ab, seconds),
                   run4(t, true, rows, K, W, rb, A4, ab, seconds));
            free(A4);
        }
        if (t->gemm) {
            size_t as = (t->gemm_act_bytes(K) + 63) & ~(size_t)63;
            int64_t na = 64, prow = rows < 512 ? rows : 512;
            uint8_t *AG = tokd_aligned_alloc(as * (size_t)na);
            float *Y = malloc(sizeof(float) * (size_t)(rows * na));
            for (int64_t k = 0; k < na; k++) t->gemm_prep(x, AG + (size_t)k * as, K);
            printf("   gemm: matvec %.2f GB/s, %lld rows %.1f GMAC/s", run_gemm(t, 1, rows, K, W, rb, AG, as, Y, seconds),
                   (long long)na, run_gemm(t, na, prow, K, W, rb, AG, as, Y, seconds));
            free(AG);
            free(Y);
        }
        printf("\n");
        free(W), free(A);
    }
    free(x), free(out);
    return 0;
}
