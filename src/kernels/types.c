/* types.c — the weight-type table (see types.h) and CPU feature detection.
 *
 * This file holds the float rows' conversions and the table itself; the dot products
 * and the quantized rows' functions live in quants.c (scalar; the quantisers with an
 * importance matrix in quants_weighted.c) and dot_avx2.c / dot_avx512.c (SIMD). SIMD
 * variants are chosen once in tokd_kernels_init: every SIMD dot product is bit-equal to
 * its scalar reference, so the choice changes speed only. */
#include "kernels/types.h"

#include <cpuid.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "kernels/bf16_rows.h"
#include "kernels/f32_rows.h"
#include "kernels/iq_grids.h"
#include "kernels/quants.h"
#include "kernels/quantize_iq1.h"
#include "kernels/quantize_iq2.h"
#include "kernels/quantize_iq3.h"
#include "util.h"

/* ---- float rows ------------------------------------------------------------------ */

static void f32_to_float(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }
static void f32_from_float(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }

static void f16_to_float(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        dst[i] = tokd_f16_to_f32(h);
    }
}
static void f16_from_float(const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = tokd_f32_to_f16(src[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}
static void bf16_to_float(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        dst[i] = tokd_bf16_to_f32(h);
    }
}
static void bf16_from_float(const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = tokd_f32_to_bf16(src[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

/* ---- the table ------------------------------------------------------------------- */

/* The fixed fields; the selected kernels are filled in by kernels_init_once. */
#define ROW_FIELDS(ID, NAME, BLCK, BYTES, ACT, TO, FROM, DOT)                               \
    .id = ID, .name = NAME, .blck = BLCK, .bytes = BYTES, .vec_dot_type = ACT, .to_float = TO, \
    .from_float = FROM, .vec_dot = DOT, .vec_dot_ref = DOT
#define ROW(ID, NAME, BLCK, BYTES, ACT, TO, FROM, DOT) {ROW_FIELDS(ID, NAME, BLCK, BYTES, ACT, TO, FROM, DOT)}
#define QROW(ID, NAME, BLCK, T, ACT, TO, FROM, DOT) ROW(ID, NAME, BLCK, sizeof(T), ACT, TO, FROM, DOT)
/* a type llama-quantize weights by an importance matrix: its quantiser for that too */
#define QROW_W(ID, NAME, BLCK, T, ACT, TO, FROM, DOT, FROM_W) \
    {ROW_FIELDS(ID, NAME, BLCK, sizeof(T), ACT, TO, FROM, DOT), .from_float_w = FROM_W}
static tokd_type_traits table[] = {
    ROW(GGML_TYPE_F32, "F32", 1, 4, GGML_TYPE_F32, f32_to_float, f32_from_float, tokd_f32_dot_ref),
    ROW(GGML_TYPE_F16, "F16", 1, 2, GGML_TYPE_F32, f16_to_float, f16_from_float, tokd_f16_dot_ref),
    ROW(GGML_TYPE_BF16, "BF16", 1, 2, GGML_TYPE_BF16, bf16_to_float, bf16_from_float, tokd_bf16_dot_ref),
    QROW_W(GGML_TYPE_Q4_0, "Q4_0", 32, tokd_block_q4_0, GGML_TYPE_Q8_0, tokd_q4_0_to_float, tokd_q4_0_from_float, tokd_q4_0_dot_ref,
           tokd_q4_0_from_float_w),
    QROW_W(GGML_TYPE_Q4_1, "Q4_1", 32, tokd_block_q4_1, GGML_TYPE_Q8_1, tokd_q4_1_to_float, tokd_q4_1_from_float, tokd_q4_1_dot_ref,
           tokd_q4_1_from_float_w),
    QROW_W(GGML_TYPE_Q5_0, "Q5_0", 32, tokd_block_q5_0, GGML_TYPE_Q8_0, tokd_q5_0_to_float, tokd_q5_0_from_float, tokd_q5_0_dot_ref,
           tokd_q5_0_from_float_w),
    QROW_W(GGML_TYPE_Q5_1, "Q5_1", 32, tokd_block_q5_1, GGML_TYPE_Q8_1, tokd_q5_1_to_float, tokd_q5_1_from_float, tokd_q5_1_dot_ref,
           tokd_q5_1_from_float_w),
    QROW(GGML_TYPE_Q8_0, "Q8_0", 32, tokd_block_q8_0, GGML_TYPE_Q8_0, tokd_q8_0_to_float, tokd_q8_0_from_float, tokd_q8_0_dot_ref),
    QROW(GGML_TYPE_Q8_1, "Q8_1", 32, tokd_block_q8_1, GGML_TYPE_Q8_1, tokd_q8_1_to_float, tokd_q8_1_from_float, tokd_q8_1_dot_ref),
    QROW_W(GGML_TYPE_Q2_K, "Q2_K", 256, tokd_block_q2_K, GGML_TYPE_Q8_K, tokd_q2_K_to_float, tokd_q2_K_from_float, tokd_q2_K_dot_ref,
           tokd_q2_K_from_float_w),
    QROW_W(GGML_TYPE_Q3_K, "Q3_K", 256, tokd_block_q3_K, GGML_TYPE_Q8_K, tokd_q3_K_to_float, tokd_q3_K_from_float, tokd_q3_K_dot_ref,
           tokd_q3_K_from_float_w),
    QROW_W(GGML_TYPE_Q4_K, "Q4_K", 256, tokd_block_q4_K, GGML_TYPE_Q8_K, tokd_q4_K_to_float, tokd_q4_K_from_float, tokd_q4_K_dot_ref,
           tokd_q4_K_from_float_w),
    QROW_W(GGML_TYPE_Q5_K, "Q5_K", 256, tokd_block_q5_K, GGML_TYPE_Q8_K, tokd_q5_K_to_float, tokd_q5_K_from_float, tokd_q5_K_dot_ref,
           tokd_q5_K_from_float_w),
    QROW_W(GGML_TYPE_Q6_K, "Q6_K", 256, tokd_block_q6_K, GGML_TYPE_Q8_K, tokd_q6_K_to_float, tokd_q6_K_from_float, tokd_q6_K_dot_ref,
           tokd_q6_K_from_float_w),
    QROW_W(GGML_TYPE_IQ4_NL, "IQ4_NL", 32, tokd_block_iq4_nl, GGML_TYPE_Q8_0, tokd_iq4_nl_to_float, tokd_iq4_nl_from_float, tokd_iq4_nl_dot_ref,
           tokd_iq4_nl_from_float_w),
    QROW_W(GGML_TYPE_IQ4_XS, "IQ4_XS", 256, tokd_block_iq4_xs, GGML_TYPE_Q8_K, tokd_iq4_xs_to_float, tokd_iq4_xs_from_float, tokd_iq4_xs_dot_ref,
           tokd_iq4_xs_from_float_w),
    /* the grid types: IQ1_*, IQ2_XXS and IQ2_XS only with importance weights, as in llama.cpp */
    QROW_W(GGML_TYPE_IQ2_XXS, "IQ2_XXS", 256, tokd_block_iq2_xxs, GGML_TYPE_Q8_K, tokd_iq2_xxs_to_float, NULL,
           tokd_iq2_xxs_dot_ref, tokd_iq2_xxs_from_float_w),
    QROW_W(GGML_TYPE_IQ2_XS, "IQ2_XS", 256, tokd_block_iq2_xs, GGML_TYPE_Q8_K, tokd_iq2_xs_to_float, NULL, tokd_iq2_xs_dot_ref,
           tokd_iq2_xs_from_float_w),
    QROW_W(GGML_TYPE_IQ2_S, "IQ2_S", 256, tokd_block_iq2_s, GGML_TYPE_Q8_K, tokd_iq2_s_to_float, tokd_iq2_s_from_float,
           tokd_iq2_s_dot_ref, tokd_iq2_s_from_float_w),
    QROW_W(GGML_TYPE_IQ3_XXS, "IQ3_XXS", 256, tokd_block_iq3_xxs, GGML_TYPE_Q8_K, tokd_iq3_xxs_to_float, tokd_iq3_xxs_from_float,
           tokd_iq3_xxs_dot_ref, tokd_iq3_xxs_from_float_w),
    QROW_W(GGML_TYPE_IQ3_S, "IQ3_S", 256, tokd_block_iq3_s, GGML_TYPE_Q8_K, tokd_iq3_s_to_float, tokd_iq3_s_from_float,
           tokd_iq3_s_dot_ref, tokd_iq3_s_from_float_w),
    QROW_W(GGML_TYPE_IQ1_S, "IQ1_S", 256, tokd_block_iq1_s, GGML_TYPE_Q8_K, tokd_iq1_s_to_float, NULL, tokd_iq1_s_dot_ref,
           tokd_iq1_s_from_float_w),
    QROW_W(GGML_TYPE_IQ1_M, "IQ1_M", 256, tokd_block_iq1_m, GGML_TYPE_Q8_K, tokd_iq1_m_to_float, NULL, tokd_iq1_m_dot_ref,
           tokd_iq1_m_from_float_w),
    QROW(GGML_TYPE_Q8_K, "Q8_K", 256, tokd_block_q8_K, GGML_TYPE_Q8_K, tokd_q8_K_to_float, tokd_q8_K_from_float, tokd_q8_K_dot_ref),
};
#undef QROW_W
#undef QROW
#undef ROW
#undef ROW_FIELDS

/* SIMD implementations per row: NULL where the next-lower path is used. */
typedef struct {
    uint32_t id;
    tokd_vec_dot_fn avx2, avx512, avx512vnni;
    tokd_vec_dot4_fn avx512_4, avx512vnni_4; /* four-row versions, NULL if none */
    tokd_vec_dot_fn avx2_stream, avx512_stream; /* decode forms (vec_dot_stream), NULL if none */
    tokd_vec_dot4_fn avx2_4;                    /* the AVX2 path's four-row version, NULL if none */
    tokd_vec_dot2x4_fn avx512_2x4;              /* two-by-four version, NULL if none */
    tokd_vec_dot_rows_part_fn avx2_rows, avx512_rows; /* few-row decode forms, NULL if none */
    tokd_vec_dot_fn avx512vbmi; /* AVX-512 with VBMI and VNNI, NULL if none */
} simd_row;
/* The rows by kind, named field by field (the fields a kind lacks stay NULL). */
#define FLOAT_SIMD(ID, T)                                                                               \
    {.id = ID, .avx2 = tokd_##T##_dot_avx2, .avx512 = tokd_##T##_dot_avx512, .avx2_4 = tokd_##T##_dot4_avx2, \
     .avx512_4 = tokd_##T##_dot4_avx512, .avx512_2x4 = tokd_##T##_dot2x4_avx512,                          \
     .avx2_stream = tokd_##T##_stream_dot_avx2, .avx512_stream = tokd_##T##_stream_dot_avx512,          \
     .avx2_rows = tokd_##T##_rows_part_avx2, .avx512_rows = tokd_##T##_rows_part_avx512}
#define QUANT_SIMD(ID, T) {.id = ID, .avx2 = tokd_##T##_dot_avx2, .avx512 = tokd_##T##_dot_avx512, .avx512vnni = tokd_##T##_dot_avx512vnni}
#define QUANT_SIMD4(ID, T)                                                                              \
    {.id = ID, .avx2 = tokd_##T##_dot_avx2, .avx512 = tokd_##T##_dot_avx512, .avx512vnni = tokd_##T##_dot_avx512vnni, \
     .avx512_4 = tokd_##T##_dot4_avx512, .avx512vnni_4 = tokd_##T##_dot4_avx512vnni}
/* the grid types: AVX2 kernels (one and four rows) for every SIMD path; IQ2_XXS and
 * IQ3_XXS have a one-row kernel for AVX-512 VBMI (dot_iq_avx512.c) */
#define IQ_SIMD(ID, T) {.id = ID, .avx2 = tokd_##T##_dot_avx2, .avx2_4 = tokd_##T##_dot4_avx2}
#define IQ_SIMD_VBMI(ID, T) {.id = ID, .avx2 = tokd_##T##_dot_avx2, .avx2_4 = tokd_##T##_dot4_avx2, .avx512vbmi = tokd_##T##_dot_avx512vbmi}
static const simd_row simd_rows[] = {
    FLOAT_SIMD(GGML_TYPE_F16, f16),
    QUANT_SIMD4(GGML_TYPE_Q4_0, q4_0),    QUANT_SIMD(GGML_TYPE_Q4_1, q4_1),     QUANT_SIMD(GGML_TYPE_Q5_0, q5_0),
    QUANT_SIMD(GGML_TYPE_Q5_1, q5_1),     QUANT_SIMD4(GGML_TYPE_Q8_0, q8_0),    QUANT_SIMD(GGML_TYPE_Q2_K, q2_K),
    QUANT_SIMD(GGML_TYPE_Q3_K, q3_K),     QUANT_SIMD4(GGML_TYPE_Q4_K, q4_K),    QUANT_SIMD(GGML_TYPE_Q5_K, q5_K),
    QUANT_SIMD4(GGML_TYPE_Q6_K, q6_K),    QUANT_SIMD4(GGML_TYPE_IQ4_NL, iq4_nl), QUANT_SIMD4(GGML_TYPE_IQ4_XS, iq4_xs),
    IQ_SIMD_VBMI(GGML_TYPE_IQ2_XXS, iq2_xxs), IQ_SIMD(GGML_TYPE_IQ2_XS, iq2_xs),    IQ_SIMD(GGML_TYPE_IQ2_S, iq2_s),
    IQ_SIMD_VBMI(GGML_TYPE_IQ3_XXS, iq3_xxs), IQ_SIMD(GGML_TYPE_IQ3_S, iq3_s),      IQ_SIMD(GGML_TYPE_IQ1_S, iq1_s),
    IQ_SIMD(GGML_TYPE_IQ1_M, iq1_m),
};
#undef FLOAT_SIMD
#undef QUANT_SIMD
#undef QUANT_SIMD4
#undef IQ_SIMD
#undef IQ_SIMD_VBMI

/* The grid types' gemm kernels: AVX2 and AVX-512 (dot_iq_avx2.c), used from
 * IQ_GEMM_MIN_ROWS activation rows on, below which the four-row kernel runs; and AVX-512
 * VNNI (gemm_iq_avx512.c), used from VNNI_MIN rows on. Batched decode, `tokd bench -p 0
 * -n 32 -s 2,3 -t 2` (BENCHMARKS.md, fifty-fifth session): IQ2_XXS and IQ3_XXS, whose
 * one-row VBMI kernels are faster, lose at 2 rows (IQ2_XXS 43.4-44.3 against 52.8 tok/s,
 * IQ3_XXS 37.9-38.0 against 39.0) and win at 3 (61.7-62.1 against 54.1-54.5, 53.4-54.1
 * against 42.7-42.9); IQ2_XS tied at 2 rows (32.6-32.7 against 32.5-33.7, before the
 * tiles' transposes were unrolled) and won at 3 (46.7 against 33.1-34.0), IQ1_S won at 2
 * (30.7-35.1 against 25.8-25.9).
 * The AVX-VNNI gemm (gemm_iq_avxvnni.c) serves CPUs with AVX-VNNI and no AVX-512 VNNI,
 * from AVXVNNI_MIN rows, against the AVX2 one-row kernels there. `TOKD_KERNELS=avx2
 * tokd bench -p 0 -n 16 -s 2,3 -t 1` on one core (fifty-sixth session): at 2 rows
 * IQ1_S won (16.4-16.7 against 12.6 tok/s) and IQ2_XXS, IQ2_XS and IQ3_XXS tied
 * (17.0-17.5 both; 14.0-14.8 against 15.0-15.6; 11.8 against 11.8-12.5); at 3 rows all
 * won (IQ2_XXS 22.8-23.7 against 16.7-17.2, IQ2_XS 19.3-19.9 against 14.4-16.2). IQ2_S
 * takes 3 and IQ3_S and IQ1_M 2, after their kernel-alone gains at 2 rows (1.23x, like
 * IQ2_XS's 1.18x; 1.57x, like IQ1_S's 1.65x). */
#define IQ_GEMM(ID, T, VNNI_MIN, AVXVNNI_MIN, VBMI)                                                          \
    {ID, tokd_##T##_gemm_avx2, tokd_##T##_gemm_avx512, tokd_##T##_gemm_avxvnni, tokd_##T##_gemm_avx512vnni, VBMI, \
     VNNI_MIN, AVXVNNI_MIN}
static const struct {
    uint32_t id;
    tokd_gemm_fn avx2, avx512;
    tokd_gemm_fn avxvnni; /* the VNNI gemm at eight lanes (gemm_iq_avxvnni.c) */
    tokd_gemm_fn avx512vnni;
    tokd_gemm_fn avx512vbmi; /* the VNNI gemm with its tiles unpacked by VBMI (IQ3_XXS only) */
    int vnni_min_rows, avxvnni_min_rows;
} iq_gemms[] = {
    IQ_GEMM(GGML_TYPE_IQ2_XXS, iq2_xxs, 3, 3, NULL),
    IQ_GEMM(GGML_TYPE_IQ2_XS, iq2_xs, 2, 3, NULL),
    IQ_GEMM(GGML_TYPE_IQ2_S, iq2_s, 2, 3, NULL),
    IQ_GEMM(GGML_TYPE_IQ3_XXS, iq3_xxs, 3, 3, tokd_iq3_xxs_gemm_avx512vbmi),
    IQ_GEMM(GGML_TYPE_IQ3_S, iq3_s, 2, 2, NULL),
    IQ_GEMM(GGML_TYPE_IQ1_S, iq1_s, 2, 2, NULL),
    IQ_GEMM(GGML_TYPE_IQ1_M, iq1_m, 2, 2, NULL),
};
#undef IQ_GEMM
#define IQ_GEMM_MIN_ROWS 8

/* ---- CPU features and selection -------------------------------------------------- */

static tokd_cpu_features cpu;
static const char *kernels_path = "scalar";
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void detect_cpu(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    bool osxsave = (c >> 27) & 1;
    cpu.fma = (c >> 12) & 1;
    cpu.f16c = (c >> 29) & 1;
    unsigned long long xcr0 = 0;
    if (osxsave) {
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = ((unsigned long long)hi << 32) | lo;
    }
    bool ymm_ok = (xcr0 & 6) == 6, zmm_ok = (xcr0 & 0xe6) == 0xe6;
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        cpu.avx2 = ymm_ok && ((b >> 5) & 1);
        cpu.avx512f = zmm_ok && ((b >> 16) & 1);
        cpu.avx512bw = zmm_ok && ((b >> 30) & 1);
        cpu.avx512vl = zmm_ok && ((b >> 31) & 1);
        cpu.avx512vnni = zmm_ok && ((c >> 11) & 1);
        cpu.avx512vbmi = zmm_ok && ((c >> 1) & 1);
        cpu.gfni = ymm_ok && ((c >> 8) & 1);
        __cpuid_count(7, 1, a, b, c, d);
        cpu.avxvnni = ymm_ok && ((a >> 4) & 1);
        cpu.avx512bf16 = zmm_ok && ((a >> 5) & 1);
    }
    cpu.fma = cpu.fma && ymm_ok;
    cpu.f16c = cpu.f16c && ymm_ok;
}

static void kernels_init_once(void) {
    detect_cpu();
    tokd_iq_grids_init(); /* the grid types' tables, which their SIMD kernels read */
    const char *force = getenv("TOKD_KERNELS");
    bool scalar_only = force && strcmp(force, "scalar") == 0;
    bool avx2 = !scalar_only && cpu.avx2 && cpu.fma && cpu.f16c;
    bool avx512 = avx2 && cpu.avx512f && cpu.avx512bw && cpu.avx512vl && !(force && strcmp(force, "avx2") == 0);
    bool vnni = avx512 && cpu.avx512vnni;
    bool avxvnni = avx2 && cpu.avxvnni; /* vpdpbusd on 256-bit vectors (VEX) */
    bool gemm = vnni && cpu.avx512vbmi && !(force && strcmp(force, "nogemm") == 0);
    if (gemm) tokd_gemm_init();
    /* the VBMI grid kernels' controls, whenever the CPU could run them (tests call them
       directly under TOKD_KERNELS=avx2) */
    if (cpu.avx512vbmi && cpu.avx512vnni && cpu.avx512bw && cpu.f16c) tokd_iq_avx512_init();
    if (avx2) kernels_path = "avx2";
    if (avx512) kernels_path = "avx512";
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        tokd_type_traits *t = &table[i];
        t->vec_dot = t->vec_dot_ref;
        t->vec_dot4 = NULL;
        t->vec_dot_stream = NULL;
        t->vec_dot_stream_rows = NULL;
        t->vec_dot2x4 = NULL;
        t->vec_dot_rows_part = NULL;
        t->gemm = NULL;
        t->gemm_prep = NULL;
        t->gemm_act_bytes = NULL;
        /* F16 weights' activations: rounded to F16 as ggml's CPU backend converts them */
        t->act_convert = NULL;
        if (t->id == GGML_TYPE_F16) t->act_convert = avx2 ? tokd_f16_round_row_avx2 : tokd_f16_round_row;
        if (gemm && t->id == GGML_TYPE_Q4_0) {
            t->gemm = tokd_gemm_q4_0_avx512vbmi;
            t->gemm_prep = tokd_gemm_q4_0_prep;
            t->gemm_act_bytes = tokd_gemm_q8x_act_bytes;
            t->gemm_min_rows = 1;
        }
        /* Q8_0 decode: the plain vec_dot is faster than unpacking the weights for one row */
        if (gemm && t->id == GGML_TYPE_Q8_0) {
            t->gemm_min_rows = 2;
            t->gemm = tokd_gemm_q8_0_avx512vbmi;
            t->gemm_prep = tokd_gemm_q8_0_prep;
            t->gemm_act_bytes = tokd_gemm_q8x_act_bytes;
        }
        /* the grid types' prefill: each weight super-block decoded once for many rows */
        if (avx2)
            for (size_t j = 0; j < sizeof iq_gemms / sizeof iq_gemms[0]; j++)
                if (iq_gemms[j].id == t->id) {
                    t->gemm = avx512 ? iq_gemms[j].avx512 : iq_gemms[j].avx2;
                    t->gemm_prep = tokd_iq_gemm_prep;
                    t->gemm_act_bytes = tokd_iq_gemm_act_bytes;
                    t->gemm_min_rows = IQ_GEMM_MIN_ROWS;
                    if (avxvnni && !vnni) {
                        t->gemm = iq_gemms[j].avxvnni;
                        t->gemm_prep = tokd_iq_gemm_prep_vnni;
                        t->gemm_min_rows = iq_gemms[j].avxvnni_min_rows;
                    }
                    if (vnni) {
                        t->gemm = iq_gemms[j].avx512vnni;
                        t->gemm_prep = tokd_iq_gemm_prep_vnni;
                        t->gemm_min_rows = iq_gemms[j].vnni_min_rows;
                    }
                    if (gemm && iq_gemms[j].avx512vbmi) t->gemm = iq_gemms[j].avx512vbmi;
                }
        for (size_t j = 0; j < sizeof simd_rows / sizeof simd_rows[0]; j++) {
            const simd_row *r = &simd_rows[j];
            if (r->id != t->id) continue;
            if (avx2 && r->avx2) t->vec_dot = r->avx2;
            if (avx512 && r->avx512) t->vec_dot = r->avx512;
            if (vnni && r->avx512vnni) t->vec_dot = r->avx512vnni;
            /* the grid types' four-row AVX2 kernel stays beside it: every one of their
               kernels gives the reference's bits (dot_iq_avx2.c, dot_iq_avx512.c) */
            if (gemm && r->avx512vbmi) t->vec_dot = r->avx512vbmi;
            if (avx2 && r->avx2_stream) t->vec_dot_stream = r->avx2_stream;
            if (avx512 && r->avx512_stream) t->vec_dot_stream = r->avx512_stream;
            if (avx2 && r->avx2_rows) t->vec_dot_rows_part = r->avx2_rows;
            if (avx512 && r->avx512_rows) t->vec_dot_rows_part = r->avx512_rows;
            /* the four-row kernel only alongside its own single-row path */
            if (r->avx2_4 && (t->vec_dot == r->avx2 || (r->avx512vbmi && t->vec_dot == r->avx512vbmi))) t->vec_dot4 = r->avx2_4;
            if (avx512 && r->avx512_4 && t->vec_dot == r->avx512) t->vec_dot4 = r->avx512_4;
            if (avx512 && r->avx512_2x4 && t->vec_dot == r->avx512) t->vec_dot2x4 = r->avx512_2x4;
            if (vnni && r->avx512vnni_4 && t->vec_dot == r->avx512vnni) t->vec_dot4 = r->avx512vnni_4;
        }
        /* BF16 rows: ggml's AVX512-BF16 order on every path (bf16_rows.c); the instruction
           unless TOKD_KERNELS=nobf16 asks for its FMA form */
        /* F32 rows: llama.cpp's order on every path (f32_rows.c) */
        if (t->id == GGML_TYPE_F32) tokd_f32_select(t, avx2, avx512);
        if (t->id == GGML_TYPE_BF16)
            tokd_bf16_select(t, avx2, avx512, avx512 && cpu.avx512bf16 && !(force && strcmp(force, "nobf16") == 0));
    }
}

void tokd_kernels_init(void) { pthread_once(&init_once, kernels_init_once); }

const tokd_cpu_features *tokd_cpu(void) {
    tokd_kernels_init();
    return &cpu;
}

const char *tokd_kernels_path(void) {
    tokd_kernels_init();
    return kernels_path;
}

bool tokd_cpu_avx2(void) {
    tokd_kernels_init();
    return cpu.avx2 && cpu.fma && cpu.f16c;
}
/* Decided once (attention and vecmath ask about a hundred times per decoded token). */
static bool f32_avx512, f32_avx2;
static pthread_once_t f32_once = PTHREAD_ONCE_INIT;
static void f32_paths_init(void) {
    bool cpu256 = tokd_cpu_avx2(), on512 = strcmp(kernels_path, "avx512") == 0;
    f32_avx512 = cpu256 && cpu.avx512f && cpu.avx512vl && on512;
    f32_avx2 = cpu256 && (on512 || strcmp(kernels_path, "avx2") == 0);
}
bool tokd_use_f32_avx512(void) {
    pthread_once(&f32_once, f32_paths_init);
    return f32_avx512;
}
bool tokd_use_f32_avx2(void) {
    pthread_once(&f32_once, f32_paths_init);
    return f32_avx2;
}

const tokd_type_traits *tokd_type_get(uint32_t id) {
    tokd_kernels_init();
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].id == id) return &table[i];
    return NULL;
}
