/* packed.c — see packed.h: the packers, activation preparation, the scalar statement of
 * the packed numerics, and the choice of packed form per weight type and CPU. */
#include "kernels/packed.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quants.h"
#include "kernels/types.h"
#include "gguf.h"
#include "util.h"

#define QK 32

static size_t q4_0_group_bytes(int64_t K) { return (size_t)(K / QK) * TOKD_PACK_ROWS * sizeof(tokd_block_q4_0); }
static size_t q8_0_group_bytes(int64_t K) { return (size_t)(K / QK) * TOKD_PACK_ROWS * sizeof(tokd_block_q8_0); }

static size_t act_bytes(int64_t K) {
    size_t nb = (size_t)(K / QK);
    return (nb * (QK + 2 * sizeof(float)) + 63) & ~(size_t)63;
}

/* Quantise x as the Q8_0 activation format does and lay it out as packed.h says, with
 * corrections -bias * (sum of the block's quants). */
void tokd_packed_prep_ref(const float *x, void *dst, int64_t K, int32_t bias) {
    const int64_t nb = K / QK;
    uint8_t *qs = dst;
    float *dy = (float *)(qs + nb * QK);
    int32_t *corr = (int32_t *)(dy + nb);
    for (int64_t b = 0; b < nb; b++) {
        tokd_block_q8_0 blk;
        tokd_q8_0_from_float(x + b * QK, &blk, QK);
        memcpy(qs + b * QK, blk.qs, QK);
        dy[b] = tokd_f16_to_f32(blk.d);
        int32_t s = 0;
        for (int i = 0; i < QK; i++) s += blk.qs[i];
        corr[b] = -bias * s;
    }
}
static void q4_0_prep(const float *x, void *dst, int64_t K) { tokd_packed_prep_avx512(x, dst, K, 8); }
static void q8_0_prep(const float *x, void *dst, int64_t K) { tokd_packed_prep_avx512(x, dst, K, 128); }

static void q4_0_pack(const void *rows, size_t row_bytes, void *dst, int64_t K) {
    const int64_t nb = K / QK;
    uint8_t *out = dst;
    for (int64_t b = 0; b < nb; b++, out += TOKD_PACK_ROWS * sizeof(tokd_block_q4_0)) {
        for (int L = 0; L < TOKD_PACK_ROWS; L++) {
            const tokd_block_q4_0 *x = (const tokd_block_q4_0 *)((const uint8_t *)rows + (size_t)L * row_bytes) + b;
            memcpy(out + 2 * L, &x->d, 2);
            for (int c = 0; c < 4; c++) memcpy(out + 32 + 64 * c + 4 * L, x->qs + 4 * c, 4);
        }
    }
}

static void q8_0_pack(const void *rows, size_t row_bytes, void *dst, int64_t K) {
    const int64_t nb = K / QK;
    uint8_t *out = dst;
    for (int64_t b = 0; b < nb; b++, out += TOKD_PACK_ROWS * sizeof(tokd_block_q8_0)) {
        for (int L = 0; L < TOKD_PACK_ROWS; L++) {
            const tokd_block_q8_0 *x = (const tokd_block_q8_0 *)((const uint8_t *)rows + (size_t)L * row_bytes) + b;
            memcpy(out + 2 * L, &x->d, 2);
            for (int g = 0; g < 8; g++)
                for (int i = 0; i < 4; i++) out[32 + 64 * g + 4 * L + i] = (uint8_t)(x->qs[4 * g + i] + 128);
        }
    }
}

/* The numerics contract of packed.h, from file-layout rows. */
static float q4_0_ref_dot(int64_t K, const void *row, const void *act) {
    const tokd_block_q4_0 *x = row;
    const tokd_block_q8_0 *y = act;
    float out = 0.0f;
    for (int64_t b = 0; b < K / QK; b++) {
        int32_t isum = 0;
        for (int j = 0; j < 16; j++) {
            isum += ((x[b].qs[j] & 0x0F) - 8) * y[b].qs[j];
            isum += ((x[b].qs[j] >> 4) - 8) * y[b].qs[j + 16];
        }
        out = fmaf(tokd_f16_to_f32(x[b].d) * tokd_f16_to_f32(y[b].d), (float)isum, out);
    }
    return out;
}
static float q8_0_ref_dot(int64_t K, const void *row, const void *act) {
    const tokd_block_q8_0 *x = row;
    const tokd_block_q8_0 *y = act;
    float out = 0.0f;
    for (int64_t b = 0; b < K / QK; b++) {
        int32_t isum = 0;
        for (int j = 0; j < QK; j++) isum += x[b].qs[j] * y[b].qs[j];
        out = fmaf(tokd_f16_to_f32(x[b].d) * tokd_f16_to_f32(y[b].d), (float)isum, out);
    }
    return out;
}

static const tokd_packed_traits PACKED[] = {
    {GGML_TYPE_Q4_0, q4_0_group_bytes, act_bytes, q4_0_prep, q4_0_pack, tokd_packed_q4_0_gemm_avx512vnni, q4_0_ref_dot},
    {GGML_TYPE_Q8_0, q8_0_group_bytes, act_bytes, q8_0_prep, q8_0_pack, tokd_packed_q8_0_gemm_avx512vnni, q8_0_ref_dot},
};

const tokd_packed_traits *tokd_packed_get_any(uint32_t type) {
    tokd_kernels_init();
    const tokd_cpu_features *c = tokd_cpu();
    if (!(c->avx512f && c->avx512bw && c->avx512vl && c->avx512vnni && c->f16c && c->fma)) return NULL;
    if (strcmp(tokd_kernels_path(), "avx512") != 0) return NULL; /* TOKD_KERNELS forced a narrower path */
    for (size_t i = 0; i < sizeof PACKED / sizeof PACKED[0]; i++)
        if (PACKED[i].id == type) return &PACKED[i];
    return NULL;
}

const tokd_packed_traits *tokd_packed_get(uint32_t type) {
    const char *e = getenv("TOKD_REPACK");
    if (e && !strcmp(e, "0")) return NULL;
    return tokd_packed_get_any(type);
}
