/* types.c — the weight-type table (see types.h) and CPU feature detection.
 *
 * This file holds the float rows (F32, F16, BF16) and the table itself; quantized rows
 * reference functions from quants.h. SIMD variants are chosen once in
 * tokd_kernels_init. */
#include "kernels/types.h"

#include <cpuid.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
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

/* Scalar references. Eight interleaved partial sums, combined pairwise at the end: the
 * order depends only on n. */
#define DOT_REF_BODY(LOAD)                                              \
    float acc[8] = {0};                                                 \
    int64_t i = 0;                                                      \
    for (; i + 8 <= n; i += 8)                                          \
        for (int j = 0; j < 8; j++) acc[j] += LOAD(i + j) * x[i + j];   \
    for (; i < n; i++) acc[i & 7] += LOAD(i) * x[i];                    \
    *out = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));

static void f32_dot_ref(int64_t n, float *out, const void *w, const void *act) {
    const float *wf = w, *x = act;
#define LOAD_F32(k) wf[k]
    DOT_REF_BODY(LOAD_F32)
#undef LOAD_F32
}
static inline float load_f16(const uint8_t *p, int64_t k) {
    uint16_t h;
    memcpy(&h, p + 2 * k, 2);
    return tokd_f16_to_f32(h);
}
static inline float load_bf16(const uint8_t *p, int64_t k) {
    uint16_t h;
    memcpy(&h, p + 2 * k, 2);
    return tokd_bf16_to_f32(h);
}
static void f16_dot_ref(int64_t n, float *out, const void *w, const void *act) {
    const uint8_t *wp = w;
    const float *x = act;
#define LOAD_F16(k) load_f16(wp, k)
    DOT_REF_BODY(LOAD_F16)
#undef LOAD_F16
}
static void bf16_dot_ref(int64_t n, float *out, const void *w, const void *act) {
    const uint8_t *wp = w;
    const float *x = act;
#define LOAD_BF16(k) load_bf16(wp, k)
    DOT_REF_BODY(LOAD_BF16)
#undef LOAD_BF16
}

/* ---- the table ------------------------------------------------------------------- */

static tokd_type_traits table[] = {
    {GGML_TYPE_F32, "F32", 1, 4, GGML_TYPE_F32, f32_to_float, f32_from_float, f32_dot_ref, f32_dot_ref},
    {GGML_TYPE_F16, "F16", 1, 2, GGML_TYPE_F32, f16_to_float, f16_from_float, f16_dot_ref, f16_dot_ref},
    {GGML_TYPE_BF16, "BF16", 1, 2, GGML_TYPE_F32, bf16_to_float, bf16_from_float, bf16_dot_ref, bf16_dot_ref},
};

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
        __cpuid_count(7, 1, a, b, c, d);
        cpu.avxvnni = ymm_ok && ((a >> 4) & 1);
        cpu.avx512bf16 = zmm_ok && ((a >> 5) & 1);
    }
    cpu.fma = cpu.fma && ymm_ok;
    cpu.f16c = cpu.f16c && ymm_ok;
}

static void kernels_init_once(void) {
    detect_cpu();
    const char *force = getenv("TOKD_KERNELS");
    bool scalar_only = force && strcmp(force, "scalar") == 0;
    if (!scalar_only && cpu.avx2 && cpu.fma) kernels_path = "avx2";
    if (!scalar_only && cpu.avx512f && cpu.avx512bw && cpu.avx512vl && !(force && strcmp(force, "avx2") == 0))
        kernels_path = "avx512";
    /* SIMD selection per row goes here as SIMD variants are added. */
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

const tokd_type_traits *tokd_type_get(uint32_t id) {
    tokd_kernels_init();
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].id == id) return &table[i];
    return NULL;
}
