/* test_attention.c — attention.c: the AVX-512 path gives the scalar statement's bits
 * (tokd_attention_ref) for head sizes 32, 64 and 128, GQA groups 1..8, key counts that
 * fill and that end inside a page, scattered page tables and values spanning many
 * magnitudes. */
#include <math.h>
#include <string.h>

#include "attention.h"
#include "kernels/types.h"
#include "t.h"
#include "util.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) & 0xFFFFFF) / (float)0x1000000 - 0.5f;
}
static float f16r(float x) { return tokd_f16_to_f32(tokd_f32_to_f16(x)); }

int main(void) {
    tokd_kernels_init();
    const int32_t hds[] = {32, 64, 128, 48};
    const int32_t groups[] = {1, 3, 8};
    const int32_t n_layer = 2, bs = 16, n_head_kv = 2;
    for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++) {
        const int32_t hd = hds[hi], kv_dim = n_head_kv * hd;
        tokd_kv kv;
        tokd_err err;
        const int64_t n_blocks = 24;
        CHECK(tokd_kv_init(&kv, bs, n_blocks, n_layer, kv_dim, &err) == 0, "kv init: %s", err.msg);
        /* F16 values as the cache holds them, magnitudes from 1e-3 to 30 */
        size_t n_vals = (size_t)n_blocks * n_layer * bs * kv_dim;
        for (size_t i = 0; i < n_vals; i++) {
            kv.k[i] = f16r(frand() * (i % 97 == 0 ? 30.0f : i % 13 == 0 ? 0.001f : 3.0f));
            kv.v[i] = f16r(frand() * (i % 89 == 0 ? 20.0f : 1.0f));
        }
        int32_t blocks[24];
        for (int i = 0; i < 24; i++) blocks[i] = (i * 7 + 5) % 24; /* scattered pages */
        for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++) {
            const int32_t group = groups[gi];
            float q[8 * 128], out[8 * 128], ref[8 * 128];
            float *scratch = tokd_aligned_alloc(sizeof(float) * (size_t)group * 400);
            int bad = 0, cases = 0;
            const int32_t ns[] = {1, 2, 15, 16, 17, 100, 255, 256, 384};
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                for (int32_t kvh = 0; kvh < n_head_kv; kvh++)
                    for (int32_t layer = 0; layer < n_layer; layer++) {
                        for (int32_t i = 0; i < group * hd; i++) q[i] = frand() * (ni % 2 ? 8.0f : 1.0f);
                        tokd_attention(&kv, blocks, layer, kvh, ns[ni], q, group, hd, out, scratch);
                        tokd_attention_ref(&kv, blocks, layer, kvh, ns[ni], q, group, hd, ref, scratch);
                        bad += memcmp(out, ref, sizeof(float) * (size_t)group * hd) != 0;
                        cases++;
                    }
            CHECK(bad == 0, "hd %d group %d: %d of %d cases differ from the scalar statement", hd, group, bad, cases);
            /* the statement against a plain double-precision softmax attention */
            double worst = 0.0;
            for (int32_t g = 0; g < group; g++) {
                const int32_t n = 100;
                double s[100], mx = -1e300, sum = 0.0;
                for (int32_t t = 0; t < n; t++) {
                    const float *k = tokd_kv_k_at(&kv, blocks[t / bs], 1) + (size_t)(t % bs) * kv_dim + hd;
                    double d = 0.0;
                    for (int32_t i = 0; i < hd; i++) d += (double)k[i] * f16r(q[g * hd + i]);
                    s[t] = d / sqrt((double)hd);
                    if (s[t] > mx) mx = s[t];
                }
                for (int32_t t = 0; t < n; t++) sum += (s[t] = exp(s[t] - mx));
                tokd_attention_ref(&kv, blocks, 1, 1, n, q, group, hd, ref, scratch);
                for (int32_t i = 0; i < hd; i++) {
                    double o = 0.0, mag = 0.0;
                    for (int32_t t = 0; t < n; t++) {
                        const float *v = tokd_kv_v_at(&kv, blocks[t / bs], 1) + (size_t)(t % bs) * kv_dim + hd;
                        o += s[t] / sum * v[i];
                        mag += s[t] / sum * fabs(v[i]);
                    }
                    double e = fabs(ref[g * hd + i] - o) / (mag + 1e-6);
                    if (e > worst) worst = e;
                }
            }
            CHECK(worst < 2e-3, "hd %d group %d: attention %.2g from the exact value (F16 probabilities)", hd, group, worst);
            free(scratch);
        }
        tokd_kv_free(&kv);
    }
    T_DONE();
}
