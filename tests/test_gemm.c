/* test_gemm.c — the gemm kernels (types.h tokd_gemm_fn: Q4_0 and Q8_0 with prepared
 * activation rows) against the scalar reference: every output bit-equal to vec_dot_ref
 * of its weight row with its activation row quantised by the activation type's
 * from_float. Random and raw random-bit weight blocks (scales kept finite), every K
 * shape class (whole 8-block groups, groups plus a tail, tail only), odd weight and
 * activation row counts, row strides with padding; the grid types (IQ1_S ... IQ3_S,
 * AVX2 gemm) too, from raw blocks; and through tokd_matmul with 1 and
 * 2 threads, compared with the same reference; and the same bits whatever the thread
 * count (the work split); and a decode product's claimed rows with one share stolen
 * from, and when tokd_matmul_shares_done says they are all computed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "kernels/matmul.h"
#include "kernels/quants.h"
#include "kernels/types.h"
#include "t.h"
#include "t_rand.h"
#include "vecmath.h"
#include "util.h"

static uint64_t rng = 0x243F6A8885A308D3ull; /* t_rand.h state */

/* n_rows weight rows of K elements: quantised random data, or raw random bytes with the
 * fp16 scale fields replaced by finite values. */
static void fill_weights(const tokd_type_traits *t, uint8_t *W, int64_t K, int64_t rows, int raw) {
    size_t rb = tokd_row_bytes(t, K);
    float *f = malloc(sizeof(float) * (size_t)K);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = W + (size_t)r * rb;
        if (!raw && t->from_float) {
            float sc = (float)exp(t_rand_pm1(&rng) * 4);
            for (int64_t i = 0; i < K; i++) f[i] = (float)t_rand_pm1(&rng) * sc;
            t->from_float(f, row, K);
        } else {
            for (size_t i = 0; i < rb; i++) row[i] = (uint8_t)t_rand_u64(&rng);
            for (int64_t b = 0; b < K / t->blck; b++) {
                uint16_t d = tokd_f32_to_f16((float)t_rand_pm1(&rng) * 0.01f);
                if (t->id == GGML_TYPE_IQ1_M) /* its scale: the top nibbles of its four scale words */
                    for (int i = 0; i < 4; i++) {
                        uint8_t *s = row + (size_t)b * t->bytes + 48 + 2 * i;
                        s[1] = (uint8_t)((s[1] & 0x0F) | ((d >> 4 * i) & 15) << 4);
                    }
                else
                    memcpy(row + (size_t)b * t->bytes, &d, 2);
            }
        }
    }
    free(f);
}

static int64_t n_checks, n_bad;

/* One gemm kernel of type id, with its activation preparation, over the sweep (`full`:
 * every K; else the first five, for kernels this CPU does not select, to keep the run
 * short under the sanitizers). */
static void check_gemm(uint32_t id, tokd_gemm_fn gemm, void (*prep)(const float *, void *, int64_t), const char *label,
                       int full) {
    const tokd_type_traits *t = tokd_type_get(id), *at = tokd_type_get(t->vec_dot_type);
    static const int64_t Ks32[] = {32, 96, 256, 288, 512, 2048, 2048 + 224, 5632};
    static const int64_t Ks256[] = {256, 512, 768, 2048, 2304, 5632, 256, 1024};
    const int64_t *Ks = t->blck == 256 ? Ks256 : Ks32;
    static const int64_t NW[] = {1, 3, 17}; /* 17: a packed group or a VNNI grid tile of 16, and one more row */
    static const int64_t NA[] = {1, 2, 3, 4, 5, 6, 7, 8, 17, 70}; /* 70: the grid types' chunks of 64 */
    for (size_t ki = 0; ki < (full ? 8u : 5u); ki++) {
        int64_t K = Ks[ki];
        for (int raw = 0; raw < 2; raw++)
            for (size_t wi = 0; wi < 3; wi++)
                for (size_t ai = 0; ai < 10; ai++) {
                    int64_t nw = NW[wi], na = NA[ai];
                    size_t rb = tokd_row_bytes(t, K), ws = rb + (wi == 1 ? t->bytes : 0);
                    size_t as = (t->gemm_act_bytes(K) + 63 + (ai & 1) * 64) & ~(size_t)63;
                    size_t qb = tokd_row_bytes(at, K);
                    uint8_t *W = malloc(ws * (size_t)nw), *A = tokd_aligned_alloc(as * (size_t)na);
                    uint8_t *Q = malloc(qb * (size_t)na);
                    float *X = malloc(sizeof(float) * (size_t)(K * na)), *Y = malloc(sizeof(float) * (size_t)(nw * na + 1));
                    for (int64_t o = 0; o < nw; o++) fill_weights(t, W + (size_t)o * ws, K, 1, raw);
                    for (int64_t i = 0; i < K * na; i++) X[i] = (float)t_rand_pm1(&rng) * (i % 7 == 0 ? 10.0f : 1.0f);
                    for (int64_t r = 0; r < na; r++) {
                        prep(X + r * K, A + (size_t)r * as, K);
                        at->from_float(X + r * K, Q + (size_t)r * qb, K);
                    }
                    gemm(K, nw, W, ws, na, A, as, Y, nw);
                    for (int64_t r = 0; r < na; r++)
                        for (int64_t o = 0; o < nw; o++) {
                            float ref;
                            t->vec_dot_ref(K, &ref, W + (size_t)o * ws, Q + (size_t)r * qb);
                            n_checks++;
                            if (memcmp(&ref, &Y[r * nw + o], 4) != 0 && n_bad++ < 5)
                                fprintf(stderr, "  %s %s K=%lld nw=%lld na=%lld raw=%d out (%lld,%lld): ref %.9g gemm %.9g\n",
                                        t->name, label, (long long)K, (long long)nw, (long long)na, raw, (long long)r,
                                        (long long)o, ref, Y[r * nw + o]);
                        }
                    free(W);
                    free(A);
                    free(Q);
                    free(X);
                    free(Y);
                }
    }
}

/* The kernel tokd_kernels_init chose for the type. */
static void check_type(uint32_t id) {
    const tokd_type_traits *t = tokd_type_get(id);
    if (!t->gemm) {
        printf("%s: no gemm kernel on this CPU, skipped\n", t->name);
        return;
    }
    check_gemm(id, t->gemm, t->gemm_prep, "selected", 1);
}

/* Every gemm kernel of a grid type that this CPU can run, whichever is selected: AVX2,
 * AVX-512 (chosen where the CPU has no VNNI), AVX-VNNI, AVX-512 VNNI, and IQ3_XXS's
 * AVX-512 VNNI form with its tiles unpacked by VBMI. */
#define IQ_VARIANTS(T)                                                                                       \
    {tokd_##T##_gemm_avx2, tokd_##T##_gemm_avx512, tokd_##T##_gemm_avxvnni, tokd_##T##_gemm_avx512vnni}
static void check_grid_type(uint32_t id) {
    static const struct {
        uint32_t id;
        tokd_gemm_fn f[4];
    } v[] = {{GGML_TYPE_IQ2_XXS, IQ_VARIANTS(iq2_xxs)}, {GGML_TYPE_IQ2_XS, IQ_VARIANTS(iq2_xs)},
             {GGML_TYPE_IQ2_S, IQ_VARIANTS(iq2_s)},     {GGML_TYPE_IQ3_XXS, IQ_VARIANTS(iq3_xxs)},
             {GGML_TYPE_IQ3_S, IQ_VARIANTS(iq3_s)},     {GGML_TYPE_IQ1_S, IQ_VARIANTS(iq1_s)},
             {GGML_TYPE_IQ1_M, IQ_VARIANTS(iq1_m)}};
    const tokd_cpu_features *cpu = tokd_cpu();
    const int avx2 = cpu->avx2 && cpu->fma && cpu->f16c;
    const int vnni = avx2 && cpu->avx512bw && cpu->avx512vl && cpu->avx512vnni;
    const int can[5] = {avx2, avx2 && cpu->avx512bw && cpu->avx512vl, avx2 && cpu->avxvnni, vnni, vnni && cpu->avx512vbmi};
    static const char *const label[5] = {"avx2", "avx512", "avxvnni", "avx512vnni", "avx512vbmi"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (v[i].id == id)
            for (int k = 0; k < 5; k++) {
                const tokd_gemm_fn f = k < 4 ? v[i].f[k] : id == GGML_TYPE_IQ3_XXS ? tokd_iq3_xxs_gemm_avx512vbmi : NULL;
                if (!f) continue;
                if (!can[k]) {
                    printf("%s: no %s on this CPU, its gemm not checked\n", tokd_type_get(id)->name, label[k]);
                    continue;
                }
                check_gemm(id, f, k >= 2 ? tokd_iq_gemm_prep_vnni : tokd_iq_gemm_prep, label[k], f == tokd_type_get(id)->gemm);
            }
}
#undef IQ_VARIANTS

/* tokd_matmul (any path) against vec_dot_ref, 1 and 2 threads, several batch sizes. */
static void check_matmul(uint32_t id) {
    const tokd_type_traits *t = tokd_type_get(id), *at = tokd_type_get(t->vec_dot_type);
    const int64_t K = t->blck == 256 ? 768 : 512 + 64, n_out = 77;
    size_t rb = tokd_row_bytes(t, K), qb = tokd_row_bytes(at, K);
    uint8_t *W = malloc(rb * (size_t)n_out);
    fill_weights(t, W, K, n_out, 0);
    tokd_matrix M = {.data = W, .tt = t, .K = K, .n_out = n_out, .row_bytes = rb};
    for (int threads = 1; threads <= 2; threads++) {
        tokd_pool *pool = tokd_pool_new(threads);
        static const int64_t NR[] = {1, 3, 4, 7, 16, 17, 64}; /* decode split up to 16 rows (matmul.h) */
        for (size_t ni = 0; ni < sizeof NR / sizeof NR[0]; ni++) {
            int64_t nr = NR[ni];
            float *X = malloc(sizeof(float) * (size_t)(K * nr)), *Y = malloc(sizeof(float) * (size_t)(n_out * nr));
            uint8_t *Q = malloc(qb);
            void *scratch = tokd_aligned_alloc(tokd_matmul_scratch_bytes(t, K, nr) + 64);
            for (int64_t i = 0; i < K * nr; i++) X[i] = (float)t_rand_pm1(&rng);
            tokd_matmul(pool, &M, X, K, nr, Y, n_out, scratch);
            int64_t bad = 0;
            for (int64_t r = 0; r < nr; r++) {
                at->from_float(X + r * K, Q, K);
                for (int64_t o = 0; o < n_out; o++) {
                    float ref;
                    t->vec_dot_ref(K, &ref, W + (size_t)o * rb, Q);
                    bad += memcmp(&ref, &Y[r * n_out + o], 4) != 0;
                }
            }
            CHECK(bad == 0, "%s matmul %d threads, %lld rows: %lld outputs differ from vec_dot_ref", t->name, threads,
                  (long long)nr, (long long)bad);
            free(X);
            free(Y);
            free(Q);
            free(scratch);
        }
        tokd_pool_free(pool);
    }
    free(W);
}

/* tokd_matmul_n: shared activation rows (Q4_K + Q6_K share Q8_K; Q4_0 + Q4_0 share the
 * prepared layout) and the fallback (Q4_0 with Q8_0 below gemm_min_rows, mixed with
 * Q4_K) give the bits of separate tokd_matmul calls. The last set is packed: there Q4_K
 * and Q6_K prepare their activations differently, so the first and third matrices share
 * one region and the second runs alone (Q4_K_M's Q, K and V in some layers). */
static void check_matmul_n(void) {
    static const uint32_t sets[][3] = {{GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q4_K},
                                       {GGML_TYPE_Q4_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_0},
                                       {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K},
                                       {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q4_K},
                                       {GGML_TYPE_Q6_K, GGML_TYPE_Q4_K, GGML_TYPE_Q4_K},
                                       {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q8_0}};
    static const int64_t n_outs[6][3] = {{40, 16, 33}, {40, 16, 33}, {40, 16, 33}, {48, 16, 32}, {32, 64, 16}, {48, 16, 32}};
    const int64_t K = 512;
    tokd_pool *pool = tokd_pool_new(2);
    /* sets 3-5 packed: in decode (one row) packed matrices with different activation
       preparations share a region, at most two forms (the third form of set 5 runs in a
       region of its own) */
    for (size_t si = 0; si < 6; si++)
        for (int64_t nr = 1; nr <= 9; nr += 4) {
            tokd_matrix M[3];
            const tokd_matrix *Mp[3];
            float *Ya[3], *Yb[3];
            int64_t ld[3];
            size_t scratch_bytes = 64;
            for (int m = 0; m < 3; m++) {
                const tokd_type_traits *t = tokd_type_get(sets[si][m]);
                size_t rb = tokd_row_bytes(t, K);
                uint8_t *W = malloc(rb * (size_t)n_outs[si][m]);
                fill_weights(t, W, K, n_outs[si][m], 0);
                M[m] = (tokd_matrix){.data = W, .tt = t, .K = K, .n_out = n_outs[si][m], .row_bytes = rb};
                if (si >= 3) CHECK(tokd_matrix_pack(NULL, &M[m], tokd_packed_get_any(t->id)) == 0, "matmul_n: pack");
                Mp[m] = &M[m];
                ld[m] = n_outs[si][m] + m;
                Ya[m] = calloc((size_t)(ld[m] * nr), sizeof(float));
                Yb[m] = calloc((size_t)(ld[m] * nr), sizeof(float));
                size_t sb = tokd_matmul_scratch_bytes(t, K, nr);
                if (sb > scratch_bytes) scratch_bytes = sb;
            }
            float *X = malloc(sizeof(float) * (size_t)(K * nr));
            for (int64_t i = 0; i < K * nr; i++) X[i] = (float)t_rand_pm1(&rng);
            void *scratch = tokd_aligned_alloc(scratch_bytes);
            tokd_matmul_n(pool, 3, Mp, X, K, nr, Ya, ld, scratch);
            for (int m = 0; m < 3; m++) tokd_matmul(pool, &M[m], X, K, nr, Yb[m], ld[m], scratch);
            int same = 1;
            for (int m = 0; m < 3; m++) same &= memcmp(Ya[m], Yb[m], sizeof(float) * (size_t)(ld[m] * nr)) == 0;
            CHECK(same, "matmul_n set %zu, %lld rows: differs from separate matmuls", si, (long long)nr);
            for (int m = 0; m < 3; m++) {
                free((void *)M[m].data);
                free(M[m].packed);
                free(Ya[m]);
                free(Yb[m]);
            }
            free(X);
            free(scratch);
        }
    tokd_pool_free(pool);
}

/* How a product is cut among threads changes no bit, and every output is written:
 * decode (one activation row; each thread's share claimed from the front and stolen
 * from the back, a share may span two matrices) and a few rows, 1..8 threads, against
 * one thread, each product run several times into outputs filled with NaN first (with
 * more threads than the machine's cores, threads are descheduled mid-region and the
 * others steal their shares at different points each time). Packed (Q4_0, Q4_K where
 * the CPU has the kernels) and file-layout matrices (Q8_0, F32); rows not a multiple of
 * 16 for the latter; three matrices in one tokd_matmul_n region. */
static void check_thread_split(void) {
    static const uint32_t types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q4_K, GGML_TYPE_Q8_0, GGML_TYPE_F32};
    static const int64_t n_outs[3] = {2400, 48, 1040};
    const int64_t K = 512;
    tokd_pool *one = tokd_pool_new(1);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const tokd_type_traits *t = tokd_type_get(types[ti]);
        const tokd_packed_traits *pk = tokd_packed_get_any(types[ti]);
        size_t rb = tokd_row_bytes(t, K);
        tokd_matrix M[3];
        const tokd_matrix *Mp[3];
        size_t scratch_bytes = tokd_matmul_scratch_bytes(t, K, 3) + 64;
        for (int m = 0; m < 3; m++) {
            int64_t n = n_outs[m] + (pk ? 0 : 5); /* odd row counts where nothing is packed */
            uint8_t *W = malloc(rb * (size_t)n);
            fill_weights(t, W, K, n, 0);
            M[m] = (tokd_matrix){.data = W, .tt = t, .K = K, .n_out = n, .row_bytes = rb};
            if (pk) CHECK(tokd_matrix_pack(one, &M[m], pk) == 0, "%s: pack %lld rows", t->name, (long long)n);
            Mp[m] = &M[m];
        }
        void *scratch = tokd_aligned_alloc(scratch_bytes);
        for (int64_t nr = 1; nr <= 3; nr += 2) {
            float *X = malloc(sizeof(float) * (size_t)(K * nr));
            for (int64_t i = 0; i < K * nr; i++) X[i] = (float)t_rand_pm1(&rng);
            float *ref[3], *got[3];
            int64_t ld[3];
            for (int m = 0; m < 3; m++) {
                ld[m] = M[m].n_out;
                ref[m] = malloc(sizeof(float) * (size_t)(ld[m] * nr));
                got[m] = malloc(sizeof(float) * (size_t)(ld[m] * nr));
                tokd_matmul(one, &M[m], X, K, nr, ref[m], ld[m], scratch);
            }
            for (int threads = 2; threads <= 8; threads++) {
                tokd_pool *pool = tokd_pool_new(threads);
                int same_single = 1, same_n = 1;
                for (int rep = 0; rep < 6; rep++) {
                    memset(got[0], 0xFF, sizeof(float) * (size_t)(ld[0] * nr));
                    tokd_matmul(pool, &M[0], X, K, nr, got[0], ld[0], scratch);
                    same_single &= memcmp(got[0], ref[0], sizeof(float) * (size_t)(ld[0] * nr)) == 0;
                    for (int m = 0; m < 3; m++) memset(got[m], 0xFF, sizeof(float) * (size_t)(ld[m] * nr));
                    tokd_matmul_n(pool, 3, Mp, X, K, nr, got, ld, scratch);
                    for (int m = 0; m < 3; m++) same_n &= memcmp(got[m], ref[m], sizeof(float) * (size_t)(ld[m] * nr)) == 0;
                }
                CHECK(same_single && same_n, "%s%s, %lld rows, %d threads: matmul %s, matmul_n %s", t->name,
                      pk ? " packed" : "", (long long)nr, threads, same_single ? "same" : "DIFFERS", same_n ? "same" : "DIFFERS");
                tokd_pool_free(pool);
            }
            for (int m = 0; m < 3; m++) {
                free(ref[m]);
                free(got[m]);
            }
            free(X);
        }
        for (int m = 0; m < 3; m++) {
            free((void *)M[m].data);
            free(M[m].packed);
        }
        free(scratch);
    }
    tokd_pool_free(one);
}

/* The SIMD activation prep writes the scalar layout byte for byte (zeros, tiny and huge
 * values, ties of the rounding). */
static void check_prep(void) {
    const tokd_type_traits *t4 = tokd_type_get(GGML_TYPE_Q4_0), *t8 = tokd_type_get(GGML_TYPE_Q8_0);
    if (!t4->gemm) return;
    static const int64_t Ks[] = {32, 256, 2048 + 96, 5632};
    int64_t bad = 0;
    for (size_t ki = 0; ki < 4; ki++) {
        int64_t K = Ks[ki];
        size_t bytes = t4->gemm_act_bytes(K);
        float *x = malloc(sizeof(float) * (size_t)K);
        uint8_t *a = malloc(bytes), *b = malloc(bytes);
        for (int style = 0; style < 4; style++) {
            for (int64_t i = 0; i < K; i++) {
                float v = (float)t_rand_pm1(&rng);
                if (style == 1 && i % 64 < 32) v = 0;                        /* all-zero blocks */
                if (style == 2) v = (float)((int)(v * 254)) * 0.5f;          /* ties of x*127/amax */
                if (style == 3) v *= (i % 5 == 0) ? 1e30f : 1e-30f;          /* extremes */
                x[i] = v;
            }
            for (int q8w = 0; q8w < 2; q8w++) {
                (q8w ? t8 : t4)->gemm_prep(x, a, K);
                tokd_gemm_prep_ref(x, b, K, q8w);
                bad += memcmp(a, b, bytes) != 0;
            }
        }
        free(x);
        free(a);
        free(b);
    }
    CHECK(bad == 0, "%lld SIMD activation preps differ from the scalar layout", (long long)bad);
}

/* tokd_matmul_pair: the gate/up product with SwiGLU (chunk by chunk past
 * TOKD_DECODE_MAX_ROWS rows, in a region after the product up to that) gives the bits of two separate products and
 * SwiGLU afterwards, packed or not, for 1 to 21 activation rows on 1 to 3 threads, and
 * through its fallback (types that share no activation rows,
 * or matrices of different heights); Yb keeps the second product. */
static void check_matmul_pair(void) {
    static const uint32_t sets[][2] = {{GGML_TYPE_Q4_0, GGML_TYPE_Q4_0}, {GGML_TYPE_Q4_K, GGML_TYPE_Q4_K},
                                       {GGML_TYPE_Q8_0, GGML_TYPE_Q8_0}, {GGML_TYPE_F32, GGML_TYPE_F32},
                                       {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K}, {GGML_TYPE_Q4_0, GGML_TYPE_Q4_0}};
    const int64_t K = 512;
    int bad = 0, cases = 0;
    for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++) {
        const int64_t n_out = si == 2 ? 37 : 96, n_out_b = si == 5 ? n_out + 16 : n_out; /* last: heights differ */
        tokd_matrix M[2];
        size_t scratch_bytes = 64;
        for (int m = 0; m < 2; m++) {
            const tokd_type_traits *t = tokd_type_get(sets[si][m]);
            const int64_t rows = m ? n_out_b : n_out;
            size_t rb = tokd_row_bytes(t, K);
            uint8_t *W = malloc(rb * (size_t)rows);
            fill_weights(t, W, K, rows, 0);
            M[m] = (tokd_matrix){.data = W, .tt = t, .K = K, .n_out = rows, .row_bytes = rb};
            const tokd_packed_traits *pk = tokd_packed_get_any(t->id);
            if (pk && rows % 16 == 0) tokd_matrix_pack(NULL, &M[m], pk);
            size_t sb = tokd_matmul_scratch_bytes(t, K, 21); /* the most rows below */
            if (sb > scratch_bytes) scratch_bytes = sb;
        }
        void *scratch = tokd_aligned_alloc(scratch_bytes);
        for (int threads = 1; threads <= 3; threads++)
            for (int64_t nr = 1; nr <= 21; nr += 4) { /* 1-13: decode's split; 17, 21: prefill's chunks */
                tokd_pool *pool = tokd_pool_new(threads);
                const int64_t ld = n_out_b + 3;
                float *X = malloc(sizeof(float) * (size_t)(K * nr));
                for (int64_t i = 0; i < K * nr; i++) X[i] = (float)t_rand_pm1(&rng);
                float *ga = calloc((size_t)(ld * nr), sizeof(float)), *ua = calloc((size_t)(ld * nr), sizeof(float));
                float *gb = calloc((size_t)(ld * nr), sizeof(float)), *ub = calloc((size_t)(ld * nr), sizeof(float));
                tokd_matmul_pair(pool, &M[0], &M[1], X, K, nr, ga, ua, ld, tokd_swiglu_cols, scratch);
                tokd_matmul(pool, &M[0], X, K, nr, gb, ld, scratch);
                tokd_matmul(pool, &M[1], X, K, nr, ub, ld, scratch);
                for (int64_t r = 0; r < nr; r++) tokd_swiglu_cols(gb + r * ld, ub + r * ld, n_out, 0, n_out);
                bad += memcmp(ga, gb, sizeof(float) * (size_t)(ld * nr)) != 0 || memcmp(ua, ub, sizeof(float) * (size_t)(ld * nr)) != 0;
                cases++;
                free(X), free(ga), free(ua), free(gb), free(ub);
                tokd_pool_free(pool);
            }
        for (int m = 0; m < 2; m++) {
            free((void *)M[m].data);
            free(M[m].packed);
        }
        free(scratch);
    }
    CHECK(bad == 0, "matmul_pair: %d of %d cases differ from two products and SwiGLU after them", bad, cases);
}

/* tokd_matmul_prefetch_next hands thread ith the start of its share of the decode
 * product (matmul.c: an equal part of the units of 16 rows counted across the matrices,
 * in whole groups of the job's largest packed group), capped at max_bytes and at the end
 * of the matrix the share starts in; the next region takes the windows; a product of
 * more than TOKD_DECODE_MAX_ROWS rows (prefill) gets none. Packed and unpacked matrices,
 * Q/K/V-like triples, pairs (the gate/up pair decodes as two matrices in one region), 1
 * or TOKD_DECODE_MAX_ROWS rows, and 2-3 threads. */
static void check_prefetch_windows(void) {
    const int64_t K = 512;
    static const uint32_t types[] = {GGML_TYPE_Q4_0, GGML_TYPE_F32};
    static const int64_t heights[3] = {1024, 128, 131};
    int bad = 0, cases = 0;
    for (size_t ti = 0; ti < 2; ti++) {
        const tokd_type_traits *t = tokd_type_get(types[ti]);
        const tokd_packed_traits *pk = tokd_packed_get_any(t->id);
        size_t rb = tokd_row_bytes(t, K);
        tokd_matrix M[3];
        const tokd_matrix *Mp[3];
        for (int m = 0; m < 3; m++) {
            int64_t n = heights[m] - (pk && m == 2 ? 3 : 0);
            uint8_t *W = calloc((size_t)n, rb);
            M[m] = (tokd_matrix){.data = W, .tt = t, .K = K, .n_out = n, .row_bytes = rb};
            if (pk) tokd_matrix_pack(NULL, &M[m], pk);
            Mp[m] = &M[m];
        }
        for (int nth = 2; nth <= 3; nth++) {
            tokd_pool *pool = tokd_pool_new(nth);
            for (int mode = 0; mode < 3; mode++) { /* 0: one matrix, 1: the triple, 2: a pair */
                const int n_mats = mode == 0 ? 1 : mode == 1 ? 3 : 2;
                const tokd_matrix *pair[2] = {&M[1], &M[1]};
                const tokd_matrix *const *Ws = mode == 2 ? pair : Mp;
                for (size_t cap = 4096; cap <= ((size_t)1 << 20); cap *= 256) {
                    tokd_pool_window w;
                    tokd_matmul_prefetch_next(pool, n_mats, Ws, TOKD_DECODE_MAX_ROWS + 1, cap);
                    CHECK(!tokd_pool_pending_window(pool, 0, &w), "windows for a product of %d rows (prefill)",
                          TOKD_DECODE_MAX_ROWS + 1);
                    tokd_matmul_prefetch_next(pool, n_mats, Ws, nth == 3 ? TOKD_DECODE_MAX_ROWS : 1, cap); /* decode */
                    /* a chunk holds whole packed groups: each matrix's units rounded up
                       to the job's largest group (AVX-512 Q4_0 groups 32 rows) */
                    int64_t units[3], total = 0, align = 1;
                    for (int m = 0; m < n_mats; m++)
                        if (Ws[m]->pk && Ws[m]->pk->group_rows / 16 > align) align = Ws[m]->pk->group_rows / 16;
                    for (int m = 0; m < n_mats; m++) total += units[m] = ((Ws[m]->n_out + 15) / 16 + align - 1) / align * align;
                    for (int ith = 0; ith < nth; ith++) {
                        const int64_t start = total / align * ith / nth * align, end = total / align * (ith + 1) / nth * align;
                        if (start >= end) { /* an empty share: no window */
                            bad += !(tokd_pool_pending_window(pool, ith, &w) && w.len == 0);
                            cases++;
                            continue;
                        }
                        int m = 0;
                        int64_t u = start;
                        while (u >= units[m]) u -= units[m++];
                        int64_t u_end = end - (start - u);
                        if (u_end > units[m]) u_end = units[m];
                        const tokd_matrix *W = Ws[m];
                        size_t unit_bytes = W->pk ? W->group_bytes * 16 / (size_t)W->pk->group_rows : 16 * W->row_bytes;
                        if (u_end * 16 > W->n_out) u_end = (W->n_out + 15) / 16; /* padding units read nothing */
                        size_t len = (size_t)(u_end - u) * unit_bytes;
                        if (!W->pk && u_end * 16 > W->n_out) len -= (size_t)(u_end * 16 - W->n_out) * W->row_bytes;
                        if (len > cap) len = cap;
                        const uint8_t *ptr = (const uint8_t *)(W->pk ? W->packed : W->data) + (size_t)u * unit_bytes;
                        int ok = tokd_pool_pending_window(pool, ith, &w) && w.ptr == ptr && w.len == len;
                        bad += !ok;
                        cases++;
                    }
                    float *Y = calloc(2048, sizeof(float)), *X = calloc((size_t)K, sizeof(float));
                    void *scratch = tokd_aligned_alloc(tokd_matmul_scratch_bytes(t, K, 1) + 64);
                    tokd_matmul(pool, &M[0], X, K, 1, Y, M[0].n_out, scratch);
                    CHECK(!tokd_pool_pending_window(pool, 0, &w), "windows still pending after a region");
                    free(Y), free(X), free(scratch);
                }
            }
            tokd_pool_free(pool);
        }
        for (int m = 0; m < 3; m++) {
            free((void *)M[m].data);
            free(M[m].packed);
        }
    }
    CHECK(bad == 0, "prefetch windows: %d of %d differ from the starts of the threads' shares", bad, cases);
}

/* With matrices that do not all share an activation form (packed Q4_K, Q6_K, Q4_K), the
 * windows are those of the first region tokd_matmul_n runs. Decode (one row): all three
 * (mixed_region), 64 + 8 + 8 units over two threads, thread 1's share starting at unit
 * 80 / 2 = 40 of the first; two rows: the two Q4_K matrices, 64 + 8 units, thread 1 at
 * unit 72 / 2 = 36. */
static void check_prefetch_windows_mixed(void) {
    const int64_t K = 512;
    static const uint32_t types[3] = {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q4_K};
    static const int64_t heights[3] = {1024, 128, 128};
    tokd_matrix M[3];
    const tokd_matrix *Mp[3];
    for (int m = 0; m < 3; m++) {
        const tokd_type_traits *t = tokd_type_get(types[m]);
        size_t rb = tokd_row_bytes(t, K);
        M[m] = (tokd_matrix){.data = calloc((size_t)heights[m], rb), .tt = t, .K = K, .n_out = heights[m], .row_bytes = rb};
        CHECK(tokd_matrix_pack(NULL, &M[m], tokd_packed_get_any(t->id)) == 0, "mixed windows: pack");
        Mp[m] = &M[m];
    }
    tokd_pool *pool = tokd_pool_new(2);
    const uint8_t *base = M[0].packed;
    const size_t gb = M[0].group_bytes;
    for (int64_t rows = 1; rows <= 2; rows++) {
        const size_t u = rows == 1 ? 40 : 36;
        tokd_matmul_prefetch_next(pool, 3, Mp, rows, (size_t)1 << 30);
        tokd_pool_window w0, w1;
        int ok = tokd_pool_pending_window(pool, 0, &w0) && tokd_pool_pending_window(pool, 1, &w1);
        CHECK(ok && w0.ptr == base && w0.len == u * gb, "mixed windows, %lld rows: thread 0 at the first Q4_K matrix",
              (long long)rows);
        CHECK(ok && w1.ptr == base + u * gb && w1.len == (64 - u < u ? 64 - u : u) * gb,
              "mixed windows, %lld rows: thread 1 at unit %zu of the first Q4_K matrix", (long long)rows, u);
        float *Y = calloc(2 * 1024, sizeof(float)), *X = calloc(2 * (size_t)K, sizeof(float));
        void *scratch = tokd_aligned_alloc(tokd_matmul_scratch_bytes(M[1].tt, K, rows) + 64);
        tokd_matmul(pool, &M[0], X, K, rows, Y, 1024, scratch); /* consumes the windows */
        free(Y), free(X), free(scratch);
    }
    tokd_pool_free(pool);
    for (int m = 0; m < 3; m++) {
        free((void *)M[m].data);
        free(M[m].packed);
    }
}

/* Under ThreadSanitizer (make test-tsan) this program is run for its threaded products;
 * the single-threaded kernel sweeps of the grid types, which the plain and ASan runs
 * check in full, are left out there (they took most of its two minutes). */
#ifdef __SANITIZE_THREAD__
enum { GRID_KERNEL_SWEEPS = 0 };
#else
enum { GRID_KERNEL_SWEEPS = 1 };
#endif

/* A decode product's claimed rows (tokd_matmul_rows_shared), its two threads run one
 * after the other on this one: thread 1 runs its share and then steals the back half of
 * thread 0's, which has not started. tokd_matmul_shares_done must say no until thread 0
 * has run what is left of its own, and every output must have tokd_matmul_rows' bits. */
static void check_shares_steal(void) {
    const int64_t K = 2048, n = 512; /* Q4_0: 16-row units of 18 KB, 16 a share, the claim floor 2 */
    const tokd_type_traits *t = tokd_type_get(GGML_TYPE_Q4_0);
    const size_t rb = tokd_row_bytes(t, K);
    uint8_t *W = malloc((size_t)n * rb);
    fill_weights(t, W, K, n, 0);
    tokd_matrix M = {.data = W, .tt = t, .K = K, .n_out = n, .row_bytes = rb};
    const tokd_packed_traits *pk = tokd_packed_get_any(t->id);
    if (pk) CHECK(tokd_matrix_pack(NULL, &M, pk) == 0, "shares: pack");
    float *x = malloc(sizeof(float) * (size_t)K), *want = malloc(sizeof(float) * (size_t)n),
          *y = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < K; i++) x[i] = (float)t_rand_pm1(&rng);
    void *act = tokd_aligned_alloc(tokd_matmul_scratch_bytes(t, K, 1));
    const void *a = tokd_matmul_row_prepare(&M, x, act);
    tokd_matmul_rows(&M, a, 0, n, want);
    for (int64_t i = 0; i < n; i++) y[i] = NAN;
    void *shares = tokd_aligned_alloc(tokd_matmul_shares_bytes(2));
    const tokd_matrix *Ws[1] = {&M};
    for (int th = 0; th < 2; th++) tokd_matmul_shares_reset(shares, 1, Ws, th, 2);
    CHECK(!tokd_matmul_shares_done(shares, 1, Ws, 2), "shares: done before any thread ran");
    tokd_matmul_rows_shared(shares, 1, Ws, &a, &y, 1, 2, TOKD_STAGE_OTHER);
    int64_t stolen = 0, own = 0;
    for (int64_t i = 0; i < n / 2; i++) stolen += !isnan(y[i]);
    for (int64_t i = n / 2; i < n; i++) own += !isnan(y[i]);
    CHECK(own == n / 2 && stolen > 0 && stolen < n / 2, "shares: thread 1 ran %lld of its %lld rows and stole %lld",
          (long long)own, (long long)(n / 2), (long long)stolen);
    CHECK(!tokd_matmul_shares_done(shares, 1, Ws, 2), "shares: done with %lld of thread 0's rows not run",
          (long long)(n / 2 - stolen));
    tokd_matmul_rows_shared(shares, 1, Ws, &a, &y, 0, 2, TOKD_STAGE_OTHER);
    CHECK(tokd_matmul_shares_done(shares, 1, Ws, 2), "shares: not done after both threads ran");
    CHECK(memcmp(y, want, sizeof(float) * (size_t)n) == 0, "shares: outputs differ from tokd_matmul_rows");
    for (int th = 0; th < 2; th++) tokd_matmul_shares_reset(shares, 1, Ws, th, 2);
    CHECK(!tokd_matmul_shares_done(shares, 1, Ws, 2), "shares: done after a reset");
    free(shares);
    free(act);
    free(x);
    free(want);
    free(y);
    free(M.packed);
    free(W);
}

int main(void) {
    tokd_kernels_init();
    printf("kernels: %s\n", tokd_kernels_path());
    check_prep();
    check_type(GGML_TYPE_Q4_0);
    check_type(GGML_TYPE_Q8_0);
    static const uint32_t iq[] = {GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S, GGML_TYPE_IQ3_XXS,
                                  GGML_TYPE_IQ3_S,   GGML_TYPE_IQ1_S,  GGML_TYPE_IQ1_M};
    for (size_t i = 0; i < sizeof iq / sizeof iq[0]; i++) {
        if (GRID_KERNEL_SWEEPS) check_grid_type(iq[i]);
        check_matmul(iq[i]);
    }
    CHECK(n_bad == 0, "%lld of %lld gemm outputs differ from vec_dot_ref", (long long)n_bad, (long long)n_checks);
    printf("gemm outputs compared: %lld\n", (long long)n_checks);
    static const uint32_t types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_F32};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) check_matmul(types[i]);
    check_matmul_n();
    check_matmul_pair();
    check_thread_split();
    check_prefetch_windows();
    check_prefetch_windows_mixed();
    check_shares_steal();
    T_DONE();
}
