/* test_quants.c — the weight-type table: layouts, quantisers, dequantisers, and every
 * SIMD dot product against its scalar reference.
 *
 * (a) SIMD == scalar, bit for bit (all paths reduce in the same order, see quants.c),
 *     for every type and every implementation this CPU can run (AVX2, AVX-512,
 *     AVX-512 VNNI called directly, not only the selected one), over random and raw
 *     random-bit blocks, many K, odd row counts.
 * (b) quantize -> dequantize relative RMS error on Gaussian data within each type's
 *     bound; activation quantisers' rounding as ggml's.
 *     The four-row kernels (vec_dot4) likewise, output by output.
 * (c) the golden models: dequantized tensors vs the f32 model's within the type's
 *     bound, and re-quantizing the f32 tensors reproduces llama.cpp's files byte for
 *     byte (Q8_0, Q4_0, Q4_K, Q6_K, F16, BF16).
 * (d) the grid types (IQ1_S ... IQ3_S; their quantisers have tests of their own): their
 *     grids, to_float against llama.cpp's on fixed blocks, the dot product against
 *     the dequantized weights. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "kernels/bf16_rows.h"
#include "kernels/f32_rows.h"
#include "kernels/iq_grids.h"
#include "kernels/quants.h"
#include "kernels/types.h"
#include "t.h"
#include "t_rand.h"

/* ---- deterministic random numbers (t_rand.h) ---- */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
/* Gaussian data with occasional outliers and all-zero stretches, at varying scales. */
static void fill_data(float *x, int64_t n, int style) {
    float scale = (float)exp((t_rand_unit(&rng) - 0.5) * 8);
    for (int64_t i = 0; i < n; i++) {
        float v = t_rand_gauss(&rng) * scale;
        if (style >= 1 && t_rand_u64(&rng) % 97 == 0) v *= 12;
        if (style >= 2 && (i / 64) % 7 == 3) v = 0;
        x[i] = v;
    }
}

/* ---- the implementations under test ---- */
typedef struct {
    uint32_t id;
    tokd_vec_dot_fn avx2, avx512, avx512vnni;
} impls;
static const impls IMPLS[] = {
    {GGML_TYPE_F32, tokd_f32_dot_avx2, tokd_f32_dot_avx512, NULL},
    {GGML_TYPE_F16, tokd_f16_dot_avx2, tokd_f16_dot_avx512, NULL},
    {GGML_TYPE_BF16, tokd_bf16_dot_avx2, tokd_bf16_dot_avx512, NULL},
    {GGML_TYPE_Q4_0, tokd_q4_0_dot_avx2, tokd_q4_0_dot_avx512, tokd_q4_0_dot_avx512vnni},
    {GGML_TYPE_Q4_1, tokd_q4_1_dot_avx2, tokd_q4_1_dot_avx512, tokd_q4_1_dot_avx512vnni},
    {GGML_TYPE_Q5_0, tokd_q5_0_dot_avx2, tokd_q5_0_dot_avx512, tokd_q5_0_dot_avx512vnni},
    {GGML_TYPE_Q5_1, tokd_q5_1_dot_avx2, tokd_q5_1_dot_avx512, tokd_q5_1_dot_avx512vnni},
    {GGML_TYPE_Q8_0, tokd_q8_0_dot_avx2, tokd_q8_0_dot_avx512, tokd_q8_0_dot_avx512vnni},
    {GGML_TYPE_Q2_K, tokd_q2_K_dot_avx2, tokd_q2_K_dot_avx512, tokd_q2_K_dot_avx512vnni},
    {GGML_TYPE_Q3_K, tokd_q3_K_dot_avx2, tokd_q3_K_dot_avx512, tokd_q3_K_dot_avx512vnni},
    {GGML_TYPE_Q4_K, tokd_q4_K_dot_avx2, tokd_q4_K_dot_avx512, tokd_q4_K_dot_avx512vnni},
    {GGML_TYPE_Q5_K, tokd_q5_K_dot_avx2, tokd_q5_K_dot_avx512, tokd_q5_K_dot_avx512vnni},
    {GGML_TYPE_Q6_K, tokd_q6_K_dot_avx2, tokd_q6_K_dot_avx512, tokd_q6_K_dot_avx512vnni},
    {GGML_TYPE_IQ4_NL, tokd_iq4_nl_dot_avx2, tokd_iq4_nl_dot_avx512, tokd_iq4_nl_dot_avx512vnni},
    {GGML_TYPE_IQ4_XS, tokd_iq4_xs_dot_avx2, tokd_iq4_xs_dot_avx512, tokd_iq4_xs_dot_avx512vnni},
    {GGML_TYPE_IQ2_XXS, tokd_iq2_xxs_dot_avx2, NULL, NULL},
    {GGML_TYPE_IQ2_XS, tokd_iq2_xs_dot_avx2, NULL, NULL},
    {GGML_TYPE_IQ2_S, tokd_iq2_s_dot_avx2, NULL, NULL},
    {GGML_TYPE_IQ3_XXS, tokd_iq3_xxs_dot_avx2, NULL, NULL},
    {GGML_TYPE_IQ3_S, tokd_iq3_s_dot_avx2, NULL, NULL},
    {GGML_TYPE_IQ1_S, tokd_iq1_s_dot_avx2, NULL, NULL},
    {GGML_TYPE_IQ1_M, tokd_iq1_m_dot_avx2, NULL, NULL},
    {GGML_TYPE_Q8_1, NULL, NULL, NULL},
    {GGML_TYPE_Q8_K, NULL, NULL, NULL},
};
#define N_IMPLS (sizeof IMPLS / sizeof IMPLS[0])
/* decode's forms of the float rows (types.h, vec_dot_stream): the same bits again */
static const impls STREAM_IMPLS[] = {
    {GGML_TYPE_F32, tokd_f32_stream_dot_avx2, tokd_f32_stream_dot_avx512, NULL},
    {GGML_TYPE_F16, tokd_f16_stream_dot_avx2, tokd_f16_stream_dot_avx512, NULL},
    {GGML_TYPE_BF16, tokd_bf16_stream_dot_avx2, tokd_bf16_stream_dot_avx512, NULL},
};
#define N_STREAM_IMPLS (sizeof STREAM_IMPLS / sizeof STREAM_IMPLS[0])

static bool have_avx2(void) { return tokd_cpu()->avx2 && tokd_cpu()->fma && tokd_cpu()->f16c; }
static bool have_avx512(void) {
    const tokd_cpu_features *c = tokd_cpu();
    return have_avx2() && c->avx512f && c->avx512bw && c->avx512vl;
}
static bool have_vnni(void) { return have_avx512() && tokd_cpu()->avx512vnni; }
static bool have_vbmi(void) { return have_vnni() && tokd_cpu()->avx512vbmi; }
/* the one-row kernels for AVX-512 with VBMI and VNNI (dot_iq_avx512.c) */
static const struct {
    uint32_t id;
    tokd_vec_dot_fn fn;
} VBMI_IMPLS[] = {{GGML_TYPE_IQ2_XXS, tokd_iq2_xxs_dot_avx512vbmi}, {GGML_TYPE_IQ3_XXS, tokd_iq3_xxs_dot_avx512vbmi}};

/* Fill a weight row with random bits, keeping every scale a finite fp16 of moderate
 * size (raw blocks exercise every quant bit pattern, including Q8_0's -128). */
static uint16_t rnd_half(void) {
    float v = (float)(t_rand_pm1(&rng) * 0.05);
    return tokd_f32_to_f16(v);
}
static void put_half(uint8_t *p, uint16_t h) { memcpy(p, &h, 2); }
/* IQ1_M keeps its fp16 scale in the top nibbles of the four words of scales[] */
static void put_iq1_m_scale(uint8_t *blk, uint16_t h) {
    for (int i = 0; i < 4; i++) {
        uint16_t w;
        memcpy(&w, blk + 48 + 2 * i, 2);
        w = (uint16_t)((w & 0x0FFF) | ((h >> 4 * i) & 15) << 12);
        memcpy(blk + 48 + 2 * i, &w, 2);
    }
}
static void fill_raw_weights(const tokd_type_traits *t, uint8_t *row, int64_t K) {
    size_t nbytes = tokd_row_bytes(t, K);
    for (size_t i = 0; i < nbytes; i++) row[i] = (uint8_t)t_rand_u64(&rng);
    for (int64_t b = 0; b < K / (int64_t)t->blck; b++) {
        uint8_t *blk = row + (size_t)b * t->bytes;
        switch (t->id) {
        case GGML_TYPE_F16: put_half(blk, rnd_half()); break;
        case GGML_TYPE_BF16: {
            uint16_t h = tokd_f32_to_bf16((float)t_rand_pm1(&rng));
            memcpy(blk, &h, 2);
            break;
        }
        case GGML_TYPE_F32: {
            float f = (float)t_rand_pm1(&rng);
            memcpy(blk, &f, 4);
            break;
        }
        case GGML_TYPE_Q4_0: case GGML_TYPE_Q5_0: case GGML_TYPE_Q8_0: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ4_XS:
            put_half(blk, rnd_half());
            break;
        case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_1: put_half(blk, rnd_half()), put_half(blk + 2, rnd_half()); break;
        case GGML_TYPE_Q2_K: put_half(blk + 80, rnd_half()), put_half(blk + 82, rnd_half()); break;
        case GGML_TYPE_Q3_K: put_half(blk + 108, rnd_half()); break;
        case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: put_half(blk, rnd_half()), put_half(blk + 2, rnd_half()); break;
        case GGML_TYPE_Q6_K: put_half(blk + 208, rnd_half()); break;
        case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ3_XXS:
        case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ1_S:
            put_half(blk, rnd_half());
            break;
        case GGML_TYPE_IQ1_M: put_iq1_m_scale(blk, rnd_half()); break;
        }
    }
}
/* Activation blocks with random bits, qs in [-127, 127] as every quantiser produces,
 * and consistent Q8_1 sums / Q8_K bsums. */
static void fill_raw_act(const tokd_type_traits *a, uint8_t *row, int64_t K) {
    if (a->id == GGML_TYPE_F32) {
        float *f = (float *)row;
        for (int64_t i = 0; i < K; i++) f[i] = (float)t_rand_pm1(&rng);
        return;
    }
    if (a->id == GGML_TYPE_BF16) { /* BF16 weights' activations */
        for (int64_t i = 0; i < K; i++) {
            const uint16_t h = tokd_f32_to_bf16((float)t_rand_pm1(&rng));
            memcpy(row + 2 * i, &h, 2);
        }
        return;
    }
    for (int64_t b = 0; b < K / (int64_t)a->blck; b++) {
        uint8_t *blk = row + (size_t)b * a->bytes;
        if (a->id == GGML_TYPE_Q8_K) {
            tokd_block_q8_K *q = (tokd_block_q8_K *)blk;
            q->d = (float)(t_rand_pm1(&rng) * 0.01);
            for (int j = 0; j < 256; j++) q->qs[j] = (int8_t)(t_rand_u64(&rng) % 3 == 0 ? (t_rand_u64(&rng) & 1 ? 127 : -127) : (int)(t_rand_u64(&rng) % 255) - 127);
            for (int g = 0; g < 16; g++) {
                int s = 0;
                for (int l = 0; l < 16; l++) s += q->qs[16 * g + l];
                q->bsums[g] = (int16_t)s;
            }
        } else {
            int off = a->id == GGML_TYPE_Q8_1 ? 4 : 2;
            put_half(blk, rnd_half());
            int s = 0;
            for (int j = 0; j < 32; j++) {
                int v = t_rand_u64(&rng) % 3 == 0 ? (t_rand_u64(&rng) & 1 ? 127 : -127) : (int)(t_rand_u64(&rng) % 255) - 127;
                blk[off + j] = (uint8_t)(int8_t)v;
                s += v;
            }
            if (off == 4) put_half(blk + 2, tokd_f32_to_f16(tokd_f16_to_f32(rnd_half()) * (float)s));
        }
    }
}

static int64_t n_dot_checks, n_dot_mismatch;
static void check_dot(const char *what, const tokd_type_traits *t, tokd_vec_dot_fn fn, int64_t K, const uint8_t *W,
                      int rows, const uint8_t *A) {
    size_t rb = tokd_row_bytes(t, K);
    for (int r = 0; r < rows; r++) {
        float ref = NAN, got = NAN;
        t->vec_dot_ref(K, &ref, W + (size_t)r * rb, A);
        fn(K, &got, W + (size_t)r * rb, A);
        n_dot_checks++;
        if (memcmp(&ref, &got, 4) != 0) {
            if (n_dot_mismatch++ < 10)
                fprintf(stderr, "  %s %s K=%lld row %d: ref %.9g got %.9g\n", t->name, what, (long long)K, r, ref, got);
        }
    }
}

/* (a) every SIMD path bit-equal to the scalar reference. */
static void test_simd_equals_scalar(void) {
    static const int64_t Ks32[] = {32, 64, 96, 224, 256, 288, 480, 1024, 4096 + 96};
    static const int64_t KsK[] = {256, 512, 768, 1536, 1792, 2304, 4096 + 256};
    static const int64_t Ksf[] = {1, 7, 31, 32, 33, 100, 257, 4096 + 5};
    static const int rows_list[] = {1, 3, 7, 13};
    for (size_t ti = 0; ti < N_IMPLS; ti++) {
        const tokd_type_traits *t = tokd_type_get(IMPLS[ti].id);
        CHECK(t != NULL, "type %u missing", IMPLS[ti].id);
        if (!t) continue;
        const tokd_type_traits *a = tokd_type_get(t->vec_dot_type);
        const int64_t *Ks = t->blck == 256 ? KsK : t->blck == 32 ? Ks32 : Ksf;
        size_t nK = t->blck == 256 ? sizeof KsK / 8 : t->blck == 32 ? sizeof Ks32 / 8 : sizeof Ksf / 8;
        int64_t before_checks = n_dot_checks, before_mis = n_dot_mismatch;
        for (size_t ki = 0; ki < nK; ki++) {
            int64_t K = Ks[ki];
            for (int trial = 0; trial < 3; trial++) {
                int rows = rows_list[(ki + (size_t)trial) % 4];
                size_t rb = tokd_row_bytes(t, K);
                uint8_t *W = malloc(rb * (size_t)rows);
                uint8_t *A = malloc(tokd_row_bytes(a, K) + 64);
                float *f = malloc(sizeof(float) * (size_t)K);
                if (trial == 0) { /* quantised from data, as in a model (raw bits without a quantiser) */
                    for (int r = 0; r < rows; r++) {
                        fill_data(f, K, r % 3);
                        if (t->from_float) t->from_float(f, W + (size_t)r * rb, K);
                        else fill_raw_weights(t, W + (size_t)r * rb, K);
                    }
                    fill_data(f, K, 1);
                    a->from_float(f, A, K);
                } else { /* raw random bits */
                    for (int r = 0; r < rows; r++) fill_raw_weights(t, W + (size_t)r * rb, K);
                    fill_raw_act(a, A, K);
                }
                if (IMPLS[ti].avx2 && have_avx2()) check_dot("avx2", t, IMPLS[ti].avx2, K, W, rows, A);
                if (IMPLS[ti].avx512 && have_avx512()) check_dot("avx512", t, IMPLS[ti].avx512, K, W, rows, A);
                if (IMPLS[ti].avx512vnni && have_vnni()) check_dot("avx512vnni", t, IMPLS[ti].avx512vnni, K, W, rows, A);
                for (size_t vi = 0; vi < sizeof VBMI_IMPLS / sizeof VBMI_IMPLS[0]; vi++) {
                    if (VBMI_IMPLS[vi].id != t->id || !have_vbmi()) continue;
                    check_dot("avx512vbmi", t, VBMI_IMPLS[vi].fn, K, W, rows, A);
                }
                check_dot("selected", t, t->vec_dot, K, W, rows, A);
                for (size_t si = 0; si < N_STREAM_IMPLS; si++) {
                    if (STREAM_IMPLS[si].id != t->id) continue;
                    if (have_avx2()) check_dot("avx2 stream", t, STREAM_IMPLS[si].avx2, K, W, rows, A);
                    if (have_avx512()) check_dot("avx512 stream", t, STREAM_IMPLS[si].avx512, K, W, rows, A);
                }
                if (t->vec_dot_stream) check_dot("selected stream", t, t->vec_dot_stream, K, W, rows, A);
                free(W), free(A), free(f);
            }
        }
        CHECK(n_dot_mismatch == before_mis, "%s: %lld of %lld SIMD dot products differ from the scalar reference",
              t->name, (long long)(n_dot_mismatch - before_mis), (long long)(n_dot_checks - before_checks));
    }
    printf("dot products compared: %lld\n", (long long)n_dot_checks);
}

/* Four-row kernels: each output bit-equal to the scalar reference of its row; and
 * tokd_vec_dot4 (with or without a four-row kernel) for every type. */
static const struct {
    uint32_t id;
    tokd_vec_dot4_fn avx512, avx512vnni, avx2;
} DOT4[] = {
    {GGML_TYPE_Q4_0, tokd_q4_0_dot4_avx512, tokd_q4_0_dot4_avx512vnni, NULL},
    {GGML_TYPE_Q8_0, tokd_q8_0_dot4_avx512, tokd_q8_0_dot4_avx512vnni, NULL},
    {GGML_TYPE_Q4_K, tokd_q4_K_dot4_avx512, tokd_q4_K_dot4_avx512vnni, NULL},
    {GGML_TYPE_Q6_K, tokd_q6_K_dot4_avx512, tokd_q6_K_dot4_avx512vnni, NULL},
    {GGML_TYPE_IQ4_NL, tokd_iq4_nl_dot4_avx512, tokd_iq4_nl_dot4_avx512vnni, NULL},
    {GGML_TYPE_IQ4_XS, tokd_iq4_xs_dot4_avx512, tokd_iq4_xs_dot4_avx512vnni, NULL},
    {GGML_TYPE_IQ2_XXS, NULL, NULL, tokd_iq2_xxs_dot4_avx2},
    {GGML_TYPE_IQ2_XS, NULL, NULL, tokd_iq2_xs_dot4_avx2},
    {GGML_TYPE_IQ2_S, NULL, NULL, tokd_iq2_s_dot4_avx2},
    {GGML_TYPE_IQ3_XXS, NULL, NULL, tokd_iq3_xxs_dot4_avx2},
    {GGML_TYPE_IQ3_S, NULL, NULL, tokd_iq3_s_dot4_avx2},
    {GGML_TYPE_IQ1_S, NULL, NULL, tokd_iq1_s_dot4_avx2},
    {GGML_TYPE_IQ1_M, NULL, NULL, tokd_iq1_m_dot4_avx2},
    {GGML_TYPE_F32, tokd_f32_dot4_avx512, NULL, tokd_f32_dot4_avx2},
    {GGML_TYPE_F16, tokd_f16_dot4_avx512, NULL, tokd_f16_dot4_avx2},
    {GGML_TYPE_BF16, tokd_bf16_dot4_avx512, NULL, tokd_bf16_dot4_avx2},
};
static int64_t check_dot4(const tokd_type_traits *t, tokd_vec_dot4_fn fn, int64_t K, const uint8_t *W, int rows,
                          const uint8_t *A, size_t stride) {
    int64_t bad = 0;
    size_t rb = tokd_row_bytes(t, K);
    for (int r = 0; r < rows; r++) {
        float got[4], ref;
        if (fn)
            fn(K, got, W + (size_t)r * rb, A, stride);
        else
            tokd_vec_dot4(t, K, got, W + (size_t)r * rb, A, stride);
        for (int k = 0; k < 4; k++) {
            t->vec_dot_ref(K, &ref, W + (size_t)r * rb, A + (size_t)k * stride);
            if (memcmp(&ref, &got[k], 4) != 0) {
                if (bad++ < 3)
                    fprintf(stderr, "  %s dot4 K=%lld row %d act %d: ref %.9g got %.9g\n", t->name, (long long)K, r, k, ref,
                            got[k]);
            }
        }
    }
    return bad;
}
static void test_dot4(void) {
    static const int64_t Ks32[] = {32, 96, 256, 288, 4096 + 96};
    static const int64_t KsK[] = {256, 768, 4096 + 256};
    static const int64_t Ksf[] = {1, 33, 257};
    int64_t checks = 0;
    for (size_t ti = 0; ti < N_IMPLS; ti++) {
        const tokd_type_traits *t = tokd_type_get(IMPLS[ti].id), *a = tokd_type_get(t->vec_dot_type);
        tokd_vec_dot4_fn f512 = NULL, fvnni = NULL, f2 = NULL;
        for (size_t d = 0; d < sizeof DOT4 / sizeof DOT4[0]; d++)
            if (DOT4[d].id == t->id) f512 = DOT4[d].avx512, fvnni = DOT4[d].avx512vnni, f2 = DOT4[d].avx2;
        const int64_t *Ks = t->blck == 256 ? KsK : t->blck == 32 ? Ks32 : Ksf;
        size_t nK = t->blck == 256 ? sizeof KsK / 8 : t->blck == 32 ? sizeof Ks32 / 8 : sizeof Ksf / 8;
        int64_t bad = 0;
        for (size_t ki = 0; ki < nK; ki++) {
            int64_t K = Ks[ki];
            int rows = 1 + 2 * (int)(ki % 3);
            size_t rb = tokd_row_bytes(t, K), stride = tokd_row_bytes(a, K) + 2 * (ki & 1) * a->bytes;
            uint8_t *W = malloc(rb * (size_t)rows), *A = malloc(stride * 4);
            for (int trial = 0; trial < 2; trial++) {
                float *f = malloc(sizeof(float) * (size_t)K);
                for (int r = 0; r < rows; r++) {
                    if (trial == 0 && t->from_float) {
                        fill_data(f, K, r % 3);
                        t->from_float(f, W + (size_t)r * rb, K);
                    } else {
                        fill_raw_weights(t, W + (size_t)r * rb, K);
                    }
                }
                for (int k = 0; k < 4; k++) {
                    if (trial == 0) {
                        fill_data(f, K, 1);
                        a->from_float(f, A + (size_t)k * stride, K);
                    } else {
                        fill_raw_act(a, A + (size_t)k * stride, K);
                    }
                }
                free(f);
                bad += check_dot4(t, NULL, K, W, rows, A, stride), checks += rows * 4;
                if (f512 && have_avx512()) bad += check_dot4(t, f512, K, W, rows, A, stride), checks += rows * 4;
                if (fvnni && have_vnni()) bad += check_dot4(t, fvnni, K, W, rows, A, stride), checks += rows * 4;
                if (f2 && have_avx2()) bad += check_dot4(t, f2, K, W, rows, A, stride), checks += rows * 4;
            }
            free(W), free(A);
        }
        CHECK(bad == 0, "%s: %lld four-row dot products differ from the scalar reference", t->name, (long long)bad);
        if (t->id == GGML_TYPE_BF16) continue; /* its selection: test_bf16_rows */
        if (have_vnni() && fvnni && !getenv("TOKD_KERNELS"))
            CHECK(t->vec_dot4 == fvnni, "%s: four-row kernel not selected", t->name);
        if (have_avx512() && f512 && !fvnni && !getenv("TOKD_KERNELS")) /* the float rows' */
            CHECK(t->vec_dot4 == f512, "%s: four-row kernel not selected", t->name);
        if (!have_avx512() && have_avx2() && f2 && !getenv("TOKD_KERNELS"))
            CHECK(t->vec_dot4 == f2, "%s: AVX2 four-row kernel not selected", t->name);
        if (have_avx512() && f2 && !f512 && !fvnni && !getenv("TOKD_KERNELS")) /* the grid types' one AVX2 form */
            CHECK(t->vec_dot4 == f2, "%s: AVX2 four-row kernel not selected on the AVX-512 path", t->name);
        const char *force = getenv("TOKD_KERNELS");
        if (force && !strcmp(force, "avx2") && have_avx2() && f2)
            CHECK(t->vec_dot4 == f2, "%s: AVX2 four-row kernel not selected on the forced AVX2 path", t->name);
    }
    printf("four-row dot products compared: %lld\n", (long long)checks);
}

/* Two-by-four kernels (the float rows, AVX-512): each of the eight outputs bit-equal to
 * the scalar reference of its weight row and activation row, at lengths with and
 * without a tail, and selected on the AVX-512 path. */
static void test_dot2x4(void) {
    static const struct {
        uint32_t id;
        tokd_vec_dot2x4_fn fn;
    } D[] = {{GGML_TYPE_F32, tokd_f32_dot2x4_avx512}, {GGML_TYPE_F16, tokd_f16_dot2x4_avx512},
             {GGML_TYPE_BF16, tokd_bf16_dot2x4_avx512}};
    static const int64_t Ks[] = {1, 31, 32, 33, 257, 2048 + 7};
    if (!have_avx512()) return;
    int64_t checks = 0, bad = 0;
    for (size_t d = 0; d < sizeof D / sizeof D[0]; d++) {
        const tokd_type_traits *t = tokd_type_get(D[d].id), *a = tokd_type_get(t->vec_dot_type);
        if (!getenv("TOKD_KERNELS") && D[d].id != GGML_TYPE_BF16) /* BF16's selection: test_bf16_rows */
            CHECK(t->vec_dot2x4 == D[d].fn, "%s: two-by-four kernel not selected", t->name);
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
            const int64_t K = Ks[ki];
            const size_t rb = tokd_row_bytes(t, K) + 4 * (ki & 1), stride = tokd_row_bytes(a, K) + 8 * (ki & 1);
            uint8_t *W = calloc(2, rb), *A = calloc(4, stride);
            for (int h = 0; h < 2; h++) fill_raw_weights(t, W + (size_t)h * rb, K);
            for (int r = 0; r < 4; r++) fill_raw_act(a, A + (size_t)r * stride, K);
            float out[8];
            D[d].fn(K, out, W, rb, A, stride);
            for (int h = 0; h < 2; h++)
                for (int r = 0; r < 4; r++) {
                    float ref;
                    t->vec_dot_ref(K, &ref, W + (size_t)h * rb, A + (size_t)r * stride);
                    bad += memcmp(&ref, &out[4 * h + r], 4) != 0;
                    checks++;
                }
            free(W), free(A);
        }
    }
    CHECK(bad == 0, "%lld of %lld two-by-four dot products differ from the scalar reference", (long long)bad,
          (long long)checks);
}

/* The end of a float row's dot product from its lane sums, as vec_dot ends (matmul.c's
 * finish_rows does the same). */
static float finish_lanes(const tokd_type_traits *t, int64_t K, const uint8_t *W, const float *x, float s[32]) {
    const int64_t body = K & ~(int64_t)31;
    float tail[32];
    if (K > body) t->to_float(W + tokd_row_bytes(t, body), tail, K - body);
    for (int64_t k = body; k < K; k++) s[k & 31] += tail[k - body] * x[k];
    return tokd_reduce32(s);
}

/* Few-row decode forms (the float rows, vec_dot_rows_part): for one to four activation
 * rows, the lane sums of one call over the row's whole steps, or of two calls split at
 * a step (the second adding to the first's sums from another buffer, with its
 * prefetches following another stream), end in the scalar reference's bits; at lengths
 * with and without a tail and with padded strides. The form of the best path is the
 * one selected. */
static void test_dot_rows(void) {
    static const struct {
        uint32_t id;
        tokd_vec_dot_rows_part_fn avx2, avx512;
    } D[] = {{GGML_TYPE_F16, tokd_f16_rows_part_avx2, tokd_f16_rows_part_avx512}};
    /* BF16 and F32 rows have no 32-lane sums to hand on (bf16_rows.c, f32_rows.c): their
       few-row form is vec_dot_stream_rows, test_bf16_rows and test_f32_rows */
    CHECK(tokd_type_get(GGML_TYPE_BF16)->vec_dot_rows_part == NULL, "BF16 rows have no lane-sum form");
    CHECK(tokd_type_get(GGML_TYPE_F32)->vec_dot_rows_part == NULL, "F32 rows have no lane-sum form");
    static const int64_t Ks[] = {32, 33, 64, 257, 2048 + 7, 5632};
    int64_t checks = 0, bad = 0;
    for (size_t d = 0; d < sizeof D / sizeof D[0]; d++) {
        const tokd_type_traits *t = tokd_type_get(D[d].id), *a = tokd_type_get(t->vec_dot_type);
        if (!getenv("TOKD_KERNELS")) {
            tokd_vec_dot_rows_part_fn want = have_avx512() ? D[d].avx512 : have_avx2() ? D[d].avx2 : NULL;
            CHECK(t->vec_dot_rows_part == want, "%s: few-row decode form %s", t->name,
                  want ? "not the best available" : "set where none exists");
        }
        const tokd_vec_dot_rows_part_fn fns[] = {have_avx2() ? D[d].avx2 : NULL, have_avx512() ? D[d].avx512 : NULL,
                                                 t->vec_dot_rows_part};
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
            const int64_t K = Ks[ki], body = K & ~(int64_t)31, split = (body / 64) * 32;
            const size_t rb = tokd_row_bytes(t, K), stride = tokd_row_bytes(a, K) + 8 * (ki & 1);
            uint8_t *W = calloc(1, rb), *A = calloc(4, stride);
            fill_raw_weights(t, W, K);
            for (int r = 0; r < 4; r++) fill_raw_act(a, A + (size_t)r * stride, K);
            float ref[4];
            for (int r = 0; r < 4; r++) t->vec_dot_ref(K, &ref[r], W, A + (size_t)r * stride);
            for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++)
                for (int rows = 1; fns[f] && rows <= 4; rows++)
                    for (int two = 0; two < 2; two++) {
                        float acc[4 * 32 + 1], acc2[4 * 32 + 1];
                        acc[4 * 32] = acc2[4 * 32] = -1.0f; /* past the rows' sums: must stay */
                        if (rows < 4) acc[32 * rows] = acc2[32 * rows] = -1.0f;
                        float *sums = acc;
                        if (!two) {
                            fns[f](body, NULL, acc, W, A, stride, rows, NULL);
                        } else {
                            fns[f](split, NULL, acc, W, A, stride, rows, NULL);
                            fns[f](body - split, acc, acc2, W + tokd_row_bytes(t, split), A + split * sizeof(float), stride,
                                   rows, W);
                            sums = acc2;
                        }
                        CHECK(sums[4 * 32] == -1.0f && (rows == 4 || sums[32 * rows] == -1.0f),
                              "%s: few-row form wrote past row %d", t->name, rows);
                        for (int r = 0; r < rows; r++, checks++) {
                            const float got = finish_lanes(t, K, W, (const float *)(A + (size_t)r * stride), sums + 32 * r);
                            if (memcmp(&ref[r], &got, 4) != 0 && bad++ < 10)
                                fprintf(stderr, "  %s few-row form %zu K=%lld rows %d (%s) row %d: ref %.9g got %.9g\n",
                                        t->name, f, (long long)K, rows, two ? "two calls" : "one call", r, ref[r], got);
                        }
                    }
            free(W), free(A);
        }
    }
    CHECK(bad == 0, "%lld of %lld few-row dot products differ from the scalar reference", (long long)bad,
          (long long)checks);
    printf("few-row decode dot products compared: %lld\n", (long long)checks);
}

/* The selected path is the best this CPU has. */
static void test_selection(void) {
    const char *path = tokd_kernels_path();
    const char *force = getenv("TOKD_KERNELS");
    if (force) return;
    if (have_avx512())
        CHECK(strcmp(path, "avx512") == 0, "path %s on an AVX-512 machine", path);
    else if (have_avx2())
        CHECK(strcmp(path, "avx2") == 0, "path %s on an AVX2 machine", path);
    for (size_t ti = 0; ti < N_IMPLS; ti++) {
        const tokd_type_traits *t = tokd_type_get(IMPLS[ti].id);
        if (t->id == GGML_TYPE_BF16) continue; /* its own paths (AVX512-BF16 too): test_bf16_rows */
        tokd_vec_dot_fn want = t->vec_dot_ref;
        if (have_avx2() && IMPLS[ti].avx2) want = IMPLS[ti].avx2;
        if (have_avx512() && IMPLS[ti].avx512) want = IMPLS[ti].avx512;
        if (have_vnni() && IMPLS[ti].avx512vnni) want = IMPLS[ti].avx512vnni;
        for (size_t vi = 0; vi < sizeof VBMI_IMPLS / sizeof VBMI_IMPLS[0]; vi++)
            if (VBMI_IMPLS[vi].id == t->id && have_vbmi()) want = VBMI_IMPLS[vi].fn;
        CHECK(t->vec_dot == want, "%s: selected implementation is not the best available", t->name);
        tokd_vec_dot_fn want_stream = NULL; /* the float rows' decode forms, on the same path */
        for (size_t si = 0; si < N_STREAM_IMPLS; si++) {
            if (STREAM_IMPLS[si].id != t->id) continue;
            if (have_avx2()) want_stream = STREAM_IMPLS[si].avx2;
            if (have_avx512()) want_stream = STREAM_IMPLS[si].avx512;
        }
        CHECK(t->vec_dot_stream == want_stream, "%s: decode form %s", t->name, want_stream ? "not the best available" : "set where none exists");
    }
}

/* Geometry agrees with the GGUF reader's table. */
static void test_geometry(void) {
    for (size_t ti = 0; ti < N_IMPLS; ti++) {
        const tokd_type_traits *t = tokd_type_get(IMPLS[ti].id);
        uint32_t blck = 0, bytes = 0;
        CHECK(ggml_type_geometry(t->id, &blck, &bytes), "%s unknown to gguf", t->name);
        CHECK(blck == t->blck && bytes == t->bytes, "%s: geometry %u/%u vs gguf %u/%u", t->name, t->blck, t->bytes, blck,
              bytes);
        CHECK(tokd_type_get(t->vec_dot_type) != NULL, "%s: activation type missing", t->name);
    }
    CHECK(tokd_type_get(GGML_TYPE_Q4_0)->vec_dot_type == GGML_TYPE_Q8_0, "q4_0 act");
    CHECK(tokd_type_get(GGML_TYPE_Q5_0)->vec_dot_type == GGML_TYPE_Q8_0, "q5_0 act");
    CHECK(tokd_type_get(GGML_TYPE_Q8_0)->vec_dot_type == GGML_TYPE_Q8_0, "q8_0 act");
    CHECK(tokd_type_get(GGML_TYPE_Q4_1)->vec_dot_type == GGML_TYPE_Q8_1, "q4_1 act");
    CHECK(tokd_type_get(GGML_TYPE_Q5_1)->vec_dot_type == GGML_TYPE_Q8_1, "q5_1 act");
    uint32_t kq[] = {GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
    for (int i = 0; i < 5; i++) CHECK(tokd_type_get(kq[i])->vec_dot_type == GGML_TYPE_Q8_K, "k-quant act");
}

/* (b) quantize -> dequantize error, relative RMS, on Gaussian data (with outliers). */
static void test_roundtrip_error(void) {
    /* relative RMSE bounds: Gaussian data; Gaussian with 1% outliers x12 (and zeros) */
    static const struct {
        uint32_t id;
        double bound, bound_outliers;
    } B[] = {
        {GGML_TYPE_F16, 0.0005, 0.0005}, {GGML_TYPE_BF16, 0.004, 0.004}, {GGML_TYPE_Q8_0, 0.007, 0.013},
        {GGML_TYPE_Q8_1, 0.007, 0.013},  {GGML_TYPE_Q8_K, 0.008, 0.028}, {GGML_TYPE_Q6_K, 0.021, 0.035},
        {GGML_TYPE_Q5_0, 0.05, 0.10},    {GGML_TYPE_Q5_1, 0.045, 0.062}, {GGML_TYPE_Q5_K, 0.042, 0.06},
        {GGML_TYPE_Q4_0, 0.10, 0.19},    {GGML_TYPE_Q4_1, 0.09, 0.125},  {GGML_TYPE_Q4_K, 0.082, 0.115},
        {GGML_TYPE_Q3_K, 0.175, 0.225},  {GGML_TYPE_Q2_K, 0.34, 0.37},   {GGML_TYPE_IQ4_NL, 0.09, 0.14},
        {GGML_TYPE_IQ4_XS, 0.09, 0.14},
    };
    const int64_t n = 256 * 64;
    rng = 6789;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    uint8_t *q = malloc((size_t)n * 4);
    for (size_t i = 0; i < sizeof B / sizeof B[0]; i++) {
        const tokd_type_traits *t = tokd_type_get(B[i].id);
        double rel[3];
        for (int style = 0; style < 3; style++) {
            fill_data(x, n, style);
            t->from_float(x, q, n);
            t->to_float(q, y, n);
            double se = 0, ss = 0;
            for (int64_t k = 0; k < n; k++) se += (double)(x[k] - y[k]) * (x[k] - y[k]), ss += (double)x[k] * x[k];
            rel[style] = sqrt(se / ss);
        }
        printf("roundtrip %-5s rel RMSE: gaussian %.5f (bound %.4f), with outliers %.5f, %.5f (bound %.4f)\n", t->name,
               rel[0], B[i].bound, rel[1], rel[2], B[i].bound_outliers);
        CHECK(rel[0] <= B[i].bound, "%s: quantize->dequantize relative RMSE %.5f > %.4f", t->name, rel[0], B[i].bound);
        CHECK(rel[1] <= B[i].bound_outliers && rel[2] <= B[i].bound_outliers,
              "%s: with outliers, relative RMSE %.5f/%.5f > %.4f", t->name, rel[1], rel[2], B[i].bound_outliers);
        /* all-zero input: zero scales, exact zeros back, dot products zero */
        memset(x, 0, sizeof(float) * 512);
        t->from_float(x, q, 512);
        t->to_float(q, y, 512);
        int nz = 0;
        for (int k = 0; k < 512; k++) nz += y[k] != 0;
        CHECK(nz == 0, "%s: zeros do not round-trip", t->name);
    }
    /* non-finite input must not crash (values are unspecified) */
    for (size_t i = 0; i < sizeof B / sizeof B[0]; i++) {
        const tokd_type_traits *t = tokd_type_get(B[i].id);
        fill_data(x, 512, 0);
        x[3] = NAN, x[300] = INFINITY, x[301] = -INFINITY;
        t->from_float(x, q, 512);
        t->to_float(q, y, 512);
    }
    free(x), free(y), free(q);
}

/* Activation quantisers round as ggml's CPU backend. */
static void test_activation_rounding(void) {
    float x[256];
    /* amax = 127 -> multiplier exactly 1: ties go to even (2.5 -> 2, 3.5 -> 4, -2.5 -> -2) */
    for (int i = 0; i < 32; i++) x[i] = 0;
    x[0] = 127, x[1] = 2.5f, x[2] = 3.5f, x[3] = -2.5f, x[4] = 0.5f, x[5] = 1.5f;
    tokd_block_q8_0 b;
    tokd_q8_0_from_float(x, &b, 32);
    CHECK(b.qs[0] == 127 && b.qs[1] == 2 && b.qs[2] == 4 && b.qs[3] == -2 && b.qs[4] == 0 && b.qs[5] == 2,
          "q8_0 activation rounding: %d %d %d %d %d %d", b.qs[0], b.qs[1], b.qs[2], b.qs[3], b.qs[4], b.qs[5]);
    CHECK(tokd_f16_to_f32(b.d) == 1.0f, "q8_0 d");
    /* the file quantiser rounds half away from zero */
    tokd_q8_0_from_float_ref(x, &b, 32);
    CHECK(b.qs[1] == 3 && b.qs[2] == 4 && b.qs[3] == -3 && b.qs[4] == 1, "q8_0 file rounding: %d %d %d %d", b.qs[1],
          b.qs[2], b.qs[3], b.qs[4]);
    tokd_block_q8_1 b1;
    tokd_q8_1_from_float(x, &b1, 32);
    CHECK(tokd_f16_to_f32(b1.s) == 127 + 2 + 4 - 2 + 0 + 2, "q8_1 sum %g", tokd_f16_to_f32(b1.s));
    /* Q8_K: the largest magnitude maps to -127 (sign folded into d), sums per 16 */
    for (int i = 0; i < 256; i++) x[i] = (float)((i % 17) - 8) * 0.25f;
    x[40] = 10.0f;
    tokd_block_q8_K k;
    tokd_q8_K_from_float(x, &k, 256);
    CHECK(k.qs[40] == -127 && k.d < 0, "q8_K max -> -127 (got %d, d %g)", k.qs[40], k.d);
    int ok = 1;
    for (int g = 0; g < 16; g++) {
        int s = 0;
        for (int l = 0; l < 16; l++) s += k.qs[16 * g + l];
        ok &= s == k.bsums[g];
    }
    CHECK(ok, "q8_K bsums");
    x[40] = -10.0f;
    tokd_q8_K_from_float(x, &k, 256);
    CHECK(k.qs[40] == -127 && k.d > 0, "q8_K negative max -> -127");
}

/* BF16 rows (bf16_rows.c): every kernel of every path this CPU has (the FMA forms on
 * AVX2 and AVX-512, the instruction where it has AVX512-BF16) gives the scalar
 * statement's bits, at lengths with and without a tail, raw random rows with zeros and
 * both signs; so on such a CPU the statement is the instruction's own order. The
 * selected kernels are the best path's, the activations are BF16 and their AVX2
 * conversion is tokd_f32_to_bf16's, NaN included. */
/* A float-row family's kernels on one path (f32_rows.c, bf16_rows.c). */
typedef struct {
    const char *name;
    bool have;
    tokd_vec_dot_fn dot, stream;
    tokd_vec_dot4_fn dot4;
    tokd_vec_dot2x4_fn dot2x4;
    tokd_vec_dot_stream_rows_fn rows;
} path;
/* Unless TOKD_KERNELS forces a path: t's kernels are best's, or its statement where
 * there is no path. */
static void check_path_selected(const tokd_type_traits *t, const path *best) {
    if (getenv("TOKD_KERNELS")) return;
    CHECK(best ? t->vec_dot == best->dot && t->vec_dot_stream == best->stream && t->vec_dot4 == best->dot4 &&
                     t->vec_dot2x4 == best->dot2x4 && t->vec_dot_stream_rows == best->rows
               : t->vec_dot == t->vec_dot_ref,
          "%s kernels of the best path (%s) selected", t->name, best ? best->name : "scalar");
}

/* F32 rows (f32_rows.c): the statement's order on crafted rows where another order gives
 * another value, worked out by hand; every path's kernels equal the statement (one row,
 * stream, four rows, two by four, one to four rows with padded strides) at lengths that
 * are and are not multiples of 16; the best path is selected. */
static void test_f32_rows(void) {
    float w[80] = {0}, x[80];
    for (int i = 0; i < 80; i++) x[i] = 1.0f;
    float got;
    /* 16 lanes: 2^24, 1, -2^24 at 0, 16, 32 share lane 0, where 2^24 + 1 rounds to 2^24
       (32 lanes would give 1) */
    w[0] = 16777216.0f, w[16] = 1.0f, w[32] = -16777216.0f;
    tokd_f32_dot_ref(48, &got, w, x);
    CHECK(got == 0.0f, "F32 rows of 48: 16 lanes (got %g, want 0)", got);
    /* odd lengths: -1 in the 64-lane body, then (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 at
       element 64: fused into the sum where it is among the last (n - 64) % 8 elements
       (n = 65: 2^-11 + 2^-24), rounded to 1 + 2^-11 first where it is not (n = 73) */
    memset(w, 0, sizeof w);
    w[0] = -1.0f, w[64] = x[64] = 1.0f + 0x1p-12f;
    tokd_f32_dot_ref(65, &got, w, x);
    CHECK(got == 0x1p-11f + 0x1p-24f, "F32 rows of 65: the last product fused (got %a)", got);
    tokd_f32_dot_ref(73, &got, w, x);
    CHECK(got == 0x1p-11f, "F32 rows of 73: the ninth-last product rounded (got %a)", got);
    x[64] = 1.0f;
    const path P[] = {
        {"avx2", have_avx2(), tokd_f32_dot_avx2, tokd_f32_stream_dot_avx2, tokd_f32_dot4_avx2, NULL,
         tokd_f32_stream_rows_avx2},
        {"avx512", have_avx512(), tokd_f32_dot_avx512, tokd_f32_stream_dot_avx512, tokd_f32_dot4_avx512,
         tokd_f32_dot2x4_avx512, tokd_f32_stream_rows_avx512},
    };
    const tokd_type_traits *t = tokd_type_get(GGML_TYPE_F32);
    CHECK(t->vec_dot_ref == tokd_f32_dot_ref, "F32 rows: the statement is f32_rows.c's");
    check_path_selected(t, have_avx512() ? &P[1] : have_avx2() ? &P[0] : NULL);
    static const int64_t Ks[] = {1, 15, 16, 48, 63, 65, 73, 127, 129, 172, 191, 256, 2048, 4096 + 16, 4096 + 71};
    int64_t bad = 0, checks = 0;
    for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
        const int64_t K = Ks[ki];
        const size_t stride = sizeof(float) * (size_t)(K + 3 * (ki & 1)); /* padded strides too */
        float *W = malloc(sizeof(float) * (size_t)K * 2), *A = malloc(stride * 4);
        fill_data(W, 2 * K, (int)ki % 3);
        for (int r = 0; r < 4; r++) fill_data((float *)((char *)A + r * stride), K, (int)(ki + r) % 3);
        float ref[8];
        for (int h = 0; h < 2; h++)
            for (int r = 0; r < 4; r++) tokd_f32_dot_ref(K, &ref[4 * h + r], W + h * K, (char *)A + r * stride);
        for (size_t p = 0; p < sizeof P / sizeof P[0]; p++) {
            if (!P[p].have) continue;
            float out[8];
            for (int r = 0; r < 4; r++) {
                P[p].dot(K, &out[0], W, (char *)A + r * stride);
                P[p].stream(K, &out[1], W, (char *)A + r * stride);
                bad += memcmp(&out[0], &ref[r], 4) != 0;
                bad += memcmp(&out[1], &ref[r], 4) != 0;
                checks += 2;
            }
            P[p].dot4(K, out, W, A, stride);
            bad += memcmp(out, ref, 16) != 0;
            checks++;
            if (P[p].dot2x4) {
                P[p].dot2x4(K, out, W, sizeof(float) * (size_t)K, A, stride);
                bad += memcmp(out, ref, 32) != 0;
                checks++;
            }
            for (int rows = 1; rows <= 4; rows++) {
                float o[5];
                o[rows] = -1.0f;
                P[p].rows(K, o, W, A, stride, rows);
                bad += memcmp(o, ref, sizeof(float) * (size_t)rows) != 0 || o[rows] != -1.0f;
                checks++;
            }
        }
        free(W);
        free(A);
    }
    CHECK(bad == 0, "F32 kernels: %lld of %lld results differ from the statement", (long long)bad, (long long)checks);
}

static void test_bf16_rows(void) {
    const bool bf16 = have_avx512() && tokd_cpu()->avx512bf16;
    const path P[] = {
        {"avx2", have_avx2(), tokd_bf16_dot_avx2, tokd_bf16_stream_dot_avx2, tokd_bf16_dot4_avx2, NULL,
         tokd_bf16_stream_rows_avx2},
        {"avx512", have_avx512(), tokd_bf16_dot_avx512, tokd_bf16_stream_dot_avx512, tokd_bf16_dot4_avx512,
         tokd_bf16_dot2x4_avx512, tokd_bf16_stream_rows_avx512},
        {"avx512bf16", bf16, tokd_bf16_dot_avx512bf16, tokd_bf16_stream_dot_avx512bf16, tokd_bf16_dot4_avx512bf16,
         tokd_bf16_dot2x4_avx512bf16, tokd_bf16_stream_rows_avx512bf16},
    };
    const tokd_type_traits *t = tokd_type_get(GGML_TYPE_BF16);
    CHECK(t->vec_dot_type == GGML_TYPE_BF16 && t->vec_dot_ref == tokd_bf16_dot_ref, "BF16 rows take BF16 activations");
    check_path_selected(t, bf16 ? &P[2] : have_avx512() ? &P[1] : have_avx2() ? &P[0] : NULL);
    static const int64_t Ks[] = {1, 7, 31, 32, 33, 64, 100, 257, 2048, 4096 + 5};
    int64_t checks = 0, bad = 0;
    for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
        const int64_t K = Ks[ki];
        const size_t rb = 2 * (size_t)K + 6 * (ki & 1), as = 2 * (size_t)K + 10 * (ki & 1); /* padded strides too */
        uint8_t *W = calloc(2, rb), *A = calloc(4, as);
        for (int h = 0; h < 2; h++) fill_raw_weights(t, W + (size_t)h * rb, K);
        for (int r = 0; r < 4; r++) fill_raw_act(tokd_type_get(GGML_TYPE_BF16), A + (size_t)r * as, K);
        for (int64_t i = 5; i < K; i += 11) memset(W + 2 * i, 0, 2); /* zeros among the values */
        float ref[2][4];
        for (int h = 0; h < 2; h++)
            for (int r = 0; r < 4; r++) tokd_bf16_dot_ref(K, &ref[h][r], W + (size_t)h * rb, A + (size_t)r * as);
        for (size_t p = 0; p < sizeof P / sizeof P[0]; p++) {
            if (!P[p].have) continue;
            float got[8];
            for (int h = 0; h < 2; h++)
                for (int r = 0; r < 4; r++, checks += 2) {
                    P[p].dot(K, &got[0], W + (size_t)h * rb, A + (size_t)r * as);
                    P[p].stream(K, &got[1], W + (size_t)h * rb, A + (size_t)r * as);
                    bad += (memcmp(&got[0], &ref[h][r], 4) != 0) + (memcmp(&got[1], &ref[h][r], 4) != 0);
                }
            for (int h = 0; h < 2; h++, checks += 4) {
                P[p].dot4(K, got, W + (size_t)h * rb, A, as);
                bad += memcmp(got, ref[h], 16) != 0;
            }
            for (int rows = 1; rows <= 4; rows++)
                for (int h = 0; h < 2; h++, checks += rows) {
                    float out[5] = {0, 0, 0, 0, -1.0f};
                    out[rows] = -1.0f;
                    P[p].rows(K, out, W + (size_t)h * rb, A, as, rows);
                    bad += memcmp(out, ref[h], 4 * (size_t)rows) != 0 || out[rows] != -1.0f;
                }
            if (P[p].dot2x4) {
                P[p].dot2x4(K, got, W, rb, A, as);
                bad += memcmp(got, ref[0], 16) != 0 || memcmp(got + 4, ref[1], 16) != 0;
                checks += 8;
            }
        }
        free(W), free(A);
    }
    CHECK(bad == 0, "%lld of %lld BF16 dot products differ from the scalar statement", (long long)bad, (long long)checks);
    printf("BF16 dot products compared: %lld%s\n", (long long)checks, bf16 ? " (with the AVX512-BF16 instruction)" : "");

    /* the order itself: lane 0 holds 1.0 from the first step (element 1); in the second,
       element 33 (2^-24, a tie: stays 1.0) goes before element 32 (1.5 * 2^-24: up to
       1 + 2^-23). Even before odd would give 1 + 2^-22. */
    uint16_t w[64], x[64];
    for (int i = 0; i < 64; i++) w[i] = x[i] = 0;
    const uint16_t one = 0x3f80;
    w[1] = w[32] = w[33] = one;
    x[1] = one, x[33] = tokd_f32_to_bf16(0x1p-24f), x[32] = tokd_f32_to_bf16(0x1.8p-24f);
    float got;
    tokd_bf16_dot_ref(64, &got, w, x);
    CHECK(got == 1.0f + 0x1p-23f, "BF16 statement's order (odd element first): %a", got);

    /* activations: tokd_f32_to_bf16 element by element, NaN's quieting and every tail */
    enum { N = 1000 };
    float xf[N];
    uint16_t want[N], conv[N];
    for (int i = 0; i < N; i++) xf[i] = t_rand_gauss(&rng) * (float)exp((t_rand_unit(&rng) - 0.5) * 60);
    xf[0] = NAN, xf[1] = -INFINITY, xf[2] = 1.0f + 0x1p-8f, xf[3] = 1.0f + 0x3p-8f, xf[4] = -0.0f, xf[5] = 0x1p-140f;
    uint32_t snan = 0x7f800001u;
    memcpy(&xf[6], &snan, 4);
    for (int i = 0; i < N; i++) want[i] = tokd_f32_to_bf16(xf[i]);
    CHECK(want[2] == 0x3f80 && want[3] == 0x3f82, "BF16 conversion ties to even: %04x %04x", want[2], want[3]);
    CHECK(want[6] == 0x7fc0, "BF16 conversion quiets a signalling NaN: %04x", want[6]);
    uint16_t row[N];
    t->from_float(xf, row, N);
    CHECK(memcmp(row, want, sizeof want) == 0, "the BF16 row's from_float is tokd_f32_to_bf16");
    if (have_avx2())
        for (int off = 0; off < 17; off++) {
            memset(conv, 0, sizeof conv);
            tokd_bf16_act_avx2(xf + off, conv, N - off);
            CHECK(memcmp(conv, want + off, 2 * (size_t)(N - off)) == 0, "AVX2 BF16 activation conversion (offset %d)", off);
        }
}

/* F16 weights' activation rows (types.h: act_convert): each element rounded to the
 * nearest F16, ties to even, subnormal halves and overflow to infinity included, kept as
 * F32; the AVX2 form gives the scalar one's bits, and the F16 row selects one of them. */
static void test_f16_activation_rows(void) {
    enum { N = 4096 + 5 };
    float *x = malloc(sizeof(float) * N), *want = malloc(sizeof(float) * N), *got = malloc(sizeof(float) * N);
    const float special[] = {1.0f + 0x1p-11f,  1.0f + 0x3p-11f, -1.0f - 0x1p-11f, 65504.0f, 65519.0f, 65520.0f,
                             -65520.0f,        0x1p-24f,        0x1p-25f,         0x3p-26f, 0x1p-14f, 0x1.ffcp-15f,
                             -0.0f,            INFINITY,        -INFINITY,        1e-30f};
    const size_t n_special = sizeof special / sizeof special[0];
    for (int i = 0; i < N; i++)
        x[i] = (size_t)i < n_special ? special[i] : t_rand_gauss(&rng) * (float)exp((t_rand_unit(&rng) - 0.5) * 40);
    tokd_f16_round_row(x, want, N);
    /* ties to even: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10 */
    CHECK(want[0] == 1.0f && want[1] == 1.0f + 0x1p-9f && want[2] == -1.0f, "F16 rounding ties to even: %a %a %a", want[0],
          want[1], want[2]);
    CHECK(want[3] == 65504.0f && want[4] == 65504.0f && isinf(want[5]) && isinf(want[6]) && want[6] < 0,
          "F16 rounding at the top of the range: %g %g %g %g", want[3], want[4], want[5], want[6]);
    CHECK(want[7] == 0x1p-24f && want[8] == 0.0f && want[9] == 0x1p-24f && want[10] == 0x1p-14f && want[11] == 0x1p-14f,
          "F16 rounding of subnormal halves: %a %a %a %a %a", want[7], want[8], want[9], want[10], want[11]);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += want[i] != tokd_f16_to_f32(tokd_f32_to_f16(x[i])) && !(want[i] == 0 && x[i] == 0);
    CHECK(bad == 0, "F16 activation rounding is the conversion's round trip (%d differ)", bad);
    const tokd_type_traits *t = tokd_type_get(GGML_TYPE_F16);
    CHECK(t->act_convert == tokd_f16_round_row || t->act_convert == tokd_f16_round_row_avx2,
          "F16 rows convert their activations");
    CHECK(tokd_type_get(GGML_TYPE_F32)->act_convert == NULL, "F32 rows take their activations as they are");
    if (have_avx2()) {
        for (int n = 0; n <= 19; n++) { /* every tail length, and the vector body */
            memset(got, 0, sizeof(float) * N);
            tokd_f16_round_row_avx2(x + n, got, N - n);
            CHECK(memcmp(got, want + n, sizeof(float) * (size_t)(N - n)) == 0, "AVX2 F16 activation rounding (offset %d)",
                  n);
        }
    }
    free(x), free(want), free(got);
}

/* Quantised dot product (weights and activations quantised) vs the exact dot product of
 * the original Gaussian data: RMS over 64 pairs of the error relative to the typical
 * magnitude of such a dot product, |w||x|/sqrt(K). That error is about the weight
 * type's relative round-trip error (plus the activation format's); the bounds are
 * about 1.3 times the round-trip bounds above. */
static void test_dot_accuracy(void) {
    static const struct {
        uint32_t id;
        double bound;
    } B[] = {{GGML_TYPE_F32, 1e-6},  {GGML_TYPE_F16, 5e-4},  {GGML_TYPE_BF16, 3e-3}, {GGML_TYPE_Q8_0, 0.012},
             {GGML_TYPE_Q4_0, 0.12},  {GGML_TYPE_Q4_1, 0.11},  {GGML_TYPE_Q5_0, 0.06}, {GGML_TYPE_Q5_1, 0.055},
             {GGML_TYPE_Q2_K, 0.40},  {GGML_TYPE_Q3_K, 0.21},  {GGML_TYPE_Q4_K, 0.10}, {GGML_TYPE_Q5_K, 0.05},
             {GGML_TYPE_Q6_K, 0.028}, {GGML_TYPE_IQ4_NL, 0.10}, {GGML_TYPE_IQ4_XS, 0.11}};
    const int64_t K = 4096;
    const int trials = 64;
    rng = 12345; /* independent of the tests run before */
    float *w = malloc(sizeof(float) * K), *x = malloc(sizeof(float) * K);
    uint8_t *qw = malloc((size_t)K * 4), *qa = malloc((size_t)K * 4 + 64);
    for (size_t i = 0; i < sizeof B / sizeof B[0]; i++) {
        const tokd_type_traits *t = tokd_type_get(B[i].id), *a = tokd_type_get(t->vec_dot_type);
        double se = 0;
        for (int trial = 0; trial < trials; trial++) {
            fill_data(w, K, 0);
            fill_data(x, K, 0);
            double exact = 0, norm = 0, nw = 0, nx = 0;
            for (int64_t k = 0; k < K; k++) exact += (double)w[k] * x[k], nw += (double)w[k] * w[k], nx += (double)x[k] * x[k];
            norm = sqrt(nw * nx) / sqrt((double)K); /* typical size of a dot of unrelated vectors */
            t->from_float(w, qw, K);
            a->from_float(x, qa, K);
            float got;
            t->vec_dot(K, &got, qw, qa);
            se += ((got - exact) / norm) * ((got - exact) / norm);
        }
        double rms = sqrt(se / trials);
        printf("dot %-5s rms error %.5f of the typical magnitude (bound %.4f)\n", t->name, rms, B[i].bound);
        CHECK(rms <= B[i].bound, "%s: dot rms error %.4f of the typical magnitude > %.4f", t->name, rms, B[i].bound);
    }
    free(w), free(x), free(qw), free(qa);
}

/* (c) the golden models. */
static void test_golden_models(void) {
    char path[1024];
    tokd_err err;
    snprintf(path, sizeof path, "%s/models/tiny-llama-f32.gguf", t_shared());
    gguf_file *ref = gguf_open(path, &err);
    CHECK(ref != NULL, "open %s: %s", path, err.msg);
    if (!ref) return;
    static const struct {
        const char *model;
        uint32_t type;
        double bound;
    } C[] = {{"Q8_0", GGML_TYPE_Q8_0, 0.008}, {"Q4_0", GGML_TYPE_Q4_0, 0.12}, {"Q4_0", GGML_TYPE_Q6_K, 0.025},
             {"Q4_K_M", GGML_TYPE_Q4_K, 0.09}, {"Q4_K_M", GGML_TYPE_Q6_K, 0.025}, {"F16", GGML_TYPE_F16, 0.0005},
             {"BF16", GGML_TYPE_BF16, 0.004}};
    for (size_t c = 0; c < sizeof C / sizeof C[0]; c++) {
        snprintf(path, sizeof path, "%s/models/tiny-llama-%s.gguf", t_shared(), C[c].model);
        gguf_file *q = gguf_open(path, &err);
        CHECK(q != NULL, "open %s: %s", path, err.msg);
        if (!q) continue;
        int n_tensors = 0;
        size_t blocks = 0, differing = 0;
        double worst = 0;
        for (uint64_t i = 0; i < q->n_tensors; i++) {
            const gguf_tensor *tq = &q->tensors[i];
            if (tq->type != C[c].type) continue;
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)tq->name.len, tq->name.ptr);
            const gguf_tensor *tr = gguf_find_tensor(ref, name);
            CHECK(tr && tr->type == GGML_TYPE_F32, "%s missing from the f32 model", name);
            if (!tr || tr->type != GGML_TYPE_F32) continue;
            const tokd_type_traits *t = tokd_type_get(tq->type);
            int64_t ne = (int64_t)(tr->nbytes / 4);
            float *deq = malloc(sizeof(float) * (size_t)ne);
            t->to_float(tq->data, deq, ne);
            const float *f = tr->data;
            double se = 0, ss = 0;
            for (int64_t k = 0; k < ne; k++) se += (double)(deq[k] - f[k]) * (deq[k] - f[k]), ss += (double)f[k] * f[k];
            double rel = sqrt(se / ss);
            if (rel > worst) worst = rel;
            /* re-quantize: the file quantiser must reproduce llama.cpp's bytes */
            uint8_t *rq = malloc(tq->nbytes);
            if (tq->type == GGML_TYPE_Q8_0)
                tokd_q8_0_from_float_ref(f, rq, ne);
            else
                t->from_float(f, rq, ne);
            for (size_t b = 0; b < tq->nbytes / t->bytes; b++)
                differing += memcmp(rq + b * t->bytes, (const uint8_t *)tq->data + b * t->bytes, t->bytes) != 0;
            blocks += tq->nbytes / t->bytes;
            n_tensors++;
            free(deq), free(rq);
        }
        const char *tn = tokd_type_get(C[c].type)->name;
        printf("golden %-6s %-4s: %d tensors, dequant rel RMSE <= %.5f (bound %.4f), re-quantized blocks differing %zu/%zu\n",
               C[c].model, tn, n_tensors, worst, C[c].bound, differing, blocks);
        CHECK(n_tensors > 0, "%s: no %s tensors", C[c].model, tn);
        CHECK(worst <= C[c].bound, "%s %s: dequantized vs f32 rel RMSE %.5f > %.4f", C[c].model, tn, worst, C[c].bound);
        CHECK(differing == 0, "%s %s: %zu of %zu re-quantized blocks differ from llama.cpp's", C[c].model, tn, differing,
              blocks);
        gguf_close(q);
    }
    gguf_close(ref);
}

/* The SIMD Q8_K quantiser (act_quant.c), the selected loop and the AVX2 one, writes the
 * scalar statement's bytes: random super-blocks at many scales, the largest magnitude
 * present with both signs (the first kept), NaN, infinities, zeros, denormals, one
 * nonzero value, and values that land on rounding ties. */
static void test_q8_K_quantize(void) {
    enum { NB = 64 };
    float *x = tokd_xmalloc(sizeof(float) * 256 * NB);
    tokd_block_q8_K want[NB], got[NB];
    const int avx2 = tokd_cpu()->avx2 && tokd_cpu()->fma && tokd_cpu()->f16c;
    int bad_sel = 0, bad_avx2 = 0, rc = 0, rounds = 0;
    for (int round = 0; round < 40; round++, rounds++) {
        fill_data(x, 256 * NB, round % 3);
        for (int b = 0; b < NB; b++) {
            float *v = x + 256 * b;
            int p = (int)(t_rand_u64(&rng) % 256), q = (int)(t_rand_u64(&rng) % 256);
            switch ((b + round) % 12) {
            case 0: v[p] = 50.0f, v[q] = -50.0f; break; /* the largest magnitude with both signs */
            case 1: v[p] = NAN; break;
            case 2: v[p] = INFINITY; break;
            case 3: v[p] = -INFINITY, v[q] = NAN; break;
            case 4: memset(v, 0, 256 * sizeof(float)); break;
            case 5: for (int i = 0; i < 256; i++) v[i] = -0.0f; v[p] = 1e-40f; break; /* one denormal */
            case 6: for (int i = 0; i < 256; i++) v[i] = (float)(i % 7 - 3) * 0.5f; v[p] = 127.0f; break; /* ties */
            case 7: for (int i = 0; i < 256; i++) v[i] *= 1e-38f; break;
            case 8: for (int i = 0; i < 256; i++) v[i] *= 1e30f; break;
            case 9: v[p] = -v[p] * 1000.0f; break;
            default: break;
            }
        }
        memset(want, 0x5A, sizeof want);
        memset(got, 0xA5, sizeof got);
        tokd_q8_K_from_float(x, want, 256 * NB);
        tokd_q8_K_quantize(x, got, 256 * NB);
        for (int b = 0; b < NB; b++) bad_sel += memcmp(&want[b], &got[b], sizeof want[b]) != 0;
        if (avx2) {
            memset(got, 0xA5, sizeof got);
            rc |= tokd_q8_K_quantize_avx2(x, got, 256 * NB);
            for (int b = 0; b < NB; b++) bad_avx2 += memcmp(&want[b], &got[b], sizeof want[b]) != 0;
        }
    }
    CHECK(bad_sel == 0, "%d of %d Q8_K blocks of the %s quantiser differ from the scalar statement", bad_sel, rounds * NB,
          tokd_kernels_path());
    CHECK(bad_avx2 == 0 && rc == 0, "%d of %d Q8_K blocks of the AVX2 quantiser differ from the scalar statement", bad_avx2,
          rounds * NB);
    CHECK(avx2 || tokd_q8_K_quantize_avx2(x, got, 256) == -1, "the AVX2 Q8_K quantiser refuses a CPU without AVX2");
    free(x);
}

/* (d) The grid types. */
static uint64_t grid_sum(const void *rows, int n, size_t row_bytes) {
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) {
        uint64_t w = 0;
        memcpy(&w, (const uint8_t *)rows + (size_t)i * row_bytes, row_bytes);
        sum += w;
    }
    return sum;
}
/* The blocks of the known answers below: xorshift64 bytes, then a finite fp16 scale
 * (sign random, exponent 11 to 14) where the type keeps it. */
static uint64_t kat_state;
static uint64_t kat_next(void) {
    kat_state ^= kat_state << 13, kat_state ^= kat_state >> 7, kat_state ^= kat_state << 17;
    return kat_state;
}
static void kat_block(const tokd_type_traits *t, uint8_t *blk) {
    for (uint32_t i = 0; i < t->bytes; i++) blk[i] = (uint8_t)(kat_next() >> 24);
    const uint16_t h = (uint16_t)((0x2C00 + (kat_next() >> 20) % 0x0C00) | ((kat_next() >> 40) & 0x8000));
    if (t->id == GGML_TYPE_IQ1_M) put_iq1_m_scale(blk, h);
    else put_half(blk, h);
}
static void test_iq_types(void) {
    /* each expanded grid's sum of little-endian rows, as llama.cpp's tables (ggml-common.h) */
    tokd_iq_grids_init();
    CHECK(grid_sum(tokd_iq2xxs_grid, 256, 8) == 10026840302681211747ull, "IQ2_XXS grid");
    CHECK(grid_sum(tokd_iq2xs_grid, 512, 8) == 3032300602630837921ull, "IQ2_XS grid");
    CHECK(grid_sum(tokd_iq2s_grid, 1024, 8) == 8502338067238609906ull, "IQ2_S grid");
    CHECK(grid_sum(tokd_iq3xxs_grid, 256, 4) == 108356387642ull, "IQ3_XXS grid");
    CHECK(grid_sum(tokd_iq3s_grid, 512, 4) == 53294177878ull, "IQ3_S grid");
    CHECK(grid_sum(tokd_iq1s_grid, 2048, 8) == 7590341501443526924ull, "IQ1_S grid");
    for (int i = 0; i < 128; i++) CHECK(__builtin_popcount(tokd_iq_signs[i]) % 2 == 0 && (tokd_iq_signs[i] & 127) == i, "sign byte %d", i);
    /* to_float of 16 fixed blocks: FNV-1a of the floats' bits and the first value, from
       llama.cpp's dequantize_row_* (c392e5094, libggml-base) on the same bytes */
    static const struct {
        uint32_t id;
        uint64_t fnv;
        float first;
    } KAT[] = {
        {GGML_TYPE_IQ2_XXS, 0xe0dae2c635311d83ull, 1.2131958f}, {GGML_TYPE_IQ2_XS, 0xc43f4e7aa6b07e37ull, 1.26049805f},
        {GGML_TYPE_IQ2_S, 0xabc6883723f92b63ull, -0.0882568359f}, {GGML_TYPE_IQ3_XXS, 0x7dfeb3b7326a7f68ull, -3.03955078f},
        {GGML_TYPE_IQ3_S, 0x3a26cce1742aa1abull, -6.56591797f},  {GGML_TYPE_IQ1_S, 0x0da41dba68ecdc8dull, -0.603424072f},
        {GGML_TYPE_IQ1_M, 0xa4c04b91ab0ae0e1ull, -0.372711182f},
    };
    for (size_t i = 0; i < sizeof KAT / sizeof KAT[0]; i++) {
        const tokd_type_traits *t = tokd_type_get(KAT[i].id);
        CHECK(t && t->vec_dot_type == GGML_TYPE_Q8_K && t->from_float_w != NULL,
              "type %u: Q8_K-activated, a quantiser with importance weights", KAT[i].id);
        if (!t) continue;
        uint8_t blocks[16 * 110];
        float out[16 * 256];
        kat_state = 0x243F6A8885A308D3ull + KAT[i].id;
        for (int b = 0; b < 16; b++) kat_block(t, blocks + b * t->bytes);
        t->to_float(blocks, out, 16 * 256);
        uint64_t h = 0xcbf29ce484222325ull;
        for (int k = 0; k < 16 * 256; k++) {
            uint32_t u;
            memcpy(&u, &out[k], 4);
            for (int j = 0; j < 4; j++) h = (h ^ ((u >> 8 * j) & 255)) * 0x100000001b3ull;
        }
        CHECK(h == KAT[i].fnv && out[0] == KAT[i].first, "%s: to_float differs from llama.cpp's (first value %.9g, want %.9g)",
              t->name, out[0], KAT[i].first);
        /* the dot product against the dequantized weights, in double: only float rounding apart */
        const int64_t K = 16 * 256;
        uint8_t *A = malloc(tokd_row_bytes(tokd_type_get(GGML_TYPE_Q8_K), K));
        fill_raw_act(tokd_type_get(GGML_TYPE_Q8_K), A, K);
        double exact = 0, mag = 0;
        for (int b = 0; b < 16; b++) {
            const tokd_block_q8_K *y = (const tokd_block_q8_K *)A + b;
            for (int k = 0; k < 256; k++) {
                const double term = (double)out[256 * b + k] * y->d * y->qs[k];
                exact += term, mag += fabs(term);
            }
        }
        float ref = NAN, sel = NAN;
        t->vec_dot_ref(K, &ref, blocks, A);
        t->vec_dot(K, &sel, blocks, A);
        CHECK(fabs(ref - exact) <= 1e-6 * mag, "%s: dot %.9g against the dequantized weights' %.9g", t->name, ref, exact);
        CHECK(memcmp(&ref, &sel, 4) == 0, "%s: selected dot %.9g, reference %.9g", t->name, sel, ref);
        free(A);
    }
}

int main(void) {
    tokd_kernels_init();
    const tokd_cpu_features *c = tokd_cpu();
    printf("cpu: avx2 %d fma %d f16c %d avx512f %d bw %d vl %d vnni %d; selected path %s\n", c->avx2, c->fma, c->f16c,
           c->avx512f, c->avx512bw, c->avx512vl, c->avx512vnni, tokd_kernels_path());
    test_geometry();
    test_selection();
    test_simd_equals_scalar();
    test_dot4();
    test_dot2x4();
    test_dot_rows();
    test_roundtrip_error();
    test_activation_rounding();
    test_f16_activation_rows();
    test_bf16_rows();
    test_f32_rows();
    test_q8_K_quantize();
    test_dot_accuracy();
    test_golden_models();
    test_iq_types();
    T_DONE();
}
